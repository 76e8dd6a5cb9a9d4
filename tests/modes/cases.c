/*
 * cases.c: how each kind of function is called, and on what shapes.
 *
 *   @kernel       three launches: 1-D (3 blocks of 37 threads), 2-D (2 x 3
 *                 blocks of 8 x 5) and 3-D (2 x 1 x 2 blocks of 4 x 3 x 3),
 *                 none a multiple of a vector's lanes; a rank-1 array has one
 *                 element a thread, a rank-2 one (threads in y times z,
 *                 threads in x), with 1 KiB of dynamic shared memory a block
 *   @vectorize    every signature on arrays of 523 elements, and broadcast:
 *                 the first operand 5 x 41, the others 41
 *   @guvectorize  every signature over loop shapes (6) and (2, 3), the core
 *                 dimensions 11, 4, 3, 5, 2 by first appearance in the layout
 *   @reduce       every signature (of the map, for a fused one) over 3001
 *                 elements (two levels of the tree) to a 0-d result, and
 *                 over axis 1 of 7 x 300 with an initial value
 */
#include "modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t launch_grids[3][3] = {{3, 1, 1}, {2, 3, 1}, {2, 1, 2}};
static const uint32_t launch_blocks[3][3] = {{37, 1, 1}, {8, 5, 1}, {4, 3, 3}};
static const int64_t core_sizes[] = {11, 4, 3, 5, 2, 6, 7, 9};

static void add_case(ModesCase *cases, int *n, int max, ModesCase c)
{
    if (*n < max)
        cases[(*n)++] = c;
}

/* The map's signatures whose result the reduction combines. */
static bool reduce_signature_ok(kjit_function *reduce, kjit_function *map, int sig)
{
    kjit_dtype r;
    if (kjit_function_result(map, sig, &r) != KJIT_OK)
        return false;
    for (int s = 0; s < kjit_function_signature_count(reduce); s++) {
        kjit_dtype t;
        int ndim;
        if (kjit_function_param(reduce, s, 0, &t, &ndim) == KJIT_OK && t == r)
            return true;
    }
    return false;
}

int modes_cases(kjit_function *function, ModesRules *rules, const ModesSource *source,
                ModesCase *cases, int max, const char **why)
{
    int n = 0;
    kjit_function_kind kind = kjit_function_kind_of(function);
    const char *name = kjit_function_name(function);
    switch (kind) {
    case KJIT_FUNCTION_KERNEL:
        for (int i = 0; i < rules->count; i++) { /* the rules' launches, if any */
            ModesRule *r = &rules->rules[i];
            if (r->kind != RULE_LAUNCH || !modes_rule_applies(r, source, name))
                continue;
            r->used = 1;
            ModesCase c = {.kind = kind, .variant = n, .launch_rule = true};
            memcpy(c.grid, r->grid, sizeof c.grid);
            memcpy(c.block, r->block, sizeof c.block);
            snprintf(c.label, sizeof c.label, "grid %u,%u,%u block %u,%u,%u", c.grid[0], c.grid[1],
                     c.grid[2], c.block[0], c.block[1], c.block[2]);
            add_case(cases, &n, max, c);
        }
        for (int v = 0, from_rules = n > 0; v < 3 && !from_rules; v++) {
            ModesCase c = {.kind = kind, .variant = v};
            memcpy(c.grid, launch_grids[v], sizeof c.grid);
            memcpy(c.block, launch_blocks[v], sizeof c.block);
            snprintf(c.label, sizeof c.label, "grid %u,%u,%u block %u,%u,%u", c.grid[0], c.grid[1],
                     c.grid[2], c.block[0], c.block[1], c.block[2]);
            add_case(cases, &n, max, c);
        }
        break;
    case KJIT_FUNCTION_VECTORIZE:
    case KJIT_FUNCTION_GUVECTORIZE:
        if (kjit_function_param_count(function) == 0) {
            *why = "takes no arguments";
            return 0;
        }
        for (int s = 0; s < kjit_function_signature_count(function); s++)
            for (int v = 0; v < 2; v++) {
                ModesCase c = {.kind = kind, .signature = s, .variant = v};
                snprintf(c.label, sizeof c.label, "%s, %s", kjit_function_signature(function, s),
                         kind == KJIT_FUNCTION_VECTORIZE ? (v ? "5x41 with 41" : "523")
                                                         : (v ? "loop 2x3" : "loop 6"));
                add_case(cases, &n, max, c);
            }
        break;
    case KJIT_FUNCTION_REDUCE: {
        kjit_function *map = kjit_function_map(function);
        kjit_function *typed = map ? map : function;
        for (int s = 0; s < kjit_function_signature_count(typed); s++) {
            if (map && !reduce_signature_ok(function, map, s))
                continue;
            for (int v = 0; v < 2; v++) {
                ModesCase c = {.kind = kind, .signature = s, .variant = v};
                snprintf(c.label, sizeof c.label, "%s, %s", kjit_function_signature(typed, s),
                         v ? "axis 1 of 7x300, init" : "3001 to one");
                add_case(cases, &n, max, c);
            }
        }
        break;
    }
    default:
        *why = "a plain function";
        return 0;
    }
    if (n == 0)
        *why = "no signature to call";
    return n;
}

