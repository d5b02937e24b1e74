"""The ahead-of-time side: tune (measure kernel configs on this machine into a records database)
and compile (an ONNX model into a .wpk plan that the runtime loads with no compiler)."""
import json
import os
import subprocess
import sys

from . import _wpk
from ._common import WpkError, existing_file

TARGETS = ("cpu", "cuda")
STRATEGIES = ("ga", "rl", "anneal", "random", "grid", "model")
CLOCKS = ("auto", "wall", "cpu")


def compile(model, output, db=None, target="cpu", opt_level=None, batch=1, threads=None,
            provider=None, strict=False, precision=None, precision_tolerance=1e-2):
    """Compiles the ONNX model into a plan at output (replaced only once complete); returns
    output. db: the tuning records to choose kernels from (None: the default database when it
    exists; "": none). target "cpu" or "cuda"; opt_level None (wpk's default, which tune uses
    too) or 0..3; batch: the value of every symbolic dim; strict: fail (naming the nodes) when
    a node has no records; precision None/"fp32" or "bf16" (convs on AVX-512 BF16; while the
    error against fp32 on seeded inputs is above precision_tolerance, the leading convs stay
    fp32, up to a tenth of the bf16 work). Untuned nodes are logged as warnings through the
    "wpk" logger.
    Raises WpkError for what Woodpecker refuses."""
    model = existing_file(model, "model")
    if not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"output must be a path, not {type(output).__name__}")
    output = os.fspath(output)
    if target not in TARGETS:
        raise ValueError(f"target must be 'cpu' or 'cuda', not {target!r}")
    if db is not None and db != "":
        db = existing_file(db, "records database")
    opt_level = _level(opt_level)
    _check_int("batch", batch, 1, 1 << 20)
    if threads is not None:
        _check_int("threads", threads, 1, 4096)
    if precision is not None and not isinstance(precision, str):
        raise TypeError(f"precision must be a str or None, not {type(precision).__name__}")
    if isinstance(precision_tolerance, bool) or \
            not isinstance(precision_tolerance, (int, float)) or \
            not 0 <= precision_tolerance <= 1:
        raise ValueError(f"precision_tolerance must be a number from 0 to 1, not "
                         f"{precision_tolerance!r}")
    _wpk.compile(model, output, target, db, opt_level, batch, threads or 0, provider,
                 bool(strict), precision, float(precision_tolerance))
    return output


def tune(model, db=None, time=None, trials=None, strategy="ga", seed=0, opt_level=None,
         parallel=None, timeout=None, alternatives=True, clock="auto", verbose=False):
    """Tunes the model's kernels on this machine into the records database db (None: the
    default one, $WPK_CACHE_DIR or ~/.cache/wpk/records.db), as `wpk tune` does, and returns the
    summary: a dict with strategy, seconds, measured and per task its key, template, trials,
    default_s and best_s (median seconds), best_config. Re-running continues where it stopped.

      time       budget for the whole model: seconds, or "90", "30s", "10m", "1h"
      trials     records per task, counting those stored (default 64 when time is not given)
      strategy   ga, rl, anneal, random, grid or model
      opt_level  the graph optimization the tasks come from: None (wpk's default, which
                 compile and InferenceSession use too) or 0..3; the records match only there
      parallel   build workers (None: chosen and adjusted while tuning)
      timeout    seconds before one measurement is killed (default 30)
      clock      what a sample times: "wall", "cpu" (the busiest kernel thread's CPU time) or
                 "auto" (cpu when the machine is busy)

    The tuner forks measurement workers that run OpenMP kernels, which a process that has run
    OpenMP threads cannot do safely, so the job runs in a fresh Python process; its warnings
    go to stderr. Raises WpkError for what Woodpecker refuses."""
    model = existing_file(model, "model")
    if db is not None:
        if not isinstance(db, (str, os.PathLike)):
            raise TypeError(f"db must be a path or None, not {type(db).__name__}")
        db = os.fspath(db)
    time_s = _seconds("time", time) if time is not None else 0.0
    if trials is not None:
        _check_int("trials", trials, 1, 100000000)
    elif time is None:
        trials = 64
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    _check_int("seed", seed, 0, (1 << 63) - 1)
    opt_level = _level(opt_level)
    if parallel is not None:
        _check_int("parallel", parallel, 1, 256)
    timeout_s = _seconds("timeout", timeout) if timeout is not None else 0.0
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, not {clock!r}")
    if clock == "auto":
        clock = "cpu" if _machine_busy() else "wall"
    job = dict(model=model, db=db or "", strategy=strategy, trials=trials or 0, time_s=time_s,
               seed=seed, opt_level=opt_level, parallel=parallel or 0, timeout_s=timeout_s,
               alternatives=bool(alternatives), clock=clock, verbose=bool(verbose))
    return _run_job(job)


def _run_job(job):
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if job["clock"] == "cpu" and "OMP_WAIT_POLICY" not in env:
        # waiting OpenMP threads must sleep, or CPU time counts their spinning
        env["OMP_WAIT_POLICY"] = "passive"
        env.pop("GOMP_SPINCOUNT", None)
    proc = subprocess.run([sys.executable, "-m", "wpk._tune_job"], input=json.dumps(job),
                          stdout=subprocess.PIPE, text=True, env=env)
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise WpkError(f"the tuning process ended without a result (exit status "
                       f"{proc.returncode}); its messages are on stderr") from None
    if "summary" in answer:
        return answer["summary"]
    kinds = {"ValueError": ValueError, "TypeError": TypeError, "MemoryError": MemoryError}
    exc = kinds.get(answer.get("kind"), WpkError)(answer.get("message", "tuning failed"))
    if isinstance(exc, WpkError):
        exc.status = answer.get("status", "")
    raise exc


def _level(opt_level):
    """opt_level 0..3, or -1 for None (wpk's default, the same for tune, compile and run)."""
    if opt_level is None:
        return -1
    _check_int("opt_level", opt_level, 0, 3)
    return opt_level


def _check_int(name, value, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an int from {lo} to {hi}, not {value!r}")


def _seconds(name, value):
    """90, 2.5, "90", "30s", "10m", "1.5h" -> seconds (> 0)."""
    scale = {"": 1, "s": 1, "m": 60, "h": 3600}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        unit = value[-1:] if value[-1:] in ("s", "m", "h") else ""
        try:
            seconds = float(value[:len(value) - len(unit)]) * scale[unit]
        except ValueError:
            seconds = -1.0
    else:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{name} must be a duration such as 90, '30s', '10m' or '1h', "
                         f"not {value!r}")
    return seconds


def _machine_busy():
    """The 1-minute load average is at least half the cores (as `wpk tune --clock auto`)."""
    try:
        return os.getloadavg()[0] >= 0.5 * (os.cpu_count() or 1)
    except OSError:
        return False
