#!/usr/bin/env python3
"""models_cuda_tuned.py -- the GPU check of the CUDA target, in one command: wpk tuned on this
machine's GPU (`wpk tune --target cuda` with a stated time budget per model, `wpk compile
--target cuda` from those records, `wpk bench PLAN.wpk`: one CUDA Graph per run) against
PyTorch eager and PyTorch CUDA-Graph replay, all fp32 with TF32 off, host to host (input copied
in, output copied out), batch 1, median of --iters runs, the three taking turns in --rounds
rounds (the median of the rounds' medians is reported); then the ResNet-18 convs, each a
one-node model tuned by `wpk tune --target cuda` (--conv-trials per conv) and timed by `wpk
bench`'s per-step CUDA events, against the best cuDNN algorithm (PyTorch with
cudnn.benchmark, which tries every forward algorithm, timed by CUDA events).

    python3 bench/models_cuda_tuned.py [--build build] [--models resnet18,...] [--tune-time 90s]
                                       [--conv-trials 48] [--iters 200] [--rounds 3]
                                       [--model-dir DIR] [--no-convs] [--out bench/results/...]

Models are exported from torchvision (random weights) into --model-dir when missing. Prints the
tables and writes them, with the command and provenance (commit, GPU, driver, NVRTC, PyTorch,
cuDNN, load), to --out. Without a usable GPU it prints "SKIP: <reason>" and exits 77.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = "resnet18,resnet50,mobilenet_v2,squeezenet1_1,efficientnet_b0"
# ResNet-18's distinct convs at batch 1: (c, h, w, k, r, stride, pad)
RESNET18_CONVS = [
    (3, 224, 224, 64, 7, 2, 3), (64, 56, 56, 64, 3, 1, 1), (64, 56, 56, 128, 3, 2, 1),
    (64, 56, 56, 128, 1, 2, 0), (128, 28, 28, 128, 3, 1, 1), (128, 28, 28, 256, 3, 2, 1),
    (128, 28, 28, 256, 1, 2, 0), (256, 14, 14, 256, 3, 1, 1), (256, 14, 14, 512, 3, 2, 1),
    (256, 14, 14, 512, 1, 2, 0), (512, 7, 7, 512, 3, 1, 1),
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def wpk(build, *args, check=True):
    p = subprocess.run([os.path.join(build, "wpk"), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"wpk {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def gpu_reason(build):
    """None when wpk can run on a GPU here, else why not (the driver probe's own words)."""
    if not os.path.exists(os.path.join(build, "wpk")):
        return f"no {build}/wpk (build first)"
    with tempfile.TemporaryDirectory() as d:
        p = wpk(build, "run", os.path.join(ROOT, "tests/fuzz/corpus/conv_relu.onnx"),
                "--target", "cuda", "-o", d, check=False)
    if p.returncode != 0:
        return p.stderr.strip().replace("wpk: error: ", "") or f"wpk exit {p.returncode}"
    try:
        import torch
    except ImportError:
        return "no torch (the peer)"
    if not torch.cuda.is_available():
        return "torch has no CUDA device (the peer)"
    return None


def export(name, path):
    import torch
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, input_names=["input"],
                      output_names=["output"], opset_version=17)


def conv_model(path, c, h, w, k, r, stride, pad):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    wt = numpy_helper.from_array(rng.standard_normal((k, c, r, r)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(k).astype(np.float32), "b")
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], "conv", kernel_shape=[r, r],
                            strides=[stride, stride], pads=[pad] * 4)
    g = helper.make_graph([node], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [wt, b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def tune_compile(build, model, plan, db, budget):
    wpk(build, "tune", model, "--target", "cuda", "--db", db, *budget)
    wpk(build, "compile", model, "--target", "cuda", "--db", db, "-o", plan)


def bench_plan(build, plan, iters):
    p = wpk(build, "bench", plan, "--iters", str(iters), "--json")
    return json.loads(p.stdout)


def torch_runners(name):
    """(eager, graph): each a function running one inference host to host, fp32, TF32 off."""
    import torch
    import torchvision
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, name)(weights=None).eval().cuda()
    x = torch.randn(1, 3, 224, 224).pin_memory()
    static_x = torch.zeros(1, 3, 224, 224, device="cuda")

    def eager():
        with torch.inference_mode():
            return model(x.cuda(non_blocking=True)).cpu()

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.inference_mode():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.inference_mode():
        static_y = model(static_x)

    def graph():
        static_x.copy_(x, non_blocking=True)
        g.replay()
        return static_y.cpu()
    return eager, graph


def time_host(fn, iters, warmup=10):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(iters):
        a = time.perf_counter()
        fn()
        t.append((time.perf_counter() - a) * 1e3)
    return statistics.median(t)


def cudnn_best_ms(c, h, w, k, r, stride, pad, iters=200):
    """The best cuDNN forward algorithm's time (cudnn.benchmark picks it), by CUDA events."""
    import torch
    import torch.nn.functional as F
    x = torch.randn(1, c, h, w, device="cuda")
    wt = torch.randn(k, c, r, r, device="cuda")
    b = torch.randn(k, device="cuda")
    for _ in range(10):
        F.conv2d(x, wt, b, stride, pad)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(iters):
        start.record()
        F.conv2d(x, wt, b, stride, pad)
        end.record()
        end.synchronize()
        t.append(start.elapsed_time(end))
    return statistics.median(t)


def provenance(build):
    import torch
    info = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg": open("/proc/loadavg").read().split()[:3]}
    info["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
    q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                        "--format=csv,noheader"], capture_output=True, text=True)
    info["gpu"] = q.stdout.strip()
    info["torch"] = torch.__version__
    info["cudnn"] = str(torch.backends.cudnn.version())
    info["wpk"] = wpk(build, "version").stdout.strip()
    return info


