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
#include <string.h>
#include <structmember.h>
#include <pythread.h>

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
static fn_one_ptr p_event_destroy = NULL;
static fn_one_ptr p_stream_destroy = NULL;
typedef int (*fn_wait_event)(void *, void *, unsigned int);
static fn_wait_event p_stream_wait_event = NULL;

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
    void *a[13];
    static const char *names[13] = {
        "cuCtxGetDevice", "cuEventRecord", "cuEventQuery", "cuStreamQuery", "cuLaunchKernelEx",
        "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemcpyAsync", "cuStreamSynchronize",
        "cuEventDestroy", "cuStreamDestroy", "cuStreamWaitEvent", NULL,
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
    p_event_destroy = (fn_one_ptr)a[9];
    p_stream_destroy = (fn_one_ptr)a[10];
    p_stream_wait_event = (fn_wait_event)a[11];
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

/* current_device(tls) -> tls.devices[the current context's device ordinal], or None when
 * there is no current context, the entry points are not bound yet, or tls has no such entry.
 * Device()'s lookup in one call. cuCtxGetDevice only reads the calling thread's current
 * context (it never blocks), so here it runs without releasing the GIL. */
static PyObject *devices_name = NULL;

static PyObject *
current_device(PyObject *self, PyObject *tls)
{
    int dev = 0;
    if (p_ctx_get_device == NULL || p_ctx_get_device(&dev) != 0) {
        Py_RETURN_NONE;
    }
    PyObject *devices = PyObject_GetAttr(tls, devices_name);
    if (devices == NULL) {
        PyErr_Clear(); /* this thread has made no Device yet */
        Py_RETURN_NONE;
    }
    PyObject *found = NULL;
    PyObject *key = PyLong_FromLong(dev);
    if (key != NULL && PyDict_CheckExact(devices)) {
        found = PyDict_GetItemWithError(devices, key); /* borrowed */
    }
    Py_XDECREF(key);
    Py_XINCREF(found);
    Py_DECREF(devices);
    if (found == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return found;
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

static int order_streams(void *ev, void *producer, void *consumer);

/* record_wait(event, producer, consumer) -> 0, -status when cuEventRecord(event, producer)
 * failed (nothing was ordered), or +status when cuStreamWaitEvent(consumer, event) failed.
 * Orders the consumer stream after the work queued so far on the producer, on the device; one
 * record+wait at a time (the event is shared), see order_streams. */
static PyObject *
record_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *ev, *producer, *consumer;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_wait(event, producer, consumer) takes 3 arguments");
        return NULL;
    }
    if (as_address(args[0], &ev) || as_address(args[1], &producer) || as_address(args[2], &consumer)) {
        return NULL;
    }
    if (p_event_record == NULL || p_stream_wait_event == NULL) {
        return PyLong_FromLong(-NOT_READY_STATUS);
    }
    return PyLong_FromLong(order_streams(ev, producer, consumer));
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


/* ---------------------------------------------------------------------------------------------
 * Owned: the holder of one pooled event or stream handle, released exactly once.
 *
 * Owned(owner, kind, entry, pool, cap): owner is not referenced (the argument only keeps the
 * signature of the pure-Python path, _fast._py_own); kind 0 is an event, 1 a stream; entry is
 * the (handle, address) tuple the handle travels in; pool is the list of idle entries of its (context, flags) or
 * None. release() (close()) gives the handle back once: into the pool when the pool holds fewer
 * than cap entries and the handle's work has completed (cuEventQuery/cuStreamQuery say so, or
 * the caller vouches for it: release(False) for an event that was never recorded),
 * else to the driver (cuEventDestroy/cuStreamDestroy). The owner (an Event or Stream) keeps
 * its Owned in a slot and nothing else references it, so when the owner is collected the
 * Owned is deallocated with it and releases the handle then: the weakref and registry entry
 * that _lifetime.track() costs (about 1 us a create+close) are not needed. Releasing never
 * raises: a failed destroy is a ResourceWarning. While the interpreter shuts down nothing is
 * released (as _lifetime does): other libraries may already have torn the contexts down.
 */
typedef struct {
    PyObject_HEAD
    void *addr;
    PyObject *entry; /* NULL once released */
    PyObject *pool;  /* a list, or NULL */
    Py_ssize_t cap;
    int kind;
} Owned;

static int
is_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Returns 1 when the handle was released here, 0 when it already had been. Never raises.
 * check == 0: the caller knows the handle has no pending work (an event never recorded), so
 * the query before pooling is skipped. */
static int
owned_release(Owned *o, int check)
{
    PyObject *entry = o->entry, *pool = o->pool;
    if (entry == NULL) {
        return 0;
    }
    o->entry = NULL; /* the claim: whoever clears entry (with the GIL held) releases */
    o->pool = NULL;
    if (!is_finalizing()) {
        fn_one_ptr query = o->kind ? p_stream_query : p_event_query;
        fn_one_ptr destroy = o->kind ? p_stream_destroy : p_event_destroy;
        int status = 1, kept = 0;
        if (pool != NULL && PyList_GET_SIZE(pool) < o->cap && query != NULL) {
            status = 0;
            if (check) {
                CALL(query(o->addr));
            }
            if (status == 0) {
                kept = PyList_Append(pool, entry) == 0;
                if (!kept) {
                    PyErr_Clear();
                }
            }
        }
        if (!kept && destroy != NULL) {
            CALL(destroy(o->addr));
            if (status != 0) {
                PyObject *et, *ev, *tb;
                PyErr_Fetch(&et, &ev, &tb);
                if (PyErr_WarnFormat(PyExc_ResourceWarning, 1, "cuda_core could not release a handle: %s failed with status %d",
                                     o->kind ? "cuStreamDestroy" : "cuEventDestroy", status) < 0) {
                    PyErr_Clear(); /* warnings turned into errors: still never raise */
                }
                PyErr_Restore(et, ev, tb);
            }
        }
    }
    Py_DECREF(entry);
    Py_XDECREF(pool);
    return 1;
}

/* Owned(owner, kind, entry, pool, cap), called through vectorcall (no argument tuple). */
static PyObject *
owned_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 5 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "Owned(owner, kind, entry, pool, cap) takes 5 positional arguments");
        return NULL;
    }
    PyObject *entry = args[2], *pool = args[3];
    int kind = PyLong_AsLong(args[1]);
    if (kind != 0 && kind != 1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "Owned: kind must be 0 (event) or 1 (stream)");
        }
        return NULL;
    }
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "Owned: entry must be a (handle, address) tuple");
        return NULL;
    }
    if (pool != Py_None && !PyList_CheckExact(pool)) {
        PyErr_SetString(PyExc_TypeError, "Owned: pool must be a list or None");
        return NULL;
    }
    Py_ssize_t cap = PyLong_AsSsize_t(args[4]);
    if (cap == -1 && PyErr_Occurred()) {
        return NULL;
    }
    void *addr;
    if (as_address(PyTuple_GET_ITEM(entry, 1), &addr)) {
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    Owned *o = (Owned *)tp->tp_alloc(tp, 0);
    if (o == NULL) {
        return NULL;
    }
    o->addr = addr;
    o->kind = kind;
    o->cap = cap;
    Py_INCREF(entry);
    o->entry = entry;
    o->pool = NULL;
    if (pool != Py_None) {
        Py_INCREF(pool);
        o->pool = pool;
    }
    return (PyObject *)o;
}

