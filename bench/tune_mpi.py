#!/usr/bin/env python3
"""`wpk tune --mpi` on this machine's fleet: one rank on one core against two ranks pinned to
one core each, the same job (model, tasks, trials per task, seed, one build worker per rank,
single-threaded kernels, a fresh kernel cache and records database each), in one run. Reports
each job's wall time, where the fleet's time went (each rank's share of it spent measuring;
rank 0's seconds on candidates, finalists, waiting, between tasks and on its bookkeeping: the
`fleet time:` line of `wpk tune --mpi`, which a loaded machine distorts less than wall time)
and the speed of the plan compiled from its records (`wpk compile`, then `wpk bench` of both
plans, interleaved rounds, one thread), and the ratios; writes bench/results/tune_mpi.md.
    python3 bench/tune_mpi.py [--wpk build/wpk] [--trials 32] [--rounds 5] [--clock wall|cpu]
Done when: 2-rank wall time <= 0.6 x 1-rank, plan speed within 3%.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def make_model(path):
    """A small residual CNN at 56x56: two 3x3 convs (ReLU, residual Add), a 1x1 conv, a
    global average pool and a Gemm; seeded weights, the same file every time."""
    rng = np.random.default_rng(11)
    inits = []

    def weight(name, shape):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.1, shape).astype(np.float32), name))
        return name

    nodes = [
        helper.make_node("Conv", ["x", weight("w1", (32, 16, 3, 3)), weight("b1", (32,))], ["c1"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", weight("w2", (32, 32, 3, 3)), weight("b2", (32,))], ["c2"],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Conv", ["r2", weight("w3", (64, 32, 1, 1))], ["c3"],
                         kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", weight("wf", (100, 64)), weight("bf", (100,))], ["y"],
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "fleet_bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def sh(cmd, env=None):
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def first_line(cmd):
    try:
        return sh(cmd).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", default=os.path.join(ROOT, "build", "wpk"))
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "tune_mpi.md"))
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if not mpirun:
        sys.exit("bench: mpirun not found (Debian: openmpi-bin)")
    tmp = tempfile.mkdtemp(prefix="wpk_tune_mpi_")
    model = os.path.join(tmp, "bench.onnx")
    make_model(model)
    fleets = [("1 rank, 1 core", 1, "0"), ("2 ranks, 1 core each", 2, "0,1")]
    load0 = os.getloadavg()[0]
    runs = []
    for name, n, cpus in fleets:
        d = os.path.join(tmp, f"r{n}")
        os.makedirs(d)
        env = dict(os.environ, WPK_CACHE_DIR=os.path.join(d, "cache"), OMP_NUM_THREADS="1",
                   **MPI_ENV)
        db = os.path.join(d, "records.db")
        # mpirun binds rank k to core k (its --cpu-set would bind every rank to the whole set)
        cmd = [mpirun, "-n", str(n), "--bind-to", "core", "--map-by", "core",
               args.wpk, "tune", model, "--mpi", "--trials", str(args.trials), "--parallel", "1",
               "--clock", args.clock, "--seed", "1", "--no-alternatives", "--db", db]
        t0 = time.time()
        p = sh(cmd, env)
        wall = time.time() - t0
        if p.returncode != 0:
            sys.exit(f"bench: {name}: exit {p.returncode}\n{p.stdout[-4000:]}")
        share = [ln for ln in p.stdout.splitlines()
                 if ln.startswith("fleet: ") and "tasks" not in ln]
        split = [ln[len("fleet time: "):] for ln in p.stdout.splitlines()
                 if ln.startswith("fleet time: ")]
        plan = os.path.join(d, "plan.wpk")
        c = sh([args.wpk, "compile", model, "-o", plan, "--db", db, "--threads", "1"], env)
        if c.returncode != 0:
            sys.exit(f"bench: compile {name}: {c.stdout[-2000:]}")
        print(f"{name}: {wall:.1f} s; {share[-1] if share else ''}", flush=True)
        print(f"  fleet time: {split[-1] if split else '?'}", flush=True)
        runs.append({"name": name, "ranks": n, "cpus": cpus, "wall": wall, "env": env,
                     "plan": plan, "share": share[-1][7:] if share else "?", "lat": [],
                     "split": split[-1] if split else "?",
                     "cmd": " ".join(cmd[:1] + cmd[1:]).replace(tmp, "$TMP")})
    # the plans' speed: interleaved rounds, so that a slow spell falls on both
    for _ in range(args.rounds):
        for r in runs:
            b = sh(["taskset", "-c", "0", args.wpk, "bench", r["plan"], "--threads", "1",
                    "--iters", str(args.iters), "--json"], r["env"])
            if b.returncode != 0:
                sys.exit(f"bench: wpk bench {r['name']}: {b.stdout[-2000:]}")
            r["lat"].append(json.loads(b.stdout)["latency_ms"]["median"])
    one, two = runs
    wall_ratio = two["wall"] / one["wall"]
    m1, m2 = statistics.median(one["lat"]), statistics.median(two["lat"])
    speed_diff = (m2 - m1) / m1
    commit = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    cpu_model = first_line(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-"])
    lines = [
        "# `wpk tune --mpi`: one rank against two (bench/tune_mpi.py)",
        "",
        f"- commit {commit}; {first_line(['cc', '--version'])}; "
        f"{first_line([mpirun, '--version'])}",
        f"- CPU: {platform.machine()} {cpu_model}, {os.cpu_count()} CPUs; load average at "
        f"the end: {os.getloadavg()[0]:.1f}",
        f"- job: a 5-task residual CNN at 56x56 (bench/tune_mpi.py's model), --trials "
        f"{args.trials} per task, ga, seed 1, one build worker per rank, OMP_NUM_THREADS=1, "
        f"--clock {args.clock}, no alternatives; a fresh kernel cache and database per job",
        f"- plan speed: `wpk compile` of each job's records, `wpk bench --threads 1 --iters "
        f"{args.iters}` pinned to CPU 0, {args.rounds} interleaved rounds, median of the "
        "rounds' medians",
        f"- load average before the first job: {load0:.1f} (on a loaded machine wall times "
        "stretch unevenly; the time split below says where each fleet's time went)",
        "",
        "| fleet | CPUs | wall s | ranks' share of results | plan median ms (rounds) |",
        "|---|---|---|---|---|",
    ]
    for r in runs:
        rounds = ", ".join(f"{x:.4f}" for x in r["lat"])
        lines.append(f"| {r['name']} | {r['cpus']} | {r['wall']:.1f} | {r['share']} | "
                     f"{statistics.median(r['lat']):.4f} ({rounds}) |")
    lines += ["", "Where the time went (`fleet time:` of each job):", ""]
    lines += [f"- {r['name']}: {r['split']}" for r in runs]
    lines += [
        "",
        f"2 ranks / 1 rank wall time: **{wall_ratio:.3f}** (goal <= 0.6); plan latency "
        f"difference: **{100 * speed_diff:+.2f}%** (goal within 3%)",
        "",
        "Commands (`$TMP`: the run's scratch folder):",
        "",
    ] + [f"    {r['cmd']}" for r in runs] + [""]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
