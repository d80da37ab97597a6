"""``TaskContexts``: the state a worker keeps while it delegates to sub-agents (the service
spec's task context), one record per ``task_id`` in the tenant, found again by any of its
sub-task ids.

A task context's full-text key lists its sub-task ids between ``⟦ ⟧`` marks, so the lookup
by sub-task is one filtered scan in the database; the match is then confirmed on the stored
list (``LIKE`` ignores ASCII case).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field

from engramdb.core.validation import validate_key
from engramdb.orchestrator.resources import Resource, ResourceStore, resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.storage.records import RecordQuery

NAMESPACE = "task_context"


def subtask_mark(subtask_id: str) -> str:
    """How a sub-task id appears in its parent's full-text key."""
    return f"⟦{subtask_id}⟧"


def task_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The full-text key of a task context: its id, event type and marked sub-task ids."""
    fields = value if isinstance(value, dict) else {}
    subtasks = fields.get("sub_tasks") or []
    marks = " ".join(subtask_mark(str(s)) for s in subtasks)
    return f"{key} {fields.get('event_type', '')} {marks}".strip()


TASK_SPEC = resource_spec(NAMESPACE, task_key_text)


class TaskContext(Resource):
    """A delegated task: what asked for it, where to answer, its sub-tasks and state."""

    task_id: str = Field(min_length=1, max_length=100)
    plan_id: str | None = Field(default=None, max_length=100)
    event_type: str = Field(min_length=1, max_length=255)
    response_event: str | None = Field(default=None, max_length=255)
    response_topic: str = Field(default="action-results", max_length=100)
    data: dict[str, Any] = Field(default_factory=dict)
    sub_tasks: list[str] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)


class TaskContexts(ResourceStore[TaskContext]):
    """The task contexts of one tenant."""

    resource: ClassVar[str] = "task context"
    id_field: ClassVar[str] = "task_id"
    indexed: ClassVar[tuple[str, ...]] = ("plan_id",)

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, TaskContext)

    async def by_subtask(self, subtask_id: str) -> TaskContext | None:
        """The task context that lists ``subtask_id`` among its sub-tasks, if any (the
        first by task id when several do)."""
        validate_key(subtask_id)
        records = await self.provider.backend.scan(
            RecordQuery(
                self.provider.provider_id,
                self.provider.partition,
                text_any=(subtask_mark(subtask_id),),
            )
        )
        for record in records:
            task = self.from_record(record)
            if subtask_id in task.sub_tasks:
                return task
        return None
