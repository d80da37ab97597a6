"""Sessions: the conversation sessions of a tenant's users."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.engine import Engine
from engramdb.orchestrator.sessions import Session, Sessions
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Deleted, Page, SessionIn, SessionUpdate
from engramdb.service.routing import KeyPath, Offset, area_router

router = area_router("/v1/memory/sessions", "sessions")


async def _owned(caller: Caller, engine: Engine, session_id: str) -> tuple[Sessions, Session]:
    sessions = caller.memory(engine).sessions
    found = await sessions.get(session_id)
    caller.check_owner(found.user_id, "session", session_id)
    return sessions, found


@router.post("", status_code=201, summary="Create a session")
async def create_session(body: SessionIn, caller: WriteCaller, engine: EngineDep) -> Session:
    """Store a new session of the caller's user (and agent, unless the body names one)."""
    session = Session.model_validate(
        {**body.model_dump(), "user_id": caller.user, "agent_id": body.agent_id or caller.agent}
    )
    return await caller.memory(engine).sessions.create(session)


@router.get("", summary="List sessions")
async def list_sessions(
    caller: ReadCaller,
    engine: EngineDep,
    agent_id: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Offset = 0,
) -> Page[Session]:
    """The caller's sessions (every session of the tenant for a caller without a user), by
    id, with ``agent_id`` only if given."""
    found = await caller.memory(engine).sessions.list(
        filters={"user_id": caller.user, "agent_id": agent_id}, limit=limit, offset=offset
    )
    return Page(items=found.items, next_offset=found.next_offset)


@router.get("/{session_id}", summary="Retrieve a session")
async def get_session(session_id: KeyPath, caller: ReadCaller, engine: EngineDep) -> Session:
    """The session ``session_id``."""
    return (await _owned(caller, engine, session_id))[1]


@router.put("/{session_id}", summary="Update a session")
async def update_session(
    session_id: KeyPath, body: SessionUpdate, caller: WriteCaller, engine: EngineDep
) -> Session:
    """Replace the fields the body sets; the session's last interaction becomes now unless
    the body sets it."""
    sessions, _ = await _owned(caller, engine, session_id)
    return await sessions.update(session_id, body.model_dump(exclude_unset=True))


@router.delete("/{session_id}", summary="Delete a session")
async def delete_session(session_id: KeyPath, caller: WriteCaller, engine: EngineDep) -> Deleted:
    """Delete the session ``session_id``."""
    sessions, _ = await _owned(caller, engine, session_id)
    await sessions.delete(session_id)
    return Deleted(deleted=True)
