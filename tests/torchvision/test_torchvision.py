#!/usr/bin/env python3
"""Checks `wpk run` against ONNX Runtime on torchvision classifiers (random weights, 1x3x224x224):
rel L2 <= 1e-4 per output; prints wpk and ONNX Runtime latency per model. Missing exports are made
with export_models.py under a Python that has torch (default /usr/bin/python3); without one the
test is skipped (exit 77), or fails when WPK_REQUIRE_TORCH=1 (as `make test` sets).
    test_torchvision.py [--models a,b] [--wpk PATH] [--dir DIR] [--backend cpu|ref]
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

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "densenet121", "googlenet",
          "shufflenet_v2_x1_0", "efficientnet_b0", "mnasnet1_0", "regnet_y_400mf", "convnext_tiny"]
DYNAMIC_BATCH = {"resnet18": 2}  # exported with batch axis "N": also run at this batch
SKIP = 77  # ctest's SKIP_RETURN_CODE


def export_missing(names, out_dir, torch_python):
    """Exports the models not yet in out_dir; returns the seconds it took, or None without torch."""
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if not missing:
        return 0.0
    probe = subprocess.run([torch_python, "-c", "import torch, torchvision"], capture_output=True)
    if probe.returncode != 0:
        return None
    start = time.perf_counter()
    subprocess.run([torch_python, str(HERE / "export_models.py"), str(out_dir),
                    "--models", ",".join(missing)], check=True)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"),
                    help="where the exported models are kept (default: %(default)s)")
    ap.add_argument("--threads", type=int, help="threads for both wpk and ONNX Runtime")
    ap.add_argument("--iters", type=int, default=3, help="timed runs per model; latencies are medians")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torch + torchvision")
    ap.add_argument("--backend", help="wpk's backend (cpu, ref; default: wpk's default)")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit("test_torchvision: unknown model(s): " + ", ".join(unknown))
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_torchvision: no wpk binary at {args.wpk} (use --wpk)")

    start = time.perf_counter()
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    export_s = export_missing(names, out_dir, args.torch_python)
    if export_s is None:
        print(f"SKIP: {args.torch_python} cannot import torch and torchvision to export the models")
        # CI installs torch (scripts/setup.sh test): there a missing torch is a failure, not a skip
        return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP
    print(f"export: {export_s:.1f} s; latencies: median of {args.iters} runs "
          f"(wpk's include its first run, ONNX Runtime's follow a warm-up)", flush=True)

    failures, runs = [], 0
    for name in names:
        for batch in [None] + ([DYNAMIC_BATCH[name]] if name in DYNAMIC_BATCH else []):
            label = name + (f" (batch {batch})" if batch else "")
            t = time.perf_counter()
            result = compare_ort.compare(out_dir / f"{name}.onnx", args.wpk, batch=batch,
                                         threads=args.threads, iters=args.iters,
                                         backend=args.backend)
            runs += 1
            errs = ", ".join(f"{e:.3g}" for e in result.errors.values()) or "-"
            print(f"{label:20} wpk {result.wpk_ms:9.1f} ms  onnxruntime {result.ort_ms:7.1f} ms  "
                  f"rel L2 {errs:9} {'ok' if result.ok else 'FAIL'}  (sensitivity {result.sensitivity:.2g}, "
                  f"{time.perf_counter() - t:.1f} s)", flush=True)
            for problem in result.problems:
                print(f"    {problem}")
            if not result.ok:
                failures.append(label)
    print(f"\ntorchvision: {runs - len(failures)} passed, {len(failures)} failed"
          f"{': ' + ', '.join(failures) if failures else ''} ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
