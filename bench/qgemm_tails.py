#!/usr/bin/env python3
"""The int8 convolutions of a quantized model on two builds of wpk, taking turns: did the int8
GEMM's column tiles change their time?
    qgemm_tails.py --before OLD/wpk --after build/wpk [--model resnet50_int8.onnx]
                   [--rounds 3] [--threads 1,2] [--out bench/results/qgemm_tails.md]

Per build, threads and round: `wpk bench MODEL --json --db ''` (every node at its default), and
from its per-node profile (the median of 10 profiled runs of each node) the sum of the
QLinearConv nodes, in total and per stage of the network (the node name's first part: resnet's
layer1..layer4 run on 56x56, 28x28, 14x14 and 7x7 planes). The builds alternate within each
round so that a loaded machine's drift meets both; the figure is the median over rounds.
Ratio = before / after (> 1: after is faster). Writes the table with its command, both builds'
commits, the CPU and the load average before and after to --out.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def stage(node_name):
    parts = [p for p in node_name.split("/") if p]
    return parts[0] if len(parts) > 1 else "other"


def conv_times(wpk, model, threads, cache):
    env = dict(os.environ, WPK_CACHE_DIR=cache, OMP_WAIT_POLICY="passive")
    cmd = [wpk, "bench", model, "--json", "--iters", "5", "--warmup", "2",
           "--threads", str(threads), "--db", ""]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    j = json.loads(r.stdout)
    per_stage = {}
    for n in j["nodes"]:
        if n["op"] == "QLinearConv":
            s = stage(n["node"])
            per_stage[s] = per_stage.get(s, 0.0) + n["ms"]
    per_stage["total"] = sum(v for k, v in per_stage.items())
    per_stage["model"] = j["latency_ms"]["median"]
    impls = sorted({n["impl"] for n in j["nodes"] if n["op"] == "QLinearConv"})
    return per_stage, impls


def commit_of(wpk):
    d = Path(wpk).resolve().parent.parent
    r = subprocess.run(["git", "-C", str(d), "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--model", default="/tmp/wpk-quant-models/resnet50_int8.onnx")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results/qgemm_tails.md"))
    args = ap.parse_args()
    if not Path(args.model).exists():
        sys.exit(f"{args.model}: no such model (tests/quant/quantize_models.py makes it)")
    load0 = os.getloadavg()
    threads = [int(t) for t in args.threads.split(",")]
    builds = {"before": args.before, "after": args.after}
    runs = {(b, t): [] for b in builds for t in threads}
    impls = {}
    with tempfile.TemporaryDirectory(prefix="wpk-qgemm-bench.") as tmp:
        caches = {b: os.path.join(tmp, b) for b in builds}
        for rnd in range(args.rounds):
            for t in threads:
                order = list(builds) if rnd % 2 == 0 else list(reversed(builds))
                for b in order:
                    times, impls[b] = conv_times(builds[b], args.model, t, caches[b])
                    runs[(b, t)].append(times)
                    print(f"round {rnd + 1} threads {t} {b}: convs {times['total']:.3f} ms",
                          flush=True)
    load1 = os.getloadavg()
    keys = sorted({k for v in runs.values() for r in v for k in r} - {"total", "model"})
    keys += ["total", "model"]
    lines = ["| threads | part | before ms | after ms | before / after | min before | "
             "min after | min ratio |", "|---|---|---|---|---|---|---|---|"]
    for t in threads:
        for k in keys:
            med = {b: statistics.median(r.get(k, 0.0) for r in runs[(b, t)]) for b in builds}
            low = {b: min(r.get(k, 0.0) for r in runs[(b, t)]) for b in builds}
            label = {"total": "**all QLinearConv**", "model": "whole model (latency)"}.get(k, k)
            ratio = med["before"] / med["after"] if med["after"] > 0 else float("nan")
            low_ratio = low["before"] / low["after"] if low["after"] > 0 else float("nan")
            lines.append(f"| {t} | {label} | {med['before']:.3f} | {med['after']:.3f} | "
                         f"{ratio:.2f} | {low['before']:.3f} | {low['after']:.3f} | "
                         f"{low_ratio:.2f} |")
    table = "\n".join(lines)
    print(table)
    cmd = " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
    md = f"""# int8 convolutions of a quantized model on two builds of wpk (before / after)

Command: `python3 bench/{cmd}`

Model: {args.model}; per-node profile sums of the QLinearConv nodes (ms, median over
{args.rounds} rounds, the builds alternating; and the fastest round, less sensitive to the
other load on a shared machine), by stage (node name prefix) and in total; the last row per
thread count is the whole model's median latency.

{table}

- before: {builds['before']} ({commit_of(builds['before'])}), {', '.join(impls['before'])}
- after: {builds['after']} ({commit_of(builds['after'])}), {', '.join(impls['after'])}
- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs
- load average (1, 5, 15 min) before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f};
  after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (a shared machine: indicative figures)
"""
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(md)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
