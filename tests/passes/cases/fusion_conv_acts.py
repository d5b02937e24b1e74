"""Each activation fuses into the Conv before it (one FusedConv per branch): Relu, LeakyRelu
(alpha), Clip as ReLU6 (bounds from initializers and from a Constant node), Clip with one
bound, HardSigmoid (alpha, beta), HardSwish, Sigmoid, Tanh, SiLU = Mul(x, Sigmoid(x)) in
either operand order."""
from onnx import TensorProto, helper

from case_util import model, node, tensor, weights, const

PASSES = "fuse-epilogue"


def build():
    acts = [
        ("Relu", [], {}),
        ("LeakyRelu", [], {"alpha": 0.2}),
        ("Clip", ["zero", "six"], {}),
        ("Clip", ["zero", "six_node"], {}),
        ("Clip", ["", "half"], {}),
        ("HardSigmoid", [], {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", [], {}),
        ("Sigmoid", [], {}),
        ("Tanh", [], {}),
    ]
    nodes = [node("Constant", [], ["six_node"],
                  value=helper.make_tensor("six_v", TensorProto.FLOAT, [], [6.0]))]
    outputs = []
    for i, (op, extra, attrs) in enumerate(acts):
        nodes.append(node("Conv", ["x", "w", "b"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(node(op, [f"c{i}"] + extra, [f"y{i}"], **attrs))
        outputs.append(tensor(f"y{i}", ["N", 3, 4, 4]))
    for i, order in enumerate(([0, 1], [1, 0])):
        c, s = f"cs{i}", f"sig{i}"
        nodes += [node("Conv", ["x", "w", "b"], [c], pads=[1, 1, 1, 1]),
                  node("Sigmoid", [c], [s]),
                  node("Mul", [[c, s][order[0]], [c, s][order[1]]], [f"silu{i}"])]
        outputs.append(tensor(f"silu{i}", ["N", 3, 4, 4]))
    inits = [weights("w", [3, 2, 3, 3], 1), weights("b", [3], 2), const("zero", 0.0, "float32"),
             const("six", 6.0, "float32"), const("half", 0.5, "float32")]
    # inputs in [-4, 4): some outputs pass 6 so ReLU6 clips
    nodes.insert(0, node("Mul", ["x_in", "four"], ["x"]))
    inits.append(const("four", 4.0, "float32"))
    return model(nodes, [tensor("x_in", ["N", 2, 4, 4])], outputs, inits)
