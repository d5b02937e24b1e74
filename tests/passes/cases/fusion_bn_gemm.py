"""BatchNormalization after Gemm folds per output column: into B's rows (transB) or columns and
into C (beta folded in, so beta becomes 1). After a MatMul of a 2-D input and a constant 2-D
weight it folds into the weight's columns and a bias, which makes the MatMul a Gemm. A MatMul
of a 3-D input normalizes dim 1, not its columns: that BN becomes a scale+shift instead."""
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
        node("Gemm", ["a", "g1"], ["m1"], transB=1),
        bn("m1", "bn1", "y1"),
        node("Gemm", ["a", "g2", "c2"], ["m2"], alpha=0.5, beta=2.0),
        bn("m2", "bn2", "y2"),
        node("MatMul", ["a", "g3"], ["m3"]),
        bn("m3", "bn3", "y3"),
        node("MatMul", ["a3", "g4"], ["m4"]),
        bn("m4", "bn4", "y4"),
    ]
    inits = [weights("g1", [6, 5], 1), weights("g2", [5, 7], 2), weights("c2", [1, 7], 3),
             weights("g3", [5, 4], 4), weights("g4", [5, 3], 5)]
    inits += bn_params("bn1", 6, 10) + bn_params("bn2", 7, 20) + bn_params("bn3", 4, 30)
    inits += bn_params("bn4", 2, 40)
    return model(nodes, [tensor("a", [3, 5]), tensor("a3", [4, 2, 5])],
                 [tensor("y1", [3, 6]), tensor("y2", [3, 7]), tensor("y3", [3, 4]),
                  tensor("y4", [4, 2, 3])], inits)
