#!/usr/bin/env python3
"""The GRU model (PyTorch nn.GRU, 2 layers, input and hidden 256, seq 64, random weights) on wpk
against ONNX Runtime and OpenVINO in one run: batch 1, the same threads for all three, untuned
(wpk at its default configs: the GRU nodes run wpk's own recurrent kernels), f32. Prints a
markdown table and writes it to bench/results/recurrent.md.
    recurrent.py [--threads 2] [--rounds 5] [--iters 50] [--warmup 5] [--wpk build/wpk]
                 [--dir DIR] [--torch-python /usr/bin/python3] [--out FILE]

Rounds take turns (wpk, ONNX Runtime, OpenVINO) so all three meet the same drift of a shared
machine's cores. wpk: `wpk bench MODEL --json --save` (its random input is what the peers run
on, its output is checked against ONNX Runtime's, rel L2 <= 1e-4); ONNX Runtime: every graph
optimization, intra_op threads = --threads, sequential; OpenVINO: CPU, PERFORMANCE_HINT
LATENCY, INFERENCE_PRECISION_HINT f32, INFERENCE_NUM_THREADS = --threads. The ratio is the
faster peer's median over wpk's (> 1: wpk is faster). Exit status 1 when an output differs.
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

REPO = Path(__file__).resolve().parents[1]
MODEL = "gru_bench"
TOLERANCE = 1e-4


def rel_l2(a, e):
    a, e = a.astype(np.float64).ravel(), e.astype(np.float64).ravel()
    return float(np.linalg.norm(a - e) / max(np.linalg.norm(e), 1e-30))


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--dir", default=str(REPO / "build/recurrent_bench"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--out", default=str(REPO / "bench/results/recurrent.md"))
    args = ap.parse_args()
    import onnxruntime as ort
    import openvino as ov

    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    model = work / f"{MODEL}.onnx"
    if not model.exists():
        subprocess.run([args.torch_python, str(REPO / "tests/recurrent/export_recurrent.py"),
                        str(work), MODEL], check=True, capture_output=True)
    load_before = os.getloadavg()

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    core = ov.Core()
    ov_model = core.read_model(str(model))
    in_name = sess.get_inputs()[0].name

    wpk_s, ort_s, ov_s, provenance, errs = [], [], [], None, {}
    compiled = request = x = None
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="wpk-bench.") as tmp:
            out = subprocess.run([args.wpk, "bench", str(model), "--threads", str(args.threads),
                                  "--iters", str(args.iters), "--warmup", str(args.warmup),
                                  "--batch", "1", "--db", "", "--json", "--save", tmp],
                                 capture_output=True, text=True, check=True).stdout
            rep = json.loads(out)
            provenance = provenance or rep.get("provenance")
            wpk_s += rep["samples_ms"]
            if x is None:
                x = np.load(Path(tmp) / rep["inputs"][0]["file"])
                wpk_y = np.load(Path(tmp) / rep["outputs"][0]["file"])
        if compiled is None:
            ov_model.reshape({in_name: list(x.shape)})
            compiled = core.compile_model(ov_model, "CPU", {
                "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                "INFERENCE_NUM_THREADS": args.threads})
            request = compiled.create_infer_request()
            ort_y = sess.run(None, {in_name: x})[0]
            ov_y = request.infer({0: x})[compiled.outputs[0]]
            errs = {"wpk": rel_l2(wpk_y, ort_y), "OpenVINO": rel_l2(ov_y, ort_y)}
        ort_s += timed(lambda: sess.run(None, {in_name: x}), args.warmup, args.iters)
        ov_s += timed(lambda: request.infer({0: x}), args.warmup, args.iters)

    med = {k: statistics.median(v) for k, v in (("wpk", wpk_s), ("ort", ort_s), ("ov", ov_s))}
    mins = {k: min(v) for k, v in (("wpk", wpk_s), ("ort", ort_s), ("ov", ov_s))}
    faster = "ONNX Runtime" if med["ort"] <= med["ov"] else "OpenVINO"
    ratio = min(med["ort"], med["ov"]) / med["wpk"]
    p = provenance or {}
    lines = [
        "# Recurrent: the GRU model against ONNX Runtime and OpenVINO",
        "",
        f"nn.GRU (2 layers, input 256, hidden 256) + Linear, seq 64, batch 1, "
        f"{args.threads} threads, f32, untuned (no tuning records: wpk's default configs), "
        f"{args.rounds} rounds x {args.iters} runs each, taking turns. Command: "
        f"`python3 bench/recurrent.py --threads {args.threads}`.",
        "",
        "| runtime | median ms | min ms | rel L2 vs ORT |",
        "|---|---:|---:|---:|",
        f"| wpk | {med['wpk']:.3f} | {mins['wpk']:.3f} | {errs['wpk']:.2g} |",
        f"| ONNX Runtime {ort.__version__} | {med['ort']:.3f} | {mins['ort']:.3f} | - |",
        f"| OpenVINO {ov.__version__.split('-')[0]} | {med['ov']:.3f} | {mins['ov']:.3f} | "
        f"{errs['OpenVINO']:.2g} |",
        "",
        f"Ratio against the faster peer ({faster}): **{ratio:.2f}x** (> 1: wpk is faster; goal "
        f">= 1.0x).",
        "",
        f"Provenance: commit {p.get('commit', '?')}, build {p.get('build', '?')}, cpu "
        f"{p.get('cpu', platform.processor())} ({p.get('cores', '?')} cores), target "
        f"{p.get('target', '?')}, load average before {load_before[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    bad = {k: e for k, e in errs.items() if not e <= TOLERANCE}
    if bad:
        print(f"outputs differ from ONNX Runtime's: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
