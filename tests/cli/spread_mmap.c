/*
 * spread_mmap.c: an LD_PRELOAD library for tests/cli/far_sections.sh that
 * puts every anonymous mapping a program asks for without an address of its
 * own 4 GiB below the one before, so that no two are within 2 GiB of each
 * other.  mmap may place a mapping anywhere it likes (a hint is only a hint),
 * and a process whose address space has large holes (the CUDA driver reserves
 * many GiB) gets such layouts now and then; here every time.  JIT-linked code
 * must still run: nothing may reach from one mapping into another through a
 * 32-bit offset.  glibc's own mappings (malloc, thread stacks) do not come
 * through here, only those of callers of mmap such as LLVM.
 *
 *   cc -shared -fPIC -o spread_mmap.so tests/cli/spread_mmap.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

enum { GAP_SHIFT = 32 }; /* 4 GiB between mappings */

static const uintptr_t top = (uintptr_t)0x500000000000;    /* 80 TiB */
static const uintptr_t bottom = (uintptr_t)0x100000000000; /* 16 TiB */
static uintptr_t next = (uintptr_t)0x500000000000;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
    static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
    if (!real_mmap)
        real_mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if ((flags & MAP_ANONYMOUS) && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && len > 0) {
        size_t bytes = (len + 0xfff) & ~(size_t)0xfff;
        pthread_mutex_lock(&lock);
        if (next - bottom < bytes + ((size_t)1 << GAP_SHIFT))
            next = top;
        next -= bytes + ((size_t)1 << GAP_SHIFT);
        uintptr_t at = next;
        pthread_mutex_unlock(&lock);
        void *p = real_mmap((void *)at, len, prot, flags | MAP_FIXED_NOREPLACE, fd, offset);
        if (p != MAP_FAILED)
            return p;
    }
    return real_mmap(addr, len, prot, flags, fd, offset);
}
