"""The markdown form of a memory category: one file, one block per memory (pure functions).

A file reads::

    # profile

    ## user.city
    <!-- engram {"created_at": "2026-05-01T09:30:00+00:00", "metadata": {"source": "chat"}} -->

    Lisbon

Each block is a ``## `` heading holding the memory's key, an optional ``<!-- engram {...} -->``
line of JSON (times, TTL and the caller's metadata: what a person rarely edits, hidden when the
markdown is rendered), then the value. A text value is written as it is; an item (a mapping
with a ``text``) as its text, the other fields going to the engram line; anything else as a
fenced ``json`` block. A text that could not be read back unchanged (a line starting with
``## ``, surrounding blank lines, carriage returns) is written as JSON too, so
``parse(render(blocks)) == blocks`` always holds.

A person adds a memory by writing ``## some.key`` and its text; the engram line is optional.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engramdb.core.errors import MemoryFileError

HEADING = "## "
META_START = "<!-- engram "
META_END = " -->"
FENCE_START = "```json"
FENCE_END = "```"
#: The engram-line fields a block carries besides its value and metadata.
TIMES = ("created_at", "updated_at", "occurred_at", "expires_at")


@dataclass(frozen=True)
class Block:
    """One memory as a file holds it. ``info`` holds the engram line's times and ``ttl_ms``."""

    key: str
    value: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def _meta_line(data: dict[str, Any]) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(", ", ": "))
    # ">" only occurs inside JSON strings, where its escape reads back the same: no value can
    # close the HTML comment early.
    return META_START + text.replace(">", "\\u003e") + META_END


def _plain(text: str) -> bool:
    """Whether ``text`` reads back unchanged when written as a block's body."""
    if not text or text != text.strip("\n") or "\r" in text or text.startswith(FENCE_START):
        return False
    return not any(
        line.startswith(HEADING) or line.startswith(META_START) for line in text.split("\n")
    )


def _json_body(value: Any) -> str:
    return f"{FENCE_START}\n{json.dumps(value, ensure_ascii=False, indent=2)}\n{FENCE_END}"


def render_block(block: Block) -> str:
    """One block as markdown, ending with a blank line."""
    meta = {name: block.info[name] for name in (*TIMES, "ttl_ms") if block.info.get(name)}
    if block.metadata:
        meta["metadata"] = block.metadata
    value = block.value
    if isinstance(value, str) and _plain(value):
        body = value
    elif isinstance(value, dict) and isinstance(value.get("text"), str) and _plain(value["text"]):
        body = value["text"]
        meta["fields"] = {k: v for k, v in value.items() if k != "text"}
    else:
        body = _json_body(value)
    lines = [HEADING + block.key]
    if meta:
        lines.append(_meta_line(meta))
    return "\n".join([*lines, "", body, "", ""])


def render_file(category: str, blocks: list[Block]) -> str:
    """The whole file of ``category``: a title, then every block in the order given."""
    return f"# {category}\n\n" + "".join(render_block(b) for b in blocks)


def _body_value(body: str, meta: dict[str, Any], where: dict[str, Any]) -> Any:
    if body.startswith(FENCE_START + "\n") and body.endswith("\n" + FENCE_END):
        try:
            return json.loads(body[len(FENCE_START) + 1 : -len(FENCE_END) - 1])
        except json.JSONDecodeError as exc:
            raise MemoryFileError(f"a json block does not parse: {exc.msg}", **where) from exc
    fields = meta.get("fields")
    if isinstance(fields, dict):
        return {"text": body, **fields}
    return body


def _meta(line: str, where: dict[str, Any]) -> dict[str, Any]:
    closing = META_END.strip()
    if not line.endswith(closing):
        raise MemoryFileError("the engram line is not closed by -->", **where)
    try:
        meta = json.loads(line[len(META_START) : -len(closing)])
    except json.JSONDecodeError as exc:
        raise MemoryFileError(f"the engram line does not parse: {exc.msg}", **where) from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("metadata", {}), dict):
        raise MemoryFileError("the engram line must be a JSON object", **where)
    return meta


def parse_file(text: str, path: str = "") -> list[Block]:
    """The blocks of a memory file, in file order.

    Raises:
        MemoryFileError: a block's engram line or JSON body does not parse, or a key repeats.
    """
    lines = text.split("\n")
    starts = [n for n, line in enumerate(lines) if line.startswith(HEADING)]
    blocks: list[Block] = []
    seen: set[str] = set()
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=False):
        key = lines[start][len(HEADING) :].strip()
        where = {"path": path, "line": start + 1, "key": key}
        if not key:
            raise MemoryFileError("a block heading has no key", **where)
        if key in seen:
            raise MemoryFileError(f"key {key!r} appears twice", **where)
        seen.add(key)
        body_lines = lines[start + 1 : end]
        meta: dict[str, Any] = {}
        if body_lines and body_lines[0].startswith(META_START):
            meta = _meta(body_lines[0].rstrip(), where)
            body_lines = body_lines[1:]
        body = "\n".join(body_lines).strip("\n")
        info = {name: meta[name] for name in (*TIMES, "ttl_ms") if name in meta}
        blocks.append(
            Block(key, _body_value(body, meta, where), dict(meta.get("metadata", {})), info)
        )
    return blocks
