"""Leases on pending formations: which engine forms a turn when several share one store.

A pending formation record (``formation.auto``) is formed by the engine that *claims* it: the
claim is a new version of the record naming its holder and when its lease ends
(``claimed_by``, ``claimed_until``), written by ``EventSourcedProvider.update``, which locks
the record (``SELECT … FOR UPDATE`` on PostgreSQL, the single writer on SQLite) and decides on
what it holds. Of two engines claiming one record, the second sees the first's live lease and
leaves the record alone. A lease that has ended (its holder was killed, or stalled past it)
is taken over by the next engine to look; a holder whose formation fails, or that closes
mid-way, gives its claim up at once. The holder deletes the record only at the version
its claim wrote, so an engine whose lease was taken over does not delete what the new holder
is forming; forming twice is harmless anyway (``Consolidator`` writes each fact only over the
version it decided on).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from engramdb.core.events import new_id
from engramdb.core.types import utc_now
from engramdb.providers.event_sourced import WriteRequest
from engramdb.storage.records import Record

__all__ = ["Held", "Lease", "claim_change", "holder_name", "lease_of", "release_change"]


@dataclass(frozen=True)
class Lease:
    """Who holds a pending formation, and until when."""

    holder: str
    until: datetime


class Held(Exception):
    """The pending formation is held by another engine until ``until``."""

    def __init__(self, until: datetime) -> None:
        super().__init__(f"held until {until.isoformat()}")
        self.until = until


def holder_name() -> str:
    """A name of this engine's own, readable in the log (host and process, then unique)."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()}"


def lease_of(record: Record) -> Lease | None:
    """The lease ``record`` carries, if it was claimed."""
    value = record.value if isinstance(record.value, dict) else {}
    holder, until = value.get("claimed_by"), value.get("claimed_until")
    if not isinstance(holder, str) or not isinstance(until, str):
        return None
    return Lease(holder, datetime.fromisoformat(until))


def claim_change(holder: str, lease_s: float) -> Callable[[Record], WriteRequest]:
    """The change of ``EventSourcedProvider.update`` that claims a record for ``holder`` for
    ``lease_s`` seconds; it raises ``Held`` (writing nothing) while another holds a live
    lease. Decided on the locked record, so two claimants cannot both win."""

    def change(record: Record) -> WriteRequest:
        now = utc_now()
        lease = lease_of(record)
        if lease is not None and lease.holder != holder and lease.until > now:
            raise Held(lease.until)
        value = dict(record.value) if isinstance(record.value, dict) else {}
        value["claimed_by"] = holder
        value["claimed_until"] = (now + timedelta(seconds=lease_s)).isoformat()
        return WriteRequest(key=record.key, value=value, content_type=record.content_type)

    return change


def release_change(holder: str) -> Callable[[Record], WriteRequest]:
    """The change that gives up ``holder``'s claim (a formation that failed, or an engine
    closing mid-way), so the next engine to look need not wait for the lease to end; it raises
    ``Held`` if the claim is no longer ``holder``'s."""

    def change(record: Record) -> WriteRequest:
        lease = lease_of(record)
        if lease is None or lease.holder != holder:
            raise Held(lease.until if lease is not None else utc_now())
        value = {k: v for k, v in record.value.items() if k not in ("claimed_by", "claimed_until")}
        return WriteRequest(key=record.key, value=value, content_type=record.content_type)

    return change
