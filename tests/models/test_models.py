#!/usr/bin/env python3
"""Generates the small CNNs of gen_models.py, the old-opset one-node models of legacy_ops.py and
the elementwise-op models of logic_math_ops.py, and checks `wpk run` against ONNX Runtime on each
(rel L2 <= 1e-4 per output), at every optimization level; the dynamic-batch models also run at
batch 3.
    test_models.py [--wpk PATH] [--models a,b] [--keep DIR] [--opt-levels 0,1,2,3]
"""
import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort  # noqa: E402
import gen_models  # noqa: E402
import legacy_ops  # noqa: E402
import logic_math_ops  # noqa: E402


def wpk_at_level(wpk, level, directory):
    """An executable that runs `wpk ARGS... -O LEVEL`: compare_ort runs the binary it is given as
    `wpk run MODEL ...`, and the CLI takes options in any order."""
    path = os.path.join(directory, f"wpk-O{level}")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(os.path.abspath(wpk))} "$@" -O{level}\n')
    os.chmod(path, 0o755)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--models", default=",".join(gen_models.MODELS), help="comma-separated subset of the CNNs")
    ap.add_argument("--no-legacy", action="store_true", help="leave out the old-opset one-node models")
    ap.add_argument("--keep", help="write the models here and keep them (default: a temp dir)")
    ap.add_argument("--opt-levels", default="0,1,2,3", help="comma-separated -O levels to run at")
    args = ap.parse_args()
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_models: no wpk binary at {args.wpk} (use --wpk)")
    names = [m for m in args.models.split(",") if m]
    levels = [int(v) for v in args.opt_levels.split(",") if v]
    if any(v not in range(4) for v in levels):
        sys.exit(f"test_models: --opt-levels takes levels 0 to 3, not {args.opt_levels}")

    start = time.perf_counter()
    failures, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="wpk-models.") as tmp:
        paths = gen_models.write_models(args.keep or tmp, names)
        if not args.no_legacy:
            paths.update(legacy_ops.write_models(os.path.join(args.keep or tmp, "legacy")))
        paths.update(logic_math_ops.write_models(os.path.join(args.keep or tmp, "logic_math")))
        for level in levels:
            wpk = wpk_at_level(args.wpk, level, tmp)
            for name, path in paths.items():
                batches = [None, 3] if name in gen_models.DYNAMIC_BATCH else [None]
                for batch in batches:
                    result = compare_ort.compare(path, wpk, batch=batch)
                    runs += 1
                    label = f"{name} -O{level}" + (f" (batch {batch})" if batch else "")
                    text = compare_ort.describe(result).replace(Path(path).name, label, 1)
                    print(text, flush=True)
                    if not result.ok:
                        failures.append(label)
    print(f"\nmodels: {runs - len(failures)} passed, {len(failures)} failed"
          f"{': ' + ', '.join(failures) if failures else ''} ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
