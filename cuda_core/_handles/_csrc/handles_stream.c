/* cuda_core._handles._native: StreamHandle (see cuda_core/_handles/_protocol.py, handles.h). */
#include "handles.h"
#include <structmember.h>

cc_stream *
cc_stream_new_owned(void *address, cc_ctx *ctx, unsigned int flags, int has_priority, int priority)
{
    cc_stream *s = PyObject_GC_New(cc_stream, &cc_StreamHandle_Type);
    if (s == NULL) {
        return NULL;
    }
    s->address = address;
    Py_INCREF(ctx);
    s->ctx = ctx;
    s->owner = NULL;
    s->weakreflist = NULL;
    s->gen = ctx->id;
    s->flags = flags;
    s->priority = priority;
    s->has_priority = (char)has_priority;
    s->owned = 1;
    s->released = 0;
    PyObject_GC_Track(s);
    return s;
}

/* StreamHandle.borrow(address, ctx=None, owner=None) */
static PyObject *
stream_borrow(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"address", "ctx", "owner"};
    PyObject *a[3];
    unsigned long long address;
    if (cc_parse("borrow", names, 1, 3, args, nargs, kwnames, a) || cc_int_address(a[0], &address)) {
        return NULL;
    }
    PyObject *ctx = a[1] == Py_None ? NULL : a[1];
    PyObject *owner = a[2] == Py_None ? NULL : a[2];
    if (ctx != NULL && !CC_IS_CTX(ctx)) {
        PyErr_SetString(PyExc_TypeError, "StreamHandle.borrow: ctx must be a ContextHandle or None");
        return NULL;
    }
    cc_stream *s = PyObject_GC_New(cc_stream, &cc_StreamHandle_Type);
    if (s == NULL) {
        return NULL;
    }
    s->address = (void *)(uintptr_t)address;
    Py_XINCREF(ctx);
    s->ctx = (cc_ctx *)ctx;
    Py_XINCREF(owner);
    s->owner = owner;
    s->weakreflist = NULL;
    s->gen = 0;
    s->flags = 0;
    s->priority = 0;
    s->has_priority = 0;
    s->owned = 0;
    s->released = 0;
    PyObject_GC_Track(s);
    return (PyObject *)s;
}

/* Without the GIL: the release decision. 0 forget (context changed), 1 idle, 2 busy. */
static int
stream_idle_nogil(void *ctx, unsigned long long gen, void *stream)
{
    if (cc_ctx_id_nogil(ctx) != gen) {
        return 0;
    }
    return cc_driver.stream_query(stream) == CC_SUCCESS ? 1 : 2;
}

/* StreamHandle.release(): None, or NULL with the error set. */
static PyObject *
stream_release(PyObject *op, PyObject *unused)
{
    cc_stream *self = (cc_stream *)op;
    if (self->released) {
        Py_RETURN_NONE;
    }
    self->released = 1; /* claimed before any GIL release: a second caller returns at once */
    PyObject *owner = self->owner;
    self->owner = NULL;
    cc_ctx *ctx = self->ctx;
    if (!self->owned || ctx == NULL || !cc_bound) {
        Py_XDECREF(owner);
        Py_RETURN_NONE;
    }
    Py_INCREF(ctx);
    void *ctx_address = ctx->address, *h = self->address;
    unsigned long long gen = self->gen;
    int state, st = CC_SUCCESS;
    CC_CALL(state, stream_idle_nogil(ctx_address, gen, h));
    if (state == 0) {
        goto done; /* the context was reset or destroyed: the stream died with it */
    }
    if (state == 1 && ctx->id == gen &&
        cc_ctx_pool_stream(ctx, self->flags, self->has_priority, self->priority, h)) {
        goto done;
    }
    CC_CALL(st, cc_driver.stream_destroy(h));
done:
    Py_DECREF(ctx);
    Py_XDECREF(owner); /* last: it may run any Python code */
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuStreamDestroy");
    }
    Py_RETURN_NONE;
}

static void
stream_finalize(PyObject *op)
{
    if (!((cc_stream *)op)->released) {
        cc_finalize_release(op, stream_release, "a stream", (unsigned long long)(uintptr_t)((cc_stream *)op)->address);
    }
}