/* ------------------------------------------------------------ shapes */

typedef struct Shapes {
    int count;
    kjit_dtype dtype[MODES_MAX_ARGS];
    int ndim[MODES_MAX_ARGS]; /* -1: a scalar argument */
    int64_t shape[MODES_MAX_ARGS][KJIT_MAX_DIMS];
} Shapes;

/* "(m,n),(n,p)->(m,p)": each operand's core dimension sizes. */
static bool guvectorize_cores(const char *layout, int operands, int ncore[], int64_t core[][KJIT_MAX_DIMS])
{
    char names[16][32];
    int nnames = 0, op = 0;
    for (const char *s = layout; *s; s++) {
        if (*s != '(')
            continue;
        if (op == operands)
            return false;
        ncore[op] = 0;
        s++;
        while (*s && *s != ')') {
            while (*s == ' ' || *s == ',')
                s++;
            if (*s == ')')
                break;
            char name[32];
            int len = 0;
            while (*s && *s != ',' && *s != ')' && *s != ' ' && len < 31)
                name[len++] = *s++;
            name[len] = 0;
            int k = 0;
            while (k < nnames && strcmp(names[k], name) != 0)
                k++;
            if (k == nnames) {
                if (nnames == 16)
                    return false;
                strcpy(names[nnames++], name);
            }
            if (ncore[op] == KJIT_MAX_DIMS - 2)
                return false;
            core[op][ncore[op]++] = core_sizes[k % (int)(sizeof core_sizes / sizeof *core_sizes)];
        }
        if (!*s)
            return false;
        op++;
    }
    return op == operands;
}

