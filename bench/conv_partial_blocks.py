#!/usr/bin/env python3
"""conv_partial_blocks.py -- blocked convs whose output channels leave a partial last block of
16 lanes (MobileNetV2's 24-channel projections, SqueezeNet's 1000-class conv): the untuned
default of conv2d_nchwc against the tile the defaults gave them before (channel pairs or two
blocks per tile, tile rows in the parallel loop), each timed as a node of a one-conv model.

    python3 bench/conv_partial_blocks.py [--threads 1,2] [--rounds 5] [--wpk build/wpk]

Per shape and thread count, the rounds alternate the two configs; each round is one
`wpk bench --profile` (10 profiled runs); the table gives the node's minimum and median over
all runs (wall time) and old/new of the medians. The "before" config is put in a records
database of its own (`wpk tune --import`), so both run through the same plan and runtime.
Writes bench/results/conv_partial_blocks.md with the command and its provenance."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (name, input channels, output channels, image size, the previous default's knobs)
SHAPES = [
    ("mbv2 1x1 56x56 96->24", 96, 24, 56, "ow_block=7,oh_block=2,oc_tile=2,parallel=0"),
    ("mbv2 1x1 56x56 144->24", 144, 24, 56, "ow_block=7,oh_block=2,oc_tile=2,parallel=0"),
    ("squeezenet 1x1 13x13 512->1000", 512, 1000, 13,
     "ow_block=13,oh_block=1,oc_tile=1,parallel=0"),
]


def make_model(path, cin, cout, hw):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((cout, cin, 1, 1)) * 0.05)
                                .astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "B")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w, b]),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def bench_json(wpk, model, db, threads, trace):
    out = subprocess.run([wpk, "bench", model, "--db", db, "--threads", str(threads),
                          "--iters", "5", "--profile", trace, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def node_runs(trace):
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    runs = [(e["dur"] / 1e3, e["args"]["impl"]) for e in ev
            if e.get("ph") == "X" and e.get("name") == "conv"]
    if not runs:
        sys.exit(f"{trace}: no 'conv' node in the profile")
    return runs


def old_db(wpk, tmp, model_dims, target, old_knobs):
    """A records database holding the previous default's config for the model's conv."""
    cin, cout, hw = model_dims
    # the workload key `wpk tune` records: ConvNCHWc over blocks of 16, bias and Relu fused
    key = (f"conv2d_nchwc:n1,c{cin},h{hw},w{hw},k{cout},r1,s1,st1,1,pd0,0,0,0,dl1,1,g1,"
           f"x16>16,ep=bias+relu")
    cfg = ("ic_block=16,oc_block=16," + old_knobs +
           ",unroll_kw=0,order=0,pad_copy=0,pack=1")
    rec = {"target": target, "workload": key, "template": "conv2d_nchwc", "config": cfg,
           "status": "ok", "samples": [1e-4], "median": 1e-4, "toolchain": "import",
           "time": 0}
    lines, db = tmp / "old.jsonl", tmp / f"old_{abs(hash(key))}.db"
    lines.write_text(json.dumps(rec) + "\n")
    subprocess.run([wpk, "tune", "--db", str(db), "--import", str(lines)],
                   capture_output=True, check=True)
    return str(db)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--out", default=str(REPO / "bench/results/conv_partial_blocks.md"))
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",") if t]
    load0 = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wpk-partial.") as d:
        tmp = Path(d)
        prov = None
        for name, cin, cout, hw, knobs in SHAPES:
            model = str(tmp / f"c{cin}_{cout}_{hw}.onnx")
            make_model(model, cin, cout, hw)
            probe = bench_json(a.wpk, model, "", 1, str(tmp / "p.json"))
            prov = prov or probe.get("provenance", {})
            target = prov.get("target", "")
            db = old_db(a.wpk, tmp, (cin, cout, hw), target, knobs)
            for th in threads:
                ms = {"old": [], "new": []}
                impl = {}
                for _ in range(a.rounds):
                    for tag, use in (("old", db), ("new", "")):
                        trace = str(tmp / "t.json")
                        bench_json(a.wpk, model, use, th, trace)
                        runs = node_runs(trace)
                        ms[tag] += [r[0] for r in runs]
                        impl[tag] = runs[0][1].split(" ", 1)[-1]
                ran = dict(kv.split("=") for kv in impl["old"].split(","))
                if any(ran.get(k) != v for k, v in (kv.split("=") for kv in knobs.split(","))):
                    sys.exit(f"{name}: the imported record was not used (ran {impl['old']}); "
                             "this bench needs AVX-512's blocks of 16")
                old, new = statistics.median(ms["old"]), statistics.median(ms["new"])
                rows.append((name, th, min(ms["old"]), old, min(ms["new"]), new, old / new,
                             impl["old"], impl["new"]))
                print(f"{name:32s} {th} threads: before {old:.3f} ms, now {new:.3f} ms, "
                      f"{old / new:.2f}x", flush=True)
    load1 = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    cmd = "python3 bench/conv_partial_blocks.py " + " ".join(sys.argv[1:])
    lines = ["# Convs with a partial last channel block: defaults before and now", "",
             f"Written by `{cmd.strip()}` on {time.strftime('%Y-%m-%d %H:%M')} "
             f"(took {time.time() - t0:.0f} s).", "", "## Provenance", ""]
    for k in ("commit", "build", "cpu", "target", "compiler"):
        if k in (prov or {}):
            lines.append(f"- {k}: `{prov[k]}`")
    lines += [f"- load average (1/5/15 min) before: {load0}, after: {load1} (a shared machine: "
              "other processes' work is in these figures)",
              f"- per shape and thread count, {a.rounds} rounds alternating the two configs, "
              "10 profiled runs of the node each; wall time of the node", "",
              "## Node time", "",
              "| conv | threads | before min ms | before median ms | now min ms | "
              "now median ms | before/now | before | now |",
              "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.3f} "
                     f"| {r[6]:.2f} | `{r[7]}` | `{r[8]}` |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
