/* cuda_core._handles._native: ContextHandle and its idle pools, the module functions of the handle layer
 * (see cuda_core/_handles/_protocol.py for the protocol, handles.h for the layout). */
#include "handles.h"

/* ------------------------------------------------------------------------------------------
 * ContextHandle. */

static void
ctx_drop_pools(cc_ctx *self)
{
    PyMem_Free(self->streams);
    PyMem_Free(self->events);
    self->streams = NULL;
    self->events = NULL;
    self->n_streams = 0;
    self->n_events = 0;
}

static cc_stream_pool *
find_stream_pool(cc_ctx *ctx, unsigned int flags, int has_priority, int priority, int create)
{
    for (Py_ssize_t i = 0; i < ctx->n_streams; i++) {
        cc_stream_pool *p = &ctx->streams[i];
        if (p->flags == flags && p->has_priority == has_priority && (!has_priority || p->priority == priority)) {
            return p;
        }
    }
    if (!create) {
        return NULL;
    }
    cc_stream_pool *grown = PyMem_Realloc(ctx->streams, (size_t)(ctx->n_streams + 1) * sizeof(cc_stream_pool));
    if (grown == NULL) {
        return NULL;
    }
    ctx->streams = grown;
    cc_stream_pool *p = &grown[ctx->n_streams++];
    p->flags = flags;
    p->has_priority = has_priority;
    p->priority = has_priority ? priority : 0;
    p->n = 0;
    return p;
}

static cc_event_pool *
find_event_pool(cc_ctx *ctx, unsigned int flags, int create)
{
    for (Py_ssize_t i = 0; i < ctx->n_events; i++) {
        if (ctx->events[i].flags == flags) {
            return &ctx->events[i];
        }
    }
    if (!create) {
        return NULL;
    }
    cc_event_pool *grown = PyMem_Realloc(ctx->events, (size_t)(ctx->n_events + 1) * sizeof(cc_event_pool));
    if (grown == NULL) {
        return NULL;
    }
    ctx->events = grown;
    cc_event_pool *p = &grown[ctx->n_events++];
    p->flags = flags;
    p->n_clean = 0;
    p->n_recorded = 0;
    return p;
}

int
cc_ctx_pool_stream(cc_ctx *ctx, unsigned int flags, int has_priority, int priority, void *address)
{
    cc_stream_pool *p = find_stream_pool(ctx, flags, has_priority, priority, 1);
    if (p == NULL || p->n >= CC_STREAM_POOL_CAP) {
        return 0;
    }
    p->items[p->n++] = address;
    return 1;
}

int
cc_ctx_pool_event(cc_ctx *ctx, unsigned int flags, int recorded, void *address)
{
    cc_event_pool *p = find_event_pool(ctx, flags, 1);
    if (p == NULL) {
        return 0;
    }
    if (recorded) {
        if (p->n_recorded >= CC_EVENT_POOL_CAP) {
            return 0;
        }
        p->recorded[p->n_recorded++] = address;
    } else {
        if (p->n_clean >= CC_EVENT_POOL_CAP) {
            return 0;
        }
        p->clean[p->n_clean++] = address;
    }
    return 1;
}

/* Without the GIL: retain a reset primary context again (our earlier retain still counts, so
 * the release keeps the count as it was); its address and id through the out parameters. */
static int
reinit_primary_nogil(int device, void **address, unsigned long long *ident)
{
    void *ctx = NULL;
    int st = cc_driver.primary_ctx_retain(&ctx, device);
    if (st != CC_SUCCESS) {
        return st;
    }
    (void)cc_driver.primary_ctx_release(device);
    *address = ctx;
    *ident = cc_ctx_id_nogil(ctx);
    return CC_SUCCESS;
}

/* ContextHandle.check(): 1 alive and unchanged (or re-initialised), 0 gone, -1 error set. */
static int
ctx_check(cc_ctx *self)
{
    if (cc_require_bound()) {
        return -1;
    }
    void *address = self->address;
    unsigned long long ident;
    Py_BEGIN_ALLOW_THREADS
    ident = cc_ctx_id_nogil(address);
    Py_END_ALLOW_THREADS
    if (ident != 0 && ident == self->id) {
        return 1;
    }
    ctx_drop_pools(self);
    if (ident == 0 && self->device >= 0) {
        int st, device = self->device;
        CC_CALL(st, reinit_primary_nogil(device, &address, &ident));
        if (st != CC_SUCCESS) {
            cc_raise(st, "cuDevicePrimaryCtxRetain");
            return -1;
        }
        self->address = address;
    }
    self->id = ident;
    return ident != 0;
}

