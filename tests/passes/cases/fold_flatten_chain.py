"""The chain PyTorch exports for x.view(x.size(0), -1) on a fixed-batch input: Shape, Gather,
Unsqueeze and Concat fold into the constant shape of the Reshape; a Constant node becomes a
constant value."""
from case_util import const, model, node, tensor, weights

PASSES = "fold-constants"


def build():
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Shape", ["r"], ["s"]),
        node("Gather", ["s", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        node("Concat", ["batch1", "minus1"], ["shape"], axis=0),
        node("Reshape", ["r", "shape"], ["flat"]),
        node("Constant", [], ["scale"], value_float=0.5),
        node("Mul", ["flat", "scale"], ["scaled"]),
        node("MatMul", ["scaled", "w"], ["y"]),
    ]
    inits = [const("zero", 0), const("axes0", [0]), const("minus1", [-1]), weights("w", [32, 5])]
    return model(nodes, [tensor("x", [1, 8, 2, 2])], [tensor("y", [1, 5])], inits)
