#!/usr/bin/env python3
"""One-node models of the comparison, logic, selection and elementwise math ops on 2M-element
tensors: wpk (untuned, its default kernel per node: generated or reference) against ONNX Runtime,
in one run, taking turns, same random inputs, outputs checked; median latencies and ratios with
provenance, as a markdown table.
    elementwise_ops.py [--threads 2] [--iters 20] [--rounds 3] [--warmup 3]
                       [--out bench/results/elementwise_ops.md] [--wpk build/wpk]
Ratios are ORT/wpk of the medians over all timed runs (> 1: wpk is faster).
Exit status: 0 when every run worked and every output matched, 1 otherwise.
"""
import argparse
import json
import os
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
F, B, I32 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT32
X = [8, 64, 64, 64]           # 2M elements
ROW = [64, 64]                # broadcast along the two leading dims
# name: (op, attributes, [(dtype, shape)] of the inputs, output dtype, opset); DIVISOR is a
# constant int32 input of nonzero values (wpk bench's random integers hold zeros)
DIVISOR = "divisor"
CASES = {
    "Where (3-way broadcast)": ("Where", {}, [(B, X), (F, X), (F, ROW)], F, 16),
    "Equal f32": ("Equal", {}, [(F, X), (F, ROW)], B, 13),
    "Less f32": ("Less", {}, [(F, X), (F, X)], B, 13),
    "And": ("And", {}, [(B, X), (B, X)], B, 13),
    "Not": ("Not", {}, [(B, X)], B, 13),
    "Mod int32 fmod=0": ("Mod", {}, [(I32, X), (DIVISOR, ROW)], I32, 13),
    "Mod f32 fmod=1": ("Mod", {"fmod": 1}, [(F, X), (F, X)], F, 13),
    "Max of 3 (broadcast)": ("Max", {}, [(F, X), (F, ROW), (F, X)], F, 13),
    "Mean of 3": ("Mean", {}, [(F, X), (F, X), (F, X)], F, 13),
    "PRelu per-channel": ("PRelu", {}, [(F, X), (F, [64, 1, 1])], F, 16),
    "Elu": ("Elu", {}, [(F, X)], F, 13),
    "Mish": ("Mish", {}, [(F, X)], F, 18),
    "Softplus": ("Softplus", {}, [(F, X)], F, 13),
    "Round": ("Round", {}, [(F, X)], F, 13),
    "Sin": ("Sin", {}, [(F, X)], F, 13),
    "IsNaN": ("IsNaN", {}, [(F, X)], B, 13),
}


def build(name, path):
    """The one-node model of case name; returns the names of its graph inputs."""
    op, attrs, inputs, out_type, opset = CASES[name]
    names = [f"x{i}" for i in range(len(inputs))]
    graph_inputs, inits = [], []
    for n, (t, s) in zip(names, inputs):
        if t == DIVISOR:
            v = np.random.default_rng(1).integers(1, 100, s).astype(np.int32)
            inits.append(numpy_helper.from_array(np.where(v % 2 == 0, v, -v).astype(np.int32), n))
        else:
            graph_inputs.append(helper.make_tensor_value_info(n, t, s))
    graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "bench", graph_inputs,
                              [helper.make_tensor_value_info("y", out_type, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(onnx.shape_inference.infer_shapes(model), path)
    return [vi.name for vi in graph_inputs]


def bench_wpk(args, model, work):
    """wpk bench's JSON; its random inputs and last outputs are saved under work/wpk."""
    cmd = [args.wpk, "bench", str(model), "--threads", str(args.threads), "--iters", str(args.iters),
           "--warmup", str(args.warmup), "--json", "--db", "", "--save", str(work / "wpk")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"wpk bench failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout)


def bench_ort(args, sess, inputs):
    samples = []
    out = None
    for _ in range(args.iters):
        start = time.perf_counter()
        out = sess.run(None, inputs)
        samples.append((time.perf_counter() - start) * 1e3)
    return out[0], samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench/results/elementwise_ops.md"))
    args = ap.parse_args()
    load_before = os.getloadavg()
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="wpk-ew-bench.") as tmp:
        tmp = Path(tmp)
        for name in CASES:
            model = tmp / "model.onnx"
            input_names = build(name, model)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = args.threads
            opts.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
            wpk_samples, ort_samples, node_ms, impl, err = [], [], [], "", 0.0
            try:
                for _ in range(args.rounds):
                    result = bench_wpk(args, model, tmp)
                    wpk_samples += result["samples_ms"]
                    node_ms.append(result["nodes_ms"])
                    impl = result["nodes"][0]["provider"] if result["nodes"] else ""
                    # the same inputs wpk ran on
                    inputs = {n: np.load(tmp / "wpk" / f"input_{i}.npy")
                              for i, n in enumerate(input_names)}
                    for _ in range(args.warmup):
                        sess.run(None, inputs)
                    expected, samples = bench_ort(args, sess, inputs)
                    ort_samples += samples
                    got = np.load(tmp / "wpk" / "output_0.npy")
                    diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
                    err = max(err, float(np.nanmax(diff)) if diff.size else 0.0)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"{name}: {e}", file=sys.stderr)
                ok = False
                rows.append((name, float("nan"), float("nan"), float("nan"), "failed", float("nan")))
                continue
            w, o = statistics.median(wpk_samples), statistics.median(ort_samples)
            if err > 1e-4:
                ok = False
            rows.append((name, w, statistics.median(node_ms), o, impl, err))
            print(f"{name:28s} wpk {w:8.3f} ms  ort {o:8.3f} ms  ratio {o / w:5.2f}  ({impl})", flush=True)
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    lines = ["# Elementwise, comparison and selection ops: wpk vs ONNX Runtime", "",
             f"One-node models, inputs of {X} (2M elements; broadcast operands as listed in "
             f"bench/elementwise_ops.py), {args.threads} threads, untuned (each node's default "
             f"kernel), medians of {args.rounds} rounds x {args.iters} runs, taking turns. "
             "Ratio = ORT / wpk (> 1: wpk faster). wpk node ms: the node alone, from wpk bench's "
             "profiled runs (the rest of wpk's latency is the run's fixed cost). max |diff| against "
             "ORT's output on the same input.", "",
             "| op | wpk ms | wpk node ms | ORT ms | ratio | wpk kernel | max abs diff |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for name, w, n, o, impl, err in rows:
        lines.append(f"| {name} | {w:.3f} | {n:.3f} | {o:.3f} | {o / w:.2f} | {impl} | {err:.2g} |")
    lines += ["", f"Provenance: commit {commit}; {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} CPUs; onnxruntime {ort.__version__}; load average "
              f"{load_before[0]:.1f} before, {load_after[0]:.1f} after."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
