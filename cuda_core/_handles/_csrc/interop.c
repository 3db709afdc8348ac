/*
 * cuda_core._handles._native: readers of foreign arrays (DLPack capsules, PyTorch tensors).
 *
 * The protocol (names, arguments, results, errors) is stated in cuda_core/_handles/_protocol.py; the
 * pure-Python statement of the same functions is cuda_core/_handles/_pure_interop.py and
 * tests/interop/test_interop_backends.py runs the same cases against both.
 *
 * ViewInfo is this file's own type: the fields of a strided view (StridedMemoryView derives
 * from it, so a view is built here with no Python frame and no slot offsets). Its members are
 * writable so that Python builders (CUDA Array Interface, Buffer) fill the same fields.
 *
 * PyTorch: an exact torch.Tensor is read through PyTorch's DLPack C exchange API (the
 * DLPackExchangeAPI table PyTorch publishes as the type attribute __dlpack_c_exchange_api__,
 * a capsule named "dlpack_exchange_api", DLPack >= 1.3): dltensor_from_py_object_no_sync fills
 * a DLTensor from the PyObject itself and current_work_stream gives PyTorch's current stream.
 * No offset into the tensor object is used. Anything unusual returns NotImplemented: the caller
 * then runs the pure reader (cuda_core/_handles/_pure_interop.py: torch_view), which decides.
 */
#include "interop.h"
#include <pythread.h>
#include <structmember.h>

#define DLPACK_MAJOR 1
#define DLPACK_FLAG_READ_ONLY 1ULL
#define DL_CPU 1
#define DL_CUDA 2
#define DL_CUDA_HOST 3
#define DL_CUDA_MANAGED 13
#define DL_COMPLEX 5
#define MAX_NDIM 32
#define MAX_DEVICES 64
#define MAX_LEGACY_TYPES 256

static const char AMBIGUOUS[] = "stream_ptr=None is ambiguous: pass the address of the consumer stream "
                                "(e.g. int(stream.handle)), or -1 to opt out of stream ordering";

/* The DLPack ABI (dlpack.h, stable since 1.0). */
typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensorABI;

typedef struct {
    DLTensorABI dl_tensor;
    void *manager_ctx;
    void (*deleter)(void *);
} DLManagedTensorABI;

typedef struct {
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(void *);
    uint64_t flags;
    DLTensorABI dl_tensor;
} DLManagedTensorVersionedABI;

typedef struct ExchangeHeader {
    uint32_t major, minor;
    struct ExchangeHeader *prev_api;
} ExchangeHeader;

typedef struct {
    ExchangeHeader header;
    void *managed_tensor_allocator;
    void *managed_tensor_from_py_object_no_sync;
    void *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensorABI *out);
    int (*current_work_stream)(int device_type, int32_t device_id, void **out_stream);
} ExchangeAPI;

/* ---------------------------------------------------------------------------------------------
 * DLPack capsules */

/* The tensor of an unconsumed capsule, or NULL with BufferError set. */
static DLTensorABI *
capsule_tensor(PyObject *capsule, int *readonly)
{
    const char *name = PyCapsule_CheckExact(capsule) ? PyCapsule_GetName(capsule) : NULL;
    DLTensorABI *t = NULL;
    *readonly = 0;
    if (name != NULL && strcmp(name, "dltensor_versioned") == 0) {
        DLManagedTensorVersionedABI *m = PyCapsule_GetPointer(capsule, name);
        if (m == NULL) {
            return NULL;
        }
        if (m->major > DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError, "DLPack major version %u is not supported (at most %d)",
                         (unsigned)m->major, DLPACK_MAJOR);
            return NULL;
        }
        *readonly = (m->flags & DLPACK_FLAG_READ_ONLY) != 0;
        t = &m->dl_tensor;
    } else if (name != NULL && strcmp(name, "dltensor") == 0) {
        DLManagedTensorABI *m = PyCapsule_GetPointer(capsule, name);
        if (m == NULL) {
            return NULL;
        }
        t = &m->dl_tensor;
    } else {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_BufferError, "expected an unconsumed DLPack capsule (got %R)", capsule);
        }
        return NULL;
    }
    if (t->ndim < 0 || t->ndim > MAX_NDIM) {
        PyErr_Format(PyExc_BufferError, "DLPack tensor has an unsupported number of dimensions (%d)", (int)t->ndim);
        return NULL;
    }
    if (t->ndim > 0 && t->shape == NULL) {
        PyErr_Format(PyExc_BufferError, "DLPack tensor of %d dimensions has no shape", (int)t->ndim);
        return NULL;
    }
    return t;
}

