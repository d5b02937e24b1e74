#!/usr/bin/env python3
"""Load test of `wpk serve`: throughput and p50/p99 latency at several concurrencies, without
dynamic batching (--max-batch 1, the baseline) and with it, in one run, on one model.
    serve_load.py [--wpk build/wpk] [--model resnet18.onnx] [--concurrency 1,4,16,64]
                  [--duration 15] [--max-batch 8] [--max-delay-us 2000] [--threads 0]
                  [--out bench/results/serve.md]
Starts each server itself on loopback (a free port). The clients are asyncio tasks, one
keep-alive connection each, sending binary-tensor requests (Triton's binary data extension)
of one image drawn from a pool of distinct inputs; every response is checked against that
input's result computed alone (a request at a time, before the load), so a response with
another request's rows counts as mismatched. The default model is torchvision's resnet18 with
a free batch dim, exported by tests/torchvision/export_models.py into build/torchvision.
Prints the table and writes it, with the provenance, to --out.
"""
import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
POOL = 16
RTOL, ATOL = 1e-3, 1e-3  # batched kernels against batch-1 ones; mixed rows differ by far more


def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stdout.strip()
    except OSError:
        return ""


def provenance(args):
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dirty = " (dirty)" if sh("git", "status", "--porcelain", "--", "src", "tools") else ""
    return {
        "commit": sh("git", "rev-parse", "--short", "HEAD") + dirty,
        "wpk": sh(args.wpk, "version"),
        "compiler": (sh(os.environ.get("CC", "cc"), "--version").splitlines() or ["?"])[0],
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads per batch": args.threads or "the physical cores",
        "model": os.path.basename(args.model),
        "duration per point": "%g s (after %g s of warm-up load)" % (args.duration, args.warmup),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "loadavg at start": "%.2f %.2f %.2f" % os.getloadavg(),
    }


def default_model(args):
    out = REPO / "build" / "torchvision"
    path = out / "resnet18.onnx"
    if not path.exists():
        subprocess.run(["/usr/bin/python3", str(REPO / "tests/torchvision/export_models.py"),
                        str(out), "--models", "resnet18"], check=True)
    return str(path)


class Server:
    def __init__(self, args, max_batch):
        cmd = [args.wpk, "serve", args.model, "--port", "0", "--max-batch", str(max_batch),
               "--max-delay-us", str(args.max_delay_us), "--threads", str(args.threads),
               "--queue", "1024"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"model '([^']+)' listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit("serve_load: the server did not start (%r)" % line)
        self.name, self.port = m.group(1), int(m.group(2))
        import urllib.request
        meta = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/v2/models/%s" % (
            self.port, self.name)).read())
        self.input = meta["inputs"][0]["name"]
        self.shape = [d if d >= 0 else 1 for d in meta["inputs"][0]["shape"]]

    def stop(self):
        """SIGTERM: the server finishes what it has and exits."""
        self.proc.terminate()
        return self.proc.wait(120)


