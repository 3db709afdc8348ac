/* cuda_core._handles._native: RecordEntry, the C entry of Stream.record (see entry.h).
 *
 * RecordEntry(fallback, stream_type, stream_slot, event_type, event_slot, flags_slot, refused)
 * is an instance method (a method descriptor, as a Python function is: s.record(ev) calls it
 * with s first, and no bound method is made). s.record(ev), with s of exactly stream_type, ev
 * of exactly event_type, and ev's flags (an int in flags_slot) holding no bit of refused (an
 * IPC event is recorded once, when it is made), records ev's EventHandle (event_slot) on s's
 * StreamHandle (stream_slot) and returns ev, as the Python function does in that case, with
 * its errors (a closed stream or event: "... has been closed"); every other call goes to
 * fallback (Stream.record in Python) as it came. */
#include "entry.h"
#include "handles.h"

typedef struct {
    CC_METHOD_ENTRY_HEAD /* types: the stream's and the event's; slots: the stream's handle, the
                            event's, its flags */
    long refused;        /* flag bits that send a call to fallback */
} cc_rentry;

/* 1 when the call is the common one, with its handles; 0 (nothing held, no error) when not. */
static int
rentry_common(cc_rentry *self, PyObject *stream, PyObject *event, PyObject **sh, PyObject **eh)
{
    PyObject *flags = CC_ENTRY_SLOT(self, 2, event);
    long f = flags != NULL && PyLong_CheckExact(flags) ? PyLong_AsLong(flags) : -1;
    Py_XDECREF(flags);
    if (f < 0 || (f & self->refused)) {
        PyErr_Clear(); /* unset, not an int, or out of range: the Python path decides */
        return 0;
    }
    *sh = CC_ENTRY_SLOT(self, 0, stream);
    *eh = CC_ENTRY_SLOT(self, 1, event);
    if (*sh != NULL && *eh != NULL && CC_IS_STREAM(*sh) && CC_IS_EVENT(*eh)) {
        return 1;
    }
    Py_CLEAR(*sh);
    Py_CLEAR(*eh);
    return 0;
}

static PyObject *
rentry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_rentry *self = (cc_rentry *)op;
    PyObject *sh, *eh;
    if (kwnames == NULL && PyVectorcall_NARGS(nargsf) == 2 && (PyObject *)Py_TYPE(args[0]) == self->types[0] &&
        (PyObject *)Py_TYPE(args[1]) == self->types[1] && rentry_common(self, args[0], args[1], &sh, &eh)) {
        int err = cc_event_record((cc_event *)eh, (cc_stream *)sh);
        Py_DECREF(sh);
        Py_DECREF(eh);
        return err ? NULL : Py_NewRef(args[1]);
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* RecordEntry(fallback, stream_type, stream_slot, event_type, event_slot, flags_slot, refused) */
static PyObject *
rentry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *a[5];
    long refused;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "RecordEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!l:RecordEntry", &fallback, &PyType_Type, &a[0], &PyMemberDescr_Type,
                          &a[1], &PyType_Type, &a[2], &PyMemberDescr_Type, &a[3], &PyMemberDescr_Type, &a[4],
                          &refused)) {
        return NULL;
    }
    PyObject *const types[2] = {a[0], a[2]}, *const slots[3] = {a[1], a[3], a[4]};
    static const int slot_type[3] = {0, 1, 1};
    PyObject *self = cc_method_entry_new(cls, "RecordEntry", rentry_vectorcall, fallback, 2, types, 3, slots, slot_type);
    if (self != NULL) {
        ((cc_rentry *)self)->refused = refused;
    }
    return self;
}

PyTypeObject cc_RecordEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.RecordEntry",
    CC_METHOD_ENTRY_TYPE_SLOTS(cc_rentry),
    .tp_doc = "RecordEntry(fallback, stream_type, stream_slot, event_type, event_slot, flags_slot, refused): "
              "Stream.record(event) in C for an event of the exact type without a refused flag, fallback(...) "
              "for anything else",
    .tp_new = rentry_new,
};

int
cc_entry_record_init(PyObject *module)
{
    static PyTypeObject *types[] = {&cc_RecordEntry_Type};
    static const char *names[] = {"RecordEntry"};
    return cc_add_types(module, types, names, 1);
}
