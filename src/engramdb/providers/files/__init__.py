"""File-based (MemU-style) memory: one folder per scope, one markdown file per category.

``FileMemoryProvider`` is the provider, ``FileStore`` the root folder its scopes share
(``files_root`` checks and makes it),
``RescanReport`` what ``rescan()`` took in from a person's edits.
"""

from engramdb.providers.files.provider import (
    FILES_PROVIDER_ID,
    FILES_SPEC,
    FileMemoryProvider,
    RescanReport,
)
from engramdb.providers.files.store import DEFAULT_CATEGORIES, FILE_LEVELS, FileStore, files_root

__all__ = [
    "DEFAULT_CATEGORIES",
    "FILES_PROVIDER_ID",
    "FILES_SPEC",
    "FILE_LEVELS",
    "FileMemoryProvider",
    "FileStore",
    "RescanReport",
    "files_root",
]
