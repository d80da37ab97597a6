"""``MemoryPlugin``: the five intent operations every memory type implements
(memory-plugin interface), and ``StoredMemoryType``, the shared code of the types that keep
their items in one namespace of the event-sourced store.

A memory type reads each operation its own way (its module docstring has the table), but the
mechanics are common: items become records (text, role, speaker, importance, tags and the
caller's metadata, which round-trips unchanged), ``forget`` parses the one grammar of
``forget_grammar`` and refuses forms the type does not support, ``summarize`` is extractive
within a token limit, and ``get_capacity_info`` counts items and tokens against the type's
limits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol, runtime_checkable

from engramdb.core.errors import ValidationError
from engramdb.core.events import new_id
from engramdb.core.intent import (
    CapacityInfo,
    ForgetResult,
    MemorizeResult,
    MemoryItem,
    SummaryResult,
)
from engramdb.core.types import utc_now
from engramdb.llm.client import ChatModel
from engramdb.orchestrator.forget_grammar import (
    All,
    Before,
    BeforeTurn,
    ById,
    ByKey,
    Fade,
    ForgetInstruction,
    LeastImportant,
    Matching,
    OlderThan,
    Oldest,
    parse_mode,
    require_supported,
)
from engramdb.orchestrator.forget_llm import translate_forget
from engramdb.orchestrator.redaction import RedactionPolicy, default_policy
from engramdb.orchestrator.summarize import abstractive_summary, summarize_items
from engramdb.orchestrator.tokens import count_tokens, count_tokens_many
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.indexing import SearchHit, SearchRequest
from engramdb.storage.records import Record, RecordQuery

_ITEM_FIELDS = ("text", "role", "speaker", "kind", "tags", "importance", "key", "turn")
_VALIDITY = ("valid_from", "valid_to")


def require_prompt(prompt: object) -> str:
    """``prompt``, if it is text to remember by: a non-empty string the model can read (a
    lone surrogate is no text, and would fail deep in the tokenizer)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValidationError("remember needs a non-empty prompt")
    if not prompt.isascii():
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(
                "remember's prompt holds a lone surrogate, which is no text", field="prompt"
            ) from None
    return prompt


