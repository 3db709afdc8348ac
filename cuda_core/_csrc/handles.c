/* cuda_core._native: handle objects (see cuda_core/_handles.py for the protocol). */
#include "native.h"

PyMethodDef cc_handles_functions[] = {
    {NULL, NULL, 0, NULL},
};

int
cc_handles_init(PyObject *module)
{
    return 0;
}
