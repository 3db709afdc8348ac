/* cuda_core._native: readers of foreign arrays (DLPack capsules, PyTorch tensors). */
#include "native.h"

PyMethodDef cc_interop_functions[] = {
    {NULL, NULL, 0, NULL},
};

int
cc_interop_init(PyObject *module)
{
    return 0;
}
