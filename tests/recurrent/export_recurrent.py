#!/usr/bin/env python3
"""Exports the recurrent test models with PyTorch's ONNX exporter (random weights, seeded),
each with a symbolic batch dim: a 2-layer bidirectional nn.GRU and nn.LSTM, batch_first and
not, a small nn.RNN (tanh), and the GRU of bench/recurrent.py.
    export_recurrent.py OUT_DIR [NAME...]
Run it with a Python that has torch (Debian's /usr/bin/python3).
"""
import sys
from pathlib import Path

import torch
from torch import nn


class Recurrent(nn.Module):
    """A recurrent stack and a linear head over its outputs, so every layer's Y is used."""

    def __init__(self, cell, batch_first, **kw):
        super().__init__()
        self.rnn = cell(batch_first=batch_first, **kw)
        width = kw["hidden_size"] * (2 if kw.get("bidirectional") else 1)
        self.head = nn.Linear(width, 8)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


# name -> (cell, batch_first, input size, sequence length, cell keywords)
MODELS = {
    "gru_2l_bidir": (nn.GRU, False, 24, 11, dict(hidden_size=32, num_layers=2,
                                                 bidirectional=True)),
    "gru_2l_bidir_batch_first": (nn.GRU, True, 24, 11, dict(hidden_size=32, num_layers=2,
                                                            bidirectional=True)),
    "lstm_2l_bidir": (nn.LSTM, False, 20, 9, dict(hidden_size=40, num_layers=2,
                                                  bidirectional=True)),
    "lstm_2l_bidir_batch_first": (nn.LSTM, True, 20, 9, dict(hidden_size=40, num_layers=2,
                                                             bidirectional=True)),
    "rnn_tanh": (nn.RNN, False, 16, 12, dict(hidden_size=24, nonlinearity="tanh")),
    "gru_bench": (nn.GRU, False, 256, 64, dict(hidden_size=256, num_layers=2)),
}


def export(name, out_dir):
    cell, batch_first, inp, seq, kw = MODELS[name]
    torch.manual_seed(0)
    model = Recurrent(cell, batch_first, input_size=inp, **kw).eval()
    shape = (1, seq, inp) if batch_first else (seq, 1, inp)
    batch_axis = 0 if batch_first else 1
    path = Path(out_dir) / f"{name}.onnx"
    torch.onnx.export(model, torch.randn(*shape), str(path), input_names=["x"],
                      output_names=["y"], opset_version=14,
                      dynamic_axes={"x": {batch_axis: "batch"}, "y": {batch_axis: "batch"}})
    print(f"exported {path}")


def main():
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        export(name, out_dir)


if __name__ == "__main__":
    main()
