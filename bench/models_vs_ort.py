#!/usr/bin/env python3
"""Whole models on wpk (tuned on this machine, compiled to a plan) against ONNX Runtime,
OpenVINO and PyTorch, in one run, at each batch and thread count: median latencies,
their ratios (also against the faster of ONNX Runtime and OpenVINO, the peers users pick
between) and geometric means, with provenance, as a markdown table.
    models_vs_ort.py [--models resnet18,resnet50,mobilenet_v2,squeezenet1_1] [--batches 1,8]
                     [--threads 1,2] [--tune-time 120] [--tune-batches 1] [--skip-tune]
                     [--untuned] [--no-torch] [--no-openvino]
                     [--iters 10] [--rounds 5] [--warmup 3]
                     [--out bench/results/models_vs_ort.md] [--wpk build/wpk] [--dir DIR]
--untuned: what a user gets first, `wpk compile --db ''` at the defaults (no tuning, no records).

Per model (random weights, exported once by PyTorch with a symbolic batch dim "N" into --dir,
the cache also kept by tests/torchvision; torchvision's classifiers, or the test suite's
transformers by their names in tests/transformers/export_models.py, e.g. bert_small, whose
PyTorch timing is left out; where OpenVINO cannot compile a model, ONNX Runtime alone is the
peer and the table says so):
  1. per batch of --tune-batches (default: 1 only), `wpk tune MODEL --time T --db DB` (T =
     --tune-time seconds per model and batch; DB is DIR/records.db, so a rerun continues the
     tuning; `wpk tune` specializes symbolic dims at 1, so for batch B > 1 it tunes a copy of the
     model with the batch dim fixed at B, whose workloads are those of the batch-B plan); then per
     batch `wpk compile --batch B` into a plan for that batch, whose nodes without records of
     their own take the best of their batch-1 records ("tuned-b1") (while `wpk compile` does not
     exist: `wpk bench MODEL --db DB`);
  2. per batch and thread count, --rounds rounds in which wpk and ONNX Runtime take turns:
     `wpk bench --json` (--warmup runs, then --iters timed runs; its random inputs and outputs
     saved), then --iters runs of one ONNX Runtime session on the same inputs (every graph
     optimization, intra_op_num_threads = threads, inter_op 1, sequential execution; warmed up
     once; its outputs must match wpk's within rel L2 <= 1e-4), then --iters runs of OpenVINO
     (pip `openvino`: CPU plugin, PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS = threads,
     INFERENCE_PRECISION_HINT=f32, the same inputs and the same check); and PyTorch eager
     (torch.set_num_threads, inference mode, --rounds x --iters runs, not interleaved) in a
     worker under a Python that has torch (--torch-python, default /usr/bin/python3).
Ratios are other/wpk of the medians over all timed runs (> 1: wpk is faster). Taking turns
matters on a shared machine, whose cores' speed drifts by tens of percent within a minute: run
one after the other, each runtime meets a different drift. The load average is recorded before
and after.
Exit status: 0 when every run worked and every output matched, 1 otherwise.
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1"]
# the test suite's transformers (tests/transformers/export_models.py exports them)
TRANSFORMERS = ["transformer_encoder", "bert_small", "bert_base4", "vit_b_16", "swin_t"]
TOLERANCE = 1e-4
DEFAULT_TUNE_S = 120


# How idle worker threads wait, per --wait (the provenance line says which was used).
WAIT_NOTES = {
    "default": "each runtime's own: wpk spins 10,000 rounds (about 0.5 ms) then sleeps, ONNX "
               "Runtime's default spinning, PyTorch's libgomp default",
    "passive": "OMP_WAIT_POLICY=passive for wpk and PyTorch, "
               "session.intra_op.allow_spinning=0 for ONNX Runtime",
    "active": "OMP_WAIT_POLICY=active, ONNX Runtime's default spinning",
}

# ---- the torch worker: runs under --torch-python (torch + torchvision, no onnx needed) ----

def torch_model(name):
    """The model with export_models.py's random weights and calibrated BatchNorm statistics."""
    import torch
    import torchvision
    sys.path.insert(0, str(REPO / "tests" / "torchvision"))
    import export_models
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, **export_models.EXTRA_ARGS.get(name, {}))
    export_models.calibrate_batchnorm(model)
    return model


