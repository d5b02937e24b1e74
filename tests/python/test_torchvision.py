"""torchvision's resnet18 (random weights, exported by tests/torchvision/export_models.py under a
Python with torch, reused from $WPK_TORCHVISION_DIR) through wpk.InferenceSession against ONNX
Runtime, rel L2 <= 1e-4, at batch 1 and 2 (the export's batch dim is symbolic). Skipped when no
Python with torch can export it."""
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ort_oracle import ort_run, rel_l2

REPO = Path(__file__).resolve().parents[2]
TORCH_PYTHON = os.environ.get("WPK_TORCH_PYTHON", "/usr/bin/python3")


@pytest.fixture(scope="module")
def resnet18():
    out_dir = Path(os.environ.get("WPK_TORCHVISION_DIR")
                   or os.path.join(tempfile.gettempdir(), "wpk-torchvision"))
    path = out_dir / "resnet18.onnx"
    if not path.exists():
        probe = subprocess.run([TORCH_PYTHON, "-c", "import torch, torchvision"],
                               capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"{TORCH_PYTHON} cannot import torch and torchvision to export resnet18")
        out_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([TORCH_PYTHON, str(REPO / "tests/torchvision/export_models.py"),
                        str(out_dir), "--models", "resnet18"], check=True)
    return path


@pytest.mark.slow
def test_resnet18_matches_onnxruntime(wpk, resnet18):
    sess = wpk.InferenceSession(resnet18)
    (x,) = sess.get_inputs()
    assert x.shape == ["N", 3, 224, 224] and x.type == "tensor(float)"
    for batch in (1, 2):
        inp = np.random.default_rng(batch).standard_normal((batch, 3, 224, 224)).astype(np.float32)
        (y,) = sess.run(None, {x.name: inp})
        (expected,) = ort_run(resnet18, {x.name: inp})
        assert y.shape == (batch, 1000)
        err = rel_l2(y, expected)
        print(f"resnet18 batch {batch}: rel L2 {err:.3g}")
        assert err <= 1e-4, err
