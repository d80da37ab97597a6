"""``ingest``: messages become episodes, then facts, profile items, events and a graph.

1. Each message is stored as an episode (``mem.episodic``) under its turn id: the message's
   ``id``, else ``<session_id>:<n>`` (its place in that session of the input), else a digest
   of its time, role and text.
2. The turns, in time order, go to the ``Extractor`` (the rules by default).
3. Each item is consolidated into semantic memory (``Consolidator``); items that change what
   holds (added, updated, ended) update graph memory too: the user's entity, the entities the
   item names and its relations, each naming the episodes it came from as
   ``episodic:<turn id>``.

The ``IngestReport`` counts the outcomes per category, and, when nothing was extracted, says
why. A message without a ``timestamp`` follows the one before it by a millisecond (the list's
order is the conversation's); the first such one is the current time.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import Field

from engramdb.core.errors import ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.core.model import EngramModel
from engramdb.core.types import utc_now
from engramdb.formation.consolidate import FORMED_BEFORE, Consolidator, Outcome
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import CATEGORIES, ExtractedItem, Extractor, RelationRef, Turn
from engramdb.providers.graph.changes import starts
from engramdb.providers.graph.types import GraphEntity, GraphRelation

if TYPE_CHECKING:
    from engramdb.orchestrator.episodic import EpisodicMemory
    from engramdb.orchestrator.semantic import SemanticMemory
    from engramdb.providers.graph.provider import GraphMemoryProvider

#: ``progress(phase, amount)`` as work is done; ``totals(phase, total)`` as a phase starts.
Progress = Callable[[str, int], None]
_BATCH = 64
_TICK = timedelta(milliseconds=1)


class IngestMessage(EngramModel):
    """One message to ingest: ``{"role", "content"}``, optionally timed and placed."""

    role: str = Field(min_length=1, max_length=64)
    content: str = Field(min_length=1, max_length=1_000_000)
    timestamp: datetime | None = None
    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    id: str | None = Field(default=None, min_length=1, max_length=512)
    speaker: str | None = Field(default=None, max_length=256)
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass
class CategoryCounts:
    """Outcomes of one category's items."""

    added: int = 0
    updated: int = 0
    superseded: int = 0
    unchanged: int = 0
    ended: int = 0
    contradicted: int = 0


@dataclass
class IngestReport:
    """What ``ingest`` did.

    Attributes:
        turns: messages read; ``episodes``: stored as episodes.
        extractor: which extractor read them.
        categories: outcome counts per category (``profile``, ``event``, ``activity``, ``mind``); an
            update or an end also counts the old version as ``superseded``.
        outcomes: every item with its decision, key and source turns.
        entities / relations: graph writes.
        notes: why nothing was extracted, why a chat model's extraction fell back to the
            rules, and anything else worth saying.
        theory_of_mind: what the extractor gives of the user's goals, beliefs, preferences
            and intentions (stated only, without a model; inferred too, with one).
    """

    turns: int = 0
    episodes: int = 0
    extractor: str = ""
    categories: dict[str, CategoryCounts] = field(
        default_factory=lambda: {c: CategoryCounts() for c in CATEGORIES}
    )
    outcomes: list[Outcome] = field(default_factory=list)
    entities: int = 0
    relations: int = 0
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    theory_of_mind: str = ""

    @property
    def extracted(self) -> int:
        """How many items were extracted."""
        return len(self.outcomes)

    def count(self, outcome: Outcome) -> None:
        """Count ``outcome`` in its category."""
        counts = self.categories[outcome.item.category]
        setattr(counts, outcome.decision, getattr(counts, outcome.decision) + 1)
        if outcome.decision in ("updated", "ended"):
            counts.superseded += 1
        self.outcomes.append(outcome)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "turns": self.turns,
            "episodes": self.episodes,
            "extractor": self.extractor,
            "extracted": self.extracted,
            "categories": {name: vars(counts) for name, counts in self.categories.items()},
            "entities": self.entities,
            "relations": self.relations,
            "notes": self.notes,
            "theory_of_mind": self.theory_of_mind,
            "seconds": round(self.seconds, 3),
            "items": [
                {
                    "category": o.item.category,
                    "decision": o.decision,
                    "key": o.key,
                    "value": o.item.value,
                    "text": o.item.text,
                    "previous": o.previous,
                    "sources": list(o.item.sources),
                    "rule": o.item.pattern,
                    **(
                        {"inferred": True, "confidence": o.item.confidence}
                        if o.item.inferred
                        else {}
                    ),
                    **({"note": o.note} if o.note else {}),
                }
                for o in self.outcomes
            ],
        }


