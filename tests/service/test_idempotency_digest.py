"""The digests that key stored idempotent answers: no two requests (or callers) share one,
whatever bytes their parts hold."""

from __future__ import annotations

import hashlib

from hypothesis import example, given
from hypothesis import strategies as st

from engramdb.service.idempotency import _digest

#: Parts made mostly of the bytes that end and escape them.
PARTS = st.lists(st.lists(st.sampled_from(b"\0\1\2\3a"), max_size=6).map(bytes), max_size=5)


@given(first=PARTS, second=PARTS)
@example(first=[b"POST", b"/a\0b", b"", b"X"], second=[b"POST", b"/a", b"b", b"\0X"])
@example(first=[b"\1\3"], second=[b"\0"])
def test_no_two_lists_of_parts_share_a_digest(first: list[bytes], second: list[bytes]) -> None:
    if first != second:
        assert _digest(*first) != _digest(*second)


def test_parts_without_nul_or_soh_hash_as_they_read() -> None:
    parts = [b"POST", b"/v1/memory/entries", b"", b'{"key": "k", "value": "a\\u0000b"}']
    plain = hashlib.sha256(b"".join(part + b"\0" for part in parts)).hexdigest()
    assert _digest(*parts) == plain
