/* cuda_core._handles._native: SyncEntry, the C entry of Stream.sync (see entry.h).
 *
 * SyncEntry(fallback, stream_type, stream_slot) is an instance method (a method descriptor, as a
 * Python function is). stream.sync(), with stream of exactly stream_type whose stream_slot holds
 * a StreamHandle, is that handle's sync() (cuStreamSynchronize, the GIL released; "Stream has
 * been closed" once it is released), as the Python function does; every other call goes to
 * fallback as it came. */
#include "entry.h"
#include "handles.h"

static PyObject *
sentry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_method_entry *self = (cc_method_entry *)op;
    if (kwnames == NULL && PyVectorcall_NARGS(nargsf) == 1 && (PyObject *)Py_TYPE(args[0]) == self->types[0]) {
        PyObject *h = CC_ENTRY_SLOT(self, 0, args[0]); /* held across the GIL release */
        if (h != NULL && CC_IS_STREAM(h)) {
            PyObject *r = cc_stream_sync(h, NULL);
            Py_DECREF(h);
            return r;
        }
        Py_XDECREF(h);
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* SyncEntry(fallback, stream_type, stream_slot) */
static PyObject *
sentry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *a[2];
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "SyncEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!:SyncEntry", &fallback, &PyType_Type, &a[0], &PyMemberDescr_Type, &a[1])) {
        return NULL;
    }
    static const int slot_type[1] = {0};
    return cc_method_entry_new(cls, "SyncEntry", sentry_vectorcall, fallback, 1, &a[0], 1, &a[1], slot_type);
}

PyTypeObject cc_SyncEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.SyncEntry",
    CC_METHOD_ENTRY_TYPE_SLOTS(cc_method_entry),
    .tp_doc = "SyncEntry(fallback, stream_type, stream_slot): stream.sync() in C for a stream of the exact type, "
              "fallback(...) for anything else",
    .tp_new = sentry_new,
};

int
cc_entry_sync_init(PyObject *module)
{
    static PyTypeObject *types[] = {&cc_SyncEntry_Type};
    static const char *names[] = {"SyncEntry"};
    return cc_add_types(module, types, names, 1);
}
