#!/usr/bin/env python3
"""Exports the transformer models of test_transformers.py and bench/transformers.py with PyTorch's
ONNX exporter (opset 14, random seeded weights, batch axis "N" symbolic):
  transformer_encoder  nn.TransformerEncoder, 2 layers, d_model 64, 4 heads, seq 16
  bert_small           BERT-style encoder, 2 layers, hidden 256, 4 heads, seq 64, causal mask
  bert_base4           BERT-style encoder, 4 layers, hidden 768, 12 heads, seq 128
  vit_b_16, swin_t     torchvision (1x3x224x224)
Needs a Python with torch (Debian's /usr/bin/python3).
    export_models.py OUTDIR [--models a,b]
"""
import argparse
import math
import os

import torch
from torch import nn

OPSET = 14


class SelfAttention(nn.Module):
    """Multi-head self-attention written the way BERT implementations spell it: separate Q, K, V
    projections, view + permute into heads, scaled scores, optional additive mask."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def split_heads(self, x):
        n, s, _ = x.shape
        return x.view(n, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        n, s = ctx.shape[0], ctx.shape[1]
        return self.out(ctx.view(n, s, -1))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, 4 * hidden)
        self.ff2 = nn.Linear(4 * hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        x = self.norm1(x + self.attn(x, mask))
        return self.norm2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class BertEncoder(nn.Module):
    def __init__(self, layers, hidden, heads, seq, causal):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(hidden, heads) for _ in range(layers))
        mask = torch.triu(torch.full((seq, seq), -10000.0), diagonal=1) if causal else None
        self.register_buffer("mask", mask)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.mask)
        return x


def make(name):
    """(module, example input) for a model name."""
    if name == "transformer_encoder":
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                           dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=2), torch.randn(1, 16, 64)
    if name == "bert_small":
        return BertEncoder(2, 256, 4, 64, causal=True), torch.randn(1, 64, 256)
    if name == "bert_base4":
        return BertEncoder(4, 768, 12, 128, causal=False), torch.randn(1, 128, 768)
    import torchvision
    return getattr(torchvision.models, name)(), torch.randn(1, 3, 224, 224)


MODELS = ["transformer_encoder", "bert_small", "bert_base4", "vit_b_16", "swin_t"]


def export(name, path):
    torch.manual_seed(0)
    model, x = make(name)
    # LayerNorm starts as the identity affine map: random parameters make the comparison see it
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.5, 0.5)
    # a zero-initialized classifier (vit_b_16's head) would make the output ignore the input
    for m in model.modules():
        if isinstance(m, nn.Linear) and not m.weight.detach().any():
            nn.init.normal_(m.weight, std=0.02)
    model.eval()
    # gradients stay enabled: under no_grad nn.TransformerEncoder takes its fused fast path,
    # which has no ONNX export
    torch.onnx.export(model, x, path, opset_version=OPSET, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    for name in [m for m in args.models.split(",") if m]:
        if name not in MODELS:
            raise SystemExit(f"export_models: unknown model {name}")
        path = os.path.join(args.outdir, name + ".onnx")
        export(name, path)
        print(f"exported {path}", flush=True)


if __name__ == "__main__":
    main()
