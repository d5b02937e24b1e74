#!/usr/bin/env python3
"""int8 models on wpk against ONNX Runtime's int8 run, in one run: resnet50 and mobilenet_v2
(torchvision, random weights, exported by PyTorch) quantized by ONNX Runtime's quantize_static
(QDQ, per-channel int8 weights, uint8 activations, calibrated on a few random images), batch 1,
2 threads. Prints and writes a markdown table: median latencies, their ratio (ORT / wpk: > 1
means wpk is faster; the goal is >= 1.2), and each runtime's relative L2 error against the fp32
model on the same input, with provenance.
    quantized.py [--models resnet50,mobilenet_v2] [--threads 2] [--rounds 5] [--iters 20]
                 [--dir /tmp/wpk-quant-models] [--wpk build/wpk] [--out bench/results/quantized.md]
wpk and ONNX Runtime take turns, round by round (the machine's speed drifts; each runtime then
meets the same drift). Exit status 0 when every run worked.
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
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/quant"))
from quantize_models import quantize  # noqa: E402


def export(names, out_dir, torch_python):
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if missing:
        subprocess.run([torch_python, str(REPO / "tests/torchvision/export_models.py"),
                        str(out_dir), "--models", ",".join(missing)], check=True)


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def wpk_bench(wpk, model, threads, iters, work):
    out = subprocess.run([wpk, "bench", str(model), "--threads", str(threads), "--iters",
                          str(iters), "--json"], capture_output=True, text=True, cwd=work)
    if out.returncode != 0:
        raise RuntimeError(f"wpk bench {model.name} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)["samples_ms"]


def ort_times(sess, feed, iters):
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return times


def wpk_output(wpk, model, x_path, threads, work):
    out_dir = Path(work) / "out"
    r = subprocess.run([wpk, "run", str(model), "-i", f"input={x_path}", "-o", str(out_dir),
                        "--threads", str(threads)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"wpk run {model.name} failed:\n{r.stderr[-2000:]}")
    return np.load(out_dir / "logits.npy")


def provenance(wpk):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    isa = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16") if f in flags]
    return (f"commit {commit}, {cpu} ({', '.join(isa) or 'no AVX-512'}), "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
            f"ONNX Runtime {ort.__version__}, numpy {np.__version__}, python "
            f"{platform.python_version()}, wpk {wpk}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-quant-models"))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--out", default=str(REPO / "bench/results/quantized.md"))
    args = ap.parse_args()

    names = [m for m in args.models.split(",") if m]
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    export(names, out_dir, args.torch_python)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="wpk-quant-bench.") as work:
        for name in names:
            fp32 = out_dir / f"{name}.onnx"
            int8 = Path(quantize(str(fp32), str(out_dir / f"{name}_int8.onnx")))
            rng = np.random.default_rng(7)
            x = (rng.random((1, 3, 224, 224), dtype=np.float32) * 2 - 1)
            x_path = Path(work) / "x.npy"
            np.save(x_path, x)
            feed = {"input": x}
            ref = ort_session(fp32, args.threads).run(None, feed)[0]
            sess = ort_session(int8, args.threads)
            ort_out = sess.run(None, feed)[0]
            wpk_out = wpk_output(args.wpk, int8, x_path, args.threads, work)
            wpk_ms, ort_ms = [], []
            for _ in range(args.rounds):
                wpk_ms += wpk_bench(args.wpk, int8, args.threads, args.iters, work)
                ort_ms += ort_times(sess, feed, args.iters)
            w, o = statistics.median(wpk_ms), statistics.median(ort_ms)
            rows.append((name, w, min(wpk_ms), o, min(ort_ms), o / w, rel_l2(wpk_out, ref),
                         rel_l2(ort_out, ref), rel_l2(wpk_out, ort_out)))
            print(f"{name}: wpk {w:.2f} ms, ORT {o:.2f} ms, ratio {o / w:.2f}", flush=True)

    lines = ["# int8 (QDQ, quantize_static) on wpk vs ONNX Runtime's int8 run", "",
             f"batch 1, {args.threads} threads, {args.rounds} rounds x {args.iters} runs each, "
             "taking turns. Ratio = ORT median / wpk median (> 1: wpk faster; goal >= 1.2). "
             "Errors: relative L2 of the logits against the fp32 model (ONNX Runtime fp32) on one "
             "seeded input.", "",
             "| model | wpk median ms | wpk min | ORT int8 median ms | ORT min | ratio | "
             "wpk err vs fp32 | ORT err vs fp32 | wpk vs ORT int8 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | "
                     f"{r[5]:.2f} | {r[6]:.4f} | {r[7]:.4f} | {r[8]:.4f} |")
    lines += ["", f"Provenance: {provenance(args.wpk)}; load average before {load_before:.1f}.",
              ""]
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