def worker_export(name, path):
    import torch
    model = torch_model(name)
    tmp = str(path) + ".tmp"  # an interrupted export must not look finished
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(1, 3, 224, 224), tmp, opset_version=13,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                          do_constant_folding=True)
    os.replace(tmp, path)


def worker_time(name, configs, warmup, iters):
    """{"B,T": [samples in ms]} for each (batch, threads) of configs."""
    import torch
    torch.set_num_interop_threads(1)
    model = torch_model(name)
    out = {}
    for batch, threads in configs:
        torch.set_num_threads(threads)
        x = torch.rand(batch, 3, 224, 224) * 2 - 1
        with torch.no_grad(), torch.inference_mode():
            for _ in range(warmup):
                model(x)
            samples = []
            for _ in range(iters):
                start = time.perf_counter()
                model(x)
                samples.append((time.perf_counter() - start) * 1e3)
        out[f"{batch},{threads}"] = samples
    return out


def worker_main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["export", "time", "version"])
    ap.add_argument("--model")
    ap.add_argument("--path")
    ap.add_argument("--configs", default="")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args(argv)
    if a.what == "export":
        worker_export(a.model, a.path)
    elif a.what == "version":
        import torch
        import torchvision
        config = torch.__config__.show()
        cpu = re.search(r"CPU capability usage: (\S+)", config)
        blas = re.search(r"BLAS_INFO=([^,]+)", config)
        print(json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__,
                          "torch_build": f"CPU capability {cpu.group(1) if cpu else '?'}, "
                                         f"BLAS {blas.group(1) if blas else '?'}, "
                                         f"mkldnn {torch.backends.mkldnn.is_available()}"}))
    else:
        configs = [tuple(map(int, c.split("x"))) for c in a.configs.split(",") if c]
        print(json.dumps(worker_time(a.model, configs, a.warmup, a.iters)))


# ---- the driver: runs under a Python with numpy and onnxruntime ----

def sh(*args, cwd=REPO):
    try:
        return subprocess.run(args, capture_output=True, text=True, cwd=cwd).stdout.strip()
    except OSError:
        return ""


def load_average():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def rel_l2(actual, expected):
    import numpy as np
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    norm = np.linalg.norm(e)
    diff = np.linalg.norm(a - e)
    return float(diff / norm) if norm > 0 else float(diff)


def run(args, what, timeout=None):
    """stdout of a command; raises RuntimeError naming it and its stderr when it fails."""
    try:
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what}: timed out after {timeout} s")
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


def wpk_has(wpk, command):
    """Whether this wpk binary knows a subcommand (`wpk compile` arrives after `wpk bench`)."""
    proc = subprocess.run([wpk, command, "--help"], capture_output=True, text=True)
    return "unknown command" not in proc.stderr


