"""Every read path redacts by default — each memory type's ``remember``, semantic history,
recent turns, ``summarize``, unified recall, REST reads, the CLI and the inspector — and
``raw`` is an explicit opt-out (over REST, for credentials that may write only). On both
backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from engramdb.core.intent import MemoryItem
from engramdb.core.types import RecallQuery
from engramdb.engine import Engine, ScopedMemory
from engramdb.inspector import create_inspector
from engramdb.orchestrator.budget import Budget
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.helpers.cli import run
from tests.service.conftest import JWT_SECRET

EMAIL = "ana.silva@example.com"
SSN = "078-05-1120"
CARD = "4111 1111 1111 1111"
SECRET_TEXT = f"Ana's email is {EMAIL}, her SSN is {SSN} and her card {CARD}"
LEAKS = (EMAIL, SSN, CARD)


def leaks(text: str) -> list[str]:
    return [secret for secret in LEAKS if secret in text]


@pytest.fixture
async def alice(any_engine: Engine) -> ScopedMemory:
    memory = any_engine.scope(tenant="acme", user="alice")
    item = MemoryItem(text=SECRET_TEXT, metadata={"contact": EMAIL})
    for kind in memory.types():
        await kind.memorize(item.model_copy())
    await memory.persistent.write("ana.contact", {"text": SECRET_TEXT})
    return memory


async def test_remember_of_every_type_is_redacted_unless_raw(alice: ScopedMemory) -> None:
    for kind in alice.types():
        found = await kind.remember("Ana email SSN card", limit=5)
        assert found, kind.name
        for item in found:
            assert leaks(item.text) == [], kind.name
            assert "[EMAIL]" in item.text
            assert "[SSN]" in item.text
            assert "[CARD]" in item.text
            assert item.metadata == {"contact": "[EMAIL]"}
        raw = await kind.remember("Ana email SSN card", limit=5, raw=True)
        assert any(item.text == SECRET_TEXT for item in raw), kind.name


async def test_history_recent_and_summaries_are_redacted_unless_raw(alice: ScopedMemory) -> None:
    (fact,) = await alice.semantic.remember("Ana email", limit=1)
    assert fact.id is not None
    for item in await alice.semantic.history(fact.id):
        assert leaks(item.text) == []
    for item in await alice.semantic.remember("Ana email", limit=1, history=True):
        assert leaks(item.text) == []
    assert [leaks(i.text) for i in await alice.conversation.recent(5)] == [[]]
    assert [i.text for i in await alice.conversation.recent(5, raw=True)] == [SECRET_TEXT]
    for kind in alice.types():
        summary = await kind.summarize(token_limit=200)
        assert summary.text, kind.name
        assert leaks(summary.text) == [], kind.name
        assert EMAIL in (await kind.summarize(token_limit=200, raw=True)).text


async def test_unified_recall_is_redacted_unless_raw(alice: ScopedMemory) -> None:
    results = await alice.manager.recall(RecallQuery(query="Ana email SSN card", limit=20))
    assert results
    assert all(leaks(str(r.entry.value)) == [] for r in results)
    raw = await alice.manager.recall(RecallQuery(query="Ana email SSN card", limit=20), raw=True)
    assert any(EMAIL in str(r.entry.value) for r in raw)


async def test_assemble_still_counts_what_it_redacts(alice: ScopedMemory) -> None:
    # A generous time limit: this is about redaction, not about a busy machine's latency.
    budget = Budget(token_limit=2000, time_limit_ms=60_000)
    context = await alice.assemble("what is Ana's email?", budget=budget)
    assert leaks(context.text) == []
    assert context.trace is not None
    assert context.trace.redactions.get("email", 0) >= 1


@pytest.fixture
async def http(any_engine: Engine, alice: ScopedMemory) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(auth="production", jwt_secret=JWT_SECRET), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as client:
        yield client


READS = [
    ("GET", "/v1/memory/episodic/search", {"q": "Ana email"}),
    ("GET", "/v1/memory/episodic/recent", {}),
    ("GET", "/v1/memory/semantic/search", {"q": "Ana email"}),
    ("GET", "/v1/memory/procedural/context", {"q": "Ana email"}),
    ("GET", "/v1/memory/entries/ana.contact", {}),
    ("GET", "/v1/memory/entries", {}),
    ("POST", "/v1/memory/recall", {}),
]


@pytest.mark.parametrize(("method", "path", "params"), READS, ids=[r[1] for r in READS])
async def test_rest_reads_are_redacted_and_raw_is_for_writers(
    any_engine: Engine,
    http: httpx.AsyncClient,
    method: str,
    path: str,
    params: dict[str, str],
) -> None:
    tenancy = any_engine.tenancy
    await tenancy.create_tenant("acme")
    _, writer = await tenancy.create_key("acme", user_id="alice")
    _, reader = await tenancy.create_key("acme", user_id="alice", role="reader")
    body = {"query": "Ana email SSN card", "limit": 20} if method == "POST" else None

    async def read(key: str, **extra: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        return await http.request(
            method, path, params={**params, **extra}, json=body, headers=headers
        )

    for key in (reader, writer):
        answer = await read(key)
        assert answer.status_code == 200, answer.text
        assert "[EMAIL]" in answer.text
        assert leaks(answer.text) == []
    raw = await read(writer, raw="true")
    assert raw.status_code == 200
    assert EMAIL in raw.text
    refused = await read(reader, raw="true")
    assert (refused.status_code, refused.json()["error"]) == (403, "permission_denied")


async def test_the_inspector_shows_redacted_memories_and_events(
    any_engine: Engine, alice: ScopedMemory
) -> None:
    app = create_inspector(engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://inspector"
    ) as client:
        pages = [
            await client.get("/scope", params={"tenant": "acme", "user": "alice", "q": "Ana"}),
            await client.get("/events"),
            await client.get("/"),
        ]
    for page in pages:
        assert page.status_code == 200
        assert leaks(page.text) == []
    assert "[EMAIL]" in pages[0].text


def test_the_cli_redacts_unless_raw(tmp_path: Path) -> None:
    cli = CliRunner()
    db = str(tmp_path / "cli.db")
    assert run(cli, "--db", db, "memorize", SECRET_TEXT)[0] == 0
    code, out, _ = run(cli, "--db", db, "remember", "Ana email", "--json")
    assert code == 0
    assert "[EMAIL]" in out
    assert leaks(out) == []
    code, out, _ = run(cli, "--db", db, "remember", "Ana email", "--json", "--raw")
    assert code == 0
    assert EMAIL in out
    code, out, _ = run(cli, "--db", db, "summarize", "--json")
    assert code == 0
    assert leaks(out) == []