static bool shapes_of(kjit_function *function, const ModesCase *c, ModesRules *rules,
                      const ModesSource *source, Shapes *sh, const char **why)
{
    const char *name = kjit_function_name(function);
    switch (c->kind) {
    case KJIT_FUNCTION_KERNEL: {
        int64_t tx = (int64_t)c->grid[0] * c->block[0], ty = (int64_t)c->grid[1] * c->block[1],
                tz = (int64_t)c->grid[2] * c->block[2];
        sh->count = kjit_function_param_count(function);
        for (int p = 0; p < sh->count; p++) {
            int ndim;
            kjit_function_param(function, 0, p, &sh->dtype[p], &ndim);
            if (ndim == 0) {
                sh->ndim[p] = -1;
                continue;
            }
            sh->ndim[p] = ndim;
            if (ndim == 1)
                sh->shape[p][0] = tx * ty * tz;
            else {
                for (int d = 0; d < ndim; d++)
                    sh->shape[p][d] = 2;
                sh->shape[p][ndim - 1] = tx;
                sh->shape[p][ndim - 2] = ty * tz > 5 ? ty * tz : 5;
                if (ndim >= 3)
                    sh->shape[p][ndim - 3] = tz > 2 ? tz : 2;
            }
        }
        break;
    }
    case KJIT_FUNCTION_VECTORIZE:
        sh->count = kjit_function_param_count(function);
        for (int p = 0; p < sh->count; p++) {
            int ndim;
            kjit_function_param(function, c->signature, p, &sh->dtype[p], &ndim);
            if (c->variant == 0) {
                sh->ndim[p] = 1;
                sh->shape[p][0] = 523;
            } else if (p == 0) {
                sh->ndim[p] = 2;
                sh->shape[p][0] = 5;
                sh->shape[p][1] = 41;
            } else {
                sh->ndim[p] = 1;
                sh->shape[p][0] = 41;
            }
        }
        break;
    case KJIT_FUNCTION_GUVECTORIZE: {
        sh->count = kjit_function_param_count(function);
        int ncore[MODES_MAX_ARGS];
        int64_t core[MODES_MAX_ARGS][KJIT_MAX_DIMS];
        const char *layout = kjit_function_layout(function);
        if (!layout || !guvectorize_cores(layout, sh->count, ncore, core)) {
            *why = "a layout this harness cannot read";
            return false;
        }
        int64_t loop[2] = {c->variant ? 2 : 6, 3};
        int nloop = c->variant ? 2 : 1;
        for (int p = 0; p < sh->count; p++) {
            int ndim;
            kjit_function_param(function, c->signature, p, &sh->dtype[p], &ndim);
            sh->ndim[p] = nloop + ncore[p];
            for (int d = 0; d < nloop; d++)
                sh->shape[p][d] = loop[d];
            for (int d = 0; d < ncore[p]; d++)
                sh->shape[p][nloop + d] = core[p][d];
        }
        break;
    }
    case KJIT_FUNCTION_REDUCE: {
        kjit_function *map = kjit_function_map(function);
        sh->count = map ? kjit_function_param_count(map) : 1;
        for (int p = 0; p < sh->count; p++) {
            int ndim;
            kjit_function_param(map ? map : function, c->signature, p, &sh->dtype[p], &ndim);
            sh->ndim[p] = c->variant ? 2 : 1;
            sh->shape[p][0] = c->variant ? 7 : 3001;
            sh->shape[p][1] = 300;
        }
        break;
    }
    default:
        *why = "a plain function";
        return false;
    }
    /* The rules' lengths, by parameter position ("a2") or, for kernels, by
     * the order of the signature text (parameters have no names in the
     * API): "argN". */
    for (int i = 0; i < rules->count; i++) {
        ModesRule *r = &rules->rules[i];
        if (r->kind != RULE_LENGTH || !modes_rule_applies(r, source, name))
            continue;
        int p = strncmp(r->param, "arg", 3) == 0 ? atoi(r->param + 3) : -1;
        if (p < 0 || p >= sh->count || sh->ndim[p] < 0) {
            *why = "a length rule names no array parameter (argN, from 0)";
            return false;
        }
        r->used = 1;
        sh->ndim[p] = r->ndim;
        memcpy(sh->shape[p], r->shape, sizeof r->shape);
    }
    return true;
}

bool modes_args_make(kjit_function *function, const ModesCase *c, int recipe, uint64_t seed,
                     const ModesSource *source, ModesRules *rules, ModesArgs *out, const char **why)
{
    memset(out, 0, sizeof *out);
    Shapes sh = {0};
    if (kjit_function_param_count(function) > MODES_MAX_ARGS) {
        *why = "too many parameters";
        return false;
    }
    if (!shapes_of(function, c, rules, source, &sh, why))
        return false;
    int64_t extent = 0;
    for (int p = 0; p < sh.count; p++)
        for (int d = 0; d < sh.ndim[p]; d++)
            if (extent == 0 || sh.shape[p][d] < extent)
                extent = sh.shape[p][d];
    ModesRng rng = modes_rng(seed, source->name, kjit_function_name(function),
                             c->signature * 16 + c->variant, recipe);
    out->nargs = sh.count;
    for (int p = 0; p < sh.count; p++) {
        if (sh.ndim[p] < 0) {
            out->args[p] = modes_scalar(&rng, sh.dtype[p], recipe, extent);
            continue;
        }
        int64_t n = 1;
        for (int d = 0; d < sh.ndim[p]; d++)
            n *= sh.shape[p][d];
        size_t bytes = (size_t)n * kjit_dtype_size(sh.dtype[p]);
        out->buffers[p] = malloc(bytes ? bytes : 1);
        if (!out->buffers[p])
            abort();
        modes_fill(&rng, sh.dtype[p], out->buffers[p], n, recipe, extent);
        out->arrays[p] = kjit_array_make(out->buffers[p], sh.dtype[p], sh.ndim[p], sh.shape[p]);
        out->args[p] = kjit_arg_array(&out->arrays[p]);
    }
    if (c->kind == KJIT_FUNCTION_REDUCE && c->variant == 1) {
        out->axes[0] = 1;
        out->naxes = 1;
        out->has_init = true;
        kjit_dtype r = sh.dtype[0];
        kjit_function *map = kjit_function_map(function);
        if (map)
            kjit_function_result(map, c->signature, &r);
        out->init = modes_scalar(&rng, r, RECIPE_TAME, 0);
    }
    return true;
}

