#!/usr/bin/env python3
"""Checks the reduction and normalization ops where ONNX's node cases leave gaps: older opsets'
attribute forms (Reduce* axes, TopK's k), integer dtypes, the Einsum equations exporters emit,
shapes big enough to take the kernels' blocked and parallel paths, and must-fail cases that
expect exit 1 and a message naming the cause. ONNX Runtime is the oracle.
    test_reduce_norm_ops.py --wpk PATH
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RTOL = 1e-4
NP_TO_ONNX = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
              np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
              np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def model(opset, op, inputs, consts=None, n_out=1, **attrs):
    """A one-node model and its feeds: inputs are (name, array) fed at run time, consts
    (name, array) initializers."""
    consts = consts or []
    names = [n for n, _ in inputs] + [n for n, _ in consts]
    outs = [f"y{i}" for i in range(n_out)]
    x_type = NP_TO_ONNX[inputs[0][1].dtype.type]
    out_types = {"ArgMax": [TensorProto.INT64], "ArgMin": [TensorProto.INT64],
                 "TopK": [x_type, TensorProto.INT64]}.get(op, [x_type])
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_node", **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype.type], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)],
        [numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, dict(inputs)


def rng_data(shape, dtype=np.float32, lo=-2.0, hi=2.0, seed=0):
    r = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return r.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
    return r.uniform(lo, hi, size=shape).astype(dtype)


X4 = rng_data([2, 3, 4, 5])
BIG = rng_data([2, 3, 6, 300], seed=1)
AXES = lambda *a: ("axes", np.array(a, np.int64))  # noqa: E731


def cases():
    """name -> (model, feeds)."""
    c = {}
    c["reducesum_attr_axes_opset11"] = model(11, "ReduceSum", [("x", X4)], axes=[1, 3], keepdims=0)
    c["reducemax_attr_axes_int32_opset13"] = (
        model(13, "ReduceMax", [("x", rng_data([3, 4, 5], np.int32, -50, 50))], axes=[0, 2]))
    c["reducemin_uint8_opset18"] = (
        model(18, "ReduceMin", [("x", rng_data([3, 4, 5], np.uint8, 0, 255))], [AXES(1)]))
    c["reduceprod_int64_opset18"] = (
        model(18, "ReduceProd", [("x", rng_data([3, 4, 5], np.int64, -3, 3))], [AXES(1)]))
    c["reducesum_int32_all_opset13"] = (
        model(13, "ReduceSum", [("x", rng_data([3, 4, 5], np.int32, -9, 9))], keepdims=0))
    c["reducel2_mid_axes_blocked"] = model(18, "ReduceL2", [("x", BIG)], [AXES(1, 2)])
    c["reducel1_attr_axes_opset11"] = model(11, "ReduceL1", [("x", X4)], axes=[0, 2])
    c["reducesumsquare_attr_opset13"] = model(13, "ReduceSumSquare", [("x", X4)], axes=[-1])
    c["reducelogsum_attr_opset13"] = (
        model(13, "ReduceLogSum", [("x", rng_data([2, 3, 4], lo=0.1, hi=3))], axes=[1]))
    c["reducelogsumexp_large_values"] = (
        model(13, "ReduceLogSumExp", [("x", rng_data([4, 70], lo=-300, hi=300))], axes=[1]))
    c["reducelogsumexp_lanes"] = model(18, "ReduceLogSumExp", [("x", BIG)], [AXES(0, 2)])
    c["reducemax_big_last_axis"] = model(18, "ReduceMax", [("x", BIG)], [AXES(-1)], keepdims=0)
    c["reducemean_mixed_axes"] = model(18, "ReduceMean", [("x", BIG)], [AXES(0, 3)])
    c["argmax_opset11"] = model(11, "ArgMax", [("x", X4)], axis=1, keepdims=0)
    ties = np.tile(np.array([[1, 3, 3, 0, 3]], np.int32), (4, 1))
    c["argmin_int32_last_opset12"] = (
        model(12, "ArgMin", [("x", -ties)], axis=1, select_last_index=1))
    c["argmax_big_middle_axis"] = (
        model(13, "ArgMax", [("x", rng_data([3, 700, 300], seed=2))], axis=1))
    c["topk_attr_k_opset7"] = model(7, "TopK", [("x", X4)], n_out=2, k=3)
    c["topk_smallest_axis0_opset11"] = (
        model(11, "TopK", [("x", rng_data([50, 7]))], [("k", np.array([5], np.int64))], n_out=2,
              axis=0, largest=0))
    c["topk_int32_ties"] = (
        model(11, "TopK", [("x", rng_data([6, 40], np.int32, 0, 5))],
              [("k", np.array([12], np.int64))], n_out=2))
    c["topk_big_rows"] = (
        model(11, "TopK", [("x", rng_data([8, 5000], seed=3))], [("k", np.array([10], np.int64))],
              n_out=2))
    c["cumsum_float32_exclusive_reverse"] = (
        model(14, "CumSum", [("x", rng_data([3, 400, 5]))], [("axis", np.array(1, np.int64))],
              exclusive=1, reverse=1))
    c["cumsum_int64_opset11"] = (
        model(11, "CumSum", [("x", rng_data([4, 6], np.int64, -100, 100))],
              [("axis", np.array(-1, np.int32))]))
    q, k = rng_data([2, 4, 16, 8], seed=4), rng_data([2, 4, 12, 8], seed=5)
    c["einsum_attention_scores"] = model(12, "Einsum", [("q", q), ("k", k)],
                                         equation="bhqd,bhkd->bhqk")
    c["einsum_ellipsis_broadcast"] = (
        model(12, "Einsum", [("a", rng_data([2, 1, 3, 4])), ("b", rng_data([1, 5, 4, 6]))],
              equation="...ij,...jk->...ik"))
    c["einsum_implicit_matmul"] = (
        model(12, "Einsum", [("a", rng_data([3, 4])), ("b", rng_data([4, 5]))], equation="ij,jk"))
    c["einsum_trace"] = model(12, "Einsum", [("a", rng_data([5, 5]))], equation="ii")
    c["einsum_outer"] = (
        model(12, "Einsum", [("a", rng_data([3])), ("b", rng_data([4]))], equation="i,j->ij"))
    c["einsum_three_operands"] = (
        model(12, "Einsum", [("a", rng_data([3, 4])), ("b", rng_data([4, 5])),
                             ("c", rng_data([5]))], equation="ij,jk,k->i"))
    c["einsum_linear"] = (
        model(12, "Einsum", [("x", rng_data([2, 7, 16])), ("w", rng_data([16, 24]))],
              equation="abc,cd->abd"))
    ch = 6
    scale, bias = rng_data([ch], lo=0.5, hi=1.5, seed=6), rng_data([ch], seed=7)
    c["instancenorm_opset7"] = (
        model(7, "InstanceNormalization", [("x", rng_data([2, ch, 7, 9]))],
              [("s", scale), ("b", bias)], epsilon=1e-3))
    c["groupnorm_opset21"] = (
        model(21, "GroupNormalization", [("x", rng_data([2, ch, 5, 5]))],
              [("s", scale), ("b", bias)], num_groups=3))
    c["groupnorm_opset18_per_group"] = (
        model(18, "GroupNormalization", [("x", rng_data([2, ch, 5, 5]))],
              [("s", scale[:3]), ("b", bias[:3])], num_groups=3, epsilon=1e-3))
    c["lrn_opset7_size5"] = (
        model(7, "LRN", [("x", rng_data([2, 10, 6, 6]))], size=5, alpha=1e-2, beta=0.6, bias=1.5))
    c["lrn_size7_big"] = model(13, "LRN", [("x", BIG)], size=7)
    c["mvn_default_axes_opset9"] = model(9, "MeanVarianceNormalization", [("x", X4)])
    c["mvn_axes_123"] = model(13, "MeanVarianceNormalization", [("x", BIG)], axes=[1, 2, 3])
    return c


# name -> ((model, feeds), message the error must contain)
def must_fail():
    f = {}
    f["einsum_unknown_output_label"] = (
        model(12, "Einsum", [("a", X4[0, 0])], equation="ij->il"), "output label 'l'")
    f["einsum_bad_character"] = (model(12, "Einsum", [("a", X4[0, 0])], equation="i1->i"),
                                 "attribute 'equation'")
    f["einsum_rank_mismatch"] = (model(12, "Einsum", [("a", X4)], equation="ij->i"),
                                 "input 0 has 4 dims")
    f["topk_k_too_big"] = (model(11, "TopK", [("x", X4)], [("k", np.array([9], np.int64))],
                                 n_out=2), "K = 9")
    f["argmax_axis_out_of_range"] = (model(13, "ArgMax", [("x", X4)], axis=7), "attribute 'axis'")
    f["groupnorm_groups_not_dividing"] = (
        model(21, "GroupNormalization", [("x", rng_data([1, 6, 2, 2]))],
              [("s", np.ones(6, np.float32)), ("b", np.zeros(6, np.float32))], num_groups=4),
        "num_groups")
    f["reducesum_bad_noop_flag"] = (
        model(13, "ReduceSum", [("x", X4)], noop_with_empty_axes=2), "noop_with_empty_axes")
    f["reducel2_int32"] = (model(18, "ReduceL2", [("x", X4.astype(np.int32))]), "dtype int32")
    f["lrn_size_zero"] = (model(13, "LRN", [("x", X4)], size=0), "attribute 'size'")
    f["cumsum_axis_out_of_range"] = (
        model(14, "CumSum", [("x", X4)], [("axis", np.array(4, np.int64))]), "input 'axis'")
    f["reducemax_repeated_axis"] = (model(18, "ReduceMax", [("x", X4)], [AXES(1, -3)]),
                                    "appears twice")
    return f


def run_wpk(wpk, m, feeds, work):
    path = work / "model.onnx"
    onnx.save(m, str(path))
    args = [wpk, "run", str(path), "-o", str(work / "out")]
    for name, a in feeds.items():
        np.save(work / f"{name}.npy", a)
        args += ["-i", f"{name}={work / f'{name}.npy'}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def check(wpk, name, m, feeds, work):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    p = run_wpk(wpk, m, feeds, work)
    if p.returncode != 0:
        return f"wpk exited {p.returncode}: {p.stderr.strip()[-400:]}"
    for o, want in zip(m.graph.output, ref):
        got = np.load(work / "out" / f"{o.name}.npy")
        if got.shape != want.shape or got.dtype != want.dtype:
            return (f"{o.name}: got {got.dtype}{list(got.shape)}, "
                    f"want {want.dtype}{list(want.shape)}")
        if np.issubdtype(want.dtype, np.floating):
            err = np.linalg.norm((got - want).astype(np.float64)) / max(np.linalg.norm(want), 1e-30)
            if not np.isfinite(got).all() == np.isfinite(want).all() or err > RTOL:
                return f"{o.name}: relative L2 error {err:.3g}"
        elif not np.array_equal(got, want):
            return f"{o.name}: {int((got != want).sum())} elements differ"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", required=True)
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="wpk-reduce-norm.") as tmp:
        for i, (name, (m, feeds)) in enumerate(cases().items()):
            work = Path(tmp) / f"c{i}"
            work.mkdir()
            try:
                why = check(args.wpk, name, m, feeds, work)
            except Exception as e:  # an oracle that refuses the model fails the case, not the run
                why = f"{type(e).__name__}: {e}"
            print(f"ok   {name}" if why is None else f"FAIL {name}: {why}")
            failures += why is not None
        for i, (name, ((m, feeds), want)) in enumerate(must_fail().items()):
            work = Path(tmp) / f"f{i}"
            work.mkdir()
            p = run_wpk(args.wpk, m, feeds, work)
            ok = p.returncode == 1 and want in p.stderr
            print(f"{'ok  ' if ok else 'FAIL'} must-fail {name}: exit {p.returncode}: "
                  f"{p.stderr.strip().splitlines()[-1] if p.stderr.strip() else '(no message)'}")
            failures += not ok
    print(f"reduce/norm ops: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
