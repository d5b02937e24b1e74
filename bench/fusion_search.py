#!/usr/bin/env python3
"""The fusion + team size search (`wpk compile --fusion-search search`) against the exhaustive
oracle over the same space (`--fusion-search exhaustive`) on a small CNN with dw+pw blocks, a
conv+pool and a pad+conv (tests/cli/fusion_models.py: 5 layers, 4 groups, 288 plans on 2
threads), and optionally the search on torchvision models: each search's wall time and plans
timed, and the speed of the plans written -- the search's, the oracle's and the unfused plan
at the same threads (`--fusion-search none`) -- timed in alternating rounds of `wpk bench`.
    fusion_search.py [--threads 2] [--rounds 7] [--iters 50] [--models mobilenet_v2,...]
                     [--out bench/results/fusion_search.md] [--wpk build/wpk] [--dir DIR]
--models: torchvision models exported by tests/torchvision/export_models.py under
/usr/bin/python3 into --dir (the oracle does not run on them: its space is too large).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cli"))
import fusion_models  # noqa: E402

SUMMARY = re.compile(r"fusion search: (\d+) groups, (\d+) layers: fused (\d+), (\d+) layers on "
                     r"fewer threads; (\d+) plans timed in (\d+) ms")


def sh(*cmd, timeout=3600):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        sys.exit(f"{' '.join(str(c) for c in cmd)} failed:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def compile_plan(a, model, plan, mode):
    t0 = time.time()
    out = sh(a.wpk, "compile", model, "-o", plan, "--db", "", "--threads", a.threads,
             "--fusion-search", mode)
    wall = time.time() - t0
    m = SUMMARY.search(out)
    r = {"mode": mode, "compile_s": wall, "plan": plan}
    if m:
        g, layers, fused, fewer, plans, ms = (int(v) for v in m.groups())
        r.update(groups=g, layers=layers, fused=fused, fewer=fewer, plans=plans,
                 search_s=ms / 1e3)
    return r


def time_plans(a, plans):
    """Median latency (ms) of each plan over a.rounds rounds in which they take turns."""
    samples = {p: [] for p in plans}
    for _ in range(a.rounds):
        for p in plans:
            js = json.loads(sh(a.wpk, "bench", p, "--threads", a.threads, "--iters", a.iters,
                               "--warmup", "5", "--json"))
            samples[p].append(js["latency_ms"]["median"])
    return {p: statistics.median(v) for p, v in samples.items()}, samples


def export_torchvision(a, name):
    path = Path(a.dir) / f"{name}.onnx"
    if not path.exists():
        sh("/usr/bin/python3", REPO / "tests" / "torchvision" / "export_models.py", a.dir,
           "--models", name)
    return str(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "fusion_search.md"))
    ap.add_argument("--wpk", default=str(REPO / "build" / "wpk"))
    ap.add_argument("--dir", default="")
    a = ap.parse_args()
    a.dir = a.dir or tempfile.mkdtemp(prefix="wpk_fusion_")
    load0 = os.getloadavg()
    rows = []
    small = os.path.join(a.dir, "dw_pw_cnn.onnx")
    fusion_models.dw_pw_cnn(small)
    runs = {m: compile_plan(a, small, os.path.join(a.dir, f"small_{m}.wpk"), m)
            for m in ("none", "search", "exhaustive")}
    med, raw = time_plans(a, [r["plan"] for r in runs.values()])
    rows.append(("small CNN (dw+pw, conv+pool, pad+conv)", runs, med, raw))
    for name in [m for m in a.models.split(",") if m]:
        model = export_torchvision(a, name)
        runs = {m: compile_plan(a, model, os.path.join(a.dir, f"{name}_{m}.wpk"), m)
                for m in ("none", "search")}
        med, raw = time_plans(a, [r["plan"] for r in runs.values()])
        rows.append((name, runs, med, raw))
    load1 = os.getloadavg()

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = ["# Fusion + team size search vs the exhaustive oracle", "",
             "`python3 bench/fusion_search.py` (one command). Each plan compiled by `wpk compile "
             f"--db '' --threads {a.threads} --fusion-search MODE`; the plans then timed in "
             f"{a.rounds} alternating rounds of `wpk bench --iters {a.iters} --warmup 5` "
             "(median of the round medians). `none`: no fusion groups, every node on the "
             "plan's threads (today's -O3 plan); `search`: the DLFusion-style search (a rule "
             "from each layer's FLOPs and channels, a few profiled plans); `exhaustive`: every "
             "fusion plan x every team size of every layer (the oracle).", "",
             "| model | plan | groups fused / found | layers on fewer threads / layers | "
             "plans timed | search time (s) | compile wall (s) | latency (ms) | vs none | "
             "vs oracle |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, runs, med, raw in rows:
        base = med[runs["none"]["plan"]]
        oracle = med[runs["exhaustive"]["plan"]] if "exhaustive" in runs else None
        for mode, r in runs.items():
            ms = med[r["plan"]]
            vs_oracle = f"{oracle / ms:.3f}" if oracle else "-"
            lines.append(
                f"| {name} | {mode} | {r.get('fused', 0)} / {r.get('groups', '-')} | "
                f"{r.get('fewer', 0)} / {r.get('layers', '-')} | {r.get('plans', 0)} | "
                f"{r.get('search_s', 0):.2f} | {r['compile_s']:.1f} | {ms:.3f} | "
                f"{base / ms:.3f} | {vs_oracle} |")
    lines += ["", "Ratios: other plan's latency / this plan's (> 1: this plan is faster).", "",
              "Raw round medians (ms):", ""]
    for name, runs, med, raw in rows:
        for mode, r in runs.items():
            lines.append(f"- {name} {mode}: " + ", ".join(f"{v:.3f}" for v in raw[r["plan"]]))
    lines += ["", "Provenance:", "",
              f"- commit {commit}, {platform.machine()} {platform.processor() or ''}, "
              f"{os.cpu_count()} CPUs, threads {a.threads}",
              f"- load average before {load0[0]:.2f}, after {load1[0]:.2f}",
              f"- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    text = "\n".join(lines) + "\n"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
