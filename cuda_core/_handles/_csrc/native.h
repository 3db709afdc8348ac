/*
 * cuda_core._handles._native: the native backend of cuda_core's handle layer (see cuda_core/_handles/_backend.py).
 *
 * One extension module built from the files of this folder, one concept each:
 *   module.c   module definition, ABI version, bind(): the driver entry points and error funnel
 *   handles*.c the handle objects: ContextHandle (handles.c), StreamHandle and EventHandle
 *              (handles_stream.c, handles_event.c), Allocation (handles_memory.c), LaunchConfigHandle
 *              (handles_launch.c); handles.h and handles_util.c hold their shared internals
 *   host_copy.c HOST_COPY_FN's compiled body (HOST_COPY_ADDRESS): a host copy run by the driver
 *   launch*.c  the launch fast path: LaunchPlan (launch_plan.c), packing arguments in C (launch_pack.c); LaunchEntry,
 *              the C entry of cuda_core.launch, and PreparedLaunchBase (launch_entry.c); launch.h
 *   interop*.c readers of foreign arrays: DLPack capsules, PyTorch tensors and the stream
 *              ordering they need (interop.c); ViewInfo, the C base of StridedMemoryView
 *              (interop_view.c); ViewEntry, the C entry of from_dlpack (interop_entry.c);
 *              interop.h holds what they share
 *   entry*.c   what the C entries (LaunchEntry, ViewEntry and the method entries) share (entry.c,
 *              entry.h); RecordEntry, the C entry of Stream.record (entry_record.c); SyncEntry, that of
 *              Stream.sync (entry_sync.c); CopyEntry, that
 *              of Buffer.copy_from and copy_to (entry_copy.c); AllocEntry and CloseEntry, those of
 *              DeviceMemoryResource.allocate and Buffer.close (entry_alloc.c)
 *
 * Rules (DESIGN.md, key decision 1): this code knows no Python class of cuda_core. It never
 * reads a Python object's slots by offset (a slot is read through the member descriptor Python
 * handed over, or CPython's PyMember_GetOne with that descriptor's member), never looks up a
 * Python attribute or method by name, and never builds a tuple whose layout a Python function
 * must match. It owns its own
 * types; Python classes hold instances of them and call their methods. The pure-Python
 * backend (cuda_core/_handles/_pure.py) implements the same protocol, which is stated in code in
 * cuda_core/_handles/_protocol.py (with ABI_VERSION, which CC_ABI_VERSION must equal).
 */
#ifndef CUDA_CORE_NATIVE_H
#define CUDA_CORE_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bumped whenever anything Python relies on changes (names, signatures, semantics). Python
 * checks it at import (cuda_core/_handles/_backend.py) and falls back to pure Python on a mismatch. */
#define CC_ABI_VERSION 18

/* The driver entry points (CUDA 12.0 ABI), resolved by Python through cuGetProcAddress and
 * handed to bind(). NULL until then: every call checks cc_bound first. */
typedef struct {
    int (*ctx_get_id)(void *ctx, unsigned long long *id);
    int (*ctx_get_current)(void **ctx);
    int (*ctx_push_current)(void *ctx);
    int (*ctx_pop_current)(void **ctx);
    int (*ctx_get_device)(int *dev);
    int (*primary_ctx_retain)(void **ctx, int dev);
    int (*primary_ctx_release)(int dev);
    int (*stream_create)(void **stream, unsigned int flags);
    int (*stream_create_with_priority)(void **stream, unsigned int flags, int priority);
    int (*stream_destroy)(void *stream);
    int (*stream_query)(void *stream);
    int (*stream_is_capturing)(void *stream, int *status);
    int (*stream_synchronize)(void *stream);
    int (*stream_wait_event)(void *stream, void *event, unsigned int flags);
    int (*stream_get_ctx)(void *stream, void **ctx);
    int (*event_create)(void **event, unsigned int flags);
    int (*event_destroy)(void *event);
    int (*event_record)(void *event, void *stream);
    int (*event_query)(void *event);
    int (*event_synchronize)(void *event);
    int (*launch_kernel_ex)(const void *config, void *function, void **params, void **extra);
    int (*mem_alloc_from_pool_async)(unsigned long long *ptr, size_t size, void *pool, void *stream);
    int (*mem_free_async)(unsigned long long ptr, void *stream);
    int (*memcpy_async)(unsigned long long dst, unsigned long long src, size_t n, void *stream);
} cc_driver_t;

extern cc_driver_t cc_driver;
extern int cc_bound;
/* The status of the last cc_raise() (read by a finalizer to keep CUDA_ERROR_DEINITIALIZED, the
 * driver shutting down, silent). */
extern int cc_last_status;

/* Driver statuses this code tests for. */
#define CC_SUCCESS 0
#define CC_ERROR_NOT_INITIALIZED 3
#define CC_ERROR_DEINITIALIZED 4
#define CC_ERROR_INVALID_CONTEXT 201
#define CC_ERROR_NOT_READY 600
#define CC_ERROR_CONTEXT_IS_DESTROYED 709
#define CC_ERROR_STREAM_CAPTURE_UNSUPPORTED 900

/* Run a driver call with the GIL released, as cuda.bindings does: a call that blocks (a full
 * launch queue, a growing pool, a synchronisation) must not stop other Python threads, above
 * all not the driver thread that runs a Python host callback. Objects used inside are owned
 * by the caller for the whole call (no borrowed reference is held across it). */
#define CC_CALL(status, expr) \
    do { \
        Py_BEGIN_ALLOW_THREADS(status) = (expr); Py_END_ALLOW_THREADS \
    } while (0)

/* Set the cuda_core exception for a failed driver call (the error funnel bound by bind():
 * cuda_core._utils.make_error); always returns NULL. */
PyObject *cc_raise(int status, const char *api);
/* The category of release-failure warnings: the class set_warning_category() was given
 * (cuda_core.CUDAWarning), RuntimeWarning before that (a borrowed reference). */
PyObject *cc_warning_category(void);
/* The ContextHandle of the context at ctx (a new reference), from the registry bound by bind()
 * (cuda_core._handles._contexts.context_handle); NULL with the exception set. */
PyObject *cc_context_of(void *ctx);
/* -1 with the exception set when not bound yet (no driver initialised), else 0. */
int cc_require_bound(void);
/* An address from a Python int (None is 0); -1 with an exception set on failure. */
int cc_address(PyObject *obj, void **out);

/* Each concept file adds its types and functions to the module. */
int cc_handles_init(PyObject *module);
int cc_interop_init(PyObject *module);
int cc_host_copy_init(PyObject *module);
extern PyMethodDef cc_handles_functions[];
extern PyMethodDef cc_interop_functions[];

#endif
