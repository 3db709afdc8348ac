/* cuda_core._handles._native: Allocation and pool_allocate (see cuda_core/_handles/_protocol.py, handles.h). */
#include "handles.h"

static cc_alloc *
alloc_new(void)
{
    cc_alloc *a = PyObject_GC_New(cc_alloc, &cc_Allocation_Type);
    if (a == NULL) {
        return NULL;
    }
    a->ptr = 0;
    a->size = 0;
    a->free = NULL;
    a->stream = NULL;
    a->ctx = NULL;
    a->weakreflist = NULL;
    a->gen = 0;
    a->open = 0; /* opened by the caller once filled */
    PyObject_GC_Track(a);
    return a;
}

/* Allocation.adopt(ptr, size, free, stream, ctx) */
static PyObject *
alloc_adopt(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"ptr", "size", "free", "stream", "ctx"};
    PyObject *a[5];
    unsigned long long ptr;
    size_t size;
    if (cc_parse("adopt", names, 5, 5, args, nargs, kwnames, a) || cc_int_address(a[0], &ptr) ||
        cc_int_size(a[1], &size, "size")) {
        return NULL;
    }
    PyObject *free = a[2] == Py_None ? NULL : a[2];
    PyObject *stream = a[3] == Py_None ? NULL : a[3];
    PyObject *ctx = a[4] == Py_None ? NULL : a[4];
    if (ctx != NULL && !CC_IS_CTX(ctx)) {
        PyErr_SetString(PyExc_TypeError, "Allocation.adopt: ctx must be a ContextHandle or None");
        return NULL;
    }
    if (free == NULL && stream != NULL && !CC_IS_STREAM(stream)) {
        PyErr_SetString(PyExc_TypeError, "a pool allocation's deallocation stream must be a StreamHandle");
        return NULL;
    }
    cc_alloc *self = alloc_new();
    if (self == NULL) {
        return NULL;
    }
    self->ptr = ptr;
    self->size = size;
    self->free = Py_XNewRef(free);
    self->stream = Py_XNewRef(stream);
    self->ctx = (cc_ctx *)Py_XNewRef(ctx);
    self->gen = ctx != NULL ? ((cc_ctx *)ctx)->id : 0;
    self->open = 1;
    return (PyObject *)self;
}

/* Without the GIL: cuMemFreeAsync on the legacy default stream, with ctx current if given. */
static int
free_legacy_nogil(unsigned long long ptr, void *ctx, const char **api)
{
    int pushed = 0, st;
    if (ctx != NULL && (st = cc_push_nogil(ctx, &pushed, api)) != CC_SUCCESS) {
        return st;
    }
    st = cc_driver.mem_free_async(ptr, CC_STREAM_LEGACY);
    *api = "cuMemFreeAsync";
    int pst = cc_pop_nogil(pushed, api);
    return st != CC_SUCCESS ? st : pst;
}

/* Without the GIL: cuMemFreeAsync on stream. A default-stream token with ctx is freed with ctx
 * current (the token names the stream of whichever context is current: another device's, on a
 * thread where that one is); a real stream is tried as it is, then (with ctx) once more with ctx
 * current. */
static int
free_on_stream_nogil(unsigned long long ptr, void *stream, void *ctx, const char **api)
{
    *api = "cuMemFreeAsync";
    if (ctx == NULL || !CC_IS_TOKEN(stream)) {
        int st = cc_driver.mem_free_async(ptr, stream);
        if (st == CC_SUCCESS || ctx == NULL) {
            return st;
        }
    }
    int pushed, pst = cc_push_nogil(ctx, &pushed, api);
    if (pst != CC_SUCCESS) {
        return pst;
    }
    int st = cc_driver.mem_free_async(ptr, stream);
    pst = cc_pop_nogil(pushed, api);
    if (st != CC_SUCCESS) {
        *api = "cuMemFreeAsync";
        return st;
    }
    return pst;
}

