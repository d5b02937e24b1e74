#!/usr/bin/env python3
"""Must-fail tests of the wpk CLI: every bad model, input or argument exits 1 with a
`wpk: error: ` message that names the cause and the place. Plus the positive contract of
`wpk run` without -i: loadable .npy outputs of the right shape, reproducible for a seed.
    test_cli_errors.py [--wpk PATH] [unittest options]
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
WPK = str(REPO / "build/wpk")  # replaced by --wpk
INPUT, OUTPUT = "data_in", "scores:0"  # the output name needs sanitizing: scores_0.npy
# one-input float ops, two of which (absent from ops.def) make the unsupported-op model
UNSUPPORTED_CANDIDATES = ["Hardmax", "LpNormalization", "Shrink", "LogSoftmax", "Celu", "ThresholdedRelu"]


def supported_ops():
    return set(re.findall(r'^X\(\s*\w+\s*,\s*""\s*,\s*"([^"]+)"', (REPO / "src/ir/ops.def").read_text(), re.M))


def small_model():
    """Conv -> Relu -> GlobalAveragePool -> Flatten on a 1x3x8x8 input, seeded weights."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "conv_w")
    nodes = [helper.make_node("Conv", [INPUT, "conv_w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], [OUTPUT], name="flatten")]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [1, 4])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def unsupported_model(op_a, op_b):
    """x -> op_a (node a1) -> Relu -> op_b (node b1) -> op_a (node a2) -> y."""
    nodes = [helper.make_node(op_a, ["x"], ["t1"], name="a1"),
             helper.make_node("Relu", ["t1"], ["t2"], name="relu"),
             helper.make_node(op_b, ["t2"], ["t3"], name="b1"),
             helper.make_node(op_a, ["t3"], ["y"], name="a2")]
    graph = helper.make_graph(nodes, "unsupported", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


SANITIZER_REPORT = re.compile(r"Sanitizer|runtime error:")  # an ASan/UBSan build's findings


def wpk(*args):
    return subprocess.run([WPK, *map(str, args)], capture_output=True, text=True, timeout=120)


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="wpk-cli."))
        cls.model = cls.tmp / "small.onnx"
        onnx.save(small_model(), cls.model)
        cls.good_input = cls.tmp / "good.npy"
        np.save(cls.good_input, np.random.default_rng(1).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def write(self, name, data):
        path = self.tmp / name
        path.write_bytes(data)
        return path

    def assert_user_error(self, proc, *patterns):
        """Exit 1, stderr starts with `wpk: error: ` and matches every pattern (regex, any case)."""
        self.assertEqual(proc.returncode, 1, f"expected exit 1, got {proc.returncode}; stderr: {proc.stderr!r}")
        self.assertNotRegex(proc.stderr, SANITIZER_REPORT)
        self.assertTrue(proc.stderr.startswith("wpk: error: "), f"stderr: {proc.stderr!r}")
        for pattern in patterns:
            self.assertRegex(proc.stderr, re.compile(pattern, re.I))

    # -- bad model files --

    def test_missing_model(self):
        path = self.tmp / "nosuch.onnx"
        self.assert_user_error(wpk("run", path), re.escape(str(path)), "no such file|not found|cannot open|does not exist")

    def test_empty_file(self):
        path = self.write("empty.onnx", b"")
        self.assert_user_error(wpk("run", path), re.escape(str(path)), "empty")

    def test_truncated_model(self):
        data = self.model.read_bytes()
        path = self.write("truncated.onnx", data[: len(data) // 2])
        self.assert_user_error(wpk("run", path), re.escape(str(path)), "parse|truncat|malformed|corrupt|not an ONNX model")

    def test_random_bytes(self):
        path = self.write("random.onnx", np.random.default_rng(0).bytes(4096))
        self.assert_user_error(wpk("info", path), re.escape(str(path)), "parse|malformed|corrupt|not an ONNX model")

    def test_tensor_proto_is_not_a_model(self):
        tensor = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
        path = self.write("tensor.onnx", tensor.SerializeToString())
        self.assert_user_error(wpk("run", path), re.escape(str(path)), "not an ONNX model|no graph|parse|malformed")

    # -- unsupported ops: every type and node listed at once --

    def unsupported_pair(self):
        missing = [op for op in UNSUPPORTED_CANDIDATES if op not in supported_ops()]
        if len(missing) < 2:
            self.skipTest("fewer than two candidate ops are unsupported")
        path = self.tmp / "unsupported.onnx"
        onnx.save(unsupported_model(*missing[:2]), path)
        return path, missing[:2]

    def check_unsupported(self, command):
        path, (op_a, op_b) = self.unsupported_pair()
        proc = wpk(command, path)
        self.assert_user_error(proc, "unsupported op", rf"\b{op_a}\b", rf"\b{op_b}\b", r"\ba1\b", r"\ba2\b", r"\bb1\b")
        self.assertNotRegex(proc.stderr, r"\brelu\b", "a supported node is listed as unsupported")

    def test_unsupported_ops_info(self):
        self.check_unsupported("info")

    def test_unsupported_ops_run(self):
        self.check_unsupported("run")

    # -- bad inputs --

    def test_wrong_input_name(self):
        self.assert_user_error(wpk("run", self.model, "-i", f"nosuch={self.good_input}", "-o", self.tmp / "o"),
                               r"\bnosuch\b", INPUT)

    def test_wrong_input_shape(self):
        path = self.tmp / "small_shape.npy"
        np.save(path, np.zeros((1, 3, 4, 4), np.float32))
        self.assert_user_error(wpk("run", self.model, "-i", f"{INPUT}={path}", "-o", self.tmp / "o"),
                               INPUT, r"1,\s*3,\s*4,\s*4")

    def test_wrong_input_dtype(self):
        path = self.tmp / "double.npy"
        np.save(path, np.zeros((1, 3, 8, 8), np.float64))
        self.assert_user_error(wpk("run", self.model, "-i", f"{INPUT}={path}", "-o", self.tmp / "o"),
                               INPUT, "float64|double")

    def test_garbage_npy(self):
        path = self.write("garbage.npy", b"\x93NUMPY" + np.random.default_rng(2).bytes(200))
        self.assert_user_error(wpk("run", self.model, "-i", f"{INPUT}={path}", "-o", self.tmp / "o"),
                               re.escape(str(path)))

    def test_missing_npy(self):
        path = self.tmp / "missing.npy"
        self.assert_user_error(wpk("run", self.model, "-i", f"{INPUT}={path}", "-o", self.tmp / "o"),
                               re.escape(str(path)), "no such file|not found|cannot open|does not exist")

    # -- bad command lines --

    def test_bad_option(self):
        self.assert_user_error(wpk("run", self.model, "--bogus"), "--bogus")

    def test_bad_option_value(self):
        self.assert_user_error(wpk("run", self.model, "--threads", "many"), "--threads", "many")

    def test_unknown_command(self):
        self.assert_user_error(wpk("frobnicate", self.model), "frobnicate")

    # -- the positive contract --

    def run_random(self, seed, out_name):
        out_dir = self.tmp / out_name
        proc = wpk("run", self.model, "-o", out_dir, "--seed", seed)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotRegex(proc.stderr, SANITIZER_REPORT)
        return proc, out_dir / "scores_0.npy"

    def test_run_without_inputs_writes_npy(self):
        proc, path = self.run_random(7, "out_a")
        self.assertIn(f"output {OUTPUT}: [1, 4] float32 -> ", proc.stdout)
        self.assertIn(str(path), proc.stdout)
        self.assertRegex(proc.stdout, r"(?m)^latency: [0-9.]+ ms$")
        out = np.load(path)
        self.assertEqual((out.shape, out.dtype), ((1, 4), np.float32))
        self.assertTrue(np.isfinite(out).all())

    def test_same_seed_same_output(self):
        _, first = self.run_random(7, "seed7_a")
        _, again = self.run_random(7, "seed7_b")
        _, other = self.run_random(8, "seed8")
        self.assertEqual(first.read_bytes(), again.read_bytes())
        self.assertFalse(np.array_equal(np.load(first), np.load(other)), "seed 8 gave the same output as seed 7")

    def test_bad_elementwise_nodes(self):
        """A bad attribute or operand of the elementwise ops is refused naming node, op and cause."""
        cases = [("Mod", {"fmod": 2}, TensorProto.FLOAT, 2, "'fmod' is 2"),
                 ("Elu", {"alpha": "x"}, TensorProto.FLOAT, 1, "'alpha' must be a float"),
                 ("IsInf", {"detect_negative": 3}, TensorProto.FLOAT, 1, "'detect_negative' must be 0 or 1"),
                 ("Where", {}, TensorProto.FLOAT, 3, "'condition' has dtype float32"),
                 ("And", {}, TensorProto.FLOAT, 2, "takes bool tensors"),
                 ("Sin", {}, TensorProto.INT32, 1, "dtype int32")]
        for op, attrs, dtype, nin, cause in cases:
            names = [f"x{i}" for i in range(nin)]
            graph = helper.make_graph([helper.make_node(op, names, ["y"], name="bad_node", **attrs)], "bad",
                                      [helper.make_tensor_value_info(n, dtype, [2, 3]) for n in names],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
            path = self.tmp / f"bad_{op}.onnx"
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
            with self.subTest(op=op):
                self.assert_user_error(wpk("run", path), "bad_node", rf"\({op}\)", re.escape(cause))

    def test_info(self):
        proc = wpk("info", self.model)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for word in (INPUT, OUTPUT, "Conv", "Relu", "GlobalAveragePool", "Flatten"):
            self.assertIn(word, proc.stdout)


def main():
    global WPK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=WPK, help="the wpk binary")
    args, rest = ap.parse_known_args()
    WPK = args.wpk
    if not Path(WPK).is_file():
        sys.exit(f"test_cli_errors: no wpk binary at {WPK} (use --wpk)")
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
