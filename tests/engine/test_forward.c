/* test_forward.c - the forward pass's threads and its two ways of keeping the attention.
 *
 *   test_forward SCRATCH_DIR
 *
 * On tiny timm ViTs with T = 257 tokens (three blocks of query rows, so that
 * block edges are crossed), with a CLS head, a distillation head, and no head:
 *   - attention recomputed from the kept queries and keys (VIT_ATT_RECOMPUTE)
 *     gives every map of vit.h bit for bit what the kept attention (VIT_ATT_KEEP)
 *     gives: per-head attention at block edges, the three head fusions, rollout
 *     (fused and per head, with and without discard) and the prefix shares,
 *     vit_rollout_layers, vit_attention_distance and a vit_mass_mask of a
 *     recomputed map; and the same logits;
 *   - 1, 2 and 3 threads agree to float rounding (GEMMs split by columns can
 *     round differently), and a run uses the threads it was given;
 *   - VIT_ATT_AUTO keeps small attention and recomputes a model whose
 *     [L, H, T, T] passes VIT_ATT_KEEP_MAX_BYTES; bad options are refused;
 *   - the backward pass (vit_backward) gives the same gradients and the same six
 *     explanation maps (vit_explain) whether the attention and its gradient are
 *     kept or recomputed, equal value for value; 1, 2 and 3 threads agree to float
 *     rounding; a backbone without head, a class out of range, a map before any
 *     backward pass are refused with a message;
 *   - stopping early (VitRun.control): a control that is not cancelled changes no map
 *     and ends with its progress complete; once cancelled, vit_forward returns before
 *     its next layer and every map that reads the attention returns VIT_ERR_CANCELLED,
 *     kept or recomputed; after vit_control_reset they work again.
 * The values themselves are tested against PyTorch in tests/parity. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { D = 128, L = 3, P = 4, GRID = 16, F = 256, C = 10, HEADS = 4 };

static uint32_t rng_state = 12345u;
static float rnd_pixel(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
}

/* A forward pass of model `path` on a fixed input with opt; 0 on failure. */
static int run_model(VitRun *run, Vit *vit, const char *path, int n_threads, VitAttStorage att) {
    VitError err = {0};
    VitLoadOptions lo = {.n_heads = HEADS};
    VitRunOptions ro = {.n_threads = n_threads, .att = att};
    if (!vit->map_addr &&
        !check_err(vit_load(vit, path, &lo, &err), &err, VIT_OK, NULL, NULL, "vit_load"))
        return 0;
    if (!check_err(vit_run_init_with(run, vit, &ro, &err), &err, VIT_OK, NULL, NULL,
                   "vit_run_init_with"))
        return 0;
    rng_state = 12345u;
    for (size_t i = 0; i < (size_t)3 * vit->cfg.image_h * vit->cfg.image_w; i++)
        run->input[i] = rnd_pixel();
    vit_forward(run, vit);
    return 1;
}

/* Every map of a and b (same model, same input) into two buffers and compare
 * bit for bit; returns the number of maps that differ. */
