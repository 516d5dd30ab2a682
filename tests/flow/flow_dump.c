/* flow_dump.c - attention flow for test_flow.py to compare with networkx.
 *
 *   flow_dump caps CAP L T QUERY THREADS OUT
 *   flow_dump model --model M.safetensors (--image PHOTO | --input RAW) [--heads H]
 *                   [--att keep|recompute] [--threads K] --out DIR
 *
 * caps: vit_max_flow_layers on CAP, float32 [L, T, T] in host byte order, cap[l][i][j]
 *   the capacity from token j at level l to token i at level l + 1. OUT receives
 *   float32 [T], out[j] the max flow from (0, j) to (L, QUERY).
 * model: one forward pass of the model on PHOTO (vit_preprocess) or RAW (float32
 *   [3, Sh, Sw]), then into DIR (created if missing), float32 in host byte order:
 *     att.f32      [L, H, T, T] the attention (only when kept: --att keep, the default)
 *     flow.f32     [L, T] vit_attention_flow of the CLS token after each block l
 *     rollout.f32  [L, N] vit_rollout of the CLS token, mean fusion, no discard
 *   and prints the shapes as one JSON line: {"L": .., "H": .., "T": .., "Np": .., "N": ..}.
 * An engine error: its message on stderr and exit 3 (the test checks refusals by it);
 * other errors exit 1, usage 2. */
#include "vit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(void) {
    fputs("usage: flow_dump caps CAP L T QUERY THREADS OUT\n"
          "       flow_dump model --model M (--image PHOTO | --input RAW) [--heads H]\n"
          "                       [--att keep|recompute] [--threads K] --out DIR\n",
          stderr);
    return 2;
}

static int to_int(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < -(1L << 30) || v > (1L << 30)) return 0;
    *out = (int)v;
    return 1;
}

/* Exactly n floats from path into out; 0 on success. */
static int read_f32(float *out, size_t n, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "flow_dump: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t got = fread(out, sizeof(float), n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra) {
        fprintf(stderr, "flow_dump: %s: expected %zu floats\n", path, n);
        return 1;
    }
    return 0;
}

static int write_f32(const char *dir, const char *name, const float *p, size_t n) {
    char path[1200];
    if (dir)
        snprintf(path, sizeof path, "%s/%s", dir, name);
    else
        snprintf(path, sizeof path, "%s", name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, sizeof(float), n, f) != n || fclose(f)) {
        fprintf(stderr, "flow_dump: %s: cannot write\n", path);
        return 1;
    }
    return 0;
}

static int engine_fail(const VitError *err) {
    fprintf(stderr, "flow_dump: %s (%s error)\n", err->msg, vit_status_name(err->code));
    return 3;
}

/* --- caps ------------------------------------------------------------------ */

static int run_caps(int argc, char **argv) {
    int L, T, query, threads;
    if (argc != 8 || !to_int(argv[3], &L) || !to_int(argv[4], &T) || !to_int(argv[5], &query) ||
        !to_int(argv[6], &threads) || L < 1 || T < 1 || L > 4096 || T > 65536)
        return usage();
    size_t n = (size_t)L * T * T;
    float *cap = malloc(n * sizeof(float)), *out = malloc((size_t)T * sizeof(float));
    VitError err = {0};
    int rc = 1;
    if (!cap || !out)
        fputs("flow_dump: out of memory\n", stderr);
    else if (!read_f32(cap, n, argv[2])) {
        if (vit_max_flow_layers(out, cap, L, T, query, threads, &err))
            rc = engine_fail(&err);
        else
            rc = write_f32(NULL, argv[7], out, (size_t)T);
    }
    free(cap), free(out);
    return rc;
}

/* --- model ----------------------------------------------------------------- */

static int run_model(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *raw = NULL, *dir = NULL;
    VitRunOptions ropt = {.att = VIT_ATT_KEEP};
    VitLoadOptions lopt = {0};
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--image"))
            image = v;
        else if (!strcmp(a, "--input"))
            raw = v;
        else if (!strcmp(a, "--out"))
            dir = v;
        else if (!strcmp(a, "--att") && (!strcmp(v, "keep") || !strcmp(v, "recompute")))
            ropt.att = !strcmp(v, "keep") ? VIT_ATT_KEEP : VIT_ATT_RECOMPUTE;
        else if (!strcmp(a, "--threads") && to_int(v, &ropt.n_threads) && ropt.n_threads >= 1)
            ;
        else if (!strcmp(a, "--heads") && to_int(v, &lopt.n_heads) && lopt.n_heads >= 1)
            ;
        else
            return usage();
    }
    if (argc % 2 || !model || !dir || !image == !raw) return usage();

    Vit vit = {0};
    VitRun run = {0};
    VitImage img = {0};
    VitError err = {0};
    float *flow = NULL, *roll = NULL;
    int rc = 1;
    if (vit_load(&vit, model, &lopt, &err) || vit_run_init_with(&run, &vit, &ropt, &err)) {
        rc = engine_fail(&err);
        goto done;
    }
    const VitConfig *c = &vit.cfg;
    size_t L = (size_t)c->n_layers, H = (size_t)c->n_heads, T = (size_t)c->n_tokens,
           N = (size_t)c->n_patches;
    if (image) {
        if (vit_image_load(&img, image, &err) ||
            vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, &img, &err)) {
            rc = engine_fail(&err);
            goto done;
        }
    } else if (read_f32(run.input, 3 * (size_t)c->image_h * c->image_w, raw)) {
        goto done;
    }
    vit_forward(&run, &vit);
    flow = malloc(L * T * sizeof(float));
    roll = malloc(L * N * sizeof(float));
    if (!flow || !roll) {
        fputs("flow_dump: out of memory\n", stderr);
        goto done;
    }
    for (int l = 0; l < (int)L; l++)
        if (vit_attention_flow(flow + l * T, &run, l, 0, &err) ||
            vit_rollout(roll + l * N, &run, l, -1, VIT_FUSE_MEAN, 0.0f, 0, &err)) {
            rc = engine_fail(&err);
            goto done;
        }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "flow_dump: %s: %s\n", dir, strerror(errno));
        goto done;
    }
    if ((run.att && write_f32(dir, "att.f32", run.att, L * H * T * T)) ||
        write_f32(dir, "flow.f32", flow, L * T) || write_f32(dir, "rollout.f32", roll, L * N))
        goto done;
    printf("{\"L\": %zu, \"H\": %zu, \"T\": %zu, \"Np\": %d, \"N\": %zu}\n", L, H, T, c->n_prefix,
           N);
    rc = 0;
done:
    free(flow), free(roll);
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "caps")) return run_caps(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "model")) return run_model(argc, argv);
    return usage();
}
