"""Sessions: the conversation sessions of a tenant's users."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from engramdb.engine import Engine
from engramdb.orchestrator.sessions import Session, Sessions
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Deleted, Page, SessionIn, SessionUpdate
from engramdb.service.routing import KeyPath, Offset, area_router
from engramdb.service.versions import IfMatch, expected_version, set_etag

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
async def get_session(
    session_id: KeyPath, caller: ReadCaller, engine: EngineDep, response: Response
) -> Session:
    """The session ``session_id``; its version is the ``ETag``."""
    session = (await _owned(caller, engine, session_id))[1]
    set_etag(response, session.version)
    return session


@router.put("/{session_id}", summary="Update a session")
async def update_session(
    session_id: KeyPath,
    body: SessionUpdate,
    caller: WriteCaller,
    engine: EngineDep,
    response: Response,
    if_match: IfMatch = None,
) -> Session:
    """Replace the fields the body sets; the session's last interaction becomes now unless
    the body sets it. With ``If-Match``, only over that version (409 if it changed since)."""
    expected = expected_version(if_match)
    sessions, _ = await _owned(caller, engine, session_id)
    session = await sessions.update(
        session_id, body.model_dump(exclude_unset=True), expected_version=expected
    )
    set_etag(response, session.version)
    return session


@router.delete("/{session_id}", summary="Delete a session")
async def delete_session(
    session_id: KeyPath, caller: WriteCaller, engine: EngineDep, if_match: IfMatch = None
) -> Deleted:
    """Delete the session ``session_id``; with ``If-Match``, only that version."""
    expected = expected_version(if_match)
    sessions, _ = await _owned(caller, engine, session_id)
    await sessions.delete(session_id, expected_version=expected)
    return Deleted(deleted=True)
