#!/usr/bin/env python3
"""Builds small CNNs shaped like ResNet, MobileNetV2, SqueezeNet and DenseNet with onnx.helper.

The graphs use the node patterns PyTorch's exporter emits (BatchNormalization, Constant nodes,
Shape->Gather->Unsqueeze->Concat->Reshape before the classifier, Flatten, Gemm with transB,
GlobalAveragePool, padded MaxPool, Clip as ReLU6 in the opset-9 attribute form and the opset-11+
input form, a symbolic batch dim "N"). Weights are random but seeded, so every build is identical.
    gen_models.py OUTDIR [--models resnet_like,...]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLASSES = 10


class Builder:
    """Appends nodes and seeded random weights to a graph under construction."""

    def __init__(self, name, opset, seed):
        self.name, self.opset = name, opset
        self.rng = np.random.default_rng(seed)
        self.nodes, self.initializers = [], []
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def node(self, op, inputs, **attrs):
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", **attrs))
        return out

    def weight(self, array, prefix):
        name = self.fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    def const(self, array):
        """A Constant node, the way the exporter spells small tensors such as axes and shapes."""
        out = self.fresh("const")
        value = numpy_helper.from_array(np.asarray(array), out + "_value")
        self.nodes.append(helper.make_node("Constant", [], [out], name=out + "_node", value=value))
        return out

    # -- layers --

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=False):
        fan_in = cin // group * k * k
        w = self.weight(self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, k, k)), "conv_w")
        inputs = [x, w]
        if bias:
            inputs.append(self.weight(self.rng.normal(0, 0.1, cout), "conv_b"))
        return self.node("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group, dilations=[1, 1])

    def bn(self, x, c):
        params = [self.weight(self.rng.uniform(0.5, 1.5, c), "bn_scale"),
                  self.weight(self.rng.normal(0, 0.1, c), "bn_bias"),
                  self.weight(self.rng.normal(0, 0.1, c), "bn_mean"),
                  self.weight(self.rng.uniform(0.5, 1.5, c), "bn_var")]
        return self.node("BatchNormalization", [x] + params, epsilon=1e-5, momentum=0.9)

    def relu(self, x):
        return self.node("Relu", [x])

    def relu6(self, x):
        if self.opset < 11:  # min/max were attributes before opset 11
            return self.node("Clip", [x], min=0.0, max=6.0)
        return self.node("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))])

    def unsqueeze0(self, x):
        if self.opset < 13:  # axes became an input in opset 13
            return self.node("Unsqueeze", [x], axes=[0])
        return self.node("Unsqueeze", [x, self.const(np.array([0], np.int64))])

    def flatten_by_reshape(self, x):
        """x.view(x.size(0), -1): the Shape->Gather->Unsqueeze->Concat->Reshape chain."""
        batch = self.node("Gather", [self.node("Shape", [x]), self.const(np.int64(0))], axis=0)
        shape = self.node("Concat", [self.unsqueeze0(batch), self.const(np.array([-1], np.int64))], axis=0)
        return self.node("Reshape", [x, shape])

    def gemm(self, x, cin, cout):
        w = self.weight(self.rng.normal(0, np.sqrt(1.0 / cin), (cout, cin)), "fc_w")
        b = self.weight(self.rng.normal(0, 0.1, cout), "fc_b")
        return self.node("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def max_pool(self, x, k, stride, pad=0, ceil=0):
        attrs = {"ceil_mode": ceil} if ceil else {}
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, **attrs)

    def model(self, x_name, x_shape, out, out_name="logits"):
        assert self.nodes[-1].output[0] == out, "the graph output must come from the last node"
        self.nodes[-1].output[0] = out_name
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [x_shape[0], CLASSES])],
            self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="wpk-gen-models",
                                  ir_version=helper.find_min_ir_version_for(opsets))
        onnx.checker.check_model(model, full_check=True)
        return model


def resnet_like():
    """Basic blocks with residual Add and 1x1 stride-2 downsample; dynamic batch N; view() flatten."""
    b = Builder("resnet_like", 13, seed=1)
    x = b.relu(b.bn(b.conv("input", 3, 16, 7, stride=2, pad=3), 16))
    x = b.max_pool(x, 3, 2, pad=1)
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        y = b.relu(b.bn(b.conv(x, cin, cout, 3, stride, pad=1), cout))
        y = b.bn(b.conv(y, cout, cout, 3, 1, pad=1), cout)
        if stride != 1 or cin != cout:
            x = b.bn(b.conv(x, cin, cout, 1, stride), cout)
        x = b.relu(b.node("Add", [y, x]))
        cin = cout
    x = b.flatten_by_reshape(b.node("GlobalAveragePool", [x]))
    return b.model("input", ["N", 3, 64, 64], b.gemm(x, cin, CLASSES))


def mobilenet_v2_like(opset):
    """Inverted residuals with depthwise conv and ReLU6 (Clip); Flatten before the classifier."""
    b = Builder(f"mobilenet_v2_like_opset{opset}", opset, seed=2)
    x = b.relu6(b.bn(b.conv("input", 3, 16, 3, stride=2, pad=1), 16))
    cin = 16
    for t, cout, stride in ((1, 8, 1), (6, 12, 2), (6, 12, 1), (6, 16, 2), (6, 16, 1)):
        hidden = cin * t
        y = x
        if t != 1:
            y = b.relu6(b.bn(b.conv(y, cin, hidden, 1), hidden))
        y = b.relu6(b.bn(b.conv(y, hidden, hidden, 3, stride, pad=1, group=hidden), hidden))
        y = b.bn(b.conv(y, hidden, cout, 1), cout)
        x = b.node("Add", [x, y]) if stride == 1 and cin == cout else y
        cin = cout
    x = b.relu6(b.bn(b.conv(x, cin, 64, 1), 64))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    if opset < 12:  # old exporters left eval-mode Dropout in the graph
        x = b.node("Dropout", [x], ratio=0.2)
    return b.model("input", [1, 3, 64, 64], b.gemm(x, 64, CLASSES))


def squeezenet_like():
    """Fire modules (squeeze 1x1, expand 1x1 + 3x3, Concat); ceil-mode MaxPool; conv classifier."""
    b = Builder("squeezenet_like", 13, seed=3)
    x = b.relu(b.conv("input", 3, 16, 3, stride=2, bias=True))
    x = b.max_pool(x, 3, 2, ceil=1)

    def fire(x, cin, squeeze, expand):
        s = b.relu(b.conv(x, cin, squeeze, 1, bias=True))
        e1 = b.relu(b.conv(s, squeeze, expand, 1, bias=True))
        e3 = b.relu(b.conv(s, squeeze, expand, 3, pad=1, bias=True))
        return b.node("Concat", [e1, e3], axis=1)

    x = fire(fire(x, 16, 4, 8), 16, 4, 8)
    x = b.max_pool(x, 3, 2, ceil=1)
    x = fire(x, 16, 8, 16)
    x = b.relu(b.conv(x, 32, 16, 1, bias=True))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    # a TensorFlow-style output name: wpk must turn the ':' into '_' in the file name
    return b.model("input", [1, 3, 64, 64], b.gemm(x, 16, CLASSES), out_name="logits:0")


def densenet_like():
    """Dense blocks (BN-Relu-Conv, Concat of all earlier features), AveragePool transitions."""
    b = Builder("densenet_like", 13, seed=4)
    x = b.relu(b.bn(b.conv("input", 3, 16, 3, pad=1), 16))
    x = b.max_pool(x, 3, 2, pad=1)
    c, growth = 16, 8
    for block in range(2):
        features = [x]
        for _ in range(3):
            cat = b.node("Concat", features, axis=1) if len(features) > 1 else features[0]
            cin = c + growth * (len(features) - 1)
            y = b.conv(b.relu(b.bn(cat, cin)), cin, 2 * growth, 1)
            y = b.conv(b.relu(b.bn(y, 2 * growth)), 2 * growth, growth, 3, pad=1)
            features.append(y)
        x = b.node("Concat", features, axis=1)
        c += growth * 3
        if block == 0:  # transition: halve channels and resolution
            x = b.conv(b.relu(b.bn(x, c)), c, c // 2, 1)
            x = b.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    x = b.relu(b.bn(x, c))
    x = b.flatten_by_reshape(b.node("GlobalAveragePool", [x]))
    return b.model("input", [1, 3, 32, 32], b.gemm(x, c, CLASSES))


MODELS = {
    "resnet_like": resnet_like,
    "mobilenet_v2_like_opset9": lambda: mobilenet_v2_like(9),
    "mobilenet_v2_like_opset13": lambda: mobilenet_v2_like(13),
    "squeezenet_like": squeezenet_like,
    "densenet_like": densenet_like,
}
DYNAMIC_BATCH = {"resnet_like"}


def write_models(out_dir, names=None):
    """Builds the named models (default: all) into out_dir; returns {name: path}."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name in names or MODELS:
        paths[name] = os.path.join(out_dir, name + ".onnx")
        onnx.save(MODELS[name](), paths[name])
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit("gen_models: unknown model(s): " + ", ".join(unknown))
    for name, path in write_models(args.out_dir, names).items():
        print(f"{name} -> {path}")


if __name__ == "__main__":
    main()
