"""The memory types every engine has, registered the way any other type is.

The five intent types (working, procedural, conversation, semantic, episodic: the order of an
assembled context) and the file provider's default categories (``activity``, ``profile``,
``event``), which an engine offers when it keeps memory files (``EngineConfig(files=…)``).
Builders and lookups name ``ScopedMemory`` attributes only, so listing the types imports
nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.orchestrator.memory_types import MemoryType, MemoryTypeRegistry

if TYPE_CHECKING:
    from engramdb.core.intent import MemoryItem

#: The file provider's categories offered as memory types by default (rfc-2001 §11).
FILE_CATEGORIES = ("activity", "profile", "event")


@dataclass(frozen=True)
class Attribute:
    """Builds a type's plugin by reading one attribute of the ``ScopedMemory``."""

    name: str

    def __call__(self, memory: Any) -> Any:
        return getattr(memory, self.name)


@dataclass(frozen=True)
class FileCategory:
    """Builds the plugin of one category of the scope's memory files (``None`` when the
    engine keeps none)."""

    category: str

    def __call__(self, memory: Any) -> Any:
        return memory.file_category(self.category)


async def recent_turns(
    plugin: Any, prompt: str, limit: int, now: datetime | None
) -> list[MemoryItem]:
    """Conversation memory's part of a context: the latest turns, whatever the prompt."""
    found: list[MemoryItem] = await plugin.recent(limit, raw=True)
    return found


async def episodes_at(
    plugin: Any, prompt: str, limit: int, now: datetime | None
) -> list[MemoryItem]:
    """Episodic memory's part of a context: episodes for the prompt, as of ``now``."""
    found: list[MemoryItem] = await plugin.remember(prompt, limit=limit, now=now, raw=True)
    return found


def file_category_type(category: str) -> MemoryType:
    """The memory type of one file category."""
    return MemoryType(
        category,
        FileCategory(category),
        heading=f"{category.title()} (memory files)",
        share=0.1,
        description=f"the {category} file of the scope's memory files",
    )


def register_builtins(registry: MemoryTypeRegistry) -> None:
    """Register the built-in types into ``registry`` (in the order the CLI lists them; an
    assembled context orders its sections by ``assemble.HEADINGS``)."""
    for memory_type in (
        MemoryType(
            "working",
            Attribute("working"),
            "Current plan state",
            0.15,
            description="the current plan's state",
        ),
        MemoryType(
            "episodic",
            Attribute("episodic"),
            "Relevant past episodes",
            0.30,
            lookup=episodes_at,
            description="what happened, when",
        ),
        MemoryType(
            "semantic",
            Attribute("semantic"),
            "Known facts",
            0.20,
            description="facts, one per key, versioned",
        ),
        MemoryType(
            "procedural",
            Attribute("procedural"),
            "Rules to follow",
            0.10,
            description="rules and procedures",
        ),
        MemoryType(
            "conversation",
            Attribute("conversation"),
            "Recent conversation",
            0.25,
            lookup=recent_turns,
            description="the turns of the conversation",
        ),
        *(file_category_type(category) for category in FILE_CATEGORIES),
    ):
        registry.register(memory_type)