static PyObject *
owned_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Owned(owner, kind, entry, pool, cap) takes no keyword arguments");
        return NULL;
    }
    return owned_vectorcall((PyObject *)type, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), NULL);
}

static void
owned_dealloc(Owned *o)
{
    /* A collection may happen while an exception propagates: keep it intact. */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    owned_release(o, 1);
    PyErr_Restore(et, ev, tb);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

/* release(check=True) */
static PyObject *
owned_release_method(Owned *o, PyObject *const *args, Py_ssize_t nargs)
{
    int check = 1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "release(check=True) takes at most 1 argument");
        return NULL;
    }
    if (nargs == 1 && (check = PyObject_IsTrue(args[0])) < 0) {
        return NULL;
    }
    return PyBool_FromLong(owned_release(o, check));
}

static PyObject *
owned_pending(Owned *o, void *closure)
{
    return PyBool_FromLong(o->entry != NULL);
}

static PyMethodDef owned_methods[] = {
    {"release", (PyCFunction)(void (*)(void))owned_release_method, METH_FASTCALL,
     "release(check=True) -> whether the handle was released now (False when it already was);\n"
     "check=False: the handle has no pending work, pool it without asking the driver"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef owned_getset[] = {
    {"pending", (getter)owned_pending, NULL, "whether the handle is still to be released", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuda_core._fastpath.Owned",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = (destructor)owned_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Owned(owner, kind, entry, pool, cap): one pooled event (0) or stream (1) handle, released once",
    .tp_methods = owned_methods,
    .tp_getset = owned_getset,
    .tp_new = owned_new,
    .tp_vectorcall = owned_vectorcall,
};

/* ---------------------------------------------------------------------------------------------
 * Stream.record(event) and Stream.sync() in one compiled call each.
 *
 * make_stream_methods(...) returns method descriptors that cuda_core installs as Stream.record
 * and Stream.sync. For the common call, stream.record(event) with an exact Stream and an exact
 * Event, both open, it calls cuEventRecord (GIL released, as everywhere here) and marks the
 * event recorded, reading and writing their __slots__ at the offsets their member descriptors
 * give. Every other call (no event, options, keywords, subclasses, a closed object, a driver
 * error, entry points not bound) goes to the Python method, slow(self, *args, **kwargs), which
 * holds the full behaviour and raises the errors. A Python method call alone costs about as
 * much as NVIDIA's compiled Stream.record adds on top of cuEventRecord. */
static PyTypeObject *rec_stream_type = NULL, *rec_event_type = NULL;
static PyObject *rec_slow = NULL;
static Py_ssize_t off_s_handle, off_s_int, off_e_handle, off_e_int, off_e_recorded;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* Store value (a new reference is taken) in the __slots__ member at off of obj. */
static void
set_slot(PyObject *obj, Py_ssize_t off, PyObject *value)
{
    PyObject *old = SLOT(obj, off);
    Py_XINCREF(value);
    SLOT(obj, off) = value;
    Py_XDECREF(old);
}

/* The general path of a compiled method: slow(self, *args, **kwargs), the Python method. */
static PyObject *
call_slow(PyObject *slow, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **stack = total + 1 <= 8 ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < total; i++) {
        stack[i + 1] = args[i];
    }
    PyObject *result = PyObject_Vectorcall(slow, stack, nargs + 1, kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

/* A method descriptor of type for def, whose doc (with its text signature) is kept for the
 * life of the process. */
static PyObject *
make_method(PyTypeObject *type, PyMethodDef *def, PyObject *doc)
{
    const char *text = PyUnicode_AsUTF8(doc);
    if (text == NULL) {
        return NULL;
    }
    char *kept = PyMem_RawMalloc(strlen(text) + 1);
    if (kept == NULL) {
        return PyErr_NoMemory();
    }
    strcpy(kept, text);
    def->ml_doc = kept;
    return PyDescr_NewMethod(type, def);
}

static int
slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (d == NULL || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name, name);
        return -1;
    }
    *out = ((PyMemberDescrObject *)d)->d_member->offset;
    return 0;
}

static PyObject *
stream_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs == 1 && kwnames == NULL && Py_TYPE(self) == rec_stream_type && Py_TYPE(args[0]) == rec_event_type &&
        p_event_record != NULL) {
        PyObject *ev = args[0];
        PyObject *sh = SLOT(self, off_s_handle), *eh = SLOT(ev, off_e_handle);
        PyObject *si = SLOT(self, off_s_int), *ei = SLOT(ev, off_e_int);
        void *e, *st;
        if (sh != NULL && sh != Py_None && eh != NULL && eh != Py_None && si != NULL && ei != NULL &&
            PyLong_CheckExact(si) && PyLong_CheckExact(ei)) {
            if (as_address(ei, &e) || as_address(si, &st)) {
                return NULL;
            }
            int status;
            CALL(p_event_record(e, st));
            if (status == 0) {
                PyObject *old = SLOT(ev, off_e_recorded);
                Py_INCREF(Py_True);
                SLOT(ev, off_e_recorded) = Py_True;
                Py_XDECREF(old);
                Py_INCREF(ev);
                return ev;
            }
        }
    }
    return call_slow(rec_slow, self, args, nargs, kwnames);
}

/* Stream.sync(): cuStreamSynchronize on an open exact Stream; else (or on failure) the
 * Python method, which raises. */
static PyObject *sync_slow = NULL;

static PyObject *
stream_sync_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs == 0 && kwnames == NULL && Py_TYPE(self) == rec_stream_type && p_stream_sync != NULL) {
        PyObject *sh = SLOT(self, off_s_handle), *si = SLOT(self, off_s_int);
        void *st;
        if (sh != NULL && sh != Py_None && si != NULL && PyLong_CheckExact(si) && !as_address(si, &st)) {
            int status;
            CALL(p_stream_sync(st));
            if (status == 0) {
                Py_RETURN_NONE;
            }
        }
        PyErr_Clear();
    }
    return call_slow(sync_slow, self, args, nargs, kwnames);
}

static PyMethodDef record_def = {"record", (PyCFunction)(void (*)(void))stream_record, METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef sync_def = {"sync", (PyCFunction)(void (*)(void))stream_sync_method, METH_FASTCALL | METH_KEYWORDS, NULL};

/* make_stream_methods(Stream, Event, slow_record, slow_sync, record_doc, sync_doc)
 * -> (record, sync) method descriptors for Stream */
static PyObject *
make_stream_methods(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyCallable_Check(args[2]) ||
        !PyCallable_Check(args[3]) || !PyUnicode_Check(args[4]) || !PyUnicode_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "make_stream_methods(Stream, Event, slow_record, slow_sync, record_doc, sync_doc)");
        return NULL;
    }
    PyTypeObject *st = (PyTypeObject *)args[0], *et = (PyTypeObject *)args[1];
    if (slot_offset(st, "_handle", &off_s_handle) || slot_offset(st, "_int", &off_s_int) ||
        slot_offset(et, "_handle", &off_e_handle) || slot_offset(et, "_int", &off_e_int) ||
        slot_offset(et, "_recorded", &off_e_recorded)) {
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        Py_INCREF(args[i]);
    }
    Py_XSETREF(rec_stream_type, st);
    Py_XSETREF(rec_event_type, et);
    Py_XSETREF(rec_slow, args[2]);
    Py_XSETREF(sync_slow, args[3]);
    /* Subclasses of Stream pass the descriptors' type check and take the general paths. */
    PyObject *r = make_method(st, &record_def, args[4]);
    PyObject *y = r ? make_method(st, &sync_def, args[5]) : NULL;
    if (y == NULL) {
        Py_XDECREF(r);
        return NULL;
    }
    return Py_BuildValue("(NN)", r, y);
}

