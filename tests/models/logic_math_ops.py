#!/usr/bin/env python3
"""Builds small models of the comparison, logic, selection and elementwise math ops (Where,
Equal ... Not, Mod, Min/Max/Sum/Mean, PRelu, Floor ... Mish, IsNaN, IsInf) at opsets the node
suite does not cover (Not's cases are opset 1), with broadcasting and tensors big enough for
the multi-threaded kernel paths; test_models.py checks them against ONNX Runtime.
    logic_math_ops.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F, B = TensorProto.FLOAT, TensorProto.BOOL
BIG = [2, 16, 32, 32]  # 32768 elements: the kernels' threshold for running on the thread pool


def node(op, inputs, output, **attrs):
    return helper.make_node(op, inputs, [output], name=output, **attrs)


def compare_logic():
    """Comparisons of x with a broadcast y, combined by the logic ops."""
    nodes = [node("Less", ["x", "y"], "lt"), node("Greater", ["x", "y"], "gt"),
             node("LessOrEqual", ["x", "y"], "le"), node("GreaterOrEqual", ["x", "y"], "ge"),
             node("Equal", ["lt", "b"], "eq"),
             node("And", ["lt", "b"], "and"), node("Or", ["gt", "b"], "or"),
             node("Xor", ["le", "b"], "xor"),
             node("Not", ["and"], "not_and")]
    inputs = [("x", F, BIG), ("y", F, [32, 1]), ("b", B, [16, 1, 32])]
    return nodes, inputs, ["eq", "or", "xor", "not_and", "ge"], 13, []


def select_variadic():
    """Where over three broadcast operands, Mod (fmod=1: ONNX Runtime's only float form) and the
    variadic ops over one, two and three inputs of different shapes."""
    nodes = [node("Less", ["x", "y"], "c"),
             node("Mod", ["x", "y"], "mod", fmod=1),
             node("Where", ["c", "mod", "z"], "where"),
             node("Max", ["x", "y", "z"], "max3"), node("Min", ["x", "z"], "min2"),
             node("Sum", ["x", "y", "z"], "sum3"), node("Mean", ["z", "x", "y"], "mean3"),
             node("Max", ["x"], "max1"), node("Min", ["y", "z"], "min_yz")]
    inputs = [("x", F, BIG), ("y", F, [32, 32]), ("z", F, [16, 1, 1])]
    return nodes, inputs, ["where", "max3", "min2", "sum3", "mean3", "max1", "min_yz"], 13, []


def unary_math():
    """Every unary op on a scaled x (so rounding and the activations see both signs and more
    than one unit), PRelu with a per-channel slope, and the NaN/Inf tests on values that hold
    some: sqrt of negatives, 1 / floor(x) where floor(x) is 0 (+inf), 1 / -floor(-x) where
    floor(-x) is 0 (-inf)."""
    rng = np.random.default_rng(7)
    slope = numpy_helper.from_array(rng.uniform(0.05, 0.5, [16, 1, 1]).astype(np.float32), "slope")
    scale = numpy_helper.from_array(np.array(3.0, np.float32), "scale")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    nodes = [node("Mul", ["x", "scale"], "s"), node("Mul", ["x", "one"], "u")]
    outs = []
    for op, src, attrs in [("Floor", "s", {}), ("Ceil", "s", {}), ("Round", "s", {}), ("Sign", "s", {}),
                           ("Sin", "s", {}), ("Cos", "s", {}), ("Tan", "u", {}), ("Asin", "u", {}),
                           ("Acos", "u", {}), ("Atan", "s", {}), ("Sinh", "s", {}), ("Cosh", "s", {}),
                           ("Asinh", "s", {}), ("Atanh", "u", {}), ("Softsign", "s", {}),
                           ("Softplus", "s", {}), ("Elu", "s", {"alpha": 0.7}), ("Elu", "s", {}),
                           ("Selu", "s", {}), ("Selu", "s", {"alpha": 1.5, "gamma": 0.5}), ("Mish", "s", {})]:
        out = f"{op.lower()}_{len(outs)}"
        nodes.append(node(op, [src], out, **attrs))
        outs.append(out)
    nodes += [node("PRelu", ["s", "slope"], "prelu"),
              node("Sqrt", ["x"], "root"), node("IsNaN", ["root"], "isnan"),
              node("Floor", ["x"], "fl"), node("Reciprocal", ["fl"], "inv"),
              node("Neg", ["x"], "nx"), node("Floor", ["nx"], "fl_nx"), node("Neg", ["fl_nx"], "m_fl_nx"),
              node("Reciprocal", ["m_fl_nx"], "inv_neg"), node("Add", ["inv", "inv_neg"], "infs"),
              node("IsInf", ["inv"], "isinf"), node("IsInf", ["infs"], "isinf_neg", detect_positive=0),
              node("IsInf", ["infs"], "isinf_pos", detect_negative=0)]
    outs += ["prelu", "isnan", "isinf", "isinf_neg", "isinf_pos"]
    return nodes, [("x", F, BIG)], outs, 18, [slope, scale, one]


BOOL_OUTPUTS = {"eq", "or", "xor", "not_and", "ge", "isnan", "isinf", "isinf_neg", "isinf_pos"}
MODELS = {"compare_logic_opset13": compare_logic, "where_mod_variadic_opset13": select_variadic,
          "unary_math_opset18": unary_math}


def build(name):
    nodes, inputs, outputs, opset, inits = MODELS[name]()
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(o, B if o in BOOL_OUTPUTS else F, None) for o in outputs], inits)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="wpk-logic-math-ops",
                              ir_version=helper.find_min_ir_version_for(opsets))
    # fills in the outputs' element types and shapes
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    return model


def write_models(out_dir):
    """Builds every model into out_dir; returns {name: path}."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name in MODELS:
        paths[name] = os.path.join(out_dir, name + ".onnx")
        onnx.save(build(name), paths[name])
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for path in write_models(sys.argv[1]).values():
        print(path)
