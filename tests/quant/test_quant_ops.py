#!/usr/bin/env python3
"""Quantized convolutions and the QDQ rewrite on small graphs, against ONNX Runtime and wpk's own
reference kernels.

1. QLinearConv nodes with constant weights (so wpk's int8 provider takes them: the VNNI GEMM or
   the depthwise loop) over shapes that reach every edge: uint8 and int8 x and y, per-tensor and
   per-channel weights, padding, stride 2, dilation, 1x1, depthwise, tails of the 16-column
   blocks, GEMM tiles of 1, 2 and 3 blocks (7x7 and smaller planes) and 8-row tiles, the
   implicit GEMM (strides 1 and 2; 7x7, 14x14 and 56x56 planes, channels not a multiple of 4,
   dilation, 5x5), the gathered im2col it falls back to, and the GEMM with channels in the
   lanes that small planes with a long K take, and few input channels (stems). wpk's output, on
   the VNNI path on 2 threads and on 1, on (WPK_CPU_FLAGS_OFF=avx512f) the portable one, and
   for depthwise convolutions on WPK_CPU_FLAGS_OFF=avx512_vnni (the widening AVX-512 path) and
   avx512_vbmi2 (VNNI with the rows copied out through memory), must equal its reference
   kernel's (`--provider ref`) byte for byte, and ONNX Runtime's within one step.
2. QDQ graphs (DequantizeLinear -> Conv (-> Relu) -> QuantizeLinear, a float bias and a DQ'd
   int32 bias): `wpk optimize` must turn the Conv into a QLinearConv (wpk::QLinearConv with the
   Relu folded), and `wpk run` must match ONNX Runtime within one step.
3. QuantizeLinear / DequantizeLinear on their own (the qelem provider: AVX-512 and, with
   WPK_CPU_FLAGS_OFF=avx512f, the portable loop): int8 and uint8, per tensor and per channel
   along axis 0, 1 and -1, nonzero zero points, odd sizes (vector tails; above and below the
   size that runs on two threads), values on the .5 boundaries (half to even) and beyond the
   range (saturation). Both paths must equal the reference kernels byte for byte and ONNX
   Runtime within one step (Q) or exactly (DQ).
4. The residual add: DQ(a) + DQ(b) (-> Relu) -> Q must become one wpk::QLinearAdd, equal to the
   reference kernels (both paths) and within one step of ONNX Runtime; over every pair of input
   bytes, the vector path equals the reference.
5. Bad input: malformed quantization parameters are refused with exit 1 and a message naming the
   node and the input.
6. The max pool: DQ -> MaxPool -> Q with one scale and zero point must become wpk::MaxPool on
   the bytes (the qpool provider), equal to the reference kernel (SSE2 on 2 threads and 1, and
   with WPK_CPU_FLAGS_OFF=sse2 the plain loops) and to ONNX
   Runtime exactly: uint8 and int8, zero points not 0, odd sizes, uneven pads, ceil mode,
   strides 1-3, dilation, non-square windows; with another output scale the float MaxPool stays.
7. The classifier: DQ(x) x DQ(w)^T (+ bias) (-> Relu) -> Q as a Gemm (w a constant, per row
   or per tensor; batch 1-3, odd sizes, uint8 and int8 x, bias none / float / DQ'd int32) must
   become Reshape -> QLinearConv -> Reshape, equal to the reference kernel and within one step
   of ONNX Runtime.
8. The global average pool: DQ -> GlobalAveragePool -> Q must become
   wpk::QLinearGlobalAveragePool (the qgap provider), equal to the reference kernel and within
   one step of ONNX Runtime: uint8 and int8 in and out, zero points not 0, 1-3 spatial dims;
   a Flatten between a DQ and a Q of one scale runs on the bytes (no Q/DQ pair left).
"""
import os
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]


def np_type(t):
    return np.int8 if t == TensorProto.INT8 else np.uint8


