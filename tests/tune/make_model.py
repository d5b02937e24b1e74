#!/usr/bin/env python3
"""Writes the small model the tuner's end-to-end tests tune: two 3x3 convs (ReLU, a residual
Add), a 1x1 conv, a global average pool and a Gemm classifier, with a symbolic batch dim "N",
seeded random weights (the same file every time).
    make_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    rng = np.random.default_rng(5)
    inits = []

    def weight(name, shape, scale=0.2):
        inits.append(numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Conv", ["x", weight("w1", (16, 8, 3, 3)), weight("b1", (16,))], ["c1"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", weight("w2", (16, 16, 3, 3)), weight("b2", (16,))], ["c2"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["a2"], name="add2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", weight("w3", (32, 16, 1, 1))], ["c3"], kernel_shape=[1, 1],
                         name="conv3"),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", weight("wf", (10, 32)), weight("bf", (10,))], ["y"],
                         transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "tune_small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
