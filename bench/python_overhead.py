#!/usr/bin/env python3
"""What the Python package adds to a run: per model, the median latency of `wpk bench` (the C
API, no Python) against wpk.InferenceSession.run (input checks, the buffer handed over, the
outputs copied into new arrays) and ONNX Runtime's Python API, on the same threads and inputs,
in alternating rounds; also the throughput of several Python threads on sessions of their own,
which overlap only because run() releases the GIL.
    python_overhead.py [--models resnet_like,resnet18] [--threads 2] [--iters 50] [--rounds 3]
                       [--site DIR] [--wpk PATH] [--dir DIR] [--out FILE.md]
resnet_like comes from tests/models/gen_models.py; resnet18 from tests/torchvision's export
cache (--dir; skipped when missing). Prints the table and writes it, with the provenance and
the raw medians of each round, to --out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "models"))


def c_median(wpk_cli, model, threads, iters):
    p = subprocess.run([wpk_cli, "bench", str(model), "--json", "--threads", str(threads),
                        "--iters", str(iters)], capture_output=True, text=True, check=True)
    j = json.loads(p.stdout)
    return j["latency_ms"]["median"], j["provenance"]


def py_median(sess, feeds, iters):
    sess.run(None, feeds)
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, feeds)
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def threaded_throughput(wpk, model, feeds, nthreads, iters):
    """Runs per second of nthreads Python threads, each on a session of its own (1 kernel
    thread)."""
    sessions = [wpk.InferenceSession(model, threads=1) for _ in range(nthreads)]
    for s in sessions:
        s.run(None, feeds)
    start = threading.Barrier(nthreads + 1)

    def work(s):
        start.wait()
        for _ in range(iters):
            s.run(None, feeds)

    threads = [threading.Thread(target=work, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return nthreads * iters / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet_like,resnet18")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--site", default=str(REPO / "build" / "python-site"),
                    help="where the package is installed (tests/python/install_package.py)")
    ap.add_argument("--wpk", default=str(REPO / "build" / "wpk"), help="the wpk CLI")
    ap.add_argument("--dir", default=str(REPO / "build" / "torchvision"),
                    help="tests/torchvision's export cache")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "python_overhead.md"))
    args = ap.parse_args()
    sys.path.insert(0, args.site)
    import wpk  # first: it sets the OpenMP wait policy before the runtime loads
    import gen_models
    import numpy as np
    import onnxruntime as ort

    tmp = Path(tempfile.mkdtemp(prefix="wpk-pybench-"))
    paths = {}
    for name in args.models.split(","):
        if name == "resnet_like":
            gen_models.write_models(str(tmp), ["resnet_like"])
            paths[name] = tmp / "resnet_like.onnx"
        elif (Path(args.dir) / f"{name}.onnx").exists():
            paths[name] = Path(args.dir) / f"{name}.onnx"
        else:
            print(f"{name}: no export in {args.dir}; skipped")

    rows, raw, prov = [], {}, None
    for name, model in paths.items():
        sess = wpk.InferenceSession(model, threads=args.threads)
        arg = sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in arg.shape]
        feeds = {arg.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        ort_sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        c, p, o = [], [], []
        for _ in range(args.rounds):
            median, prov = c_median(args.wpk, model, args.threads, args.iters)
            c.append(median)
            p.append(py_median(sess, feeds, args.iters))
            o.append(py_median(ort_sess, feeds, args.iters))
        one = threaded_throughput(wpk, model, feeds, 1, args.iters)
        two = threaded_throughput(wpk, model, feeds, 2, args.iters)
        raw[name] = {"c_ms": c, "python_ms": p, "ort_ms": o, "runs_per_s_1_thread": one,
                     "runs_per_s_2_threads": two}
        cm, pm, om = min(c), min(p), min(o)
        rows.append(f"| {name} | {shape} | {cm:.3f} | {pm:.3f} | {pm - cm:+.3f} | {om:.3f} | "
                    f"{one:.1f} | {two:.1f} ({two / one:.2f}x) |")
    header = ["| model | input | wpk bench (C) ms | wpk.InferenceSession ms | Python adds ms | "
              "onnxruntime (Python) ms | runs/s, 1 Python thread | runs/s, 2 Python threads |",
              "|---|---|---|---|---|---|---|---|"]
    table = "\n".join(header + rows)
    print(table)
    text = (f"# The Python package's overhead\n\n`python3 bench/python_overhead.py` "
            f"(threads {args.threads}, {args.iters} runs per median, best of {args.rounds} "
            f"alternating rounds; the thread columns use 1 kernel thread per session).\n\n"
            f"{table}\n\nProvenance: `{json.dumps(prov)}`\n\nRaw medians per round: "
            f"`{json.dumps(raw)}`\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