/* ---------------------------------------------------------------------------------------------
 * Deferred: a call fn(*args) made once, by release() or when the holder is deallocated.
 *
 * Deferred(owner, fn, *args) is _lifetime.track() without the weak reference and registry
 * entry: the owner (a Buffer) keeps the holder in a slot and nothing else references it, so
 * the holder is deallocated with its owner and makes the call then. owner is not referenced
 * (the argument keeps track()'s signature). cancel() takes the entry (fn, *args) back without
 * calling it (None when it already ran or was taken): whoever takes it runs it, with the GIL
 * held, so a close() racing a collection cannot free twice. The call never raises out of the
 * holder (an exception goes to sys.unraisablehook, as a weakref callback's would) and is
 * skipped while the interpreter shuts down, as _lifetime's is. */
typedef struct {
    PyObject_HEAD
    PyObject *item; /* (fn, *args), NULL once run or taken */
} Deferred;

static void
deferred_run(PyObject *item)
{
    PyObject *fn = PyTuple_GET_ITEM(item, 0);
    PyObject *r = PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(item, 1), PyTuple_GET_SIZE(item) - 1, NULL);
    if (r == NULL) {
        PyErr_WriteUnraisable(fn);
    }
    Py_XDECREF(r);
}

static PyObject *
deferred_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "Deferred(owner, fn, *args): fn must be callable; no keywords");
        return NULL;
    }
    PyObject *item = PyTuple_New(nargs - 1);
    if (item == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 1; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(item, i - 1, args[i]);
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    Deferred *d = (Deferred *)tp->tp_alloc(tp, 0);
    if (d == NULL) {
        Py_DECREF(item);
        return NULL;
    }
    d->item = item;
    return (PyObject *)d;
}

static PyObject *
deferred_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Deferred(owner, fn, *args) takes no keyword arguments");
        return NULL;
    }
    return deferred_vectorcall((PyObject *)type, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), NULL);
}

static void
deferred_dealloc(Deferred *d)
{
    PyObject *item = d->item;
    d->item = NULL;
    if (item != NULL) {
        if (!is_finalizing()) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            deferred_run(item);
            PyErr_Restore(et, ev, tb);
        }
        Py_DECREF(item);
    }
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *
deferred_release(Deferred *d, PyObject *unused)
{
    PyObject *item = d->item;
    if (item == NULL) {
        Py_RETURN_FALSE;
    }
    d->item = NULL;
    deferred_run(item);
    Py_DECREF(item);
    Py_RETURN_TRUE;
}

static PyObject *
deferred_cancel(Deferred *d, PyObject *unused)
{
    PyObject *item = d->item;
    if (item == NULL) {
        Py_RETURN_NONE;
    }
    d->item = NULL;
    return item; /* the holder's reference passes to the caller */
}

static PyObject *
deferred_pending(Deferred *d, void *closure)
{
    return PyBool_FromLong(d->item != NULL);
}