def request_bytes(srv, x):
    name = srv.name
    head = json.dumps({"inputs": [{"name": srv.input, "datatype": "FP32", "shape": list(x.shape),
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    body = head + x.tobytes()
    return (("POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %d\r\n"
             "Content-Length: %d\r\n\r\n" % (name, len(head), len(body))).encode() + body)


async def exchange(reader, writer, req):
    """One request on a keep-alive connection: (status, output array or error text)."""
    writer.write(req)
    await writer.drain()
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    if status != 200:
        return status, body.decode(errors="replace")
    n = int(headers["inference-header-content-length"])
    shape = json.loads(body[:n])["outputs"][0]["shape"]
    return status, np.frombuffer(body[n:], np.float32).reshape(shape)


async def client(port, reqs, refs, until_warm, until, seed, out):
    rng = np.random.RandomState(seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            k = rng.randint(len(reqs))
            t0 = time.perf_counter()
            try:
                status, y = await exchange(reader, writer, reqs[k])
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                out["failed"] += 1
                out["errors"].append(repr(e))
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            t1 = time.perf_counter()
            if t0 < until_warm:
                continue
            if status != 200:
                out["failed"] += 1
                out["errors"].append("%d %s" % (status, y[:200]))
            elif not np.allclose(y, refs[k], RTOL, ATOL):
                out["mismatched"] += 1
            else:
                out["latency"].append(t1 - t0)
    finally:
        writer.close()


def metrics(port):
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            values[re.sub(r"\{.*\}", "", k) if "_bucket" not in k else k] = float(v)
    return values


async def load(args, srv, reqs, refs, concurrency):
    out = {"failed": 0, "mismatched": 0, "latency": [], "errors": []}
    start = time.perf_counter()
    warm, until = start + args.warmup, start + args.warmup + args.duration
    before = None
    tasks = [asyncio.create_task(client(srv.port, reqs, refs, warm, until, 1000 + i, out))
             for i in range(concurrency)]
    await asyncio.sleep(max(0.0, warm - time.perf_counter()))
    before = metrics(srv.port)
    await asyncio.gather(*tasks)
    after = metrics(srv.port)
    batches = after["wpk_batch_size_count"] - before["wpk_batch_size_count"]
    rows = after["wpk_batch_size_sum"] - before["wpk_batch_size_sum"]
    lat = np.array(out["latency"]) * 1e3
    return {
        "concurrency": concurrency, "ok": len(lat), "failed": out["failed"],
        "mismatched": out["mismatched"], "throughput": len(lat) / args.duration,
        "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
        "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
        "mean_batch": rows / batches if batches else float("nan"), "errors": out["errors"][:3],
    }


def references(srv, xs, reqs):
    """Each input's result, requested alone (nothing else queued: it runs as a batch of 1)."""
    async def run():
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        refs = []
        for req in reqs:
            status, y = await exchange(reader, writer, req)
            if status != 200:
                sys.exit("serve_load: a single request failed: %s %s" % (status, y))
            refs.append(y)
        writer.close()
        return refs
    return asyncio.run(run())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", default=str(REPO / "build" / "wpk"))
    ap.add_argument("--model")
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--duration", type=float, default=15.0, help="seconds measured per point")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of load not measured")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-delay-us", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "serve.md"))
    args = ap.parse_args()
    args.wpk = os.path.abspath(args.wpk)
    args.model = os.path.abspath(args.model or default_model(args))
    levels = [int(c) for c in args.concurrency.split(",")]
    prov = provenance(args)

    rng = np.random.RandomState(0)
    xs = None  # drawn once the first server says the input's shape
    configs = [("batch-1 (--max-batch 1)", 1),
               ("dynamic (--max-batch %d)" % args.max_batch, args.max_batch)]
    rows, refs = [], None
    for label, max_batch in configs:
        srv = Server(args, max_batch)
        if xs is None:
            xs = [rng.uniform(-1, 1, srv.shape).astype(np.float32) for _ in range(POOL)]
        reqs = [request_bytes(srv, x) for x in xs]
        try:
            if refs is None:
                refs = references(srv, xs, reqs)
            for c in levels:
                r = asyncio.run(load(args, srv, reqs, refs, c))
                r["config"] = label
                rows.append(r)
                print("%-26s c=%-3d %8.2f req/s  p50 %8.1f ms  p99 %8.1f ms  batch %5.2f  "
                      "failed %d  mismatched %d" % (label, c, r["throughput"], r["p50"],
                                                    r["p99"], r["mean_batch"], r["failed"],
                                                    r["mismatched"]), flush=True)
        finally:
            rc = srv.stop()
        if rc != 0:
            sys.exit("serve_load: the server exited %s on SIGTERM" % rc)

    lines = ["# `wpk serve` under load: dynamic batching against batch-1 serving", "",
             "`python3 bench/serve_load.py` (%s)." % " ".join(
                 "--%s %s" % (k.replace("_", "-"), v) for k, v in
                 (("concurrency", args.concurrency), ("duration", args.duration),
                  ("max_batch", args.max_batch), ("max_delay_us", args.max_delay_us),
                  ("threads", args.threads))), "",
             "Closed-loop clients (asyncio, a keep-alive connection each), binary tensor data, "
             "one input of shape %s per request from a pool of %d; every response checked "
             "against its input's single-request result."
             % ("x".join(map(str, xs[0].shape)), POOL), "",
             "| server | clients | req/s | p50 ms | p99 ms | mean batch | failed | mismatched |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %.2f | %.1f | %.1f | %.2f | %d | %d |" % (
            r["config"], r["concurrency"], r["throughput"], r["p50"], r["p99"], r["mean_batch"],
            r["failed"], r["mismatched"]))
    lines.append("")
    base = {r["concurrency"]: r for r in rows if r["config"] == configs[0][0]}
    for r in rows:
        if r["config"] == configs[1][0] and r["concurrency"] in base:
            b = base[r["concurrency"]]
            lines.append("- %d clients: throughput %.2fx batch-1's, p99 %.2fx batch-1's" % (
                r["concurrency"], r["throughput"] / b["throughput"], r["p99"] / b["p99"]))
    errors = [e for r in rows for e in r["errors"]]
    if errors:
        lines += ["", "First errors: " + "; ".join(errors[:5])]
    lines += ["", "## Provenance", ""] + ["- %s: %s" % kv for kv in prov.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    bad = sum(r["failed"] + r["mismatched"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
