#!/usr/bin/env python3
"""The cpu backend (generated kernels) on whole models against ONNX Runtime, rel L2 <= 1e-4 per
output: `wpk run --backend cpu` through the same comparison as tests/models and
tests/torchvision (compare_ort.py). Every run also has to build each kernel from its template:
a template that fails and leaves its node to the reference kernel logs a warning, which fails
the case here.
    test_cpu_backend.py --part models|cli|torchvision [--wpk PATH] [--dir DIR] [--models a,b]
Parts:
  models       the small CNNs of gen_models.py (dynamic batch also at 3) and the old-opset
               one-node models of legacy_ops.py, at -O2 (fused epilogues) and -O3 (the blocked
               layout: ConvNCHWc, blocked pools, Reorder)
  cli          `wpk space`, `wpk lower` and WPK_DUMP=lower on a generated model, `wpk info`'s
               reference-kernel line, and a run without a C compiler (reference kernels)
  torchvision  every torchvision model of tests/torchvision (exported into --dir as there;
               exit 77 without torch) at -O2; resnet18 also at batch 2
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))
sys.path.insert(0, str(HERE.parent / "torchvision"))
import compare_ort  # noqa: E402
import gen_models  # noqa: E402
import legacy_ops  # noqa: E402

SKIP = 77


def wrapper(wpk, level, directory):
    """An executable that runs `wpk ARGS... --backend cpu -O LEVEL -v` (compare_ort runs the binary
    it is given as `wpk run MODEL ...`) and fails when wpk logs a warning (a kernel fallback)."""
    path = os.path.join(directory, f"wpk-cpu-O{level}")
    with open(path, "w") as f:
        f.write(f"""#!{sys.executable}
