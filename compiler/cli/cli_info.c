/*
 * cli_info.c: `kjit info`, what this machine offers kjit.
 *
 * Prints the version, the targets and whether each can run here (the cuda
 * target with the reason when it cannot), every GPU with its compute
 * capability, memory and the driver version, the libdevice file the cuda
 * target would link and the ptxas that would assemble its PTX, the host CPU the cpu code is tuned for, and the cache
 * folder.  It is the first thing to run when a target misbehaves, so every
 * line says where its answer came from when that is not obvious.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int parallel_threads(const char **source)
{
    const char *env = getenv("KJIT_NUM_THREADS");
    if (env && atoi(env) > 0) {
        *source = "KJIT_NUM_THREADS";
        return atoi(env);
    }
    *source = "one per core";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

static void print_cache_dir(void)
{
    char dir[4096];
    const char *named = getenv("KJIT_CACHE_DIR");
    if (!kjit_cache_dir(dir, sizeof dir)) {
        printf("cache:      none (no KJIT_CACHE_DIR and no home folder)\n");
        return;
    }
    printf("cache:      %s%s\n", dir, named && *named ? " (KJIT_CACHE_DIR)" : "");
    char *warnings = kjit_cache_check(dir);
    if (warnings) {
        fputs(warnings, stderr);
        free(warnings);
    }
}

int kj_cli_info(int argc, char **argv)
{
    if (argc == 1 && argv[0][0] != '-') { /* a library: what it holds */
        char *text = NULL, *error = NULL;
        if (kjit_library_describe(argv[0], &text, &error) != KJIT_OK) {
            fprintf(stderr, "kjit info: %s\n", error ? error : "failed");
            free(error);
            return 1;
        }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    if (argc > 0) {
        fprintf(stderr, "kjit info: unexpected argument '%s' (info takes none, or a library)\n", argv[0]);
        return 2;
    }
    printf("kjit %s\n", KJIT_VERSION);

    const char *threads_source;
    int threads = parallel_threads(&threads_source);
    char reason[512];
    bool cuda_ok = kjit_cuda_available(reason, sizeof reason) == KJIT_OK;
    int gpus = cuda_ok ? kjit_cuda_device_count() : 0;

    printf("targets:\n");
    printf("  cpu       yes (one thread)\n");
    printf("  parallel  yes (%d threads, %s)\n", threads, threads_source);
    if (cuda_ok)
        printf("  cuda      yes (%d GPU%s)\n", gpus, gpus == 1 ? "" : "s");
    else
        printf("  cuda      no: %s\n", reason);
    printf("  auto      %s\n", cuda_ok ? "cuda" : "cpu (no usable GPU)");

    for (int i = 0; i < gpus; i++) {
        kjit_device_info info;
        if (kjit_cuda_device_info(i, &info) != KJIT_OK) {
            printf("gpu %d:      (its properties could not be read)\n", i);
            continue;
        }
        printf("gpu %d:      %s, compute capability %d.%d (sm_%d%d), %.1f GiB, %d SMs\n", i,
               info.name, info.compute_major, info.compute_minor, info.compute_major,
               info.compute_minor, info.total_memory / (1024.0 * 1024.0 * 1024.0),
               info.multiprocessors);
        if (i == 0)
            printf("driver:     CUDA %d.%d\n", info.driver_version / 1000,
                   info.driver_version % 1000 / 10);
    }
    const char *device_env = getenv("KJIT_DEVICE");
    if (gpus > 0)
        printf("device:     %s\n", device_env && *device_env ? device_env : "0 (KJIT_DEVICE unset)");

    char *error = NULL;
    const char *libdevice = kjit_libdevice_path(&error);
    if (libdevice)
        printf("libdevice:  %s\n", libdevice);
    else
        printf("libdevice:  none: %s\n", error);
    free(error);
    const char *ptxas = kjit_ptxas_path();
    if (ptxas)
        printf("ptxas:      %s (cubins assembled whole-program)\n", ptxas);
    else
        printf("ptxas:      none: the driver's linker assembles PTX (relocatable code, "
               "more registers; set KJIT_PTXAS or CUDA_HOME)\n");

    printf("host cpu:   %s\n", kjit_host_cpu());
    print_cache_dir();
    return 0;
}
