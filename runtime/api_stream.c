/*
 * api_stream.c: streams and events of kjit.h, and the release of what a
 * context holds in its target besides its modules (kj_api_release_handles,
 * kj_reduce_scratch_free), which kjit_context_destroy (api.c) calls.  It
 * sits below api.c and the call paths; the target's work is reached through
 * the context's runtime target.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

kjit_status kj_api_check_stream(kjit_context *context, const char *api, const kjit_stream *stream)
{
    if (!stream)
        return KJIT_OK;
    if (!kj_handle_live(stream, KJ_HANDLE_STREAM))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the stream is not a live stream (destroyed already?)", api);
    /* A stream is the device's: another context of the same target on the
     * same device may queue work on it (Python makes one context per set of
     * options, and a Stream of the default one serves them all). */
    if (stream->context != context &&
        (stream->context->runtime != context->runtime ||
         strcmp(stream->context->device_text, context->device_text) != 0))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the stream belongs to a context of another target or device",
                                api);
    return KJIT_OK;
}

/* ------------------------------------------------------ streams, events */

/* A stream or event joins its context's list, so that destroying the
 * context destroys it. */
#define LINK(head, item)                                                                       \
    do {                                                                                       \
        pthread_mutex_lock(&(item)->context->handles_lock);                                    \
        (item)->next = (head);                                                                 \
        if ((item)->next)                                                                      \
            (item)->next->prev = (item);                                                       \
        (head) = (item);                                                                       \
        pthread_mutex_unlock(&(item)->context->handles_lock);                                  \
    } while (0)
#define UNLINK(head, item)                                                                     \
    do {                                                                                       \
        pthread_mutex_lock(&(item)->context->handles_lock);                                    \
        if ((item)->prev)                                                                      \
            (item)->prev->next = (item)->next;                                                 \
        else                                                                                   \
            (head) = (item)->next;                                                             \
        if ((item)->next)                                                                      \
            (item)->next->prev = (item)->prev;                                                 \
        pthread_mutex_unlock(&(item)->context->handles_lock);                                  \
    } while (0)

void kj_api_stream_register(kjit_stream *stream)
{
    LINK(stream->context->streams, stream);
}

kjit_status kjit_stream_create(kjit_context *context, kjit_stream **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_stream_create"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_stream_create", "out");
    kjit_stream *stream = kj_handle_new(KJ_HANDLE_STREAM, sizeof *stream);
    stream->context = context;
    kjit_status status = context->runtime->stream_create(context, stream);
    if (status != KJIT_OK) {
        kj_handle_free(stream);
        stream = NULL;
    } else {
        kj_api_stream_register(stream);
    }
    *out = stream;
    return status;
}

kjit_status kjit_stream_synchronize(kjit_stream *stream)
{
    if (!kj_api_live(stream, KJ_HANDLE_STREAM, "kjit_stream_synchronize"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = stream->context;
    kj_api_clear_error(context);
    kjit_status status = context->runtime->synchronize(context, stream);
    /* cuda: kernels a cancel stopped have only returned early */
    return status == KJIT_OK ? kj_cancel_device_status(context, "kjit_stream_synchronize") : status;
}

void kjit_stream_destroy(kjit_stream *stream)
{
    if (!stream || !kj_api_live(stream, KJ_HANDLE_STREAM, "kjit_stream_destroy"))
        return;
    UNLINK(stream->context->streams, stream);
    stream->context->runtime->stream_destroy(stream);
    kj_handle_free(stream);
}

kjit_status kjit_synchronize(kjit_context *context)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_synchronize"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    kjit_status status = context->runtime->synchronize(context, NULL);
    return status == KJIT_OK ? kj_cancel_device_status(context, "kjit_synchronize") : status;
}

kjit_status kjit_event_record(kjit_context *context, kjit_stream *stream, kjit_event **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_event_record"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_event_record", "out");
    *out = NULL;
    kjit_status status = kj_api_check_stream(context, "kjit_event_record", stream);
    if (status != KJIT_OK)
        return status;
    kjit_event *event = kj_handle_new(KJ_HANDLE_EVENT, sizeof *event);
    event->context = context;
    status = context->runtime->event_record(context, stream, event);
    if (status != KJIT_OK) {
        kj_handle_free(event);
        return status;
    }
    LINK(context->events, event);
    *out = event;
    return status;
}

kjit_status kjit_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    if (!kj_api_live(start, KJ_HANDLE_EVENT, "kjit_event_elapsed (start)") ||
        !kj_api_live(end, KJ_HANDLE_EVENT, "kjit_event_elapsed (end)"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = start->context;
    kj_api_clear_error(context);
    if (!milliseconds)
        return kj_api_null(context, "kjit_event_elapsed", "milliseconds");
    /* Host clocks compare across cpu and parallel contexts, device events
     * across cuda contexts; a host time against a GPU event means nothing. */
    const KjRuntimeTarget *runtime = context->runtime;
    if (end->context->runtime->event_elapsed != runtime->event_elapsed)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "events from different kinds of context");
    return runtime->event_elapsed(start, end, milliseconds);
}

void kjit_event_destroy(kjit_event *event)
{
    if (!event || !kj_api_live(event, KJ_HANDLE_EVENT, "kjit_event_destroy"))
        return;
    UNLINK(event->context->events, event);
    event->context->runtime->event_destroy(event);
    kj_handle_free(event);
}

static void free_device_block(void *user, void *data)
{
    kjit_context *context = user;
    context->runtime->free(context, data);
}

void kj_api_release_handles(kjit_context *context)
{
    while (context->streams)
        kjit_stream_destroy(context->streams);
    while (context->events)
        kjit_event_destroy(context->events);
    kj_pointer_set_drain(&context->device_blocks, free_device_block, context);
}

/* ------------------------------------------------------ reduce scratch */

void kj_reduce_scratch_free(kjit_context *context)
{
    KjReduceScratch *scratch = context->reduce_scratch;
    if (!scratch)
        return;
    if (scratch->data)
        context->runtime->free(context, scratch->data);
    pthread_mutex_destroy(&scratch->lock);
    free(scratch);
    context->reduce_scratch = NULL;
}
