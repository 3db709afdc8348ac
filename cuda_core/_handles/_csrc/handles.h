/*
 * Internals shared by the handle files (handles_util.c, handles.c, handles_stream.c, handles_event.c,
 * handles_memory.c, handles_launch.c). cuda_core/_handles/_protocol.py states every behaviour here; the
 * pure-Python backend (cuda_core/_handles/_pure_*.py) is the reference implementation.
 *
 * Reference discipline: a handle holds strong references to the handles it depends on; a
 * method copies the raw addresses it needs into locals and holds a strong reference to every
 * object whose fields it reads after a driver call (the GIL is released during the call).
 * Releasing work (pooling, destroying, freeing) runs in tp_finalize, so the cyclic GC runs it
 * with every reference still in place, before any tp_clear.
 */
#ifndef CUDA_CORE_HANDLES_H
#define CUDA_CORE_HANDLES_H

#include "native.h"

#define CC_STREAM_POOL_CAP 32
#define CC_EVENT_POOL_CAP 64
#define CC_EVENT_INTERPROCESS 0x4 /* CU_EVENT_INTERPROCESS: such an event is never pooled */
#define CC_STREAM_LEGACY ((void *)(uintptr_t)1)
/* The default-stream tokens: NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) name the
 * default stream of whichever context is current on the calling thread. */
#define CC_IS_TOKEN(stream) ((uintptr_t)(stream) <= 2)

#if PY_VERSION_HEX >= 0x030D0000
#define CC_FINALIZING() Py_IsFinalizing()
#else
#define CC_FINALIZING() _Py_IsFinalizing()
#endif

