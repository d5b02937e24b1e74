/* session_type.c -- _wpk.Session: an ONNX model or a compiled plan made ready to run, with its
 * own wpk_context. A wpk_session is not reentrant, so runs of one session are serialized by a
 * lock taken with the GIL released; different sessions run in parallel. The GIL is released
 * while a model loads, a session is created and a run executes. */
#include <string.h>

#include "wpk_module.h"

#include <pythread.h>

typedef struct {
    PyObject_HEAD
    wpk_context *ctx;        /* owned; used only under lock (or before the object is shared) */
    wpk_model *model;        /* owned; NULL for a plan's session */
    wpk_session *session;    /* owned */
    PyThread_type_lock lock; /* one run at a time */
} session_object;

/* One input of a run: the caller's buffer, held until the run is over. */
typedef struct {
    const char *name;        /* borrowed from the caller's str */
    wpk_dtype dtype;
    int ndim;
    int64_t dims[WPK_MAX_DIMS];
    Py_buffer view;
    int held;
} feed;

static void session_dealloc(session_object *self) {
    wpk_session_free(self->session);
    wpk_model_free(self->model);
    wpk_context_free(self->ctx);
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static wpk_backend backend_named(const char *name, int *ok) {
    *ok = 1;
    if (!strcmp(name, "cpu")) return WPK_BACKEND_CPU;
    if (!strcmp(name, "ref")) return WPK_BACKEND_REF;
    if (!strcmp(name, "cuda")) return WPK_BACKEND_CUDA;
    *ok = 0;
    return WPK_BACKEND_REF;
}

/* Session(path, is_plan, backend, threads, opt_level, records, provider, profile, precision) */
static int session_init(session_object *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"path", "is_plan", "backend", "threads", "opt_level", "records",
                             "provider", "profile", "precision", NULL};
    PyObject *path_obj = NULL;
    int is_plan = 0, threads = 0, opt_level = -1, profile = 0; /* opt_level < 0: the default */
    const char *backend = "cpu", *records = NULL, *provider = NULL, *precision = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|psiizzpz", kwlist, PyUnicode_FSConverter,
                                     &path_obj, &is_plan, &backend, &threads, &opt_level,
                                     &records, &provider, &profile, &precision))
        return -1;
    if (self->ctx) {
        Py_DECREF(path_obj);
        PyErr_SetString(PyExc_RuntimeError, "a Session is initialized once; make a new one");
        return -1;
    }
    int known;
    wpk_session_params params = wpk_session_default_params();
    params.backend = backend_named(backend, &known);
    params.threads = threads;
    if (opt_level >= 0) params.opt_level = opt_level;
    params.records = records;
    params.provider = provider;
    params.profile = profile;
    params.precision = precision;
    if (!known) {
        Py_DECREF(path_obj);
        PyErr_Format(PyExc_ValueError, "backend must be 'cpu', 'cuda' or 'ref', not '%s'",
                     backend);
        return -1;
    }
    self->lock = PyThread_allocate_lock();
    self->ctx = wpk_context_create();
    if (!self->lock || !self->ctx) {
        Py_DECREF(path_obj);
        PyErr_NoMemory();
        return -1;
    }
    wpk_context_set_log(self->ctx, pywpk_log_to_python, NULL, WPK_LOG_WARN);
    const char *path = PyBytes_AS_STRING(path_obj);
    wpk_status st;
    /* the object is not yet visible to other threads: no lock needed */
    Py_BEGIN_ALLOW_THREADS
    if (is_plan) {
        st = wpk_session_create_from_plan(self->ctx, path, &params, &self->session);
    } else {
        st = wpk_model_load(self->ctx, path, &self->model);
        if (st == WPK_OK) st = wpk_session_create(self->ctx, self->model, &params, &self->session);
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != WPK_OK) {
        pywpk_raise(st, wpk_context_error(self->ctx));
        return -1;
    }
    return 0;
}

static int check_ready(session_object *self) {
    if (self->session) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Session was not initialized");
    return 0;
}

