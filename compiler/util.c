/*
 * util.c: the small things every phase needs.  The one place that dies on an
 * internal invariant, the one checked allocation wrapper, the per-compilation
 * arena, growable pointer vectors and strings, and the content hash.
 *
 * Running out of memory is treated as an invariant failure rather than a user
 * error: the compiler cannot report anything useful without memory, and
 * threading an "out of memory" status through every builder would hide the
 * real control flow.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

_Noreturn void kj_die_at(const char *file, int line, const char *fmt, ...)
{
    /* The one place library code writes to stderr: a broken invariant is a bug
     * in kjit, and the process is going down anyway. */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kjit: internal error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void *kj_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        kj_die("out of memory (%zu bytes)", size);
    return p;
}

void *kj_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        kj_die("out of memory (%zu x %zu bytes)", count, size);
    return p;
}

void *kj_xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (!p)
        kj_die("out of memory (%zu bytes)", size);
    return p;
}

char *kj_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = kj_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

/* ------------------------------------------------------------------ arena */

/* Blocks are chained newest first; an allocation bigger than the usual block
 * gets a block of its own so that large arrays do not waste the tail. */
struct KjArenaBlock {
    KjArenaBlock *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

enum { KJ_ARENA_BLOCK_SIZE = 64 * 1024 };

void *kj_arena_alloc(KjArena *arena, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    KjArenaBlock *block = arena->head;
    if (!block || block->size - block->used < size) {
        size_t cap = size > KJ_ARENA_BLOCK_SIZE ? size : KJ_ARENA_BLOCK_SIZE;
        block = kj_xmalloc(sizeof(KjArenaBlock) + cap);
        block->used = 0;
        block->size = cap;
        if (arena->head && size > KJ_ARENA_BLOCK_SIZE) {
            /* Keep the current block first: it still has room for small things. */
            block->next = arena->head->next;
            arena->head->next = block;
        } else {
            block->next = arena->head;
            arena->head = block;
        }
    }
    void *p = block->data + block->used;
    block->used += size;
    memset(p, 0, size);
    return p;
}

char *kj_arena_strndup(KjArena *arena, const char *s, size_t n)
{
    char *p = kj_arena_alloc(arena, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *kj_arena_strdup(KjArena *arena, const char *s)
{
    return kj_arena_strndup(arena, s, strlen(s));
}

char *kj_arena_printf(KjArena *arena, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        kj_die("bad format string \"%s\"", fmt);
    char *p = kj_arena_alloc(arena, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void kj_arena_free(KjArena *arena)
{
    KjArenaBlock *block = arena->head;
    while (block) {
        KjArenaBlock *next = block->next;
        free(block);
        block = next;
    }
    arena->head = NULL;
}

/* ------------------------------------------------------------ containers */

void kj_vec_push(KjArena *arena, KjVec *vec, void *item)
{
    if (vec->count == vec->capacity) {
        /* The old items stay in the arena until it is freed: vectors in an AST
         * are small and built once, so the waste is bounded by a factor of 2. */
        int capacity = vec->capacity ? vec->capacity * 2 : 4;
        void **items = kj_arena_alloc(arena, sizeof(void *) * (size_t)capacity);
        if (vec->count)
            memcpy(items, vec->items, sizeof(void *) * (size_t)vec->count);
        vec->items = items;
        vec->capacity = capacity;
    }
    vec->items[vec->count++] = item;
}

void kj_buf_vprintf(KjBuf *buf, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0)
        kj_die("bad format string \"%s\"", fmt);
    size_t need = buf->len + (size_t)n + 1;
    if (need > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 64;
        while (cap < need)
            cap *= 2;
        buf->data = kj_xrealloc(buf->data, cap);
        buf->cap = cap;
    }
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    buf->len += (size_t)n;
}

void kj_buf_printf(KjBuf *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(buf, fmt, ap);
    va_end(ap);
}

void kj_buf_free(KjBuf *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

uint64_t kj_hash_bytes(uint64_t seed, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = seed ? seed : 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void kj_write_quoted(FILE *out, const char *text)
{
    fputc('"', out);
    for (const char *c = text; *c; c++) {
        if (*c == '\n')
            fputs("\\n", out);
        else if (*c == '\t')
            fputs("\\t", out);
        else if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}
