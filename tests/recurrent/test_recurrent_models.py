#!/usr/bin/env python3
"""PyTorch-exported recurrent models (export_recurrent.py: 2-layer bidirectional nn.GRU and
nn.LSTM, batch_first and not, a tanh nn.RNN) run by `wpk run` at batch 1 and 4 and compared
with ONNX Runtime (rel L2 <= 1e-4). Exporting needs a Python with torch (default
/usr/bin/python3); without one the test is skipped (exit 77), or fails when WPK_REQUIRE_TORCH=1.
    test_recurrent_models.py [--wpk PATH] [--dir DIR] [--torch-python PY]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "models"))
from compare_ort import TOLERANCE, out_file_name, rel_l2  # noqa: E402

REPO = HERE.parents[1]
SKIP = 77
MODELS = ["gru_2l_bidir", "gru_2l_bidir_batch_first", "lstm_2l_bidir",
          "lstm_2l_bidir_batch_first", "rnn_tanh"]


def concrete_shape(inp, batch):
    return [batch if isinstance(d, str) or d is None else d for d in inp.shape]


def check(wpk, path, batch, work):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    x = np.random.default_rng(batch).uniform(-1, 1, concrete_shape(inp, batch)).astype(np.float32)
    want = session.run(None, {inp.name: x})[0]
    other = session.run(None, {inp.name: -x})[0]
    np.save(work / "x.npy", x)
    out = work / f"out_{path.stem}_{batch}"
    proc = subprocess.run([wpk, "run", str(path), "-i", f"{inp.name}={work / 'x.npy'}", "-o",
                           str(out), "--threads", "2"], capture_output=True, text=True,
                          timeout=600)
    name = f"{path.stem} batch={batch}"
    if proc.returncode != 0:
        print(f"FAIL {name}: wpk run exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
        return False
    got = np.load(out / out_file_name(session.get_outputs()[0].name))
    if got.shape != want.shape:
        print(f"FAIL {name}: shape {got.shape}, ONNX Runtime {want.shape}")
        return False
    err, moved = rel_l2(got, want), rel_l2(other, want)
    ok = err <= TOLERANCE and moved >= 1e-3
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rel L2 {err:.3g} (input sensitivity {moved:.2g})")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--dir", help="where the exported models go (default: a temporary dir)")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    args = ap.parse_args()
    probe = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIP: {args.torch_python} cannot import torch to export the models")
        return 1 if os.environ.get("WPK_REQUIRE_TORCH") == "1" else SKIP
    with tempfile.TemporaryDirectory(prefix="wpk-recurrent-models.") as tmp:
        work = Path(args.dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        missing = [m for m in MODELS if not (work / f"{m}.onnx").exists()]
        if missing:
            subprocess.run([args.torch_python, str(HERE / "export_recurrent.py"), str(work)] +
                           missing, check=True, capture_output=True)
        failed = sum(not check(args.wpk, work / f"{m}.onnx", batch, work)
                     for m in MODELS for batch in (1, 4))
    print(f"test_recurrent_models: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
