/* cuda_core._handles._native: what the C entries share (see entry.h). */
#include "entry.h"

PyGetSetDef cc_entry_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int
cc_entry_init(PyObject *op, const char *name, PyObject *fallback, vectorcallfunc call)
{
    cc_entry_head *e = (cc_entry_head *)op;
    e->vectorcall = call;
    e->dict = NULL;
    e->weakrefs = NULL;
    e->fallback = NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_Format(PyExc_TypeError, "%s: fallback must be callable", name);
        return -1;
    }
    e->fallback = Py_NewRef(fallback);
    return 0;
}

int
cc_entry_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_entry_head *e = (cc_entry_head *)op;
    Py_VISIT(e->dict);
    Py_VISIT(e->fallback);
    return 0;
}

void
cc_entry_clear(PyObject *op)
{
    cc_entry_head *e = (cc_entry_head *)op;
    Py_CLEAR(e->dict);
    Py_CLEAR(e->fallback);
}

void
cc_entry_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    if (((cc_entry_head *)op)->weakrefs != NULL) {
        PyObject_ClearWeakRefs(op);
    }
    Py_TYPE(op)->tp_clear(op);
    PyObject_GC_Del(op);
}

PyObject *
cc_entry_repr(PyObject *op)
{
    const char *name = strrchr(Py_TYPE(op)->tp_name, '.');
    return PyUnicode_FromFormat("<%s of %R>", name ? name + 1 : Py_TYPE(op)->tp_name,
                                ((cc_entry_head *)op)->fallback);
}

PyObject *
cc_entry_fallback(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *fallback = ((cc_entry_head *)op)->fallback;
    if (fallback == NULL) { /* cleared by the garbage collector, which a finalizer may outlive */
        PyErr_SetString(PyExc_RuntimeError, "this C entry has been cleared");
        return NULL;
    }
    return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

int
cc_entry_is_stream_kw(PyObject *kw)
{
    static PyObject *stream_kw; /* "stream", interned (kept for the process) */
    if (stream_kw == NULL && (stream_kw = PyUnicode_InternFromString("stream")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return kw == stream_kw || (PyUnicode_Check(kw) && PyUnicode_Compare(kw, stream_kw) == 0);
}

PyMemberDef *
cc_plain_member(PyObject *descr)
{
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        return NULL;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED) ? m : NULL;
}

PyObject *
cc_method_entry_new(PyTypeObject *cls, const char *name, vectorcallfunc call, PyObject *fallback, int ntypes,
                    PyObject *const *types, int nslots, PyObject *const *slots, const int *slot_type)
{
    if (ntypes < 1 || ntypes > CC_ENTRY_TYPES || nslots < 0 || nslots > CC_ENTRY_SLOTS) {
        return PyErr_Format(PyExc_SystemError, "%s: too many types or slots", name);
    }
    for (int i = 0; i < ntypes; i++) {
        if (!PyType_Check(types[i])) {
            return PyErr_Format(PyExc_TypeError, "%s: a type was expected (got %R)", name, types[i]);
        }
    }
    for (int i = 0; i < nslots; i++) {
        if (slot_type[i] < 0 || slot_type[i] >= ntypes || !PyObject_TypeCheck(slots[i], &PyMemberDescr_Type) ||
            !PyType_IsSubtype((PyTypeObject *)types[slot_type[i]], PyDescr_TYPE(slots[i]))) {
            return PyErr_Format(PyExc_TypeError, "%s: each slot must be a member descriptor of its type", name);
        }
    }
    cc_method_entry *self = PyObject_GC_New(cc_method_entry, cls);
    if (self == NULL) {
        return NULL;
    }
    for (int i = 0; i < CC_ENTRY_TYPES; i++) {
        self->types[i] = NULL;
    }
    for (int i = 0; i < CC_ENTRY_SLOTS; i++) {
        self->slots[i] = NULL;
        self->members[i] = NULL;
    }
    if (cc_entry_init((PyObject *)self, name, fallback, call) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    for (int i = 0; i < ntypes; i++) {
        self->types[i] = Py_NewRef(types[i]);
    }
    for (int i = 0; i < nslots; i++) {
        self->slots[i] = Py_NewRef(slots[i]);
        self->members[i] = cc_plain_member(slots[i]);
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

int
cc_method_entry_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_method_entry *self = (cc_method_entry *)op;
    for (int i = 0; i < CC_ENTRY_TYPES; i++) {
        Py_VISIT(self->types[i]);
    }
    for (int i = 0; i < CC_ENTRY_SLOTS; i++) {
        Py_VISIT(self->slots[i]);
    }
    return cc_entry_traverse(op, visit, arg);
}

int
cc_method_entry_clear(PyObject *op)
{
    cc_method_entry *self = (cc_method_entry *)op;
    cc_entry_clear(op);
    for (int i = 0; i < CC_ENTRY_TYPES; i++) {
        Py_CLEAR(self->types[i]);
    }
    for (int i = 0; i < CC_ENTRY_SLOTS; i++) {
        Py_CLEAR(self->slots[i]);
    }
    return 0;
}

/* As a Python function: looked up on an instance, it binds to it. */
PyObject *
cc_method_entry_get(PyObject *op, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(op);
    }
    return PyMethod_New(op, obj);
}
