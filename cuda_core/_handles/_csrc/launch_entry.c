/* cuda_core._handles._native: LaunchEntry (the C entry of cuda_core.launch) and PreparedLaunchBase (the
 * C base of cuda_core.PreparedLaunch), the steady state of a launch without a Python frame (see
 * launch.h). What they accept, they launch; everything else, and every failure, goes to the
 * Python functions they were given. */
#include "entry.h"
#include "launch.h"

/* launch_counters(): launches made in C (fast) or handed to Python (slow); of the latter, those
 * whose values C began to pack and refused (refused). */
static unsigned long long n_fast_launch, n_slow_launch, n_refused_launch;
static unsigned long long n_fast_prepared, n_slow_prepared, n_refused_prepared;

/* ------------------------------------------------------------------------------------------
 * LaunchEntry. */

typedef struct {
    CC_ENTRY_HEAD       /* fallback(stream, config, kernel, *args): launch() in Python */
    PyObject *failed;   /* failed(status, stream, config, kernel, *args): a launch the driver refused */
    PyObject *types[3]; /* the exact types of stream, config, kernel */
    PyObject *slots[3]; /* the member descriptors read: the stream's StreamHandle, the config's
                           LaunchConfigHandle of its last stream, the kernel's LaunchPlan */
    PyMemberDef *members[3]; /* cc_plain_member of each slot */
} cc_entry;

/* The steady state: the status of the launch (>= 0), or -2 when it is not one (no exception). */
static int
entry_fast(cc_entry *self, PyObject *const *args, Py_ssize_t n)
{
    PyObject *h = cc_slot_value(self->slots[0], self->members[0], args[0]);
    PyObject *cfg = cc_slot_value(self->slots[1], self->members[1], args[1]);
    PyObject *plan = cc_slot_value(self->slots[2], self->members[2], args[2]);
    int st = -2;
    if (h != NULL && cfg != NULL && plan != NULL && CC_IS_LAUNCH(cfg) && CC_IS_PLAN(plan) &&
        (PyObject *)((cc_launch *)cfg)->stream == h && !((cc_stream *)h)->released) {
        st = cc_plan_launch((cc_plan *)plan, (cc_launch *)cfg, args + 3, n - 3);
        if (st == -1) {
            PyErr_Clear(); /* the Python path packs again and raises what the user should see */
            n_refused_launch++;
            st = -2;
        }
    }
    Py_XDECREF(h);
    Py_XDECREF(cfg);
    Py_XDECREF(plan);
    return st;
}

/* fn(status, *args): a refused launch, for Python to explain (or to retry in its context). */
static PyObject *
call_with_status(PyObject *fn, PyObject *first, int status, PyObject *const *args, Py_ssize_t n)
{
    PyObject *small[16], **stack = n + 2 <= 16 ? small : PyMem_Malloc((size_t)(n + 2) * sizeof(PyObject *));
    if (stack == NULL) {
        return PyErr_NoMemory();
    }
    PyObject *code = PyLong_FromLong(status), *out = NULL;
    if (code != NULL) {
        Py_ssize_t k = 0;
        if (first != NULL) {
            stack[k++] = first;
        }
        stack[k++] = code;
        for (Py_ssize_t i = 0; i < n; i++) {
            stack[k++] = args[i];
        }
        out = PyObject_Vectorcall(fn, stack, (size_t)k, NULL);
        Py_DECREF(code);
    }
    if (stack != small) {
        PyMem_Free(stack);
    }
    return out;
}

static PyObject *
entry_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    cc_entry *self = (cc_entry *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL && n >= 3 && cc_bound && (PyObject *)Py_TYPE(args[0]) == self->types[0] &&
        (PyObject *)Py_TYPE(args[1]) == self->types[1] && (PyObject *)Py_TYPE(args[2]) == self->types[2]) {
        int st = entry_fast(self, args, n);
        if (st == 0) {
            n_fast_launch++;
            Py_RETURN_NONE;
        }
        if (st > 0) {
            n_fast_launch++;
            return call_with_status(self->failed, NULL, st, args, n);
        }
    }
    n_slow_launch++;
    return cc_entry_fallback(op, args, nargsf, kwnames);
}

