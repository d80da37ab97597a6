"""The partition token of the full-text index: one word per (namespace, scope) partition.

FTS5 cannot be partitioned, and ranking by ``bm25()`` scores every document that holds a query
word before the best ones are known. A memory type with 200 rules in a file of 100,000 turns
would pay for all 100,000. Every indexed document therefore carries one more word, spelled from
its partition, and a search within a partition asks for that word too: FTS5 intersects the
two posting lists and scores only what is left.

The word is ``p`` followed by the hex digits of the partition's columns joined by U+001F, the
same in SQL (for the stored column) and in Python (for the query). Scope fields never hold a
control character, so the five after the namespace are the last five pieces between
separators, whatever the namespace holds: no two partitions share a token.
"""

from __future__ import annotations

_SEPARATOR = "\x1f"
_COLUMNS = ("namespace", "tenant", "user_id", "agent", "session", "plan")

#: The generated column's expression over ``records``.
PARTITION_TOKEN_SQL = "'p' || lower(hex(" + " || char(31) || ".join(_COLUMNS) + "))"


def partition_token(namespace: str, columns: tuple[str, ...]) -> str:
    """The token of the partition ``namespace`` + scope ``columns`` (as stored)."""
    return "p" + _SEPARATOR.join((namespace, *columns)).encode("utf-8").hex()
