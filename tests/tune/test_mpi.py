#!/usr/bin/env python3
"""`wpk tune --mpi` on one machine: a fleet of ranks against the same job in one process, and
its faults.

A three-task model (a 3x3 conv with ReLU, a max pool, a Gemm) is tuned with --trials N:
  same      one process, and `mpirun -n 3 --oversubscribe ... --mpi`: the same records schema,
            every task holds N records in both, no (workload, config) stored twice, every
            rank measured something, every record under this machine's fingerprint
  models    two models that share all but their Gemm in one fleet run: four tasks, each
            with N records (the shared workloads measured once)
  other     a third rank that announces another machine's fingerprint is told so and left
            out; the two others finish the job
  hung      a rank stopped with SIGSTOP while it holds candidates is left out after the
            lease; its candidates are measured by the others, none recorded twice
  dead      a rank killed with SIGKILL (with Open MPI's orte_abort_on_non_zero_status 0, so
            the job outlives it): the same
  hungfinal the first rank handed finalists to re-measure is stopped with SIGSTOP: the
            re-measurement is done again elsewhere, each workload's finals stored once
  kill0     rank 0 killed with SIGKILL mid-run: the database passes SQLite's integrity check
            and holds no duplicate; the same command resumes and completes the job
    test_mpi.py --wpk PATH [--trials N] [--only NAME,...]
Exit 0 when every check passes, 1 otherwise, 77 (skipped) without mpirun or an MPI build.
"""
import argparse
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SKIP = 77
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def make_model(path, classes=10):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 0.2, s).astype(np.float32), n)
             for n, s in [("w", (8, 4, 3, 3)), ("b", (8,)), ("wf", (classes, 128)),
                          ("bf", (classes,))]]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "fleet_small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def records(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = con.execute("SELECT target, workload, config FROM records").fetchall()
        schema = sorted(r[0] for r in con.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall())
        check = con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()
    return rows, schema, check


def count(db):
    if not os.path.exists(db):
        return 0
    try:
        return len(records(db)[0])
    except sqlite3.Error:
        return 0


