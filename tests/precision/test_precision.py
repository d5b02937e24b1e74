#!/usr/bin/env python3
"""`--precision bf16` against fp32 and ONNX Runtime.

--part convs (fast): single convolutions in the shapes ResNet and MobileNet use (1x1, 3x3 with
padding, stride 2, residual add + Relu, Relu6) run by wpk at fp32 and at bf16; the fp32 run
must match ONNX Runtime (rel L2 <= 1e-5), the bf16 one must differ from it by no more than
bf16 rounding allows (rel L2 <= 6e-3: weights and inputs each carry 2^-9 relative error, f32
accumulation), and the profile must show the conv on the isa_bf16 kernel. Then the must-fail
cases: bf16 on a CPU without avx512_bf16 (hidden with WPK_CPU_FLAGS_OFF), tf32 on the cpu, an
unknown precision: exit 1 and a message naming the cause. Then the fp32 fallback of compile:
a chain of a small conv and two large ones at a tolerance no bf16 plan meets keeps the small
(leading) one fp32, names it, runs it off isa_bf16, and measures no more error than the
all-bf16 plan; at tolerance 0 none is kept; a bad tolerance is refused.

--part resnet18 (slow): torchvision's resnet18 (random weights, BatchNorm calibrated, as the
torchvision test exports it) compiled with --precision bf16: relative L2 <= 1e-2 against fp32,
as printed by compile and on a seeded input against ONNX Runtime.

--part resnet50 (slow): torchvision's resnet50 (random weights, exported as the torchvision
test does) compiled with --precision bf16; the error wpk prints against fp32 must be within
1.25x of the error PyTorch makes on the same model with the same bf16 rounding (every conv but
the stem with bf16 weights and inputs, f32 accumulation), and within 1e-2 where that oracle is.
Exit 77 when torch is not there."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def conv_model(path, c, k, h, w, ks, stride, pad, act, res):
    rng = np.random.default_rng(c * 7 + k + ks)
    W = (rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks)).astype(np.float32)
    B = (rng.standard_normal(k) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], kernel_shape=[ks, ks],
                              strides=[stride, stride], pads=[pad] * 4)]
    oh, ow = (h + 2 * pad - ks) // stride + 1, (w + 2 * pad - ks) // stride + 1
    last = "c"
    if res:  # a residual branch the epilogue takes as Z
        W2 = (rng.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        inits.append(numpy_helper.from_array(W2, "W2"))
        nodes.append(helper.make_node("Conv", ["x", "W2"], ["z"], kernel_shape=[1, 1],
                                      strides=[stride, stride]))
        nodes.append(helper.make_node("Add", [last, "z"], ["s"]))
        last = "s"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    elif act == "relu6":
        lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
        hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
        inits += [lo, hi]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, oh, ow])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def wpk(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=e)


def rel_l2(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


CONVS = [  # name, c, k, h, w, kernel, stride, pad, act, residual
    ("1x1", 64, 256, 14, 14, 1, 1, 0, "relu", False),
    ("3x3", 64, 64, 28, 28, 3, 1, 1, "relu", False),
    ("3x3_s2", 128, 128, 14, 14, 3, 2, 1, "relu", False),
    ("1x1_s2", 256, 512, 14, 14, 1, 2, 0, "none", False),
    ("3x3_res", 64, 64, 14, 14, 3, 1, 1, "relu", True),
    ("1x1_relu6", 32, 96, 20, 20, 1, 1, 0, "relu6", False),
    ("3x3_w17", 48, 80, 9, 17, 3, 1, 1, "relu", False),  # a tail tile, padded channel blocks
]


def part_convs(exe, tmp):
    for name, c, k, h, w, ks, st, pad, act, res in CONVS:
        path = os.path.join(tmp, name + ".onnx")
        conv_model(path, c, k, h, w, ks, st, pad, act, res)
        x = np.random.default_rng(1).uniform(-1, 1, (1, c, h, w)).astype(np.float32)
        xin = os.path.join(tmp, name + "_x.npy")
        np.save(xin, x)
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        outs = {}
        for prec in ("fp32", "bf16"):
            od = os.path.join(tmp, name + "_" + prec)
            r = wpk([exe, "run", path, "-i", "x=" + xin, "-o", od, "--threads", "2", "--db", "",
                     "--precision", prec])
            check(r.returncode == 0, "%s: wpk run --precision %s (%s)" % (name, prec,
                                                                         r.stderr.strip()[-200:]))
            if r.returncode == 0:
                outs[prec] = np.load(os.path.join(od, "y.npy"))
        if len(outs) < 2:
            continue
        e32, e16 = rel_l2(outs["fp32"], ref), rel_l2(outs["bf16"], ref)
        check(e32 <= 1e-5, "%s: fp32 vs ONNX Runtime rel L2 %.2e <= 1e-5" % (name, e32))
        check(1e-5 < e16 <= 6e-3, "%s: bf16 vs ONNX Runtime rel L2 %.2e in (1e-5, 6e-3]" %
              (name, e16))
        r = wpk([exe, "bench", path, "--threads", "2", "--db", "", "--iters", "1", "--warmup",
                 "0", "--json", "--precision", "bf16"])
        ok = r.returncode == 0
        nodes = json.loads(r.stdout).get("nodes", []) if ok else []
        on_bf16 = [n for n in nodes if n.get("provider") == "isa_bf16"]
        check(ok and len(on_bf16) >= 1, "%s: the conv runs on isa_bf16 (%s)" %
              (name, [n.get("provider") for n in nodes]))
    path = os.path.join(tmp, "1x1.onnx")
    r = wpk([exe, "run", path, "--precision", "bf16", "-o", os.path.join(tmp, "no")],
            {"WPK_CPU_FLAGS_OFF": "avx512_bf16"})
    check(r.returncode == 1 and "avx512_bf16" in r.stderr,
          "bf16 without avx512_bf16 is refused naming the flag: %s" % r.stderr.strip())
    r = wpk([exe, "compile", path, "-o", os.path.join(tmp, "t.wpk"), "--precision", "tf32"])
    check(r.returncode == 1 and "tf32" in r.stderr and "cpu" in r.stderr,
          "tf32 on the cpu target is refused: %s" % r.stderr.strip())
    r = wpk([exe, "run", path, "--precision", "fp8", "-o", os.path.join(tmp, "no")])
    check(r.returncode == 1 and "unknown precision 'fp8'" in r.stderr,
          "an unknown precision is refused: %s" % r.stderr.strip())
    r = wpk([exe, "bench", path, "--precision"])
    check(r.returncode == 1 and "--precision" in r.stderr, "--precision without a value")
    r = wpk([exe, "compile", path, "-o", os.path.join(tmp, "t.wpk"), "--precision", "bf16"],
            {"WPK_CPU_FLAGS_OFF": "avx512_bf16"})
    check(r.returncode == 1 and "avx512_bf16" in r.stderr,
          "compile --precision bf16 without avx512_bf16 is refused: %s" % r.stderr.strip())
    part_fallback(exe, tmp)


def chain_model(path):
    """A small conv then two large ones (3x3, 16x16): the first is under 5% of the work."""
    rng = np.random.default_rng(3)
    inits, nodes, last, c = [], [], "x", 16
    for i, k in enumerate((16, 64, 64)):
        W = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(c * 9)).astype(np.float32)
        inits.append(numpy_helper.from_array(W, "W%d" % i))
        nodes.append(helper.make_node("Conv", [last, "W%d" % i], ["c%d" % i], name="conv%d" % i,
                                      kernel_shape=[3, 3], pads=[1] * 4))
        nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i], name="relu%d" % i))
        last, c = "r%d" % i, k
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, 16])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def compile_bf16(exe, model, plan, tolerance):
    """wpk compile --precision bf16 at tolerance: (returncode, error, kept, names, stderr)"""
    r = wpk([exe, "compile", model, "-o", plan, "--precision", "bf16", "--threads", "2", "--db",
             "", "--no-speed-check", "--precision-tolerance", str(tolerance)])
    err = re.search(r"relative L2 error against fp32 ([0-9.e+-]+)", r.stdout)
    kept = re.search(r"precision bf16: (\d+) conv\(s\) kept fp32 \(([0-9.]+)%[^)]*\):? ?(.*)",
                     r.stdout)
    return (r.returncode, float(err.group(1)) if err else None,
            int(kept.group(1)) if kept else None, kept.group(3) if kept else "",
            r.stderr.strip()[-300:])


def part_fallback(exe, tmp):
    model = os.path.join(tmp, "chain.onnx")
    chain_model(model)
    plan0, plan1 = os.path.join(tmp, "chain0.wpk"), os.path.join(tmp, "chain1.wpk")
    rc0, err0, kept0, _, msg = compile_bf16(exe, model, plan0, 0)
    check(rc0 == 0 and err0 is not None and kept0 == 0,
          "tolerance 0: every conv on bf16, error %s, %s kept fp32 (%s)" % (err0, kept0, msg))
    rc1, err1, kept1, names, msg = compile_bf16(exe, model, plan1, 1e-12)
    check(rc1 == 0 and kept1 == 1 and names == "conv0",
          "tolerance 1e-12: the leading conv kept fp32 and named (%s, '%s'; %s)" %
          (kept1, names, msg))
    if err0 is not None and err1 is not None:
        check(err1 <= err0, "the fallback's error %.3g is no more than all-bf16's %.3g" %
              (err1, err0))
    r = wpk([exe, "bench", plan1, "--threads", "2", "--iters", "1", "--warmup", "0", "--json"])
    nodes = json.loads(r.stdout).get("nodes", []) if r.returncode == 0 else []
    provs = {n.get("node", n.get("name")): n.get("provider") for n in nodes}
    on_bf16 = [n for n, p in provs.items() if p == "isa_bf16"]
    check(r.returncode == 0 and len(on_bf16) == 2 and "conv0" not in on_bf16,
          "the plan runs conv0 off isa_bf16, the other two on it (%s)" % provs)
    r = wpk([exe, "compile", model, "-o", plan1, "--precision", "bf16", "--precision-tolerance",
             "2"])
    check(r.returncode == 1 and "--precision-tolerance" in r.stderr,
          "a tolerance out of 0..1 is refused: %s" % r.stderr.strip())


def part_resnet18(exe, out_dir):
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision"],
                      capture_output=True).returncode:
        print("skipped: /usr/bin/python3 has no torch/torchvision to export resnet18")
        sys.exit(77)
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "torchvision",
                                                         "export_models.py"), out_dir,
                        "--models", "resnet18"], capture_output=True, text=True)
    check(r.returncode == 0, "export resnet18 (%s)" % r.stderr[-300:])
    model = os.path.join(out_dir, "resnet18.onnx")
    plan = os.path.join(out_dir, "resnet18_bf16.wpk")
    rc, err, kept, names, msg = compile_bf16(exe, model, plan, 1e-2)
    check(rc == 0 and err is not None and err <= 1e-2,
          "resnet18 bf16: compile's error %s <= 1e-2 (%s conv(s) kept fp32 %s; %s)" %
          (err, kept, names, msg))
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    xin = os.path.join(out_dir, "resnet18_x.npy")
    np.save(xin, x)
    od = os.path.join(out_dir, "resnet18_bf16_out")
    r = wpk([exe, "run", "--plan", plan, "-i", "input=" + xin, "-o", od, "--threads", "2"])
    check(r.returncode == 0, "run the bf16 plan (%s)" % r.stderr.strip()[-300:])
    if r.returncode == 0:
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, {"input": x})[0]
        e = rel_l2(np.load(os.path.join(od, "logits.npy")), ref)
        check(e <= 1e-2, "resnet18 bf16 plan vs ONNX Runtime rel L2 %.4f <= 1e-2" % e)


def torch_module_name(onnx_node):
    """The module an exported conv came from: '/layer1/layer1.0/downsample/downsample.0/Conv'
    -> 'layer1.0.downsample.0' (the exporter names scopes by module path, each scope's name
    the child's own or its dotted path from the parent)."""
    name = ""
    for part in onnx_node.strip("/").split("/")[:-1]:
        last = name.rsplit(".", 1)[-1] if name else ""
        if not name:
            name = part
        elif part.startswith(name + "."):
            name = part
        elif last and part.startswith(last + "."):
            name = name[:len(name) - len(last)] + part
        else:
            name += "." + part
    return name


def torch_bf16_error(onnx_dir, fp32_nodes=(), calibrated=True):
    """PyTorch's fp32 vs bf16-rounded run of the exported model's network on the input wpk
    compile uses is not reproducible here (wpk seeds its own), so the oracle is the error on
    a seeded uniform input of the same distribution. fp32_nodes: ONNX conv nodes that stay
    fp32 besides the stem (as wpk compile names those it keeps). calibrated: BatchNorm
    statistics as export_models.py sets them, else torchvision's initial ones."""
    keep = ["conv1"] + [torch_module_name(n) for n in fp32_nodes]
    code = r'''
import sys, torch, torchvision
sys.path.insert(0, %r)
from export_models import calibrate_batchnorm
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None)
if %r: calibrate_batchnorm(m)
m.eval()
bf = lambda t: t.to(torch.bfloat16).float()
errs = []
with torch.no_grad():
    for seed in range(3):
        torch.manual_seed(100 + seed)
        x = torch.rand(1, 3, 224, 224) * 2 - 1
        y = m(x)
        hooks, saved = [], {}
        for name, mod in m.named_modules():
            if isinstance(mod, torch.nn.Conv2d) and name not in %r:
                saved[name] = mod.weight.data.clone()
                mod.weight.data = bf(mod.weight.data)
                hooks.append(mod.register_forward_pre_hook(lambda mod, inp: (bf(inp[0]),)))
        y2 = m(x)
        for h in hooks: h.remove()
        for name, mod in m.named_modules():
            if name in saved: mod.weight.data = saved[name]
        errs.append(float((y2 - y).norm() / y.norm()))
print(max(errs))
''' % (os.path.join(ROOT, "tests", "torchvision"), calibrated, keep)
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr[-500:])
    return float(r.stdout.strip().splitlines()[-1])


