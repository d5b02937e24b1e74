"""Declines: an Identity from a graph input straight to a graph output (no node could take
over the output name), an Identity from a value that is itself a graph output (one value cannot
carry two output names), and a Dropout whose mask is read."""
from case_util import model, node, tensor

PASSES = "eliminate-identity"


def build():
    nodes = [
        node("Identity", ["x"], ["y_in"]),
        node("Relu", ["x"], ["r"]),
        node("Identity", ["r"], ["y_r"]),
        node("Dropout", ["r"], ["d", "mask"]),
        node("Cast", ["mask"], ["y_mask"], to=1),
        node("Tanh", ["d"], ["y_d"]),
    ]
    return model(nodes, [tensor("x", [2, 3])],
                 [tensor("y_in", [2, 3]), tensor("r", [2, 3]), tensor("y_r", [2, 3]),
                  tensor("y_mask", [2, 3]), tensor("y_d", [2, 3])])
