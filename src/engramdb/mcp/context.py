"""Resources a client can attach as context — the scope's profile and its recent episodes —
and the prompt that has the model recall before it answers."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from pydantic import Field

from engramdb.engine import ScopedMemory
from engramdb.mcp.binding import bound
from engramdb.mcp.errors import resource_errors
from engramdb.mcp.memory_tools import assemble_for_model
from engramdb.mcp.shapes import item_json, redacted
from engramdb.orchestrator.recent import recent_items

PROFILE_URI = "engram://profile"
RECENT_EPISODES_URI = "engram://episodes/recent"
#: How many episodes the recent-episodes resource lists.
RECENT_EPISODES = 20
#: At most this many profile entries (a profile is a handful of key/value pairs).
PROFILE_LIMIT = 500
#: The budget of what the prompt recalls.
PROMPT_TOKENS = 1500


async def profile(memory: ScopedMemory) -> dict[str, Any]:
    """The scope's profile: its ``profile`` entries (key → value) and its current facts."""
    keys = await memory.persistent.list_keys(content_types=["profile"])
    entries = {}
    for key in keys[:PROFILE_LIMIT]:
        entry = await memory.persistent.read(key)
        if entry is not None:
            entries[key] = entry.value
    facts = [item_json(i) for i in await recent_items(memory.semantic, PROFILE_LIMIT)]
    return redacted(memory, {"profile": entries, "facts": facts})


def register(server: MCPServer) -> None:
    """Add the resources and the prompt to ``server``."""

    @server.resource(
        PROFILE_URI,
        name="profile",
        title="Profile",
        description="What is known about this user: profile entries and current facts.",
        mime_type="application/json",
    )
    @resource_errors
    async def read_profile() -> str:
        return json.dumps(await profile(bound().memory()), ensure_ascii=False)

    @server.resource(
        RECENT_EPISODES_URI,
        name="recent_episodes",
        title="Recent episodes",
        description=f"The {RECENT_EPISODES} latest episodes of this user, newest first.",
        mime_type="application/json",
    )
    @resource_errors
    async def read_recent_episodes() -> str:
        memory = bound().memory()
        items = [item_json(i) for i in await recent_items(memory.episodic, RECENT_EPISODES)]
        return json.dumps(redacted(memory, {"items": items}), ensure_ascii=False)

    @server.prompt(
        name="recall_then_answer",
        title="Recall, then answer",
        description="Answer a question with what Engram remembers about the user put first.",
    )
    @resource_errors
    async def recall_then_answer(
        question: Annotated[str, Field(min_length=1, max_length=10_000)],
    ) -> list[Message]:
        context = await assemble_for_model(bound().memory(), question, PROMPT_TOKENS)
        remembered = context.text or "(nothing relevant is remembered)"
        return [
            UserMessage(
                "Here is what you remember about me that may matter (from long-term memory; "
                "it may be out of date, and newer facts win):\n\n"
                f"{remembered}\n\n"
                "Use it where it helps, say so if it does not answer the question, and store "
                "anything new worth remembering with the memorize tool.\n\n"
                f"Question: {question}"
            )
        ]
