"""``Plans``: the goals a tenant's agents pursue (the service spec's plans), one record per
``plan_id``, listed by status and by user."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from engramdb.orchestrator.resources import Resource, ResourceStore, resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider

NAMESPACE = "plans"
PLAN_SPEC = resource_spec(NAMESPACE)


class Plan(Resource):
    """A plan: the goal event that started it, its status and its state."""

    plan_id: str = Field(min_length=1, max_length=100)
    user_id: str | None = Field(default=None, max_length=128)
    goal_event: str = Field(min_length=1, max_length=255)
    goal_data: dict[str, Any] = Field(default_factory=dict)
    status: str = Field(default="running", min_length=1, max_length=50)
    state: dict[str, Any] = Field(default_factory=dict)


class Plans(ResourceStore[Plan]):
    """The plans of one tenant."""

    resource: ClassVar[str] = "plan"
    id_field: ClassVar[str] = "plan_id"
    indexed: ClassVar[tuple[str, ...]] = ("user_id", "status")

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, Plan)
