/* cuda_core._handles._native: ViewInfo, the C base of StridedMemoryView (fields owned here). */
#include "interop.h"
#include <structmember.h>

static int
vi_traverse(ViewInfo *v, visitproc visit, void *arg)
{
    Py_VISIT(v->ptr);
    Py_VISIT(v->shape);
    Py_VISIT(v->raw_strides);
    Py_VISIT(v->dtype);
    Py_VISIT(v->device_id);
    Py_VISIT(v->accessible);
    Py_VISIT(v->readonly);
    Py_VISIT(v->exporting);
    Py_VISIT(v->capsule);
    Py_VISIT(v->devtype);
    return 0;
}

static int
vi_clear(ViewInfo *v)
{
    Py_CLEAR(v->ptr);
    Py_CLEAR(v->shape);
    Py_CLEAR(v->raw_strides);
    Py_CLEAR(v->dtype);
    Py_CLEAR(v->device_id);
    Py_CLEAR(v->accessible);
    Py_CLEAR(v->readonly);
    Py_CLEAR(v->exporting);
    Py_CLEAR(v->capsule);
    Py_CLEAR(v->devtype);
    return 0;
}

static void
vi_dealloc(ViewInfo *v)
{
    PyObject_GC_UnTrack(v);
    if (v->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)v);
    }
    vi_clear(v);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* ptr, shape and raw_strides: made from the inline fields on first read (see ViewInfo). */
static const char *const lazy_names[] = {"ptr", "shape", "_raw_strides"};

static PyObject **
lazy_slot(ViewInfo *v, int bit)
{
    return bit == CC_VIEW_LAZY_PTR ? &v->ptr : bit == CC_VIEW_LAZY_SHAPE ? &v->shape : &v->raw_strides;
}

static const char *
lazy_name(int bit)
{
    return lazy_names[bit == CC_VIEW_LAZY_PTR ? 0 : bit == CC_VIEW_LAZY_SHAPE ? 1 : 2];
}

PyObject *
cc_int64_tuple(const int64_t *x, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *e = PyLong_FromLongLong(x[i]);
        if (e == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, e);
    }
    return t;
}

/* The field's value (a new reference), made now if it is still lazy; NULL with AttributeError
 * when unset (as a T_OBJECT_EX member says) or the error of making it. */
static PyObject *
lazy_get(ViewInfo *v, int bit)
{
    PyObject **slot = lazy_slot(v, bit);
    if (v->lazy & bit) {
        PyObject *x = bit == CC_VIEW_LAZY_PTR ? PyLong_FromUnsignedLongLong(v->addr)
                                               : cc_int64_tuple(v->extents + (bit == CC_VIEW_LAZY_STRIDES ? v->ndim : 0), v->ndim);
        if (x == NULL) {
            return NULL;
        }
        if (v->lazy & bit) { /* else a write won while the allocation ran a finalizer */
            Py_XSETREF(*slot, x);
            v->lazy &= (unsigned char)~bit;
        } else {
            Py_DECREF(x);
        }
    }
    if (*slot == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(v)->tp_name, lazy_name(bit));
        return NULL;
    }
    return Py_NewRef(*slot);
}

static PyObject *
vi_lazy_get(ViewInfo *v, void *closure)
{
    return lazy_get(v, (int)(intptr_t)closure);
}

/* A write or a delete replaces what the field would have been made from. */
static int
vi_lazy_set(ViewInfo *v, PyObject *value, void *closure)
{
    int bit = (int)(intptr_t)closure;
    PyObject **slot = lazy_slot(v, bit);
    if (value == NULL && *slot == NULL && !(v->lazy & bit)) {
        PyErr_Format(PyExc_AttributeError, "'%.200s' object has no attribute '%s'", Py_TYPE(v)->tp_name, lazy_name(bit));
        return -1;
    }
    v->lazy &= (unsigned char)~bit;
    Py_XSETREF(*slot, Py_XNewRef(value));
    return 0;
}

/* strides: the strides in elements as the producer gave them (cuda.core 1.2's rule), None when
 * it gave none; C-contiguous strides are reported as given, not replaced by None. */
static PyObject *
vi_strides(ViewInfo *v, void *closure)
{
    if (v->raw_strides == NULL && !(v->lazy & CC_VIEW_LAZY_STRIDES)) {
        PyErr_SetString(PyExc_AttributeError, "the view's strides are not set");
        return NULL;
    }
    return lazy_get(v, CC_VIEW_LAZY_STRIDES);
}

#define MEMBER(name, field) {name, T_OBJECT_EX, offsetof(ViewInfo, field), 0, NULL}
static PyMemberDef vi_members[] = {
    MEMBER("_dtype", dtype),
    MEMBER("device_id", device_id),
    MEMBER("is_device_accessible", accessible),
    MEMBER("readonly", readonly),
    MEMBER("exporting_obj", exporting),
    MEMBER("_capsule", capsule),
    MEMBER("_dl_device_type", devtype),
    {NULL, 0, 0, 0, NULL},
};
#undef MEMBER

