#!/usr/bin/env python3
"""`wpk compile`'s speed check: a choice timed alone is checked in the model before it is written.

Records are forged so that, for every conv of a ResNet-style model, a deliberately slow config
(one thread, slow loop order, nothing unrolled) claims to be the fastest. Compiling with them must time
that plan against the all-defaults plan, write the defaults plan and say so; with
--no-speed-check the forged choice is written (the check is what saved the plan); with no
records there is nothing to compare and no check runs. Every written plan must run.
    test_speed_check.py --wpk PATH
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import gen_models  # noqa: E402

failures = []
BATCH = "8"
PTHREAD_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    if not cond:
        failures.append(what)


def run(*cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


def slow_config(config):
    """One output vector per tile (no register reuse), the reduction loops in the slow order,
    nothing unrolled, no padded copy, on one thread."""
    knobs = dict(kv.split("=") for kv in config.split(","))
    knobs.update(ow_block="1", oh_block="1", parallel="0", order="0", unroll_kw="0",
                 pad_copy="0")
    return ",".join(f"{k}={v}" for k, v in knobs.items())


def forge(real_jsonl, forged_jsonl):
    """One record per conv workload: its first record's config made slow, claiming 1 ns."""
    seen = set()
    with open(real_jsonl) as src, open(forged_jsonl, "w") as dst:
        for line in src:
            r = json.loads(line)
            if r["template"] != "conv2d_nchwc" or r["workload"] in seen or r["status"] != "ok":
                continue
            seen.add(r["workload"])
            r["config"] = slow_config(r["config"])
            r["samples"] = [1e-9]
            r["median"] = 1e-9
            dst.write(json.dumps(r) + "\n")
    return len(seen)


def pthread_openblas(wpk, model, env):
    """OpenBLAS's pthread build (what Debian's alternatives select when both are installed)
    runs on one thread inside the model, says so in its version (which keys its records), and
    gives the OpenMP build's answer."""
    if not os.path.exists(os.path.join(PTHREAD_OPENBLAS, "libopenblas.so.0")):
        print(f"note: no pthread OpenBLAS in {PTHREAD_OPENBLAS}; that part not run")
        return
    outs = {}
    for name, extra in (("pthread", {"LD_LIBRARY_PATH": PTHREAD_OPENBLAS}), ("default", {})):
        save = os.path.join(env["WPK_CACHE_DIR"], "..", f"bench-{name}")
        rc, out, err = run(wpk, "bench", model, "--provider", "openblas", "--db", "", "--iters",
                           "2", "--json", "--save", save, env=dict(env, **extra))
        check(rc == 0, f"the openblas provider runs on the {name} OpenBLAS: {err}")
        if rc:
            return
        rep = json.loads(out)
        outs[name] = (rep["provenance"]["libraries"], save, rep["outputs"][0]["file"])
    libs = outs["pthread"][0]
    check("pthread build, run on one thread" in libs, f"the pthread build is named: {libs}")
    import numpy as np
    a, b = (np.load(os.path.join(save, f)) for _, save, f in outs.values())
    check(np.allclose(a, b, rtol=1e-4, atol=1e-5), "both builds give the same answer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, WPK_CACHE_DIR=os.path.join(tmp, "cache"))
        model = gen_models.write_models(tmp, ["resnet_like"])["resnet_like"]
        real, forged = (os.path.join(tmp, n) for n in ("real.db", "forged.db"))
        # batch 8: enough work per run that the kernels, not the step overhead, set its time
        rc, out, err = run(args.wpk, "tune", model, "--db", real, "--trials", "1", "--batch",
                           BATCH, "--no-alternatives", env=env)
        check(rc == 0, f"a one-trial tune stores records: {err}")
        exported = os.path.join(tmp, "real.jsonl")
        run(args.wpk, "tune", "--db", real, "--export", exported, env=env)
        forged_jsonl = os.path.join(tmp, "forged.jsonl")
        nconv = forge(exported, forged_jsonl)
        check(nconv >= 5, f"a slow config forged for each conv ({nconv})")
        rc, out, err = run(args.wpk, "tune", "--db", forged, "--import", forged_jsonl, env=env)
        check(rc == 0 and f"imported {nconv} record" in out, f"forged records imported: {out}{err}")

        plan = os.path.join(tmp, "checked.wpk")
        # one thread: the plans' times then follow their work, not how a loaded machine
        # schedules a team of threads
        rc, out, err = run(args.wpk, "compile", model, "--db", forged, "-o", plan, "--batch",
                           BATCH, "--threads", "1", env=env)
        line = re.search(r"^speed check .*: chosen ([\d.]+)( \(kept\))? defaults ([\d.]+)"
                         r"( \(kept\))?$", out, re.M)
        check(rc == 0 and line is not None, f"the compile step times the plans: {out}{err}")
        if line:
            chosen, defaults = float(line.group(1)), float(line.group(3))
            check(line.group(4) is not None and line.group(2) is None and chosen > defaults,
                  f"the forged choice ({chosen} ms) loses to the defaults ({defaults} ms) in "
                  "the model and the defaults plan is written")
            check("wrote the defaults plan" in out, "the output says which plan was written")
            check(re.search(r"^  total\s+\d+\s+0\s+", out, re.M) is not None,
                  f"the written plan has no tuned node: {out}")

        unchecked = os.path.join(tmp, "unchecked.wpk")
        rc, out, err = run(args.wpk, "compile", model, "--db", forged, "-o", unchecked,
                           "--batch", BATCH, "--no-speed-check", env=env)
        check(rc == 0 and "speed check" not in out and
              re.search(r"^  total\s+\d+\s+[1-9]", out, re.M) is not None,
              f"--no-speed-check writes the records' choice unchecked: {out}{err}")

        untuned = os.path.join(tmp, "untuned.wpk")
        rc, out, err = run(args.wpk, "compile", model, "--db", "", "-o", untuned, env=env)
        check(rc == 0 and "speed check" not in out, "no records: nothing to compare")

        for p in (plan, unchecked, untuned):
            rc, out, err = run(args.wpk, "bench", p, "--iters", "3", env=env)
            check(rc == 0, f"{os.path.basename(p)} runs: {err}")
        pthread_openblas(args.wpk, model, env)
    print("speed check: " + (f"{len(failures)} failed" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
