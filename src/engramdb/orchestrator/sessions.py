"""``Sessions``: the conversation sessions of a tenant (the service spec's sessions), one
record per ``session_id``, listed by user and agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from engramdb.core.types import utc_now
from engramdb.orchestrator.resource_models import Session as Session  # importable from here too
from engramdb.orchestrator.resources import ResourceStore, resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider

NAMESPACE = "sessions"
SESSION_SPEC = resource_spec(NAMESPACE)


class Sessions(ResourceStore[Session]):
    """The sessions of one tenant."""

    resource: ClassVar[str] = "session"
    id_field: ClassVar[str] = "session_id"
    indexed: ClassVar[tuple[str, ...]] = ("user_id", "agent_id")

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, Session)

    async def create(self, item: Session) -> Session:
        """Store a new session; its last interaction defaults to now."""
        return await super().create(
            item
            if item.last_interaction
            else item.model_copy(update={"last_interaction": utc_now()})
        )

    async def update(
        self,
        resource_id: str,
        changes: Mapping[str, Any],
        *,
        expected_version: int | None = None,
    ) -> Session:
        """Replace the given fields; an update is an interaction, so unless it sets
        ``last_interaction`` itself, that becomes now."""
        return await super().update(
            resource_id,
            {"last_interaction": utc_now(), **changes},
            expected_version=expected_version,
        )
