/* bench_forward.c - time the engine's stages on one model.
 *
 *   bench_forward --model M.safetensors [--image PHOTO] [--iters N] [--warmup W]
 *                 [--threads K] [--att auto|keep|recompute] [--maps OUT] [--backward]
 *                 [--serve]
 *
 * Prints one line per stage, "stage <name> median_ms <x> min_ms <y> max_ms <z> iters <n>":
 *   load        vit_load (mmap + validation + NaN/Inf scan + F16/BF16 conversion)
 *   preprocess  vit_preprocess of PHOTO (decode excluded; only with --image)
 *   forward     vit_forward (patch embedding, L blocks, head; keeps every attention map)
 *   gemm        the GEMM floor: vit_forward's cblas_sgemm calls alone (vit_forward_gemms)
 *   rollout     vit_rollout at the last layer, mean fusion, discard 0
 * then "memory peak_rss_mb <r> weights_mb <w>": the process's peak resident set
 * (getrusage) and the weights file's size.
 * --backward (a model with a head): vit_grad_init after vit_run_init (its buffers are
 * not touched before the first backward pass), "grad_buffers_mb <b>" (their size),
 * the forward stage, "memory_forward peak_rss_mb <r> weights_mb <w>", then instead of
 * the GEMM floor and the rollout, on that one forward pass:
 *   backward    vit_backward(VIT_GRAD_EXACT) for the top-1 class: the true gradients
 *   (memory)    the peak resident set so far: forward + vit_grad_init + vit_backward
 *   lrp         vit_backward(VIT_GRAD_LRP) for the top-1 class: AttnLRP's pass alone
 * Without --image the input is a fixed pseudo-random tensor (the time does not
 * depend on the pixels).
 *
 * --serve: load once, then read commands on stdin, one per line, and answer each
 * with one line (bench/compare.py drives the engine and PyTorch this way, in turns):
 *   forward N   ->  "forward <ms> ... <ms> cpu <c>"   N timed vit_forward calls; c: the
 *                   mean CPU time per call of the whole process (all threads), ms
 *   gemm N      ->  "gemm <ms> ... <ms> cpu <c>"      the same for vit_forward_gemms
 *   fwdbwd N    ->  the same for vit_forward + vit_backward(VIT_GRAD_EXACT, top-1 class)
 *   backward N  ->  vit_backward(VIT_GRAD_EXACT, top-1) alone, after one untimed forward
 *   lrp N       ->  vit_backward(VIT_GRAD_LRP, top-1) alone, after one untimed forward
 *                   (the last three only with --backward: vit_grad_init at start)
 *   memory      ->  "memory peak_rss_mb <r> weights_mb <w>"
 *   quit (or end of input)
 * --maps OUT: instead of the GEMM floor and the rollout stage, time and write a set of
 * maps to OUT (raw float32, in this order): for layers 0, L/2 and L-1, vit_map_attention
 * of head 0 for the CLS token and of head H-1 for the middle patch, vit_map_fused (mean,
 * CLS; max, middle patch); then vit_rollout at the last layer (mean fusion, CLS; head 0
 * with discard 0.9, CLS). Prints "stage maps ..." (all of them) and "stage rollout ..."
 * (the first rollout). bench/compare.py --large compares OUT of a run that keeps the
 * attention with one that recomputes it, byte for byte.
 * --threads: the run's thread count (VitRunOptions; default one per core); --att: how
 * the attention is kept for the maps (default auto: kept up to VIT_ATT_KEEP_MAX_BYTES).
 * A benchmark, not a test: it checks nothing but that each call succeeds. */
#include "bench.h"
#include "internal.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static void report_memory(const char *line, const char *model) {
    struct rusage ru;
    struct stat st;
    getrusage(RUSAGE_SELF, &ru);
    double weights_mb = stat(model, &st) ? 0.0 : st.st_size / 1048576.0;
    printf("%s peak_rss_mb %.1f weights_mb %.1f\n", line, ru.ru_maxrss / 1024.0, weights_mb);
}

/* What time_calls times. */
typedef enum { CALL_FORWARD, CALL_GEMM, CALL_FWDBWD, CALL_BACKWARD, CALL_LRP } Call;

/* n timed calls of `what` into ms[n]; returns the mean CPU time per call, ms, or -1
 * when vit_backward failed (err). g: NULL unless what is one of the backward calls.
 * The backward alone runs on one untimed forward pass made first (the GEMM floor
 * leaves garbage behind; vit_backward only reads the run). */
