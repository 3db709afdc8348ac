/* cuda_core._handles._native: what the C entries share. An entry is a callable that runs the
 * steady state of one Python function in C and hands every other call to that function (its
 * fallback), which owns the checks, the slow paths and the messages: LaunchEntry (cuda_core.launch,
 * launch_entry.c), ViewEntry (StridedMemoryView.from_dlpack, interop_entry.c), RecordEntry
 * (Stream.record, entry_record.c), SyncEntry (Stream.sync, entry_sync.c), CopyEntry
 * (Buffer.copy_from/copy_to, entry_copy.c), AllocEntry and CloseEntry
 * (DeviceMemoryResource.allocate and Buffer.close, entry_alloc.c). Each
 * has a __dict__ (functools.update_wrapper gives it the function's name, doc and __wrapped__) and
 * reads the slots of the Python objects it is called with only through the member descriptors
 * Python handed it. */
#ifndef CUDA_CORE_ENTRY_H
#define CUDA_CORE_ENTRY_H

#include "native.h"
#include <structmember.h>

#define CC_ENTRY_HEAD                                                                              \
    PyObject_HEAD vectorcallfunc vectorcall;                                                       \
    PyObject *dict;     /* functools.update_wrapper's __doc__, __wrapped__, ... */                 \
    PyObject *weakrefs; /* weakref.WeakMethod(stream.record) works, as for a function */           \
    PyObject *fallback; /* the Python function: every call C does not take */

typedef struct {
    CC_ENTRY_HEAD
} cc_entry_head;

/* The __dict__ getset every entry type lists. */
extern PyGetSetDef cc_entry_getset[];

/* The type slots every entry type T (a struct beginning with CC_ENTRY_HEAD) shares; each adds
 * its name, flags, doc, traverse, clear and new. */
#define CC_ENTRY_TYPE_SLOTS(T)                                                                     \
    .tp_basicsize = sizeof(T), .tp_dealloc = cc_entry_dealloc, .tp_vectorcall_offset = offsetof(T, vectorcall), \
    .tp_repr = cc_entry_repr, .tp_call = PyVectorcall_Call, .tp_getset = cc_entry_getset,         \
    .tp_dictoffset = offsetof(T, dict), .tp_weaklistoffset = offsetof(T, weakrefs)

/* Set the head of a new entry: NULL-safe on error paths; -1 with TypeError where fallback is
 * not callable (name names the entry type in the message). */
int cc_entry_init(PyObject *op, const char *name, PyObject *fallback, vectorcallfunc call);
int cc_entry_traverse(PyObject *op, visitproc visit, void *arg);
void cc_entry_clear(PyObject *op);
PyObject *cc_entry_fallback(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* Whether kw (a keyword name of a vectorcall) is "stream": a pointer compare with the interned
 * name first, as keywords are interned. */
int cc_entry_is_stream_kw(PyObject *kw);
/* tp_dealloc (untrack, the type's tp_clear, free) and tp_repr ("<RecordEntry of <function ...>>"). */
void cc_entry_dealloc(PyObject *op);
PyObject *cc_entry_repr(PyObject *op);

/* A slot (member descriptor) read: the member to hand PyMember_GetOne where the slot is a plain
 * T_OBJECT_EX one (what __slots__ makes), else NULL (read through the descriptor). */
PyMemberDef *cc_plain_member(PyObject *descr);
/* The value of slot descr of obj (of a type the descriptor serves), a new reference or NULL
 * when unset or unreadable (no exception set). member: cc_plain_member(descr) or NULL. Inline:
 * the launch entry reads three slots per call. */
static inline PyObject *
cc_slot_value(PyObject *descr, PyMemberDef *member, PyObject *obj)
{
    PyObject *v = member != NULL ? PyMember_GetOne((const char *)obj, member)
                                  : Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)Py_TYPE(obj));
    if (v == NULL) {
        PyErr_Clear();
    }
    return v;
}

/* A method entry (RecordEntry, SyncEntry, CopyEntry, AllocEntry, CloseEntry): an instance method,
 * a method descriptor as a Python function is (obj.method(...) calls it with obj first, no bound
 * method is made), that takes objects of up to CC_ENTRY_TYPES exact types and reads (or sets)
 * up to CC_ENTRY_SLOTS of their slots through member descriptors. Unused places are NULL. */
#define CC_ENTRY_TYPES 3
#define CC_ENTRY_SLOTS 6
#define CC_METHOD_ENTRY_HEAD                                                                       \
    CC_ENTRY_HEAD                                                                                  \
    PyObject *types[CC_ENTRY_TYPES];      /* the exact types it takes */                           \
    PyObject *slots[CC_ENTRY_SLOTS];      /* the member descriptors it reads */                    \
    PyMemberDef *members[CC_ENTRY_SLOTS]; /* cc_plain_member of each slot */

typedef struct {
    CC_METHOD_ENTRY_HEAD
} cc_method_entry;

/* A new method entry of cls (a type whose struct begins with CC_METHOD_ENTRY_HEAD), tracked by
 * the garbage collector, holding fallback, ntypes types and nslots slots; NULL with the error
 * set. Each slot i must be a member descriptor of types[slot_type[i]] (TypeError naming name
 * otherwise). */
PyObject *cc_method_entry_new(PyTypeObject *cls, const char *name, vectorcallfunc call, PyObject *fallback, int ntypes,
                              PyObject *const *types, int nslots, PyObject *const *slots, const int *slot_type);
/* The slot's value of obj as cc_slot_value reads it (a new reference, or NULL: unset). */
#define CC_ENTRY_SLOT(self, i, obj) cc_slot_value((self)->slots[i], (self)->members[i], (obj))
/* tp_traverse, tp_clear and tp_descr_get of the method entry types. */
int cc_method_entry_traverse(PyObject *op, visitproc visit, void *arg);
int cc_method_entry_clear(PyObject *op);
PyObject *cc_method_entry_get(PyObject *op, PyObject *obj, PyObject *type);
#define CC_METHOD_ENTRY_TYPE_SLOTS(T)                                                              \
    CC_ENTRY_TYPE_SLOTS(T), .tp_traverse = cc_method_entry_traverse, .tp_clear = cc_method_entry_clear, \
    .tp_descr_get = cc_method_entry_get,                                                           \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR

/* Adds RecordEntry to the module (entry_record.c). */
int cc_entry_record_init(PyObject *module);
/* Adds CopyEntry to the module (entry_copy.c). */
int cc_entry_copy_init(PyObject *module);
/* Adds AllocEntry and CloseEntry to the module (entry_alloc.c). */
int cc_entry_alloc_init(PyObject *module);
/* Adds SyncEntry to the module (entry_sync.c). */
int cc_entry_sync_init(PyObject *module);
/* Adds ClassMethod (entry.c): classmethod(func) that keeps its last bound method. */
int cc_class_method_init(PyObject *module);

#endif
