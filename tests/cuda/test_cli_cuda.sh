#!/bin/sh
# test_cli_cuda.sh -- `wpk run --backend cuda` from the command line (issue 7): without a CUDA
# driver it says "CUDA unavailable: <reason>" and exits 1 (a user-facing condition, not an
# internal error); on the mock driver (tests/cuda/mock_libcuda.c) the whole path runs -- graph
# optimized, every node an NVRTC-compiled kernel, the program placed and run as a CUDA Graph --
# and writes its outputs (the mock computes nothing, so values are not checked here: that is
# test_cuda_program's emulator and, on a GPU, models_cuda); nodes without a CUDA kernel are
# named, exit 1; an unknown backend lists the available ones.
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
    "no CUDA kernel for 2 nodes: 'pad' (Pad), 'split' (Split)"

"$wpk" run "$model" --backend gpu 2>"$tmp/err"
check "unknown backend" 1 $? "$tmp/err" "(available: cpu, ref, cuda)"
exit $fail
