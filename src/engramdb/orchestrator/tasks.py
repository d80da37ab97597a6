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

from engramdb.core.validation import validate_key
from engramdb.orchestrator.resource_models import TaskContext as TaskContext  # importable here too
from engramdb.orchestrator.resources import ResourceStore, resource_spec
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
