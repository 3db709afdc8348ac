/* cuda_core._handles._native: ViewEntry, the C entry of StridedMemoryView.from_dlpack.
 *
 * ViewEntry(fallback, kinds, dlpack_kind, torch_kind) is called as from_dlpack(cls, obj,
 * stream_ptr) (a classmethod binds cls; stream_ptr given by position or by keyword). Where
 * stream_ptr is an int and kinds (the dict Python keeps of the producer types it has classified)
 * says obj's type is a plain DLPack producer, it reads the producer in C (cc_dlpack_view), and
 * exactly torch.Tensor through PyTorch's exchange API (cc_torch_view), without a Python frame.
 * Every other call, every tensor the torch reader declines, and every type not classified yet,
 * goes to fallback (the Python from_dlpack), which owns the checks, the classification and the
 * messages. */
#include "entry.h"
#include "interop.h"

typedef struct {
    CC_ENTRY_HEAD     /* fallback(cls, obj, stream_ptr=None): from_dlpack in Python */
    PyObject *kinds;  /* dict: producer type -> kind (int) */
    long dlpack_kind;   /* the kind read by cc_dlpack_view */
    long torch_kind;    /* the kind read by cc_torch_view (exactly torch.Tensor) */
} cc_ventry;

/* Whether a keyword is "stream_ptr" (keywords are interned: a pointer compare first). */
static int
is_stream_ptr(PyObject *name)
{
    static PyObject *interned;
    if (interned == NULL) {
        interned = PyUnicode_InternFromString("stream_ptr"); /* kept for the process */
        if (interned == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    return name == interned || (PyUnicode_Check(name) && PyUnicode_Compare(name, interned) == 0);
}

static PyObject *
ventry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_ventry *self = (cc_ventry *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && n == 2 && PyTuple_GET_SIZE(kwnames) == 1 && is_stream_ptr(PyTuple_GET_ITEM(kwnames, 0))) {
        n = 3; /* from_dlpack(obj, stream_ptr=...): its value follows the positional ones, as args[2] */
    } else if (kwnames != NULL) {
        n = -1;
    }
    if (n == 3 && PyLong_CheckExact(args[2])) {
        PyObject *kind = PyDict_GetItemWithError(self->kinds, (PyObject *)Py_TYPE(args[1])); /* borrowed */
        long k = kind != NULL && PyLong_CheckExact(kind) ? PyLong_AsLong(kind) : -1;
        if (k == self->dlpack_kind) {
            return cc_dlpack_view(NULL, args, 3);
        }
        if (k == self->torch_kind) {
            PyObject *view = cc_torch_view(NULL, args, 3);
            if (view != Py_NotImplemented) {
                return view; /* the view, or NULL with the reader's error */
            }
            Py_DECREF(view); /* declined: the Python reader decides */
        }
        if (kind == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* ViewEntry(fallback, kinds, dlpack_kind, torch_kind) */
static PyObject *
ventry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *kinds;
    long dlpack_kind, torch_kind;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "ViewEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!ll:ViewEntry", &fallback, &PyDict_Type, &kinds, &dlpack_kind, &torch_kind)) {
        return NULL;
    }
    cc_ventry *self = PyObject_GC_New(cc_ventry, cls);
    if (self == NULL) {
        return NULL;
    }
    self->kinds = NULL;
    if (cc_entry_init((PyObject *)self, "ViewEntry", fallback, ventry_vectorcall) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->kinds = Py_NewRef(kinds);
    self->dlpack_kind = dlpack_kind;
    self->torch_kind = torch_kind;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
ventry_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((cc_ventry *)op)->kinds);
    return cc_entry_traverse(op, visit, arg);
}

static int
ventry_clear(PyObject *op)
{
    cc_entry_clear(op);
    Py_CLEAR(((cc_ventry *)op)->kinds);
    return 0;
}

PyTypeObject cc_ViewEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.ViewEntry",
    CC_ENTRY_TYPE_SLOTS(cc_ventry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "ViewEntry(fallback, kinds, dlpack_kind, torch_kind): from_dlpack(cls, obj, stream_ptr) in C for a DLPack "
              "producer type kinds names, fallback(...) for anything else",
    .tp_traverse = ventry_traverse,
    .tp_clear = ventry_clear,
    .tp_new = ventry_new,
};
