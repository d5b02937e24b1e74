"""fuse-epilogue declines: a conv output that is a graph output (Relu stays apart); a conv
output with two readers that are not SiLU; Clip with a bound that is a graph input; an Add
that broadcasts a non-constant [1, C, 1, 1] (not a residual); Add(c, c); a bias Add after a
Conv whose B is not constant; Z whose symbolic batch M may differ from the conv's N. Partly:
only one activation fuses (Relu, then Sigmoid stays), and an Add after the activation stays."""
from case_util import model, node, tensor, weights

PASSES = "fuse-epilogue"


def build():
    conv = lambda i, b="b": node("Conv", ["x", "w", b], [f"c{i}"], pads=[1, 1, 1, 1])
    nodes = [
        conv(0), node("Relu", ["c0"], ["y0"]),
        conv(1), node("Relu", ["c1"], ["r1"]), node("Sigmoid", ["c1"], ["s1"]),
        node("Add", ["r1", "s1"], ["y1"]),
        conv(2), node("Clip", ["c2", "lo", "hi"], ["y2"]),
        conv(3), node("Add", ["c3", "t"], ["y3"]),
        conv(4), node("Add", ["c4", "c4"], ["y4"]),
        conv(5, "b_in"), node("Add", ["c5", "bias"], ["y5"]),
        conv(6), node("Add", ["c6", "zm"], ["y6"]),
        conv(7), node("Relu", ["c7"], ["r7"]), node("Sigmoid", ["r7"], ["y7"]),
        conv(8), node("Relu", ["c8"], ["r8"]), node("Add", ["r8", "x3"], ["y8"]),
    ]
    inits = [weights("w", [3, 2, 3, 3], 1), weights("b", [3], 2), weights("lo", [], 3),
             weights("bias", [3, 1, 1], 4)]
    shape = ["N", 3, 4, 4]
    return model(nodes, [tensor("x", ["N", 2, 4, 4]), tensor("hi", []), tensor("t", [1, 3, 1, 1]),
                         tensor("b_in", [3]), tensor("zm", ["M", 3, 4, 4]),
                         tensor("x3", ["N", 3, 4, 4])],
                 [tensor("c0", shape)] + [tensor(f"y{i}", shape) for i in range(9)], inits)
