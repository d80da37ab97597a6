"""The same records match and rank alike on every backend: one corpus of varied records (keys
with dots, underscores, hyphens and digits, words that stem alike) searched on SQLite and on
PostgreSQL, and the README's quick start on both."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import engramdb
from engramdb.cli.app import app
from engramdb.core.scope import Scope
from engramdb.engine import Engine, EngineConfig
from engramdb.index.query_terms import fts_match, query_terms
from engramdb.providers.projection import plain_key_text
from engramdb.storage.backend import Backend
from engramdb.storage.records import Put, Record, RecordQuery
from tests.conformance.test_backend_contract import T0
from tests.postgres.database import empty_database

SCOPE = Scope(tenant="acme", user="alice")
CORPUS: dict[str, object] = {
    "user.city": "Lisbon",
    "user.home_town": "Porto, where the user grew up",
    "user.first-language": "Portuguese",
    "user.languages.2": "English, learned at school",
    "pet.name": "Max, a golden retriever",
    "pet.vet_visit-2024": "the vet visit in March 2024 went well",
    "car.model": "a 2019 Toyota Corolla hybrid",
    "car.service.next": "the car is serviced every 15000 km",
    "work.role": "nurse at the city hospital",
    "work.shift_pattern": "night shifts, three per week",
    "work.commute": "cycles to work along the river",
    "hobby.running": "runs a half marathon every spring",
    "hobby.runner-club": "member of a running club that meets on Sundays",
    "hobby.cooking": "cooked pasta for friends, loves cooking Italian food",
    "hobby.cook_book": "a cookbook of Portuguese recipes",
    "food.allergy": "allergic to peanuts and cashews",
    "food.likes": "likes spicy food, dislikes olives",
    "travel.2023-trip": "travelled to Kyoto in the autumn of 2023",
    "travel.next_trip": "plans to travel to Zanzibar with her sister",
    "travel.flights": "flies with TAP, prefers window seats",
    "family.sister": "sister Ana lives in Madrid",
    "family.parents": "parents live in Braga",
    "health.sleep": "sleeps badly after night shifts",
    "health.doctor-visit": "visited the doctor about knee pain from running",
    "finance.budget_2025": "saving 300 euros a month for a new bicycle",
    "finance.bank": "banks with a credit union",
    "music.instrument": "plays the classical guitar",
    "music.concert-2024.06": "went to a jazz concert in June 2024",
    "email.work": "alice.silva@hospital.example.org",
    "device.phone_os": "Android 14 on a Pixel 8",
    "home.address.street": "Rua Augusta 27, third floor",
    "home.wifi-router": "the router restarts itself every night",
    "garden.plants": "grows tomatoes, basil and peppers on the balcony",
    "reading.current_book": "reading a novel by José Saramago",
    "study.course-1": "evening course in data analysis",
    "study.exam_date": "the statistics exam is on 12 June",
}
QUERIES = [
    "which city does the user live in?",
    "user.city",
    "home_town",
    "first-language",
    "what languages does she speak",
    "when did the pet see the vet",
    "car service",
    "what is her job at the hospital",
    "night shift",
    "running",
    "does she like to cook",
    "cookbook",
    "food allergies",
    "trip to zanzibar",
    "travel plans 2023",
    "where does her sister live",
    "doctor visit knee",
    "budget 2025 bicycle",
    "guitar concerts",
    "alice.silva@hospital.example.org",
    "pixel phone",
    "Rua Augusta",
    "wifi router",
    "tomato plants",
    "Saramago novel",
    "jose saramago",
    "course-1 data analysis",
    "exam date",
]
#: Scores closer than this share of the larger one are a tie: their order may differ.
TIE = 0.15


async def _open(name: str, tmp_path: Path) -> Engine:
    target = str(tmp_path / "ranking.db") if name == "sqlite" else empty_database()
    return await engramdb.open(target, config=EngineConfig(embedder=None))


@pytest.fixture
async def engines(tmp_path: Path) -> AsyncIterator[dict[str, Engine]]:
    """The corpus stored on SQLite and on PostgreSQL."""
    opened = {name: await _open(name, tmp_path) for name in ("sqlite", "postgresql")}
    try:
        for engine in opened.values():
            manager = engine.scope(tenant=SCOPE.tenant, user=SCOPE.user).manager
            for key, value in CORPUS.items():
                await manager.store(
                    key, value, content_type="profile", tier=engramdb.MemoryTier.PERSISTENT
                )
        yield opened
    finally:
        for engine in opened.values():
            await engine.close()


def _ranked(hits: list[tuple[str, float]]) -> list[list[str]]:
    """Hits grouped into runs of scores within ``TIE`` of the run's best, best run first."""
    runs: list[list[str]] = []
    best = None
    for key, score in hits:
        if best is None or score < best * (1 - TIE):
            runs.append([])
            best = score
        runs[-1].append(key)
    return runs