/* Allocation.close(stream=None): the free, once. None, or NULL with the error set. */
static PyObject *
alloc_close_impl(cc_alloc *self, PyObject *stream_arg)
{
    if (!self->open) {
        Py_RETURN_NONE;
    }
    self->open = 0; /* claimed before any call out */
    PyObject *s = stream_arg != NULL && stream_arg != Py_None ? stream_arg : self->stream;
    if (self->free != NULL) {
        PyObject *free = Py_NewRef(self->free);
        PyObject *call[3] = {NULL, NULL, s != NULL ? s : Py_None};
        Py_XINCREF(s);
        call[0] = PyLong_FromUnsignedLongLong(self->ptr);
        call[1] = call[0] != NULL ? PyLong_FromSize_t(self->size) : NULL;
        PyObject *r = call[1] != NULL ? PyObject_Vectorcall(free, call, 3, NULL) : NULL;
        Py_XDECREF(call[0]);
        Py_XDECREF(call[1]);
        Py_XDECREF(s);
        Py_DECREF(free);
        if (r == NULL) {
            return NULL;
        }
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    if (s != NULL && !CC_IS_STREAM(s)) {
        PyErr_SetString(PyExc_TypeError, "a pool allocation's deallocation stream must be a StreamHandle");
        return NULL;
    }
    if (cc_require_bound()) {
        return NULL;
    }
    cc_ctx *ctx = self->ctx;
    Py_XINCREF(ctx);
    Py_XINCREF(s);
    unsigned long long ptr = self->ptr, gen = self->gen;
    void *ctx_address = ctx != NULL ? ctx->address : NULL;
    const char *api = "cuMemFreeAsync";
    int st = CC_SUCCESS;
    int released_stream = s == NULL || ((cc_stream *)s)->released;
    void *h = released_stream ? NULL : ((cc_stream *)s)->address;
    /* One GIL release for the generation check and the free (both never block long). */
    Py_BEGIN_ALLOW_THREADS
    if (ctx == NULL || cc_ctx_id_nogil(ctx_address) == gen) {
        if (released_stream) {
            /* The deallocation stream was closed since: free on the legacy default stream of
             * the memory's context (ordered after the work of every blocking stream). */
            st = free_legacy_nogil(ptr, ctx_address, &api);
        } else {
            st = free_on_stream_nogil(ptr, h, ctx_address, &api);
        }
    } /* else the context was reset or destroyed: the memory died with it */
    Py_END_ALLOW_THREADS
    Py_XDECREF(s);
    Py_XDECREF(ctx);
    if (st != CC_SUCCESS) {
        return cc_raise(st, api);
    }
    Py_RETURN_NONE;
}

PyObject *
cc_alloc_close(cc_alloc *alloc)
{
    return alloc_close_impl(alloc, NULL);
}

static PyObject *
alloc_close(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"stream"};
    PyObject *a[1];
    if (kwnames == NULL && nargs == 0) { /* the common call: close() */
        return alloc_close_impl((cc_alloc *)op, NULL);
    }
    if (cc_parse("close", names, 0, 1, args, nargs, kwnames, a)) {
        return NULL;
    }
    return alloc_close_impl((cc_alloc *)op, a[0]);
}

/* set_stream(stream) */
static PyObject *
alloc_set_stream(PyObject *op, PyObject *stream)
{
    cc_alloc *self = (cc_alloc *)op;
    if (self->free == NULL && !CC_IS_STREAM(stream)) {
        PyErr_SetString(PyExc_TypeError, "a pool allocation's deallocation stream must be a StreamHandle");
        return NULL;
    }
    PyObject *value = stream == Py_None ? NULL : Py_NewRef(stream);
    Py_XSETREF(self->stream, value); /* the old one dropped last */
    Py_RETURN_NONE;
}

static void
alloc_finalize(PyObject *op)
{
    cc_alloc *self = (cc_alloc *)op;
    if (!self->open || CC_FINALIZING()) {
        return;
    }
    CC_SAVE_EXC(saved);
    cc_last_status = 0;
    PyObject *r = alloc_close_impl(self, NULL);
    if (r == NULL) {
        char what[80];
        snprintf(what, sizeof(what), "a garbage-collected allocation of %zu bytes at", self->size);
        cc_report_release_failure(op, what, self->ptr, cc_last_status);
    } else {
        Py_DECREF(r);
    }
    CC_RESTORE_EXC(saved);
}

