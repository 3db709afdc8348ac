/* HOST_COPY_FN's compiled body: a CUhostFn that copies bytes between host addresses.
 *
 * The driver calls it on its own thread with userData pointing at a record of three native-width
 * fields (uintptr_t dst, uintptr_t src, size_t nbytes; cuda_core.pack_host_copy_args packs one).
 * It needs no Python and never takes the GIL, so a stream-ordered host copy never waits for the
 * interpreter. The record is read field by field (it may sit at any alignment in a bytes copy). */
#include "native.h"

static void
cc_host_copy(void *record)
{
    uintptr_t dst, src;
    size_t nbytes;
    if (record == NULL) {
        return;
    }
    memcpy(&dst, (const char *)record, sizeof(dst));
    memcpy(&src, (const char *)record + sizeof(dst), sizeof(src));
    memcpy(&nbytes, (const char *)record + sizeof(dst) + sizeof(src), sizeof(nbytes));
    if (nbytes != 0 && dst != src) {
        memmove((void *)dst, (const void *)src, nbytes);
    }
}

int
cc_host_copy_init(PyObject *module)
{
    void (*fn)(void *) = cc_host_copy;
    uintptr_t address;
    memcpy(&address, &fn, sizeof(address)); /* a function's address as an integer (POSIX) */
    PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)address);
    if (value == NULL) {
        return -1;
    }
    int rc = PyModule_AddObjectRef(module, "HOST_COPY_ADDRESS", value);
    Py_DECREF(value);
    return rc;
}