static PyMethodDef deferred_methods[] = {
    {"release", (PyCFunction)deferred_release, METH_NOARGS, "release() -> whether the call was made now"},
    {"cancel", (PyCFunction)deferred_cancel, METH_NOARGS,
     "cancel() -> the entry (fn, *args), not called, or None when it already ran or was taken"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef deferred_getset[] = {
    {"pending", (getter)deferred_pending, NULL, "whether the call is still to be made", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DeferredType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuda_core._fastpath.Deferred",
    .tp_basicsize = sizeof(Deferred),
    .tp_dealloc = (destructor)deferred_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Deferred(owner, fn, *args): fn(*args) made once, at release() or with the holder's end",
    .tp_methods = deferred_methods,
    .tp_getset = deferred_getset,
    .tp_new = deferred_new,
    .tp_vectorcall = deferred_vectorcall,
};

/* ---------------------------------------------------------------------------------------------
 * torch_meta(tensor): an exact torch.Tensor's metadata through PyTorch's stable C ABI (AOTI).
 *
 * Reading seven attributes of a tensor from Python costs about a microsecond (each goes through
 * PyTorch's argument parser); the AOTI shim functions (torch/csrc/inductor/aoti_torch/c/shim.h,
 * a C ABI PyTorch keeps stable) read the same fields in nanoseconds. They take an
 * AtenTensorHandle, the address of an at::Tensor. A Python tensor (THPVariable) holds its
 * at::Tensor right after the object header (PyTorch >= 2.10; 8 bytes further before 2.10), so
 * the handle is (char *)tensor + sizeof(PyObject) + offset. cuda_core resolves the functions
 * from PyTorch's own libraries, picks the offset from PyTorch's version, and enables this only
 * after the values read here match PyTorch's Python attributes on probe tensors
 * (_array_bridge._bind_torch_aoti); anything unexpected returns None (the Python path). */
typedef int32_t (*fn_t_get_ptr)(void *, void **);
typedef int32_t (*fn_t_get_i64)(void *, int64_t *);
typedef int32_t (*fn_t_get_arr)(void *, int64_t **);
typedef int32_t (*fn_t_get_i32)(void *, int32_t *);
typedef int32_t (*fn_t_stream)(int32_t, void **);

static fn_t_get_ptr t_data_ptr = NULL;
static fn_t_get_i64 t_dim = NULL;
static fn_t_get_arr t_sizes = NULL, t_strides = NULL;
static fn_t_get_i32 t_dtype = NULL, t_device_type = NULL, t_device_index = NULL, t_layout = NULL;
static fn_t_stream t_stream = NULL;
static Py_ssize_t t_offset = -1; /* -1: not set up */
static int32_t t_strided = 0, t_cuda = 1;

/* set_torch_entry_points({name: address}, offset, strided_layout_code, cuda_device_code) */
static PyObject *
set_torch_entry_points(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *a[9];
    static const char *names[9] = {
        "aoti_torch_get_data_ptr", "aoti_torch_get_dim", "aoti_torch_get_sizes", "aoti_torch_get_strides",
        "aoti_torch_get_dtype", "aoti_torch_get_device_type", "aoti_torch_get_device_index", "aoti_torch_get_layout",
        NULL,
    };
    if (nargs != 4 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_torch_entry_points(table, offset, strided, cuda)");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    long strided = PyLong_AsLong(args[2]), cuda = PyLong_AsLong(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    for (int i = 0; names[i] != NULL; i++) {
        if (entry(args[0], names[i], &a[i])) {
            return NULL;
        }
        if (a[i] == NULL) {
            PyErr_Format(PyExc_ValueError, "set_torch_entry_points: no address for %s", names[i]);
            return NULL;
        }
    }
    void *st = NULL;
    PyObject *v = PyDict_GetItemString(args[0], "aoti_torch_get_current_cuda_stream"); /* optional */
    if (v != NULL && as_address(v, &st)) {
        return NULL;
    }
    t_data_ptr = (fn_t_get_ptr)a[0];
    t_dim = (fn_t_get_i64)a[1];
    t_sizes = (fn_t_get_arr)a[2];
    t_strides = (fn_t_get_arr)a[3];
    t_dtype = (fn_t_get_i32)a[4];
    t_device_type = (fn_t_get_i32)a[5];
    t_device_index = (fn_t_get_i32)a[6];
    t_layout = (fn_t_get_i32)a[7];
    t_stream = (fn_t_stream)st;
    t_strided = (int32_t)strided;
    t_cuda = (int32_t)cuda;
    t_offset = offset;
    Py_RETURN_NONE;
}

static PyObject *
int64_tuple(const int64_t *v, int64_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (t == NULL) {
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    return t;
}

/* torch_meta(tensor) -> (ptr, shape, strides, dtype_code, device_type, device_index, stream)
 * or None (not set up, not strided, a shim error). stream is PyTorch's current stream on a
 * CUDA tensor's device (0 for the legacy default stream), or -1 when unknown or not CUDA. */
typedef struct {
    void *data;
    int64_t dim, *sizes, *strides;
    int32_t dtype, dev_type, dev_index;
    long long stream; /* PyTorch's current stream on a CUDA tensor's device, or -1 */
} TorchMeta;

/* Fill m from an exact torch.Tensor; -1 when the shim is not set up, the tensor is not strided
 * or a shim call fails. */
static int
read_torch_meta(PyObject *tensor, TorchMeta *m)
{
    if (t_offset < 0) {
        return -1;
    }
    void *h = (char *)tensor + sizeof(PyObject) + t_offset;
    void *impl = *(void **)h; /* the at::Tensor's TensorImpl pointer */
    int32_t layout;
    if ((uintptr_t)impl < 4096 || t_layout(h, &layout) || layout != t_strided || t_dim(h, &m->dim) || m->dim < 0 ||
        t_sizes(h, &m->sizes) || t_strides(h, &m->strides) || t_dtype(h, &m->dtype) ||
        t_device_type(h, &m->dev_type) || t_device_index(h, &m->dev_index) || t_data_ptr(h, &m->data)) {
        return -1;
    }
    m->stream = -1;
    if (m->dev_type == t_cuda && t_stream != NULL) {
        void *st = NULL;
        if (t_stream(m->dev_index, &st) == 0) {
            m->stream = (long long)(uintptr_t)st;
        }
    }
    return 0;
}

static PyObject *
torch_meta(PyObject *self, PyObject *tensor)
{
    TorchMeta m;
    if (read_torch_meta(tensor, &m)) {
        Py_RETURN_NONE;
    }
    PyObject *shape = int64_tuple(m.sizes, m.dim);
    PyObject *strd = shape ? int64_tuple(m.strides, m.dim) : NULL;
    if (strd == NULL) {
        Py_XDECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(KNNiiiL)", (unsigned long long)(uintptr_t)m.data, shape, strd, (int)m.dtype,
                         (int)m.dev_type, (int)m.dev_index, m.stream);
}

/* torch_view(cls, tensor, stream_ptr): StridedMemoryView.from_dlpack's hot path for an exact
 * torch.Tensor on a CUDA device, in one call: the shim's metadata, the negative/conjugate view
 * checks (PyTorch's is_neg()/is_conj()), PyTorch's current stream ordered before stream_ptr
 * (record_wait on the device's cached event) and the view itself. None for anything else (a
 * host tensor, a dtype without a NumPy equivalent, stream_ptr None or special, a stream or
 * event not checked or cached yet, a failed record or wait): the Python path then handles it
 * and raises what must be raised. set_torch_view() supplies the tables. */
static PyTypeObject *tv_type = NULL;
static PyObject *tv_codes = NULL, *tv_complex = NULL, *tv_streams_ok = NULL, *tv_events = NULL, *tv_unset = NULL;
static PyObject *name_is_neg = NULL, *name_is_conj = NULL;
static Py_ssize_t off_v_capsule, off_v_devtype, off_v_dtype, off_v_raw, off_v_strides, off_v_device, off_v_exporting,
    off_v_accessible, off_v_ptr, off_v_readonly, off_v_shape;
static PyThread_type_lock order_lock = NULL;
static int tv_ready = 0; /* set_torch_view() ran */
static PyObject *new_view(PyObject *, PyObject *, PyObject *, PyObject *, PyObject *, PyObject *, PyObject *,
                          PyObject *, PyObject *, PyObject *);

/* The ordering of consumer after producer through event (see record_wait); 0, -record status,
 * +wait status. The lock keeps one record+wait at a time on the shared event. */
static int
order_streams(void *ev, void *producer, void *consumer)
{
    int status;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(order_lock, WAIT_LOCK);
    status = p_event_record(ev, producer);
    if (status != 0) {
        status = -status;
    } else {
        status = p_stream_wait_event(consumer, ev, 0);
    }
    PyThread_release_lock(order_lock);
    Py_END_ALLOW_THREADS
    return status;
}

/* Whether calling the no-argument method name of t returns exactly True (-1 on an error). */
static int
method_true(PyObject *t, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(t, name);
    if (r == NULL) {
        return -1;
    }
    int v = r == Py_True;
    Py_DECREF(r);
    return v;
}

static PyObject *
torch_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "torch_view(cls, tensor, stream_ptr) takes 3 arguments");
        return NULL;
    }
    PyObject *cls = args[0], *t = args[1], *sp = args[2];
    TorchMeta m;
    if (!tv_ready || tv_type == NULL || cls != (PyObject *)tv_type || !PyLong_CheckExact(sp) || p_event_record == NULL ||
        p_stream_wait_event == NULL || read_torch_meta(t, &m) || m.dev_type != t_cuda) {
        Py_RETURN_NONE;
    }
    PyObject *code = PyLong_FromLong(m.dtype);
    if (code == NULL) {
        return NULL;
    }
    PyObject *dtype = PyDict_GetItemWithError(tv_codes, code); /* borrowed */
    int complex = dtype != NULL ? PySet_Contains(tv_complex, code) : 0;
    Py_DECREF(code);
    if (dtype == NULL || complex < 0 || method_true(t, name_is_neg) != 0 || (complex && method_true(t, name_is_conj) != 0)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    long long stream_ptr = PyLong_AsLongLong(sp);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (stream_ptr != -1) {
        long long consumer = stream_ptr == 0 ? 1 : stream_ptr;
        if (consumer < -1 || consumer == 2 || m.stream < 0) {
            Py_RETURN_NONE;
        }
        PyObject *dev = PyLong_FromLong(m.dev_index);
        if (dev == NULL) {
            return NULL;
        }
        PyObject *ok = PyDict_GetItemWithError(tv_streams_ok, dev); /* borrowed */
        PyObject *ev = ok == Py_True ? PyDict_GetItemWithError(tv_events, dev) : NULL;
        Py_DECREF(dev);
        if (ev == NULL || !PyTuple_CheckExact(ev) || PyTuple_GET_SIZE(ev) != 2) {
            PyErr_Clear();
            Py_RETURN_NONE; /* not checked or cached yet: the Python path does it */
        }
        long long producer = m.stream ? m.stream : 1;
        if (producer != consumer) {
            int cur = -1;
            if (producer == 1 && (p_ctx_get_device == NULL || p_ctx_get_device(&cur) != 0 || cur != m.dev_index)) {
                Py_RETURN_NONE; /* the legacy stream would be another device's */
            }
            void *e;
            if (as_address(PyTuple_GET_ITEM(ev, 1), &e)) {
                PyErr_Clear();
                Py_RETURN_NONE;
            }
            if (order_streams(e, (void *)(uintptr_t)producer, (void *)(uintptr_t)consumer) != 0) {
                Py_RETURN_NONE;
            }
        }
    }
    PyObject *ptr = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)m.data);
    PyObject *shape = ptr ? int64_tuple(m.sizes, m.dim) : NULL;
    PyObject *strd = shape ? int64_tuple(m.strides, m.dim) : NULL;
    PyObject *devid = strd ? PyLong_FromLong(m.dev_index) : NULL;
    PyObject *devtype = devid ? PyLong_FromLong(2) : NULL; /* kDLCUDA */
    PyObject *view = devtype ? new_view(ptr, shape, strd, dtype, devid, Py_True, Py_False, t, Py_None, devtype) : NULL;
    Py_XDECREF(ptr);
    Py_XDECREF(shape);
    Py_XDECREF(strd);
    Py_XDECREF(devid);
    Py_XDECREF(devtype);
    return view;
}

