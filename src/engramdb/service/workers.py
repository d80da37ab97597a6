"""``engram serve --workers N``: N server processes on one PostgreSQL database.

uvicorn starts each worker as a fresh process that imports the application by name, so the
command's choices travel to the workers in one environment variable and every worker builds
its own application, engine, connection pool and embedding model from them.

SQLite targets serve from one process: a second process over the same file would keep its own
in-memory vector index and graph working copy beside the first one's, and SQLite lets one
writer in at a time anyway, so more processes would only queue.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

from engramdb.core.errors import UsageError
from engramdb.service.settings import ServiceSettings
from engramdb.storage.registry import split_target

if TYPE_CHECKING:
    from fastapi import FastAPI

    from engramdb.engine import EngineConfig

#: The environment variable that carries the workers' settings (JSON).
SPEC_VARIABLE = "ENGRAM_SERVE_WORKER_SPEC"
#: What uvicorn imports in each worker.
FACTORY = "engramdb.service.workers:app_from_environment"


def check_workers(target: str, workers: int) -> None:
    """Refuse ``workers`` processes on ``target`` where they cannot share it.

    Raises:
        UsageError: fewer than one worker, or more than one on a SQLite target.
    """
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    if workers > 1 and split_target(target)[0] == "sqlite":
        raise UsageError(
            "--workers above 1 needs a PostgreSQL database: a SQLite file is served by one "
            "process (each would keep its own vector index, and SQLite admits one writer)"
        )


def engine_config(*, vectors: bool, auto_formation: bool, files: str | None = None) -> EngineConfig:
    """The engine settings of ``engram serve``'s ``--vectors`` and ``--auto-formation``, and
    of the global ``--files`` (the memory files, whose categories are memory types)."""
    from engramdb.engine import EngineConfig

    return EngineConfig(
        embedder="default" if vectors else None,
        formation="auto" if auto_formation else "manual",
        files=files,
    )


def worker_environment(
    settings: ServiceSettings,
    target: str,
    *,
    vectors: bool,
    auto_formation: bool,
    files: str | None = None,
) -> str:
    """The value of ``SPEC_VARIABLE`` that makes workers serve ``target`` with ``settings``."""
    spec = {
        "settings": dataclasses.asdict(settings),
        "db": target,
        "vectors": vectors,
        "auto_formation": auto_formation,
        "files": files,
    }
    return json.dumps(spec, separators=(",", ":"))


def app_from_environment() -> FastAPI:
    """The application one worker serves, built from ``SPEC_VARIABLE`` (uvicorn's factory).

    Raises:
        UsageError: the variable is missing (this was not started by ``engram serve``).
    """
    from engramdb.service.app import create_app

    raw = os.environ.get(SPEC_VARIABLE)
    if raw is None:
        raise UsageError(f"{SPEC_VARIABLE} is not set: start workers with engram serve --workers")
    spec: dict[str, Any] = json.loads(raw)
    config = engine_config(
        vectors=spec["vectors"], auto_formation=spec["auto_formation"], files=spec.get("files")
    )
    return create_app(ServiceSettings(**spec["settings"]), db=spec["db"], config=config)
