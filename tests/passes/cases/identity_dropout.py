"""Identity and inference Dropout (ratio given, no training_mode; and training_mode a constant
false) are removed and their readers rewired; an Identity whose output is a graph output
hands the output name to its input's producer."""
import numpy as np

from case_util import const, model, node, tensor, weights

PASSES = "eliminate-identity"


def build():
    nodes = [
        node("Identity", ["x"], ["xi"]),
        node("Relu", ["xi"], ["r"]),
        node("Dropout", ["r", "ratio"], ["d"]),
        node("Add", ["d", "w"], ["a"]),
        node("Dropout", ["a", "ratio", "off"], ["d2"]),
        node("Sigmoid", ["d2"], ["s"]),
        node("Identity", ["s"], ["si"]),
        node("Identity", ["si"], ["y"]),
    ]
    inits = [weights("w", [3, 4]), const("ratio", 0.3, np.float32), const("off", False, np.bool_)]
    return model(nodes, [tensor("x", [3, 4])], [tensor("y", [3, 4])], inits)
