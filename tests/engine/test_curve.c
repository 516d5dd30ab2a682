/* test_curve.c - the perturbation curve (vit_perturb_curve) against an independent
 * computation: each step's input made here patch by patch (not by vit_patch_mix) and
 * run through vit_forward alone.
 *
 *   test_curve SCRATCH_DIR          a tiny random ViT (testlib's weights)
 *   test_curve --deit SHARED_DIR    DeiT-Tiny on a photo (exit 77 when absent; a
 *                                   failure when CI=true)
 *
 * For deletion (fill NULL: zeros) and insertion (a blurred base, the input as fill),
 * positive and negative orders of a map, 11 steps (vit_perturb_count) in batches of 4
 * (so the last batch is short): every probability within TOL of vit_forward's on the
 * input built here (the GEMMs of a batch round differently); counts given out of order
 * and repeated give the rows of their counts. Negative controls, each of which must be
 * off by more than 10 TOL somewhere (the right reference stays within 1e-7), or the
 * comparison could not fail: the reference with the order reversed, and with one patch
 * fewer removed at each step; and the curve must move (its probability of the top class
 * differs between the first and the last step by more than 10 TOL). Errors: NULL arrays, n_counts
 * 0, counts -1 and N + 1, a batch made for another model's shapes: VIT_ERR_ARG with a message. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 10, MAX_BATCH = 4 };
static const double TOL = 1e-5; /* |batch - vit_forward| of a probability */

