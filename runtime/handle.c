/*
 * handle.c: the memory behind kjit.h's handles (contexts, modules,
 * functions, streams, events), made so that a handle used after it was
 * freed, or freed twice, is refused instead of crashing.
 *
 * Each handle opens with a KjHandle header: a magic number of its kind while
 * it lives, and a serial number unique in the process.  Freeing clears both,
 * and the block does not go back to malloc: it waits in a queue of freed
 * blocks of its kind and is reused for a new handle of that kind only after
 * KJ_HANDLE_QUARANTINE others were freed after it.  So reading the header of
 * a freed handle reads memory that is still kjit's (never a use after free),
 * finds the magic cleared, and the API says so; only a handle freed long
 * ago can have become another live one of the same kind, which is memory
 * safe.  The memory kept is that of the most handles alive at once, plus
 * the queue.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* How many freed handles of a kind wait before the oldest is reused. */
#define KJ_HANDLE_QUARANTINE 256

/* A freed block in its kind's queue: the header stays first, so its magic
 * reads as freed. */
typedef struct FreedHandle {
    KjHandle header;
    struct FreedHandle *next;
} FreedHandle;

typedef struct HandlePool {
    size_t size; /* of every block of the kind (the first allocation's) */
    FreedHandle *oldest, *newest;
    int count;
} HandlePool;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static HandlePool pools[KJ_HANDLE_KIND_COUNT];
static uint64_t next_serial = 1;

void *kj_handle_new(KjHandleKind kind, size_t size)
{
    if (size < sizeof(FreedHandle))
        size = sizeof(FreedHandle);
    pthread_mutex_lock(&pools_lock);
    HandlePool *pool = &pools[kind];
    if (!pool->size)
        pool->size = size;
    if (pool->size != size)
        kj_die("handle kind %d allocated with %zu bytes, then %zu", (int)kind, pool->size, size);
    void *block = NULL;
    if (pool->count > KJ_HANDLE_QUARANTINE) {
        FreedHandle *oldest = pool->oldest;
        pool->oldest = oldest->next;
        if (!pool->oldest)
            pool->newest = NULL;
        pool->count--;
        block = oldest;
    }
    uint64_t serial = next_serial++;
    pthread_mutex_unlock(&pools_lock);
    if (block)
        memset(block, 0, size);
    else
        block = kj_xcalloc(1, size);
    KjHandle *header = block;
    __atomic_store_n(&header->serial, serial, __ATOMIC_RELAXED);
    __atomic_store_n(&header->magic, KJ_HANDLE_MAGIC(kind), __ATOMIC_RELEASE);
    return block;
}

void kj_handle_free(void *handle)
{
    if (!handle)
        return;
    KjHandle *header = handle;
    KjHandleKind kind = KJ_HANDLE_KIND_COUNT;
    uint32_t magic = __atomic_load_n(&header->magic, __ATOMIC_ACQUIRE);
    for (int k = 0; k < KJ_HANDLE_KIND_COUNT; k++)
        if (KJ_HANDLE_MAGIC(k) == magic)
            kind = (KjHandleKind)k;
    if (kind == KJ_HANDLE_KIND_COUNT)
        kj_die("kj_handle_free of a block that is no live handle");
    __atomic_store_n(&header->magic, KJ_HANDLE_FREED, __ATOMIC_RELEASE);
    __atomic_store_n(&header->serial, 0, __ATOMIC_RELEASE);
    FreedHandle *freed = handle;
    freed->next = NULL;
    pthread_mutex_lock(&pools_lock);
    HandlePool *pool = &pools[kind];
    if (pool->newest)
        pool->newest->next = freed;
    else
        pool->oldest = freed;
    pool->newest = freed;
    pool->count++;
    pthread_mutex_unlock(&pools_lock);
}

const char *kj_handle_kind_name(KjHandleKind kind)
{
    static const char *const names[KJ_HANDLE_KIND_COUNT] = {
        [KJ_HANDLE_CONTEXT] = "context", [KJ_HANDLE_MODULE] = "module",
        [KJ_HANDLE_FUNCTION] = "function", [KJ_HANDLE_STREAM] = "stream",
        [KJ_HANDLE_EVENT] = "event",
    };
    return names[kind];
}

/* ------------------------------------------------------------ pointer sets */

/* A slot that held a member once: lookups go on past it. */
static char tombstone;
#define TOMBSTONE ((void *)&tombstone)

static size_t slot_of(const KjPointerSet *set, const void *pointer)
{
    uint64_t h = (uint64_t)(uintptr_t)pointer * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 17) & (set->capacity - 1);
}

static void grow(KjPointerSet *set)
{
    KjPointerSet bigger = {kj_xcalloc(set->capacity ? set->capacity * 2 : 16, sizeof(void *)),
                           set->capacity ? set->capacity * 2 : 16, 0};
    for (size_t i = 0; i < set->capacity; i++)
        if (set->slots[i] && set->slots[i] != TOMBSTONE)
            kj_pointer_set_add(&bigger, set->slots[i]);
    free(set->slots);
    *set = bigger;
}

bool kj_pointer_set_add(KjPointerSet *set, void *pointer)
{
    if (!pointer)
        return false;
    if ((set->count + 1) * 2 > set->capacity)
        grow(set);
    for (size_t i = slot_of(set, pointer);; i = (i + 1) & (set->capacity - 1)) {
        if (set->slots[i] == pointer)
            return false;
        if (!set->slots[i]) {
            set->slots[i] = pointer;
            set->count++;
            return true;
        }
    }
}

bool kj_pointer_set_remove(KjPointerSet *set, void *pointer)
{
    if (!pointer || !set->capacity)
        return false;
    for (size_t i = slot_of(set, pointer); set->slots[i]; i = (i + 1) & (set->capacity - 1))
        if (set->slots[i] == pointer) {
            set->slots[i] = TOMBSTONE; /* still counted, until the next growth */
            return true;
        }
    return false;
}

void kj_pointer_set_drain(KjPointerSet *set, void (*visit)(void *user, void *pointer),
                          void *user)
{
    for (size_t i = 0; i < set->capacity; i++)
        if (set->slots[i] && set->slots[i] != TOMBSTONE)
            visit(user, set->slots[i]);
    free(set->slots);
    *set = (KjPointerSet){0};
}
