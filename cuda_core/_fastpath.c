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
typedef int (*fn_alloc_pool)(unsigned long long *, size_t, void *, void *);
typedef int (*fn_free_async)(unsigned long long, void *);
typedef int (*fn_memcpy_async)(unsigned long long, unsigned long long, size_t, void *);

static fn_ctx_get_device p_ctx_get_device = NULL;
static fn_two_ptr p_event_record = NULL;
static fn_one_ptr p_event_query = NULL;
static fn_one_ptr p_stream_query = NULL;
static fn_launch_ex p_launch_ex = NULL;
static fn_alloc_pool p_alloc_pool = NULL;
static fn_free_async p_free_async = NULL;
static fn_memcpy_async p_memcpy_async = NULL;
static fn_one_ptr p_stream_sync = NULL;

/* Every driver call runs with the GIL released, as cuda.bindings does: a call that blocks
 * (a full launch queue, a pool that grows, a synchronisation) must not stop other Python
 * threads, and above all not the driver thread that runs a Python host callback. */
#define CALL(expr) \
    do { \
        Py_BEGIN_ALLOW_THREADS status = (expr); Py_END_ALLOW_THREADS \
    } while (0)

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

static int
entry(PyObject *table, const char *name, void **out)
{
    PyObject *v = PyDict_GetItemString(table, name); /* borrowed */
    if (v == NULL) {
        PyErr_Format(PyExc_KeyError, "set_entry_points: no address for %s", name);
        return -1;
    }
    return as_address(v, out);
}

/* set_entry_points({"cuCtxGetDevice": address, ...}) */
static PyObject *
set_entry_points(PyObject *self, PyObject *table)
{
    void *a[10];
    static const char *names[10] = {
        "cuCtxGetDevice", "cuEventRecord", "cuEventQuery", "cuStreamQuery", "cuLaunchKernelEx",
        "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemcpyAsync", "cuStreamSynchronize", NULL,
    };
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "set_entry_points takes a dict of name -> address");
        return NULL;
    }
    for (int i = 0; names[i] != NULL; i++) {
        if (entry(table, names[i], &a[i])) {
            return NULL;
        }
    }
    p_ctx_get_device = (fn_ctx_get_device)a[0];
    p_event_record = (fn_two_ptr)a[1];
    p_event_query = (fn_one_ptr)a[2];
    p_stream_query = (fn_one_ptr)a[3];
    p_launch_ex = (fn_launch_ex)a[4];
    p_alloc_pool = (fn_alloc_pool)a[5];
    p_free_async = (fn_free_async)a[6];
    p_memcpy_async = (fn_memcpy_async)a[7];
    p_stream_sync = (fn_one_ptr)a[8];
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
    int status;
    CALL(p_ctx_get_device(&dev));
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
    int status;
    CALL(p_event_record(ev, st));
    return PyLong_FromLong(status);
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
    int status;
    CALL(fn(h));
    return PyLong_FromLong(status);
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
    int status;
    CALL(p_launch_ex(cfg, fn, (void **)params, NULL));
    return PyLong_FromLong(status);
}

/* mem_alloc_async(size, pool, stream) -> device pointer (> 0), or -status on failure */
static PyObject *
mem_alloc_async(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *pool, *st;
    unsigned long long ptr = 0;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "mem_alloc_async(size, pool, stream) takes 3 arguments");
        return NULL;
    }
    size_t size = PyLong_AsSize_t(args[0]);
    if (size == (size_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (as_address(args[1], &pool) || as_address(args[2], &st)) {
        return NULL;
    }
    if (p_alloc_pool == NULL) {
        return PyLong_FromLong(-NOT_READY_STATUS);
    }
    int status;
    CALL(p_alloc_pool(&ptr, size, pool, st));
    if (status) {
        return PyLong_FromLong(-status);
    }
    return PyLong_FromUnsignedLongLong(ptr);
}

/* mem_free_async(pointer, stream) -> status */
static PyObject *
mem_free_async(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *ptr, *st;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "mem_free_async(pointer, stream) takes 2 arguments");
        return NULL;
    }
    if (as_address(args[0], &ptr) || as_address(args[1], &st)) {
        return NULL;
    }
    if (p_free_async == NULL) {
        return PyLong_FromLong(NOT_READY_STATUS);
    }
    int status;
    CALL(p_free_async((unsigned long long)(uintptr_t)ptr, st));
    return PyLong_FromLong(status);
}

/* memcpy_async(dst, src, nbytes, stream) -> status (unified addressing: any direction) */
static PyObject *
memcpy_async(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *dst, *src, *st;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "memcpy_async(dst, src, nbytes, stream) takes 4 arguments");
        return NULL;
    }
    size_t n = PyLong_AsSize_t(args[2]);
    if (n == (size_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    if (as_address(args[0], &dst) || as_address(args[1], &src) || as_address(args[3], &st)) {
        return NULL;
    }
    if (p_memcpy_async == NULL) {
        return PyLong_FromLong(NOT_READY_STATUS);
    }
    int status;
    CALL(p_memcpy_async((unsigned long long)(uintptr_t)dst, (unsigned long long)(uintptr_t)src, n, st));
    return PyLong_FromLong(status);
}

/* stream_sync(stream) -> status */
static PyObject *
stream_sync(PyObject *self, PyObject *arg)
{
    return query(p_stream_sync, arg);
}

/* types_match(args, types) -> bool: whether type(args[i]) is types[i] for every i (two tuples).
 * The launcher's check that a long argument list still fits the packing plan it cached. */
static PyObject *
types_match(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_CheckExact(args[0]) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "types_match(args, types) takes two tuples");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args[0]);
    if (n != PyTuple_GET_SIZE(args[1])) {
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((PyObject *)Py_TYPE(PyTuple_GET_ITEM(args[0], i)) != PyTuple_GET_ITEM(args[1], i)) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"set_entry_points", set_entry_points, METH_O, "set_entry_points({name: address, ...})"},
    {"ctx_get_device", ctx_get_device, METH_NOARGS, "ctx_get_device() -> ordinal, or -status"},
    {"event_record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL, "event_record(event, stream) -> status"},
    {"event_query", event_query, METH_O, "event_query(event) -> status"},
    {"stream_query", stream_query, METH_O, "stream_query(stream) -> status"},
    {"launch_ex", (PyCFunction)(void (*)(void))launch_ex, METH_FASTCALL,
     "launch_ex(config_address, function, params_address) -> status"},
    {"mem_alloc_async", (PyCFunction)(void (*)(void))mem_alloc_async, METH_FASTCALL,
     "mem_alloc_async(size, pool, stream) -> pointer, or -status"},
    {"mem_free_async", (PyCFunction)(void (*)(void))mem_free_async, METH_FASTCALL,
     "mem_free_async(pointer, stream) -> status"},
    {"memcpy_async", (PyCFunction)(void (*)(void))memcpy_async, METH_FASTCALL,
     "memcpy_async(dst, src, nbytes, stream) -> status"},
    {"stream_sync", stream_sync, METH_O, "stream_sync(stream) -> status"},
    {"types_match", (PyCFunction)(void (*)(void))types_match, METH_FASTCALL,
     "types_match(args, types) -> whether each argument's type is the one given"},
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
