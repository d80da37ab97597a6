"""``FileCategoryMemory``: one category of the memory files (``profile``, ``event``, …) as a
memory type, so it takes part in ``assemble``, the CLI and the inspector like the built-ins.

Items are stored by the scope's ``FileMemoryProvider`` under the category as content type:
an item becomes a block whose body is its text (its other fields go to the block's engram
line), keyed by ``item.key``, else ``item.id``, else a new id. ``remember`` is the provider's
hybrid search narrowed to the category.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from engramdb.core.events import new_id
from engramdb.core.intent import MemoryItem
from engramdb.orchestrator.forget_grammar import FORGET_KEYWORDS
from engramdb.orchestrator.plugin import StoredMemoryType, TypeLimits
from engramdb.providers.files import FileMemoryProvider
from engramdb.storage.records import Record


class FileCategoryMemory(StoredMemoryType):
    """The items of one category file of a scope (``name`` is the category)."""

    name: ClassVar[str] = "files"
    # Items carry no conversation turn; every other form applies.
    supported_forget: ClassVar[frozenset[str]] = frozenset(FORGET_KEYWORDS) - {"before turn"}
    eviction_policy: ClassVar[str] = "oldest first"

    def __init__(self, provider: FileMemoryProvider, limits: TypeLimits | None = None) -> None:
        super().__init__(provider, limits)

    def content_type(self, item: MemoryItem) -> str:
        """Every item of this type is of its category."""
        return self.name

    def _item_key(self, item: MemoryItem) -> str:
        """Its ``key``, else its id, else a new one."""
        return item.key or item.id or new_id()

    async def records(self, **fields: Any) -> list[Record]:
        """Live records of this category."""
        return await super().records(content_types=(self.name,), **fields)

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Items of this category matching ``prompt``, best first, redacted unless ``raw``."""
        found = await self._search(prompt, limit, filters, content_types=(self.name,))
        return self.redacted(found, raw)


@cache
def category_memory_class(category: str) -> type[FileCategoryMemory]:
    """The memory type class of ``category`` (one class per category, named after it)."""
    return type(f"{category.title()}FileMemory", (FileCategoryMemory,), {"name": category})
