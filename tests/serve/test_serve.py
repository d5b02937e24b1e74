#!/usr/bin/env python3
"""`wpk serve` end to end: starts the server on loopback (a free port) with small models from
tests/models/gen_models.py and checks every endpoint, JSON and binary infer against `wpk run`,
many concurrent clients (each response against its own single-request result, and batches of
more than one request in the metrics), the fault cases (400 naming the field or input, 404,
503 on a full queue) and SIGTERM with requests in flight (all answered, exit 0).

    test_serve.py --wpk build/wpk
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import gen_models  # noqa: E402

MODEL = "resnet_like"        # input [N,3,64,64] with a free batch dim N, output logits [N,10]
FIXED = "squeezenet_like"    # input [1,3,64,64]: no batch dim to merge along
SHAPE = (3, 64, 64)
RTOL, ATOL = 1e-4, 1e-4      # fp32, batched kernels against batch-1 ones

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Server:
    """A `wpk serve` process on 127.0.0.1, a port of the kernel's choosing (--port 0)."""

    def __init__(self, wpk, model, *args):
        self.proc = subprocess.Popen([wpk, "serve", model, "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # printed once the model is warm and the port bound
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            err = self.proc.stderr.read()
            raise RuntimeError("wpk serve did not start: %r %s" % (line, err))
        self.port = int(m.group(1))

    def request(self, method, path, body=None, headers=None, timeout=300):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def stop(self, sig=signal.SIGTERM, timeout=120):
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def json_infer_body(x, name="input", nested=True, rid=None, **extra):
    body = {"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                        "data": x.tolist() if nested else x.ravel().tolist()}]}
    if rid is not None:
        body["id"] = rid
    body.update(extra)
    return json.dumps(body).encode()


def infer_json(srv, model, x, **kw):
    status, _, body = srv.request("POST", "/v2/models/%s/infer" % model,
                                  json_infer_body(x, **kw), {"Content-Type": "application/json"})
    if status != 200:
        return status, body.decode(errors="replace")
    out = json.loads(body)["outputs"][0]
    return status, np.array(out["data"], np.float32).reshape(out["shape"])


def binary_body(x, binary_output=True, output="logits"):
    header = {"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                          "parameters": {"binary_data_size": x.nbytes}}]}
    if binary_output:
        header["outputs"] = [{"name": output, "parameters": {"binary_data": True}}]
    head = json.dumps(header).encode()
    return head + x.tobytes(), {"Inference-Header-Content-Length": str(len(head)),
                                "Content-Type": "application/octet-stream"}


def infer_binary(srv, model, x, output="logits"):
    body, headers = binary_body(x, output=output)
    status, hdrs, resp = srv.request("POST", "/v2/models/%s/infer" % model, body, headers)
    if status != 200:
        return status, resp.decode(errors="replace")
    n = int(hdrs["Inference-Header-Content-Length"])
    meta = json.loads(resp[:n])["outputs"][0]
    check(meta["parameters"]["binary_data_size"] == len(resp) - n,
          "binary output: binary_data_size matches the bytes after the JSON")
    return status, np.frombuffer(resp[n:], np.float32).reshape(meta["shape"])


def wpk_run(wpk, model, x, tmp):
    """The oracle: `wpk run` on the same model and input."""
    np.save(os.path.join(tmp, "x.npy"), x)
    out = os.path.join(tmp, "run_out")
    subprocess.run([wpk, "run", model, "-i", "input=" + os.path.join(tmp, "x.npy"), "-o", out],
                   check=True, stdout=subprocess.DEVNULL)
    return np.load(os.path.join(out, "logits.npy"))


def metrics(srv):
    status, _, body = srv.request("GET", "/metrics")
    check(status == 200, "/metrics answers 200")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, val = line.rsplit(" ", 1)
            values[key] = float(val)
    return values


def inputs(n, seed):
    rng = np.random.RandomState(seed)
    return [rng.uniform(-1, 1, (1,) + SHAPE).astype(np.float32) for _ in range(n)]


def concurrently(fn, items):
    """Runs fn(item) on a thread per item, all released at once; returns the results."""
    results = [None] * len(items)
    gate = threading.Barrier(len(items))

    def one(i):
        gate.wait()
        try:
            results[i] = fn(items[i])
        except Exception as e:  # reported as a failed result, never lost
            results[i] = ("exception", repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_endpoints(srv, wpk, path, tmp):
    status, _, body = srv.request("GET", "/v2/health/live")
    check(status == 200, "live: 200")
    status, _, body = srv.request("GET", "/v2/health/ready")
    check(status == 200 and json.loads(body)["ready"] is True, "ready: 200, ready true")
    status, _, body = srv.request("GET", "/v2/models/%s/ready" % MODEL)
    check(status == 200, "model ready: 200")
    status, _, body = srv.request("GET", "/v2/models/%s" % MODEL)
    meta = json.loads(body)
    check(status == 200 and meta["name"] == MODEL and meta["platform"] == "wpk_onnx",
          "metadata: name and platform (%s)" % body[:200])
    check(meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 64, 64]}],
          "metadata: the input with -1 for the batch dim (%s)" % meta["inputs"])
    check(meta["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}],
          "metadata: the output with -1 for the batch dim (%s)" % meta["outputs"])

    x = inputs(1, seed=7)[0]
    want = wpk_run(wpk, path, x, tmp)
    status, got = infer_json(srv, MODEL, x, rid="req-7")
    check(status == 200 and np.allclose(got, want, RTOL, ATOL),
          "JSON infer (nested data) equals `wpk run` (%s)" % (got if status != 200 else ""))
    status, _, body = srv.request("POST", "/v2/models/%s/infer" % MODEL,
                                  json_infer_body(x, rid="req-7"))
    check(json.loads(body).get("id") == "req-7", "the response carries the request's id")
    status, flat = infer_json(srv, MODEL, x, nested=False)
    check(status == 200 and np.allclose(flat, want, RTOL, ATOL), "JSON infer (flat data)")
    status, binary = infer_binary(srv, MODEL, x)
    check(status == 200 and np.allclose(binary, want, RTOL, ATOL),
          "binary infer (binary input and output) equals `wpk run`")
    # binary input, JSON output
    body, headers = binary_body(x, binary_output=False)
    status, hdrs, resp = srv.request("POST", "/v2/models/%s/infer" % MODEL, body, headers)
    check(status == 200 and "Inference-Header-Content-Length" not in hdrs and
          np.allclose(np.array(json.loads(resp)["outputs"][0]["data"]), want.ravel(), RTOL, ATOL),
          "binary input with a JSON output")
    # a request of two rows is two rows of the model
    x2 = np.concatenate(inputs(2, seed=8))
    status, got2 = infer_json(srv, MODEL, x2)
    rows = [infer_json(srv, MODEL, x2[i:i + 1])[1] for i in range(2)]
    check(status == 200 and got2.shape == (2, 10) and
          np.allclose(got2, np.concatenate(rows), RTOL, ATOL), "a request of 2 rows")


def test_concurrent(srv, n):
    xs = inputs(n, seed=100)
    singles = []
    for x in xs:  # one at a time: each runs alone
        status, y = infer_json(srv, MODEL, x)
        check(status == 200, "single request: 200")
        singles.append(y)
    before = metrics(srv)

    def one(i):
        if i % 2:
            return infer_binary(srv, MODEL, xs[i])
        return infer_json(srv, MODEL, xs[i])

    results = concurrently(one, list(range(n)))
    mixed = bad = 0
    for i, (status, y) in enumerate(results):
        if status != 200:
            bad += 1
            print("  request %d: %s %s" % (i, status, y))
            continue
        dist = [np.abs(y - s).max() for s in singles]
        if not np.allclose(y, singles[i], RTOL, ATOL) or int(np.argmin(dist)) != i:
            mixed += 1
    check(bad == 0, "%d concurrent clients: every one answered 200 (%d not)" % (n, bad))
    check(mixed == 0, "%d concurrent clients: each got its own result (%d did not)" % (n, mixed))
    after = metrics(srv)
    label = '{model="%s",le="1"}' % MODEL
    total = '{model="%s"}' % MODEL
    batches = after["wpk_batch_size_count" + total] - before["wpk_batch_size_count" + total]
    singles_run = (after["wpk_batch_size_bucket" + label] -
                   before["wpk_batch_size_bucket" + label])
    print("  %d concurrent requests ran in %d batches (%d of one request)" %
          (n, batches, singles_run), flush=True)
    check(batches < n and singles_run < batches,
          "the metrics show batches of more than one request")


def expect_error(srv, body, status, words, what, headers=None, path=None):
    got, _, resp = srv.request("POST", path or "/v2/models/%s/infer" % MODEL, body,
                               headers or {"Content-Type": "application/json"})
    text = resp.decode(errors="replace")
    ok = got == status and all(w in text for w in words)
    if ok:
        try:
            ok = isinstance(json.loads(text)["error"], str)
        except (ValueError, KeyError):
            ok = False
    check(ok, "%s: want %d naming %s, got %d %s" % (what, status, words, got, text))


def test_faults(srv):
    x = inputs(1, seed=3)[0]
    good = json.loads(json_infer_body(x))
    expect_error(srv, b"{\"inputs\": [", 400, ["JSON"], "malformed JSON")
    expect_error(srv, b"", 400, ["empty"], "empty body")
    expect_error(srv, b"[1, 2]", 400, ["object"], "body not an object")
    expect_error(srv, b"{}", 400, ["'inputs'"], "missing field inputs")
    expect_error(srv, json.dumps({"inputs": [{"shape": [1]}]}).encode(), 400, ["'name'"],
                 "input without a name")
    for field in ("shape", "datatype", "data"):
        body = json.loads(json.dumps(good))
        del body["inputs"][0][field]
        expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "'%s'" % field],
                     "input without '%s'" % field)
    body = json.loads(json.dumps(good))
    body["inputs"][0]["name"] = "image"
    expect_error(srv, json.dumps(body).encode(), 400, ["'image'"], "wrong input name")
    body = json.loads(json.dumps(good))
    body["inputs"][0]["datatype"] = "INT64"
    expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "INT64", "FP32"],
                 "wrong datatype")
    body = json.loads(json_infer_body(np.zeros((1, 3, 32, 32), np.float32)))
    expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "[1,3,32,32]"], "wrong shape")
    body = json.loads(json.dumps(good))
    body["inputs"][0]["shape"] = [2, 3, 64, 64]
    expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "elements"],
                 "data count not the shape's")
    body = json.loads(json.dumps(good))
    body["inputs"][0]["data"][0][0][0][0] = "one"
    expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "not a number"],
                 "a data element that is no number")
    body = json.loads(json_infer_body(np.concatenate(inputs(5, seed=4))))
    expect_error(srv, json.dumps(body).encode(), 400, ["'input'", "5 rows", "--max-batch"],
                 "more rows than --max-batch")
    body = json.loads(json.dumps(good))
    body["outputs"] = [{"name": "probs"}]
    expect_error(srv, json.dumps(body).encode(), 400, ["'probs'"], "unknown output")
    raw, headers = binary_body(x)
    expect_error(srv, raw[:-4], 400, ["'input'", "binary_data_size"], "binary data cut short",
                 headers)
    expect_error(srv, raw + b"\0\0\0\0", 400, ["binary data"], "binary data left over", headers)
    bad_len = dict(headers, **{"Inference-Header-Content-Length": "12x"})
    expect_error(srv, raw, 400, ["Inference-Header-Content-Length"], "bad header length",
                 bad_len)
    expect_error(srv, json_infer_body(x), 404, ["'nosuch'", MODEL], "unknown model",
                 path="/v2/models/nosuch/infer")
    status, _, _ = srv.request("GET", "/v2/models/nosuch")
    check(status == 404, "metadata of an unknown model: 404")
    status, _, _ = srv.request("GET", "/v2/models/%s/infer" % MODEL)
    check(status == 405, "GET on infer: 405")
    status, _, _ = srv.request("GET", "/v2/nothing")
    check(status == 404, "unknown route: 404")
    m = metrics(srv)
    check(m.get('wpk_requests_total{model="%s",status="400"}' % MODEL, 0) >= 16,
          "the metrics count the 400s")
    # the server still serves after all that
    status, _ = infer_json(srv, MODEL, x)
    check(status == 200, "still serving after the faults")