static uint32_t rng_state = 2026u;
static float rnd(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* base with the first k patches of order set to fill's (zeros when fill is NULL),
 * written out pixel by pixel from the patch grid: the reference's own mix. */
static void mix_by_hand(float *out, const float *base, const float *fill, const VitConfig *c,
                        const int *order, int k) {
    int P = c->patch_size, Sh = c->image_h, Sw = c->image_w;
    memcpy(out, base, (size_t)3 * Sh * Sw * sizeof *out);
    for (int i = 0; i < k; i++) {
        int r = order[i] / c->grid_w, q = order[i] % c->grid_w;
        for (int ch = 0; ch < 3; ch++)
            for (int y = r * P; y < (r + 1) * P; y++)
                for (int x = q * P; x < (q + 1) * P; x++) {
                    size_t at = ((size_t)ch * Sh + y) * Sw + x;
                    out[at] = fill ? fill[at] : 0.0f;
                }
    }
}

/* ref [n, C]: vit_forward's probs on each count's input, mixed by hand; shift: patches
 * fewer removed (a planted mistake, clamped at 0). */
static void reference(float *ref, VitRun *run, const Vit *vit, const float *base, const float *fill,
                      const int *order, const int *counts, int n, int shift) {
    int C = vit->cfg.n_classes;
    for (int i = 0; i < n; i++) {
        int k = counts[i] - shift < 0 ? 0 : counts[i] - shift;
        mix_by_hand(run->input, base, fill, &vit->cfg, order, k);
        vit_forward(run, vit);
        memcpy(ref + (size_t)i * C, run->probs, (size_t)C * sizeof(float));
    }
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* One curve of vit, base, fill, map against the references. */
static void check_curve(const char *what, VitBatch *bt, VitRun *run, const Vit *vit,
                        const float *base, const float *fill, const float *map, int most_first) {
    const VitConfig *c = &vit->cfg;
    int N = c->n_patches, C = c->n_classes, n = STEPS + 1;
    int *order = malloc((size_t)N * sizeof *order), *rev = malloc((size_t)N * sizeof *rev);
    float *probs = malloc((size_t)n * C * sizeof *probs),
          *ref = malloc((size_t)n * C * sizeof *ref);
    int counts[STEPS + 1];
    VitError err = {0};
    check_err(vit_patch_order(order, map, N, most_first, &err), &err, VIT_OK, NULL, NULL, what);
    for (int i = 0; i < N; i++) rev[i] = order[N - 1 - i];
    for (int s = 0; s <= STEPS; s++) counts[s] = vit_perturb_count(s, STEPS, N);
    VitStatus rc = vit_perturb_curve(probs, bt, vit, base, fill, order, counts, n, &err);
    check_err(rc, &err, VIT_OK, NULL, NULL, what);
    reference(ref, run, vit, base, fill, order, counts, n, 0);
    double d = max_diff(probs, ref, (size_t)n * C);
    check(d <= TOL, "%s: %d steps, probabilities within %.2g of vit_forward's (max %.3g)", what, n,
          TOL, d);
    reference(ref, run, vit, base, fill, rev, counts, n, 0);
    double dr = max_diff(probs, ref, (size_t)n * C);
    reference(ref, run, vit, base, fill, order, counts, n, 1);
    double ds = max_diff(probs, ref, (size_t)n * C);
    check(dr > 10 * TOL && ds > 10 * TOL,
          "%s: controls caught: order reversed off by %.3g, one patch fewer by %.3g (> %.2g)", what,
          dr, ds, 10 * TOL);
    int top;
    vit_top_k(&top, probs, C, 1);
    double move = fabs((double)probs[top] - probs[(size_t)STEPS * C + top]);
    check(move > 10 * TOL, "%s: the curve moves: class %d from %.4f to %.4f", what, top,
          (double)probs[top], (double)probs[(size_t)STEPS * C + top]);
    /* counts out of order and repeated: each row is its count's */
    int shuffled[5] = {counts[STEPS], counts[0], counts[3], counts[3], counts[7]};
    int idx[5] = {STEPS, 0, 3, 3, 7};
    rc = vit_perturb_curve(probs, bt, vit, base, fill, order, shuffled, 5, &err);
    check_err(rc, &err, VIT_OK, NULL, NULL, what);
    reference(ref, run, vit, base, fill, order, counts, n, 0);
    double dm = 0.0;
    for (int i = 0; i < 5; i++)
        dm = fmax(dm, max_diff(probs + (size_t)i * C, ref + (size_t)idx[i] * C, (size_t)C));
    check(dm <= TOL, "%s: counts out of order and repeated: max %.3g", what, dm);
    free(order), free(rev), free(probs), free(ref);
}

static void check_errors(VitBatch *bt, const Vit *vit, const Vit *other, const float *base) {
    int N = vit->cfg.n_patches, *order = malloc((size_t)N * sizeof *order);
    float *probs = malloc((size_t)4 * vit->cfg.n_classes * sizeof *probs);
    for (int i = 0; i < N; i++) order[i] = i;
    int ok_counts[2] = {0, N}, neg[2] = {0, -1}, big[2] = {N + 1, 0};
    VitError err;
    static const char *const k_count[] = {"count", NULL}, *const k_arr[] = {"NULL", NULL},
                             *const k_batch[] = {"batch", NULL};
    check_err(vit_perturb_curve(NULL, bt, vit, base, NULL, order, ok_counts, 2, &err), &err,
              VIT_ERR_ARG, NULL, k_arr, "probs NULL");
    check_err(vit_perturb_curve(probs, bt, vit, base, NULL, NULL, ok_counts, 2, &err), &err,
              VIT_ERR_ARG, NULL, k_arr, "order NULL");
    check_err(vit_perturb_curve(probs, bt, vit, base, NULL, order, ok_counts, 0, &err), &err,
              VIT_ERR_ARG, NULL, NULL, "n_counts 0");
    check_err(vit_perturb_curve(probs, bt, vit, base, NULL, order, neg, 2, &err), &err, VIT_ERR_ARG,
              NULL, k_count, "count -1");
    check_err(vit_perturb_curve(probs, bt, vit, base, NULL, order, big, 2, &err), &err, VIT_ERR_ARG,
              NULL, k_count, "count N + 1");
    int small[2] = {0, 1}; /* within both models' patches */
    if (other)
        check_err(vit_perturb_curve(probs, bt, other, base, NULL, order, small, 2, &err), &err,
                  VIT_ERR_ARG, NULL, k_batch, "a batch made for another model");
    free(order), free(probs);
}

/* Deletion and insertion, positive and negative, of map on vit at the input base. */
static void run_curves(const char *label, const Vit *vit, const float *input, const float *map,
                       const Vit *other) {
    const VitConfig *c = &vit->cfg;
    size_t sz = (size_t)3 * c->image_h * c->image_w;
    VitRun run = {0};
    VitBatch bt = {0};
    VitError err = {0};
    float *blurred = malloc(sz * sizeof *blurred), *base = malloc(sz * sizeof *base);
    memcpy(base, input, sz * sizeof *base); /* input may be a run's, which the reference uses */
    char what[160];
    if (!check_err(vit_run_init(&run, vit, &err), &err, VIT_OK, NULL, NULL, "vit_run_init") ||
        !check_err(vit_batch_init(&bt, vit, MAX_BATCH, 2, &err), &err, VIT_OK, NULL, NULL,
                   "vit_batch_init") ||
        !check_err(vit_blur(blurred, base, 3, c->image_h, c->image_w, 5.0f, 5, &err), &err, VIT_OK,
                   NULL, NULL, "vit_blur"))
        goto done;
    for (int most = 1; most >= 0; most--) {
        snprintf(what, sizeof what, "%s deletion, %s first", label, most ? "most" : "least");
        check_curve(what, &bt, &run, vit, base, NULL, map, most);
        snprintf(what, sizeof what, "%s insertion, %s first", label, most ? "most" : "least");
        check_curve(what, &bt, &run, vit, blurred, base, map, most);
    }
    check_errors(&bt, vit, other, base);
done:
    free(blurred), free(base);
    vit_batch_free(&bt);
    vit_run_free(&run);
}

static int test_random(const char *dir) {
    char path[1100], path2[1100];
    make_dir(dir);
    Model m;
    model_tiny(&m, 32, 2, 4, 6, 64, 5); /* D 32, L 2, P 4 px, 6 x 6 grid, F 64, C 5 */
    path_join(path, sizeof path, dir, "curve.safetensors");
    if (model_write(&m, path)) return check(0, "cannot write %s", path), t_finish("test_curve");
    model_tiny(&m, 32, 2, 4, 5, 64, 5); /* other shapes: a 5 x 5 grid */
    path_join(path2, sizeof path2, dir, "curve_other.safetensors");
    if (model_write(&m, path2)) return check(0, "cannot write %s", path2), t_finish("test_curve");
    Vit vit = {0}, other = {0};
    VitError err = {0};
    VitLoadOptions lo = {.n_heads = 2};
    if (check_err(vit_load(&vit, path, &lo, &err), &err, VIT_OK, NULL, NULL, "load") &&
        check_err(vit_load(&other, path2, &lo, &err), &err, VIT_OK, NULL, NULL, "load other")) {
        const VitConfig *c = &vit.cfg;
        size_t sz = (size_t)3 * c->image_h * c->image_w;
        float *base = malloc(sz * sizeof *base), *map = malloc((size_t)c->n_patches * sizeof *map);
        for (size_t i = 0; i < sz; i++)
            base[i] = 8.0f * rnd(); /* large: the tokens follow the pixels */
        for (int p = 0; p < c->n_patches; p++) map[p] = rnd();
        run_curves("tiny ViT", &vit, base, map, &other);
        free(base), free(map);
    }
    vit_free(&vit), vit_free(&other);
    return t_finish("test_curve");
}

static int test_deit(const char *shared) {
    char model[1100], photo[1100];
    path_join(model, sizeof model, shared, "models/deit-tiny/deit_tiny_patch16_224.safetensors");
    path_join(photo, sizeof photo, shared, "images/chelsea.png");
    FILE *f = fopen(model, "rb");
    if (!f) {
        const char *ci = getenv("CI");
        fprintf(stderr, "test_curve: no %s%s\n", model, ci && !strcmp(ci, "true") ? " (CI)" : "");
        return ci && !strcmp(ci, "true") ? 1 : 77;
    }
    fclose(f);
    Vit vit = {0};
    VitRun run = {0};
    VitImage img = {0};
    VitError err = {0};
    if (check_err(vit_load(&vit, model, NULL, &err), &err, VIT_OK, NULL, NULL, "load DeiT-Tiny") &&
        check_err(vit_run_init(&run, &vit, &err), &err, VIT_OK, NULL, NULL, "run") &&
        check_err(vit_image_load(&img, photo, &err), &err, VIT_OK, NULL, NULL, photo) &&
        check_err(vit_preprocess(run.input, NULL, NULL, NULL, NULL, &vit.cfg, &img, &err), &err,
                  VIT_OK, NULL, NULL, "preprocess")) {
        vit_forward(&run, &vit);
        const VitConfig *c = &vit.cfg;
        float *map = malloc((size_t)c->n_patches * sizeof *map);
        /* the last layer's mean attention of the CLS token: a map with a structure */
        check_err(vit_map_fused(map, &run, c->n_layers - 1, VIT_FUSE_MEAN, 0, &err), &err, VIT_OK,
                  NULL, NULL, "map");
        run_curves("DeiT-Tiny chelsea", &vit, run.input, map, NULL);
        free(map);
    }
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return t_finish("test_curve --deit");
}

int main(int argc, char **argv) {
    if (argc == 2) return test_random(argv[1]);
    if (argc == 3 && !strcmp(argv[1], "--deit")) return test_deit(argv[2]);
    fprintf(stderr, "usage: %s SCRATCH_DIR | --deit SHARED_DIR\n", argv[0]);
    return 2;
}