/* set_view_type(StridedMemoryView, unset): the view class the compiled paths build (its slot
 * offsets) and the marker of a lazily computed slot. */
static PyObject *
set_view_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_view_type(StridedMemoryView, unset)");
        return NULL;
    }
    PyTypeObject *vt = (PyTypeObject *)args[0];
    if (slot_offset(vt, "_capsule", &off_v_capsule) || slot_offset(vt, "_dl_device_type", &off_v_devtype) ||
        slot_offset(vt, "_dtype", &off_v_dtype) || slot_offset(vt, "_raw_strides", &off_v_raw) ||
        slot_offset(vt, "_strides", &off_v_strides) || slot_offset(vt, "device_id", &off_v_device) ||
        slot_offset(vt, "exporting_obj", &off_v_exporting) || slot_offset(vt, "is_device_accessible", &off_v_accessible) ||
        slot_offset(vt, "ptr", &off_v_ptr) || slot_offset(vt, "readonly", &off_v_readonly) ||
        slot_offset(vt, "shape", &off_v_shape)) {
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(tv_type, vt);
    Py_XSETREF(tv_unset, args[1]);
    Py_RETURN_NONE;
}

/* set_torch_view(codes, complex_codes, streams_ok, events): codes maps shim dtype codes to
 * NumPy dtypes, complex_codes is a set, streams_ok maps device ordinals to whether the shim's
 * current stream was checked against PyTorch's, events maps ordinals to the cached
 * (CUevent, address) of the ordering. */
static PyObject *
set_torch_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyAnySet_Check(args[1]) || !PyDict_Check(args[2]) ||
        !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "set_torch_view(codes, complex_codes, streams_ok, events)");
        return NULL;
    }
    if (name_is_neg == NULL) {
        name_is_neg = PyUnicode_InternFromString("is_neg");
        name_is_conj = PyUnicode_InternFromString("is_conj");
        if (name_is_neg == NULL || name_is_conj == NULL) {
            return NULL;
        }
    }
    for (int i = 0; i < 4; i++) {
        Py_INCREF(args[i]);
    }
    Py_XSETREF(tv_codes, args[0]);
    Py_XSETREF(tv_complex, args[1]);
    Py_XSETREF(tv_streams_ok, args[2]);
    Py_XSETREF(tv_events, args[3]);
    tv_ready = 1;
    Py_RETURN_NONE;
}

/* A new view of tv_type with every slot set (references are taken, not stolen). */
static PyObject *
new_view(PyObject *ptr, PyObject *shape, PyObject *raw_strides, PyObject *dtype, PyObject *device_id,
         PyObject *accessible, PyObject *readonly, PyObject *exporting, PyObject *capsule, PyObject *devtype)
{
    PyObject *view = tv_type->tp_alloc(tv_type, 0);
    if (view != NULL) {
        set_slot(view, off_v_ptr, ptr);
        set_slot(view, off_v_shape, shape);
        set_slot(view, off_v_raw, raw_strides);
        set_slot(view, off_v_strides, tv_unset);
        set_slot(view, off_v_dtype, dtype);
        set_slot(view, off_v_device, device_id);
        set_slot(view, off_v_accessible, accessible);
        set_slot(view, off_v_readonly, readonly);
        set_slot(view, off_v_exporting, exporting);
        set_slot(view, off_v_capsule, capsule);
        set_slot(view, off_v_devtype, devtype);
    }
    return view;
}

/* ---------------------------------------------------------------------------------------------
 * DLPack capsules (https://dmlc.github.io/dlpack): the structures of the stable ABI. */
typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensorABI;

typedef struct {
    DLTensorABI dl_tensor;
    void *manager_ctx;
    void (*deleter)(void *);
} DLManagedTensorABI;

typedef struct {
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(void *);
    uint64_t flags;
    DLTensorABI dl_tensor;
} DLManagedTensorVersionedABI;

#define DLPACK_MAJOR 1
#define DLPACK_READ_ONLY 1ULL

/* The fields of an unconsumed capsule: 0, or -1 (not one, a consumed one, a newer major
 * version, more than 32 dimensions) with no exception set: the caller's Python path then says
 * what is wrong. */
