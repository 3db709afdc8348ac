/*
 * A fake CUDA driver for the CPU tier: the entry points cuda_core._handles._native binds (CUDA 12.0 ABI
 * signatures), with fake handles, injectable failures, a controllable context id and counters.
 *
 * It exists only to drive the native handle layer's code and error paths without a GPU (also
 * under AddressSanitizer); it never stands in for a GPU test. Handles are malloc'ed and never
 * freed: a destroyed one stays marked dead, so a second destroy or a use after destroy is
 * counted (stub_errors) instead of crashing. A stream or event is also dead once its context's
 * id changed (a reset): using one then counts as an error, as it crashes a real driver.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OK 0
#define ERR_INVALID_VALUE 1
#define ERR_INVALID_CONTEXT 201
#define ERR_INVALID_HANDLE 400
#define ERR_NOT_READY 600
#define ERR_CONTEXT_IS_DESTROYED 709

enum {
    A_CtxGetId, A_CtxGetCurrent, A_CtxPushCurrent, A_CtxPopCurrent, A_CtxGetDevice,
    A_PrimaryCtxRetain, A_PrimaryCtxRelease, A_StreamCreate, A_StreamCreateWithPriority,
    A_StreamDestroy, A_StreamQuery, A_StreamIsCapturing, A_StreamSynchronize, A_StreamWaitEvent, A_StreamGetCtx,
    A_EventCreate, A_EventDestroy, A_EventRecord, A_EventQuery, A_EventSynchronize, A_LaunchKernelEx,
    A_MemAllocFromPoolAsync, A_MemFreeAsync, A_MemcpyAsync, N_API
};
static const char *api_names[N_API] = {
    "cuCtxGetId", "cuCtxGetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxGetDevice",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuStreamCreate",
    "cuStreamCreateWithPriority", "cuStreamDestroy", "cuStreamQuery", "cuStreamIsCapturing", "cuStreamSynchronize",
    "cuStreamWaitEvent", "cuStreamGetCtx", "cuEventCreate", "cuEventDestroy", "cuEventRecord", "cuEventQuery",
    "cuEventSynchronize", "cuLaunchKernelEx", "cuMemAllocFromPoolAsync", "cuMemFreeAsync",
    "cuMemcpyAsync",
};

typedef struct {
    unsigned long long id; /* 0: destroyed (a reset primary context before its next retain) */
} fake_ctx;

enum { K_STREAM = 1, K_EVENT = 2 };
typedef struct {
    int kind;
    int dead;
    int busy;
    int capturing; /* the CUstreamCaptureStatus cuStreamIsCapturing reports (the test sets it) */
    int recorded;
    unsigned long long ctx_id;
    unsigned int flags;
    int priority;
} fake_obj;

static fake_ctx primary;
static unsigned long long next_id = 100;
static void *base_current; /* what cuCtxSetCurrent would have set (the test sets it) */
static void *stack[64];
static int depth;
static int calls[N_API], fail_status[N_API], fail_times[N_API];

int stub_errors;        /* misuse: a double destroy or free, a stale handle, an unbalanced pop */
int stub_live[3];       /* created minus destroyed, per kind */
int stub_retains, stub_releases;

/* What cuLaunchKernelEx and cuMemcpyAsync received last. */
struct {
    unsigned int grid[3], block[3], shmem, num_attrs;
    void *stream, *function, *params, *extra;
    int attr_id[3];
    unsigned int attr_value[3][3];
    int attrs_null;
} stub_launch;
struct {
    unsigned long long dst, src;
    size_t n;
    void *stream;
} stub_memcpy;
/* The bytes the parameters of the last launch pointed at, one after the other, copied for the
 * sizes the test declared with stub_expect_params (nothing is copied before it does). */
#define MAX_PARAMS 1024
static int expect_n;
static unsigned expect_sizes[MAX_PARAMS];
unsigned char stub_params[32768];
int stub_params_len;
/* While set (stub_block_launches), cuLaunchKernelEx waits until it is cleared, at most 10 s
 * (then it fails with status 999); stub_waiting counts the launches waiting now. A caller that
 * holds the GIL across the call never lets a Python thread clear it. */
static int block_launches;
int stub_waiting;

#ifndef MAX_ALLOCS /* a benchmark builds the stub with room for more */
#define MAX_ALLOCS 4096
#endif
static struct {
    unsigned long long ptr;
    int frees;
    void *free_stream;
    void *free_current;
} allocs[MAX_ALLOCS];
static int n_allocs;

