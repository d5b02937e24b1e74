/* wpk_module.c -- the extension module wpk._wpk: its init, the WpkError exception, logging into
 * Python's `logging`, and compile (ONNX model -> .wpk plan). The Python package
 * (python/wpk/__init__.py) is the API; this is the thin layer over include/wpk.h under it. */
#include "wpk_module.h"

PyObject *pywpk_error;

/* The enum's own names, which a program can compare (wpk_status_name is for people). */
static const char *status_enum_name(wpk_status st) {
    switch (st) {
    case WPK_OK: return "WPK_OK";
    case WPK_ERR_INVALID_ARG: return "WPK_ERR_INVALID_ARG";
    case WPK_ERR_IO: return "WPK_ERR_IO";
    case WPK_ERR_PARSE: return "WPK_ERR_PARSE";
    case WPK_ERR_MODEL: return "WPK_ERR_MODEL";
    case WPK_ERR_UNSUPPORTED: return "WPK_ERR_UNSUPPORTED";
    case WPK_ERR_NOMEM: return "WPK_ERR_NOMEM";
    case WPK_ERR_INTERNAL: return "WPK_ERR_INTERNAL";
    }
    return "WPK_ERR_INTERNAL";
}

PyObject *pywpk_raise(wpk_status st, const char *msg) {
    const char *text = msg && *msg ? msg : wpk_status_name(st);
    if (st == WPK_ERR_NOMEM) return PyErr_NoMemory();
    PyObject *exc = PyObject_CallFunction(pywpk_error, "s", text);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(status_enum_name(st));
    if (name && PyObject_SetAttrString(exc, "status", name) == 0) PyErr_SetObject(pywpk_error, exc);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

void pywpk_log_to_python(void *user, wpk_log_level level, const char *message) {
    (void)user;
    /* logging's levels: ERROR 40, WARNING 30, INFO 20, DEBUG 10 */
    static const int py_level[] = {40, 30, 20, 10};
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *saved_type, *saved_value, *saved_tb;
    PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
    PyObject *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "wpk") : NULL;
    PyObject *r = logger ? PyObject_CallMethod(logger, "log", "is", py_level[level & 3], message)
                         : NULL;
    /* a log line that cannot be delivered must not turn into an exception of the caller */
    if (!r) PyErr_Clear();
    Py_XDECREF(r);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
    PyErr_Restore(saved_type, saved_value, saved_tb);
    PyGILState_Release(gil);
}

PyObject *pywpk_compile(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *kwlist[] = {"model", "output", "target", "records", "opt_level", "batch",
                             "threads", "provider", "strict", "precision",
                             "precision_tolerance", NULL};
    PyObject *model_obj = NULL, *out_obj = NULL;
    wpk_compile_params p = wpk_compile_default_params();
    const char *target = "cpu";
    int opt_level = -1; /* < 0: the default */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&|sziiizpzd", kwlist,
                                     PyUnicode_FSConverter, &model_obj, PyUnicode_FSConverter,
                                     &out_obj, &target, &p.records, &opt_level, &p.batch,
                                     &p.threads, &p.provider, &p.strict, &p.precision,
                                     &p.precision_tolerance))
        return NULL;
    if (opt_level >= 0) p.opt_level = opt_level;
    PyObject *result = NULL;
    if (!strcmp(target, "cpu")) {
        p.target = WPK_BACKEND_CPU;
    } else if (!strcmp(target, "cuda")) {
        p.target = WPK_BACKEND_CUDA;
    } else {
        PyErr_Format(PyExc_ValueError, "target must be 'cpu' or 'cuda', not '%s'", target);
        goto done;
    }
    wpk_context *ctx = wpk_context_create();
    if (!ctx) {
        PyErr_NoMemory();
        goto done;
    }
    wpk_context_set_log(ctx, pywpk_log_to_python, NULL, WPK_LOG_WARN);
    const char *model_path = PyBytes_AS_STRING(model_obj), *out_path = PyBytes_AS_STRING(out_obj);
    wpk_model *m = NULL;
    wpk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = wpk_model_load(ctx, model_path, &m);
    if (st == WPK_OK) st = wpk_compile(ctx, m, &p, out_path);
    wpk_model_free(m);
    Py_END_ALLOW_THREADS
    if (st == WPK_OK) result = Py_NewRef(Py_None);
    else pywpk_raise(st, wpk_context_error(ctx));
    wpk_context_free(ctx);
done:
    Py_XDECREF(model_obj);
    Py_XDECREF(out_obj);
    return result;
}

static PyObject *module_version(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(wpk_version());
}

static PyMethodDef module_methods[] = {
    {"compile", (PyCFunction)(void (*)(void))pywpk_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(model, output, target='cpu', records=None, opt_level=-1, batch=1, threads=0, "
     "provider=None, strict=False, precision=None, precision_tolerance=0.01): write a "
     "compiled plan"},
    {"tune", (PyCFunction)(void (*)(void))pywpk_tune, METH_VARARGS | METH_KEYWORDS,
     "tune(model, db, ...) -> summary dict; forks measurement workers (see wpk.tune)"},
    {"version", module_version, METH_NOARGS, "the library's version string"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "wpk._wpk",
    "Woodpecker's C API (include/wpk.h) for the wpk package; use wpk, not this module.", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__wpk(void);

PyMODINIT_FUNC PyInit__wpk(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    pywpk_error = PyErr_NewExceptionWithDoc(
        "wpk.WpkError", "An error reported by Woodpecker: the message names the cause and place; "
        ".status is the wpk status name (WPK_ERR_PARSE, ...).", PyExc_RuntimeError, NULL);
    if (!pywpk_error || PyModule_AddObjectRef(m, "WpkError", pywpk_error) < 0 ||
        PyType_Ready(&pywpk_session_type) < 0 ||
        PyModule_AddObjectRef(m, "Session", (PyObject *)&pywpk_session_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