def qlinear_conv_model(rng, c, m, hw, k, stride, pad, dil, group, xt, yt, per_channel, ys=0.2):
    wshape = (m, c // group, k, k)
    w = rng.integers(-127, 128, size=wshape, dtype=np.int8)
    ws = (rng.random(m if per_channel else 1, dtype=np.float32) * 0.02 + 0.001).astype(np.float32)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
        numpy_helper.from_array(np.array(7 if xt == TensorProto.UINT8 else -3, np_type(xt)),
                                "xzp"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(ws, "ws"),
        numpy_helper.from_array(np.zeros(ws.shape, np.int8), "wzp"),
        numpy_helper.from_array(np.array(ys, np.float32), "ys"),
        numpy_helper.from_array(np.array(100 if yt == TensorProto.UINT8 else 5, np_type(yt)),
                                "yzp"),
        numpy_helper.from_array(rng.integers(-2000, 2000, size=m, dtype=np.int32), "b"),
    ]
    pads = list(pad) if isinstance(pad, tuple) else [pad] * 4  # a tuple: begin h, w, end h, w
    attrs = dict(strides=[stride, stride], pads=pads, dilations=[dil, dil], group=group)
    node = helper.make_node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "b"],
                            ["y"], **attrs)
    g = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", xt, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", yt, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def qdq_model(rng, c, m, hw, relu, bias_kind):
    """x float -> Q -> DQ -> Conv(DQ(w), bias) (-> Relu) -> Q -> DQ -> y float."""
    w = rng.integers(-127, 128, size=(m, c, 3, 3), dtype=np.int8)
    ws = (rng.random(m, dtype=np.float32) * 0.01 + 0.002).astype(np.float32)
    xs = np.float32(2.0 / 255)
    inits = [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
             numpy_helper.from_array(np.array(128, np.uint8), "xzp"),
             numpy_helper.from_array(w, "wq"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(m, np.int8), "wzp"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
             numpy_helper.from_array(np.array(0 if relu else 120, np.uint8), "yzp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xzp"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xzp"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wzp"], ["wd"], axis=0)]
    conv_in = ["xd", "wd"]
    if bias_kind == "float":
        inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "bf"))
        conv_in.append("bf")
    elif bias_kind == "dq":
        inits += [numpy_helper.from_array(rng.integers(-500, 500, m, dtype=np.int32), "bq"),
                  numpy_helper.from_array((xs * ws).astype(np.float32), "bs"),
                  numpy_helper.from_array(np.zeros(m, np.int32), "bzp")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs", "bzp"], ["bd"], axis=0))
        conv_in.append("bd")
    nodes.append(helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]))
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yzp"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yzp"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", 1, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def wpk_run(wpk, model, x, work, extra=()):
    xp = work / "x.npy"
    np.save(xp, x)
    out = work / "out"
    r = subprocess.run([wpk, "run", str(model), "-i", f"x={xp}", "-o", str(out), *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"wpk run {model.name} {' '.join(extra)} failed: {r.stderr[-1500:]}")
    return np.load(out / "y.npy")


def run_feeds(wpk, model, feeds, work, extra=(), env=None):
    """wpk run of model on the named inputs; its outputs by name."""
    args = []
    for name, v in feeds.items():
        np.save(work / f"{name}.npy", v)
        args += ["-i", f"{name}={work / (name + '.npy')}"]
    out = work / "out_feeds"
    r = subprocess.run([wpk, "run", str(model), *args, "-o", str(out), *extra],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"wpk run {model.name} {' '.join(extra)} failed: {r.stderr[-1500:]}")
    return {p.stem: np.load(p) for p in out.glob("*.npy")}


PORTABLE = dict(os.environ, WPK_CPU_FLAGS_OFF="avx512f")
NO_VNNI = dict(os.environ, WPK_CPU_FLAGS_OFF="avx512_vnni")  # depthwise: the AVX-512 path
NO_SSE2 = dict(os.environ, WPK_CPU_FLAGS_OFF="sse2")  # max pool: the plain loops
NO_VBMI2 = dict(os.environ, WPK_CPU_FLAGS_OFF="avx512_vbmi2")  # depthwise VNNI, copied rows


def qdq_single_model(op, shape, qt, per_axis, rng):
    """QuantizeLinear (float x -> y) or DequantizeLinear (8-bit x -> float y), per tensor or
    per channel along per_axis (None: per tensor)."""
    n = 1 if per_axis is None else shape[per_axis]
    scale = (rng.random(n, dtype=np.float32) * 0.05 + 0.01).astype(np.float32)
    lo, hi = (-20, 20) if qt == TensorProto.INT8 else (90, 160)
    zp = rng.integers(lo, hi, size=n).astype(np_type(qt))
    if per_axis is None:
        scale, zp = scale.reshape(()), zp.reshape(())
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")]
    attrs = {} if per_axis is None else {"axis": per_axis - len(shape) if per_axis == len(shape)
                                         - 1 else per_axis}
    node = helper.make_node(op, ["x", "s", "z"], ["y"], **attrs)
    xt, yt = (TensorProto.FLOAT, qt) if op == "QuantizeLinear" else (qt, TensorProto.FLOAT)
    g = helper.make_graph([node], "qdq1", [helper.make_tensor_value_info("x", xt, shape)],
                          [helper.make_tensor_value_info("y", yt, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), scale


def qadd_model(shape, qt, relu, rng):
    """Float a, b -> Q -> DQ each, Add (-> Relu) -> Q -> DQ: the residual block of a QDQ graph."""
    zt = np_type(qt)
    lo, hi = (-10, 10) if qt == TensorProto.INT8 else (100, 150)
    inits = [numpy_helper.from_array(np.array(0.021, np.float32), "as"),
             numpy_helper.from_array(np.array(rng.integers(lo, hi), zt), "az"),
             numpy_helper.from_array(np.array(0.034, np.float32), "bs"),
             numpy_helper.from_array(np.array(rng.integers(lo, hi), zt), "bz"),
             numpy_helper.from_array(np.array(0.047, np.float32), "cs"),
             numpy_helper.from_array(np.array(rng.integers(lo, hi), zt), "cz")]
    nodes = [helper.make_node("QuantizeLinear", ["a", "as", "az"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "as", "az"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "bs", "bz"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"]),
             helper.make_node("Add", ["ad", "bd"], ["s"])]
    last = "s"
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "cs", "cz"], ["cq"]),
              helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["y"])]
    vi = [helper.make_tensor_value_info(v, TensorProto.FLOAT, shape) for v in ("a", "b")]
    g = helper.make_graph(nodes, "qadd", vi, [helper.make_tensor_value_info("y", 1, None)],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def check_elementwise(wpk, rng, work, failures):
    """Parts 3 and 4 of the module's docstring."""
    U8, S8 = TensorProto.UINT8, TensorProto.INT8
    # (op, shape, dtype, axis of the per-channel parameters or None)
    cases = [("QuantizeLinear", [1, 37, 29, 31], U8, None),   # two threads, odd tail
             ("QuantizeLinear", [1, 37, 29, 31], S8, 1),
             ("QuantizeLinear", [3, 5, 7], S8, 0),
             ("QuantizeLinear", [2, 6, 41], U8, 2),             # axis -1: runs of one element
             ("DequantizeLinear", [1, 37, 29, 31], U8, None),
             ("DequantizeLinear", [1, 37, 29, 31], S8, 1),
             ("DequantizeLinear", [5, 3, 9], U8, 0),
             ("DequantizeLinear", [2, 6, 41], S8, 2)]
    for i, (op, shape, qt, axis) in enumerate(cases):
        model, scale = qdq_single_model(op, shape, qt, axis, rng)
        path = work / f"qdq1_{i}.onnx"
        onnx.save(model, path)
        if op == "QuantizeLinear":
            # multiples of half a step land on .5 ties; some values saturate either way
            steps = rng.integers(-700, 700, size=shape).astype(np.float32) * 0.5
            bshape = [1] * len(shape)
            if axis is not None:
                bshape[axis] = shape[axis]
            x = (steps * scale.reshape(bshape)).astype(np.float32)
        else:
            lo, hi = (0, 256) if qt == U8 else (-128, 128)
            x = rng.integers(lo, hi, size=shape).astype(np_type(qt))
        got = run_feeds(wpk, path, {"x": x}, work)["y"]
        portable = run_feeds(wpk, path, {"x": x}, work, env=PORTABLE)["y"]
        ref = run_feeds(wpk, path, {"x": x}, work, ["--provider", "ref"])["y"]
        want = ort_run(path, x)
        same = np.array_equal(got, ref) and np.array_equal(portable, ref)
        diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
        limit = 1 if op == "QuantizeLinear" else 0
        if not same:
            failures.append(f"{op} {shape} {qt} axis={axis}: qelem (avx512 / portable) differs "
                            f"from the reference kernel")
        if diff > limit:
            failures.append(f"{op} {shape} {qt} axis={axis}: {diff} from ONNX Runtime")
        print(f"{op} {shape} dtype={qt} axis={axis}: equal to ref {same}, vs ORT {diff}",
              flush=True)
    for i, (shape, qt, relu) in enumerate([([1, 64, 28, 28], U8, True),
                                           ([1, 24, 13, 11], U8, False),
                                           ([1, 37, 29, 31], S8, True),
                                           ([2, 5, 3], S8, False)]):
        path = work / f"qadd{i}.onnx"
        onnx.save(qadd_model(shape, qt, relu, rng), path)
        opt = work / "qadd_opt.onnx"
        r = subprocess.run([wpk, "optimize", str(path), "-o", str(opt)], capture_output=True,
                           text=True)
        ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] \
            if r.returncode == 0 else []
        if ("wpk", "QLinearAdd") not in ops or ("", "Add") in ops or ("", "Relu") in ops:
            failures.append(f"qadd {shape} relu={relu}: not rewritten: {ops} {r.stderr[-500:]}")
        feeds = {v: (rng.standard_normal(shape) * 1.5).astype(np.float32) for v in ("a", "b")}
        got = run_feeds(wpk, path, feeds, work)["y"]
        portable = run_feeds(wpk, path, feeds, work, env=PORTABLE)["y"]
        ref = run_feeds(wpk, path, feeds, work, ["--provider", "ref"])["y"]
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = s.run(None, feeds)[0]
        steps = float(np.abs(got - want).max()) / 0.047
        same = np.array_equal(got, ref) and np.array_equal(portable, ref)
        if not same:
            failures.append(f"qadd {shape} relu={relu}: qelem (avx512 / portable) differs from "
                            f"the reference kernel")
        if steps > 1.01:
            failures.append(f"qadd {shape} relu={relu}: {steps:.2f} steps from ORT")
        print(f"qadd {shape} dtype={qt} relu={relu}: {ops}, equal to ref {same}, "
              f"max steps vs ORT {steps:.2f}", flush=True)
    # every pair of bytes (a, b), both dtypes, with and without the Relu: the vector path's
    # quotient must be the division's in every case
    for qt, relu in ((U8, False), (S8, True)):
        path = work / "qadd_pairs.onnx"
        model = qadd_model([1, 256, 16, 16], qt, relu, rng)
        onnx.save(model, path)
        init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        lo = 0 if qt == U8 else -128
        byte = np.arange(65536) // 256 + lo, np.arange(65536) % 256 + lo
        feeds = {v: ((q - init[v + "z"].astype(np.float32)) * init[v + "s"])
                 .astype(np.float32).reshape(1, 256, 16, 16) for v, q in zip("ab", byte)}
        got = run_feeds(wpk, path, feeds, work)["y"]
        ref = run_feeds(wpk, path, feeds, work, ["--provider", "ref"])["y"]
        if not np.array_equal(got, ref):
            failures.append(f"qadd all byte pairs dtype={qt} relu={relu}: qelem differs from "
                            f"the reference at {int((got != ref).sum())} of 65536")
        print(f"qadd all byte pairs dtype={qt} relu={relu}: equal to ref "
              f"{np.array_equal(got, ref)}", flush=True)


def qmaxpool_model(shape, qt, kernel, stride, pads, dil, ceil, scale, zp, yscale):
    """Float x -> Q -> DQ -> MaxPool -> Q (scale yscale) -> DQ: a QDQ graph's max pool."""
    zt = np_type(qt)
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "s"),
             numpy_helper.from_array(np.array(zp, zt), "z"),
             numpy_helper.from_array(np.array(yscale, np.float32), "ys")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=kernel, strides=stride,
                              pads=pads, dilations=dil, ceil_mode=ceil),
             helper.make_node("QuantizeLinear", ["p", "ys", "z"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "ys", "z"], ["y"])]
    g = helper.make_graph(nodes, "qmaxpool", [helper.make_tensor_value_info("x", 1, shape)],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def check_max_pool(wpk, rng, work, failures):
    """Part 6 of the module's docstring."""
    U8, S8 = TensorProto.UINT8, TensorProto.INT8
    # (shape, dtype, kernel, stride, pads, dilations, ceil_mode, zero point)
    cases = [([1, 24, 56, 56], U8, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 0),  # 2 threads
             ([1, 5, 13, 17], S8, [3, 3], [2, 2], [0, 1, 1, 0], [1, 1], 1, -3),
             ([2, 3, 9, 10], U8, [2, 2], [1, 1], [0, 0, 0, 0], [1, 1], 0, 131),
             ([1, 4, 20, 37], S8, [3, 5], [1, 2], [2, 2, 2, 2], [2, 1], 0, 7),
             ([1, 3, 8, 8], U8, [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 1, 20),
             ([1, 2, 7, 40], S8, [1, 4], [1, 3], [0, 3, 0, 1], [1, 1], 1, 0),
             ([1, 3, 11, 75], U8, [2, 4], [2, 2], [1, 2, 0, 1], [1, 3], 1, 250)]
    for i, (shape, qt, kernel, stride, pads, dil, ceil, zp) in enumerate(cases):
        scale = 0.03
        path = work / f"qmaxpool{i}.onnx"
        onnx.save(qmaxpool_model(shape, qt, kernel, stride, pads, dil, ceil, scale, zp, scale),
                  path)
        opt = work / "qmaxpool_opt.onnx"
        r = subprocess.run([wpk, "optimize", str(path), "-o", str(opt)], capture_output=True,
                           text=True)
        ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] \
            if r.returncode == 0 else []
        if ("wpk", "MaxPool") not in ops or ("", "MaxPool") in ops:
            failures.append(f"qmaxpool {shape}: not rewritten: {ops} {r.stderr[-500:]}")
        x = (rng.standard_normal(shape) * 3).astype(np.float32)  # some values saturate
        got = run_feeds(wpk, path, {"x": x}, work)["y"]
        one = run_feeds(wpk, path, {"x": x}, work, ["--threads", "1"])["y"]
        plain = run_feeds(wpk, path, {"x": x}, work, env=NO_SSE2)["y"]
        ref = run_feeds(wpk, path, {"x": x}, work, ["--provider", "ref"])["y"]
        want = ort_run(path, x)
        same = all(np.array_equal(v, ref) for v in (got, one, plain))
        if not same:
            failures.append(f"qmaxpool {shape} {kernel} {stride}: qpool (sse2 on 2 and 1 "
                            f"threads, plain) differs from the reference kernel")
        if got.shape != want.shape or not np.array_equal(got, want):
            failures.append(f"qmaxpool {shape} {kernel} {stride} {pads} ceil={ceil}: differs "
                            f"from ONNX Runtime")
        print(f"qmaxpool {shape} dtype={qt} k={kernel} s={stride} pads={pads} d={dil} "
              f"ceil={ceil}: equal to ref {same}, equal to ORT {np.array_equal(got, want)}",
              flush=True)
    # another output scale: the float MaxPool stays, and still matches
    path = work / "qmaxpool_rescale.onnx"
    onnx.save(qmaxpool_model([1, 4, 9, 9], U8, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 0.03,
                             128, 0.05), path)
    opt = work / "qmaxpool_opt.onnx"
    r = subprocess.run([wpk, "optimize", str(path), "-o", str(opt)], capture_output=True,
                       text=True)
    ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] if r.returncode == 0 else []
    x = (rng.standard_normal([1, 4, 9, 9]) * 2).astype(np.float32)
    steps = float(np.abs(run_feeds(wpk, path, {"x": x}, work)["y"] - ort_run(path, x)).max()) \
        / 0.05
    if ("", "MaxPool") not in ops or steps > 1.01:
        failures.append(f"qmaxpool with a rescale: {ops}, {steps:.2f} steps from ORT")
    print(f"qmaxpool with a rescale: kept the float MaxPool, {steps:.2f} steps from ORT")


