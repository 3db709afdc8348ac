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

/* ------------------------------------------------------------------------------------------
 * ClassMethod(func): a classmethod (a subclass: isinstance, __func__, __wrapped__, __doc__ and
 * inspect see one) that keeps the method it made for the last class it was read from and gives
 * it again. A bound method never changes, so one serves every read of cls.name; classmethod
 * makes and frees one per read (cls.from_dlpack(...) is a hot call). Its fields follow
 * classmethod's, whose size is known only at run time (the type is made from a spec). */

typedef struct {
    PyObject *func;  /* what __init__ was given (classmethod keeps its own reference too) */
    PyObject *cls;   /* the class of bound, or NULL */
    PyObject *bound; /* PyMethod(func, cls) */
} cm_fields;

static Py_ssize_t cm_offset; /* classmethod's basic size: where cm_fields begins */
#define CM(op) ((cm_fields *)((char *)(op) + cm_offset))

static PyObject *
cm_get(PyObject *op, PyObject *obj, PyObject *type)
{
    cm_fields *f = CM(op);
    PyObject *cls = type != NULL ? type : (PyObject *)Py_TYPE(obj);
    if (f->func == NULL) { /* __init__ not run: classmethod's own answer */
        return PyClassMethod_Type.tp_descr_get(op, obj, type);
    }
    if (cls != f->cls) {
        PyObject *bound = PyMethod_New(f->func, cls);
        if (bound == NULL) {
            return NULL;
        }
        PyObject *old_cls = f->cls, *old = f->bound;
        f->cls = Py_NewRef(cls);
        f->bound = bound;
        Py_XDECREF(old_cls); /* may run code that reads this descriptor: the new pair is set */
        Py_XDECREF(old);
    }
    return Py_NewRef(f->bound);
}

static int
cm_init(PyObject *op, PyObject *args, PyObject *kwds)
{
    PyObject *func;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "ClassMethod takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O:ClassMethod", &func)) {
        return -1;
    }
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError, "ClassMethod: %R is not callable", func);
        return -1;
    }
    if (PyClassMethod_Type.tp_init(op, args, NULL) < 0) {
        return -1;
    }
    cm_fields *f = CM(op);
    PyObject *old_func = f->func, *old_cls = f->cls, *old = f->bound;
    f->func = Py_NewRef(func);
    f->cls = f->bound = NULL;
    Py_XDECREF(old_func);
    Py_XDECREF(old_cls);
    Py_XDECREF(old);
    return 0;
}

static int
cm_traverse(PyObject *op, visitproc visit, void *arg)
{
    cm_fields *f = CM(op);
    Py_VISIT(Py_TYPE(op)); /* a heap type's instance holds its type */
    Py_VISIT(f->func);
    Py_VISIT(f->cls);
    Py_VISIT(f->bound);
    return PyClassMethod_Type.tp_traverse(op, visit, arg);
}

static int
cm_clear(PyObject *op)
{
    cm_fields *f = CM(op);
    Py_CLEAR(f->bound);
    Py_CLEAR(f->cls);
    Py_CLEAR(f->func);
    return PyClassMethod_Type.tp_clear(op);
}

/* As CPython's subtype_dealloc: untracked while its own fields go (their release may run a
 * collection), tracked again for classmethod's dealloc, which untracks, releases its fields
 * and frees. */
static void
cm_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    cm_fields *f = CM(op);
    PyObject_GC_UnTrack(op);
    Py_CLEAR(f->bound);
    Py_CLEAR(f->cls);
    Py_CLEAR(f->func);
    PyObject_GC_Track(op);
    PyClassMethod_Type.tp_dealloc(op);
    Py_DECREF(tp);
}

int
cc_class_method_init(PyObject *module)
{
    cm_offset = PyClassMethod_Type.tp_basicsize;
    PyType_Slot slots[] = {
        {Py_tp_init, cm_init},
        {Py_tp_descr_get, cm_get},
        {Py_tp_traverse, cm_traverse},
        {Py_tp_clear, cm_clear},
        {Py_tp_dealloc, cm_dealloc},
        {Py_tp_doc, "ClassMethod(func): classmethod(func) that keeps the method it made for the last class it was "
                    "read from and gives it again"},
        {0, NULL},
    };
    PyType_Spec spec = {
        .name = "cuda_core._handles._native.ClassMethod",
        .basicsize = (int)(cm_offset + (Py_ssize_t)sizeof(cm_fields)),
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
        .slots = slots,
    };
    PyObject *type = PyType_FromSpecWithBases(&spec, (PyObject *)&PyClassMethod_Type);
    if (type == NULL) {
        return -1;
    }
    int err = PyModule_AddObjectRef(module, "ClassMethod", type);
    Py_DECREF(type);
    return err;
}
