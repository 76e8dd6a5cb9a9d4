/*
 * reduce_lanes.c: how many lanes a thread of a cuda reduction holds (the
 * WARPS and COLUMNS forms, reduce.c).  Apart from reduce.c because the
 * runtime chooses the variant a call needs (api_reduce.c) in libkjit-rt
 * too, which holds no pass of the compiler: a library's cuda code is
 * looked up by these numbers.
 */
#include <stdlib.h>

#include "kjit_compiler.h"

int kj_reduce_thread_lanes(const KjType *t, int widest_input_bytes)
{
    switch (t->kind) {
    case KJ_TYPE_I32: case KJ_TYPE_I64: case KJ_TYPE_U32: case KJ_TYPE_U64:
    case KJ_TYPE_F32: case KJ_TYPE_F64:
        break;
    default:
        return 0; /* no warp shuffle moves it */
    }
    int v = widest_input_bytes > 0 && widest_input_bytes < 16 ? 16 / widest_input_bytes : 1;
    return v > KJ_REDUCE_LANES ? KJ_REDUCE_LANES : v;
}

int kj_reduce_column_lanes(const KjType *t)
{
    (void)t;
    return 4; /* 8 threads a work item: 64 registers, 256 threads a block */
}

/* A count from the environment variable `name` (digits), else 0. */
static int count_from_env(const char *name)
{
    const char *env = getenv(name);
    return env && *env >= '0' && *env <= '9' ? atoi(env) : 0;
}

/* Whether the environment variable `name` is exactly "1". */
static bool one_in_env(const char *name)
{
    const char *env = getenv(name);
    return env && env[0] == '1' && !env[1];
}

KjReduceKnobs kj_reduce_knobs(void)
{
    return (KjReduceKnobs){.warps_unroll = count_from_env("KJIT_REDUCE_WARPS_UNROLL"),
                           .tail_unroll = count_from_env("KJIT_REDUCE_TAIL_UNROLL"),
                           .warps_main = one_in_env("KJIT_REDUCE_WARPS_MAIN"),
                           .lanes_main = one_in_env("KJIT_REDUCE_LANES_MAIN"),
                           .o3 = one_in_env("KJIT_REDUCE_O3"),
                           .strided_vector = one_in_env("KJIT_REDUCE_STRIDED_VECTOR"),
                           .tree_inline = one_in_env("KJIT_REDUCE_TREE_INLINE"),
                           .warps_short = one_in_env("KJIT_REDUCE_WARPS_SHORT")};
}
