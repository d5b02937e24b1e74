#!/usr/bin/env python3
"""make_import_fixtures.py -- writes the small ONNX models that seed the model-reader fuzzer
(tests/fuzz/corpus/) and that test_onnx_import.c reads back to check the frontend against bytes
written by ONNX's own serializer. The values here are repeated in test_onnx_import.c.

Usage: python3 tests/unit/make_import_fixtures.py [OUTDIR]   (default: tests/fuzz/corpus)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_relu():
    """Opset 13: symbolic batch dim, a raw_data weight and a float_data bias."""
    w = numpy_helper.from_array(np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3) / 64,
                                "W")
    b = helper.make_tensor("B", TensorProto.FLOAT, [2], [0.5, -0.25])  # float_data
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),  # unnamed: becomes Relu_1
    ]
    graph = helper.make_graph(
        nodes, "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 8, 8])],
        [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def legacy_ops():
    """Opset 9: every attribute form the frontend rewrites into inputs."""
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], name="unsq", axes=[0]),
        helper.make_node("Squeeze", ["u"], ["s"], name="sq", axes=[0]),
        helper.make_node("Slice", ["s"], ["sl"], name="slice", starts=[0, 1], ends=[2, 4],
                         axes=[0, 1]),
        helper.make_node("Clip", ["sl"], ["cl"], name="clip", min=-1.0, max=1.5),
        helper.make_node("Pad", ["cl"], ["p"], name="pad", pads=[0, 1, 0, 1], value=0.25,
                         mode="constant"),
        helper.make_node("Split", ["p"], ["a", "b"], name="split", axis=1, split=[2, 3]),
        helper.make_node("ReduceMean", ["a"], ["y"], name="mean", axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "legacy_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def mixed():
    """Opset 17: typed-field initializers of every held dtype, a tensor attribute, an If with
    graph attributes and a custom-domain node (both unsupported, neither an error)."""
    inits = [
        helper.make_tensor("i64", TensorProto.INT64, [3], [-1, 0, 1 << 40]),
        helper.make_tensor("i32", TensorProto.INT32, [2], [-7, 70000]),
        helper.make_tensor("i8", TensorProto.INT8, [2], [-128, 127]),
        helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
        helper.make_tensor("flag", TensorProto.BOOL, [3], [True, False, True]),
        helper.make_tensor("f64", TensorProto.DOUBLE, [2], [0.1, -2.5]),
        numpy_helper.from_array(np.array([3, 4], dtype=np.int64), "shape"),
    ]
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [12])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [12])])
    nodes = [
        helper.make_node("Constant", [], ["k"],
                         value=helper.make_tensor("kv", TensorProto.FLOAT, [2], [1.5, 2.5])),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("If", ["cond"], ["z"], name="branch", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Foo", ["r"], ["w"], name="custom", domain="com.example", note="hi"),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("i64", TensorProto.INT64, [3])],  # initializer-backed
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [12]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.example", 2)])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus"))
    os.makedirs(out, exist_ok=True)
    for name, make in [("conv_relu", conv_relu), ("legacy_ops", legacy_ops), ("mixed", mixed)]:
        model = make()
        model.producer_name = "make_import_fixtures.py"
        onnx.checker.check_model(model)
        path = os.path.join(out, name + ".onnx")
        onnx.save(model, path)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
