"""The blocking machinery, kept in ``engramdb.core.portal`` so that the REST client's blocking
twin needs no more of the engine than the client does."""

from engramdb.core.portal import (
    Portal,
    SyncView,
    blocking,
    invoke,
    iterating,
    mirrored,
    view,
    viewing,
)

__all__ = ["Portal", "SyncView", "blocking", "invoke", "iterating", "mirrored", "view", "viewing"]