def qgemm_model(rng, m, k, n, qt, per_channel, bias_kind, relu):
    """Float x [m, k] -> Q -> DQ, a constant s8 weight [n, k] -> DQ (per row or per tensor),
    Gemm (transB, bias none / float / DQ'd int32) (-> Relu) -> Q -> DQ: a QDQ classifier."""
    zt = np_type(qt)
    xs, ys = 0.02, 0.05
    wn = n if per_channel else 1
    ws = (rng.random(wn, dtype=np.float32) * 0.01 + 0.002).astype(np.float32)
    wq = rng.integers(-127, 128, size=(n, k)).astype(np.int8)
    zlo, zhi = (-10, 10) if qt == TensorProto.INT8 else (100, 150)
    inits = [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
             numpy_helper.from_array(np.array(rng.integers(zlo, zhi), zt), "xz"),
             numpy_helper.from_array(ws if per_channel else ws.reshape(()), "ws"),
             numpy_helper.from_array(np.zeros(wn, np.int8) if per_channel
                                     else np.array(0, np.int8), "wz"),
             numpy_helper.from_array(wq, "wq"),
             numpy_helper.from_array(np.array(ys, np.float32), "ys"),
             numpy_helper.from_array(np.array(rng.integers(zlo, zhi), zt), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0)]
    gin = ["xd", "wd"]
    if bias_kind == "float":
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b"))
        gin.append("b")
    elif bias_kind == "dq":
        bscale = (xs * ws).astype(np.float32)
        inits += [numpy_helper.from_array(rng.integers(-3000, 3000, n).astype(np.int32), "bq"),
                  numpy_helper.from_array(bscale if per_channel else bscale.reshape(()), "bs")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0))
        gin.append("bd")
    nodes.append(helper.make_node("Gemm", gin, ["g"], transB=1))
    last = "g"
    if relu:
        nodes.append(helper.make_node("Relu", ["g"], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "qgemm", [helper.make_tensor_value_info("x", 1, [m, k])],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def check_gemm(wpk, rng, work, failures):
    """Part 7 of the module's docstring."""
    U8, S8 = TensorProto.UINT8, TensorProto.INT8
    # (m, k, n, x dtype, per-channel weights, bias, relu)
    cases = [(1, 2048, 1000, U8, True, "float", False),   # resnet50's classifier
             (3, 37, 29, S8, True, "dq", True),
             (2, 64, 17, U8, False, "none", False),
             (1, 130, 5, U8, False, "dq", True)]
    for i, (m, k, n, qt, per, bias, relu) in enumerate(cases):
        path = work / f"qgemm{i}.onnx"
        onnx.save(qgemm_model(rng, m, k, n, qt, per, bias, relu), path)
        opt = work / "qgemm_opt.onnx"
        r = subprocess.run([wpk, "optimize", str(path), "-o", str(opt)], capture_output=True,
                           text=True)
        ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] \
            if r.returncode == 0 else []
        if not any(op[1] == "QLinearConv" for op in ops) or ("", "Gemm") in ops:
            failures.append(f"qgemm {m}x{k}x{n}: not rewritten: {ops} {r.stderr[-500:]}")
        x = (rng.standard_normal((m, k)) * 1.5).astype(np.float32)
        got = run_feeds(wpk, path, {"x": x}, work)["y"]
        ref = run_feeds(wpk, path, {"x": x}, work, ["--provider", "ref"])["y"]
        want = ort_run(path, x)
        steps = float(np.abs(got - want).max()) / 0.05
        same = np.array_equal(got, ref)
        if not same:
            failures.append(f"qgemm {m}x{k}x{n}: the int8 provider differs from the reference")
        if got.shape != want.shape or steps > 1.01:
            failures.append(f"qgemm {m}x{k}x{n} dtype={qt} per_channel={per} bias={bias}: "
                            f"{steps:.2f} steps from ORT")
        print(f"qgemm {m}x{k}x{n} dtype={qt} per_channel={per} bias={bias} relu={relu}: "
              f"equal to ref {same}, max steps vs ORT {steps:.2f}", flush=True)


def qgap_model(shape, qt, yt, xzp, yzp, flatten):
    """Float x -> Q -> DQ -> GlobalAveragePool -> Q -> DQ (-> Flatten -> Q -> DQ)."""
    inits = [numpy_helper.from_array(np.array(0.04, np.float32), "s"),
             numpy_helper.from_array(np.array(xzp, np_type(qt)), "z"),
             numpy_helper.from_array(np.array(0.013, np.float32), "ys"),
             numpy_helper.from_array(np.array(yzp, np_type(yt)), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("GlobalAveragePool", ["xd"], ["p"]),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "ys", "yz"], ["pd"])]
    last = "pd"
    if flatten:
        nodes += [helper.make_node("Flatten", ["pd"], ["f"]),
                  helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["fq"]),
                  helper.make_node("DequantizeLinear", ["fq", "ys", "yz"], ["fd"])]
        last = "fd"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    g = helper.make_graph(nodes, "qgap", [helper.make_tensor_value_info("x", 1, shape)],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def check_global_pool(wpk, rng, work, failures):
    """Part 8 of the module's docstring."""
    U8, S8 = TensorProto.UINT8, TensorProto.INT8
    # (shape, x dtype, y dtype, x zero point, y zero point, Flatten after)
    cases = [([1, 2048, 7, 7], U8, U8, 0, 0, True),      # resnet50's
             ([2, 13, 5, 9], S8, U8, -7, 90, False),
             ([1, 6, 33], U8, S8, 140, -3, False),       # one spatial dim, long plane
             ([1, 3, 2, 3, 4], S8, S8, 5, 0, False)]     # three spatial dims
    for i, (shape, qt, yt, xzp, yzp, flatten) in enumerate(cases):
        path = work / f"qgap{i}.onnx"
        onnx.save(qgap_model(shape, qt, yt, xzp, yzp, flatten), path)
        opt = work / "qgap_opt.onnx"
        r = subprocess.run([wpk, "optimize", str(path), "-o", str(opt)], capture_output=True,
                           text=True)
        ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] \
            if r.returncode == 0 else []
        if ("wpk", "QLinearGlobalAveragePool") not in ops or ("", "GlobalAveragePool") in ops \
                or ops.count(("", "QuantizeLinear")) != 1:
            failures.append(f"qgap {shape}: not rewritten (or the Flatten's Q/DQ pair kept): "
                            f"{ops} {r.stderr[-500:]}")
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        got = run_feeds(wpk, path, {"x": x}, work)["y"]
        ref = run_feeds(wpk, path, {"x": x}, work, ["--provider", "ref"])["y"]
        want = ort_run(path, x)
        steps = float(np.abs(got - want).max()) / 0.013
        same = np.array_equal(got, ref)
        if not same:
            failures.append(f"qgap {shape}: the qgap provider differs from the reference")
        if got.shape != want.shape or steps > 1.01:
            failures.append(f"qgap {shape} x={qt} y={yt}: {steps:.2f} steps from ORT")
        print(f"qgap {shape} x={qt} y={yt} zero points {xzp} {yzp}: equal to ref {same}, "
              f"max steps vs ORT {steps:.2f}", flush=True)


