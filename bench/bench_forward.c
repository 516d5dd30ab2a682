/* bench_forward.c - time the engine's stages on one model and one photo.
 *
 *   bench_forward --model M.safetensors --image PHOTO [--iters N] [--warmup W]
 *
 * Prints one line per stage, "stage <name> median_ms <x> min_ms <y> iters <n>", for:
 *   load        vit_load (mmap + validation + F16/BF16 conversion)
 *   preprocess  vit_preprocess (decode excluded: resize, crop, normalise)
 *   forward     vit_forward (patch embedding, L blocks, head; keeps [L, H, T, T])
 *   rollout     vit_rollout at the last layer, mean fusion, discard 0
 * bench/run.sh runs this next to PyTorch in the same run and prints the ratios.
 * A benchmark, not a test: it checks nothing but that each call succeeds. */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *stage, double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    printf("stage %-10s median_ms %9.3f min_ms %9.3f iters %d\n", stage, ms[n / 2], ms[0], n);
}

int main(int argc, char **argv) {
    const char *model = NULL, *image = NULL;
    int iters = 20, warmup = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--image") && i + 1 < argc)
            image = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --model M --image PHOTO [--iters N] [--warmup W]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!model || !image || iters < 1 || warmup < 0) {
        fprintf(stderr, "bench_forward: --model and --image are required, --iters >= 1\n");
        return 2;
    }

    Vit vit = {0};
    VitRun run = {0};
    VitImage img = {0};
    VitError err;
    float *map = NULL;
    double *ms = calloc((size_t)iters, sizeof *ms);
    int rc = 1;
    if (!ms) goto fail;

    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        if (vit_load(&vit, model, NULL, &err)) goto fail_err;
        ms[i] = now_ms() - t0;
        if (i + 1 < iters) vit_free(&vit);
    }
    report("load", ms, iters);
    const VitConfig *c = &vit.cfg;
    printf("model %s S=%dx%d P=%d grid=%dx%d T=%d D=%d H=%d L=%d C=%d\n", c->name, c->image_h,
           c->image_w, c->patch_size, c->grid_h, c->grid_w, c->n_tokens, c->dim, c->n_heads,
           c->n_layers, c->n_classes);

    if (vit_run_init(&run, &vit, &err) || vit_image_load(&img, image, &err)) goto fail_err;
    if (!(map = malloc((size_t)c->n_patches * sizeof *map))) goto fail;

    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        if (vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, &img, &err)) goto fail_err;
        ms[i] = now_ms() - t0;
    }
    report("preprocess", ms, iters);

    for (int i = 0; i < warmup; i++) vit_forward(&run, &vit);
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        vit_forward(&run, &vit);
        ms[i] = now_ms() - t0;
    }
    report("forward", ms, iters);

    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        if (vit_rollout(map, &run, c->n_layers - 1, -1, VIT_FUSE_MEAN, 0.0f, 0, &err))
            goto fail_err;
        ms[i] = now_ms() - t0;
    }
    report("rollout", ms, iters);
    rc = 0;
    goto done;

fail_err:
    fprintf(stderr, "bench_forward: %s\n", err.msg);
    goto done;
fail:
    fprintf(stderr, "bench_forward: out of memory\n");
done:
    free(map);
    free(ms);
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}