static int
capsule_fields(PyObject *capsule, DLTensorABI **t, int *readonly)
{
    if (!PyCapsule_CheckExact(capsule)) {
        return -1;
    }
    const char *name = PyCapsule_GetName(capsule);
    if (name == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (strcmp(name, "dltensor_versioned") == 0) {
        DLManagedTensorVersionedABI *m = PyCapsule_GetPointer(capsule, name);
        if (m == NULL || m->major > DLPACK_MAJOR) {
            PyErr_Clear();
            return -1;
        }
        *t = &m->dl_tensor;
        *readonly = (m->flags & DLPACK_READ_ONLY) != 0;
    } else if (strcmp(name, "dltensor") == 0) {
        DLManagedTensorABI *m = PyCapsule_GetPointer(capsule, name);
        if (m == NULL) {
            PyErr_Clear();
            return -1;
        }
        *t = &m->dl_tensor;
        *readonly = 0;
    } else {
        return -1;
    }
    return (*t)->ndim < 0 || (*t)->ndim > 32 ? -1 : 0; /* the Python reader's limit too */
}

static uint32_t
dtype_word(const DLTensorABI *t)
{
    uint32_t word;
    memcpy(&word, &t->code, sizeof word); /* code, bits, lanes as one native uint32 */
    return word;
}

/* read_capsule(capsule) -> (ptr, shape, strides or None, dtype_word, readonly), or the Python
 * reader's answer (capsule_slow) for anything capsule_fields does not take. */
static PyObject *capsule_slow = NULL;

static PyObject *
read_capsule(PyObject *self, PyObject *capsule)
{
    DLTensorABI *t;
    int readonly;
    if (capsule_fields(capsule, &t, &readonly)) {
        if (capsule_slow == NULL) {
            PyErr_SetString(PyExc_BufferError, "not an unconsumed DLPack capsule");
            return NULL;
        }
        return PyObject_CallOneArg(capsule_slow, capsule);
    }
    PyObject *shape = int64_tuple(t->shape, t->ndim);
    PyObject *strides = shape == NULL ? NULL : (t->ndim && t->strides ? int64_tuple(t->strides, t->ndim) : Py_NewRef(Py_None));
    if (strides == NULL) {
        Py_XDECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(KNNkO)", (unsigned long long)((uintptr_t)t->data + t->byte_offset), shape, strides,
                         (unsigned long)dtype_word(t), readonly ? Py_True : Py_False);
}

/* set_capsule_reader(slow): the Python reader read_capsule hands unusual capsules to. */
static PyObject *
set_capsule_reader(PyObject *self, PyObject *slow)
{
    Py_INCREF(slow);
    Py_XSETREF(capsule_slow, slow);
    Py_RETURN_NONE;
}

/* dlpack_view(cls, obj, stream_ptr, rules, dtypes, max_version): StridedMemoryView.from_dlpack's
 * general path for a DLPack producer in one call: __dlpack_device__(), the stream rule of the
 * device type (rules: type -> (needs_stream, has_device, accessible)), __dlpack__(stream=...,
 * max_version=...), the capsule read and the view (dtype: dtypes.get(word, word)). None for
 * anything else (a subclass of the view, a device type without a rule, a missing stream, an
 * error from the producer, an unusual capsule): the Python path redoes it and raises. */
static PyObject *name_dlpack = NULL, *name_dlpack_device = NULL, *kw_stream_max = NULL;

static PyObject *
dlpack_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || tv_type == NULL || args[0] != (PyObject *)tv_type || !PyDict_Check(args[3]) ||
        !PyDict_Check(args[4])) {
        Py_RETURN_NONE;
    }
    PyObject *obj = args[1], *sp = args[2];
    PyObject *dev = PyObject_CallMethodNoArgs(obj, name_dlpack_device);
    if (dev == NULL || !PyTuple_Check(dev) || PyTuple_GET_SIZE(dev) != 2) {
        PyErr_Clear();
        Py_XDECREF(dev);
        Py_RETURN_NONE;
    }
    PyObject *devtype = PyTuple_GET_ITEM(dev, 0), *devid = PyTuple_GET_ITEM(dev, 1);
    PyObject *rule = PyDict_GetItemWithError(args[3], devtype); /* borrowed */
    if (rule == NULL || !PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 3 || !PyLong_CheckExact(devtype)) {
        PyErr_Clear();
        Py_DECREF(dev);
        Py_RETURN_NONE;
    }
    int needs_stream = PyTuple_GET_ITEM(rule, 0) == Py_True;
    int has_device = PyTuple_GET_ITEM(rule, 1) == Py_True;
    PyObject *accessible = PyTuple_GET_ITEM(rule, 2) == Py_True ? Py_True : Py_False;
    PyObject *stream;
    if (needs_stream) {
        if (sp == Py_None) { /* ambiguous: the Python path raises */
            Py_DECREF(dev);
            Py_RETURN_NONE;
        }
        stream = sp;
    } else {
        stream = accessible == Py_True ? sp : Py_None;
    }
    PyObject *one = NULL;
    if (PyLong_CheckExact(stream) && PyLong_AsLongLong(stream) == 0) { /* 0 is the legacy stream: 1 */
        one = PyLong_FromLong(1);
        stream = one;
    }
    PyErr_Clear();
    PyObject *call[3] = {obj, stream, args[5]};
    PyObject *capsule = stream == NULL ? NULL : PyObject_VectorcallMethod(name_dlpack, call, 1, kw_stream_max);
    Py_XDECREF(one);
    DLTensorABI *t;
    int readonly;
    if (capsule == NULL || capsule_fields(capsule, &t, &readonly)) {
        PyErr_Clear();
        Py_XDECREF(capsule);
        Py_DECREF(dev);
        Py_RETURN_NONE;
    }
    PyObject *ptr = PyLong_FromUnsignedLongLong((unsigned long long)((uintptr_t)t->data + t->byte_offset));
    PyObject *shape = ptr ? int64_tuple(t->shape, t->ndim) : NULL;
    PyObject *strides = shape ? (t->ndim && t->strides ? int64_tuple(t->strides, t->ndim) : Py_NewRef(Py_None)) : NULL;
    PyObject *word = strides ? PyLong_FromUnsignedLong(dtype_word(t)) : NULL;
    PyObject *dtype = word ? PyDict_GetItemWithError(args[4], word) : NULL; /* borrowed */
    if (dtype == NULL && word != NULL && !PyErr_Occurred()) {
        dtype = word;
    }
    PyObject *device_id = dtype ? (has_device ? Py_NewRef(devid) : PyLong_FromLong(-1)) : NULL;
    PyObject *view = device_id ? new_view(ptr, shape, strides, dtype, device_id, accessible, readonly ? Py_True : Py_False,
                                          obj, capsule, devtype)
                               : NULL;
    Py_XDECREF(ptr);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(word);
    Py_XDECREF(device_id);
    Py_DECREF(capsule);
    Py_DECREF(dev);
    return view;
}

/* set_dlpack_names(): the interned names dlpack_view calls. */
static int
set_dlpack_names(void)
{
    name_dlpack = PyUnicode_InternFromString("__dlpack__");
    name_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    kw_stream_max = Py_BuildValue("(ss)", "stream", "max_version");
    return name_dlpack && name_dlpack_device && kw_stream_max ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * A pool resource's allocate(size, stream=s) and Buffer.close() in one compiled call each.
 *
 * make_buffer_methods(PoolResource, Buffer, Stream, PoolFree, gc_free, slow_allocate,
 * slow_close, allocate_doc, close_doc) returns (allocate, close) method descriptors that
 * cuda_core installs on its pool resource base class and on Buffer. The fast paths are the
 * Python methods' own hot paths: an int size > 0 on an open, real Stream (one whose context is
 * known) from a resource that can allocate, and the close of such a buffer with no stream given.
 * The buffer's pending free is a Deferred holding (gc_free, free, ptr, size, stream, ctx), what
 * _fast.defer builds. Every other call, and a failed driver call, goes to the Python method
 * (which retries where it should and raises the errors). */
static PyTypeObject *buf_type = NULL, *pool_free_type = NULL, *buf_stream_type = NULL;
static PyObject *gc_free_fn = NULL, *alloc_slow = NULL, *close_slow = NULL;
static PyObject *name_alloc_pool = NULL, *name_free_fn = NULL, *name_allocate_slow = NULL;
static Py_ssize_t off_b_ptr, off_b_size, off_b_mr, off_b_fin, off_bs_int, off_bs_handle, off_bs_ctx;