static int
alloc_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_alloc *self = (cc_alloc *)op;
    Py_VISIT(self->free);
    Py_VISIT(self->stream);
    Py_VISIT(self->ctx);
    return 0;
}

static int
alloc_clear(PyObject *op)
{
    cc_alloc *self = (cc_alloc *)op;
    /* The free ran in tp_finalize (the GC finalizes before it clears). */
    Py_CLEAR(self->free);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->ctx);
    return 0;
}

static void
alloc_dealloc(PyObject *op)
{
    cc_dealloc_handle(op, alloc_clear);
}

static PyObject *
alloc_repr(PyObject *op)
{
    cc_alloc *self = (cc_alloc *)op;
    char buf[128];
    snprintf(buf, sizeof(buf), "<Allocation 0x%llx size=%zu%s>", self->ptr, self->size, self->open ? "" : " closed");
    return PyUnicode_FromString(buf);
}

static PyObject *
alloc_get_ptr(PyObject *op, void *closure)
{
    return PyLong_FromUnsignedLongLong(((cc_alloc *)op)->ptr);
}

static PyObject *
alloc_get_size(PyObject *op, void *closure)
{
    return PyLong_FromSize_t(((cc_alloc *)op)->size);
}

static PyObject *
alloc_get_stream(PyObject *op, void *closure)
{
    PyObject *s = ((cc_alloc *)op)->stream;
    return Py_NewRef(s != NULL ? s : Py_None);
}

static PyObject *
alloc_get_ctx(PyObject *op, void *closure)
{
    PyObject *ctx = (PyObject *)((cc_alloc *)op)->ctx;
    return Py_NewRef(ctx != NULL ? ctx : Py_None);
}

static PyObject *
alloc_get_is_open(PyObject *op, void *closure)
{
    return PyBool_FromLong(((cc_alloc *)op)->open);
}

