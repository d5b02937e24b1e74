"""LayerNormalization is recognized in the form PyTorch exports before opset 17: ReduceMean over
the last axis, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, then Mul by gamma and Add beta (both
kept as the op's Scale and B), or without the affine part (Scale becomes ones). Declined: a
mean over another axis, and a centered value read by a third node."""
from case_util import model, node, tensor, weights, const

PASSES = "fuse-layernorm,dce"
C = 8


def ln(i, x, axes="last", affine=True, extra_reader=False):
    p = f"n{i}_"
    nodes = [node("ReduceMean", [x], [p + "mean"], axes=[-1] if axes == "last" else [1]),
             node("Sub", [x, p + "mean"], [p + "d"]), node("Pow", [p + "d", "two"], [p + "sq"]),
             node("ReduceMean", [p + "sq"], [p + "var"], axes=[-1] if axes == "last" else [1]),
             node("Add", [p + "var", "eps"], [p + "ve"]), node("Sqrt", [p + "ve"], [p + "std"]),
             node("Div", [p + "d", p + "std"], [p + "y" if affine else f"y{i}"])]
    if affine:
        nodes += [node("Mul", [p + "y", "gamma"], [p + "g"]),
                  node("Add", [p + "g", "beta"], [f"y{i}"])]
    if extra_reader:
        nodes.append(node("Neg", [p + "d"], ["z"]))
    return nodes


def build():
    nodes = ln(0, "x") + ln(1, "x", affine=False) + ln(2, "x", axes="middle")
    nodes += ln(3, "x", extra_reader=True)
    inits = [const("two", 2.0, "float32"), const("eps", 1e-5, "float32"),
             weights("gamma", [C], 1), weights("beta", [C], 2)]
    outputs = [tensor(f"y{i}", [2, 3, C]) for i in range(4)] + [tensor("z", [2, 3, C])]
    return model(nodes, [tensor("x", [2, 3, C])], outputs, inits, opset=14)
