"""The -O1 cleanup passes together on the classifier head PyTorch exports unfolded: Identity and
Dropout go, the Shape/Gather/Unsqueeze/Concat chain of x.view(x.size(0), -1) folds into the
Reshape's shape (using up the repeated axes constants before CSE sees them), the duplicated
Relu merges, and the dead leftovers and constants nothing reads any more are removed."""
import numpy as np

from case_util import const, model, node, tensor, weights

PASSES = "eliminate-identity,fold-constants,simplify-reshape,cse,dce"


def build():
    nodes = [
        node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["r"]),
        node("Relu", ["c"], ["r_again"]),
        node("Add", ["r", "r_again"], ["a"]),
        node("GlobalAveragePool", ["a"], ["p"]),
        node("Identity", ["p"], ["pi"]),
        node("Shape", ["pi"], ["s"]),
        node("Gather", ["s", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "axes_a"], ["batch1"]),
        node("Unsqueeze", ["minus1_scalar", "axes_b"], ["minus1"]),
        node("Concat", ["batch1", "minus1"], ["shape"], axis=0),
        node("Reshape", ["pi", "shape"], ["flat"]),
        node("Dropout", ["flat", "ratio"], ["d"]),
        node("Gemm", ["d", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    inits = [weights("w", [4, 3, 3, 3], seed=1), weights("b", [4], seed=2),
             const("zero", 0), const("axes_a", [0]), const("axes_b", [0]), const("minus1_scalar", -1),
             const("ratio", 0.5, np.float32), weights("fc_w", [10, 4], seed=3),
             weights("fc_b", [10], seed=4)]
    return model(nodes, [tensor("x", [1, 3, 6, 6])], [tensor("y", [1, 10])], inits)
