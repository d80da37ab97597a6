"""``MemoryTypeRegistry``: the memory types an engine knows (the plugin interface's Memory Type
Registry), built-ins included.

A ``MemoryType`` says how a scope gets its plugin (``build``), where its items go in an
assembled context (``heading``, budget ``share``, how it is asked: ``lookup``) and, when it
keeps its items in a namespace of its own, that namespace (``spec``: rebuilt from the log and
joined to the scope's ``MemoryManager``, so unified recall finds its items). Everything that
lists memory types — ``ScopedMemory.assemble``, ``ScopedMemory.type``, the CLI's ``-t``, the
inspector's recall — reads this registry, so a type registered here needs no edit elsewhere.

A scope reads the registry as it is used, so a type registered later takes part in its
``assemble`` and ``memory_type``; its namespace joins the manager of scopes made after the
registration (a manager's providers are fixed when the scope is made).

The default registry (``default_registry()``) holds the five built-in types, the categories of
the file provider and whatever installed packages declare under the ``engramdb.memory_types``
entry-point group (a ``MemoryType``, or a callable taking the registry). This module stays
light: the CLI reads the names of the types at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from engramdb.core.errors import ConflictError, NotFoundError, ValidationError
from engramdb.core.validation import validate_content_type

if TYPE_CHECKING:
    from engramdb.core.intent import MemoryItem
    from engramdb.orchestrator.plugin import MemoryPlugin
    from engramdb.providers.projection import ProjectionSpec

ENTRY_POINT_GROUP = "engramdb.memory_types"

#: How ``assemble`` asks a type's plugin for candidates: (plugin, prompt, how many, now); it
#: reads raw, as ``assemble`` redacts.
TypeLookup = Callable[[Any, str, int, "datetime | None"], Awaitable[list["MemoryItem"]]]
#: How a scope gets a type's plugin, or ``None`` when this engine does not offer it (a file
#: category of an engine without memory files). Takes the ``ScopedMemory``.
TypeBuilder = Callable[[Any], "MemoryPlugin | None"]

log = logging.getLogger("engramdb.memory_types")


async def remember_lookup(
    plugin: Any, prompt: str, limit: int, now: datetime | None
) -> list[MemoryItem]:
    """The default lookup: the plugin's ``remember``, raw (``assemble`` redacts every item
    itself, and counts what it redacted)."""
    found: list[MemoryItem] = await plugin.remember(prompt, limit=limit, raw=True)
    return found


@dataclass(frozen=True)
class MemoryType:
    """One memory type: its name and how the engine uses it.

    Attributes:
        name: the type's name (a lowercase identifier): the CLI's ``-t`` choice and the
            context section's key.
        build: makes the type's plugin for a ``ScopedMemory`` (``None``: not offered there).
        heading: the title of its section in an assembled context.
        share: its default share of the context's token budget.
        lookup: how ``assemble`` asks it (default: ``remember``).
        spec: the namespace it stores in, when it is its own.
        description: one line for help texts.
    """

    name: str
    build: TypeBuilder
    heading: str = ""
    share: float = 0.1
    lookup: TypeLookup = remember_lookup
    spec: ProjectionSpec | None = None
    description: str = ""

    def __post_init__(self) -> None:
        validate_content_type(self.name)
        if not 0.0 <= self.share <= 1.0:
            raise ValidationError("a memory type's share must be in [0, 1]", share=self.share)

    @property
    def title(self) -> str:
        """Its section heading (the name, titled, unless it has one)."""
        return self.heading or self.name.replace("_", " ").title()


class MemoryTypeRegistry:
    """Memory types by name, in registration order."""

    def __init__(self, types: list[MemoryType] | None = None) -> None:
        self._types: dict[str, MemoryType] = {}
        for memory_type in types or []:
            self.register(memory_type)

    def register(self, memory_type: MemoryType, *, replace: bool = False) -> MemoryType:
        """Add ``memory_type``; registering an equal type again is a no-op.

        Raises:
            ConflictError: another type holds the name (pass ``replace=True`` to swap it).
        """
        current = self._types.get(memory_type.name)
        if current is not None and current != memory_type and not replace:
            raise ConflictError(
                f"memory type {memory_type.name!r} is already registered", name=memory_type.name
            )
        self._types[memory_type.name] = memory_type
        return memory_type

    def unregister(self, name: str) -> None:
        """Remove the type ``name`` (no error if there is none)."""
        self._types.pop(name, None)

    def get(self, name: str) -> MemoryType:
        """The type ``name``.

        Raises:
            NotFoundError: no such type (``details["choices"]`` lists the known ones).
        """
        found = self._types.get(name)
        if found is None:
            raise NotFoundError(
                f"no memory type {name!r}; known: {', '.join(self._types)}",
                name=name,
                choices=list(self._types),
            )
        return found

    def names(self) -> list[str]:
        """The names of every type, in registration order."""
        return list(self._types)

    def shares(self) -> dict[str, float]:
        """Every type's default share of the token budget."""
        return {t.name: t.share for t in self._types.values()}

    def headings(self) -> dict[str, str]:
        """Every type's section heading."""
        return {t.name: t.title for t in self._types.values()}

    def specs(self) -> list[ProjectionSpec]:
        """The namespaces types store in of their own."""
        return [t.spec for t in self._types.values() if t.spec is not None]

    def __iter__(self) -> Iterator[MemoryType]:
        return iter(list(self._types.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def load_entry_points(self) -> None:
        """Register the types installed packages declare (a broken one is logged, skipped)."""
        for point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = point.load()
                if isinstance(loaded, MemoryType):
                    self.register(loaded)
                else:
                    loaded(self)
            except Exception:
                log.exception("memory type entry point %s failed to load", point.name)


_DEFAULT: MemoryTypeRegistry | None = None


def default_registry() -> MemoryTypeRegistry:
    """The process's registry: built-ins, file categories and installed types."""
    global _DEFAULT
    if _DEFAULT is None:
        from engramdb.orchestrator.builtin_types import register_builtins

        registry = MemoryTypeRegistry()
        register_builtins(registry)
        registry.load_entry_points()
        _DEFAULT = registry
    return _DEFAULT


def register_memory_type(memory_type: MemoryType, *, replace: bool = False) -> MemoryType:
    """Add ``memory_type`` to the default registry (see ``MemoryTypeRegistry.register``)."""
    return default_registry().register(memory_type, replace=replace)
