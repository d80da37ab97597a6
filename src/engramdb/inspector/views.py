"""The inspector's pages: what an engine holds, read and drawn (never written).

``overview`` shows the database's counts and the scopes active lately (from the newest events
of the log), ``scope_page`` one scope's memories per namespace, a recall with each hit's score
parts, its graph as a picture, its context-assembly traces and its events; ``event_log`` pages
through the whole log.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from engramdb.core.events import EventEnvelope
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import LEVELS, Scope, ScopeFilter
from engramdb.core.types import utc_now
from engramdb.engine import Engine
from engramdb.inspector.graph_svg import graph_svg
from engramdb.inspector.html import (
    esc,
    excerpt,
    page,
    scope_link,
    scope_query,
    score_bars,
    section,
    set_levels,
    table,
)
from engramdb.orchestrator.redaction import RedactionPolicy
from engramdb.orchestrator.trace import last_traces
from engramdb.providers.graph import GRAPH_LEVELS
from engramdb.providers.graph.store import (
    ENTITY_NAMESPACE,
    RELATION_NAMESPACE,
    entity_from_record,
    is_entity_value,
    relation_from_record,
)
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import Record, RecordQuery

#: How many of the newest events the overview reads to find the active scopes.
RECENT_EVENTS = 5000
#: Records shown per namespace, entities per graph, events per page.
SHOWN_RECORDS = 20
SHOWN_ENTITIES = 60
EVENTS_PER_PAGE = 100


def _when(moment: datetime | None) -> str:
    return "" if moment is None else esc(moment.strftime("%Y-%m-%d %H:%M:%S"))


def _shown(value: object, names: Mapping[str, str] | None = None) -> str:
    """What a stored value says, for people: its text, an entity's name, a relation's
    triple (by the entities' ``names`` where known), else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        if "relation_type" in value:
            ends = [str(value.get(end)) for end in ("source_id", "target_id")]
            source, target = ((names or {}).get(end, end) for end in ends)
            return f"{source} → {value['relation_type']} → {target}"
        if "entity_type" in value and "name" in value:
            return f"{value['name']} ({value['entity_type']})"
    return json.dumps(value, ensure_ascii=False, default=str)


def _event_rows(
    events: list[EventEnvelope], policy: RedactionPolicy, *, with_scope: bool
) -> list[list[str]]:
    rows = []
    for event in events:
        shown, _ = policy.redact_value(event.payload)
        payload = json.dumps(shown, ensure_ascii=False, default=str)
        row = [str(event.position or ""), _when(event.occurred_at), esc(event.event_type)]
        if with_scope:
            row.append(scope_link(event.scope))
        row += [esc(event.provider_id), f"<code>{excerpt(payload, 200)}</code>"]
        rows.append(row)
    return rows


async def overview(engine: Engine) -> str:
    """The overview page."""
    stats = await engine.stats()
    vectors = await engine.vector_counts()
    counts = table(
        ["namespace", "records"],
        [[esc(ns), str(n)] for ns, n in sorted(stats.records_by_namespace.items())],
        numeric=[1],
    )
    size = f"{stats.size_bytes / 1e6:.1f} MB" if stats.size_bytes is not None else "unknown"
    summary = (
        f"<p>{esc(stats.url)} · {stats.records} records · {stats.events} events · {esc(size)}"
        f" · vectors: {esc(', '.join(f'{n} of {m}' for m, n in vectors.items()) or 'none')}</p>"
    )
    recent = await engine.events.read(EventQuery(newest_first=True, limit=RECENT_EVENTS))
    activity: Counter[Scope] = Counter(event.scope for event in recent)
    last_seen: dict[Scope, datetime] = {}
    for event in recent:
        last_seen.setdefault(event.scope, event.occurred_at)
    scopes = table(
        ["scope", f"events (of the newest {len(recent)})", "last activity"],
        [[scope_link(s), str(n), _when(last_seen[s])] for s, n in activity.most_common(100)],
        numeric=[1],
    )
    opener = (
        "<form action='/scope'>"
        + "".join(f"<input name={level} placeholder={level}>" for level in LEVELS)
        + "<button>open</button></form>"
    )
    return page(
        "Overview",
        section("Database", summary + counts)
        + section("Scopes active lately", scopes)
        + section("Open a scope", opener)
        + section(
            "Newest events",
            table(
                ["#", "time", "type", "scope", "provider", "payload"],
                _event_rows(recent[:20], engine.config.redaction, with_scope=True),
            ),
        ),
    )


def _hits_table(hits: list[MemoryItem]) -> str:
    return table(
        ["#", "score", "parts", "text"],
        [
            [str(i), f"{hit.score or 0.0:.3f}", score_bars(hit.score_breakdown), excerpt(hit.text)]
            for i, hit in enumerate(hits, 1)
        ],
        numeric=[0, 1],
    )


async def _recall(engine: Engine, scope: Scope, query: str) -> str:
    memory = engine.scope(**set_levels(scope))
    # Every registered type this engine offers (working memory is the plan's state, shown
    # with the records).
    found = [
        section(f"Recall: {kind.name}", _hits_table(await plugin.remember(query, limit=10)))
        for kind in engine.memory_types
        if kind.name != "working" and (plugin := memory.offered(kind.name)) is not None
    ]
    return "".join(found)


async def _records(engine: Engine, scope: Scope) -> str:
    cards = []
    for namespace, levels in engine.stored_namespaces:
        partition = scope.narrow(levels)
        total = await engine.backend.count(RecordQuery(namespace, partition))
        if not total:
            continue
        shown = await engine.backend.scan(
            RecordQuery(
                namespace,
                partition,
                limit=SHOWN_RECORDS,
                offset=max(0, total - SHOWN_RECORDS),
            )
        )
        where = "" if partition == scope else " (from " + scope_link(partition) + ")"
        names = (
            await _entity_names(engine, partition, shown) if namespace == RELATION_NAMESPACE else {}
        )
        rows = [
            [
                esc(r.key),
                f"<span class=chip>{esc(r.content_type)}</span>",
                _when(r.created_at),
                excerpt(engine.config.redaction.redact(_shown(r.value, names)).text),
            ]
            for r in shown
        ]
        cards.append(
            f"<section><h2>{esc(namespace)} · {total} records{where}</h2>"
            + table(["key", "type", "created", "text"], rows)
            + "</section>"
        )
    return "".join(cards) or section("Memories", "<p class=muted>nothing stored here</p>")


async def _entity_names(
    engine: Engine, partition: Scope, relations: list[Record]
) -> dict[str, str]:
    """The names of the entities at either end of ``relations``."""
    ids = {
        str(r.value.get(end))
        for r in relations
        if isinstance(r.value, dict)
        for end in ("source_id", "target_id")
    }
    entities = await engine.backend.scan(
        RecordQuery(ENTITY_NAMESPACE, partition, keys=tuple(sorted(ids)))
    )
    return {r.key: str(r.value["name"]) for r in entities if is_entity_value(r.value)}


async def _graph(engine: Engine, scope: Scope) -> str:
    partition = scope.narrow(GRAPH_LEVELS)
    records = await engine.backend.scan(
        RecordQuery(ENTITY_NAMESPACE, partition, limit=SHOWN_ENTITIES)
    )
    entities = [entity_from_record(r) for r in records if is_entity_value(r.value)]
    if not entities:
        return ""
    now = utc_now()
    relations = [
        relation
        for relation in map(
            relation_from_record,
            await engine.backend.scan(RecordQuery(RELATION_NAMESPACE, partition)),
        )
        if relation.expired_at is None
        and (relation.invalid_at is None or relation.invalid_at > now)
    ]
    return section(
        f"Graph ({len(entities)} entities shown, relations that hold now)",
        graph_svg(entities, relations),
    )


async def _traces(engine: Engine, scope: Scope) -> str:
    traces = await last_traces(engine.events, scope, 5)
    if not traces:
        return ""
    blocks = []
    for trace in traces:
        rows = [
            [
                esc(op.memory_type),
                esc(op.status),
                f"{op.ms:.1f}",
                str(op.items_used),
                str(op.tokens_used),
            ]
            for op in trace.operations
        ]
        blocks.append(
            f"<p><b>{excerpt(trace.prompt, 160)}</b> <span class=muted>{trace.tokens_used} of "
            f"{trace.token_limit} tokens, {trace.items_used} items, {trace.ms:.1f} ms</span></p>"
            + table(["memory", "status", "ms", "items", "tokens"], rows, numeric=[2, 3, 4])
        )
    return section("Context assemblies (newest first)", "".join(blocks))


async def scope_page(engine: Engine, scope: Scope, query: str) -> str:
    """One scope's page; with ``query``, a recall of every memory type first."""
    form = (
        "<form action='/scope'>"
        + "".join(
            f"<input type=hidden name={level} value='{esc(value)}'>"
            for level, value in set_levels(scope).items()
        )
        + f"<input name=q size=60 placeholder='recall…' value='{esc(query)}'>"
        "<button>recall</button></form>"
    )
    events = await engine.events.read(
        EventQuery(scope=ScopeFilter(scope, LEVELS), newest_first=True, limit=50)
    )
    body = (
        section("Recall", form)
        + (await _recall(engine, scope, query) if query else "")
        + await _records(engine, scope)
        + await _graph(engine, scope)
        + await _traces(engine, scope)
        + section(
            "Events of this scope (newest first)",
            table(
                ["#", "time", "type", "provider", "payload"],
                _event_rows(events, engine.config.redaction, with_scope=False),
            ),
        )
    )
    return page(f"Scope {scope_query(scope).replace('&', ' · ')}", body)


async def event_log(engine: Engine, after: int) -> str:
    """The event log from position ``after`` on, one page."""
    events = await engine.events.read(EventQuery(after=after, limit=EVENTS_PER_PAGE))
    more = ""
    if len(events) == EVENTS_PER_PAGE and events[-1].position is not None:
        more = f"<p><a href='/events?after={events[-1].position}'>next page →</a></p>"
    rows = _event_rows(events, engine.config.redaction, with_scope=True)
    return page(
        f"Event log after #{after}",
        section(
            "Events", table(["#", "time", "type", "scope", "provider", "payload"], rows) + more
        ),
    )
