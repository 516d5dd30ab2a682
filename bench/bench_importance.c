/* bench_importance.c - the head importance table (vit_head_importance: L*H ablated passes,
 * batched, sharing their start) timed on one input, for bench/importance.sh, which runs
 * it in turns with PyTorch's 72 batched passes (bench/torch_importance.py).
 *
 *   bench_importance --model M.safetensors [--threads K] [--batch B] [--runs N] [--pruning]
 *
 * Prints "importance <ms> ... cpu <ms>" (one wall time per run, then the mean process
 * CPU time per run) and with --pruning "pruning <ms>" (vit_head_pruning once, L*H + 1
 * full passes, for information). The
 * input is fixed pseudo-random pixels: the time does not depend on them. */
#include "bench.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    int bad = 0;
    const char *model = NULL;
    int n_threads = 0, batch = 0, runs = 3, pruning = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pruning"))
            pruning = 1;
        else {
            bad = 1; /* an unknown option: the usage below */
            break;
        }
    }
    if (!model || runs < 1 || bad) {
        fprintf(stderr, "usage: bench_importance --model M [--threads K] [--batch B] [--runs N] "
                        "[--pruning]\n");
        return 2;
    }
    Vit vit = {0};
    VitBatch b = {0};
    VitError err;
    if (vit_load(&vit, model, NULL, &err)) {
        fprintf(stderr, "bench_importance: %s\n", err.msg);
        return 1;
    }
    const VitConfig *c = &vit.cfg;
    int LH = c->n_layers * c->n_heads;
    if (!batch) batch = c->n_heads; /* the passes of one layer in one call */
    size_t S = 3 * (size_t)c->image_h * c->image_w;
    float *input = malloc(S * sizeof(float)), *imp = malloc((size_t)LH * sizeof(float)),
          *pr = malloc((size_t)(LH + 1) * sizeof(float));
    int *order = malloc((size_t)LH * sizeof(int));
    if (!input || !imp || !pr || !order) return 1;
    uint32_t st = 1u;
    for (size_t i = 0; i < S; i++) {
        st = st * 1664525u + 1013904223u;
        input[i] = (float)(st >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
    if (vit_batch_init(&b, &vit, batch, n_threads, &err)) {
        fprintf(stderr, "bench_importance: %s\n", err.msg);
        return 1;
    }
    float base;
    vit_head_importance(imp, &base, &b, &vit, input, 0, &err); /* warm-up */
    printf("importance");
    double cpu0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_head_importance(imp, &base, &b, &vit, input, 0, &err)) {
            fprintf(stderr, "bench_importance: %s\n", err.msg);
            return 1;
        }
        printf(" %.1f", now_ms(CLOCK_MONOTONIC) - t0);
    }
    printf(" cpu %.1f\n", (now_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / runs);
    if (pruning) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        vit_head_pruning(pr, order, &b, &vit, input, imp, 0, &err);
        printf("pruning %.1f\n", now_ms(CLOCK_MONOTONIC) - t0);
    }
    free(input), free(imp), free(pr), free(order);
    vit_batch_free(&b);
    vit_free(&vit);
    return 0;
}