static uint32_t
dtype_word(const DLTensorABI *t)
{
    uint32_t word;
    memcpy(&word, &t->code, sizeof word); /* code, bits, lanes as one native uint32 */
    return word;
}

/* The dtype word as a Python int: the few words seen most are kept (an int of that size is
 * otherwise allocated and freed with every view). */
#define WORD_CACHE 16
static uint32_t word_keys[WORD_CACHE];
static PyObject *word_values[WORD_CACHE];

static PyObject *
word_int(uint32_t word)
{
    for (int i = 0; i < WORD_CACHE && word_values[i] != NULL; i++) {
        if (word_keys[i] == word) {
            return Py_NewRef(word_values[i]);
        }
    }
    PyObject *v = PyLong_FromUnsignedLong(word);
    for (int i = 0; v != NULL && i < WORD_CACHE; i++) {
        if (word_values[i] == NULL) { /* kept for the process */
            word_keys[i] = word;
            word_values[i] = Py_NewRef(v);
            break;
        }
    }
    return v;
}

/* A view of cls over tensor t, whose memory the capsule keeps alive. */
static PyObject *
tensor_view(PyObject *cls, const DLTensorABI *t, PyObject *device_id, int accessible, int readonly, PyObject *exporting,
            PyObject *capsule, long devtype)
{
    /* The producer's strides as given (a 0-d tensor's are (), when it gave any), None when it
     * gave none: what cuda.core 1.2 reports. */
    uint64_t addr = (uint64_t)(uintptr_t)t->data + t->byte_offset;
    if (t->ndim <= CC_VIEW_INLINE_NDIM) { /* ptr, shape and strides made when first read */
        return cc_make_lazy_view(cls, addr, t->ndim, t->shape, t->strides, word_int(dtype_word(t)), device_id,
                                 accessible, readonly, exporting, capsule, devtype);
    }
    PyObject *strides = t->strides ? cc_int64_tuple(t->strides, t->ndim) : Py_NewRef(Py_None);
    return cc_make_view(cls, PyLong_FromUnsignedLongLong(addr), cc_int64_tuple(t->shape, t->ndim), strides,
                        word_int(dtype_word(t)), device_id, accessible, readonly, exporting, capsule, devtype);
}

static int
host_accessible_type(long devtype)
{
    return devtype == DL_CUDA || devtype == DL_CUDA_HOST || devtype == DL_CUDA_MANAGED;
}

static PyObject *
read_capsule(PyObject *self, PyObject *capsule)
{
    int readonly;
    DLTensorABI *t = capsule_tensor(capsule, &readonly);
    if (t == NULL) {
        return NULL;
    }
    long devtype = t->device_type;
    return tensor_view((PyObject *)&cc_ViewInfoType, t, PyLong_FromLong(t->device_id), host_accessible_type(devtype),
                       readonly, Py_None, capsule, devtype);
}

/* ---------------------------------------------------------------------------------------------
 * dlpack_view: StridedMemoryView.from_dlpack's general path */

static PyObject *s_dlpack, *s_dlpack_device, *s_is_neg, *s_is_conj, *kw_stream, *kw_stream_max, *max_version;
static PyObject *legacy_types; /* producer types whose __dlpack__ refused max_version */

