#!/usr/bin/env python3
"""Golden tests of the graph passes: the IR before and after each pass on small hand-built graphs,
and the numbers those graphs compute.
    run_golden.py [--wpk PATH] [--update] [--filter S] [--keep DIR]

Adding a case: write tests/passes/cases/<case>.py with
    PASSES = "name[,name]"          # the `wpk optimize --passes` argument (names from passes.def)
    def build(): -> onnx.ModelProto  # small, onnx.helper (see case_util.py), seeded weights
and optionally DIMS = {"N": 3} (sizes for symbolic input dims; default 2). Then run with
--update --filter <case>, read tests/passes/golden/<case>.txt (it must show what you meant the
pass to do, or decline to do) and commit both. A case that a pass must decline is a case like
any other: its golden shows the graph unchanged.

What is checked, per case:
  golden    stderr of `wpk optimize CASE.onnx --passes PASSES --dump all` (the graph before
            optimization, "pass NAME: N changes" lines, the graph after each pass that changed
            it) equals tests/passes/golden/<case>.txt; a unified diff otherwise.
  numerics  on one seeded random input (the same .npy files for every run), ONNX Runtime on the
            case model is the reference; `wpk run -O0` and `wpk run -O3` on it must agree with
            rel L2 <= 1e-4 per output, and so must `wpk run -O0` on the model `wpk optimize
            --passes PASSES -o` writes (skipped, and said so, while writing ONNX is not
            implemented).
Exit status: 0 when every case passes, 1 otherwise.
"""
import argparse
import difflib
import importlib.util
import re
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES = HERE / "cases"
GOLDEN = HERE / "golden"
TOLERANCE = 1e-4
DEFAULT_DIM = 2
TIMEOUT_S = 300
NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
            onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
            onnx.TensorProto.BOOL: np.bool_}

sys.path.insert(0, str(HERE))  # cases import case_util


