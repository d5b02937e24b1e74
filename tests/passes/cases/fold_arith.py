"""Constant subgraphs of several ops fold in one run (a chain, int64 shape arithmetic, a
Constant node); a node producing a graph output is left in place (its output must stay a
node's), and a ConstantOfShape that would blow up to more than 16M elements is declined."""
from onnx import TensorProto, helper

from case_util import const, model, node, tensor, weights

PASSES = "fold-constants"


def build():
    big = helper.make_tensor("fill", TensorProto.FLOAT, [1], [0.0])
    nodes = [
        node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.FLOAT, [4], [1, 2, 3, 4])),
        node("Mul", ["c", "w"], ["cw"]),
        node("Abs", ["cw"], ["cw_abs"]),
        node("Sqrt", ["cw_abs"], ["root"]),
        node("Add", ["x", "root"], ["sum"]),
        node("Mul", ["dims", "two"], ["dims2"]),
        node("Reshape", ["sum", "dims2"], ["y"]),
        node("Neg", ["w"], ["y_const"]),
        node("ConstantOfShape", ["big_shape"], ["zeros"], value=big),
        node("ReduceMean", ["zeros"], ["zmean"], keepdims=0),
        node("Add", ["x", "zmean"], ["y_big"]),
    ]
    inits = [weights("w", [4], seed=1), const("dims", [1, 2]), const("two", [1, 2]),
             const("big_shape", [4097, 4096])]
    return model(nodes, [tensor("x", [4])],
                 [tensor("y", [1, 4]), tensor("y_const", [4]), tensor("y_big", [4])], inits)
