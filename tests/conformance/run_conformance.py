#!/usr/bin/env python3
"""Runs ONNX's node conformance cases through `wpk run` and compares with ONNX's expected outputs.

A case is selected when every node of its model is an op of src/ir/ops.def (default domain).
The cases come from the onnx package: its data/node directory when the wheel ships one, otherwise
the same cases generated from the package's own definitions (onnx.backend.test.case.node) into a
cache directory. Cases matching a line of excluded.txt (`pattern  # reason`, fnmatch patterns) are
expected to fail, and to fail cleanly: wpk must reject them with exit 1 and a message, as it
must any input it does not handle (a crash or a wrong answer on them is a failure). An excluded
case that passes, or a line that matches nothing, is stale and fails the run too.
"""
import argparse
import concurrent.futures
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RTOL, ATOL = 1e-3, 1e-5
CASE_TIMEOUT_S = 120
SANITIZER_REPORT = re.compile(r"Sanitizer|runtime error:")  # an ASan/UBSan build's findings


def supported_ops():
    """The default-domain op types of the op table (ops.def rows whose domain is "")."""
    text = (REPO / "src/ir/ops.def").read_text()
    return set(re.findall(r'^X\(\s*\w+\s*,\s*""\s*,\s*"([^"]+)"', text, re.M))


def out_file_name(name):
    """The file `wpk run` writes an output to (the CLI contract)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


# ---- where the cases come from ----

def _serialize(value, type_proto, name):
    """One data-set value as the bytes ONNX's backend test data stores it as."""
    kind = type_proto.WhichOneof("value")
    if isinstance(value, onnx.TensorProto):
        return value.SerializeToString()
    if kind == "sequence_type":
        return numpy_helper.from_list(value, name).SerializeToString()
    if kind == "optional_type":
        return numpy_helper.from_optional(value, name).SerializeToString()
    if kind == "map_type":
        return numpy_helper.from_dict(value, name).SerializeToString()
    return numpy_helper.from_array(value, name).SerializeToString()


def generate_cases(dest):
    """Writes every node case defined in the onnx package to dest, in the layout of data/node."""
    from onnx.backend.test.case import node as node_cases
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the case definitions divide by zero on purpose
        cases = node_cases.collect_testcases()
    for case in cases:
        case_dir = tmp / case.name
        case_dir.mkdir()
        (case_dir / "model.onnx").write_bytes(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = case_dir / f"test_data_set_{i}"
            ds.mkdir()
            for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, value in enumerate(values):
                    data = _serialize(value, infos[j].type, infos[j].name)
                    (ds / f"{kind}_{j}.pb").write_bytes(data)
    try:
        tmp.rename(dest)
    except OSError:  # another run generated it meanwhile
        shutil.rmtree(tmp)


def node_data_dir(data_arg):
    if data_arg:
        path = Path(data_arg)
    else:
        shipped = Path(onnx.__file__).parent / "backend/test/data/node"
        if shipped.is_dir() and any(shipped.iterdir()):
            return shipped
        path = Path(tempfile.gettempdir()) / f"wpk-onnx-node-{onnx.__version__}"
    if not path.is_dir():
        print(f"generating ONNX node cases into {path} ...", flush=True)
        generate_cases(path)
    return path


# ---- selection and exclusions ----

@dataclass
class Case:
    name: str
    dir: Path


def select_cases(data_dir, ops):
    """Cases whose every node is an op we hold, sorted by name."""
    cases = []
    for case_dir in sorted(data_dir.iterdir()):
        model_path = case_dir / "model.onnx"
        if not model_path.is_file():
            continue
        graph = onnx.load(str(model_path), load_external_data=False).graph
        if all(n.domain in ("", "ai.onnx") and n.op_type in ops for n in graph.node):
            cases.append(Case(case_dir.name, case_dir))
    return cases


def load_exclusions(path):
    """[(pattern, reason)] from `pattern  # reason` lines; a line without a reason is an error."""
    rules = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        if not pattern.strip() or not reason.strip():
            sys.exit(f"{path}:{lineno}: expected `case_pattern  # reason`, got: {line}")
        rules.append((pattern.strip(), reason.strip()))
    return rules


def exclusion_for(name, rules):
    for pattern, reason in rules:
        if fnmatch.fnmatchcase(name, pattern):
            return pattern, reason
    return None


# ---- running one case ----

def load_pb_tensor(path):
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def is_bfloat16(dtype):
    return dtype.name == "bfloat16"


def compare(expected, actual):
    """None when actual matches expected, else what differs."""
    if is_bfloat16(expected.dtype) and actual.dtype.kind == "V" and actual.dtype.itemsize == 2:
        actual = actual.view(expected.dtype)  # .npy has no bfloat16: it stores 2-byte voids
    if is_bfloat16(expected.dtype) and is_bfloat16(actual.dtype):
        expected, actual = expected.astype(np.float32), actual.astype(np.float32)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if expected.dtype.kind == "f":
        e, a = expected.astype(np.float64), actual.astype(np.float64)
        bad = ~np.isclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True)
    else:
        e, a = expected, actual
        bad = a != e
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    msg = f"{int(bad.sum())} of {bad.size} elements differ, first at {list(idx)}: got {a[idx]}, expected {e[idx]}"
    if expected.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            msg += f"; max abs err {np.nanmax(np.abs(a - e)):.3g}"
    return msg


