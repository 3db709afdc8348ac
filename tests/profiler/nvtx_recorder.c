/* An NVTX tool for the tests: it records the NVTX calls a process makes, one line each.
 *
 * NVTX (the C library inside NVIDIA's nvtx package, and in every program that uses NVTX) looks,
 * at its first call, for a tool named by NVTX_INJECTION64_PATH: the tool's
 * InitializeInjectionNvtx2 is handed NVTX's table of function slots and fills the ones it
 * handles. Nsight Systems attaches the same way. This tool fills the domain calls (the ones the
 * nvtx package makes) and writes each call to the file named by CUDA_CORE_TEST_NVTX_LOG:
 *
 *     push <TAB> domain <TAB> message <TAB> 0xAARRGGBB <TAB> thread
 *     pop <TAB> domain <TAB> thread
 *     mark <TAB> domain <TAB> message <TAB> 0xAARRGGBB <TAB> thread
 *
 * "domain" is "-" for NVTX's default domain; "thread" numbers the threads 1, 2, ... in the order
 * of their first call. The injection ABI is declared here (it is fixed for NVTX v3; see
 * nvtx3/nvtxDetail/nvtxTypes.h and nvToolsExt.h), so the build needs no NVTX headers. */

#define _POSIX_C_SOURCE 200809L /* strdup */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

enum { EXPORT_TABLE_CALLBACKS = 1, MODULE_CORE2 = 5 };
enum { /* slots of the CORE2 module: the domain calls */
    DOMAIN_MARK_EX = 1,
    DOMAIN_RANGE_PUSH_EX = 4,
    DOMAIN_RANGE_POP = 5,
    DOMAIN_REGISTER_STRING_A = 10,
    DOMAIN_CREATE_A = 12,
};
enum { MESSAGE_ASCII = 1, MESSAGE_REGISTERED = 3 };

typedef void (*slot_fn)(void);
typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, slot_fn ***table, unsigned int *size);
} callbacks_table;
typedef const void *(*get_export_table_fn)(uint32_t id);

typedef struct { /* nvtxEventAttributes_v2 */
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    uint64_t payload;
    int32_t message_type;
    const void *message; /* ASCII text, or a handle from DOMAIN_REGISTER_STRING_A */
} event_attributes;

/* Domain and string handles are this tool's own: a copy of the name or the string. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int threads;
static _Thread_local int thread_number;

static const char *domain_name(const void *domain) { return domain ? (const char *)domain : "-"; }

static const char *message_text(const event_attributes *a) {
    if (a == NULL || a->message == NULL) return "";
    if (a->message_type == MESSAGE_ASCII || a->message_type == MESSAGE_REGISTERED)
        return (const char *)a->message;
    return "?";
}

static void record(const char *what, const void *domain, const event_attributes *a) {
    pthread_mutex_lock(&lock);
    if (thread_number == 0) thread_number = ++threads;
    if (out != NULL) {
        if (a != NULL)
            fprintf(out, "%s\t%s\t%s\t0x%08X\t%d\n", what, domain_name(domain), message_text(a),
                    (unsigned)a->color, thread_number);
        else
            fprintf(out, "%s\t%s\t%d\n", what, domain_name(domain), thread_number);
        fflush(out);
    }
    pthread_mutex_unlock(&lock);
}

static void *domain_create(const char *name) { return strdup(name ? name : ""); }
static void *register_string(const void *domain, const char *text) {
    (void)domain;
    return strdup(text ? text : "");
}
static int range_push(const void *domain, const event_attributes *a) {
    record("push", domain, a);
    return 0;
}
static int range_pop(const void *domain) {
    record("pop", domain, NULL);
    return 0;
}
static void mark(const void *domain, const event_attributes *a) { record("mark", domain, a); }

int InitializeInjectionNvtx2(get_export_table_fn get_export_table) {
    const callbacks_table *callbacks = get_export_table(EXPORT_TABLE_CALLBACKS);
    slot_fn **slots = NULL;
    unsigned int size = 0;
    const char *path = getenv("CUDA_CORE_TEST_NVTX_LOG");
    if (callbacks == NULL || !callbacks->get_module_function_table(MODULE_CORE2, &slots, &size))
        return 0;
    if (size < DOMAIN_CREATE_A || path == NULL || (out = fopen(path, "a")) == NULL) return 0;
    *slots[DOMAIN_MARK_EX] = (slot_fn)mark;
    *slots[DOMAIN_RANGE_PUSH_EX] = (slot_fn)range_push;
    *slots[DOMAIN_RANGE_POP] = (slot_fn)range_pop;
    *slots[DOMAIN_REGISTER_STRING_A] = (slot_fn)register_string;
    *slots[DOMAIN_CREATE_A] = (slot_fn)domain_create;
    return 1;
}
