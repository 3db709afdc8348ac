/* cuda_core._handles._native: AllocEntry and CloseEntry, the C entries of
 * DeviceMemoryResource.allocate and Buffer.close (see entry.h): a pool allocation's life, from
 * the Buffer that owns it to its free, without a Python frame.
 *
 * AllocEntry(fallback, resource_type, pool_slot, stream_type, stream_slot, buffer_type,
 * h_slot, ptr_slot, size_slot, mr_slot) is an instance method (a method descriptor, as a
 * Python function is). mr.allocate(size, stream=s), with mr of exactly resource_type whose
 * pool_slot holds a nonzero int (the pool it allocates from), size an int above zero, and s of
 * exactly stream_type whose StreamHandle (stream_slot) is open and knows its context, allocates
 * as pool_allocate does and returns a new buffer_type whose h_slot, ptr_slot, size_slot and
 * mr_slot hold the Allocation, its address, size and mr (what the Python function makes in
 * that case; its other slots are left unset, as there). Every other call goes to fallback as
 * it came, and so does an allocation the driver refuses: the Python function tries it again
 * and owns the error and its message.
 *
 * CloseEntry(fallback, buffer_type, h_slot, ptr_slot, mr_slot): buf.close(), with buf of
 * exactly buffer_type whose h_slot holds an Allocation, sets the three slots to None and
 * closes the Allocation, as the Python function does; every other call goes to fallback. */
#include "entry.h"
#include "handles.h"

enum { POOL, STREAM_H, BUF_H, BUF_PTR, BUF_SIZE, BUF_MR }; /* AllocEntry's slots */
enum { CLOSE_H, CLOSE_PTR, CLOSE_MR };                     /* CloseEntry's slots */

/* Sets slot i of obj to value (a new reference is taken): 0, or -1 with the error set. */
static int
slot_set(cc_method_entry *self, int i, PyObject *obj, PyObject *value)
{
    if (self->members[i] != NULL) {
        return PyMember_SetOne((char *)obj, self->members[i], value);
    }
    PyObject *descr = self->slots[i];
    return Py_TYPE(descr)->tp_descr_set(descr, obj, value);
}

/* The pool's address in mr's slot: 0 where it is unset, not an int or zero (no exception). */
static unsigned long long
pool_of(cc_method_entry *self, PyObject *mr)
{
    PyObject *v = CC_ENTRY_SLOT(self, POOL, mr);
    unsigned long long pool = 0;
    if (v != NULL && PyLong_CheckExact(v)) {
        pool = PyLong_AsUnsignedLongLong(v);
        if (pool == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            pool = 0;
        }
    }
    Py_XDECREF(v);
    return pool;
}

/* The new buffer of allocation a (whose reference it takes), or NULL with the error set. */
static PyObject *
new_buffer(cc_method_entry *self, cc_alloc *a, PyObject *size, PyObject *mr)
{
    PyTypeObject *type = (PyTypeObject *)self->types[2];
    PyObject *buf = type->tp_alloc(type, 0);
    PyObject *ptr = buf != NULL ? PyLong_FromUnsignedLongLong(a->ptr) : NULL;
    int err = ptr == NULL || slot_set(self, BUF_H, buf, (PyObject *)a) || slot_set(self, BUF_PTR, buf, ptr) ||
              slot_set(self, BUF_SIZE, buf, size) || slot_set(self, BUF_MR, buf, mr);
    Py_XDECREF(ptr);
    Py_DECREF(a); /* the buffer owns it now; on an error its finalizer frees the memory */
    if (err) {
        Py_XDECREF(buf);
        return NULL;
    }
    return buf;
}

/* mr.allocate(size, stream=s) in C: the buffer; NULL with the error set; or NULL without one
 * when the call is not the common one or the driver refused it (the fallback decides). */
static PyObject *
aentry_allocate(cc_method_entry *self, PyObject *mr, PyObject *size_obj, PyObject *stream)
{
    Py_ssize_t size = PyLong_AsSsize_t(size_obj);
    if (size <= 0) {
        PyErr_Clear(); /* negative, zero or too large: the Python function says which */
        return NULL;
    }
    unsigned long long pool = pool_of(self, mr);
    PyObject *h = pool != 0 ? CC_ENTRY_SLOT(self, STREAM_H, stream) : NULL;
    PyObject *buf = NULL;
    if (h != NULL && CC_IS_STREAM(h) && !((cc_stream *)h)->released && ((cc_stream *)h)->ctx != NULL) {
        int st;
        const char *api;
        cc_alloc *a = cc_pool_alloc(pool, (size_t)size, (cc_stream *)h, ((cc_stream *)h)->ctx, &st, &api);
        if (a != NULL) {
            buf = new_buffer(self, a, size_obj, mr);
        }
    }
    Py_XDECREF(h);
    return buf;
}

