#!/usr/bin/env python3
"""Exports torchvision classifiers the way issue 3's done-when checks ask for them: unfolded, so the
graph optimizer has everything to do. Random weights (seeded), eval mode, opset 13, and
    torch.onnx.export(..., training=TrainingMode.PRESERVE, do_constant_folding=False)
which keeps every BatchNormalization node and the Shape/Gather/Unsqueeze/Concat chains PyTorch
writes around Flatten and Reshape. BatchNorm statistics are calibrated on random inputs (see
tests/torchvision/export_models.py) so the logits depend on the input.

Runs under Debian's /usr/bin/python3 (torch 1.13 + torchvision 0.14, no onnx package needed):
    export_unfolded.py OUTDIR [--models resnet50,mobilenet_v2]
writes OUTDIR/<name>_unfolded.onnx; one that already exists is kept.
"""
import argparse
import os
import sys
import time

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torchvision"))
from export_models import calibrate_batchnorm  # noqa: E402

MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "densenet121"]


def export(name, out_dir):
    path = os.path.join(out_dir, f"{name}_unfolded.onnx")
    if os.path.exists(path):
        return path, 0.0
    start = time.perf_counter()
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    calibrate_batchnorm(model)  # leaves the model in eval mode
    tmp = path + ".tmp"  # an interrupted export must not look finished
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=13,
                          input_names=["input"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    os.replace(tmp, path)
    return path, time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit("export_unfolded: unknown model(s): " + ", ".join(unknown))
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        path, seconds = export(name, args.out_dir)
        print(f"{name}: {'exported in %.1f s' % seconds if seconds else 'already there'} -> {path}",
              flush=True)


if __name__ == "__main__":
    main()
