/* test_batch.c - the batched forward pass (vit_forward_batch) against vit_forward.
 *
 *   test_batch SCRATCH_DIR          tiny random ViTs of several families
 *   test_batch --deit SHARED_DIR    DeiT-Tiny on the four photos (exit 77 when absent)
 *
 * Tiny ViTs (testlib's pseudo-random weights) of the families vit_forward runs: timm's
 * names with a CLS head, with DeiT's distillation token and head, with 4 register tokens
 * (no position embedding for the prefix) and LayerScale, and Hugging Face's names
 * (separate query/key/value) as ViTForImageClassification at a non-square input (the
 * position embedding resampled) and as DeiTForImageClassificationWithTeacher. Each has
 * T > VIT_ATT_BLOCK tokens, so that attention blocks are crossed. For each:
 *   - n = 1, 3, 7 different random inputs batched: every row's logits and probs equal
 *     vit_forward's on that input alone, within 1e-5 of the largest |logit| (the GEMMs
 *     round differently with more rows), at 1 and 2 threads;
 *   - 1 and 2 threads agree; a batch of 7 copies of one input gives 7 equal rows;
 *   - negative controls: a plain double-precision forward pass written here from the
 *     weights (naive_forward) agrees with the batch, while the same pass with the
 *     planted mistake of attention across images (every query sees the keys and values
 *     of the whole stacked batch) is off by far more than the tolerance; and each row
 *     is far from the other inputs' vit_forward rows, so rows swapped or mixed between
 *     images would fail the comparison above;
 *   - errors: n = 0, n > max_batch, no inputs, max_batch < 1, thread counts out of
 *     range, a size that overflows, a backbone without head, a batch made for a model
 *     of other shapes; vit_batch_free on NULL and on a zeroed or failed VitBatch.
 * DeiT-Tiny (the real weights, vit_preprocess'd photos): the four photos in one batch
 * against four vit_forward calls, at 1 and 2 threads, the same comparison and the same
 * top-1 classes. */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 64, L = 3, P = 4, GRID = 12, F = 128, C = 10, HEADS = 4, MAX_BATCH = 7 };

static const double TOL = 1e-5; /* batch against vit_forward, of the largest |logit| */

static uint32_t rng_state = 12345u;
static float rnd_pixel(void) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
}

/* max |a - b| over n floats */
static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* max |a| over n floats */
static double max_abs(const float *a, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* --- a plain forward pass ------------------------------------------------------ */

/* rows of out[R, O] = inp[R, I] . w[O, I]^T + b[O] (b may be NULL), in double */
static void naive_linear(double *out, const double *inp, const float *w, const float *b, int R,
                         int I, int O) {
    for (int r = 0; r < R; r++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < I; i++) s += inp[(size_t)r * I + i] * w[(size_t)o * I + i];
            out[(size_t)r * O + o] = s;
        }
}

static void naive_layernorm(double *out, const double *inp, const float *w, const float *b, int R,
                            int n, double eps) {
    for (int r = 0; r < R; r++) {
        const double *x = inp + (size_t)r * n;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < n; i++) m += x[i];
        m /= n;
        for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
        v /= n;
        for (int i = 0; i < n; i++)
            out[(size_t)r * n + i] = (x[i] - m) / sqrt(v + eps) * w[i] + b[i];
    }
}

/* x[R, n] += gamma * y (gamma NULL: + y) */
static void naive_residual(double *x, const double *y, const float *gamma, int R, int n) {
    for (size_t r = 0; r < (size_t)R; r++)
        for (int i = 0; i < n; i++) x[r * n + i] += (gamma ? gamma[i] : 1.0) * y[r * n + i];
}

/* The forward pass of n inputs [n, 3, Sh, Sw] in double, written from the weights
 * alone (the same timm maths as vit.h states, none of the engine's code): logits [n, C].
 * cross 1 plants the mistake a batched pass could make: every query attends to the
 * keys and values of all n*T stacked tokens, not its own image's T. */
