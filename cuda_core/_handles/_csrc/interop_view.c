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

/* strides: the strides in elements as the producer gave them (cuda.core 1.2's rule), None when
 * it gave none; C-contiguous strides are reported as given, not replaced by None. */
static PyObject *
vi_strides(ViewInfo *v, void *closure)
{
    if (v->raw_strides == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the view's strides are not set");
        return NULL;
    }
    return Py_NewRef(v->raw_strides);
}

#define MEMBER(name, field) {name, T_OBJECT_EX, offsetof(ViewInfo, field), 0, NULL}
static PyMemberDef vi_members[] = {
    MEMBER("ptr", ptr),
    MEMBER("shape", shape),
    MEMBER("_raw_strides", raw_strides),
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

static PyGetSetDef vi_getset[] = {
    {"strides", (getter)vi_strides, NULL, "Strides in elements as the producer gave them, or None when it gave none.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

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

/* A new instance of cls (ViewInfo or a subclass); every field reference is stolen (NULL fields
 * make the call fail after releasing the others). */
PyObject *
cc_make_view(PyObject *cls, PyObject *ptr, PyObject *shape, PyObject *raw_strides, PyObject *dtype, PyObject *device_id,
          int accessible, int readonly, PyObject *exporting, PyObject *capsule, long devtype)
{
    PyObject *dt = PyLong_FromLong(devtype);
    ViewInfo *v = NULL;
    if (ptr && shape && raw_strides && dtype && device_id && dt) {
        v = (ViewInfo *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    }
    if (v == NULL) {
        Py_XDECREF(ptr);
        Py_XDECREF(shape);
        Py_XDECREF(raw_strides);
        Py_XDECREF(dtype);
        Py_XDECREF(device_id);
        Py_XDECREF(dt);
        return NULL;
    }
    v->ptr = ptr;
    v->shape = shape;
    v->raw_strides = raw_strides;
    v->dtype = dtype;
    v->device_id = device_id;
    v->accessible = PyBool_FromLong(accessible);
    v->readonly = PyBool_FromLong(readonly);
    v->exporting = Py_NewRef(exporting);
    v->capsule = Py_NewRef(capsule);
    v->devtype = dt;
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

