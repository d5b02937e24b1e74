#!/usr/bin/env python3
"""Runs one ONNX model through ONNX Runtime (CPU) and `wpk run` on the same random input and checks
that every output agrees: relative L2 error ||wpk - ort|| / ||ort|| <= 1e-4.
    compare_ort.py MODEL [--batch N] [--wpk PATH] [--seed S] [--threads N] [--backend cpu|ref]
Also a module: compare() is what test_models.py and test_torchvision.py call.
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4
# Outputs must move at least this much (rel L2) between two random inputs: a model whose output
# ignores its input (vanishing activations) would pass any comparison while proving nothing.
MIN_SENSITIVITY = 1e-3
WPK_TIMEOUT_S = 600
ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


@dataclass
class Result:
    model: str
    errors: dict = field(default_factory=dict)   # output name -> relative L2 error
    problems: list = field(default_factory=list)  # anything that makes the comparison fail
    wpk_ms: float = float("nan")
    ort_ms: float = float("nan")
    sensitivity: float = float("nan")             # min rel L2 between outputs of two inputs

    @property
    def ok(self):
        return not self.problems and all(e <= TOLERANCE for e in self.errors.values())


def out_file_name(name):
    """The file `wpk run` writes an output to (the CLI contract)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def rel_l2(actual, expected):
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    norm = np.linalg.norm(e)
    diff = np.linalg.norm(a - e)
    return float(diff / norm) if norm > 0 else float(diff)


def random_inputs(session, batch, seed):
    """Seeded inputs: floats uniform in [-1, 1); a symbolic leading dim becomes `batch`."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in session.get_inputs():
        shape = []
        for axis, dim in enumerate(inp.shape):
            if isinstance(dim, int):
                if axis == 0 and batch is not None and dim != batch:
                    raise ValueError(f"input {inp.name} has a fixed batch of {dim}, cannot run at {batch}")
                shape.append(dim)
            elif axis == 0:
                shape.append(batch or 1)
            else:
                raise ValueError(f"input {inp.name}: no size to pick for symbolic dim {dim!r} (axis {axis})")
        dtype = ORT_TYPES.get(inp.type)
        if dtype is None:
            raise ValueError(f"input {inp.name}: type {inp.type} not handled")
        if np.issubdtype(dtype, np.floating):
            feeds[inp.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def run_ort(session, feeds, iters):
    """Outputs and the median milliseconds of `iters` timed runs after one warm-up run."""
    outputs = session.run(None, feeds)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return outputs, statistics.median(times)


def run_wpk(wpk, model, feeds, work, threads, iters, backend=None):
    """(stdout, stderr, exit status) of `wpk run` on feeds written as .npy under work."""
    args = [wpk, "run", str(model), "-o", str(work / "out")]
    if backend:
        args += ["--backend", backend]
    for i, (name, value) in enumerate(feeds.items()):
        path = work / f"input_{i}.npy"
        np.save(path, value)
        args += ["-i", f"{name}={path}"]
    if threads:
        args += ["--threads", str(threads)]
    if iters > 1:
        args += ["--iters", str(iters)]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=WPK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "", f"timed out after {WPK_TIMEOUT_S} s", -1
    return proc.stdout, proc.stderr, proc.returncode


def compare(model, wpk, batch=None, seed=0, threads=None, iters=1, backend=None):
    """Runs model through ONNX Runtime and wpk (on `backend`: wpk's default when None) on one
    random input; returns a Result. Latencies are medians of `iters` runs (wpk's include its
    first run, ONNX Runtime's follow a warm-up)."""
    result = Result(str(model))
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    try:
        feeds = random_inputs(session, batch, seed)
    except ValueError as e:
        result.problems.append(str(e))
        return result
    expected, result.ort_ms = run_ort(session, feeds, iters)
    moved = session.run(None, random_inputs(session, batch, seed + 1))
    result.sensitivity = min(rel_l2(m, e) for m, e in zip(moved, expected))
    if not result.sensitivity >= MIN_SENSITIVITY:
        result.problems.append(f"the outputs barely depend on the input (rel L2 {result.sensitivity:.2g} "
                               f"between two inputs): the comparison would prove nothing")
    with tempfile.TemporaryDirectory(prefix="wpk-compare.") as tmp:
        work = Path(tmp)
        stdout, stderr, status = run_wpk(wpk, model, feeds, work, threads, iters, backend)
        if status != 0 or re.search(r"Sanitizer|runtime error:", stderr):
            result.problems.append(f"wpk run exited {status}: {stderr.strip()[-1500:]}")
            return result
        latency = re.search(r"^latency:\s*(?:median\s*)?([0-9.eE+-]+)\s*ms", stdout, re.M)
        if latency:
            result.wpk_ms = float(latency.group(1))
        else:
            result.problems.append("wpk run printed no `latency: X ms` line")
        for out, want in zip(session.get_outputs(), expected):
            path = work / "out" / out_file_name(out.name)
            if not path.exists():
                result.problems.append(f"output {out.name}: wpk wrote no {path.name}")
                continue
            got = np.load(path)
            if got.shape != want.shape or got.dtype != want.dtype:
                result.problems.append(f"output {out.name}: wpk gave {got.dtype}{list(got.shape)}, "
                                       f"ONNX Runtime {want.dtype}{list(want.shape)}")
                continue
            result.errors[out.name] = rel_l2(got, want)
    return result


def describe(result):
    """One line per output plus the problems, for printing."""
    lines = [f"{Path(result.model).name}: wpk {result.wpk_ms:.2f} ms, onnxruntime {result.ort_ms:.2f} ms, "
             f"input sensitivity {result.sensitivity:.2g}"]
    for name, err in result.errors.items():
        verdict = "ok" if err <= TOLERANCE else f"FAIL (> {TOLERANCE:g})"
        lines.append(f"  output {name}: rel L2 {err:.3g} {verdict}")
    lines += [f"  FAIL {p}" for p in result.problems]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, help="size of a symbolic leading (batch) dim (default 1)")
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, help="threads for both wpk and ONNX Runtime")
    ap.add_argument("--iters", type=int, default=1, help="timed runs; latencies are medians")
    ap.add_argument("--backend", help="wpk's backend (cpu, ref; default: wpk's default)")
    args = ap.parse_args()
    result = compare(args.model, args.wpk, args.batch, args.seed, args.threads, args.iters,
                     args.backend)
    print(describe(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
