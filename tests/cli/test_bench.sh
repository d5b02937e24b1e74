#!/bin/sh
# test_bench.sh -- `wpk bench` end to end on a small generated CNN (tests/models/gen_models.py's
# resnet_like): the text report, the --json report (parsed: latency statistics in order, the
# per-node list, throughput = batch / median, provenance), the --profile trace (valid Chrome trace
# JSON), --save, --provider ref, a compiled plan when `wpk compile` exists, and the must-fail
# cases (bad flags, a missing model or database: exit 1 with a message naming the cause).
#     sh tests/cli/test_bench.sh WPK        (ctest: cli_bench; python3 with onnx and numpy)
set -u
WPK=${1:?usage: test_bench.sh PATH/TO/wpk}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/wpk-test-bench.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILED=0

fail() {
    echo "FAIL: $*"
    FAILED=$((FAILED + 1))
}

# every command of the test is one of these: status, stdout and stderr kept for the checks
bench() {
    "$WPK" bench "$@" >"$TMP/out" 2>"$TMP/err"
    STATUS=$?
    if grep -qE 'Sanitizer|runtime error:' "$TMP/err"; then
        fail "wpk bench $*: sanitizer report"
        cat "$TMP/err"
    fi
}

# wpk bench ARGS... must exit 1 with "wpk: error: " and the pattern on stderr
must_fail() {
    pattern=$1
    shift
    bench "$@"
    if [ "$STATUS" -ne 1 ]; then
        fail "wpk bench $*: exit $STATUS, expected 1"
    elif ! grep -q "^wpk: error: " "$TMP/err" || ! grep -qE -- "$pattern" "$TMP/err"; then
        fail "wpk bench $*: stderr lacks 'wpk: error: ' and /$pattern/:"
        cat "$TMP/err"
    fi
}

# check_json FILE BATCH ITERS: the --json report's contract, checked by Python
check_json() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, math, sys
path, batch, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(path))
lat = r["latency_ms"]
assert lat["median"] > 0, lat
assert lat["min"] <= lat["median"] <= lat["p90"] <= lat["p99"], lat
assert lat["min"] <= lat["mean"] <= max(r["samples_ms"]), lat
assert len(r["samples_ms"]) == iters, (len(r["samples_ms"]), iters)
assert r["batch"] == batch and r["threads"] >= 1, (r["batch"], r["threads"])
assert math.isclose(r["throughput"], batch * 1e3 / lat["median"], rel_tol=1e-9), r["throughput"]
assert r["nodes"], "no per-node entries"
for n in r["nodes"]:
    assert set(n) >= {"node", "op", "provider", "impl", "source", "ms", "share"}, n
    assert n["node"] and n["op"] and n["provider"] and n["source"] and n["ms"] >= 0, n
assert abs(sum(n["share"] for n in r["nodes"]) - 1) < 1e-6 or r["nodes_ms"] == 0
assert sum(p["nodes"] for p in r["providers"].values()) == len(r["nodes"]), r["providers"]
assert sum(r["sources"].values()) == len(r["nodes"]), r["sources"]
assert r["inputs"] and r["inputs"][0]["shape"][0] == batch, r["inputs"]
p = r["provenance"]
for key in ("commit", "compiler", "build", "cpu", "target", "libraries"):
    assert isinstance(p.get(key), str) and p[key], (key, p)
assert p["threads"] == r["threads"], p
import re
assert re.fullmatch(r"[0-9a-f]{4,40}|unknown", p["commit"]), p["commit"]
EOF
}

MODEL="$TMP/resnet_like.onnx"
python3 tests/models/gen_models.py --models resnet_like "$TMP" >/dev/null || {
    echo "FAIL: tests/models/gen_models.py could not write the model"
    exit 1
}

# the text report
bench "$MODEL" --iters 5 --warmup 1 --threads 1
if [ "$STATUS" -ne 0 ]; then
    fail "wpk bench MODEL: exit $STATUS"
    cat "$TMP/err"
fi
for want in "latency over 5 runs" "median" "p99" "throughput: " "per node: median of" \
    "providers: " "sources: " "commit: " "target: "; do
    grep -q "$want" "$TMP/out" || fail "text report lacks '$want'"
done

# --json, at batch 1 and 2
for batch in 1 2; do
    bench "$MODEL" --json --iters 7 --warmup 1 --batch "$batch" --threads 1
    if [ "$STATUS" -ne 0 ]; then
        fail "wpk bench --json --batch $batch: exit $STATUS"
        cat "$TMP/err"
    else
        cp "$TMP/out" "$TMP/report$batch.json"
        check_json "$TMP/report$batch.json" "$batch" 7 || fail "--json --batch $batch: contract (above)"
    fi
done

# a model whose batch dim is fixed (3): that is the batch, in the report and the throughput
python3 - "$MODEL" "$TMP/fixed3.onnx" <<'EOF' || fail "could not write a fixed-batch copy"
import onnx, sys
m = onnx.load(sys.argv[1])
for v in list(m.graph.input) + list(m.graph.output):
    d = v.type.tensor_type.shape.dim
    if d and d[0].dim_param:
        d[0].dim_value = 3
