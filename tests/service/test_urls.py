"""Paths and query strings that are not UTF-8 text are refused in process as over the wire:
the server would read their bytes as U+FFFD and store or search another name, silently."""

from __future__ import annotations

import pytest

from engramdb.client import MemoryClient
from engramdb.core.errors import InvalidValueError
from engramdb.service.urls import is_utf8


@pytest.mark.parametrize(
    ("escaped", "expected"),
    [
        (b"/v1/memory/entries/caf%C3%A9", True),
        (b"q=a+b&limit=3", True),
        (b"/v1/memory/entries/%ED%A0%80", False),  # a lone surrogate
        (b"q=%FF", False),
        (b"q=%C0%AF", False),  # an overlong "/"
        (b"", True),
    ],
)
def test_is_utf8(escaped: bytes, expected: bool) -> None:
    assert is_utf8(escaped) is expected


async def test_a_lone_surrogate_in_a_path_or_query_changes_nothing(
    local_client: MemoryClient,
) -> None:
    await local_client.set_plan_state("p1", "step", 1)
    before = (await local_client.events()).events
    for attempt in (
        local_client.set_plan_state("\ud800", "step", 2),
        local_client.set_plan_state("p1", "s\udc00", 2),
        local_client.search_knowledge("\ud800"),
        local_client.list_entries(prefix="x\udfff"),
    ):
        with pytest.raises(InvalidValueError):
            await attempt
    assert await local_client.get_all_plan_state("p1") == {"step": 1}
    assert (await local_client.events()).events == before
