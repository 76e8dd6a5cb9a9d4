/*
 * jit_layout.c: how far the cpu target puts an object's code from its
 * constants, in a process that has a cuda context open (tests/gpu/jit_layout.sh
 * builds and runs it on the GPU machine; it runs anywhere, without cuda there).
 *
 * Code of the small code model reads its constants through 32-bit
 * PC-relative offsets, so the constants must lie within 2 GiB of the code.
 * LLVM's RuntimeDyld with its SectionMemoryManager (which libkjit used for
 * code with line tables until it linked each object into one reservation)
 * maps each section apart, and an offset that does not fit is truncated
 * without a word: the code then reads, or faults at, the right address minus
 * a multiple of 4 GiB.  The probe links OBJECTS functions with line tables
 * (distinct ones, each with constants and a libm call), keeps the last 16
 * loaded and frees the older ones (which leaves holes, as the golden runner
 * does), and after each link compares /proc/self/maps with what it was
 * before: every new anonymous read-only mapping (the constants) must lie
 * within 2 GiB of a new executable one (the code).  Nothing is run, so the
 * probe measures the layout without crashing on it.
 *
 *   jit_layout [OBJECTS]     exit 1 when some object's constants were far
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/kjit.h"

enum { WINDOW = 16, MAX_MAPPINGS = 1 << 16 };

typedef struct Mapping {
    uintptr_t low, high;
    char perms[5];
    int anonymous;
} Mapping;

static int read_mappings(Mapping *out, int max)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        unsigned long low, high, offset, inode;
        char perms[5], dev[16];
        int used = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %15s %lu %n", &low, &high, perms, &offset, dev, &inode,
                   &used) < 6)
            continue;
        const char *path = line + used;
        out[n].low = low;
        out[n].high = high;
        memcpy(out[n].perms, perms, sizeof perms);
        out[n].anonymous = inode == 0 && (*path == '\n' || *path == 0);
        n++;
    }
    fclose(f);
    return n;
}

static int present(const Mapping *list, int count, const Mapping *m)
{
    for (int i = 0; i < count; i++)
        if (list[i].low == m->low && list[i].high == m->high && !strcmp(list[i].perms, m->perms))
            return 1;
    return 0;
}

static uintptr_t gap(const Mapping *a, const Mapping *b)
{
    if (a->high <= b->low)
        return b->low - a->high;
    if (b->high <= a->low)
        return a->low - b->high;
    return 0;
}

static Mapping before[MAX_MAPPINGS], after[MAX_MAPPINGS];

int main(int argc, char **argv)
{
    int objects = argc > 1 ? atoi(argv[1]) : 400;
    char reason[256] = "";
    kjit_context *cuda = NULL;
    kjit_array device = {0};
    if (kjit_cuda_available(reason, sizeof reason) == KJIT_OK) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = KJIT_TARGET_CUDA;
        if (kjit_context_create(&options, &cuda) != KJIT_OK) {
            fprintf(stderr, "jit_layout: no cuda context: %s\n", kjit_last_error(NULL));
            return 2;
        }
        int64_t shape[1] = {(int64_t)1 << 26}; /* 256 MiB of f32, as a test's arrays */
        if (kjit_device_alloc(cuda, KJIT_F32, 1, shape, &device) != KJIT_OK)
            fprintf(stderr, "jit_layout: no device array: %s\n", kjit_last_error(cuda));
    }
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.line_info = 1;
    kjit_context *cpu;
    if (kjit_context_create(&options, &cpu) != KJIT_OK) {
        fprintf(stderr, "jit_layout: no cpu context: %s\n", kjit_last_error(NULL));
        return 2;
    }
    kjit_module *loaded[WINDOW] = {0};
    int far = 0, unseen = 0;
    uintptr_t largest = 0;
    for (int i = 0; i < objects; i++) {
        if (loaded[i % WINDOW])
            kjit_module_free(loaded[i % WINDOW]);
        loaded[i % WINDOW] = NULL;
        char source[512], name[32];
        snprintf(name, sizeof name, "probe%d.kern", i);
        snprintf(source, sizeof source,
                 "fn f(x: f64) -> f64 {\n"
                 "    return sin(x * %d.375 + 0.1234567) * 6371.0088 + asin(x * 0.000%d1);\n"
                 "}\n",
                 i + 1, i + 1);
        int count_before = read_mappings(before, MAX_MAPPINGS);
        kjit_module *module;
        kjit_function *fn;
        kjit_arg arg = kjit_arg_f64(0.5);
        if (kjit_compile_string(cpu, name, source, &module) != KJIT_OK ||
            kjit_module_function(module, "f", &fn) != KJIT_OK ||
            kjit_prepare(fn, &arg, 1, NULL) != KJIT_OK) {
            fprintf(stderr, "jit_layout: %s: %s\n", name, kjit_last_error(cpu));
            return 2;
        }
        loaded[i % WINDOW] = module;
        int count_after = read_mappings(after, MAX_MAPPINGS);
        /* The new anonymous mappings: code (executable) and constants (read-only). */
        Mapping *code[64], *constants[64];
        int codes = 0, reads = 0;
        for (int k = 0; k < count_after; k++) {
            Mapping *m = &after[k];
            if (!m->anonymous || present(before, count_before, m))
                continue;
            if (!strcmp(m->perms, "r-xp") && codes < 64)
                code[codes++] = m;
            else if (!strcmp(m->perms, "r--p") && reads < 64)
                constants[reads++] = m;
        }
        if (!codes || !reads) {
            unseen++;
            continue;
        }
        uintptr_t worst = 0;
        for (int r = 0; r < reads; r++) {
            uintptr_t nearest = UINTPTR_MAX;
            for (int c = 0; c < codes; c++)
                if (gap(constants[r], code[c]) < nearest)
                    nearest = gap(constants[r], code[c]);
            if (nearest > worst)
                worst = nearest;
        }
        if (worst > largest)
            largest = worst;
        if (worst >= (uintptr_t)1 << 31) {
            if (far++ < 5)
                fprintf(stderr, "jit_layout: %s: constants %.1f GiB from the code\n", name,
                        (double)worst / (1 << 30));
        }
    }
    for (int i = 0; i < WINDOW; i++)
        kjit_module_free(loaded[i]);
    kjit_context_destroy(cpu);
    if (cuda) {
        kjit_device_free(cuda, &device);
        kjit_context_destroy(cuda);
    }
    printf("jit_layout: %d objects with line tables linked on cpu (%s); %d with constants more "
           "than 2 GiB from their code (largest gap %.1f MiB); %d whose new mappings could not "
           "be told apart\n",
           objects, cuda ? "a cuda context open" : reason, far, (double)largest / (1 << 20),
           unseen);
    return far ? 1 : 0;
}
