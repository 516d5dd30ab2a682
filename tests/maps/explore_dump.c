/* explore_dump.c - run the explorer maps of vit.h (vit_mass_mask,
 * vit_attention_distance) on synthetic data and write them as .npy files, for
 * test_explore.py to check against numpy. Needs no model: a VitRun is filled
 * by hand with the shapes and run.att.
 *
 * usage: explore_dump ATT MAPS OUT_DIR L H Np gh gw P M FRACTIONS
 *   ATT        raw little-endian float32 att [L, H, T, T], T = Np + gh*gw
 *   MAPS       raw float32 maps [M, gh*gw] for the mask
 *   FRACTIONS  comma-separated mass fractions, e.g. "0.6,0.9,1"
 * Writes (F = number of fractions, N = gh*gw):
 *   distance.npy  [L, H]     vit_attention_distance, px
 *   mask.npy      [F, M, N]  vit_mass_mask, 0 or 1
 *   kept.npy      [F, M]     its n_kept
 * Before that it checks that bad arguments give VIT_ERR_ARG and that
 * vit_rollout_layers equals vit_rollout map by map, bit for bit.
 * Exit status: 0 ok, 1 on any failure (message on stderr). */
#include "headless/npy.h"
#include "vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRACTIONS 16

static float *read_floats(const char *path, size_t n) {
    float *buf = malloc(n * sizeof(float));
    FILE *f = fopen(path, "rb");
    if (!buf || !f) {
        fprintf(stderr, "explore_dump: %s: cannot read\n", path);
        free(buf);
        if (f) fclose(f);
        return NULL;
    }
    size_t got = fread(buf, sizeof(float), n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra) {
        fprintf(stderr, "explore_dump: %s: expected exactly %zu float32\n", path, n);
        free(buf);
        return NULL;
    }
    return buf;
}

static int expect_arg(VitStatus got, const VitError *e, const char *what) {
    if (got == VIT_ERR_ARG && e->msg[0]) return 1;
    fprintf(stderr, "explore_dump: %s: got %s, expected arg\n", what, vit_status_name(got));
    return 0;
}

static int check_arg_errors(const float *map, int n) {
    uint8_t *m = malloc((size_t)n);
    float *bad = malloc((size_t)n * sizeof(float));
    if (!m || !bad) return free(m), free(bad), 0;
    VitError e;
    VitRun empty = {0};
    float out[1];
    int ok = 1;
    ok &= expect_arg(vit_mass_mask(m, NULL, map, n, 0.0f, &e), &e, "mask fraction 0");
    ok &= expect_arg(vit_mass_mask(m, NULL, map, n, 1.5f, &e), &e, "mask fraction 1.5");
    ok &= expect_arg(vit_mass_mask(m, NULL, map, n, NAN, &e), &e, "mask fraction nan");
    ok &= expect_arg(vit_mass_mask(m, NULL, map, 0, 0.5f, &e), &e, "mask n 0");
    memcpy(bad, map, (size_t)n * sizeof(float));
    bad[n - 1] = -1.0f;
    ok &= expect_arg(vit_mass_mask(m, NULL, bad, n, 0.5f, &e), &e, "mask negative value");
    bad[n - 1] = NAN;
    ok &= expect_arg(vit_mass_mask(m, NULL, bad, n, 0.5f, &e), &e, "mask nan value");
    ok &= expect_arg(vit_attention_distance(out, &empty, &e), &e, "distance without a pass");
    free(m), free(bad);
    return ok;
}

/* vit_rollout_layers against one vit_rollout call per map: bit for bit equal,
 * for every layer range ending anywhere, with and without discarding, from the
 * CLS token and from a patch. */