static void naive_forward(double *logits, const Vit *vit, const float *inputs, int n, int cross) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int T = c->n_tokens, Dm = c->dim, H = c->n_heads, Dh = Dm / H, Fm = c->mlp_dim,
        N = c->n_patches, Np = c->n_prefix, Pm = c->patch_size, Sh = c->image_h, Sw = c->image_w,
        Cm = c->n_classes, R = n * T;
    size_t RD = (size_t)R * Dm;
    double *x = calloc(RD, sizeof *x), *xn = calloc(RD, sizeof *xn), *q = calloc(RD, sizeof *q),
           *k = calloc(RD, sizeof *k), *v = calloc(RD, sizeof *v), *ctx = calloc(RD, sizeof *ctx),
           *y = calloc(RD, sizeof *y), *hid = calloc((size_t)R * Fm, sizeof *hid),
           *s = calloc((size_t)R, sizeof *s), *o2 = calloc(2 * (size_t)Cm, sizeof *o2);
    if (!x || !xn || !q || !k || !v || !ctx || !y || !hid || !s || !o2) exit(2);
    for (int i = 0; i < n; i++) {
        const float *in = inputs + (size_t)i * 3 * Sh * Sw;
        double *xi = x + (size_t)i * T * Dm;
        for (int p = 0; p < N; p++)
            for (int d = 0; d < Dm; d++) {
                int gy = p / c->grid_w, gx = p % c->grid_w;
                double acc = w->patch_b[d];
                for (int ch = 0; ch < 3; ch++)
                    for (int ky = 0; ky < Pm; ky++)
                        for (int kx = 0; kx < Pm; kx++)
                            acc += (double)w->patch_w[((size_t)(d * 3 + ch) * Pm + ky) * Pm + kx] *
                                   in[((size_t)ch * Sh + gy * Pm + ky) * Sw + gx * Pm + kx];
                xi[(size_t)(Np + p) * Dm + d] = acc;
            }
        for (int d = 0; d < Dm; d++) {
            xi[d] = w->cls_token[d];
            if (w->dist_token) xi[Dm + d] = w->dist_token[d];
            for (int r = 0; r < c->n_registers; r++)
                xi[(size_t)(1 + c->has_dist_token + r) * Dm + d] = w->reg_token[(size_t)r * Dm + d];
        }
        for (int t = Np - w->pos_prefix; t < T; t++) /* pos_embed's first row: token t0 */
            for (int d = 0; d < Dm; d++)
                xi[(size_t)t * Dm + d] += w->pos_embed[(size_t)(t - Np + w->pos_prefix) * Dm + d];
    }
    for (int l = 0; l < c->n_layers; l++) {
        const VitBlock *b = &w->blocks[l];
        naive_layernorm(xn, x, b->norm1_w, b->norm1_b, R, Dm, c->ln_eps);
        naive_linear(q, xn, b->q_w, b->q_b, R, Dm, Dm);
        naive_linear(k, xn, b->k_w, b->k_b, R, Dm, Dm);
        naive_linear(v, xn, b->v_w, b->v_b, R, Dm, Dm);
        for (int r = 0; r < R; r++)
            for (int h = 0; h < H; h++) {
                int j0 = cross ? 0 : r / T * T, j1 = cross ? R : j0 + T;
                double mx = -INFINITY, sum = 0.0;
                for (int j = j0; j < j1; j++) {
                    double d = 0.0;
                    for (int e = 0; e < Dh; e++)
                        d += q[(size_t)r * Dm + h * Dh + e] * k[(size_t)j * Dm + h * Dh + e];
                    s[j] = d / sqrt((double)Dh);
                    mx = fmax(mx, s[j]);
                }
                for (int j = j0; j < j1; j++) sum += s[j] = exp(s[j] - mx);
                for (int e = 0; e < Dh; e++) {
                    double a = 0.0;
                    for (int j = j0; j < j1; j++) a += s[j] * v[(size_t)j * Dm + h * Dh + e];
                    ctx[(size_t)r * Dm + h * Dh + e] = a / sum;
                }
            }
        naive_linear(y, ctx, b->proj_w, b->proj_b, R, Dm, Dm);
        naive_residual(x, y, b->ls1, R, Dm);
        naive_layernorm(xn, x, b->norm2_w, b->norm2_b, R, Dm, c->ln_eps);
        naive_linear(hid, xn, b->fc1_w, b->fc1_b, R, Dm, Fm);
        for (size_t i = 0; i < (size_t)R * Fm; i++)
            hid[i] = 0.5 * hid[i] * (1.0 + erf(hid[i] / sqrt(2.0)));
        naive_linear(y, hid, b->fc2_w, b->fc2_b, R, Fm, Dm);
        naive_residual(x, y, b->ls2, R, Dm);
    }
    for (int i = 0; i < n; i++) {
        int rows = w->head_dist_w ? 2 : 1;
        naive_layernorm(xn, x + (size_t)i * T * Dm, w->norm_w, w->norm_b, rows, Dm, c->ln_eps);
        naive_linear(o2, xn, w->head_w, w->head_b, 1, Dm, Cm);
        if (w->head_dist_w)
            naive_linear(o2 + Cm, xn + Dm, w->head_dist_w, w->head_dist_b, 1, Dm, Cm);
        for (int j = 0; j < Cm; j++)
            logits[(size_t)i * Cm + j] = w->head_dist_w ? (o2[j] + o2[Cm + j]) / 2 : o2[j];
    }
    free(x), free(xn), free(q), free(k), free(v), free(ctx), free(y), free(hid), free(s), free(o2);
}