static PyObject *
aentry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_method_entry *self = (cc_method_entry *)op;
    if (kwnames != NULL && PyVectorcall_NARGS(nargsf) == 2 && PyTuple_GET_SIZE(kwnames) == 1 && cc_bound &&
        (PyObject *)Py_TYPE(args[0]) == self->types[0] && PyLong_CheckExact(args[1]) &&
        (PyObject *)Py_TYPE(args[2]) == self->types[1]) {
        if (cc_entry_is_stream_kw(PyTuple_GET_ITEM(kwnames, 0))) {
            PyObject *buf = aentry_allocate(self, args[0], args[1], args[2]);
            if (buf != NULL || PyErr_Occurred()) {
                return buf;
            }
        }
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

static PyObject *
centry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_method_entry *self = (cc_method_entry *)op;
    if (kwnames == NULL && PyVectorcall_NARGS(nargsf) == 1 && (PyObject *)Py_TYPE(args[0]) == self->types[0]) {
        PyObject *buf = args[0], *h = CC_ENTRY_SLOT(self, CLOSE_H, buf);
        if (h != NULL && CC_IS_ALLOC(h)) { /* an open owning buffer: as the Python function's common case */
            PyObject *r = NULL;
            if (!slot_set(self, CLOSE_H, buf, Py_None) && !slot_set(self, CLOSE_PTR, buf, Py_None) &&
                !slot_set(self, CLOSE_MR, buf, Py_None)) {
                r = cc_alloc_close((cc_alloc *)h);
            }
            Py_DECREF(h);
            return r;
        }
        Py_XDECREF(h);
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* AllocEntry(fallback, resource_type, pool_slot, stream_type, stream_slot, buffer_type, h_slot,
 * ptr_slot, size_slot, mr_slot) */
static PyObject *
aentry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *a[9];
    PyTypeObject *T = &PyType_Type, *M = &PyMemberDescr_Type;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "AllocEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!O!O!O!O!:AllocEntry", &fallback, T, &a[0], M, &a[1], T, &a[2], M, &a[3], T,
                          &a[4], M, &a[5], M, &a[6], M, &a[7], M, &a[8])) {
        return NULL;
    }
    PyObject *const types[3] = {a[0], a[2], a[4]}, *const slots[6] = {a[1], a[3], a[5], a[6], a[7], a[8]};
    static const int slot_type[6] = {0, 1, 2, 2, 2, 2};
    return cc_method_entry_new(cls, "AllocEntry", aentry_vectorcall, fallback, 3, types, 6, slots, slot_type);
}

/* CloseEntry(fallback, buffer_type, h_slot, ptr_slot, mr_slot) */
static PyObject *
centry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *a[4];
    PyTypeObject *M = &PyMemberDescr_Type;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "CloseEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!:CloseEntry", &fallback, &PyType_Type, &a[0], M, &a[1], M, &a[2], M,
                          &a[3])) {
        return NULL;
    }
    PyObject *const types[1] = {a[0]}, *const slots[3] = {a[1], a[2], a[3]};
    static const int slot_type[3] = {0, 0, 0};
    return cc_method_entry_new(cls, "CloseEntry", centry_vectorcall, fallback, 1, types, 3, slots, slot_type);
}

PyTypeObject cc_AllocEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.AllocEntry",
    CC_METHOD_ENTRY_TYPE_SLOTS(cc_method_entry),
    .tp_doc = "AllocEntry(fallback, resource_type, pool_slot, stream_type, stream_slot, buffer_type, h_slot, "
              "ptr_slot, size_slot, mr_slot): mr.allocate(size, stream=s) in C for a resource of the exact type, a "
              "size above zero and a stream that knows its context, fallback(...) for anything else",
    .tp_new = aentry_new,
};

PyTypeObject cc_CloseEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.CloseEntry",
    CC_METHOD_ENTRY_TYPE_SLOTS(cc_method_entry),
    .tp_doc = "CloseEntry(fallback, buffer_type, h_slot, ptr_slot, mr_slot): buf.close() in C for a buffer of the "
              "exact type that owns a pool allocation, fallback(...) for anything else",
    .tp_new = centry_new,
};

int
cc_entry_alloc_init(PyObject *module)
{
    static PyTypeObject *types[] = {&cc_AllocEntry_Type, &cc_CloseEntry_Type};
    static const char *names[] = {"AllocEntry", "CloseEntry"};
    return cc_add_types(module, types, names, 2);
}
