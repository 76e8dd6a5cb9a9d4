/*
 * check_race.c: checked mode's race checker (KJIT_CHECK_RACE), on the cpu
 * targets.  A launch runs its threads in one fixed order (cpu.c: every
 * block's threads as fibers, blocks one after another on the calling
 * thread, each fiber to its next barrier in turn), and compiled code tells
 * kj_race_access of every array access and barrier (codegen_check.c).  So
 * the accesses come in the same order on every run, and the first race
 * found, and its message, are the same on every run.
 *
 * GPUVerify's rules: two accesses to one element (one address: arrays that
 * alias meet here) by different threads race when at least one writes, not
 * both are atomic, and nothing orders them: for threads of one warp, no
 * warp collective that all the warp's live lanes took part in (syncwarp(),
 * a shuffle, a ballot ...), nor a block barrier, between them; for threads
 * of one block, no block barrier (syncthreads() or its _count/_and/_or
 * forms); for threads of different blocks, no syncgrid().  Each barrier
 * counts up an epoch: the warp's, the block's (with every warp's), or the
 * grid's (with every block's and warp's), and an access remembers the
 * epochs it ran in; two accesses are ordered when the epoch of the
 * narrowest group holding both threads differs.
 *
 * Shadow state, per element touched (an open-addressing table by address):
 * the last plain write, and up to two reads and two atomics by different
 * threads (FastTrack's trick: a later write that races with any of a set of
 * concurrent readers races with one of two kept).  A write clears the reads
 * and atomics it has been checked against.  Shared memory has a table of
 * its own, emptied when the memory is handed to the next block; local()
 * arrays (on the fibers' stacks) are private to their thread and skipped.
 *
 * The scheduler in cpu.c reports what it finds at barriers (threads of a
 * block at different barriers, a thread that returned while others wait,
 * warp collectives with bad masks or a shuffle from an inactive lane)
 * through kj_race_fail_sync; the message is made after the call from the
 * module's sites (check_report.c's form: place, error, source line, caret).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* One access: where, by whom, in which epochs.  site 0: no access. */
typedef struct RaceAccess {
    int32_t site;
    uint32_t block;      /* linear within the grid (a grid of more than 2^32
                            blocks is told apart modulo 2^32) */
    uint16_t thread;     /* linear within its block, x fastest (below 1024) */
    uint16_t grid_epoch; /* syncgrid()s before it, modulo 2^16 */
    uint32_t block_epoch, warp_epoch;
} RaceAccess; /* 20 bytes: a table entry is 108 */

typedef struct RaceEntry {
    uintptr_t address; /* 0: free */
    RaceAccess write;
    RaceAccess reads[2];
    RaceAccess atomics[2];
} RaceEntry;

typedef struct RaceTable {
    RaceEntry *entries;
    size_t capacity, count; /* capacity a power of two */
} RaceTable;

struct KjRaceState {
    bool failed;
    bool out_of_memory;
    KjRaceReport report;
    RaceTable global, shared;
    /* the launch */
    uint32_t grid[3], block[3];
    int per_block, warps_per_block;
    /* the fiber group now running (cpu.c): its first block and block count,
     * the epochs of its blocks and warps, and its memory */
    int64_t first_block;
    int blocks;
    uint32_t grid_epoch;
    uint32_t *block_epochs, *warp_epochs;
    int32_t *pending; /* per thread of the group: the barrier site it waits at */
    uintptr_t local_lo, local_hi, shared_lo, shared_hi;
    KjThreadCtx *running; /* the fiber running now (cpu.c), NULL between launches */
};

void kj_race_running(KjRaceState *race, KjThreadCtx *ctx) { race->running = ctx; }

KjRaceState *kj_race_create(void)
{
    KjRaceState *race = calloc(1, sizeof *race);
    return race;
}

static void table_free(RaceTable *table)
{
    free(table->entries);
    memset(table, 0, sizeof *table);
}

void kj_race_free(KjRaceState *race)
{
    if (!race)
        return;
    table_free(&race->global);
    table_free(&race->shared);
    free(race->block_epochs);
    free(race->warp_epochs);
    free(race->pending);
    free(race);
}