def test_fixed_batch(wpk, path, tmp):
    """A model without a free batch dim: requests are never merged."""
    srv = Server(wpk, path, "--max-batch", "8")
    try:
        status, _, body = srv.request("GET", "/v2/models/%s" % FIXED)
        meta = json.loads(body)
        check(meta["inputs"][0]["shape"] == [1, 3, 64, 64] and
              meta["parameters"]["max_batch_size"] == 0, "fixed-batch model: metadata")
        xs = inputs(6, seed=40)
        results = concurrently(lambda x: infer_binary(srv, FIXED, x, "logits:0"), xs)
        ok = all(s == 200 for s, _ in results)
        np.save(os.path.join(tmp, "x.npy"), xs[0])
        out = os.path.join(tmp, "fixed_out")
        subprocess.run([wpk, "run", path, "-i", "input=" + os.path.join(tmp, "x.npy"), "-o", out],
                       check=True, stdout=subprocess.DEVNULL)
        want = np.load(os.path.join(out, "logits_0.npy"))
        check(ok and np.allclose(results[0][1], want, RTOL, ATOL),
              "fixed-batch model: concurrent requests answered, the first equals `wpk run`")
        m = metrics(srv)
        key = '{model="%s",le="1"}' % FIXED
        check(m["wpk_batch_size_bucket" + key] == m['wpk_batch_size_count{model="%s"}' % FIXED],
              "fixed-batch model: every batch holds one request")
    finally:
        check(srv.stop() == 0, "fixed-batch server exits 0")