static int
stream_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_stream *self = (cc_stream *)op;
    Py_VISIT(self->ctx);
    Py_VISIT(self->owner);
    return 0;
}

static int
stream_clear(PyObject *op)
{
    cc_stream *self = (cc_stream *)op;
    /* The release ran in tp_finalize (the GC finalizes before it clears). */
    Py_CLEAR(self->owner);
    Py_CLEAR(self->ctx);
    return 0;
}

static void
stream_dealloc(PyObject *op)
{
    cc_dealloc_handle(op, stream_clear);
}

static PyObject *
stream_repr(PyObject *op)
{
    cc_stream *self = (cc_stream *)op;
    char buf[128];
    snprintf(buf, sizeof(buf), "<StreamHandle 0x%llx%s%s>", (unsigned long long)(uintptr_t)self->address,
             self->owned ? " owned" : " borrowed", self->released ? " released" : "");
    return PyUnicode_FromString(buf);
}

/* Always cuStreamSynchronize, even on an idle stream: besides waiting, a synchronisation is when
 * the driver gives a memory pool's memory above its release threshold back (asking cuStreamQuery
 * first and returning when idle left 32 MiB reserved after tests/memory's allocate+close soak). */
PyObject *
cc_stream_sync(PyObject *op, PyObject *unused)
{
    cc_stream *self = (cc_stream *)op;
    CC_LIVE(self, "Stream");
    void *h = self->address;
    int st;
    CC_CALL(st, cc_driver.stream_synchronize(h));
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuStreamSynchronize");
    }
    Py_RETURN_NONE;
}

static PyObject *
stream_query(PyObject *op, PyObject *unused)
{
    cc_stream *self = (cc_stream *)op;
    CC_LIVE(self, "Stream");
    void *h = self->address;
    int st;
    CC_CALL(st, cc_driver.stream_query(h));
    if (st == CC_ERROR_NOT_READY) {
        Py_RETURN_FALSE;
    }
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuStreamQuery");
    }
    Py_RETURN_TRUE;
}

/* record(event): cuEventRecord(event, self) */
static PyObject *
stream_record(PyObject *op, PyObject *event)
{
    if (!CC_IS_EVENT(event)) {
        PyErr_SetString(PyExc_TypeError, "record: event must be an EventHandle");
        return NULL;
    }
    if (cc_event_record((cc_event *)event, (cc_stream *)op)) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* wait(event): cuStreamWaitEvent(self, event, 0) */
static PyObject *
stream_wait(PyObject *op, PyObject *event)
{
    cc_stream *self = (cc_stream *)op;
    if (!CC_IS_EVENT(event)) {
        PyErr_SetString(PyExc_TypeError, "wait: event must be an EventHandle");
        return NULL;
    }
    CC_LIVE(self, "Stream");
    if (((cc_event *)event)->released) {
        return cc_closed("Event");
    }
    void *h = self->address, *e = ((cc_event *)event)->address;
    int st;
    CC_CALL(st, cc_driver.stream_wait_event(h, e, 0));
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuStreamWaitEvent");
    }
    Py_RETURN_NONE;
}

/* memcpy(dst, src, nbytes): cuMemcpyAsync ordered on this stream */
static PyObject *
stream_memcpy(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    cc_stream *self = (cc_stream *)op;
    unsigned long long dst, src;
    size_t n;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "memcpy(dst, src, nbytes) takes 3 arguments");
        return NULL;
    }
    CC_LIVE(self, "Stream");
    if (cc_int_address(args[0], &dst) || cc_int_address(args[1], &src) || cc_int_size(args[2], &n, "nbytes")) {
        return NULL;
    }
    if (self->released) { /* a conversion may have run Python code */
        return cc_closed("Stream");
    }
    void *h = self->address;
    int st;
    CC_CALL(st, cc_driver.memcpy_async(dst, src, n, h));
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuMemcpyAsync");
    }
    Py_RETURN_NONE;
}

/* context(): the ContextHandle of the context work on this stream runs in (see the protocol).
 * A borrowed stream's is found once (cuStreamGetCtx, then the registry bind() was given) and kept
 * in ctx; a default-stream token's is the current context's (or None), never kept. */
