"""Declines: nodes that differ in an attribute (alpha, perm, an attribute only one has), in
input order, or in the dtype of an equal-valued constant; two identical nodes whose outputs are
both graph outputs (neither name may go)."""
from case_util import const, model, node, tensor

PASSES = "cse"


def build():
    nodes = [
        node("LeakyRelu", ["x"], ["l1"], alpha=0.1),
        node("LeakyRelu", ["x"], ["l2"], alpha=0.2),
        node("LeakyRelu", ["x"], ["l3"]),
        node("Sub", ["l1", "l2"], ["d1"]),
        node("Sub", ["l2", "l1"], ["d2"]),
        node("Add", ["d1", "d2"], ["s"]),
        node("Add", ["s", "l3"], ["s3"]),
        node("Transpose", ["s3"], ["t1"], perm=[1, 0]),
        node("Transpose", ["s3"], ["t2"]),
        node("Transpose", ["s3"], ["t3"], perm=[0, 1]),
        node("Add", ["t1", "t2"], ["y_t"]),
        node("Tanh", ["t3"], ["y_a"]),
        node("Tanh", ["t3"], ["y_b"]),
        node("Cast", ["shape_i64"], ["c64"], to=1),
        node("Cast", ["shape_i32"], ["c32"], to=1),
        node("Sub", ["c64", "c32"], ["y_c"]),
    ]
    inits = [const("shape_i64", [3]), const("shape_i32", [3], "int32")]
    return model(nodes, [tensor("x", [3, 3])],
                 [tensor("y_t", [3, 3]), tensor("y_a", [3, 3]), tensor("y_b", [3, 3]),
                  tensor("y_c", [1])], inits)