/* (name, dtype, dims, dim_names): dims with -1 where symbolic, dim_names None where fixed */
static PyObject *describe(wpk_tensor_view t) {
    PyObject *dims = PyList_New(t.ndim), *names = PyList_New(t.ndim);
    if (!dims || !names) goto fail;
    for (int d = 0; d < t.ndim; d++) {
        PyObject *v = PyLong_FromLongLong((long long)t.dims[d]);
        PyObject *n = t.dim_names[d] ? PyUnicode_FromString(t.dim_names[d]) : Py_NewRef(Py_None);
        if (!v || !n) {
            Py_XDECREF(v);
            Py_XDECREF(n);
            goto fail;
        }
        PyList_SET_ITEM(dims, d, v);
        PyList_SET_ITEM(names, d, n);
    }
    return Py_BuildValue("(siNN)", t.name ? t.name : "", (int)t.dtype, dims, names);
fail:
    Py_XDECREF(dims);
    Py_XDECREF(names);
    return NULL;
}

static PyObject *describe_all(session_object *self, int outputs) {
    if (!check_ready(self)) return NULL;
    int n = outputs ? wpk_session_num_outputs(self->session)
                    : wpk_session_num_inputs(self->session);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *item = describe(outputs ? wpk_session_output_info(self->session, i)
                                          : wpk_session_input_info(self->session, i));
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *session_inputs(session_object *self, PyObject *unused) {
    (void)unused;
    return describe_all(self, 0);
}

static PyObject *session_outputs(session_object *self, PyObject *unused) {
    (void)unused;
    return describe_all(self, 1);
}

/* Takes a C-contiguous buffer of (name, array, dtype) without copying it. */
static int feed_take(feed *f, PyObject *item) {
    PyObject *array;
    int dtype;
    if (!PyArg_ParseTuple(item, "sOi;a feed is (name, array, dtype)", &f->name, &array, &dtype))
        return 0;
    if (PyObject_GetBuffer(array, &f->view, PyBUF_C_CONTIGUOUS) != 0) return 0;
    f->held = 1;
    f->dtype = (wpk_dtype)dtype;
    size_t item_size = wpk_dtype_size(f->dtype);
    if (item_size == 0 || (size_t)f->view.itemsize != item_size) {
        PyErr_Format(PyExc_TypeError, "input '%s': %zd-byte elements do not match dtype %s",
                     f->name, f->view.itemsize, wpk_dtype_name(f->dtype));
        return 0;
    }
    if (f->view.ndim > WPK_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "input '%s' has %d dims; wpk takes at most %d", f->name,
                     f->view.ndim, WPK_MAX_DIMS);
        return 0;
    }
    f->ndim = f->view.ndim;
    for (int d = 0; d < f->ndim; d++) f->dims[d] = (int64_t)f->view.shape[d];
    return 1;
}

/* One output of the last run as (dtype, shape, bytearray); the caller holds the lock. */
static PyObject *output_copy(session_object *self, int index, wpk_status *st) {
    wpk_tensor_view t;
    *st = wpk_session_output(self->session, index, &t);
    if (*st != WPK_OK) return NULL;
    size_t bytes = wpk_dtype_size(t.dtype);
    PyObject *shape = PyTuple_New(t.ndim);
    if (!shape) return NULL;
    for (int d = 0; d < t.ndim; d++) {
        PyObject *v = PyLong_FromLongLong((long long)t.dims[d]);
        if (!v) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, d, v);
        bytes *= (size_t)t.dims[d];
    }
    PyObject *data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes);
    if (!data) {
        Py_DECREF(shape);
        return NULL;
    }
    if (bytes) memcpy(PyByteArray_AS_STRING(data), t.data, bytes);
    return Py_BuildValue("(iNN)", (int)t.dtype, shape, data);
}

/* run(feeds, output_indices) -> [(dtype, shape, bytearray)]: binds the feeds (wpk copies them
 * from the caller's buffers into the session), runs, copies the outputs asked for. */
