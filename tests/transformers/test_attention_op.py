#!/usr/bin/env python3
"""wpk::Attention on its own: `wpk run` against a NumPy reference (rel L2 <= 1e-5) on sizes that
cross the kernel's blocks (keys not a multiple of the key block, its last block one to four
vectors long, more query rows than one chunk, head sizes apart for Q/K and V, value rows of 32
and 64 floats for the vector kernel, more keys than the whole-row kernel holds), stored
transposed operands, broadcast masks, and 3-D cases, the head-size-64 ones also on the AVX2 and
portable kernels (WPK_VECTOR_FLOATS=8, 4); Q, K and V read in place through views of one fused
projection (ViT's 197 tokens at batch 1, BERT's layout at batch 2 with a mask); and the errors
a bad node gets (exit 1, the node, op and attribute named).
    test_attention_op.py [--wpk PATH]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[2]


def attention_model(shapes, attrs, mask_shape=None, out_shape=None):
    names = ["q", "k", "v"] + (["mask"] if mask_shape else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
              for n, s in zip(names, shapes + ([mask_shape] if mask_shape else []))]
    node = helper.make_node("Attention", names, ["y"], name="attn", domain="wpk", **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph([node], "attention", inputs, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                   helper.make_opsetid("wpk", 1)])


def reference(q, k, v, mask, scale, perms):
    qp, kp, vp, op = perms
    ql, kl, vl = q.transpose(qp), k.transpose(kp), v.transpose(vp)
    s = np.matmul(ql.astype(np.float64), np.swapaxes(kl, -1, -2).astype(np.float64)) * scale
    if mask is not None:
        s = s + mask
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, vl).transpose(op)


def run(wpk, work, model, feeds, lanes=None):
    """`wpk run` on model; lanes (WPK_VECTOR_FLOATS) narrows the kernels to AVX2's or the
    portable ones."""
    env = dict(os.environ, WPK_VECTOR_FLOATS=str(lanes)) if lanes else None
    path = work / "m.onnx"
    onnx.save(model, path)
    args = [wpk, "run", str(path), "-o", str(work / "out")]
    for name, value in feeds.items():
        np.save(work / f"{name}.npy", value)
        args += ["-i", f"{name}={work / (name + '.npy')}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


def numeric_cases():
    n, h, sq, sk, d, dv = 2, 3, 70, 150, 40, 24
    bshd = [0, 2, 1, 3]
    yield ("4-D, stored [N,S,H,D], mask [1,H,1,Sk]", [n, sq, h, d], [n, sk, h, d], [n, sk, h, dv],
           [1, h, 1, sk], (bshd, bshd, bshd, bshd), 0.125)
    yield ("4-D, plain [N,H,S,D], no mask", [n, h, sq, d], [n, h, sk, d], [n, h, sk, dv], None,
           ([0, 1, 2, 3],) * 4, 0.3)
    yield ("3-D, stored [S,G,D], mask [Sq,Sk]", [sq, n * h, d], [sk, n * h, d], [sk, n * h, dv],
           [sq, sk], ([1, 0, 2],) * 4, 1.0)
    # value rows in whole 16-float vectors take the AVX-512 kernel where the CPU has it
    yield ("4-D, head size 64, stored [N,S,H,D], mask [1,H,1,Sk]", [n, sq, h, 64],
           [n, sk, h, 64], [n, sk, h, 64], [1, h, 1, sk], (bshd, bshd, bshd, bshd), 0.125)
    yield ("3-D, head sizes 48 / 32, plain, no mask", [n * h, sq, 48], [n * h, sk, 48],
           [n * h, sk, 32], None, ([0, 1, 2],) * 4, 0.2)
    # too many keys for a head's K^T on the stack: the online kernel's key blocks
    yield ("3-D, head size 64, 600 keys, plain, mask [Sq,Sk]", [2, 7, 64], [2, 600, 64],
           [2, 600, 64], [7, 600], ([0, 1, 2],) * 4, 0.125)
    # a mask constant along the keys (stride 0 there)
    yield ("4-D, head size 32, plain, mask [N,1,Sq,1]", [n, h, 21, 32], [n, h, 33, 32],
           [n, h, 33, 32], [n, 1, 21, 1], ([0, 1, 2, 3],) * 4, 0.2)
    # last key blocks of one and of three vectors
    for keys in (197, 45):
        yield (f"3-D, head size 64, {keys} keys, plain, no mask", [h, 9, 64], [h, keys, 64],
               [h, keys, 64], None, ([0, 1, 2],) * 4, 0.125)


def view_model(qkv_shape, attrs, mask_shape, out_shape):
    """One Attention node reading Q, K and V in place from one input `qkv` through views."""
    names = ["qkv", "qkv", "qkv"] + (["mask"] if mask_shape else [])
    inputs = [helper.make_tensor_value_info("qkv", TensorProto.FLOAT, qkv_shape)]
    if mask_shape:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, mask_shape))
    node = helper.make_node("Attention", names, ["y"], name="attn", domain="wpk", **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph([node], "attention_views", inputs, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                   helper.make_opsetid("wpk", 1)])


def strided(flat, view):
    """The view [offset, dims..., strides...] of the flat array, as q_view describes it."""
    r = (len(view) - 1) // 2
    dims, strides = view[1:1 + r], view[1 + r:]
    return np.lib.stride_tricks.as_strided(flat[view[0]:], dims,
                                           [s * flat.itemsize for s in strides])


def view_cases():
    """(label, qkv shape, per-operand views, mask shape, perms, scale): Q, K, V as the three
    slices of a fused projection's last axis, each split into heads."""
    # ViT at batch 1: [S, 1, 3*H*D] viewed [S, H, D], heads first; 197 keys, head size 64
    s, h, d = 197, 3, 64
    row = 3 * h * d
    views = [[i * h * d, s, h, d, row, d, 1] for i in range(3)]
    yield ("ViT-style [S,1,3HD] views, 197 keys, head size 64", [s, 1, row], views, None,
           ([1, 0, 2],) * 4, 0.125)
    # BERT at batch 2 with a padding mask: [N, S, 3*H*D] viewed [N, S, H, D]; head size 40
    n, s, h, d = 2, 37, 3, 40
    row = 3 * h * d
    views = [[i * h * d, n, s, h, d, s * row, row, d, 1] for i in range(3)]
    bshd = [0, 2, 1, 3]
    yield ("BERT-style [N,S,3HD] views, batch 2, mask [N,1,1,S]", [n, s, row], views,
           [n, 1, 1, s], (bshd,) * 4, 0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    failures = []
    with tempfile.TemporaryDirectory(prefix="wpk-attention.") as tmp:
        work = Path(tmp)
        cases = [(c, None) for c in numeric_cases()]
        # the AVX2 and portable kernels on the vector kernel's sizes
        cases += [(c, lanes) for lanes in (8, 4) for c in numeric_cases() if "64" in c[0]]
        for (label, qs, ks, vs, ms, perms, scale), lanes in cases:
            if lanes:
                label += f", {lanes}-lane kernels"
            feeds = {"q": rng.uniform(-1, 1, qs), "k": rng.uniform(-1, 1, ks),
                     "v": rng.uniform(-1, 1, vs)}
            if ms:
                feeds["mask"] = rng.uniform(-4, 0, ms)
            feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
            want = reference(feeds["q"], feeds["k"], feeds["v"], feeds.get("mask"), scale, perms)
            names = ["q_perm", "k_perm", "v_perm", "out_perm"]
            attrs = dict(zip(names, perms), scale=scale)
            model = attention_model([qs, ks, vs], attrs, ms, list(want.shape))
            proc = run(args.wpk, work, model, feeds, lanes)
            if proc.returncode != 0:
                failures.append(f"{label}: wpk run exited {proc.returncode}: {proc.stderr[-400:]}")
                continue
            got = np.load(work / "out" / "y.npy")
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            print(f"{label}: rel L2 {err:.2g}")
            if got.shape != want.shape or not err <= 1e-5:
                failures.append(f"{label}: rel L2 {err:.3g}, shape {got.shape} vs {want.shape}")

        for label, qkv_shape, views, ms, perms, scale in view_cases():
            qkv = rng.uniform(-1, 1, qkv_shape).astype(np.float32)
            feeds = {"qkv": qkv}
            if ms:
                feeds["mask"] = rng.uniform(-4, 0, ms).astype(np.float32)
            flat = qkv.reshape(-1)
            q, k, v = (strided(flat, vw) for vw in views)
            want = reference(q, k, v, feeds.get("mask"), scale, perms)
            attrs = dict(zip(["q_perm", "k_perm", "v_perm", "out_perm"], perms), scale=scale,
                         q_view=views[0], k_view=views[1], v_view=views[2])
            proc = run(args.wpk, work, view_model(qkv_shape, attrs, ms, list(want.shape)), feeds)
            if proc.returncode != 0:
                failures.append(f"{label}: wpk run exited {proc.returncode}: {proc.stderr[-400:]}")
                continue
            got = np.load(work / "out" / "y.npy")
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            print(f"{label}: rel L2 {err:.2g}")
            if got.shape != want.shape or not err <= 1e-5:
                failures.append(f"{label}: rel L2 {err:.3g}, shape {got.shape} vs {want.shape}")

        # a view reaching past its input, and one with rows not contiguous
        good = [0, 2, 5, 3, 8, 360, 72, 8, 1]
        for label, view, pattern in [
                ("view past the input", [56] + good[1:],
                 r"attribute 'k_view' reaches element 727 of input k, which has 720"),
                ("view with strided rows", good[:-1] + [2],
                 r"attribute 'k_view' has rows of stride 2")]:
            attrs = dict(q_perm=[0, 2, 1, 3], k_perm=[0, 2, 1, 3], v_perm=[0, 2, 1, 3],
                         out_perm=[0, 2, 1, 3], q_view=good, k_view=view, v_view=good)
            model = view_model([2, 5, 72], attrs, None, [2, 5, 3, 8])
            proc = run(args.wpk, work, model, {"qkv": np.zeros([2, 5, 72], np.float32)})
            ok = (proc.returncode == 1 and re.search(pattern, proc.stderr)
                  and "'attn'" in proc.stderr)
            print(f"error, {label}: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            if not ok:
                failures.append(f"error case '{label}': want exit 1 and /{pattern}/ naming 'attn'")

        bad = [("q_perm not a permutation", dict(q_perm=[0, 0, 1, 3]), None,
                r"attribute 'q_perm' is not a permutation"),
               ("k_perm moving the last dim", dict(k_perm=[0, 1, 3, 2]), None,
                r"attribute 'k_perm' moves the last dim"),
               ("mask that does not broadcast", {}, [2, 3, 5, 7],
                r"mask \[2,3,5,7\] does not broadcast")]
        shape = [2, 3, 5, 8]
        for label, attrs, ms, pattern in bad:
            model = attention_model([shape] * 3, attrs, ms, shape)
            feeds = {n: np.zeros(shape, np.float32) for n in ("q", "k", "v")}
            if ms:
                feeds["mask"] = np.zeros(ms, np.float32)
            proc = run(args.wpk, work, model, feeds)
            ok = (proc.returncode == 1 and re.search(pattern, proc.stderr)
                  and "'attn'" in proc.stderr)
            print(f"error, {label}: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            if not ok:
                failures.append(f"error case '{label}': want exit 1 and /{pattern}/ naming 'attn'")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("attention op: all cases pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