def ort_run(model, x):
    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    failures = []
    U8, S8 = TensorProto.UINT8, TensorProto.INT8
    # (c, m, hw, k, stride, pad, dil, group, xt, yt, per_channel)
    convs = [(16, 24, 14, 1, 1, 0, 1, 1, U8, U8, True),     # 1x1 direct, row tail
             (3, 32, 23, 3, 2, 1, 1, 1, U8, U8, True),      # first-layer im2col, odd size
             (13, 7, 9, 3, 1, 1, 1, 1, S8, S8, False),      # s8 x and y, K and M not aligned
             (8, 8, 17, 3, 1, 2, 2, 1, U8, S8, True),       # dilation
             (12, 12, 15, 3, 1, 1, 1, 12, U8, U8, True),    # depthwise, stride 1
             (12, 12, 15, 3, 2, 1, 1, 12, S8, U8, True),    # depthwise, stride 2, s8 x
             (32, 32, 7, 3, 1, 1, 1, 32, U8, U8, False),    # depthwise, short rows
             (13, 13, 70, 3, 1, 1, 1, 13, U8, U8, True),    # depthwise, odd C, rows over 64
             (5, 5, 70, 3, 2, 1, 1, 5, S8, S8, True),       # depthwise s2, rows over 32
             (7, 7, 11, 5, 2, 2, 1, 7, U8, U8, True),       # depthwise 5x5: 2 tap groups a row
             (6, 6, 12, 3, 1, 2, 2, 6, S8, U8, False),      # depthwise dilation 2
             (9, 9, 8, 3, 2, 0, 1, 9, U8, U8, True),        # depthwise s2 unpadded, even size
             (2, 2, 130, 3, 1, 1, 1, 2, S8, U8, True),      # depthwise, rows of 128 bytes and more
             (6, 4, 5, 3, 1, 1, 1, 2, U8, U8, True),        # grouped: the reference kernel
             (8, 16, 40, 3, 1, 1, 1, 1, U8, U8, True),      # wide rows: blocks inside one row
             (16, 24, 15, 1, 2, 0, 1, 1, U8, U8, False),    # 1x1 stride 2: im2col
             # GEMM column tails (16-column blocks; tiles of up to 3 of them):
             (32, 40, 7, 3, 1, 1, 1, 1, U8, U8, True),      # 7x7: 3 blocks + 1 partial
             (24, 16, 4, 1, 1, 0, 1, 1, U8, U8, False),     # 16 positions: one full block
             (8, 20, 5, 3, 1, 1, 1, 1, S8, U8, True),       # 25: a full and a partial block
             (8, 16, 6, 3, 1, 1, 1, 1, U8, S8, True),       # 36: 2 full + 1 partial, one tile
             (16, 8, 11, 1, 1, 0, 1, 1, U8, U8, True),      # 121: tiles of 3, 3, 2 blocks
             # a small y scale (the last value): most outputs saturate, and with 1e-9 the sums
             # times the multiplier pass 2^31 (the clamp comes before the conversion to int)
             (16, 24, 8, 1, 1, 0, 1, 1, U8, U8, True, 1e-4),
             (16, 24, 8, 1, 1, 0, 1, 1, S8, S8, True, 1e-9),
             # implicit GEMM (stride 1: the padded input read in place) and its fallback:
             (20, 24, 56, 3, 1, 1, 1, 1, U8, U8, True),     # 56x56: blocks across rows
             (13, 40, 14, 3, 1, 1, 1, 1, S8, U8, True),     # 14x14, 13 channels, s8 x
             (30, 24, 7, 1, 1, 0, 1, 1, U8, S8, False),     # 7x7 1x1: rows as one run
             (13, 24, 27, 1, 1, 0, 1, 1, S8, U8, True),     # 1x1 27x27: threads own columns
             (8, 16, 30, 5, 1, 2, 1, 1, U8, U8, True),      # 5x5 on 30x30: implicit
             (8, 16, 9, 5, 1, 2, 1, 1, U8, U8, True),       # 5x5 on 9x9: im2col (wide pad)
             (8, 8, 40, 3, 1, 2, 2, 1, S8, S8, True),       # dilation 2, implicit
             (21, 24, 56, 3, 2, 1, 1, 1, U8, U8, True),     # stride 2: 2x2 phases, implicit
             (12, 16, 27, 1, 2, 0, 1, 1, S8, U8, False),    # 1x1 stride 2, odd plane
             (13, 70, 16, 3, 2, (1, 0, 0, 1), 1, 1, U8, U8, True),  # stride 2, uneven pads
             (8, 16, 150, 1, 2, 0, 1, 1, U8, U8, True),     # 1x1 s2, rows over 128 pixels
             (8, 16, 133, 3, 2, 1, 1, 1, S8, U8, False),    # 3x3 s2, odd rows over 128
             # channels in lanes (small planes, long K): 64-row blocks x 6 positions
             (160, 124, 7, 3, 1, 1, 1, 1, U8, U8, True),    # 7x7, a partial 64-row block
             (256, 64, 14, 3, 1, 1, 1, 1, S8, U8, False),   # 14x14, s8 x
             (160, 124, 14, 3, 2, 1, 1, 1, U8, S8, True),   # over the im2col (stride 2)
             # few input channels (networks' stems), strides 2 and 3, long K:
             (3, 20, 37, 7, 2, 3, 1, 1, U8, U8, True),      # 7x7/2 stem, a partial last row
             (3, 16, 33, 3, 2, 1, 1, 1, S8, S8, False),     # 3x3/2 stem, s8
             (4, 8, 16, 5, 3, 2, 1, 1, U8, S8, True),       # stride 3
             (40, 16, 9, 3, 1, 1, 1, 1, S8, U8, True),      # 360 taps
             (32, 24, 12, 3, 2, 1, 1, 1, U8, U8, False)]    # 288 taps, stride 2
    with tempfile.TemporaryDirectory(prefix="wpk-quant-ops.") as tmp:
        work = Path(tmp)
        for i, spec in enumerate(convs):
            c, _, hw, _, _, _, _, _, xt, _, _ = spec[:11]
            model = qlinear_conv_model(rng, *spec)
            path = work / f"qconv{i}.onnx"
            onnx.save(model, path)
            lo, hi = (0, 256) if xt == U8 else (-128, 128)
            x = rng.integers(lo, hi, size=(1, c, hw, hw)).astype(np_type(xt))
            got = wpk_run(args.wpk, path, x, work, ["--threads", "2"])
            one = wpk_run(args.wpk, path, x, work, ["--threads", "1"])
            ref = wpk_run(args.wpk, path, x, work, ["--provider", "ref"])
            portable = run_feeds(args.wpk, path, {"x": x}, work, env=PORTABLE)["y"]
            paths = [("VNNI", got), ("VNNI, 1 thread", one), ("portable", portable)]
            if spec[7] == c and c > 1:
                for name, env in (("AVX-512", NO_VNNI), ("VNNI without VBMI2", NO_VBMI2)):
                    paths.append((name, run_feeds(args.wpk, path, {"x": x}, work, env=env)["y"]))
            for name, out in paths:
                if not np.array_equal(out, ref):
                    failures.append(f"qconv {spec}: int8 provider ({name}) differs from the "
                                    f"reference kernel at {int((out != ref).sum())} of "
                                    f"{out.size}")
            try:
                want = ort_run(path, x)
            except ort.capi.onnxruntime_pybind11_state.NotImplemented:
                want = None  # ONNX Runtime has no kernel for this mix of x and y types
            diff = "n/a" if want is None else \
                int(np.abs(got.astype(np.int32) - want.astype(np.int32)).max())
            if want is not None and diff > 1:
                failures.append(f"qconv {spec}: differs from ONNX Runtime by {diff} steps")
            print(f"qconv {i} {spec[:8]}: vs ref equal={np.array_equal(got, ref)}, "
                  f"portable equal={np.array_equal(portable, ref)}, "
                  f"max steps vs ORT {diff}", flush=True)
        for relu in (False, True):
            for bias in ("none", "float", "dq"):
                model = qdq_model(rng, 8, 16, 10, relu, bias)
                path = work / f"qdq_{relu}_{bias}.onnx"
                onnx.save(model, path)
                opt = work / "opt.onnx"
                r = subprocess.run([args.wpk, "optimize", str(path), "-o", str(opt)],
                                   capture_output=True, text=True)
                ops = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node] \
                    if r.returncode == 0 else []
                want_op = ("wpk", "QLinearConv") if relu else ("", "QLinearConv")
                if want_op not in ops or ("", "Conv") in ops:
                    failures.append(f"qdq relu={relu} bias={bias}: not rewritten: {ops} "
                                    f"{r.stderr[-500:]}")
                x = (rng.random((1, 8, 10, 10), dtype=np.float32) * 2 - 1)
                got, want = wpk_run(args.wpk, path, x, work), ort_run(path, x)
                steps = np.abs(got - want).max() / 0.05
                if steps > 1.01:
                    failures.append(f"qdq relu={relu} bias={bias}: {steps:.2f} steps from ORT")
                print(f"qdq relu={relu} bias={bias}: {ops}, max steps vs ORT {steps:.2f}",
                      flush=True)
        check_elementwise(args.wpk, rng, work, failures)
        check_max_pool(args.wpk, rng, work, failures)
        check_gemm(args.wpk, rng, work, failures)
        check_global_pool(args.wpk, rng, work, failures)
        # bad wpk::QLinearAdd: a per-channel output scale
        bad_add = qadd_model([1, 4, 3, 3], U8, False, rng)
        bad_add.opset_import.append(helper.make_opsetid("wpk", 1))
        del bad_add.graph.node[:]
        bad_add.graph.node.extend([
            helper.make_node("QuantizeLinear", ["a", "as", "az"], ["aq"]),
            helper.make_node("QuantizeLinear", ["b", "bs", "bz"], ["bq"]),
            helper.make_node("QLinearAdd", ["aq", "as", "az", "bq", "bs", "bz", "cs4", "cz"],
                             ["cq"], domain="wpk", name="bad_add"),
            helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["y"])])
        bad_add.graph.initializer.append(
            numpy_helper.from_array(np.full(4, 0.1, np.float32), "cs4"))
        path = work / "bad_add.onnx"
        onnx.save(bad_add, path)
        for v in ("a", "b"):
            np.save(work / f"{v}.npy", np.zeros((1, 4, 3, 3), np.float32))
        r = subprocess.run([args.wpk, "run", str(path), "-i", f"a={work / 'a.npy'}", "-i",
                            f"b={work / 'b.npy'}", "-o", str(work / "o")], capture_output=True,
                           text=True)
        if r.returncode != 1 or "bad_add" not in r.stderr or "C's scale" not in r.stderr:
            failures.append(f"bad QLinearAdd scale: exit {r.returncode}, "
                            f"{r.stderr.strip()[-300:]}")
        else:
            print(f"bad QLinearAdd scale refused: {r.stderr.strip().splitlines()[-1]}")
        # bad zero point: per-channel shape on a per-tensor input
        bad = qlinear_conv_model(rng, 4, 4, 5, 3, 1, 1, 1, 1, U8, U8, True)
        for init in bad.graph.initializer:
            if init.name == "xzp":
                init.CopyFrom(numpy_helper.from_array(np.array([1, 2, 3], np.uint8), "xzp"))
        path = work / "bad.onnx"
        onnx.save(bad, path)
        np.save(work / "x.npy", np.zeros((1, 4, 5, 5), np.uint8))
        r = subprocess.run([args.wpk, "run", str(path), "-i", f"x={work / 'x.npy'}", "-o",
                            str(work / "o")], capture_output=True, text=True)
        if r.returncode != 1 or "x_zero_point" not in r.stderr or "QLinearConv" not in r.stderr:
            failures.append(f"bad x_zero_point: exit {r.returncode}, {r.stderr.strip()[-300:]}")
        else:
            print(f"bad x_zero_point refused: {r.stderr.strip().splitlines()[-1]}")
    for f in failures:
        print("FAIL", f)
    print(f"quant ops: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