static PyObject *session_run(session_object *self, PyObject *args) {
    PyObject *feeds_obj, *wanted_obj;
    if (!check_ready(self)) return NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &feeds_obj, &PyList_Type, &wanted_obj))
        return NULL;
    Py_ssize_t nfeeds = PyList_GET_SIZE(feeds_obj), nwanted = PyList_GET_SIZE(wanted_obj);
    int noutputs = wpk_session_num_outputs(self->session);
    for (Py_ssize_t k = 0; k < nwanted; k++) {
        long i = PyLong_AsLong(PyList_GET_ITEM(wanted_obj, k));
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || i >= noutputs)
            return PyErr_Format(PyExc_IndexError, "output index %ld out of range", i);
    }
    feed *feeds = PyMem_Calloc((size_t)nfeeds + 1, sizeof *feeds);
    if (!feeds) return PyErr_NoMemory();
    PyObject *result = NULL;
    /* the list may change while the GIL is released: keep our own reference to every item */
    PyObject *items = PyList_AsTuple(feeds_obj);
    int ok = items != NULL;
    for (Py_ssize_t k = 0; ok && k < nfeeds; k++)
        ok = feed_take(&feeds[k], PyTuple_GET_ITEM(items, k));
    if (!ok) goto done;

    wpk_status st = WPK_OK;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    for (Py_ssize_t k = 0; st == WPK_OK && k < nfeeds; k++)
        st = wpk_session_set_input(self->session, feeds[k].name, feeds[k].dtype, feeds[k].dims,
                                   feeds[k].ndim, feeds[k].view.buf);
    if (st == WPK_OK) st = wpk_session_run(self->session);
    Py_END_ALLOW_THREADS
    /* the lock is still held: the outputs and the message are this run's */
    if (st == WPK_OK) result = PyList_New(nwanted);
    for (Py_ssize_t k = 0; result && k < nwanted; k++) {
        int index = (int)PyLong_AsLong(PyList_GET_ITEM(wanted_obj, k));
        PyObject *out = output_copy(self, index, &st);
        if (!out) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, k, out);
    }
    if (st != WPK_OK) pywpk_raise(st, wpk_context_error(self->ctx));
    PyThread_release_lock(self->lock);
done:
    for (Py_ssize_t k = 0; k < nfeeds; k++)
        if (feeds[k].held) PyBuffer_Release(&feeds[k].view);
    PyMem_Free(feeds);
    Py_XDECREF(items);
    return result;
}

/* profile() -> [(node, op, provider, impl, source, ms)] of the last run, in execution order */
static PyObject *session_profile(session_object *self, PyObject *unused) {
    (void)unused;
    if (!check_ready(self)) return NULL;
    const wpk_node_profile *nodes = NULL;
    int n = 0;
    wpk_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    st = wpk_session_profile(self->session, &nodes, &n);
    PyObject *list = st == WPK_OK ? PyList_New(n) : NULL;
    for (int i = 0; list && i < n; i++) {
        const wpk_node_profile *p = &nodes[i];
        PyObject *item = Py_BuildValue("(sssssd)", p->node ? p->node : "", p->op ? p->op : "",
                                       p->provider ? p->provider : "", p->impl ? p->impl : "",
                                       p->source ? p->source : "", p->ms);
        if (!item) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    if (st != WPK_OK) pywpk_raise(st, wpk_context_error(self->ctx));
    PyThread_release_lock(self->lock);
    return list;
}

static PyMethodDef session_methods[] = {
    {"inputs", (PyCFunction)session_inputs, METH_NOARGS,
     "inputs() -> [(name, dtype, dims, dim_names)] of the graph inputs"},
    {"outputs", (PyCFunction)session_outputs, METH_NOARGS,
     "outputs() -> [(name, dtype, dims, dim_names)] of the graph outputs"},
    {"profile", (PyCFunction)session_profile, METH_NOARGS,
     "profile() -> [(node, op, provider, impl, source, ms)] of the last run (profile=True)"},
    {"run", (PyCFunction)session_run, METH_VARARGS,
     "run(feeds, output_indices) -> [(dtype, shape, bytearray)]; feeds: [(name, array, "
     "dtype)] of C-contiguous buffers. Serialized per session; the GIL is released."},
    {NULL, NULL, 0, NULL}};

PyTypeObject pywpk_session_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "wpk._wpk.Session",
    .tp_basicsize = sizeof(session_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Session(path, is_plan=False, backend='cpu', threads=0, opt_level=-1, "
              "records=None, provider=None, profile=False): the C session under "
              "wpk.InferenceSession",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)session_init,
    .tp_dealloc = (destructor)session_dealloc,
    .tp_methods = session_methods,
};
