"""``Consolidator``: an extracted item against what semantic memory holds.

| the store holds under the item's key (or a similar one) | a ``set`` item | an ``end`` item |
|---|---|---|
| nothing | ``added`` | ``added``, as a fact that ended then |
| the same value, still holding | ``unchanged`` (nothing written) | ``ended``: a new version |
| | | whose ``valid_to`` is the turn's time |
| another value, stated earlier | ``updated``: version n+1 from the turn's time; the old | |
| | one is history, valid until then (``superseded``) | ``unchanged`` (not that one) |
| another value, stated at the same time | ``contradicted``: both kept, each marked | |
| | ``conflicts_with`` the other | |
| another value, stated later | ``superseded``: kept as a past fact, valid until the | |
| | stored one began (``unchanged`` when the history holds it) | |

Keys are the match for profile facts (``user.city``); events and activities, whose keys are
made from their words, also match a stored key of the same prefix sharing most of its words
("learning portuguese" and "learning portuguese again"). Every written version carries the
item's value, category, rule and source turns in its metadata, and its validity.

An inferred item (theory of mind) is written with ``inferred: true``, its ``confidence`` and
``standing: inferred``; it never replaces a stated one: against a stated fact under its key it
is ``unchanged``, whatever its value.

Each write goes only over the stored version the decision read (or only where nothing is
stored): if another writer — a second formation of the same turns, by another engine — wrote
the key in between, the write fails in its transaction and the item is decided again on what
is now stored, where the same turns' fact is found already formed (``unchanged``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from engramdb.core.errors import ConflictError, NotFoundError
from engramdb.core.intent import MemoryItem
from engramdb.core.types import utc_now
from engramdb.formation.types import ExtractedItem
from engramdb.orchestrator.plugin import record_item
from engramdb.orchestrator.semantic import SemanticMemory
from engramdb.storage.records import Record

Decision = Literal["added", "updated", "unchanged", "ended", "contradicted", "superseded"]
#: The note of an item stored before from the same turns (a formation run again).
FORMED_BEFORE = "already formed from these turns"
#: How much of their words two event or activity keys share to be the same one.
SIMILAR_KEYS = 0.75
#: How often an item is decided again after another writer changed its key in between.
_ATTEMPTS = 3


@dataclass(frozen=True)
class Outcome:
    """What consolidation did with one item.

    Attributes:
        item: the extracted item.
        decision: see the module docstring.
        key: the semantic key written (or matched, when nothing was written).
        previous: the value the decision replaced, ended or contradicted, if any.
        note: why, when nothing was written.
    """

    item: ExtractedItem
    decision: Decision
    key: str
    previous: str | None = None
    note: str = ""


class Consolidator:
    """Consolidates extracted items into one scope's semantic memory."""

    def __init__(self, semantic: SemanticMemory) -> None:
        self.semantic = semantic

    async def consolidate(self, item: ExtractedItem) -> Outcome:
        """Apply ``item`` (see the module docstring); returns what was done."""
        for attempt in range(_ATTEMPTS):
            try:
                return await self._decide(item)
            except (ConflictError, NotFoundError):
                # Another writer changed the key after it was read: decide on what it wrote.
                if attempt == _ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    async def _decide(self, item: ExtractedItem) -> Outcome:
        key = await self._match(item)
        record, over = await self._read(key)
        if record is None:
            ends = item.stated_at if item.operation == "end" else None
            await self._write(
                item,
                key,
                over,
                valid_from=None if ends else item.stated_at,
                ends=ends,
            )
            return Outcome(item, "added", key)
        stored = record_item(record)
        value = str(stored.metadata.get("value", stored.text))
        if item.inferred and stored.metadata.get("standing", "stated") == "stated":
            return Outcome(
                item, "unchanged", key, value, "an inference never replaces a stated fact"
            )
        same = _norm(value) == _norm(item.value)
        began = stored.valid_from or stored.occurred_at
        if item.operation == "end":
            if not same or stored.valid_to is not None:
                why = "it had already ended" if same else f"the stored value is {value!r}"
                return Outcome(item, "unchanged", key, value, f"nothing to end: {why}")
            if began is not None and item.stated_at <= began:
                why = "it was stated as holding from then on"
                return Outcome(item, "unchanged", key, value, f"nothing to end: {why}")
            await self._restate(
                stored, key, record.version, valid_to=item.stated_at, ended_by=list(item.sources)
            )
            return Outcome(item, "ended", key, value)
        if same and stored.valid_to is None:
            if stored.metadata.get("sources") == list(item.sources):
                return Outcome(item, "unchanged", key, value, FORMED_BEFORE)
            return Outcome(item, "unchanged", key, value, "already known")
        if same or began is None or item.stated_at > began:
            await self._write(item, key, record.version, valid_from=item.stated_at)
            return Outcome(item, "updated", key, value)
        other = f"{key}.{_digest(item.value)}"
        beside, beside_version = await self._read(other)
        if beside is not None or await self._in_history(key, item.value):
            return Outcome(item, "unchanged", key, value, "already known as history")
        if item.stated_at == began:
            await self._write(
                item, other, beside_version, valid_from=item.stated_at, conflicts_with=key
            )
            await self._restate(stored, key, record.version, conflicts_with=other)
            return Outcome(item, "contradicted", other, value)
        await self._write(item, other, beside_version, valid_from=item.stated_at, ends=began)
        return Outcome(item, "superseded", other, value, f"{key} is newer")

    async def _in_history(self, key: str, value: str) -> bool:
        """Whether ``value`` is already a past version of ``key``."""
        versions = await self.semantic.history(key, skip_current=True, raw=True)
        return any(_norm(str(v.metadata.get("value", ""))) == _norm(value) for v in versions)

    async def _match(self, item: ExtractedItem) -> str:
        if item.category == "profile" or await self.semantic.provider.read_record(item.key):
            return item.key
        prefix = item.key.rsplit(".", 1)[0] + "."
        words = set(item.key.removeprefix(prefix).split("_"))
        best, score = item.key, 0.0
        for key in await self.semantic.provider.list_keys(prefix=prefix):
            theirs = set(key.removeprefix(prefix).split("_"))
            overlap = len(words & theirs) / len(words | theirs)
            if overlap >= SIMILAR_KEYS and overlap > score:
                best, score = key, overlap
        return best

    async def _read(self, key: str) -> tuple[Record | None, int | None]:
        """The live record under ``key`` and the version of what is stored there (forgotten
        or expired too; ``None``: nothing), read at once: the write that follows goes only
        over that version."""
        provider = self.semantic.provider
        stored = await provider.backend.get(provider.provider_id, provider.partition, key)
        if stored is None:
            return None, None
        now = utc_now()
        live = stored.hidden_at is None and (stored.expires_at is None or stored.expires_at > now)
        return (stored if live else None), stored.version

    async def _write(
        self,
        item: ExtractedItem,
        key: str,
        over: int | None,
        *,
        valid_from: datetime | None,
        ends: datetime | None = None,
        **marks: Any,
    ) -> None:
        metadata: dict[str, Any] = {
            "value": item.value,
            "category": item.category,
            "rule": item.pattern,
            "sources": list(item.sources),
            "standing": "inferred" if item.inferred else "stated",
            **({"inferred": True, "confidence": item.confidence} if item.inferred else {}),
            **marks,
        }
        if item.starts is not None and item.ends is not None:
            metadata["starts"] = item.starts.isoformat()
            metadata["ends"] = item.ends.isoformat()
        text = item.text
        if ends is not None and item.operation == "set":
            text = f"{text.rstrip('.')} (until {ends:%Y-%m-%d})."
        await self.semantic.memorize(
            MemoryItem(
                text=text,
                key=key,
                kind=item.category,
                occurred_at=item.stated_at,
                valid_from=valid_from,
                valid_to=ends,
                metadata=metadata,
            ),
            expected_version=over,
            create=over is None,
        )

    async def _restate(self, stored: MemoryItem, key: str, over: int, **changes: Any) -> None:
        """A new version of ``stored`` with the same start, ended or marked."""
        valid_to = changes.pop("valid_to", stored.valid_to)
        await self.semantic.memorize(
            stored.model_copy(
                update={
                    "key": key,
                    "id": key,
                    "valid_to": valid_to,
                    "valid_from": stored.valid_from,
                    "metadata": {**stored.metadata, **changes},
                    "score": None,
                    "version": None,
                }
            ),
            expected_version=over,
        )


def _norm(value: str) -> str:
    return " ".join(value.casefold().split())


def _digest(value: str) -> str:
    return hashlib.sha256(_norm(value).encode()).hexdigest()[:8]
