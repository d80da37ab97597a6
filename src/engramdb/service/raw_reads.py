"""Raw reads over REST: every read answers redacted text (e-mail addresses, card numbers,
secrets … replaced, as the engine's redaction policy says) unless the caller asks for
``raw=true`` — which only credentials that may write are allowed, since they could store the
same data again anyway."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from engramdb.service.auth import ReadCaller, check_writer


async def raw_reads(
    caller: ReadCaller,
    raw: Annotated[
        bool,
        Query(description="Return memories as stored, without redaction (writers only)"),
    ] = False,
) -> bool:
    """Whether this request reads raw memories; a reader asking for them is refused."""
    if raw:
        check_writer(caller.principal)
    return raw


RawReads = Annotated[bool, Depends(raw_reads)]

__all__ = ["RawReads", "raw_reads"]
