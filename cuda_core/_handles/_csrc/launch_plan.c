/* cuda_core._handles._native: LaunchPlan, the packing of one tuple of argument types for one kernel,
 * done in C (see launch.h): the type, its parameter storage, and its launch. How each value
 * becomes bytes is launch_pack.c. */
#include "launch.h"
#include <structmember.h>

static const char *const kind_names[CC_N_ARG_KINDS] = {
    "fit", "signed", "unsigned", "float", "complex", "bool", "bytes", "call_index", "call_bytes",
};

/* A parameter buffer: the bytes (64-byte aligned, for CUtensorMap; zeroed) and the void* array
 * pointing at each parameter. NULL with MemoryError set. */
char *
cc_plan_new_storage(const cc_plan *plan, char **bytes, void ***params)
{
    size_t n = (size_t)plan->nargs;
    size_t at = (plan->size + 7) & ~(size_t)7;
    char *raw = PyMem_Calloc(1, 64 + at + n * sizeof(void *) + 8);
    if (raw == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    char *b = (char *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    void **p = (void **)(b + at);
    for (size_t i = 0; i < n; i++) {
        p[i] = b + plan->args[i].offset;
    }
    *bytes = b;
    *params = p;
    return raw;
}

/* ------------------------------------------------------------------------------------------
 * The type. */

static int
parse_arg(cc_plan *self, Py_ssize_t i, PyObject *type, PyObject *kind, PyObject *offset, PyObject *size,
          PyObject *getter)
{
    cc_arg *d = &self->args[i];
    long k = PyLong_AsLong(kind);
    size_t off = PyLong_AsSize_t(offset);
    unsigned long sz = PyLong_AsUnsignedLong(size);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyType_Check(type) || k < 0 || k >= CC_N_ARG_KINDS) {
        PyErr_Format(PyExc_ValueError, "LaunchPlan: argument %zd has no type or an unknown kind", i);
        return -1;
    }
    int size_ok;
    switch (k) {
    case CC_ARG_FIT:
    case CC_ARG_SIGNED:
    case CC_ARG_UNSIGNED:
        size_ok = sz == 1 || sz == 2 || sz == 4 || sz == 8;
        break;
    case CC_ARG_FLOAT:
        size_ok = sz == 2 || sz == 4 || sz == 8;
        break;
    case CC_ARG_COMPLEX:
        size_ok = sz == 8 || sz == 16;
        break;
    case CC_ARG_BOOL:
        size_ok = sz == 1;
        break;
    case CC_ARG_CALL_INDEX:
        size_ok = sz == 8;
        break;
    default: /* the byte kinds: any size (an empty struct too) */
        size_ok = 1;
        break;
    }
    int calls = k == CC_ARG_CALL_INDEX || k == CC_ARG_CALL_BYTES;
    int slot = calls && PyObject_TypeCheck(getter, &PyMemberDescr_Type);
    if (!size_ok || off > self->size || sz > self->size - off || calls != (getter != Py_None) ||
        (calls && !slot && !PyCallable_Check(getter))) {
        PyErr_Format(PyExc_ValueError, "LaunchPlan: argument %zd (%s, %lu bytes at %zu) does not fit the plan", i,
                     kind_names[k], sz, off);
        return -1;
    }
    d->type = (PyTypeObject *)type;
    d->getter = calls ? Py_NewRef(getter) : NULL;
    d->offset = off;
    d->size = (unsigned int)sz;
    d->kind = (int)k;
    d->slot = (char)slot;
    PyBufferProcs *bp = ((PyTypeObject *)type)->tp_as_buffer;
    d->buffer = (char)((k == CC_ARG_SIGNED || k == CC_ARG_UNSIGNED || k == CC_ARG_BOOL ||
                        (k == CC_ARG_FLOAT && !PyType_IsSubtype((PyTypeObject *)type, &PyFloat_Type))) &&
                       bp != NULL && bp->bf_getbuffer != NULL);
    d->fast = CC_FAST_NONE;
    d->inline_ok = 0;
    d->member = NULL;
    d->last_int = NULL;
    d->last_addr = 0;
    PyTypeObject *t = (PyTypeObject *)type;
    if (k == CC_ARG_FLOAT && sz == 8 && PyType_IsSubtype(t, &PyFloat_Type)) { /* PyFloat_AsDouble reads ob_fval */
        d->fast = CC_FAST_F64;
    } else if (d->buffer && t->tp_itemsize == 0 && t->tp_basicsize >= (Py_ssize_t)(sizeof(PyObject) + sz)) {
        d->fast = CC_FAST_INLINE; /* confirmed (or given up) on the first value */
    } else if (k == CC_ARG_CALL_INDEX && slot) {
        PyMemberDef *m = ((PyMemberDescrObject *)getter)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED) && PyType_IsSubtype(t, PyDescr_TYPE(getter))) {
            d->fast = CC_FAST_SLOT;
            d->member = m; /* the descriptor (held in getter) owns it */
        }
    }
    return 0;
}