PyObject *
cc_dlpack_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "dlpack_view(cls, obj, stream_ptr) takes 3 arguments");
        return NULL;
    }
    PyObject *cls = args[0], *obj = args[1], *sp = args[2];
    if (cc_check_view_cls(cls)) {
        return NULL;
    }
    PyObject *dev = PyObject_VectorcallMethod(s_dlpack_device, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (dev == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) { /* the protocol probe */
            PyErr_Clear();
            PyObject *name = PyType_GetName(Py_TYPE(obj));
            if (name != NULL) {
                PyErr_Format(PyExc_BufferError, "%U does not support DLPack (no __dlpack_device__)", name);
                Py_DECREF(name);
            }
        }
        return NULL;
    }
    PyObject *pair = PySequence_Tuple(dev);
    Py_DECREF(dev);
    if (pair == NULL) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(pair) != 2) {
        PyErr_Format(PyExc_BufferError, "__dlpack_device__ must return (device_type, device_id) (got %R)", pair);
        Py_DECREF(pair);
        return NULL;
    }
    int overflow = 0;
    PyObject *index = PyNumber_Index(PyTuple_GET_ITEM(pair, 0));
    long devtype = index ? PyLong_AsLongAndOverflow(index, &overflow) : -1;
    PyObject *devid = index ? PyNumber_Index(PyTuple_GET_ITEM(pair, 1)) : NULL;
    Py_DECREF(pair);
    if (devid == NULL || (devtype == -1 && PyErr_Occurred())) {
        Py_XDECREF(index);
        Py_XDECREF(devid);
        return NULL;
    }
    int needs_stream, has_device, accessible;
    switch (overflow ? -1 : devtype) {
    case DL_CPU: needs_stream = 0, has_device = 0, accessible = 0; break;
    case DL_CUDA: needs_stream = 1, has_device = 1, accessible = 1; break;
    case DL_CUDA_HOST: needs_stream = 0, has_device = 0, accessible = 1; break;
    case DL_CUDA_MANAGED: needs_stream = 0, has_device = 1, accessible = 1; break;
    default:
        PyErr_Format(PyExc_BufferError,
                     "DLPack device type %S is not supported (CPU, CUDA, CUDA host, CUDA managed are)", index);
        Py_DECREF(index);
        Py_DECREF(devid);
        return NULL;
    }
    Py_DECREF(index);
    PyObject *stream = sp;
    if (needs_stream && sp == Py_None) {
        PyErr_SetString(PyExc_BufferError, AMBIGUOUS);
        Py_DECREF(devid);
        return NULL;
    }
    if (!needs_stream && !accessible) {
        stream = Py_None;
    }
    PyObject *one = NULL;
    if (PyLong_Check(stream)) {
        int zero = PyObject_Not(stream); /* DLPack names the legacy default stream 1 (0 is disallowed on CUDA) */
        if (zero < 0 || (zero && (one = PyLong_FromLong(1)) == NULL)) {
            Py_DECREF(devid);
            return NULL;
        }
        stream = one ? one : stream;
    }
    Py_INCREF(obj); /* owned across the producer's calls */
    PyObject *tp = Py_NewRef((PyObject *)Py_TYPE(obj));
    PyObject *call[3] = {obj, stream, max_version};
    int legacy = PySet_Contains(legacy_types, tp);
    PyObject *capsule = NULL;
    if (legacy == 0) {
        capsule = PyObject_VectorcallMethod(s_dlpack, call, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_stream_max);
        /* The protocol's one fallback: a producer older than DLPack 1.0 rejects max_version with
         * TypeError; it is asked again without it (and remembered). No other error retries. */
        if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            legacy = 1;
            if (PySet_GET_SIZE(legacy_types) < MAX_LEGACY_TYPES && PySet_Add(legacy_types, tp) < 0) {
                legacy = -1;
            }
        }
    }
    if (legacy == 1) {
        capsule = PyObject_VectorcallMethod(s_dlpack, call, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_stream);
    }
    Py_XDECREF(one);
    Py_DECREF(tp);
    PyObject *view = NULL;
    int readonly;
    DLTensorABI *t = capsule ? capsule_tensor(capsule, &readonly) : NULL;
    if (t != NULL) {
        if (!has_device) {
            Py_SETREF(devid, PyLong_FromLong(-1));
        }
        view = tensor_view(cls, t, devid, accessible, readonly, obj, capsule, devtype);
        devid = NULL; /* stolen */
    }
    Py_XDECREF(devid);
    Py_XDECREF(capsule);
    Py_DECREF(obj);
    return view;
}

