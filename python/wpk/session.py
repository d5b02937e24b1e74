"""InferenceSession: an ONNX model or a compiled plan (.wpk) made ready to run, in ONNX Runtime's
shape (get_inputs, get_outputs, run)."""
import os

import numpy as np

from . import _wpk
from ._common import DTYPES, existing_file, node_arg

PLAN_MAGIC = b"WPKPLAN\n"  # the first bytes of a compiled plan (src/runtime/artifact.h)
BACKENDS = ("cpu", "cuda", "ref")


def _is_plan(path):
    with open(path, "rb") as f:
        head = f.read(len(PLAN_MAGIC))
    # a damaged plan still goes to the plan loader, whose message says what is wrong with it
    return head == PLAN_MAGIC or path.endswith(".wpk")


class InferenceSession:
    """Runs an ONNX model (.onnx) or a plan compiled by wpk.compile (.wpk).

    InferenceSession(path_or_plan, backend="cpu", threads=None, opt_level=None, db=None,
                     provider=None, precision=None)
      backend    "cpu" (generated kernels and vendor libraries, as tuned), "cuda" (NVIDIA GPU) or
                 "ref" (the reference kernels); a plan runs on the target it was compiled for
      threads    kernel threads; None: the machine's physical cores
      opt_level  graph optimization level 0..3 (models only); None: wpk's default, as
                 `wpk run` and `wpk tune` use
      db         the tuning records the cpu backend chooses kernels from; None: the default
                 database when it exists; "": none (every kernel at its default config)
      provider   "auto" (None), "generated", "onednn", "openblas" or "ref": every node that can
                 runs on that one
      profile    time every node of each run: profile() gives the last run's times
      precision  None or "fp32" (as the model says); "bf16" (cpu backend, models only): convs
                 on AVX-512 BF16 with f32 accumulation, WpkError on a CPU without avx512_bf16
      providers  ONNX Runtime's list, for code written for it: the first of
                 "CUDAExecutionProvider" / "CPUExecutionProvider" sets backend

    Thread safety: the underlying C session is not reentrant, so calls to run() on one session
    are serialized by a lock (taken with the GIL released); separate sessions run in parallel.
    The GIL is released while a model loads and while it runs. Each run copies its inputs into
    the session straight from the arrays' memory (no intermediate copy when an array is
    C-contiguous with the input's dtype) and returns new arrays that own their data.
    """

    def __init__(self, path_or_plan, backend="cpu", threads=None, opt_level=None, db=None,
                 provider=None, providers=None, profile=False, precision=None):
        path = existing_file(path_or_plan, "model")
        if providers is not None:
            backend = _backend_of_providers(providers)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if threads is None:
            threads = 0
        elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int or None, not {threads!r}")
        if opt_level is None:
            opt_level = -1
        elif isinstance(opt_level, bool) or opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt_level must be 0, 1, 2, 3 or None, not {opt_level!r}")
        if db is not None and db != "":
            db = existing_file(db, "records database")
        if provider is not None and not isinstance(provider, str):
            raise TypeError(f"provider must be a str or None, not {type(provider).__name__}")
        if precision is not None and not isinstance(precision, str):
            raise TypeError(f"precision must be a str or None, not {type(precision).__name__}")
        self._path = path
        self._plan = _is_plan(path)
        self._backend = backend
        self._s = _wpk.Session(path, self._plan, backend, threads, opt_level, db, provider,
                               bool(profile), precision)
        self._inputs = [node_arg(*d) for d in self._s.inputs()]
        self._outputs = [node_arg(*d) for d in self._s.outputs()]
        self._input_index = {a.name: i for i, a in enumerate(self._inputs)}
        self._output_index = {a.name: i for i, a in enumerate(self._outputs)}

    @property
    def is_plan(self):
        """True when the session runs a compiled plan (.wpk)."""
        return self._plan

    def get_inputs(self):
        """The graph inputs as NodeArg (name, shape, type), in the model's order."""
        return list(self._inputs)

    def get_outputs(self):
        """The graph outputs as NodeArg (name, shape, type), in the model's order."""
        return list(self._outputs)

    def get_providers(self):
        """The backend the session runs on, as a one-element list."""
        return [self._backend]

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model on input_feed ({input name: array}, every input given) and returns the
        outputs named in output_names (None: all of them) as a list of NumPy arrays.

        KeyError: an unknown input or output name; ValueError: a missing input or a shape the
        model does not take; TypeError: an array of another dtype than the input's;
        WpkError: an error of the run itself (its message names the node)."""
        del run_options  # accepted for ONNX Runtime's signature; wpk has none
        if not isinstance(input_feed, dict):
            raise TypeError(f"input_feed must be a dict of input name -> array, not "
                            f"{type(input_feed).__name__}")
        wanted = self._output_indices(output_names)
        for name in input_feed:
            if name not in self._input_index:
                raise KeyError(f"unknown input {name!r}; the model's inputs are "
                               f"{', '.join(repr(a.name) for a in self._inputs)}")
        feeds = []
        for arg in self._inputs:
            if arg.name not in input_feed:
                raise ValueError(f"input {arg.name!r} is missing from input_feed (every input "
                                 f"of the model must be given)")
            array = _as_input(arg, input_feed[arg.name])
            feeds.append((arg.name, array, _code_of(arg.dtype)))
        results = self._s.run(feeds, wanted)
        return [np.frombuffer(data, dtype=DTYPES[code][0]).reshape(shape)
                for code, shape, data in results]

    def profile(self):
        """The per-node profile of the last run, in execution order: a list of dicts with node,
        op, provider ("generated", "onednn", "openblas", "ref"), impl (the template or library
        and its config), source ("tuned", "default", ...) and ms. WpkError when the session
        was made without profile=True or has not run."""
        keys = ("node", "op", "provider", "impl", "source", "ms")
        return [dict(zip(keys, entry)) for entry in self._s.profile()]

    def _output_indices(self, output_names):
        if output_names is None:
            return list(range(len(self._outputs)))
        if isinstance(output_names, str):
            raise TypeError("output_names must be a list of names or None, not a str")
        indices = []
        for name in output_names:
            if name not in self._output_index:
                raise KeyError(f"unknown output {name!r}; the model's outputs are "
                               f"{', '.join(repr(a.name) for a in self._outputs)}")
            indices.append(self._output_index[name])
        return indices

    def __repr__(self):
        kind = "plan" if self._plan else "model"
        return f"wpk.InferenceSession({kind} {os.path.basename(self._path)!r}, {self._backend})"


def _backend_of_providers(providers):
    names = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}
    if isinstance(providers, str) or not hasattr(providers, "__iter__"):
        raise TypeError("providers must be a list of ONNX Runtime provider names")
    for p in providers:
        name = p[0] if isinstance(p, tuple) else p
        if name in names:
            return names[name]
    raise ValueError(f"providers {list(providers)!r} name neither CPUExecutionProvider nor "
                     f"CUDAExecutionProvider")


def _code_of(dtype):
    for code, (np_dtype, _) in DTYPES.items():
        if np_dtype == dtype:
            return code
    raise AssertionError(f"no wpk dtype for {dtype}")


def _as_input(arg, value):
    """value as a C-contiguous array of arg's dtype and shape: the same object when it is one
    already; converted when it is not an ndarray, non-contiguous or of another byte order."""
    if arg.dtype is None:
        raise TypeError(f"input {arg.name!r} has type {arg.type}, which wpk cannot take")
    if isinstance(value, np.ndarray):
        if value.dtype != arg.dtype:
            if value.dtype.newbyteorder("=") != arg.dtype:
                raise TypeError(f"input {arg.name!r} expects {arg.type} ({arg.dtype}), got an "
                                f"array of {value.dtype}")
            value = value.astype(arg.dtype)
    else:
        try:
            value = np.asarray(value, dtype=arg.dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(f"input {arg.name!r} expects {arg.type}: cannot convert "
                            f"{type(value).__name__}: {e}") from None
    if value.ndim != len(arg.shape):
        raise ValueError(f"input {arg.name!r} expects {len(arg.shape)} dims {_shape_text(arg)}, "
                         f"got shape {list(value.shape)}")
    for axis, (want, got) in enumerate(zip(arg.shape, value.shape)):
        if isinstance(want, int) and want != got:
            raise ValueError(f"input {arg.name!r} expects dim {axis} to be {want} "
                             f"{_shape_text(arg)}, got shape {list(value.shape)}")
    if not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    return value


def _shape_text(arg):
    return "[" + ", ".join(str(d) if d is not None else "?" for d in arg.shape) + "]"