/* max |a - b| of float and double arrays */
static double max_diff_d(const float *a, const double *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* --- the families ------------------------------------------------------------- */

typedef struct {
    const char *label;
    int hf;        /* Hugging Face names (separate query/key/value) */
    int dist;      /* distillation token and head */
    int n_reg;     /* register tokens (timm no_embed_class: pos_embed without prefix rows) */
    int ls;        /* LayerScale */
    int ih, iw;    /* > 0: run at this input size, px (position embedding resampled) */
    int n_classes; /* 0: a backbone */
} Family;

/* A tiny ViT of family f into m: D wide, L blocks, P px patches on a GRID x GRID grid. */
static void build_model(Model *m, const Family *f) {
    char nm[96];
    int Np = 1 + f->dist + f->n_reg, N = GRID * GRID, Cm = f->n_classes;
    if (!f->hf) {
        model_tiny(m, D, L, P, GRID, F, Cm);
        if (f->dist) {
            model_add(m, "dist_token", "F32", 3, (int64_t[]){1, 1, D});
            if (Cm) {
                model_add(m, "head_dist.weight", "F32", 2, (int64_t[]){Cm, D});
                model_add(m, "head_dist.bias", "F32", 1, (int64_t[]){Cm});
            }
        }
        if (f->n_reg) model_add(m, "reg_token", "F32", 3, (int64_t[]){1, f->n_reg, D});
        model_find(m, "pos_embed")->shape[1] = f->n_reg ? N : Np + N;
        for (int l = 0; l < L && f->ls; l++)
            for (int k = 1; k <= 2; k++) {
                snprintf(nm, sizeof nm, "blocks.%d.ls%d.gamma", l, k);
                model_add(m, nm, "F32", 1, (int64_t[]){D});
            }
        return;
    }
    /* transformers' ViTForImageClassification / DeiTForImageClassificationWithTeacher */
    const char *pre = f->dist ? "deit." : "vit.";
    memset(m, 0, sizeof *m);
#define ADD(n_dims, ...) model_add(m, nm, "F32", n_dims, (int64_t[]){__VA_ARGS__})
    snprintf(nm, sizeof nm, "%sembeddings.cls_token", pre), ADD(3, 1, 1, D);
    if (f->dist) snprintf(nm, sizeof nm, "%sembeddings.distillation_token", pre), ADD(3, 1, 1, D);
    snprintf(nm, sizeof nm, "%sembeddings.position_embeddings", pre), ADD(3, 1, Np + N, D);
    snprintf(nm, sizeof nm, "%sembeddings.patch_embeddings.projection.weight", pre),
        ADD(4, D, 3, P, P);
    snprintf(nm, sizeof nm, "%sembeddings.patch_embeddings.projection.bias", pre), ADD(1, D);
    static const char *const sq[] = {"attention.attention.query", "attention.attention.key",
                                     "attention.attention.value", "attention.output.dense"};
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "%sencoder.layer.%d.layernorm_%s.%s", pre, l,
                     k ? "after" : "before", "weight"),
                ADD(1, D);
            snprintf(nm, sizeof nm, "%sencoder.layer.%d.layernorm_%s.%s", pre, l,
                     k ? "after" : "before", "bias"),
                ADD(1, D);
        }
        for (int k = 0; k < 4; k++) {
            snprintf(nm, sizeof nm, "%sencoder.layer.%d.%s.weight", pre, l, sq[k]), ADD(2, D, D);
            snprintf(nm, sizeof nm, "%sencoder.layer.%d.%s.bias", pre, l, sq[k]), ADD(1, D);
        }
        snprintf(nm, sizeof nm, "%sencoder.layer.%d.intermediate.dense.weight", pre, l),
            ADD(2, F, D);
        snprintf(nm, sizeof nm, "%sencoder.layer.%d.intermediate.dense.bias", pre, l), ADD(1, F);
        snprintf(nm, sizeof nm, "%sencoder.layer.%d.output.dense.weight", pre, l), ADD(2, D, F);
        snprintf(nm, sizeof nm, "%sencoder.layer.%d.output.dense.bias", pre, l), ADD(1, D);
    }
    snprintf(nm, sizeof nm, "%slayernorm.weight", pre), ADD(1, D);
    snprintf(nm, sizeof nm, "%slayernorm.bias", pre), ADD(1, D);
    static const char *const heads[2][2] = {{"classifier", NULL},
                                            {"cls_classifier", "distillation_classifier"}};
    for (int k = 0; k < 1 + f->dist && Cm; k++) {
        snprintf(nm, sizeof nm, "%s.weight", heads[f->dist][k]), ADD(2, Cm, D);
        snprintf(nm, sizeof nm, "%s.bias", heads[f->dist][k]), ADD(1, Cm);
    }