int
cc_ctx_ensure(cc_ctx *self)
{
    int ok = ctx_check(self);
    if (ok == 0) {
        cc_raise(CC_ERROR_CONTEXT_IS_DESTROYED, "cuCtxGetId");
        return -1;
    }
    return ok < 0 ? -1 : 0;
}

static PyObject *
ctx_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"address", "device", NULL};
    PyObject *address_obj, *device_obj = NULL;
    unsigned long long address;
    int device = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:ContextHandle", kwlist, &address_obj, &device_obj)) {
        return NULL;
    }
    if (cc_int_address(address_obj, &address) || (device_obj != NULL && cc_int_int(device_obj, &device, "device"))) {
        return NULL;
    }
    if (cc_require_bound()) {
        return NULL;
    }
    cc_ctx *self = (cc_ctx *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->address = (void *)(uintptr_t)address;
    self->device = device;
    void *a = self->address;
    unsigned long long ident;
    Py_BEGIN_ALLOW_THREADS
    ident = cc_ctx_id_nogil(a);
    Py_END_ALLOW_THREADS
    self->id = ident;
    return (PyObject *)self;
}

static void
ctx_dealloc(PyObject *op)
{
    cc_ctx *self = (cc_ctx *)op;
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs(op);
    }
    ctx_drop_pools(self); /* idle handles are forgotten with their context handle, as in Python */
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
ctx_repr(PyObject *op)
{
    cc_ctx *self = (cc_ctx *)op;
    char buf[128];
    snprintf(buf, sizeof(buf), "<ContextHandle 0x%llx device=%d>", (unsigned long long)(uintptr_t)self->address,
             self->device);
    return PyUnicode_FromString(buf);
}

static PyObject *
ctx_py_check(PyObject *op, PyObject *unused)
{
    int ok = ctx_check((cc_ctx *)op);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

static PyObject *
ctx_py_drop_pools(PyObject *op, PyObject *unused)
{
    ctx_drop_pools((cc_ctx *)op);
    Py_RETURN_NONE;
}

static PyObject *
ctx_pooled(PyObject *op, PyObject *unused)
{
    cc_ctx *self = (cc_ctx *)op;
    long streams = 0, clean = 0, recorded = 0;
    for (Py_ssize_t i = 0; i < self->n_streams; i++) {
        streams += self->streams[i].n;
    }
    for (Py_ssize_t i = 0; i < self->n_events; i++) {
        clean += self->events[i].n_clean;
        recorded += self->events[i].n_recorded;
    }
    return Py_BuildValue("(lll)", streams, clean, recorded);
}

/* Without the GIL: a new stream with ctx current. */
static int
create_stream_nogil(void *ctx, unsigned int flags, int has_priority, int priority, void **out, const char **api)
{
    int pushed;
    int st = cc_push_nogil(ctx, &pushed, api);
    if (st != CC_SUCCESS) {
        return st;
    }
    if (has_priority) {
        st = cc_driver.stream_create_with_priority(out, flags, priority);
        *api = "cuStreamCreateWithPriority";
    } else {
        st = cc_driver.stream_create(out, flags);
        *api = "cuStreamCreate";
    }
    int pst = cc_pop_nogil(pushed, api);
    return pst != CC_SUCCESS ? pst : st;
}

/* create_stream(flags, priority) */
static PyObject *
ctx_create_stream(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    cc_ctx *self = (cc_ctx *)op;
    unsigned int flags;
    int priority = 0, has_priority = 0;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "create_stream(flags, priority) takes 2 arguments");
        return NULL;
    }
    if (cc_int_uint(args[0], &flags, "flags")) {
        return NULL;
    }
    if (args[1] != Py_None) {
        if (cc_int_int(args[1], &priority, "priority")) {
            return NULL;
        }
        has_priority = 1;
    }
    if (cc_ctx_ensure(self)) {
        return NULL;
    }
    /* The handle first (its allocation may run the GC, hence any finalizer, which may touch the
     * pools): then the pool is looked up and popped with no Python code in between, and a
     * created stream always has an owner. */
    cc_stream *s = cc_stream_new_owned(NULL, self, flags, has_priority, priority);
    if (s == NULL) {
        return NULL;
    }
    cc_stream_pool *pool = find_stream_pool(self, flags, has_priority, priority, 0);
    if (pool != NULL && pool->n > 0) {
        s->address = pool->items[--pool->n];
        return (PyObject *)s;
    }
    void *ctx = self->address, *h = NULL;
    const char *api = "cuStreamCreate";
    int st;
    CC_CALL(st, create_stream_nogil(ctx, flags, has_priority, priority, &h, &api));
    if (st != CC_SUCCESS || h == NULL) {
        s->released = 1; /* nothing to release (a created stream with a failed pop leaks, as in Python) */
        Py_DECREF(s);
        return cc_raise(st != CC_SUCCESS ? st : CC_ERROR_NOT_INITIALIZED, api);
    }
    s->address = h;
    return (PyObject *)s;
}

