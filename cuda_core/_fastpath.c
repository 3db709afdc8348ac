/*
 * cuda_core._fastpath: the optional compiled accelerator for the few hottest driver calls.
 *
 * Why it exists: the host cost of one call through cuda.bindings' Python layer (~0.25-1 us
 * on the H100 host) is already at or above the whole cost of NVIDIA's compiled cuda.core for
 * Device() lookup, Stream.record() and launch(); the side-by-side benchmarks in benchmarks/
 * show pure Python cannot reach the targets (DESIGN.md, key decision 1). This module calls the
 * driver entry points directly. It knows no CUDA types: cuda_core resolves every entry point
 * through cuda.bindings (cuGetProcAddress) and passes their addresses to set_entry_points();
 * all handles travel as integers. Every status is returned as an int and turned into an
 * exception by cuda_core's one error funnel (handle_return). Without this module (no C
 * compiler at install time, or CUDA_CORE_NO_FASTPATH=1) cuda_core uses cuda.bindings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*fn_ctx_get_device)(int *);
typedef int (*fn_two_ptr)(void *, void *);
typedef int (*fn_one_ptr)(void *);
typedef int (*fn_launch_ex)(const void *, void *, void **, void **);

static fn_ctx_get_device p_ctx_get_device = NULL;
static fn_two_ptr p_event_record = NULL;
static fn_one_ptr p_event_query = NULL;
static fn_one_ptr p_stream_query = NULL;
static fn_launch_ex p_launch_ex = NULL;

/* CUDA_ERROR_NOT_INITIALIZED: what a call reports before set_entry_points() ran. */
#define NOT_READY_STATUS 3

static int
as_address(PyObject *obj, void **out)
{
    if (obj == Py_None) {
        *out = NULL;
        return 0;
    }
    uintptr_t v = (uintptr_t)PyLong_AsUnsignedLongLong(obj);
    if (v == (uintptr_t)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (void *)v;
    return 0;
}

static PyObject *
set_entry_points(PyObject *self, PyObject *args)
{
    unsigned long long a, b, c, d, e;
    if (!PyArg_ParseTuple(args, "KKKKK", &a, &b, &c, &d, &e)) {
        return NULL;
    }
    p_ctx_get_device = (fn_ctx_get_device)(uintptr_t)a;
    p_event_record = (fn_two_ptr)(uintptr_t)b;
    p_event_query = (fn_one_ptr)(uintptr_t)c;
    p_stream_query = (fn_one_ptr)(uintptr_t)d;
    p_launch_ex = (fn_launch_ex)(uintptr_t)e;
    Py_RETURN_NONE;
}

/* ctx_get_device() -> the current context's device ordinal (>= 0), or -status on failure. */
static PyObject *
ctx_get_device(PyObject *self, PyObject *unused)
{
    int dev = 0;
    if (p_ctx_get_device == NULL) {
        return PyLong_FromLong(-NOT_READY_STATUS);
    }
    int status = p_ctx_get_device(&dev);
    return PyLong_FromLong(status ? -status : dev);
}

/* event_record(event, stream) -> status */
static PyObject *
event_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *ev, *st;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "event_record(event, stream) takes 2 arguments");
        return NULL;
    }
    if (as_address(args[0], &ev) || as_address(args[1], &st)) {
        return NULL;
    }
    if (p_event_record == NULL) {
        return PyLong_FromLong(NOT_READY_STATUS);
    }
    return PyLong_FromLong(p_event_record(ev, st));
}

static PyObject *
query(fn_one_ptr fn, PyObject *arg)
{
    void *h;
    if (as_address(arg, &h)) {
        return NULL;
    }
    if (fn == NULL) {
        return PyLong_FromLong(NOT_READY_STATUS);
    }
    return PyLong_FromLong(fn(h));
}

/* event_query(event) -> status (0 done, CUDA_ERROR_NOT_READY pending) */
static PyObject *
event_query(PyObject *self, PyObject *arg)
{
    return query(p_event_query, arg);
}

/* stream_query(stream) -> status (0 idle, CUDA_ERROR_NOT_READY busy) */
static PyObject *
stream_query(PyObject *self, PyObject *arg)
{
    return query(p_stream_query, arg);
}

/* launch_ex(config_address, function, params_address) -> status
 * config_address points at a native CUlaunchConfig that the caller keeps alive. */
static PyObject *
launch_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *cfg, *fn, *params;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "launch_ex(config, function, params) takes 3 arguments");
        return NULL;
    }
    if (as_address(args[0], &cfg) || as_address(args[1], &fn) || as_address(args[2], &params)) {
        return NULL;
    }
    if (p_launch_ex == NULL) {
        return PyLong_FromLong(NOT_READY_STATUS);
    }
    return PyLong_FromLong(p_launch_ex(cfg, fn, (void **)params, NULL));
}

static PyMethodDef methods[] = {
    {"set_entry_points", set_entry_points, METH_VARARGS,
     "set_entry_points(cuCtxGetDevice, cuEventRecord, cuEventQuery, cuStreamQuery, cuLaunchKernelEx)"},
    {"ctx_get_device", ctx_get_device, METH_NOARGS, "ctx_get_device() -> ordinal, or -status"},
    {"event_record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL, "event_record(event, stream) -> status"},
    {"event_query", event_query, METH_O, "event_query(event) -> status"},
    {"stream_query", stream_query, METH_O, "stream_query(stream) -> status"},
    {"launch_ex", (PyCFunction)(void (*)(void))launch_ex, METH_FASTCALL,
     "launch_ex(config_address, function, params_address) -> status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastpath",
    "Direct calls of a few driver entry points resolved through cuda.bindings (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastpath(void)
{
    return PyModule_Create(&module);
}
