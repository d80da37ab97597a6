"""``assemble``: the context for the next turn, gathered from every memory type within a
``Budget``, redacted, and traced.

Every type is asked at once (each under the time budget); their items are redacted, then
packed: first each type within its share of the token budget, best items first, then the
best remaining items of any type into whatever is left. The result never exceeds the token
limit, headers included, and its ``TurnTrace`` is appended to the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.orchestrator.budget import Budget, BudgetManager
from engramdb.orchestrator.redaction import Redacted, RedactionPolicy
from engramdb.orchestrator.trace import TraceOperation, TurnTraced
from engramdb.storage.backend import EventStore

#: Section headings, in the order sections appear in the context.
HEADINGS = {
    "working": "Current plan state",
    "procedural": "Rules to follow",
    "conversation": "Recent conversation",
    "semantic": "Known facts",
    "episodic": "Relevant past episodes",
}

Lookup = Callable[[], Awaitable[list[MemoryItem]]]


@dataclass(frozen=True)
class ContextItem:
    """One item placed in the context, redacted, with the type it came from."""

    memory_type: str
    item: MemoryItem
    tokens: int


@dataclass(frozen=True)
class AssembledContext:
    """What ``assemble`` returns: the context text and how it was made."""

    text: str
    tokens: int
    items: list[ContextItem] = field(default_factory=list)
    trace: TurnTraced | None = None


@dataclass
class _Candidate:
    memory_type: str
    item: MemoryItem
    line: str
    cost: int


async def _ask(
    name: str, lookup: Lookup, manager: BudgetManager, inputs: dict[str, object]
) -> tuple[list[MemoryItem], TraceOperation]:
    started = time.perf_counter()
    try:
        found = await asyncio.wait_for(lookup(), timeout=max(manager.remaining_s(), 0.001))
    except TimeoutError:
        return [], TraceOperation(
            memory_type=name,
            operation="remember",
            inputs=inputs,
            ms=(time.perf_counter() - started) * 1000,
            status="timeout",
        )
    except Exception as exc:
        return [], TraceOperation(
            memory_type=name,
            operation="remember",
            inputs=inputs,
            ms=(time.perf_counter() - started) * 1000,
            status="error",
            error=f"{type(exc).__name__}: {exc}",
        )
    outputs = [{"id": item.id, "score": item.score} for item in found]
    return found, TraceOperation(
        memory_type=name,
        operation="remember",
        inputs=inputs,
        outputs=outputs,
        ms=(time.perf_counter() - started) * 1000,
    )


@lru_cache(maxsize=16_384)
def _redact(policy: RedactionPolicy, text: str) -> Redacted:
    # The same memories come back turn after turn; policies are immutable.
    return policy.redact(text)


def _line(item: MemoryItem) -> str:
    who = f"{item.speaker or item.role}: " if (item.speaker or item.role) else ""
    when = f"[{item.occurred_at.date().isoformat()}] " if item.occurred_at else ""
    return f"- {when}{who}{item.text}"


async def assemble(
    prompt: str,
    lookups: Sequence[tuple[str, Lookup]],
    budget: Budget,
    redaction: RedactionPolicy,
    *,
    scope: Scope,
    events: EventStore | None = None,
    headings: Mapping[str, str] | None = None,
) -> AssembledContext:
    """Gather, redact, pack and trace the context for ``prompt``.

    Args:
        prompt: the turn's prompt.
        lookups: (memory type, coroutine factory returning its candidate items).
        budget: the token, item and time budgets.
        redaction: applied to every item before it is counted or returned.
        scope: the scope the trace is recorded in.
        events: where the trace is appended (not recorded when ``None``).
        headings: section titles by type, over ``HEADINGS`` (a type in neither is titled
            by its name).
    """
    manager = BudgetManager(budget)
    redacted_prompt = redaction.redact(prompt)
    redactions = dict(redacted_prompt.counts)
    inputs: dict[str, object] = {"prompt": redacted_prompt.text, "limit": budget.per_type_items}
    answers = await asyncio.gather(
        *(_ask(name, lookup, manager, inputs) for name, lookup in lookups)
    )
    operations = {name: op for (name, _), (_, op) in zip(lookups, answers, strict=True)}
    candidates: dict[str, list[_Candidate]] = {}
    for (name, _), (found, _) in zip(lookups, answers, strict=True):
        for item in found:
            clean = _redact(redaction, item.text)
            for rule, n in clean.counts.items():
                redactions[rule] = redactions.get(rule, 0) + n
            safe = item.model_copy(update={"text": clean.text})
            line = _line(safe)
            candidates.setdefault(name, []).append(_Candidate(name, safe, line, manager.cost(line)))
    present = [name for name in HEADINGS if candidates.get(name)]
    present += [name for name in candidates if name not in HEADINGS]
    titles = {**HEADINGS, **(headings or {})}
    headers = {name: f"## {titles.get(name, name.title())}" for name in present}
    # Headers are paid for up front so packing can never push the total over the limit.
    reserved = sum(manager.cost(h) for h in headers.values())
    allotments = manager.allotments(present, reserved)
    chosen: dict[str, list[_Candidate]] = {name: [] for name in present}
    limit = budget.token_limit - reserved
    for name in present:
        spent = 0
        for candidate in candidates[name]:
            if spent + candidate.cost <= allotments[name] and manager.fits(candidate.cost, limit):
                chosen[name].append(candidate)
                manager.spend(name, candidate.cost)
                spent += candidate.cost
    taken = {id(c) for name in present for c in chosen[name]}
    leftovers = sorted(
        (c for name in present for c in candidates[name] if id(c) not in taken),
        key=lambda c: -(c.item.score or 0.0),
    )
    for candidate in leftovers:
        if manager.fits(candidate.cost, limit):
            chosen[candidate.memory_type].append(candidate)
            manager.spend(candidate.memory_type, candidate.cost)
    sections = []
    items: list[ContextItem] = []
    for name in present:
        if not chosen[name]:
            continue
        sections.append("\n".join([headers[name], *(c.line for c in chosen[name])]))
        items += [ContextItem(name, c.item, c.cost) for c in chosen[name]]
    text = "\n\n".join(sections)
    # Token counts are additive over whitespace, and the parts are joined by newlines: the
    # total is the sum of what was packed, without tokenizing the whole context again.
    tokens = sum(manager.cost(headers[name]) for name in present if chosen[name])
    tokens += sum(item.tokens for item in items)
    for name, op in operations.items():
        used = manager.by_type.get(name, {})
        operations[name] = op.model_copy(
            update={"tokens_used": used.get("tokens", 0), "items_used": used.get("items", 0)}
        )
    trace = TurnTraced(
        prompt=redacted_prompt.text,
        token_limit=budget.token_limit,
        tokens_used=tokens,
        items_used=len(items),
        ms=manager.elapsed_ms(),
        operations=list(operations.values()),
        redactions=redactions,
    )
    if events is not None:
        await events.append([trace.to_envelope(scope=scope)])
    return AssembledContext(text=text, tokens=tokens, items=items, trace=trace)
