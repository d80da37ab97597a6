"""Memory formation: a conversation in, episodes, profile facts, events, activities and graph
facts out, with what changed per category (``ScopedMemory.ingest``)."""

from __future__ import annotations

from pydantic import Field

from engramdb.formation.ingest import IngestMessage
from engramdb.service.auth import WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Body, IngestOut
from engramdb.service.routing import area_router

router = area_router("/v1/memory/ingest", "formation")


class IngestIn(Body):
    """Messages to form memories from (``{"role", "content"}``, optionally ``timestamp``,
    ``session_id``, ``id``), for ``user_id`` (default: the caller's user). With ``strict``, a
    chat model that fails is an error (503) instead of a fallback to the rules."""

    messages: list[IngestMessage] = Field(max_length=10_000)
    user_id: str | None = Field(default=None, min_length=1, max_length=128)
    strict: bool = False


@router.post("", summary="Form memories from a conversation")
async def ingest(body: IngestIn, caller: WriteCaller, engine: EngineDep) -> IngestOut:
    """Store the messages as episodes, extract what the user states of themself and
    consolidate it into semantic and graph memory. A malformed message stores nothing."""
    memory = caller.memory(engine, user=caller.acting_as(body.user_id))
    report = await memory.ingest(body.messages, strict=body.strict)
    return IngestOut.model_validate(report.to_dict())
