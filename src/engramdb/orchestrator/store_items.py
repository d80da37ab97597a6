"""The namespace of document-store items (``STORE_ITEMS_SPEC``): values filed under a
hierarchical namespace and a key, as agent frameworks' key/value stores keep them (the
LangGraph store of ``engramdb.integrations.langgraph`` is one).

A record's value wraps the item: ``{"namespace": [...], "key": ..., "value": {...}, "texts":
[...]}``, where ``texts`` are the parts of the value chosen for search when it was written.
Its full-text key and vectors are computed from those texts alone, so a rebuild from the log
indexes every item exactly as its writer chose.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engramdb.core.scope import PERSISTENT_LEVELS
from engramdb.providers.projection import ProjectionSpec

NAMESPACE = "store_items"
#: The content type of every store item.
CONTENT_TYPE = "store_item"


def indexed_texts(value: Any) -> list[str]:
    """The texts a stored item wrapper chose for search (none for an unindexed item)."""
    texts = value.get("texts") if isinstance(value, dict) else None
    return [t for t in texts if isinstance(t, str)] if isinstance(texts, list) else []


def item_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The full-text key of an item: its indexed texts, lowercased."""
    return " ".join(indexed_texts(value)).lower()


def item_embed_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The text of an item's whole vector: its indexed texts together."""
    return " ".join(indexed_texts(value))


def item_embed_parts(key: str, value: Any, occurred_at: datetime | None) -> list[str]:
    """An item with several indexed texts gets a vector for each (the best one counts)."""
    texts = indexed_texts(value)
    return texts if len(texts) > 1 else []


STORE_ITEMS_SPEC = ProjectionSpec(
    NAMESPACE,
    PERSISTENT_LEVELS,
    key_text=item_key_text,
    vectors=True,
    embed_text=item_embed_text,
    embed_parts=item_embed_parts,
)
