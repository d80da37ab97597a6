"""``HttpReranker`` against a real local ``/rerank`` server, and an engine that uses one."""

from __future__ import annotations

from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import InvalidValueError, RerankError, RerankUnavailableError
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index.http_reranker import HttpReranker
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from tests.helpers.openai_server import Seen
from tests.helpers.rerank_server import rerank_server

__all__ = ["rerank_server"]  # a fixture used here


async def test_scores_come_back_in_input_order(rerank_server: tuple[str, list[Seen]]) -> None:
    base_url, log = rerank_server
    log.clear()
    async with HttpReranker("word:kibble", base_url=base_url, api_key="sk-test") as reranker:
        scores = await reranker.rerank("pet food", ["a dog", "salmon kibble", "a cat"])
        assert await reranker.rerank("pet food", []) == []
    assert scores == [0.1, 0.9, 0.1]
    assert reranker.model_id == "word:kibble"
    assert reranker.url == f"{base_url}/rerank"
    (seen,) = log
    assert seen.path == "/v1/rerank"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.body == {
        "model": "word:kibble",
        "query": "pet food",
        "documents": ["a dog", "salmon kibble", "a cat"],
        "top_n": 3,
    }


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("short", "1 results in 'results' for 2 inputs"),
        ("repeated", "missing, out of range or repeated"),
        ("text-score", "is not a number"),
        ("nan", "NaN or infinity"),
        ("html", "not JSON"),
    ],
)
async def test_a_malformed_answer_is_a_rerank_error(
    rerank_server: tuple[str, list[Seen]], model: str, reason: str
) -> None:
    async with HttpReranker(model, base_url=rerank_server[0]) as reranker:
        with pytest.raises(RerankError, match=reason) as raised:
            await reranker.rerank("q", ["a", "b"])
    assert raised.value.details["status_code"] == 200


async def test_an_error_status_is_a_retryable_rerank_error(
    rerank_server: tuple[str, list[Seen]],
) -> None:
    base_url, log = rerank_server
    log.clear()
    async with HttpReranker("fail-500", base_url=base_url) as reranker:
        with pytest.raises(RerankUnavailableError, match="overloaded") as raised:
            await reranker.rerank("q", ["a"])
    assert raised.value.details["status_code"] == 500
    assert raised.value.details["retryable"] is True
    # Search is waiting: a busy reranker gets one quick second chance, then search does
    # without it.
    assert len(log) == reranker.retry.attempts == 2


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="model"):
        HttpReranker("", base_url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="base_url"):
        HttpReranker("m", base_url="")
    with pytest.raises(InvalidValueError, match="rerank_weight"):
        SearchConfig(rerank_weight=1.5)
    with pytest.raises(InvalidValueError, match="rerank_candidates"):
        SearchConfig(rerank_candidates=-1)


TURNS = [
    "I adopted a golden retriever puppy called Max last spring.",
    "Can you suggest a good brand of kibble for him?",
    "I started a new job as a nurse at the city hospital.",
    "We are planning a trip to Kyoto in the autumn.",
]


async def remembered(
    db: Path,
    embedder: MiniLMEmbedder,
    reranker: HttpReranker | None,
    search: SearchConfig | None = None,
) -> list[MemoryItem]:
    config = EngineConfig(embedder=embedder, reranker=reranker, search=search or SearchConfig())
    async with engramdb.open(db, config=config) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        if reranker is None and search is None:
            await mem.episodic.memorize_many(
                [MemoryItem(text=text, role="user", id=f"t{n}") for n, text in enumerate(TURNS)]
            )
        return await mem.episodic.remember("What kind of pet does the user have?", limit=3)


async def test_recall_is_reordered_by_the_reranker_and_kept_without_it(
    rerank_server: tuple[str, list[Seen]],
    tmp_path: Path,
    embedder: MiniLMEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    base_url, log = rerank_server
    db = tmp_path / "rerank.db"
    plain = await remembered(db, embedder, None)  # stores the turns, then recalls
    assert plain[0].id == "t0"
    log.clear()
    async with HttpReranker("word:kibble", base_url=base_url) as reranker:
        reranked = await remembered(db, embedder, reranker, SearchConfig(rerank_weight=1))
        (seen,) = log  # one request, the candidates as the memory type embeds them
        assert sorted(seen.body["documents"]) == sorted(f"user: {t}" for t in TURNS)
        log.clear()
        off = await remembered(db, embedder, reranker, SearchConfig(rerank_candidates=0))
        assert log == []
    assert reranked[0].id == "t1"
    assert reranked[0].score_breakdown["rerank"] == pytest.approx(0.9)
    assert reranked[0].score == pytest.approx(0.9)
    scores = [h.score or 0.0 for h in reranked]
    assert scores == sorted(scores, reverse=True)
    assert [h.id for h in off] == [h.id for h in plain]
    async with HttpReranker("fail-500", base_url=base_url) as failing:
        fallback = await remembered(db, embedder, failing)
    assert [(h.id, h.score) for h in fallback] == [(h.id, h.score) for h in plain]
    assert "rerank" not in fallback[0].score_breakdown
    assert "reranking skipped, hybrid order kept" in caplog.text