#undef ADD
}

static int load_family(Vit *vit, const char *dir, const Family *f) {
    char path[1100], name[96];
    Model m;
    build_model(&m, f);
    snprintf(name, sizeof name, "batch_%s.safetensors", f->label);
    path_join(path, sizeof path, dir, name);
    if (model_write(&m, path)) return check(0, "%s: cannot write %s", f->label, path);
    VitError err = {0};
    VitLoadOptions lo = {.n_heads = HEADS, .image_h = f->ih, .image_w = f->iw};
    return check_err(vit_load(vit, path, &lo, &err), &err, VIT_OK, NULL, NULL, f->label);
}

/* vit_forward's logits and probs of inputs [n, S] into lg, pr [n, C], on run. */
static void forward_each(float *lg, float *pr, VitRun *run, const Vit *vit, const float *inputs,
                         int n) {
    size_t S = (size_t)3 * vit->cfg.image_h * vit->cfg.image_w, Cm = (size_t)vit->cfg.n_classes;
    for (int i = 0; i < n; i++) {
        memcpy(run->input, inputs + i * S, S * sizeof(float));
        vit_forward(run, vit);
        memcpy(lg + i * Cm, run->logits, Cm * sizeof(float));
        memcpy(pr + i * Cm, run->probs, Cm * sizeof(float));
    }
}

/* The smallest max |a_i - b_j| over rows i != j of a and b [n, C]: how far the nearest
 * other image's row is. */
static double nearest_other(const float *a, const float *b, int n, int Cm) {
    double m = INFINITY;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j) m = fmin(m, max_diff(a + (size_t)i * Cm, b + (size_t)j * Cm, (size_t)Cm));
    return m;
}