def test_plan(wpk, path, tmp):
    """A compiled plan of batch 2: requests of one row merge in pairs, a lone one is padded."""
    plan = os.path.join(tmp, "plan_b2.wpk")
    subprocess.run([wpk, "compile", path, "--batch", "2", "-o", plan], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv = Server(wpk, plan, "--max-batch", "8", "--max-delay-us", "50000")
    try:
        status, _, body = srv.request("GET", "/v2/models/plan_b2")
        meta = json.loads(body)
        check(status == 200 and meta["platform"] == "wpk_plan" and
              meta["inputs"][0]["shape"] == [-1, 3, 64, 64] and
              meta["outputs"][0]["shape"] == [-1, 10] and
              meta["parameters"]["max_batch_size"] == 2,
              "plan: metadata with the batch dim free, at most the plan's 2 rows (%s)" % meta)
        xs = inputs(8, seed=80)
        wants = [wpk_run(wpk, path, x, tmp) for x in xs[:2]]
        status, got = infer_binary(srv, "plan_b2", xs[0])
        check(status == 200 and np.allclose(got, wants[0], RTOL, ATOL),
              "plan: a lone request (padded to 2 rows) equals `wpk run` of the model")
        results = concurrently(lambda x: infer_binary(srv, "plan_b2", x), xs)
        check(all(s == 200 for s, _ in results) and
              all(np.allclose(results[i][1], wants[i], RTOL, ATOL) for i in range(2)),
              "plan: concurrent requests, each its own result")
        expect_error(srv, json_infer_body(np.concatenate(inputs(3, seed=81))), 400,
                     ["'input'", "3 rows", "--max-batch"], "plan: more rows than it holds",
                     path="/v2/models/plan_b2/infer")
        m = metrics(srv)
        check(m['wpk_padded_rows_total{model="plan_b2"}'] >= 1, "plan: padding counted")
    finally:
        check(srv.stop() == 0, "plan server exits 0")


def test_queue_full(wpk, path):
    srv = Server(wpk, path, "--max-batch", "4", "--queue", "1", "--max-delay-us", "0")
    try:
        xs = [np.concatenate(inputs(4, seed=60 + i)) for i in range(24)]
        saw_503 = False
        for attempt in range(3):
            results = concurrently(lambda x: infer_binary(srv, MODEL, x), xs)
            codes = [s for s, _ in results]
            check(all(c in (200, 503) for c in codes), "full queue: only 200 or 503 (%s)" % codes)
            for s, y in results:
                if s == 503:
                    check("queue is full" in y, "503 says the queue is full (%s)" % y)
            if 503 in codes and 200 in codes:
                saw_503 = True
                break
        check(saw_503, "a full queue answers 503 while the rest are served")
    finally:
        check(srv.stop() == 0, "queue server exits 0")


def test_sigterm(wpk, path, n=12):
    """SIGTERM while requests are in flight: one still sending its body, others queued or
    running. Every one begun is answered; new connections are refused; exit 0."""
    srv = Server(wpk, path, "--max-batch", "4")
    xs = [np.concatenate(inputs(4, seed=200 + i)) for i in range(n + 1)]
    want = [infer_binary(srv, MODEL, x)[1] for x in xs]
    # a client that has sent its headers and half its body when the signal comes
    slow_body, slow_headers = binary_body(xs[n])
    slow = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
    slow.putrequest("POST", "/v2/models/%s/infer" % MODEL)
    for k, v in dict(slow_headers, **{"Content-Length": str(len(slow_body))}).items():
        slow.putheader(k, v)
    slow.endheaders()
    half = len(slow_body) // 2
    slow.send(slow_body[:half])
    results = [None] * n
    sent = threading.Barrier(n + 1)

    def one(i):
        body, headers = binary_body(xs[i])
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
        conn.request("POST", "/v2/models/%s/infer" % MODEL, body, headers)
        sent.wait()
        try:
            resp = conn.getresponse()
            data = resp.read()
            n_json = int(resp.headers.get("Inference-Header-Content-Length", "0"))
            results[i] = (resp.status, np.frombuffer(data[n_json:], np.float32).reshape(4, 10)
                          if resp.status == 200 else data)
        except Exception as e:
            results[i] = ("exception", repr(e))
        conn.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    sent.wait()          # every request written
    time.sleep(0.3)      # and its connection accepted
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    check(srv.proc.poll() is None, "SIGTERM: the server waits for the request still arriving")
    try:
        late = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        late.request("GET", "/v2/health/live")
        status = late.getresponse().status
    except OSError:
        status = "refused"
    check(status in ("refused", 503), "after SIGTERM a new request is refused (%s)" % status)
    slow.send(slow_body[half:])
    resp = slow.getresponse()
    data = resp.read()
    n_json = int(resp.headers.get("Inference-Header-Content-Length", "0"))
    check(resp.status == 200 and np.allclose(np.frombuffer(data[n_json:], np.float32).reshape(
        4, 10), want[n], RTOL, ATOL), "the request in flight at SIGTERM is answered, rightly")
    for t in threads:
        t.join()
    codes = [r[0] for r in results]
    check(all(c == 200 for c in codes), "every request sent before SIGTERM answered (%s)" % codes)
    check(all(np.allclose(results[i][1], want[i], RTOL, ATOL) for i in range(n)
              if results[i][0] == 200), "every request's own result")
    try:
        rc = srv.proc.wait(120)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        rc = None
    check(rc == 0, "SIGTERM: the server exits 0 (got %s)" % rc)


def test_cli_errors(wpk, tmp):
    """Bad arguments and bad files: exit 1 with a message naming the cause, before listening."""
    bad_model = os.path.join(tmp, "not_a_model.onnx")
    with open(bad_model, "w") as f:
        f.write("garbage")
    cases = [
        ([], "needs a model file"),
        ([os.path.join(tmp, "missing.onnx")], "missing.onnx"),
        ([bad_model], "not_a_model.onnx"),
        ([bad_model, "--max-batch", "0"], "--max-batch"),
        ([bad_model, "--port", "70000"], "--port"),
        ([bad_model, "--host", "nowhere"], "'nowhere'"),
        ([bad_model, "--max-delay-us", "x"], "--max-delay-us"),
        ([bad_model, "--bogus"], "'--bogus'"),
    ]
    for args, words in cases:
        p = subprocess.run([wpk, "serve", *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == 1 and words in p.stderr and p.stderr.count(words) == 1 and
              "listening" not in p.stdout,
              "wpk serve %s: exit 1 naming %s (got %d: %s)" % (" ".join(args), words,
                                                              p.returncode, p.stderr.strip()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wpk", required=True)
    args = ap.parse_args()
    wpk = os.path.abspath(args.wpk)
    with tempfile.TemporaryDirectory(prefix="wpk_serve_") as tmp:
        paths = gen_models.write_models(tmp, [MODEL, FIXED])
        print("command-line errors", flush=True)
        test_cli_errors(wpk, tmp)
        srv = Server(wpk, paths[MODEL], "--max-batch", "4", "--max-delay-us", "50000")
        try:
            print("endpoints and JSON/binary infer", flush=True)
            test_endpoints(srv, wpk, paths[MODEL], tmp)
            print("concurrent clients", flush=True)
            test_concurrent(srv, 16)
            print("faults", flush=True)
            test_faults(srv)
        finally:
            check(srv.stop() == 0, "server exits 0 on SIGTERM")
        print("a model without a batch dim", flush=True)
        test_fixed_batch(wpk, paths[FIXED], tmp)
        print("a compiled plan", flush=True)
        test_plan(wpk, paths[MODEL], tmp)
        print("queue full", flush=True)
        test_queue_full(wpk, paths[MODEL])
        print("SIGTERM with requests in flight", flush=True)
        test_sigterm(wpk, paths[MODEL])
    if failures:
        print("serve: %d check(s) failed" % len(failures))
        return 1
    print("serve: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
