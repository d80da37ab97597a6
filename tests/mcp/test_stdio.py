"""``engram mcp`` as a desktop agent starts it: a subprocess spoken to over stdio through the
SDK's client, two of them on one database in two tenants."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from tests.helpers.cli import run
from tests.mcp.conftest import BASE_TOOLS, TOOLS, call, exercise_every_tool, read_json


def engram_mcp(db: Path, tenant: str, user: str) -> Client:
    """A client of a new ``engram mcp`` process on ``db``, bound to ``tenant`` and ``user``."""
    command = ["-m", "engramdb.cli", "mcp", "--tenant", tenant, "--user", user]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*command, "--db", str(db), "--no-vectors"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return Client(params, read_timeout_seconds=60)


async def test_two_stdio_servers_of_two_tenants_on_one_database(tmp_path: Path) -> None:
    db = tmp_path / "engram.db"
    async with engram_mcp(db, "acme", "alice") as acme, engram_mcp(db, "globex", "alice") as globex:
        assert {t.name for t in (await acme.list_tools()).tools} == TOOLS
        assert await exercise_every_tool(acme) == BASE_TOOLS
        await call(acme, "memorize", type="semantic", text="Alice prefers window seats")
        await call(acme, "memorize", type="episodic", text="Alice flew to Oslo in May")
        await call(acme, "set_state", key="booking", value="pending")
        found = await call(acme, "remember", type="semantic", query="window seats")
        assert [i["text"] for i in found["items"]] == ["Alice prefers window seats"]
        assert "window seats" in (await call(acme, "assemble", query="seat preference"))["text"]
        recent = await read_json(acme, "engram://episodes/recent")
        assert [e["text"] for e in recent["items"]] == ["Alice flew to Oslo in May"]

        assert (await call(globex, "remember", type="semantic", query="window seats"))[
            "items"
        ] == []
        assert (await call(globex, "get_state"))["state"] == {}
        assert (await read_json(globex, "engram://episodes/recent"))["items"] == []
        result = await globex.call_tool("forget", {"type": "semantic", "instruction": "nonsense"})
        assert result.is_error


def test_a_mistyped_database_path_is_one_error_line(tmp_path: Path) -> None:
    code, _out, err = run(
        CliRunner(), "mcp", "--tenant", "acme", "--db", str(tmp_path / "missing" / "x.db")
    )
    assert code == 2
    assert "there is no folder" in err


def test_without_the_extra_the_command_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith(("engramdb.mcp.", "mcp"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the extra finds
    code, _out, err = run(CliRunner(), "mcp", "--tenant", "acme", "--db", str(tmp_path / "x.db"))
    assert code == 2
    assert "pip install 'engramdb[mcp]'" in err
