/*
 * The launch fast path (see cuda_core/_handles/_protocol.py, NativeBackend): what launch_plan.c
 * (LaunchPlan, how one tuple of argument types packs for one kernel) and launch_entry.c
 * (LaunchEntry, the C entry of cuda_core.launch, and PreparedLaunchBase) share.
 *
 * Python builds every LaunchPlan (from its packing plan, after checking the arguments against
 * the kernel) and decides what the entry accepts: the entry only compares types and reads the
 * slots Python names to it; anything it does not handle, and every failure, goes to the Python
 * function it was given, which owns the checks and the messages.
 */
#ifndef CUDA_CORE_LAUNCH_H
#define CUDA_CORE_LAUNCH_H

#include "handles.h"

/* How an argument becomes parameter bytes; the names, in this order, are ARG_KINDS (Python:
 * cuda_core._handles._protocol.ARG_KINDS). */
enum {
    CC_ARG_FIT,        /* an integer (__index__) that fits size bytes signed or unsigned: its low bytes */
    CC_ARG_SIGNED,     /* an integer in the signed range of size bytes */
    CC_ARG_UNSIGNED,   /* an integer in the unsigned range of size bytes */
    CC_ARG_FLOAT,      /* float(value) as an IEEE binary16/32/64 (size 2, 4, 8) */
    CC_ARG_COMPLEX,    /* complex(value) as two floats of size / 2 each (size 8, 16) */
    CC_ARG_BOOL,       /* truth value, 1 byte */
    CC_ARG_BYTES,      /* the object's buffer, exactly size bytes */
    CC_ARG_CALL_INDEX, /* getter(value) (or the slot getter names): an integer in the unsigned range of 8 bytes */
    CC_ARG_CALL_BYTES, /* getter(value) (or the slot): bytes or bytearray of exactly size bytes */
    CC_N_ARG_KINDS
};

typedef struct {
    PyTypeObject *type; /* borrowed: the plan's types tuple holds it */
    PyObject *getter;   /* the call kinds' callable or member descriptor, else NULL */
    size_t offset;
    unsigned int size;
    int kind;
    char slot;   /* getter is a member descriptor: read the slot through it */
    char buffer; /* a number kind whose type has the buffer protocol (NumPy scalars): its bytes,
                    when they have the size (and are no NaN), are the value's */
    char fast;   /* a shortcut for this argument's common case (CC_FAST_*), else 0 */
    signed char inline_ok; /* CC_FAST_INLINE: 1 once a value's buffer was seen to be its inline
                              storage (so every value of the type keeps it there), -1 not, 0 unknown */
    PyMemberDef *member; /* CC_FAST_SLOT: the getter's member, read with PyMember_GetOne */
    PyObject *last_int;  /* CC_FAST_SLOT: the int the slot held last (a strong reference: while it
                            lives, no other int has its address, and an int never changes) */
    uint64_t last_addr;  /* its value, as packed: the same int again packs without a conversion */
} cc_arg;

/* Shortcuts parse_arg chooses (the general packing stays the reference; each shortcut gives the
 * same bytes and falls back to it for anything unusual). */
enum {
    CC_FAST_NONE,
    CC_FAST_F64,    /* a float (or a subclass: NumPy float64) into a double: ob_fval as it is */
    CC_FAST_INLINE, /* a NumPy scalar: its value read where it lives in the object (right after
                       the object header), without a buffer export per launch */
    CC_FAST_SLOT,   /* the getter is a T_OBJECT_EX slot of the exact type: read by CPython's
                       PyMember_GetOne, without the descriptor call */
};

typedef struct {
    PyObject_HEAD
    void *function;  /* the CUfunction (a CUkernel's address) */
    PyObject *types; /* tuple: the exact type of each argument */
    Py_ssize_t nargs;
    size_t size; /* bytes of the packed parameters */
    cc_arg *args;
    char *storage; /* the plan's own parameter buffer (zeroed padding) and void* array */
    char *bytes;
    void **params;
    int busy; /* storage in use by a launch that released the GIL (another takes a fresh one) */
    int dense_f64; /* every argument a float (CC_FAST_F64) at 8 * its index: packed in one tight loop */
    PyTypeObject *dense_type; /* dense_f64 with one type for every argument (borrowed: types holds
                                 it): each argument's type is compared with it, four at a time */
} cc_plan;

/* The driver call of a launch, with the GIL released like every driver call: a launch waiting
 * for room in the driver's queue behind a Python host function must let that function (and
 * every other Python thread) run. Built with -DCC_LAUNCH_KEEPS_GIL it holds the GIL instead:
 * only to measure what the release costs (tests/handles/native_stub/drive_launch.py's
 * gil_released_during_the_launch then fails, as it should). */
#ifdef CC_LAUNCH_KEEPS_GIL
#define CC_LAUNCH_CALL(status, expr) ((status) = (expr))
#else
#define CC_LAUNCH_CALL(status, expr) CC_CALL(status, expr)
#endif

extern PyTypeObject cc_LaunchPlan_Type;
extern PyTypeObject cc_LaunchEntry_Type;
extern PyTypeObject cc_PreparedLaunchBase_Type;
#define CC_IS_PLAN(o) (Py_TYPE(o) == &cc_LaunchPlan_Type)
#define CC_IS_LAUNCH(o) (Py_TYPE(o) == &cc_LaunchConfigHandle_Type)

/* Whether args[0..n) have exactly the plan's types (and n is its count). */
int cc_plan_matches(const cc_plan *plan, PyObject *const *args, Py_ssize_t n);
/* Write args (of the plan's types) into bytes at their offsets: 0, or -1 with an exception set
 * (bytes then holds some new values). May run Python code (the call kinds, __index__, ...). */
int cc_plan_pack(const cc_plan *plan, PyObject *const *args, char *bytes);
/* Check and pack args[0..n) into a parameter buffer and cuLaunchKernelEx them on cfg, the GIL
 * released around the driver call: the status (>= 0); -1 with an exception set when packing
 * failed; -2 (no exception) when the arguments are not of the plan's types, or cfg's stream was
 * closed meanwhile. The caller holds references to plan and cfg across the call (packing may
 * run Python code). In launch_pack.c, beside the packing it inlines. */
int cc_plan_launch(cc_plan *plan, cc_launch *cfg, PyObject *const *args, Py_ssize_t n);
/* A fresh parameter buffer for plan (the storage to PyMem_Free, its bytes and void* array): for
 * a launch while another one uses the plan's own. NULL with MemoryError set. */
char *cc_plan_new_storage(const cc_plan *plan, char **bytes, void ***params);

/* ARG_KINDS: the kind names, in enum order (a new reference, NULL with the error set). */
PyObject *cc_arg_kind_names(void);

int cc_launch_init(PyObject *module);
extern PyMethodDef cc_launch_functions[];

#endif
