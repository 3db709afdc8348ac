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

PyMemberDef *
cc_plain_member(PyObject *descr)
{
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        return NULL;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED) ? m : NULL;
}