def load_case(path):
    spec = importlib.util.spec_from_file_location(f"case_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not isinstance(getattr(mod, "PASSES", None), str) or not callable(getattr(mod, "build", None)):
        raise ValueError(f"{path.name} must define PASSES (a string) and build()")
    return mod


def random_inputs(model, dims, seed=0):
    """Seeded inputs for every graph input: floats uniform in [-1, 1), integers in {0, 1}."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, DEFAULT_DIM)
                 for d in tt.shape.dim]
        dtype = NP_TYPES[tt.elem_type]
        if np.issubdtype(dtype, np.floating):
            feeds[inp.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def cut_short(dumped):
    """Titles of the dumped graphs that do not end with their output lines (a log line limit
    cut them short)."""
    titles = []
    for block in ("\n" + dumped).split("\n== ")[1:]:
        lines = block.split("\n")
        graph = []
        for line in lines[1:]:
            if not line or line.startswith("pass "):
                break
            graph.append(line)
        if not graph or not graph[-1].startswith("  output "):
            titles.append(lines[0].rstrip(" ="))
    return titles


def rel_l2(actual, expected):
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    norm = np.linalg.norm(e)
    diff = np.linalg.norm(a - e)
    return float(diff / norm) if norm > 0 else float(diff)


def run(args):
    try:
        # the layout pass blocks channels by the target's vector width: pin it so goldens
        # read the same on AVX2 and AVX-512 machines
        env = dict(os.environ, WPK_VECTOR_FLOATS="16")
        p = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return -1, "", f"timed out after {TIMEOUT_S} s"
    return p.returncode, p.stdout, p.stderr


def wpk_outputs(wpk, model, input_args, outdir, level, names, problems, label):
    """Run `wpk run` and load its outputs; None (and a problem) when it fails."""
    status, _, err = run([wpk, "run", str(model), "-o", str(outdir), f"-O{level}"] + input_args)
    if status != 0 or re.search(r"Sanitizer|runtime error:", err):
        problems.append(f"{label}: wpk run exited {status}: {err.strip()[-800:]}")
        return None
    outs = {}
    for name in names:
        path = outdir / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        if not path.exists():
            problems.append(f"{label}: no output file for {name}")
            return None
        outs[name] = np.load(path)
    return outs


def compare(label, got, want, problems, notes):
    worst = 0.0
    for name, ref in want.items():
        g = got[name]
        if g.shape != ref.shape or g.dtype != ref.dtype:
            problems.append(f"{label}: output {name} is {g.dtype}{list(g.shape)}, "
                            f"ONNX Runtime gives {ref.dtype}{list(ref.shape)}")
            continue
        err = rel_l2(g, ref)
        worst = max(worst, err)
        if not err <= TOLERANCE:
            problems.append(f"{label}: output {name} rel L2 {err:.3g} > {TOLERANCE:g}")
    notes.append(f"{label} {worst:.1e}")


def check_case(path, wpk, update, work):
    """(problems, notes) for one case."""
    problems, notes = [], []
    case = load_case(path)
    model = case.build()
    onnx.checker.check_model(model, full_check=True)
    src = work / f"{path.stem}.onnx"
    onnx.save(model, src)

    # golden IR text
    status, _, dumped = run([wpk, "optimize", str(src), "--passes", case.PASSES, "--dump", "all"])
    golden = GOLDEN / f"{path.stem}.txt"
    truncated = cut_short(dumped)
    if status != 0:
        problems.append(f"wpk optimize exited {status}: {dumped.strip()[-800:]}")
    elif truncated:
        problems.append(f"the dump {truncated[0]!r} is cut short: keep the case smaller")
    elif update:
        golden.write_text(dumped)
        notes.append("golden written")
    elif not golden.exists():
        problems.append(f"no golden {golden.relative_to(REPO)} (run with --update and review it)")
    elif golden.read_text() != dumped:
        diff = difflib.unified_diff(golden.read_text().splitlines(True), dumped.splitlines(True),
                                    str(golden.relative_to(REPO)), "wpk optimize --dump all")
        problems.append("IR differs from the golden:\n" + "".join(diff).rstrip())

    # numerics: one input for every run
    feeds = random_inputs(model, getattr(case, "DIMS", {}))
    input_args = []
    for i, (name, value) in enumerate(feeds.items()):
        np.save(work / f"in_{i}.npy", value)
        input_args += ["-i", f"{name}={work / f'in_{i}.npy'}"]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # no warnings about the unused initializers some cases have
    session = ort.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    want = dict(zip(names, session.run(None, feeds)))
    for level in (0, 3):
        got = wpk_outputs(wpk, src, input_args, work / f"out_O{level}", level, names, problems,
                          f"run -O{level}")
        if got is not None:
            compare(f"-O{level}", got, want, problems, notes)
    optimized = work / f"{path.stem}.opt.onnx"
    status, _, err = run([wpk, "optimize", str(src), "--passes", case.PASSES, "-o", str(optimized)])
    if status != 0 and "not implemented" in err:
        notes.append("optimized model: not checked (writing ONNX is not implemented)")
    elif status != 0:
        problems.append(f"wpk optimize -o exited {status}: {err.strip()[-800:]}")
    else:
        got = wpk_outputs(wpk, optimized, input_args, work / "out_opt", 0, names, problems,
                          "optimized model")
        if got is not None:
            compare("optimized", got, want, problems, notes)
    return problems, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--update", action="store_true", help="rewrite the goldens from this wpk")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--keep", help="write models and outputs here and keep them")
    args = ap.parse_args()
    if not Path(args.wpk).is_file():
        sys.exit(f"run_golden: no wpk binary at {args.wpk} (use --wpk)")
    cases = sorted(p for p in CASES.glob("*.py") if args.filter in p.stem)
    if not cases:
        sys.exit(f"run_golden: no case matches '{args.filter}' in {CASES}")
    failed = []
    with tempfile.TemporaryDirectory(prefix="wpk-golden.") as tmp:
        for path in cases:
            work = Path(args.keep or tmp) / path.stem
            work.mkdir(parents=True, exist_ok=True)
            try:
                problems, notes = check_case(path, args.wpk, args.update, work)
            except Exception as e:  # a broken case is a failure, not a crash of the suite
                problems, notes = [f"{type(e).__name__}: {e}"], []
            verdict = "FAIL" if problems else "ok"
            print(f"{path.stem}: {verdict} ({', '.join(notes)})", flush=True)
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
            if problems:
                failed.append(path.stem)
    print(f"\ngolden: {len(cases) - len(failed)} passed, {len(failed)} failed"
          f"{': ' + ', '.join(failed) if failed else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