static int
new_event_nogil(void *ctx, unsigned int flags, void **out, const char **api)
{
    int pushed;
    int st = cc_push_nogil(ctx, &pushed, api);
    if (st != CC_SUCCESS) {
        return st;
    }
    st = cc_driver.event_create(out, flags);
    *api = "cuEventCreate";
    int pst = cc_pop_nogil(pushed, api);
    return pst != CC_SUCCESS ? pst : st;
}

/* An owned event handle: from the recorded pool (when take_recorded), the clean pool, or new. */
static cc_event *
ctx_take_event(cc_ctx *self, unsigned int flags, int take_recorded)
{
    cc_event *ev = cc_event_new_owned(NULL, self, flags); /* first: see ctx_create_stream */
    if (ev == NULL) {
        return NULL;
    }
    cc_event_pool *pool = find_event_pool(self, flags, 0);
    if (pool != NULL && take_recorded && pool->n_recorded > 0) {
        ev->address = pool->recorded[--pool->n_recorded];
        ev->recorded = 1; /* it was recorded before: never back to the clean pool */
        return ev;
    }
    if (pool != NULL && pool->n_clean > 0) {
        ev->address = pool->clean[--pool->n_clean];
        return ev;
    }
    void *ctx = self->address, *h = NULL;
    const char *api = "cuEventCreate";
    int st;
    CC_CALL(st, new_event_nogil(ctx, flags, &h, &api));
    if (st != CC_SUCCESS || h == NULL) {
        ev->released = 1;
        Py_DECREF(ev);
        cc_raise(st != CC_SUCCESS ? st : CC_ERROR_NOT_INITIALIZED, api);
        return NULL;
    }
    ev->address = h;
    return ev;
}

/* create_event(flags) */
static PyObject *
ctx_create_event(PyObject *op, PyObject *flags_obj)
{
    cc_ctx *self = (cc_ctx *)op;
    unsigned int flags;
    if (cc_int_uint(flags_obj, &flags, "flags") || cc_ctx_ensure(self)) {
        return NULL;
    }
    return (PyObject *)ctx_take_event(self, flags, 0);
}

/* record_event(flags, stream) */
static PyObject *
ctx_record_event(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    cc_ctx *self = (cc_ctx *)op;
    unsigned int flags;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "record_event(flags, stream) takes 2 arguments");
        return NULL;
    }
    if (!CC_IS_STREAM(args[1])) {
        PyErr_SetString(PyExc_TypeError, "record_event: stream must be a StreamHandle");
        return NULL;
    }
    if (cc_int_uint(args[0], &flags, "flags") || cc_ctx_ensure(self)) {
        return NULL;
    }
    cc_event *ev = ctx_take_event(self, flags, 1);
    if (ev == NULL) {
        return NULL;
    }
    if (cc_event_record(ev, (cc_stream *)args[1])) {
        Py_DECREF(ev); /* released by its finalizer (pooled as it stands) */
        return NULL;
    }
    return (PyObject *)ev;
}

static PyObject *
ctx_get_address(PyObject *op, void *closure)
{
    return PyLong_FromVoidPtr(((cc_ctx *)op)->address);
}

static PyObject *
ctx_get_device_attr(PyObject *op, void *closure)
{
    return PyLong_FromLong(((cc_ctx *)op)->device);
}

static PyObject *
ctx_get_generation(PyObject *op, void *closure)
{
    return PyLong_FromUnsignedLongLong(((cc_ctx *)op)->id);
}

