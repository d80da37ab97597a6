"""``WritePauses``: the bookkeeping on a clock the test moves, the waiting on the real event loop.

The asyncio tests assert what happened and in which order, never how long it took: a busy
machine may run them slowly, and only a hang (guarded by generous timeouts) fails them.
"""

from __future__ import annotations

import asyncio

from engramdb.providers.write_pauses import WritePauses

#: Only a hang is this slow.
HANG_S = 30.0


class Clock:
    """Seconds the test sets (in steps a float holds exactly)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_writes_start_paused() -> None:
    assert WritePauses(0.25, 2.0, clock=Clock()).paused()


def test_a_write_in_flight_is_no_pause_however_long_it_takes() -> None:
    clock = Clock()
    pauses = WritePauses(0.25, 2.0, clock=clock)
    pauses.began()
    clock.now += 1.0
    assert not pauses.paused()
    pauses.ended()
    assert not pauses.paused()  # it just ended
    clock.now += 0.25
    assert pauses.paused()


def test_every_write_in_flight_counts() -> None:
    clock = Clock()
    pauses = WritePauses(0.25, 2.0, clock=clock)
    with pauses.writing(), pauses.writing():
        assert pauses.in_flight == 2
    assert pauses.in_flight == 0
    clock.now += 0.25
    assert pauses.paused()


def test_a_write_that_raised_has_ended() -> None:
    pauses = WritePauses(0.25, 2.0)
    try:
        with pauses.writing():
            raise RuntimeError("commit failed")
    except RuntimeError:
        pass
    assert pauses.in_flight == 0


def test_a_write_that_never_ended_is_forgotten_after_max_wait() -> None:
    clock = Clock()
    pauses = WritePauses(0.25, 2.0, clock=clock)
    pauses.began()  # its commit failed before anyone said it ended
    clock.now += 1.75
    assert not pauses.paused()
    clock.now += 0.25
    assert pauses.paused()
    assert pauses.in_flight == 0
    pauses.ended()  # said late: the count does not go below zero
    assert pauses.in_flight == 0


async def test_pause_returns_at_once_when_writes_pause() -> None:
    await asyncio.wait_for(WritePauses(0.01, HANG_S).pause(), HANG_S)


async def test_pause_waits_for_the_write_in_flight_then_for_quiet() -> None:
    pauses = WritePauses(0.01, HANG_S)
    said: list[str] = []

    async def writer() -> None:
        with pauses.writing():
            # Several turns of the loop, past quiet_s: the waiter must not go meanwhile.
            for _ in range(5):
                await asyncio.sleep(0.01)
            said.append("write ended")

    async def waiter() -> None:
        await pauses.pause()
        said.append("paused")

    write = asyncio.create_task(writer())
    await asyncio.sleep(0)  # the write has begun
    await asyncio.wait_for(asyncio.gather(write, waiter()), HANG_S)
    assert said == ["write ended", "paused"]
    assert pauses.paused()


async def test_a_stream_of_writes_delays_the_pause_but_never_starves_it() -> None:
    # Writes every 1 ms never leave 1 h of quiet: pause gives up waiting after max_wait_s.
    pauses = WritePauses(3600.0, 0.05)
    stop = asyncio.Event()

    async def stream() -> int:
        writes = 0
        while not stop.is_set():
            with pauses.writing():
                await asyncio.sleep(0.001)
            writes += 1
        return writes

    writing = asyncio.create_task(stream())
    await asyncio.sleep(0)
    await asyncio.wait_for(pauses.pause(), HANG_S)
    stop.set()
    assert await writing > 0
    assert not pauses.paused()  # returned on max_wait_s, not on a pause


async def test_between_returns_at_once_with_no_write_in_flight() -> None:
    await asyncio.wait_for(WritePauses(3600.0, 3600.0).between(), HANG_S)


async def test_between_goes_on_as_soon_as_the_writes_in_flight_end_without_quiet() -> None:
    pauses = WritePauses(3600.0, 3600.0)
    said: list[str] = []

    async def writer() -> None:
        with pauses.writing():
            await asyncio.sleep(0.01)
            said.append("write ended")

    async def waiter() -> None:
        await pauses.between()
        said.append("between")

    write = asyncio.create_task(writer())
    await asyncio.sleep(0)  # the write has begun
    await asyncio.wait_for(asyncio.gather(write, waiter()), HANG_S)
    assert said == ["write ended", "between"]
    assert not pauses.paused()  # no quiet yet: ``pause`` would still wait


async def test_between_forgets_a_write_that_never_ended_after_max_wait() -> None:
    pauses = WritePauses(3600.0, 0.05)
    pauses.began()
    await asyncio.wait_for(pauses.between(), HANG_S)
    assert pauses.in_flight == 0
    await asyncio.wait_for(pauses.between(), HANG_S)
