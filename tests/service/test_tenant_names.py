"""Tenants and users whose names hold separators, or extend one another, stay apart on every
backend: creating, writing, reading, recalling and deleting a tenant or a user never touches
another's records or events, their API keys verify as their own, and after a deletion
``rebuild()`` brings nothing back."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import engramdb
from engramdb.core.errors import AuthenticationError, InvalidScopeError
from engramdb.core.events import EventEnvelope
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.plans import Plan
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.records import Record, RecordQuery
from tests.postgres.database import empty_database

#: One word per scope, so that a recall tells whose memory it found.
WORDS = ("kayak", "zanzibar", "violin", "glacier", "lantern", "orchid")
ATOMS = st.text(st.sampled_from("ab:/|.@%\\ é日🙂-_"), min_size=1, max_size=5)
SEPARATORS = st.sampled_from([":", "/", "|", ".", "@", " ", "%", "\\", "::", "日", "🙂"])


def _valid(tenant: str, user: str) -> Scope | None:
    try:
        return Scope(tenant=tenant, user=user)
    except InvalidScopeError:
        return None


@st.composite
def families(draw: st.DrawFn) -> list[Scope]:
    """Scopes whose names are one string cut in different places, prefixes of one another,
    or as long as a name may be in multi-byte characters."""
    a, b, c, sep = draw(ATOMS), draw(ATOMS), draw(ATOMS), draw(SEPARATORS)
    names = [
        (a, f"{b}{sep}{c}"),
        (f"{a}{sep}{b}", c),
        (a, b),
        (f"{a}{sep}{b}{sep}{c}", f"{b}{sep}{c}"),
        # Long in UTF-8 bytes: room is left for the example's number before the tenant.
        ((f"日{a}" * 128)[:119] + "日", (f"🙂{c}" * 128)[:127] + "🙂"),
    ]
    scopes = [s for t, u in names if (s := _valid(t, u)) is not None]
    return list(dict.fromkeys(scopes))


def _row(record: Record) -> tuple[Any, ...]:
    """What a read returns of a record (the row id aside)."""
    return (
        record.namespace,
        record.scope.columns(),
        record.key,
        json.dumps(record.value, sort_keys=True),
        json.dumps(record.metadata, sort_keys=True),
        record.content_type,
        record.hidden_at,
    )


async def _records(engine: Engine) -> set[tuple[Any, ...]]:
    found: set[tuple[Any, ...]] = set()
    for namespace, _ in engine.stored_namespaces:
        found |= {_row(r) for r in await engine.backend.scan(RecordQuery(namespace, None))}
    return found


async def _events(engine: Engine) -> dict[str, EventEnvelope]:
    return {e.event_id: e for e in await engine.events.read()}


def _owned(row: tuple[Any, ...], tenant: str, user: str | None = None) -> bool:
    """Whether a record row is the tenant's (or, given ``user``, stored under or naming that
    user of the tenant: its registration, API keys and plans)."""
    namespace, (row_tenant, row_user, *_), key, _, metadata, *_ = row
    if row_tenant != tenant:
        return False
    if user is None:
        return True
    named: bool = json.loads(metadata).get("user_id") == user
    return row_user == user or named or (namespace == "users" and key == user)


def _untouched(
    before: dict[str, EventEnvelope], after: dict[str, EventEnvelope], gone: Scope
) -> dict[str, EventEnvelope]:
    """Check that every event of another tenant than ``gone``'s (or, when ``gone`` names a
    user, of another user of its tenant) is as it was; returns ``after``."""
    for event_id, event in before.items():
        scope = event.scope
        other_user = gone.user is not None and scope.user not in (None, gone.user)
        if scope.tenant != gone.tenant or other_user:
            assert after.get(event_id) == event, event
    return after


async def _check_each_has_only_its_own(
    engine: Engine, scopes: list[Scope], keys: dict[Scope, str]
) -> None:
    """Each of ``scopes`` reads, recalls and authenticates as itself alone (the ``i``-th scope
    of the family keeps the ``i``-th word)."""
    for scope in scopes:
        mem = engine.scope(tenant=scope.tenant, user=scope.user)
        entry = await mem.manager.read("owner")
        assert entry is not None
        assert entry.value == [scope.tenant, scope.user]
        hits = await mem.episodic.remember(" ".join(WORDS), limit=10)
        assert [h.text for h in hits] == [f"I keep a {WORDS[list(keys).index(scope)]}"]
        key = await engine.tenancy.verify_key(keys[scope])
        assert (key.tenant_id, key.user_id) == (scope.tenant, scope.user)


async def _scenario(engine: Engine, scopes: list[Scope]) -> None:
    tenancy = engine.tenancy
    keys: dict[Scope, str] = {}
    for i, scope in enumerate(scopes):
        tenant, user = scope.tenant, scope.user or ""
        await tenancy.ensure_tenant(tenant)
        await tenancy.create_user(tenant, user)
        _, keys[scope] = await tenancy.create_key(tenant, user_id=user)
        mem = engine.scope(tenant=tenant, user=user)
        await mem.episodic.memorize(MemoryItem(text=f"I keep a {WORDS[i]}", role="user"))
        await mem.manager.store("owner", [tenant, user], tier=MemoryTier.PERSISTENT)
        await mem.plans.create(Plan(plan_id=f"plan-{i}", user_id=user, goal_event="goal.set"))
    await _check_each_has_only_its_own(engine, scopes, keys)

    # A user goes: only what is stored under them or names them.
    gone, kept = scopes[0], scopes[1:]
    records, events = await _records(engine), await _events(engine)
    await tenancy.delete_user(gone.tenant, gone.user or "")
    expected = {r for r in records if not _owned(r, gone.tenant, gone.user)}
    records, events = await _records(engine), _untouched(events, await _events(engine), gone)
    assert records == expected
    with pytest.raises(AuthenticationError):
        await tenancy.verify_key(keys[gone])

    # Then their tenant goes (on PostgreSQL by the database's cascade from the tenant row,
    # its users and their rows), then another tenant (through the engine, its log blanked).
    removals = list(dict.fromkeys([gone.tenant, *(s.tenant for s in kept)]))[:2]
    for n, tenant in enumerate(removals):
        if n == 0 and isinstance(engine.backend, PostgresBackend):
            assert await engine.backend.delete_tenant(tenant)
        else:
            await tenancy.delete_tenant(tenant)
        expected = {r for r in records if not _owned(r, tenant)}
        records = await _records(engine)
        events = _untouched(events, await _events(engine), Scope(tenant=tenant))
        assert records == expected

    # The log rebuilds what is left, and nothing of what went.
    await engine.rebuild()
    assert await _records(engine) == records
    await _check_each_has_only_its_own(engine, [s for s in kept if s.tenant not in removals], keys)


async def _open(target: str | Path, embedder: MiniLMEmbedder) -> Engine:
    return await engramdb.open(target, config=EngineConfig(embedder=embedder))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_adversarial_names_never_touch_another_tenant_or_user(
    backend: str, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    target = tmp_path / "names.db" if backend == "sqlite" else empty_database()
    # One engine serves every example; each example's tenants carry its number before a
    # "~" (a character no generated name holds), so examples never meet.
    numbers = itertools.count()
    with asyncio.Runner() as runner:
        engine = runner.run(_open(target, embedder))

        @settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(scopes=families())
        @example(scopes=[Scope(tenant="acme", user="x:bob"), Scope(tenant="acme:x", user="bob")])
        @example(
            scopes=[
                Scope(tenant="a", user="b"),
                Scope(tenant="a", user="b/c"),
                Scope(tenant="a/b", user="c"),
                Scope(tenant="a/b/c", user="b"),
            ]
        )
        def each_family(scopes: list[Scope]) -> None:
            assume(len(scopes) >= 2)
            n = next(numbers)
            numbered = [Scope(tenant=f"{n}~{s.tenant}", user=s.user) for s in scopes]
            runner.run(_scenario(engine, numbered))

        try:
            each_family()
        finally:
            runner.run(engine.close())