static double time_calls(double *ms, int n, Call what, VitRun *run, const Vit *vit, VitGrad *g,
                         VitError *err) {
    if (what == CALL_BACKWARD || what == CALL_LRP) vit_forward(run, vit);
    double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < n; i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        VitStatus st = VIT_OK;
        switch (what) {
        case CALL_FORWARD: vit_forward(run, vit); break;
        case CALL_GEMM: vit_forward_gemms(run, vit); break;
        case CALL_FWDBWD:
            vit_forward(run, vit);
            st = vit_backward(g, run, vit, -1, VIT_GRAD_EXACT, err);
            break;
        case CALL_BACKWARD: st = vit_backward(g, run, vit, -1, VIT_GRAD_EXACT, err); break;
        case CALL_LRP: st = vit_backward(g, run, vit, -1, VIT_GRAD_LRP, err); break;
        }
        ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
        if (st) return -1.0;
    }
    return (now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / n;
}

/* --maps: time the maps of the set described at the top (iters times), write them
 * to path. 0: done, 1: a map failed (err), 2: out of memory or cannot write. */
static int write_maps(const char *path, double *ms, int iters, const VitRun *run, VitError *err) {
    const VitConfig *c = &run->cfg;
    int N = c->n_patches, Np = c->n_prefix, L = c->n_layers, H = c->n_heads, mid = Np + N / 2;
    enum { N_MAPS = 3 * 4 + 2 };
    float *maps = malloc((size_t)N_MAPS * N * sizeof *maps);
    double *ms_roll = malloc((size_t)iters * sizeof *ms_roll);
    int rc = 2;
    if (!maps || !ms_roll) goto out;
    for (int it = 0; it < iters; it++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        float *m = maps;
        const int layers[3] = {0, L / 2, L - 1};
        for (int i = 0; i < 3; i++, m += 4 * (size_t)N)
            if (vit_map_attention(m, run, layers[i], 0, 0, err) ||
                vit_map_attention(m + N, run, layers[i], H - 1, mid, err) ||
                vit_map_fused(m + 2 * N, run, layers[i], VIT_FUSE_MEAN, 0, err) ||
                vit_map_fused(m + 3 * N, run, layers[i], VIT_FUSE_MAX, mid, err)) {
                rc = 1;
                goto out;
            }
        double t1 = now_ms(CLOCK_MONOTONIC);
        if (vit_rollout(m, run, L - 1, -1, VIT_FUSE_MEAN, 0.0f, 0, err)) {
            rc = 1;
            goto out;
        }
        ms_roll[it] = now_ms(CLOCK_MONOTONIC) - t1;
        if (vit_rollout(m + N, run, L - 1, 0, VIT_FUSE_MEAN, 0.9f, 0, err)) {
            rc = 1;
            goto out;
        }
        ms[it] = now_ms(CLOCK_MONOTONIC) - t0;
    }
    report_stage("maps", ms, iters);
    report_stage("rollout", ms_roll, iters);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "bench_forward: cannot write %s\n", path);
        goto out;
    }
    size_t n = fwrite(maps, sizeof *maps, (size_t)N_MAPS * N, f);
    if (fclose(f) == 0 && n == (size_t)N_MAPS * N) rc = 0;
out:
    if (rc == 2) fprintf(stderr, "bench_forward: --maps: out of memory or cannot write %s\n", path);
    free(maps);
    free(ms_roll);
    return rc;
}

