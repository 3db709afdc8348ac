/* cuda_core._handles._native: how a LaunchPlan writes each value as parameter bytes (see launch.h).
 * The bytes are those of the Python packing plan the plan is built from
 * (cuda_core/_kernel_arg_handler.py), for every value it accepts; a value it refuses is an
 * exception, and the caller lets the Python path raise the user-facing one. */
#include "launch.h"
#include <structmember.h>
#include <math.h>

static int
out_of_range(void)
{
    PyErr_SetString(PyExc_OverflowError, "the value does not fit its parameter");
    return -1;
}

/* An integer (exact int, or through __index__ as struct does) into size bytes, host order. */
static int
pack_int(PyObject *a, int kind, unsigned int size, char *dst)
{
    PyObject *v = PyLong_Check(a) ? Py_NewRef(a) : PyNumber_Index(a);
    if (v == NULL) {
        return -1;
    }
    int overflow = 0, neg = 0;
    long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
    unsigned long long u;
    if (overflow == 0) {
        if (s == -1 && PyErr_Occurred()) {
            Py_DECREF(v);
            return -1;
        }
        neg = s < 0;
        u = (unsigned long long)s;
    } else if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(v); /* above LLONG_MAX */
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(v);
            return -1;
        }
    } else {
        Py_DECREF(v);
        return out_of_range();
    }
    Py_DECREF(v);
    unsigned int bits = size * 8;
    int fits_signed_low = bits == 64 || s >= -(1LL << (bits - 1)); /* for negative values */
    int ok;
    switch (kind) {
    case CC_ARG_FIT:
        ok = neg ? fits_signed_low : (bits == 64 || u < (1ULL << bits));
        break;
    case CC_ARG_SIGNED:
        ok = neg ? fits_signed_low : u < (1ULL << (bits - 1));
        break;
    default: /* CC_ARG_UNSIGNED, CC_ARG_CALL_INDEX */
        ok = !neg && (bits == 64 || u < (1ULL << bits));
        break;
    }
    if (!ok) {
        return out_of_range();
    }
    switch (size) { /* the low bytes, as the host stores an integer of that width */
    case 1: {
        uint8_t x = (uint8_t)u;
        memcpy(dst, &x, 1);
        return 0;
    }
    case 2: {
        uint16_t x = (uint16_t)u;
        memcpy(dst, &x, 2);
        return 0;
    }
    case 4: {
        uint32_t x = (uint32_t)u;
        memcpy(dst, &x, 4);
        return 0;
    }
    default:
        memcpy(dst, &u, 8);
        return 0;
    }
}

_Static_assert(sizeof(double) == 8 && sizeof(float) == 4, "IEEE binary64 and binary32");

/* As struct packs a float in native order: binary64 as it is (PyFloat_Pack8 on an IEEE host),
 * binary32 rounded with OverflowError for a finite value beyond its range (PyFloat_Pack4's rule),
 * binary16 by PyFloat_Pack2. */
static int
pack_float(double x, unsigned int size, char *dst)
{
    switch (size) {
    case 2:
        return PyFloat_Pack2(x, dst, PY_LITTLE_ENDIAN);
    case 4: {
        float y = (float)x;
        if (isinf(y) && !isinf(x)) {
            PyErr_SetString(PyExc_OverflowError, "float too large to pack with f format");
            return -1;
        }
        memcpy(dst, &y, 4);
        return 0;
    }
    default:
        memcpy(dst, &x, 8);
        return 0;
    }
}

/* A NumPy scalar's own bytes, where they are its value's (a number kind of the same size; a
 * float that is no NaN, whose payload a conversion would not keep): 1 copied, 0 not (no error). */
static int
pack_number_buffer(const cc_arg *d, PyObject *a, char *dst)
{
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 0;
    }
    int ok = view.len == (Py_ssize_t)d->size;
    if (ok && d->kind == CC_ARG_FLOAT) {
        if (d->size == 4) {
            float f;
            memcpy(&f, view.buf, 4);
            ok = !isnan(f);
        } else if (d->size == 2) {
            uint16_t h;
            memcpy(&h, view.buf, 2);
            ok = (h & 0x7c00) != 0x7c00 || (h & 0x03ff) == 0; /* not a binary16 NaN */
        } else {
            double x;
            memcpy(&x, view.buf, 8);
            ok = !isnan(x);
        }
    } else if (ok && d->kind == CC_ARG_BOOL) {
        ok = *(const unsigned char *)view.buf <= 1;
    }
    if (ok) {
        memcpy(dst, view.buf, d->size);
    }
    PyBuffer_Release(&view);
    return ok;
}