static PyObject *
stream_context(PyObject *op, PyObject *unused)
{
    cc_stream *self = (cc_stream *)op;
    if (self->ctx != NULL) {
        return Py_NewRef((PyObject *)self->ctx);
    }
    void *h = self->address, *ctx = NULL;
    int token = CC_IS_TOKEN(h), st;
    if (!token && self->released) { /* a token's answer needs no stream: the current context */
        return cc_closed("Stream");
    }
    if (cc_require_bound()) {
        return NULL;
    }
    if (token) {
        CC_CALL(st, cc_driver.ctx_get_current(&ctx));
        if (st != CC_SUCCESS || ctx == NULL) {
            Py_RETURN_NONE; /* no context is current: the token names no stream now */
        }
    } else {
        CC_CALL(st, cc_driver.stream_get_ctx(h, &ctx));
        if (st != CC_SUCCESS) {
            return cc_raise(st, "cuStreamGetCtx");
        }
    }
    PyObject *found = cc_context_of(ctx);
    if (found == NULL) {
        return NULL;
    }
    if (!CC_IS_CTX(found)) {
        PyErr_Format(PyExc_TypeError, "the context registry returned %.100s, not a ContextHandle",
                     Py_TYPE(found)->tp_name);
        Py_DECREF(found);
        return NULL;
    }
    if (token) {
        return found; /* "the current context's stream": never pinned to one context */
    }
    if (self->ctx == NULL) {
        self->ctx = (cc_ctx *)Py_NewRef(found);
        return found;
    }
    /* The registry ran Python code: another thread learnt the context meanwhile; its answer stays. */
    Py_DECREF(found);
    return Py_NewRef((PyObject *)self->ctx);
}

static PyMethodDef stream_methods[] = {
    {"borrow", (PyCFunction)(void (*)(void))stream_borrow, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "StreamHandle.borrow(address, ctx=None, owner=None): a stream cuda_core does not own"},
    {"sync", cc_stream_sync, METH_NOARGS, "sync(): cuStreamSynchronize"},
    {"query", stream_query, METH_NOARGS, "query() -> whether all work queued on the stream is done"},
    {"record", stream_record, METH_O, "record(event): cuEventRecord(event, self)"},
    {"wait", stream_wait, METH_O, "wait(event): cuStreamWaitEvent(self, event)"},
    {"memcpy", (PyCFunction)(void (*)(void))stream_memcpy, METH_FASTCALL,
     "memcpy(dst, src, nbytes): cuMemcpyAsync on this stream"},
    {"release", stream_release, METH_NOARGS, "release(): give the stream back once (pooled, destroyed or forgotten)"},
    {"context", stream_context, METH_NOARGS,
     "context() -> the ContextHandle of the context work on this stream runs in (found once for a "
     "borrowed stream; the current one's for a default-stream token), or None"},
    {NULL, NULL, 0, NULL},
};

/* Plain members: read on every stream-ordered call (Stream.handle, closed checks, launch). */
_Static_assert(sizeof(void *) == sizeof(unsigned long long), "an address is read as unsigned long long");
static PyMemberDef stream_members[] = {
    {"address", T_ULONGLONG, offsetof(cc_stream, address), READONLY, "the stream's address"},
    {"ctx", T_OBJECT, offsetof(cc_stream, ctx), READONLY, "its ContextHandle, or None (not known yet)"},
    {"owner", T_OBJECT, offsetof(cc_stream, owner), READONLY,
     "what a borrowed stream keeps alive until release, or None"},
    {"is_owned", T_BOOL, offsetof(cc_stream, owned), READONLY, "whether cuda_core owns the stream"},
    {"is_released", T_BOOL, offsetof(cc_stream, released), READONLY, "whether release() ran"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject cc_StreamHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.StreamHandle",
    .tp_basicsize = sizeof(cc_stream),
    .tp_dealloc = stream_dealloc,
    .tp_repr = stream_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A stream: owned (pooled or destroyed at release) or borrowed (never destroyed)",
    .tp_traverse = stream_traverse,
    .tp_clear = stream_clear,
    .tp_weaklistoffset = offsetof(cc_stream, weakreflist),
    .tp_methods = stream_methods,
    .tp_members = stream_members,
    .tp_finalize = stream_finalize,
};
