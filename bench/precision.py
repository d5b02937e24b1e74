#!/usr/bin/env python3
"""--precision bf16 against wpk's own fp32 on resnet50: speed and error, one command.

    python3 bench/precision.py [--build build] [--dir /tmp/wpk-precision] [--threads 2]
        [--rounds 5] [--iters 10] [--db ''] [--out bench/results/precision.md] [--uncalibrated]

Exports torchvision's resnet50 (random weights, seed 0, BatchNorm calibrated, as
tests/torchvision does; --uncalibrated: BatchNorm at its initial statistics) unless --dir
holds it, compiles an fp32 and a bf16 plan (batch 1, the same records: --db, default none, so
both run their untuned defaults; bf16 at compile's default tolerance, so it keeps the leading
convs fp32 that its measured search chooses), then times them taking turns (--rounds rounds of
`wpk bench --iters N` each, so a slow spell of the machine hits both), and measures the error:
the bf16 plan's output against the fp32 plan's and against ONNX Runtime on one seeded input,
and what PyTorch's own bf16 rounding of the same convs costs on that model (the floor any bf16
kernel has), with only the stem fp32 and with the convs wpk kept fp32. Prints a table and
writes it, with provenance and the raw samples, to --out."""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "precision"))
from test_precision import torch_bf16_error  # noqa: E402