static PyMethodDef alloc_methods[] = {
    {"adopt", (PyCFunction)(void (*)(void))alloc_adopt, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "Allocation.adopt(ptr, size, free, stream, ctx): own memory freed by free(ptr, size, stream) (None: "
     "cuMemFreeAsync on stream, a StreamHandle)"},
    {"set_stream", alloc_set_stream, METH_O, "set_stream(stream): the stream the eventual free is ordered on"},
    {"close", (PyCFunction)(void (*)(void))alloc_close, METH_FASTCALL | METH_KEYWORDS,
     "close(stream=None): free the memory now (once)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef alloc_getset[] = {
    {"ptr", alloc_get_ptr, NULL, "the device address", NULL},
    {"size", alloc_get_size, NULL, "the size in bytes", NULL},
    {"stream", alloc_get_stream, NULL, "the deallocation stream (or any object for an adopted free), or None", NULL},
    {"ctx", alloc_get_ctx, NULL, "its ContextHandle, or None", NULL},
    {"is_open", alloc_get_is_open, NULL, "whether the memory is not freed yet", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cc_Allocation_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.Allocation",
    .tp_basicsize = sizeof(cc_alloc),
    .tp_dealloc = alloc_dealloc,
    .tp_repr = alloc_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Device memory freed once, stream-ordered (cuMemFreeAsync on its stream, or free(ptr, size, stream))",
    .tp_traverse = alloc_traverse,
    .tp_clear = alloc_clear,
    .tp_weaklistoffset = offsetof(cc_alloc, weakreflist),
    .tp_methods = alloc_methods,
    .tp_getset = alloc_getset,
    .tp_finalize = alloc_finalize,
};

/* Without the GIL: cuMemAllocFromPoolAsync on a stream that is not capturing a graph. A capturing
 * stream (active or invalidated capture) is refused before anything is allocated: the status
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, api "cuStreamIsCapturing" (see _handles.pool_allocate). */
static int
alloc_outside_capture_nogil(unsigned long long *ptr, size_t size, void *pool, void *stream, const char **api)
{
    int status = 0;
    int st = cc_driver.stream_is_capturing(stream, &status);
    if (st != CC_SUCCESS || status != 0) {
        *api = "cuStreamIsCapturing";
        return st != CC_SUCCESS ? st : CC_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    *api = "cuMemAllocFromPoolAsync";
    return cc_driver.mem_alloc_from_pool_async(ptr, size, pool, stream);
}

/* Without the GIL: the allocation above, with ctx current for a default-stream token (as in
 * free_on_stream_nogil); a real stream is tried as it is, then (with ctx) once more, ctx current. */
static int
alloc_from_pool_nogil(unsigned long long *ptr, size_t size, void *pool, void *stream, void *ctx, const char **api)
{
    if (ctx == NULL || !CC_IS_TOKEN(stream)) {
        int st = alloc_outside_capture_nogil(ptr, size, pool, stream, api);
        if (st == CC_SUCCESS || ctx == NULL || st == CC_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
            return st;
        }
    }
    int pushed, pst = cc_push_nogil(ctx, &pushed, api);
    if (pst != CC_SUCCESS) {
        return pst;
    }
    const char *alloc_api;
    int st = alloc_outside_capture_nogil(ptr, size, pool, stream, &alloc_api);
    pst = cc_pop_nogil(pushed, api);
    if (st != CC_SUCCESS) {
        *api = alloc_api;
        return st;
    }
    return pst;
}

cc_alloc *
cc_pool_alloc(unsigned long long pool, size_t size, cc_stream *stream, cc_ctx *ctx, int *status, const char **api)
{
    *status = CC_SUCCESS;
    /* The result first: once the driver hands out memory, nothing can fail before it is owned. */
    cc_alloc *self = alloc_new();
    if (self == NULL) {
        return NULL;
    }
    self->size = size;
    self->stream = Py_NewRef((PyObject *)stream); /* held across the GIL release below */
    self->ctx = (cc_ctx *)Py_XNewRef((PyObject *)ctx);
    self->gen = ctx != NULL ? ctx->id : 0;
    void *h = stream->address, *ctx_address = ctx != NULL ? ctx->address : NULL;
    unsigned long long ptr = 0;
    int st;
    CC_CALL(st, alloc_from_pool_nogil(&ptr, size, (void *)(uintptr_t)pool, h, ctx_address, api));
    if (st != CC_SUCCESS) {
        Py_DECREF(self); /* never opened: nothing to free */
        *status = st;
        return NULL;
    }
    self->ptr = ptr;
    self->open = 1;
    return self;
}

/* pool_allocate(pool, size, stream, ctx) */
PyObject *
cc_pool_allocate(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"pool", "size", "stream", "ctx"};
    PyObject *a[4];
    unsigned long long pool;
    size_t size;
    if (kwnames == NULL && nargs == 4) {
        a[0] = args[0], a[1] = args[1], a[2] = args[2], a[3] = args[3];
    } else if (cc_parse("pool_allocate", names, 4, 4, args, nargs, kwnames, a)) {
        return NULL;
    }
    if (!CC_IS_STREAM(a[2])) {
        PyErr_SetString(PyExc_TypeError, "pool_allocate: stream must be a StreamHandle");
        return NULL;
    }
    PyObject *ctx = a[3] == Py_None ? NULL : a[3];
    if (ctx != NULL && !CC_IS_CTX(ctx)) {
        PyErr_SetString(PyExc_TypeError, "pool_allocate: ctx must be a ContextHandle or None");
        return NULL;
    }
    if (cc_int_address(a[0], &pool) || cc_int_size(a[1], &size, "size") || cc_require_bound()) {
        return NULL;
    }
    cc_stream *stream = (cc_stream *)a[2];
    if (stream->released) {
        return cc_closed("Stream");
    }
    int st;
    const char *api;
    cc_alloc *self = cc_pool_alloc(pool, size, stream, (cc_ctx *)ctx, &st, &api);
    if (self == NULL) {
        return st != CC_SUCCESS ? cc_raise(st, api) : NULL;
    }
    return (PyObject *)self;
}
