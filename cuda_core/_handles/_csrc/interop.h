/* cuda_core._handles._native: what the interop files share (see native.h for the module's rules). */
#ifndef CUDA_CORE_INTEROP_H
#define CUDA_CORE_INTEROP_H

#include "native.h"

/* The fields of a strided view: the C base of StridedMemoryView (interop_view.c). */
#define CC_VIEW_INLINE_NDIM 4
typedef struct {
    PyObject_HEAD
    PyObject *ptr, *shape, *raw_strides, *dtype, *device_id, *accessible, *readonly, *exporting,
        *capsule, *devtype;
    PyObject *weakrefs;
    /* A reader's view of a tensor of at most CC_VIEW_INLINE_NDIM dimensions keeps its address,
     * shape and strides here, and makes ptr, shape and raw_strides (NULL until then) on their
     * first read, as cuda.core 1.2's view does: a view that is made and dropped makes no int or
     * tuple. lazy says which fields are still to be made; a write (or a delete) of a field clears
     * its bit. */
    unsigned char lazy;
    unsigned char ndim;
    uint64_t addr;
    int64_t extents[2 * CC_VIEW_INLINE_NDIM]; /* the shape, then the strides */
} ViewInfo;
#define CC_VIEW_LAZY_PTR 1
#define CC_VIEW_LAZY_SHAPE 2
#define CC_VIEW_LAZY_STRIDES 4 /* strides from extents; a view with no strides has None instead */

extern PyTypeObject cc_ViewInfoType;

/* A new instance of cls (ViewInfo or a subclass); every field reference is stolen (NULL fields
 * make the call fail after releasing the others). */
PyObject *cc_make_view(PyObject *cls, PyObject *ptr, PyObject *shape, PyObject *raw_strides, PyObject *dtype,
                       PyObject *device_id, int accessible, int readonly, PyObject *exporting, PyObject *capsule,
                       long devtype);
/* The same, with ptr, shape and raw_strides made on first read from addr, shape and strides
 * (NULL: None) of ndim <= CC_VIEW_INLINE_NDIM dimensions; the other references are stolen. */
PyObject *cc_make_lazy_view(PyObject *cls, uint64_t addr, int ndim, const int64_t *shape, const int64_t *strides,
                            PyObject *dtype, PyObject *device_id, int accessible, int readonly, PyObject *exporting,
                            PyObject *capsule, long devtype);
/* The tuple of n int64 values (a shape or strides), or NULL with the error set. */
PyObject *cc_int64_tuple(const int64_t *x, int n);
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