/* The --serve loop (g: NULL without --backward); 0 on quit or end of input. */
static int serve(VitRun *run, const Vit *vit, VitGrad *g, const char *model) {
    static const char *const names[] = {"forward", "gemm", "fwdbwd", "backward", "lrp"};
    char line[256];
    double *ms = NULL;
    while (fgets(line, sizeof line, stdin)) {
        char cmd[32];
        int n = 0, what = -1;
        if (sscanf(line, "%31s %d", cmd, &n) < 1) continue;
        if (!strcmp(cmd, "quit")) break;
        for (int i = 0; i < (g ? 5 : 2); i++)
            if (!strcmp(cmd, names[i])) what = i;
        if (!strcmp(cmd, "memory")) {
            report_memory("memory", model);
        } else if (what >= 0 && n > 0 && n <= 100000) {
            double *grown = realloc(ms, (size_t)n * sizeof *ms);
            if (!grown) break;
            ms = grown;
            VitError err;
            double cpu = time_calls(ms, n, (Call)what, run, vit, g, &err);
            if (cpu < 0) {
                printf("error %s: %s\n", cmd, err.msg);
                fflush(stdout);
                continue;
            }
            printf("%s", cmd);
            for (int i = 0; i < n; i++) printf(" %.3f", ms[i]);
            printf(" cpu %.3f\n", cpu);
        } else {
            printf("error unknown command: %s", line);
        }
        fflush(stdout);
    }
    free(ms);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *image = NULL;
    const char *maps_out = NULL;
    int iters = 20, warmup = 3, serve_mode = 0, backward = 0;
    VitRunOptions ropt = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--image") && i + 1 < argc)
            image = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            ropt.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--att") && i + 1 < argc) {
            const char *a = argv[++i];
            ropt.att = !strcmp(a, "keep")        ? VIT_ATT_KEEP
                       : !strcmp(a, "recompute") ? VIT_ATT_RECOMPUTE
                       : !strcmp(a, "auto")      ? VIT_ATT_AUTO
                                                 : (VitAttStorage)-1;
        } else if (!strcmp(argv[i], "--maps") && i + 1 < argc)
            maps_out = argv[++i];
        else if (!strcmp(argv[i], "--serve"))
            serve_mode = 1;
        else if (!strcmp(argv[i], "--backward"))
            backward = 1;
        else {
            fprintf(stderr,
                    "usage: %s --model M [--image PHOTO] [--iters N] [--warmup W] [--threads K] "
                    "[--att auto|keep|recompute] [--maps OUT] [--backward] [--serve]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!model || iters < 1 || warmup < 0) {
        fprintf(stderr, "bench_forward: --model is required, --iters >= 1\n");
        return 2;
    }

    Vit vit = {0};
    VitRun run = {0};
    VitGrad grad = {0};
    VitImage img = {0};
    VitError err;
    float *map = NULL;
    double *ms = calloc((size_t)iters, sizeof *ms);
    int rc = 1;
    if (!ms) goto fail;

    for (int i = 0; i < (serve_mode ? 1 : iters); i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_load(&vit, model, NULL, &err)) goto fail_err;
        ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
        if (i + 1 < iters && !serve_mode) vit_free(&vit);
    }
    if (!serve_mode) report_stage("load", ms, iters);
    const VitConfig *c = &vit.cfg;
    printf("model %s S=%dx%d P=%d grid=%dx%d T=%d D=%d H=%d L=%d C=%d\n", c->name, c->image_h,
           c->image_w, c->patch_size, c->grid_h, c->grid_w, c->n_tokens, c->dim, c->n_heads,
           c->n_layers, c->n_classes);
    fflush(stdout);

    if (vit_run_init_with(&run, &vit, &ropt, &err)) goto fail_err;
    printf("run threads=%d attention=%s blas=%s\n", run.n_threads,
           run.att_kept ? "kept" : "recomputed from queries and keys", vit_blas_core());
    uint32_t seed = 12345; /* pixels roughly as normalised ones: uniform in [-2, 2) */
    for (size_t i = 0; i < (size_t)3 * c->image_h * c->image_w; i++) {
        seed = seed * 1664525u + 1013904223u;
        run.input[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
    if (backward) {
        if (vit_grad_init(&grad, &vit, &run, &err)) goto fail_err;
        printf("grad_buffers_mb %.1f\n", grad.mem_floats * sizeof(float) / 1048576.0);
    }
    if (serve_mode) {
        rc = serve(&run, &vit, backward ? &grad : NULL, model);
        goto done;
    }

    if (image) {
        if (vit_image_load(&img, image, &err)) goto fail_err;
        for (int i = 0; i < iters; i++) {
            double t0 = now_ms(CLOCK_MONOTONIC);
            if (vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, &img, &err)) goto fail_err;
            ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
        }
        report_stage("preprocess", ms, iters);
    }

    for (int i = 0; i < warmup; i++) vit_forward(&run, &vit);
    double cpu = time_calls(ms, iters, CALL_FORWARD, &run, &vit, NULL, &err);
    report_stage("forward", ms, iters);
    printf("cpu   forward    mean_ms %9.3f (all threads)\n", cpu);
    if (backward) {
        static const char *const names[] = {"backward", "lrp"};
        report_memory("memory_forward", model);
        for (int k = 0; k < 2; k++) {
            Call what = k ? CALL_LRP : CALL_BACKWARD;
            for (int i = 0; i < warmup; i++)
                if (vit_backward(&grad, &run, &vit, -1, k ? VIT_GRAD_LRP : VIT_GRAD_EXACT, &err))
                    goto fail_err;
            if ((cpu = time_calls(ms, iters, what, &run, &vit, &grad, &err)) < 0) goto fail_err;
            report_stage(names[k], ms, iters);
            printf("cpu   %-10s mean_ms %9.3f (all threads)\n", names[k], cpu);
            if (!k) report_memory("memory", model); /* forward + vit_grad_init + vit_backward */
        }
        rc = 0;
        goto done;
    }
    if (maps_out) {
        rc = write_maps(maps_out, ms, iters, &run, &err);
        if (rc == 0) report_memory("memory", model);
        if (rc == 1) goto fail_err;
        goto done;
    }
    cpu = time_calls(ms, iters, CALL_GEMM, &run, &vit, NULL, &err);
    report_stage("gemm", ms, iters);
    printf("cpu   gemm       mean_ms %9.3f (all threads)\n", cpu);

    vit_forward(&run, &vit); /* the GEMM floor left garbage behind */
    if (!(map = malloc((size_t)c->n_patches * sizeof *map))) goto fail;
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_rollout(map, &run, c->n_layers - 1, -1, VIT_FUSE_MEAN, 0.0f, 0, &err))
            goto fail_err;
        ms[i] = now_ms(CLOCK_MONOTONIC) - t0;
    }
    report_stage("rollout", ms, iters);
    report_memory("memory", model);
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
    vit_grad_free(&grad);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}
