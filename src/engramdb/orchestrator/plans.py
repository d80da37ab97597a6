"""``Plans``: the goals a tenant's agents pursue (the service spec's plans), one record per
``plan_id``, listed by status and by user."""

from __future__ import annotations

from typing import ClassVar

from engramdb.orchestrator.resource_models import Plan as Plan  # importable from here too
from engramdb.orchestrator.resources import ResourceStore, resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider

NAMESPACE = "plans"
PLAN_SPEC = resource_spec(NAMESPACE)


class Plans(ResourceStore[Plan]):
    """The plans of one tenant."""

    resource: ClassVar[str] = "plan"
    id_field: ClassVar[str] = "plan_id"
    indexed: ClassVar[tuple[str, ...]] = ("user_id", "status")

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, Plan)