#define LAZY(name, bit, doc) {name, (getter)vi_lazy_get, (setter)vi_lazy_set, doc, (void *)(intptr_t)(bit)}
static PyGetSetDef vi_getset[] = {
    LAZY("ptr", CC_VIEW_LAZY_PTR, "The address of the first element."),
    LAZY("shape", CC_VIEW_LAZY_SHAPE, "The extent of each dimension."),
    LAZY("_raw_strides", CC_VIEW_LAZY_STRIDES, "Strides in elements as the producer gave them, or None."),
    {"strides", (getter)vi_strides, NULL, "Strides in elements as the producer gave them, or None when it gave none.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
#undef LAZY

PyTypeObject cc_ViewInfoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.ViewInfo",
    .tp_basicsize = sizeof(ViewInfo),
    .tp_dealloc = (destructor)vi_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a strided view (the base of StridedMemoryView).",
    .tp_traverse = (traverseproc)vi_traverse,
    .tp_clear = (inquiry)vi_clear,
    .tp_weaklistoffset = offsetof(ViewInfo, weakrefs),
    .tp_members = vi_members,
    .tp_getset = vi_getset,
    .tp_new = PyType_GenericNew,
};

/* A new instance of cls with the fields other than ptr, shape and raw_strides (NULL, not lazy);
 * the references are stolen, and released when it fails. */
static ViewInfo *
view_new(PyObject *cls, PyObject *dtype, PyObject *device_id, int accessible, int readonly, PyObject *exporting,
         PyObject *capsule, long devtype)
{
    PyObject *dt = PyLong_FromLong(devtype);
    ViewInfo *v = NULL;
    if (dtype && device_id && dt) {
        v = (ViewInfo *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0); /* zeroed */
    }
    if (v == NULL) {
        Py_XDECREF(dtype);
        Py_XDECREF(device_id);
        Py_XDECREF(dt);
        return NULL;
    }
    v->dtype = dtype;
    v->device_id = device_id;
    v->accessible = PyBool_FromLong(accessible);
    v->readonly = PyBool_FromLong(readonly);
    v->exporting = Py_NewRef(exporting);
    v->capsule = Py_NewRef(capsule);
    v->devtype = dt;
    return v;
}

PyObject *
cc_make_view(PyObject *cls, PyObject *ptr, PyObject *shape, PyObject *raw_strides, PyObject *dtype, PyObject *device_id,
             int accessible, int readonly, PyObject *exporting, PyObject *capsule, long devtype)
{
    ViewInfo *v = NULL;
    if (ptr && shape && raw_strides) {
        v = view_new(cls, dtype, device_id, accessible, readonly, exporting, capsule, devtype);
    } else {
        Py_XDECREF(dtype);
        Py_XDECREF(device_id);
    }
    if (v == NULL) {
        Py_XDECREF(ptr);
        Py_XDECREF(shape);
        Py_XDECREF(raw_strides);
        return NULL;
    }
    v->ptr = ptr;
    v->shape = shape;
    v->raw_strides = raw_strides;
    return (PyObject *)v;
}

PyObject *
cc_make_lazy_view(PyObject *cls, uint64_t addr, int ndim, const int64_t *shape, const int64_t *strides,
                  PyObject *dtype, PyObject *device_id, int accessible, int readonly, PyObject *exporting,
                  PyObject *capsule, long devtype)
{
    assert(ndim >= 0 && ndim <= CC_VIEW_INLINE_NDIM);
    ViewInfo *v = view_new(cls, dtype, device_id, accessible, readonly, exporting, capsule, devtype);
    if (v == NULL) {
        return NULL;
    }
    v->addr = addr;
    v->ndim = (unsigned char)ndim;
    if (ndim > 0) { /* a 0-d tensor's shape may be NULL */
        memcpy(v->extents, shape, (size_t)ndim * sizeof(int64_t));
    }
    v->lazy = CC_VIEW_LAZY_PTR | CC_VIEW_LAZY_SHAPE;
    if (strides != NULL) {
        if (ndim > 0) {
            memcpy(v->extents + ndim, strides, (size_t)ndim * sizeof(int64_t));
        }
        v->lazy |= CC_VIEW_LAZY_STRIDES;
    } else {
        v->raw_strides = Py_NewRef(Py_None);
    }
    return (PyObject *)v;
}

int
cc_check_view_cls(PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &cc_ViewInfoType)) {
        PyErr_Format(PyExc_TypeError, "cls must be a subclass of ViewInfo (got %R)", cls);
        return -1;
    }
    return 0;
}

