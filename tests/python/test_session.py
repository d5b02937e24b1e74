"""wpk.InferenceSession on small models against ONNX Runtime: NodeArgs, outputs by name, symbolic
batch, compiled plans, bad input (each error's class and the name it gives), non-contiguous and
converted inputs, and several Python threads at once."""
import os
import sys
import threading
import time

import numpy as np
import pytest

from ort_oracle import ort_run, rel_l2

TOL = 1e-4


def random_input(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def resnet_like(wpk, model_dir):
    return wpk.InferenceSession(model_dir / "resnet_like.onnx")


def test_node_args(resnet_like):
    (x,) = resnet_like.get_inputs()
    (y,) = resnet_like.get_outputs()
    assert (x.name, x.shape, x.type) == ("input", ["N", 3, 64, 64], "tensor(float)")
    assert (y.name, y.shape, y.type) == ("logits", ["N", 10], "tensor(float)")
    assert not resnet_like.is_plan and resnet_like.get_providers() == ["cpu"]


@pytest.mark.parametrize("batch", [1, 2])
def test_matches_onnxruntime(resnet_like, model_dir, batch):
    x = random_input((batch, 3, 64, 64), batch)
    (y,) = resnet_like.run(None, {"input": x})
    (expected,) = ort_run(model_dir / "resnet_like.onnx", {"input": x})
    assert y.shape == (batch, 10) and y.dtype == np.float32
    assert rel_l2(y, expected) <= TOL
    # outputs are the caller's: a later run does not change them
    kept = y.copy()
    resnet_like.run(None, {"input": random_input((batch, 3, 64, 64), 99)})
    assert np.array_equal(y, kept)


def test_outputs_by_name_and_converted_inputs(resnet_like, model_dir):
    x = random_input((2, 3, 64, 64), 5)
    (expected,) = ort_run(model_dir / "resnet_like.onnx", {"input": x})
    (by_name,) = resnet_like.run(["logits"], {"input": x})
    assert rel_l2(by_name, expected) <= TOL
    assert resnet_like.run([], {"input": x}) == []
    # non-contiguous views and nested lists are converted, with the same answer
    wide = np.zeros((2, 3, 64, 128), dtype=np.float32)
    wide[..., ::2] = x
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    (y,) = resnet_like.run(None, {"input": strided})
    assert rel_l2(y, expected) <= TOL
    fortran = np.asfortranarray(x)
    (y,) = resnet_like.run(None, {"input": fortran})
    assert rel_l2(y, expected) <= TOL
    (y,) = resnet_like.run(None, {"input": x.astype(">f4")})
    assert rel_l2(y, expected) <= TOL
    (y,) = resnet_like.run(None, {"input": x.tolist()})
    assert rel_l2(y, expected) <= TOL
    # what run hands to the C session: the caller's own array when it can (no copy in Python)
    from wpk.session import _as_input
    arg = resnet_like.get_inputs()[0]
    assert _as_input(arg, x) is x
    assert _as_input(arg, strided) is not strided


def test_bad_input(wpk, resnet_like, model_dir, tmp_path):
    x = random_input((1, 3, 64, 64), 1)
    with pytest.raises(FileNotFoundError, match="no_such.onnx"):
        wpk.InferenceSession(tmp_path / "no_such.onnx")
    with pytest.raises(ValueError, match="does not exist"):
        wpk.InferenceSession(str(tmp_path / "no_such.onnx"))
    with pytest.raises(KeyError, match="'image'.*'input'"):
        resnet_like.run(None, {"image": x})
    with pytest.raises(ValueError, match="'input' is missing"):
        resnet_like.run(None, {})
    with pytest.raises(KeyError, match="'probs'"):
        resnet_like.run(["probs"], {"input": x})
    with pytest.raises(ValueError, match=r"'input' expects dim 2 to be 64"):
        resnet_like.run(None, {"input": random_input((1, 3, 32, 64), 1)})
    with pytest.raises(ValueError, match="'input' expects 4 dims"):
        resnet_like.run(None, {"input": x[0]})
    with pytest.raises(TypeError, match=r"'input' expects tensor\(float\).*float64"):
        resnet_like.run(None, {"input": x.astype(np.float64)})
    with pytest.raises(TypeError, match="'input'"):
        resnet_like.run(None, {"input": [["a"]]})
    with pytest.raises(TypeError, match="input_feed must be a dict"):
        resnet_like.run(None, [x])
    with pytest.raises(ValueError, match="backend"):
        wpk.InferenceSession(model_dir / "resnet_like.onnx", backend="tpu")
    with pytest.raises(ValueError, match="providers"):
        wpk.InferenceSession(model_dir / "resnet_like.onnx",
                             providers=["TensorrtExecutionProvider"])
    with pytest.raises(ValueError, match="threads"):
        wpk.InferenceSession(model_dir / "resnet_like.onnx", threads=0)
    # what wpk itself refuses: WpkError with its own message naming the file
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model at all" * 8)
    with pytest.raises(wpk.WpkError, match="garbage.onnx") as err:
        wpk.InferenceSession(garbage)
    assert isinstance(err.value, RuntimeError) and err.value.status.startswith("WPK_ERR_")
    # what the C library refuses in a run (a batch of 0 here): WpkError naming the model, and
    # the session still works
    with pytest.raises(wpk.WpkError, match="resnet_like.onnx"):
        resnet_like.run(None, {"input": np.zeros((0, 3, 64, 64), np.float32)})
    (y,) = resnet_like.run(None, {"input": x})
    assert rel_l2(y, ort_run(model_dir / "resnet_like.onnx", {"input": x})[0]) <= TOL


def test_compiled_plan(wpk, model_dir, tmp_path):
    plan = tmp_path / "resnet_like.wpk"
    assert wpk.compile(model_dir / "resnet_like.onnx", plan, db="", batch=2) == str(plan)
    sess = wpk.InferenceSession(plan)
    assert sess.is_plan
    (x,) = sess.get_inputs()
    assert (x.name, x.shape, x.type) == ("input", [2, 3, 64, 64], "tensor(float)")
    assert [(o.name, o.shape) for o in sess.get_outputs()] == [("logits", [2, 10])]
    inp = random_input((2, 3, 64, 64), 11)
    (y,) = sess.run(None, {"input": inp})
    (expected,) = ort_run(model_dir / "resnet_like.onnx", {"input": inp})
    assert rel_l2(y, expected) <= TOL
    with pytest.raises(ValueError, match="'input' expects dim 0 to be 2"):
        sess.run(None, {"input": random_input((1, 3, 64, 64), 0)})
    damaged = tmp_path / "damaged.wpk"
    damaged.write_bytes(plan.read_bytes()[: os.path.getsize(plan) // 2])
    with pytest.raises(wpk.WpkError, match="damaged.wpk"):
        wpk.InferenceSession(damaged)
    with pytest.raises(FileNotFoundError):
        wpk.compile(model_dir / "missing.onnx", tmp_path / "x.wpk")
    with pytest.raises(ValueError, match="target"):
        wpk.compile(model_dir / "resnet_like.onnx", tmp_path / "x.wpk", target="tpu")


def test_threads_share_and_own_sessions(wpk, resnet_like, model_dir):
    """Four threads, each several runs with its own inputs, on one shared session (serialized)
    and on a session of its own; every result checked against ONNX Runtime."""
    inputs = [random_input((2, 3, 64, 64), 100 + k) for k in range(8)]
    expected = [ort_run(model_dir / "resnet_like.onnx", {"input": x})[0] for x in inputs]
    # ONNX Runtime's spelling of the backend works too
    own = [wpk.InferenceSession(model_dir / "resnet_like.onnx", providers=["CPUExecutionProvider"])
           for _ in range(4)]
    errors, results = [], {}

    def worker(t):
        try:
            for round_ in range(3):
                for k in range(t, len(inputs), 4):
                    sess = resnet_like if round_ % 2 == 0 else own[t]
                    (y,) = sess.run(None, {"input": inputs[k]})
                    results[(t, round_, k)] = rel_l2(y, expected[k])
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(results) == 3 * len(inputs)
    worst = max(results.values())
    assert worst <= TOL, worst


def test_gil_released_while_running(wpk, model_dir):
    """Another Python thread makes progress while run() executes. With a long switch interval
    the main thread gives up the GIL only where C code releases it, so the counter of a thread
    that yields at each step moves only during such calls (the control: a pure-Python stretch
    leaves it where it was)."""
    sess = wpk.InferenceSession(model_dir / "resnet_like.onnx")
    x = random_input((2, 3, 64, 64), 3)
    sess.run(None, {"input": x})  # compiled and warm
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    th = threading.Thread(target=spin)
    th.start()
    during = held = 0
    try:
        for _ in range(200):
            before = count[0]
            sess._s.run([("input", x, 1)], [0])  # the C call alone, no Python around it
            during += count[0] - before
        before = count[0]
        sum(range(2_000_000))
        held = count[0] - before
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old_interval)
    assert held == 0
    assert during > 0


def test_cuda_backend_or_its_reason(wpk, model_dir):
    """On a machine with an NVIDIA GPU the cuda backend matches ONNX Runtime; without one,
    creating the session is a WpkError that says why CUDA is unavailable."""
    try:
        sess = wpk.InferenceSession(model_dir / "resnet_like.onnx", backend="cuda")
    except wpk.WpkError as e:
        assert "CUDA" in str(e) and e.status == "WPK_ERR_UNSUPPORTED", str(e)
        return
    x = random_input((2, 3, 64, 64), 21)
    (y,) = sess.run(None, {"input": x})
    assert rel_l2(y, ort_run(model_dir / "resnet_like.onnx", {"input": x})[0]) <= TOL


def test_profile(wpk, model_dir):
    sess = wpk.InferenceSession(model_dir / "resnet_like.onnx", profile=True)
    with pytest.raises(wpk.WpkError):
        sess.profile()  # no run yet
    sess.run(None, {"input": random_input((1, 3, 64, 64), 4)})
    nodes = sess.profile()
    assert nodes and all(n["ms"] >= 0 and n["node"] and n["op"] for n in nodes)
    assert any("Conv" in n["op"] for n in nodes), nodes
    with pytest.raises(wpk.WpkError, match="profile"):
        wpk.InferenceSession(model_dir / "resnet_like.onnx").profile()
