/* test_blas.c - the engine runs OpenBLAS's kernels for this CPU (engine/passes/blas.c).
 *
 *   test_blas                 on a CPU with AVX2 + FMA, the kernels are not the SSE3
 *                             fallback ("Prescott"), whatever OpenBLAS detected on its own
 *   test_blas --keep NAME     OPENBLAS_CORETYPE=NAME set by the user is kept
 *
 * Either way the arguments after the options arrive unchanged (the program may have
 * started itself again): the last two must be "two words" and "é". Exits 0 or 1. */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *keep = argc >= 3 && !strcmp(argv[1], "--keep") ? argv[2] : NULL;
    const char *core = vit_blas_core();
    int ok = 1;
    if (argc < 3 || strcmp(argv[argc - 2], "two words") || strcmp(argv[argc - 1], "é")) {
        fprintf(stderr, "FAIL the arguments changed on the way (argc %d)\n", argc);
        ok = 0;
    }
    if (keep) {
        const char *env = getenv("OPENBLAS_CORETYPE");
        if (!env || strcmp(env, keep) || strcmp(core, keep)) {
            fprintf(stderr, "FAIL OPENBLAS_CORETYPE=%s was not kept: kernels %s\n", keep, core);
            ok = 0;
        }
    } else {
        __builtin_cpu_init();
        int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        if (avx2 && !strcmp(core, "Prescott")) {
            fprintf(stderr, "FAIL this CPU has AVX2 and FMA but OpenBLAS runs its SSE3 kernels\n");
            ok = 0;
        }
        printf("kernels %s (AVX2 + FMA: %s, AVX-512F: %s)\n", core, avx2 ? "yes" : "no",
               __builtin_cpu_supports("avx512f") ? "yes" : "no");
    }
    if (ok) printf("ok  kernels %s\n", core);
    return ok ? 0 : 1;
}
