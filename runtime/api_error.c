/*
 * api_error.c: kjit_last_error's messages, one per thread and context.
 *
 * A context may be used from many threads at once (docs/embedding.md), so
 * its last error cannot be one string that every failing call replaces: a
 * thread would read, or free, another's message.  Each thread keeps a short
 * list of messages, one per context it has used, found by the context's
 * address and the serial number its handle had when the message was set
 * (handle.c), so that the message of a destroyed context is never taken for
 * that of a new context at the same address; such stale messages are dropped
 * as the list is walked (a destroyed context's handle stays readable).
 * Failures with no live context to keep them (kjit_context_create, a NULL or
 * freed handle) go to the thread's own slot, which kjit_last_error(NULL)
 * reads.  A thread's messages are freed when it exits.
 */
#include <pthread.h>
#include <stdlib.h>

#include "kjit_runtime.h"

typedef struct ThreadError {
    struct ThreadError *next;
    const kjit_context *context;
    uint64_t serial; /* the context's when the message was set */
    char *message;
} ThreadError;

typedef struct ThreadErrors {
    ThreadError *list;
    char *orphan; /* failures with no live context */
} ThreadErrors;

static _Thread_local ThreadErrors *thread_errors;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void free_thread_errors(void *user)
{
    ThreadErrors *errors = user;
    /* A later destructor of the exiting thread that calls kjit starts afresh
     * (the key's destructor runs again for what it makes). */
    thread_errors = NULL;
    for (ThreadError *e = errors->list, *next; e; e = next) {
        next = e->next;
        free(e->message);
        free(e);
    }
    free(errors->orphan);
    free(errors);
}

static void make_exit_key(void)
{
    if (pthread_key_create(&exit_key, free_thread_errors) != 0)
        kj_die("pthread_key_create failed");
}

static ThreadErrors *this_thread(void)
{
    if (!thread_errors) {
        pthread_once(&exit_key_once, make_exit_key);
        thread_errors = kj_xcalloc(1, sizeof *thread_errors);
        pthread_setspecific(exit_key, thread_errors);
    }
    return thread_errors;
}

/* This thread's entry for a live context (made when `create`), dropping the
 * entries of contexts destroyed since. */
static ThreadError *entry_for(const kjit_context *context, bool create)
{
    if (!thread_errors && !create)
        return NULL;
    ThreadErrors *errors = this_thread();
    uint64_t serial = kj_handle_serial(context);
    for (ThreadError **link = &errors->list; *link;) {
        ThreadError *e = *link;
        if (e->context == context && e->serial == serial)
            return e;
        if (kj_handle_serial(e->context) != e->serial) { /* destroyed */
            *link = e->next;
            free(e->message);
            free(e);
            continue;
        }
        link = &e->next;
    }
    if (!create)
        return NULL;
    ThreadError *e = kj_xcalloc(1, sizeof *e);
    e->context = context;
    e->serial = serial;
    e->next = errors->list;
    errors->list = e;
    return e;
}

static char **slot_for(kjit_context *context)
{
    if (context && kj_handle_live(context, KJ_HANDLE_CONTEXT))
        return &entry_for(context, true)->message;
    return &this_thread()->orphan;
}

static kjit_status set_error_v(kjit_context *context, kjit_status status, const char *fmt,
                               va_list ap)
{
    KjBuf buf = {0};
    kj_buf_vprintf(&buf, fmt, ap);
    char **slot = slot_for(context);
    free(*slot);
    *slot = buf.data;
    return status;
}

kjit_status kj_api_set_error(kjit_context *context, kjit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error_v(context, status, fmt, ap);
    va_end(ap);
    return status;
}

kjit_status kj_api_take_error(kjit_context *context, kjit_status status, const char *prefix,
                             char *message)
{
    kj_api_set_error(context, status, "%s%s", prefix, message ? message : "unknown failure");
    free(message);
    return status;
}

kjit_status kj_api_take_named_error(kjit_context *context, kjit_status status, const char *name,
                                   char *message)
{
    kj_api_set_error(context, status, "%s: %s", name, message ? message : "unknown failure");
    free(message);
    return status;
}

void kj_api_clear_error(kjit_context *context)
{
    ThreadError *e = context ? entry_for(context, false) : NULL;
    if (e && e->message)
        e->message[0] = '\0';
}

const char *kjit_last_error(const kjit_context *context)
{
    const char *message = NULL;
    if (context && kj_handle_live(context, KJ_HANDLE_CONTEXT)) {
        ThreadError *e = entry_for(context, false);
        message = e ? e->message : NULL;
    } else if (thread_errors) {
        message = thread_errors->orphan;
    }
    return message ? message : "";
}

/* ------------------------------------------------------ handles at the door */

bool kj_api_live(const void *handle, KjHandleKind kind, const char *api)
{
    if (kj_handle_live(handle, kind))
        return true;
    const char *name = kj_handle_kind_name(kind);
    if (!handle)
        kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT, "%s: the %s is NULL", api, name);
    else if (kind == KJ_HANDLE_CONTEXT)
        kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: the context is not a live context (destroyed already?)", api);
    else
        kj_api_set_error(NULL, KJIT_ERROR_INVALID_ARGUMENT,
                         "%s: the %s is not a live %s (freed already, or its %s)", api, name,
                         name,
                         kind == KJ_HANDLE_FUNCTION ? "module freed or its context destroyed"
                                                    : "context destroyed");
    return false;
}

kjit_status kj_api_null(kjit_context *context, const char *api, const char *what)
{
    return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", api, what);
}
