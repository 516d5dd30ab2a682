/* bench_flow.c - time attention flow (vit_attention_flow, engine/maps/flow.c): the flow of
 * every input token to the CLS token after the last block, the map the app shows.
 *
 *   bench_flow --model M.safetensors [--image PHOTO] [--threads 1,2] [--iters N]
 *              [--att keep|recompute] [--layer L] [--query Q]
 *
 * For each thread count of the list: a run with that many threads (vit_attention_flow
 * uses VitRun.n_threads), one forward pass on PHOTO (vit_preprocess) or, without it, a
 * fixed pseudo-random input, one untimed call, then N timed calls (default 7). Prints
 * per thread count "flow threads K median_ms .. min_ms .. max_ms .. iters N", the CPU
 * time per call over all threads, and the flow's range; and vit_rollout's time on the
 * same run for scale. --layer (default the last block) and --query (default 0, the CLS
 * token) choose the map. A benchmark, not a test: it checks only that each call
 * succeeds. */
#include "bench.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void report(const char *what, int threads, double *ms, int n, double cpu_ms) {
    bench_sort(ms, n);
    printf("%-8s threads %d median_ms %8.1f min_ms %8.1f max_ms %8.1f iters %d cpu_ms %8.1f\n",
           what, threads, ms[n / 2], ms[0], ms[n - 1], n, cpu_ms);
    fflush(stdout);
}

/* One thread count: 0 done, 1 an engine error (err). */
static int bench(const Vit *vit, const VitImage *img, int threads, VitAttStorage att, int iters,
                 int layer, int query, VitError *err) {
    const VitConfig *c = &vit->cfg;
    VitRun run = {0};
    VitRunOptions ropt = {.n_threads = threads, .att = att};
    float *out = malloc((size_t)c->n_tokens * sizeof(float));
    double *ms = malloc((size_t)iters * sizeof(double));
    int rc = 1;
    if (!out || !ms) {
        fprintf(stderr, "bench_flow: out of memory\n");
        goto done;
    }
    if (vit_run_init_with(&run, vit, &ropt, err)) goto done;
    if (img) {
        if (vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, img, err)) goto done;
    } else {
        uint32_t seed = 12345; /* pixels roughly as normalised ones: uniform in [-2, 2) */
        for (size_t i = 0; i < (size_t)3 * c->image_h * c->image_w; i++) {
            seed = seed * 1664525u + 1013904223u;
            run.input[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
        }
    }
    vit_forward(&run, vit);
    if (vit_attention_flow(out, &run, layer, query, err)) goto done; /* warm-up */
    double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_attention_flow(out, &run, layer, query, err)) goto done;
        ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
    }
    report("flow", threads, ms, iters, (now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters);
    double lo = out[0], hi = out[0], sum = 0.0;
    for (int j = 0; j < c->n_tokens; j++) {
        lo = out[j] < lo ? out[j] : lo, hi = out[j] > hi ? out[j] : hi;
        sum += out[j];
    }
    printf("         flow of the %d input tokens: %.4f .. %.4f, mean %.4f\n", c->n_tokens, lo, hi,
           sum / c->n_tokens);
    c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_rollout(out, &run, layer, -1, VIT_FUSE_MEAN, 0.0f, query, err)) goto done;
        ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
    }
    report("rollout", threads, ms, iters, (now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters);
    rc = 0;
done:
    free(out), free(ms);
    vit_run_free(&run);
    return rc;
}

int main(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *threads = "1,2";
    int iters = 7, layer = -1, query = 0;
    VitAttStorage att = VIT_ATT_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--image"))
            image = v;
        else if (!strcmp(a, "--threads"))
            threads = v;
        else if (!strcmp(a, "--iters"))
            iters = atoi(v);
        else if (!strcmp(a, "--layer"))
            layer = atoi(v);
        else if (!strcmp(a, "--query"))
            query = atoi(v);
        else if (!strcmp(a, "--att") && (!strcmp(v, "keep") || !strcmp(v, "recompute")))
            att = !strcmp(v, "keep") ? VIT_ATT_KEEP : VIT_ATT_RECOMPUTE;
        else
            goto usage;
    }
    if (!model || iters < 1) goto usage;

    Vit vit = {0};
    VitImage img = {0};
    VitError err = {0};
    int rc = 1;
    if (vit_load(&vit, model, NULL, &err) || (image && vit_image_load(&img, image, &err)))
        goto fail;
    const VitConfig *c = &vit.cfg;
    if (layer < 0) layer = c->n_layers - 1;
    printf("model %s T=%d H=%d L=%d, flow to token %d after block %d, input %s\n", c->name,
           c->n_tokens, c->n_heads, c->n_layers, query, layer, image ? image : "pseudo-random");
    for (const char *p = threads; *p;) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > VIT_MAX_THREADS) {
            fprintf(stderr, "bench_flow: bad thread list '%s'\n", threads);
            rc = 2;
            goto done;
        }
        if (bench(&vit, image ? &img : NULL, (int)k, att, iters, layer, query, &err)) goto fail;
        p = *end == ',' ? end + 1 : end;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_flow: %s (%s error)\n", err.msg, vit_status_name(err.code));
done:
    vit_image_free(&img);
    vit_free(&vit);
    return rc;
usage:
    fprintf(stderr,
            "usage: %s --model M [--image PHOTO] [--threads 1,2] [--iters N] "
            "[--att keep|recompute] [--layer L] [--query Q]\n",
            argv[0]);
    return 2;
}