def is_clean_rejection(failure):
    """Whether a failure is wpk refusing the case with a message (or a non-tensor value)."""
    return "wpk exited 1:\nwpk: error: " in failure or failure.endswith("not a tensor")


def tail(text, lines=6, chars=800):
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def run_data_set(wpk, model_path, graph, ds, work):
    """Runs one test_data_set_* directory; returns None on success, else the failure."""
    initializers = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in initializers]
    out_dir = work / "out"
    args = [wpk, "run", str(model_path), "-o", str(out_dir)]
    for j, vi in enumerate(inputs):
        pb = ds / f"input_{j}.pb"
        if not pb.exists():
            break
        if vi.type.WhichOneof("value") != "tensor_type":
            return f"input {vi.name} is a {vi.type.WhichOneof('value')}, not a tensor"
        npy = work / f"input_{j}.npy"
        np.save(npy, load_pb_tensor(pb))
        args += ["-i", f"{vi.name}={npy}"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"wpk timed out after {CASE_TIMEOUT_S} s"
    if SANITIZER_REPORT.search(proc.stderr):
        return f"sanitizer report (exit {proc.returncode}):\n{tail(proc.stderr, lines=20, chars=3000)}"
    if proc.returncode < 0:
        return f"wpk crashed (signal {-proc.returncode}):\n{tail(proc.stderr)}"
    if proc.returncode != 0:
        return f"wpk exited {proc.returncode}:\n{tail(proc.stderr)}"
    for j, vi in enumerate(graph.output):
        if vi.type.WhichOneof("value") != "tensor_type":
            return f"output {vi.name} is a {vi.type.WhichOneof('value')}, not a tensor"
        got_path = out_dir / out_file_name(vi.name)
        if not got_path.exists():
            return f"output {vi.name}: wpk wrote no {got_path.name}"
        try:
            got = np.load(got_path)
        except (ValueError, OSError) as e:
            return f"output {vi.name}: wpk wrote an unreadable {got_path.name}: {e}"
        diff = compare(load_pb_tensor(ds / f"output_{j}.pb"), got)
        if diff:
            return f"output {vi.name}: {diff}"
    return None


def run_case(case, wpk, tmp_root):
    """None when every data set of the case passes, else the first failure."""
    model_path = case.dir / "model.onnx"
    graph = onnx.load(str(model_path)).graph
    work = Path(tempfile.mkdtemp(prefix=case.name + ".", dir=tmp_root))
    try:
        for ds in sorted(case.dir.glob("test_data_set_*")):
            failure = run_data_set(wpk, model_path, graph, ds, work)
            if failure:
                return f"{ds.name}: {failure}" if ds.name != "test_data_set_0" else failure
        return None
    except Exception as e:  # a broken case file must not stop the whole run
        return f"harness error: {type(e).__name__}: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("-j", type=int, default=2, help="parallel wpk processes (default 2)")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("--data", help="node case directory (default: the onnx package's, or a generated cache)")
    ap.add_argument("--excluded", default=str(HERE / "excluded.txt"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case as it finishes")
    args = ap.parse_args()

    start = time.perf_counter()
    rules = load_exclusions(Path(args.excluded))
    cases = select_cases(node_data_dir(args.data), supported_ops())
    cases = [c for c in cases if args.filter in c.name]
    if args.list:
        for c in cases:
            ex = exclusion_for(c.name, rules)
            print(c.name + (f"  # excluded: {ex[1]}" if ex else ""))
        print(f"{len(cases)} cases")
        return 0
    if not os.access(args.wpk, os.X_OK):
        sys.exit(f"run_conformance: no wpk binary at {args.wpk} (use --wpk)")

    passed, failed, excluded, stale = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="wpk-conformance.") as tmp_root, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.j)) as pool:
        futures = {pool.submit(run_case, c, args.wpk, tmp_root): c for c in cases}
        for fut in concurrent.futures.as_completed(futures):
            case, failure = futures[fut], fut.result()
            ex = exclusion_for(case.name, rules)
            if ex and failure and is_clean_rejection(failure):
                excluded.append(case.name)
            elif ex and failure:
                failed.append((case.name, f"(excluded, but must be rejected with exit 1) {failure}"))
            elif ex:
                stale.append(f"{case.name}: passes but is excluded by `{ex[0]}`")
            elif failure:
                failed.append((case.name, failure))
            else:
                passed.append(case.name)
            if args.verbose:
                print(f"{'FAIL' if failure else 'ok  '} {case.name}{'  (excluded)' if ex else ''}", flush=True)
    if not args.filter:
        for pattern, reason in rules:
            if not any(fnmatch.fnmatchcase(c.name, pattern) for c in cases):
                stale.append(f"`{pattern}` matches no selected case")

    for name, failure in sorted(failed):
        print(f"FAIL {name}: {failure}\n")
    for line in sorted(stale):
        print(f"STALE EXCLUSION {line}")
    print(f"\nconformance: {len(passed)} passed, {len(failed)} failed, {len(excluded)} excluded, "
          f"{len(stale)} stale exclusions, {len(cases)} selected cases "
          f"({time.perf_counter() - start:.1f} s)")
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