class Bench:
    def __init__(self, args):
        self.args = args
        self.wpk = args.wpk
        self.dir = Path(args.dir)
        self.db = self.dir / "records.db"
        self.has_compile = wpk_has(self.wpk, "compile")
        self.rows = []          # one per (model, batch, threads)
        self.failures = []
        self.notes = []
        self.provenance = None  # from the first `wpk bench --json`

    def log(self, msg):
        print(msg, flush=True)

    def export(self, name):
        path = self.dir / f"{name}.onnx"
        if not path.exists():
            start = time.perf_counter()
            if name in TRANSFORMERS:
                run([self.args.torch_python, REPO / "tests/transformers/export_models.py",
                     self.dir, "--models", name], f"export {name}")
            else:
                run([self.args.torch_python, __file__, "--torch-worker", "export", "--model",
                     name, "--path", path], f"export {name}")
            self.log(f"{name}: exported in {time.perf_counter() - start:.0f} s -> {path}")
        return path

    def tune_model(self, name, model, batch):
        """The model to tune for this batch: `wpk tune` specializes symbolic dims at 1, so for
        another batch a copy with the batch dim fixed, whose kernels are the same workloads as
        `wpk compile --batch B` specializes (the same workload keys in the records)."""
        if batch == 1:
            return model
        fixed = self.dir / f"{name}.b{batch}.onnx"
        if not fixed.exists():
            import onnx
            m = onnx.load(str(model))
            for v in list(m.graph.input) + list(m.graph.output):
                dims = v.type.tensor_type.shape.dim
                if dims and not dims[0].HasField("dim_value"):
                    dims[0].dim_value = batch
            tmp = fixed.with_suffix(".tmp")
            onnx.save(m, str(tmp))
            os.replace(tmp, fixed)
        return fixed

    def tune(self, name, model, batch):
        if self.args.untuned or self.args.skip_tune or batch not in self.args.tune_batches:
            return
        start = time.perf_counter()
        out = run([self.wpk, "tune", self.tune_model(name, model, batch),
                   "--time", f"{self.args.tune_time:g}s", "--db", self.db, "-O", self.args.opt],
                  f"wpk tune {name} (batch {batch})")
        took = time.perf_counter() - start
        tasks = re.search(r"(\d+) tasks?, (\d+) trials? measured", out)
        self.log(f"{name} batch {batch}: tuned in {took:.0f} s"
                 + (f" ({tasks.group(1)} tasks, {tasks.group(2)} new trials)" if tasks else ""))

    def compile(self, name, model, batch):
        """The plan to bench for this batch, or the model itself (benched with --db) while
        `wpk compile` does not exist."""
        if not self.has_compile:
            return model
        kind = "untuned" if self.args.untuned else "tuned"
        plan = self.dir / f"{name}.b{batch}.O{self.args.opt}.{kind}.wpk"
        start = time.perf_counter()
        db = "" if self.args.untuned else self.db
        out = run([self.wpk, "compile", model, "--db", db, "--batch", batch, "-O", self.args.opt,
                   "-o", plan], f"wpk compile {name} --batch {batch}")
        check = re.search(r"^speed check.*$", out, re.M)
        if check:
            self.notes.append(f"{name} batch {batch}: {check.group(0)}")
        self.log(f"{name} batch {batch}: compiled in {time.perf_counter() - start:.0f} s -> {plan}")
        return plan

    def bench_wpk(self, name, target, batch, threads, save):
        cmd = [self.wpk, "bench", target, "--threads", threads, "--iters", self.args.iters,
               "--warmup", self.args.warmup, "--json", "--save", save]
        if not str(target).endswith(".wpk"):
            cmd += ["--batch", batch, "-O", self.args.opt]
            if self.db.exists():  # none yet with --skip-tune on a fresh --dir
                cmd += ["--db", self.db]
        return json.loads(run(cmd, f"wpk bench {name} batch {batch} threads {threads}"))

    def ort_session(self, model, inputs, threads):
        """An ONNX Runtime session on model, warmed up on inputs."""
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if self.args.wait == "passive":
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        for _ in range(self.args.warmup):
            sess.run(None, inputs)
        return sess

    def bench_ort(self, sess, inputs):
        """--iters timed runs: (outputs by name, latencies in ms)."""
        outputs = None
        samples = []
        for _ in range(self.args.iters):
            start = time.perf_counter()
            outputs = sess.run(None, inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, outputs)), samples

    def ov_model(self, model, inputs, threads):
        """An OpenVINO compiled model on model (latency hint, f32, threads), warmed up."""
        import openvino as ov
        core = ov.Core()
        compiled = core.compile_model(str(model), "CPU", {
            "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
            "INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        for _ in range(self.args.warmup):
            request.infer(inputs)
        return compiled, request

    def bench_ov(self, ov_pair, inputs):
        """--iters timed runs: (outputs by name, latencies in ms)."""
        compiled, request = ov_pair
        samples = []
        for _ in range(self.args.iters):
            start = time.perf_counter()
            request.infer(inputs)
            samples.append((time.perf_counter() - start) * 1e3)
        outputs = {o.get_any_name(): request.get_tensor(o).data.copy() for o in compiled.outputs}
        return outputs, samples

    def bench_torch(self, name, configs):
        spec = ",".join(f"{b}x{t}" for b, t in configs)
        out = run([self.args.torch_python, __file__, "--torch-worker", "time", "--model", name,
                   "--configs", spec, "--warmup", self.args.warmup,
                   "--iters", self.args.iters * self.args.rounds],
                  f"PyTorch {name}")
        return json.loads(out)

    def model(self, name):
        import numpy as np
        path = self.export(name)
        configs = [(b, t) for b in self.args.batches for t in self.args.threads]
        torch_ms = self.bench_torch(name, configs) \
            if not self.args.no_torch and name not in TRANSFORMERS else None
        for batch in self.args.batches:
            self.tune(name, path, batch)
            target = self.compile(name, path, batch)
            for threads in self.args.threads:
                row = {"model": name, "batch": batch, "threads": threads}
                # wpk and ONNX Runtime take turns, --rounds times: on a shared machine the
                # speed of the cores drifts by tens of percent within a minute, and both must
                # be timed through the same drift for their ratio to mean anything
                wpk_samples, ort_samples, ov_samples, rounds = [], [], [], []
                sess = ov_pair = inputs = wpk_out = ort_out = ov_out = None
                for _ in range(self.args.rounds):
                    time.sleep(self.args.settle)
                    with tempfile.TemporaryDirectory(prefix="wpk-bench.") as tmp:
                        save = Path(tmp)
                        rep = self.bench_wpk(name, target, batch, threads, save)
                        if inputs is None:
                            self.provenance = self.provenance or rep.get("provenance")
                            row["sources"] = rep.get("sources", {})
                            inputs = {i["name"]: np.load(save / i["file"]) for i in rep["inputs"]}
                            wpk_out = {o["name"]: np.load(save / o["file"]) for o in rep["outputs"]}
                    w = rep.get("samples_ms") or [rep["latency_ms"]["median"]]
                    if sess is None:
                        sess = self.ort_session(path, inputs, threads)
                    time.sleep(self.args.settle)
                    out, o = self.bench_ort(sess, inputs)
                    ort_out = ort_out or out
                    wpk_samples += w
                    ort_samples += o
                    peer = statistics.median(o)
                    if not self.args.no_openvino and ov_pair is not False:
                        if ov_pair is None:
                            try:
                                ov_pair = self.ov_model(path, inputs, threads)
                            except Exception as e:  # noqa: BLE001 (OpenVINO's own errors)
                                ov_pair = False
                                self.notes.append(f"{name} batch {batch}: OpenVINO cannot "
                                                  f"compile it ({str(e).splitlines()[0][:160]});"
                                                  f" ONNX Runtime alone is the peer")
                    if ov_pair:
                        time.sleep(self.args.settle)
                        out, v = self.bench_ov(ov_pair, inputs)
                        ov_out = ov_out or out
                        ov_samples += v
                        peer = min(peer, statistics.median(v))
                    rounds.append(peer / statistics.median(w))
                del sess, ov_pair
                row["wpk"] = statistics.median(wpk_samples)
                row["wpk_min"] = min(wpk_samples)
                row["ort"] = statistics.median(ort_samples)
                row["ort_min"] = min(ort_samples)
                row["rounds"] = rounds
                row["ov"] = statistics.median(ov_samples) if ov_samples else None
                row["peer"] = min(row["ort"], row["ov"] or math.inf)
                samples = torch_ms[f"{batch},{threads}"] if torch_ms else None
                row["torch"] = statistics.median(samples) if samples else None
                row["torch_min"] = min(samples) if samples else None
                row["err"] = max(rel_l2(wpk_out[k], v) for k, v in ort_out.items())
                if ov_out:
                    ov_err = max(rel_l2(ov_out[k], ort_out[k]) for k in ort_out if k in ov_out)
                    if not ov_err <= TOLERANCE:
                        self.notes.append(f"{name} batch {batch}: OpenVINO's outputs differ "
                                          f"from ONNX Runtime's (rel L2 {ov_err:.3g})")
                if not row["err"] <= TOLERANCE:
                    self.failures.append(f"{name} batch {batch} threads {threads}: wpk's outputs "
                                         f"differ from ONNX Runtime's (rel L2 {row['err']:.3g} > {TOLERANCE:g})")
                self.rows.append(row)
                self.log(f"{name:14} batch {batch} threads {threads}: wpk {row['wpk']:8.2f} ms  "
                         f"ORT {row['ort']:8.2f} ms  OpenVINO {fmt(row['ov'])} ms  "
                         f"PyTorch {fmt(row['torch'])} ms  rel L2 {row['err']:.2g}")

    def markdown(self, started, load_before, versions):
        a = self.args
        p = self.provenance or {}
        lines = ["# Whole models: wpk vs ONNX Runtime, OpenVINO and PyTorch (CPU)", "",
                 f"Written by `bench/models_vs_ort.py {' '.join(sys.argv[1:])}` on "
                 f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(started))} "
                 f"(took {(time.time() - started) / 60:.0f} min).", "",
                 "## Provenance", ""]
        for key in ("commit", "version", "compiler", "build", "cpu", "target", "cores", "libraries"):
            if key in p:
                lines.append(f"- {key}: `{p[key]}`")
        lines += [f"- ONNX Runtime {versions['ort']}, OpenVINO {versions['openvino']}, "
                  f"PyTorch {versions['torch']} "
                  f"(torchvision {versions['torchvision']}; {versions['torch_build']}), "
                  f"Python {platform.python_version()}",
                  f"- load average (1/5/15 min) before: {load_before}, after: {load_average()} "
                  f"(a shared machine: other processes' work is in these figures)",
                  f"- models: torchvision with random weights (seed 0, BatchNorm calibrated), "
                  f"or the test suite's transformers (tests/transformers/export_models.py), "
                  f"exported with a symbolic batch dim, opset 13",
                  (f"- wpk: untuned, `wpk compile --db '' -O {a.opt}` (every kernel at its "
                   f"default, no records), a plan per batch, `wpk bench PLAN --json`"
                   if a.untuned else
                   f"- wpk: `wpk tune --time {a.tune_time:g}s -O {a.opt}` per model at batch "
                   f"{', '.join(map(str, a.tune_batches))} (batch > 1: "
                   f"on a copy with the batch dim fixed, as `wpk tune` specializes symbolic dims "
                   f"at 1; other batches run on the batch-1 records, source tuned-b1) "
                   f"into one records database"
                   + (" (skipped: --skip-tune, the database as it was)" if a.skip_tune else "")
                   + ", `wpk compile` into a plan per batch (its speed check on), "
                     "`wpk bench PLAN --json`"),
                  f"- ONNX Runtime: all graph optimizations, intra_op_num_threads = threads, "
                  f"inter_op 1, sequential; OpenVINO: CPU plugin, latency hint, "
                  f"INFERENCE_NUM_THREADS = threads, f32 precision hint; PyTorch: eager, "
                  f"torch.set_num_threads(threads), "
                  f"interop threads 1, inference mode",
                  f"- idle threads: {a.wait} in all three (" + WAIT_NOTES[a.wait] + ")",
                  f"- wpk, ONNX Runtime and OpenVINO take turns: {a.rounds} rounds of {a.iters} "
                  f"timed runs each, each turn after a {a.settle} s pause "
                  f"(wpk: a `wpk bench` per round, {a.warmup} warm-up runs in "
                  f"each; the peers: one session each, {a.warmup} warm-up runs first), so all are "
                  f"timed through "
                  f"the same drift of this shared machine's speed; PyTorch: {a.warmup} warm-up "
                  f"runs, then {a.rounds * a.iters} timed runs, not interleaved; the table gives "
                  f"medians over all timed runs (wall time); ratios are other / wpk (> 1: wpk is "
                  f"faster); the last column spreads the per-round ratios", "",
                  "## Latency", "",
                  "| model | batch | threads | wpk ms | ORT ms | OpenVINO ms | PyTorch ms | ORT/wpk "
                  "| OpenVINO/wpk | faster peer/wpk | PyTorch/wpk | rel L2 vs ORT | faster peer/wpk "
                  "per round (min-max) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        g = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else math.nan  # noqa: E731
        cols = {"ort": [], "ov": [], "peer": [], "torch": []}
        for r in self.rows:
            for k in cols:
                if r[k] is not None:
                    cols[k].append(r[k] / r["wpk"])
            spread = f"{min(r['rounds']):.2f}-{max(r['rounds']):.2f}"
            lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['wpk']:.2f} | "
                         f"{r['ort']:.2f} | {fmt(r['ov'])} | {fmt(r['torch'])} | "
                         f"{ratio(r['ort'], r['wpk'])} | {ratio(r['ov'], r['wpk'])} | "
                         f"**{ratio(r['peer'], r['wpk'])}** | {ratio(r['torch'], r['wpk'])} | "
                         f"{r['err']:.1e} | {spread} |")
        if self.rows:
            lines.append("| **geomean** | | | | | | | " + " | ".join(
                f"**{g(cols[k]):.2f}**" for k in ("ort", "ov", "peer", "torch")) + " | | |")
            # the bars against the faster peer: untuned >= 1.0 in every row; tuned: geomean
            # >= 1.3 and no row below 1.1
            bar = cols["peer"]
            if a.untuned:
                met = min(bar) >= 1.0
                lines += ["", f"Untuned defaults against the faster peer: ahead in "
                          f"{sum(x >= 1.0 for x in bar)} of {len(bar)} rows, geomean {g(bar):.2f}, "
                          f"lowest {min(bar):.2f}; the bar (every row >= 1.0) is "
                          f"{'met' if met else 'NOT met'}."]
            else:
                met = g(bar) >= 1.3 and min(bar) >= 1.1
                lines += ["", f"Tuned against the faster peer: geomean {g(bar):.2f}, lowest "
                          f"{min(bar):.2f}; the bar (geomean >= 1.3, no row below 1.1) is "
                          f"{'met' if met else 'NOT met'}."]
        lines += ["", "## Minimums and wpk's kernel sources", "",
                  "| model | batch | threads | wpk min | ORT min | PyTorch min | wpk nodes by source |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for r in self.rows:
            src = ", ".join(f"{k} {v}" for k, v in sorted(r["sources"].items())) or "-"
            lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['wpk_min']:.2f} | "
                         f"{r['ort_min']:.2f} | {fmt(r['torch_min'])} | {src} |")
        if self.failures or self.notes:
            lines += ["", "## Problems", ""] + [f"- {f}" for f in self.failures + self.notes]
        return "\n".join(lines) + "\n"


