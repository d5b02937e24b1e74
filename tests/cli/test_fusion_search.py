#!/usr/bin/env python3
"""`wpk compile --fusion-search`: fusion groups beyond epilogues and per-layer team sizes.

On two small CNNs and an elementwise chain holding every group kind
(tests/cli/fusion_models.py), each compiled plan --
every group fused, the profiled search's choice, the exhaustive oracle's -- must compute what
ONNX Runtime computes, and say how many groups it found and fused; the search must time far
fewer plans than the oracle; bad requests fail naming the cause.
    test_fusion_search.py --wpk PATH
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fusion_models  # noqa: E402

failures = []
SUMMARY = re.compile(r"fusion search: (\d+) groups, (\d+) layers: fused (\d+), (\d+) layers on "
                     r"fewer threads; (\d+) plans timed")


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    if not cond:
        failures.append(what)


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


def compile_plan(wpk, model, plan, mode, *extra):
    rc, out, err = run(wpk, "compile", model, "-o", plan, "--db", "", "--fusion-search", mode,
                       *extra)
    check(rc == 0, f"{os.path.basename(model)}: compile --fusion-search {mode} ({err.strip()})")
    m = SUMMARY.search(out)
    check(m is not None, f"{os.path.basename(model)} {mode}: the search's summary is printed")
    return [int(v) for v in m.groups()] if m else None


def agrees(wpk, model, plan, x, tmp, what, out="y"):
    import onnxruntime as ort
    feeds = x if isinstance(x, dict) else {"x": x}
    ref = ort.InferenceSession(model).run(None, feeds)[0]
    args, outdir = [], os.path.join(tmp, "out")
    for name, value in feeds.items():
        np.save(os.path.join(tmp, f"{name}.npy"), value)
        args += ["-i", f"{name}={os.path.join(tmp, name + '.npy')}"]
    rc, _, err = run(wpk, "run", "--plan", plan, *args, "-o", outdir)
    check(rc == 0, f"{what}: the plan runs ({err.strip()})")
    if rc:
        return
    y = np.load(os.path.join(outdir, f"{out}.npy"))
    err = float(np.max(np.abs(y - ref) / (1.0 + np.abs(ref)))) if y.shape == ref.shape else 1e9
    check(err <= 1e-4, f"{what}: matches ONNX Runtime (max relative error {err:.2e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wpk", required=True)
    wpk = ap.parse_args().wpk
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.onnx")
        shapes = fusion_models.dw_pw_cnn(small, channels=16, size=28)
        x = rng.standard_normal(shapes["x"]).astype(np.float32)
        plan = os.path.join(tmp, "small.wpk")
        s = compile_plan(wpk, small, plan, "all", "--threads", "2")
        check(s is not None and s[0] == 4 and s[2] == 4,
              f"small CNN: 4 groups found, all fused: {s}")
        agrees(wpk, small, plan, x, tmp, "small CNN, every group fused")
        s = compile_plan(wpk, small, plan, "search", "--threads", "2")
        agrees(wpk, small, plan, x, tmp, "small CNN, the search's plan")
        o = compile_plan(wpk, small, plan, "exhaustive", "--threads", "2")
        agrees(wpk, small, plan, x, tmp, "small CNN, the oracle's plan")
        if s and o:
            # at this size the Pad, the MaxPool and the first dw are below a layer's FLOPs: 4
            # layers (conv, pw, dw, pw) with teams of 1 or 2; only the second dw+pw group takes
            # a layer away: 8 fusion plans x 2^4 + 8 x 2^3
            check(o[1] == 4, f"4 layers: {o[1]}")
            check(o[4] == 192, f"the oracle times every plan of the space (192): {o[4]}")
            # 7 profiled and composed plans, then one move per group and per layer (2 threads)
            bound = 7 + o[0] + o[1]
            check(s[4] <= bound, f"the search times at most {bound} plans: {s[4]}")

        var = os.path.join(tmp, "variants.onnx")
        shapes = fusion_models.variants_cnn(var)
        x = rng.standard_normal(shapes["x"]).astype(np.float32)
        s = compile_plan(wpk, var, plan, "all", "--batch", "2")
        check(s is not None and s[0] == 4 and s[2] == 4,
              f"variants: 4 groups (not the Pad of ones), all fused: {s}")
        agrees(wpk, var, plan, x, tmp, "variants (batch 2), every group fused")
        compile_plan(wpk, var, plan, "search", "--batch", "2", "--threads", "2")
        agrees(wpk, var, plan, x, tmp, "variants (batch 2), the search's plan")

        chain = os.path.join(tmp, "chain.onnx")
        shapes = fusion_models.elementwise_chain(chain)
        feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
        s = compile_plan(wpk, chain, plan, "all", "--batch", "2")
        check(s is not None and s[0] == 7 and s[2] == 7,
              f"elementwise chain: 7 groups, all fused: {s}")
        agrees(wpk, chain, plan, feeds, tmp, "elementwise chain (batch 2), one loop", "z")
        compile_plan(wpk, chain, plan, "search", "--batch", "2", "--threads", "2")
        agrees(wpk, chain, plan, feeds, tmp, "elementwise chain, the search's plan", "z")

        rc, _, err = run(wpk, "compile", small, "-o", plan, "--fusion-search", "greedy")
        check(rc == 1 and "--fusion-search needs none, search, exhaustive or all" in err,
              f"an unknown mode is a usage error: {err.strip()}")
        rc, _, err = run(wpk, "compile", var, "-o", plan, "--db", "", "--threads", "16",
                         "--fusion-search", "exhaustive")
        check(rc == 1 and "oracle for small models" in err,
              f"the oracle refuses a space it cannot time: {err.strip()}")
        rc, _, err = run(wpk, "compile", small, "-o", plan, "--target", "cuda",
                         "--fusion-search", "search")
        check(rc == 1 and "plans the cpu target only" in err,
              f"the search is for the cpu target: {err.strip()}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
