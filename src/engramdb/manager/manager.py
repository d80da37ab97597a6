"""``MemoryManager``: one facade over every registered provider (rfc-2002 §8).

* **Registration** goes through the ``ProviderRegistry`` (a projection of
  ``memory.provider.registered`` events); routing reads capabilities from it.
* **Routing**: ``store`` goes to ``provider_id`` when given, else to the first writable
  provider (of ``tier``, when given) that declares the content type by name (``entity`` goes to
  the graph), else to the first of ``tier`` (working by default) that accepts any; ``read``
  asks tiers in order working, persistent, indexed and returns the first hit.
* **Recall** asks every provider in the query's scope that supports search, concurrently, each
  under a timeout. A provider that fails or times out is left out and reported in
  ``RecallReport.failures``, each failure marked as the query's fault (``cause="request"``: a
  ``UsageError``) or the system's (``"runtime"``). When every provider asked fails, recall
  raises ``RecallQueryError`` if all of them refused the query, else ``RecallError``.
  ``recall`` warns (``PartialRecallWarning``) when it answers without some providers, so a
  failure is never passed off as an empty result. Results are merged by ``merge_results``
  (see ``manager/merge.py``).
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from engramdb.core.errors import (
    DuplicateProviderError,
    EngramError,
    NoProviderForTierError,
    PartialRecallWarning,
    ProviderNotFoundError,
    ProviderReadOnlyError,
    RecallError,
    RecallQueryError,
    UsageError,
)
from engramdb.core.types import (
    MemoryEntry,
    MemoryTier,
    ProviderCapabilities,
    RecallQuery,
    RecallResult,
    RecallScope,
)
from engramdb.core.validation import validate_key
from engramdb.manager.merge import merge_results
from engramdb.manager.registry import ProviderRegistry
from engramdb.orchestrator.redaction import RedactionPolicy, default_policy, redact_entry
from engramdb.providers.base import MemoryProvider

TIER_ORDER = (MemoryTier.WORKING, MemoryTier.PERSISTENT, MemoryTier.INDEXED)
DEFAULT_RECALL_TIMEOUT_S = 5.0


log = logging.getLogger("engramdb.manager")


@dataclass(frozen=True)
class ProviderFailure:
    """Why one provider contributed nothing to a recall: ``cause`` is ``"request"`` when it
    refused the query itself (asking again unchanged fails the same way), else ``"runtime"``."""

    provider_id: str
    error: str
    message: str
    cause: Literal["request", "runtime"] = "runtime"

    @classmethod
    def of(cls, provider_id: str, exc: Exception) -> ProviderFailure:
        """The failure ``exc`` raised by ``provider_id``."""
        if isinstance(exc, TimeoutError):
            return cls(provider_id, "TimeoutError", str(exc) or "TimeoutError")
        if not isinstance(exc, EngramError):
            # Not an error a provider raises on purpose: worth a traceback in the log.
            log.warning("provider %s failed in recall", provider_id, exc_info=exc)
        cause: Literal["request", "runtime"] = (
            "request" if isinstance(exc, UsageError) else "runtime"
        )
        return cls(provider_id, type(exc).__name__, str(exc) or type(exc).__name__, cause)

    def to_dict(self) -> dict[str, str]:
        """The failure as plain data (error details, JSON answers)."""
        return asdict(self)


@dataclass(frozen=True)
class RecallReport:
    """Merged results plus which providers were asked and which failed."""

    results: list[RecallResult]
    asked: list[str] = field(default_factory=list)
    failures: list[ProviderFailure] = field(default_factory=list)


class MemoryManager:
    """Routes memory operations to registered providers and unifies recall across them."""

    def __init__(
        self,
        providers: Sequence[MemoryProvider] | None = None,
        *,
        registry: ProviderRegistry | None = None,
        session: str | None = None,
        recall_timeout_s: float = DEFAULT_RECALL_TIMEOUT_S,
        redaction: RedactionPolicy | None = None,
    ) -> None:
        self.registry = registry or ProviderRegistry()
        #: Applied to every recalled entry unless a caller asks for ``raw`` results.
        self.redaction = redaction if redaction is not None else default_policy()
        self.session = session
        self.recall_timeout_s = recall_timeout_s
        self._providers: dict[str, MemoryProvider] = {}
        self._unregistered: list[MemoryProvider] = list(providers or [])

    async def _ready(self) -> None:
        while self._unregistered:
            await self.register_provider(self._unregistered.pop(0))

    async def register_provider(self, provider: MemoryProvider) -> ProviderCapabilities:
        """Make ``provider`` available; emits ``memory.provider.registered`` when new.

        Raises:
            DuplicateProviderError: another instance already holds this provider id.
        """
        caps = provider.capabilities()
        current = self._providers.get(caps.provider_id)
        if current is not None and current is not provider:
            raise DuplicateProviderError(
                f"provider id {caps.provider_id!r} is already registered",
                provider_id=caps.provider_id,
            )
        await self.registry.register(caps)
        self._providers[caps.provider_id] = provider
        return caps

    async def get_provider(self, provider_id: str) -> MemoryProvider:
        """The live provider ``provider_id``.

        Raises:
            ProviderNotFoundError: no provider with that id is registered in this manager.
        """
        await self._ready()
        provider = self._providers.get(provider_id)
        if provider is None:
            raise ProviderNotFoundError(
                f"no provider {provider_id!r}; registered: {', '.join(sorted(self._providers))}",
                provider_id=provider_id,
                registered=sorted(self._providers),
            )
        return provider

    def _caps(self, provider_id: str) -> ProviderCapabilities:
        caps = self.registry.get(provider_id)
        return caps if caps is not None else self._providers[provider_id].capabilities()

    async def providers(self) -> dict[str, ProviderCapabilities]:
        """Capabilities of every live provider, in registration order."""
        await self._ready()
        return {pid: self._caps(pid) for pid in self._providers}

    async def providers_by_tier(self, tier: MemoryTier) -> list[MemoryProvider]:
        """Live providers of ``tier`` in registration order."""
        await self._ready()
        return [p for pid, p in self._providers.items() if self._caps(pid).tier == tier]

    async def _writable(
        self, provider_id: str | None, tier: MemoryTier | None, content_type: str
    ) -> list[MemoryProvider]:
        if provider_id is not None:
            provider = await self.get_provider(provider_id)
            if self._caps(provider_id).read_only:
                raise ProviderReadOnlyError(
                    f"provider {provider_id!r} is read-only", provider_id=provider_id
                )
            return [provider]
        tiers = TIER_ORDER if tier is None else (tier,)
        writable = [
            (p, caps)
            for t in tiers
            for p in await self.providers_by_tier(t)
            if not (caps := self._caps(p.capabilities().provider_id)).read_only
        ]
        # A provider that names the content type is made for it (the graph for ``entity``);
        # one that takes any ("*") is the fallback, so registration order never decides.
        declared = [p for p, caps in writable if content_type in caps.content_types]
        if declared:
            return declared
        fallback = tier or MemoryTier.WORKING
        return [p for p, caps in writable if caps.tier == fallback and caps.accepts(content_type)]

    async def store(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        tier: MemoryTier | None = None,
        provider_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
    ) -> MemoryEntry:
        """Write through the provider chosen by ``provider_id``, or else by ``content_type``
        and ``tier``: the first provider (of ``tier``) that declares the content type by name
        (``"entity"``: the graph), else the first of ``tier`` (default working) accepting any.

        Raises:
            ProviderNotFoundError, ProviderReadOnlyError, NoProviderForTierError: routing failed.
            ValidationError: the key, value, metadata or TTL is invalid (nothing is written).
        """
        candidates = await self._writable(provider_id, tier, content_type)
        if not candidates:
            chosen = tier or MemoryTier.WORKING
            raise NoProviderForTierError(
                f"no writable provider of tier {chosen.value!r} accepts {content_type!r}",
                tier=chosen.value,
                content_type=content_type,
            )
        return await candidates[0].write(
            key, value, content_type=content_type, metadata=metadata, ttl_ms=ttl_ms
        )

    async def read(self, key: str, provider_id: str | None = None) -> MemoryEntry | None:
        """The entry under ``key`` from ``provider_id``, or from the first tier that has it."""
        validate_key(key)
        if provider_id is not None:
            return await (await self.get_provider(provider_id)).read(key)
        for tier in TIER_ORDER:
            for provider in await self.providers_by_tier(tier):
                entry = await provider.read(key)
                if entry is not None:
                    return entry
        return None

    async def delete(
        self, key: str, *, provider_id: str | None = None, tier: MemoryTier | None = None
    ) -> list[str]:
        """Delete ``key`` from ``provider_id`` or from every writable provider (of ``tier``);
        returns the ids of the providers that held it."""
        validate_key(key)
        if provider_id is not None:
            targets = await self._writable(provider_id, None, "*")
        else:
            tiers = TIER_ORDER if tier is None else (tier,)
            targets = [
                p
                for t in tiers
                for p in await self.providers_by_tier(t)
                if not self._caps(p.capabilities().provider_id).read_only
            ]
        return [p.capabilities().provider_id for p in targets if await p.delete(key)]

    async def list_keys(
        self,
        *,
        tier: MemoryTier | None = None,
        provider_id: str | None = None,
        content_types: list[str] | None = None,
        prefix: str | None = None,
    ) -> list[str]:
        """Sorted, distinct keys across the chosen providers."""
        if provider_id is not None:
            providers = [await self.get_provider(provider_id)]
        else:
            tiers = TIER_ORDER if tier is None else (tier,)
            providers = [p for t in tiers for p in await self.providers_by_tier(t)]
        keys: set[str] = set()
        for provider in providers:
            keys.update(await provider.list_keys(content_types=content_types, prefix=prefix))
        return sorted(keys)

    async def _asked(self, query: RecallQuery) -> list[MemoryProvider]:
        await self._ready()
        if query.provider_ids:
            for pid in query.provider_ids:
                await self.get_provider(pid)
        asked = []
        for pid, provider in self._providers.items():
            caps = self._caps(pid)
            if query.scope is not RecallScope.ALL and caps.tier.value != query.scope.value:
                continue
            if query.provider_ids and pid not in query.provider_ids:
                continue
            if caps.supports_search:
                asked.append(provider)
        return asked

    async def recall_report(self, query: RecallQuery, *, raw: bool = False) -> RecallReport:
        """Unified recall with the per-provider outcome (rfc-2001 §9); the entries are
        redacted unless ``raw``."""
        providers = await self._asked(query)
        timeout = query.timeout_s or self.recall_timeout_s

        # The date range is passed only when asked for, so providers written before it
        # keep answering every other recall.
        window = {
            name: value
            for name, value in (("since", query.since), ("until", query.until))
            if value is not None
        }

        async def ask(provider: MemoryProvider) -> list[RecallResult]:
            return await asyncio.wait_for(
                provider.search(
                    query.query,
                    limit=query.limit,
                    content_types=query.content_types,
                    metadata_filters=query.metadata_filters or None,
                    **window,
                ),
                timeout,
            )

        outcomes = await asyncio.gather(*(ask(p) for p in providers), return_exceptions=True)
        batches: list[list[RecallResult]] = []
        failures: list[ProviderFailure] = []
        for provider, outcome in zip(providers, outcomes, strict=True):
            pid = provider.capabilities().provider_id
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                failures.append(ProviderFailure.of(pid, outcome))
            else:
                batches.append(outcome)
        asked = [p.capabilities().provider_id for p in providers]
        if providers and not batches:
            _raise_total_failure(failures, timeout)
        merged = merge_results(batches, limit=query.limit, session=self.session)
        if not raw:
            merged = [
                result.model_copy(update={"entry": redact_entry(self.redaction, result.entry)})
                for result in merged
            ]
        return RecallReport(results=merged, asked=asked, failures=failures)

    async def recall(self, query: RecallQuery, *, raw: bool = False) -> list[RecallResult]:
        """Merged results of :meth:`recall_report` (redacted unless ``raw``); warns
        (``PartialRecallWarning``) when some providers failed and the results are the others'
        only.

        Raises:
            RecallQueryError: every provider asked refused the query (fix the query).
            RecallError: every provider asked failed, not all on the query (may pass later).
        """
        report = await self.recall_report(query, raw=raw)
        if report.failures:
            warnings.warn(PartialRecallWarning.naming(report.failures), stacklevel=2)
        return report.results

    async def close(self) -> None:
        """Close every provider."""
        for provider in self._providers.values():
            await provider.close()


def _raise_total_failure(failures: list[ProviderFailure], timeout_s: float) -> None:
    """Raise the error of a recall that every provider it asked failed."""
    summary = "; ".join(f"{f.provider_id}: {f.error}: {f.message}" for f in failures)
    details = [f.to_dict() for f in failures]
    if all(f.cause == "request" for f in failures):
        raise RecallQueryError(f"every provider refused this recall: {summary}", failures=details)
    if all(f.error == "TimeoutError" for f in failures):
        # Every provider overran the time it was given: a busy machine, not a broken store;
        # the same recall may well answer after a pause as long as that time.
        raise RecallError(
            f"recall failed in every provider it asked: {summary}",
            failures=details,
            retry_after_s=timeout_s,
        )
    raise RecallError(f"recall failed in every provider it asked: {summary}", failures=details)
