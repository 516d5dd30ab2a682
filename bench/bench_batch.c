/* bench_batch.c - one batched forward pass (vit_forward_batch) against one vit_forward
 * per input, as a faithfulness test runs the perturbed copies of a photo.
 *
 *   bench_batch --model M.safetensors [--image PHOTO] [--threads K] [--runs R]
 *               [--batches 1,8,16,32]
 *
 * For each batch size B: B perturbed-like inputs (the photo, or a fixed pseudo-random
 * tensor, with a growing share of its patches set to 0 as a deletion curve does: input
 * i has round(i * N / B) of them removed, in a fixed random order), then in turns, R
 * times: B vit_forward calls on a run that keeps the attention (VitRunOptions default:
 * what the app's run does), B on a run that recomputes it (VIT_ATT_RECOMPUTE: the
 * cheapest single pass, nothing [L, H, T, T] written), and one vit_forward_batch of the
 * B inputs (buffers for the largest B, made once). Each separate call copies its input
 * into run.input, as a caller must. Prints per B the median images/s of each and the
 * ratios batch / separate, and the ratio of the CPU time (all threads) per image of
 * the batch to that of the recomputing run, the least noisy of the numbers on a busy
 * machine; one untimed round first. Threads: K for all three (default 2). A benchmark, not a test:
 * it checks nothing but that each call succeeds. */
#include "bench.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_SIZES = 16 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of the whole process, all threads (idle pool threads spin a few
 * microseconds, then sleep): on a busy machine wall time swells with the waits for a
 * core, this does not. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double median(double *v, int n) {
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds for n vit_forward calls, one per input of inputs [n, S]. */
static double time_separate(VitRun *run, const Vit *vit, const float *inputs, int n, size_t S) {
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        memcpy(run->input, inputs + i * S, S * sizeof(float));
        vit_forward(run, vit);
    }
    return now_s() - t0;
}

/* inputs [B, S]: base with round(i * N / B) patches of input i set to 0, in the order
 * order [N]. */
static void perturb(float *inputs, const float *base, const int *order, int B, const VitConfig *c) {
    size_t S = (size_t)3 * c->image_h * c->image_w, plane = (size_t)c->image_h * c->image_w;
    int N = c->n_patches, P = c->patch_size, gw = c->grid_w;
    for (int i = 0; i < B; i++) {
        float *x = inputs + i * S;
        memcpy(x, base, S * sizeof(float));
        int k = (int)(((long long)i * N * 2 + B) / (2LL * B));
        for (int j = 0; j < k; j++) {
            int gy = order[j] / gw, gx = order[j] % gw;
            for (int ch = 0; ch < 3; ch++)
                for (int y = 0; y < P; y++)
                    memset(x + ch * plane + (size_t)(gy * P + y) * c->image_w + (size_t)gx * P, 0,
                           (size_t)P * sizeof(float));
        }
    }
}

