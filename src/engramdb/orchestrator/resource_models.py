"""The resources that are not memories — plans, sessions, task contexts — as plain models,
apart from their stores: the REST client returns them and must not need the engine to."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from engramdb.core.model import EngramModel


class Resource(EngramModel):
    """Base of the stored resources: the times and the version the store sets."""

    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int | None = None


class Plan(Resource):
    """A plan: the goal event that started it, its status and its state."""

    plan_id: str = Field(min_length=1, max_length=100)
    user_id: str | None = Field(default=None, max_length=128)
    goal_event: str = Field(min_length=1, max_length=255)
    goal_data: dict[str, Any] = Field(default_factory=dict)
    status: str = Field(default="running", min_length=1, max_length=50)
    state: dict[str, Any] = Field(default_factory=dict)


class Session(Resource):
    """A conversation session: who holds it, with which agent, and when it was last used."""

    session_id: str = Field(min_length=1, max_length=100)
    user_id: str | None = Field(default=None, max_length=128)
    agent_id: str | None = Field(default=None, max_length=100)
    last_interaction: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


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