def geomean(v):
    v = [x for x in v if x > 0]
    return statistics.geometric_mean(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--tune-time", default="90s", help="wpk tune --time per model")
    ap.add_argument("--conv-trials", type=int, default=48)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "wpk-cuda-models"))
    ap.add_argument("--no-convs", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "models_cuda_tuned.md"))
    a = ap.parse_args()
    why = gpu_reason(a.build)
    if why:
        print(f"SKIP: {why}")
        return 77
    os.makedirs(a.model_dir, exist_ok=True)
    db = os.path.join(a.model_dir, "records.db")
    lines = [f"command: `python3 bench/models_cuda_tuned.py {shlex.join(sys.argv[1:])}`", ""]
    prov = provenance(a.build)
    lines += [f"- {k}: {v}" for k, v in prov.items()] + [""]
    lines += [f"wpk tuned with `wpk tune --target cuda --time {a.tune_time}` per model; fp32, "
              f"TF32 off everywhere; batch 1, host to host; median of {a.iters} runs per round, "
              f"median of {a.rounds} rounds taken in turns", "",
              "| model | wpk tuned ms | PyTorch eager ms | PyTorch CUDA Graph ms | "
              "graph / wpk | eager / wpk |", "|---|---:|---:|---:|---:|---:|"]
    ratios = []
    for name in a.models.split(","):
        path = os.path.join(a.model_dir, f"{name}.onnx")
        if not os.path.exists(path):
            log(f"exporting {name} to {path}")
            export(name, path)
        plan = os.path.join(a.model_dir, f"{name}.cuda.wpk")
        log(f"{name}: tuning ({a.tune_time}) and compiling")
        tune_compile(a.build, path, plan, db, ["--time", a.tune_time])
        eager, graph = torch_runners(name)
        w, e, g = [], [], []
        for _ in range(a.rounds):
            w.append(bench_plan(a.build, plan, a.iters)["latency_ms"]["median"])
            e.append(time_host(eager, a.iters))
            g.append(time_host(graph, a.iters))
        wm, em, gm = (statistics.median(v) for v in (w, e, g))
        ratios.append(gm / wm)
        lines.append(f"| {name} | {wm:.3f} | {em:.3f} | {gm:.3f} | {gm / wm:.2f}x | "
                     f"{em / wm:.2f}x |")
        print(lines[-1], flush=True)
    lines += [f"| geomean | | | | {geomean(ratios):.2f}x | |", ""]
    if not a.no_convs:
        lines += [f"ResNet-18 convs (batch 1, bias): `wpk tune --target cuda --trials "
                  f"{a.conv_trials}` each, the compiled plan's conv step by CUDA events "
                  "(`wpk bench` profile) against the best cuDNN forward algorithm "
                  "(cudnn.benchmark), fp32", "",
                  "| conv (c,h,w,k,r,stride,pad) | wpk ms | cuDNN best ms | cuDNN / wpk |",
                  "|---|---:|---:|---:|"]
        conv_ratios = []
        for shape in RESNET18_CONVS:
            tag = "_".join(map(str, shape))
            path = os.path.join(a.model_dir, f"conv_{tag}.onnx")
            conv_model(path, *shape)
            plan = os.path.join(a.model_dir, f"conv_{tag}.cuda.wpk")
            tune_compile(a.build, path, plan, db, ["--trials", str(a.conv_trials)])
            nodes = bench_plan(a.build, plan, a.iters)["nodes"]
            ms = sum(n["ms"] for n in nodes if n["provider"] == "cuda_kernel")
            ref = cudnn_best_ms(*shape)
            conv_ratios.append(ref / ms)
            lines.append(f"| {shape} | {ms:.4f} | {ref:.4f} | {ref / ms:.2f}x |")
            print(lines[-1], flush=True)
        lines += [f"| geomean | | | {geomean(conv_ratios):.2f}x (min "
                  f"{min(conv_ratios):.2f}x) |", ""]
    text = "# CUDA target, tuned: wpk vs PyTorch and cuDNN\n\n" + "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
