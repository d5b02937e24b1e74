#!/usr/bin/env python3
"""Two builds of wpk on the same models in one run: did a change cost speed?
    compare_builds.py --before OLD/wpk --after build/wpk --models DIR/resnet18.onnx,...
                      [--rounds 5] [--iters 50] [--threads 2] [--out FILE.md]

Per model, each build runs the model as a user does, untuned (no records: `--db ''`), at its
defaults: `wpk bench MODEL --json` (the session path, generated kernels compiled on first use
into each build's own kernel cache, warmed up before timing). The two builds take turns for
--rounds rounds (a shared machine's speed drifts within a minute: run one after the other, each
build meets a different drift); the figure per build is the median of all its timed runs'
per-round medians. Ratio = before / after (> 1: the change made it faster). Provenance: both
builds' commits, compiler and libraries, CPU, threads, load average before and after.
Exit status: 0 when every run worked.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile


def bench(wpk, model, threads, iters, cache):
    env = dict(os.environ, WPK_CACHE_DIR=cache, OMP_WAIT_POLICY="passive")
    cmd = [wpk, "bench", model, "--json", "--iters", str(iters), "--warmup", "5",
           "--threads", str(threads), "--db", ""]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    j = json.loads(r.stdout)
    return j["latency_ms"]["median"], j["provenance"]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--models", required=True, help="comma-separated .onnx paths")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    load0 = os.getloadavg()
    caches = {k: tempfile.mkdtemp(prefix=f"wpk-cmp-{k}-") for k in ("before", "after")}
    rows = []
    prov = {}
    for model in a.models.split(","):
        samples = {"before": [], "after": []}
        for k in samples:  # first use compiles the kernels: not timed
            _, prov[k] = bench(getattr(a, k), model, a.threads, 1, caches[k])
        for _ in range(a.rounds):
            for k in ("before", "after"):
                samples[k].append(bench(getattr(a, k), model, a.threads, a.iters, caches[k])[0])
        b, f = statistics.median(samples["before"]), statistics.median(samples["after"])
        rows.append((os.path.basename(model), b, f, b / f, samples))
    load1 = os.getloadavg()
    lines = [
        f"before: commit {prov['before']['commit']} ({a.before}); after: commit "
        f"{prov['after']['commit']} ({a.after}); built {prov['after']['build']}; kernels "
        f"{prov['after']['compiler']}; libraries {prov['after']['libraries']}",
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; threads {a.threads}; "
        f"{a.rounds} alternating rounds x {a.iters} runs; load average {load0[0]:.2f} -> "
        f"{load1[0]:.2f}",
        "",
        "| model | before median ms | after median ms | before / after |",
        "|---|---:|---:|---:|",
    ]
    for name, b, f, r, _ in rows:
        lines.append(f"| {name} | {b:.3f} | {f:.3f} | {r:.3f} |")
    lines.append("")
    lines.append("per-round medians (ms): " + "; ".join(
        f"{name}: before {[round(x, 3) for x in s['before']]}, after "
        f"{[round(x, 3) for x in s['after']]}" for name, _, _, _, s in rows))
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