/* LaunchEntry(fallback, failed, stream_type, stream_slot, config_type, config_slot, kernel_type, kernel_slot) */
static PyObject *
entry_new(PyTypeObject *cls, PyObject *args, PyObject *kwds)
{
    PyObject *a[8];
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "LaunchEntry takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "LaunchEntry", 8, 8, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7])) {
        return NULL;
    }
    if (!PyCallable_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "LaunchEntry: failed must be callable");
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        PyObject *type = a[2 + 2 * i], *slot = a[3 + 2 * i];
        if (!PyType_Check(type) || !PyObject_TypeCheck(slot, &PyMemberDescr_Type) ||
            !PyType_IsSubtype((PyTypeObject *)type, PyDescr_TYPE(slot))) {
            PyErr_SetString(PyExc_TypeError, "LaunchEntry: each type must come with a member descriptor (a slot) "
                                             "of that type");
            return NULL;
        }
    }
    cc_entry *self = PyObject_GC_New(cc_entry, cls);
    if (self == NULL) {
        return NULL;
    }
    self->failed = NULL;
    for (int i = 0; i < 3; i++) {
        self->types[i] = self->slots[i] = NULL;
    }
    if (cc_entry_init((PyObject *)self, "LaunchEntry", a[0], entry_vectorcall) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->failed = Py_NewRef(a[1]);
    for (int i = 0; i < 3; i++) {
        self->types[i] = Py_NewRef(a[2 + 2 * i]);
        self->slots[i] = Py_NewRef(a[3 + 2 * i]);
        self->members[i] = cc_plain_member(a[3 + 2 * i]);
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
entry_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_entry *self = (cc_entry *)op;
    Py_VISIT(self->failed);
    for (int i = 0; i < 3; i++) {
        Py_VISIT(self->types[i]);
        Py_VISIT(self->slots[i]);
    }
    return cc_entry_traverse(op, visit, arg);
}

static int
entry_clear(PyObject *op)
{
    cc_entry *self = (cc_entry *)op;
    cc_entry_clear(op);
    Py_CLEAR(self->failed);
    for (int i = 0; i < 3; i++) {
        Py_CLEAR(self->types[i]);
        Py_CLEAR(self->slots[i]);
    }
    return 0;
}

PyTypeObject cc_LaunchEntry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.LaunchEntry",
    CC_ENTRY_TYPE_SLOTS(cc_entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "LaunchEntry(fallback, failed, stream_type, stream_slot, config_type, config_slot, kernel_type, "
              "kernel_slot): launch(stream, config, kernel, *args) in C for the types and cached state it knows, "
              "fallback(...) for anything else",
    .tp_traverse = entry_traverse,
    .tp_clear = entry_clear,
    .tp_new = entry_new,
};

/* ------------------------------------------------------------------------------------------
 * PreparedLaunchBase. */

typedef struct {
    PyObject_HEAD
    PyObject *cfg;  /* LaunchConfigHandle, or NULL: the next call takes the Python path */
    PyObject *plan; /* LaunchPlan of the bound arguments' types, or NULL */
    PyObject *keep; /* what owns the bound parameter storage */
    char *bytes;    /* the bound parameter bytes (in keep) */
    void **params;  /* their void* array (in keep) */
    PyObject *args; /* _args: the bound arguments */
} cc_prepared;

/* slow(self, *args): the call in Python; failed(self, status): a launch the driver refused. */
static PyObject *prepared_slow, *prepared_failed;

/* The steady state: the status (>= 0), or -2 when the Python path must run (no exception). */
static int
prepared_fast(cc_prepared *self, PyObject *args)
{
    cc_launch *cfg = (cc_launch *)Py_NewRef(self->cfg);
    cc_plan *plan = (cc_plan *)Py_NewRef(self->plan);
    PyObject *keep = Py_XNewRef(self->keep);
    char *bytes = self->bytes;
    void **params = plan->nargs ? self->params : NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int st = -2;
    if (n != 0) { /* bind new arguments: in place, where their types are the bound ones */
        if (!cc_plan_matches(plan, &PyTuple_GET_ITEM(args, 0), n)) {
            goto done;
        }
        if (cc_plan_pack(plan, &PyTuple_GET_ITEM(args, 0), bytes) < 0) {
            PyErr_Clear(); /* the Python path binds them again: it raises, and restores the old bytes */
            n_refused_prepared++;
            goto done;
        }
        if (self->plan != (PyObject *)plan || self->keep != keep) {
            goto done; /* packing ran code that rebound this object: its new state decides */
        }
        Py_XSETREF(self->args, Py_NewRef(args));
    }
    if (cfg->stream != NULL && !cfg->stream->released) {
        void *function = plan->function;
        CC_LAUNCH_CALL(st, cc_driver.launch_kernel_ex(&cfg->cfg, function, params, NULL));
    }
done:
    Py_XDECREF(keep);
    Py_DECREF(plan);
    Py_DECREF(cfg);
    return st;
}

static PyObject *
prepared_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    cc_prepared *self = (cc_prepared *)op;
    if (cc_bound && self->cfg != NULL && self->plan != NULL && (kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0) &&
        prepared_slow != NULL) {
        int st = prepared_fast(self, args);
        if (st == 0) {
            n_fast_prepared++;
            Py_RETURN_NONE;
        }
        if (st > 0) {
            n_fast_prepared++;
            return call_with_status(prepared_failed, op, st, NULL, 0);
        }
    }
    n_slow_prepared++;
    if (prepared_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PreparedLaunchBase: no handlers were set");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *full = PyTuple_New(n + 1);
    if (full == NULL) {
        return NULL;
    }
    PyTuple_SET_ITEM(full, 0, Py_NewRef(op));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    }
    PyObject *out = PyObject_Call(prepared_slow, full, kwargs);
    Py_DECREF(full);
    return out;
}

