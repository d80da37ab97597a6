"""``MemoryClient``: the async Python client of the REST service, one method per endpoint,
typed results (the service's own models) and typed errors (the engine's error tree).

Every write is sent with a fresh ``Idempotency-Key``, so the client retries a write whose
answer was lost (a dropped connection, a 503) without writing twice.
"""

from __future__ import annotations

import asyncio
import json as json_module
import uuid
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

import httpx

from engramdb.client.errors import ServiceUnavailableError, raise_for_answer
from engramdb.client.fields import given, query_string, raw_param, segment
from engramdb.client.graph import GraphClient
from engramdb.client.intent import IntentCalls
from engramdb.core.errors import (
    InvalidValueError,
    NotFoundError,
    PartialRecallWarning,
    ValueTooLargeError,
    VersionConflictError,
)
from engramdb.core.intent import MemoryItem
from engramdb.core.types import MemoryEntry, RecallQuery, RecallResult
from engramdb.orchestrator.resource_models import Plan, Session, TaskContext
from engramdb.service.models import (
    Cleared,
    Deleted,
    EventPage,
    Health,
    IngestOut,
    Items,
    Page,
    PlanState,
    RecallOut,
    StateOut,
    WriteResult,
)

Role = Literal["user", "assistant", "system", "tool"]
_RETRY_STATUSES = frozenset({502, 503, 504})


