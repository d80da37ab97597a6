"""The scale-out PostgreSQL + pgvector backend (install the ``postgres`` extra)."""

from engramdb.storage.postgres.backend import PostgresBackend, migrate
from engramdb.storage.postgres.event_store import PostgresEventStore
from engramdb.storage.postgres.logins import create_service_login
from engramdb.storage.postgres.search import PostgresSearch

__all__ = [
    "PostgresBackend",
    "PostgresEventStore",
    "PostgresSearch",
    "create_service_login",
    "migrate",
]
