"""The memory-type registry: registration rules and types installed by other packages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from engramdb.core.errors import ConflictError, NotFoundError, ValidationError
from engramdb.orchestrator import memory_types
from engramdb.orchestrator.builtin_types import Attribute, register_builtins
from engramdb.orchestrator.memory_types import MemoryType, MemoryTypeRegistry


def test_built_ins_are_registered_like_any_type() -> None:
    registry = MemoryTypeRegistry()
    register_builtins(registry)
    assert registry.names() == [
        "working", "episodic", "semantic", "procedural", "conversation",
        "activity", "profile", "event",
    ]  # fmt: skip
    assert registry.get("semantic").title == "Known facts"
    assert registry.get("profile").title == "Profile (memory files)"
    assert sum(registry.shares().values()) == pytest.approx(1.3)
    register_builtins(registry)  # the same types again: nothing changes
    assert len(registry.names()) == 8


def test_registration_rules() -> None:
    registry = MemoryTypeRegistry([MemoryType("notes", Attribute("notes"))])
    with pytest.raises(ConflictError):
        registry.register(MemoryType("notes", Attribute("other")))
    registry.register(MemoryType("notes", Attribute("other")), replace=True)
    assert registry.get("notes").build == Attribute("other")
    with pytest.raises(NotFoundError) as missing:
        registry.get("nope")
    assert missing.value.details["choices"] == ["notes"]
    registry.unregister("notes")
    assert "notes" not in registry
    with pytest.raises(ValidationError):
        MemoryType("Not A Name", Attribute("x"))
    with pytest.raises(ValidationError):
        MemoryType("x", Attribute("x"), share=2.0)


@dataclass
class FakeEntryPoint:
    name: str
    loaded: Any

    def load(self) -> Any:
        if isinstance(self.loaded, Exception):
            raise self.loaded
        return self.loaded


def test_installed_packages_register_types_through_entry_points(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def adds_two(registry: MemoryTypeRegistry) -> None:
        registry.register(MemoryType("tickets", Attribute("tickets")))
        registry.register(MemoryType("contacts", Attribute("contacts")))

    points = [
        FakeEntryPoint("journal", MemoryType("journal", Attribute("journal"))),
        FakeEntryPoint("crm", adds_two),
        FakeEntryPoint("broken", ImportError("no such module")),
    ]
    monkeypatch.setattr(memory_types, "entry_points", lambda group: points)
    registry = MemoryTypeRegistry()
    registry.load_entry_points()
    assert registry.names() == ["journal", "tickets", "contacts"]
    assert "broken failed to load" in caplog.text
