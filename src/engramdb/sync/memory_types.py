"""Blocking views of the memory types (``SyncWorkingMemory``, ``SyncEpisodicMemory``,
``SyncSemanticMemory``, ``SyncProceduralMemory``, ``SyncConversationMemory``) and of a
tenant's task contexts, plans and sessions."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from engramdb.orchestrator.conversation import ConversationMemory
from engramdb.orchestrator.episodic import EpisodicMemory
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.plugin import StoredMemoryType
from engramdb.orchestrator.procedural import ProceduralMemory
from engramdb.orchestrator.resource_models import Resource
from engramdb.orchestrator.resources import ResourceStore
from engramdb.orchestrator.semantic import SemanticMemory
from engramdb.orchestrator.sessions import Session, Sessions
from engramdb.orchestrator.tasks import TaskContext, TaskContexts
from engramdb.orchestrator.working import WorkingMemory
from engramdb.storage.records import Record
from engramdb.sync.portal import SyncView, blocking, view
from engramdb.sync.providers import SyncEventSourcedProvider

TM = TypeVar("TM", bound=StoredMemoryType)
M = TypeVar("M", bound=Resource)


class SyncMemoryType(SyncView[TM]):
    """Blocking view of a memory type: the five intent operations and the rest of
    ``StoredMemoryType``."""

    provider = view(SyncEventSourcedProvider)
    memorize = blocking(StoredMemoryType.memorize)
    memorize_many = blocking(StoredMemoryType.memorize_many)
    remember = blocking(StoredMemoryType.remember)
    forget = blocking(StoredMemoryType.forget)
    summarize = blocking(StoredMemoryType.summarize)
    get_capacity_info = blocking(StoredMemoryType.get_capacity_info)
    select = blocking(StoredMemoryType.select)

    def records(self, **fields: Any) -> list[Record]:
        """Live records of this type's partition (see ``StoredMemoryType.records``)."""
        return self._run(self.wrapped.records, **fields)

    @property
    def name(self) -> str:
        """The memory type's name (``"episodic"``, …)."""
        return self.wrapped.name


class SyncWorkingMemory(SyncMemoryType[WorkingMemory]):
    """Blocking view of ``WorkingMemory``."""

    set = blocking(WorkingMemory.set)
    get = blocking(WorkingMemory.get)
    versioned = blocking(WorkingMemory.versioned)
    delete = blocking(WorkingMemory.delete)
    clear = blocking(WorkingMemory.clear)
    state = blocking(WorkingMemory.state)


class SyncEpisodicMemory(SyncMemoryType[EpisodicMemory]):
    """Blocking view of ``EpisodicMemory``."""

    remember = blocking(EpisodicMemory.remember)


class SyncSemanticMemory(SyncMemoryType[SemanticMemory]):
    """Blocking view of ``SemanticMemory``."""

    public = view(SyncEventSourcedProvider)
    memorize = blocking(SemanticMemory.memorize)
    remember = blocking(SemanticMemory.remember)
    history = blocking(SemanticMemory.history)


class SyncProceduralMemory(SyncMemoryType[ProceduralMemory]):
    """Blocking view of ``ProceduralMemory``."""


class SyncConversationMemory(SyncMemoryType[ConversationMemory]):
    """Blocking view of ``ConversationMemory``."""

    # Narrower than the base's, as ConversationMemory's own is.
    memorize_many = blocking(ConversationMemory.memorize_many)  # type: ignore[assignment]
    recent = blocking(ConversationMemory.recent)


class SyncResourceStore(SyncView[ResourceStore[M]], Generic[M]):
    """Blocking view of a tenant's resources of one kind (``ResourceStore``)."""

    provider = view(SyncEventSourcedProvider)
    find = blocking(ResourceStore[M].find)
    get = blocking(ResourceStore[M].get)
    create = blocking(ResourceStore[M].create)
    update = blocking(ResourceStore[M].update)
    delete = blocking(ResourceStore[M].delete)
    list = blocking(ResourceStore[M].list)


class SyncTaskContexts(SyncResourceStore[TaskContext]):
    """Blocking view of ``TaskContexts``."""

    by_subtask = blocking(TaskContexts.by_subtask)


class SyncPlans(SyncResourceStore[Plan]):
    """Blocking view of ``Plans``."""


class SyncSessions(SyncResourceStore[Session]):
    """Blocking view of ``Sessions``."""

    create = blocking(Sessions.create)
    update = blocking(Sessions.update)