bool kj_race_failed(const KjRaceState *race) { return race && race->failed; }
bool kj_race_out_of_memory(const KjRaceState *race) { return race && race->out_of_memory; }
const KjRaceReport *kj_race_report(const KjRaceState *race) { return &race->report; }

/* ------------------------------------------------------------- the table */

static size_t slot_of(uintptr_t address, size_t capacity)
{
    uint64_t h = (uint64_t)address * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (capacity - 1);
}

static bool table_grow(RaceTable *table)
{
    size_t capacity = table->capacity ? table->capacity * 2 : 4096;
    RaceEntry *entries = calloc(capacity, sizeof *entries);
    if (!entries)
        return false;
    for (size_t i = 0; i < table->capacity; i++) {
        RaceEntry *old = &table->entries[i];
        if (!old->address)
            continue;
        size_t s = slot_of(old->address, capacity);
        while (entries[s].address)
            s = (s + 1) & (capacity - 1);
        entries[s] = *old;
    }
    free(table->entries);
    table->entries = entries;
    table->capacity = capacity;
    return true;
}

/* The entry of address, made empty on first use; NULL without memory. */
static RaceEntry *table_find(RaceTable *table, uintptr_t address)
{
    if ((table->count + 1) * 2 > table->capacity && !table_grow(table))
        return NULL;
    size_t s = slot_of(address, table->capacity);
    while (table->entries[s].address && table->entries[s].address != address)
        s = (s + 1) & (table->capacity - 1);
    RaceEntry *entry = &table->entries[s];
    if (!entry->address) {
        entry->address = address;
        table->count++;
    }
    return entry;
}

static void table_clear(RaceTable *table)
{
    if (table->count)
        memset(table->entries, 0, table->capacity * sizeof *table->entries);
    table->count = 0;
}

/* ------------------------------------------------------------ the launch */

void kj_race_launch(KjRaceState *race, const uint32_t grid[3], const uint32_t block[3])
{
    memcpy(race->grid, grid, sizeof race->grid);
    memcpy(race->block, block, sizeof race->block);
    race->per_block = (int)(block[0] * block[1] * block[2]);
    race->warps_per_block = (race->per_block + KJ_WARP_SIZE - 1) / KJ_WARP_SIZE;
    race->grid_epoch = 0;
}

bool kj_race_group_begin(KjRaceState *race, int64_t first_block, int blocks, void *local_lo,
                         size_t local_bytes, void *shared_lo, size_t shared_bytes)
{
    race->first_block = first_block;
    race->blocks = blocks;
    free(race->block_epochs);
    free(race->warp_epochs);
    free(race->pending);
    race->block_epochs = calloc((size_t)blocks, sizeof *race->block_epochs);
    race->warp_epochs = calloc((size_t)blocks * (size_t)race->warps_per_block,
                               sizeof *race->warp_epochs);
    race->pending = calloc((size_t)blocks * (size_t)race->per_block, sizeof *race->pending);
    race->local_lo = (uintptr_t)local_lo;
    race->local_hi = (uintptr_t)local_lo + local_bytes;
    race->shared_lo = (uintptr_t)shared_lo;
    race->shared_hi = shared_lo ? (uintptr_t)shared_lo + shared_bytes : 0;
    /* the shared memory belongs to new blocks now */
    table_clear(&race->shared);
    if (!race->block_epochs || !race->warp_epochs || !race->pending) {
        race->out_of_memory = true;
        return false;
    }
    return true;
}

int32_t kj_race_pending_site(const KjRaceState *race, int index) { return race->pending[index]; }

void kj_race_warp_barrier(KjRaceState *race, int block, int warp)
{
    race->warp_epochs[(size_t)block * race->warps_per_block + warp]++;
}

void kj_race_block_barrier(KjRaceState *race, int block)
{
    race->block_epochs[block]++;
    for (int w = 0; w < race->warps_per_block; w++)
        kj_race_warp_barrier(race, block, w);
}

