#!/usr/bin/env python3
"""Exports torchvision classifiers (random weights, eval mode, opset 13) to ONNX for the model tests.
BatchNorm statistics are calibrated on random inputs so that the logits depend on the input.

Runs under Debian's /usr/bin/python3 (torch 1.13 + torchvision 0.14, no onnx package needed):
    export_models.py OUTDIR [--models resnet18,mobilenet_v2]
A model whose OUTDIR/<name>.onnx already exists is skipped.
"""
import argparse
import os
import sys
import time

import torch
import torchvision

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1", "densenet121", "googlenet",
          "shufflenet_v2_x1_0", "efficientnet_b0", "mnasnet1_0", "regnet_y_400mf", "convnext_tiny"]

# Models exported with a symbolic batch axis "N", so the tests can run them at another batch.
DYNAMIC_BATCH = {"resnet18"}

# Constructor arguments beyond weights=None: googlenet's auxiliary heads only matter in training,
# and init_weights=True names the initialization weights=None picks anyway (without a FutureWarning).
EXTRA_ARGS = {"googlenet": {"aux_logits": False, "init_weights": True}}


def calibrate_batchnorm(model):
    """Sets BatchNorm running statistics from random inputs.

    With fresh weights and the default statistics (mean 0, var 1) activations shrink or grow
    layer by layer until some models' logits no longer depend on the input (googlenet's are
    constant), and a comparison of such outputs would prove nothing. Statistics measured on
    inputs like the tests' (uniform in [-1, 1)) keep every layer normalized."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batches
    if norms:
        model.train()
        with torch.no_grad():
            for _ in range(2):
                model(torch.rand(4, 3, 224, 224) * 2 - 1)
    model.eval()


def export(name, out_dir):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        return path, 0.0
    start = time.perf_counter()
    torch.manual_seed(0)  # random weights, but the same ones every time
    model = getattr(torchvision.models, name)(weights=None, **EXTRA_ARGS.get(name, {}))
    calibrate_batchnorm(model)
    dynamic = {"input": {0: "N"}, "logits": {0: "N"}} if name in DYNAMIC_BATCH else None
    tmp = path + ".tmp"  # an interrupted export must not look finished
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=13,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes=dynamic, do_constant_folding=True)
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
        sys.exit("export_models: unknown model(s): " + ", ".join(unknown))
    os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        path, seconds = export(name, args.out_dir)
        print(f"{name}: {'exported in %.1f s' % seconds if seconds else 'already there'} -> {path}",
              flush=True)


if __name__ == "__main__":
    main()
