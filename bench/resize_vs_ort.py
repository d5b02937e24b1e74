#!/usr/bin/env python3
"""Resize as segmentation and detection models use it, one Resize per model, on wpk's reference
kernel (what a plan runs for Resize) against ONNX Runtime, in one run: median latencies and
their ratio, with provenance, as a markdown table (printed and written to --out).
    resize_vs_ort.py [--threads 2] [--iters 50] [--rounds 3] [--out bench/results/resize_vs_ort.md]
                     [--wpk build/wpk]
The cases: the bilinear (half_pixel, align_corners False) upsampling at the end of torchvision's
lraspp (28 -> 224) and deeplabv3 / fcn (65 -> 520, 21 classes), a 2x nearest upsampling of an
FPN level, a 2x bilinear align_corners one (U-Net style) and a cubic one. wpk and ONNX Runtime
take turns for --rounds rounds (a shared machine's speed drifts); wpk's outputs must match ONNX
Runtime's (rel L2 <= 1e-4). Ratio = ONNX Runtime / wpk of the medians (> 1: wpk is faster).
No tuning: Resize has no tunable template, so this is the kernel every plan runs.
"""
import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-4

# name: (input shape, sizes or None, scales or None, attributes)
CASES = {
    "lraspp head 21x28x28 -> 224 bilinear": ([1, 21, 28, 28], [1, 21, 224, 224], None,
                                            {"mode": "linear"}),
    "deeplabv3/fcn head 21x65x65 -> 520 bilinear": ([1, 21, 65, 65], [1, 21, 520, 520], None,
                                                   {"mode": "linear"}),
    "FPN 256x50x50 nearest 2x": ([1, 256, 50, 50], None, [1, 1, 2, 2],
                                 {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                  "nearest_mode": "floor"}),
    "U-Net 64x64x64 bilinear align_corners 2x": (
        [1, 64, 64, 64], None, [1, 1, 2, 2],
        {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    "32x56x56 cubic 2x": ([1, 32, 56, 56], None, [1, 1, 2, 2], {"mode": "cubic"}),
}


def build(path, shape, sizes, scales, attrs):
    inits = []
    inputs = ["x", "", "scales" if scales else ""]
    if scales:
        inits.append(numpy_helper.from_array(np.asarray(scales, np.float32), "scales"))
    if sizes:
        inputs.append("sizes")
        inits.append(numpy_helper.from_array(np.asarray(sizes, np.int64), "sizes"))
    node = helper.make_node("Resize", inputs, ["y"], name="resize", **attrs)
    graph = helper.make_graph([node], "resize",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))


def wpk_bench(wpk, model, threads, iters, save):
    out = subprocess.run([wpk, "bench", str(model), "--threads", str(threads),
                          "--iters", str(iters), "--json", "--save", str(save)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def ort_times(session, feeds, iters):
    session.run(None, feeds)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench/results/resize_vs_ort.md"))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    args = ap.parse_args()
    rows, failed, provenance = [], False, None
    with tempfile.TemporaryDirectory(prefix="wpk-resize-bench.") as tmp:
        for name, (shape, sizes, scales, attrs) in CASES.items():
            model = Path(tmp) / "resize.onnx"
            build(model, shape, sizes, scales, attrs)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = args.threads
            opts.inter_op_num_threads = 1
            session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
            wpk_ms, ort_ms, err = [], [], 0.0
            for _ in range(args.rounds):
                save = Path(tmp) / "io"
                result = wpk_bench(args.wpk, model, args.threads, args.iters, save)
                provenance = result["provenance"]
                wpk_ms += result["samples_ms"]
                x = np.load(save / "input_0.npy")
                got = np.load(save / "output_0.npy")
                want = session.run(None, {"x": x})[0]
                err = max(err, float(np.linalg.norm(got - want) / np.linalg.norm(want)))
                ort_ms += ort_times(session, {"x": x}, args.iters)
            w, o = statistics.median(wpk_ms), statistics.median(ort_ms)
            ok = err <= TOLERANCE
            failed |= not ok
            rows.append(f"| {name} | {w:.3f} | {min(wpk_ms):.3f} | {o:.3f} | {min(ort_ms):.3f} | "
                        f"{o / w:.2f}x | {err:.1e}{'' if ok else ' FAIL'} |")
            print(rows[-1], flush=True)
    lines = [f"# Resize: wpk's kernel vs ONNX Runtime ({datetime.date.today()})", "",
             f"`python3 bench/resize_vs_ort.py --threads {args.threads} --iters {args.iters} "
             f"--rounds {args.rounds}`: batch 1, {args.threads} threads, no tuning (Resize "
             "runs the reference kernel in every plan); ms are medians (and minimums) over all "
             "timed runs; ratio = ONNX Runtime / wpk (> 1: wpk is faster).", "",
             "| case | wpk ms | wpk min | ORT ms | ORT min | ratio | rel L2 |",
             "|---|---|---|---|---|---|---|"] + rows
    facts = ", ".join(f"{k}: {v}" for k, v in (provenance or {}).items())
    lines += ["", f"Provenance: {facts}, onnxruntime {ort.__version__}"]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
