#!/usr/bin/env python3
"""Checks `wpk run` against ONNX Runtime on transformer models exported by PyTorch
(export_models.py): rel L2 <= 1e-4 at batch 1 and batch 4. For the encoders it also checks that
the transformer rewrites fired on the bound graph: one wpk::Attention per layer, two
LayerNormalizations per layer, no Softmax left, in a session on the model and in the plan
`wpk compile --batch 1` writes (which binds the symbolic batch after optimizing the graph, as a
session does, and must run the same rewrites then). Without a Python that has torch the test is
skipped (exit 77), or fails when WPK_REQUIRE_TORCH=1.
    test_transformers.py [--models a,b] [--wpk PATH] [--dir DIR] [--threads N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))
import compare_ort  # noqa: E402

FAST = ["transformer_encoder", "bert_small"]
SLOW = ["bert_base4", "vit_b_16", "swin_t"]
# model -> (Attention nodes, LayerNormalization nodes) the rewrites must leave at batch 1
FUSED = {"transformer_encoder": (2, 4), "bert_small": (2, 4), "bert_base4": (4, 8),
         "vit_b_16": (12, 25), "swin_t": (12, 29)}
BATCHES = [1, 4]
SKIP = 77


def export_missing(names, out_dir, torch_python):
    """Exports the models not yet in out_dir; False when no Python with torch is there."""
    missing = [n for n in names if not (out_dir / f"{n}.onnx").exists()]
    if not missing:
        return True
    needs = "import torch, torchvision" if set(missing) & {"vit_b_16", "swin_t"} else "import torch"
    if subprocess.run([torch_python, "-c", needs], capture_output=True).returncode != 0:
        return False
    subprocess.run([torch_python, str(HERE / "export_models.py"), str(out_dir), "--models",
                    ",".join(missing)], check=True, stderr=subprocess.DEVNULL)
    return True


def fused_counts(wpk, target):
    """(Attention, LayerNormalization, Softmax) nodes `wpk bench` runs at batch 1 on a model or a
    plan, or the error."""
    batch = [] if str(target).endswith(".wpk") else ["--batch", "1"]
    proc = subprocess.run([wpk, "bench", str(target), *batch, "--iters", "1", "--warmup", "0",
                           "--top", "0", "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        return proc.stderr.strip()[-800:]
    ops = [n["op"] for n in json.loads(proc.stdout)["nodes"]]
    return ops.count("Attention"), ops.count("LayerNormalization"), ops.count("Softmax")


def compiled_counts(wpk, model):
    """fused_counts of the plan `wpk compile --batch 1` (no records) writes, or the error."""
    with tempfile.TemporaryDirectory(prefix="wpk-transformers-plan.") as tmp:
        plan = Path(tmp) / "model.wpk"
        proc = subprocess.run([wpk, "compile", str(model), "--db", "", "--batch", "1", "-o",
                               str(plan)], capture_output=True, text=True)
        if proc.returncode != 0:
            return proc.stderr.strip()[-800:]
        return fused_counts(wpk, plan)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(FAST), help="comma-separated subset of "
                    + ", ".join(FAST + SLOW))
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-transformers"),
                    help="where the exported models are kept (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2, help="threads for wpk and ONNX Runtime")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torch")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in FAST + SLOW]
    if unknown:
        sys.exit("test_transformers: unknown model(s): " + ", ".join(unknown))
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"test_transformers: no wpk binary at {args.wpk} (use --wpk)")
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not export_missing(names, out_dir, args.torch_python):
        print(f"SKIP: {args.torch_python} cannot import torch to export the models")
        return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP

    failures = []
    for name in names:
        model = out_dir / f"{name}.onnx"
        for batch in BATCHES:
            result = compare_ort.compare(model, args.wpk, batch=batch, threads=args.threads)
            print(compare_ort.describe(result).replace(model.name, f"{name} (batch {batch})", 1),
                  flush=True)
            if not result.ok:
                failures.append(f"{name} batch {batch}")
        if name in FUSED:
            want = FUSED[name] + (0,)
            for what, counts in (("session", fused_counts(args.wpk, model)),
                                 ("compiled plan", compiled_counts(args.wpk, model))):
                print(f"  {name}: Attention, LayerNormalization, Softmax nodes at batch 1 "
                      f"({what}): {counts}, want {want}")
                if counts != want:
                    failures.append(f"{name} rewrites ({what})")
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print(f"all {len(names)} model(s) match ONNX Runtime at batches {BATCHES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
