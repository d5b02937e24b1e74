"""Two Transposes become one with the composed permutation; two that cancel are removed, as is
a lone identity Transpose (its output a graph output: the producer takes over the name)."""
from case_util import model, node, tensor

PASSES = "simplify-reshape"


def build():
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Transpose", ["r"], ["t1"], perm=[1, 0, 2]),
        node("Transpose", ["t1"], ["t2"], perm=[1, 0, 2]),
        node("Sigmoid", ["t2"], ["y_cancel"]),
        node("Transpose", ["r"], ["t3"], perm=[0, 2, 1]),
        node("Transpose", ["t3"], ["t4"], perm=[2, 0, 1]),
        node("Tanh", ["t4"], ["y_merged"]),
        node("Transpose", ["t4"], ["t5"]),
        node("Neg", ["t5"], ["n"]),
        node("Transpose", ["n"], ["y_ident"], perm=[0, 1, 2]),
    ]
    return model(nodes, [tensor("x", [2, 3, 4])],
                 [tensor("y_cancel", [2, 3, 4]), tensor("y_merged", [3, 2, 4]),
                  tensor("y_ident", [4, 2, 3])])
