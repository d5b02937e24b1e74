#!/usr/bin/env python3
"""Checks `wpk optimize` on real models (issue 3), in three parts:
  models       the foundation's model test set (tests/models: gen_models.py CNNs, legacy_ops.py
               one-node models) at -O0..-O3
  torchvision  the torchvision exports of tests/torchvision/export_models.py at -O0..-O3
  done         issue 3's done-when checks on unfolded torchvision exports (export_unfolded.py)
For every model and level: `wpk optimize -O N -o opt.onnx` succeeds; onnx.checker.check_model
accepts opt.onnx (full_check=False: "wpk"-domain nodes are a custom domain); `wpk run -O0
--backend ref` of opt.onnx (the graph as written, not optimized again, on the reference kernels:
this checks the passes; the generated kernels on these models are tests/cpu's) gives ONNX
Runtime's outputs of the original model on the same input (rel L2 <= 1e-4; a model with a
symbolic batch dim also at the batch the foundation's tests run it at); when opt.onnx holds only
standard ops, ONNX Runtime runs it to those outputs too. A failed output comparison is narrowed down to the pass that breaks it.
    test_optimize.py --part models|torchvision|done [--wpk PATH] [--dir DIR] [--models a,b]
                     [--levels 0,1,2,3] [--torch-python PY]
Exit status: 0 all passed, 1 a check failed, 77 skipped (no torch to export the models; 1 when
WPK_REQUIRE_TORCH=1).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests/models"))
sys.path.insert(0, str(REPO / "tests/torchvision"))
import compare_ort  # noqa: E402
import gen_models  # noqa: E402
import legacy_ops  # noqa: E402
import test_torchvision  # noqa: E402

SKIP = 77
TOLERANCE = compare_ort.TOLERANCE
TIMEOUT_S = 900
LEVELS = [0, 1, 2, 3]
UNFOLDED = ["resnet50", "mobilenet_v2", "efficientnet_b0", "densenet121"]
PEAK_LIMIT = 16 * 1024 * 1024       # resnet50 at batch 1, issue 3's done-when
RESNET50_BATCHNORMS = 53
CONV_OPS = {"Conv", "FusedConv", "ConvNCHWc"}
PASS_THROUGH = {"BatchNormalization", "Identity"}
STANDARD_DOMAINS = {"", "ai.onnx"}


class Report:
    """Every check as one line: PASS/FAIL, model, level, check, detail."""

    def __init__(self):
        self.failed, self.passed = [], 0

    def check(self, ok, model, check, detail=""):
        line = f"{'PASS' if ok else 'FAIL'}  {model:36} {check}" + (f": {detail}" if detail else "")
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(line)
        return ok


def run(args, timeout=TIMEOUT_S):
    """(exit status, stdout, stderr); a timeout is status -1."""
    try:
        p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def tail(text, n=600):
    text = text.strip().replace("\n", " | ")
    return text if len(text) <= n else "..." + text[-n:]


class Reference:
    """ONNX Runtime's outputs of the original model on one seeded input (+ a sensitivity check)."""

    def __init__(self, path, batch=None):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.batch = batch  # the size of a symbolic batch dim (None: 1)
        self.feeds = compare_ort.random_inputs(session, batch, 0)
        self.names = [o.name for o in session.get_outputs()]
        self.outputs = session.run(None, self.feeds)
        moved = session.run(None, compare_ort.random_inputs(session, batch, 1))
        self.sensitivity = min(compare_ort.rel_l2(m, e) for m, e in zip(moved, self.outputs))

    def compare(self, outputs):
        """(ok, detail) for outputs {name: array} against the reference."""
        errors, problems = [], []
        for name, want in zip(self.names, self.outputs):
            got = outputs.get(name)
            if got is None:
                problems.append(f"no output {name}")
            elif got.shape != want.shape or got.dtype != want.dtype:
                problems.append(f"{name} is {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
            else:
                errors.append(compare_ort.rel_l2(got, want))
        worst = max(errors, default=0.0)
        ok = not problems and worst <= TOLERANCE
        return ok, "; ".join(problems) or f"rel L2 {worst:.3g} (limit {TOLERANCE:g})"


def run_wpk(wpk, model, ref, work, level=0):
    """Runs `wpk run -O level --backend ref` on the reference's input; ({name: array}, error or
    None). The reference kernels, not generated ones: compiling every model's kernels at every
    level took most of this test's time on an empty kernel cache (the torchvision part 272 s on
    CI's 2 cores, 43 s on the reference kernels), and a pass's bug shows as clearly on them."""
    args = [wpk, "run", model, "-O", str(level), "--backend", "ref", "-o", work / "out"]
    for i, (name, value) in enumerate(ref.feeds.items()):
        np.save(work / f"in{i}.npy", value)
        args += ["-i", f"{name}={work / f'in{i}.npy'}"]
    status, _, err = run(args)
    if status != 0 or re.search(r"Sanitizer|runtime error:", err):
        return {}, f"wpk run exited {status}: {tail(err)}"
    outs = {}
    for name in ref.names:
        path = work / "out" / compare_ort.out_file_name(name)
        if path.exists():
            outs[name] = np.load(path)
    return outs, None


def pipeline():
    """[(pass name, minimum level)] in pipeline order, from src/passes/passes.def."""
    text = (REPO / "src/passes/passes.def").read_text()
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r'^P\("([^"]+)",\s*\w+,\s*(\d+)', text, re.M)]


