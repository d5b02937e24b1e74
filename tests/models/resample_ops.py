#!/usr/bin/env python3
"""Checks the indexing, movement and resampling ops where ONNX's node cases leave gaps against
ONNX Runtime: Upsample (opset 7 attribute and opset 9 input forms), Resize-10, the Resize forms
exporters emit (PyTorch's bilinear and nearest, tf_half_pixel_for_nn, trilinear, sizes at a
segmentation head's size), the movement and scatter ops inside a graph with constant index
tensors, and NonZero / Range on constants (folded). Each model runs on wpk's default backend
and on the reference backend, at -O0 and -O3; rel L2 <= 1e-4 per output. Bad attributes must be
refused with exit 1 and a message naming the node and attribute.
    resample_ops.py [--wpk PATH] [--keep DIR]
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort  # noqa: E402

F = TensorProto.FLOAT


def const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def model(name, opset, nodes, x_shape, inits=(), x_type=F, check=True):
    for i, node in enumerate(nodes):  # messages name the node
        node.name = node.name or f"{name}_{i}"
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", x_type, x_shape)],
                              [helper.make_tensor_value_info("y", x_type, None)], list(inits))
    if opset < 9:  # IR version 3 lists initializers among the graph inputs
        graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                           for t in inits)
    opsets = [helper.make_opsetid("", opset)]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="wpk-resample-ops",
                          ir_version=helper.find_min_ir_version_for(opsets))
    if check:  # the must-fail models are left as they are
        m = onnx.shape_inference.infer_shapes(m)  # fills in the output's shape where it can
        onnx.checker.check_model(m)
    return m


def resize(name, opset, x_shape, scales=None, sizes=None, check=True, **attrs):
    """A Resize with constant scales or sizes (opset 10: X, scales)."""
    inits, inputs = [], ["x"]
    if opset == 10:
        inits.append(const("scales", scales))
        inputs.append("scales")
    else:  # opset 11 needs a roi (exporters write an empty one)
        inputs += ["roi" if opset == 11 else "", "scales" if scales else ""]
        if opset == 11:
            inits.append(const("roi", np.zeros(0)))
        if scales:
            inits.append(const("scales", scales))
        elif opset == 11:
            inits.append(const("scales", np.zeros(0)))
            inputs[-1] = "scales"
        if sizes:
            inputs.append("sizes")
            inits.append(const("sizes", sizes, np.int64))
    return model(name, opset, [helper.make_node("Resize", inputs, ["y"], name=name, **attrs)],
                 x_shape, inits, check=check)


def cases():
    X = [1, 3, 7, 9]
    yield model("upsample_nearest_attr_opset7", 7, [helper.make_node(
        "Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])], X)
    yield model("upsample_linear_attr_opset7", 7, [helper.make_node(
        "Upsample", ["x"], ["y"], mode="linear", scales=[1.0, 1.0, 2.0, 2.5])], X)
    yield model("upsample_nearest_opset9", 9, [helper.make_node(
        "Upsample", ["x", "scales"], ["y"], mode="nearest")], X, [const("scales", [1, 1, 3, 2])])
    yield resize("resize_nearest_down_opset10", 10, X, scales=[1, 1, 0.5, 0.75])
    yield resize("resize_linear_opset10", 10, X, scales=[1, 1, 2, 1.5], mode="linear")
    # PyTorch's F.interpolate exports
    yield resize("resize_bilinear_pytorch_half_pixel", 13, [1, 21, 65, 65],
                 sizes=[1, 21, 520, 520], mode="linear",
                 coordinate_transformation_mode="pytorch_half_pixel")
    yield resize("resize_bilinear_half_pixel", 13, [2, 4, 28, 28], sizes=[2, 4, 224, 224],
                 mode="linear")
    yield resize("resize_bilinear_align_corners", 13, X, scales=[1, 1, 2, 2], mode="linear",
                 coordinate_transformation_mode="align_corners")
    yield resize("resize_nearest_asymmetric_floor", 11, X, scales=[1, 1, 2, 2],
                 coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    yield resize("resize_nearest_tf_half_pixel", 11, X, scales=[1, 1, 1.5, 2.5],
                 coordinate_transformation_mode="tf_half_pixel_for_nn")
    yield resize("resize_cubic_downscale", 13, [1, 2, 16, 20], sizes=[1, 2, 9, 7], mode="cubic")
    yield resize("resize_trilinear", 13, [1, 2, 4, 5, 6], sizes=[1, 2, 8, 7, 12],
                 mode="linear", coordinate_transformation_mode="align_corners")
    yield resize("resize_linear_antialias", 18, [1, 2, 20, 24], sizes=[1, 2, 7, 5],
                 mode="linear", antialias=1)
    # indexing with constant index tensors, as transformer exports hold them
    D = [2, 6, 5]
    yield model("scatternd_add_rows", 16, [helper.make_node(
        "ScatterND", ["x", "idx", "upd"], ["y"], reduction="add")], D,
        [const("idx", [[1, 4], [0, 0], [1, 4]], np.int64), const("upd", np.ones((3, 5)) * 0.5)])
    yield model("gathernd_batch_dims", 13, [helper.make_node(
        "GatherND", ["x", "idx"], ["y"], batch_dims=1)], D,
        [const("idx", [[[5], [0]], [[2], [2]]], np.int64)])
    yield model("gather_elements_axis2", 13, [helper.make_node(
        "GatherElements", ["x", "idx"], ["y"], axis=2)], D,
        [const("idx", np.arange(2 * 6 * 3).reshape(2, 6, 3) % 5, np.int64)])
    yield model("scatter_elements_max", 18, [helper.make_node(
        "ScatterElements", ["x", "idx", "upd"], ["y"], axis=1, reduction="max")], D,
        [const("idx", [[[0, 5, 1, 1, 2]], [[3, 3, 3, 0, 0]]], np.int64),
         const("upd", np.linspace(-1, 1, 10).reshape(2, 1, 5))])
    yield model("tile_then_trilu", 14, [
        helper.make_node("Tile", ["x", "rep"], ["t"]),
        helper.make_node("Trilu", ["t", "k"], ["y"], upper=0)], D,
        [const("rep", [1, 2, 3], np.int64), const("k", 1, np.int64)])
    yield model("depth_to_space_crd", 13, [helper.make_node(
        "DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], [1, 8, 5, 3])
    yield model("space_to_depth_roundtrip", 13, [
        helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=3),
        helper.make_node("DepthToSpace", ["s"], ["y"], blocksize=3)], [2, 2, 6, 9])
    # NonZero and Range on constants fold to index tensors for the rest of the graph
    yield model("nonzero_const_gather", 13, [
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
        helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)], D,
        [const("mask", [1, 0, 1, 1, 0, 1], np.bool_), const("flat", [-1], np.int64)])
    yield model("range_const_add", 13, [
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"])], D,
        [const("start", 0.5), const("limit", 3.0), const("delta", 0.5)])


# must-fail: (name, model, text the message must hold)
def bad_cases():
    X = [1, 2, 4, 4]
    yield ("resize_bad_mode", resize("resize_bad_mode", 13, X, scales=[1, 1, 2, 2],
                                     mode="bicubic", check=False), "attribute 'mode' is 'bicubic'")
    yield ("resize_bad_coordinate_mode", resize(
        "resize_bad_coordinate_mode", 13, X, scales=[1, 1, 2, 2],
        coordinate_transformation_mode="corner", check=False),
        "'coordinate_transformation_mode' is 'corner'")
    yield ("resize_scales_count", resize("resize_scales_count", 13, X, scales=[2, 2],
                                                check=False),
           "'scales' has 2 values for 4 axes")
    yield ("depth_to_space_bad_mode", model("depth_to_space_bad_mode", 13, [helper.make_node(
        "DepthToSpace", ["x"], ["y"], blocksize=2, mode="RCD")], [1, 8, 2, 2], check=False),
        "attribute 'mode' is 'RCD'")
    yield ("scatternd_bad_reduction", model("scatternd_bad_reduction", 18, [helper.make_node(
        "ScatterND", ["x", "idx", "upd"], ["y"], reduction="avg")], [4, 3],
        [const("idx", [[1]], np.int64), const("upd", np.ones((1, 3)))], check=False),
        "attribute 'reduction' is 'avg'")
    yield ("trilu_bad_upper", model("trilu_bad_upper", 14, [helper.make_node(
        "Trilu", ["x"], ["y"], upper=2)], [3, 3], check=False),
        "attribute 'upper' is 2")


def wpk_at_level(wpk, level, directory):
    path = os.path.join(directory, f"wpk-O{level}")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(os.path.abspath(wpk))} "$@" -O{level}\n')
    os.chmod(path, 0o755)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(compare_ort.REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--keep", help="write the models here and keep them (default: a temp dir)")
    args = ap.parse_args()
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"resample_ops: no wpk binary at {args.wpk} (use --wpk)")
    start = time.perf_counter()
    failures, runs = [], 0
    with tempfile.TemporaryDirectory(prefix="wpk-resample.") as tmp:
        out_dir = Path(args.keep or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = {}
        for m in cases():
            paths[m.graph.name] = out_dir / (m.graph.name + ".onnx")
            onnx.save(m, str(paths[m.graph.name]))
        for level in (0, 3):
            wpk = wpk_at_level(args.wpk, level, tmp)
            for backend in (None, "ref"):
                for name, path in paths.items():
                    result = compare_ort.compare(path, wpk, backend=backend)
                    runs += 1
                    label = f"{name} -O{level}" + (f" --backend {backend}" if backend else "")
                    print(compare_ort.describe(result).replace(path.name, label, 1), flush=True)
                    if not result.ok:
                        failures.append(label)
        for name, m, text in bad_cases():
            path = out_dir / (name + ".onnx")
            onnx.save(m, str(path))
            proc = subprocess.run([args.wpk, "run", str(path), "-o", str(out_dir / "bad")],
                                  capture_output=True, text=True, timeout=120)
            runs += 1
            ok = proc.returncode == 1 and text in proc.stderr and f"node '{name}" in proc.stderr
            print(f"{name}: exit {proc.returncode}: {proc.stderr.strip()}"
                  f"{'' if ok else f'  FAIL (expected exit 1 and {text!r})'}", flush=True)
            if not ok:
                failures.append(name)
    print(f"\nresample_ops: {runs - len(failures)} passed, {len(failures)} failed"
          f"{': ' + ', '.join(failures) if failures else ''} ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
