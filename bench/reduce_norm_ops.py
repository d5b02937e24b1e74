#!/usr/bin/env python3
"""Times the reduction and normalization ops' reference kernels (the kernels `wpk` runs for
them: no DSL template) against ONNX Runtime, one single-op model per row at shapes the models
use (BERT rows, classifier logits, AlexNet's LRN, diffusion GroupNorm, attention scores), in
the same run, same thread count. Prints the table and writes bench/results/reduce_norm_ops.md.
    bench/reduce_norm_ops.py [--wpk build/wpk] [--threads 2] [--iters 50]
"""
import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]


def one_node(op, x_shape, consts=(), n_out=1, opset=18, x2_shape=None, **attrs):
    """A one-node model over a float32 input x (and y when x2_shape is given)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    names = ["x"]
    if x2_shape:
        inputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, x2_shape))
        names.append("y")
    names += [n for n, _ in consts]
    outs = [f"out{i}" for i in range(n_out)]
    types = {"ArgMax": [TensorProto.INT64], "TopK": [TensorProto.FLOAT, TensorProto.INT64]}
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], op, inputs,
        [helper.make_tensor_value_info(o, t, None)
         for o, t in zip(outs, types.get(op, [TensorProto.FLOAT]))],
        [numpy_helper.from_array(a, n) for n, a in consts])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def axes(*a):
    return [("axes", np.array(a, np.int64))]


def chan(c, seed):
    return np.random.default_rng(seed).uniform(0.5, 1.5, c).astype(np.float32)


# (label, model)
ROWS = [
    ("ReduceSum [1,128,768] axis -1", one_node("ReduceSum", [1, 128, 768], axes(-1))),
    ("ReduceMean [1,128,768] axis -1", one_node("ReduceMean", [1, 128, 768], axes(-1))),
    ("ReduceMax [8,512,1024] axis 1", one_node("ReduceMax", [8, 512, 1024], axes(1))),
    ("ReduceL2 [1,64,56,56] axes 2,3", one_node("ReduceL2", [1, 64, 56, 56], axes(2, 3))),
    ("ReduceLogSumExp [64,1000] axis -1", one_node("ReduceLogSumExp", [64, 1000], axes(-1))),
    ("ArgMax [128,8192] axis -1", one_node("ArgMax", [128, 8192], axis=-1)),
    ("TopK [1,32000] k=50", one_node("TopK", [1, 32000], [("k", np.array([50], np.int64))],
                                      n_out=2)),
    ("TopK [64,1000] k=5", one_node("TopK", [64, 1000], [("k", np.array([5], np.int64))],
                                     n_out=2)),
    ("CumSum [1,128,768] axis 1", one_node("CumSum", [1, 128, 768],
                                           [("axis", np.array(1, np.int64))])),
    ("InstanceNorm [1,64,112,112]", one_node("InstanceNormalization", [1, 64, 112, 112],
                                             [("s", chan(64, 1)), ("b", chan(64, 2))])),
    ("GroupNorm [1,256,32,32] g=32", one_node("GroupNormalization", [1, 256, 32, 32],
                                              [("s", chan(256, 3)), ("b", chan(256, 4))],
                                              opset=21, num_groups=32)),
    ("LRN [1,96,55,55] size 5", one_node("LRN", [1, 96, 55, 55], size=5)),
    ("MVN [1,64,56,56]", one_node("MeanVarianceNormalization", [1, 64, 56, 56])),
    ("Einsum bhqd,bhkd->bhqk [1,12,128,64]",
     one_node("Einsum", [1, 12, 128, 64], x2_shape=[1, 12, 128, 64], equation="bhqd,bhkd->bhqk")),
    ("Einsum bij,bjk->bik [12,128,128]x[12,128,64]",
     one_node("Einsum", [12, 128, 128], x2_shape=[12, 128, 64], equation="bij,bjk->bik")),
]


def ort_median_ms(path, feeds, threads, iters):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    for _ in range(5):
        s.run(None, feeds)
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        s.run(None, feeds)
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples), min(samples), samples


def wpk_bench(wpk, path, threads, iters):
    p = subprocess.run([wpk, "bench", str(path), "--json", "--threads", str(threads),
                        "--iters", str(iters), "--db", ""], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"wpk bench {path.name}: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    rows, prov, raw = [], None, []
    with tempfile.TemporaryDirectory(prefix="wpk-bench-reduce.") as tmp:
        for label, m in ROWS:
            path = Path(tmp) / "m.onnx"
            onnx.save(m, str(path))
            rng = np.random.default_rng(0)
            feeds = {vi.name: rng.standard_normal(
                [d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
                for vi in m.graph.input}
            w = wpk_bench(args.wpk, path, args.threads, args.iters)
            prov = prov or w["provenance"]
            o_med, o_min, o_samples = ort_median_ms(path, feeds, args.threads, args.iters)
            w_med, w_min = w["latency_ms"]["median"], w["latency_ms"]["min"]
            rows.append((label, w_med, w_min, o_med, o_min, o_med / w_med))
            raw.append((label, w["samples_ms"], o_samples))
            print(f"{label:40s} wpk {w_med:8.3f} ms  ort {o_med:8.3f} ms  "
                  f"speed vs ort {o_med / w_med:5.2f}x", flush=True)
    lines = ["# Reduction and normalization ops: wpk's reference kernels vs ONNX Runtime", "",
             f"`bench/reduce_norm_ops.py --threads {args.threads} --iters {args.iters}`: one "
             "single-op float32 model per row, untuned (`--db ''`), batch 1, same run.", "",
             f"Provenance: commit {prov['commit']}, {prov['build']}, kernels by "
             f"{prov['compiler']}, CPU {prov['cpu']} ({prov['cores']} cores), load average "
             f"{prov['loadavg']}, threads {args.threads}, ONNX Runtime {ort.__version__}, "
             f"Python {platform.python_version()}.", "",
             "| op | wpk median (min) ms | ORT median (min) ms | ORT / wpk |",
             "|---|---|---|---|"]
    for label, w_med, w_min, o_med, o_min, ratio in rows:
        lines.append(f"| {label} | {w_med:.3f} ({w_min:.3f}) | {o_med:.3f} ({o_min:.3f}) | "
                     f"{ratio:.2f}x |")
    lines += ["", "Raw samples (ms):", ""]
    for label, ws, os_ in raw:
        lines.append(f"- {label}: wpk {', '.join(f'{v:.3f}' for v in ws)}; "
                     f"ort {', '.join(f'{v:.3f}' for v in os_)}")
    out = REPO / "bench/results/reduce_norm_ops.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