def to_turns(
    messages: Sequence[IngestMessage | Mapping[str, Any]], now: datetime
) -> list[tuple[Turn, IngestMessage]]:
    """The turns of ``messages`` with each message, in time order (see the module docstring
    for ids and times).

    Raises:
        ValidationError: a message is malformed, or two share a turn id.
    """
    if isinstance(messages, str | bytes | Mapping):
        raise ValidationError("ingest takes a list of messages")
    parsed = []
    for n, raw in enumerate(messages):
        try:
            parsed.append(
                raw if isinstance(raw, IngestMessage) else IngestMessage.model_validate(raw)
            )
        except ValidationError as exc:
            raise ValidationError(f"message {n}: {exc.message}", index=n) from exc
    turns, seen, per_session = [], set(), Counter[str]()
    moment = now
    for message in parsed:
        stamp = message.timestamp
        if stamp is not None and stamp.utcoffset() is None:
            raise ValidationError("message timestamps must be timezone-aware", id=message.id)
        moment = stamp if stamp is not None else moment + _TICK
        turn_id = message.id or _turn_id(message, moment, per_session)
        if turn_id in seen:
            raise ValidationError(f"two messages have the turn id {turn_id!r}", id=turn_id)
        seen.add(turn_id)
        turn = Turn(turn_id, message.role, message.content, moment, message.session_id)
        turns.append((turn, message))
    order = sorted(range(len(turns)), key=lambda i: (turns[i][0].occurred_at, i))
    return [turns[i] for i in order]


def _turn_id(message: IngestMessage, moment: datetime, per_session: Counter[str]) -> str:
    if message.session_id is not None:
        n = per_session[message.session_id]
        per_session[message.session_id] += 1
        return f"{message.session_id}:{n}"
    text = f"{moment.isoformat()}\x00{message.role}\x00{message.content}"
    return f"turn-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


async def ingest(
    episodic: EpisodicMemory,
    semantic: SemanticMemory,
    graph: GraphMemoryProvider,
    messages: Sequence[IngestMessage | Mapping[str, Any]],
    *,
    subject: str,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
    totals: Progress | None = None,
) -> IngestReport:
    """Store, extract and consolidate ``messages`` (see the module docstring)."""
    started = time.perf_counter()
    pairs = to_turns(messages, utc_now())
    turns = [turn for turn, _ in pairs]
    chosen = extractor or RuleExtractor()
    report = IngestReport(turns=len(turns), extractor=chosen.name)

    def step(phase: str, amount: int) -> None:
        if progress is not None:
            progress(phase, amount)

    if totals is not None:
        totals("store", len(turns))
    for start in range(0, len(pairs), _BATCH):
        batch = pairs[start : start + _BATCH]
        stored = await episodic.memorize_many([_episode(t, m) for t, m in batch])
        report.episodes += len(stored)
        step("store", len(batch))
    await form(
        semantic, graph, turns, report, subject=subject, extractor=chosen, step=step, totals=totals
    )
    report.seconds = time.perf_counter() - started
    return report


