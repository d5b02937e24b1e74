#!/usr/bin/env python3
"""Single LSTM, GRU and RNN nodes over the attribute space the ONNX conformance cases leave out
(activations with alpha/beta, clip, linear_before_reset both ways, input_forget, peepholes,
sequence_lens with reverse and bidirectional runs, initial states, layout 1, sizes that span
several panels and tiles, sizes whose steps threads split), each run by `wpk run` at 1 and 2
threads (or the case's own thread counts) and compared with ONNX
Runtime (rel L2 <= 1e-4); and bad attributes, which must fail with a message naming them.
    test_recurrent_ops.py [--wpk PATH] [--dir DIR] [--filter TEXT]
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from compare_ort import TOLERANCE, out_file_name, rel_l2  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def make_model(path, op, seq=5, batch=3, inp=7, hidden=5, direction="forward", layout=0,
               bias=True, lens=None, init_h=False, init_c=False, peep=False, attrs=None,
               outputs=("Y", "Y_h", "Y_c"), seed=0, threads=None):
    """A one-node model: X a graph input, the weights initializers (scaled so gates neither
    saturate nor vanish). `threads` belongs to the case (the thread counts it runs at), not
    to the model."""
    rng = np.random.default_rng(seed)
    g = GATES[op]
    dirs = 2 if direction == "bidirectional" else 1
    scale = 1.0 / np.sqrt(hidden)
    inits, names = [], ["X"]

    def add(name, value):
        inits.append(numpy_helper.from_array(value, name))
        names.append(name)

    def skip():
        names.append("")

    add("W", rng.uniform(-scale, scale, (dirs, g * hidden, inp)).astype(np.float32))
    add("R", rng.uniform(-scale, scale, (dirs, g * hidden, hidden)).astype(np.float32))
    add("B", rng.uniform(-0.5, 0.5, (dirs, 2 * g * hidden)).astype(np.float32)) if bias else skip()
    add("L", np.array(lens, np.int32)) if lens is not None else skip()
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)

    def initial():  # drawn in layout 0's order, so a layout-1 model and its twin agree
        value = rng.uniform(-1, 1, (dirs, batch, hidden)).astype(np.float32)
        return value.transpose(1, 0, 2).copy() if layout else value

    add("H0", initial()) if init_h else skip()
    if op == "LSTM":
        add("C0", initial()) if init_c else skip()
        add("P", rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(np.float32)) if peep else skip()
    while names and names[-1] == "":
        names.pop()
    outs = [o for o in outputs if op == "LSTM" or o != "Y_c"]
    node = helper.make_node(op, names, list(outs), hidden_size=hidden, direction=direction,
                            layout=layout, **(attrs or {}))
    x_shape = (batch, seq, inp) if layout else (seq, batch, inp)
    y_shape = (batch, seq, dirs, hidden) if layout else (seq, dirs, batch, hidden)
    graph = helper.make_graph(
        [node], "recurrent", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, y_shape if o == "Y" else state)
         for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


CASES = {
    "lstm_basic": dict(op="LSTM"),
    "lstm_bidir_lens_states": dict(op="LSTM", direction="bidirectional", lens=[5, 2, 0],
                                   init_h=True, init_c=True),
    "lstm_reverse_lens": dict(op="LSTM", direction="reverse", lens=[3, 5, 1]),
    "lstm_peep_forget_clip": dict(op="LSTM", peep=True, init_c=True,
                                  attrs=dict(input_forget=1, clip=0.7)),
    "lstm_peep": dict(op="LSTM", peep=True, init_c=True),
    "lstm_forget": dict(op="LSTM", attrs=dict(input_forget=1)),
    "lstm_clip": dict(op="LSTM", attrs=dict(clip=0.7)),
    "lstm_layout1_bidir": dict(op="LSTM", layout=1, direction="bidirectional", init_h=True,
                               init_c=True, peep=True),
    "lstm_activations": dict(op="LSTM", attrs=dict(
        activations=["HardSigmoid", "LeakyRelu", "ScaledTanh"], activation_alpha=[0.3, 0.2, 0.9],
        activation_beta=[0.4, 1.1])),
    "lstm_big": dict(op="LSTM", seq=9, batch=6, inp=40, hidden=37, direction="bidirectional",
                     init_h=True, init_c=True, peep=True),
    "gru_basic": dict(op="GRU"),
    "gru_linear_before_reset": dict(op="GRU", attrs=dict(linear_before_reset=1)),
    "gru_bidir_lens_lbr": dict(op="GRU", direction="bidirectional", lens=[1, 5, 3], init_h=True,
                               attrs=dict(linear_before_reset=1)),
    "gru_reverse_lens": dict(op="GRU", direction="reverse", lens=[4, 0, 5], init_h=True),
    "gru_layout1_clip": dict(op="GRU", layout=1, init_h=True, attrs=dict(clip=0.5)),
    "gru_activations_bidir": dict(op="GRU", direction="bidirectional", attrs=dict(
        activations=["Sigmoid", "Softsign", "HardSigmoid", "Tanh"], activation_alpha=[0.25],
        activation_beta=[0.45])),
    "gru_big": dict(op="GRU", seq=7, batch=9, inp=33, hidden=70, init_h=True),
    "gru_big_lbr": dict(op="GRU", seq=7, batch=5, inp=33, hidden=70, direction="bidirectional",
                        attrs=dict(linear_before_reset=1)),
    # big enough per step (batch x gates x hidden^2 >= 2^19) that threads split each step
    "gru_split_steps": dict(op="GRU", seq=4, batch=4, inp=16, hidden=260, init_h=True,
                            direction="bidirectional", lens=[4, 2, 3, 0], threads=(1, 2, 3)),
    "gru_split_steps_lbr": dict(op="GRU", seq=4, batch=5, inp=16, hidden=250,
                                attrs=dict(linear_before_reset=1), threads=(2, 3)),
    "lstm_split_steps": dict(op="LSTM", seq=3, batch=4, inp=12, hidden=200, peep=True,
                             direction="bidirectional", threads=(2, 3)),
    "rnn_basic": dict(op="RNN"),
    "rnn_relu_bidir_lens": dict(op="RNN", direction="bidirectional", lens=[2, 0, 5],
                                init_h=True, attrs=dict(activations=["Relu", "Relu"])),
    "rnn_tanh_layout1": dict(op="RNN", layout=1, attrs=dict(activations=["Tanh"])),
    "rnn_affine_elu_softplus": dict(op="RNN", direction="bidirectional", attrs=dict(
        activations=["Elu", "Softplus"], activation_alpha=[0.8])),
    "rnn_big": dict(op="RNN", seq=6, batch=5, inp=50, hidden=100, init_h=True,
                    attrs=dict(clip=2.0)),
}

# (case, attributes, text the message must hold)
BAD = [
    ("GRU", dict(direction="sideways"), "attribute 'direction'"),
    ("LSTM", dict(activations=["Sigmoid", "Bogus", "Tanh"]), "unknown activation 'Bogus'"),
    ("RNN", dict(activations=["Tanh", "Tanh"]), "attribute 'activations' has 2 entries"),
    ("GRU", dict(linear_before_reset=3), "linear_before_reset"),
    ("LSTM", dict(clip=-1.0), "attribute 'clip'"),
    ("RNN", dict(layout=2), "attribute 'layout'"),
]


def expected_outputs(case, x, work):
    """ONNX Runtime's outputs for input x. It refuses layout = 1, so such a case runs as its
    layout-0 twin (same weights; X, initial states and outputs transposed)."""
    layout = case.get("layout", 0)
    twin = dict(case, layout=0)
    path = work / "twin.onnx"
    make_model(path, **twin)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if layout:
        x = x.transpose(1, 0, 2)
    names = [o.name for o in session.get_outputs()]
    outs = session.run(None, {"X": x})
    if layout:
        outs = [o.transpose(2, 0, 1, 3) if n == "Y" else o.transpose(1, 0, 2)
                for n, o in zip(names, outs)]
    return dict(zip(names, outs))


def check_case(wpk, work, name, case, threads):
    path = work / f"{name}.onnx"
    make_model(path, **case)
    seq, batch, inp = case.get("seq", 5), case.get("batch", 3), case.get("inp", 7)
    shape = (batch, seq, inp) if case.get("layout", 0) else (seq, batch, inp)
    x = np.random.default_rng(7).uniform(-1, 1, shape).astype(np.float32)
    want = expected_outputs(case, x, work)
    np.save(work / "x.npy", x)
    out = work / f"out_{name}_{threads}"
    proc = subprocess.run([wpk, "run", str(path), "-i", f"X={work / 'x.npy'}", "-o", str(out),
                           "--threads", str(threads)], capture_output=True, text=True,
                          timeout=300)
    problems = []
    if proc.returncode != 0:
        problems.append(f"wpk run exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    else:
        for oname, ref in want.items():
            got = np.load(out / out_file_name(oname))
            if got.shape != ref.shape:
                problems.append(f"{oname}: shape {got.shape}, expected {ref.shape}")
            elif not rel_l2(got, ref) <= TOLERANCE:
                problems.append(f"{oname}: rel L2 {rel_l2(got, ref):.3g} > {TOLERANCE:g}")
    print(f"{'FAIL' if problems else 'ok  '} {name} threads={threads}" +
          "".join(f"\n    {p}" for p in problems))
    return not problems


def check_bad(wpk, work, op, attrs, text):
    path = work / f"bad_{op}.onnx"
    node = helper.make_node(op, ["X", "W", "R"], ["Y"], hidden_size=4, **attrs)
    g = GATES[op]
    inits = [numpy_helper.from_array(np.zeros((1, g * 4, 3), np.float32), "W"),
             numpy_helper.from_array(np.zeros((1, g * 4, 4), np.float32), "R")]
    graph = helper.make_graph(
        [node], "bad", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (2, 1, 3))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.save(model, path)
    proc = subprocess.run([wpk, "run", str(path), "-o", str(work / "bad_out")],
                          capture_output=True, text=True, timeout=120)
    ok = proc.returncode == 1 and text in proc.stderr and "Sanitizer" not in proc.stderr
    print(f"{'ok  ' if ok else 'FAIL'} bad {op} {attrs}: exit {proc.returncode}: "
          f"{proc.stderr.strip()[-300:]}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"))
    ap.add_argument("--dir", help="where the models go (default: a temporary directory)")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="wpk-recurrent.") as tmp:
        work = Path(args.dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name, case in CASES.items():
            if args.filter not in name:
                continue
            for threads in case.get("threads", (1, 2)):
                failed += 0 if check_case(args.wpk, work, name, case, threads) else 1
        for op, attrs, text in BAD:
            if args.filter in op.lower() or args.filter in "bad":
                failed += 0 if check_bad(args.wpk, work, op, attrs, text) else 1
    print(f"test_recurrent_ops: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
