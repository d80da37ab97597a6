"""An agent's loop over Engram: every turn goes to episodic memory, the facts the agent decides
to keep go to semantic memory, the task at hand to working memory, and before each answer
``assemble`` gathers the context for the prompt from every memory type, within a budget.

    python examples/agent_loop.py [DATABASE]      (default: a file in a temporary folder)

No LLM is needed: where an agent would send the context to its model, this one prints it.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import engramdb
from engramdb import MemoryItem

#: What the user says, turn by turn, and the fact the agent keeps from it (if any).
TURNS = [
    (
        "Hi! I just moved to Lisbon for a new job at a bakery.",
        ("alice.city", "Alice lives in Lisbon"),
    ),
    (
        "I'm allergic to peanuts, so no satay please.",
        ("alice.allergy", "Alice is allergic to peanuts"),
    ),
    ("My sister Maria is visiting next weekend.", None),
    ("Can you help me plan a dinner for her visit?", None),
]
QUESTION = "What should I cook for the dinner with Maria?"


async def run(db: str) -> str:
    """Play the conversation into the memory at ``db``; return the context of the last prompt."""
    async with engramdb.open(db) as engram:
        mem = engram.scope(tenant="acme", user="alice", agent="helper", session="s-1")
        start = datetime(2026, 5, 1, 18, 0, tzinfo=UTC)
        for turn, (said, fact) in enumerate(TURNS):
            await mem.episodic.memorize(
                MemoryItem(
                    text=said,
                    role="user",
                    occurred_at=start + timedelta(minutes=turn),
                    metadata={"turn": turn},
                )
            )
            if fact is not None:
                key, text = fact
                await mem.semantic.memorize(MemoryItem(text=text, key=key, importance=0.8))
        await mem.working.memorize(
            MemoryItem(text="current task: plan a dinner for Maria's visit", importance=0.9)
        )

        recalled = await mem.episodic.remember("where did I move?", limit=1)
        print(f"recalled turn {recalled[0].metadata['turn']}: {recalled[0].text}")
        context = await mem.assemble(QUESTION, token_limit=400)
        print(f"--- context for {QUESTION!r} ({context.tokens} tokens) ---")
        print(context.text)
        return context.text


def main() -> None:
    """Run on the database named on the command line, or on a temporary one."""
    if len(sys.argv) > 1:
        asyncio.run(run(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(str(Path(folder) / "agent.db")))


if __name__ == "__main__":
    main()
