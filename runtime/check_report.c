/*
 * check_report.c: checked mode in the runtime.  Each call of checked code
 * gets a zeroed KjCheckRecord (kjit_backend.h): on the host (cpu, parallel,
 * and plain functions in every context) one on the caller's stack, whose
 * address goes in the entry point's args[param_count]; on a target with
 * device memory (cuda) the context's one record there, made, read and
 * zeroed through the target's alloc, copy and synchronize, whose address is
 * the kernel's last parameter.  After the call the record is read (on the
 * device once the stream is done: a checked call always synchronises) and,
 * when a check failed, the call ends with
 * KJIT_ERROR_CHECK and a message in the compiler's diagnostic form, from
 * the module's table of check sites (checks.c):
 *
 *   das.kern:14:38: error: index 256130 out of range for axis 0 of 'data'
 *   (length 256000) in block (1000,0,0), thread (130,0,0) of kernel 'das'
 *       let v = data[k, j];
 *                    ^
 *
 * A failed kernel on the GPU has only returned early from its threads, so
 * the context stays usable; the device record is zeroed again for the next
 * call.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

int kj_check_env(void)
{
    const char *env = getenv("KJIT_CHECK");
    if (!env || !*env || strcmp(env, "0") == 0)
        return 0;
    if (strcmp(env, "race") == 0)
        return KJIT_CHECK_RACE;
    if (strcmp(env, "all") == 0)
        return KJIT_CHECK_ALL;
    return KJIT_CHECK_VALUES; /* 1, values, or any other word, as before there were kinds */
}

/* kjit_arrays of bytes for the target's copy: the record on the host and on
 * the device. */
static void record_arrays(KjCheckRecord *host, void *device, kjit_array *on_host,
                          kjit_array *on_device)
{
    int64_t bytes[1] = {(int64_t)sizeof *host};
    *on_host = kjit_array_make(host, KJIT_U8, 1, bytes);
    *on_device = kjit_array_make(device, KJIT_U8, 1, bytes);
    on_device->memory = KJIT_MEMORY_DEVICE;
}

kjit_status kj_check_begin(kjit_context *context, const KjRuntimeTarget *runtime,
                           KjCheckCall *call, void **param)
{
    memset(call, 0, sizeof *call);
    call->runtime = runtime;
    if (runtime->device_memory_on_host) {
        if (context->options.check & KJIT_CHECK_RACE) {
            call->host.race = kj_race_create();
            if (!call->host.race)
                return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                        "out of memory for the race checker");
            call->host.race_access = kj_race_access;
        }
        *param = &call->host;
        return KJIT_OK;
    }
    /* Made on first use, once, whichever threads call at the same time. */
    void *device = __atomic_load_n(&context->check_device, __ATOMIC_ACQUIRE);
    if (!device) {
        pthread_mutex_lock(&context->lock);
        device = context->check_device;
        kjit_status status = KJIT_OK;
        if (!device)
            status = runtime->alloc(context, sizeof(KjCheckRecord), &device);
        if (status == KJIT_OK && !context->check_device) {
            kjit_array on_host, on_device;
            record_arrays(&call->host, device, &on_host, &on_device);
            status = runtime->copy(context, &on_device, &on_host, sizeof call->host, NULL);
            if (status != KJIT_OK)
                runtime->free(context, device);
            else
                __atomic_store_n(&context->check_device, device, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&context->lock);
        if (status != KJIT_OK)
            return status;
    }
    call->device = device;
    *param = &call->device;
    return KJIT_OK;
}

/* The race checker's verdict, after a call that went well so far and whose
 * value checks passed. */
static kjit_status race_end(kjit_context *context, KjRaceState *race, const KjIrModule *module,
                            const char *function)
{
    if (!kj_race_failed(race) && !kj_race_out_of_memory(race))
        return KJIT_OK;
    char *message = kj_race_message(module, race, function);
    kjit_status status = kj_race_failed(race) ? KJIT_ERROR_CHECK : KJIT_ERROR_OUT_OF_MEMORY;
    kj_api_set_error(context, status, "%s", message);
    free(message);
    return status;
}

