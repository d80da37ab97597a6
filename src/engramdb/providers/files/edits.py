"""How a rescan reads blocks against records (pure functions): which blocks a person
edited (a block's category, value, metadata, ``ttl_ms`` and ``occurred_at``; its other times
are informational), whether a block says what a record holds, and how a record is rendered.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from engramdb.core.errors import MemoryFileError
from engramdb.providers.files.folder import SUFFIX
from engramdb.providers.files.markdown import Block, parse_file
from engramdb.storage.records import Record

log = logging.getLogger("engramdb.providers.files")


def record_block(record: Record) -> Block:
    """The block a stored record is rendered as."""
    info: dict[str, Any] = {
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
        "occurred_at": record.occurred_at.isoformat() if record.occurred_at else None,
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
        "ttl_ms": record.ttl_ms,
    }
    return Block(record.key, record.value, record.metadata, info)


def occurred(block: Block) -> datetime | None:
    """When the block's memory happened, as its engram line says (``None``: unsaid)."""
    text = block.info.get("occurred_at")
    if text is None:
        return None
    try:
        return datetime.fromisoformat(str(text))
    except ValueError as exc:
        raise MemoryFileError(f"occurred_at {text!r} is not an ISO time", key=block.key) from exc


def ttl(block: Block) -> Any:
    """The block's ``ttl_ms`` (checked when it is written)."""
    return block.info.get("ttl_ms")


def same(block: Block, category: str, record: Record) -> bool:
    """Whether ``block`` in ``category`` says what ``record`` holds."""
    return (
        record.content_type == category
        and record.value == block.value
        and record.metadata == block.metadata
        and record.ttl_ms == ttl(block)
        and record.occurred_at == occurred(block)
    )


def edit(block: Block) -> tuple[Any, dict[str, Any], Any, Any]:
    """What of a block a person's edit can change (times other than ``occurred_at`` are
    informational)."""
    return (block.value, block.metadata, ttl(block), block.info.get("occurred_at"))


def view(found: tuple[str, Block] | None) -> tuple[Any, ...] | None:
    """What of a block (and its category) a person's edit can change."""
    return None if found is None else (found[0], *edit(found[1]))


def by_key(files: dict[str, list[Block]]) -> dict[str, tuple[str, Block]]:
    """Every block by key, with its category; a key in two files is a ``MemoryFileError``."""
    found: dict[str, tuple[str, Block]] = {}
    for category, blocks in sorted(files.items()):
        for block in blocks:
            if block.key in found:
                raise MemoryFileError(
                    f"key {block.key!r} is in both {found[block.key][0]}{SUFFIX} and "
                    f"{category}{SUFFIX}",
                    key=block.key,
                )
            found[block.key] = (category, block)
    return found


def parse(text: str | None, name: str) -> list[Block]:
    """The blocks of category ``name``'s file text (none when there is no file)."""
    return [] if text is None else parse_file(text, name + SUFFIX)


def baseline(text: str | None, name: str) -> list[Block]:
    """The blocks of a baseline; one a crash left unreadable reads as empty (the file's
    blocks then count as added and are compared with the records: only a removal made since
    that render goes unnoticed, and its block is rendered again)."""
    try:
        return parse(text, name)
    except MemoryFileError:
        log.warning("the baseline of %s%s is unreadable; read as empty", name, SUFFIX)
        return []
