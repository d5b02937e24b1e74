#!/usr/bin/env python3
"""Per-node time of the int8 models on two wpk builds, taking turns: `wpk bench --top 0`'s
per-node profile (the median of its profiled runs) summed by op and provider, the median of
those sums over the rounds, for a `before` and an `after` binary. It shows where a change moved
the time outside (or inside) the int8 convolutions. Prints and writes a markdown table.
    quantized_nodes.py --before /work/main/build/wpk [--after build/wpk] [--threads 2]
                       [--rounds 5] [--models resnet50_int8,mobilenet_v2_int8]
                       [--dir /tmp/wpk-quant-models] [--out bench/results/quantized_nodes.md]
The models are the ones bench/quantized.py writes (quantize_static, QDQ)."""
import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from quantized import provenance  # noqa: E402

ROW = re.compile(r"^\s*([0-9.]+)\s+[0-9.]+%\s+(\S+)\s+(\S+)\s+(\S+)\s+\S+")
LAT = re.compile(r"median ([0-9.]+)")


def profile(wpk, model, threads):
    """{(op, provider): ms summed over its nodes}, {(op, provider): nodes}, median latency."""
    r = subprocess.run([wpk, "bench", str(model), "--threads", str(threads), "--db", "",
                        "--top", "0"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{wpk} bench {model.name} failed:\n{r.stderr[-2000:]}")
    ms, count, lat = defaultdict(float), defaultdict(int), None
    for line in r.stdout.splitlines():
        m = ROW.match(line)
        if m and not line.lstrip().startswith("ms"):
            key = (m.group(3), m.group(4))
            ms[key] += float(m.group(1))
            count[key] += 1
        elif line.startswith("latency") and (lm := LAT.search(line)):
            lat = float(lm.group(1))
    return ms, count, lat


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=str(REPO / "build/wpk"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="resnet50_int8,mobilenet_v2_int8")
    ap.add_argument("--dir", default="/tmp/wpk-quant-models")
    ap.add_argument("--out", default=str(REPO / "bench/results/quantized_nodes.md"))
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    lines = [f"# int8 models: per-node time by op and provider, before / after",
             "", f"Command: `python3 bench/quantized_nodes.py --before {args.before} --after "
             f"{args.after} --threads {args.threads} --rounds {args.rounds}`", ""]
    for name in args.models.split(","):
        model = Path(args.dir) / f"{name}.onnx"
        runs = {"before": [], "after": []}
        for _ in range(args.rounds):
            for side in ("before", "after"):
                runs[side].append(profile(getattr(args, side), model, args.threads))
        keys = sorted({k for side in runs.values() for r in side for k in r[0]})
        med = {side: {k: statistics.median(r[0].get(k, 0.0) for r in rs) for k in keys}
               for side, rs in runs.items()}
        lat = {side: statistics.median(r[2] for r in rs) for side, rs in runs.items()}
        lines += [f"## {name}, {args.threads} threads, batch 1",
                  "", f"median latency: before {lat['before']:.3f} ms, after "
                  f"{lat['after']:.3f} ms", "",
                  "| op | provider | nodes before | ms before | nodes after | ms after |",
                  "|---|---|---:|---:|---:|---:|"]
        for k in sorted(keys, key=lambda k: -max(med["before"][k], med["after"][k])):
            nb = runs["before"][0][1].get(k, 0)
            na = runs["after"][0][1].get(k, 0)
            lines.append(f"| {k[0]} | {k[1]} | {nb} | {med['before'][k]:.3f} | {na} | "
                         f"{med['after'][k]:.3f} |")
        tb, ta = sum(med["before"].values()), sum(med["after"].values())
        lines += [f"| all | | | {tb:.3f} | | {ta:.3f} |", ""]
    lines += [f"Provenance: {provenance(args.after)}; load average before {load_before:.1f}.",
              "Each entry: the median over the rounds of the op's nodes summed in `wpk bench "
              "--top 0` (itself the median of 10 profiled runs per node)."]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
