"""Which database a command opens: the ``--db`` given, or the default file.

A path given on the command line must lead to an existing folder, so that a mistyped path is
refused instead of becoming a new, empty database; only the default location is created.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import platformdirs

from engramdb.core.errors import ValidationError


def default_db() -> Path:
    """Where the CLI keeps its database unless told otherwise."""
    return Path(platformdirs.user_data_dir("engram")) / "engram.db"


def sqlite_path(target: str) -> Path | None:
    """The file of a SQLite target (a plain path or ``sqlite:///…``), else ``None``."""
    if target == ":memory:":
        return None
    scheme, sep, rest = target.partition("://")
    if not sep:
        return Path(target)
    if scheme.split("+", 1)[0].lower() != "sqlite":
        return None
    # sqlite:///relative.db and sqlite:////abs/path.db, as SQLAlchemy spells them.
    return Path(rest[1:] if rest.startswith("/") else rest)


def resolve_target(given: str | None) -> str:
    """The database to open: ``given`` as it is, checked, or the default file, whose folder is
    made on first use.

    Raises:
        ValidationError: ``given`` is a SQLite file in a folder that does not exist, or a
            folder itself.
    """
    if given is None:
        default = default_db()
        default.parent.mkdir(parents=True, exist_ok=True)
        return str(default)
    path = sqlite_path(given)
    if path is not None:
        if path.is_dir():
            raise ValidationError(f"--db {given} is a folder: name a database file in it")
        if not path.parent.is_dir():
            raise ValidationError(
                f"--db {given}: there is no folder {path.parent} (create it first, "
                "or check the path)"
            )
    return given


def describe_target(target: str) -> str:
    """The database for a person to read: a file's absolute path, a URL without password."""
    path = sqlite_path(target)
    if path is not None:
        return str(path.resolve())
    if target == ":memory:":
        return "in memory (lost on exit)"
    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}"))
