/*
 * cli_reduce.c: what `kjit run` and `kjit bench` add for a @reduce function:
 * the options --axis N[,N...] (no --axis: every axis, a 0-d result) and
 * --init V, the function that types the arguments (a fused map's), and the
 * call itself through kjit_reduce.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

bool kj_cli_reduce_option(const char *option, const char *value, KjCliReduce *r, const char **why)
{
    if (strcmp(option, "--axis") == 0) {
        r->has_axes = true;
        r->naxes = 0;
        const char *p = value ? value : "";
        while (*p) {
            char *end;
            long axis = strtol(p, &end, 10);
            if (end == p || axis < -KJIT_MAX_DIMS || axis >= KJIT_MAX_DIMS ||
                r->naxes == KJIT_MAX_DIMS || (*end && *end != ',')) {
                *why = "--axis takes N[,N...], axes from -8 to 7";
                return false;
            }
            r->axes[r->naxes++] = (int)axis;
            p = *end ? end + 1 : end;
        }
        if (r->naxes == 0) {
            *why = "--axis takes N[,N...], axes from -8 to 7";
            return false;
        }
        return true;
    }
    if (strcmp(option, "--init") == 0) {
        if (!value || !kj_cli_is_number(value)) {
            *why = "--init takes a number";
            return false;
        }
        /* a Python int or float until kj_cli_reduce_init knows the type */
        bool integral = strpbrk(value, ".eEnNiI") == NULL;
        r->init = integral ? kjit_arg_i64(strtoll(value, NULL, 0)) : kjit_arg_f64(strtod(value, NULL));
        r->init_text = value;
        r->has_init = true;
        return true;
    }
    *why = NULL;
    return false;
}

int kj_cli_reduce_init(const char *command, kjit_function *function, const kjit_arg *args,
                       int nargs, KjCliReduce *r)
{
    int signature;
    kjit_dtype dtype;
    if (!r->has_init || kjit_function_match(function, args, nargs, &signature) != KJIT_OK ||
        kjit_function_result(function, signature, &dtype) != KJIT_OK)
        return 0; /* the call says what is wrong with the arguments */
    char *why = NULL;
    if (kj_cli_parse_number(r->init_text, dtype, &r->init, &why))
        return 0;
    fprintf(stderr, "kjit %s: --init %s, the reduction's type\n", command, why);
    free(why);
    return 2;
}

kjit_function *kj_cli_typing_function(kjit_function *function)
{
    kjit_function *map = kjit_function_map(function);
    return map ? map : function;
}

int kj_cli_param_count(kjit_function *function)
{
    if (kjit_function_kind_of(function) == KJIT_FUNCTION_REDUCE)
        return kjit_function_reduce_inputs(function);
    if (kjit_function_kind_of(function) == KJIT_FUNCTION_GUVECTORIZE)
        return kjit_function_layout_inputs(function);
    return kjit_function_param_count(function);
}

kjit_status kj_cli_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                                  const KjCliReduce *r)
{
    return kjit_reduce_prepare(function, args, nargs, r->has_axes ? r->axes : NULL, r->naxes);
}

kjit_status kj_cli_reduce_call(kjit_function *function, const kjit_arg *args, int nargs,
                               const KjCliReduce *r, kjit_array *out, kjit_array *result)
{
    return kjit_reduce(function, args, nargs, r->has_axes ? r->axes : NULL, r->naxes,
                       r->has_init ? &r->init : NULL, out, result);
}
