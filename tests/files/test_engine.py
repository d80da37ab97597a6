"""Memory files in an engine: reachable through the manager and unified recall, their
categories and any registered memory type taking part in assemble, rebuild regenerating them."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import ConflictError, InvalidValueError, NotFoundError
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier, RecallQuery, RecallScope
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.builtin_types import register_builtins
from engramdb.orchestrator.memory_types import MemoryType, MemoryTypeRegistry
from tests.files.test_hand_edits import snapshot
from tests.helpers.notes_type import NOTES_SPEC, notes
from tests.unit.test_sync_surface import async_methods, pairs, parameters

#: A time budget no busy test machine runs out of: these tests are about what is assembled.
ROOMY = Budget(token_limit=500, time_limit_ms=60_000)


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> AsyncIterator[Engine]:
    """An engine that keeps memory files (a ``goal`` category besides the defaults), with a
    registry of its own."""
    from tests.postgres.database import empty_database

    registry = MemoryTypeRegistry()
    register_builtins(registry)
    config = EngineConfig(
        embedder=embedder,
        files=tmp_path / "memory",
        file_categories=("activity", "profile", "event", "goal"),
        memory_types=registry,
    )
    target = str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()
    async with engramdb.open(target, config=config) as opened:
        yield opened


def folder(engine: Engine, user: str = "alice") -> Path:
    assert engine.files is not None
    return engine.files.root / "acme" / "users" / user


async def test_the_manager_stores_reads_and_recalls_through_the_files(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice", session="s-1")
    await mem.manager.store(
        "user.city", "Alice lives in Lisbon", content_type="profile", provider_id="files"
    )
    assert "Alice lives in Lisbon" in (folder(engine) / "profile.md").read_text()
    entry = await mem.manager.read("user.city", provider_id="files")
    assert entry is not None
    assert entry.content_type == "profile"
    hits = await mem.manager.recall(
        RecallQuery(query="where does Alice live", scope=RecallScope.ALL)
    )
    assert ("files", "user.city") in [(h.provider_id, h.entry.key) for h in hits]
    persistent = await mem.manager.recall(
        RecallQuery(query="Lisbon", scope=RecallScope.PERSISTENT, content_types=["profile"])
    )
    assert [(h.provider_id, h.tier) for h in persistent] == [("files", MemoryTier.PERSISTENT)]
    caps = (await mem.manager.providers())["files"]
    assert caps.content_types[:4] == ["activity", "profile", "event", "goal"]


async def test_file_categories_are_memory_types_in_assemble(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    profile = mem.memory_type("profile")
    await profile.memorize(MemoryItem(text="Alice moved to Lisbon in May", key="user.city"))
    await mem.memory_type("goal").memorize(MemoryItem(text="Alice wants to learn Portuguese"))
    await mem.episodic.memorize(MemoryItem(text="We talked about the weather in Lisbon"))
    context = await mem.assemble("where does Alice live? Lisbon", budget=ROOMY)
    assert "## Profile (memory files)\n- " in context.text
    assert "Alice moved to Lisbon in May" in context.text
    assert {item.memory_type for item in context.items} >= {"profile", "episodic"}
    text = (folder(engine) / "profile.md").read_text()
    assert "## user.city\n" in text
    assert "\nAlice moved to Lisbon in May\n" in text
    assert "Portuguese" in (folder(engine) / "goal.md").read_text()
    # The type's own operations see only its category.
    assert [i.id for i in await profile.remember("Lisbon")] == ["user.city"]
    assert (await profile.get_capacity_info()).item_count == 1
    forgotten = await profile.forget("all", mode="hard")
    assert forgotten.forgotten == ["user.city"]
    assert "user.city" not in (folder(engine) / "profile.md").read_text()


async def test_an_engine_without_files_does_not_offer_their_categories(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(tmp_path / "plain.db", config=EngineConfig(embedder=None)) as plain:
        mem = plain.scope(user="alice")
        assert mem.files is None
        assert mem.offered("profile") is None
        with pytest.raises(NotFoundError, match="memory files"):
            mem.memory_type("profile")
        with pytest.raises(NotFoundError, match="no memory type"):
            mem.memory_type("nonsense")
        assert "files" not in await mem.manager.providers()


async def test_engine_rebuild_takes_in_edits_and_regenerates_the_files(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    files = mem.files
    assert files is not None
    await files.write("user.city", "Lisbon", content_type="profile")
    await files.write("user.pet", "a cat called Miso", content_type="profile")
    await engine.scope(tenant="acme", user="bob").manager.store(
        "user.city", "Oslo", content_type="profile", provider_id="files"
    )
    profile = folder(engine) / "profile.md"
    profile.write_text(profile.read_text().replace("\nLisbon\n", "\nPorto\n"))
    await engine.rebuild()
    city = await files.read("user.city")
    assert city is not None
    assert city.value == "Porto"
    alice, bob = snapshot(folder(engine)), snapshot(folder(engine, "bob"))
    assert "\nPorto\n" in alice["profile.md"]
    shutil.rmtree(engine.files.root if engine.files else "")
    await engine.rebuild()
    assert snapshot(folder(engine)) == alice
    assert snapshot(folder(engine, "bob")) == bob


async def test_a_type_registered_at_runtime_joins_assemble_recall_and_rebuild(
    engine: Engine,
) -> None:
    engine.memory_types.register(MemoryType("notes", notes, heading="Notes", spec=NOTES_SPEC))
    with pytest.raises(ConflictError):
        engine.memory_types.register(MemoryType("notes", notes, heading="Other notes"))
    mem = engine.scope(tenant="acme", user="alice")
    await mem.memory_type("notes").memorize(
        MemoryItem(id="n1", text="The spare key is under the blue flowerpot")
    )
    context = await mem.assemble("where is the spare key?", budget=ROOMY)
    assert "## Notes\n- " in context.text
    assert "blue flowerpot" in context.text
    hits = await mem.manager.recall(RecallQuery(query="spare key flowerpot"))
    assert ("notes", "n1") in [(h.provider_id, h.entry.key) for h in hits]
    report = await engine.rebuild()
    assert report.records["notes"] == 1
    assert [i.id for i in await mem.memory_type("notes").remember("flowerpot")] == ["n1"]
    engine.memory_types.unregister("notes")
    assert "notes" not in engine.memory_types.names()


def test_the_blocking_api_covers_the_memory_files(tmp_path: Path) -> None:
    config = EngineConfig(embedder=None, files=tmp_path / "memory")
    with engramdb.open_sync(tmp_path / "sync.db", config=config) as engram:
        mem = engram.scope("acme", "alice")
        files = mem.files
        assert files is not None
        found = list(pairs(mem.wrapped.files, files, "files", set()))
        assert [type(view).__name__ for _, _, view in found] == ["SyncFileMemoryProvider"]
        for name, method in async_methods(type(mem.wrapped.files)).items():
            twin = getattr(type(files), name)
            assert parameters(twin) == parameters(method), name
        mem.memory_type("profile").memorize(MemoryItem(text="Alice lives in Lisbon", key="city"))
        profile = tmp_path / "memory/acme/users/alice/profile.md"
        profile.write_text(profile.read_text().replace("Lisbon", "Porto"))
        assert files.rescan().changed == ["city"]
        engram.render_files()
        assert engram.file_provider(mem.scope).read("city") is not None


async def test_erasing_a_user_or_a_tenant_removes_their_files(engine: Engine) -> None:
    for user in ("alice", "bob"):
        await engine.scope(tenant="acme", user=user).manager.store(
            "user.city", f"{user}'s city", content_type="profile", provider_id="files"
        )
    await engine.scope(tenant="acme").manager.store("rule", "be kind", provider_id="files")
    await engine.scope(tenant="globex", user="carol").manager.store(
        "k", "carol's", provider_id="files"
    )
    assert engine.files is not None
    await engine.tenancy.delete_user("acme", "alice")
    assert engine.files.scopes() == [
        Scope(tenant="acme"),
        Scope(tenant="acme", user="bob"),
        Scope(tenant="globex", user="carol"),
    ]
    assert not folder(engine).exists()
    await engine.tenancy.ensure_tenant("acme")
    await engine.tenancy.delete_tenant("acme")
    assert engine.files.scopes() == [Scope(tenant="globex", user="carol")]
    await engine.rebuild()
    assert engine.files.scopes() == [Scope(tenant="globex", user="carol")]


async def test_concurrent_writes_all_reach_the_file(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    files = mem.files
    assert files is not None
    await asyncio.gather(
        *(files.write(f"note.{n:02}", f"note number {n}", content_type="event") for n in range(20))
    )
    text = (folder(engine) / "event.md").read_text()
    assert [line for line in text.split("\n") if line.startswith("## ")] == [
        f"## note.{n:02}" for n in range(20)
    ]
    assert (await files.rescan()).edits == 0


@pytest.mark.parametrize(
    "kind", ["a file", "under a file", "nul", "lone surrogate", "too long", "empty", "bytes"]
)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_memory_folder_no_file_could_be_written_under_is_refused_at_open(
    tmp_path: Path, backend: str, kind: str
) -> None:
    from tests.postgres.database import empty_database

    (tmp_path / "a-file").write_text("kept")
    root: object = {
        "a file": tmp_path / "a-file",
        "under a file": tmp_path / "a-file" / "memory",
        "nul": f"{tmp_path}/a\x00b",
        "lone surrogate": f"{tmp_path}/\ud800",
        "too long": tmp_path / ("x" * 300),
        "empty": "",
        "bytes": bytes(tmp_path / "memory"),
    }[kind]
    target = str(tmp_path / "engram.db") if backend == "sqlite" else empty_database()
    events_before = await _event_count(target) if backend == "postgresql" else 0
    config = EngineConfig(embedder=None, files=root)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError) as refused:
        await engramdb.open(target, config=config)
    assert refused.value.details["field"] == "files"
    # Nothing is made: not the database file, not a folder, and no event in the log.
    assert _names(tmp_path) == ["a-file"]
    if backend == "postgresql":
        assert await _event_count(target) == events_before


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def _event_count(target: str) -> int:
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as opened:
        return await opened.events.count()
