/* cuda_core._handles._native: what the interop files share (see native.h for the module's rules). */
#ifndef CUDA_CORE_INTEROP_H
#define CUDA_CORE_INTEROP_H

#include "native.h"

/* The fields of a strided view: the C base of StridedMemoryView (interop_view.c). */
typedef struct {
    PyObject_HEAD
    PyObject *ptr, *shape, *raw_strides, *dtype, *device_id, *accessible, *readonly, *exporting,
        *capsule, *devtype;
    PyObject *weakrefs;
} ViewInfo;

extern PyTypeObject cc_ViewInfoType;

/* A new instance of cls (ViewInfo or a subclass); every field reference is stolen (NULL fields
 * make the call fail after releasing the others). */
PyObject *cc_make_view(PyObject *cls, PyObject *ptr, PyObject *shape, PyObject *raw_strides, PyObject *dtype,
                       PyObject *device_id, int accessible, int readonly, PyObject *exporting, PyObject *capsule,
                       long devtype);
/* 0 when cls is ViewInfo or a subclass, else -1 with TypeError set. */
int cc_check_view_cls(PyObject *cls);

/* dlpack_view(cls, obj, stream_ptr): a view of a DLPack producer (interop.c). */
PyObject *cc_dlpack_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* torch_view(cls, tensor, stream_ptr): a view of an exact torch.Tensor, or NotImplemented (a new
 * reference) where the Python reader decides; NULL with an exception. */
PyObject *cc_torch_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* ViewEntry (interop_entry.c): the C entry of StridedMemoryView.from_dlpack. */
extern PyTypeObject cc_ViewEntry_Type;

#endif
