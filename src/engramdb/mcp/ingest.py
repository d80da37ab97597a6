"""The ``ingest`` tool: a conversation handed over whole, for formation to turn into episodes,
facts, profile entries and graph knowledge.

It is offered when the engine can ingest (``ScopedMemory.ingest``, from
``engramdb.formation``), and left out otherwise, so a model is never shown a tool that
cannot work.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import AwareDatetime, BaseModel, Field

from engramdb.core.intent import MemoryItem
from engramdb.engine import ScopedMemory
from engramdb.mcp.binding import bound
from engramdb.mcp.tooling import WRITES, engram_tool


class Turn(BaseModel):
    """One message of the conversation to ingest."""

    role: str = Field(min_length=1, max_length=64, description="user, assistant, …")
    content: str = Field(min_length=1, max_length=100_000)
    occurred_at: AwareDatetime | None = None


def can_ingest() -> bool:
    """Whether this engine forms memories from conversations."""
    return callable(getattr(ScopedMemory, "ingest", None))


def report_json(report: object) -> Any:
    """An ingest report as JSON, whatever kind of object formation answers."""
    if isinstance(report, BaseModel):
        return report.model_dump(mode="json")
    if dataclasses.is_dataclass(report) and not isinstance(report, type):
        return dataclasses.asdict(report)
    return report


def register(server: MCPServer) -> None:
    """Add ``ingest`` to ``server`` when the engine can ingest."""
    if not can_ingest():
        return

    @engram_tool(server, WRITES)
    async def ingest(
        messages: Annotated[list[Turn], Field(min_length=1, max_length=1000)],
    ) -> dict[str, Any]:
        """Hand over a whole conversation (or its new turns) to be remembered: Engram stores
        the episodes and extracts facts, profile entries and people, places and relations on
        its own. Prefer it to many `memorize` calls after a conversation."""
        memory = bound().writer()
        items = [
            MemoryItem(text=m.content, role=m.role, occurred_at=m.occurred_at) for m in messages
        ]
        ingest_messages = getattr(memory, "ingest", None)
        assert callable(ingest_messages)  # can_ingest() said so
        report = await ingest_messages(items)
        return {"report": report_json(report)}