void modes_args_free(ModesArgs *args)
{
    for (int p = 0; p < args->nargs; p++)
        free(args->buffers[p]);
    if (args->has_result)
        kjit_array_free(&args->result);
    for (int k = 0; args->has_result && k < args->more_results; k++)
        kjit_array_free(&args->more[k]);
    memset(args, 0, sizeof *args);
}

kjit_status modes_invoke(kjit_function *function, const ModesCase *c, ModesArgs *args)
{
    switch (c->kind) {
    case KJIT_FUNCTION_KERNEL: {
        kjit_launch_options options;
        kjit_launch_options_init(&options);
        options.dynamic_shared_bytes = 1024;
        return kjit_launch_ex(function, c->grid, c->block, args->args, args->nargs, &options);
    }
    case KJIT_FUNCTION_VECTORIZE: {
        int outputs = kjit_function_output_count(function);
        if (outputs > 1 && outputs <= 8) { /* several outputs: a result of each */
            kjit_array all[8];
            kjit_status s = kjit_call_outputs(function, args->args, args->nargs, all, outputs);
            args->has_result = s == KJIT_OK;
            args->result = all[0];
            args->more_results = s == KJIT_OK ? outputs - 1 : 0;
            for (int k = 1; k < outputs && s == KJIT_OK; k++)
                args->more[k - 1] = all[k];
            return s;
        }
        kjit_status s = kjit_call(function, args->args, args->nargs, NULL, &args->result);
        args->has_result = s == KJIT_OK;
        return s;
    }
    case KJIT_FUNCTION_GUVECTORIZE:
        return kjit_call(function, args->args, args->nargs, NULL, NULL);
    case KJIT_FUNCTION_REDUCE: {
        kjit_status s = kjit_reduce(function, args->args, args->nargs, args->naxes ? args->axes : NULL,
                                    args->naxes, args->has_init ? &args->init : NULL, NULL,
                                    &args->result);
        args->has_result = s == KJIT_OK;
        return s;
    }
    default:
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
}

int modes_outputs(const ModesCase *c, ModesArgs *args, ModesOutput *out, int max)
{
    int n = 0;
    if (args->has_result && n < max) {
        out[n] = (ModesOutput){args->result.dtype, kjit_array_size(&args->result), args->result.data};
        snprintf(out[n].name, sizeof out[n].name, "result");
        n++;
    }
    for (int k = 0; args->has_result && k < args->more_results && n < max; k++) {
        out[n] = (ModesOutput){args->more[k].dtype, kjit_array_size(&args->more[k]),
                               args->more[k].data};
        snprintf(out[n].name, sizeof out[n].name, "output %d", k + 1);
        n++;
    }
    if (c->kind == KJIT_FUNCTION_KERNEL || c->kind == KJIT_FUNCTION_GUVECTORIZE)
        for (int p = 0; p < args->nargs && n < max; p++) {
            if (args->args[p].kind != KJIT_ARG_ARRAY)
                continue;
            out[n] = (ModesOutput){args->arrays[p].dtype, kjit_array_size(&args->arrays[p]),
                                   args->arrays[p].data};
            snprintf(out[n].name, sizeof out[n].name, "argument %d", p);
            n++;
        }
    return n;
}