static PyMethodDef ctx_methods[] = {
    {"check", ctx_py_check, METH_NOARGS,
     "check() -> whether the context is alive and unchanged (drops the pools otherwise; re-initialises a reset "
     "primary context)"},
    {"drop_pools", ctx_py_drop_pools, METH_NOARGS, "drop_pools(): forget every idle handle"},
    {"pooled", ctx_pooled, METH_NOARGS, "pooled() -> (idle streams, clean idle events, recorded idle events)"},
    {"create_stream", (PyCFunction)(void (*)(void))ctx_create_stream, METH_FASTCALL,
     "create_stream(flags, priority) -> an owned StreamHandle (a pooled idle one first)"},
    {"create_event", ctx_create_event, METH_O, "create_event(flags) -> an owned, never-recorded EventHandle"},
    {"record_event", (PyCFunction)(void (*)(void))ctx_record_event, METH_FASTCALL,
     "record_event(flags, stream) -> an owned EventHandle recorded on stream now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ctx_getset[] = {
    {"address", ctx_get_address, NULL, "the context's address", NULL},
    {"device", ctx_get_device_attr, NULL, "the device of a primary context, else -1", NULL},
    {"generation", ctx_get_generation, NULL, "the driver's id of the context as last checked (cuCtxGetId)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cc_ContextHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.ContextHandle",
    .tp_basicsize = sizeof(cc_ctx),
    .tp_dealloc = ctx_dealloc,
    .tp_repr = ctx_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ContextHandle(address, device=-1): a context (never destroyed here) and its idle streams and events",
    .tp_weaklistoffset = offsetof(cc_ctx, weakreflist),
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
    .tp_new = ctx_new,
};

/* ------------------------------------------------------------------------------------------
 * Module functions. */

static PyObject *
ctx_get_device(PyObject *module, PyObject *unused)
{
    if (!cc_bound) {
        return PyLong_FromLong(-CC_ERROR_NOT_INITIALIZED);
    }
    /* cuCtxGetDevice only reads the calling thread's current context and never blocks: it runs
     * with the GIL held (Device()'s lookup is a hot path). */
    int dev = -1;
    int st = cc_driver.ctx_get_device(&dev);
    return PyLong_FromLong(st != CC_SUCCESS ? -(long)st : (long)dev);
}

static PyObject *
types_match(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "types_match(args, types) takes 2 arguments");
        return NULL;
    }
    PyObject *a = PySequence_Fast(args[0], "types_match: args must be a sequence");
    if (a == NULL) {
        return NULL;
    }
    PyObject *t = PySequence_Fast(args[1], "types_match: types must be a sequence");
    if (t == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    /* Pointer comparisons only: no Python code runs while the items are borrowed. */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    int match = n == PySequence_Fast_GET_SIZE(t);
    PyObject **ai = PySequence_Fast_ITEMS(a), **ti = PySequence_Fast_ITEMS(t);
    for (Py_ssize_t i = 0; match && i < n; i++) {
        match = (PyObject *)Py_TYPE(ai[i]) == ti[i];
    }
    Py_DECREF(a);
    Py_DECREF(t);
    return PyBool_FromLong(match);
}

PyMethodDef cc_handles_functions[] = {
    {"ctx_get_device", ctx_get_device, METH_NOARGS,
     "ctx_get_device() -> the current context's device ordinal, or -status"},
    {"types_match", (PyCFunction)(void (*)(void))types_match, METH_FASTCALL,
     "types_match(args, types) -> whether type(args[i]) is types[i] for each i (and the lengths match)"},
    {"pool_allocate", (PyCFunction)(void (*)(void))cc_pool_allocate, METH_FASTCALL | METH_KEYWORDS,
     "pool_allocate(pool, size, stream, ctx) -> an Allocation from cuMemAllocFromPoolAsync"},
    {NULL, NULL, 0, NULL},
};

int
cc_handles_init(PyObject *module)
{
    static PyTypeObject *types[] = {
        &cc_ContextHandle_Type, &cc_StreamHandle_Type, &cc_EventHandle_Type,
        &cc_Allocation_Type,    &cc_LaunchConfigHandle_Type,
    };
    static const char *names[] = {"ContextHandle", "StreamHandle", "EventHandle", "Allocation", "LaunchConfigHandle"};
    return cc_add_types(module, types, names, sizeof(types) / sizeof(types[0]));
}
