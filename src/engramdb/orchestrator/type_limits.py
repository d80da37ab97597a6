"""``MemoryTypeLimits``: the capacity and lifetime limits of every memory type, as one value
of ``EngineConfig`` (``type_limits``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from engramdb.core.errors import ValidationError
from engramdb.orchestrator.conversation import DEFAULT_LIMITS as CONVERSATION_LIMITS
from engramdb.orchestrator.plugin import TypeLimits
from engramdb.orchestrator.working import DEFAULT_LIMITS as WORKING_LIMITS

_UNLIMITED = TypeLimits()


@dataclass(frozen=True)
class MemoryTypeLimits:
    """The ``TypeLimits`` of each memory type: how many items (``max_items``) and tokens
    (``max_tokens``) it keeps — past them it evicts, each type in its own order — and how long
    its items live unless they say otherwise (``default_ttl_ms``).

    By default working memory keeps 100 items and the conversation buffer 50 turns or 4,000
    tokens; the other types keep everything, for ever. Example::

        EngineConfig(type_limits=MemoryTypeLimits(
            working=TypeLimits(max_items=20, default_ttl_ms=3_600_000),
            episodic=TypeLimits(default_ttl_ms=90 * 86_400_000),
        ))
    """

    working: TypeLimits = WORKING_LIMITS
    episodic: TypeLimits = _UNLIMITED
    semantic: TypeLimits = _UNLIMITED
    procedural: TypeLimits = _UNLIMITED
    conversation: TypeLimits = CONVERSATION_LIMITS

    def __post_init__(self) -> None:
        for each in fields(self):
            value = getattr(self, each.name)
            if not isinstance(value, TypeLimits):
                raise ValidationError(
                    f"the limits of {each.name} memory must be a TypeLimits, got "
                    f"{type(value).__name__}",
                    field=each.name,
                )