def part_resnet50(exe, out_dir):
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision"],
                      capture_output=True).returncode:
        print("skipped: /usr/bin/python3 has no torch/torchvision to export resnet50")
        sys.exit(77)
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "torchvision",
                                                         "export_models.py"), out_dir,
                        "--models", "resnet50"], capture_output=True, text=True)
    check(r.returncode == 0, "export resnet50 (%s)" % r.stderr[-300:])
    model = os.path.join(out_dir, "resnet50.onnx")
    plan = os.path.join(out_dir, "resnet50_bf16.wpk")
    r = wpk([exe, "compile", model, "-o", plan, "--precision", "bf16", "--threads", "2",
             "--db", "", "--no-speed-check"])
    check(r.returncode == 0, "wpk compile --precision bf16 (%s)" % r.stderr.strip()[-300:])
    m = re.search(r"precision bf16: relative L2 error against fp32 ([0-9.e+-]+)", r.stdout)
    check(m is not None, "compile prints the error against fp32")
    if not m:
        return
    err = float(m.group(1))
    kept = re.search(r"kept fp32 \([^)]*\): (.*)", r.stdout)
    names = kept.group(1).split(", ") if kept else []
    oracle = torch_bf16_error(out_dir, names)
    print("wpk bf16 vs fp32 rel L2 %.4f (%d conv(s) kept fp32); PyTorch with the same bf16 "
          "rounding and the same convs fp32 %.4f" % (err, len(names), oracle))
    check(err <= 1.25 * oracle, "wpk's bf16 error %.4f within 1.25x PyTorch's %.4f" %
          (err, oracle))
    if oracle <= 1e-2:
        check(err <= 1e-2, "rel L2 %.4f <= 1e-2" % err)
    else:
        print("note: bf16 rounding alone gives %.4f on this random-weight resnet50; the 1e-2 "
              "goal is out of reach of any bf16 kernel on it" % oracle)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", required=True)
    ap.add_argument("--part", choices=["convs", "resnet18", "resnet50"], default="convs")
    ap.add_argument("--dir", default=None, help="where the torchvision model is exported")
    args = ap.parse_args()
    if not any(l.startswith("flags") and " avx512_bf16" in l for l in open("/proc/cpuinfo")):
        print("skipped: this CPU has no avx512_bf16")
        sys.exit(77)
    if args.part == "convs":
        with tempfile.TemporaryDirectory() as tmp:
            part_convs(args.wpk, tmp)
    elif args.part == "resnet18":
        part_resnet18(args.wpk, args.dir or tempfile.mkdtemp())
    else:
        part_resnet50(args.wpk, args.dir or tempfile.mkdtemp())
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
