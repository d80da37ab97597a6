"""Which backend serves an ``open()`` target: one registration mechanism, built-ins included.

A target is a plain file path (SQLite), ``:memory:``, or a URL whose scheme names a backend
(``sqlite:///path``, ``postgresql://…``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from engramdb.core.errors import UnsupportedTargetError
from engramdb.storage.backend import Backend

BackendFactory = Callable[[str, dict[str, Any]], Awaitable[Backend]]
_FACTORIES: dict[str, BackendFactory] = {}


def register_backend(scheme: str, factory: BackendFactory) -> None:
    """Serve ``scheme://…`` targets with ``factory(target, options)``."""
    _FACTORIES[scheme] = factory


def schemes() -> list[str]:
    """URL schemes with a registered backend."""
    return sorted(_FACTORIES)


def split_target(target: str | Path) -> tuple[str, str]:
    """(scheme, rest) of a target; plain paths and ``:memory:`` are SQLite."""
    text = str(target)
    if "://" not in text:
        return "sqlite", text
    scheme, rest = text.split("://", 1)
    scheme = scheme.split("+", 1)[0].lower()
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////abs/path.db, as SQLAlchemy spells them.
        rest = rest[1:] if rest.startswith("/") else rest
    return scheme, rest


async def open_backend(target: str | Path, **options: Any) -> Backend:
    """Open the backend for ``target``.

    Raises:
        UnsupportedTargetError: no backend serves the target's scheme.
    """
    scheme, rest = split_target(target)
    if scheme == "postgres":
        scheme = "postgresql"
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise UnsupportedTargetError(
            f"no storage backend for {scheme!r} targets; known: {', '.join(schemes())}",
            target=str(target),
            scheme=scheme,
        )
    return await factory(rest if scheme == "sqlite" else str(target), options)


async def _open_sqlite(path: str, options: dict[str, Any]) -> Backend:
    from engramdb.storage.sqlite import SqliteBackend

    if not path:
        raise UnsupportedTargetError("a SQLite target needs a file path or :memory:")
    return await SqliteBackend.open(path, **options)


async def _open_postgres(url: str, options: dict[str, Any]) -> Backend:
    try:
        from engramdb.storage.postgres import PostgresBackend
    except ImportError as exc:  # psycopg is an optional dependency
        raise UnsupportedTargetError(
            "PostgreSQL targets need the postgres extra: pip install 'engramdb[postgres]'",
            target=url,
        ) from exc
    # libpq knows postgresql:// and postgres://, not SQLAlchemy's postgresql+driver://.
    return await PostgresBackend.open("postgresql://" + url.split("://", 1)[1], **options)


register_backend("sqlite", _open_sqlite)
register_backend("postgresql", _open_postgres)