def suspect_pass(wpk, model, level, ref, work):
    """The first pass of -O level whose addition breaks the outputs (passes named with --passes
    run in pipeline order; a name listed twice in passes.def runs at both places)."""
    names = []
    for name, minimum in pipeline():
        if minimum > level or name in names:
            continue
        names.append(name)
        out = work / "bisect.onnx"
        status, _, err = run([wpk, "optimize", model, "--passes", ",".join(names), "-o", out])
        if status != 0:
            return f"{name} (wpk optimize --passes {','.join(names)} fails: {tail(err, 200)})"
        got, err = run_wpk(wpk, out, ref, work)
        if err or not ref.compare(got)[0]:
            return f"{name} (outputs break once --passes {','.join(names)})"
    return "none alone (only the whole -O pipeline breaks them)"


def check_level(rep, wpk, label, model, level, refs, work):
    """The per-level checks, each output comparison at every reference's batch; returns the
    loaded optimized model, or None."""
    tag = f"{label} -O{level}"
    opt = work / f"opt_O{level}.onnx"
    t = time.perf_counter()
    status, _, err = run([wpk, "optimize", model, "-O", str(level), "-o", opt])
    if not rep.check(status == 0 and opt.exists(), tag, "wpk optimize",
                     f"{time.perf_counter() - t:.1f} s" if status == 0 else f"exit {status}: {tail(err)}"):
        return None
    try:
        m = onnx.load(str(opt))
        onnx.checker.check_model(m, full_check=False)
        rep.check(True, tag, "onnx.checker")
    except Exception as e:  # noqa: BLE001 (the checker raises several types)
        rep.check(False, tag, "onnx.checker", tail(str(e), 400))
        m = None
    standard = m is not None and all(op.domain in STANDARD_DOMAINS for op in m.opset_import)
    for ref in refs:
        at = f" (batch {ref.batch})" if ref.batch else ""
        got, err = run_wpk(wpk, opt, ref, work)
        ok, detail = (False, err) if err else ref.compare(got)
        if not rep.check(ok, tag, f"wpk run -O0 --backend ref of the optimized model vs ONNX "
                         f"Runtime on the original{at}", detail) and level > 0:
            print(f"      suspect pass: {suspect_pass(wpk, model, level, ref, work)}", flush=True)
        if not standard:
            continue
        try:
            sess = ort.InferenceSession(str(opt), providers=["CPUExecutionProvider"])
            outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ref.feeds)))
            ok, detail = ref.compare(outs)
        except Exception as e:  # noqa: BLE001
            ok, detail = False, f"ONNX Runtime refuses it: {tail(str(e), 400)}"
        rep.check(ok, tag, f"ONNX Runtime runs the optimized model (standard ops only){at}", detail)
    return m


def check_model(rep, wpk, label, path, levels, batch=None):
    """Every level of one model, at batch 1 and, for a model with a symbolic batch dim, at
    `batch` too (as the foundation's tests run it); returns {level: optimized model or None}."""
    refs = []
    for b in [None] + ([batch] if batch else []):
        try:
            refs.append(Reference(path, b))
        except Exception as e:  # noqa: BLE001
            rep.check(False, label, "ONNX Runtime reference", tail(str(e)))
            return {}
    if not rep.check(refs[0].sensitivity >= compare_ort.MIN_SENSITIVITY, label,
                     "outputs depend on the input",
                     f"rel L2 {refs[0].sensitivity:.2g} between two inputs"):
        return {}
    results = {}
    with tempfile.TemporaryDirectory(prefix="wpk-optimize.") as tmp:
        for level in levels:
            results[level] = check_level(rep, wpk, label, path, level, refs, Path(tmp))
    return results


# ---- issue 3's done-when checks (structure of the -O2 graph) ----

