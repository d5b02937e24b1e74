#!/usr/bin/env python3
"""Transformer latency, batch 1, against ONNX Runtime and OpenVINO in the same run: the
BERT-style encoder (4 layers, hidden 768, 12 heads, seq 128) and torchvision's vit_b_16, each
exported by tests/transformers/export_models.py. wpk runs untuned (`wpk bench`, its default
kernels; with --db, the records of a `wpk tune` run), ONNX Runtime with its full graph
optimizations, OpenVINO with the latency hint at f32; all on the same thread count, idle
threads waiting as each runtime does by default (as models_vs_ort.py's --wait default). The
runtimes take turns: each of --rounds rounds times wpk, then ONNX Runtime, then OpenVINO for
--iters runs each, so a change in the machine's load falls on all of them. Every ratio is the
faster peer's median over wpk's median, over all rounds' samples (above 1: wpk is faster).
Writes bench/results/transformers.md (table, per-round medians, load averages, provenance, raw
samples).
    bench/transformers.py [--models bert_base4,vit_b_16] [--threads 2] [--iters 30] [--rounds 3]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]
MODELS = ["bert_base4", "vit_b_16"]


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO).stdout.strip()


def export(names, out_dir, torch_python):
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if missing:
        subprocess.run([torch_python, str(REPO / "tests/transformers/export_models.py"),
                        str(out_dir), "--models", ",".join(missing)], check=True,
                       stderr=subprocess.DEVNULL)


def batch1_input(model_path):
    """The model's input at batch 1, seeded uniform in [-1, 1)."""
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [1 if not isinstance(d, int) else d for d in inp.shape]
    return inp.name, np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def time_calls(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def bench_ort(path, name, x, threads, warmup, iters):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return time_calls(lambda: sess.run(None, {name: x}), warmup, iters)


def bench_openvino(path, name, x, threads, warmup, iters):
    import openvino as ov
    core = ov.Core()
    model = core.read_model(str(path))
    model.reshape({name: list(x.shape)})
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY",
                                                 "INFERENCE_NUM_THREADS": threads,
                                                 "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return time_calls(lambda: request.infer({name: x}), warmup, iters)


def bench_wpk(wpk, path, threads, warmup, iters, db):
    args = [wpk, "bench", str(path), "--batch", "1", "--threads", str(threads), "--iters",
            str(iters), "--warmup", str(warmup), "--json", "--top", "0"]
    if db is not None:
        args += ["--db", db]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"wpk bench {path.name}: {proc.stderr.strip()[-600:]}")
    report = json.loads(proc.stdout)
    return report["samples_ms"], report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--dir", default=str(REPO / "build/transformers"),
                    help="where the exported models are kept")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="turns each runtime takes, --iters runs per turn")
    ap.add_argument("--db", help="wpk's tuning records (default: wpk's own default; '' none)")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--out", default=str(REPO / "bench/results/transformers.md"))
    args = ap.parse_args()
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [m for m in args.models.split(",") if m]
    export(names, out_dir, args.torch_python)

    rows, raw, per_round = [], {}, {}
    load_start = os.getloadavg()
    for name in names:
        path = out_dir / f"{name}.onnx"
        inp, x = batch1_input(path)
        samples, rounds, report = {}, [], None
        for _ in range(args.rounds):
            this = {}
            if report is None or "error" not in report:
                try:
                    this["wpk"], report = bench_wpk(args.wpk, path, args.threads, args.warmup,
                                                    args.iters, args.db)
                except RuntimeError as e:  # a model wpk refuses: its row says why
                    print(e, file=sys.stderr)
                    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                    report = {"sources": "-", "nodes": [], "error": "; ".join(lines[-8:])}
            this["onnxruntime"] = bench_ort(path, inp, x, args.threads, args.warmup, args.iters)
            try:
                this["openvino"] = bench_openvino(path, inp, x, args.threads, args.warmup,
                                                  args.iters)
            except Exception as e:  # reported in the table, the run goes on
                print(f"openvino on {name}: {e}", file=sys.stderr)
            for k, v in this.items():
                samples.setdefault(k, []).extend(v)
            rounds.append({k: round(statistics.median(v), 3) for k, v in this.items()})
        per_round[name] = rounds
        med = {k: statistics.median(v) for k, v in samples.items()}
        peers = {k: v for k, v in med.items() if k != "wpk"}
        best = min(peers, key=peers.get)
        ratio = peers[best] / med["wpk"] if "wpk" in med else None
        rows.append((name, med.get("wpk"), med.get("onnxruntime"), med.get("openvino"), best,
                     ratio, report["sources"], report.get("error")))
        raw[name] = {k: [round(s, 3) for s in v] for k, v in samples.items()}
        raw[name]["wpk_top_nodes"] = [(n["node"], n["op"], n["provider"], round(n["ms"], 3))
                                      for n in report["nodes"][:8]]
        nan = float("nan")
        print(f"{name:12} wpk {med.get('wpk', nan):8.2f} ms  onnxruntime "
              f"{med.get('onnxruntime', nan):8.2f} ms  openvino {med.get('openvino', nan):8.2f} ms"
              f"  ratio vs {best} {ratio or nan:.2f}x", flush=True)

    import openvino
    lines = ["# Transformers: wpk vs ONNX Runtime and OpenVINO", "",
             f"`python3 bench/transformers.py {' '.join(sys.argv[1:])}`: batch 1, f32, {args.threads} threads, medians of {args.rounds} "
             f"rounds x {args.iters} runs (each after {args.warmup} warm-up), the runtimes "
             "taking turns in every round. wpk untuned unless --db gave records; ratio = "
             "faster peer / wpk (above 1: wpk is faster).", "",
             "| model | wpk ms | ONNX Runtime ms | OpenVINO ms | ratio vs faster peer |",
             "|---|---:|---:|---:|---:|"]
    for name, w, o, v, best, ratio, _, error in rows:
        fmt = lambda t: f"{t:.2f}" if t is not None else "-"  # noqa: E731
        verdict = f"{ratio:.2f}x ({best})" if ratio else f"refused: {error}"
        lines.append(f"| {name} | {fmt(w)} | {fmt(o)} | {fmt(v)} | {verdict} |")
    busy = max(load_start[0], os.getloadavg()[0])
    if busy > (os.cpu_count() or 1):
        lines += ["", f"**The machine was loaded** (1-minute load average up to {busy:.1f} on "
                  f"{os.cpu_count()} CPUs): the times are inflated and the ratios indicative "
                  "only; rerun on a quiet machine."]
    lines += ["", "Medians per round (ms):", ""]
    for name, rounds in per_round.items():
        lines.append(f"- {name}: " + "; ".join(
            ", ".join(f"{k} {v:.2f}" for k, v in r.items()) for r in rounds))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    lines += ["", "## Provenance", "",
              f"- commit: {sh('git', 'rev-parse', '--short', 'HEAD')}",
              f"- cpu: {cpu}; load average (1, 5, 15 min) at the start: {load_start}, at "
              f"the end: {os.getloadavg()}",
              f"- onnxruntime {ort.__version__}, openvino {openvino.__version__}",
              "- OMP_WAIT_POLICY: "
              + os.environ.get("OMP_WAIT_POLICY", "unset (each runtime's default)"),
              f"- wpk sources per model: " + "; ".join(f"{r[0]} {r[6]}" for r in rows),
              "", "## Raw samples (ms)", "", "```", json.dumps(raw, indent=1), "```", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
