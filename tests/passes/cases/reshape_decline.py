"""Declines: a Flatten -> Reshape chain whose output shape is symbolic, Unsqueeze(Squeeze(x, A), A)
where x's dim at A is not known to be 1 (Squeeze checks it at run time), and a Reshape to the
input's own shape from a graph input to a graph output (no node could take the output name)."""
from case_util import const, model, node, tensor

PASSES = "simplify-reshape"
DIMS = {"N": 3, "M": 1}


def build():
    nodes = [
        node("Flatten", ["x"], ["f"], axis=1),
        node("Reshape", ["f", "minus1_4"], ["y_flat"]),
        node("Squeeze", ["m", "axes1"], ["ms"]),
        node("Unsqueeze", ["ms", "axes1"], ["y_m"]),
        node("Reshape", ["k", "shape23"], ["y_k"]),
    ]
    inits = [const("minus1_4", [-1, 4]), const("axes1", [1]), const("shape23", [2, 3])]
    return model(nodes, [tensor("x", ["N", 2, 4]), tensor("m", ["N", "M", 3]), tensor("k", [2, 3])],
                 [tensor("y_flat", ["R", 4]), tensor("y_m", ["N", 1, 3]), tensor("y_k", [2, 3])],
                 inits)
