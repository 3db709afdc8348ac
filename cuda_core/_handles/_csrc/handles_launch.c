/* cuda_core._handles._native: LaunchConfigHandle, a CUlaunchConfig and its attributes stored inside the
 * object, bound to a stream handle (see cuda_core/_handles/_protocol.py, handles.h). */
#include "handles.h"

_Static_assert(sizeof(cc_launch_attr) == 72, "CUlaunchAttribute is 72 bytes (CUDA 12.0 ABI)");
_Static_assert(offsetof(cc_launch_attr, value) == 8, "CUlaunchAttribute.value is at offset 8");
_Static_assert(offsetof(cc_launch_config, stream) == 32, "CUlaunchConfig.hStream is at offset 32");
_Static_assert(offsetof(cc_launch_config, attrs) == 40, "CUlaunchConfig.attrs is at offset 40");
_Static_assert(offsetof(cc_launch_config, num_attrs) == 48, "CUlaunchConfig.numAttrs is at offset 48");
_Static_assert(sizeof(cc_launch_config) == 56, "CUlaunchConfig is 56 bytes");

/* Three unsigned ints from a sequence of three (grid, block, cluster). */
static int
dim3(PyObject *obj, unsigned int out[3], const char *what)
{
    PyObject *seq = PySequence_Fast(obj, what);
    if (seq == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != 3) {
        PyErr_Format(PyExc_ValueError, "%s must have 3 items", what);
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        /* Owned across the conversion: int() may run Python code that mutates a list. */
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        int err = cc_int_uint(item, &out[i], what);
        Py_DECREF(item);
        if (err) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* LaunchConfigHandle(stream, grid, block, shmem, cluster, cooperative, pss) */
static PyObject *
launch_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"stream", "grid", "block", "shmem", "cluster", "cooperative", "pss", NULL};
    PyObject *stream, *grid, *block, *shmem, *cluster, *cooperative, *pss;
    unsigned int g[3], b[3], c[3], smem;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOO:LaunchConfigHandle", kwlist, &stream, &grid, &block,
                                     &shmem, &cluster, &cooperative, &pss)) {
        return NULL;
    }
    if (!CC_IS_STREAM(stream)) {
        PyErr_SetString(PyExc_TypeError, "stream must be a StreamHandle");
        return NULL;
    }
    if (((cc_stream *)stream)->released) {
        return cc_closed("Stream");
    }
    if (dim3(grid, g, "grid") || dim3(block, b, "block") || cc_int_uint(shmem, &smem, "shmem") ||
        (cluster != Py_None && dim3(cluster, c, "cluster"))) {
        return NULL;
    }
    int coop = PyObject_IsTrue(cooperative);
    if (coop < 0) {
        return NULL;
    }
    int serial = PyObject_IsTrue(pss);
    if (serial < 0) {
        return NULL;
    }
    if (((cc_stream *)stream)->released) { /* a conversion may have run Python code */
        return cc_closed("Stream");
    }
    cc_launch *self = PyObject_GC_New(cc_launch, type);
    if (self == NULL) {
        return NULL;
    }
    memset(&self->cfg, 0, sizeof(self->cfg));
    memset(self->attrs, 0, sizeof(self->attrs));
    self->stream = (cc_stream *)Py_NewRef(stream);
    cc_launch_config *cfg = &self->cfg;
    cfg->grid_x = g[0], cfg->grid_y = g[1], cfg->grid_z = g[2];
    cfg->block_x = b[0], cfg->block_y = b[1], cfg->block_z = b[2];
    cfg->shared_mem_bytes = smem;
    cfg->stream = self->stream->address;
    unsigned int n = 0;
    if (cluster != Py_None) {
        self->attrs[n].id = CC_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        self->attrs[n].value.cluster_dim.x = c[0];
        self->attrs[n].value.cluster_dim.y = c[1];
        self->attrs[n].value.cluster_dim.z = c[2];
        n++;
    }
    if (coop) {
        self->attrs[n].id = CC_LAUNCH_ATTRIBUTE_COOPERATIVE;
        self->attrs[n].value.flag = 1;
        n++;
    }
    if (serial) {
        self->attrs[n].id = CC_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        self->attrs[n].value.flag = 1;
        n++;
    }
    cfg->attrs = n ? self->attrs : NULL; /* points into this object, which never moves */
    cfg->num_attrs = n;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* launch(function, params) -> status: cuLaunchKernelEx(config, function, params, NULL) */