static int compare_maps(const VitRun *a, const VitRun *b) {
    const VitConfig *c = &a->cfg;
    int N = c->n_patches, Np = c->n_prefix, differ = 0, n_maps = 0;
    float *ma = malloc((size_t)N * sizeof *ma), *mb = malloc((size_t)N * sizeof *mb);
    float pa[8], pb[8];
    const int queries[] = {0, 1, 85, 86, 127, 128, 171, 172, 256};
    VitError err;
#define SAME(call_a, call_b, len, ba, bb)                                                          \
    do {                                                                                           \
        VitStatus ra = call_a, rb = call_b;                                                        \
        n_maps++;                                                                                  \
        if (ra || rb || memcmp(ba, bb, (size_t)(len) * sizeof(float))) differ++;                   \
    } while (0)
    for (int l = 0; l < c->n_layers; l++)
        for (size_t qi = 0; qi < sizeof queries / sizeof *queries; qi++) {
            int q = queries[qi];
            for (int h = 0; h < c->n_heads; h++) {
                SAME(vit_map_attention(ma, a, l, h, q, &err),
                     vit_map_attention(mb, b, l, h, q, &err), N, ma, mb);
                SAME(vit_prefix_share(pa, a, l, h, VIT_FUSE_MEAN, 0, 0.0f, q, &err),
                     vit_prefix_share(pb, b, l, h, VIT_FUSE_MEAN, 0, 0.0f, q, &err), Np, pa, pb);
            }
            for (int f = VIT_FUSE_MEAN; f <= VIT_FUSE_MIN; f++) {
                SAME(vit_map_fused(ma, a, l, (VitFusion)f, q, &err),
                     vit_map_fused(mb, b, l, (VitFusion)f, q, &err), N, ma, mb);
                SAME(vit_prefix_share(pa, a, l, -1, (VitFusion)f, 0, 0.0f, q, &err),
                     vit_prefix_share(pb, b, l, -1, (VitFusion)f, 0, 0.0f, q, &err), Np, pa, pb);
            }
        }
    for (int l = 0; l < c->n_layers; l += c->n_layers - 1)
        for (int f = VIT_FUSE_MEAN; f <= VIT_FUSE_MAX; f++)
            for (int h = -1; h < 2; h += 2)
                for (float ratio = 0.0f; ratio < 0.6f; ratio += 0.5f) {
                    SAME(vit_rollout(ma, a, l, h, (VitFusion)f, ratio, 0, &err),
                         vit_rollout(mb, b, l, h, (VitFusion)f, ratio, 0, &err), N, ma, mb);
                    SAME(vit_prefix_share(pa, a, l, h, (VitFusion)f, 1, ratio, 128, &err),
                         vit_prefix_share(pb, b, l, h, (VitFusion)f, 1, ratio, 128, &err), Np, pa,
                         pb);
                }
    /* issue4's explorer maps: every rollout of every layer at once, the mean attention
     * distance, and a mask read from a recomputed map */
    {
        int nl = c->n_layers, nh = c->n_heads;
        size_t n_all = (size_t)nl * (nh + 3) * N;
        float *la = malloc(n_all * sizeof *la), *lb = malloc(n_all * sizeof *lb);
        float da[64], db[64];
        uint8_t ka[GRID * GRID], kb[GRID * GRID];
        int na = 0, nb = 0;
        if (la && lb) {
            for (float ratio = 0.0f; ratio < 0.6f; ratio += 0.5f)
                for (int q = 0; q < c->n_tokens; q += 128)
                    SAME(vit_rollout_layers(la, a, 0, nl, ratio, q, &err),
                         vit_rollout_layers(lb, b, 0, nl, ratio, q, &err), n_all, la, lb);
            SAME(vit_rollout_layers(la, a, 1, nl - 1, 0.9f, 0, &err),
                 vit_rollout_layers(lb, b, 1, nl - 1, 0.9f, 0, &err),
                 (size_t)(nl - 1) * (nh + 3) * N, la, lb);
        } else {
            differ++;
        }
        SAME(vit_attention_distance(da, a, &err), vit_attention_distance(db, b, &err), nl * nh, da,
             db);
        SAME(vit_map_attention(ma, a, nl - 1, 1, Np + 37, &err),
             vit_map_attention(mb, b, nl - 1, 1, Np + 37, &err), N, ma, mb);
        n_maps++;
        if (vit_mass_mask(ka, &na, ma, N, 0.6f, &err) ||
            vit_mass_mask(kb, &nb, mb, N, 0.6f, &err) || na != nb || memcmp(ka, kb, (size_t)N))
            differ++;
        free(la);
        free(lb);
    }
#undef SAME
    free(ma);
    free(mb);
    check(n_maps == 420, "%d maps compared (expected 420)", n_maps);
    return differ;
}

/* max |a - b| over n floats */
static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* The number of i with a[i] != b[i] (by value: -0 equals 0; a gradient row that is
 * zero may be a GEMM's -0 one way and a memset's 0 the other). */
static size_t n_unequal(const float *a, const float *b, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += a[i] != b[i];
    return k;
}

