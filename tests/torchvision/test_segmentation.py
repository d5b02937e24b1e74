#!/usr/bin/env python3
"""Checks `wpk run` against ONNX Runtime on torchvision's segmentation models (lraspp,
deeplabv3, fcn; random weights, 3x224x224) at batch 1 and 4: rel L2 <= 1e-4 on the class map.
Missing exports are made by export_segmentation.py under a Python that has torch (default
/usr/bin/python3); without one the test is skipped (exit 77), or fails when
WPK_REQUIRE_TORCH=1.
    test_segmentation.py [--models a,b] [--wpk PATH] [--dir DIR] [--threads N]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))
import compare_ort  # noqa: E402

MODELS = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"]
BATCHES = [1, 4]
SKIP = 77


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-segmentation"),
                    help="where the exported models are kept (default: %(default)s)")
    ap.add_argument("--threads", type=int, help="threads for both wpk and ONNX Runtime")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torchvision")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    if any(m not in MODELS for m in names):
        sys.exit("test_segmentation: unknown model(s) in " + args.models)
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_segmentation: no wpk binary at {args.wpk} (use --wpk)")
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if any(not (out_dir / f"{n}.onnx").exists() for n in names):
        probe = subprocess.run([args.torch_python, "-c", "import torch, torchvision"],
                               capture_output=True)
        if probe.returncode != 0:
            print(f"SKIP: {args.torch_python} cannot import torch and torchvision to export the "
                  "models")
            return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP
        subprocess.run([args.torch_python, str(HERE / "export_segmentation.py"), str(out_dir),
                        "--models", ",".join(names)], check=True, cwd=HERE)
    failures, runs = [], 0
    for name in names:
        for batch in BATCHES:
            label = f"{name} (batch {batch})"
            result = compare_ort.compare(out_dir / f"{name}.onnx", args.wpk, batch=batch,
                                         threads=args.threads)
            runs += 1
            errs = ", ".join(f"{e:.3g}" for e in result.errors.values()) or "-"
            print(f"{label:40} wpk {result.wpk_ms:9.1f} ms  onnxruntime {result.ort_ms:7.1f} ms  "
                  f"rel L2 {errs:9} {'ok' if result.ok else 'FAIL'}  "
                  f"(sensitivity {result.sensitivity:.2g})", flush=True)
            for problem in result.problems:
                print(f"    {problem}")
            if not result.ok:
                failures.append(label)
    print(f"\nsegmentation: {runs - len(failures)} passed, {len(failures)} failed"
          f"{': ' + ', '.join(failures) if failures else ''} ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
