"""Fact keys: an extracted fact's sentence is an extra way to reach its source turn."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.evaluation.datasets import Haystack, Session, Turn, load_dataset
from engramdb.evaluation.fact_keys import FACT_KEY, fact_key_items
from engramdb.evaluation.harness import (
    EngramTarget,
    EvalSettings,
    ingest,
    run_benchmark,
    score_hits,
)
from engramdb.evaluation.report import build_report, protocol_notes, summary_lines
from engramdb.index.search_config import SearchConfig
from tests.evaluation.conftest import WordOverlapMemory

_SAID = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
_TURNS = (
    "Any tips for packing fragile boxes?",
    "I moved to Porto last week, so I am still unpacking.",
    "Which coffee grinder would you suggest for espresso?",
)


def _haystack() -> Haystack:
    turns = tuple(
        Turn("s1", index, "user", text, has_answer=index == 1) for index, text in enumerate(_TURNS)
    )
    return Haystack("h1", (Session("s1", _SAID, turns),), ())


def test_each_fact_becomes_a_key_carrying_its_source_turns_metadata() -> None:
    turns = [
        MemoryItem(text=text, role="user", occurred_at=_SAID, metadata={"turn": index})
        for index, text in enumerate(_TURNS)
    ]
    keys = fact_key_items(turns)
    assert "The user lives in Porto." in [key.text for key in keys]
    assert {key.metadata["turn"] for key in keys} == {1}
    assert all(key.metadata[FACT_KEY] and key.occurred_at == _SAID for key in keys)
    assert fact_key_items([]) == []


async def _ask(tmp_path: Path, fact_keys: bool, question: str) -> tuple[list[str], list[str]]:
    """The turns found for ``question``, best first, and the texts of the hits."""
    settings = EvalSettings(mode="bm25", ks=(1, 3), fact_keys=fact_keys)
    config = engramdb.EngineConfig(search=SearchConfig(mode="bm25"), embedder=None)
    async with engramdb.open(tmp_path / f"keys-{fact_keys}.db", config=config) as engram:
        target = EngramTarget(engram)
        stats = await ingest([_haystack()], target, settings)
        assert stats.turns == 3
        assert (stats.fact_keys > 0) == fact_keys
        assert stats.items == 3 + stats.fact_keys
        hits = await target.remember("h1", question, settings.limit, _SAID)
    scores, shown = score_hits(hits, frozenset({"s1:1"}), frozenset({"s1"}), settings)
    assert scores["turn"]["recall_all@1"] == (1.0 if shown[:1] == ("s1:1",) else 0.0)
    return list(shown), [hit.text for hit in hits]


async def test_a_fact_key_makes_its_turn_findable_by_words_only_the_fact_has(
    tmp_path: Path,
) -> None:
    # "lives" is in the fact ("The user lives in Porto.") and in no turn.
    question = "Where does the user live these days?"
    # Without it no word matches, and BM25's length norm ranks the long turn last.
    shown, texts = await _ask(tmp_path, fact_keys=False, question=question)
    assert shown[0] != "s1:1"
    assert "The user lives in Porto." not in texts
    # With the key, its hit comes first and counts as its source turn, each turn once.
    shown, texts = await _ask(tmp_path, fact_keys=True, question=question)
    assert texts[0] == "The user lives in Porto."
    assert shown[0] == "s1:1"
    assert sorted(shown) == ["s1:0", "s1:1", "s1:2"]


async def test_a_run_with_fact_keys_says_so(longmemeval_file: Path) -> None:
    dataset = load_dataset(longmemeval_file)
    runs = [
        await run_benchmark(dataset, WordOverlapMemory(), EvalSettings(mode="bm25", fact_keys=on))
        for on in (False, True)
    ]
    plain, keyed = runs
    assert plain.ingest.fact_keys == 0
    assert keyed.ingest.fact_keys > 0
    assert keyed.ingest.items == plain.ingest.items + keyed.ingest.fact_keys
    assert "fact keys" not in summary_lines([plain])[0]
    assert f"and {keyed.ingest.fact_keys} fact keys" in summary_lines([keyed])[0]
    assert not any("Fact keys" in note for note in protocol_notes(plain.settings))
    assert any("Fact keys" in note for note in protocol_notes(keyed.settings))
    report = build_report(dataset, [keyed], selection={}, embedder={"model": "none"})
    assert report["config"]["fact_keys"] is True