static PyObject *
launch_launch(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    cc_launch *self = (cc_launch *)op;
    void *function, *params;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "launch(function, params) takes 2 arguments");
        return NULL;
    }
    if (self->stream == NULL || self->stream->released) {
        return cc_closed("Stream");
    }
    if (cc_address(args[0], &function) || cc_address(args[1], &params) || cc_require_bound()) {
        return NULL;
    }
    int st;
    CC_CALL(st, cc_driver.launch_kernel_ex(&self->cfg, function, (void **)params, NULL));
    return PyLong_FromLong(st);
}

static int
launch_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((cc_launch *)op)->stream);
    return 0;
}

static int
launch_clear(PyObject *op)
{
    Py_CLEAR(((cc_launch *)op)->stream);
    return 0;
}

static void
launch_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    launch_clear(op);
    PyObject_GC_Del(op);
}

static PyObject *
launch_repr(PyObject *op)
{
    cc_launch *self = (cc_launch *)op;
    char buf[160];
    snprintf(buf, sizeof(buf), "<LaunchConfigHandle grid=(%u, %u, %u) block=(%u, %u, %u) stream=0x%llx>",
             self->cfg.grid_x, self->cfg.grid_y, self->cfg.grid_z, self->cfg.block_x, self->cfg.block_y,
             self->cfg.block_z, (unsigned long long)(uintptr_t)self->cfg.stream);
    return PyUnicode_FromString(buf);
}

static PyObject *
launch_get_stream(PyObject *op, void *closure)
{
    PyObject *s = (PyObject *)((cc_launch *)op)->stream;
    return Py_NewRef(s != NULL ? s : Py_None);
}

static PyMethodDef launch_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch_launch, METH_FASTCALL,
     "launch(function, params) -> the status of cuLaunchKernelEx (0: success)"},
    {NULL, NULL, 0, NULL},
};

/* values: what the stored CUlaunchConfig hands the driver, read back from it:
 * (grid in blocks, block, shared memory bytes, cluster or None, cooperative, pss). */
static PyObject *
launch_get_values(PyObject *op, void *closure)
{
    const cc_launch *self = (const cc_launch *)op;
    const cc_launch_config *cfg = &self->cfg;
    PyObject *cluster = Py_None;
    int coop = 0, serial = 0;
    for (unsigned int i = 0; i < cfg->num_attrs; i++) {
        const cc_launch_attr *a = &cfg->attrs[i];
        if (a->id == CC_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            cluster = NULL; /* built below */
        } else if (a->id == CC_LAUNCH_ATTRIBUTE_COOPERATIVE) {
            coop = a->value.flag != 0;
        } else if (a->id == CC_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
            serial = a->value.flag != 0;
        }
    }
    PyObject *dims = NULL;
    if (cluster == NULL) {
        for (unsigned int i = 0; i < cfg->num_attrs; i++) {
            const cc_launch_attr *a = &cfg->attrs[i];
            if (a->id == CC_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
                dims = Py_BuildValue("(III)", a->value.cluster_dim.x, a->value.cluster_dim.y, a->value.cluster_dim.z);
                break;
            }
        }
        if (dims == NULL) {
            return NULL;
        }
    } else {
        dims = Py_NewRef(Py_None);
    }
    PyObject *out = Py_BuildValue("((III)(III)INOO)", cfg->grid_x, cfg->grid_y, cfg->grid_z, cfg->block_x,
                                  cfg->block_y, cfg->block_z, cfg->shared_mem_bytes, dims,
                                  coop ? Py_True : Py_False, serial ? Py_True : Py_False);
    return out; /* "N" took dims (and released it on failure) */
}

static PyGetSetDef launch_getset[] = {
    {"stream", launch_get_stream, NULL, "the StreamHandle launches are ordered on", NULL},
    {"values", launch_get_values, NULL,
     "(grid in blocks, block, shmem, cluster or None, cooperative, pss), read back from the CUlaunchConfig", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cc_LaunchConfigHandle_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.LaunchConfigHandle",
    .tp_basicsize = sizeof(cc_launch),
    .tp_dealloc = launch_dealloc,
    .tp_repr = launch_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "LaunchConfigHandle(stream, grid, block, shmem, cluster, cooperative, pss): a native CUlaunchConfig "
              "bound to a stream handle",
    .tp_traverse = launch_traverse,
    .tp_clear = launch_clear,
    .tp_methods = launch_methods,
    .tp_getset = launch_getset,
    .tp_new = launch_new,
};
