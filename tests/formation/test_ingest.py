"""``mem.ingest``: validation before any write, reports, idempotence, the blocking twin, and
the conversation files ``engram ingest`` reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import UsageError, ValidationError
from engramdb.engine import Engine, EngineConfig
from engramdb.formation.ingest import IngestMessage, to_turns
from engramdb.formation.sources import read_messages
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.storage.backend import EventQuery
from tests.evaluation.conftest import locomo_samples, longmemeval_records, write_benchmark

NOW = datetime(2024, 6, 3, 10, tzinfo=UTC)


async def test_a_bad_message_stores_nothing(engine: Engine) -> None:
    mem = engine.scope(tenant="t", user="u")
    before = await engine.events.count()
    good = {"role": "user", "content": "I live in Lisbon."}
    for bad in (
        [good, {"role": "user"}],
        [good, {"role": "user", "content": ""}],
        [good, {"role": "user", "content": "x", "timestamp": "2024-01-01T10:00:00"}],
        [{**good, "id": "a"}, {**good, "id": "a"}],
        "I live in Lisbon",
    ):
        with pytest.raises(ValidationError):
            await mem.ingest(bad)  # type: ignore[arg-type]
    assert await engine.events.count() == before


async def test_nothing_extracted_says_why(engine: Engine) -> None:
    mem = engine.scope(tenant="t", user="u")
    report = await mem.ingest([{"role": "user", "content": "What's the weather like?"}])
    assert (report.turns, report.episodes, report.extracted) == (1, 1, 0)
    assert report.notes[0].startswith("no rule matched in 1 user turns; the rules read")
    only_assistant = await mem.ingest([{"role": "assistant", "content": "I live in Lisbon."}])
    assert "only the user's first-person statements are read" in only_assistant.notes[0]
    empty = await mem.ingest([])
    assert empty.notes == ["no turns were given"]


async def test_ingest_again_changes_nothing(engine: Engine) -> None:
    mem = engine.scope(tenant="t", user="u")
    messages = [
        {"role": "user", "content": "I live in Lisbon.", "timestamp": "2024-01-01T10:00:00Z"},
        {"role": "user", "content": "I moved to Porto.", "timestamp": "2024-02-01T10:00:00Z"},
    ]
    first = await mem.ingest(messages)
    assert vars(first.categories["profile"]) == {
        "added": 1, "updated": 1, "superseded": 1, "unchanged": 0, "ended": 0, "contradicted": 0,
    }  # fmt: skip
    written = len(await engine.events.read(EventQuery(event_types=("memory.written",))))
    again = await mem.ingest(messages)
    assert [o.decision for o in again.outcomes] == ["unchanged", "unchanged"]
    assert again.notes == ["everything extracted was already known: nothing changed"]
    episodes = len(await engine.events.read(EventQuery(event_types=("memory.written",))))
    assert episodes == written + 2  # the turns are stored again as new versions, nothing else


async def test_report_as_json(engine: Engine) -> None:
    mem = engine.scope(tenant="t", user="u")
    report = await mem.ingest(
        [{"role": "user", "content": "My cat Luna sleeps a lot.", "session_id": "s"}]
    )
    data = json.loads(json.dumps(report.to_dict()))
    assert data["items"] == [
        {
            "category": "profile",
            "decision": "added",
            "key": "user.pet.luna",
            "value": "cat Luna",
            "text": "The user has a cat named Luna.",
            "previous": None,
            "sources": ["s:0"],
            "rule": "pet",
        }
    ]
    assert (data["entities"], data["relations"]) == (2, 1)


def test_turn_ids_and_times() -> None:
    turns = to_turns(
        [
            IngestMessage(role="user", content="b", timestamp=datetime(2024, 2, 1, tzinfo=UTC)),
            {"role": "user", "content": "a", "timestamp": "2024-01-01T00:00:00+00:00"},
            {"role": "user", "content": "c", "session_id": "s"},
            {"role": "user", "content": "d", "session_id": "s", "id": "mine"},
            {"role": "user", "content": "e", "session_id": "s"},
        ],
        NOW,
    )
    # Untimed messages follow the one before them in the list ("a") by a millisecond each.
    assert [t.text for t, _ in turns] == ["a", "c", "d", "e", "b"]
    ids = [t.turn_id for t, _ in turns]
    assert ids[1:4] == ["s:0", "mine", "s:1"]
    assert ids[0].startswith("turn-")
    assert turns[1][0].occurred_at == datetime(2024, 1, 1, 0, 0, 0, 1000, tzinfo=UTC)


def test_sync_ingest(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    with engramdb.open_sync(tmp_path / "s.db", config=EngineConfig(embedder=embedder)) as engine:
        report = engine.scope(user="ana").ingest([{"role": "user", "content": "I work at Acme."}])
        assert [o.key for o in report.outcomes] == ["user.employer"]


# -- files ---------------------------------------------------------------------------------


def test_json_and_json_lines(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    listed = tmp_path / "a.json"
    listed.write_text(json.dumps(messages))
    wrapped = tmp_path / "b.json"
    wrapped.write_text(json.dumps({"messages": messages}))
    lines = tmp_path / "c.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in messages) + "\n\n")
    for path in (listed, wrapped, lines):
        assert [m.content for m in read_messages(path)] == ["hi", "hello"]


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        read_messages(tmp_path / "missing.json")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"role": "user", "content": "hi"}\n{"role": \n')
    with pytest.raises(ValidationError, match="line 2: not JSON"):
        read_messages(broken)
    no_role = tmp_path / "no_role.jsonl"
    no_role.write_text('{"role": "user", "content": "hi"}\n{"content": "x"}\n')
    with pytest.raises(ValidationError, match=r"line 2: .*role"):
        read_messages(no_role)
    number = tmp_path / "number.json"
    number.write_text("42")
    with pytest.raises(ValidationError, match="expected a list of messages"):
        read_messages(number)


def test_benchmark_haystacks(tmp_path: Path) -> None:
    longmemeval = write_benchmark(tmp_path / "lme.json.xz", longmemeval_records())
    with pytest.raises(UsageError, match="holds 2 longmemeval haystacks: choose one"):
        read_messages(longmemeval)
    with pytest.raises(UsageError, match="no haystack 'nope'"):
        read_messages(longmemeval, haystack="nope")
    chosen = read_messages(longmemeval, haystack="q-single")
    assert all(m.role == "user" and m.id and m.timestamp for m in chosen)
    assert [m.id for m in chosen][:2] == ["sharegpt_noise_0:0", "answer_city_1:0"]
    locomo = read_messages(write_benchmark(tmp_path / "locomo.json", locomo_samples()))
    assert [(m.role, m.speaker, m.id) for m in locomo][:2] == [
        ("user", "Caroline", "session_1:0"),
        ("other", "Melanie", "session_1:1"),
    ]


async def test_no_longer_ends_the_fact_and_the_relation(engine: Engine) -> None:
    mem = engine.scope(tenant="t", user="ana")
    started, left = "2024-01-02T09:00:00+00:00", "2024-05-06T09:00:00+00:00"
    report = await mem.ingest(
        [
            {"role": "user", "content": "I work at Acme.", "timestamp": started, "id": "a"},
            {"role": "user", "content": "My sister Maria visited.", "timestamp": started},
            {"role": "user", "content": "I no longer work at Acme.", "timestamp": left, "id": "b"},
        ]
    )
    assert [o.decision for o in report.outcomes] == ["added", "added", "ended"]
    holding = await mem.semantic.remember("where does the user work?")
    assert "user.employer" not in [i.key for i in holding]
    (ended, _) = await mem.semantic.history("user.employer")
    assert ended.valid_to == datetime.fromisoformat(left)
    ana = await mem.graph.find_entity("ana", "person")
    assert ana is not None
    (works,) = await mem.graph.get_relations(ana.entity_id, relation_type="works_for", history=True)
    assert (works.valid_at, works.invalid_at) == (
        datetime.fromisoformat(started),
        datetime.fromisoformat(left),
    )
    (sister,) = await mem.graph.get_relations(ana.entity_id, "incoming", "sibling_of")
    maria = await mem.graph.get_entity(sister.source_id)
    assert maria is not None
    assert (maria.name, sister.properties) == ("Maria", {"key": "user.family.sister.maria"})


async def test_progress_by_phase(engine: Engine) -> None:
    told: list[tuple[str, str, int]] = []
    await engine.scope(user="u").ingest(
        [{"role": "user", "content": f"I love topic {n}."} for n in range(70)],
        progress=lambda phase, n: told.append(("done", phase, n)),
        totals=lambda phase, n: told.append(("total", phase, n)),
    )
    assert [t for t in told if t[0] == "total"] == [
        ("total", "store", 70),
        ("total", "extract", 70),
        ("total", "form", 70),
    ]
    for phase in ("store", "extract", "form"):
        assert sum(n for kind, p, n in told if kind == "done" and p == phase) == 70