/* LaunchPlan(function, types, kinds, offsets, sizes, getters, size) */
static PyObject *
plan_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"function", "types", "kinds", "offsets", "sizes", "getters", "size", NULL};
    PyObject *function, *types, *kinds, *offsets, *sizes, *getters, *size;
    unsigned long long f;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!O!O!O!O!O:LaunchPlan", kwlist, &function, &PyTuple_Type, &types,
                                     &PyTuple_Type, &kinds, &PyTuple_Type, &offsets, &PyTuple_Type, &sizes,
                                     &PyTuple_Type, &getters, &size) ||
        cc_int_address(function, &f)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(types);
    if (PyTuple_GET_SIZE(kinds) != n || PyTuple_GET_SIZE(offsets) != n || PyTuple_GET_SIZE(sizes) != n ||
        PyTuple_GET_SIZE(getters) != n) {
        PyErr_SetString(PyExc_ValueError, "LaunchPlan: types, kinds, offsets, sizes and getters differ in length");
        return NULL;
    }
    size_t total = PyLong_AsSize_t(size);
    if (total == (size_t)-1 && PyErr_Occurred()) {
        return NULL;
    }
    cc_plan *self = PyObject_GC_New(cc_plan, cls);
    if (self == NULL) {
        return NULL;
    }
    self->function = (void *)(uintptr_t)f;
    self->types = Py_NewRef(types);
    self->nargs = n;
    self->size = total;
    self->storage = NULL;
    self->busy = 0;
    self->dense_f64 = 0;
    self->dense_type = NULL;
    self->args = PyMem_Calloc((size_t)(n ? n : 1), sizeof(cc_arg));
    if (self->args == NULL) {
        self->nargs = 0;
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (parse_arg(self, i, PyTuple_GET_ITEM(types, i), PyTuple_GET_ITEM(kinds, i), PyTuple_GET_ITEM(offsets, i),
                      PyTuple_GET_ITEM(sizes, i), PyTuple_GET_ITEM(getters, i)) < 0) {
            Py_DECREF(self);
            return NULL;
        }
    }
    self->dense_f64 = n > 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (self->args[i].fast != CC_FAST_F64 || self->args[i].offset != 8 * (size_t)i) {
            self->dense_f64 = 0;
            break;
        }
    }
    if (self->dense_f64) {
        self->dense_type = (PyTypeObject *)PyTuple_GET_ITEM(types, 0);
        for (Py_ssize_t i = 1; i < n && self->dense_type != NULL; i++) {
            if (PyTuple_GET_ITEM(types, i) != (PyObject *)self->dense_type) {
                self->dense_type = NULL;
            }
        }
    }
    self->storage = cc_plan_new_storage(self, &self->bytes, &self->params);
    if (self->storage == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
plan_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_plan *self = (cc_plan *)op;
    Py_VISIT(self->types);
    for (Py_ssize_t i = 0; self->args != NULL && i < self->nargs; i++) {
        Py_VISIT(self->args[i].getter);
    }
    return 0;
}

static int
plan_clear(PyObject *op)
{
    cc_plan *self = (cc_plan *)op;
    for (Py_ssize_t i = 0; self->args != NULL && i < self->nargs; i++) {
        Py_CLEAR(self->args[i].getter);
        Py_CLEAR(self->args[i].last_int);
    }
    self->dense_type = NULL; /* borrowed from types */
    Py_CLEAR(self->types);
    return 0;
}

