"""A BatchNormalization that cannot fold into a conv becomes Mul and Add with constant
[C, 1, ..., 1] tensors: on a graph input, before Relu -> Conv (DenseNet), and after a Conv
whose output has another reader. Declines (the BN stays): statistics that are a graph input,
and an input whose rank is not known statically (a Reshape to a shape computed at run time)."""
import numpy as np
from onnx import numpy_helper

from case_util import model, node, tensor, weights

PASSES = "fold-batchnorm"


def bn_params(prefix, c, seed):
    """scale, B, mean, var of c channels (scale and var in [0.5, 1.5))."""
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c), rng.uniform(-1, 1, c),
            rng.uniform(0.5, 1.5, c)]
    return [numpy_helper.from_array(v.astype(np.float32), f"{prefix}_{p}")
            for v, p in zip(vals, "sbmv")]


def bn(x, prefix, y, **attrs):
    return node("BatchNormalization", [x] + [f"{prefix}_{p}" for p in "sbmv"], [y], **attrs)


def build():
    nodes = [
        bn("x", "bn1", "n1"),
        node("Relu", ["n1"], ["r1"]),
        node("Conv", ["r1", "w1"], ["y1"]),
        node("Conv", ["x", "w2"], ["c2"]),
        bn("c2", "bn2", "n2"),
        node("Add", ["c2", "n2"], ["y2"]),
        node("BatchNormalization", ["x", "bn1_s", "bn1_b", "mean", "bn1_v"], ["y3"]),
        node("Shape", ["x"], ["shape"]),
        node("Reshape", ["x", "shape"], ["xr"]),
        bn("xr", "bn1", "y4"),
        bn("v", "bn3", "y5"),
    ]
    inits = [weights("w1", [2, 4, 1, 1], 1), weights("w2", [4, 4, 3, 3], 2)]
    inits += bn_params("bn1", 4, 10) + bn_params("bn2", 4, 20) + bn_params("bn3", 3, 30)
    return model(nodes, [tensor("x", ["N", 4, 3, 3]), tensor("mean", [4]),
                         tensor("v", [5, 3])],
                 [tensor("y1", ["N", 2, 3, 3]), tensor("y2", ["N", 4, 1, 1]),
                  tensor("y3", ["N", 4, 3, 3]), tensor("y4", ["N", 4, 3, 3]), tensor("y5", [5, 3])],
                 inits)
