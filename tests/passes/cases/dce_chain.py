"""A dead chain (three nodes, each read only by the next, none by an output) goes in one run, as
do the constants only it read and an initializer nothing reads; a node with one of two outputs
read stays."""
from case_util import const, model, node, tensor, weights

PASSES = "dce"


def build():
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Mul", ["r", "w_dead"], ["dead1"]),
        node("Sigmoid", ["dead1"], ["dead2"]),
        node("Tanh", ["dead2"], ["dead3"]),
        node("Split", ["r", "split"], ["a", "b"], axis=1),
        node("Neg", ["a"], ["y"]),
    ]
    inits = [weights("w_dead", [2, 4]), weights("w_unused", [7]), const("split", [2, 2])]
    return model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 2])], inits)
