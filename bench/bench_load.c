/* bench_load.c - vit_load of the same weights as .safetensors and as a PyTorch checkpoint
 * (.pth: torch.save's zip, read by engine/load/pth.c, named by a layout), best and median
 * of N runs each, alternating so that the page cache and the machine's load treat both
 * alike. bench/load.sh writes ViT-B/16 both ways (torchvision's names in the .pth).
 *
 *   bench_load A.safetensors B.pth [N]      (default N 9) */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_load A.safetensors B.pth [N]\n");
        return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 9;
    if (n < 1 || n > 1000) n = 9;
    double *t = malloc(sizeof(double) * 2 * (size_t)n);
    if (!t) return 1;
    for (int i = 0; i < n; i++)
        for (int f = 0; f < 2; f++) {
            Vit vit;
            VitError err;
            double t0 = now();
            if (vit_load(&vit, argv[1 + f], NULL, &err)) {
                fprintf(stderr, "bench_load: %s\n", err.msg);
                return 1;
            }
            t[f * n + i] = now() - t0;
            vit_free(&vit);
        }
    for (int f = 0; f < 2; f++) {
        qsort(t + f * n, (size_t)n, sizeof *t, cmp);
        printf("%-40s best %7.1f ms  median %7.1f ms  (%d runs)\n", argv[1 + f], 1e3 * t[f * n],
               1e3 * t[f * n + n / 2], n);
    }
    free(t);
    return 0;
}
