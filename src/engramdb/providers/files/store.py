"""``FileStore``: the root folder of the memory files, shared by every scope's provider.

A scope's files live in ``<root>/<tenant>/users/<user>/`` (``<root>/<tenant>/shared/`` for a
scope without a user), one ``<category>.md`` per category. The store holds what all providers
over one root share: the configured categories and one lock per folder, so the writers of this
process take turns before they take the folder's file lock (which orders processes).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from engramdb.core.errors import InvalidScopeError, InvalidValueError
from engramdb.core.scope import Level, Scope
from engramdb.core.validation import validate_content_type
from engramdb.providers.files.folder import Folder, open_folder
from engramdb.providers.files.names import check_component

#: The categories of a MemU-style memory folder (rfc-2001 §11).
DEFAULT_CATEGORIES: tuple[str, ...] = ("activity", "profile", "event")
#: Memory files are kept per tenant and user: every agent of a user shares them.
FILE_LEVELS: tuple[Level, ...] = ("tenant", "user")
USERS = "users"
SHARED = "shared"
#: The longest root a memory folder may have, in bytes (Linux's ``PATH_MAX``).
MAX_ROOT_BYTES = 4096


def files_root(root: object) -> Path:
    """The absolute root folder of the memory files that ``root`` names, made if missing, so
    that a root no file could be written under is refused when the engine opens, not at the
    first write.

    Raises:
        InvalidValueError: ``root`` is not a path of text, is empty or longer than
            ``MAX_ROOT_BYTES``, holds a NUL or a lone surrogate, or names something that is
            not a folder and cannot be made one.
    """
    if not isinstance(root, str | os.PathLike):
        raise InvalidValueError("files must be a folder path", field="files")
    text = os.fspath(root)
    if not isinstance(text, str):
        raise InvalidValueError("files must be a folder path of text, not bytes", field="files")
    problem = _root_problem(text)
    if problem is not None:
        raise InvalidValueError(f"the memory files folder {problem}", field="files")
    path = Path(os.path.abspath(text))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, a file on the way, no permission, too long
        raise InvalidValueError(
            f"the memory files folder {text!r} is not a folder and cannot be made one: "
            f"{exc.strerror}",
            field="files",
        ) from exc
    return path


def check_category(name: str) -> str:
    """``name`` if it is a content type that may name a file, else a typed error."""
    validate_content_type(name)
    return check_component("category", name)


def _root_problem(text: str) -> str | None:
    """What makes ``text`` unfit to name the root folder, if anything."""
    if not text:
        return "is empty"
    if "\x00" in text:
        return "holds a NUL character"
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        return "is not UTF-8 text (a lone surrogate)"
    return f"is longer than {MAX_ROOT_BYTES} bytes" if size > MAX_ROOT_BYTES else None


class FileStore:
    """The root folder and the categories every scope's file provider uses."""

    def __init__(self, root: str | Path, categories: Sequence[str] = DEFAULT_CATEGORIES) -> None:
        self.root = files_root(root)
        self.categories = tuple(dict.fromkeys(check_category(c) for c in categories))
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    def parts(self, scope: Scope) -> tuple[str, ...]:
        """The folder names leading from the root to ``scope``'s files.

        Raises:
            UnsafePathError: the tenant or user cannot name a folder.
        """
        tenant = check_component("tenant", scope.tenant)
        if scope.user is None:
            return (tenant, SHARED)
        return (tenant, USERS, check_component("user", scope.user))

    def path(self, scope: Scope) -> Path:
        """Where ``scope``'s files are."""
        return self.root.joinpath(*self.parts(scope))

    @asynccontextmanager
    async def folder(self, parts: tuple[str, ...], *, create: bool) -> AsyncIterator[Folder | None]:
        """The folder ``parts`` opened and locked against every other writer (``None`` when it
        does not exist and ``create`` is off)."""
        lock = self._locks.setdefault(parts, asyncio.Lock())
        async with lock:
            opened = await asyncio.to_thread(open_folder, self.root, parts, create=create)
            try:
                yield opened
            finally:
                if opened is not None:
                    opened.close()

    def scopes(self) -> list[Scope]:
        """Every scope that has a folder under the root (folders that could not have been
        written by a provider, symlinks among them, are skipped)."""
        return [scope for scope, _ in self._folders()]

    def _folders(self) -> list[tuple[Scope, Path]]:
        found: list[tuple[Scope, Path]] = []
        for tenant in _plain_folders(self.root):
            base = self.root / tenant
            found += (
                [(Scope(tenant=tenant), base / SHARED)] if SHARED in _plain_folders(base) else []
            )
            if USERS in _plain_folders(base):
                found += [
                    (Scope(tenant=tenant, user=user), base / USERS / user)
                    for user in _plain_folders(base / USERS)
                ]
        return found

    def erase(self, chosen: Callable[[Scope], bool]) -> None:
        """Delete the folders of the ``chosen`` scopes, files and baselines alike (their
        records are gone: a user erased, a tenant deleted)."""
        for scope, path in self._folders():
            if chosen(scope):
                # rmtree works through descriptors here and never follows a symlink.
                shutil.rmtree(path, ignore_errors=True)


def _plain_folders(path: Path) -> list[str]:
    """The names of the folders in ``path`` that a provider could have made (not symlinks,
    not dot-folders, valid scope fields), sorted."""
    try:
        names = sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        entry = path / name
        if name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            Scope(tenant=name)
        except InvalidScopeError:
            continue
        found.append(name)
    return found