static int check_rollout_layers(const VitRun *run) {
    const VitConfig *c = &run->cfg;
    int L = c->n_layers, H = c->n_heads, K = H + 3, N = c->n_patches;
    float *all = malloc((size_t)L * K * N * sizeof(float)),
          *one = malloc((size_t)N * sizeof(float));
    const float ratios[] = {0.0f, 0.5f};
    const int queries[] = {0, c->n_prefix + N / 2};
    VitError e;
    int ok = all && one;
    ok = ok && expect_arg(vit_rollout_layers(all, run, 0, 0, 0.0f, 0, &e), &e, "rollout 0 layers");
    ok = ok && expect_arg(vit_rollout_layers(all, run, 0, L + 1, 0.0f, 0, &e), &e,
                          "rollout past the last layer");
    for (int r = 0; ok && r < 2; r++)
        for (int q = 0; ok && q < 2; q++)
            for (int l0 = 0; ok && l0<L; l0 += L> 2 ? L - 1 : 1) {
                if (vit_rollout_layers(all, run, l0, L - l0, ratios[r], queries[q], &e)) {
                    fprintf(stderr, "explore_dump: vit_rollout_layers: %s\n", e.msg);
                    ok = 0;
                }
                for (int l = l0; ok && l < L; l++)
                    for (int k = 0; ok && k < K; k++) {
                        VitStatus rc = k < H ? vit_rollout(one, run, l, k, VIT_FUSE_MEAN, ratios[r],
                                                           queries[q], &e)
                                             : vit_rollout(one, run, l, -1, (VitFusion)(k - H),
                                                           ratios[r], queries[q], &e);
                        const float *got = all + ((size_t)(l - l0) * K + k) * N;
                        if (rc || memcmp(got, one, (size_t)N * sizeof(float))) {
                            fprintf(stderr,
                                    "explore_dump: vit_rollout_layers(%d..) layer %d map %d "
                                    "(discard %.1f, query %d) differs from vit_rollout\n",
                                    l0, l, k, (double)ratios[r], queries[q]);
                            ok = 0;
                        }
                    }
            }
    free(all), free(one);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: explore_dump ATT MAPS OUT_DIR L H Np gh gw P M FRACTIONS\n");
        return 1;
    }
    int L = atoi(argv[4]), H = atoi(argv[5]), Np = atoi(argv[6]), gh = atoi(argv[7]);
    int gw = atoi(argv[8]), P = atoi(argv[9]), M = atoi(argv[10]);
    if (L < 1 || H < 1 || Np < 1 || gh < 1 || gw < 1 || P < 1 || M < 1 || gh * gw > 4096 ||
        L > 64 || H > 64 || M > 4096) {
        fprintf(stderr, "explore_dump: shapes out of range\n");
        return 1;
    }
    float fractions[MAX_FRACTIONS];
    int F = 0;
    for (char *s = argv[11], *end; F < MAX_FRACTIONS; s = end + 1) {
        fractions[F++] = strtof(s, &end);
        if (end == s || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "explore_dump: cannot parse FRACTIONS '%s'\n", argv[11]);
            return 1;
        }
        if (*end == '\0') break;
    }
    int N = gh * gw, T = Np + N;
    VitRun run = {0};
    run.cfg = (VitConfig){.n_layers = L,
                          .n_heads = H,
                          .n_prefix = Np,
                          .grid_h = gh,
                          .grid_w = gw,
                          .n_patches = N,
                          .n_tokens = T,
                          .patch_size = P,
                          .image_h = P * gh,
                          .image_w = P * gw};
    float *att = read_floats(argv[1], (size_t)L * H * T * T);
    float *maps = read_floats(argv[2], (size_t)M * N);
    float *dist = malloc((size_t)L * H * sizeof(float));
    float *mask = malloc((size_t)F * M * N * sizeof(float));
    float *kept = malloc((size_t)F * M * sizeof(float));
    uint8_t *m8 = malloc((size_t)N);
    int ok = 0;
    if (!att || !maps || !dist || !mask || !kept || !m8) goto done;
    if (!check_arg_errors(maps, N)) goto done;
    run.att = att;
    VitError err;
    if (vit_attention_distance(dist, &run, &err)) {
        fprintf(stderr, "explore_dump: vit_attention_distance: %s\n", err.msg);
        goto done;
    }
    if (!check_rollout_layers(&run)) goto done;
    for (int f = 0; f < F; f++)
        for (int m = 0; m < M; m++) {
            int k = -1;
            if (vit_mass_mask(m8, &k, maps + (size_t)m * N, N, fractions[f], &err)) {
                fprintf(stderr, "explore_dump: vit_mass_mask: %s\n", err.msg);
                goto done;
            }
            for (int p = 0; p < N; p++) mask[((size_t)f * M + m) * N + p] = m8[p];
            kept[f * M + m] = (float)k;
        }
    const int s_dist[] = {L, H}, s_mask[] = {F, M, N}, s_kept[] = {F, M};
    char msg[4400];
    ok = !npy_write(argv[3], "distance.npy", dist, s_dist, 2, msg, sizeof msg) &&
         !npy_write(argv[3], "mask.npy", mask, s_mask, 3, msg, sizeof msg) &&
         !npy_write(argv[3], "kept.npy", kept, s_kept, 2, msg, sizeof msg);
    if (!ok) fprintf(stderr, "explore_dump: %s\n", msg);
done:
    free(att), free(maps), free(dist), free(mask), free(kept), free(m8);
    return ok ? 0 : 1;
}
