/* blas.c - how the engine uses OpenBLAS: one thread inside the engine's pool, and the
 * kernels this CPU can run.
 *
 * Threads: OpenBLAS's own threads would wait for work beside the engine's pool (pool.c),
 * so vit_blas_setup turns them off, process-wide, before a pool starts.
 *
 * Kernels: OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels when it is
 * loaded, from the CPU's family and model. A CPU newer than the library falls back to
 * its oldest x86-64 kernels: Debian 12's OpenBLAS 0.3.21 on an Intel Xeon of family 6,
 * model 207 (AVX-512) reports "Prescott" and runs SSE3 kernels, about 3x slower than its
 * AVX-512 ones (docs/benchmarks.md, issue 28). The library reads OPENBLAS_CORETYPE only
 * while it is loaded, before main, so the only documented way to choose is to set it and
 * start the program again: pick_kernels runs before main (a constructor, linked into
 * every program that starts a pool), and when OpenBLAS fell back to Prescott on a CPU
 * that has AVX-512 (F, BW, DQ, VL: "SkylakeX") or AVX2 and FMA ("Haswell"), it sets
 * OPENBLAS_CORETYPE and executes /proc/self/exe again with the same arguments and
 * environment (same process id). Every program of vitlens does the same, so the app and
 * the test tools that compare its numbers bit for bit run the same kernels.
 *
 * A user who set OPENBLAS_CORETYPE keeps it (OPENBLAS_CORETYPE=Prescott keeps the
 * fallback); CPUs the library knows are left alone; if the new start fails, the program
 * goes on with the fallback kernels. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

const char *vit_blas_core(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}

void vit_blas_setup(void) {
    openblas_set_num_threads(1);
}

/* The kernels to ask for on this CPU, or NULL: keep OpenBLAS's own choice. */
static const char *better_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    const char *name = openblas_get_corename();
    if (!name || strcmp(name, "Prescott") != 0) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

/* glibc calls an executable's constructors with (argc, argv, envp). */
__attribute__((constructor)) static void pick_kernels(int argc, char **argv, char **envp) {
    (void)envp;
    if (argc < 1 || !argv || !argv[0] || getenv("OPENBLAS_CORETYPE")) return;
    const char *core = better_core();
    if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* not started again (no /proc): go on with the fallback kernels */
}