@runtime_checkable
class MemoryPlugin(Protocol):
    """The intent interface of a memory type."""

    @property
    def name(self) -> str:
        """The memory type's name (a class attribute of the built-in types)."""
        ...

    async def memorize(self, item: MemoryItem) -> MemorizeResult:
        """Store ``item`` the way this type stores things."""
        ...

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Items relevant to ``prompt``, best first, each with ``score``; redacted unless
        ``raw``."""
        ...

    async def forget(self, instructions: str, mode: str = "soft") -> ForgetResult:
        """Forget what ``instructions`` (the forget grammar) select, ``soft`` or ``hard``."""
        ...

    async def summarize(
        self, scope: str = "all", token_limit: int = 500, *, raw: bool = False
    ) -> SummaryResult:
        """A summary of the items ``scope`` selects, at most ``token_limit`` tokens;
        redacted unless ``raw``."""
        ...

    async def get_capacity_info(self) -> CapacityInfo:
        """Item count, token usage, limits and eviction policy."""
        ...


@dataclass(frozen=True)
class TypeLimits:
    """Capacity and lifetime settings of one memory type (``EngineConfig.type_limits`` sets
    them per type).

    Attributes:
        max_items: at most this many live items (``None``: no limit); past it the type evicts.
        max_tokens: at most this many tokens of item text (``None``: no limit).
        default_ttl_ms: items without their own ``ttl_ms`` expire after this.
    """

    max_items: int | None = None
    max_tokens: int | None = None
    default_ttl_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_items", "max_tokens", "default_ttl_ms"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(
                    f"{name} must be a whole number of at least 1, or None; got {value!r}",
                    field=name,
                )


def require_item(item: object) -> None:
    """Reject anything but a ``MemoryItem`` with a typed error."""
    if not isinstance(item, MemoryItem):
        raise ValidationError("memorize takes MemoryItem objects", got=type(item).__name__)


def item_value(item: MemoryItem, **extra: Any) -> dict[str, Any]:
    """What a record stores of an item besides its metadata (unset fields left out); a
    ``tokens`` count already known may come in ``extra``."""
    value: dict[str, Any] = {
        "text": item.text,
        "kind": item.kind,
        "importance": item.importance,
        "tokens": extra.pop("tokens") if "tokens" in extra else count_tokens(item.text),
    }
    for name in ("role", "speaker", "key"):
        if getattr(item, name) is not None:
            value[name] = getattr(item, name)
    if item.tags:
        value["tags"] = list(item.tags)
    for name in _VALIDITY:
        if getattr(item, name) is not None:
            value[name] = getattr(item, name).isoformat()
    value.update(extra)
    return value


def record_item(
    record: Record, score: float | None = None, breakdown: dict[str, float] | None = None
) -> MemoryItem:
    """A stored record as the ``MemoryItem`` that was memorized. A record that was not
    memorized as an item (working memory's key/value state) reads as its searchable text, of
    its content type's kind."""
    value = record.value if isinstance(record.value, dict) else {"text": str(record.value)}
    fields = {name: value[name] for name in _ITEM_FIELDS if name in value and name != "turn"}
    fields.update({name: value[name] for name in _VALIDITY if isinstance(value.get(name), str)})
    if not isinstance(fields.get("text"), str) or not fields["text"]:
        fields["text"] = record.text or record.key
        fields.setdefault("kind", record.content_type)
    if isinstance(value.get("version"), int):
        fields["version"] = value["version"]
    return MemoryItem(
        id=record.key,
        occurred_at=record.occurred_at or record.created_at,
        metadata=record.metadata,
        score=score,
        score_breakdown=breakdown or {},
        ttl_ms=record.ttl_ms,
        **fields,
    )


def hit_item(hit: SearchHit) -> MemoryItem:
    """A search hit as a ``MemoryItem`` with its score and score parts."""
    return record_item(hit.record, hit.score, hit.breakdown)


def importance(record: Record) -> float:
    """A record's importance (0.5 when it has none)."""
    value = record.value.get("importance") if isinstance(record.value, dict) else None
    return float(value) if isinstance(value, int | float) else 0.5


def moment(record: Record) -> datetime:
    """When a record's item happened (else when it was written)."""
    return record.occurred_at or record.created_at


def turn_of(record: Record) -> int | None:
    """The conversation turn a record holds, if it has one."""
    value = record.value.get("turn") if isinstance(record.value, dict) else None
    if isinstance(value, int):
        return value
    meta = record.metadata.get("turn")
    return meta if isinstance(meta, int) else None


class StoredMemoryType(ABC):
    """Shared mechanics of the memory types kept in one namespace of the store."""

    name: ClassVar[str]
    #: The forget forms this type understands (grammar keywords).
    supported_forget: ClassVar[frozenset[str]]
    eviction_policy: ClassVar[str] = "none"

    def __init__(self, provider: EventSourcedProvider, limits: TypeLimits | None = None) -> None:
        self.provider = provider
        self.limits = limits or TypeLimits()
        #: A chat model, when one is configured: it translates free-form forget instructions
        #: to the grammar and writes abstractive summaries.
        self.llm: ChatModel | None = None
        #: What every read returns through (``raw=True`` skips it, for callers allowed to
        #: see memories as stored); the engine sets its configured policy.
        self.redaction: RedactionPolicy = default_policy()

    def redacted(self, items: list[MemoryItem], raw: bool = False) -> list[MemoryItem]:
        """``items`` with sensitive data in their text and metadata redacted, unless ``raw``
        (the stored items are not changed)."""
        if raw:
            return items
        return [redact_item(self.redaction, item) for item in items]

    # -- storage helpers ---------------------------------------------------------------------

    def _item_key(self, item: MemoryItem) -> str:
        """The key an item is stored under: its id, else a new one."""
        return item.id or new_id()

    def _request(self, item: MemoryItem, key: str | None = None, **extra: Any) -> WriteRequest:
        require_item(item)
        return WriteRequest(
            key=key or self._item_key(item),
            value=item_value(item, **extra),
            content_type=self.content_type(item),
            metadata=item.metadata,
            ttl_ms=item.ttl_ms if item.ttl_ms is not None else self.limits.default_ttl_ms,
            occurred_at=item.occurred_at,
        )

    def _foresee(self, item: MemoryItem, key: str) -> None:
        """Set the model on a lone item's text before its tokens are counted and its write
        prepared, where that text does not depend on the count."""
        embed_text = self.provider.spec.embed_text
        texts = {embed_text(key, item_value(item, tokens=n), item.occurred_at) for n in (0, 1)}
        if len(texts) == 1:
            self.provider.foresee(texts.pop())

    def content_type(self, item: MemoryItem) -> str:
        """The rfc-2001 content type an item is stored under."""
        return "fact"

    async def records(self, **fields: Any) -> list[Record]:
        """Live records of this type's partition."""
        return await self.provider.backend.scan(
            RecordQuery(
                self.provider.provider_id, self.provider.partition, alive_at=utc_now(), **fields
            )
        )

    async def _search(
        self,
        prompt: str,
        limit: int,
        filters: dict[str, Any] | None,
        provider: EventSourcedProvider | None = None,
        *,
        candidates: int = 0,
        **request: Any,
    ) -> list[MemoryItem]:
        """Hybrid search hits for ``prompt``: ``limit`` of them, or ``candidates`` when more,
        for a type that ranks them again."""
        require_prompt(prompt)
        if not 1 <= limit <= 1000:
            raise ValidationError("limit must be between 1 and 1000", limit=limit)
        wanted = max(limit, candidates)
        hits = await (provider or self.provider).search_hits(
            SearchRequest(prompt, limit=wanted, metadata=dict(filters or {}), **request)
        )
        return [hit_item(hit) for hit in hits]

    async def memorize_many(self, items: Sequence[MemoryItem]) -> list[MemorizeResult]:
        """Store several items in one transaction (all or none)."""
        for item in items:
            require_item(item)
        keys = [self._item_key(item) for item in items]
        if len(items) == 1:
            self._foresee(items[0], keys[0])
        counts = count_tokens_many([item.text for item in items])
        entries = await self.provider.write_many(
            [
                self._request(item, key, tokens=n)
                for item, key, n in zip(items, keys, counts, strict=True)
            ]
        )
        results = [MemorizeResult(id=entry.key) for entry in entries]
        evicted = await self._evict()
        if evicted and results:
            results[-1] = results[-1].model_copy(update={"evicted": evicted})
        return results

    async def memorize(self, item: MemoryItem) -> MemorizeResult:
        """Store one item (see the type's docstring for what that means)."""
        (result,) = await self.memorize_many([item])
        return result

    @abstractmethod
    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Items relevant to ``prompt``, best first (each type ranks its own way), redacted
        unless ``raw``."""

    # -- capacity ----------------------------------------------------------------------------

    def eviction_order(self, records: list[Record]) -> list[Record]:
        """Records in the order this type evicts them (default: oldest first)."""
        return sorted(records, key=lambda r: (moment(r), r.created_at, r.key))

    async def _evict(self) -> list[str]:
        max_items, max_tokens = self.limits.max_items, self.limits.max_tokens
        if max_items is None and max_tokens is None:
            return []
        records = await self.records()
        tokens = sum(_tokens(r) for r in records)
        victims: list[Record] = []
        for record in self.eviction_order(records):
            over_items = max_items is not None and len(records) - len(victims) > max_items
            over_tokens = max_tokens is not None and tokens > max_tokens
            if not (over_items or over_tokens):
                break
            victims.append(record)
            tokens -= _tokens(record)
        await self.provider.evict([r.key for r in victims])
        return [r.key for r in victims]

    async def get_capacity_info(self) -> CapacityInfo:
        """Live items and their tokens against this type's limits."""
        records = await self.records()
        count = len(records)
        max_items = self.limits.max_items
        return CapacityInfo(
            item_count=count,
            token_usage=sum(_tokens(r) for r in records),
            max_items=max_items,
            max_tokens=self.limits.max_tokens,
            available_items=None if max_items is None else max(0, max_items - count),
            eviction_policy=self.eviction_policy,
        )

    # -- forget ------------------------------------------------------------------------------

    async def forget(self, instructions: str, mode: str = "soft") -> ForgetResult:
        """Forget the items ``instructions`` select (see ``forget_grammar``)."""
        chosen_mode = parse_mode(mode)
        instruction = await translate_forget(instructions, self.llm)
        require_supported(instruction, self.supported_forget, self.name)
        targets = await self.select(instruction)
        if isinstance(instruction, Fade):
            faded = await self._fade(targets, instruction.amount)
            return ForgetResult(mode=chosen_mode, faded=faded, instruction=instructions)
        forgotten = [r.key for r in targets if await self.provider.forget(r.key, chosen_mode)]
        return ForgetResult(mode=chosen_mode, forgotten=forgotten, instruction=instructions)

    async def select(self, instruction: ForgetInstruction) -> list[Record]:
        """The live records a forget instruction selects."""
        now = utc_now()
        match instruction:
            case ById(id=key) | ByKey(key=key):
                return await self.records(keys=(key,))
            case Oldest(count=count):
                return sorted(await self.records(), key=lambda r: (moment(r), r.key))[:count]
            case LeastImportant(count=count):
                ranked = sorted(
                    await self.records(), key=lambda r: (importance(r), moment(r), r.key)
                )
                return ranked[:count]
            case Before(moment=limit):
                return await self.records(occurred_before=limit)
            case OlderThan(delta=delta):
                return await self.records(occurred_before=now - delta)
            case BeforeTurn(turn=turn):
                return [
                    r for r in await self.records() if (t := turn_of(r)) is not None and t < turn
                ]
            case Matching(text=text) | Fade(text=text):
                return await self.records(text_any=(text,))
            case All():
                return await self.records()
        raise ValidationError(f"unhandled forget instruction {instruction!r}")  # pragma: no cover

    async def _fade(self, targets: list[Record], amount: float) -> list[str]:
        requests = []
        for record in targets:
            value = dict(record.value) if isinstance(record.value, dict) else {}
            value["importance"] = round(importance(record) * (1.0 - amount), 6)
            requests.append(
                WriteRequest(
                    key=record.key,
                    value=value,
                    content_type=record.content_type,
                    metadata=record.metadata,
                    ttl_ms=record.ttl_ms,
                    occurred_at=record.occurred_at,
                )
            )
        await self.provider.write_many(requests)
        return [r.key for r in targets]

    # -- summarize ---------------------------------------------------------------------------

    async def summarize(
        self, scope: str = "all", token_limit: int = 500, *, raw: bool = False
    ) -> SummaryResult:
        """A summary of the items ``scope`` selects within ``token_limit``: extractive, or
        written by the chat model when one is configured (and cut to the limit). The items
        are redacted first unless ``raw``, so neither the summary nor the chat model sees
        what redaction removes."""
        items = self.redacted([record_item(r) for r in await self.records()], raw)
        if self.llm is not None:
            return await abstractive_summary(
                self.llm, items, token_limit, scope=scope, now=utc_now()
            )
        return summarize_items(items, token_limit=token_limit, scope=scope, now=utc_now())


def redact_item(policy: RedactionPolicy, item: MemoryItem) -> MemoryItem:
    """A copy of ``item`` with its text and metadata values redacted by ``policy``."""
    text = policy.redact(item.text).text
    metadata = policy.redact_value(item.metadata)[0] if item.metadata else item.metadata
    if text == item.text and metadata == item.metadata:
        return item
    return item.model_copy(update={"text": text, "metadata": metadata})


def _tokens(record: Record) -> int:
    value = record.value.get("tokens") if isinstance(record.value, dict) else None
    return value if isinstance(value, int) else count_tokens(str(record.value))


__all__ = [
    "MemoryPlugin",
    "StoredMemoryType",
    "TypeLimits",
    "hit_item",
    "importance",
    "item_value",
    "moment",
    "record_item",
    "redact_item",
    "turn_of",
]