static int api_index(const char *name)
{
    for (int i = 0; i < N_API; i++) {
        if (strcmp(api_names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

/* Count the call; an injected failure returns its status (nonzero). */
static int enter(int api)
{
    calls[api]++;
    if (fail_times[api] != 0) {
        if (fail_times[api] > 0) {
            fail_times[api]--;
        }
        return fail_status[api];
    }
    return OK;
}
#define ENTER(api) \
    do { \
        int injected_ = enter(api); \
        if (injected_) { \
            return injected_; \
        } \
    } while (0)

static void *current(void) { return depth > 0 ? stack[depth - 1] : base_current; }
static int current_valid(void) { return current() == (void *)&primary && primary.id != 0; }

static fake_obj *live(void *h, int kind)
{
    fake_obj *o = (fake_obj *)h;
    if (o == NULL || (uintptr_t)h < 4096 || o->kind != kind || o->dead || o->ctx_id != primary.id) {
        stub_errors++;
        return NULL;
    }
    return o;
}

static int is_default_stream(void *h) { return h == NULL || h == (void *)1 || h == (void *)2; }

/* A stream argument: a default-stream token needs a valid current context. */
static int check_stream(void *h)
{
    if (is_default_stream(h)) {
        return current_valid() ? OK : ERR_INVALID_CONTEXT;
    }
    return live(h, K_STREAM) ? OK : ERR_INVALID_HANDLE;
}

/* ---- control, for the tests ---- */
void stub_reset(void)
{
    primary.id = next_id++;
    base_current = NULL;
    depth = 0;
    memset(calls, 0, sizeof(calls));
    memset(fail_status, 0, sizeof(fail_status));
    memset(fail_times, 0, sizeof(fail_times));
    stub_errors = 0;
    memset(stub_live, 0, sizeof(stub_live));
    stub_retains = stub_releases = 0;
    memset(&stub_launch, 0, sizeof(stub_launch));
    memset(&stub_memcpy, 0, sizeof(stub_memcpy));
    n_allocs = 0;
    expect_n = 0;
    stub_params_len = 0;
    block_launches = 0;
}
void stub_expect_params(int n, const unsigned *sizes)
{
    expect_n = n < 0 ? 0 : n > MAX_PARAMS ? MAX_PARAMS : n;
    memcpy(expect_sizes, sizes, (size_t)expect_n * sizeof(unsigned));
}
void stub_block_launches(int on) { __atomic_store_n(&block_launches, on, __ATOMIC_SEQ_CST); }
void *stub_ctx(void) { return &primary; }
unsigned long long stub_ctx_id(void) { return primary.id; }
void stub_set_current(void *ctx) { base_current = ctx; }
int stub_depth(void) { return depth; }
/* The context was replaced (destroyed and created again at the same address). */
void stub_change_ctx_id(void) { primary.id = next_id++; }
/* A primary context reset: gone until retained again. */
void stub_destroy_ctx(void) { primary.id = 0; }
int stub_count(const char *name)
{
    int i = api_index(name);
    return i < 0 ? -1 : calls[i];
}
/* The next `times` calls of name (-1: all) fail with status. */
int stub_fail(const char *name, int status, int times)
{
    int i = api_index(name);
    if (i < 0) {
        return -1;
    }
    fail_status[i] = status;
    fail_times[i] = times;
    return 0;
}
void stub_set_busy(void *h, int busy) { ((fake_obj *)h)->busy = busy; }
void stub_set_capturing(void *h, int status) { ((fake_obj *)h)->capturing = status; }
int stub_is_dead(void *h) { return ((fake_obj *)h)->dead; }
int stub_frees(unsigned long long ptr)
{
    for (int i = 0; i < n_allocs; i++) {
        if (allocs[i].ptr == ptr) {
            return allocs[i].frees;
        }
    }
    return -1;
}
void *stub_free_stream(unsigned long long ptr)
{
    for (int i = 0; i < n_allocs; i++) {
        if (allocs[i].ptr == ptr) {
            return allocs[i].free_stream;
        }
    }
    return NULL;
}
/* The current context when ptr was freed. */
void *stub_free_current(unsigned long long ptr)
{
    for (int i = 0; i < n_allocs; i++) {
        if (allocs[i].ptr == ptr) {
            return allocs[i].free_current;
        }
    }
    return NULL;
}

/* ---- the driver ---- */
int cuCtxGetId(void *ctx, unsigned long long *id)
{
    ENTER(A_CtxGetId);
    if (ctx != (void *)&primary || primary.id == 0) {
        return ERR_CONTEXT_IS_DESTROYED;
    }
    *id = primary.id;
    return OK;
}
int cuCtxGetCurrent(void **ctx)
{
    ENTER(A_CtxGetCurrent);
    *ctx = current();
    return OK;
}
int cuCtxPushCurrent(void *ctx)
{
    ENTER(A_CtxPushCurrent);
    if (depth == 64) {
        stub_errors++;
        return ERR_INVALID_VALUE;
    }
    stack[depth++] = ctx;
    return OK;
}
int cuCtxPopCurrent(void **ctx)
{
    ENTER(A_CtxPopCurrent);
    if (depth == 0) {
        stub_errors++;
        return ERR_INVALID_CONTEXT;
    }
    *ctx = stack[--depth];
    return OK;
}
int cuCtxGetDevice(int *dev)
{
    ENTER(A_CtxGetDevice);
    if (!current_valid()) {
        return ERR_INVALID_CONTEXT;
    }
    *dev = 0;
    return OK;
}
int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    ENTER(A_PrimaryCtxRetain);
    if (dev != 0) {
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    }
    if (primary.id == 0) {
        primary.id = next_id++;
    }
    stub_retains++;
    *ctx = &primary;
    return OK;
}
int cuDevicePrimaryCtxRelease(int dev)
{
    ENTER(A_PrimaryCtxRelease);
    stub_releases++;
    return OK;
}

static int new_obj(void **out, int kind, unsigned int flags, int priority)
{
    if (!current_valid()) {
        return ERR_INVALID_CONTEXT;
    }
    fake_obj *o = calloc(1, sizeof(fake_obj));
    if (o == NULL) {
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    o->kind = kind;
    o->ctx_id = primary.id;
    o->flags = flags;
    o->priority = priority;
    stub_live[kind]++;
    *out = o;
    return OK;
}
static int destroy_obj(void *h, int kind)
{
    fake_obj *o = live(h, kind);
    if (o == NULL) {
        return ERR_INVALID_HANDLE;
    }
    o->dead = 1;
    stub_live[kind]--;
    return OK;
}

int cuStreamCreate(void **stream, unsigned int flags)
{
    ENTER(A_StreamCreate);
    return new_obj(stream, K_STREAM, flags, 0);
}
int cuStreamCreateWithPriority(void **stream, unsigned int flags, int priority)
{
    ENTER(A_StreamCreateWithPriority);
    return new_obj(stream, K_STREAM, flags, priority);
}
int cuStreamDestroy(void *stream)
{
    ENTER(A_StreamDestroy);
    return destroy_obj(stream, K_STREAM);
}
int cuStreamQuery(void *stream)
{
    ENTER(A_StreamQuery);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    return !is_default_stream(stream) && ((fake_obj *)stream)->busy ? ERR_NOT_READY : OK;
}
int cuStreamIsCapturing(void *stream, int *status)
{
    ENTER(A_StreamIsCapturing);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    *status = is_default_stream(stream) ? 0 : ((fake_obj *)stream)->capturing;
    return OK;
}
int cuStreamSynchronize(void *stream)
{
    ENTER(A_StreamSynchronize);
    int st = check_stream(stream);
    if (st == OK && !is_default_stream(stream)) {
        ((fake_obj *)stream)->busy = 0;
    }
    return st;
}
int cuStreamWaitEvent(void *stream, void *event, unsigned int flags)
{
    ENTER(A_StreamWaitEvent);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    return live(event, K_EVENT) && flags == 0 ? OK : ERR_INVALID_HANDLE;
}
int cuStreamGetCtx(void *stream, void **ctx)
{
    ENTER(A_StreamGetCtx);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    *ctx = is_default_stream(stream) ? current() : (void *)&primary; /* every stream is the primary's */
    return OK;
}
int cuEventCreate(void **event, unsigned int flags)
{
    ENTER(A_EventCreate);
    return new_obj(event, K_EVENT, flags, 0);
}
int cuEventDestroy(void *event)
{
    ENTER(A_EventDestroy);
    return destroy_obj(event, K_EVENT);
}
int cuEventRecord(void *event, void *stream)
{
    ENTER(A_EventRecord);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    fake_obj *e = live(event, K_EVENT);
    if (e == NULL) {
        return ERR_INVALID_HANDLE;
    }
    e->recorded = 1;
    e->busy = !is_default_stream(stream) && ((fake_obj *)stream)->busy;
    return OK;
}
int cuEventQuery(void *event)
{
    ENTER(A_EventQuery);
    fake_obj *e = live(event, K_EVENT);
    if (e == NULL) {
        return ERR_INVALID_HANDLE;
    }
    return e->busy ? ERR_NOT_READY : OK;
}
int cuEventSynchronize(void *event)
{
    ENTER(A_EventSynchronize);
    fake_obj *e = live(event, K_EVENT);
    if (e == NULL) {
        return ERR_INVALID_HANDLE;
    }
    e->busy = 0;
    return OK;
}

/* The CUDA 12.0 ABI layouts, written independently of the native module's. */
typedef struct {
    int id;
    char pad[4];
    union {
        char raw[64];
        unsigned int u[3];
        int i;
    } value;
} launch_attr;
typedef struct {
    unsigned int gx, gy, gz, bx, by, bz, shmem;
    void *stream;
    launch_attr *attrs;
    unsigned int num_attrs;
} launch_config;

static int wait_while_blocked(void)
{
    if (!__atomic_load_n(&block_launches, __ATOMIC_SEQ_CST)) {
        return OK;
    }
    __atomic_add_fetch(&stub_waiting, 1, __ATOMIC_SEQ_CST);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 10000 && __atomic_load_n(&block_launches, __ATOMIC_SEQ_CST); i++) {
        nanosleep(&ms, NULL);
    }
    __atomic_sub_fetch(&stub_waiting, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&block_launches, __ATOMIC_SEQ_CST) ? 999 : OK;
}

int cuLaunchKernelEx(const void *config, void *function, void **params, void **extra)
{
    ENTER(A_LaunchKernelEx);
    if (wait_while_blocked() != OK) {
        return 999;
    }
    const launch_config *c = (const launch_config *)config;
    int st = check_stream(c->stream);
    if (st != OK) {
        return st;
    }
    stub_launch.grid[0] = c->gx, stub_launch.grid[1] = c->gy, stub_launch.grid[2] = c->gz;
    stub_launch.block[0] = c->bx, stub_launch.block[1] = c->by, stub_launch.block[2] = c->bz;
    stub_launch.shmem = c->shmem;
    stub_launch.stream = c->stream;
    stub_launch.num_attrs = c->num_attrs;
    stub_launch.attrs_null = c->attrs == NULL;
    stub_launch.function = function;
    stub_launch.params = (void *)params;
    stub_launch.extra = (void *)extra;
    if (c->num_attrs > 3) {
        return ERR_INVALID_VALUE;
    }
    for (unsigned int i = 0; i < c->num_attrs; i++) {
        stub_launch.attr_id[i] = c->attrs[i].id;
        memcpy(stub_launch.attr_value[i], c->attrs[i].value.u, sizeof(stub_launch.attr_value[i]));
    }
    stub_params_len = 0;
    for (int i = 0; i < expect_n; i++) {
        if (stub_params_len + expect_sizes[i] > sizeof(stub_params)) {
            return ERR_INVALID_VALUE;
        }
        memcpy(stub_params + stub_params_len, params[i], expect_sizes[i]);
        stub_params_len += (int)expect_sizes[i];
    }
    return OK;
}
int cuMemAllocFromPoolAsync(unsigned long long *ptr, size_t size, void *pool, void *stream)
{
    ENTER(A_MemAllocFromPoolAsync);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    if (pool == NULL || size == 0 || n_allocs == MAX_ALLOCS) {
        return ERR_INVALID_VALUE;
    }
    allocs[n_allocs].ptr = 0x7f0000000000ULL + 0x100000ULL * (unsigned long long)(n_allocs + 1);
    allocs[n_allocs].frees = 0;
    *ptr = allocs[n_allocs++].ptr;
    return OK;
}
int cuMemFreeAsync(unsigned long long ptr, void *stream)
{
    ENTER(A_MemFreeAsync);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    for (int i = n_allocs - 1; i >= 0; i--) { /* newest first: a free usually follows its allocation */
        if (allocs[i].ptr == ptr) {
            if (allocs[i].frees++) {
                stub_errors++;
                return ERR_INVALID_VALUE;
            }
            allocs[i].free_stream = stream;
            allocs[i].free_current = current();
            return OK;
        }
    }
    stub_errors++;
    return ERR_INVALID_VALUE;
}
int cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t n, void *stream)
{
    ENTER(A_MemcpyAsync);
    int st = check_stream(stream);
    if (st != OK) {
        return st;
    }
    stub_memcpy.dst = dst, stub_memcpy.src = src, stub_memcpy.n = n, stub_memcpy.stream = stream;
    return OK;
}
