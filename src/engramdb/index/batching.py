"""``BatchingEmbedder``: concurrent callers' texts embedded together in one model call.

A service embeds one query or one turn per request; a local model embeds a batch of short
texts faster per text than the same texts one by one, and one call per request also pays the
hop to the model's thread each time. Calls that arrive while a batch is collecting (for at
most ``max_wait_s``) or while the previous batch runs join the next batch, up to
``max_texts`` texts, and the wrapped embedder sees one ``embed`` call per batch.

The ``Embedder`` contract makes this invisible: a text's row does not depend on the other
texts of a call, so every caller gets the rows it would have got alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from engramdb.core.errors import InvalidValueError
from engramdb.core.futures import mapped
from engramdb.index.embedder import (
    AsideEmbedder,
    Embedder,
    FloatArray,
    WrappingEmbedder,
    check_texts,
    empty_matrix,
    failed,
    start_embedding,
)

#: How long a batch waits for company after its first text arrives, while the model serves
#: several callers: a request arriving at an idle model is sent at once. Under load batches
#: fill while the previous one runs, and this lets the callers just answered join the next.
DEFAULT_MAX_WAIT_S = 0.002
#: Texts per batch: enough for several requests' turns and sentences, few enough that one
#: batch does not hold the model for long (the wrapped embedder still cuts it into its own
#: model runs).
DEFAULT_MAX_TEXTS = 64


@dataclass(eq=False)
class _Batch:
    """Texts collecting for one call of the wrapped embedder, and its result."""

    opened: float
    result: asyncio.Future[FloatArray]
    # Opened while the lane was idle: a lone request, sent without waiting for company.
    eager: bool
    rows: dict[str, int] = field(default_factory=dict)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    callers: int = 0
    # The wrapped embedder's call, when it began as the batch opened (``start``).
    started: asyncio.Future[FloatArray] | None = None


@dataclass(eq=False)
class _Lane:
    """The batches of one event loop, oldest first, and the task that sends them."""

    waiting: deque[_Batch] = field(default_factory=deque)
    sender: asyncio.Task[None] | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    # Whether the last batch sent served several callers: only then is company worth a wait.
    crowded: bool = False
    # Whether a call of the wrapped embedder is under way.
    running: bool = False


class BatchingEmbedder(WrappingEmbedder[Embedder]):
    """An ``Embedder`` that embeds the texts of concurrent calls in one call of ``inner``.

    One call of ``inner`` runs at a time (per event loop): a local model has one worker
    anyway, and texts arriving meanwhile make the next batch larger instead of queueing one
    by one. A call with more than ``max_texts`` texts (a rebuild) goes to ``inner`` directly.
    The same text asked twice in one batch is embedded once.

    A call that finds the model idle, or serving one caller at a time, is sent at once; while
    batches of several callers run (or ran within ``max_wait_s``), a new batch collects for up
    to ``max_wait_s`` first. ``start`` at a model idle that way goes further: the wrapped
    embedder's call begins before it returns (``StartingEmbedder``), and calls made later in
    the same turn of the loop take the next batch.

    A caller that is cancelled stops waiting; the batch it joined still runs for the others.
    A failure of ``inner`` is raised to every caller of that batch, and later batches try
    again.

    Args:
        inner: the embedder to batch for.
        max_wait_s: how long a batch collects texts after its first one, at most.
        max_texts: texts per batch, at most.

    Raises:
        ValueError: a setting is out of range.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_texts: int = DEFAULT_MAX_TEXTS,
    ) -> None:
        if max_wait_s < 0:
            raise ValueError("max_wait_s must not be negative")
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        super().__init__(inner)
        self._max_wait_s = max_wait_s
        self._max_texts = max_texts
        # The sync API runs the engine on its own loop thread; each loop gets its own lane.
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
            weakref.WeakKeyDictionary()
        )
        self._calls = 0

    @property
    def calls(self) -> int:
        """How many batched calls went to the wrapped embedder so far."""
        return self._calls

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts`` together with whatever other calls are collecting.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            EmbedderError: the wrapped embedder failed or returned a wrongly shaped result.
        """
        return await self._answer(texts, now=False)

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        """``embed(texts)`` as a future; at an idle model the wrapped embedder's call begins
        before this returns, so a write's own work overlaps the model's. Cancelling the
        future cancels no batch. Bad input and failures are the future's exception."""
        return self._answer(texts, now=True)

    def _answer(self, texts: Sequence[str], *, now: bool) -> asyncio.Future[FloatArray]:
        """The future of ``texts``' rows of the batch they join (``now``: see ``start``). The
        batch's result is shared: a caller giving up on its future must not cancel it."""
        try:
            wanted = check_texts(texts)
        except InvalidValueError as exc:
            return failed(exc)
        if not wanted:
            nothing: asyncio.Future[FloatArray] = asyncio.get_running_loop().create_future()
            nothing.set_result(empty_matrix(self.dimensions))
            return nothing
        if len(set(wanted)) > self._max_texts:
            return start_embedding(self._inner, wanted)
        batch = self._join(wanted, now=now)
        rows = [batch.rows[text] for text in wanted]
        return mapped(batch.result, lambda matrix: matrix[rows])

    def _join(self, texts: list[str], *, now: bool = False) -> _Batch:
        """The open batch with ``texts`` added, or a new one if they do not fit."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = _Lane()
        batch = lane.waiting[-1] if lane.waiting else None
        # Nothing runs, nobody else waits, and the last batch had no company (callers just
        # answered together ask again together): ``start`` may begin the model's work now.
        free = now and batch is None and not lane.running and not lane.crowded
        fresh = set(texts) - (set(batch.rows) if batch is not None else set())
        if batch is None or batch.full.is_set() or len(batch.rows) + len(fresh) > self._max_texts:
            # A lone caller asking again (a write's embeddings one after another) must not
            # wait for company that is not coming.
            idle = lane.sender is None or lane.sender.done() or not lane.crowded
            batch = _Batch(opened=loop.time(), result=loop.create_future(), eager=idle)
            lane.waiting.append(batch)
            lane.arrived.set()
        batch.callers += 1
        for text in texts:
            batch.rows.setdefault(text, len(batch.rows))
        if len(batch.rows) >= self._max_texts or free:
            batch.full.set()
        if free:
            # Begun now, not on the sender's next turn; the sender still answers it.
            lane.running = True
            batch.started = start_embedding(self._inner, list(batch.rows))
        if lane.sender is None or lane.sender.done():
            # A fresh context: the task outlives the caller that happened to start it and must
            # not carry that caller's settings (retry budgets) into other callers' batches.
            lane.sender = loop.create_task(self._send(lane), context=contextvars.Context())
        return batch

    async def _send(self, lane: _Lane) -> None:
        """Send the lane's batches to the wrapped embedder, one call at a time, until none
        is left for ``max_wait_s``."""
        loop = asyncio.get_running_loop()
        while True:
            if not lane.waiting:
                if not lane.crowded:
                    # A lone caller's next batch is sent at once whoever sends it: nothing is
                    # worth lingering for, and a task that ends costs its caller's turn of the
                    # loop less than one that sets up a wait.
                    return
                # Callers just answered often ask again at once: their texts should meet in
                # one batch, not race off one by one as if the lane were idle.
                lane.arrived.clear()
                if self._max_wait_s > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lane.arrived.wait(), self._max_wait_s)
                if not lane.waiting:
                    return
            batch = lane.waiting[0]
            left = batch.opened + self._max_wait_s - loop.time()
            if not batch.eager and left > 0 and not batch.full.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(batch.full.wait(), left)
            # Closed from here on: later texts open the next batch.
            batch.full.set()
            lane.waiting.popleft()
            lane.crowded = batch.callers > 1
            lane.running = True
            try:
                await self._run(batch)
            finally:
                lane.running = False

    async def _run(self, batch: _Batch) -> None:
        texts = list(batch.rows)
        self._calls += 1
        try:
            if batch.started is None:
                matrix = await self._embed_inner(texts)
            else:
                matrix = self._checked(texts, await batch.started)
        except asyncio.CancelledError:
            # The loop is closing: the callers are being cancelled too.
            batch.result.cancel()
            raise
        except Exception as exc:
            batch.result.set_exception(exc)
            # Every caller may have given up already; nobody else would look at the failure.
            batch.result.exception()
            return
        batch.result.set_result(np.asarray(matrix, dtype=np.float32))


def aside_lane(embedder: Embedder) -> AsideEmbedder | None:
    """The embedder that has a lane for work no caller waits for: ``embedder``, or the one a
    ``BatchingEmbedder`` batches for (batching serves waiting callers only); ``None`` when
    neither has one."""
    if isinstance(embedder, BatchingEmbedder):
        return aside_lane(embedder.inner)
    return embedder if isinstance(embedder, AsideEmbedder) else None