static void
plan_dealloc(PyObject *op)
{
    cc_plan *self = (cc_plan *)op;
    PyObject_GC_UnTrack(op);
    plan_clear(op);
    PyMem_Free(self->args);
    PyMem_Free(self->storage);
    PyObject_GC_Del(op);
}

/* pack(args) -> bytes: the parameter bytes a launch with args hands the driver (a check of the
 * packing that needs no driver). */
static PyObject *
plan_pack(PyObject *op, PyObject *args)
{
    cc_plan *self = (cc_plan *)op;
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "pack(args): args must be a tuple");
        return NULL;
    }
    Py_INCREF(args); /* its items stay alive while packing runs Python code */
    PyObject *out = NULL;
    if (!cc_plan_matches(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args))) {
        PyErr_SetString(PyExc_TypeError, "pack(args): the arguments are not of the plan's types");
    } else {
        char *bytes;
        void **params;
        char *raw = cc_plan_new_storage(self, &bytes, &params);
        if (raw != NULL && cc_plan_pack(self, &PyTuple_GET_ITEM(args, 0), bytes) == 0) {
            out = PyBytes_FromStringAndSize(bytes, (Py_ssize_t)self->size);
        }
        PyMem_Free(raw);
    }
    Py_DECREF(args);
    return out;
}

static PyObject *
plan_repr(PyObject *op)
{
    cc_plan *self = (cc_plan *)op;
    return PyUnicode_FromFormat("<LaunchPlan function=%p %zd args, %zu bytes>", self->function, self->nargs,
                                self->size);
}

static PyObject *
plan_get_function(PyObject *op, void *closure)
{
    return PyLong_FromVoidPtr(((cc_plan *)op)->function);
}

static PyObject *
plan_get_types(PyObject *op, void *closure)
{
    return Py_NewRef(((cc_plan *)op)->types);
}

static PyObject *
plan_get_size(PyObject *op, void *closure)
{
    return PyLong_FromSize_t(((cc_plan *)op)->size);
}

static PyMethodDef plan_methods[] = {
    {"pack", plan_pack, METH_O, "pack(args) -> the parameter bytes a launch with args hands the driver"},
    {NULL, NULL, 0, NULL},
};

/* shortcuts: per argument, the shortcut its packing takes ("" none, "f64", "slot", "inline" once
 * confirmed, "inline?" before the first value, "inline-off" where it was refused). */
static PyObject *
plan_get_shortcuts(PyObject *op, void *closure)
{
    cc_plan *self = (cc_plan *)op;
    PyObject *out = PyTuple_New(self->nargs);
    for (Py_ssize_t i = 0; out != NULL && i < self->nargs; i++) {
        const cc_arg *d = &self->args[i];
        const char *name = d->fast == CC_FAST_F64    ? "f64"
                           : d->fast == CC_FAST_SLOT ? "slot"
                           : d->fast != CC_FAST_INLINE ? ""
                           : d->inline_ok > 0        ? "inline"
                           : d->inline_ok < 0        ? "inline-off"
                                                     : "inline?";
        PyObject *v = PyUnicode_FromString(name);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static PyGetSetDef plan_getset[] = {
    {"function", plan_get_function, NULL, "the CUfunction address launches call", NULL},
    {"shortcuts", plan_get_shortcuts, NULL, "per argument, the shortcut its packing takes (for tests)", NULL},
    {"types", plan_get_types, NULL, "the exact type of each argument", NULL},
    {"size", plan_get_size, NULL, "bytes of the packed parameters", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cc_LaunchPlan_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.LaunchPlan",
    .tp_basicsize = sizeof(cc_plan),
    .tp_dealloc = plan_dealloc,
    .tp_repr = plan_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "LaunchPlan(function, types, kinds, offsets, sizes, getters, size): how arguments of these exact "
              "types pack, in C, for one kernel (kinds: indices into ARG_KINDS)",
    .tp_traverse = plan_traverse,
    .tp_clear = plan_clear,
    .tp_methods = plan_methods,
    .tp_getset = plan_getset,
    .tp_new = plan_new,
};

PyObject *
cc_arg_kind_names(void)
{
    PyObject *out = PyTuple_New(CC_N_ARG_KINDS);
    for (int i = 0; out != NULL && i < CC_N_ARG_KINDS; i++) {
        PyObject *s = PyUnicode_FromString(kind_names[i]);
        if (s == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, s);
    }
    return out;
}
