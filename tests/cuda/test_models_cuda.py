#!/usr/bin/env python3
"""test_models_cuda.py -- torchvision classifiers (random weights, 1x3x224x224) on wpk's CUDA
backend against ONNX Runtime on the CPU (the reference every backend is checked against):
relative L2 <= 1e-4 per model, as the cpu backend's torchvision test. Each model runs through
bench_models_cuda (-O2 graph, every node a generated CUDA kernel, one CUDA Graph) on the same
seeded input ONNX Runtime gets. Models whose nodes have no CUDA kernel are reported as such
(the list the compile step prints) and count as failures unless --allow-missing names them.
Without a GPU it prints "SKIP: no CUDA device: <reason>" and exits 77.

    test_models_cuda.py --bench build/bench_models_cuda [--dir DIR] [--models a,b]
                        [--allow-missing densenet121,convnext_tiny]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "googlenet", "mnasnet1_0",
          "shufflenet_v2_x1_0", "efficientnet_b0", "regnet_y_400mf", "squeezenet1_1",
          "densenet121", "convnext_tiny"]
# nodes without a CUDA kernel today: Concat of more than 8 inputs and Pad (densenet121),
# batched (3-D) MatMul and LayerNormalization (convnext_tiny)
KNOWN_MISSING = ["densenet121", "convnext_tiny"]
SKIP = 77


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="the bench_models_cuda binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--allow-missing", default=",".join(KNOWN_MISSING))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    a = ap.parse_args()
    import onnxruntime as ort
    out_dir = Path(a.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = a.models.split(",")
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if missing:
        export = HERE.parent / "torchvision" / "export_models.py"
        r = subprocess.run([a.torch_python, str(export), str(out_dir), "--models",
                            ",".join(missing)])
        if r.returncode != 0:
            print("SKIP: the models could not be exported (no torch?)")
            return SKIP
    x = np.random.default_rng(7).uniform(-1, 1, size=(1, 3, 224, 224)).astype(np.float32)
    x_path = out_dir / "cuda_input.npy"
    np.save(x_path, x)
    allowed = set(a.allow_missing.split(",")) if a.allow_missing else set()
    failures = 0
    for n in names:
        model = out_dir / f"{n}.onnx"
        y_path = out_dir / f"{n}.cuda.npy"
        r = subprocess.run([a.bench, str(model), "--iters", "3", "--warmup", "1", "--input",
                            str(x_path), "--output", str(y_path)], capture_output=True, text=True)
        if r.returncode == SKIP:
            print(r.stdout.strip())
            return SKIP
        if r.returncode != 0:
            why = r.stderr.strip()
            known = n in allowed and "no CUDA kernel" in why
            print(f"{n:<20} {'KNOWN' if known else 'FAIL'}: {why[:300]}")
            failures += not known
            continue
        s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        want = s.run(None, {s.get_inputs()[0].name: x})[0]
        got = np.load(y_path)
        err = float(np.linalg.norm(got.reshape(-1) - want.reshape(-1)) /
                    max(np.linalg.norm(want), 1e-30))
        ok = got.shape == want.shape and err <= 1e-4
        print(f"{n:<20} rel L2 {err:.2e} {'ok' if ok else 'FAIL'}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
