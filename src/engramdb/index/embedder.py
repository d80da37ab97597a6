"""The ``Embedder`` contract, a bounded LRU ``CachedEmbedder`` and shared vector helpers.

Every embedder turns texts into float32 rows of unit length, so a dot product is the cosine
similarity and a vector index can compare rows without knowing which model made them. The
indexed tier stores ``model_id`` with its vectors: vectors from different ids never mix.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from engramdb.core.errors import EmbedderError, InvalidValueError

#: A matrix (or row) of float32 embedding values.
FloatArray = npt.NDArray[np.float32]

# Below this norm a row is treated as zero and left as it is, instead of dividing by ~0.
# Same floor as torch.nn.functional.normalize, which sentence-transformers uses.
_NORM_FLOOR = 1e-12


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``model_id`` and ``dimensions`` are read-only properties here so that an implementation may
    provide them either as plain attributes or as properties.

    Contract (checked by ``tests/index``): ``embed`` returns shape ``(len(texts), dimensions)``,
    dtype float32, every row of unit length (or zero, if a model yields a zero vector); row ``i``
    belongs to ``texts[i]``; a text's row does not depend on the other texts in the call; an
    empty sequence returns shape ``(0, dimensions)`` without touching the model. Model work
    runs off the event loop.
    """

    @property
    def model_id(self) -> str:
        """Names the model and every setting that changes its vectors."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts``; row ``i`` is the unit vector of ``texts[i]``."""
        ...

    async def embed_one(self, text: str) -> FloatArray:
        """Embed one text; returns shape ``(dimensions,)``."""
        ...


@runtime_checkable
class StartingEmbedder(Protocol):
    """An embedder that can hand texts to its model before its caller next awaits."""

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        """``embed(texts)`` as a future, the model's work begun (when the model is free) before
        this returns; bad input and failures are the future's exception."""
        ...


@runtime_checkable
class AsideEmbedder(Protocol):
    """An embedder with a lane of its own for work no caller waits for."""

    async def embed_aside(self, texts: Sequence[str]) -> FloatArray:
        """``embed(texts)``, run where it holds back no ``embed`` call."""
        ...


