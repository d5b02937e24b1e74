"""Small CNNs whose graphs hold every fusion group kind (pad+conv, dw+pw, conv+pool), built with
the onnx helper API and random weights, for the fusion search's test and benchmark."""
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _w(rng, name, *shape):
    return nh.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def _const(name, value, dtype):
    return nh.from_array(np.array(value, dtype), name)


def dw_pw_cnn(path, channels=32, size=56, in_channels=16):
    """Pad -> Conv3x3 + Relu -> MaxPool 2x2 -> [dw3x3 + Relu6 -> pw] -> [dw3x3 + Relu6 -> pw +
    residual]: 6 layers, 4 fusion groups (the oracle's small model)."""
    rng = np.random.default_rng(0)
    c, c2 = channels, 2 * channels
    inits = [_w(rng, "w0", c, in_channels, 3, 3), _w(rng, "b0", c),
             _w(rng, "wd1", c, 1, 3, 3), _w(rng, "bd1", c), _w(rng, "wp1", c2, c, 1, 1),
             _w(rng, "bp1", c2), _w(rng, "wd2", c2, 1, 3, 3), _w(rng, "bd2", c2),
             _w(rng, "wp2", c2, c2, 1, 1), _w(rng, "bp2", c2),
             _const("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64),
             _const("lo", 0.0, np.float32), _const("hi", 6.0, np.float32)]
    nodes = [
        h.make_node("Pad", ["x", "pads"], ["xp"], mode="constant"),
        h.make_node("Conv", ["xp", "w0", "b0"], ["c0"], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c0"], ["r0"]),
        h.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p0", "wd1", "bd1"], ["d1"], kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], group=c),
        h.make_node("Clip", ["d1", "lo", "hi"], ["d1r"]),
        h.make_node("Conv", ["d1r", "wp1", "bp1"], ["p1"], kernel_shape=[1, 1]),
        h.make_node("Conv", ["p1", "wd2", "bd2"], ["d2"], kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], group=c2),
        h.make_node("Clip", ["d2", "lo", "hi"], ["d2r"]),
        h.make_node("Conv", ["d2r", "wp2", "bp2"], ["p2"], kernel_shape=[1, 1]),
        h.make_node("Add", ["p2", "p1"], ["y"]),
    ]
    half = size // 2
    g = h.make_graph(nodes, "dw_pw_cnn",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, in_channels, size, size])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, c2, half, half])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return {"x": (1, in_channels, size, size)}


def variants_cnn(path):
    """A batch-symbolic model of the other forms: a Pad with an explicit zero, a grouped strided
    conv into an AveragePool counting its pads, a conv into a ceil-mode 3x3/2 MaxPool, a strided
    dw into a pw with Relu, and a Pad of a nonzero value (which must not fold)."""
    rng = np.random.default_rng(1)
    inits = [_w(rng, "w0", 8, 3, 3, 3), _w(rng, "w1", 12, 4, 3, 3), _w(rng, "b1", 12),
             _w(rng, "w2", 32, 12, 3, 3), _w(rng, "wd", 32, 1, 3, 3),
             _w(rng, "wp", 20, 32, 1, 1), _w(rng, "bp", 20), _w(rng, "w3", 6, 20, 3, 3),
             _const("pads", [0, 0, 2, 1, 0, 0, 0, 1], np.int64),
             _const("zero", 0.0, np.float32), _const("one", 1.0, np.float32),
             _const("pads1", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)]
    nodes = [
        h.make_node("Pad", ["x", "pads", "zero"], ["xp"], mode="constant"),
        h.make_node("Conv", ["xp", "w0"], ["c0"], kernel_shape=[3, 3]),
        h.make_node("Conv", ["c0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1], group=2),
        h.make_node("AveragePool", ["c1"], ["a1"], kernel_shape=[3, 3], strides=[1, 1],
                    pads=[1, 1, 1, 1], count_include_pad=1),
        h.make_node("Conv", ["a1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c2"], ["r2"]),
        h.make_node("MaxPool", ["r2"], ["m2"], kernel_shape=[3, 3], strides=[2, 2],
                    ceil_mode=1),
        h.make_node("Conv", ["m2", "wd"], ["d"], kernel_shape=[3, 3], strides=[2, 2],
                    pads=[1, 1, 1, 1], group=32),
        h.make_node("Conv", ["d", "wp", "bp"], ["p"], kernel_shape=[1, 1]),
        h.make_node("Relu", ["p"], ["pr"]),
        h.make_node("Pad", ["pr", "pads1", "one"], ["pp"], mode="constant"),
        h.make_node("Conv", ["pp", "w3"], ["y"], kernel_shape=[3, 3]),
    ]
    g = h.make_graph(nodes, "variants_cnn",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 97, 91])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, path)
    return {"x": (2, 3, 97, 91)}


def elementwise_chain(path, size=56):
    """Two inputs through Mul(x, 2) -> Add(., y) -> Sigmoid -> Sub(1, .) -> Div(., 3) -> Relu
    -> Mul(., y) -> Tanh, a chain of 8 elementwise ops (7 groups), symbolic batch."""
    shape = ["N", 32, size, size]
    inits = [_const("two", 2.0, np.float32), _const("one", [1.0], np.float32),
             _const("three", [[[[3.0]]]], np.float32)]
    nodes = [
        h.make_node("Mul", ["x", "two"], ["a"]),
        h.make_node("Add", ["a", "y"], ["b"]),
        h.make_node("Sigmoid", ["b"], ["c"]),
        h.make_node("Sub", ["one", "c"], ["d"]),
        h.make_node("Div", ["d", "three"], ["e"]),
        h.make_node("Relu", ["e"], ["f"]),
        h.make_node("Mul", ["y", "f"], ["g"]),
        h.make_node("Tanh", ["g"], ["z"]),
    ]
    g = h.make_graph(nodes, "elementwise_chain",
                     [h.make_tensor_value_info("x", T.FLOAT, shape),
                      h.make_tensor_value_info("y", T.FLOAT, shape)],
                     [h.make_tensor_value_info("z", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, path)
    return {"x": (2, 32, size, size), "y": (2, 32, size, size)}
