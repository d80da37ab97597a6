"""HTML building blocks of the inspector (pure): the page shell, tables, score bars, links.

Everything a memory holds is user text, so every value goes through :func:`esc`; markup is
only ever made here, from escaped pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from urllib.parse import urlencode

from engramdb.core.scope import Scope

#: Colours of the score parts a hit carries (``score_breakdown``).
PART_COLOURS = {
    "bm25": "#4c78a8",
    "vector": "#f58518",
    "fused": "#54a24b",
    "time": "#b279a2",
    "recency": "#9d755d",
    "importance": "#e45756",
    "session": "#72b7b2",
    "rerank": "#eeca3b",
}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header b{font-size:16px}
main{padding:16px 24px;max-width:1200px}
section{background:#fff;border:1px solid #e1e4ea;border-radius:6px;margin:0 0 16px;
padding:12px 16px}
h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{font-weight:600;color:#5b6475}td.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#7a8394}.bar{display:inline-block;height:9px;margin-right:1px;vertical-align:middle}
.chip{display:inline-block;padding:0 6px;border-radius:8px;background:#eef0f3;font-size:12px}
form{display:flex;gap:8px;flex-wrap:wrap;align-items:center}input{padding:4px 6px}
code{font-size:12px}svg text{font:11px system-ui,sans-serif}td a{white-space:nowrap}
"""


def esc(value: object) -> str:
    """``value`` as text safe inside HTML (and inside attribute values)."""
    return escape("" if value is None else str(value), quote=True)


def page(title: str, body: str) -> str:
    """A whole HTML page: the navigation bar, then ``body`` (already markup)."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)} · Engram inspector</title><style>{_STYLE}</style></head><body>"
        "<header><b>Engram inspector</b><a href='/'>overview</a><a href='/events'>event log</a>"
        f"</header><main><h1 style='font-size:18px'>{esc(title)}</h1>{body}</main></body></html>"
    )


def section(title: str, body: str) -> str:
    """A titled card."""
    return f"<section><h2>{esc(title)}</h2>{body}</section>"


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = ()
) -> str:
    """A table of already-escaped cells; columns in ``numeric`` are right-aligned."""
    right = set(numeric)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class=num>{cell}</td>" if i in right else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    if not body:
        return "<p class=muted>nothing here</p>"
    return f"<table><tr>{head}</tr>{body}</table>"


def set_levels(scope: Scope) -> dict[str, str]:
    """The levels ``scope`` sets, tenant first."""
    return {level: str(value) for level, value in scope.model_dump(exclude_none=True).items()}


def scope_query(scope: Scope, **extra: str) -> str:
    """The query string that names ``scope`` (and ``extra`` parameters)."""
    params = set_levels(scope)
    params.update((name, value) for name, value in extra.items() if value)
    return urlencode(params)


def scope_link(scope: Scope) -> str:
    """A link to the scope's page, labelled by its levels."""
    label = " / ".join(f"{level} {value}" for level, value in set_levels(scope).items())
    return f"<a href='/scope?{esc(scope_query(scope))}'>{esc(label)}</a>"


def score_bars(parts: Mapping[str, float], width: int = 160) -> str:
    """The parts of a hit's score as a stacked bar, each part's share of ``width`` pixels
    by its value (BM25 saturated as the fusion does, so it fits the same scale)."""
    shown = []
    for name, value in parts.items():
        if name not in PART_COLOURS:
            continue
        scaled = value / (value + 20.0) if name == "bm25" else value
        pixels = max(0, min(width, round(scaled * width / 2)))
        shown.append(
            f"<span class=bar title='{esc(name)} {value:.3f}' "
            f"style='width:{pixels}px;background:{PART_COLOURS[name]}'></span>"
        )
    legend = " ".join(
        f"<span class=muted>{esc(name)} {value:.2f}</span>"
        for name, value in parts.items()
        if name in PART_COLOURS
    )
    return "".join(shown) + " " + legend


def excerpt(text: str, limit: int = 240) -> str:
    """``text`` cut to ``limit`` characters, escaped."""
    return esc(text if len(text) <= limit else text[: limit - 1] + "…")