/* ---------------------------------------------------------------------------------------------
 * Ordering: record_wait and the per-device events torch_view orders through */

static PyThread_type_lock order_lock;
static void *order_events[MAX_DEVICES];

/* cuEventRecord(event, producer) then cuStreamWaitEvent(consumer, event), one pair at a time
 * (the event is shared): 0, -status of a failed record (nothing ordered), +status of a failed
 * wait. The GIL is released around both; only integers cross it. */
static int
order(void *event, void *producer, void *consumer)
{
    int status;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(order_lock, WAIT_LOCK);
    status = cc_driver.event_record(event, producer);
    status = status ? -status : cc_driver.stream_wait_event(consumer, event, 0);
    PyThread_release_lock(order_lock);
    Py_END_ALLOW_THREADS
    return status;
}

static PyObject *
record_wait(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *a[3];
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "record_wait(event, producer, consumer) takes 3 arguments");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        if (cc_address(args[i], &a[i])) {
            return NULL;
        }
    }
    if (cc_require_bound()) {
        return NULL;
    }
    return PyLong_FromLong(order(a[0], a[1], a[2]));
}

static PyObject *
set_order_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *ev;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_order_event(device_id, event) takes 2 arguments");
        return NULL;
    }
    long dev = PyLong_AsLong(args[0]);
    if ((dev == -1 && PyErr_Occurred()) || cc_address(args[1], &ev)) {
        return NULL;
    }
    if (dev < 0 || dev >= MAX_DEVICES) {
        Py_RETURN_FALSE; /* not kept: torch_view delegates for that device */
    }
    order_events[dev] = ev;
    Py_RETURN_TRUE;
}

/* ---------------------------------------------------------------------------------------------
 * PyTorch */

static PyObject *torch_type, *torch_api_capsule, *torch_is_neg, *torch_is_conj;
static const ExchangeAPI *torch_api;

static PyObject *
torch_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "torch_setup(tensor_type, exchange_api)");
        return NULL;
    }
    if (!PyCapsule_IsValid(args[1], "dlpack_exchange_api")) {
        Py_RETURN_FALSE;
    }
    const ExchangeAPI *api = PyCapsule_GetPointer(args[1], "dlpack_exchange_api");
    if (api == NULL) {
        return NULL;
    }
    if (api->header.major != DLPACK_MAJOR || api->dltensor_from_py_object_no_sync == NULL ||
        api->current_work_stream == NULL) {
        Py_RETURN_FALSE;
    }
    /* The type's is_neg and is_conj, called on an exact instance without the attribute lookup
     * (the instance dict, the MRO) of a method call. */
    PyObject *is_neg = PyObject_GetAttr(args[0], s_is_neg);
    PyObject *is_conj = is_neg ? PyObject_GetAttr(args[0], s_is_conj) : NULL;
    if (is_conj == NULL) {
        Py_XDECREF(is_neg);
        return NULL;
    }
    Py_XSETREF(torch_is_neg, is_neg);
    Py_XSETREF(torch_is_conj, is_conj);
    Py_XSETREF(torch_type, Py_NewRef(args[0]));
    Py_XSETREF(torch_api_capsule, Py_NewRef(args[1])); /* keeps the table alive */
    torch_api = api;
    Py_RETURN_TRUE;
}

