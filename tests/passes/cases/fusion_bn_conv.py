"""BatchNormalization folds into the Conv before it: W scaled per output channel, B = (B - mean)
* scale / sqrt(var + eps) + beta (a new B where the Conv had none); also a grouped
ConvTranspose (W is [Cin, Cout/group, k...]) and a 1-D Conv. The BNs disappear and the Convs
stay standard ONNX."""
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
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        bn("c1", "bn1", "y1", epsilon=1e-3),
        node("Conv", ["x", "w2"], ["c2"], strides=[2, 2]),
        bn("c2", "bn2", "y2"),
        node("ConvTranspose", ["x", "w3"], ["c3"], group=2, strides=[2, 2]),
        bn("c3", "bn3", "y3"),
        node("Conv", ["x1d", "w4", "b4"], ["c4"]),
        bn("c4", "bn4", "y4"),
    ]
    inits = [weights("w1", [6, 4, 3, 3], 1), weights("b1", [6], 2), weights("w2", [5, 4, 1, 1], 3),
             weights("w3", [4, 3, 2, 2], 4), weights("w4", [3, 2, 3], 5), weights("b4", [3], 6)]
    inits += bn_params("bn1", 6, 10) + bn_params("bn2", 5, 20) + bn_params("bn3", 6, 30)
    inits += bn_params("bn4", 3, 40)
    return model(nodes, [tensor("x", ["N", 4, 5, 5]), tensor("x1d", [2, 2, 7])],
                 [tensor("y1", ["N", 6, 5, 5]), tensor("y2", ["N", 5, 3, 3]),
                  tensor("y3", ["N", 6, 10, 10]), tensor("y4", [2, 3, 5])], inits)
