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
#: Applies a target's pending schema migrations and returns their names.
Migrator = Callable[[str], Awaitable[list[str]]]
#: Creates a service login (target, login, password); returns whether it was created.
LoginMaker = Callable[[str, str, str | None], Awaitable[bool]]
_FACTORIES: dict[str, BackendFactory] = {}
_MIGRATORS: dict[str, Migrator] = {}
_LOGIN_MAKERS: dict[str, LoginMaker] = {}


def register_backend(
    scheme: str,
    factory: BackendFactory,
    migrator: Migrator | None = None,
    login_maker: LoginMaker | None = None,
) -> None:
    """Serve ``scheme://…`` targets with ``factory(target, options)``; ``migrator(target)``,
    if given, brings a target's schema up to date without opening it for work, and
    ``login_maker``, for a backend with logins of its own, creates a login that serves every
    tenant without any way past the one each transaction names."""
    _FACTORIES[scheme] = factory
    if migrator is not None:
        _MIGRATORS[scheme] = migrator
    if login_maker is not None:
        _LOGIN_MAKERS[scheme] = login_maker


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
    scheme, location = _known_scheme(target)
    return await _FACTORIES[scheme](location, options)


async def migrate_target(target: str | Path) -> list[str]:
    """Apply ``target``'s pending schema migrations, as its connecting user; returns the names
    applied (none when it is up to date). Opening a target migrates it too; this is for an
    operator who migrates once with a privileged login, so services may run without one.

    Raises:
        UnsupportedTargetError: no backend serves the target, or its backend has no separate
            migration step.
        MigrationError: a migration failed, or the target was migrated by a newer Engram.
    """
    scheme, location = _known_scheme(target)
    migrator = _MIGRATORS.get(scheme)
    if migrator is None:
        raise UnsupportedTargetError(
            f"{scheme!r} targets have no separate migration step", target=str(target)
        )
    return await migrator(location)


async def create_service_login(target: str | Path, login: str, password: str | None = None) -> bool:
    """Create the login ``login`` that a service of ``target`` connects as, which reaches one
    tenant at a time whatever it runs, as ``target``'s connecting user; returns whether it was
    created (``False``: it exists and is such a login already).

    Raises:
        UnsupportedTargetError: ``target``'s backend has no logins (SQLite).
        UsageError: the name is not a plain identifier, or the existing role has more rights.
        StorageError: the database refused (the connecting user may not create roles).
    """
    scheme, location = _known_scheme(target)
    maker = _LOGIN_MAKERS.get(scheme)
    if maker is None:
        raise UnsupportedTargetError(
            f"{scheme!r} targets have no logins of their own", target=str(target)
        )
    return await maker(location, login, password)


def _known_scheme(target: str | Path) -> tuple[str, str]:
    """(scheme, what its backend is given: a SQLite file path, else the whole target)."""
    scheme, rest = split_target(target)
    if scheme == "postgres":
        scheme = "postgresql"
    if scheme not in _FACTORIES:
        raise UnsupportedTargetError(
            f"no storage backend for {scheme!r} targets; known: {', '.join(schemes())}",
            target=str(target),
            scheme=scheme,
        )
    if scheme != "sqlite":
        return scheme, str(target)
    if not rest:
        raise UnsupportedTargetError("a SQLite target needs a file path or :memory:")
    return scheme, rest


async def _open_sqlite(path: str, options: dict[str, Any]) -> Backend:
    from engramdb.storage.sqlite import SqliteBackend

    return await SqliteBackend.open(path, **options)


async def _migrate_sqlite(path: str) -> list[str]:
    from engramdb.storage.sqlite.backend import migrate

    return await migrate(path)


def _postgres(url: str) -> Any:
    try:
        from engramdb.storage import postgres
    except ImportError as exc:  # psycopg is an optional dependency
        raise UnsupportedTargetError(
            "PostgreSQL targets need the postgres extra: pip install 'engramdb[postgres]'",
            target=url,
        ) from exc
    return postgres


def _libpq_url(url: str) -> str:
    # libpq knows postgresql:// and postgres://, not SQLAlchemy's postgresql+driver://.
    return "postgresql://" + url.split("://", 1)[1]


async def _open_postgres(url: str, options: dict[str, Any]) -> Backend:
    backend: Backend = await _postgres(url).PostgresBackend.open(_libpq_url(url), **options)
    return backend


async def _migrate_postgres(url: str) -> list[str]:
    applied: list[str] = await _postgres(url).migrate(_libpq_url(url))
    return applied


async def _postgres_login(url: str, login: str, password: str | None) -> bool:
    created: bool = await _postgres(url).create_service_login(
        _libpq_url(url), login, password=password
    )
    return created


register_backend("sqlite", _open_sqlite, _migrate_sqlite)
register_backend("postgresql", _open_postgres, _migrate_postgres, _postgres_login)