kjit_status kj_check_end(kjit_context *context, KjCheckCall *call, const KjIrModule *module,
                         const char *function, kjit_stream *stream, kjit_status status)
{
    KjRaceState *race = call->host.race;
    call->host.race = NULL;
    if (race && status == KJIT_OK && !call->host.failed)
        status = race_end(context, race, module, function);
    kj_race_free(race);
    if (status != KJIT_OK)
        return status;
    const KjRuntimeTarget *runtime = call->runtime;
    if (!runtime->device_memory_on_host) {
        kjit_array on_host, on_device;
        record_arrays(&call->host, call->device, &on_host, &on_device);
        status = runtime->synchronize(context, stream);
        if (status == KJIT_OK)
            status = runtime->copy(context, &on_host, &on_device, sizeof call->host, NULL);
        if (status == KJIT_OK && call->host.failed) {
            KjCheckRecord zero;
            memset(&zero, 0, sizeof zero);
            kjit_array zero_host, ignored;
            record_arrays(&zero, call->device, &zero_host, &ignored);
            status = runtime->copy(context, &on_device, &zero_host, sizeof zero, NULL);
        }
        if (status != KJIT_OK)
            return status;
    }
    if (!call->host.failed)
        return KJIT_OK;
    char *message = kj_check_message(module, &call->host, function);
    kj_api_set_error(context, KJIT_ERROR_CHECK, "%s", message);
    free(message);
    return KJIT_ERROR_CHECK;
}

void kj_check_context_free(kjit_context *context)
{
    if (context->check_device)
        context->runtime->free(context, context->check_device);
    context->check_device = NULL;
}

/* ------------------------------------------------------------- messages */

/* An operand as its type reads it: unsigned types print as unsigned. */
static void print_operand(KjBuf *buf, int64_t value, const char *type)
{
    if (type && type[0] == 'u')
        kj_buf_printf(buf, "%" PRIu64, (uint64_t)value);
    else
        kj_buf_printf(buf, "%" PRId64, value);
}

static void describe(KjBuf *buf, const KjCheckSite *site, const KjCheckRecord *r)
{
    const int64_t *v = r->values;
    switch (site->kind) {
    case KJ_CHECK_INDEX: {
        const char *name = site->array ? site->array : "?";
        kj_buf_printf(buf,
                      "index %" PRId64 " out of range for axis %" PRId64 " of '%s' (length %" PRId64 ")",
                      v[0], v[2], name, v[1]);
        return;
    }
    case KJ_CHECK_DIVIDE:
        if (v[1] == 0) {
            kj_buf_printf(buf, "integer %s by zero: ", v[2] ? "remainder" : "division");
            print_operand(buf, v[0], site->type);
            kj_buf_printf(buf, " %s 0", v[2] ? "%" : "/");
        } else {
            kj_buf_printf(buf, "integer division overflows %s: %" PRId64 " / -1",
                          site->type ? site->type : "its type", v[0]);
        }
        return;
    case KJ_CHECK_CONVERT: {
        double x;
        memcpy(&x, &v[0], sizeof x);
        const char *to = site->type ? site->type : "an integer";
        if (isnan(x))
            kj_buf_printf(buf, "conversion of NaN to %s", to);
        else
            kj_buf_printf(buf, "conversion of %.17g to %s is out of range", x, to);
        return;
    }
    case KJ_CHECK_SHIFT:
        kj_buf_printf(buf, "shift count ");
        print_operand(buf, v[0], site->type);
        kj_buf_printf(buf, " out of range for a %" PRId64 "-bit operand (0 to %" PRId64 ")", v[1],
                      v[1] - 1);
        return;
    case KJ_CHECK_POWER:
        kj_buf_printf(buf, "negative exponent %" PRId64 " in an integer power", v[0]);
        return;
    default:
        kj_buf_printf(buf, "check %d failed", (int)site->kind);
        return;
    }
}

char *kj_check_message(const KjIrModule *module, const KjCheckRecord *record,
                       const char *function)
{
    KjBuf text = {0}, what = {0};
    if (record->site < 1 || record->site > module->check_sites.count) {
        kj_buf_printf(&text, "%s: a check failed at an unknown site (%d)", function,
                      (int)record->site);
        return text.data;
    }
    const KjCheckSite *site = module->check_sites.items[record->site - 1];
    describe(&what, site, record);
    switch (record->where) {
    case KJ_CHECK_WHERE_THREAD:
        kj_buf_printf(&what, " in block (%d,%d,%d), thread (%d,%d,%d) of kernel '%s'",
                      record->block[0], record->block[1], record->block[2], record->thread[0],
                      record->thread[1], record->thread[2], function);
        break;
    case KJ_CHECK_WHERE_ELEMENT:
        kj_buf_printf(&what, " at element %" PRId64 " of the call of '%s'", record->element,
                      function);
        break;
    default:
        kj_buf_printf(&what, " in the call of '%s'", function);
        break;
    }
    char *message = kj_check_message_at(site->loc, what.data);
    kj_buf_free(&what);
    return message;
}
