/* cuda_core._handles._native: CopyEntry, the C entry of Buffer.copy_from and Buffer.copy_to (see
 * entry.h).
 *
 * CopyEntry(fallback, buffer_type, ptr_slot, size_slot, stream_type, stream_slot, to) is an
 * instance method (a method descriptor, as a Python function is: buf.copy_from(src, stream=s)
 * calls it with buf first, and no bound method is made). A call of the form
 * buf.copy_from(other, stream=s) (to false) or buf.copy_to(other, stream=s) (to true), with buf
 * and other of exactly buffer_type, both open (an int in ptr_slot) and of one size above zero
 * (an int in size_slot), and s of exactly stream_type whose StreamHandle (stream_slot) is open
 * and a stream of its own (not a default-stream token, whose context is whichever is current),
 * queues cuMemcpyAsync on s, the GIL released, and returns None (copy_from) or other (copy_to),
 * as the Python function does in that case. Every other call goes to fallback as it came, and so
 * does a copy the driver refuses: the Python function tries it again and owns what follows
 * (a copy between devices, the error and its message). */
#include "entry.h"
#include "handles.h"

typedef struct {
    CC_METHOD_ENTRY_HEAD /* types: the buffers' and the stream's; slots: a buffer's address, its
                            size, the stream's handle */
    int to;              /* copy_to: self is the source, and the call returns other */
} cc_centry;

/* The slot's int as an unsigned 64-bit value in *out: 0, or -1 (no exception) when the slot is
 * unset, not an int, or out of range. */
static int
slot_u64(cc_centry *self, int slot, PyObject *obj, unsigned long long *out)
{
    PyObject *v = CC_ENTRY_SLOT(self, slot, obj);
    int ok = v != NULL && PyLong_CheckExact(v);
    if (ok) {
        *out = PyLong_AsUnsignedLongLong(v);
        ok = !(*out == (unsigned long long)-1 && PyErr_Occurred());
    }
    Py_XDECREF(v);
    PyErr_Clear();
    return ok ? 0 : -1;
}

/* Copies self <-> other on stream: 0 when queued; 1 when the call is not the common one, or the
 * driver refused it (no exception either way). */
static int
centry_copy(cc_centry *self, PyObject *buf, PyObject *other, PyObject *stream)
{
    unsigned long long a, b, na, nb;
    if (slot_u64(self, 0, buf, &a) || slot_u64(self, 0, other, &b) || slot_u64(self, 1, buf, &na) ||
        slot_u64(self, 1, other, &nb) || na == 0 || na != nb || na > (unsigned long long)PY_SSIZE_T_MAX) {
        return 1;
    }
    PyObject *h = CC_ENTRY_SLOT(self, 2, stream);
    int st = 1;
    if (h != NULL && CC_IS_STREAM(h) && !((cc_stream *)h)->released && !CC_IS_TOKEN(((cc_stream *)h)->address)) {
        void *address = ((cc_stream *)h)->address;
        unsigned long long dst = self->to ? b : a, src = self->to ? a : b;
        CC_CALL(st, cc_driver.memcpy_async(dst, src, (size_t)na, address)); /* h held across it */
    }
    PyErr_Clear();
    Py_XDECREF(h);
    return st != CC_SUCCESS;
}

static PyObject *
centry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_centry *self = (cc_centry *)op;
    if (kwnames != NULL && PyVectorcall_NARGS(nargsf) == 2 && PyTuple_GET_SIZE(kwnames) == 1 && cc_bound &&
        (PyObject *)Py_TYPE(args[0]) == self->types[0] && (PyObject *)Py_TYPE(args[1]) == self->types[0] &&
        (PyObject *)Py_TYPE(args[2]) == self->types[1]) {
        if (cc_entry_is_stream_kw(PyTuple_GET_ITEM(kwnames, 0)) && centry_copy(self, args[0], args[1], args[2]) == 0) {
            return Py_NewRef(self->to ? args[1] : Py_None);
        }
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* CopyEntry(fallback, buffer_type, ptr_slot, size_slot, stream_type, stream_slot, to) */
static PyObject *
centry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *a[5];
    int to;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "CopyEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!p:CopyEntry", &fallback, &PyType_Type, &a[0], &PyMemberDescr_Type,
                          &a[1], &PyMemberDescr_Type, &a[2], &PyType_Type, &a[3], &PyMemberDescr_Type, &a[4],
                          &to)) {
        return NULL;
    }
    PyObject *const types[2] = {a[0], a[3]}, *const slots[3] = {a[1], a[2], a[4]};
    static const int slot_type[3] = {0, 0, 1};
    PyObject *self = cc_method_entry_new(cls, "CopyEntry", centry_vectorcall, fallback, 2, types, 3, slots, slot_type);
    if (self != NULL) {
        ((cc_centry *)self)->to = to;
    }
    return self;
}

PyTypeObject cc_CopyEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.CopyEntry",
    CC_METHOD_ENTRY_TYPE_SLOTS(cc_centry),
    .tp_doc = "CopyEntry(fallback, buffer_type, ptr_slot, size_slot, stream_type, stream_slot, to): "
              "Buffer.copy_from(other, stream=s) (copy_to when to) in C between two open buffers of the exact type "
              "and one size on a stream of its own, fallback(...) for anything else",
    .tp_new = centry_new,
};

int
cc_entry_copy_init(PyObject *module)
{
    static PyTypeObject *types[] = {&cc_CopyEntry_Type};
    static const char *names[] = {"CopyEntry"};
    return cc_add_types(module, types, names, 1);
}
