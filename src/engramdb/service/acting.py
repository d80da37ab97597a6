"""The scope a request body acts in: the memory-service spec lets a body name its
``user_id`` and ``agent_id``; both are checked against the caller's scope before anything is
read or written."""

from __future__ import annotations

from engramdb.core.errors import PermissionDeniedError
from engramdb.engine import Engine, ScopedMemory
from engramdb.service.auth import Caller


def acting_memory(
    caller: Caller, engine: Engine, user_id: str | None = None, agent_id: str | None = None
) -> ScopedMemory:
    """The memory of the user and agent a body names (default: the caller's own).

    Raises:
        PermissionDeniedError: the credentials are bound to another user, or ``agent_id``
            differs from the agent of ``X-Agent-ID``.
    """
    agent = caller.agent
    if agent_id is not None:
        if agent is not None and agent_id != agent:
            raise PermissionDeniedError(
                "the body names another agent than the X-Agent-ID header", agent=agent_id
            )
        agent = agent_id
    return engine.scope(
        tenant=caller.tenant,
        user=caller.acting_as(user_id),
        agent=agent,
        session=caller.session,
    )


__all__ = ["acting_memory"]
