#!/usr/bin/env python3
"""Builds one-node models in the older opset forms the frontend must canonicalize (attribute axes,
split, pads, starts/ends, Clip bounds; Softmax's pre-13 flattening; Dropout's ratio) and others
whose semantics changed with the opset. ONNX's node suite holds only the newest forms, so these
are checked against ONNX Runtime, which implements every opset (see test_models.py).
    legacy_ops.py OUTDIR
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

X4 = [2, 3, 4, 5]

# name: (opset, op type, attributes, input shape, number of outputs)
CASES = {
    "clip_attrs_opset7": (7, "Clip", {"min": -0.3, "max": 0.4}, X4, 1),
    "unsqueeze_attr_axes_opset11": (11, "Unsqueeze", {"axes": [0, -1]}, X4, 1),
    "squeeze_attr_axes_opset11": (11, "Squeeze", {"axes": [-3]}, [2, 1, 4, 5], 1),
    "split_attr_sizes_opset11": (11, "Split", {"axis": 3, "split": [2, 3]}, X4, 2),
    "split_equal_opset11": (11, "Split", {"axis": -1}, [2, 3, 4, 6], 3),
    "pad_attrs_constant_opset10": (10, "Pad", {"pads": [0, 1, 2, 0, 0, 0, 1, 3], "value": 0.5}, X4, 1),
    "pad_attrs_reflect_opset7": (7, "Pad", {"mode": "reflect", "pads": [0, 0, 1, 2, 0, 0, 2, 1]}, X4, 1),
    "pad_attrs_edge_opset7": (7, "Pad", {"mode": "edge", "pads": [0, 0, 3, 0, 0, 0, 0, 4]}, X4, 1),
    "slice_attrs_opset9": (9, "Slice", {"starts": [1, -4], "ends": [1000, -1], "axes": [1, 3]}, X4, 1),
    "slice_attrs_no_axes_opset9": (9, "Slice", {"starts": [0, 1, 1], "ends": [2, 3, 3]}, X4, 1),
    "reducemean_attr_axes_opset13": (13, "ReduceMean", {"axes": [2, 3]}, X4, 1),
    "reducemean_attr_neg_axes_opset11": (11, "ReduceMean", {"axes": [-1], "keepdims": 0}, X4, 1),
    "reducemean_no_axes_opset13": (13, "ReduceMean", {}, X4, 1),
    "softmax_flattens_axis1_opset11": (11, "Softmax", {"axis": 1}, X4, 1),
    "softmax_default_axis_opset11": (11, "Softmax", {}, X4, 1),
    "softmax_flattens_axis2_opset9": (9, "Softmax", {"axis": 2}, X4, 1),
    "dropout_ratio_opset10": (10, "Dropout", {"ratio": 0.3}, X4, 1),
    "dropout_ratio_opset7": (7, "Dropout", {"ratio": 0.5}, X4, 1),
    "flatten_neg_axis_opset11": (11, "Flatten", {"axis": -1}, X4, 1),
    "flatten_axis0_opset9": (9, "Flatten", {"axis": 0}, X4, 1),
    "batchnorm_spatial_opset7": (7, "BatchNormalization", {"epsilon": 1e-3}, X4, 1),
    "averagepool_count_pad_opset7": (7, "AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                        "count_include_pad": 1}, X4, 1),
    "maxpool_ceil_opset10": (10, "MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, X4, 1),
}


def build(name):
    opset, op, attrs, shape, n_out = CASES[name]
    inputs, initializers = ["x"], []
    if op == "BatchNormalization":  # per-channel scale, bias, mean, var as constants
        for i, param in enumerate(["scale", "bias", "mean", "var"]):
            values = [0.5 + 0.25 * c if param in ("scale", "var") else 0.1 * (c - i) for c in range(shape[1])]
            initializers.append(helper.make_tensor(param, TensorProto.FLOAT, [shape[1]], values))
            inputs.append(param)
    outputs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, inputs, outputs, name=name, **attrs)
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if opset < 9:  # IR version 3 lists initializers among the graph inputs, as old exporters did
        graph_inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims) for t in initializers]
    graph = helper.make_graph(
        [node], name, graph_inputs,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="wpk-legacy-ops",
                              ir_version=helper.find_min_ir_version_for(opsets))
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # fills in the output shapes
    onnx.checker.check_model(model, full_check=True)
    return model


def write_models(out_dir):
    """Builds every case into out_dir; returns {name: path}."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name in CASES:
        paths[name] = os.path.join(out_dir, name + ".onnx")
        onnx.save(build(name), paths[name])
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1].strip())
    for name, path in write_models(sys.argv[1]).items():
        print(f"{name} -> {path}")
