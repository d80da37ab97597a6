"""Production-mode authentication in process: 401 for no or invalid credentials, 403 for
valid credentials asking for what they may not; API keys stored hashed; JWTs register
their tenant and user on first sight."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest

from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)
from engramdb.engine import Engine
from engramdb.orchestrator.tenancy import key_digest
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.service.conftest import JWT_SECRET, ClientFactory


def token(secret: str = JWT_SECRET, **claims: Any) -> str:
    payload = {"exp": int(time.time()) + 600, **claims}
    return jwt.encode(payload, secret, algorithm="HS256")


@pytest.fixture
async def acme_keys(engine: Engine) -> dict[str, str]:
    tenancy = engine.tenancy
    await tenancy.create_tenant("acme")
    return {
        "alice": (await tenancy.create_key("acme", user_id="alice"))[1],
        "reader": (await tenancy.create_key("acme", user_id="alice", role="reader"))[1],
        "tenant": (await tenancy.create_key("acme"))[1],
    }


async def test_no_credentials_is_401(production: ClientFactory) -> None:
    with pytest.raises(AuthenticationError) as caught:
        await production().list_plans()
    assert caught.value.details["status_code"] == 401


@pytest.mark.parametrize(
    "credential",
    [
        "ek_000000000000_" + "a" * 43,  # well formed, unknown
        "ek_short",  # malformed key
        "not-a-jwt",
        token(secret="another-secret-of-at-least-thirty-two-bytes", tenant="acme"),
        token(tenant="acme", exp=int(time.time()) - 10),  # expired
        jwt.encode({"tenant": "acme"}, JWT_SECRET, algorithm="HS256"),  # no exp
        token(sub="alice"),  # no tenant
        token(tenant="acme", role="admin"),  # unknown role
        token(tenant="acme", sub=7),  # subject not a string
    ],
)
async def test_invalid_credentials_are_401(
    production: ClientFactory, acme_keys: dict[str, str], credential: str
) -> None:
    with pytest.raises(AuthenticationError):
        await production(api_key=credential).list_plans()


async def test_a_jwt_with_a_bad_tenant_name_is_rejected(production: ClientFactory) -> None:
    with pytest.raises(AuthenticationError):
        await production(token=token(tenant=" padded ")).list_plans()


async def test_api_key_is_stored_as_a_hash(engine: Engine, acme_keys: dict[str, str]) -> None:
    page = await engine.tenancy.list_keys("acme")
    digests = {k.sha256 for k in page.items}
    assert key_digest(acme_keys["alice"]) in digests
    exported = [row async for row in engine.export()]
    assert not any(acme_keys["alice"] in str(row) for row in exported)


async def test_revoked_key_is_401(
    production: ClientFactory, engine: Engine, acme_keys: dict[str, str]
) -> None:
    client = production(api_key=acme_keys["alice"])
    await client.list_plans()
    key_id = acme_keys["alice"].split("_")[1]
    revoked = await engine.tenancy.revoke_key(key_id)
    assert revoked.revoked_at is not None
    assert (await engine.tenancy.revoke_key(key_id)).revoked_at == revoked.revoked_at
    with pytest.raises(AuthenticationError):
        await client.list_plans()
    with pytest.raises(NotFoundError):
        await engine.tenancy.revoke_key("000000000000")


async def test_x_api_key_header_is_accepted(engine: Engine, acme_keys: dict[str, str]) -> None:
    app = create_app(ServiceSettings(auth="production"), engine=engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as http:
        ok = await http.get("/v1/memory/plans", headers={"X-API-Key": acme_keys["alice"]})
        assert ok.status_code == 200
        # Without a JWT secret, bearer tokens that are not API keys never verify.
        jwt_answer = await http.get(
            "/v1/memory/plans", headers={"Authorization": f"Bearer {token(tenant='acme')}"}
        )
        assert jwt_answer.status_code == 401


async def test_a_key_verifies_only_in_its_own_tenant(
    production: ClientFactory, engine: Engine, acme_keys: dict[str, str]
) -> None:
    await engine.tenancy.create_tenant("globex")
    prefix, key_id, _, secret = acme_keys["alice"].split("_", 3)
    moved = f"{prefix}_{key_id}_m5wg6ytfpa_{secret}"  # "globex" in base32
    flipped = acme_keys["alice"][:-1] + ("B" if acme_keys["alice"].endswith("A") else "A")
    for forged in (moved, f"{prefix}_{key_id}_zzzz_{secret}", flipped):
        with pytest.raises(AuthenticationError):
            await production(api_key=forged).list_plans()


async def test_credential_events_are_not_in_the_tenant_log(
    production: ClientFactory, acme_keys: dict[str, str]
) -> None:
    client = production(api_key=acme_keys["tenant"])
    await client.store("k", "v")
    events = (await client.events(limit=1000)).events
    assert {e.provider_id for e in events} == {"event_sourced"}


async def test_other_tenant_or_user_is_403(
    production: ClientFactory, acme_keys: dict[str, str]
) -> None:
    with pytest.raises(PermissionDeniedError) as caught:
        await production(api_key=acme_keys["alice"], tenant_id="globex").list_plans()
    assert caught.value.details["status_code"] == 403
    with pytest.raises(PermissionDeniedError):
        await production(api_key=acme_keys["alice"], user_id="bob").list_plans()
    with pytest.raises(PermissionDeniedError):
        await production(api_key=acme_keys["alice"]).search_knowledge("x", user_id="bob")
    # The matching tenant and user are fine.
    same = production(api_key=acme_keys["alice"], tenant_id="acme", user_id="alice")
    assert (await same.list_plans()).items == []


async def test_reader_may_read_but_not_write(
    production: ClientFactory, acme_keys: dict[str, str]
) -> None:
    reader = production(api_key=acme_keys["reader"])
    assert await reader.search_knowledge("anything") == []
    assert await reader.recall("anything") == []
    for write in (
        reader.store("k", "v"),
        reader.set_plan_state("p", "k", 1),
        reader.create_plan("p", "goal"),
        reader.delete_plan_state("p"),
    ):
        with pytest.raises(PermissionDeniedError):
            await write


async def test_tenant_wide_key_acts_for_any_user(
    production: ClientFactory, acme_keys: dict[str, str]
) -> None:
    service = production(api_key=acme_keys["tenant"], user_id="bob")
    plan = await service.create_plan("p-bob", "goal")
    assert plan.user_id == "bob"
    alice = production(api_key=acme_keys["alice"])
    with pytest.raises(PermissionDeniedError):
        await alice.get_plan("p-bob")
    with pytest.raises(PermissionDeniedError):
        await alice.update_plan("p-bob", status="done")
    with pytest.raises(PermissionDeniedError):
        await alice.delete_plan("p-bob")
    assert (await production(api_key=acme_keys["tenant"]).get_plan("p-bob")).plan_id == "p-bob"


async def test_jwt_registers_tenant_and_user_lazily(
    production: ClientFactory, engine: Engine
) -> None:
    assert await engine.tenancy.get_tenant("initech") is None
    client = production(token=token(tenant="initech", sub="peter"))
    await client.store_knowledge("TPS reports need a cover sheet.")
    await client.store_knowledge("The stapler is red.")
    assert await engine.tenancy.get_tenant("initech") is not None
    users = await engine.tenancy.list_users("initech")
    assert [u.user_id for u in users.items] == ["peter"]
    hits = await client.search_knowledge("cover sheet")
    assert hits[0].text == "TPS reports need a cover sheet."
    reader = production(token=token(tenant="initech", sub="peter", role="reader"))
    with pytest.raises(PermissionDeniedError):
        await reader.store("k", "v")


async def test_tenants_are_isolated(production: ClientFactory) -> None:
    acme = production(token=token(tenant="acme-2"))
    globex = production(token=token(tenant="globex"))
    await acme.store("plan.secret", "acme only")
    await acme.set_plan_state("shared-name", "k", "acme")
    await acme.create_plan("shared-name", "goal")
    assert await globex.read("plan.secret") is None
    assert await globex.get_all_plan_state("shared-name") == {}
    with pytest.raises(NotFoundError):
        await globex.get_plan("shared-name")
    await globex.create_plan("shared-name", "goal")  # ids are per tenant
    events = (await globex.events(limit=1000)).events
    assert all(e.scope.tenant == "globex" for e in events)


async def test_tenancy_admin_rules(engine: Engine) -> None:
    tenancy = engine.tenancy
    await tenancy.create_tenant("acme", "Acme")
    with pytest.raises(ConflictError):
        await tenancy.create_tenant("acme")
    with pytest.raises(NotFoundError):
        await tenancy.create_user("nope", "alice")
    with pytest.raises(NotFoundError):
        await tenancy.create_key("nope")
    with pytest.raises(NotFoundError):
        await tenancy.delete_tenant("nope")
    await tenancy.create_user("acme", "alice")
    with pytest.raises(ConflictError):
        await tenancy.create_user("acme", "alice")
    memory = engine.scope(tenant="acme", user="alice")
    await memory.persistent.write("k", "v")
    await tenancy.create_tenant("other")
    await engine.scope(tenant="other").persistent.write("k", "kept")
    assert await tenancy.delete_tenant("acme") == 3  # the tenant, its user, its entry
    assert await memory.persistent.read("k") is None
    assert [t.tenant_id for t in (await tenancy.list_tenants()).items] == ["other"]
    assert await engine.scope(tenant="other").persistent.read("k") is not None
    # The content is purged from the log too.
    exported = [row async for row in engine.export() if row["kind"] == "event"]
    assert not any(
        row["scope"]["tenant"] == "acme" and row["payload"].get("value") == "v" for row in exported
    )
