"""A key or id the client puts in a URL path is one segment of it, whatever it holds: a call
about ``x?y`` or ``../plans/p1`` never reaches ``x`` or plan ``p1``."""

from __future__ import annotations

import pytest

from engramdb.client import MemoryClient


@pytest.mark.parametrize(
    ("value", "escaped"),
    [("user.city", "user.city"), ("a?b#c", "a%3Fb%23c"), ("../x", "..%2Fx"), ("..", "%2E%2E")],
)
def test_a_segment_escapes_what_means_something_in_a_path(value: str, escaped: str) -> None:
    from engramdb.client.fields import segment

    assert segment(value) == escaped


async def test_keys_that_look_like_urls_address_themselves(local_client: MemoryClient) -> None:
    client = local_client
    await client.create_plan("p1", "goal.set")
    for key in ("x", "x?y", "x#y", "%78", "..", ".", "ü x"):
        await client.store(key, f"value of {key}")
    for key in ("x?y", "x#y", "%78", "..", ".", "ü x"):
        found = await client.read(key)
        assert found is not None
        assert found.value == f"value of {key}"
        assert await client.delete(key) is True
        assert await client.read(key) is None
    assert await client.delete("../plans/p1") is False
    assert (await client.get_plan("p1")).plan_id == "p1"
    kept = await client.read("x")
    assert kept is not None
    assert kept.value == "value of x"
    await client.set_plan_state("p1", "a?b", 1)
    assert (await client.get_plan_state("p1", "a?b")).value == 1
    assert await client.get_all_plan_state("p1") == {"a?b": 1}
