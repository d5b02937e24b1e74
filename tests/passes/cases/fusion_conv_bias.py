"""Bias Adds fuse into a Conv's own B (standard ONNX stays standard): Adds of constants shaped
[C, 1, 1] and [1, C, 1, 1] into a Conv without B, then Relu; a scalar Add into a Conv with B.
A residual before the bias still lets the bias fold; a residual into a Conv without B leaves
FusedConv's B slot empty."""
from case_util import model, node, tensor, weights, const

PASSES = "fuse-epilogue"


def build():
    nodes = [
        node("Conv", ["x", "w"], ["c0"]),
        node("Add", ["c0", "b3"], ["c0a"]),
        node("Add", ["b13", "c0a"], ["c0b"]),
        node("Relu", ["c0b"], ["y0"]),
        node("Conv", ["x", "w", "b"], ["c1"]),
        node("Add", ["c1", "k"], ["y1"]),
        node("Conv", ["x", "w", "b"], ["c2"]),
        node("Add", ["c2", "z"], ["c2z"]),
        node("Add", ["c2z", "b3"], ["y2"]),
        node("Conv", ["x", "w"], ["c3"]),
        node("Add", ["z", "c3"], ["c3z"]),
        node("Sigmoid", ["c3z"], ["y3"]),
    ]
    inits = [weights("w", [3, 2, 3, 3], 1), weights("b", [3], 2), weights("b3", [3, 1, 1], 3),
             weights("b13", [1, 3, 1, 1], 4), const("k", [0.25], "float32")]
    shape = [2, 3, 2, 2]
    return model(nodes, [tensor("x", [2, 2, 4, 4]), tensor("z", shape)],
                 [tensor(f"y{i}", shape) for i in range(4)], inits)