static PyObject *
pool_allocate(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *size, *s;
    if (nargs != 1 || kwnames == NULL || PyTuple_GET_SIZE(kwnames) != 1 || p_alloc_pool == NULL) {
        return call_slow(alloc_slow, self, args, nargs, kwnames);
    }
    size = args[0];
    s = args[1];
    if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "stream") != 0 || Py_TYPE(s) != buf_stream_type ||
        !PyLong_CheckExact(size)) {
        return call_slow(alloc_slow, self, args, nargs, kwnames);
    }
    PyObject *si = SLOT(s, off_bs_int), *sh = SLOT(s, off_bs_handle), *ctx = SLOT(s, off_bs_ctx);
    long long nbytes = PyLong_AsLongLong(size);
    if (nbytes <= 0 || si == NULL || !PyLong_CheckExact(si) || sh == NULL || sh == Py_None || ctx == NULL ||
        ctx == Py_None) {
        PyErr_Clear(); /* an overflowing size: the Python method says so */
        return call_slow(alloc_slow, self, args, nargs, kwnames);
    }
    unsigned long long st = PyLong_AsUnsignedLongLong(si);
    if (st <= 2) { /* the default-stream tokens */
        return call_slow(alloc_slow, self, args, nargs, kwnames);
    }
    PyObject *pool_obj = PyObject_GetAttr(self, name_alloc_pool);
    if (pool_obj == NULL) {
        return NULL;
    }
    void *pool;
    int bad = !PyLong_CheckExact(pool_obj) || as_address(pool_obj, &pool) || pool == NULL;
    Py_DECREF(pool_obj);
    if (bad) { /* closed or mapped: the Python method raises */
        PyErr_Clear();
        return call_slow(alloc_slow, self, args, nargs, kwnames);
    }
    unsigned long long ptr = 0;
    int status;
    CALL(p_alloc_pool(&ptr, (size_t)nbytes, pool, (void *)(uintptr_t)st));
    if (status != 0 || ptr == 0) {
        /* self._allocate_slow(size, s, -status): retries in the stream's context, or raises */
        PyObject *neg = PyLong_FromLong(status ? -status : 0);
        if (neg == NULL) {
            return NULL;
        }
        PyObject *r = PyObject_CallMethodObjArgs(self, name_allocate_slow, size, s, neg, NULL);
        Py_DECREF(neg);
        return r;
    }
    PyObject *free_fn = NULL, *p = NULL, *item = NULL, *buf = NULL;
    Deferred *fin = NULL;
    free_fn = PyObject_GetAttr(self, name_free_fn);
    p = PyLong_FromUnsignedLongLong(ptr);
    buf = free_fn && p ? buf_type->tp_alloc(buf_type, 0) : NULL;
    item = buf ? PyTuple_Pack(6, gc_free_fn, free_fn, p, size, s, ctx) : NULL;
    fin = item ? (Deferred *)DeferredType.tp_alloc(&DeferredType, 0) : NULL;
    if (fin == NULL) {
        /* give the memory back; the error (no memory) is raised */
        CALL(p_free_async(ptr, (void *)(uintptr_t)st));
        Py_XDECREF(free_fn);
        Py_XDECREF(p);
        Py_XDECREF(item);
        Py_XDECREF(buf);
        return NULL;
    }
    fin->item = item;
    set_slot(buf, off_b_ptr, p);
    set_slot(buf, off_b_size, size);
    set_slot(buf, off_b_mr, self);
    set_slot(buf, off_b_fin, (PyObject *)fin);
    Py_DECREF(fin);
    Py_DECREF(p);
    Py_DECREF(free_fn);
    return buf;
}

static PyObject *
buffer_close(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs != 0 || kwnames != NULL || Py_TYPE(self) != buf_type || p_free_async == NULL) {
        return call_slow(close_slow, self, args, nargs, kwnames);
    }
    PyObject *ptr = SLOT(self, off_b_ptr), *fin = SLOT(self, off_b_fin);
    if (ptr == NULL || ptr == Py_None) {
        Py_RETURN_NONE; /* closed already */
    }
    if (fin == NULL || Py_TYPE(fin) != &DeferredType || ((Deferred *)fin)->item == NULL || !PyLong_CheckExact(ptr)) {
        return call_slow(close_slow, self, args, nargs, kwnames);
    }
    PyObject *item = ((Deferred *)fin)->item;
    if (PyTuple_GET_SIZE(item) != 6 || Py_TYPE(PyTuple_GET_ITEM(item, 1)) != pool_free_type ||
        Py_TYPE(PyTuple_GET_ITEM(item, 4)) != buf_stream_type) {
        return call_slow(close_slow, self, args, nargs, kwnames);
    }
    PyObject *s = PyTuple_GET_ITEM(item, 4);
    PyObject *si = SLOT(s, off_bs_int), *sh = SLOT(s, off_bs_handle);
    if (si == NULL || !PyLong_CheckExact(si) || sh == NULL || sh == Py_None) {
        return call_slow(close_slow, self, args, nargs, kwnames);
    }
    unsigned long long st = PyLong_AsUnsignedLongLong(si), addr = PyLong_AsUnsignedLongLong(ptr);
    if (PyErr_Occurred() || st <= 2) {
        PyErr_Clear();
        return call_slow(close_slow, self, args, nargs, kwnames);
    }
    /* The claim: the entry leaves the holder, the buffer reads as closed. */
    ((Deferred *)fin)->item = NULL;
    set_slot(self, off_b_ptr, Py_None);
    set_slot(self, off_b_fin, Py_None);
    int status;
    CALL(p_free_async(addr, (void *)(uintptr_t)st));
    PyObject *r = Py_None;
    Py_INCREF(r);
    if (status != 0) { /* free(ptr, size, stream, ctx): retries in the context, or raises */
        Py_DECREF(r);
        r = PyObject_Vectorcall(PyTuple_GET_ITEM(item, 1), &PyTuple_GET_ITEM(item, 2), 4, NULL);
        if (r != NULL) {
            Py_DECREF(r);
            r = Py_None;
            Py_INCREF(r);
        }
    }
    Py_DECREF(item);
    return r;
}

/* copy_buffers(dst, src, stream) -> 0 when the copy of src's bytes into dst was queued on
 * stream; non-zero (nothing queued) unless both are open exact Buffers of one size > 0 and
 * stream an open real exact Stream and cuMemcpyAsync succeeded: the caller then takes its
 * general path, which says what is wrong. Needs make_buffer_methods first. */
