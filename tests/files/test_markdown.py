"""The markdown form reads back exactly what it wrote, whatever the value."""

from __future__ import annotations

from typing import Any

import pytest

from engramdb.core.errors import MemoryFileError
from engramdb.providers.files.markdown import Block, parse_file, render_file

VALUES: list[Any] = [
    "Lisbon",
    "two\n\nparagraphs",
    "## looks like a heading",
    "line one\n## a heading inside",
    "\nleading blank line",
    "trailing newline\n",
    "```json\n[1]\n```",
    "<!-- engram {} -->",
    "carriage\r\nreturn",
    "",
    42,
    3.5,
    True,
    ["a", 1, None],
    {"nested": {"list": [1, 2]}, "ünï": "cødé"},
    {"text": "an item", "kind": "activity", "importance": 0.4},
    {"text": "## not plain", "kind": "x"},
]


@pytest.mark.parametrize("value", VALUES)
def test_every_value_round_trips(value: Any) -> None:
    block = Block(
        "some.key",
        value,
        {"source": "chat --> closed?", "n": 1},
        {"created_at": "2026-05-01T09:30:00+00:00", "ttl_ms": 1000},
    )
    (parsed,) = parse_file(render_file("profile", [block]))
    assert parsed == block
    assert type(parsed.value) is type(value)


def test_a_block_written_by_hand_needs_no_engram_line() -> None:
    text = "# profile\n\nnotes a person keeps\n\n## user.job\nnurse\n\n## user.pet\n\nMiso\n"
    assert parse_file(text) == [Block("user.job", "nurse"), Block("user.pet", "Miso")]


@pytest.mark.parametrize(
    "text",
    [
        "## k\n<!-- engram {not json} -->\n\nv\n",
        "## k\n<!-- engram [1] -->\n\nv\n",
        "## k\n<!-- engram {} \n\nv\n",
        "## k\n\n```json\n{broken\n```\n",
        "## k\n\none\n\n## k\n\ntwo\n",
        "## \n\nno key\n",
    ],
)
def test_what_cannot_be_read_back_is_a_typed_error(text: str) -> None:
    with pytest.raises(MemoryFileError):
        parse_file(text)