/* _fast_set(cfg, plan, keep, bytes, params): what the next calls launch with (cfg or plan None:
 * the Python path). keep owns the storage at bytes and params. */
static PyObject *
prepared_fast_set(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    cc_prepared *self = (cc_prepared *)op;
    void *bytes, *params;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_fast_set(cfg, plan, keep, bytes, params) takes 5 arguments");
        return NULL;
    }
    PyObject *cfg = args[0], *plan = args[1];
    if ((cfg != Py_None && !CC_IS_LAUNCH(cfg)) || (plan != Py_None && !CC_IS_PLAN(plan))) {
        PyErr_SetString(PyExc_TypeError, "_fast_set: cfg must be a LaunchConfigHandle and plan a LaunchPlan, or None");
        return NULL;
    }
    if (cc_address(args[3], &bytes) || cc_address(args[4], &params)) {
        return NULL;
    }
    int on = cfg != Py_None && plan != Py_None;
    if (on && ((cc_plan *)plan)->nargs && (bytes == NULL || params == NULL)) {
        PyErr_SetString(PyExc_ValueError, "_fast_set: a plan with arguments needs their storage");
        return NULL;
    }
    Py_XSETREF(self->cfg, on ? Py_NewRef(cfg) : NULL);
    Py_XSETREF(self->plan, on ? Py_NewRef(plan) : NULL);
    Py_XSETREF(self->keep, on ? Py_NewRef(args[2]) : NULL);
    self->bytes = on ? bytes : NULL;
    self->params = on ? params : NULL;
    Py_RETURN_NONE;
}

/* PreparedLaunchBase._handlers(slow, failed), once: the Python functions the calls go to. */
static PyObject *
prepared_handlers(PyObject *cls, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_handlers(slow, failed) takes 2 callables");
        return NULL;
    }
    Py_XSETREF(prepared_slow, Py_NewRef(args[0]));
    Py_XSETREF(prepared_failed, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static int
prepared_traverse(PyObject *op, visitproc visit, void *arg)
{
    cc_prepared *self = (cc_prepared *)op;
    Py_VISIT(self->cfg);
    Py_VISIT(self->plan);
    Py_VISIT(self->keep);
    Py_VISIT(self->args);
    return 0;
}

static int
prepared_clear(PyObject *op)
{
    cc_prepared *self = (cc_prepared *)op;
    Py_CLEAR(self->cfg);
    Py_CLEAR(self->plan);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->args);
    return 0;
}

/* For a Python subclass, subtype_dealloc clears its slots, calls this, then drops the type. */
static void
prepared_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    prepared_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef prepared_methods[] = {
    {"_fast_set", (PyCFunction)(void (*)(void))prepared_fast_set, METH_FASTCALL,
     "_fast_set(cfg, plan, keep, bytes, params): the state calls launch with in C (None: the Python path)"},
    {"_handlers", (PyCFunction)(void (*)(void))prepared_handlers, METH_FASTCALL | METH_CLASS,
     "_handlers(slow, failed): slow(self, *args) runs a call in Python, failed(self, status) a refused launch"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef prepared_members[] = {
    {"_args", T_OBJECT_EX, offsetof(cc_prepared, args), 0, "the bound arguments"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject cc_PreparedLaunchBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cuda_core._handles._native.PreparedLaunchBase",
    .tp_basicsize = sizeof(cc_prepared),
    .tp_dealloc = prepared_dealloc,
    .tp_call = prepared_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C base of PreparedLaunch: a call with its bound state (or new arguments of the bound types, "
              "packed in place) launches in C; any other call runs slow(self, *args)",
    .tp_traverse = prepared_traverse,
    .tp_clear = prepared_clear,
    .tp_methods = prepared_methods,
    .tp_members = prepared_members,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------
 * Module functions and types. */

static PyObject *
launch_counters(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("(KKKKKK)", n_fast_launch, n_slow_launch, n_refused_launch, n_fast_prepared,
                         n_slow_prepared, n_refused_prepared);
}

PyMethodDef cc_launch_functions[] = {
    {"launch_counters", launch_counters, METH_NOARGS,
     "launch_counters() -> (launches made in C, handed to Python, of which C refused a value; the same three "
     "for PreparedLaunch calls), since the module loaded"},
    {NULL, NULL, 0, NULL},
};

int
cc_launch_init(PyObject *module)
{
    static PyTypeObject *types[] = {&cc_LaunchPlan_Type, &cc_LaunchEntry_Type, &cc_PreparedLaunchBase_Type};
    static const char *names[] = {"LaunchPlan", "LaunchEntry", "PreparedLaunchBase"};
    if (cc_add_types(module, types, names, sizeof(types) / sizeof(types[0])) < 0) {
        return -1;
    }
    PyObject *kinds = cc_arg_kind_names();
    if (kinds == NULL || PyModule_AddObject(module, "ARG_KINDS", kinds) < 0) {
        Py_XDECREF(kinds);
        return -1;
    }
    return 0;
}
