"""Flatten -> Unsqueeze -> Reshape with known shapes becomes one Reshape of the chain's source to
a constant shape; a Reshape to its input's own shape is removed; Squeeze(Unsqueeze(x, A), A) is
removed even on a symbolic batch."""
from case_util import const, model, node, tensor

PASSES = "simplify-reshape"
DIMS = {"N": 3}


def build():
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Flatten", ["r"], ["f"], axis=1),
        node("Unsqueeze", ["f", "axes1"], ["u"]),
        node("Reshape", ["u", "shape64"], ["re"]),
        node("Reshape", ["re", "shape64"], ["same"]),
        node("Tanh", ["same"], ["y"]),
        node("Unsqueeze", ["z", "axes1"], ["zu"]),
        node("Squeeze", ["zu", "axes_neg"], ["zs"]),
        node("Sigmoid", ["zs"], ["y_z"]),
    ]
    inits = [const("axes1", [1]), const("axes_neg", [-2]), const("shape64", [6, 4])]
    return model(nodes, [tensor("x", [2, 3, 4]), tensor("z", ["N", 5])],
                 [tensor("y", [6, 4]), tensor("y_z", ["N", 5])], inits)
