"""Shared fixtures of the wpk package's tests: the package under test (installed into
$WPK_PYTHON_SITE by install_package.py, or however it was installed), the small models they run,
and ONNX Runtime as the oracle."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SITE = os.environ.get("WPK_PYTHON_SITE")
if SITE:
    sys.path.insert(0, SITE)
sys.path.insert(0, str(REPO / "tests" / "models"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: exports torchvision models (minutes)")


@pytest.fixture(scope="session")
def wpk():
    import wpk as package
    if SITE:
        # the tests must exercise the package just installed, not another one on the path
        assert Path(package.__file__).resolve().is_relative_to(Path(SITE).resolve()), \
            f"imported wpk from {package.__file__}, not from {SITE}"
    return package


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """resnet_like (tests/models/gen_models.py, symbolic batch N) and tiny_conv (one Conv+Relu,
    fixed shape: quick to tune)."""
    import gen_models
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out = tmp_path_factory.mktemp("models")
    gen_models.write_models(str(out), ["resnet_like"])
    rng = np.random.default_rng(7)
    weight = numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "tiny_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=[weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(out / "tiny_conv.onnx"))
    return out