/* The errors of vit_batch_init and vit_forward_batch, on a model with a head. */
static void test_errors(const Vit *vit, const Vit *other, const Vit *backbone, VitBatch *bt,
                        const float *inputs) {
    const char *name = vit->cfg.name;
    VitError err = {0};
    VitBatch b = {0};
    float lg[MAX_BATCH * C];
    check_err(vit_forward_batch(bt, vit, inputs, 0, lg, NULL, &err), &err, VIT_ERR_ARG, name,
              (const char *const[]){"batch of 0 inputs", "1 .. 7", NULL}, "n = 0");
    check_err(vit_forward_batch(bt, vit, inputs, MAX_BATCH + 1, lg, NULL, &err), &err, VIT_ERR_ARG,
              name, (const char *const[]){"batch of 8 inputs", "1 .. 7", NULL}, "n > max_batch");
    check_err(vit_forward_batch(bt, vit, NULL, 1, lg, NULL, &err), &err, VIT_ERR_ARG, name,
              (const char *const[]){"at NULL", NULL}, "inputs NULL");
    check_err(vit_forward_batch(&b, vit, inputs, 1, lg, NULL, &err), &err, VIT_ERR_ARG, name,
              (const char *const[]){"not made by vit_batch_init", NULL}, "a zeroed VitBatch");
    check_err(vit_forward_batch(bt, other, inputs, 1, lg, NULL, &err), &err, VIT_ERR_ARG,
              other->cfg.name, (const char *const[]){"not made by vit_batch_init", NULL},
              "a batch made for a model of other shapes");
    check(vit_forward_batch(bt, vit, inputs, 1, NULL, NULL, NULL) == VIT_OK,
          "logits and probs both NULL, err NULL: accepted");
    const struct {
        int max_batch, n_threads;
        VitStatus want;
        const char *key, *what;
    } bad[] = {
        {0, 1, VIT_ERR_ARG, "up to 0 inputs", "max_batch 0"},
        {-3, 1, VIT_ERR_ARG, "up to -3 inputs", "max_batch -3"},
        {1, -1, VIT_ERR_ARG, "on -1 threads", "n_threads -1"},
        {1, VIT_MAX_THREADS + 1, VIT_ERR_ARG, "on 257 threads", "n_threads 257"},
        {0x7fffffff, 1, VIT_ERR_NOMEM, "limit of 4294967296 bytes", "max_batch INT_MAX"},
        {0x7fffffff / 150, 1, VIT_ERR_NOMEM, "limit of", "max_batch over the activation limit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&b, 0xa5, sizeof b); /* vit_batch_init zeroes it, even on error */
        check_err(vit_batch_init(&b, vit, bad[i].max_batch, bad[i].n_threads, &err), &err,
                  bad[i].want, name, (const char *const[]){bad[i].key, NULL}, bad[i].what);
        check(!b.mem && !b.pool, "%s: *b zeroed on error", bad[i].what);
        vit_batch_free(&b);
    }
    check_err(vit_batch_init(&b, backbone, 4, 1, &err), &err, VIT_ERR_ARG, backbone->cfg.name,
              (const char *const[]){"without classification head", NULL},
              "a backbone (C == 0) refused");
    vit_batch_free(&b);
    vit_batch_free(NULL);
    vit_batch_free(&b);
    check(1, "vit_batch_free on NULL, a zeroed and a freed VitBatch");
}

/* Family f at 1 and 2 threads; other: a model of other shapes, backbone: one without
 * head, for the errors (tested once, other NULL: not this time). */
static void test_family(const char *dir, const Family *f, const Vit *other, const Vit *backbone) {
    Vit vit = {0};
    VitRun run[2];
    VitBatch bt[2];
    memset(run, 0, sizeof run);
    memset(bt, 0, sizeof bt);
    float *inputs = NULL, *ref_lg = NULL, *ref_pr = NULL, *lg = NULL, *pr = NULL, *lg1 = NULL;
    double *nv = NULL;
    if (!load_family(&vit, dir, f)) return;
    const VitConfig *c = &vit.cfg;
    size_t S = (size_t)3 * c->image_h * c->image_w, Cm = (size_t)c->n_classes, BC = MAX_BATCH * Cm;
    check(c->n_tokens > VIT_ATT_BLOCK && (!f->ih || c->image_h != c->image_w),
          "%s: T = %d (%d prefix), %dx%d px, %s names", f->label, c->n_tokens, c->n_prefix,
          c->image_h, c->image_w, c->naming == VIT_NAMES_HF ? "Hugging Face" : "timm");
    inputs = malloc(MAX_BATCH * S * sizeof(float));
    ref_lg = malloc(2 * BC * sizeof(float)), ref_pr = malloc(2 * BC * sizeof(float));
    lg = malloc(BC * sizeof(float)), pr = malloc(BC * sizeof(float));
    lg1 = malloc(BC * sizeof(float)), nv = malloc(2 * BC * sizeof(double));
    if (!inputs || !ref_lg || !ref_pr || !lg || !pr || !lg1 || !nv) exit(2);
    for (size_t i = 0; i < MAX_BATCH * S; i++) inputs[i] = rnd_pixel();
    VitError err = {0};
    for (int t = 0; t < 2; t++) {
        VitRunOptions ro = {.n_threads = t + 1};
        if (!check_err(vit_run_init_with(&run[t], &vit, &ro, &err), &err, VIT_OK, NULL, NULL,
                       "vit_run_init_with") ||
            !check_err(vit_batch_init(&bt[t], &vit, MAX_BATCH, t + 1, &err), &err, VIT_OK, NULL,
                       NULL, "vit_batch_init"))
            goto done;
        check(bt[t].n_threads == t + 1 && bt[t].max_batch == MAX_BATCH,
              "%s: a batch of up to %d on %d thread(s), %zu floats", f->label, bt[t].max_batch,
              bt[t].n_threads, bt[t].mem_floats);
        forward_each(ref_lg + t * BC, ref_pr + t * BC, &run[t], &vit, inputs, MAX_BATCH);
    }
    double amax = max_abs(ref_lg, BC);

    /* n = 1, 3, 7 against vit_forward on each input alone, same thread count */
    const int ns[] = {1, 3, MAX_BATCH};
    for (int t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            int n = ns[k];
            memset(lg, 0xff, BC * sizeof(float)), memset(pr, 0xff, BC * sizeof(float));
            if (!check_err(vit_forward_batch(&bt[t], &vit, inputs, n, lg, pr, &err), &err, VIT_OK,
                           NULL, NULL, "vit_forward_batch"))
                goto done;
            double dl = max_diff(lg, ref_lg + t * BC, n * Cm),
                   dp = max_diff(pr, ref_pr + t * BC, n * Cm);
            int untouched = 1; /* rows n .. 6 keep their NaN bytes */
            for (size_t i = n * Cm; i < BC; i++) untouched &= isnan(lg[i]) && isnan(pr[i]);
            check(untouched, "%s, n = %d: nothing written past row n", f->label, n);
            check(dl <= TOL * amax && dp <= TOL,
                  "%s, %d thread(s), n = %d: vs vit_forward: logits max diff %.2g (%.2g of max "
                  "|logit| %.3g), probs %.2g",
                  f->label, t + 1, n, dl, dl / amax, amax, dp);
            if (n == MAX_BATCH && t == 0) memcpy(lg1, lg, BC * sizeof(float));
            if (n == MAX_BATCH && t == 1) {
                double d = max_diff(lg1, lg, BC);
                check(d <= TOL * amax, "%s: batch of 7, 2 threads vs 1: logits max diff %.2g",
                      f->label, d);
            }
        }
    /* rows of different inputs are far apart: a row of another image (swapped rows, or
     * attention leaking between images) is caught by the comparison above */
    double near = nearest_other(lg1, ref_lg, MAX_BATCH, (int)Cm);
    check(near > 1e2 * TOL * amax,
          "%s: the nearest other input's row is %.3g away (%.2g of max |logit|): a row of "
          "another image would fail",
          f->label, near, near / amax);

    /* 7 copies of one input: 7 equal rows, each vit_forward's */
    {
        float *same = malloc(MAX_BATCH * S * sizeof(float));
        if (!same) exit(2);
        for (int i = 0; i < MAX_BATCH; i++) memcpy(same + i * S, inputs + 3 * S, S * sizeof(float));
        if (check_err(vit_forward_batch(&bt[1], &vit, same, MAX_BATCH, lg, pr, &err), &err, VIT_OK,
                      NULL, NULL, "vit_forward_batch, 7 copies")) {
            double d = 0.0, dr = max_diff(lg, ref_lg + BC + 3 * Cm, Cm);
            int bitwise = 1;
            for (int i = 1; i < MAX_BATCH; i++) {
                d = fmax(d, max_diff(lg, lg + i * Cm, Cm));
                bitwise &= !memcmp(lg, lg + i * Cm, Cm * sizeof(float)) &&
                           !memcmp(pr, pr + i * Cm, Cm * sizeof(float));
            }
            check(d <= TOL * amax && dr <= TOL * amax,
                  "%s: 7 copies of one input: rows differ by %.2g (%s), from vit_forward by %.2g",
                  f->label, d, bitwise ? "bit for bit equal" : "not bit for bit", dr);
        }
        free(same);
    }

    /* the plain double pass agrees; with attention across images it does not */
    {
        int n = 3;
        naive_forward(nv, &vit, inputs, n, 0);
        naive_forward(nv + BC, &vit, inputs, n, 1);
        vit_forward_batch(&bt[0], &vit, inputs, n, lg, NULL, &err);
        double good = max_diff_d(lg, nv, n * Cm), bad = max_diff_d(lg, nv + BC, n * Cm);
        check(good <= 1e-4 * amax,
              "%s: plain double forward pass vs batch: max diff %.2g (%.2g of max |logit|)",
              f->label, good, good / amax);
        check(bad > 1e2 * TOL * amax && bad > 100 * good,
              "%s: negative control, attention across the 3 images: off by %.3g (%.2g of max "
              "|logit|): caught",
              f->label, bad, bad / amax);
    }
    if (other) test_errors(&vit, other, backbone, &bt[0], inputs);
done:
    for (int t = 0; t < 2; t++) vit_run_free(&run[t]), vit_batch_free(&bt[t]);
    vit_free(&vit);
    free(inputs), free(ref_lg), free(ref_pr), free(lg), free(pr), free(lg1), free(nv);
}

static int test_random(const char *dir) {
    if (make_dir(dir) != 0) {
        fprintf(stderr, "cannot create %s\n", dir);
        return 2;
    }
    static const Family fams[] = {
        {.label = "cls", .n_classes = C},
        {.label = "distilled", .dist = 1, .n_classes = C},
        {.label = "reg4_layerscale", .n_reg = 4, .ls = 1, .n_classes = C},
        {.label = "hf_vit_40x56", .hf = 1, .ih = 40, .iw = 56, .n_classes = C},
        {.label = "hf_deit_teacher", .hf = 1, .dist = 1, .n_classes = C},
    };
    Vit other = {0}, backbone = {0};
    const Family fo = {.label = "other", .dist = 1, .ih = 44, .iw = 44, .n_classes = C},
                 fb = {.label = "backbone"};
    if (!load_family(&other, dir, &fo) || !load_family(&backbone, dir, &fb)) goto done;
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++)
        test_family(dir, &fams[i], i == 0 ? &other : NULL, &backbone);
done:
    vit_free(&other);
    vit_free(&backbone);
    return t_finish("test_batch");
}

