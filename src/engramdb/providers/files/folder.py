"""One scope's folder of memory files, opened so nothing can lead outside the root.

Every folder below the root is opened by name relative to its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY``, and every file relative to its folder's descriptor with
``O_NOFOLLOW``: a symlink anywhere on the way (planted before or swapped in while the provider
runs) is refused with ``UnsafePathError`` instead of followed. Writes are atomic: a temporary
file in the same folder, written and fsynced, renamed over the old one, the folder fsynced.

The folder keeps a ``.engram/`` state folder: an exclusive ``flock`` on ``.engram/lock`` orders
the writers of several processes, and ``.engram/<category>.md`` holds each file as last
rendered (the baseline a rescan compares a person's edits against).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path

from engramdb.core.errors import UnsafePathError

STATE = ".engram"
SUFFIX = ".md"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refused(name: str, exc: OSError) -> UnsafePathError:
    return UnsafePathError(f"{name!r} is a symlink or not a plain folder or file", path=name)


def _open_dir(parent: int, name: str, create: bool) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(name, exc) from exc
        raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(name, exc) from exc
        raise


class Folder:
    """An open, locked scope folder; ``close()`` releases the lock."""

    def __init__(self, fd: int, state: int, lock: int) -> None:
        self.fd = fd
        self.state = state
        self._lock = lock

    def _dir(self, baseline: bool) -> int:
        return self.state if baseline else self.fd

    def read(self, name: str, *, baseline: bool = False) -> str | None:
        """The text of file ``name`` (or of its baseline), ``None`` if there is none."""
        try:
            # O_NONBLOCK: a FIFO planted under a category's name must not hang the read.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(name, flags, dir_fd=self._dir(baseline))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refused(name, exc) from exc
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise UnsafePathError(f"{name!r} is not a plain file", path=name)
            return handle.read().decode("utf-8", errors="replace")

    def write(self, name: str, text: str, *, baseline: bool = False) -> None:
        """Replace file ``name`` with ``text`` atomically (temp file, fsync, rename, fsync of
        the folder).

        A baseline is replaced atomically but not synced: written after its file was made
        durable, it can only be lost or left behind by a crash, never get ahead of the file,
        and a baseline behind its file makes a rescan see edits equal to the records, which
        change nothing (an unreadable one reads as empty).
        """
        durable = not baseline
        folder = self._dir(baseline)
        temporary = f".{name}.{uuid.uuid4().hex}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o644, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
                if durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            raise
        if durable:
            os.fsync(folder)

    def remove(self, name: str, *, baseline: bool = False) -> None:
        """Delete file ``name`` if it exists."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self._dir(baseline))

    def names(self, *, baseline: bool = False) -> list[str]:
        """The markdown files of the folder (or of its baselines), without their suffix."""
        return sorted(
            entry[: -len(SUFFIX)]
            for entry in os.listdir(self._dir(baseline))
            if entry.endswith(SUFFIX) and not entry.startswith(".")
        )

    def close(self) -> None:
        """Release the lock and the descriptors."""
        for fd in (self._lock, self.state, self.fd):
            os.close(fd)


def open_folder(root: Path, parts: Sequence[str], *, create: bool) -> Folder | None:
    """Open and lock ``root/parts...``; ``None`` if it does not exist and ``create`` is off.

    Blocks until no other writer holds the folder's lock: call it from a worker thread.

    Raises:
        UnsafePathError: a folder on the way, or the state folder, is a symlink.
    """
    if create:
        root.mkdir(parents=True, exist_ok=True)
    try:
        current = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        for part in (*parts, STATE):
            opened = _open_dir(current, part, create)
            os.close(current)
            if opened is None:
                return None
            current = opened
        state = current
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            lock = os.open("lock", flags, 0o644, dir_fd=state)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refused("lock", exc) from exc
            raise
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder_fd = os.open("..", _DIR_FLAGS, dir_fd=state)
    except BaseException:
        os.close(current)
        raise
    return Folder(folder_fd, state, lock)
