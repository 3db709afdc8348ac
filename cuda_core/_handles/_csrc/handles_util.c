/* cuda_core._handles._native: helpers shared by the handle files (see handles.h). */
#include "handles.h"

/* ------------------------------------------------------------------------------------------
 * Helpers. */

PyObject *
cc_closed(const char *what)
{
    PyErr_Format(PyExc_RuntimeError, "%s has been closed", what); /* cuda.core's wording */
    return NULL;
}

int
cc_parse(const char *fname, const char *const *names, int n_required, int n_max, PyObject *const *args,
         Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    if (nargs > n_max) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fname, n_max, nargs);
        return -1;
    }
    for (int i = 0; i < n_max; i++) {
        out[i] = i < nargs ? args[i] : NULL;
    }
    if (kwnames != NULL) {
        Py_ssize_t n_kw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < n_kw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int j = 0;
            while (j < n_max && PyUnicode_CompareWithASCIIString(key, names[j]) != 0) {
                j++;
            }
            if (j == n_max) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
                return -1;
            }
            if (out[j] != NULL) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[j]);
                return -1;
            }
            out[j] = args[nargs + k];
        }
    }
    for (int i = 0; i < n_required; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return -1;
        }
    }
    return 0;
}

/* int(obj) as a new reference to an int (the fast path takes an int as is). */
static PyObject *
as_int(PyObject *obj)
{
    if (PyLong_Check(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    return PyNumber_Long(obj);
}

int
cc_int_address(PyObject *obj, unsigned long long *out)
{
    PyObject *v = as_int(obj);
    if (v == NULL) {
        return -1;
    }
    unsigned long long r = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (r == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = r;
    return 0;
}

int
cc_int_uint(PyObject *obj, unsigned int *out, const char *what)
{
    PyObject *v = as_int(obj);
    if (v == NULL) {
        return -1;
    }
    unsigned long r = PyLong_AsUnsignedLong(v);
    Py_DECREF(v);
    if (r == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
    if (r > UINT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit an unsigned int", what);
        return -1;
    }
    *out = (unsigned int)r;
    return 0;
}

int
cc_int_size(PyObject *obj, size_t *out, const char *what)
{
    PyObject *v = as_int(obj);
    if (v == NULL) {
        return -1;
    }
    size_t r = PyLong_AsSize_t(v);
    Py_DECREF(v);
    if (r == (size_t)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = r;
    return 0;
}

int
cc_int_int(PyObject *obj, int *out, const char *what)
{
    PyObject *v = as_int(obj);
    if (v == NULL) {
        return -1;
    }
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    if (r == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (r < INT_MIN || r > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s does not fit an int", what);
        return -1;
    }
    *out = (int)r;
    return 0;
}

unsigned long long
cc_ctx_id_nogil(void *ctx)
{
    unsigned long long ident = 0;
    if (cc_driver.ctx_get_id(ctx, &ident) != CC_SUCCESS) {
        return 0;
    }
    return ident;
}

int
cc_push_nogil(void *ctx, int *pushed, const char **api)
{
    void *cur = NULL;
    *pushed = 0;
    if (cc_driver.ctx_get_current(&cur) != CC_SUCCESS || cur != ctx) {
        int st = cc_driver.ctx_push_current(ctx);
        if (st != CC_SUCCESS) {
            *api = "cuCtxPushCurrent";
            return st;
        }
        *pushed = 1;
    }
    return CC_SUCCESS;
}

int
cc_pop_nogil(int pushed, const char **api)
{
    if (!pushed) {
        return CC_SUCCESS;
    }
    void *ignored = NULL;
    int st = cc_driver.ctx_pop_current(&ignored);
    if (st != CC_SUCCESS) {
        *api = "cuCtxPopCurrent";
    }
    return st;
}

void
cc_report_release_failure(PyObject *self, const char *what, unsigned long long handle, int status)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_WriteUnraisable(self); /* a BaseException: reported, as a __del__ would */
        return;
    }
    if (CC_FINALIZING() || status == CC_ERROR_DEINITIALIZED) {
        PyErr_Clear(); /* interpreter exit, or the driver shutting down: nothing to report */
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *t, *exc, *tb;
    PyErr_Fetch(&t, &exc, &tb);
    PyErr_NormalizeException(&t, &exc, &tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
#endif
    /* The error's text names the call and the status ("cuStreamDestroy: CUDA_ERROR_...: ..."),
     * the handle keeps independent failures apart under the once-per-message filter. */
    char hex[24];
    snprintf(hex, sizeof(hex), "0x%llx", handle);
    if (PyErr_WarnFormat(cc_warning_category(), 1, "cuda_core could not release %s %s: %S", what, hex,
                         exc != NULL ? exc : Py_None) < 0) {
        PyErr_WriteUnraisable(self); /* escalated (filterwarnings("error")): nowhere else to go */
    }
    Py_XDECREF(exc);
}

void
cc_finalize_release(PyObject *op, PyCFunction release, const char *what, unsigned long long handle)
{
    if (CC_FINALIZING()) {
        return;
    }
    CC_SAVE_EXC(saved);
    cc_last_status = 0;
    PyObject *r = release(op, NULL);
    if (r == NULL) {
        cc_report_release_failure(op, what, handle, cc_last_status);
    } else {
        Py_DECREF(r);
    }
    CC_RESTORE_EXC(saved);
}

void
cc_dealloc_handle(PyObject *op, inquiry clear)
{
    if (PyObject_CallFinalizerFromDealloc(op) < 0) {
        return; /* resurrected */
    }
    PyObject_GC_UnTrack(op);
    PyObject **weakrefs = (PyObject **)((char *)op + Py_TYPE(op)->tp_weaklistoffset);
    if (*weakrefs != NULL) {
        PyObject_ClearWeakRefs(op);
    }
    clear(op);
    PyObject_GC_Del(op);
}

int
cc_add_types(PyObject *module, PyTypeObject *const *types, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (PyType_Ready(types[i]) < 0) {
            return -1;
        }
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}
