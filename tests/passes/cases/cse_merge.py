"""Identical constants merge, then nodes with the same op, inputs and attributes: the two Muls
by equal constants, the two Relus, the two LeakyRelus with equal alpha. When the later copy is a
graph output, the earlier node takes over its name."""
from case_util import const, model, node, tensor

PASSES = "cse"


def build():
    nodes = [
        node("Mul", ["x", "two_a"], ["m1"]),
        node("Mul", ["x", "two_b"], ["m2"]),
        node("Relu", ["m1"], ["r1"]),
        node("Relu", ["m2"], ["r2"]),
        node("Add", ["r1", "r2"], ["s"]),
        node("LeakyRelu", ["s"], ["l1"], alpha=0.2),
        node("LeakyRelu", ["s"], ["y_l"], alpha=0.2),
        node("Sub", ["l1", "y_l"], ["y_zero"]),
        node("Add", ["y_zero", "s"], ["y"]),
    ]
    inits = [const("two_a", [2.0], "float32"), const("two_b", [2.0], "float32")]
    return model(nodes, [tensor("x", [2, 3])],
                 [tensor("y", [2, 3]), tensor("y_l", [2, 3]), tensor("y_zero", [2, 3])], inits)
