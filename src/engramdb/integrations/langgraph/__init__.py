"""LangGraph's store on Engram: ``EngramStore``, a ``langgraph.store.base.BaseStore`` on
either backend (``pip install 'engramdb[langgraph]'``)."""

from __future__ import annotations

try:
    import langgraph.store.base  # noqa: F401 - fails early with the install hint
except ImportError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError(
        "engramdb.integrations.langgraph needs LangGraph: pip install 'engramdb[langgraph]'"
    ) from exc

from engramdb.integrations.langgraph.store import EngramStore

__all__ = ["EngramStore"]
