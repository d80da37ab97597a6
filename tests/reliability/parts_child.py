"""A process that memorizes multi-sentence turns and acknowledges each one, with the part
vectors of every turn left owed, until it is killed:
``python -m tests.reliability.parts_child TARGET ACKS FIRST``.

After each memorize returns, ``n`` is appended to the file ``ACKS`` and synced to disk: an
acknowledged turn is one the caller was told is stored and findable.
"""

from __future__ import annotations

import asyncio
import os
import sys

import engramdb
from engramdb.core.intent import MemoryItem

SCOPE = {"tenant": "crash", "user": "alice"}


def turn(n: int) -> MemoryItem:
    """Turn ``n``: three sentences, so it has part vectors."""
    return MemoryItem(
        text=f"We met on day {n}. The harbour was quiet. Ticket number {n * 7} was mine.",
        role="user",
        metadata={"n": n},
    )


async def main(target: str, acks: str, first: int) -> None:
    async with engramdb.open(target) as engine:
        # The writes never pause for the parts, nor are they computed aside: every
        # acknowledged turn still owes them.
        deferred = engine.indexer.deferred
        deferred.aside = None
        deferred.pauses.quiet_s = deferred.pauses.max_wait_s = 3600.0
        mem = engine.scope(**SCOPE)
        fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        n = first
        while True:
            await mem.episodic.memorize(turn(n))
            os.write(fd, f"{n}\n".encode())
            os.fsync(fd)
            n += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