void kj_race_grid_barrier(KjRaceState *race)
{
    race->grid_epoch++;
    for (int b = 0; b < race->blocks; b++)
        kj_race_block_barrier(race, b);
}

/* ------------------------------------------------------------- accesses */

static bool concurrent(const RaceAccess *a, const RaceAccess *b)
{
    if (a->block != b->block)
        return a->grid_epoch == b->grid_epoch;
    if (a->thread == b->thread)
        return false;
    if (a->thread / KJ_WARP_SIZE == b->thread / KJ_WARP_SIZE)
        return a->warp_epoch == b->warp_epoch;
    return a->block_epoch == b->block_epoch;
}

static bool same_thread(const RaceAccess *a, const RaceAccess *b)
{
    return a->block == b->block && a->thread == b->thread;
}

/* Keeps `now` among two accesses of different threads: over its own
 * thread's, else over a free slot or one that now is ordered after; when
 * both hold concurrent accesses of other threads, a later access that races
 * with now races with one of them too. */
static void remember(RaceAccess pair[2], const RaceAccess *now)
{
    for (int k = 0; k < 2; k++)
        if (pair[k].site && same_thread(&pair[k], now)) {
            pair[k] = *now;
            return;
        }
    for (int k = 0; k < 2; k++)
        if (!pair[k].site || !concurrent(&pair[k], now)) {
            pair[k] = *now;
            return;
        }
}

static void thread_coordinates(const uint32_t dims[3], int64_t linear, int32_t out[3])
{
    out[0] = (int32_t)(linear % dims[0]);
    out[1] = (int32_t)(linear / dims[0] % dims[1]);
    out[2] = (int32_t)(linear / ((int64_t)dims[0] * dims[1]));
}

static void fill_party(const KjRaceState *race, KjRaceParty *party, const RaceAccess *a)
{
    party->site = a->site;
    thread_coordinates(race->block, a->thread, party->thread);
    /* the block as the launch has it (a record keeps its low 32 bits) */
    thread_coordinates(race->grid, (int64_t)a->block, party->block);
}

/* The first failure wins; the others are not looked at (nothing runs on). */
static int32_t fail_race(KjRaceState *race, const RaceAccess *now, const int64_t *indices,
                         int count, const RaceAccess *other)
{
    race->failed = true;
    KjRaceReport *r = &race->report;
    r->kind = KJ_RACE_DATA;
    fill_party(race, &r->first, now);
    fill_party(race, &r->second, other);
    r->index_count = count < KJ_MAX_DIMS ? count : KJ_MAX_DIMS;
    for (int k = 0; k < r->index_count; k++)
        r->indices[k] = indices[k];
    return 1;
}

/* Which of the pair races with now, if any. */
static const RaceAccess *conflict(const RaceAccess pair[2], const RaceAccess *now)
{
    for (int k = 0; k < 2; k++)
        if (pair[k].site && concurrent(&pair[k], now))
            return &pair[k];
    return NULL;
}

