/* cuda_core._handles._native: EventHandle (see cuda_core/_handles/_protocol.py, handles.h). */
#include "handles.h"

cc_event *
cc_event_new_owned(void *address, cc_ctx *ctx, unsigned int flags)
{
    cc_event *ev = PyObject_GC_New(cc_event, &cc_EventHandle_Type);
    if (ev == NULL) {
        return NULL;
    }
    ev->address = address;
    Py_INCREF(ctx);
    ev->ctx = ctx;
    ev->weakreflist = NULL;
    ev->gen = ctx->id;
    ev->flags = flags;
    ev->poolable = !(flags & CC_EVENT_INTERPROCESS); /* another process may hold it */
    ev->recorded = 0;
    ev->released = 0;
    PyObject_GC_Track(ev);
    return ev;
}

/* EventHandle.adopt(address, ctx, flags) */
static PyObject *
event_adopt(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"address", "ctx", "flags"};
    PyObject *a[3];
    unsigned long long address;
    unsigned int flags;
    if (cc_parse("adopt", names, 3, 3, args, nargs, kwnames, a) || cc_int_address(a[0], &address) ||
        cc_int_uint(a[2], &flags, "flags")) {
        return NULL;
    }
    if (!CC_IS_CTX(a[1])) {
        PyErr_SetString(PyExc_TypeError, "EventHandle.adopt: ctx must be a ContextHandle");
        return NULL;
    }
    cc_event *ev = cc_event_new_owned((void *)(uintptr_t)address, (cc_ctx *)a[1], flags);
    if (ev != NULL) {
        ev->poolable = 0; /* opened elsewhere: destroyed, never pooled */
        ev->recorded = 1;
    }
    return (PyObject *)ev;
}

int
cc_event_record(cc_event *ev, cc_stream *stream)
{
    if (ev->released) {
        cc_closed("Event");
        return -1;
    }
    if (stream->released) {
        cc_closed("Stream");
        return -1;
    }
    if (cc_require_bound()) {
        return -1;
    }
    void *e = ev->address, *s = stream->address;
    int st;
    Py_INCREF(ev);
    CC_CALL(st, cc_driver.event_record(e, s));
    if (st == CC_SUCCESS) {
        ev->recorded = 1;
    }
    Py_DECREF(ev);
    if (st != CC_SUCCESS) {
        cc_raise(st, "cuEventRecord");
        return -1;
    }
    return 0;
}

/* EventHandle.release(): None, or NULL with the error set. */
static PyObject *
event_release(PyObject *op, PyObject *unused)
{
    cc_event *self = (cc_event *)op;
    if (self->released) {
        Py_RETURN_NONE;
    }
    self->released = 1; /* claimed before any GIL release */
    cc_ctx *ctx = self->ctx;
    if (ctx == NULL || !cc_bound) {
        Py_RETURN_NONE;
    }
    Py_INCREF(ctx);
    void *ctx_address = ctx->address, *h = self->address;
    unsigned long long gen = self->gen, ident;
    int st = CC_SUCCESS;
    Py_BEGIN_ALLOW_THREADS
    ident = cc_ctx_id_nogil(ctx_address);
    Py_END_ALLOW_THREADS
    if (ident != gen) {
        goto done; /* the context was reset or destroyed: the event died with it */
    }
    if (self->poolable && ctx->id == gen && cc_ctx_pool_event(ctx, self->flags, self->recorded, h)) {
        goto done;
    }
    CC_CALL(st, cc_driver.event_destroy(h));
done:
    Py_DECREF(ctx);
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuEventDestroy");
    }
    Py_RETURN_NONE;
}

static void
event_finalize(PyObject *op)
{
    if (!((cc_event *)op)->released) {
        cc_finalize_release(op, event_release, "an event", (unsigned long long)(uintptr_t)((cc_event *)op)->address);
    }
}

static int
event_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((cc_event *)op)->ctx);
    return 0;
}

static int
event_clear(PyObject *op)
{
    Py_CLEAR(((cc_event *)op)->ctx);
    return 0;
}

static void
event_dealloc(PyObject *op)
{
    cc_dealloc_handle(op, event_clear);
}