def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def act_name(node):
    v = attr(node, "activation")
    return v.decode() if isinstance(v, bytes) else v


class GraphView:
    def __init__(self, model):
        self.nodes = list(model.graph.node)
        self.consts = {t.name for t in model.graph.initializer}
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        for n in self.nodes:
            if n.op_type == "Constant":
                self.consts.update(n.output)
        self.ops = Counter(n.op_type for n in self.nodes)

    def source(self, value):
        """The node computing value, looking through BatchNormalization and Identity (so a
        Relu after an unfolded Conv+BN counts as a Relu after a Conv); None for inputs."""
        n = self.producer.get(value)
        while n is not None and n.op_type in PASS_THROUGH:
            n = self.producer.get(n.input[0])
        return n

    def made_by(self, value):
        n = self.source(value)
        return n.op_type if n is not None else None

    def residual_add(self, value):
        """value is an Add of two computed tensors (not a constant shift such as a lone BN's)."""
        n = self.source(value)
        return n is not None and n.op_type == "Add" and len(n.input) == 2 and \
            not any(i in self.consts for i in n.input)

    def after_conv_or_residual(self, op):
        """The op's nodes whose input comes from a conv or a residual Add."""
        return [n for n in self.nodes if n.op_type == op and
                (self.made_by(n.input[0]) in CONV_OPS or self.residual_add(n.input[0]))]

    def silu_patterns(self):
        """Mul(x, Sigmoid(x)) nodes, with the op producing x."""
        found = []
        for n in self.nodes:
            if n.op_type != "Mul" or len(n.input) != 2:
                continue
            for x, s in (n.input, reversed(n.input)):
                sig = self.producer.get(s)
                if sig is not None and sig.op_type == "Sigmoid" and sig.input[0] == x:
                    found.append((n, self.made_by(x)))
                    break
        return found


def fused_with(view, act):
    return [n for n in view.nodes if n.op_type in CONV_OPS and act_name(n) == act]


def done_checks(rep, wpk, name, original, optimized, path):
    label = f"{name}_unfolded -O2"
    src, opt = GraphView(original), GraphView(optimized)
    rep.check(opt.ops["BatchNormalization"] == 0, label, "no BatchNormalization remains",
              f"{src.ops['BatchNormalization']} before, {opt.ops['BatchNormalization']} after")
    relus = src.after_conv_or_residual("Relu")
    stray = [n.name or n.output[0] for n in opt.after_conv_or_residual("Relu")]
    fused_relu = fused_with(opt, "Relu")
    rep.check(not stray and len(fused_relu) == len(relus), label,
              "every Relu after a Conv or a residual Add is fused",
              f"{len(relus)} such Relus before; after: {len(stray)} standalone"
              f"{' (' + ', '.join(stray[:4]) + ')' if stray else ''}, {len(fused_relu)} convs "
              f"fused with Relu, {opt.ops['Relu']} Relu left in all")
    if name == "mobilenet_v2":
        clips = src.after_conv_or_residual("Clip")
        left = opt.after_conv_or_residual("Clip")
        relu6 = [n for n in fused_with(opt, "Clip")
                 if attr(n, "clip_min") == 0.0 and attr(n, "clip_max") == 6.0]
        rep.check(clips and not left and len(relu6) == len(clips), label,
                  "every Clip (ReLU6) is fused as activation=Clip, clip_min 0, clip_max 6",
                  f"{len(clips)} Clips after a conv before; after: {len(left)} standalone, "
                  f"{len(relu6)} convs fused with Clip[0, 6]")
    if name == "efficientnet_b0":
        before = [n for n, made in src.silu_patterns() if made in CONV_OPS]
        left = [n.name or n.output[0] for n, made in opt.silu_patterns() if made in CONV_OPS]
        silu = fused_with(opt, "SiLU")
        rep.check(before and not left and len(silu) == len(before), label,
                  "every SiLU (x * Sigmoid(x)) after a conv is fused as activation=SiLU",
                  f"{len(before)} before; after: {len(left)} unfused, {len(silu)} convs fused "
                  f"with SiLU")
    if name == "resnet50":
        status, out, err = run([wpk, "info", path])
        m = re.search(r"^peak activation memory: (\d+) bytes \(unplanned: (\d+) bytes\)", out, re.M)
        if status != 0 or not m:
            rep.check(False, f"{name}_unfolded", "wpk info: peak activation memory <= 16 MiB",
                      f"exit {status}, no 'peak activation memory' line: {tail(err or out, 300)}")
        else:
            peak, unplanned = int(m.group(1)), int(m.group(2))
            rep.check(peak <= PEAK_LIMIT and peak > 0, f"{name}_unfolded",
                      "wpk info: peak activation memory <= 16 MiB at batch 1",
                      f"{peak} bytes ({peak / 2**20:.2f} MiB), unplanned {unplanned} bytes "
                      f"({unplanned / 2**20:.1f} MiB)")
    print(f"      ops after -O2: {dict(sorted(opt.ops.items()))}", flush=True)