int main(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *batches = "1,8,16,32";
    int n_threads = 2, runs = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--image") && i + 1 < argc)
            image = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc)
            batches = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s --model M.safetensors [--image PHOTO] [--threads K] [--runs R] "
                    "[--batches 1,8,16,32]\n",
                    argv[0]);
            return 2;
        }
    }
    int sizes[MAX_SIZES], n_sizes = 0, max_b = 0;
    for (const char *p = batches; *p && n_sizes < MAX_SIZES;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b < 1 || b > 4096) break;
        sizes[n_sizes++] = (int)b;
        max_b = (int)b > max_b ? (int)b : max_b;
        p = *end == ',' ? end + 1 : end;
    }
    if (!model || runs < 1 || n_threads < 0 || !n_sizes) {
        fprintf(stderr, "bench_batch: --model is required, --runs >= 1, --batches B,B,...\n");
        return 2;
    }

    Vit vit = {0};
    VitRun keep = {0}, redo = {0};
    VitBatch bt = {0};
    VitImage img = {0};
    VitError err;
    float *base = NULL, *inputs = NULL, *probs = NULL;
    int *order = NULL, rc = 1;
    double *t_keep = calloc((size_t)runs, sizeof(double)),
           *t_redo = calloc((size_t)runs, sizeof(double)),
           *t_batch = calloc((size_t)runs, sizeof(double));
    double cpu_redo = 0.0, cpu_batch = 0.0;
    if (vit_load(&vit, model, NULL, &err)) goto fail_err;
    const VitConfig *c = &vit.cfg;
    size_t S = (size_t)3 * c->image_h * c->image_w;
    VitRunOptions ok = {.n_threads = n_threads},
                  orr = {.n_threads = n_threads, .att = VIT_ATT_RECOMPUTE};
    if (vit_run_init_with(&keep, &vit, &ok, &err) || vit_run_init_with(&redo, &vit, &orr, &err) ||
        vit_batch_init(&bt, &vit, max_b, n_threads, &err))
        goto fail_err;
    base = malloc(S * sizeof(float));
    inputs = malloc((size_t)max_b * S * sizeof(float));
    probs = malloc((size_t)max_b * c->n_classes * sizeof(float));
    order = malloc((size_t)c->n_patches * sizeof(int));
    if (!base || !inputs || !probs || !order || !t_keep || !t_redo || !t_batch) goto fail;
    if (image) {
        if (vit_image_load(&img, image, &err) ||
            vit_preprocess(base, NULL, NULL, NULL, NULL, c, &img, &err))
            goto fail_err;
    } else {
        uint32_t seed = 12345; /* pixels roughly as normalised ones: uniform in [-2, 2) */
        for (size_t i = 0; i < S; i++) {
            seed = seed * 1664525u + 1013904223u;
            base[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
        }
    }
    uint32_t seed = 777; /* the removal order: a fixed shuffle (Fisher-Yates) */
    for (int i = 0; i < c->n_patches; i++) order[i] = i;
    for (int i = c->n_patches - 1; i > 0; i--) {
        seed = seed * 1664525u + 1013904223u;
        int j = (int)((seed >> 8) % (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }

    printf("model %s S=%dx%d T=%d D=%d L=%d C=%d threads=%d runs=%d input=%s\n", c->name,
           c->image_h, c->image_w, c->n_tokens, c->dim, c->n_layers, c->n_classes, bt.n_threads,
           runs, image ? image : "pseudo-random");
    printf("batch buffers %.1f MB for B = %d\n", bt.mem_floats * sizeof(float) / 1e6, max_b);
    printf("%4s %14s %14s %14s %10s %10s %14s\n", "B", "keep img/s", "recomp img/s", "batch img/s",
           "batch/keep", "batch/rec", "cpu rec/batch");
    for (int k = 0; k < n_sizes; k++) {
        int B = sizes[k];
        perturb(inputs, base, order, B, c);
        cpu_redo = cpu_batch = 0.0;
        for (int r = -1; r < runs; r++) { /* r = -1: untimed */
            double tk = time_separate(&keep, &vit, inputs, B, S);
            double c0 = cpu_s(), tr = time_separate(&redo, &vit, inputs, B, S), c1 = cpu_s();
            double t0 = now_s();
            if (vit_forward_batch(&bt, &vit, inputs, B, NULL, probs, &err)) goto fail_err;
            double tb = now_s() - t0, c2 = cpu_s();
            if (r < 0) continue;
            t_keep[r] = tk, t_redo[r] = tr, t_batch[r] = tb;
            cpu_redo += c1 - c0, cpu_batch += c2 - c1;
        }
        double ik = B / median(t_keep, runs), ir = B / median(t_redo, runs),
               ib = B / median(t_batch, runs);
        printf("%4d %14.1f %14.1f %14.1f %10.2f %10.2f %14.2f\n", B, ik, ir, ib, ib / ik, ib / ir,
               cpu_redo / cpu_batch);
        fflush(stdout);
    }
    rc = 0;
    goto done;
fail_err:
    fprintf(stderr, "bench_batch: %s\n", err.msg);
    goto done;
fail:
    fprintf(stderr, "bench_batch: out of memory\n");
done:
    free(base), free(inputs), free(probs), free(order);
    free(t_keep), free(t_redo), free(t_batch);
    vit_image_free(&img);
    vit_batch_free(&bt);
    vit_run_free(&keep);
    vit_run_free(&redo);
    vit_free(&vit);
    return rc;
}