/* Whether method(t) returns exactly False; -1 with an error. */
static int
method_false(PyObject *t, PyObject *method)
{
    Py_INCREF(method); /* torch_setup may replace it while the GIL is released in the call */
    PyObject *r = PyObject_Vectorcall(method, &t, 1, NULL);
    Py_DECREF(method);
    if (r == NULL) {
        return -1;
    }
    int v = r == Py_False;
    Py_DECREF(r);
    return v;
}

/* A failed exchange-API call reports RuntimeError (a tensor it cannot describe): that one is
 * the expected refusal (NotImplemented); any other exception propagates. */
static PyObject *
api_refused(void)
{
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        return NULL;
    }
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
}

static PyObject *
torch_view_impl(PyObject *cls, PyObject *t, PyObject *sp)
{
    DLTensorABI dl;
    int overflow = 0;
    long long stream_ptr = PyLong_CheckExact(sp) ? PyLong_AsLongLongAndOverflow(sp, &overflow) : 0;
    if (stream_ptr == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (torch_api == NULL || Py_TYPE(t) != (PyTypeObject *)torch_type || !PyLong_CheckExact(sp) || overflow) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (torch_api->dltensor_from_py_object_no_sync(t, &dl) != 0) {
        return api_refused();
    }
    int host = dl.device_type == DL_CPU;
    if ((dl.device_type != DL_CUDA && !host) || dl.ndim < 0 || dl.ndim > MAX_NDIM ||
        (dl.ndim && (!dl.shape || !dl.strides))) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int plain = method_false(t, torch_is_neg);
    if (plain == 1 && dl.code == DL_COMPLEX) {
        plain = method_false(t, torch_is_conj);
    }
    if (plain != 1) {
        return plain < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    static const int64_t no_extents[1] = {0};
    if (dl.ndim == 0) {
        dl.strides = (int64_t *)no_extents; /* a 0-d tensor's strides are (), as t.stride() says */
    }
    if (host) {
        /* Host memory, pinned or not, as cuda.core 1.2 reports a CPU tensor (PyTorch's
         * exchange API says CPU for both): not device accessible, ordered on no stream. */
        return tensor_view(cls, &dl, PyLong_FromLong(-1), 0, 0, t, Py_None, DL_CPU);
    }
    /* The view is built before any GIL release: dl's arrays belong to the tensor. */
    PyObject *view = tensor_view(cls, &dl, PyLong_FromLong(dl.device_id), 1, 0, t, Py_None, DL_CUDA);
    if (view == NULL || stream_ptr == -1) {
        return view;
    }
    long long consumer = stream_ptr == 0 ? 1 : stream_ptr;
    void *current = NULL;
    if (consumer < -1 || consumer == 2 || !cc_bound || dl.device_id < 0 || dl.device_id >= MAX_DEVICES ||
        order_events[dl.device_id] == NULL) {
        Py_DECREF(view);
        Py_RETURN_NOTIMPLEMENTED; /* PyTorch refuses it, or no event yet: the pure reader */
    }
    if (torch_api->current_work_stream(DL_CUDA, dl.device_id, &current) != 0) {
        Py_DECREF(view);
        return api_refused();
    }
    long long producer = current ? (long long)(uintptr_t)current : 1;
    if (producer != consumer) {
        int dev = -1, status = 0;
        if (producer == 1) {
            CC_CALL(status, cc_driver.ctx_get_device(&dev));
        }
        if (producer == 1 && (status || dev != dl.device_id)) {
            Py_DECREF(view);
            Py_RETURN_NOTIMPLEMENTED; /* the legacy stream would be another device's */
        }
        status = order(order_events[dl.device_id], (void *)(uintptr_t)producer, (void *)(uintptr_t)consumer);
        if (status) {
            Py_DECREF(view);
            if (status > 0) {
                return cc_raise(status, "cuStreamWaitEvent");
            }
            Py_RETURN_NOTIMPLEMENTED; /* the record failed: nothing ordered */
        }
    }
    return view;
}

PyObject *
cc_torch_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "torch_view(cls, tensor, stream_ptr) takes 3 arguments");
        return NULL;
    }
    if (cc_check_view_cls(args[0])) {
        return NULL;
    }
    PyObject *cls = Py_NewRef(args[0]), *t = Py_NewRef(args[1]), *sp = Py_NewRef(args[2]);
    PyObject *r = torch_view_impl(cls, t, sp); /* strong references across every GIL release */
    Py_DECREF(cls);
    Py_DECREF(t);
    Py_DECREF(sp);
    return r;
}