static PyObject *
copy_buffers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || buf_type == NULL || p_memcpy_async == NULL || Py_TYPE(args[0]) != buf_type ||
        Py_TYPE(args[1]) != buf_type || Py_TYPE(args[2]) != buf_stream_type) {
        return PyLong_FromLong(1);
    }
    PyObject *dp = SLOT(args[0], off_b_ptr), *sp = SLOT(args[1], off_b_ptr);
    PyObject *dn = SLOT(args[0], off_b_size), *sn = SLOT(args[1], off_b_size);
    PyObject *si = SLOT(args[2], off_bs_int), *sh = SLOT(args[2], off_bs_handle);
    if (dp == NULL || sp == NULL || dn == NULL || sn == NULL || si == NULL || sh == NULL || sh == Py_None ||
        !PyLong_CheckExact(dp) || !PyLong_CheckExact(sp) || !PyLong_CheckExact(dn) || !PyLong_CheckExact(sn) ||
        !PyLong_CheckExact(si)) {
        return PyLong_FromLong(1);
    }
    unsigned long long d = PyLong_AsUnsignedLongLong(dp), src = PyLong_AsUnsignedLongLong(sp);
    unsigned long long st = PyLong_AsUnsignedLongLong(si);
    long long n = PyLong_AsLongLong(dn), m = PyLong_AsLongLong(sn);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return PyLong_FromLong(1);
    }
    if (n != m || n <= 0 || st <= 2) {
        return PyLong_FromLong(1);
    }
    int status;
    CALL(p_memcpy_async(d, src, (size_t)n, (void *)(uintptr_t)st));
    return PyLong_FromLong(status);
}

static PyMethodDef allocate_def = {"allocate", (PyCFunction)(void (*)(void))pool_allocate, METH_FASTCALL | METH_KEYWORDS, NULL};
static PyMethodDef close_def = {"close", (PyCFunction)(void (*)(void))buffer_close, METH_FASTCALL | METH_KEYWORDS, NULL};

static PyObject *
make_buffer_methods(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyType_Check(args[2]) ||
        !PyType_Check(args[3]) || !PyCallable_Check(args[4]) || !PyCallable_Check(args[5]) ||
        !PyCallable_Check(args[6]) || !PyUnicode_Check(args[7]) || !PyUnicode_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "make_buffer_methods(PoolResource, Buffer, Stream, PoolFree, gc_free, "
                                         "slow_allocate, slow_close, allocate_doc, close_doc)");
        return NULL;
    }
    PyTypeObject *rt = (PyTypeObject *)args[0], *bt = (PyTypeObject *)args[1], *st = (PyTypeObject *)args[2];
    if (slot_offset(bt, "_ptr", &off_b_ptr) || slot_offset(bt, "_size", &off_b_size) ||
        slot_offset(bt, "_mr", &off_b_mr) || slot_offset(bt, "_fin", &off_b_fin) ||
        slot_offset(st, "_int", &off_bs_int) || slot_offset(st, "_handle", &off_bs_handle) ||
        slot_offset(st, "_ctx", &off_bs_ctx)) {
        return NULL;
    }
    if (name_alloc_pool == NULL) {
        name_alloc_pool = PyUnicode_InternFromString("_alloc_pool");
        name_free_fn = PyUnicode_InternFromString("_free_fn");
        name_allocate_slow = PyUnicode_InternFromString("_allocate_slow");
        if (name_alloc_pool == NULL || name_free_fn == NULL || name_allocate_slow == NULL) {
            return NULL;
        }
    }
    for (int i = 1; i < 7; i++) {
        Py_INCREF(args[i]);
    }
    Py_XSETREF(buf_type, bt);
    Py_XSETREF(buf_stream_type, st);
    Py_XSETREF(pool_free_type, (PyTypeObject *)args[3]);
    Py_XSETREF(gc_free_fn, args[4]);
    Py_XSETREF(alloc_slow, args[5]);
    Py_XSETREF(close_slow, args[6]);
    PyObject *a = make_method(rt, &allocate_def, args[7]);
    PyObject *c = a ? make_method(bt, &close_def, args[8]) : NULL;
    if (c == NULL) {
        Py_XDECREF(a);
        return NULL;
    }
    return Py_BuildValue("(NN)", a, c);
}

static PyMethodDef methods[] = {
    {"set_entry_points", set_entry_points, METH_O, "set_entry_points({name: address, ...})"},
    {"ctx_get_device", ctx_get_device, METH_NOARGS, "ctx_get_device() -> ordinal, or -status"},
    {"current_device", current_device, METH_O, "current_device(tls) -> tls.devices[current ordinal], or None"},
    {"event_record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL, "event_record(event, stream) -> status"},
    {"event_query", event_query, METH_O, "event_query(event) -> status"},
    {"record_wait", (PyCFunction)(void (*)(void))record_wait, METH_FASTCALL,
     "record_wait(event, producer, consumer) -> 0, -record status or +wait status"},
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
    {"make_stream_methods", (PyCFunction)(void (*)(void))make_stream_methods, METH_FASTCALL,
     "make_stream_methods(Stream, Event, slow_record, slow_sync, record_doc, sync_doc) -> (record, sync)"},
    {"set_torch_entry_points", (PyCFunction)(void (*)(void))set_torch_entry_points, METH_FASTCALL,
     "set_torch_entry_points({name: address}, offset, strided_code, cuda_code)"},
    {"torch_view", (PyCFunction)(void (*)(void))torch_view, METH_FASTCALL,
     "torch_view(cls, tensor, stream_ptr) -> a StridedMemoryView of a CUDA tensor, or None"},
    {"set_torch_view", (PyCFunction)(void (*)(void))set_torch_view, METH_FASTCALL,
     "set_torch_view(codes, complex_codes, streams_ok, events)"},
    {"set_view_type", (PyCFunction)(void (*)(void))set_view_type, METH_FASTCALL, "set_view_type(StridedMemoryView, unset)"},
    {"read_capsule", read_capsule, METH_O, "read_capsule(capsule) -> (ptr, shape, strides, dtype_word, readonly)"},
    {"set_capsule_reader", set_capsule_reader, METH_O, "set_capsule_reader(python_reader)"},
    {"dlpack_view", (PyCFunction)(void (*)(void))dlpack_view, METH_FASTCALL,
     "dlpack_view(cls, obj, stream_ptr, rules, dtypes, max_version) -> a StridedMemoryView, or None"},
    {"torch_meta", torch_meta, METH_O,
     "torch_meta(tensor) -> (ptr, shape, strides, dtype, device_type, device_index, stream) or None"},
    {"make_buffer_methods", (PyCFunction)(void (*)(void))make_buffer_methods, METH_FASTCALL,
     "make_buffer_methods(PoolResource, Buffer, Stream, PoolFree, gc_free, slow_allocate, slow_close, "
     "allocate_doc, close_doc) -> (allocate, close)"},
    {"copy_buffers", (PyCFunction)(void (*)(void))copy_buffers, METH_FASTCALL,
     "copy_buffers(dst, src, stream) -> 0 when queued, else non-zero (take the general path)"},
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
    order_lock = PyThread_allocate_lock();
    if (order_lock == NULL) {
        return PyErr_NoMemory();
    }
    if (set_dlpack_names()) {
        return NULL;
    }
    devices_name = PyUnicode_InternFromString("devices");
    if (devices_name == NULL || PyType_Ready(&OwnedType) < 0 || PyType_Ready(&DeferredType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&OwnedType);
    if (PyModule_AddObject(m, "Owned", (PyObject *)&OwnedType) < 0) {
        Py_DECREF(&OwnedType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&DeferredType);
    if (PyModule_AddObject(m, "Deferred", (PyObject *)&DeferredType) < 0) {
        Py_DECREF(&DeferredType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
