#!/usr/bin/env bash
# setup.sh -- install what building and testing Woodpecker needs, only what is missing.
#   scripts/setup.sh build   compiler, CMake, protobuf-c, Python's onnx + numpy (the demo model),
#                            scikit-build-core (builds the wpk Python package)
#   scripts/setup.sh test    the above + onnxruntime (the oracle), pytest, clang's libFuzzer runtime,
#                            Debian's torch/torchvision (to export the torchvision models) and
#                            oneDNN and OpenBLAS (the vendor-library providers of src/kernels/vendor, and
#                            the peers the kernel benchmarks compare against; OpenBLAS's OpenMP
#                            build, which shares wpk's OpenMP threads, and its pthread build,
#                            which the tests check is run on one thread); OpenVINO, the second
#                            peer of the model benchmarks (bench/)
set -euo pipefail
what=${1:-build}

apt_pkgs=(build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libxgboost-dev libsqlite3-dev libcjson-dev zlib1g-dev
          libmicrohttpd-dev libopenmpi-dev openmpi-bin)
pip_pkgs=(onnx numpy scikit_build_core)  # scikit-build-core: `pip install .` (the wpk package)
if [ "$what" = test ]; then
  apt_pkgs+=(clang libclang-rt-14-dev python3-torch python3-torchvision libdnnl-dev
            libopenblas-dev libopenblas-openmp-dev libopenblas0-pthread)
  pip_pkgs+=(onnxruntime pytest openvino onnxconverter_common)
fi

missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
need_pip=()
for p in "${pip_pkgs[@]}"; do
  $py -c "import $p" 2>/dev/null || need_pip+=("$p")
done
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "setup: pip installing ${need_pip[*]}"
  $py -m pip install -q "${need_pip[@]}"
fi
