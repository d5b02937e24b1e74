#!/bin/sh
# test_compile.sh -- `wpk compile` and `wpk run --plan` end to end: a plan compiled and run (with
# no C compiler) gives the reference backend's outputs; --batch; the summary; --strict without
# records; exit codes and messages of the must-fail cases (missing options, a damaged plan, a
# missing records database, an unknown provider, a plan with a model).
#   test_compile.sh WPK
set -u
WPK=${1:?usage: test_compile.sh WPK}
MODEL=tests/fuzz/corpus/conv_relu.onnx
T=$(mktemp -d /tmp/wpk_test_compile.XXXXXX)
trap 'rm -rf "$T"' EXIT
export WPK_CACHE_DIR="$T/cache"
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC NEEDLE CMD...: exit status RC and NEEDLE in stdout+stderr
expect() {
    want=$1 needle=$2
    shift 2
    "$@" >"$T/log" 2>&1
    rc=$?
    if [ "$rc" -ne "$want" ]; then fail "exit $rc (want $want): $*"; sed 's/^/  | /' "$T/log"; return; fi
    if [ -n "$needle" ] && ! grep -qF -- "$needle" "$T/log"; then
        fail "no '$needle' in the output of: $*"; sed 's/^/  | /' "$T/log"
    fi
}

same() { # same A.npy B.npy
    python3 -c "
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5) else 1)" "$1" "$2" ||
        fail "$1 differs from $2"
}

expect 0 "total" "$WPK" compile "$MODEL" --db '' --batch 2 -o "$T/m.wpk"
grep -q "FusedConv" "$T/log" || fail "the summary names no FusedConv"
[ -f "$T/m.wpk" ] || fail "no plan written"
python3 -c "import numpy as np; np.save('$T/x.npy', np.random.default_rng(3).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32))"
expect 0 "output y: [2, 2, 8, 8]" env CC=/nonexistent/cc "$WPK" run --plan "$T/m.wpk" -i "x=$T/x.npy" -o "$T/plan_out"
expect 0 "" "$WPK" run "$MODEL" --backend ref -i "x=$T/x.npy" -o "$T/ref_out"
same "$T/plan_out/y.npy" "$T/ref_out/y.npy"
# random inputs at the plan's batch when none are given
expect 0 "output y: [2, 2, 8, 8]" "$WPK" run --plan "$T/m.wpk" -o "$T/plan_out2" --threads 1
# the records of a run: --db and --provider
expect 0 "output y:" "$WPK" run "$MODEL" --db '' --provider generated -o "$T/gen_out"
expect 0 "output y:" "$WPK" run "$MODEL" --db '' --provider ref -o "$T/gen_out"

# a library's kernels in a plan (made again from their config at load), where built in
for lib in onednn openblas; do
    "$WPK" compile "$MODEL" --db '' --batch 2 --provider $lib -o "$T/$lib.wpk" >"$T/log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -q "unknown provider" "$T/log"; then echo "$lib: not built in"; continue; fi
    [ $rc -eq 0 ] || { fail "compile --provider $lib: exit $rc"; sed 's/^/  | /' "$T/log"; continue; }
    expect 0 "output y:" env CC=/nonexistent/cc "$WPK" run --plan "$T/$lib.wpk" -i "x=$T/x.npy" -o "$T/${lib}_out"
    same "$T/${lib}_out/y.npy" "$T/ref_out/y.npy"
done

# must-fail cases
expect 1 "--strict" "$WPK" compile "$MODEL" --db '' --strict -o "$T/s.wpk"
grep -q "'conv'" "$T/log" || fail "--strict does not name the untuned node"
[ -f "$T/s.wpk" ] && fail "--strict wrote a plan"
expect 1 "needs -o" "$WPK" compile "$MODEL"
expect 1 "needs a model" "$WPK" compile -o "$T/x.wpk"
expect 1 "--batch needs a positive number" "$WPK" compile "$MODEL" --batch 0 -o "$T/x.wpk"
expect 1 "no such tuning records database" "$WPK" compile "$MODEL" --db "$T/none.db" -o "$T/x.wpk"
expect 1 "unknown provider 'fast'" "$WPK" compile "$MODEL" --provider fast -o "$T/x.wpk"
expect 1 "unknown provider 'fast'" "$WPK" run "$MODEL" --provider fast
expect 1 "takes no model file" "$WPK" run "$MODEL" --plan "$T/m.wpk"
expect 1 "cannot open the plan" "$WPK" run --plan "$T/none.wpk"
head -c 1000 "$T/m.wpk" >"$T/cut.wpk"
expect 1 "truncated or damaged" "$WPK" run --plan "$T/cut.wpk"
expect 1 "not a compiled wpk plan" "$WPK" run --plan "$MODEL"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "test_compile: ok"