PyMethodDef cc_interop_functions[] = {
    {"read_capsule", read_capsule, METH_O, "read_capsule(capsule) -> ViewInfo of an unconsumed DLPack capsule"},
    {"dlpack_view", (PyCFunction)(void (*)(void))cc_dlpack_view, METH_FASTCALL,
     "dlpack_view(cls, obj, stream_ptr) -> cls: a view of a DLPack producer"},
    {"torch_setup", (PyCFunction)(void (*)(void))torch_setup, METH_FASTCALL,
     "torch_setup(tensor_type, exchange_api) -> whether torch_view reads that type natively"},
    {"torch_view", (PyCFunction)(void (*)(void))cc_torch_view, METH_FASTCALL,
     "torch_view(cls, tensor, stream_ptr) -> cls, or NotImplemented (the pure reader decides)"},
    {"set_order_event", (PyCFunction)(void (*)(void))set_order_event, METH_FASTCALL,
     "set_order_event(device_id, event) -> whether the event orders torch_view on that device"},
    {"record_wait", (PyCFunction)(void (*)(void))record_wait, METH_FASTCALL,
     "record_wait(event, producer, consumer) -> 0, -record status or +wait status"},
    {NULL, NULL, 0, NULL},
};

int
cc_interop_init(PyObject *module)
{
    if (PyType_Ready(&cc_ViewInfoType) < 0 ||
        PyModule_AddObjectRef(module, "ViewInfo", (PyObject *)&cc_ViewInfoType) < 0 ||
        PyType_Ready(&cc_ViewEntry_Type) < 0 ||
        PyModule_AddObjectRef(module, "ViewEntry", (PyObject *)&cc_ViewEntry_Type) < 0) {
        return -1;
    }
    if (order_lock == NULL && (order_lock = PyThread_allocate_lock()) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s_dlpack = PyUnicode_InternFromString("__dlpack__");
    s_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    s_is_neg = PyUnicode_InternFromString("is_neg");
    s_is_conj = PyUnicode_InternFromString("is_conj");
    /* Interned keyword names: a producer's argument parser (NumPy's) matches them by identity
     * before it compares strings. */
    PyObject *k_stream = PyUnicode_InternFromString("stream");
    PyObject *k_max = PyUnicode_InternFromString("max_version");
    kw_stream = k_stream ? PyTuple_Pack(1, k_stream) : NULL;
    kw_stream_max = k_stream && k_max ? PyTuple_Pack(2, k_stream, k_max) : NULL;
    Py_XDECREF(k_stream);
    Py_XDECREF(k_max);
    max_version = Py_BuildValue("(ii)", DLPACK_MAJOR, 0);
    legacy_types = PySet_New(NULL);
    if (!s_dlpack || !s_dlpack_device || !s_is_neg || !s_is_conj || !kw_stream || !kw_stream_max || !max_version ||
        !legacy_types) {
        return -1;
    }
    return PyModule_AddStringConstant(module, "AMBIGUOUS", AMBIGUOUS);
}
