"""Helpers for the golden pass cases (tests/passes/cases/*.py): build a small ONNX model from
nodes, inputs, outputs and seeded weights in as few lines as possible."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # old enough for every ONNX Runtime the harness may meet
FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def weights(name, shape, seed=0):
    """A float32 initializer of seeded values uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def const(name, values, dtype=np.int64):
    """An initializer holding `values` (a list or scalar) as `dtype`."""
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def tensor(name, shape, elem=FLOAT):
    """A value_info for a graph input or output; shape entries may be dim names (str)."""
    return helper.make_tensor_value_info(name, elem, shape)


def node(op, inputs, outputs, name=None, **attrs):
    """A default-domain node; named after its first output unless `name` is given."""
    return helper.make_node(op, inputs, outputs, name=name or outputs[0], **attrs)


def model(nodes, inputs, outputs, initializers=(), name="case", opset=OPSET):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=IR_VERSION)
