"""The int8 rewrite of the default model's graph: what it changes and what it leaves."""

from __future__ import annotations

import onnx
import pytest

from engramdb.index.int8_matmul import int8_matmuls
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


def test_a_model_without_int8_weights_is_left_as_it_is() -> None:
    from onnx import helper

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
