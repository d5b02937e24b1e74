"""Gelu fuses in both forms: the Gelu op (opset 20) and the Erf graph PyTorch exports,
0.5 * x * (1 + Erf(x / sqrt 2)), matched node by node -- as (x * a) * 0.5 with Div, and as
(x * 0.5) * a with Mul by 1/sqrt 2. Declined: Gelu with approximate = tanh, and an Erf graph
whose divisor is not sqrt 2."""
from case_util import model, node, tensor, weights, const

PASSES = "fuse-epilogue"


def erf_gelu(x, i, scale_op="Div", k="sqrt2", order="a"):
    d, e, a, m, y = f"d{i}", f"e{i}", f"a{i}", f"m{i}", f"y{i}"
    nodes = [node(scale_op, [x, k], [d]), node("Erf", [d], [e]), node("Add", [e, "one"], [a])]
    if order == "a":
        nodes += [node("Mul", [x, a], [m]), node("Mul", [m, "half"], [y])]
    else:
        nodes += [node("Mul", ["half", x], [m]), node("Mul", [a, m], [y])]
    return nodes


def build():
    nodes = [node("MatMul", ["a", "w"], ["x0"]), node("Gelu", ["x0"], ["y0"])]
    nodes += [node("MatMul", ["a", "w"], ["x1"])] + erf_gelu("x1", 1)
    nodes += [node("MatMul", ["a", "w"], ["x2"])] + erf_gelu("x2", 2, "Mul", "rsqrt2", "b")
    nodes += [node("MatMul", ["a", "w"], ["x3"]), node("Gelu", ["x3"], ["y3"], approximate="tanh")]
    nodes += [node("MatMul", ["a", "w"], ["x4"])] + erf_gelu("x4", 4, k="not_sqrt2")
    inits = [weights("w", [5, 4], 1), const("sqrt2", 1.4142135623730951, "float32"),
             const("rsqrt2", 0.7071067811865476, "float32"), const("one", 1.0, "float32"),
             const("half", 0.5, "float32"), const("not_sqrt2", 1.5, "float32")]
    m = model(nodes, [tensor("a", [2, 3, 5])],
              [tensor(f"y{i}", [2, 3, 4]) for i in range(5)], inits, opset=20)
    m.ir_version = 9  # opset 20 needs it
    return m