def sh(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode:
        sys.exit("precision.py: %s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    return r


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def bench(wpk, plan, threads, iters):
    r = sh([wpk, "bench", plan, "--threads", str(threads), "--iters", str(iters), "--warmup",
            "2", "--json"])
    return json.loads(r.stdout)


def rel_l2(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def export_uncalibrated(path):
    """resnet50 as export_models.py makes it, without its BatchNorm calibration."""
    if os.path.exists(path):
        return
    code = ("import torch, torchvision\n"
            "torch.manual_seed(0)\n"
            "m = torchvision.models.resnet50(weights=None).eval()\n"
            "with torch.no_grad():\n"
            "    torch.onnx.export(m, torch.randn(1, 3, 224, 224), %r, opset_version=13,\n"
            "                      input_names=['input'], output_names=['logits'],\n"
            "                      do_constant_folding=True)\n" % (path + ".tmp"))
    sh(["/usr/bin/python3", "-c", code])
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--dir", default="/tmp/wpk-precision")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--db", default="", help="records both plans are chosen from ('' none)")
    ap.add_argument("--out", default=None,
                    help="default bench/results/precision.md (precision_uncalibrated.md)")
    ap.add_argument("--uncalibrated", action="store_true",
                    help="BatchNorm at torchvision's initial statistics (mean 0, var 1)")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(REPO, "bench", "results", "precision%s.md" %
                                ("_uncalibrated" if args.uncalibrated else ""))
    wpk = os.path.join(args.build, "wpk")
    os.makedirs(args.dir, exist_ok=True)
    start = time.time()
    if args.uncalibrated:
        model = os.path.join(args.dir, "resnet50_uncalibrated.onnx")
        export_uncalibrated(model)
    else:
        sh(["/usr/bin/python3", os.path.join(REPO, "tests", "torchvision", "export_models.py"),
            args.dir, "--models", "resnet50"])
        model = os.path.join(args.dir, "resnet50.onnx")
    plans, compile_out = {}, {}
    for prec in ("fp32", "bf16"):
        plans[prec] = os.path.join(args.dir, "%s_%s.wpk" % (
            os.path.basename(model)[:-5], prec))
        r = sh([wpk, "compile", model, "-o", plans[prec], "--threads", str(args.threads),
                "--db", args.db, "--precision", prec, "--no-speed-check"])
        compile_out[prec] = r.stdout
    printed = [l for l in compile_out["bf16"].splitlines() if l.startswith("precision bf16")]
    kept = [l.split("): ", 1)[1].split(", ") for l in printed if "kept fp32" in l and "): " in l]
    kept = kept[0] if kept else []

    # error on one seeded input: both plans, ONNX Runtime, PyTorch's bf16 rounding
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    xin = os.path.join(args.dir, "input.npy")
    np.save(xin, x)
    outs = {}
    for prec in ("fp32", "bf16"):
        od = os.path.join(args.dir, "out_" + prec)
        sh([wpk, "run", "--plan", plans[prec], "-i", "input=" + xin, "-o", od, "--threads",
            str(args.threads)])
        outs[prec] = np.load(os.path.join(od, "logits.npy"))
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    err_bf16 = rel_l2(outs["bf16"], outs["fp32"])
    err_fp32_ort = rel_l2(outs["fp32"], ref)
    top1_same = int(np.argmax(outs["bf16"]) == np.argmax(outs["fp32"]))
    floor = torch_bf16_error(args.dir, calibrated=not args.uncalibrated)
    floor_kept = torch_bf16_error(args.dir, kept, not args.uncalibrated) if kept else floor

    # speed, taking turns
    samples = {"fp32": [], "bf16": []}
    medians = {"fp32": [], "bf16": []}
    nodes = {}
    for rnd in range(args.rounds):
        for prec in (("fp32", "bf16") if rnd % 2 == 0 else ("bf16", "fp32")):
            j = bench(wpk, plans[prec], args.threads, args.iters)
            samples[prec] += j.get("samples_ms", [])
            medians[prec].append(j["latency_ms"]["median"])
            nodes[prec] = j.get("providers", j.get("nodes"))
    med = {p: float(np.median(medians[p])) for p in medians}
    mins = {p: float(min(samples[p])) if samples[p] else float("nan") for p in samples}
    ratio = med["fp32"] / med["bf16"]
    ratios = [a / b for a, b in zip(medians["fp32"], medians["bf16"])]

    commit = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    cc = sh([os.environ.get("CC", "cc"), "--version"]).stdout.splitlines()[0]
    lines = [
        "# --precision bf16 vs fp32: resnet50 (random weights, seed 0, BatchNorm %s), batch 1, "
        "%d threads" % ("at its initial statistics" if args.uncalibrated else "calibrated",
                        args.threads),
        "",
        "Written by `python3 bench/precision.py --threads %d --rounds %d --iters %d --db '%s'%s` "
        "on %s (took %.0f s)." % (args.threads, args.rounds, args.iters, args.db,
                                  " --uncalibrated" if args.uncalibrated else "",
                                  datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                                  time.time() - start),
        "",
        "| plan | median ms (median of %d rounds) | min ms | speedup vs fp32 | per-round "
        "speedups | rel L2 vs fp32 | top-1 same |" % args.rounds,
        "|---|---|---|---|---|---|---|",
        "| fp32 | %.2f | %.2f | 1.00 | - | - | - |" % (med["fp32"], mins["fp32"]),
        "| bf16 | %.2f | %.2f | **%.2f** | %s | %.3g | %s |" % (
            med["bf16"], mins["bf16"], ratio, " ".join("%.2f" % r for r in ratios), err_bf16,
            "yes" if top1_same else "no"),
        "",
        "Error: wpk fp32 vs ONNX Runtime %.2e. PyTorch's fp32 vs the same model with every conv "
        "but the stem on bf16 weights and inputs (f32 accumulation), worst of 3 seeded inputs: "
        "%.3g -- the floor of bf16 rounding on this random-weight resnet50; with the convs wpk "
        "kept fp32 fp32 too: %.3g. `wpk compile --precision bf16` printed: `%s`." % (
            err_fp32_ort, floor, floor_kept, "`; `".join(printed) if printed else "(nothing)"),
        "",
        "Provenance: commit %s%s; kernels %s, -O3 -march=native (the bf16 convs under "
        "target(\"avx512bf16,avx512f\")); CPU %s, %d logical cpus; onnxruntime %s, numpy %s, "
        "python %s; load average at the end %s." % (
            commit, " (working tree modified)" if dirty else "", cc, cpu_model(),
            os.cpu_count(), ort.__version__, np.__version__, platform.python_version(),
            " ".join("%.2f" % v for v in os.getloadavg())),
        "",
        "<details><summary>raw samples (ms)</summary>",
        "",
        "fp32: " + " ".join("%.2f" % s for s in samples["fp32"]),
        "",
        "bf16: " + " ".join("%.2f" % s for s in samples["bf16"]),
        "",
        "</details>",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
