#!/usr/bin/env python3
"""`wpk tune` from the command line: must-fail arguments (exit 1 with a message naming the
cause), a time-budgeted run (--time) that stores records for every task and ends near its
budget, --report (the CSV's rows match the records, the PNG is a valid image: signature, chunk
CRCs, size), --export/--import (JSON lines; importing into a fresh database gives the same
records, importing twice adds nothing), and a second strategy into the same report directory
(its CSV joins the plot).
    test_tune_cli.py --wpk PATH
"""
import argparse
import csv
import json
import os
import re
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def png_ok(path):
    """Signature, every chunk's CRC, IHDR first and IEND last; returns (width, height) or None."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, chunks, size = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(kind + body) & 0xffffffff != crc:
            return None
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        chunks.append(kind)
        pos += 12 + n
    if not chunks or chunks[0] != b"IHDR" or chunks[-1] != b"IEND":
        return None
    raw = zlib.decompress(b"".join(
        data[p + 8:p + 8 + struct.unpack(">I", data[p:p + 4])[0]] for p in chunk_offsets(data)))
    return size if len(raw) == size[1] * (size[0] * 3 + 1) else None


def chunk_offsets(data):
    pos = 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        if data[pos + 4:pos + 8] == b"IDAT":
            yield pos
        pos += 12 + n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wpk_tune_cli_") as tmp:
        model = os.path.join(tmp, "small.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "make_model.py"), model], check=True)
        env = dict(os.environ, WPK_CACHE_DIR=os.path.join(tmp, "cache"))
        db = os.path.join(tmp, "a.db")
        wpk = args.wpk

        for bad, needle in [
            (["--trials", "0"], "--trials needs a positive number"),
            (["--time", "ten"], "--time needs a duration"),
            (["--parallel", "x"], "--parallel needs 'auto' or a number"),
            (["--strategy", "nope", "--trials", "1"], "nope"),
            (["--frobnicate"], "unknown option '--frobnicate'"),
            (["--clock", "sundial"], "--clock needs auto, wall or cpu"),
        ]:
            rc, out, err = run([wpk, "tune", model, "--db", db] + bad, env)
            check(rc == 1 and needle in err, f"{bad}: exit {rc}, stderr {err!r}")
        rc, out, err = run([wpk, "tune", os.path.join(tmp, "missing.onnx"), "--db", db], env)
        check(rc == 1 and "missing.onnx" in err, f"missing model: exit {rc}, {err!r}")
        rc, out, err = run([wpk, "tune"], env)
        check(rc == 1 and "needs a model" in err, f"no model: exit {rc}, {err!r}")
        rc, out, err = run([wpk, "tune", "--help"], env)
        check(rc == 0 and "--trials" in out, "--help")

        # a time budget spread over the tasks
        rep = os.path.join(tmp, "report")
        t0 = time.time()
        rc, out, err = run([wpk, "tune", model, "--db", db, "--time", "25s", "--strategy",
                            "random", "--report", rep, "--batch", "4", "--no-alternatives"], env)
        took = time.time() - t0
        check(rc == 0, f"--time run: exit {rc}: {err}")
        con = sqlite3.connect(db)
        per = dict(con.execute("SELECT workload, COUNT(*) FROM records GROUP BY workload"))
        total = con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        # each task that measured ends with a round of finals: its default and best few
        # re-timed alone
        finals = con.execute("SELECT workload, config, round FROM finals").fetchall()
        con.close()
        check(len(per) == 5 and all(c >= 1 for c in per.values()),
              f"--time: every task gets trials: {per}")
        check({w for w, _, _ in finals} == set(per) and all(r == 1 for _, _, r in finals),
              f"one round of finals per task: {finals}")
        # the tasks' weights (17 KB in the file; blocked layouts pad them) fit any cache
        m = re.search(r"^weights: ([0-9.]+) MB in the tuned tasks' nodes, timed warm$", out, re.M)
        check(m is not None and 0.015 <= float(m.group(1)) <= 0.05, f"the weights line: {out}")
        # the budget, plus the final re-measurement and one batch in flight at the deadline
        check(took < 25 + 45, f"--time 25s took {took:.0f}s")
        print(out)

        # the report: CSV rows are the records, in order; the PNG is an image
        rows = list(csv.DictReader(open(os.path.join(rep, "curves_random.csv"))))
        check(len(rows) == total, f"CSV has {len(rows)} rows for {total} records")
        for r in rows:
            best = float(r["best_gflops"])
            check(best >= float(r["gflops"]) - 1e-3, "best so far never below the trial")
        size = png_ok(os.path.join(rep, "curves.png"))
        check(size is not None and size[0] > 100 and size[1] > 100, f"curves.png: {size}")

        # a second strategy into the same report directory joins the plot
        db2 = os.path.join(tmp, "b.db")
        rc, out, err = run([wpk, "tune", model, "--db", db2, "--trials", "3", "--strategy", "ga",
                            "--report", rep], env)
        check(rc == 0 and os.path.exists(os.path.join(rep, "curves_ga.csv")), f"ga run: {err}")
        check(png_ok(os.path.join(rep, "curves.png")) is not None, "curves.png after two runs")

        # export / import
        exp = os.path.join(tmp, "records.jsonl")
        rc, out, err = run([wpk, "tune", "--db", db, "--export", exp], env)
        check(rc == 0, f"export: {err}")
        lines = [json.loads(x) for x in open(exp) if x.strip()]
        check(len(lines) == total, f"export wrote {len(lines)} lines for {total} records")
        db3 = os.path.join(tmp, "c.db")
        rc, out, err = run([wpk, "tune", "--db", db3, "--import", exp], env)
        check(rc == 0 and f"imported {total} record" in out, f"import: {out} {err}")
        rc, out, err = run([wpk, "tune", "--db", db3, "--import", exp], env)
        check(rc == 0 and "imported 0 records" in out, f"import twice: {out} {err}")
        # a model tuned with the imported records measures nothing more than what it lacks
        rc, out, err = run([wpk, "tune", model, "--db", db3, "--trials", "1", "--no-alternatives"],
                           env)
        check(rc == 0 and " 0 trials measured" in out, f"imported records are used: {out}")

        # by default every implementation of a workload is measured: the convs' other
        # templates, and each vendor library that takes them, under keys of their own (at -O2,
        # where the convs stay NCHW and both conv templates take them)
        db4 = os.path.join(tmp, "d.db")
        rc, out, err = run([wpk, "tune", model, "-O2", "--db", db4, "--trials", "2"], env)
        con = sqlite3.connect(db4)
        tmpls = {t for (t,) in con.execute("SELECT DISTINCT template FROM records")}
        keys = [k for (k,) in con.execute("SELECT DISTINCT workload FROM records")]
        fin = dict(con.execute("SELECT workload, max(round) FROM finals GROUP BY workload"))
        con.close()
        check(rc == 0 and len(keys) > 5, f"alternatives tuned: {keys} {err}")
        # each implementation's finals, measured in its workload's shared rounds
        check(set(fin) == set(keys) and all(r == 1 for r in fin.values()),
              f"one round of finals per implementation: {fin} {keys}")
        check({"conv2d_nchwc", "conv2d_nchw"} <= tmpls, f"both conv templates measured: {tmpls}")
        for lib in ("onednn", "openblas"):
            if f"{lib}|" in out or lib in tmpls:
                check(any(k.startswith(lib + "|") for k in keys), f"{lib}'s records: {keys}")
        check("fastest" in out, f"the summary names the fastest implementation: {out}")

        # a task whose best stops improving stops early (--flat N: under 1% over its last N
        # trials), says so, and keeps fewer records than --trials asked for
        db5 = os.path.join(tmp, "e.db")
        rc, out, err = run([wpk, "tune", model, "--db", db5, "--trials", "24", "--flat", "4",
                            "--strategy", "random", "--no-alternatives"], env)
        con = sqlite3.connect(db5)
        counts = [n for (n,) in con.execute("SELECT count(*) FROM records GROUP BY workload")]
        con.close()
        check(rc == 0 and "stopped early: its best improved" in out and "last 4 trials" in out,
              f"--flat: the summary says which tasks stopped early: {out} {err}")
        check(counts and min(counts) < 24, f"--flat: a flat task stopped before 24: {counts}")
        rc, out, err = run([wpk, "tune", model, "--flat", "x"], env)
        check(rc == 1 and "--flat needs a number" in err, f"--flat x: {rc} {err}")
        # rl keeps its policy next to the database; a corrupt one is a warning, never a failure
        db6 = os.path.join(tmp, "f.db")
        rc, out, err = run([wpk, "tune", model, "--db", db6, "--trials", "6", "--strategy", "rl",
                            "--no-alternatives"], env)
        pol = db6 + ".rl-policy"
        check(rc == 0 and os.path.exists(pol) and
              open(pol).read().startswith("wpk-rl-policy 2 "), f"rl saves its policy: {err}")
        with open(pol, "w") as f:
            f.write("wpk-rl-policy 2 49 3\n00ab tile 2 nonsense\n")
        rc, out, err = run([wpk, "tune", model, "--db", db6, "--trials", "12", "--strategy", "rl",
                            "--no-alternatives"], env)
        check(rc == 0 and "rl policy" in err and "malformed" in err and "fresh policy" in err,
              f"a corrupt policy: a warning and a fresh policy: {rc} {err}")
        check(open(pol).read().startswith("wpk-rl-policy 2 "), "the corrupt policy replaced")
    print("test_tune_cli: " + ("ok" if not failures else f"{len(failures)} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