/* max |a| over n floats */
static double max_abs(const float *a, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* The backward pass of class `target` on runs keep[t] and redo[t] (1 .. 3 threads):
 * gradients and maps the same kept or recomputed, threads agreeing. */
static void test_backward(VitRun *keep, VitRun *redo, const Vit *vit, const char *label,
                          int target) {
    const VitConfig *c = &vit->cfg;
    size_t T = (size_t)c->n_tokens, Dm = (size_t)c->dim, Lm = (size_t)c->n_layers,
           S = 3 * (size_t)c->image_h * c->image_w, G = Lm * T * Dm;
    VitGrad gk[3], gr[3];
    memset(gk, 0, sizeof gk);
    memset(gr, 0, sizeof gr);
    VitError err = {0};
    float *mk = malloc(S * sizeof(float)), *mr = malloc(S * sizeof(float));
    float *m1 = malloc(S * VIT_EXPLAIN_COUNT * sizeof(float));
    for (int t = 0; t < 3; t++) {
        if (!check_err(vit_grad_init(&gk[t], vit, &keep[t], &err), &err, VIT_OK, NULL, NULL,
                       "vit_grad_init, attention kept") ||
            !check_err(vit_grad_init(&gr[t], vit, &redo[t], &err), &err, VIT_OK, NULL, NULL,
                       "vit_grad_init, attention recomputed"))
            goto done;
        if (t == 0) {
            check_err(vit_explain(mk, VIT_EXPLAIN_CHEFER, &keep[t], &gk[t], vit, 0.0f, &err), &err,
                      VIT_ERR_ARG, NULL, (const char *const[]){"no", "backward", NULL},
                      "vit_explain before vit_backward");
            check_err(vit_backward(&gk[t], &keep[t], vit, c->n_classes, VIT_GRAD_ALL, &err), &err,
                      VIT_ERR_ARG, NULL, (const char *const[]){"class", "out of range", NULL},
                      "vit_backward, class C");
            check_err(vit_backward(&gk[t], &redo[t], vit, target, VIT_GRAD_ALL, &err), &err,
                      VIT_ERR_ARG, NULL, (const char *const[]){"not made for this run", NULL},
                      "vit_backward, buffers of a kept run on a recomputing one");
        }
        if (!check_err(vit_backward(&gk[t], &keep[t], vit, target, VIT_GRAD_ALL, &err), &err,
                       VIT_OK, NULL, NULL, "vit_backward, kept") ||
            !check_err(vit_backward(&gr[t], &redo[t], vit, target, VIT_GRAD_ALL, &err), &err,
                       VIT_OK, NULL, NULL, "vit_backward, recomputed"))
            goto done;
        check(gk[t].grad_att && gk[t].grad_att_kept && !gr[t].grad_att && !gr[t].grad_att_kept,
              "%s: dy/dA kept [L, H, T, T] with the attention, not without", label);
        check(max_abs(gk[t].grad_input, S) > 0.0 && max_abs(gk[t].lrp_input, S) > 0.0 &&
                  max_abs(gk[t].grad_tokens, G) > 0.0,
              "%s: the gradients are not all zero", label);
        size_t d = n_unequal(gk[t].grad_tokens, gr[t].grad_tokens, G) +
                   n_unequal(gk[t].grad_input, gr[t].grad_input, S) +
                   n_unequal(gk[t].lrp_input, gr[t].lrp_input, S) +
                   n_unequal(gk[t].cam_grad, gr[t].cam_grad, (size_t)c->n_patches * Dm) +
                   n_unequal(gk[t].legrad, gr[t].legrad, Lm * (size_t)c->n_patches);
        check(d == 0, "%s, %d thread(s): gradients kept = recomputed (%zu values differ)", label,
              t + 1, d);
        for (int m = 0; m < VIT_EXPLAIN_COUNT; m++) {
            size_t n = vit_explain_pixels((VitExplain)m) ? S / 3 : (size_t)c->n_patches;
            float ratio = m == VIT_EXPLAIN_GRAD_ROLLOUT ? 0.5f : 0.0f;
            if (!check_err(vit_explain(mk, (VitExplain)m, &keep[t], &gk[t], vit, ratio, &err), &err,
                           VIT_OK, NULL, NULL, "vit_explain, kept") ||
                !check_err(vit_explain(mr, (VitExplain)m, &redo[t], &gr[t], vit, ratio, &err), &err,
                           VIT_OK, NULL, NULL, "vit_explain, recomputed"))
                goto done;
            /* Grad-CAM's ReLU may zero a whole map of random weights (its inputs,
             * cam_act and cam_grad, are compared above) */
            check(n_unequal(mk, mr, n) == 0 && (m == VIT_EXPLAIN_GRADCAM || max_abs(mk, n) > 0.0),
                  "%s, %d thread(s): %s map kept = recomputed, not all zero", label, t + 1,
                  vit_explain_name((VitExplain)m));
            if (t == 0)
                memcpy(m1 + (size_t)m * S, mk, n * sizeof(float));
            else {
                double dm = max_diff(m1 + (size_t)m * S, mk, n), am = max_abs(mk, n);
                check(dm <= 1e-3 * am, "%s: %s map, %d threads vs 1: max diff %.2g of %.2g", label,
                      vit_explain_name((VitExplain)m), t + 1, dm, am);
            }
        }
    }
    /* VIT_GRAD_ADD: the exact pass, then AttnLRP's added, is the two at once */
    {
        VitGrad g = {0};
        if (check_err(vit_grad_init(&g, vit, &keep[0], &err), &err, VIT_OK, NULL, NULL,
                      "vit_grad_init for VIT_GRAD_ADD") &&
            check_err(vit_backward(&g, &keep[0], vit, target, VIT_GRAD_EXACT, &err), &err, VIT_OK,
                      NULL, NULL, "vit_backward, exact only")) {
            check(g.what == VIT_GRAD_EXACT && vit_explain(mk, VIT_EXPLAIN_ATTNLRP, &keep[0], &g,
                                                          vit, 0.0f, &err) == VIT_ERR_ARG,
                  "%s: the exact pass alone: no AttnLRP map", label);
            check_err(vit_backward(&g, &keep[0], vit, (g.target + 1) % c->n_classes,
                                   VIT_GRAD_LRP | VIT_GRAD_ADD, &err),
                      &err, VIT_ERR_ARG, NULL, (const char *const[]){"adds", NULL},
                      "VIT_GRAD_ADD for another class");
            if (check_err(vit_backward(&g, &keep[0], vit, gk[0].target, VIT_GRAD_LRP | VIT_GRAD_ADD,
                                       &err),
                          &err, VIT_OK, NULL, NULL, "vit_backward, AttnLRP's pass added"))
                check(g.what == VIT_GRAD_ALL && n_unequal(g.lrp_input, gk[0].lrp_input, S) == 0 &&
                          n_unequal(g.grad_input, gk[0].grad_input, S) == 0 &&
                          n_unequal(g.grad_tokens, gk[0].grad_tokens, G) == 0,
                      "%s: exact, then AttnLRP's pass added = both at once", label);
        }
        vit_grad_free(&g);
    }
    /* threads: GEMMs split by columns round differently (see test_model) */
    for (int t = 1; t < 3; t++) {
        double dg = max_diff(gk[0].grad_tokens, gk[t].grad_tokens, G),
               ag = max_abs(gk[0].grad_tokens, G),
               di = max_diff(gk[0].grad_input, gk[t].grad_input, S),
               ai = max_abs(gk[0].grad_input, S);
        check(dg <= 1e-3 * ag && di <= 1e-3 * ai,
              "%s: gradients, %d threads vs 1: tokens %.2g of %.2g, input %.2g of %.2g", label,
              t + 1, dg, ag, di, ai);
    }
done:
    for (int t = 0; t < 3; t++) vit_grad_free(&gk[t]), vit_grad_free(&gr[t]);
    free(mk), free(mr), free(m1);
}

/* VitControl on a copy of each run (the maps read the run as const), as the app's worker
 * does: the same maps while not cancelled, VIT_ERR_CANCELLED once cancelled. */
static void test_cancel(const VitRun *keep, const VitRun *redo, const Vit *vit, const char *label) {
    const VitConfig *c = &vit->cfg;
    int N = c->n_patches, top = c->n_layers - 1, K = c->n_heads + 3;
    float *a = malloc((size_t)K * c->n_layers * N * sizeof *a);
    float *b = malloc((size_t)K * c->n_layers * N * sizeof *b);
    float *t = malloc((size_t)c->n_tokens * sizeof *t);
    VitError err = {0};
    check(!strcmp(vit_status_name(VIT_ERR_CANCELLED), "cancelled"), "VIT_ERR_CANCELLED's name");
    for (int r = 0; r < 2; r++) {
        const VitRun *run = r ? redo : keep;
        const char *how = r ? "recomputed" : "kept";
        /* vit_rollout_tokens: vit_prefix_share's prefix, then vit_rollout's map */
        int same = 1, Np = c->n_prefix;
        for (int head = -1; head < 2; head++) {
            float pre[8];
            vit_rollout(a, run, top - 1, head, VIT_FUSE_MAX, 0.3f, 1, &err);
            vit_prefix_share(pre, run, top - 1, head, VIT_FUSE_MAX, 1, 0.3f, 1, &err);
            VitStatus rt = vit_rollout_tokens(t, run, top - 1, head, VIT_FUSE_MAX, 0.3f, 1, &err);
            same &= rt == VIT_OK && !memcmp(t, pre, (size_t)Np * sizeof *t) &&
                    !memcmp(t + Np, a, (size_t)N * sizeof *t);
        }
        check(same, "%s, %s: vit_rollout_tokens = vit_prefix_share ++ vit_rollout, bit for bit",
              label, how);
        VitControl ctl = {0};
        VitRun with = *run;
        with.control = &ctl;
        int done, total;
        vit_rollout(a, run, top, -1, VIT_FUSE_MEAN, 0.0f, 0, &err);
        VitStatus rc = vit_rollout(b, &with, top, -1, VIT_FUSE_MEAN, 0.0f, 0, &err);
        vit_control_progress(&ctl, &done, &total);
        check(rc == VIT_OK && !memcmp(a, b, (size_t)N * sizeof *a) && done == top + 1 &&
                  total == top + 1,
              "%s, %s: rollout with a control = without, progress %d/%d", label, how, done, total);
        vit_rollout_layers(a, run, 0, c->n_layers, 0.0f, 0, &err);
        rc = vit_rollout_layers(b, &with, 0, c->n_layers, 0.0f, 0, &err);
        check(rc == VIT_OK && !memcmp(a, b, (size_t)K * c->n_layers * N * sizeof *a),
              "%s, %s: vit_rollout_layers with a control = without", label, how);
        vit_control_cancel(&ctl);
        check(vit_control_cancelled(&ctl), "%s, %s: cancelled", label, how);
        const char *const keys[] = {"cancelled", NULL};
        check_err(vit_map_attention(b, &with, top, 0, 0, &err), &err, VIT_ERR_CANCELLED, NULL, keys,
                  "vit_map_attention, cancelled");
        check_err(vit_map_fused(b, &with, top, VIT_FUSE_MAX, 0, &err), &err, VIT_ERR_CANCELLED,
                  NULL, keys, "vit_map_fused, cancelled");
        check_err(vit_rollout(b, &with, top, -1, VIT_FUSE_MEAN, 0.5f, 0, &err), &err,
                  VIT_ERR_CANCELLED, NULL, keys, "vit_rollout, cancelled");
        check_err(vit_rollout_layers(b, &with, 0, c->n_layers, 0.0f, 0, &err), &err,
                  VIT_ERR_CANCELLED, NULL, keys, "vit_rollout_layers, cancelled");
        check_err(vit_prefix_share(t, &with, top, -1, VIT_FUSE_MEAN, 1, 0.0f, 0, &err), &err,
                  VIT_ERR_CANCELLED, NULL, keys, "vit_prefix_share (rollout), cancelled");
        check_err(vit_rollout_tokens(t, &with, top, 0, VIT_FUSE_MEAN, 0.0f, 0, &err), &err,
                  VIT_ERR_CANCELLED, NULL, keys, "vit_rollout_tokens, cancelled");
        check_err(vit_attention_distance(b, &with, &err), &err, VIT_ERR_CANCELLED, NULL, keys,
                  "vit_attention_distance, cancelled");
        check_err(vit_attention_flow(t, &with, top, 0, &err), &err, VIT_ERR_CANCELLED, NULL, keys,
                  "vit_attention_flow, cancelled");
        check_err(vit_tokenrank(t, &with, top, -1, VIT_FUSE_MEAN, &err), &err, VIT_ERR_CANCELLED,
                  NULL, keys, "vit_tokenrank, cancelled");
        vit_control_reset(&ctl);
        vit_control_progress(&ctl, &done, &total);
        rc = vit_rollout(b, &with, top, -1, VIT_FUSE_MEAN, 0.0f, 0, &err);
        check(rc == VIT_OK &&
                  !memcmp(a + (size_t)(top * K + c->n_heads) * N, b, (size_t)N * sizeof *a) &&
                  done == 0 && total == 0,
              "%s, %s: after vit_control_reset, rollout again", label, how);
    }
    /* vit_forward, cancelled: returns before its first layer, the logits untouched */
    VitRun run = {0};
    VitControl ctl = {0};
    VitRunOptions ro = {.n_threads = 2, .att = VIT_ATT_RECOMPUTE};
    if (check_err(vit_run_init_with(&run, vit, &ro, &err), &err, VIT_OK, NULL, NULL,
                  "vit_run_init_with")) {
        run.control = &ctl;
        vit_forward(&run, vit);
        int done, total;
        vit_control_progress(&ctl, &done, &total);
        check(done == c->n_layers && total == c->n_layers, "%s: vit_forward's progress %d/%d",
              label, done, total);
        if (c->n_classes) run.logits[0] = -12345.0f;
        vit_control_cancel(&ctl);
        vit_forward(&run, vit);
        check(!c->n_classes || run.logits[0] == -12345.0f,
              "%s: vit_forward cancelled returns before its first layer (logits untouched)", label);
    }
    vit_run_free(&run);
    free(a), free(b), free(t);
}

static void test_model(const char *dir, const char *label, int dist, int classes) {
    char path[1100], name[64];
    Model m;
    model_tiny(&m, D, L, P, GRID, F, classes);
    if (dist) {
        model_add(&m, "dist_token", "F32", 3, (int64_t[]){1, 1, D});
        model_find(&m, "pos_embed")->shape[1] = 2 + GRID * GRID;
        model_add(&m, "head_dist.weight", "F32", 2, (int64_t[]){classes, D});
        model_add(&m, "head_dist.bias", "F32", 1, (int64_t[]){classes});
    }
    snprintf(name, sizeof name, "forward_%s.safetensors", label);
    path_join(path, sizeof path, dir, name);
    model_write(&m, path);

    Vit vit = {0};
    VitRun keep[3], redo[3];
    memset(keep, 0, sizeof keep);
    memset(redo, 0, sizeof redo);
    for (int t = 0; t < 3; t++)
        if (!run_model(&keep[t], &vit, path, t + 1, VIT_ATT_KEEP) ||
            !run_model(&redo[t], &vit, path, t + 1, VIT_ATT_RECOMPUTE))
            goto done;
    const VitConfig *c = &vit.cfg;
    size_t T = (size_t)c->n_tokens;
    check(c->n_tokens == 1 + dist + GRID * GRID, "%s: T = %d, %d heads, %d layers", label,
          c->n_tokens, c->n_heads, c->n_layers);
    for (int t = 0; t < 3; t++) {
        check(keep[t].n_threads == t + 1 && redo[t].n_threads == t + 1,
              "%s: runs with %d thread(s) use %d and %d", label, t + 1, keep[t].n_threads,
              redo[t].n_threads);
        check(keep[t].att_kept && keep[t].att && !redo[t].att_kept && !redo[t].att,
              "%s: VIT_ATT_KEEP keeps att, VIT_ATT_RECOMPUTE does not", label);
        int differ = compare_maps(&keep[t], &redo[t]);
        check(differ == 0, "%s, %d thread(s): every map recomputed = kept, bit for bit (%d differ)",
              label, t + 1, differ);
        if (classes)
            check(!memcmp(keep[t].logits, redo[t].logits, (size_t)classes * sizeof(float)),
                  "%s, %d thread(s): the same logits either way", label, t + 1);
    }
    /* threads: the same pass up to float rounding. A GEMM split by output columns
     * runs OpenBLAS's edge kernels on other columns than a whole one, with another
     * FMA order: a few ulp in q and k, which the softmax of these random weights'
     * large scores turns into up to 5e-5 after three layers (measured 4.5e-5; a
     * slice in the wrong place would be off by 1e-2 or more). */
    size_t n_att = (size_t)c->n_layers * c->n_heads * T * T;
    for (int t = 1; t < 3; t++) {
        double d_att = max_diff(keep[0].att, keep[t].att, n_att);
        check(d_att < 2e-4, "%s: attention, %d threads vs 1: max diff %.2g", label, t + 1, d_att);
        if (classes) {
            double d = max_diff(keep[0].logits, keep[t].logits, (size_t)classes);
            check(d < 1e-4, "%s: logits, %d threads vs 1: max diff %.2g", label, t + 1, d);
        }
    }
    /* rows sum to 1: the softmax ran on every block */
    double worst = 0.0;
    for (size_t r = 0; r < (size_t)c->n_layers * c->n_heads * T; r++) {
        double s = 0.0;
        for (size_t k = 0; k < T; k++) s += keep[1].att[r * T + k];
        worst = fmax(worst, fabs(s - 1.0));
    }
    check(worst < 1e-5, "%s: every attention row sums to 1 (worst %.2g)", label, worst);
    test_cancel(&keep[1], &redo[1], &vit, label);
    if (classes) {
        test_backward(keep, redo, &vit, label, -1);
        test_backward(keep, redo, &vit, label, classes - 1);
    } else {
        VitGrad g = {0};
        VitError err = {0};
        /* a backbone's buffers are made (for a score of its embedding), but no class */
        if (check_err(vit_grad_init(&g, &vit, &keep[0], &err), &err, VIT_OK, NULL, NULL,
                      "vit_grad_init on a backbone")) {
            check_err(vit_backward(&g, &keep[0], &vit, 0, VIT_GRAD_EXACT, &err), &err, VIT_ERR_ARG,
                      NULL, (const char *const[]){"without a classification head", NULL},
                      "vit_backward on a backbone");
            VitScore sc = vit_score_contrast(0, 1);
            check_err(vit_backward_score(&g, &keep[0], &vit, &sc, VIT_GRAD_EXACT, &err), &err,
                      VIT_ERR_ARG, NULL,
                      (const char *const[]){"without a classification head", NULL},
                      "vit_backward_score of a contrast on a backbone");
        }
        vit_grad_free(&g);
    }
done:
    for (int t = 0; t < 3; t++) {
        vit_run_free(&keep[t]);
        vit_run_free(&redo[t]);
    }
    vit_free(&vit);
}

static void test_options(const char *dir) {
    char path[1100];
    Model m;
    model_tiny(&m, 64, 1, P, 4, 64, 0);
    path_join(path, sizeof path, dir, "forward_options.safetensors");
    model_write(&m, path);
    Vit vit = {0};
    VitRun run = {0};
    VitError err = {0};
    if (!check_err(vit_load(&vit, path, NULL, &err), &err, VIT_OK, NULL, NULL, "vit_load")) return;
    VitRunOptions bad[] = {{.n_threads = -1}, {.n_threads = VIT_MAX_THREADS + 1}, {.att = 7}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        check_err(vit_run_init_with(&run, &vit, &bad[i], &err), &err, VIT_ERR_ARG, NULL,
                  (const char *const[]){"run options", NULL}, "vit_run_init_with, bad options");
        vit_run_free(&run);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (check_err(vit_run_init(&run, &vit, &err), &err, VIT_OK, NULL, NULL, "vit_run_init"))
        check(run.n_threads == (cores < 1                 ? 1
                                : cores > VIT_MAX_THREADS ? VIT_MAX_THREADS
                                                          : cores) &&
                  run.att_kept,
              "defaults: %d thread(s), one per online core (%ld), attention kept", run.n_threads,
              cores);
    vit_run_free(&run);
    vit_free(&vit);

    /* 108 x 108 patches of 1 px: T = 11665, [1, 1, T, T] is 544 MB > 512 MiB */
    model_tiny(&m, 64, 1, 1, 108, 64, 0);
    path_join(path, sizeof path, dir, "forward_large.safetensors");
    model_write(&m, path);
    if (!check_err(vit_load(&vit, path, NULL, &err), &err, VIT_OK, NULL, NULL,
                   "vit_load, T = 11665"))
        return;
    if (check_err(vit_run_init(&run, &vit, &err), &err, VIT_OK, NULL, NULL, "vit_run_init, large"))
        check(!run.att_kept && !run.att && run.mem_floats * sizeof(float) < (size_t)64 << 20,
              "VIT_ATT_AUTO on T = 11665: queries and keys kept, %zu MB in all",
              run.mem_floats * sizeof(float) >> 20);
    vit_run_free(&run);
    vit_free(&vit);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    if (make_dir(argv[1]) != 0) {
        fprintf(stderr, "cannot create %s\n", argv[1]);
        return 2;
    }
    test_model(argv[1], "cls", 0, C);
    test_model(argv[1], "distilled", 1, C);
    test_model(argv[1], "backbone", 0, 0);
    test_options(argv[1]);
    return t_finish("test_forward");
}
