"""``engram admin`` through typer's CliRunner on a real SQLite file, and ``engram serve``'s
refusals of bad options."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import engramdb
from engramdb.cli.app import app
from engramdb.client import MemoryClient
from engramdb.core.errors import PermissionDeniedError
from engramdb.engine import Engine, EngineConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.service.conftest import JWT_SECRET


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


def invoke(cli: CliRunner, db: Path, *args: str) -> str:
    result = cli.invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_tenant_user_key_lifecycle(cli: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "admin.db"
    assert "created tenant acme" in invoke(cli, db, "admin", "tenant", "create", "acme")
    invoke(cli, db, "admin", "tenant", "create", "globex", "--name", "Globex")
    listed = json.loads(invoke(cli, db, "--json", "admin", "tenant", "list"))
    assert [(t["tenant_id"], t["name"]) for t in listed] == [("acme", ""), ("globex", "Globex")]
    assert "acme" in invoke(cli, db, "admin", "tenant", "list")
    assert "created user alice" in invoke(cli, db, "admin", "user", "create", "acme", "alice")
    made = json.loads(
        invoke(cli, db, "--json", "admin", "key", "create", "acme", "--user", "alice")
    )
    assert made["api_key"].startswith(f"ek_{made['key_id']}_")

    async def verify() -> str | None:
        async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
            return (await engine.tenancy.verify_key(made["api_key"])).user_id

    assert asyncio.run(verify()) == "alice"
    assert "shown once" in invoke(cli, db, "admin", "key", "create", "acme", "--role", "reader")
    assert "revoked" in invoke(cli, db, "admin", "key", "revoke", made["key_id"])
    invoke(cli, db, "admin", "user", "create", "acme", "bob")
    users = json.loads(invoke(cli, db, "--json", "admin", "user", "list", "acme"))
    assert [u["user_id"] for u in users] == ["alice", "bob"]
    erased = json.loads(
        invoke(cli, db, "--json", "admin", "user", "delete", "acme", "alice", "--yes")
    )
    assert erased["records_deleted"] == 2  # the registration and the key bound to alice
    assert invoke(cli, db, "admin", "user", "list", "acme").split()[0] == "bob"
    gone = json.loads(invoke(cli, db, "--json", "admin", "tenant", "delete", "acme", "--yes"))
    assert gone["records_deleted"] == 3  # the tenant, bob, the reader key
    assert "acme" not in invoke(cli, db, "admin", "tenant", "list")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["admin", "tenant", "create", "acme"], "already exists"),
        (["admin", "user", "create", "nope", "alice"], "no tenant 'nope'"),
        (["admin", "key", "create", "acme", "--role", "owner"], "not one of 'reader', 'writer'"),
        (["admin", "key", "revoke", "000000000000"], "no API key"),
        (["admin", "tenant", "delete", "nope", "--yes"], "no tenant 'nope'"),
        (["admin", "user", "delete", "acme", "nobody", "--yes"], "no user 'nobody'"),
    ],
)
def test_admin_usage_errors_exit_2(
    cli: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "admin.db"
    invoke(cli, db, "admin", "tenant", "create", "acme")
    result = cli.invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_tenant_delete_asks_first(cli: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "admin.db"
    invoke(cli, db, "admin", "tenant", "create", "acme")
    result = cli.invoke(app, ["--db", str(db), "admin", "tenant", "delete", "acme"], input="n\n")
    assert result.exit_code == 1
    assert "acme" in invoke(cli, db, "admin", "tenant", "list")


def test_user_delete_asks_first(cli: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "admin.db"
    invoke(cli, db, "admin", "tenant", "create", "acme")
    invoke(cli, db, "admin", "user", "create", "acme", "alice")
    args = ["--db", str(db), "admin", "user", "delete", "acme", "alice"]
    result = cli.invoke(app, args, input="n\n")
    assert result.exit_code == 1
    assert "alice" in invoke(cli, db, "admin", "user", "list", "acme")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--auth", "open"], "'open' is not one of 'local', 'production'"),
        (["--auth", "production", "--jwt-secret", "short"], "at least 32"),
    ],
)
def test_serve_refuses_bad_options(
    cli: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    result = cli.invoke(app, ["--db", str(tmp_path / "s.db"), "serve", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_key_list_never_shows_the_hash(cli: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "admin.db"
    invoke(cli, db, "admin", "tenant", "create", "acme")
    invoke(cli, db, "admin", "key", "create", "acme", "--user", "alice", "--name", "ci")
    listed = json.loads(invoke(cli, db, "--json", "admin", "key", "list", "acme"))
    assert [(k["user_id"], k["role"], k["name"]) for k in listed] == [("alice", "writer", "ci")]
    assert "sha256" not in listed[0]
    shown = invoke(cli, db, "admin", "key", "list", "acme").split()
    assert shown[1:] == ["alice", "writer", "live", "ci"]


async def test_token_create_prints_a_jwt_the_service_accepts(
    cli: CliRunner, engine: Engine
) -> None:
    result = cli.invoke(
        app,
        ["admin", "token", "create", "acme", "--user", "alice", "--role", "reader"],
        env={"ENGRAM_JWT_SECRET": JWT_SECRET},
    )
    assert result.exit_code == 0, result.stderr
    service = create_app(ServiceSettings(auth="production", jwt_secret=JWT_SECRET), engine=engine)
    async with MemoryClient(
        "http://service", token=result.stdout.strip(), transport=httpx.ASGITransport(app=service)
    ) as client:
        assert (await client.list_plans()).items == []
        with pytest.raises(PermissionDeniedError):
            await client.store("k", "v")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["acme"], {}, "secret is needed"),
        (["acme"], {"ENGRAM_JWT_SECRET": "short"}, "at least 32"),
        (["acme", "--role", "owner"], {"ENGRAM_JWT_SECRET": JWT_SECRET}, "not one of 'reader'"),
        ([" acme "], {"ENGRAM_JWT_SECRET": JWT_SECRET}, "scope tenant"),
    ],
)
def test_token_create_refuses_bad_input(
    cli: CliRunner, args: list[str], env: dict[str, str], message: str
) -> None:
    result = cli.invoke(app, ["admin", "token", "create", *args], env=env)
    assert result.exit_code == 2
    assert message in result.stderr
