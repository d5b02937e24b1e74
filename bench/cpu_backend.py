#!/usr/bin/env python3
"""Whole models on the cpu backend (generated kernels, default configs) against the reference
backend and ONNX Runtime, in one run, on the same threads: the first run's compile time (an
empty kernel cache, then again with the cache filled) and the latency of each.
    cpu_backend.py [--models resnet18,resnet50,mobilenet_v2] [--dir DIR] [--wpk PATH]
                   [--threads 2] [--iters 20] [--rounds 3] [--passive] [--json OUT]
Models come from tests/torchvision's export cache (--dir; exported with torch when missing).
Per model and round, in turn: ONNX Runtime (one warm-up, then --iters timed runs), `wpk run
--backend ref --iters N`, `wpk run --backend cpu --iters N` with a fresh cache directory (its
first iteration compiles: the compile line of -v is kept) and once more on the filled cache.
wpk's latency figures are the CLI's median and min over its --iters runs (the first one, which
plans and compiles, included: with N >= 5 it cannot be the median); ONNX Runtime's are over its
timed runs after the warm-up. Ratios are of medians and of mins of the same round. Prints the
provenance (commit, compiler, CPU, load average, library versions) and every raw figure.
--passive: idle threads sleep instead of spinning, in both (OMP_WAIT_POLICY=passive for wpk,
session.intra_op.allow_spinning=0 for ONNX Runtime): on a machine shared with other work a
spinning thread can take the core its partner needs.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "models"))
sys.path.insert(0, str(REPO / "tests" / "torchvision"))
import compare_ort  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402


def sh(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, cwd=REPO).stdout.strip()
    except OSError:
        return "?"


def provenance(args):
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "commit": sh("git", "rev-parse", "--short", "HEAD") + (" (dirty)" if sh("git", "status", "--porcelain", "--", "src") else ""),
        "compiler": sh(os.environ.get("CC", "cc"), "--version").splitlines()[0] if sh(os.environ.get("CC", "cc"), "--version") else "?",
        "kernel_flags": "-O3 -march=native -fopenmp -std=c11 -ffp-contract=fast -fno-math-errno (cg_c_compile)",
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": args.threads,
        "wait_policy": "passive" if args.passive else "default",
        "onnxruntime": ort.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "loadavg_start": os.getloadavg(),
    }


def ort_latency(model, threads, iters, passive):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if passive:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    feeds = compare_ort.random_inputs(sess, None, 0)
    sess.run(None, feeds)
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feeds)
        samples.append((time.perf_counter() - t) * 1e3)
    return samples


def wpk_run(wpk, model, backend, threads, iters, cache, out, passive):
    env = dict(os.environ, WPK_CACHE_DIR=str(cache))
    if passive:
        env["OMP_WAIT_POLICY"] = "passive"
    args = [wpk, "run", str(model), "--backend", backend, "--threads", str(threads),
            "--iters", str(iters), "-o", str(out), "-v"]
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr[-800:]}")
    m = re.search(r"latency: median ([0-9.]+) ms, min ([0-9.]+) ms", p.stdout)
    r = {"median_ms": float(m.group(1)), "min_ms": float(m.group(2)), "process_ms": wall}
    c = re.search(r"^cpu: (.*); build ([0-9.]+) ms, compile ([0-9.]+) ms, pack ([0-9.]+) ms$",
                  p.stderr, re.M)
    if c:
        r.update({"stats": c.group(1), "build_ms": float(c.group(2)),
                  "compile_ms": float(c.group(3)), "pack_ms": float(c.group(4))})
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--passive", action="store_true", help="idle threads sleep (see above)")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    import test_torchvision  # noqa: E402
    if test_torchvision.export_missing(names, out_dir, args.torch_python) is None:
        sys.exit(f"cpu_backend: no exported models in {out_dir} and no torch to export them")

    prov = provenance(args)
    print("provenance: " + json.dumps(prov))
    results = {"provenance": prov, "models": {}}
    work = Path(tempfile.mkdtemp(prefix="wpk-bench-cpu."))
    try:
        for name in names:
            model = out_dir / f"{name}.onnx"
            rows = []
            for rnd in range(args.rounds):
                cache = work / f"cache-{name}-{rnd}"
                r = {"round": rnd}
                r["ort_ms"] = ort_latency(model, args.threads, args.iters, args.passive)
                run = lambda backend: wpk_run(args.wpk, model, backend, args.threads, args.iters,
                                              cache, work / "out", args.passive)
                r["ref"] = run("ref")
                r["cpu_cold"] = run("cpu")
                r["cpu_warm"] = run("cpu")
                shutil.rmtree(cache, ignore_errors=True)
                o_med, o_min = statistics.median(r["ort_ms"]), min(r["ort_ms"])
                cpu = r["cpu_warm"]
                print(f"{name} round {rnd}: compile {r['cpu_cold'].get('compile_ms', float('nan')):.0f} ms "
                      f"cold ({r['cpu_cold'].get('stats', '?')}), {r['cpu_warm'].get('compile_ms', float('nan')):.0f} ms "
                      f"from the cache; latency median/min: cpu {cpu['median_ms']:.2f}/{cpu['min_ms']:.2f} ms, "
                      f"ref {r['ref']['median_ms']:.2f}/{r['ref']['min_ms']:.2f} ms, "
                      f"onnxruntime {o_med:.2f}/{o_min:.2f} ms; cpu/ref {cpu['median_ms'] / r['ref']['median_ms']:.2f} "
                      f"(min {cpu['min_ms'] / r['ref']['min_ms']:.2f}), cpu/ort {cpu['median_ms'] / o_med:.2f} "
                      f"(min {cpu['min_ms'] / o_min:.2f})", flush=True)
                print(f"    raw: ort {[round(x, 2) for x in r['ort_ms']]}; cold {json.dumps(r['cpu_cold'])}; "
                      f"warm {json.dumps(r['cpu_warm'])}; ref {json.dumps(r['ref'])}", flush=True)
                rows.append(r)
            results["models"][name] = rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    prov["loadavg_end"] = os.getloadavg()
    print(f"load average at the end: {prov['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
