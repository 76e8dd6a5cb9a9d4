/*
 * case_device_functions.h: one test body that tests/unit/test_kernels_cpu.c
 * runs on cpu and parallel and tests/unit/test_cuda.c on a GPU: a histogram
 * through a device function, a block scan whose step (with its barriers) is
 * a device function, atomics on elements of 2-D arrays and on floats, inc,
 * dec and xor, all sized by module-level constants, each against a
 * reference computed in C on fresh random inputs; and the error when the
 * host calls a device function.
 */
#ifndef CASE_DEVICE_FUNCTIONS_H
#define CASE_DEVICE_FUNCTIONS_H

#include <stdint.h>

#include "kjit.h"

/* Runs the case in context (its target), drawing inputs from *rng (seeded). */
void case_device_functions(kjit_context *context, uint64_t *rng);

#endif
