/* wpk_module.h -- what the files of the extension module wpk._wpk share: the WpkError
 * exception, the Session type, and the module-level calls (compile, tune). The Python layer
 * (python/wpk/__init__.py) checks plain argument mistakes; this layer turns wpk statuses into
 * WpkError carrying the context's message. */
#ifndef WPK_PYTHON_MODULE_H
#define WPK_PYTHON_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "wpk.h"

/* wpk.WpkError (a RuntimeError): args[0] the message, .status the status name. */
extern PyObject *pywpk_error;

/* Raise WpkError for st with msg (the context's message, copied; NULL or "": the status
 * name). Returns NULL for the caller to return. */
PyObject *pywpk_raise(wpk_status st, const char *msg);

/* A wpk_log_fn that hands each line to Python's logging (logger "wpk"), taking the GIL: any
 * thread may call it, as long as it does not hold the GIL's waiters' locks. */
void pywpk_log_to_python(void *user, wpk_log_level level, const char *message);

/* _wpk.Session: a wpk_session with its own context and model, one run at a time. */
extern PyTypeObject pywpk_session_type;

/* _wpk.compile(model, output, target, records, opt_level, batch, threads, provider, strict) */
PyObject *pywpk_compile(PyObject *self, PyObject *args, PyObject *kwargs);

/* _wpk.tune(model, db, strategy, trials, time_s, seed, opt_level, parallel, timeout_s,
 * alternatives, clock, verbose) -> dict: the tuning summary. Forks measurement workers: call it
 * from a process that has run no multi-threaded OpenMP region (the Python layer starts one). */
PyObject *pywpk_tune(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
