#!/usr/bin/env python3
"""The kill -9 property of `wpk tune`, end to end.

A small model (make_model.py: five tasks) is tuned with --trials N into a fresh database; the
tuner is killed with SIGKILL twice while it measures (once early, once later), then run to the
end. Checks: every task holds exactly N records and no (workload, config) is stored twice; the
database passes SQLite's integrity check; no worker process of a killed tuner outlives it; and
running the finished job again measures nothing (the database is unchanged and the summary says
0 trials measured).
    test_resume.py --wpk PATH [--trials N]
Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def count_records(db):
    """Records per workload, or {} while the database is not there yet."""
    if not os.path.exists(db):
        return {}
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        rows = con.execute("SELECT workload, COUNT(*) FROM records GROUP BY workload").fetchall()
        con.close()
        return dict(rows)
    except sqlite3.Error:
        return {}


def processes_with_args(needle):
    """PIDs of processes whose command line contains needle (forked workers keep the tuner's)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def kill_after(cmd, env, db, records, tag):
    """Start the tuner, SIGKILL it once the database holds `records` records; False on trouble."""
    # output to a file, not a pipe nobody reads while it runs: a full pipe would stall the tuner
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if sum(count_records(db).values()) >= records:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        log.seek(0)
        print(f"FAIL: the tuner ended before it could be killed ({tag}):\n"
              + log.read().decode(errors="replace"))
        return False
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log.seek(0)
    out = log.read().decode(errors="replace")
    if time.time() >= deadline:
        print(f"FAIL: {records} records were not stored in 300 s ({tag}):\n{out[-4000:]}")
        return False
    print(f"killed the tuner with {sum(count_records(db).values())} records stored ({tag})")
    time.sleep(1.0)
    left = processes_with_args(db)
    if left:
        print(f"FAIL: worker processes {left} outlived the killed tuner")
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", required=True)
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="wpk_tune_resume_") as tmp:
        model = os.path.join(tmp, "small.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), model], check=True)
        db = os.path.join(tmp, "records.db")
        env = dict(os.environ, WPK_CACHE_DIR=os.path.join(tmp, "cache"))
        # -O2: each of the 5 tasks' spaces holds more configs than the trials (at -O3 the
        # blocked average pool's holds 4)
        cmd = [args.wpk, "tune", model, "-O2", "--trials", str(args.trials), "--db", db,
               "--batch", "4", "--seed", "3", "--no-alternatives"]
        ok &= kill_after(cmd, env, db, 3, "early")
        ok &= kill_after(cmd, env, db, 3 * args.trials, "later")
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=240)
        out = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            print(f"FAIL: the resumed run exited {done.returncode}:\n{out}")
            return 1
        counts = count_records(db)
        if len(counts) != 5 or any(c != args.trials for c in counts.values()):
            print(f"FAIL: expected {args.trials} records for each of 5 tasks, got {counts}")
            ok = False
        con = sqlite3.connect(db)
        dups = con.execute("SELECT workload, config, COUNT(*) FROM records GROUP BY target, "
                           "workload, config HAVING COUNT(*) > 1").fetchall()
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        total = con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        con.close()
        if dups:
            print(f"FAIL: configs stored more than once: {dups}")
            ok = False
        if integrity != "ok":
            print(f"FAIL: integrity check: {integrity}")
            ok = False
        again = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=120)
        out2 = again.stdout.decode(errors="replace")
        con = sqlite3.connect(db)
        total2 = con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        con.close()
        if again.returncode != 0 or total2 != total or " 0 trials measured" not in out2:
            print(f"FAIL: re-running the finished job changed something (exit {again.returncode}, "
                  f"{total} -> {total2} records):\n{out2}")
            ok = False
        print(out)
    print("test_resume: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
