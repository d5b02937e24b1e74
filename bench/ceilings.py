#!/usr/bin/env python3
"""How far a speed goal is from what the machine can do. Per model: its multiply-adds (Conv,
MatMul, Gemm and their integer forms, counted from ONNX shape inference at batch 1), the
machine's measured peak for the instruction they run on (bench/fma_peak.c, all threads: FP32
FMA for float models, the int8 VNNI dot product for quantized ones), the floor that gives
(every multiply-add at that peak and nothing else costing time), and wpk's and the peers'
latency measured in the same run (ONNX Runtime; OpenVINO too for float models where it is
installed), each as a fraction of the peak it reaches. A goal of r x the faster peer needs
that peer's time / r, which needs multiply-adds at the fraction of the peak in the last
column: past 100% no kernel can meet it.
    bench/ceilings.py --model NAME=PATH[@GOAL] ... [--threads 2] [--iters 20] [--rounds 3]
Writes bench/results/ceilings.md (or --out).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from transformers import bench_openvino, bench_ort, bench_wpk, sh  # noqa: E402

INT_OPS = {"QLinearConv", "ConvInteger", "QLinearMatMul", "MatMulInteger"}


def static_batch(model):
    """The model with every symbolic input dim set to 1."""
    for inp in model.graph.input:
        for d in inp.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    return model


def count_macs(path):
    """(multiply-adds, integer?) of the model's Conv/MatMul/Gemm family at batch 1."""
    # ONNX Runtime's symbolic inference follows the Shape -> Reshape chains of exports
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    model = SymbolicShapeInference.infer_shapes(static_batch(onnx.load(str(path))),
                                                auto_merge=True)
    shapes = {}
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in v.type.tensor_type.shape.dim]
        shapes[v.name] = dims
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)

    def known(name):
        s = shapes.get(name)
        if s is None or any(not isinstance(d, int) or d <= 0 for d in s):
            raise SystemExit(f"{path}: the shape of '{name}' is not known at batch 1")
        return s

    macs, integer = 0, False
    for n in model.graph.node:
        if n.op_type in ("Conv", "ConvInteger", "QLinearConv"):
            w = known(n.input[3 if n.op_type == "QLinearConv" else 1])
            y = known(n.output[0])
            macs += int(np.prod(y)) * int(np.prod(w[1:]))
        elif n.op_type in ("MatMul", "MatMulInteger", "QLinearMatMul"):
            a = known(n.input[0])
            y = known(n.output[0])
            macs += int(np.prod(y)) * a[-1]
        elif n.op_type == "Gemm":
            a = known(n.input[0])
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            y = known(n.output[0])
            macs += int(np.prod(y)) * (a[0] if trans_a else a[1])
        else:
            continue
        integer = integer or n.op_type in INT_OPS
    if not integer:  # QDQ graphs: float Conv nodes between QuantizeLinear/DequantizeLinear
        integer = any(n.op_type == "DequantizeLinear" for n in model.graph.node)
    return macs, integer


def peaks(threads):
    """{isa: best all-thread GOP/s} from bench/fma_peak.c, built here."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "fma_peak")
        subprocess.run(["cc", "-O2", "-fopenmp", str(REPO / "bench/fma_peak.c"), "-o", exe],
                       check=True)
        out = subprocess.run([exe, "--threads", str(threads), "--reps", "7", "--json"],
                             check=True, capture_output=True, text=True).stdout
    best = {}
    for r in json.loads(out)["results"]:
        if r["threads"] == threads:
            best[r["isa"]] = max(best.get(r["isa"], 0.0), r["wall_best"])
    return best


def model_input(path):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    return inp.name, np.random.default_rng(0).uniform(0, 1, shape).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", required=True,
                    help="NAME=PATH[@GOAL]: GOAL the speed-up over the faster peer asked")
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--db", default="", help="wpk's tuning records ('': every node untuned)")
    ap.add_argument("--out", default=str(REPO / "bench/results/ceilings.md"))
    args = ap.parse_args()
    try:
        import openvino  # noqa: F401
        have_ov = True
    except ImportError:
        have_ov = False

    peak = peaks(args.threads)
    rows = []
    for spec in args.model:
        name, rest = spec.split("=", 1)
        path, _, goal = rest.partition("@")
        macs, integer = count_macs(path)
        isa = "vnni512" if integer else "avx512"
        if isa not in peak:
            isa = "avx2"
        gmacs = peak[isa] / 2  # GOP/s counts a multiply-add as 2
        floor_ms = macs / (gmacs * 1e9) * 1e3
        iname, x = model_input(path)
        times = {"wpk": [], "ONNX Runtime": []}
        if have_ov and not integer:
            times["OpenVINO"] = []
        for _ in range(args.rounds):
            times["wpk"] += bench_wpk(args.wpk, Path(path), args.threads, args.warmup,
                                      args.iters, args.db)[0]
            times["ONNX Runtime"] += bench_ort(path, iname, x, args.threads, args.warmup,
                                               args.iters)
            if "OpenVINO" in times:
                times["OpenVINO"] += bench_openvino(path, iname, x, args.threads, args.warmup,
                                                    args.iters)
        med = {k: statistics.median(v) for k, v in times.items()}
        peer = min((k for k in med if k != "wpk"), key=lambda k: med[k])
        rows.append((name, macs, isa, gmacs, floor_ms, med, peer, float(goal) if goal else None))
        print(f"{name}: {macs / 1e9:.3f} GMAC on {isa}, floor {floor_ms:.2f} ms, "
              + ", ".join(f"{k} {v:.2f} ms" for k, v in med.items()), flush=True)

    cmd = "python3 bench/ceilings.py " + " ".join(sys.argv[1:])
    records = "with " + args.db if args.db else "untuned"
    lines = ["# Speed goals against the machine's multiply-add peak", "",
             f"`{cmd}`", "",
             f"batch 1, {args.threads} threads; wpk {records}; "
             f"{args.rounds} rounds x {args.iters} runs, the runtimes taking turns, medians. "
             "Peak: bench/fma_peak.c's best all-thread sample (a multiply-add = 2 ops). Floor = "
             "multiply-adds / peak. % of peak = floor / latency.", "",
             "| model | GMAC | instruction | peak GMAC/s | floor ms | wpk ms (% peak) | "
             "peers ms (% peak) | goal | goal ms | % of peak the goal needs |",
             "|---|---:|---|---:|---:|---:|---|---:|---:|---:|"]
    for name, macs, isa, gmacs, floor_ms, med, peer, goal in rows:
        peers = ", ".join(f"{k} {v:.2f} ({floor_ms / v:.0%})" for k, v in med.items()
                          if k != "wpk")
        goal_ms = med[peer] / goal if goal else None
        lines.append(f"| {name} | {macs / 1e9:.3f} | {isa} | {gmacs:.0f} | {floor_ms:.2f} | "
                     f"{med['wpk']:.2f} ({floor_ms / med['wpk']:.0%}) | {peers} | "
                     + (f"{goal:g}x {peer} | {goal_ms:.2f} | {floor_ms / goal_ms:.0%} |"
                        if goal else "- | - | - |"))
    load = os.getloadavg()
    lines += ["", f"Peaks (GOP/s, {args.threads} threads): "
              + ", ".join(f"{k} {v:.0f}" for k, v in peak.items()),
              "", f"Provenance: commit {sh('git', 'rev-parse', '--short', 'HEAD')}, "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
              f"average after {load[0]:.1f}, python {platform.python_version()}."]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
