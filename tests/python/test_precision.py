"""precision in the Python binding: InferenceSession(precision=...) and compile(precision=...,
precision_tolerance=...) against fp32 and ONNX Runtime, and the refusals."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ort_oracle import ort_run, rel_l2


def has_avx512_bf16():
    with open("/proc/cpuinfo") as f:
        return any(l.startswith("flags") and " avx512_bf16" in l for l in f)


@pytest.fixture(scope="module")
def conv16(tmp_path_factory):
    """Two 3x3 convs + Relu on 16 channels: shapes the bf16 convs take."""
    import onnx
    rng = np.random.default_rng(11)
    inits, nodes, last = [], [], "x"
    for i in range(2):
        w = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [last, f"w{i}"], [f"c{i}"], name=f"conv{i}",
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        last = f"r{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "conv16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 20, 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 20, 20])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("precision") / "conv16.onnx"
    onnx.save(model, str(path))
    return path


def test_session_bf16_against_fp32_and_ort(wpk, conv16):
    if not has_avx512_bf16():
        pytest.skip("this CPU has no avx512_bf16")
    x = np.random.default_rng(1).uniform(-1, 1, (1, 16, 20, 20)).astype(np.float32)
    ref = ort_run(str(conv16), {"x": x})[0]
    y32 = wpk.InferenceSession(conv16, db="", precision="fp32").run(None, {"x": x})[0]
    s16 = wpk.InferenceSession(conv16, db="", precision="bf16", profile=True)
    y16 = s16.run(None, {"x": x})[0]
    assert rel_l2(y32, ref) <= 1e-5
    # bf16 weights and inputs (2^-9 each), f32 accumulation: rounding, not a wrong answer
    assert 1e-5 < rel_l2(y16, ref) <= 6e-3
    assert [p["provider"] for p in s16.profile()].count("isa_bf16") == 2


def test_session_precision_refused(wpk, conv16):
    with pytest.raises(wpk.WpkError, match="unknown precision 'fp8'"):
        wpk.InferenceSession(conv16, db="", precision="fp8")
    with pytest.raises(TypeError, match="precision"):
        wpk.InferenceSession(conv16, precision=16)


def test_compile_bf16_plan(wpk, conv16, tmp_path):
    if not has_avx512_bf16():
        pytest.skip("this CPU has no avx512_bf16")
    x = np.random.default_rng(2).uniform(-1, 1, (1, 16, 20, 20)).astype(np.float32)
    plan = wpk.compile(conv16, tmp_path / "conv16.wpk", db="", precision="bf16",
                       precision_tolerance=0)
    y = wpk.InferenceSession(plan).run(None, {"x": x})[0]
    assert 1e-5 < rel_l2(y, ort_run(str(conv16), {"x": x})[0]) <= 6e-3


def test_compile_precision_refused(wpk, conv16, tmp_path):
    with pytest.raises(ValueError, match="precision_tolerance"):
        wpk.compile(conv16, tmp_path / "t.wpk", precision="bf16", precision_tolerance=2)
    with pytest.raises(wpk.WpkError, match="tf32"):
        wpk.compile(conv16, tmp_path / "t.wpk", db="", precision="tf32")