class MemoryClient(IntentCalls):
    """Async client of one Engram service for one identity.

    Args:
        base_url: where the service listens, e.g. ``http://127.0.0.1:8000``.
        api_key: an API key (``ek_…``), or
        token: a JWT; neither in local mode.
        tenant_id, user_id, agent_id, session_id: the scope headers sent with every request
            (the tenant must match the credentials; the user defaults to theirs).
        retries: how many times a request is repeated after a transport failure or a 502-504.
        transport: an httpx transport (an ``ASGITransport`` serves an app in process).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        token: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float = 30.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {
            name: value
            for name, value in (
                ("X-Tenant-ID", tenant_id),
                ("X-User-ID", user_id),
                ("X-Agent-ID", agent_id),
                ("X-Session-ID", session_id),
                ("Authorization", f"Bearer {api_key or token}" if api_key or token else None),
            )
            if value is not None
        }
        self.retries = retries
        #: The graph endpoints (``memory.graph.add_entity(…)``), like ``mem.graph`` in process.
        self.graph = GraphClient(self)
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> MemoryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- transport ---------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        if_absent: bool = False,
    ) -> httpx.Response:
        """Send one request and return the successful answer, retrying lost writes under one
        idempotency key (a fresh one unless given); ``expected_version`` is sent as
        ``If-Match``, ``if_absent`` as ``If-None-Match: *``.

        Raises:
            EngramError: the typed error of an error answer.
            ServiceUnavailableError: the service could not be reached.
        """
        headers = {}
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            headers["Idempotency-Key"] = idempotency_key or uuid.uuid4().hex
        if expected_version is not None:
            headers["If-Match"] = f'"{expected_version}"'
        if if_absent:
            headers["If-None-Match"] = "*"
        query = query_string(params or {})
        target = f"{path}?{query}" if query else path
        content = None if json is None else _body(json)
        if content is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(
                    method, target, content=content, headers=headers
                )
            except httpx.InvalidURL as exc:
                # A query or path past what a URL may hold (64 KiB): the caller's value is
                # too large, as the service would say of it in a body.
                raise ValueTooLargeError(
                    f"{method} {path[:200]}: the request URL cannot be sent: {exc}", field="url"
                ) from exc
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ServiceUnavailableError(
                        f"{method} {path}: {type(exc).__name__}: {exc}", retryable=True
                    ) from exc
            else:
                if response.status_code not in _RETRY_STATUSES or attempt == self.retries:
                    raise_for_answer(response)
                    return response
            await asyncio.sleep(0.1 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def health(self) -> Health:
        """Whether the service is up and its database answers."""
        return await self._call(Health, "GET", "/healthz")

    # -- semantic ----------------------------------------------------------------------------

    async def store_knowledge(
        self,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        key: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        public: bool = False,
        importance: float = 0.5,
    ) -> WriteResult:
        """Store a fact, private to ``user_id`` (default: the caller's) unless ``public``;
        stored for no user at all, it is the whole tenant's."""
        body = given(
            content=content, metadata=metadata, key=key, user_id=user_id, agent_id=agent_id
        )
        body |= {"public": public, "importance": importance}
        return await self._call(WriteResult, "POST", "/v1/memory/semantic", json=body)

    async def upsert_knowledge(
        self,
        content: str,
        *,
        dedupe_threshold: float = 0.95,
        metadata: dict[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        public: bool = False,
    ) -> WriteResult:
        """Store a fact, or update a near-identical stored one (``status`` says which)."""
        body = given(content=content, metadata=metadata, user_id=user_id, agent_id=agent_id)
        body |= {"public": public, "dedupe_threshold": dedupe_threshold}
        return await self._call(WriteResult, "POST", "/v1/memory/semantic/upsert", json=body)

    async def search_knowledge(
        self, query: str, *, limit: int = 10, user_id: str | None = None, raw: bool = False
    ) -> list[MemoryItem]:
        """Facts relevant to ``query``: the user's private ones and the public ones."""
        params = {"q": query, "limit": limit, "user_id": user_id, **raw_param(raw)}
        found = await self._call(Items, "GET", "/v1/memory/semantic/search", params=params)
        return found.items

    # -- formation ---------------------------------------------------------------------------

    async def ingest(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        strict: bool = False,
    ) -> IngestOut:
        """Form memories from a conversation: ``messages`` (``{"role", "content"}``, optionally
        ``timestamp``, ``session_id``, ``id``) are stored as episodes, and what the user states
        of themself becomes profile facts, events, activities and graph facts; the answer
        counts what changed per category. With ``strict``, a failing chat model is an error
        (``LLMError``) instead of a fallback to the rules."""
        body = given(user_id=user_id, strict=strict or None)
        body |= {"messages": [given(**m) for m in messages]}
        return await self._call(IngestOut, "POST", "/v1/memory/ingest", json=body)

    # -- episodic ----------------------------------------------------------------------------

    async def log_interaction(
        self,
        role: Role,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | None = None,
        speaker: str | None = None,
        importance: float = 0.5,
        tags: list[str] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> WriteResult:
        """Append one interaction to the episodic log (of ``user_id`` / ``agent_id``, if the
        credentials may act for them)."""
        body = given(
            role=role,
            content=content,
            metadata=metadata,
            occurred_at=occurred_at,
            speaker=speaker,
            tags=tags,
            user_id=user_id,
            agent_id=agent_id,
        )
        body["importance"] = importance
        return await self._call(WriteResult, "POST", "/v1/memory/episodic", json=body)

    async def get_recent_history(self, limit: int = 20, *, raw: bool = False) -> list[MemoryItem]:
        """The latest interactions, newest first."""
        params = {"limit": limit, **raw_param(raw)}
        return (await self._call(Items, "GET", "/v1/memory/episodic/recent", params=params)).items

    async def search_interactions(
        self,
        query: str,
        *,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Interactions relevant to ``query``, best first."""
        params = {
            "q": query,
            "limit": limit,
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            **raw_param(raw),
        }
        return (await self._call(Items, "GET", "/v1/memory/episodic/search", params=params)).items

    # -- procedural --------------------------------------------------------------------------

    async def add_procedure(
        self,
        content: str,
        *,
        procedure_type: Literal["system_prompt", "few_shot_example"] = "system_prompt",
        trigger: str | None = None,
        key: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float = 0.5,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> WriteResult:
        """Store a rule or example with its trigger (the spec's ``trigger_condition``)."""
        body = given(
            content=content,
            trigger=trigger,
            key=key,
            metadata=metadata,
            user_id=user_id,
            agent_id=agent_id,
        )
        body |= {"procedure_type": procedure_type, "importance": importance}
        return await self._call(WriteResult, "POST", "/v1/memory/procedural", json=body)

    async def get_relevant_skills(
        self, query: str, *, limit: int = 10, raw: bool = False
    ) -> list[MemoryItem]:
        """Rules and examples for ``query``: fired triggers first, then by meaning."""
        params = {"q": query, "limit": limit, **raw_param(raw)}
        found = await self._call(Items, "GET", "/v1/memory/procedural/context", params=params)
        return found.items

    # -- working memory ----------------------------------------------------------------------

    async def set_plan_state(
        self,
        plan_id: str,
        key: str,
        value: Any,
        *,
        expected_version: int | None = None,
        if_absent: bool = False,
    ) -> StateOut:
        """Set ``key`` of the plan's shared state; with ``expected_version``, only over that
        version (``VersionConflictError``); with ``if_absent``, only if unset
        (``ConflictError``)."""
        path = f"/v1/memory/working/{segment(plan_id)}/{segment(key)}"
        return await self._call(
            StateOut,
            "PUT",
            path,
            json={"value": value},
            expected_version=expected_version,
            if_absent=if_absent,
        )

    async def get_plan_state(self, plan_id: str, key: str) -> StateOut:
        """``key`` of the plan's shared state. Raises ``NotFoundError`` if unset."""
        return await self._call(
            StateOut, "GET", f"/v1/memory/working/{segment(plan_id)}/{segment(key)}"
        )

    async def get_all_plan_state(self, plan_id: str) -> dict[str, Any]:
        """Every key of the plan's shared state."""
        return (await self._call(PlanState, "GET", f"/v1/memory/working/{segment(plan_id)}")).state

    async def delete_plan_state(
        self, plan_id: str, key: str | None = None, *, expected_version: int | None = None
    ) -> int:
        """Delete ``key`` of the plan's state (or, without ``key``, all of it); returns how
        many keys went. With ``expected_version``, only that version of ``key``."""
        if key is None:
            return (
                await self._call(Cleared, "DELETE", f"/v1/memory/working/{segment(plan_id)}")
            ).deleted
        path = f"/v1/memory/working/{segment(plan_id)}/{segment(key)}"
        answer = await self._call(Deleted, "DELETE", path, expected_version=expected_version)
        return int(answer.deleted)

    # -- task context ------------------------------------------------------------------------

    async def store_task_context(
        self,
        task_id: str,
        event_type: str,
        *,
        plan_id: str | None = None,
        response_event: str | None = None,
        response_topic: str | None = None,
        data: dict[str, Any] | None = None,
        sub_tasks: list[str] | None = None,
        state: dict[str, Any] | None = None,
    ) -> TaskContext:
        """Store a new task context. Raises ``ConflictError`` if the id is taken."""
        body = given(
            task_id=task_id,
            event_type=event_type,
            plan_id=plan_id,
            response_event=response_event,
            response_topic=response_topic,
            data=data,
            sub_tasks=sub_tasks,
            state=state,
        )
        return await self._call(TaskContext, "POST", "/v1/memory/task-context", json=body)

    async def get_task_context(self, task_id: str) -> TaskContext:
        """The task context ``task_id``. Raises ``NotFoundError``."""
        return await self._call(TaskContext, "GET", f"/v1/memory/task-context/{segment(task_id)}")

    async def update_task_context(
        self, task_id: str, *, expected_version: int | None = None, **changes: Any
    ) -> TaskContext:
        """Replace the given fields (``sub_tasks``, ``state``, ``data``, …) of a task context;
        with ``expected_version``, only over that version (``VersionConflictError``)."""
        path = f"/v1/memory/task-context/{segment(task_id)}"
        return await self._call(
            TaskContext, "PUT", path, json=changes, expected_version=expected_version
        )

    async def get_task_by_subtask(self, subtask_id: str) -> TaskContext:
        """The task context listing ``subtask_id``. Raises ``NotFoundError``."""
        path = f"/v1/memory/task-context/by-subtask/{segment(subtask_id)}"
        return await self._call(TaskContext, "GET", path)

    async def find_parent_task(self, subtask_id: str) -> TaskContext | None:
        """The task context listing ``subtask_id``, or ``None``."""
        try:
            return await self.get_task_by_subtask(subtask_id)
        except NotFoundError:
            return None

    async def add_sub_task(self, task_id: str, subtask_id: str) -> TaskContext:
        """Add ``subtask_id`` to a task context's sub-tasks (once); a concurrent change of the
        list is read again, never overwritten."""
        while True:
            task = await self.get_task_context(task_id)
            if subtask_id in task.sub_tasks:
                return task
            try:
                return await self.update_task_context(
                    task_id,
                    expected_version=task.version,
                    sub_tasks=[*task.sub_tasks, subtask_id],
                )
            except VersionConflictError:
                continue

    async def list_task_contexts(
        self, *, plan_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[TaskContext]:
        """Task contexts by id (of ``plan_id`` only, if given)."""
        params = {"plan_id": plan_id, "limit": limit, "offset": offset}
        return await self._call(Page[TaskContext], "GET", "/v1/memory/task-context", params=params)

    async def delete_task_context(
        self, task_id: str, *, expected_version: int | None = None
    ) -> None:
        """Delete a task context (only version ``expected_version``, if given). Raises
        ``NotFoundError``, ``VersionConflictError``."""
        path = f"/v1/memory/task-context/{segment(task_id)}"
        await self.request("DELETE", path, expected_version=expected_version)

    # -- plans -------------------------------------------------------------------------------

    async def create_plan(
        self,
        plan_id: str,
        goal_event: str,
        *,
        goal_data: dict[str, Any] | None = None,
        status: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> Plan:
        """Create a plan of the caller's user. Raises ``ConflictError`` if the id is taken."""
        body = given(
            plan_id=plan_id, goal_event=goal_event, goal_data=goal_data, status=status, state=state
        )
        return await self._call(Plan, "POST", "/v1/memory/plans", json=body)

    async def list_plans(
        self, *, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[Plan]:
        """The caller's plans by id (with ``status`` only, if given)."""
        params = {"status": status, "limit": limit, "offset": offset}
        return await self._call(Page[Plan], "GET", "/v1/memory/plans", params=params)

    async def get_plan(self, plan_id: str) -> Plan:
        """The plan ``plan_id``. Raises ``NotFoundError``."""
        return await self._call(Plan, "GET", f"/v1/memory/plans/{segment(plan_id)}")

    async def update_plan(
        self, plan_id: str, *, expected_version: int | None = None, **changes: Any
    ) -> Plan:
        """Replace the given fields (``status``, ``state``, …) of a plan; with
        ``expected_version``, only over that version (``VersionConflictError``)."""
        path = f"/v1/memory/plans/{segment(plan_id)}"
        return await self._call(Plan, "PUT", path, json=changes, expected_version=expected_version)

    async def delete_plan(self, plan_id: str, *, expected_version: int | None = None) -> None:
        """Delete a plan (only version ``expected_version``, if given). Raises
        ``NotFoundError``, ``VersionConflictError``."""
        path = f"/v1/memory/plans/{segment(plan_id)}"
        await self.request("DELETE", path, expected_version=expected_version)

    # -- sessions ----------------------------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Session:
        """Create a session of the caller's user."""
        body = given(session_id=session_id, agent_id=agent_id, metadata=metadata)
        return await self._call(Session, "POST", "/v1/memory/sessions", json=body)

    async def list_sessions(
        self, *, agent_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[Session]:
        """The caller's sessions by id (with ``agent_id`` only, if given)."""
        params = {"agent_id": agent_id, "limit": limit, "offset": offset}
        return await self._call(Page[Session], "GET", "/v1/memory/sessions", params=params)

    async def get_session(self, session_id: str) -> Session:
        """The session ``session_id``. Raises ``NotFoundError``."""
        return await self._call(Session, "GET", f"/v1/memory/sessions/{segment(session_id)}")

    async def update_session(
        self, session_id: str, *, expected_version: int | None = None, **changes: Any
    ) -> Session:
        """Replace the given fields of a session (and mark it used now); with
        ``expected_version``, only over that version (``VersionConflictError``)."""
        path = f"/v1/memory/sessions/{segment(session_id)}"
        return await self._call(
            Session, "PUT", path, json=changes, expected_version=expected_version
        )

    async def delete_session(self, session_id: str, *, expected_version: int | None = None) -> None:
        """Delete a session (only version ``expected_version``, if given). Raises
        ``NotFoundError``, ``VersionConflictError``."""
        path = f"/v1/memory/sessions/{segment(session_id)}"
        await self.request("DELETE", path, expected_version=expected_version)

    # -- entries, recall, events -------------------------------------------------------------

    async def store(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        expected_version: int | None = None,
    ) -> MemoryEntry:
        """Store ``value`` under ``key`` in persistent memory; with ``expected_version``, only
        over that version of the entry (``VersionConflictError``, ``NotFoundError``)."""
        body = given(key=key, value=value, metadata=metadata, ttl_ms=ttl_ms)
        body["content_type"] = content_type
        return await self._call(
            MemoryEntry, "POST", "/v1/memory/entries", json=body, expected_version=expected_version
        )

    async def read(self, key: str, *, raw: bool = False) -> MemoryEntry | None:
        """The entry under ``key``, or ``None``."""
        path = f"/v1/memory/entries/{segment(key)}"
        try:
            return await self._call(MemoryEntry, "GET", path, params=raw_param(raw))
        except NotFoundError:
            return None

    async def list_entries(
        self, *, prefix: str | None = None, limit: int = 100, offset: int = 0, raw: bool = False
    ) -> Page[MemoryEntry]:
        """Live entries by key (starting with ``prefix`` only, if given)."""
        params = {"prefix": prefix, "limit": limit, "offset": offset, **raw_param(raw)}
        return await self._call(Page[MemoryEntry], "GET", "/v1/memory/entries", params=params)

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        """Delete the entry under ``key``; ``False`` if there was none. With
        ``expected_version``, only that version (``VersionConflictError``)."""
        path = f"/v1/memory/entries/{segment(key)}"
        try:
            await self.request("DELETE", path, expected_version=expected_version)
        except NotFoundError:
            return False
        return True

    async def recall(
        self,
        query: str | RecallQuery,
        *,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        raw: bool = False,
    ) -> list[RecallResult]:
        """Memories across every provider matching ``query`` (that happened within
        ``since`` / ``until``, if given), merged by relevance; warns
        (``PartialRecallWarning``) when the service answered without providers that failed,
        as ``MemoryManager.recall`` does in process."""
        answer = await self.recall_report(query, limit=limit, since=since, until=until, raw=raw)
        if answer.failed_providers:
            warnings.warn(PartialRecallWarning.naming(answer.failed_providers), stacklevel=2)
        return answer.results

    async def recall_report(
        self,
        query: str | RecallQuery,
        *,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        raw: bool = False,
    ) -> RecallOut:
        """``recall``'s results with the providers that failed (``failed_providers``)."""
        chosen = (
            query
            if isinstance(query, RecallQuery)
            else RecallQuery(query=query, limit=limit, since=since, until=until)
        )
        body = chosen.model_dump(mode="json", exclude_none=True)
        return await self._call(
            RecallOut, "POST", "/v1/memory/recall", json=body, params=raw_param(raw)
        )

    async def events(
        self, *, after: int = 0, limit: int = 100, event_types: list[str] | None = None
    ) -> EventPage:
        """Events of the caller's tenant (or user) in log order after position ``after``."""
        params = {"after": after, "limit": limit, "event_type": event_types}
        return await self._call(EventPage, "GET", "/v1/events", params=params)


def _body(data: Any) -> bytes:
    """``data`` as a JSON body, or the ``InvalidValueError`` the service would answer: ASCII
    escapes carry a lone surrogate to the service to be refused there, as in any language."""
    try:
        return json_module.dumps(data, allow_nan=False, separators=(",", ":")).encode()
    except RecursionError:
        raise InvalidValueError("the request body is nested too deep", field="body") from None
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"the request body is not JSON: {exc}", field="body") from exc
