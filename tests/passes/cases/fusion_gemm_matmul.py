"""Epilogues of Gemm and MatMul. A MatMul of 2-D operands plus a constant bias becomes a plain
Gemm; on a 3-D input it becomes FusedMatMul(A, B, bias) with the Relu after it. A bias Add
after a Gemm with C sums into a new C (beta folded in); the LeakyRelu's alpha is then the
FusedGemm's alpha, so a Gemm whose own alpha is not 1 keeps its Relu. A non-constant C with
a residual Add and Sigmoid; a MatMul with a residual before its bias Add."""
from case_util import model, node, tensor, weights

PASSES = "fuse-epilogue"


def build():
    nodes = [
        node("MatMul", ["a", "w"], ["m1"]),
        node("Add", ["m1", "bias"], ["y1"]),
        node("MatMul", ["a3", "w"], ["m2"]),
        node("Add", ["bias", "m2"], ["m2b"]),
        node("Relu", ["m2b"], ["y2"]),
        node("Gemm", ["a", "g", "c"], ["m3"], transB=1, beta=0.5),
        node("Add", ["m3", "bias6"], ["m3b"]),
        node("LeakyRelu", ["m3b"], ["y3"], alpha=0.1),
        node("Gemm", ["a", "g"], ["m4"], transB=1, alpha=2.0),
        node("Relu", ["m4"], ["y4"]),
        node("Gemm", ["a", "g", "c_in"], ["m5"], transB=1),
        node("Add", ["z", "m5"], ["m5z"]),
        node("Sigmoid", ["m5z"], ["y5"]),
        node("MatMul", ["a3", "w"], ["m6"]),
        node("Add", ["m6", "z3"], ["m6z"]),
        node("Add", ["m6z", "bias"], ["m6b"]),
        node("Tanh", ["m6b"], ["y6"]),
    ]
    inits = [weights("w", [5, 4], 1), weights("bias", [4], 2), weights("g", [6, 5], 3),
             weights("c", [6], 4), weights("bias6", [1, 6], 5)]
    return model(nodes, [tensor("a", [3, 5]), tensor("a3", [2, 3, 5]), tensor("c_in", [6]),
                         tensor("z", [3, 6]), tensor("z3", [2, 3, 4])],
                 [tensor("y1", [3, 4]), tensor("y2", [2, 3, 4]), tensor("y3", [3, 6]),
                  tensor("y4", [3, 6]), tensor("y5", [3, 6]), tensor("y6", [2, 3, 4])], inits)
