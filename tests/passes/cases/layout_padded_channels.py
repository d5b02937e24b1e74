"""24 channels at blocks of 16: tensors are padded to 32 lanes, the last 8 zero. Relu keeps them
zero, so conv -> Relu -> conv is one region; Sigmoid would not (Sigmoid(0) = 0.5), so in the
second chain it stays NCHW and splits the chain into two regions, each with its own Reorders.
The first chain's input has 5 channels, fewer than a block: its conv reads it as NCHW, without
a Reorder. Expects an AVX-512 target (blocks of 16)."""
from case_util import model, node, tensor, weights

PASSES = "layout"


def build():
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [
        node("Conv", ["x", "w1"], ["c1"], **conv),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "w2"], ["y1"], **conv),
        node("Conv", ["x24", "w3"], ["c3"], **conv),
        node("Sigmoid", ["c3"], ["s3"]),
        node("Conv", ["s3", "w4"], ["y2"], **conv),
    ]
    inits = [weights("w1", [24, 5, 3, 3], 1), weights("w2", [24, 24, 3, 3], 2),
             weights("w3", [24, 24, 3, 3], 3), weights("w4", [24, 24, 3, 3], 4)]
    return model(nodes, [tensor("x", [1, 5, 9, 9]), tensor("x24", [1, 24, 9, 9])],
                 [tensor("y1", [1, 24, 9, 9]), tensor("y2", [1, 24, 9, 9])], inits)
