#!/usr/bin/env python3
"""Exports torchvision segmentation models (random weights, BatchNorm calibrated, eval mode,
opset 14, symbolic batch "N") to ONNX for test_segmentation.py; the model's "out" map is the
output. Their heads end in a bilinear Resize back to the input's size.

Runs under Debian's /usr/bin/python3 (torch 1.13 + torchvision 0.14):
    export_segmentation.py OUTDIR [--models lraspp_mobilenet_v3_large,fcn_resnet50]
A model whose OUTDIR/<name>.onnx already exists is skipped.
"""
import argparse
import os
import sys

import torch
from torchvision.models import segmentation

from export_models import calibrate_batchnorm

MODELS = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"]


class OutMap(torch.nn.Module):
    """The model's "out" entry alone (the exporter takes tensors, not a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def export(name, out_dir):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        return path
    torch.manual_seed(0)
    kwargs = {} if name.startswith("lraspp") else {"aux_loss": False}
    model = OutMap(getattr(segmentation, name)(weights=None, weights_backbone=None, **kwargs))
    calibrate_batchnorm(model)
    tmp = path + ".tmp"  # an interrupted export must not look finished
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=14,
                          input_names=["input"], output_names=["out"],
                          dynamic_axes={"input": {0: "N"}, "out": {0: "N"}},
                          do_constant_folding=True)
    os.replace(tmp, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit("export_segmentation: unknown model(s): " + ", ".join(unknown))
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        print(f"{name} -> {export(name, args.out_dir)}", flush=True)


if __name__ == "__main__":
    main()
