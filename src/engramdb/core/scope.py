"""``Scope``: whose memory a record is, carried by every stored record and every event.

A scope names five levels: tenant, user, agent, session and plan. A provider keeps its records
in a *partition*: the writer's scope narrowed to the levels that provider keys by (persistent
memory by tenant, user and agent, so it outlives the session; working memory by every level).
Reads match a partition exactly, so a record is never visible outside the partition it was
written to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from pydantic import ConfigDict, field_validator

from engramdb.core.errors import InvalidScopeError
from engramdb.core.model import EngramModel
from engramdb.core.validation import check_text

Level = Literal["tenant", "user", "agent", "session", "plan"]
LEVELS: tuple[Level, ...] = get_args(Level)
PERSISTENT_LEVELS: tuple[Level, ...] = ("tenant", "user", "agent")

DEFAULT_TENANT = "default"
_MAX_FIELD = 128
# Printable, no whitespace at the ends and no control characters: scope fields end up in SQL
# parameters, URLs and file names, so they stay plain.
_FIELD = re.compile(r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?$")


def _check_field(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidScopeError(f"scope {name} must be a string", field=name)
    if value == "":
        return None
    if len(value) > _MAX_FIELD or not _FIELD.fullmatch(value):
        raise InvalidScopeError(
            f"scope {name} must be 1-{_MAX_FIELD} printable characters without surrounding "
            f"whitespace, got {value!r}",
            field=name,
        )
    return check_text(value, what=f"scope {name}", error=InvalidScopeError)


class Scope(EngramModel):
    """Whose memory this is. Unset levels are ``None``; the tenant is always set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = DEFAULT_TENANT
    user: str | None = None
    agent: str | None = None
    session: str | None = None
    plan: str | None = None

    @field_validator("tenant", mode="before")
    @classmethod
    def _tenant(cls, value: object) -> str:
        checked = _check_field("tenant", value if value is None else str(value))
        if checked is None:
            raise InvalidScopeError("scope tenant must not be empty", field="tenant")
        return checked

    @field_validator("user", "agent", "session", "plan", mode="before")
    @classmethod
    def _level(cls, value: object) -> str | None:
        if value is not None and not isinstance(value, str):
            raise InvalidScopeError("scope fields must be strings", value=repr(value))
        return _check_field("level", value)

    def narrow(self, levels: Iterable[Level]) -> Scope:
        """This scope with every level outside ``levels`` unset (the tenant is always kept)."""
        return _narrowed(self, frozenset(levels) | {"tenant"})

    def columns(self) -> tuple[str, str, str, str, str]:
        """The five levels as storage columns, unset levels as empty strings."""
        return (
            self.tenant,
            self.user or "",
            self.agent or "",
            self.session or "",
            self.plan or "",
        )

    @classmethod
    def from_columns(cls, tenant: str, user: str, agent: str, session: str, plan: str) -> Scope:
        """Inverse of :meth:`columns`."""
        return cls(
            tenant=tenant,
            user=user or None,
            agent=agent or None,
            session=session or None,
            plan=plan or None,
        )

    def label(self) -> str:
        """A short human-readable form, e.g. ``acme/alice/helper/s-1``."""
        return "/".join(part for part in self.columns() if part) or self.tenant


@lru_cache(maxsize=4096)
def _narrowed(scope: Scope, keep: frozenset[Level]) -> Scope:
    # Every write narrows its scope to a partition, mostly the same one: validated once.
    if all(getattr(scope, level) is None for level in LEVELS if level not in keep):
        return scope
    return Scope(**{level: getattr(scope, level) for level in LEVELS if level in keep})


@dataclass(frozen=True)
class ScopeFilter:
    """Matches scopes that agree with ``scope`` on exactly the given ``levels``."""

    scope: Scope
    levels: tuple[Level, ...] = LEVELS

    def __post_init__(self) -> None:
        # Isolation: no filter ever spans tenants.
        if "tenant" not in self.levels:
            object.__setattr__(self, "levels", ("tenant", *self.levels))

    def conditions(self) -> list[tuple[Level, str]]:
        """(level, column value) pairs a matching record must have."""
        columns = dict(zip(LEVELS, self.scope.columns(), strict=True))
        return [(level, columns[level]) for level in LEVELS if level in self.levels]

    def matches(self, scope: Scope) -> bool:
        """Whether ``scope`` falls inside this filter."""
        other = dict(zip(LEVELS, scope.columns(), strict=True))
        return all(other[level] == value for level, value in self.conditions())
