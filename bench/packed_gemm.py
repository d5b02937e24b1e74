#!/usr/bin/env python3
"""The packed GEMM on a transformer's matrix shapes against its peers, oneDNN and OpenBLAS
(the same nodes through their wpk providers), in one run; optionally against an older build of
the packed GEMM. B comes from memory (`packed_gemm_bench --cold`), as a large model's weights do.

    bench/packed_gemm.py [--threads 1,2] [--m 197,128] [--rounds 5] [--reps 11]
                         [--before OLD/packed_gemm_bench] [--out bench/results/packed_gemm.md]

The contenders take turns within each round (a shared machine's speed drifts: each meets a
different drift); a figure is the median over rounds of each run's median, in GFLOP/s per core:
at 1 thread by the process's CPU time (on a loaded machine, what the core did), at more by wall
time (the CPU time of a multi-threaded process is counted in scheduler ticks, too coarse for a
4 ms run, and includes the spin at the end of the parallel loop). Ratio =
packed / the faster peer (above 1: the packed GEMM is faster). Writes the table, provenance and
raw samples to --out. Exit status: 0 when every run worked.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEERS = ["onednn", "openblas"]


def sh(*args):
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO).stdout.strip()


def run_bench(binary, provider, threads, m, reps):
    """{shape: (wall GFLOP/s per core, GFLOP/s per core by CPU time)} and the provider's
    version line."""
    cmd = [binary, "--cold", "--provider", provider, "--threads", str(threads), "--m", str(m),
           "--reps", str(reps)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    lines = r.stdout.splitlines()
    out = {}
    for line in lines[2:]:
        f = line.split()
        if len(f) < 7:
            continue
        out[" ".join(f[:-6])] = (float(f[-2]) / threads, float(f[-1]))
    return out, lines[0].split(";")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=str(REPO / "build/packed_gemm_bench"))
    ap.add_argument("--before", help="an older build's packed_gemm_bench, timed as 'before'")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--m", default="197,128", help="rows: ViT-B/16's 197 tokens, BERT's 128")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--out", default=str(REPO / "bench/results/packed_gemm.md"))
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"{args.bench} is not built: cmake --build build --target packed_gemm_bench")
    contenders = [("packed", args.bench, "packed")]
    if args.before:
        contenders.append(("before", args.before, "packed"))
    contenders += [(p, args.bench, p) for p in PEERS]
    threads = [int(t) for t in args.threads.split(",")]
    ms = [int(m) for m in args.m.split(",")]
    load_before = os.getloadavg()
    samples, versions, ok = {}, {}, True
    for rnd in range(args.rounds):
        for t in threads:
            for m in ms:
                for name, binary, provider in contenders:
                    try:
                        got, versions[name] = run_bench(binary, provider, t, m, args.reps)
                    except RuntimeError as e:
                        print(e, file=sys.stderr)
                        ok = False
                        continue
                    for shape, v in got.items():
                        samples.setdefault((t, m, shape, name), []).append(v)
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    shapes = []
    for key in samples:
        if key[2] not in shapes:
            shapes.append(key[2])
    names = [c[0] for c in contenders]
    med = {k: statistics.median(s[1] if k[0] == 1 else s[0] for s in v)
           for k, v in samples.items()}
    head = ["threads", "M", "shape"] + [f"{n}" for n in names] + ["packed / faster peer"]
    if args.before:
        head.append("packed / before")
    lines = ["# Packed GEMM vs oneDNN and OpenBLAS on transformer shapes", "",
             f"`bench/packed_gemm.py --threads {args.threads} --m {args.m} --rounds "
             f"{args.rounds} --reps {args.reps}" + (" --before OLD" if args.before else "")
             + "`: FusedMatMul (bias; GELU where the shape says) with a constant B from memory "
             "(`packed_gemm_bench --cold`), GFLOP/s per core (1 thread: by CPU time; 2: by wall "
             "time), medians over rounds of per-run medians; the contenders take turns in "
             "each round.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    table = []
    for t in threads:
        for m in ms:
            for shape in shapes:
                row = [med.get((t, m, shape, n)) for n in names]
                peers = [med[(t, m, shape, p)] for p in PEERS if (t, m, shape, p) in med]
                pk = med.get((t, m, shape, "packed"))
                ratio = pk / max(peers) if pk and peers else None
                cells = [str(t), str(m), shape] + [f"{v:.1f}" if v else "-" for v in row]
                cells.append(f"{ratio:.2f}x" if ratio else "-")
                if args.before:
                    bf = med.get((t, m, shape, "before"))
                    cells.append(f"{pk / bf:.2f}x" if pk and bf else "-")
                lines.append("| " + " | ".join(cells) + " |")
                table.append(cells)
    print("  ".join(f"{h:>12}" for h in head))
    for cells in table:
        print("  ".join(f"{c:>12}" for c in cells))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    raw = {f"{t} threads, M {m}, {shape}, {n}": [list(s) for s in v]
           for (t, m, shape, n), v in samples.items()}
    lines += ["", "## Provenance", "",
              f"- commit: {sh('git', 'rev-parse', '--short', 'HEAD')}"
              + (f"; before: {args.before}" if args.before else ""),
              f"- cpu: {cpu}, {os.cpu_count()} cores; load average before {load_before}, "
              f"after {os.getloadavg()}",
              f"- compiler: {sh('cc', '--version').splitlines()[0]} (the CMake build's flags)",
              "- contenders: " + "; ".join(f"{n}: {v}" for n, v in versions.items()),
              "", "## Raw samples: [GFLOP/s per core by wall time, by CPU time] per run", "",
              "```"] + [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in raw.items()] + ["```", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