async def form(
    semantic: SemanticMemory,
    graph: GraphMemoryProvider,
    turns: Sequence[Turn],
    report: IngestReport,
    *,
    subject: str,
    extractor: Extractor,
    step: Progress | None = None,
    totals: Progress | None = None,
) -> None:
    """Extract from ``turns`` (already stored as episodes, in time order) and consolidate what
    they state into semantic and graph memory, counting the outcomes in ``report``. Forming
    the same turns again changes nothing: each item is then ``unchanged``."""
    by_id = {t.turn_id: t for t in turns}
    if totals is not None:
        totals("extract", len(turns))
    extraction = await extractor.extract(turns, subject=subject)
    if step is not None:
        step("extract", len(turns))
    report.notes += extraction.notes
    report.extractor = extraction.extractor or extractor.name
    report.theory_of_mind = extraction.mind
    consolidator = Consolidator(semantic)
    if totals is not None:
        totals("form", len(extraction.items))
    for item in extraction.items:
        unknown = [s for s in item.sources if s not in by_id]
        if not item.sources or unknown:
            raise ValidationError(
                f"the extractor named turns that were not given: {unknown or 'none'}",
                key=item.key,
            )
        outcome = await consolidator.consolidate(item)
        report.count(outcome)
        # A fact formed before from these very turns may have lost its graph part to a
        # crash in between: writing it again leaves an identical graph as it is.
        changed = outcome.decision in ("added", "updated", "ended")
        if outcome.note == FORMED_BEFORE and item.relations:
            changed = not await _in_graph(graph, subject, item)
        if changed and item.relations:
            entities, relations = await _graph(graph, subject, outcome)
            report.entities += entities
            report.relations += relations
        if step is not None:
            step("form", 1)
    if extraction.items and not any(o.decision != "unchanged" for o in report.outcomes):
        report.notes.append("everything extracted was already known: nothing changed")


def _episode(turn: Turn, message: IngestMessage) -> MemoryItem:
    metadata: dict[str, Any] = {**message.metadata}
    if turn.session_id is not None:
        metadata.setdefault("session_id", turn.session_id)
    return MemoryItem(
        id=turn.turn_id,
        text=turn.text,
        role=turn.role,
        speaker=message.speaker or turn.role,
        occurred_at=turn.occurred_at,
        metadata=metadata,
    )


async def _graph(graph: GraphMemoryProvider, subject: str, outcome: Outcome) -> tuple[int, int]:
    """Write ``outcome``'s entities and relations (or end them); returns how many of each."""
    item = outcome.item
    sources = [f"episodic:{s}" for s in item.sources]
    entities = [GraphEntity(name=subject, entity_type="person", sources=sources)]
    entities += [
        GraphEntity(name=e.name, entity_type=e.entity_type, sources=sources) for e in item.entities
    ]
    stored = await graph.add_entities(entities)
    ids = {(e.name, e.entity_type): entry.key for e, entry in zip(entities, stored, strict=True)}
    me = stored[0].key

    def end_id(ref: Any) -> str:
        return me if ref is None else ids[(ref.name, ref.entity_type)]

    if item.operation == "end":
        ended = 0
        for ref in item.relations:
            for held in await graph.get_relations(
                end_id(ref.source), "outgoing", ref.relation_type, as_of=item.stated_at
            ):
                # A relation that begins at the end's moment is not ended by it.
                if held.target_id == end_id(ref.target) and starts(held) < item.stated_at:
                    await graph.invalidate_relation(held.relation_id, at=item.stated_at)
                    ended += 1
        return len(stored), ended
    relations = [
        _relation(ref, end_id, item.stated_at, sources, item.key) for ref in item.relations
    ]
    await graph.add_relations(relations)
    return len(stored), len(relations)


async def _in_graph(graph: GraphMemoryProvider, subject: str, item: ExtractedItem) -> bool:
    """Whether the graph holds ``item``'s entities and relations (as of its statement)."""
    me = await graph.find_entity(subject, "person")
    ids = {}
    for ref in item.entities:
        found = await graph.find_entity(ref.name, ref.entity_type)
        if found is None or me is None:
            return False
        ids[(ref.name, ref.entity_type)] = found.entity_id
    assert me is not None
    for rel in item.relations:
        source = me.entity_id if rel.source is None else ids.get(_ref(rel.source))
        target = me.entity_id if rel.target is None else ids.get(_ref(rel.target))
        if source is None or target is None:
            return False
        held = await graph.get_relations(
            source, "outgoing", rel.relation_type, as_of=item.stated_at
        )
        if target not in {r.target_id for r in held}:
            return False
    return True


def _ref(ref: Any) -> tuple[str, str]:
    return (ref.name, ref.entity_type)


def _relation(
    ref: RelationRef, end_id: Callable[[Any], str], at: datetime, sources: list[str], key: str
) -> GraphRelation:
    return GraphRelation(
        source_id=end_id(ref.source),
        target_id=end_id(ref.target),
        relation_type=ref.relation_type,
        valid_at=at,
        sources=sources,
        properties={"key": key},
    )