def fmt(ms):
    return f"{ms:.2f}" if ms is not None else "-"


def ratio(peer, wpk):
    return f"{peer / wpk:.2f}" if peer is not None else "-"


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need numbers >= 1: {text!r}")
    return values


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        worker_main(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--batches", type=int_list, default=[1, 8], help="default: 1,8")
    ap.add_argument("--threads", type=int_list, default=[1, 2], help="default: 1,2")
    ap.add_argument("--tune-time", type=float, default=DEFAULT_TUNE_S,
                    help="seconds of `wpk tune` per model and batch (default: %(default)s)")
    ap.add_argument("--tune-batches", type=int_list, default=[1],
                    help="the batches tuned; the others take their batch-1 records (default: 1)")
    ap.add_argument("--skip-tune", action="store_true", help="use the records database as it is")
    ap.add_argument("--untuned", action="store_true",
                    help="wpk at its defaults without records (`wpk compile --db ''`)")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out")
    ap.add_argument("--iters", type=int, default=10,
                    help="timed runs of each per round (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds in which wpk and ONNX Runtime take turns (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up runs of each (default: %(default)s)")
    # Each runtime's idle workers spin a while after its last run (ONNX Runtime's and
    # OpenVINO's pools, wpk's 10,000 rounds); a turn that starts inside that spin shares the
    # cores with it, and at 2-3 ms per run that is most of a 5-run turn. So every turn of
    # every runtime starts after the same pause.
    ap.add_argument("--settle", type=float, default=0.2,
                    help="seconds of pause before each runtime's turn (default: %(default)s)")
    # 3: the blocked NCHW16c layout, as ONNX Runtime's NCHWc transformer; measured against -O2
    # (no records, batch 8, 1 thread): MobileNetV2 112 against 202 ms, SqueezeNet 50 against 61
    ap.add_argument("-O", dest="opt", type=int, default=3, choices=range(4),
                    help="wpk's graph optimization level, for tune, compile and bench (default: 3)")
    ap.add_argument("--out", default=str(REPO / "bench/results/models_vs_ort.md"))
    ap.add_argument("--wpk", default=str(REPO / "build/wpk"), help="the wpk binary")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "wpk-models-vs-ort"),
                    help="exported models, plans and the records database (default: %(default)s)")
    ap.add_argument("--torch-python", default="/usr/bin/python3", help="a Python with torch + torchvision")
    ap.add_argument("--wait", choices=list(WAIT_NOTES), default="default",
                    help="how idle worker threads wait: default (each runtime's own, as its users "
                         "get it), passive (all sleep at once) or active (all spin); on a shared "
                         "machine spinning threads fight other work for the cores")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS + TRANSFORMERS]
    if unknown:
        ap.error("unknown model(s): " + ", ".join(unknown)
                 + f" (known: {', '.join(MODELS + TRANSFORMERS)})")
    if args.iters < 1 or args.rounds < 1 or args.warmup < 0 or args.tune_time <= 0:
        ap.error("--iters and --rounds must be >= 1, --warmup >= 0, --tune-time > 0")
    if not os.access(args.wpk, os.X_OK):
        ap.error(f"no wpk binary at {args.wpk} (build it, or pass --wpk)")
    if shutil.which(args.torch_python) is None and not os.access(args.torch_python, os.X_OK):
        ap.error(f"no Python at {args.torch_python} (--torch-python: one with torch + torchvision)")
    import onnxruntime as ort
    versions = json.loads(run([args.torch_python, __file__, "--torch-worker", "version"],
                              f"{args.torch_python} (torch + torchvision)"))
    versions["ort"] = ort.__version__
    versions["openvino"] = "(not run)"
    if not args.no_openvino:
        import openvino
        versions["openvino"] = openvino.__version__
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    # inherited by wpk and the PyTorch worker (libgomp reads it when it is loaded)
    if args.wait != "default":
        os.environ["OMP_WAIT_POLICY"] = args.wait

    started, load_before = time.time(), load_average()
    bench = Bench(args)
    if not bench.has_compile:
        bench.notes.append("this wpk has no `compile` command: models were benched with --db, not as plans")
    for name in args.models:
        try:
            bench.model(name)
        except (RuntimeError, KeyError, ValueError, OSError) as e:
            bench.failures.append(f"{name}: {e}")
            print(f"{name}: FAILED: {e}", file=sys.stderr, flush=True)
    text = bench.markdown(started, load_before, versions)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print("\n" + text)
    print(f"written to {args.out}")
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