int32_t kj_race_access(KjCheckRecord *record, KjThreadCtx *ctx, void *address,
                       const int64_t *indices, int32_t site, int32_t flags)
{
    KjRaceState *race = record->race;
    if (!race || race->failed || race->out_of_memory)
        return 1;
    if (!ctx)
        ctx = race->running; /* a plain function's access */
    if (!ctx)
        return 0; /* no thread: a call from the host, a vectorized call */
    int kind = flags & 0xff, count = flags >> 8;
    int64_t block = ctx->block_idx[0] +
                    (int64_t)race->grid[0] * (ctx->block_idx[1] + (int64_t)race->grid[1] * ctx->block_idx[2]);
    int32_t thread = ctx->thread_idx[0] +
                     ctx->block_dim[0] * (ctx->thread_idx[1] + ctx->block_dim[1] * ctx->thread_idx[2]);
    int in_group = (int)(block - race->first_block);
    if (in_group < 0 || in_group >= race->blocks)
        return 0; /* not a launch the checker set up (cannot happen from cpu.c) */
    if (kind == KJ_CHECK_BARRIER) {
        race->pending[(size_t)in_group * race->per_block + thread] = site;
        return 0;
    }
    uintptr_t at = (uintptr_t)address;
    if (at >= race->local_lo && at < race->local_hi)
        return 0; /* a local() array: this thread's own */
    RaceTable *table = at >= race->shared_lo && at < race->shared_hi ? &race->shared : &race->global;
    RaceEntry *entry = table_find(table, at);
    if (!entry) {
        race->out_of_memory = true;
        return 1;
    }
    RaceAccess now = {.site = site, .thread = (uint16_t)thread, .block = (uint32_t)block,
                      .grid_epoch = (uint16_t)race->grid_epoch,
                      .block_epoch = race->block_epochs[in_group],
                      .warp_epoch = race->warp_epochs[(size_t)in_group * race->warps_per_block +
                                                      thread / KJ_WARP_SIZE]};
    const RaceAccess *other = NULL;
    if (entry->write.site && concurrent(&entry->write, &now))
        other = &entry->write;
    switch (kind) {
    case KJ_CHECK_READ:
        if (!other)
            other = conflict(entry->atomics, &now);
        if (other)
            return fail_race(race, &now, indices, count, other);
        remember(entry->reads, &now);
        return 0;
    case KJ_CHECK_ATOMIC:
        if (!other)
            other = conflict(entry->reads, &now);
        if (other)
            return fail_race(race, &now, indices, count, other);
        remember(entry->atomics, &now);
        return 0;
    default: /* KJ_CHECK_WRITE */
        if (!other)
            other = conflict(entry->reads, &now);
        if (!other)
            other = conflict(entry->atomics, &now);
        if (other)
            return fail_race(race, &now, indices, count, other);
        entry->write = now;
        memset(entry->reads, 0, sizeof entry->reads);
        memset(entry->atomics, 0, sizeof entry->atomics);
        return 0;
    }
}

void kj_race_fail_sync(KjRaceState *race, KjRaceKind kind, int first_index, int32_t first_site,
                       int second_index, int32_t second_site, int64_t value0, int64_t value1)
{
    if (race->failed)
        return;
    race->failed = true;
    KjRaceReport *r = &race->report;
    r->kind = kind;
    r->first.site = first_site;
    r->second.site = second_site;
    int64_t first_block = race->first_block + first_index / race->per_block;
    int64_t second_block = race->first_block + second_index / race->per_block;
    thread_coordinates(race->block, first_index % race->per_block, r->first.thread);
    thread_coordinates(race->grid, first_block, r->first.block);
    thread_coordinates(race->block, second_index % race->per_block, r->second.thread);
    thread_coordinates(race->grid, second_block, r->second.block);
    r->values[0] = value0;
    r->values[1] = value1;
}

/* ------------------------------------------------------------- messages */

static void collect(void *user, KjSeverity severity, const char *formatted)
{
    (void)severity;
    kj_buf_printf(user, "%s", formatted);
}

/* A checked-mode or race message at its place in the source, as the
 * compiler's errors read (file:line:col, the line, a caret), without the
 * last newline, as every message kjit_last_error gives.  Here, below
 * check_report.c, which calls this file and uses it too. */
char *kj_check_message_at(KjLoc loc, const char *what)
{
    KjBuf text = {0};
    KjDiag diag = {.sink = collect, .user = &text};
    kj_error(&diag, loc, "%s", what);
    while (text.len > 0 && text.data[text.len - 1] == '\n')
        text.data[--text.len] = '\0';
    return text.data;
}

static const KjCheckSite *site_of(const KjIrModule *module, int32_t site)
{
    return site >= 1 && site <= module->check_sites.count ? module->check_sites.items[site - 1]
                                                          : NULL;
}

static const char *access_name(KjCheckKind kind)
{
    return kind == KJ_CHECK_READ ? "read" : kind == KJ_CHECK_WRITE ? "write" : "atomic";
}

static void print_place(KjBuf *buf, const KjCheckSite *site)
{
    if (site && site->loc.src)
        kj_buf_printf(buf, "%s:%d:%d", site->loc.src->path, site->loc.line, site->loc.col);
    else
        kj_buf_printf(buf, "an unknown place");
}

