"""What the layout pass leaves in NCHW: a lone depthwise conv (9 multiply-adds per output against
two reorders per element: 4.5 per element moved, below the rule's 8), a grouped conv whose 8
channels per group are not a whole block of 16, a conv with fewer output channels (4) than a
block, a 1-D conv, and a conv whose weights are computed at run time. The graph comes out
unchanged. Expects an AVX-512 target (blocks of 16)."""
from case_util import model, node, tensor, weights

PASSES = "layout"


def build():
    nodes = [
        node("Conv", ["x", "wd"], ["y1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
        node("Conv", ["x", "wg"], ["y2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
        node("Conv", ["x", "wn"], ["y3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Conv", ["x1d", "w1"], ["y4"], kernel_shape=[3], pads=[1, 1]),
        node("Relu", ["wv"], ["wr"]),
        node("Conv", ["x", "wr"], ["y5"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    inits = [weights("wd", [32, 1, 3, 3], 1), weights("wg", [32, 8, 3, 3], 2),
             weights("wn", [4, 32, 3, 3], 3), weights("w1", [32, 32, 3], 4),
             weights("wv", [32, 32, 3, 3], 5)]
    return model(nodes, [tensor("x", [1, 32, 16, 16]), tensor("x1d", [1, 32, 20])],
                 [tensor("y1", [1, 32, 16, 16]), tensor("y2", [1, 32, 16, 16]),
                  tensor("y3", [1, 4, 16, 16]), tensor("y4", [1, 32, 20]),
                  tensor("y5", [1, 32, 16, 16])], inits)
