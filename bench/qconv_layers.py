#!/usr/bin/env python3
"""The int8 convolutions of resnet50, one QLinearConv at a time, on wpk and ONNX Runtime in one
run: does each class of conv (1x1 / 3x3, stride 1 / 2, 56x56 down to 7x7 planes) beat the peer?
    qconv_layers.py [--threads 2] [--rounds 5] [--iters 50] [--wpk build/wpk]
                    [--out bench/results/qconv_layers.md]

Each layer is a one-node model (u8 activations with zero points not 0, per-channel s8 weights,
an int32 bias), built with the onnx helper API. Per round, wpk (`wpk bench --json`, its median
of --iters runs) and ONNX Runtime (an in-process session, the median of --iters runs) take
turns, so that a loaded machine's drift meets both; the figure is the median over rounds, with
GMAC/s and the ratio ORT / wpk (> 1: wpk is faster). Outputs are checked against ORT's (at most
one step apart) before timing. Writes the table with its command and provenance to --out.
"""
import argparse
import json
import os
import platform
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

# name, in channels, out channels, input plane, kernel, stride, pad (resnet50's conv classes)
LAYERS = [("layer1 3x3", 64, 64, 56, 3, 1, 1),
          ("layer1 1x1 256->64", 256, 64, 56, 1, 1, 0),
          ("layer1 1x1 64->256", 64, 256, 56, 1, 1, 0),
          ("layer2.0 3x3 s2", 128, 128, 56, 3, 2, 1),
          ("layer2.0 down 1x1 s2", 256, 512, 56, 1, 2, 0),
          ("layer2 3x3", 128, 128, 28, 3, 1, 1),
          ("layer2 1x1 512->128", 512, 128, 28, 1, 1, 0),
          ("layer3 3x3", 256, 256, 14, 3, 1, 1),
          ("layer3 1x1 1024->256", 1024, 256, 14, 1, 1, 0),
          ("layer3 1x1 256->1024", 256, 1024, 14, 1, 1, 0),
          ("layer4.0 3x3 s2", 512, 512, 14, 3, 2, 1),
          ("layer4 3x3", 512, 512, 7, 3, 1, 1),
          ("layer4 1x1 2048->512", 2048, 512, 7, 1, 1, 0),
          ("layer4 1x1 512->2048", 512, 2048, 7, 1, 1, 0)]


def conv_model(c, m, hw, k, stride, pad, rng):
    w = rng.integers(-127, 128, size=(m, c, k, k), dtype=np.int8)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(100, np.uint8), "xzp"),
             numpy_helper.from_array(w, "w"),
             numpy_helper.from_array((rng.random(m) * 0.002 + 1e-4).astype(np.float32), "ws"),
             numpy_helper.from_array(np.zeros(m, np.int8), "wzp"),
             numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
             numpy_helper.from_array(np.array(7, np.uint8), "yzp"),
             numpy_helper.from_array(rng.integers(-1000, 1000, m).astype(np.int32), "b")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "b"],
                            ["y"], kernel_shape=[k, k], strides=[stride, stride],
                            pads=[pad] * 4)
    oh = (hw + 2 * pad - k) // stride + 1
    g = helper.make_graph([node], "qconv",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, m, oh, oh])],
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, c * k * k * m * oh * oh


def wpk_median(wpk, path, threads, iters):
    r = subprocess.run([wpk, "bench", str(path), "--threads", str(threads), "--iters", str(iters),
                        "--db", "", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"wpk bench {path.name} failed:\n{r.stderr[-2000:]}")
    return statistics.median(json.loads(r.stdout)["samples_ms"])


def ort_median(sess, x, iters):
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run(None, {"x": x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--out", default=str(REPO / "bench/results/qconv_layers.md"))
    args = ap.parse_args()
    rng = np.random.default_rng(3)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wpk-qconv-layers.") as tmp:
        work = Path(tmp)
        for name, c, m, hw, k, stride, pad in LAYERS:
            model, macs = conv_model(c, m, hw, k, stride, pad, rng)
            path = work / "conv.onnx"
            onnx.save(model, path)
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            x = rng.integers(0, 256, size=(1, c, hw, hw)).astype(np.uint8)
            np.save(work / "x.npy", x)
            r = subprocess.run([args.wpk, "run", str(path), "-i", f"x={work / 'x.npy'}", "-o",
                                str(work / "out"), "--threads", str(args.threads)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"wpk run {name} failed:\n{r.stderr[-2000:]}")
            got = np.load(work / "out" / "y.npy").astype(np.int32)
            steps = int(np.abs(got - sess.run(None, {"x": x})[0].astype(np.int32)).max())
            if steps > 1:
                sys.exit(f"{name}: wpk differs from ONNX Runtime by {steps} steps")
            w_ms, o_ms = [], []
            for _ in range(args.rounds):
                w_ms.append(wpk_median(args.wpk, path, args.threads, args.iters))
                o_ms.append(ort_median(sess, x, args.iters))
            w, o = statistics.median(w_ms), statistics.median(o_ms)
            rows.append((name, macs, w, o))
            print(f"{name:24s} {macs / 1e6:7.1f} MMAC  wpk {w:.3f} ms ({macs / w / 1e6:4.0f} "
                  f"GMAC/s)  ORT {o:.3f} ms ({macs / o / 1e6:4.0f} GMAC/s)  ratio {o / w:.2f}",
                  flush=True)
    tw, to = sum(r[2] for r in rows), sum(r[3] for r in rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    lines = ["# int8 convolutions of resnet50, one at a time: wpk vs ONNX Runtime", "",
             "Command: `python3 bench/qconv_layers.py " + " ".join(sys.argv[1:]) + "`", "",
             f"batch 1, {args.threads} threads, u8 x / per-channel s8 weights; median over "
             f"{args.rounds} rounds (the runtimes taking turns) of each one's median of "
             f"{args.iters} runs. Ratio = ORT / wpk (> 1: wpk faster).", "",
             "| conv | MMAC | wpk ms | wpk GMAC/s | ORT ms | ORT GMAC/s | ratio |",
             "|---|---|---|---|---|---|---|"]
    for name, macs, w, o in rows:
        lines.append(f"| {name} | {macs / 1e6:.1f} | {w:.3f} | {macs / w / 1e6:.0f} | {o:.3f} | "
                     f"{macs / o / 1e6:.0f} | {o / w:.2f} |")
    lines.append(f"| **sum** | | {tw:.3f} | | {to:.3f} | | {to / tw:.2f} |")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), "unknown")
    lines += ["", f"Provenance: commit {commit}, {cpu}, {os.cpu_count()} CPUs, ONNX Runtime "
              f"{ort.__version__}, python {platform.python_version()}, wpk {args.wpk}; load "
              f"average (1, 5, 15 min) before {' '.join(f'{v:.2f}' for v in load_before)}, "
              f"after {' '.join(f'{v:.2f}' for v in os.getloadavg())} (a shared machine: "
              f"indicative)."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
