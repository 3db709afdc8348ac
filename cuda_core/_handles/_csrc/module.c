/* cuda_core._handles._native: module definition, ABI version, and bind() (see native.h). */
#include "native.h"
#include "entry.h"
#include "launch.h"

cc_driver_t cc_driver;
int cc_bound = 0;
int cc_last_status = 0;
static PyObject *error_factory = NULL; /* cuda_core._utils.make_error(status, api) */
static PyObject *context_registry = NULL; /* cuda_core._handles._contexts.context_handle(address) */
static PyObject *warning_category = NULL; /* cuda_core.CUDAWarning, from set_warning_category() */

PyObject *
cc_warning_category(void)
{
    return warning_category != NULL ? warning_category : PyExc_RuntimeWarning;
}

PyObject *
cc_raise(int status, const char *api)
{
    cc_last_status = status;
    if (error_factory == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s failed with CUDA status %d", api, status);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(error_factory, "is", status, api);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *
cc_context_of(void *ctx)
{
    if (context_registry == NULL) {
        cc_raise(CC_ERROR_NOT_INITIALIZED, "cuda_core._handles._native");
        return NULL;
    }
    PyObject *address = PyLong_FromVoidPtr(ctx);
    if (address == NULL) {
        return NULL;
    }
    PyObject *h = PyObject_CallOneArg(context_registry, address);
    Py_DECREF(address);
    return h;
}

int
cc_require_bound(void)
{
    if (!cc_bound) {
        cc_raise(CC_ERROR_NOT_INITIALIZED, "cuda_core._handles._native");
        return -1;
    }
    return 0;
}

int
cc_address(PyObject *obj, void **out)
{
    if (obj == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "an address must be an int (got %.100s)", Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* The table bind() fills: the driver symbol and where its address goes. */
static const struct {
    const char *name;
    size_t offset;
} entry_points[] = {
#define EP(sym, field) {sym, offsetof(cc_driver_t, field)}
    EP("cuCtxGetId", ctx_get_id),
    EP("cuCtxGetCurrent", ctx_get_current),
    EP("cuCtxPushCurrent", ctx_push_current),
    EP("cuCtxPopCurrent", ctx_pop_current),
    EP("cuCtxGetDevice", ctx_get_device),
    EP("cuDevicePrimaryCtxRetain", primary_ctx_retain),
    EP("cuDevicePrimaryCtxRelease", primary_ctx_release),
    EP("cuStreamCreate", stream_create),
    EP("cuStreamCreateWithPriority", stream_create_with_priority),
    EP("cuStreamDestroy", stream_destroy),
    EP("cuStreamQuery", stream_query),
    EP("cuStreamIsCapturing", stream_is_capturing),
    EP("cuStreamSynchronize", stream_synchronize),
    EP("cuStreamWaitEvent", stream_wait_event),
    EP("cuStreamGetCtx", stream_get_ctx),
    EP("cuEventCreate", event_create),
    EP("cuEventDestroy", event_destroy),
    EP("cuEventRecord", event_record),
    EP("cuEventQuery", event_query),
    EP("cuEventSynchronize", event_synchronize),
    EP("cuLaunchKernelEx", launch_kernel_ex),
    EP("cuMemAllocFromPoolAsync", mem_alloc_from_pool_async),
    EP("cuMemFreeAsync", mem_free_async),
    EP("cuMemcpyAsync", memcpy_async),
#undef EP
};
#define N_ENTRY_POINTS (sizeof(entry_points) / sizeof(entry_points[0]))

/* bind(addresses, make_error, context_of): addresses maps each name of entry_point_names() to
 * its address (CUDA 12.0 ABI, from cuGetProcAddress); make_error(status, api) builds cuda_core's
 * error; context_of(address) is the registry's ContextHandle of a context (StreamHandle.context). */
static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyCallable_Check(args[1]) || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind(addresses: dict[str, int], make_error: callable, context_of: callable)");
        return NULL;
    }
    cc_driver_t table;
    memset(&table, 0, sizeof(table));
    for (size_t i = 0; i < N_ENTRY_POINTS; i++) {
        PyObject *v = PyDict_GetItemString(args[0], entry_points[i].name); /* borrowed, no call in between */
        void *addr = NULL;
        if (v == NULL) {
            PyErr_Format(PyExc_KeyError, "bind: no address for %s", entry_points[i].name);
            return NULL;
        }
        if (cc_address(v, &addr)) {
            return NULL;
        }
        if (addr == NULL) {
            PyErr_Format(PyExc_ValueError, "bind: the address of %s is 0", entry_points[i].name);
            return NULL;
        }
        memcpy((char *)&table + entry_points[i].offset, &addr, sizeof(void *));
    }
    Py_XSETREF(error_factory, Py_NewRef(args[1]));
    Py_XSETREF(context_registry, Py_NewRef(args[2]));
    cc_driver = table;
    cc_bound = 1;
    Py_RETURN_NONE;
}

static PyObject *
entry_point_names(PyObject *self, PyObject *unused)
{
    PyObject *out = PyTuple_New(N_ENTRY_POINTS);
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < N_ENTRY_POINTS; i++) {
        PyObject *s = PyUnicode_FromString(entry_points[i].name);
        if (s == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, s);
    }
    return out;
}

static PyObject *
is_bound(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(cc_bound);
}

/* set_warning_category(cls): the Warning subclass (cuda_core.CUDAWarning) a finalizer's failed
 * release is reported as; Python hands it over at import. */
static PyObject *
set_warning_category(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Warning)) {
        PyErr_Format(PyExc_TypeError, "set_warning_category() needs a Warning subclass (got %.100s)",
                     Py_TYPE(cls)->tp_name);
        return NULL;
    }
    Py_XSETREF(warning_category, Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyMethodDef module_functions[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(addresses, make_error, context_of): the driver entry points (name -> address), the error "
     "funnel and the context registry"},
    {"entry_point_names", entry_point_names, METH_NOARGS, "entry_point_names() -> the driver symbols bind() needs"},
    {"is_bound", is_bound, METH_NOARGS, "is_bound() -> whether bind() ran"},
    {"set_warning_category", set_warning_category, METH_O,
     "set_warning_category(cls): the Warning subclass failed releases in finalizers are reported as"},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "ABI_VERSION", CC_ABI_VERSION) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(m, cc_handles_functions) < 0 || PyModule_AddFunctions(m, cc_interop_functions) < 0 ||
        PyModule_AddFunctions(m, cc_launch_functions) < 0) {
        return -1;
    }
    if (cc_handles_init(m) < 0 || cc_interop_init(m) < 0 || cc_host_copy_init(m) < 0 ||
        cc_launch_init(m) < 0 || cc_entry_record_init(m) < 0 ||
        cc_entry_copy_init(m) < 0 || cc_entry_alloc_init(m) < 0 ||
        cc_entry_sync_init(m) < 0 || cc_class_method_init(m) < 0) {
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    /* The driver table and the handle types are process-wide statics. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    /* Every shared structure (the idle pools, the bound table) is guarded by the GIL. */
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cuda_core._handles._native",
    .m_doc = "The native backend of cuda_core's handle layer (optional; cuda_core/_handles/_pure.py is the "
             "pure-Python backend of the same protocol, cuda_core/_handles/_protocol.py states it).",
    .m_size = 0,
    .m_methods = module_functions,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&module_def);
}