onnx.save(m, sys.argv[2])
EOF
bench "$TMP/fixed3.onnx" --json --iters 3 --warmup 0 --threads 1
if [ "$STATUS" -ne 0 ]; then
    fail "wpk bench FIXED-BATCH MODEL --json: exit $STATUS"
    cat "$TMP/err"
else
    cp "$TMP/out" "$TMP/fixed3.json"
    check_json "$TMP/fixed3.json" 3 3 || fail "a fixed batch of 3: contract (above)"
fi

# --profile: a Chrome trace (JSON array of complete events, one track); --save: inputs, outputs
bench "$MODEL" --iters 3 --warmup 0 --threads 1 --json --profile "$TMP/trace.json" --save "$TMP/saved"
if [ "$STATUS" -ne 0 ]; then
    fail "wpk bench --profile: exit $STATUS"
    cat "$TMP/err"
else
    python3 - "$TMP/trace.json" "$TMP/out" "$TMP/saved" <<'EOF' || fail "--profile / --save (above)"
import json, os, sys
import numpy as np
events = json.load(open(sys.argv[1]))
report = json.load(open(sys.argv[2]))
assert isinstance(events, list) and events, "not a non-empty JSON array"
for e in events:
    assert e["ph"] == "X" and e["pid"] == 1 and e["tid"] == 1, e
    assert isinstance(e["name"], str) and e["ts"] >= 0 and e["dur"] >= 0, e
runs = [e for e in events if e["cat"] == "run"]
assert len(runs) == report["profile_runs"] == 3, (len(runs), report["profile_runs"])
assert len(events) == len(runs) * (len(report["nodes"]) + 1), len(events)
for i in report["inputs"] + report["outputs"]:
    a = np.load(os.path.join(sys.argv[3], i["file"]))
    assert list(a.shape) == i["shape"], (i, a.shape)
EOF
fi

# --provider ref: every node on the reference kernels
bench "$MODEL" --json --iters 2 --warmup 0 --provider ref
if [ "$STATUS" -ne 0 ]; then
    fail "wpk bench --provider ref: exit $STATUS"
    cat "$TMP/err"
else
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
bad = [n['node'] for n in r['nodes'] if n['provider'] != 'ref']
assert r['nodes'] and not bad, bad
" "$TMP/out" || fail "--provider ref: nodes not on 'ref' (above)"
fi

# a compiled plan, once `wpk compile` exists
if "$WPK" compile --help 2>&1 | grep -q "unknown command"; then
    echo "note: no 'wpk compile' in this build: the plan case is left out"
else
    if "$WPK" compile "$MODEL" --batch 2 -o "$TMP/model.wpk" >/dev/null 2>"$TMP/err"; then
        bench "$TMP/model.wpk" --json --iters 3 --warmup 1 --threads 1
        if [ "$STATUS" -ne 0 ]; then
            fail "wpk bench PLAN: exit $STATUS"
            cat "$TMP/err"
        else
            check_json "$TMP/out" 2 3 || fail "wpk bench PLAN --json: contract (above)"
        fi
        must_fail "applies to a model, not to a plan" "$TMP/model.wpk" --db "$TMP/none.db"
    else
        fail "wpk compile MODEL -o PLAN failed:"
        cat "$TMP/err"
    fi
fi

# must-fail: flags and files
must_fail "needs a model"
must_fail "--iters needs a number" "$MODEL" --iters 0
must_fail "--iters needs a number.*'x'" "$MODEL" --iters x
must_fail "--batch needs a number" "$MODEL" --batch
must_fail "--threads needs a number" "$MODEL" --threads -1
must_fail "--warmup needs a number" "$MODEL" --warmup -2
must_fail "unknown provider 'cuda'" "$MODEL" --provider cuda
must_fail "needs an optimization level" "$MODEL" -O 7
must_fail "unknown option '--frobnicate'" "$MODEL" --frobnicate
must_fail "unexpected argument" "$MODEL" "$MODEL"
must_fail "$TMP/none.db: no such tuning records database" "$MODEL" --db "$TMP/none.db"
must_fail "--profile needs a trace file" "$MODEL" --profile
must_fail "$TMP/missing.onnx" "$TMP/missing.onnx"
must_fail "applies to a model, not to a plan" "$TMP/missing.wpk" --provider generated
must_fail "cannot write the trace" "$MODEL" --iters 1 --warmup 0 --profile "$TMP/no/such/dir/t.json"
printf 'not a model' >"$TMP/garbage.onnx"
must_fail "garbage.onnx" "$TMP/garbage.onnx"

# --help: usage on stdout, exit 0
"$WPK" bench --help >"$TMP/out" 2>&1 && grep -q "usage: wpk bench" "$TMP/out" || fail "wpk bench --help"

if [ "$FAILED" -ne 0 ]; then
    echo "$FAILED check(s) failed"
    exit 1
fi
echo "all wpk bench checks passed"
