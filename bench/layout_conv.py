#!/usr/bin/env python3
"""Measures what the layout pass buys: GFLOP/s of the NCHW reference Conv against ConvNCHWc on
ResNet-18 and MobileNetV2 conv shapes, the cost of a Reorder per element, and optionally the
end-to-end latency of a model at -O2 (NCHW) against -O3 (blocked layout).
    layout_conv.py [--build DIR] [--threads 1,2] [--repeats N] [--block X]
                   [--model M.onnx] [--iters N] [--rounds R]
Compiles bench/layout_conv.c against DIR/libwpk.a with the library's flags, runs it per thread
count, and prints the provenance (commit, compiler and flags, CPU, threads) before the raw
lines (every sample in ms, median and best GFLOP/s). A comparison is a ratio of medians taken
in the same run. End to end: `wpk run -O2` and `-O3` alternate R times, N iterations each;
each line is wpk's own median/min."""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLAGS = ["-O2", "-std=c11", "-fopenmp", "-D_POSIX_C_SOURCE=200809L"]  # CMakeLists' RelWithDebInfo


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def default_block():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return 16 if " avx512f" in flags else 8 if " avx2" in flags else 4


def provenance(cc, build):
    commit = sh(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]).stdout
    print(f"# date       {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print(f"# commit     {commit}{' (working tree modified)' if dirty.strip() else ''}")
    print(f"# compiler   {sh([cc, '--version']).stdout.splitlines()[0]}")
    print(f"# flags      {' '.join(FLAGS)}; ConvNCHWc's hot loop is also built for x86-64-v3/v4 "
          f"and picked at load time")
    print(f"# library    {build / 'libwpk.a'}")
    print(f"# cpu        {cpu_model()}, {os.cpu_count()} logical cpus, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def kernels(args, cc, build):
    exe = build / "bench_layout_conv"
    cmd = [cc] + FLAGS + ["-I", str(REPO / "include"), "-I", str(REPO / "src"),
                          str(REPO / "bench/layout_conv.c"), str(build / "libwpk.a"),
                          "-lprotobuf-c", "-lm", "-o", str(exe)]
    p = sh(cmd)
    if p.returncode:
        sys.exit(f"layout_conv: compiling the bench failed:\n{p.stderr}")
    table = {}
    for t in args.threads.split(","):
        p = sh([str(exe), "-t", t, "-r", str(args.repeats), "-x", str(args.block)],
               env=dict(os.environ, OMP_NUM_THREADS=t))
        print(p.stdout, end="")
        if p.returncode:
            sys.exit(f"layout_conv: the bench failed:\n{p.stderr}")
        for line in p.stdout.splitlines():
            m = re.match(r"(.{26}) (\S+)\s+t=(\d+)\s+median\s+([0-9.]+) GFLOP/s\s+best\s+"
                         r"([0-9.]+)", line)
            if m:
                table[(m.group(1).strip(), m.group(2), int(t))] = (float(m.group(4)),
                                                                    float(m.group(5)))
    print("\n# GFLOP/s median (best): NCHW, NCHWc, ratio of medians (of bests)")
    for (name, kernel, t), (med, best) in table.items():
        if kernel == "NCHW" and (name, "NCHWc", t) in table:
            bmed, bbest = table[(name, "NCHWc", t)]
            print(f"{name:26s} t={t}  NCHW {med:6.2f} ({best:6.2f})  NCHWc {bmed:6.2f} "
                  f"({bbest:6.2f})  x{bmed / med:5.1f} (x{bbest / best:5.1f})")


def end_to_end(args, build):
    wpk = build / "wpk"
    print(f"\n# end to end: {args.model}, {args.iters} iterations x {args.rounds} rounds per "
          f"level, threads {args.threads}")
    for t in args.threads.split(","):
        medians = {2: [], 3: []}
        for _ in range(args.rounds):
            for level in (2, 3):
                p = sh([str(wpk), "run", args.model, "-O", str(level), "--iters", str(args.iters),
                        "--threads", t, "-o", str(build / "bench_layout_out")])
                m = re.search(r"latency: median ([0-9.]+) ms, min ([0-9.]+) ms", p.stdout)
                if p.returncode or not m:
                    sys.exit(f"layout_conv: wpk run -O{level} failed:\n{p.stdout}{p.stderr}")
                medians[level].append(float(m.group(1)))
                print(f"-O{level} t={t}  median {m.group(1)} ms  min {m.group(2)} ms")
        o2, o3 = statistics.median(medians[2]), statistics.median(medians[3])
        print(f"t={t}: -O2 {o2:.1f} ms, -O3 {o3:.1f} ms (medians of the rounds' medians): "
              f"-O3 is x{o2 / o3:.2f} faster")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"), help="build dir with libwpk.a and wpk")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--repeats", type=int, default=9, help="timed calls per kernel")
    ap.add_argument("--block", type=int, default=default_block(), help="lanes per block")
    ap.add_argument("--model", help="an ONNX model for the end-to-end comparison")
    ap.add_argument("--iters", type=int, default=10, help="wpk run iterations per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating -O2/-O3 rounds")
    ap.add_argument("--no-kernels", action="store_true", help="end to end only")
    args = ap.parse_args()
    build = Path(args.build).resolve()
    cc = os.environ.get("CC", "cc")
    provenance(cc, build)
    if not args.no_kernels:
        kernels(args, cc, build)
    if args.model:
        end_to_end(args, build)


if __name__ == "__main__":
    main()
