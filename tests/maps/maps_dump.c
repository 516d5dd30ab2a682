/* maps_dump.c - run every map of vit.h on a synthetic attention tensor and write
 * them as .npy files, for test_maps.py to check against numpy. Needs no model:
 * a VitRun is filled by hand with the shapes and run.att, which is all that
 * engine/maps/maps.c reads (cfg.n_layers, n_heads, n_prefix, n_patches, n_tokens).
 *
 * usage: maps_dump ATT OUT_DIR L H Np gh gw QUERIES RATIOS
 *   ATT      raw little-endian float32 att [L, H, T, T], T = Np + gh*gw, no header
 *   QUERIES  comma-separated token indices, e.g. "0,1,7" (0: the CLS token)
 *   RATIOS   comma-separated discard ratios, e.g. "0,0.1,0.5,0.9"
 *
 * Writes, in OUT_DIR (Q = number of queries, R = number of ratios, fusion
 * index 0 mean, 1 max, 2 min as in VitFusion), all float32 row-major NPY v1.0:
 *   attention.npy     [L, H, Q, gh, gw]        vit_map_attention
 *   fused.npy         [L, 3, Q, gh, gw]        vit_map_fused
 *   rollout.npy       [L, 3, R, Q, gh, gw]     vit_rollout, head = -1 (head fusion)
 *   rollout_head.npy  [L, H, 3, R, Q, gh, gw]  vit_rollout, head >= 0 (per-head rollout)
 *   prefix_*.npy      the same four with [Np] in place of [gh, gw]: vit_prefix_share, the
 *                     prefix-token part of each map's row
 *
 * Before that it checks that out-of-range arguments give VIT_ERR_ARG.
 * Exit status: 0 ok, 1 on any failure (message on stderr). */
#include "headless/npy.h"
#include "vit.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 64

/* --- helpers --------------------------------------------------------------- */

static int parse_int(int *out, const char *s, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1000000) {
        fprintf(stderr, "maps_dump: %s: '%s' is not a count\n", what, s);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* "a,b,c" -> ints (is_float 0) or floats (is_float 1); returns the count, 0 on error. */
static int parse_list(int *ints, float *floats, const char *s, int is_float, const char *what) {
    int n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        if (n == MAX_LIST) break;
        if (is_float)
            floats[n] = strtof(p, &end);
        else {
            long v = strtol(p, &end, 10);
            ints[n] = (v < -1000000 || v > 1000000) ? -1 : (int)v;
        }
        if (errno || end == p || (*end != ',' && *end != '\0')) break;
        n++;
        if (*end == '\0') return n;
        p = end + 1;
    }
    fprintf(stderr, "maps_dump: %s: cannot parse '%s' (at most %d items)\n", what, s, MAX_LIST);
    return 0;
}

static int expect_arg_error(VitStatus got, const VitError *err, const char *call) {
    if (got == VIT_ERR_ARG && err->code == VIT_ERR_ARG && err->msg[0]) return 1;
    fprintf(stderr, "maps_dump: %s: got status %s, expected arg\n", call, vit_status_name(got));
    return 0;
}

/* Out-of-range layer, head, query, fusion and discard ratio: VIT_ERR_ARG, with a message. */
static int check_arg_errors(const VitRun *run) {
    const VitConfig *c = &run->cfg;
    float *m = malloc((size_t)c->n_patches * sizeof(float));
    if (!m) return 0;
    VitError e;
    int ok = 1;
    ok &= expect_arg_error(vit_map_attention(m, run, -1, 0, 0, &e), &e, "attention layer -1");
    ok &=
        expect_arg_error(vit_map_attention(m, run, c->n_layers, 0, 0, &e), &e, "attention layer L");
    ok &= expect_arg_error(vit_map_attention(m, run, 0, -1, 0, &e), &e, "attention head -1");
    ok &= expect_arg_error(vit_map_attention(m, run, 0, c->n_heads, 0, &e), &e, "attention head H");
    ok &= expect_arg_error(vit_map_attention(m, run, 0, 0, -1, &e), &e, "attention query -1");
    ok &=
        expect_arg_error(vit_map_attention(m, run, 0, 0, c->n_tokens, &e), &e, "attention query T");
    ok &= expect_arg_error(vit_map_fused(m, run, 0, (VitFusion)3, 0, &e), &e, "fused fusion 3");
    ok &= expect_arg_error(vit_map_fused(m, run, c->n_layers, VIT_FUSE_MEAN, 0, &e), &e,
                           "fused layer L");
    ok &= expect_arg_error(vit_rollout(m, run, 0, c->n_heads, VIT_FUSE_MEAN, 0.0f, 0, &e), &e,
                           "rollout head H");
    ok &= expect_arg_error(vit_rollout(m, run, 0, -1, VIT_FUSE_MEAN, 1.0f, 0, &e), &e,
                           "rollout ratio 1");
    ok &= expect_arg_error(vit_rollout(m, run, 0, -1, VIT_FUSE_MEAN, -0.1f, 0, &e), &e,
                           "rollout ratio -0.1");
    ok &= expect_arg_error(vit_rollout(m, run, 0, -1, VIT_FUSE_MEAN, NAN, 0, &e), &e,
                           "rollout ratio nan");
    ok &= expect_arg_error(vit_rollout(m, run, 0, -1, (VitFusion)-1, 0.0f, 0, &e), &e,
                           "rollout fusion -1");
    ok &= expect_arg_error(vit_rollout(m, run, 0, -1, VIT_FUSE_MEAN, 0.0f, c->n_tokens, &e), &e,
                           "rollout query T");
    ok &= expect_arg_error(vit_prefix_share(m, run, c->n_layers, 0, VIT_FUSE_MEAN, 0, 0.0f, 0, &e),
                           &e, "prefix layer L");
    ok &= expect_arg_error(vit_prefix_share(m, run, 0, c->n_heads, VIT_FUSE_MEAN, 0, 0.0f, 0, &e),
                           &e, "prefix head H");
    ok &= expect_arg_error(vit_prefix_share(m, run, 0, -1, (VitFusion)3, 0, 0.0f, 0, &e), &e,
                           "prefix fusion 3");
    ok &= expect_arg_error(vit_prefix_share(m, run, 0, -1, VIT_FUSE_MEAN, 1, 1.0f, 0, &e), &e,
                           "prefix rollout ratio 1");
    ok &= expect_arg_error(vit_prefix_share(m, run, 0, 0, VIT_FUSE_MEAN, 0, 0.0f, c->n_tokens, &e),
                           &e, "prefix query T");
    free(m);
    return ok;
}

