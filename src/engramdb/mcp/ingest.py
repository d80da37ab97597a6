"""The ``ingest`` tool: a conversation handed over whole, for formation to turn into episodes,
facts, profile entries and graph knowledge.

The answer is formation's report: per category what was added, updated, ended, unchanged or
contradicted, each item with its source turns, and notes when nothing was extracted.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import AwareDatetime, BaseModel, Field

from engramdb.formation.ingest import IngestMessage
from engramdb.mcp.binding import bound
from engramdb.mcp.tooling import WRITES, engram_tool


class Turn(BaseModel):
    """One message of the conversation to ingest."""

    role: str = Field(min_length=1, max_length=64, description="user, assistant, …")
    content: str = Field(min_length=1, max_length=100_000)
    occurred_at: AwareDatetime | None = Field(
        default=None, description="When it was said; relative dates are resolved against it"
    )
    session_id: str | None = Field(default=None, min_length=1, max_length=256)


def register(server: MCPServer) -> None:
    """Add ``ingest`` to ``server``."""

    @engram_tool(server, WRITES)
    async def ingest(
        messages: Annotated[
            list[Turn],
            Field(
                min_length=1,
                max_length=1000,
                description="The conversation in order, oldest first: who said what, and when",
            ),
        ],
    ) -> dict[str, Any]:
        """Hand over a whole conversation (or its new turns) to be remembered: Engram stores
        the episodes and extracts facts, profile entries and people, places and relations on
        its own. Prefer it to many `memorize` calls after a conversation."""
        memory = bound().writer()
        report = await memory.ingest(
            [
                IngestMessage(
                    role=m.role, content=m.content, timestamp=m.occurred_at, session_id=m.session_id
                )
                for m in messages
            ]
        )
        return {"report": report.to_dict()}