async def _text_hits(backend: Backend, question: str) -> list[tuple[str, float]]:
    match = fts_match(query_terms(question))
    assert match is not None
    hits = await backend.search.text(RecordQuery("event_sourced", SCOPE), match, 10)
    return [(record.key, score) for record, score in hits]


async def test_the_full_text_keys_of_a_corpus_rank_alike_on_every_backend(
    engines: dict[str, Engine],
) -> None:
    for question in QUERIES:
        lite = await _text_hits(engines["sqlite"].backend, question)
        pg = await _text_hits(engines["postgresql"].backend, question)
        assert lite, question
        assert {k for k, _ in lite} == {k for k, _ in pg}, question
        lite_runs, pg_runs = _ranked(lite), _ranked(pg)
        # The best hits are the same, and every hit ahead of another by a real margin on one
        # backend is not behind it by a real margin on the other.
        assert set(lite_runs[0]) & set(pg_runs[0]), question
        place = {key: n for n, run in enumerate(pg_runs) for key in run}
        for ahead, behind in itertools.pairwise(lite_runs):
            assert all(place[a] <= place[b] for a in ahead for b in behind), question


async def test_recall_finds_the_same_memories_on_every_backend(
    engines: dict[str, Engine],
) -> None:
    for question in QUERIES:
        found = {
            name: [
                r.entry.key
                for r in await engine.scope(tenant=SCOPE.tenant, user=SCOPE.user).manager.recall(
                    engramdb.RecallQuery(query=question, limit=5)
                )
            ]
            for name, engine in engines.items()
        }
        assert found["sqlite"], question
        assert found["sqlite"][0] in found["postgresql"][:2], (question, found)
        assert set(found["sqlite"][:3]) & set(found["postgresql"][:3]), (question, found)


@pytest.mark.parametrize(
    ("text", "found_by"),
    [
        ("user.city Lisbon", ["user", "city", "cities", "lisbon", "user.city"]),
        ("home_town first-language", ["home", "town", "towns", "first", "languages", "home_town"]),
        ("v1.2.3 costs 3.14", ["v1", "2", "3", "14", "cost", "costing"]),
        ("alice@example.org http://x.org/a", ["alice", "example", "org", "http"]),
        ("Café naïve ÉCOLE", ["cafe", "café", "naive", "ecole", "école"]),
        ("running runs a runner", ["run", "running", "runs", "runner"]),
        ("abc123 123abc don’t", ["abc123", "123abc", "don"]),
        # "乹" is b"\xe4\xb9\xb9": FTS5's stemmer undoubles its last byte, cutting it.
        ("ab乹乹ing notes", ["ab乹乹ing", "notes"]),
    ],
)
async def test_a_text_is_split_folded_and_stemmed_alike_on_every_backend(
    backend: Backend, text: str, found_by: list[str]
) -> None:
    stored = Record(
        namespace="ns",
        scope=SCOPE,
        key="k",
        value=text,
        content_type="fact",
        metadata={},
        created_at=T0,
        text=plain_key_text("k", text, None),
    )
    await backend.commit([Put(stored)], [])
    for question in found_by:
        match = fts_match(query_terms(question))
        assert match is not None
        hits = await backend.search.text(RecordQuery("ns", SCOPE), match, 5)
        assert [r.key for r, _ in hits] == ["k"], question
    assert not await backend.search.text(RecordQuery("ns", SCOPE), '"unrelated"', 5)


@pytest.mark.parametrize("target", ["sqlite", "postgresql"])
def test_the_quick_start_finds_the_city_on_every_backend(target: str, tmp_path: Path) -> None:
    database = str(tmp_path / "quick.db") if target == "sqlite" else empty_database()
    cli = CliRunner(env={"COLUMNS": "200"})
    added = cli.invoke(app, ["--db", database, "add", "user.city", "Lisbon", "--type", "profile"])
    assert added.exit_code == 0, added.output
    found = cli.invoke(app, ["--db", database, "recall", "which city does the user live in?"])
    assert found.exit_code == 0, found.output
    assert "user.city" in found.stdout
    assert "Lisbon" in found.stdout
