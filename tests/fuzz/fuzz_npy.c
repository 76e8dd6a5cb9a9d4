/*
 * fuzz_npy.c: libFuzzer harness for the .npy reader (runtime/npy.c).  The
 * input is the file: it is written to a memory file and read through its
 * /proc/self/fd path, as kjit run reads an argument.  Any file may be
 * refused; none may crash, read out of bounds, allocate what the file cannot
 * back, or trip a sanitizer.
 */
#include "../../runtime/kjit_runtime.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz.npy", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    kjit_array array;
    char *error = NULL;
    if (kj_npy_read(path, &array, &error) == KJIT_OK) {
        /* touch every byte the reader says it holds */
        size_t bytes = (size_t)kjit_array_size(&array) * kjit_dtype_size(array.dtype);
        volatile uint8_t sum = 0;
        for (size_t i = 0; i < bytes; i++)
            sum += ((const uint8_t *)array.data)[i];
        kjit_array_free(&array);
    }
    free(error);
    return 0;
}
