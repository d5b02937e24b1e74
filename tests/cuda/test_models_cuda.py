#!/usr/bin/env python3
"""test_models_cuda.py -- torchvision classifiers (random weights, 1x3x224x224) on wpk's CUDA
backend against ONNX Runtime on the CPU (the reference every backend is checked against):
relative L2 <= 1e-4 per model, as the cpu backend's torchvision test. Each model runs through
bench_models_cuda (-O2 graph, every node a generated CUDA kernel, one CUDA Graph) on the same
seeded input ONNX Runtime gets. Models whose nodes have no CUDA kernel are reported as such
(the list the compile step prints) and count as failures unless --allow-missing names them.
Without a GPU it prints "SKIP: no CUDA device: <reason>" and exits 77.

--check needs no GPU: for every torchvision model and every transformer of the test suite
(--transformers-dir) it lists the specialized graph's ops with how the CUDA program runs each
(bench_models_cuda --check: a template's kernel, device copies, a view) and fails naming every
node that has no CUDA kernel.

    test_models_cuda.py --bench build/bench_models_cuda [--dir DIR] [--models a,b]
                        [--allow-missing densenet121,convnext_tiny]
                        [--check --transformers-dir DIR]
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
TRANSFORMERS = ["transformer_encoder", "bert_small", "bert_base4", "vit_b_16", "swin_t"]
# models allowed to have nodes without a CUDA kernel (none today)
KNOWN_MISSING = []
SKIP = 77


def export(script, out_dir, names, torch_python):
    """Exports the models of names not yet in out_dir with script; False when that failed."""
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if not missing:
        return True
    r = subprocess.run([torch_python, str(script), str(out_dir), "--models", ",".join(missing)])
    return r.returncode == 0


def check(a):
    """Every model's ops and how the CUDA program runs them; 1 when a node has no kernel."""
    sets = [(Path(a.dir), a.models.split(","), HERE.parent / "torchvision" / "export_models.py"),
            (Path(a.transformers_dir), a.transformers.split(","),
             HERE.parent / "transformers" / "export_models.py")]
    failures = 0
    for out_dir, names, script in sets:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not export(script, out_dir, names, a.torch_python):
            print(f"SKIP: the models could not be exported with {a.torch_python} (no torch?)")
            return SKIP
        for n in names:
            r = subprocess.run([a.bench, str(out_dir / f"{n}.onnx"), "--check"],
                               capture_output=True, text=True)
            rows = [line.split() for line in r.stdout.splitlines()]
            ops = sorted(set(f[0] for f in rows if len(f) >= 3 and f[-1].isdigit() and
                             f[1] != "view"))
            print(f"{n:<20} {'ok' if r.returncode == 0 else 'FAIL'}: {' '.join(ops)}")
            if r.returncode != 0:
                print(r.stderr.strip()[:2000])
                failures += 1
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="the bench_models_cuda binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--allow-missing", default=",".join(KNOWN_MISSING))
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--check", action="store_true",
                    help="list the ops and how each runs; no GPU needed")
    ap.add_argument("--transformers-dir",
                    default=os.path.join(tempfile.gettempdir(), "wpk-transformers"))
    ap.add_argument("--transformers", default=",".join(TRANSFORMERS))
    a = ap.parse_args()
    if a.check:
        return check(a)
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
