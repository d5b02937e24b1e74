"""ReLU6 as an opset-10 Clip with min/max attributes: the frontend turns them into constant
inputs, and the Clip fuses into the Conv like the opset-11 form (clip_min=0, clip_max=6)."""
from case_util import model, node, tensor, weights, const

PASSES = "fuse-epilogue"


def build():
    nodes = [
        node("Mul", ["x_in", "four"], ["x"]),
        node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        node("Clip", ["c"], ["y"], min=0.0, max=6.0),
    ]
    inits = [weights("w", [3, 2, 3, 3], 1), weights("b", [3], 2), const("four", 4.0, "float32")]
    return model(nodes, [tensor("x_in", [1, 2, 4, 4])], [tensor("y", [1, 3, 4, 4])], inits,
                 opset=10)