class Checker:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        print(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            self.failures += 1
        return ok


def complete(chk, db, tasks, trials, tag):
    """Every task holds `trials` records, none twice, the database intact."""
    rows, _, integrity = records(db)
    per = {}
    for _, wl, _ in rows:
        per[wl] = per.get(wl, 0) + 1
    chk.check(integrity == "ok", f"{tag}: integrity check says {integrity}")
    chk.check(len(per) == tasks and all(v == trials for v in per.values()),
              f"{tag}: {tasks} tasks with {trials} records each: {sorted(per.values())}")
    dup = len(rows) - len({(t, w, c) for t, w, c in rows})
    chk.check(dup == 0, f"{tag}: no (target, workload, config) stored twice ({dup})")
    return rows


def rank_pids(mpirun_pid):
    """{rank: pid} of mpirun's children (each rank's OMPI_COMM_WORLD_RANK)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != mpirun_pid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            rank = env.get(b"OMPI_COMM_WORLD_RANK")
            if rank is not None:
                out[int(rank)] = int(pid)
        except (OSError, ValueError, IndexError):
            pass
    return out


def run(cmd, env, timeout=240):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def run_and_signal(cmd, env, db, at_records, rank, sig, timeout=240, at_line=None):
    """Start cmd; once db holds at_records records (or, with at_line, a regex with the rank
    as its group, once the output has a line it matches), send sig to `rank` (the matched
    rank); wait for the end. Returns (returncode, output, signalled)."""
    log = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout
    signalled = False
    while time.time() < deadline and p.poll() is None:
        if at_line and not signalled:
            log.seek(0)
            m = re.search(at_line, log.read().decode(errors="replace"))
            rank = int(m.group(1)) if m else None
        if not signalled and rank is not None and count(db) >= at_records:
            pids = rank_pids(p.pid)
            if rank in pids:
                os.kill(pids[rank], sig)
                signalled = True
        time.sleep(0.05)
    if p.poll() is None:
        for pid in rank_pids(p.pid).values():
            os.kill(pid, signal.SIGKILL)
        p.kill()
    p.wait()
    log.seek(0)
    return p.returncode, log.read().decode(errors="replace"), signalled


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", required=True)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--only", default="same,models,other,hung,dead,kill0,hungfinal")
    args = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: mpirun is not installed (Debian: openmpi-bin)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="wpk_mpi_")
    model = os.path.join(tmp, "small.onnx")
    make_model(model)
    env = dict(os.environ, WPK_CACHE_DIR=os.path.join(tmp, "cache"), OMP_NUM_THREADS="1",
               **MPI_ENV)
    n = args.trials
    base = [args.wpk, "tune", model, "--trials", str(n), "--parallel", "1", "--clock", "cpu",
            "--no-alternatives", "--seed", "7"]
    chk = Checker()
    only = set(args.only.split(","))
    fingerprint = None
    tasks = 3

    if "same" in only:
        single, fleet = os.path.join(tmp, "single.db"), os.path.join(tmp, "fleet.db")
        rc, out = run(base + ["--db", single], env)
        if not chk.check(rc == 0, f"one process: exit {rc}"):
            print(out[-3000:])
        rc, out = run([mpirun, "-n", "3", *base, "--mpi", "--db", fleet], env)
        if "built without MPI" in out:
            print("SKIP: this wpk was built without MPI")
            return SKIP
        if not chk.check(rc == 0, f"mpirun -n 3: exit {rc}"):
            print(out[-3000:])
        rows1, schema1, _ = records(single)
        rows3 = complete(chk, fleet, tasks, n, "mpirun -n 3")
        complete(chk, single, tasks, n, "one process")
        chk.check(records(fleet)[1] == schema1, "the same records schema")
        chk.check({w for _, w, _ in rows1} == {w for _, w, _ in rows3}, "the same workloads")
        fingerprint = rows1[0][0] if rows1 else None
        chk.check({t for t, _, _ in rows3} == {fingerprint},
                  "every fleet record under this machine's fingerprint")
        shares = [ln for ln in out.splitlines() if ln.startswith("fleet: ") and "tasks" not in ln]
        chk.check(bool(shares) and all(f" {r}:0%" not in shares[-1] for r in range(3)),
                  f"every rank measured: {shares[-1] if shares else out[-2000:]}")
        chk.check("ETA" in out and "candidates/s" in out, "progress lines on rank 0")

    if "models" in only:
        db = os.path.join(tmp, "models.db")
        model20 = os.path.join(tmp, "small20.onnx")
        make_model(model20, classes=20)
        cmd = [mpirun, "-n", "2", *base[:3], model20, *base[3:], "--mpi", "--db", db]
        rc, out = run(cmd, env)
        if not chk.check(rc == 0 and "tuning 4 tasks of" in out,
                         f"two models in one run: exit {rc}, 4 tasks"):
            print(out[-3000:])
        complete(chk, db, tasks + 1, n, "two models")

    if "other" in only:
        db = os.path.join(tmp, "other.db")
        cmd = [mpirun, "-n", "2", *base, "--mpi", "--db", db, ":", "-n", "1", "-x",
               "WPK_FLEET_FINGERPRINT=riscv64 another machine 64c", *base, "--mpi", "--db", db]
        rc, out = run(cmd, env)
        chk.check(rc == 0, f"a rank of another target: exit {rc}")
        if not chk.check("rank 2" in out and "left out" in out and "riscv64 another machine"
                         in out and "differs" in out, "the other target's rank is told why"):
            print(out[-3000:])
        complete(chk, db, tasks, n, "with another target's rank")

    for name, sig in (("hung", signal.SIGSTOP), ("dead", signal.SIGKILL)):
        if name not in only:
            continue
        db = os.path.join(tmp, name + ".db")
        cmd = [mpirun, "--mca", "orte_abort_on_non_zero_status", "0", "-n", "3", *base,
               "--mpi", "--lease", "4", "--db", db]
        rc, out, signalled = run_and_signal(cmd, env, db, 3, 2, sig)
        chk.check(signalled, f"{name}: rank 2 was signalled while it worked")
        if not chk.check("rank 2" in out and "left out" in out and "handed out again" in out,
                         f"{name}: rank 0 leaves rank 2 out"):
            print(out[-3000:])
        chk.check("tasks," in out and "trials measured" in out, f"{name}: the job finished")
        complete(chk, db, tasks, n, name)

    if "hungfinal" in only:
        db = os.path.join(tmp, "hungfinal.db")
        cmd = [mpirun, "--mca", "orte_abort_on_non_zero_status", "0", "-n", "3", *base,
               "--mpi", "--lease", "4", "--db", db, "-v"]
        rc, out, signalled = run_and_signal(cmd, env, db, 0, None, signal.SIGSTOP,
                                            at_line=r"rank ([12]): re-measuring")
        chk.check(signalled, "hungfinal: a rank was stopped once handed finalists")
        if not chk.check(re.search(r"rank [12] .* left out, its \d+ candidates? and a "
                                   r"re-measurement handed out again", out) is not None,
                         "hungfinal: rank 0 leaves it out and hands its re-measurement out"):
            print(out[-3000:])
        chk.check("trials measured" in out, "hungfinal: the job finished")
        complete(chk, db, tasks, n, "hungfinal")
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rounds = con.execute("SELECT workload, COUNT(DISTINCT round), COUNT(*), "
                             "COUNT(DISTINCT config) FROM finals GROUP BY workload").fetchall()
        con.close()
        chk.check(len(rounds) == tasks and all(r[1] == 1 and r[2] == r[3] for r in rounds),
                  f"hungfinal: each workload's finals stored once: {rounds}")

    if "kill0" in only:
        db = os.path.join(tmp, "kill0.db")
        cmd = [mpirun, "-n", "3", *base, "--mpi", "--db", db]
        rc, out, signalled = run_and_signal(cmd, env, db, 4, 0, signal.SIGKILL)
        chk.check(signalled and rc != 0, f"kill0: rank 0 killed mid-run (exit {rc})")
        rows, _, integrity = records(db)
        chk.check(integrity == "ok", f"kill0: integrity check after the kill says {integrity}")
        chk.check(len(rows) == len(set(rows)) and len(rows) < tasks * n,
                  f"kill0: {len(rows)} records, none twice, the job unfinished")
        rc, out = run(cmd, env)
        if not chk.check(rc == 0, f"kill0: the same command resumes: exit {rc}"):
            print(out[-3000:])
        complete(chk, db, tasks, n, "kill0 resumed")

    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if chk.failures == 0 else f"{chk.failures} check(s) failed")
    return 0 if chk.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