# ---- parts ----

def export(script, out_dir, names, torch_python):
    """Runs an export script under torch_python for the missing models; None when it lacks torch."""
    probe = subprocess.run([torch_python, "-c", "import torch, torchvision"], capture_output=True)
    if probe.returncode != 0:
        return None
    subprocess.run([torch_python, str(script), str(out_dir), "--models", ",".join(names)], check=True)
    return True


def part_models(rep, args, levels):
    names = args.models.split(",") if args.models else list(gen_models.MODELS) + list(legacy_ops.CASES)
    with tempfile.TemporaryDirectory(prefix="wpk-optimize-models.") as tmp:
        paths = gen_models.write_models(tmp, [n for n in names if n in gen_models.MODELS])
        if any(n in legacy_ops.CASES for n in names):
            legacy = legacy_ops.write_models(os.path.join(tmp, "legacy"))
            paths.update({n: p for n, p in legacy.items() if n in names})
        unknown = [n for n in names if n not in paths]
        if unknown:
            sys.exit("test_optimize: unknown model(s): " + ", ".join(unknown))
        for name in names:
            check_model(rep, args.wpk, name, paths[name], levels,
                        batch=3 if name in gen_models.DYNAMIC_BATCH else None)
    return 0


def part_torchvision(rep, args, levels):
    names = args.models.split(",") if args.models else test_torchvision.MODELS
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if missing and export(REPO / "tests/torchvision/export_models.py", out_dir, missing, args.torch_python) is None:
        return None
    for name in names:
        check_model(rep, args.wpk, name, out_dir / f"{name}.onnx", levels,
                    batch=test_torchvision.DYNAMIC_BATCH.get(name))
    return 0


def part_done(rep, args, levels):
    names = args.models.split(",") if args.models else UNFOLDED
    out_dir = Path(args.dir) / "unfolded"
    out_dir.mkdir(parents=True, exist_ok=True)
    missing = [n for n in names if not (out_dir / f"{n}_unfolded.onnx").exists()]
    if missing and export(HERE / "export_unfolded.py", out_dir, missing, args.torch_python) is None:
        return None
    for name in names:
        path = out_dir / f"{name}_unfolded.onnx"
        original = onnx.load(str(path))
        ops = Counter(n.op_type for n in original.graph.node)
        if name == "resnet50":
            rep.check(ops["BatchNormalization"] == RESNET50_BATCHNORMS, f"{name}_unfolded",
                      f"the export is unfolded ({RESNET50_BATCHNORMS} BatchNormalization nodes)",
                      f"{ops['BatchNormalization']} BatchNormalization nodes")
        else:
            rep.check(ops["BatchNormalization"] > 0, f"{name}_unfolded", "the export is unfolded",
                      f"{ops['BatchNormalization']} BatchNormalization nodes")
        results = check_model(rep, args.wpk, f"{name}_unfolded", path, sorted(set(levels) | {2}))
        if results.get(2) is not None:
            done_checks(rep, args.wpk, name, original, results[2], path)
        elif 2 in results:
            rep.check(False, f"{name}_unfolded -O2", "done-when checks", "no optimized model to check")
    return 0


PARTS = {"models": part_models, "torchvision": part_torchvision, "done": part_done}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=PARTS, required=True)
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-torchvision"),
                    help="where torchvision exports are kept (unfolded ones in DIR/unfolded)")
    ap.add_argument("--models", help="comma-separated subset of the part's models")
    ap.add_argument("--levels", default=",".join(map(str, LEVELS)), help="opt levels (default: all)")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torch + torchvision")
    args = ap.parse_args()
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_optimize: no wpk binary at {args.wpk} (use --wpk)")
    levels = [int(x) for x in args.levels.split(",") if x]
    start = time.perf_counter()
    rep = Report()
    if PARTS[args.part](rep, args, levels) is None:
        print(f"SKIP: {args.torch_python} cannot import torch and torchvision to export the models")
        return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP
    print(f"\noptimize ({args.part}): {rep.passed} checks passed, {len(rep.failed)} failed "
          f"({time.perf_counter() - start:.1f} s)")
    for line in rep.failed:
        print("  " + line)
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