import subprocess, sys
p = subprocess.run([{str(Path(wpk).resolve())!r}] + sys.argv[1:] + ["--backend", "cpu", "-O{level}", "-v"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
sys.stdout.write(p.stdout)
lines = [l for l in p.stderr.splitlines() if not l.startswith("pass ")]
sys.stderr.write("\\n".join(lines) + "\\n")
if p.returncode == 0 and any("warning:" in l for l in lines):
    sys.exit(3)
if p.returncode == 0 and not any(l.startswith("cpu: ") for l in lines):
    sys.stderr.write("no 'cpu:' statistics line: the model did not compile\\n")
    sys.exit(3)
sys.exit(p.returncode)
""")
    os.chmod(path, 0o755)
    return path


def run_cases(cases, label_width=30):
    """cases: (label, model path, wpk wrapper, batch). Prints one line each; returns failures."""
    failures = []
    for label, path, wpk, batch in cases:
        t = time.perf_counter()
        result = compare_ort.compare(path, wpk, batch=batch)
        errs = ", ".join(f"{e:.3g}" for e in result.errors.values()) or "-"
        print(f"{label:{label_width}} rel L2 {errs:10} {'ok' if result.ok else 'FAIL'} "
              f"({time.perf_counter() - t:.1f} s)", flush=True)
        for problem in result.problems:
            print(f"    {problem}")
        if not result.ok:
            failures.append(label)
    return failures


def part_models(args, tmp):
    paths = gen_models.write_models(tmp, [m for m in args.models.split(",") if m] or None)
    paths.update(legacy_ops.write_models(os.path.join(tmp, "legacy")))
    cases = []
    for level in (2, 3):
        wpk = wrapper(args.wpk, level, tmp)
        for name, path in paths.items():
            for batch in [None, 3] if name in gen_models.DYNAMIC_BATCH else [None]:
                label = f"{name} -O{level}" + (f" (batch {batch})" if batch else "")
                cases.append((label, path, wpk, batch))
    return run_cases(cases, 40)


def check(cond, what, failures):
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    if not cond:
        failures.append(what)


def part_cli(args, tmp):
    failures = []
    model = gen_models.write_models(tmp, ["resnet_like"])["resnet_like"]
    run = lambda *a, env=None: subprocess.run([args.wpk, *a], capture_output=True, text=True,
                                              env=env)
    space = run("space", model)
    out = space.stdout
    check(space.returncode == 0, "wpk space exits 0", failures)
    tasks = re.findall(r"^task \d+: (\S+)$", out, re.M)
    check(len(tasks) >= 5 and len(set(tasks)) == len(tasks), "wpk space lists distinct tasks", failures)
    check(any(t.startswith("conv2d_nchwc:") for t in tasks) and
          any(t.startswith("pool2d:MaxPool") for t in tasks) and
          any(t.startswith("dense:Gemm") for t in tasks), "wpk space: conv, pool and dense tasks", failures)
    sizes = [int(s) for s in re.findall(r"^  space: (\d+) configs$", out, re.M)]
    check(len(sizes) == len(tasks) and all(s >= 1 for s in sizes), "every task has a space size", failures)
    check(re.search(r"^  knobs: (\w+\(\d+\) ?)+$", out, re.M) is not None, "knobs with value counts", failures)
    check(re.search(r"\d+\.\d% of FLOPs", out) is not None, "FLOPs share", failures)
    # the default level's layout pass adds Reorder nodes (a parallel blocked copy, no template)
    check(re.search(r"^reference kernels \(no template\): (none|Reorder \(\d+ nodes?\))$", out, re.M)
          is not None, "no node but the layout's Reorder left to a reference kernel", failures)
    check(run("space", model).stdout == out, "wpk space is deterministic", failures)

    node = re.search(r"template dense, \d+ nodes? \(first '([^']+)'\)", out)
    check(node is not None, "the Gemm's node is named", failures)
    if node:
        low = run("lower", model, "--node", node.group(1))
        text = low.stdout
        check(low.returncode == 0 and "== tensor expressions ==" in text and "== schedule ==" in text
              and "== loops ==" in text and re.search(r"^func kernel\(", text, re.M),
              "wpk lower prints TE, schedule and loops", failures)
        low2 = run("lower", model, "--node", node.group(1), "--config", "tile_n=8,pack=0")
        check(low2.returncode == 0 and re.search(r"config: .*tile_n=8.*pack=0", low2.stdout),
              "wpk lower --config overrides knobs", failures)
        bad = run("lower", model, "--node", node.group(1), "--config", "tile_q=3")
        check(bad.returncode == 1 and "no knob 'tile_q'" in bad.stderr, "an unknown knob is refused",
              failures)
        bad = run("lower", model, "--node", node.group(1), "--config", "tile_n=7")
        check(bad.returncode == 1 and "tile_n" in bad.stderr, "an illegal value is refused", failures)
    bad = run("lower", model, "--node", "no_such_node")
    check(bad.returncode == 1 and "no node named 'no_such_node'" in bad.stderr,
          "an unknown node is refused", failures)

    env = dict(os.environ, WPK_DUMP="lower")
    dump = run("run", model, "--backend", "cpu", "-o", os.path.join(tmp, "out"), env=env)
    funcs = re.findall(r"^== lower (k\d+) ", dump.stderr, re.M)
    check(dump.returncode == 0 and len(set(funcs)) == len(tasks) and "func k0(" in dump.stderr,
          "WPK_DUMP=lower prints the loops of every kernel", failures)
    # no C compiler: the backend still runs the model, every node on its reference kernel
    env = dict(os.environ, CC=os.path.join(tmp, "no-such-cc"), WPK_CACHE_DIR=os.path.join(tmp, "cache"))
    nocc = run("run", model, "--backend", "cpu", "-o", os.path.join(tmp, "nocc"), env=env)
    ref = run("run", model, "--backend", "ref", "-o", os.path.join(tmp, "ref"))
    import numpy as np
    same = nocc.returncode == 0 and ref.returncode == 0 and np.array_equal(
        np.load(os.path.join(tmp, "nocc", "logits.npy")), np.load(os.path.join(tmp, "ref", "logits.npy")))
    check(same and "runs every node on its reference kernel" in nocc.stderr,
          "without a C compiler the model runs on reference kernels, with a warning", failures)
    info = run("info", model)
    check(info.returncode == 0 and re.search(r"reference kernels \(no template\): (none|Reorder)",
                                             info.stdout) is not None,
          "wpk info names the reference-kernel ops", failures)
    return failures


def part_torchvision(args, tmp):
    import test_torchvision  # noqa: E402  (the model list and the export cache)
    names = [m for m in args.models.split(",") if m] if args.models else test_torchvision.MODELS
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if test_torchvision.export_missing(names, out_dir, args.torch_python) is None:
        print(f"SKIP: {args.torch_python} cannot import torch and torchvision to export the models")
        return None
    wpk = wrapper(args.wpk, 2, tmp)
    cases = []
    for name in names:
        for batch in [None] + ([test_torchvision.DYNAMIC_BATCH[name]]
                               if name in test_torchvision.DYNAMIC_BATCH else []):
            cases.append((name + (f" (batch {batch})" if batch else ""), out_dir / f"{name}.onnx",
                          wpk, batch))
    return run_cases(cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["models", "cli", "torchvision"], required=True)
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--models", default="", help="comma-separated subset")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"),
                    help="torchvision: where the exported models are kept")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torch")
    args = ap.parse_args()
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_cpu_backend: no wpk binary at {args.wpk} (use --wpk)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wpk-cpu.") as tmp:
        failures = {"models": part_models, "cli": part_cli, "torchvision": part_torchvision}[args.part](args, tmp)
    if failures is None:
        return SKIP
    print(f"\ncpu backend ({args.part}): {len(failures)} failed"
          f"{': ' + ', '.join(failures) if failures else ''} ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