/* The value the getter names: its call, or the slot its member descriptor reads. */
static PyObject *
get(const cc_arg *d, PyObject *a)
{
    if (d->slot) {
        return Py_TYPE(d->getter)->tp_descr_get(d->getter, a, (PyObject *)Py_TYPE(a));
    }
    return PyObject_CallOneArg(d->getter, a);
}

/* Exactly size bytes from an object with the buffer protocol (only bytes or bytearray when
 * strict, as struct's "s" format takes). */
static int
pack_buffer(PyObject *a, unsigned int size, char *dst, int strict)
{
    if (strict && !PyBytes_Check(a) && !PyByteArray_Check(a)) {
        PyErr_SetString(PyExc_TypeError, "the getter must return bytes");
        return -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    int ok = view.len == (Py_ssize_t)size;
    if (ok) {
        memcpy(dst, view.buf, size);
    }
    PyBuffer_Release(&view);
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "the value has another size than its parameter");
        return -1;
    }
    return 0;
}

/* CC_FAST_INLINE, on the first value of the type: whether its buffer is its inline storage (then
 * every value of the type keeps it there). Sets inline_ok; 1 confirmed. */
static int
inline_confirm(cc_arg *d, PyObject *a)
{
    Py_buffer view;
    if (PyObject_GetBuffer(a, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        d->inline_ok = -1;
        return 0;
    }
    d->inline_ok = view.buf == (char *)a + sizeof(PyObject) && view.len == (Py_ssize_t)d->size ? 1 : -1;
    PyBuffer_Release(&view);
    return d->inline_ok > 0;
}

/* A NumPy scalar's value from its inline storage: 1 packed, 0 not (the general path decides).
 * The first value of the type is checked through its buffer: the shortcut is kept only when
 * the buffer is that storage. As pack_number_buffer: a NaN or a bool byte above 1 takes the
 * general path. One fixed-size copy per size, no call. */
static inline Py_ALWAYS_INLINE int
pack_inline(cc_arg *d, PyObject *a, char *dst)
{
    if (d->inline_ok <= 0 && (d->inline_ok < 0 || !inline_confirm(d, a))) {
        return 0;
    }
    const char *at = (const char *)a + sizeof(PyObject);
    switch (d->size) {
    case 8: {
        double x;
        memcpy(&x, at, 8);
        if (d->kind == CC_ARG_FLOAT && isnan(x)) {
            return 0;
        }
        memcpy(dst, at, 8);
        return 1;
    }
    case 4: {
        float f;
        memcpy(&f, at, 4);
        if (d->kind == CC_ARG_FLOAT && isnan(f)) {
            return 0;
        }
        memcpy(dst, at, 4);
        return 1;
    }
    case 2: {
        uint16_t h;
        memcpy(&h, at, 2);
        if (d->kind == CC_ARG_FLOAT && (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) { /* a binary16 NaN */
            return 0;
        }
        memcpy(dst, at, 2);
        return 1;
    }
    case 1:
        if (d->kind == CC_ARG_BOOL && *(const unsigned char *)at > 1) {
            return 0;
        }
        memcpy(dst, at, 1);
        return 1;
    default:
        memcpy(dst, at, d->size);
        return 1;
    }
}

/* CC_FAST_SLOT: the address the slot holds (an exact int): 1 packed, 0 not (no exception: the
 * general path decides), -1 with an exception (an int that is no address). The int read last is
 * kept with its value: a Buffer launched again packs with no conversion. */
static inline int
pack_slot(cc_arg *d, PyObject *a, char *dst)
{
    PyObject *v = PyMember_GetOne((const char *)a, d->member); /* a's type is the plan's */
    if (v == NULL) {
        PyErr_Clear(); /* unset: the getter's path says so */
        return 0;
    }
    if (v == d->last_int) {
        memcpy(dst, &d->last_addr, 8);
        Py_DECREF(v);
        return 1;
    }
    if (!PyLong_CheckExact(v)) {
        Py_DECREF(v);
        return 0; /* not an int: the getter says what is wrong */
    }
    _Static_assert(sizeof(unsigned long) == 8, "an address read as an unsigned long (LP64)");
    unsigned long u = PyLong_AsUnsignedLong(v); /* one loop over the digits */
    if (u == (unsigned long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative or too large: pack_int says which */
        int err = pack_int(v, CC_ARG_UNSIGNED, 8, dst);
        Py_DECREF(v);
        return err < 0 ? -1 : 1;
    }
    d->last_addr = (uint64_t)u;
    memcpy(dst, &d->last_addr, 8);
    Py_XSETREF(d->last_int, v); /* the reference PyMember_GetOne gave */
    return 1;
}

/* The general packing of one value (every kind; the reference the shortcuts agree with). */
static int
pack_general(cc_arg *d, PyObject *a, char *dst)
{
    if (d->buffer && pack_number_buffer(d, a, dst)) {
        return 0;
    }
    switch (d->kind) {
    case CC_ARG_FIT:
    case CC_ARG_SIGNED:
    case CC_ARG_UNSIGNED:
        return pack_int(a, d->kind, d->size, dst);
    case CC_ARG_FLOAT: {
        double x = PyFloat_CheckExact(a) ? PyFloat_AS_DOUBLE(a) : PyFloat_AsDouble(a);
        if (x == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        return pack_float(x, d->size, dst);
    }
    case CC_ARG_COMPLEX: {
        Py_complex c = PyComplex_AsCComplex(a);
        if (c.real == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        unsigned int half = d->size / 2;
        return pack_float(c.real, half, dst) < 0 ? -1 : pack_float(c.imag, half, dst + half);
    }
    case CC_ARG_BOOL: {
        int t = a == Py_True ? 1 : a == Py_False ? 0 : PyObject_IsTrue(a);
        if (t < 0) {
            return -1;
        }
        *dst = (char)t;
        return 0;
    }
    case CC_ARG_BYTES:
        return pack_buffer(a, d->size, dst, 0);
    default: { /* the call kinds */
        PyObject *r = get(d, a);
        if (r == NULL) {
            return -1;
        }
        int err = d->kind == CC_ARG_CALL_INDEX ? pack_int(r, CC_ARG_UNSIGNED, 8, dst) : pack_buffer(r, d->size, dst, 1);
        Py_DECREF(r);
        return err;
    }
    }
}

/* The steps of a launch, inlined into cc_plan_launch (one call per launch, not one per step);
 * cc_plan_matches and cc_plan_pack are the same for PreparedLaunchBase and LaunchPlan.pack. */
static inline Py_ALWAYS_INLINE int
plan_matches(const cc_plan *plan, PyObject *const *args, Py_ssize_t n)
{
    if (n != plan->nargs || plan->types == NULL) { /* types is NULL once the collector cleared it */
        return 0;
    }
    PyObject *const *types = &PyTuple_GET_ITEM(plan->types, 0); /* packed pointers, not cc_arg's stride */
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((PyObject *)Py_TYPE(args[i]) != types[i]) {
            return 0;
        }
    }
    return 1;
}

/* Many doubles (the 512-argument case): no per-argument descriptor read. With types, each
 * argument's type is checked as it is read (0 at the first other one). Always inlined: each
 * caller gets its own loop, with or without the check (types NULL is a constant there). */
static inline Py_ALWAYS_INLINE int
pack_dense_f64(const cc_plan *plan, PyObject *const *args, PyObject *const *types, char *bytes)
{
    Py_ssize_t n = plan->nargs; /* a local: the stores into bytes may alias the plan, for all C knows */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = args[i];
        if (types != NULL && (PyObject *)Py_TYPE(a) != types[i]) {
            return 0;
        }
        double x = PyFloat_AS_DOUBLE(a);
        memcpy(bytes + 8 * i, &x, 8);
    }
    return 1;
}

/* The same where every argument must be of one type: four at a time, no per-argument type
 * read from the plan (512 doubles cost about 9 instructions each with it, 7 without). */
static inline Py_ALWAYS_INLINE int
pack_dense_one_type(Py_ssize_t n, PyObject *const *args, const PyTypeObject *type, char *bytes)
{
    Py_ssize_t i = 0;
    for (; i + 4 <= n; i += 4) {
        PyObject *a0 = args[i], *a1 = args[i + 1], *a2 = args[i + 2], *a3 = args[i + 3];
        if ((Py_TYPE(a0) != type) | (Py_TYPE(a1) != type) | (Py_TYPE(a2) != type) | (Py_TYPE(a3) != type)) {
            return 0;
        }
        double x0 = PyFloat_AS_DOUBLE(a0), x1 = PyFloat_AS_DOUBLE(a1), x2 = PyFloat_AS_DOUBLE(a2),
               x3 = PyFloat_AS_DOUBLE(a3);
        memcpy(bytes + 8 * i, &x0, 8);
        memcpy(bytes + 8 * i + 8, &x1, 8);
        memcpy(bytes + 8 * i + 16, &x2, 8);
        memcpy(bytes + 8 * i + 24, &x3, 8);
    }
    for (; i < n; i++) {
        if (Py_TYPE(args[i]) != type) {
            return 0;
        }
        double x = PyFloat_AS_DOUBLE(args[i]);
        memcpy(bytes + 8 * i, &x, 8);
    }
    return 1;
}

static inline Py_ALWAYS_INLINE int
plan_pack(const cc_plan *plan, PyObject *const *args, char *bytes)
{
    if (plan->dense_f64) {
        pack_dense_f64(plan, args, NULL, bytes);
        return 0;
    }
    Py_ssize_t n = plan->nargs; /* fixed for the plan's life: read once (see pack_dense_f64) */
    cc_arg *descr = plan->args;
    for (Py_ssize_t i = 0; i < n; i++) {
        cc_arg *d = &descr[i];
        PyObject *a = args[i];
        char *dst = bytes + d->offset;
        int done = 0;
        switch (d->fast) { /* the common values here, without a call; anything else: pack_general */
        case CC_FAST_F64: {
            double x = PyFloat_AS_DOUBLE(a);
            memcpy(dst, &x, 8);
            continue;
        }
        case CC_FAST_INLINE:
            done = pack_inline(d, a, dst);
            break;
        case CC_FAST_SLOT:
            done = pack_slot(d, a, dst);
            break;
        default:
            break;
        }
        if (done < 0 || (!done && pack_general(d, a, dst) < 0)) {
            return -1;
        }
    }
    return 0;
}

int
cc_plan_matches(const cc_plan *plan, PyObject *const *args, Py_ssize_t n)
{
    return plan_matches(plan, args, n);
}

int
cc_plan_pack(const cc_plan *plan, PyObject *const *args, char *bytes)
{
    return plan_pack(plan, args, bytes);
}

/* Whether args have the plan's types, and packed: 1 packed; 0 (no exception) other types (bytes
 * may hold some new values); -1 with an exception set. A dense-doubles plan checks each
 * argument's type as it packs it: one pass over the arguments. */
static inline Py_ALWAYS_INLINE int
plan_match_pack(const cc_plan *plan, PyObject *const *args, Py_ssize_t n, char *bytes)
{
    if (plan->dense_f64) {
        if (n != plan->nargs || plan->types == NULL) {
            return 0;
        }
        if (plan->dense_type != NULL) {
            return pack_dense_one_type(plan->nargs, args, plan->dense_type, bytes);
        }
        return pack_dense_f64(plan, args, &PyTuple_GET_ITEM(plan->types, 0), bytes);
    }
    if (!plan_matches(plan, args, n)) {
        return 0;
    }
    return plan_pack(plan, args, bytes) == 0 ? 1 : -1;
}

int
cc_plan_launch(cc_plan *plan, cc_launch *cfg, PyObject *const *args, Py_ssize_t n)
{
    char *bytes = plan->bytes, *fresh = NULL;
    void **params = plan->params;
    int own = !plan->busy;
    if (own) {
        plan->busy = 1;
    } else if ((fresh = cc_plan_new_storage(plan, &bytes, &params)) == NULL) { /* another launch uses ours */
        return -1;
    }
    int st = -1;
    int packed = plan_match_pack(plan, args, n, bytes);
    if (packed == 0) {
        st = -2; /* other types: the Python path finds (or makes) their plan */
    } else if (packed == 1) {
        if (cfg->stream == NULL || cfg->stream->released) {
            st = -2; /* closed by the code packing ran: the Python path says so */
        } else {
            void *function = plan->function, **p = plan->nargs ? params : NULL;
            CC_LAUNCH_CALL(st, cc_driver.launch_kernel_ex(&cfg->cfg, function, p, NULL));
        }
    }
    if (own) {
        plan->busy = 0;
    }
    if (fresh != NULL) {
        PyMem_Free(fresh);
    }
    return st;
}