/* --- DeiT-Tiny on the photos ----------------------------------------------------- */

static int test_deit(const char *shared) {
    static const char *const photos[] = {"astronaut.png", "chelsea.png", "coffee.png",
                                         "rocket.jpg"};
    enum { NP = 4 };
    char model[1100], dir[1100], path[1200];
    path_join(model, sizeof model, shared, "models/deit-tiny/deit_tiny_patch16_224.safetensors");
    path_join(dir, sizeof dir, shared, "images");
    FILE *fp = fopen(model, "rb");
    if (!fp) {
        printf("skip - %s not found\n", model);
        return 77;
    }
    fclose(fp);
    Vit vit = {0};
    VitRun run = {0};
    VitBatch bt = {0};
    VitError err = {0};
    float *inputs = NULL, *ref_lg = NULL, *ref_pr = NULL, *lg = NULL, *pr = NULL;
    if (!check_err(vit_load(&vit, model, NULL, &err), &err, VIT_OK, NULL, NULL, "DeiT-Tiny"))
        goto done;
    const VitConfig *c = &vit.cfg;
    path_join(path, sizeof path, shared, "models/deit-tiny/imagenet_synset_words.txt");
    if (!vit.labels && vit_labels_load(&vit.labels, path, c->n_classes, &err))
        vit.labels = NULL; /* names are for the messages only */
    size_t S = (size_t)3 * c->image_h * c->image_w, Cm = (size_t)c->n_classes;
    inputs = malloc(NP * S * sizeof(float));
    ref_lg = malloc(NP * Cm * sizeof(float)), ref_pr = malloc(NP * Cm * sizeof(float));
    lg = malloc(NP * Cm * sizeof(float)), pr = malloc(NP * Cm * sizeof(float));
    if (!inputs || !ref_lg || !ref_pr || !lg || !pr) exit(2);
    for (int i = 0; i < NP; i++) {
        VitImage img = {0};
        path_join(path, sizeof path, dir, photos[i]);
        if (vit_image_load(&img, path, &err)) { /* the photo is there: a failure, not a skip */
            check(0, "%s: %s", path, err.msg);
            goto done;
        }
        check_err(vit_preprocess(inputs + i * S, NULL, NULL, NULL, NULL, c, &img, &err), &err,
                  VIT_OK, NULL, NULL, photos[i]);
        vit_image_free(&img);
    }
    for (int t = 1; t <= 2; t++) {
        VitRunOptions ro = {.n_threads = t, .att = VIT_ATT_RECOMPUTE};
        if (!check_err(vit_run_init_with(&run, &vit, &ro, &err), &err, VIT_OK, NULL, NULL,
                       "vit_run_init_with") ||
            !check_err(vit_batch_init(&bt, &vit, NP, t, &err), &err, VIT_OK, NULL, NULL,
                       "vit_batch_init"))
            goto done;
        forward_each(ref_lg, ref_pr, &run, &vit, inputs, NP);
        if (!check_err(vit_forward_batch(&bt, &vit, inputs, NP, lg, pr, &err), &err, VIT_OK, NULL,
                       NULL, "vit_forward_batch, the four photos"))
            goto done;
        double amax = max_abs(ref_lg, NP * Cm), dl = max_diff(lg, ref_lg, NP * Cm),
               dp = max_diff(pr, ref_pr, NP * Cm);
        check(dl <= TOL * amax && dp <= TOL,
              "DeiT-Tiny, %d thread(s), the four photos batched vs vit_forward: logits max diff "
              "%.2g (%.2g of max |logit| %.3g), probs %.2g",
              t, dl, dl / amax, amax, dp);
        for (int i = 0; i < NP; i++) {
            int top_b, top_r;
            vit_top_k(&top_b, pr + i * Cm, (int)Cm, 1);
            vit_top_k(&top_r, ref_pr + i * Cm, (int)Cm, 1);
            check(top_b == top_r, "DeiT-Tiny, %d thread(s), %s: top-1 %d (%s) p %.4f, both ways", t,
                  photos[i], top_b, vit.labels ? vit.labels[top_b] : "?",
                  (double)pr[i * Cm + top_b]);
        }
        double near = nearest_other(lg, ref_lg, NP, (int)Cm);
        check(near > 1e2 * TOL * amax,
              "DeiT-Tiny: the nearest other photo's row is %.3g away (%.2g of max |logit|): a "
              "row of another image would fail",
              near, near / amax);
        vit_run_free(&run);
        vit_batch_free(&bt);
    }
done:
    vit_run_free(&run);
    vit_batch_free(&bt);
    vit_free(&vit);
    free(inputs), free(ref_lg), free(ref_pr), free(lg), free(pr);
    return t_finish("test_batch --deit");
}

int main(int argc, char **argv) {
    if (argc == 2) return test_random(argv[1]);
    if (argc == 3 && !strcmp(argv[1], "--deit")) return test_deit(argv[2]);
    fprintf(stderr, "usage: %s SCRATCH_DIR | --deit SHARED_DIR\n", argv[0]);
    return 2;
}
