#!/bin/sh
# test_cli_cuda.sh -- `wpk run --backend cuda` from the command line (issue 7): without a CUDA
# driver it says "CUDA unavailable: <reason>" and exits 1 (a user-facing condition, not an
# internal error); on the mock driver (tests/cuda/mock_libcuda.c) the whole path runs -- graph
# optimized, every node an NVRTC-compiled kernel, the program placed and run as a CUDA Graph --
# and writes its outputs (the mock computes nothing, so values are not checked here: that is
# test_cuda_program's emulator and, on a GPU, models_cuda); nodes without a CUDA kernel are
# named, exit 1; an unknown backend lists the available ones. `wpk compile --target cuda` (issue
# 30) needs the device too, writes a plan under the GPU's fingerprint on the mock, which a
# machine without the driver refuses naming that GPU target, and which `wpk run --plan` and
# `wpk bench` run on the mock's device; a cpu plan still runs on the cpu with the mock present.
# `wpk tune|bench|run --target cuda` say "CUDA unavailable: <reason>" without a driver; on the
# mock, tune stores its (classified) records under the GPU's key and bench profiles per step.
#   test_cli_cuda.sh WPK MOCK_LIBCUDA
set -u
wpk=$1
mock=$2
tmp=$(mktemp -d /tmp/wpk_cli_cuda.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export WPK_CACHE_DIR="$tmp/cache"
fail=0
check() { # what, expected exit, got exit, file with stderr, needle
    if [ "$3" -ne "$2" ] || ! grep -qF -- "$5" "$4"; then
        echo "FAIL: $1: exit $3 (want $2), stderr:" >&2
        cat "$4" >&2
        fail=1
    fi
}
model=tests/fuzz/corpus/conv_relu.onnx

WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" run "$model" --backend cuda \
    -o "$tmp/out" 2>"$tmp/err"
check "no driver" 1 $? "$tmp/err" "CUDA unavailable: no libcuda"

WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" run "$model" --backend cuda -o "$tmp/out" --iters 2 \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "mock driver" 0 $rc "$tmp/err" "output y: [1, 2, 8, 8] float32"
[ -s "$tmp/out/y.npy" ] || { echo "FAIL: no $tmp/out/y.npy" >&2; fail=1; }

WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" run tests/fuzz/corpus/legacy_ops.onnx --backend cuda \
    -o "$tmp/out2" 2>"$tmp/err"
check "nodes without CUDA kernels" 1 $? "$tmp/err" \
    "no CUDA kernel for 1 node: 'split' (Split)"

"$wpk" run "$model" --backend gpu 2>"$tmp/err"
check "unknown backend" 1 $? "$tmp/err" "(available: cpu, ref, cuda)"
WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" compile "$model" --target cuda \
    -o "$tmp/gpu.wpk" 2>"$tmp/err"
check "compile --target cuda, no driver" 1 $? "$tmp/err" "CUDA unavailable: no libcuda"
[ -e "$tmp/gpu.wpk" ] && { echo "FAIL: a plan written without a device" >&2; fail=1; }

WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" compile "$model" --target cuda -o "$tmp/gpu.wpk" \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "compile --target cuda, mock driver" 0 $rc "$tmp/err" "FusedConv                         1"
[ -s "$tmp/gpu.wpk" ] || { echo "FAIL: no $tmp/gpu.wpk" >&2; fail=1; }

WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" run --plan "$tmp/gpu.wpk" \
    -o "$tmp/out3" 2>"$tmp/err"
check "cuda plan, no driver" 1 $? "$tmp/err" \
    "gpu.wpk: the plan was built for 'cuda wpk mock GPU sm_90 driver 13000', this machine is"
check "cuda plan, no driver: the reason" 1 1 "$tmp/err" "CUDA unavailable: no libcuda"

WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" run --plan "$tmp/gpu.wpk" -o "$tmp/out3" --iters 2 \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "cuda plan, mock driver" 0 $rc "$tmp/err" "output y: [1, 2, 8, 8] float32"
[ -s "$tmp/out3/y.npy" ] || { echo "FAIL: no $tmp/out3/y.npy" >&2; fail=1; }

WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" bench "$tmp/gpu.wpk" --iters 3 >"$tmp/stdout" \
    2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "bench a cuda plan, mock driver" 0 $rc "$tmp/err" "cuda_kernel"

"$wpk" compile "$model" -o "$tmp/cpu.wpk" >/dev/null 2>"$tmp/err"
check "compile --target cpu" 0 $? "$tmp/err" ""
WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" run --plan "$tmp/cpu.wpk" -o "$tmp/out4" \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "cpu plan beside the mock driver" 0 $rc "$tmp/err" "output y: [1, 2, 8, 8] float32"

# --target cuda for tune, bench and run: without a driver, exit 1 with the reason, nothing done
WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" tune "$model" --target cuda \
    --db "$tmp/cuda.db" --trials 2 >"$tmp/stdout" 2>"$tmp/err"
check "tune --target cuda, no driver" 1 $? "$tmp/err" "CUDA unavailable: no libcuda"
[ -e "$tmp/cuda.db" ] && { echo "FAIL: tune opened records without a device" >&2; fail=1; }
WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" bench "$model" --target cuda \
    --iters 2 >"$tmp/stdout" 2>"$tmp/err"
check "bench --target cuda, no driver" 1 $? "$tmp/err" "CUDA unavailable: no libcuda"
WPK_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 "$wpk" run "$model" --target cuda \
    -o "$tmp/out5" >"$tmp/stdout" 2>"$tmp/err"
check "run --target cuda, no driver" 1 $? "$tmp/err" "CUDA unavailable: no libcuda"

# on the mock: the tuning loop runs and stores its records under the GPU (the mock computes
# nothing, so every candidate is a wrong result: the loop, not the kernels, is tested here)
WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" tune "$model" --target cuda --db "$tmp/cuda.db" \
    --trials 3 --strategy random >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "tune --target cuda, mock driver" 0 $rc "$tmp/err" "conv2d_cuda:n1,c3,h8,w8,k2"
check "tune --target cuda, mock: classified" 0 $rc "$tmp/err" "wrong result 3"
"$wpk" tune --export "$tmp/cuda.jsonl" --db "$tmp/cuda.db" >/dev/null 2>"$tmp/err"
check "tune --target cuda: records under the GPU" 0 $? "$tmp/cuda.jsonl" \
    "cuda wpk mock GPU sm_90 driver 13000 nvrtc"
WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" bench "$model" --target cuda --db "$tmp/cuda.db" \
    --iters 3 >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "bench --target cuda, mock driver: per-step profile" 0 $rc "$tmp/err" \
    "FusedConv            cuda_kernel default"
check "bench --target cuda, mock driver: the GPU" 0 $rc "$tmp/err" "gpu: cuda wpk mock GPU"
WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" run "$model" --target cuda -o "$tmp/out6" \
    >"$tmp/stdout" 2>"$tmp/err"
rc=$?
cat "$tmp/stdout" >>"$tmp/err"
check "run --target cuda, mock driver" 0 $rc "$tmp/err" "output y: [1, 2, 8, 8] float32"
WPK_CUDA_DRIVER_LIBRARY="$mock" "$wpk" tune tests/fuzz/corpus/legacy_ops.onnx --target cuda \
    --db "$tmp/cuda.db" --trials 1 >"$tmp/stdout" 2>"$tmp/err"
check "tune --target cuda: nodes without a CUDA template named" 0 $? "$tmp/err" \
    "1 node without a CUDA template, not tuned: 'split' (Split)"
"$wpk" tune "$model" --target gpu 2>"$tmp/err"
check "tune: unknown target" 1 $? "$tmp/err" "--target needs cpu or cuda, not 'gpu'"

"$wpk" compile "$model" -o "$tmp/x.wpk" --target gpu 2>"$tmp/err"
check "unknown target" 1 $? "$tmp/err" "--target needs cpu or cuda, not 'gpu'"
exit $fail
