"""A Transpose that moves only dims of 1 (a batch-1 model switching between batch-first and
seq-first) keeps the bytes in order and becomes a Reshape, which then merges with the Reshape
after it; one that reorders two dims longer than 1 stays a Transpose, and so does one whose
input shape is not known (a symbolic batch)."""
from case_util import const, model, node, tensor

PASSES = "simplify-reshape"


def build():
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Transpose", ["r"], ["seq_first"], perm=[1, 0, 2]),
        node("Reshape", ["seq_first", "flat_shape"], ["flat"]),
        node("Sigmoid", ["flat"], ["y_view"]),
        node("Transpose", ["r"], ["swapped"], perm=[0, 2, 1]),
        node("Tanh", ["swapped"], ["y_swapped"]),
        node("Transpose", ["s"], ["y_symbolic"], perm=[1, 0, 2]),
    ]
    return model(nodes, [tensor("x", [1, 3, 4]), tensor("s", ["N", 3, 4])],
                 [tensor("y_view", [12]), tensor("y_swapped", [1, 4, 3]),
                  tensor("y_symbolic", [3, "N", 4])],
                 [const("flat_shape", [12])])