/* Keep the exception in flight (if any) across work that may set and clear its own. */
#if PY_VERSION_HEX >= 0x030C0000
#define CC_SAVE_EXC(s) PyObject *s = PyErr_GetRaisedException()
#define CC_RESTORE_EXC(s) PyErr_SetRaisedException(s)
#else
#define CC_SAVE_EXC(s) \
    PyObject *s##_t, *s##_v, *s##_tb; \
    PyErr_Fetch(&s##_t, &s##_v, &s##_tb)
#define CC_RESTORE_EXC(s) PyErr_Restore(s##_t, s##_v, s##_tb)
#endif

/* Idle handles of one key: streams per (flags, priority), events per flags. */
typedef struct {
    unsigned int flags;
    int has_priority;
    int priority;
    int n;
    void *items[CC_STREAM_POOL_CAP];
} cc_stream_pool;

typedef struct {
    unsigned int flags;
    int n_clean;
    int n_recorded;
    void *clean[CC_EVENT_POOL_CAP];
    void *recorded[CC_EVENT_POOL_CAP];
} cc_event_pool;

typedef struct {
    PyObject_HEAD
    void *address;
    int device;
    unsigned long long id; /* the generation: cuCtxGetId as last checked */
    cc_stream_pool *streams;
    Py_ssize_t n_streams;
    cc_event_pool *events;
    Py_ssize_t n_events;
    PyObject *weakreflist;
} cc_ctx;

typedef struct {
    PyObject_HEAD
    void *address;
    cc_ctx *ctx;     /* NULL: None (a borrowed stream without context) */
    PyObject *owner; /* NULL: None */
    PyObject *weakreflist;
    unsigned long long gen;
    unsigned int flags;
    int priority;
    char has_priority;
    char owned;
    char released;
} cc_stream;

typedef struct {
    PyObject_HEAD
    void *address;
    cc_ctx *ctx; /* NULL only after tp_clear */
    PyObject *weakreflist;
    unsigned long long gen;
    unsigned int flags;
    char poolable;
    char recorded;
    char released;
} cc_event;

typedef struct {
    PyObject_HEAD
    unsigned long long ptr;
    size_t size;
    PyObject *free;   /* NULL: a pool allocation (cuMemFreeAsync on stream) */
    PyObject *stream; /* NULL: None; a cc_stream when free is NULL */
    cc_ctx *ctx;      /* NULL: None */
    PyObject *weakreflist;
    unsigned long long gen;
    char open;
} cc_alloc;

/* The CUDA 12.0 ABI of cuLaunchKernelEx's arguments (checked against cuda.bindings' layout:
 * attrs at offset 40, 56 bytes in all; an attribute is 72 bytes, its value at offset 8). */
typedef struct {
    int id;
    char pad[4];
    union {
        char raw[64];
        struct {
            unsigned int x, y, z;
        } cluster_dim;
        int flag;
    } value;
} cc_launch_attr;

typedef struct {
    unsigned int grid_x, grid_y, grid_z;
    unsigned int block_x, block_y, block_z;
    unsigned int shared_mem_bytes;
    void *stream;
    cc_launch_attr *attrs;
    unsigned int num_attrs;
} cc_launch_config;

#define CC_LAUNCH_ATTRIBUTE_COOPERATIVE 2
#define CC_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4
#define CC_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 5

typedef struct {
    PyObject_HEAD
    cc_stream *stream; /* NULL only after tp_clear */
    cc_launch_config cfg;
    cc_launch_attr attrs[3];
} cc_launch;

extern PyTypeObject cc_ContextHandle_Type;
extern PyTypeObject cc_StreamHandle_Type;
extern PyTypeObject cc_EventHandle_Type;
extern PyTypeObject cc_Allocation_Type;
extern PyTypeObject cc_LaunchConfigHandle_Type;

#define CC_IS_CTX(o) (Py_TYPE(o) == &cc_ContextHandle_Type)
#define CC_IS_STREAM(o) (Py_TYPE(o) == &cc_StreamHandle_Type)
#define CC_IS_EVENT(o) (Py_TYPE(o) == &cc_EventHandle_Type)

/* RuntimeError("<What> has been closed"), cuda.core's wording; returns NULL. */
PyObject *cc_closed(const char *what);
/* Ready each of the n types and add it to module under names[i]; -1 with an exception set. */
int cc_add_types(PyObject *module, PyTypeObject *const *types, const char *const *names, size_t n);
/* Argument parsing of METH_FASTCALL | METH_KEYWORDS calls: out[i] is the i-th parameter
 * (borrowed from the call) or NULL when not given; the first n_required must be given. */
int cc_parse(const char *fname, const char *const *names, int n_required, int n_max, PyObject *const *args,
             Py_ssize_t nargs, PyObject *kwnames, PyObject **out);
/* int(obj) as an address / an unsigned int / a size; -1 with an exception set on failure. */
int cc_int_address(PyObject *obj, unsigned long long *out);
int cc_int_uint(PyObject *obj, unsigned int *out, const char *what);
int cc_int_size(PyObject *obj, size_t *out, const char *what);
int cc_int_int(PyObject *obj, int *out, const char *what);

/* Without the GIL: the context's id, or 0 when it is gone (or on any error). */
unsigned long long cc_ctx_id_nogil(void *ctx);
/* Without the GIL: make ctx current (pushed only when another one is current). */
int cc_push_nogil(void *ctx, int *pushed, const char **api);
int cc_pop_nogil(int pushed, const char **api);
/* ContextHandle._ensure(): 0, or -1 with the error set. */
int cc_ctx_ensure(cc_ctx *ctx);
/* Put an idle handle in its pool: 1 pooled, 0 full (or no memory for a new key). */
int cc_ctx_pool_stream(cc_ctx *ctx, unsigned int flags, int has_priority, int priority, void *address);
int cc_ctx_pool_event(cc_ctx *ctx, unsigned int flags, int recorded, void *address);

/* A finalizer failed with the exception set: a CUDAWarning (cc_warning_category()) naming what,
 * its driver handle and the error (an Exception; nothing at interpreter exit or for status
 * CUDA_ERROR_DEINITIALIZED, the status of the failed call or 0), the unraisable hook for anything
 * else or an escalated warning. Clears the error. */
void cc_report_release_failure(PyObject *self, const char *what, unsigned long long handle, int status);
/* First thing in a method of a handle with a released flag: return the closed error (naming
 * what) if it was released, or NULL with the error set when no driver is bound. */
#define CC_LIVE(self, what) \
    do { \
        if ((self)->released) { \
            return cc_closed(what); \
        } \
        if (cc_require_bound()) { \
            return NULL; \
        } \
    } while (0)
/* tp_finalize of a handle not yet released: run release(op, NULL) (outside interpreter
 * shutdown) with the exception in flight kept; a failure is reported as releasing what, the
 * driver object at handle. */
void cc_finalize_release(PyObject *op, PyCFunction release, const char *what, unsigned long long handle);
/* tp_dealloc of a GC handle type with weak references: finalize (the release runs there),
 * then clear and free; nothing more if the finalizer resurrected the object. */
void cc_dealloc_handle(PyObject *op, inquiry clear);

cc_stream *cc_stream_new_owned(void *address, cc_ctx *ctx, unsigned int flags, int has_priority, int priority);
cc_event *cc_event_new_owned(void *address, cc_ctx *ctx, unsigned int flags);
/* EventHandle.record(stream) for a checked stream type: 0, or -1 with the error set. */
int cc_event_record(cc_event *ev, cc_stream *stream);

PyObject *cc_pool_allocate(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
/* A pool allocation of size bytes ordered on an open stream (ctx: made current for a
 * default-stream token, and for one more try after a refusal), owned by the Allocation returned.
 * NULL with *status and *api set (no exception) when the driver refused; NULL with *status
 * CC_SUCCESS and the error set when the object could not be made. */
cc_alloc *cc_pool_alloc(unsigned long long pool, size_t size, cc_stream *stream, cc_ctx *ctx, int *status,
                        const char **api);
/* Allocation.close(): the free, once. None, or NULL with the error set. */
PyObject *cc_alloc_close(cc_alloc *alloc);
#define CC_IS_ALLOC(o) (Py_TYPE(o) == &cc_Allocation_Type)
/* StreamHandle.sync() (op a StreamHandle): cuStreamSynchronize, the GIL released. None, or NULL
 * with the error set (a released handle: "Stream has been closed"). */
PyObject *cc_stream_sync(PyObject *op, PyObject *unused);

#endif
