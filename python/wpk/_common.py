"""What the package's modules share: the error classes, wpk's element types as NumPy dtypes and
ONNX type names, NodeArg, and checking a model path."""
import os

import numpy as np

from . import _wpk

WpkError = _wpk.WpkError


class ModelFileNotFoundError(FileNotFoundError, ValueError):
    """A model, plan or records file that does not exist (a FileNotFoundError and a ValueError)."""


# wpk_dtype (ONNX TensorProto.DataType numbers) -> (NumPy dtype, ONNX Runtime's type name)
DTYPES = {
    1: (np.dtype(np.float32), "tensor(float)"),
    2: (np.dtype(np.uint8), "tensor(uint8)"),
    3: (np.dtype(np.int8), "tensor(int8)"),
    6: (np.dtype(np.int32), "tensor(int32)"),
    7: (np.dtype(np.int64), "tensor(int64)"),
    9: (np.dtype(np.bool_), "tensor(bool)"),
    11: (np.dtype(np.float64), "tensor(double)"),
}


class NodeArg:
    """A graph input or output as ONNX Runtime describes one: .name, .shape (ints; a symbolic
    dim's name where the model leaves it open, None where it has no name) and .type
    ("tensor(float)")."""

    __slots__ = ("name", "shape", "type", "dtype")

    def __init__(self, name, shape, type_name, dtype):
        self.name, self.shape, self.type, self.dtype = name, shape, type_name, dtype

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def node_arg(name, code, dims, dim_names):
    """A NodeArg from the extension's (name, dtype, dims, dim_names)."""
    dtype, type_name = DTYPES.get(code, (None, f"tensor(unknown {code})"))
    shape = [d if d >= 0 else n for d, n in zip(dims, dim_names)]
    return NodeArg(name, shape, type_name, dtype)


def existing_file(path, what):
    """path as a str (str or os.PathLike), or ModelFileNotFoundError / TypeError naming `what`."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike), not {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "does not exist"
        raise ModelFileNotFoundError(2, f"{what} '{path}' {why}", path)
    return path
