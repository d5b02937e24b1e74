#!/usr/bin/env python3
"""Where an int8 model's convolutions spend their time, by class: the stem (the first kxk conv),
depthwise (stride 1 and 2), 1x1 expand (more outputs than inputs) and 1x1 project, each class's
summed per-node time from `wpk bench`'s profile (the minimum over rounds, per node), its MACs and
GMAC/s; with --base, a second wpk (e.g. main's build) measured in the same run, taking turns;
with --ort, ONNX Runtime's own profile of the same model (its fused QDQ nodes are named after
the Conv they replace, plus a suffix), each node's minimum over its runs.
    qconv_classes.py [--model /tmp/wpk-quant-models/mobilenet_v2_int8.onnx] [--threads 1]
                     [--rounds 3] [--wpk build/wpk] [--base WPK] [--ort]
                     [--out bench/results/qconv_classes.md]
The classes come from the QDQ model's Conv nodes (the names wpk's profile keeps).
"""
import argparse
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

import onnx
from onnx import helper, shape_inference

REPO = Path(__file__).resolve().parents[1]


def conv_classes(path):
    """Conv node name -> (class, MACs)."""
    m = shape_inference.infer_shapes(onnx.load(path))
    dims = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    inits = {i.name: list(i.dims) for i in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}

    def weight_dims(name):  # through the DequantizeLinear to the int8 initializer
        while name not in inits and name in producer:
            name = producer[name].input[0]
        return inits.get(name)

    out, first = {}, True
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        w, y = weight_dims(n.input[1]), dims.get(n.output[0])
        if not w or not y or len(y) != 4:
            continue
        stride = a.get("strides", [1, 1])[0]
        if a.get("group", 1) > 1:
            cls = f"depthwise s{stride}"
        elif first and w[2] * w[3] > 1:
            cls = "stem"
        elif w[2] * w[3] > 1:
            cls = "kxk"
        else:
            cls = "1x1 expand" if w[0] > w[1] else "1x1 project"
        first = False
        out[n.name] = (cls, w[0] * w[1] * w[2] * w[3] * y[2] * y[3])
    return out


def profile(wpk, model, threads):
    r = subprocess.run([wpk, "bench", str(model), "--threads", str(threads), "--db", "",
                        "--iters", "20", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{wpk} bench failed: {r.stderr[-1500:]}")
    return {nd["node"]: nd["ms"] for nd in json.loads(r.stdout)["nodes"]}


def ort_profile(model, threads, runs):
    """Node name -> ms (minimum over runs) from ONNX Runtime's profiler."""
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.gettempdir()) / "wpk-qconv-classes-ort")
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    for _ in range(runs):
        sess.run(None, {inp.name: x})
    trace = Path(sess.end_profiling())
    best = {}
    for e in json.loads(trace.read_text()):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            best[name] = min(e["dur"] / 1000.0, best.get(name, float("inf")))
    trace.unlink()
    return best


def ort_by_conv(best, classes):
    """ONNX Runtime's node times under the names of the Conv nodes they replace."""
    out = {}
    for name, ms in best.items():
        conv = next((c for c in classes if name == c or name.startswith(c + "_")), name)
        out[conv] = out.get(conv, 0.0) + ms
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/tmp/wpk-quant-models/mobilenet_v2_int8.onnx")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--base", help="a second wpk to compare with (e.g. main's build)")
    ap.add_argument("--ort", action="store_true", help="ONNX Runtime's profile beside")
    ap.add_argument("--out", default=str(REPO / "bench/results/qconv_classes.md"))
    args = ap.parse_args()
    classes = conv_classes(args.model)
    runs = {"wpk": args.wpk} | ({"base": args.base} if args.base else {})
    load0 = os.getloadavg()[0]
    best = {k: {} for k in runs}
    for _ in range(args.rounds):
        for key, exe in runs.items():
            for node, ms in profile(exe, args.model, args.threads).items():
                best[key][node] = min(ms, best[key].get(node, ms))
        if args.ort:
            ort_best = ort_by_conv(ort_profile(args.model, args.threads, 20), classes)
            best.setdefault("ort", {})
            for node, ms in ort_best.items():
                best["ort"][node] = min(ms, best["ort"].get(node, ms))
    keys = list(runs) + (["ort"] if args.ort else [])
    table = {}
    for key in keys:
        for node, ms in best[key].items():
            cls, macs = classes.get(node, ("other (not a conv)", 0))
            row = table.setdefault(cls, {"nodes": 0, "macs": 0})
            row[key] = row.get(key, 0.0) + ms
            if key == "wpk":
                row["nodes"] += 1
                row["macs"] += macs
    cols = ["class", "nodes", "MMACs", "wpk ms", "wpk GMAC/s"]
    if args.base:
        cols += ["base ms", "base / wpk"]
    if args.ort:
        cols += ["ORT ms", "ORT / wpk"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for cls in sorted(table) + ["total"]:
        row = table.get(cls) or {
            "nodes": sum(r["nodes"] for r in table.values()),
            "macs": sum(r["macs"] for r in table.values()),
            **{k: sum(r.get(k, 0.0) for r in table.values()) for k in keys}}
        ms = row.get("wpk", 0.0)
        cells = [cls, str(row["nodes"]), f"{row['macs'] / 1e6:.1f}", f"{ms:.3f}",
                 f"{row['macs'] / ms / 1e6:.1f}" if row["macs"] and ms else "-"]
        for key in keys[1:]:
            other = row.get(key, 0.0)
            cells += [f"{other:.3f}", f"{other / ms:.2f}" if ms else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO).stdout.strip()
    text = (f"# int8 convolutions by class: {Path(args.model).name}\n\n"
            f"`python3 bench/qconv_classes.py --model {args.model} --threads {args.threads} "
            f"--rounds {args.rounds}" + (f" --base {args.base}" if args.base else "") +
            (" --ort" if args.ort else "") + "`\n\n"
            f"Per-node times from `wpk bench`'s profile, the minimum over {args.rounds} rounds, "
            f"summed per class; batch 1, {args.threads} thread(s).\n\n" + "\n".join(lines) +
            f"\n\nProvenance: commit {commit}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs, wpk {args.wpk}" +
            (f", base {args.base}" if args.base else "") +
            (f", ONNX Runtime {__import__('onnxruntime').__version__}" if args.ort else "") +
            f"; load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after.\n")
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
