"""Declines: the same Flatten chain on a symbolic batch. Shape of [N, 8, 2, 2] is not known, so
nothing downstream of it folds; the all-constant Mul beside it still does."""
from case_util import const, model, node, tensor, weights

PASSES = "fold-constants"
DIMS = {"N": 3}


def build():
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        node("Concat", ["batch1", "minus1"], ["shape"], axis=0),
        node("Reshape", ["x", "shape"], ["flat"]),
        node("Mul", ["w", "two"], ["w2"]),
        node("MatMul", ["flat", "w2"], ["y"]),
    ]
    inits = [const("zero", 0), const("axes0", [0]), const("minus1", [-1]),
             weights("w", [32, 5]), const("two", 2.0, dtype="float32")]
    return model(nodes, [tensor("x", ["N", 8, 2, 2])], [tensor("y", ["N", 5])], inits)
