"""ResNet blocks on a symbolic batch: Conv -> BN (folded) -> Relu, and Conv -> BN -> Add(residual)
-> Relu, which becomes FusedConv(X, W, B, Z, activation=Relu). In the downsampling block both
branches are Conv+BN; the first Conv in node order takes the Add, the other branch's Conv
becomes its Z. The identity shortcut Z is the block input: same symbolic shape, proven by
binding N to two unusual sizes."""
import numpy as np
from onnx import numpy_helper

from case_util import model, node, tensor, weights

PASSES = "fold-batchnorm,fuse-epilogue"


def bn_params(prefix, c, seed):
    """scale, B, mean, var of c channels (scale and var in [0.5, 1.5))."""
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c), rng.uniform(-1, 1, c),
            rng.uniform(0.5, 1.5, c)]
    return [numpy_helper.from_array(v.astype(np.float32), f"{prefix}_{p}")
            for v, p in zip(vals, "sbmv")]


def conv_bn(x, i, y, **attrs):
    return [node("Conv", [x, f"w{i}"], [f"c{i}"], **attrs),
            node("BatchNormalization", [f"c{i}"] + [f"bn{i}_{p}" for p in "sbmv"], [y])]


def build():
    pad = {"pads": [1, 1, 1, 1]}
    nodes = (conv_bn("x", 1, "n1", **pad) + [node("Relu", ["n1"], ["r1"])] +
             conv_bn("r1", 2, "n2", **pad) +
             [node("Add", ["n2", "x"], ["s2"]), node("Relu", ["s2"], ["r2"])] +
             conv_bn("r2", 3, "n3", strides=[2, 2], **pad) + [node("Relu", ["n3"], ["r3"])] +
             conv_bn("r3", 4, "n4", **pad) + conv_bn("r2", 5, "n5", strides=[2, 2]) +
             [node("Add", ["n4", "n5"], ["s4"]), node("Relu", ["s4"], ["y"])])
    inits = [weights("w1", [4, 4, 3, 3], 1), weights("w2", [4, 4, 3, 3], 2),
             weights("w3", [8, 4, 3, 3], 3), weights("w4", [8, 8, 3, 3], 4),
             weights("w5", [8, 4, 1, 1], 5)]
    for i, c in enumerate([4, 4, 8, 8, 8]):
        inits += bn_params(f"bn{i + 1}", c, 10 * (i + 1))
    return model(nodes, [tensor("x", ["N", 4, 6, 6])], [tensor("y", ["N", 8, 3, 3])], inits)
