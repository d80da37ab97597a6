"""A process that memorizes turns with automatic formation on and acknowledges each one, until
it is killed: ``python -m tests.formation.auto_child TARGET ACKS FIRST [LEASE_S]``.

Turn ``n`` says "I have a dog named <pet_name(n)>." (a profile fact of its own, under
``user.pet.<name>``). After each memorize returns, ``n`` is appended to the file ``ACKS`` and
synced to disk: an acknowledged turn is one the caller was told is stored. ``LEASE_S`` is how
long its claims on pending formations keep other engines off them (short, so that a test need
not wait long for the leases of a killed child to end).
"""

from __future__ import annotations

import asyncio
import os
import sys

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig

SCOPE = {"tenant": "crash", "user": "alice"}


def pet_name(n: int) -> str:
    """A name of its own for turn ``n`` that the profile rules read as a pet's."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    letters = ""
    for _ in range(3):
        letters += consonants[n % len(consonants)] + vowels[(n // len(consonants)) % len(vowels)]
        n //= len(consonants) * len(vowels)
    return letters.capitalize()


def turn(n: int) -> MemoryItem:
    """Turn ``n``, said by the user, to episodic memory (even) or the conversation (odd)."""
    return MemoryItem(text=f"I have a dog named {pet_name(n)}.", role="user")


async def main(target: str, acks: str, first: int, lease_s: float) -> None:
    config = EngineConfig(embedder=None, formation="auto", formation_lease_s=lease_s)
    async with engramdb.open(target, config=config) as engine:
        mem = engine.scope(**SCOPE, session="s")
        fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        n = first
        while True:
            memory = mem.episodic if n % 2 == 0 else mem.conversation
            await memory.memorize(turn(n))
            os.write(fd, f"{n}\n".encode())
            os.fsync(fd)
            n += 1


if __name__ == "__main__":
    lease = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), lease))
