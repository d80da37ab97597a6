"""Memory types with a chat model configured: free-form forget instructions are translated to
the grammar, and summaries are abstractive, never over the token limit."""

from __future__ import annotations

from pathlib import Path

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.retry import NO_RETRIES
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.llm import LLMConfig
from engramdb.orchestrator.forget_grammar import ForgetInstructionError
from engramdb.orchestrator.tokens import count_tokens
from tests.helpers.openai_server import FakeChatServer, fake, server

__all__ = ["fake", "server"]  # fixtures used here


async def test_free_form_forget_is_translated_then_applied(
    fake: FakeChatServer, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(
        embedder=embedder, llm=LLMConfig(model="translate", base_url=fake.base_url)
    )
    async with engramdb.open(tmp_path / "l.db", config=config) as engine:
        episodic = engine.scope(tenant="acme", user="alice").episodic
        await episodic.memorize(MemoryItem(text="I quit my old job at the bank", id="job"))
        await episodic.memorize(MemoryItem(text="I adopted a cat", id="cat"))
        result = await episodic.forget("please drop what I said about my previous work")
        assert result.forgotten == ["job"]
        assert [r.key for r in await episodic.records()] == ["cat"]
        (seen,) = fake.requests
        assert "matching" in seen.body["messages"][0]["content"]
        # Grammar text never goes to the model.
        assert (await episodic.forget("id:cat", "hard")).forgotten == ["cat"]
        assert len(fake.requests) == 1


async def test_without_a_model_free_form_text_is_refused(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(tmp_path / "n.db", config=EngineConfig(embedder=embedder)) as engine:
        episodic = engine.scope(tenant="acme").episodic
        with pytest.raises(ForgetInstructionError):
            await episodic.forget("please drop my old job")


@pytest.mark.parametrize("model", ["fail-500", "emoji"])
async def test_when_the_model_fails_or_talks_the_phrasings_still_work(
    fake: FakeChatServer, tmp_path: Path, embedder: MiniLMEmbedder, model: str
) -> None:
    llm = LLMConfig(model=model, base_url=fake.base_url, retry=NO_RETRIES)
    config = EngineConfig(embedder=embedder, llm=llm)
    async with engramdb.open(tmp_path / "p.db", config=config) as engine:
        episodic = engine.scope(tenant="acme").episodic
        await episodic.memorize(MemoryItem(text="I quit my old job at the bank", id="job"))
        await episodic.memorize(MemoryItem(text="I adopted a cat", id="cat"))
        result = await episodic.forget("please forget what I said about my old job")
        assert result.forgotten == ["job"]
        assert len(fake.requests) == 1  # asked first, then read by the rules
        with pytest.raises(ForgetInstructionError, match="forget anything about my cat"):
            await episodic.forget("forget my cat")


async def test_summaries_are_abstractive_and_within_the_limit(
    fake: FakeChatServer, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(embedder=embedder, llm=LLMConfig(model="long", base_url=fake.base_url))
    async with engramdb.open(tmp_path / "s.db", config=config) as engine:
        semantic = engine.scope(tenant="acme").semantic
        await semantic.memorize(MemoryItem(text="The user adopted a dog named Rex."))
        summary = await semantic.summarize("all", token_limit=25)
        assert summary.tokens <= 25
        assert count_tokens(summary.text) == summary.tokens
        assert "Rex" in summary.text