static void print_triple(KjBuf *buf, const char *what, const int32_t v[3])
{
    kj_buf_printf(buf, "%s (%d,%d,%d)", what, (int)v[0], (int)v[1], (int)v[2]);
}

/* "thread (x,y,z)", and " of block (...)" when it is not `same_block`'s. */
static void print_thread(KjBuf *buf, const KjRaceParty *p, const int32_t *same_block)
{
    print_triple(buf, "thread", p->thread);
    if (!same_block || memcmp(same_block, p->block, sizeof p->block) != 0) {
        kj_buf_printf(buf, " of ");
        print_triple(buf, "block", p->block);
    }
}

static void describe(KjBuf *buf, const KjIrModule *module, const KjRaceReport *r)
{
    const KjCheckSite *first = site_of(module, r->first.site);
    const KjCheckSite *second = site_of(module, r->second.site);
    const char *op = first && first->array ? first->array : "?";
    const char *other_op = second && second->array ? second->array : "?";
    switch (r->kind) {
    case KJ_RACE_DATA:
        kj_buf_printf(buf, "%s of %s[", access_name(first ? first->kind : KJ_CHECK_READ), op);
        for (int k = 0; k < r->index_count; k++)
            kj_buf_printf(buf, "%s%" PRId64, k ? "," : "", r->indices[k]);
        kj_buf_printf(buf, "] by ");
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " races with the %s", access_name(second ? second->kind : KJ_CHECK_WRITE));
        if (second && second->array && strcmp(other_op, op) != 0)
            kj_buf_printf(buf, " of %s", other_op);
        kj_buf_printf(buf, " at ");
        print_place(buf, second);
        kj_buf_printf(buf, " by ");
        print_thread(buf, &r->second, r->first.block);
        return;
    case KJ_RACE_DIVERGENT:
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " waits at this %s while ", op);
        print_thread(buf, &r->second, r->first.block);
        kj_buf_printf(buf, " waits at the %s at ", other_op);
        print_place(buf, second);
        return;
    case KJ_RACE_RETURNED:
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " waits at this %s, which ", op);
        print_thread(buf, &r->second, r->first.block);
        kj_buf_printf(buf, " never reaches: it has returned");
        return;
    case KJ_RACE_MASK_OWN_LANE:
        kj_buf_printf(buf, "the mask 0x%08" PRIx64 " of %s by ", (uint64_t)r->values[0] & 0xffffffffu, op);
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " leaves out its own lane %" PRId64, r->values[1]);
        return;
    case KJ_RACE_MASK_DISAGREE:
        kj_buf_printf(buf, "%s by ", op);
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " has mask 0x%08" PRIx64 ", but ", (uint64_t)r->values[0] & 0xffffffffu);
        print_thread(buf, &r->second, r->first.block);
        kj_buf_printf(buf, ", a lane of it, meets it with mask 0x%08" PRIx64,
                      (uint64_t)r->values[1] & 0xffffffffu);
        return;
    case KJ_RACE_INACTIVE_LANE:
        kj_buf_printf(buf, "%s by ", op);
        print_thread(buf, &r->first, NULL);
        kj_buf_printf(buf, " reads lane %" PRId64 ", which does not take part (it is not in "
                      "the mask, or waits at another collective)", r->values[0]);
        return;
    case KJ_RACE_OUT_OF_MEMORY:
        break;
    }
    kj_buf_printf(buf, "out of memory for the race checker's shadow state");
}

char *kj_race_message(const KjIrModule *module, const KjRaceState *race, const char *function)
{
    KjBuf text = {0}, what = {0};
    if (race->out_of_memory && !race->failed) {
        kj_buf_printf(&text, "%s: out of memory for the race checker's shadow state", function);
        return text.data;
    }
    describe(&what, module, &race->report);
    const KjCheckSite *site = site_of(module, race->report.first.site);
    if (!site) {
        kj_buf_printf(&text, "%s: %s", function, what.data);
        kj_buf_free(&what);
        return text.data;
    }
    char *message = kj_check_message_at(site->loc, what.data);
    kj_buf_free(&what);
    return message;
}
