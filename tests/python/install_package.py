#!/usr/bin/env python3
"""Installs the wpk package from this repository with pip (scikit-build-core builds it through
the repository's CMake) into a target directory the package's tests import from. The CMake build
directory is kept, so a re-install rebuilds only what changed.
    install_package.py --site DIR --build-dir DIR
"""
import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", required=True, help="where the package is installed (pip --target)")
    ap.add_argument("--build-dir", required=True, help="scikit-build-core's CMake build directory")
    args = ap.parse_args()
    missing = [m for m in ("scikit_build_core", "pytest", "numpy", "onnx", "onnxruntime")
               if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"install_package: {sys.executable} lacks {', '.join(missing)}: "
                 f"run scripts/setup.sh test")
    start = time.perf_counter()
    # no build isolation: the build uses the scikit-build-core installed here, offline
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
           "--upgrade", "--root-user-action=ignore", "--disable-pip-version-check",
           "--target", args.site, f"--config-settings=build-dir={args.build_dir}",
           str(REPO)]
    result = subprocess.run(cmd)
    if result.returncode != 0:
        sys.exit(f"install_package: pip install failed (exit {result.returncode}): "
                 f"{' '.join(cmd)}")
    print(f"installed wpk into {args.site} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
