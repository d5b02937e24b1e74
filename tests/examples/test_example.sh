#!/bin/sh
# test_example.sh -- examples/run_plan, an application linking libwpk_runtime alone: a small CNN
# (tests/models/gen_models.py's resnet_like) compiled with `wpk compile`, run by the example and
# by `wpk run --plan` on the same input, outputs compared (numpy, rtol 1e-5); and `ldd` shows the
# example links libwpk_runtime and none of the compiler's libraries.
#   test_example.sh WPK RUN_PLAN MODELS_DIR
set -u
WPK=${1:?usage: test_example.sh WPK RUN_PLAN MODELS_DIR}
RUN_PLAN=${2:?usage: test_example.sh WPK RUN_PLAN MODELS_DIR}
MODEL=${3:?usage: test_example.sh WPK RUN_PLAN MODELS_DIR}/resnet_like.onnx
T=$(mktemp -d /tmp/wpk_test_example.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

[ -f "$MODEL" ] || { echo "no $MODEL (the gen_plan_models fixture writes it)"; exit 1; }
"$WPK" compile "$MODEL" --db '' -o "$T/m.wpk" >"$T/log" 2>&1 || { cat "$T/log"; fail "wpk compile"; }
# the vendor libraries this wpk was built with (their names in `wpk help`'s provider list)
libs=$("$WPK" help 2>&1 | grep -o 'auto|generated|ref[|a-z]*' | head -1 | tr '|' '\n' |
       grep -v -x -e auto -e generated -e ref)
for lib in $libs; do
    "$WPK" compile "$MODEL" --db '' --provider "$lib" -o "$T/m_$lib.wpk" >"$T/log" 2>&1 ||
        { cat "$T/log"; fail "wpk compile --provider $lib"; }
    # the summary's total row: nodes, tuned, default, library, reference
    awk '$1 == "total" { exit !($5 > 0) }' "$T/log" ||
        { cat "$T/log"; fail "no node of the $lib plan runs on a library kernel"; }
done
# the plan's input name and shape, from the example itself (random inputs, no -i)
"$RUN_PLAN" "$T/m.wpk" -o "$T/rand" --seed 7 >"$T/log" 2>&1 || { cat "$T/log"; fail "run_plan (random inputs)"; }
# the model's input at batch 1 (what `wpk compile` specializes to by default)
IN=$(python3 -c "
import numpy as np, onnx
m = onnx.load('$MODEL')
init = {i.name for i in m.graph.initializer}
x = [i for i in m.graph.input if i.name not in init][0]
shape = [d.dim_value if d.HasField('dim_value') else 1 for d in x.type.tensor_type.shape.dim]
np.save('$T/x.npy', np.random.default_rng(5).uniform(-1, 1, shape).astype(np.float32))
print(x.name)")
for plan in m $(for lib in $libs; do echo "m_$lib"; done); do
echo "$plan.wpk:"
"$RUN_PLAN" "$T/$plan.wpk" -i "$IN=$T/x.npy" -o "$T/ex_$plan" --threads 2 >"$T/log" 2>&1 ||
    { cat "$T/log"; fail "run_plan $plan.wpk"; }
"$WPK" run --plan "$T/$plan.wpk" -i "$IN=$T/x.npy" -o "$T/cli_$plan" --threads 2 >"$T/log" 2>&1 ||
    { cat "$T/log"; fail "wpk run --plan $plan.wpk"; }
python3 - "$T/ex_$plan" "$T/cli_$plan" <<'PY' || fail "$plan: the example's outputs differ from wpk run's"
import os, sys, numpy as np
a_dir, b_dir = sys.argv[1], sys.argv[2]
names = sorted(f for f in os.listdir(b_dir) if f.endswith(".npy"))
assert names and names == sorted(os.listdir(a_dir)), (names, os.listdir(a_dir))
for f in names:
    a, b = np.load(os.path.join(a_dir, f)), np.load(os.path.join(b_dir, f))
    assert a.shape == b.shape and a.dtype == b.dtype, (f, a.shape, b.shape)
    assert np.allclose(a, b, rtol=1e-5, atol=0), (f, float(np.abs(a - b).max()))
    print(f"  {f}: {a.shape}, max abs difference {float(np.abs(a - b).max()):.3g}")
PY
done
ldd "$RUN_PLAN" >"$T/ldd" || fail "ldd"
grep -q "libwpk_runtime" "$T/ldd" || fail "run_plan does not link libwpk_runtime"
for lib in libsqlite3 libxgboost libprotobuf-c libcjson libz.so; do
    grep -q "$lib" "$T/ldd" && fail "run_plan links $lib"
done
sed 's/^/  ldd: /' "$T/ldd"
if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "test_example: ok"