static PyObject *
event_repr(PyObject *op)
{
    cc_event *self = (cc_event *)op;
    char buf[128];
    snprintf(buf, sizeof(buf), "<EventHandle 0x%llx flags=%u%s>", (unsigned long long)(uintptr_t)self->address,
             self->flags, self->released ? " released" : "");
    return PyUnicode_FromString(buf);
}

static PyObject *
event_py_record(PyObject *op, PyObject *stream)
{
    if (!CC_IS_STREAM(stream)) {
        PyErr_SetString(PyExc_TypeError, "record: stream must be a StreamHandle");
        return NULL;
    }
    if (cc_event_record((cc_event *)op, (cc_stream *)stream)) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
event_query(PyObject *op, PyObject *unused)
{
    cc_event *self = (cc_event *)op;
    CC_LIVE(self, "Event");
    void *h = self->address;
    int st;
    CC_CALL(st, cc_driver.event_query(h));
    if (st == CC_ERROR_NOT_READY) {
        Py_RETURN_FALSE;
    }
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuEventQuery");
    }
    Py_RETURN_TRUE;
}

static PyObject *
event_sync(PyObject *op, PyObject *unused)
{
    cc_event *self = (cc_event *)op;
    CC_LIVE(self, "Event");
    void *h = self->address;
    int st;
    CC_CALL(st, cc_driver.event_synchronize(h));
    if (st != CC_SUCCESS) {
        return cc_raise(st, "cuEventSynchronize");
    }
    Py_RETURN_NONE;
}

static PyObject *
event_expose(PyObject *op, PyObject *unused)
{
    ((cc_event *)op)->recorded = 1;
    Py_RETURN_NONE;
}

static PyObject *
event_get_address(PyObject *op, void *closure)
{
    return PyLong_FromVoidPtr(((cc_event *)op)->address);
}

static PyObject *
event_get_ctx(PyObject *op, void *closure)
{
    PyObject *ctx = (PyObject *)((cc_event *)op)->ctx;
    return Py_NewRef(ctx != NULL ? ctx : Py_None);
}

static PyObject *
event_get_flags(PyObject *op, void *closure)
{
    return PyLong_FromUnsignedLong(((cc_event *)op)->flags);
}

static PyObject *
event_get_recorded(PyObject *op, void *closure)
{
    return PyBool_FromLong(((cc_event *)op)->recorded);
}

static PyObject *
event_get_is_released(PyObject *op, void *closure)
{
    return PyBool_FromLong(((cc_event *)op)->released);
}

static PyMethodDef event_methods[] = {
    {"adopt", (PyCFunction)(void (*)(void))event_adopt, METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "EventHandle.adopt(address, ctx, flags): own an event opened elsewhere (destroyed, never pooled)"},
    {"record", event_py_record, METH_O, "record(stream): cuEventRecord(self, stream)"},
    {"query", event_query, METH_NOARGS, "query() -> whether the work recorded before the event is done"},
    {"sync", event_sync, METH_NOARGS, "sync(): cuEventSynchronize"},
    {"expose", event_expose, METH_NOARGS, "expose(): the raw handle was handed out (it may be recorded)"},
    {"release", event_release, METH_NOARGS, "release(): give the event back once"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef event_getset[] = {
    {"address", event_get_address, NULL, "the event's address", NULL},
    {"ctx", event_get_ctx, NULL, "its ContextHandle", NULL},
    {"flags", event_get_flags, NULL, "its creation flags", NULL},
    {"recorded", event_get_recorded, NULL, "whether the event may have been recorded", NULL},
    {"is_released", event_get_is_released, NULL, "whether release() ran", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cc_EventHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.EventHandle",
    .tp_basicsize = sizeof(cc_event),
    .tp_dealloc = event_dealloc,
    .tp_repr = event_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An event: owned by cuda_core, pooled at release (IPC-opened ones are destroyed)",
    .tp_traverse = event_traverse,
    .tp_clear = event_clear,
    .tp_weaklistoffset = offsetof(cc_event, weakreflist),
    .tp_methods = event_methods,
    .tp_getset = event_getset,
    .tp_finalize = event_finalize,
};