static int report(VitStatus rc, const VitError *err, const char *what) {
    if (rc == VIT_OK) return 1;
    fprintf(stderr, "maps_dump: %s: %s: %s\n", what, vit_status_name(rc), err->msg);
    return 0;
}

/* --- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: maps_dump ATT OUT_DIR L H Np gh gw QUERIES RATIOS\n");
        return 1;
    }
    const char *att_path = argv[1], *out_dir = argv[2];
    int L, H, Np, gh, gw, queries[MAX_LIST];
    float ratios[MAX_LIST];
    if (!parse_int(&L, argv[3], "L") || !parse_int(&H, argv[4], "H") ||
        !parse_int(&Np, argv[5], "Np") || !parse_int(&gh, argv[6], "gh") ||
        !parse_int(&gw, argv[7], "gw"))
        return 1;
    int Q = parse_list(queries, NULL, argv[8], 0, "QUERIES");
    int R = parse_list(NULL, ratios, argv[9], 1, "RATIOS");
    if (!Q || !R) return 1;
    if (L < 1 || L > VIT_MAX_LAYERS || H < 1 || H > 64 || Np < 1 || Np > VIT_MAX_PREFIX || gh < 1 ||
        gw < 1 || gh > 4096 || gw > 4096 || gh * gw > 4096) {
        fprintf(stderr, "maps_dump: shapes out of range: L %d H %d Np %d grid %dx%d\n", L, H, Np,
                gh, gw);
        return 1;
    }
    int N = gh * gw, T = Np + N;
    size_t TT = (size_t)T * T, n_att = (size_t)L * H * TT;

    VitRun run = {0};
    run.cfg.n_layers = L;
    run.cfg.n_heads = H;
    run.cfg.n_prefix = Np;
    run.cfg.grid_h = gh;
    run.cfg.grid_w = gw;
    run.cfg.n_patches = N;
    run.cfg.n_tokens = T;

    const size_t map = (size_t)N, per_layer_att = (size_t)H * Q * map;
    float *att = malloc(n_att * sizeof(float));
    float *o_att = malloc((size_t)L * per_layer_att * sizeof(float));
    float *o_fused = malloc((size_t)L * 3 * Q * map * sizeof(float));
    float *o_roll = malloc((size_t)L * 3 * R * Q * map * sizeof(float));
    float *o_head = malloc((size_t)L * H * 3 * R * Q * map * sizeof(float));
    /* the prefix parts: [Np] per map */
    const size_t np = (size_t)Np;
    float *p_att = malloc((size_t)L * H * Q * np * sizeof(float));
    float *p_fused = malloc((size_t)L * 3 * Q * np * sizeof(float));
    float *p_roll = malloc((size_t)L * 3 * R * Q * np * sizeof(float));
    float *p_head = malloc((size_t)L * H * 3 * R * Q * np * sizeof(float));
    int ok = 0;
    if (!att || !o_att || !o_fused || !o_roll || !o_head || !p_att || !p_fused || !p_roll ||
        !p_head) {
        fprintf(stderr, "maps_dump: out of memory\n");
        goto done;
    }

    FILE *f = fopen(att_path, "rb");
    if (!f) {
        fprintf(stderr, "maps_dump: %s: %s\n", att_path, strerror(errno));
        goto done;
    }
    size_t got = fread(att, sizeof(float), n_att, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n_att || extra) {
        fprintf(stderr, "maps_dump: %s: expected exactly %zu float32 ([%d, %d, %d, %d])\n",
                att_path, n_att, L, H, T, T);
        goto done;
    }
    run.att = att;

    if (!check_arg_errors(&run)) goto done;

    VitError err;
    float *o = o_att;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < Q; q++, o += map)
                if (!report(vit_map_attention(o, &run, l, h, queries[q], &err), &err,
                            "vit_map_attention"))
                    goto done;
    o = o_fused;
    for (int l = 0; l < L; l++)
        for (int fu = 0; fu < 3; fu++)
            for (int q = 0; q < Q; q++, o += map)
                if (!report(vit_map_fused(o, &run, l, (VitFusion)fu, queries[q], &err), &err,
                            "vit_map_fused"))
                    goto done;
    o = o_roll;
    for (int l = 0; l < L; l++)
        for (int fu = 0; fu < 3; fu++)
            for (int r = 0; r < R; r++)
                for (int q = 0; q < Q; q++, o += map)
                    if (!report(
                            vit_rollout(o, &run, l, -1, (VitFusion)fu, ratios[r], queries[q], &err),
                            &err, "vit_rollout"))
                        goto done;
    o = o_head;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int fu = 0; fu < 3; fu++)
                for (int r = 0; r < R; r++)
                    for (int q = 0; q < Q; q++, o += map)
                        if (!report(vit_rollout(o, &run, l, h, (VitFusion)fu, ratios[r], queries[q],
                                                &err),
                                    &err, "vit_rollout (per head)"))
                            goto done;

    o = p_att;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < Q; q++, o += np)
                if (!report(
                        vit_prefix_share(o, &run, l, h, VIT_FUSE_MEAN, 0, 0.0f, queries[q], &err),
                        &err, "vit_prefix_share (attention)"))
                    goto done;
    o = p_fused;
    for (int l = 0; l < L; l++)
        for (int fu = 0; fu < 3; fu++)
            for (int q = 0; q < Q; q++, o += np)
                if (!report(
                        vit_prefix_share(o, &run, l, -1, (VitFusion)fu, 0, 0.0f, queries[q], &err),
                        &err, "vit_prefix_share (fused)"))
                    goto done;
    o = p_roll;
    for (int l = 0; l < L; l++)
        for (int fu = 0; fu < 3; fu++)
            for (int r = 0; r < R; r++)
                for (int q = 0; q < Q; q++, o += np)
                    if (!report(vit_prefix_share(o, &run, l, -1, (VitFusion)fu, 1, ratios[r],
                                                 queries[q], &err),
                                &err, "vit_prefix_share (rollout)"))
                        goto done;
    o = p_head;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int fu = 0; fu < 3; fu++)
                for (int r = 0; r < R; r++)
                    for (int q = 0; q < Q; q++, o += np)
                        if (!report(vit_prefix_share(o, &run, l, h, (VitFusion)fu, 1, ratios[r],
                                                     queries[q], &err),
                                    &err, "vit_prefix_share (per-head rollout)"))
                            goto done;

    const int s_att[] = {L, H, Q, gh, gw}, s_fused[] = {L, 3, Q, gh, gw};
    const int p_s_att[] = {L, H, Q, Np}, p_s_fused[] = {L, 3, Q, Np};
    const int p_s_roll[] = {L, 3, R, Q, Np}, p_s_head[] = {L, H, 3, R, Q, Np};
    const int s_roll[] = {L, 3, R, Q, gh, gw}, s_head[] = {L, H, 3, R, Q, gh, gw};
    char msg[4400];
    ok = !npy_write(out_dir, "attention.npy", o_att, s_att, 5, msg, sizeof msg) &&
         !npy_write(out_dir, "fused.npy", o_fused, s_fused, 5, msg, sizeof msg) &&
         !npy_write(out_dir, "rollout.npy", o_roll, s_roll, 6, msg, sizeof msg) &&
         !npy_write(out_dir, "rollout_head.npy", o_head, s_head, 7, msg, sizeof msg) &&
         !npy_write(out_dir, "prefix_attention.npy", p_att, p_s_att, 4, msg, sizeof msg) &&
         !npy_write(out_dir, "prefix_fused.npy", p_fused, p_s_fused, 4, msg, sizeof msg) &&
         !npy_write(out_dir, "prefix_rollout.npy", p_roll, p_s_roll, 5, msg, sizeof msg) &&
         !npy_write(out_dir, "prefix_rollout_head.npy", p_head, p_s_head, 6, msg, sizeof msg);
    if (!ok) fprintf(stderr, "maps_dump: %s\n", msg);
done:
    free(att), free(o_att), free(o_fused), free(o_roll), free(o_head);
    free(p_att), free(p_fused), free(p_roll), free(p_head);
    return ok ? 0 : 1;
}
