"""A memory type a user defines: ``notes``, kept in a namespace of their own — registered at
run time by the engine tests, and declared as an installed package declares one (under the
``engramdb.memory_types`` entry-point group) by the live service tests."""

from __future__ import annotations

from typing import Any, ClassVar

from engramdb.core.intent import MemoryItem
from engramdb.orchestrator.memory_types import MemoryType
from engramdb.orchestrator.plugin import StoredMemoryType
from engramdb.providers.projection import ProjectionSpec

NOTES_SPEC = ProjectionSpec("notes", vectors=True)


class NotesMemory(StoredMemoryType):
    """Notes: searched by words and meaning, forgotten by id, by text or all at once."""

    name: ClassVar[str] = "notes"
    supported_forget: ClassVar[frozenset[str]] = frozenset({"id", "matching", "all"})

    def content_type(self, item: MemoryItem) -> str:
        return "note"

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        return self.redacted(await self._search(prompt, limit, filters), raw)


def notes(memory: Any) -> NotesMemory:
    """The notes of a scope (``ScopedMemory.provider_for`` the namespace)."""
    return NotesMemory(memory.provider_for(NOTES_SPEC))


NOTES_TYPE = MemoryType(
    "notes", notes, heading="Notes", share=0.1, spec=NOTES_SPEC, description="the user's notes"
)
