#!/usr/bin/env python3
"""models_cuda.py -- resnet18 / resnet50 / mobilenet_v2 end to end at batch 1 on a GPU: wpk's
CUDA backend (bench_models_cuda: -O2 graph, every node a generated CUDA kernel, one CUDA Graph)
against ONNX Runtime's CUDA execution provider and PyTorch (eager, CUDA), each timed host to host
(input copied in, output copied out, as a caller sees it), median and min of --iters runs after
a warm-up, in the same run, on the same input. wpk's output is checked against ONNX Runtime's
(relative L2); PyTorch runs the same architecture with its own random weights (timing only).

    python3 bench/models_cuda.py [--build build] [--models resnet18,resnet50,mobilenet_v2]
                                 [--model-dir DIR] [--iters 100] [--json OUT.json]

Models are DIR/<name>.onnx; missing ones are exported from torchvision (random weights) when
torch is installed. Without a GPU it prints "SKIP: no CUDA device: <reason>" and exits 77.
Every figure comes with its provenance (commit, GPU, driver, library versions) and raw samples.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def export(name, path):
    import torch
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"],
                      opset_version=17, dynamo=False)


def stats(samples_ms):
    return {"median_ms": statistics.median(samples_ms), "min_ms": min(samples_ms),
            "samples_ms": samples_ms}


def run_wpk(build, model, x_path, y_path, iters):
    exe = os.path.join(build, "bench_models_cuda")
    p = subprocess.run([exe, model, "--iters", str(iters), "--input", x_path, "--output", y_path],
                       capture_output=True, text=True)
    if p.returncode == 77:
        return None, p.stdout.strip()
    if p.returncode != 0:
        raise RuntimeError(f"bench_models_cuda {model}: {p.stderr.strip()}")
    return json.loads(p.stdout), None


def run_ort(model, x, iters, warmup=10):
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return None, "onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)"
    s = ort.InferenceSession(model, providers=["CUDAExecutionProvider"])
    name = s.get_inputs()[0].name
    for _ in range(warmup):
        y = s.run(None, {name: x})[0]
    t = []
    for _ in range(iters):
        a = time.perf_counter()
        y = s.run(None, {name: x})[0]
        t.append((time.perf_counter() - a) * 1e3)
    return {**stats(t), "version": ort.__version__}, y


def run_torch(name, x, iters, warmup=10):
    try:
        import torch
        import torchvision
    except ImportError:
        return None, "no torch"
    if not torch.cuda.is_available():
        return None, "torch without CUDA"
    model = getattr(torchvision.models, name)(weights=None).eval().cuda()
    xt = torch.from_numpy(x)
    t = []
    with torch.inference_mode():
        for i in range(warmup + iters):
            a = time.perf_counter()
            y = model(xt.cuda()).cpu()
            torch.cuda.synchronize()
            if i >= warmup:
                t.append((time.perf_counter() - a) * 1e3)
    return {**stats(t), "version": torch.__version__}, None


def provenance():
    info = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip()
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                            "--format=csv,noheader"], capture_output=True, text=True)
        info["gpu"] = q.stdout.strip()
    except OSError as e:
        info["gpu"] = f"unknown ({e})"
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "wpk-cuda-models"))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.makedirs(a.model_dir, exist_ok=True)
    rng = np.random.default_rng(2024)
    x = rng.uniform(-1, 1, size=(1, 3, 224, 224)).astype(np.float32)
    x_path = os.path.join(a.model_dir, "input.npy")
    np.save(x_path, x)
    out = {"provenance": provenance(), "iters": a.iters, "models": {}}
    rows = []
    for name in a.models.split(","):
        path = os.path.join(a.model_dir, f"{name}.onnx")
        if not os.path.exists(path):
            log(f"exporting {name} from torchvision (random weights) to {path}")
            export(name, path)
        y_path = os.path.join(a.model_dir, f"{name}.wpk.npy")
        w, skip = run_wpk(a.build, path, x_path, y_path, a.iters)
        if skip:
            print(skip)
            return 77
        o, y_ort = run_ort(path, x, a.iters)
        t, why = run_torch(name, x, a.iters)
        r = {"wpk": w, "onnxruntime_cuda": o if o else y_ort, "pytorch_cuda": t if t else why}
        if o:
            y = np.load(y_path)
            r["rel_l2_vs_ort"] = float(np.linalg.norm(y - y_ort) / np.linalg.norm(y_ort))
            r["ort_over_wpk"] = o["median_ms"] / w["median_ms"]
        if t:
            r["torch_over_wpk"] = t["median_ms"] / w["median_ms"]
        out["models"][name] = r
        rows.append((name, w["median_ms"], o["median_ms"] if o else float("nan"),
                     t["median_ms"] if t else float("nan"), r.get("rel_l2_vs_ort", float("nan"))))
    print(f"{'model':<14} {'wpk ms':>9} {'ORT ms':>9} {'torch ms':>9} {'ORT/wpk':>8} "
          f"{'torch/wpk':>9} {'rel L2':>9}")
    for n, w, o, t, e in rows:
        print(f"{n:<14} {w:9.3f} {o:9.3f} {t:9.3f} {o / w:8.2f} {t / w:9.2f} {e:9.2e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
