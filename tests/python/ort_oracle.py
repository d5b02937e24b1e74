"""The oracle of the package's tests: ONNX Runtime's outputs, and the relative L2 error."""
import numpy as np


def ort_run(path, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def rel_l2(actual, expected):
    expected = np.asarray(expected, dtype=np.float64)
    diff = np.linalg.norm(np.asarray(actual, dtype=np.float64) - expected)
    return diff / max(np.linalg.norm(expected), 1e-30)
