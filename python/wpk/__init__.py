"""wpk -- Woodpecker from Python: run ONNX models and compiled plans (.wpk) with an API in
ONNX Runtime's shape, and tune and compile models ahead of time.

    import wpk
    sess = wpk.InferenceSession("model.onnx")            # or a plan made by wpk.compile
    (logits,) = sess.run(None, {"input": x})             # x: a NumPy array
    wpk.tune("model.onnx", db="records.db", time="10m")  # measure kernel configs on this machine
    wpk.compile("model.onnx", "model.wpk", db="records.db")

Errors that Woodpecker reports raise WpkError (a RuntimeError) with its message; plain argument
mistakes raise ValueError, TypeError or KeyError naming the argument or input.
"""
import os

# The OpenMP runtime reads its idle workers' wait policy once, when it loads (with the module
# below): a short spin, then sleep, as the wpk CLI runs -- unless the user chose a policy.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"

from . import _wpk  # noqa: E402
from ._common import ModelFileNotFoundError, NodeArg, WpkError  # noqa: E402
from .compiler import compile, tune  # noqa: E402  (shadows the builtin compile on purpose)
from .session import InferenceSession  # noqa: E402

__version__ = _wpk.version()
__all__ = ["InferenceSession", "NodeArg", "WpkError", "ModelFileNotFoundError", "compile", "tune",
           "__version__"]
