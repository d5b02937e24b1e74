#!/usr/bin/env python3
"""Reduced-precision torchvision models on wpk against ONNX Runtime (random weights, exported by
PyTorch under /usr/bin/python3, so the test is skipped, exit 77, where torch is absent):

- float16: the model converted by onnxconverter_common's float16 conversion, with float32 and
  with float16 inputs/outputs (keep_io_types both ways). wpk computes in float32: its output must
  be within 1e-3 (relative L2) of ONNX Runtime's run of the same float16 model, and its error
  against the float32 model no worse than ONNX Runtime's plus 1e-3.
- int8: the model quantized by ONNX Runtime's quantize_static (QDQ, per-channel int8 weights,
  uint8 activations, calibrated on 4 random images). wpk's error against the float32 model must
  be no worse than ONNX Runtime's int8 error times 1.10 plus 0.01 (the margin: rounding where
  the float ops between Q/DQ pairs, pooling and the classifier, run in another order than
  ORT's), and wpk's int8 provider must
  give its reference kernels' output exactly.
    test_quant_models.py [--models mobilenet_v2,resnet50] [--dir DIR] [--wpk build/wpk]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from quantize_models import quantize  # noqa: E402

SKIP = 77


def rel(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def ort_run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]


def wpk_run(wpk, path, x, work, extra=()):
    xp, out = work / "x.npy", work / "out"
    np.save(xp, x)
    r = subprocess.run([wpk, "run", str(path), "-i", f"input={xp}", "-o", str(out), *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"wpk run {path.name} failed: {r.stderr[-1500:]}")
    return np.load(out / "logits.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-quant-models"))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    args = ap.parse_args()
    try:
        from onnxconverter_common import float16
    except ImportError:
        print("skipped: onnxconverter_common is not installed (scripts/setup.sh test)")
        return SKIP
    if subprocess.run([args.torch_python, "-c", "import torch, torchvision"],
                      capture_output=True).returncode != 0:
        print(f"skipped: {args.torch_python} has no torch/torchvision to export the models")
        return SKIP
    names = [m for m in args.models.split(",") if m]
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.torch_python, str(REPO / "tests/torchvision/export_models.py"),
                    str(out_dir), "--models", ",".join(names)], check=True)
    failures = []
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory(prefix="wpk-quant-models.") as tmp:
        work = Path(tmp)
        for name in names:
            fp32 = out_dir / f"{name}.onnx"
            x = (rng.random((1, 3, 224, 224), dtype=np.float32) * 2 - 1)
            ref = ort_run(fp32, x)
            model = onnx.load(str(fp32))
            for keep in (True, False):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m16 = float16.convert_float_to_float16(model, keep_io_types=keep)
                path = work / f"{name}_fp16_{'io32' if keep else 'io16'}.onnx"
                onnx.save(m16, str(path))
                xin = x if keep else x.astype(np.float16)
                o16, w16 = ort_run(path, xin), wpk_run(args.wpk, path, xin, work)
                e_ort, e_wpk, d = rel(o16, ref), rel(w16, ref), rel(w16, o16)
                print(f"{path.name}: wpk {w16.dtype} err vs fp32 {e_wpk:.5f}, ORT {e_ort:.5f}, "
                      f"wpk vs ORT fp16 {d:.2e}", flush=True)
                if w16.dtype != o16.dtype or d > 1e-3 or e_wpk > e_ort + 1e-3:
                    failures.append(f"{path.name}: dtype {w16.dtype} (ORT {o16.dtype}), wpk vs "
                                    f"ORT {d:.2e}, errors {e_wpk:.5f} vs {e_ort:.5f}")
            int8 = Path(quantize(str(fp32), str(out_dir / f"{name}_int8.onnx")))
            o8 = ort_run(int8, x)
            w8 = wpk_run(args.wpk, int8, x, work)
            r8 = wpk_run(args.wpk, int8, x, work, ["--provider", "ref"])
            e_ort, e_wpk = rel(o8, ref), rel(w8, ref)
            print(f"{int8.name}: wpk err vs fp32 {e_wpk:.4f}, ORT int8 {e_ort:.4f}, wpk vs ORT "
                  f"int8 {rel(w8, o8):.4f}, int8 provider == reference: "
                  f"{np.array_equal(w8, r8)}", flush=True)
            if e_wpk > e_ort * 1.10 + 0.01:
                failures.append(f"{int8.name}: error {e_wpk:.4f} against ORT int8's {e_ort:.4f}")
            if not np.array_equal(w8, r8):
                failures.append(f"{int8.name}: the int8 provider differs from the reference "
                                f"kernels by {np.abs(w8 - r8).max()}")
    for f in failures:
        print("FAIL", f)
    print(f"quant models: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
