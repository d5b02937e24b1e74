"""wpk.tune into a fresh records database, then wpk.compile with strict (every node must have
records) and the plan run against ONNX Runtime; tune's argument checks and its WpkError."""
import numpy as np
import pytest

from ort_oracle import ort_run, rel_l2


def test_tune_then_strict_compile(wpk, model_dir, tmp_path):
    model = model_dir / "tiny_conv.onnx"
    db = tmp_path / "records.db"
    summary = wpk.tune(model, db=db, trials=3, parallel=1, alternatives=False, clock="cpu")
    assert summary["strategy"] == "ga" and summary["tasks"]
    for task in summary["tasks"]:
        assert task["trials"] >= 3 and task["best_s"] > 0 and task["best_config"], task
    # a second run finds every record stored: nothing is measured again
    again = wpk.tune(model, db=db, trials=3, parallel=1, alternatives=False, clock="cpu")
    assert again["measured"] == 0
    plan = tmp_path / "tiny_conv.wpk"
    wpk.compile(model, plan, db=db, strict=True)
    x = np.random.default_rng(0).standard_normal((1, 4, 16, 16)).astype(np.float32)
    (y,) = wpk.InferenceSession(plan).run(None, {"x": x})
    assert rel_l2(y, ort_run(model, {"x": x})[0]) <= 1e-4
    # strict without records for this model: wpk refuses, naming the node
    with pytest.raises(wpk.WpkError, match="conv"):
        wpk.compile(model_dir / "resnet_like.onnx", tmp_path / "r.wpk", db=db, strict=True)


def test_tune_bad_arguments(wpk, model_dir, tmp_path):
    model = model_dir / "tiny_conv.onnx"
    with pytest.raises(ValueError, match="strategy"):
        wpk.tune(model, db=tmp_path / "r.db", strategy="magic")
    with pytest.raises(ValueError, match="time"):
        wpk.tune(model, db=tmp_path / "r.db", time="ten minutes")
    with pytest.raises(ValueError, match="trials"):
        wpk.tune(model, db=tmp_path / "r.db", trials=0)
    with pytest.raises(FileNotFoundError):
        wpk.tune(tmp_path / "missing.onnx")
    not_a_db = tmp_path / "not_a_db.db"
    not_a_db.write_text("this is not a records database\n" * 100)
    with pytest.raises(wpk.WpkError, match="not_a_db.db"):
        wpk.tune(model, db=not_a_db, trials=1)
