#!/usr/bin/env python3
"""Quantizes float32 ONNX classifiers as ONNX Runtime's quantize_static writes them: QDQ format,
uint8 activations, int8 per-channel weights, calibrated (MinMax) on a few seeded random images.

    quantize_models.py MODEL.onnx OUT.onnx [--calib N]
Used by tests/quant/test_quant_models.py and bench/quantized.py; a finished OUT is kept.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class RandomImages(CalibrationDataReader):
    """N seeded images, uniform in [-1, 1) like the tests' inputs."""

    def __init__(self, input_name, shape, count, seed=1):
        rng = np.random.default_rng(seed)
        self.batches = iter([{input_name: (rng.random(shape, dtype=np.float32) * 2 - 1)}
                             for _ in range(count)])

    def get_next(self):
        return next(self.batches, None)


def quantize(src, dst, calib=4):
    if os.path.exists(dst):
        return dst
    model = onnx.load(src)
    inp = model.graph.input[0]
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    pre = dst + ".pre.onnx"
    tmp = dst + ".tmp.onnx"
    quant_pre_process(src, pre, skip_symbolic_shape=True)
    quantize_static(pre, tmp, RandomImages(inp.name, shape, calib),
                    quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)
    os.replace(tmp, dst)
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--calib", type=int, default=4, help="calibration images (default 4)")
    args = ap.parse_args()
    print(quantize(args.model, args.out, args.calib))
    return 0


if __name__ == "__main__":
    sys.exit(main())
