"""A remember prompt holding a lone surrogate is no text: every memory type refuses it with a
``ValidationError`` on every backend, instead of failing deep in the model's tokenizer."""

from __future__ import annotations

import pytest

import engramdb
from engramdb.core.errors import ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder


async def test_a_prompt_with_a_lone_surrogate_is_refused(
    target: str, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize(MemoryItem(text="The dentist moved to Tuesday.", role="user"))
        for memory in (mem.episodic, mem.semantic, mem.procedural):
            with pytest.raises(ValidationError, match="lone surrogate"):
                await memory.remember("den\ud800tist")
        # Other text outside ASCII is text.
        assert await mem.episodic.remember("dentist — Zahnarzt")