def start_embedding(embedder: BatchEmbedder, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
    """``embedder.embed(texts)`` as a future: begun before this returns by an embedder that
    can (``StartingEmbedder``), so its caller's own work overlaps the model's; by any other
    on the loop's next turn. Cancelling the future gives up on the result only."""
    if isinstance(embedder, StartingEmbedder):
        return embedder.start(texts)
    return asyncio.ensure_future(embedder.embed(texts))


def failed(exc: BaseException) -> asyncio.Future[FloatArray]:
    """A future that holds ``exc``: what ``start`` gives for a call that cannot begin."""
    future: asyncio.Future[FloatArray] = asyncio.get_running_loop().create_future()
    future.set_exception(exc)
    return future


def l2_normalize(matrix: npt.ArrayLike) -> FloatArray:
    """Return ``matrix`` as float32 with every row scaled to unit L2 norm.

    Rows whose norm is below 1e-12 are returned unchanged (zero stays zero).

    Args:
        matrix: a 2-D array of shape ``(n, d)``.

    Returns:
        A new float32 array of the same shape.
    """
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    scaled: FloatArray = (rows / np.maximum(norms, _NORM_FLOOR)).astype(np.float32, copy=False)
    return scaled


def check_texts(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list, or raise ``InvalidValueError`` if one is not a string.

    A bare ``str`` is rejected too: iterating it would embed its characters one by one.
    """
    if isinstance(texts, str):
        raise InvalidValueError(
            "texts must be a sequence of strings, not one string", field="texts"
        )
    checked = list(texts)
    for position, text in enumerate(checked):
        if not isinstance(text, str):
            raise InvalidValueError(
                f"texts[{position}] must be a string, got {type(text).__name__}",
                field="texts",
                position=position,
            )
    return checked


def empty_matrix(dimensions: int) -> FloatArray:
    """The result of embedding no texts: shape ``(0, dimensions)``, float32."""
    return np.zeros((0, dimensions), dtype=np.float32)


class CacheInfo(NamedTuple):
    """Counters of a ``CachedEmbedder``, in the spirit of ``functools.lru_cache``."""

    hits: int
    misses: int
    size: int
    max_entries: int


class BatchEmbedder(Protocol):
    """What a wrapping embedder needs of the embedder it wraps: ``Embedder`` without
    ``embed_one``."""

    @property
    def model_id(self) -> str:
        """Names the model and every setting that changes its vectors."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of every vector."""
        ...

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Row ``i`` is the vector of ``texts[i]``."""
        ...


InnerT = TypeVar("InnerT", bound=BatchEmbedder)


class WrappingEmbedder(Generic[InnerT]):
    """Base of embedders that wrap another without changing its vectors: ``model_id`` and
    ``dimensions`` are the wrapped embedder's, ``embed_one`` is ``embed`` of one text, and
    ``_embed_inner`` asks the wrapped embedder and checks the shape of its answer."""

    def __init__(self, inner: InnerT) -> None:
        self._inner = inner

    @property
    def inner(self) -> InnerT:
        """The wrapped embedder."""
        return self._inner

    @property
    def model_id(self) -> str:
        """The wrapped embedder's ``model_id``: wrapping does not change vectors."""
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        """The wrapped embedder's ``dimensions``."""
        return self._inner.dimensions

    async def _embed_inner(self, texts: list[str]) -> FloatArray:
        """The wrapped embedder's rows of ``texts``.

        Raises:
            EmbedderError: they are not one row of ``dimensions`` per text.
        """
        return self._checked(texts, await self._inner.embed(texts))

    def _checked(self, texts: list[str], matrix: FloatArray) -> FloatArray:
        """``matrix``, if it is one row of ``dimensions`` per text of ``texts``.

        Raises:
            EmbedderError: it is not.
        """
        if matrix.shape != (len(texts), self.dimensions):
            raise EmbedderError(
                f"{self.model_id} returned shape {matrix.shape} for {len(texts)} texts",
                model_id=self.model_id,
            )
        return matrix

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts``; row ``i`` is the unit vector of ``texts[i]``."""
        raise NotImplementedError

    async def embed_one(self, text: str) -> FloatArray:
        """Embed one text; returns shape ``(dimensions,)``."""
        matrix = await self.embed([text])
        row: FloatArray = matrix[0]
        return row


class CachedEmbedder(WrappingEmbedder[Embedder]):
    """An ``Embedder`` that remembers the vectors of recently embedded texts.

    Keys are the exact texts; the least recently used entry is dropped once ``max_entries`` are
    held. Texts missing from the cache (each distinct text once) go to the wrapped embedder in
    one ``embed`` call, so a batch gives the same rows as the texts embedded one by one,
    provided the wrapped embedder keeps that part of the contract.

    Two concurrent calls that miss the same text both ask the wrapped embedder; the results
    are identical, so the cost is only the duplicate work.

    Args:
        inner: the embedder to cache.
        max_entries: how many texts to keep; at 384 float32 dimensions, 4,096 entries hold
            about 6 MiB of vectors plus the texts themselves.
    """

    def __init__(self, inner: Embedder, *, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        super().__init__(inner)
        self._max_entries = max_entries
        self._entries: OrderedDict[str, FloatArray] = OrderedDict()
        self._hits = 0
        self._misses = 0

    def cache_info(self) -> CacheInfo:
        """Hits and misses (counted per text in each call), current size and the bound."""
        return CacheInfo(self._hits, self._misses, len(self._entries), self._max_entries)

    def cache_clear(self) -> None:
        """Drop every cached vector and reset the counters."""
        self._entries.clear()
        self._hits = 0
        self._misses = 0

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts``, asking the wrapped embedder only for texts not cached.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            EmbedderError: the wrapped embedder failed or returned a wrongly shaped result.
        """
        wanted = check_texts(texts)
        result = np.empty((len(wanted), self.dimensions), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for row, text in enumerate(wanted):
            cached = self._entries.get(text)
            if cached is None:
                missing.setdefault(text, []).append(row)
                continue
            self._entries.move_to_end(text)
            result[row] = cached
            self._hits += 1
        if missing:
            fresh_texts = list(missing)
            fresh = await self._embed_inner(fresh_texts)
            for text, vector in zip(fresh_texts, fresh, strict=True):
                rows = missing[text]
                result[rows] = vector
                self._misses += len(rows)
                self._remember(text, vector)
        return result

    def _remember(self, text: str, vector: FloatArray) -> None:
        # A private, read-only copy: callers may write into the rows they are given, and that
        # must not change what later hits return.
        stored = np.array(vector, dtype=np.float32, copy=True)
        stored.flags.writeable = False
        self._entries[text] = stored
        self._entries.move_to_end(text)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
