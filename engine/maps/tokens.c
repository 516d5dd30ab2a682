/* tokens.c - what the tokens hold: features, token norms, patch similarity,
 * the logit lens, high-norm tokens and TokenRank (vit.h, "What the tokens hold").
 *
 * Everything here reads the residual stream the forward pass keeps,
 * VitRun.tokens [L + 1, T, D]; `layer` l is block l's output, tokens[l + 1].
 * Sums run in double, as the float64 reference in tests/parity does them. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Is block `layer`'s output there for every token? */
static VitStatus check_layer(const VitRun *run, int layer, const char *what, VitError *err) {
    const VitConfig *c = &run->cfg;
    if (!run->tokens || (!run->att && !run->qk))
        return vit_set_error(err, VIT_ERR_ARG, "%s: no forward pass has been run", what);
    if (layer < 0 || layer >= c->n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "%s: layer %d out of range [0, %d)", what, layer,
                             c->n_layers);
    if (layer == c->n_layers - 1 && !run->all_tokens)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: the last block's output was computed for the head's tokens "
                             "only (run without VitRunOptions.all_tokens)",
                             what);
    return VIT_OK;
}

static const float *layer_tokens(const VitRun *run, int layer) {
    return run->tokens + (size_t)(layer + 1) * run->cfg.n_tokens * run->cfg.dim;
}

/* Rows [r0, r1) of block `layer`'s output through the final norm: out [r1 - r0, D]. */
static void features_rows(float *out, const VitRun *run, const Vit *vit, int layer, int r0,
                          int r1) {
    int D = run->cfg.dim;
    const float *x = layer_tokens(run, layer) + (size_t)r0 * D;
    if (vit->w.norm_w)
        vit_layernorm_rows(out, x, vit->w.norm_w, vit->w.norm_b, 0, r1 - r0, D, vit->cfg.ln_eps);
    else
        memcpy(out, x, (size_t)(r1 - r0) * D * sizeof *out);
}

static VitStatus check_model(const VitRun *run, const Vit *vit, const char *what, VitError *err) {
    if (!vit || vit->cfg.dim != run->cfg.dim || vit->cfg.n_tokens != run->cfg.n_tokens ||
        vit->cfg.n_layers != run->cfg.n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "%s: the run was not made for this model", what);
    return VIT_OK;
}

VitStatus vit_features(float *out, const VitRun *run, const Vit *vit, int layer, VitError *err) {
    VitStatus rc = check_layer(run, layer, "features", err);
    if (!rc) rc = check_model(run, vit, "features", err);
    if (rc) return rc;
    features_rows(out, run, vit, layer, 0, run->cfg.n_tokens);
    return VIT_OK;
}

VitStatus vit_token_norms(float *out, const VitRun *run, int layer, VitError *err) {
    VitStatus rc = check_layer(run, layer, "token norms", err);
    if (rc) return rc;
    int T = run->cfg.n_tokens, D = run->cfg.dim;
    const float *x = layer_tokens(run, layer);
    for (int t = 0; t < T; t++) {
        double s = 0.0;
        for (int i = 0; i < D; i++) s += (double)x[(size_t)t * D + i] * x[(size_t)t * D + i];
        out[t] = (float)sqrt(s);
    }
    return VIT_OK;
}

VitStatus vit_patch_similarity(float *out, const VitRun *run, const Vit *vit, int layer, int query,
                               VitError *err) {
    VitStatus rc = check_layer(run, layer, "patch similarity", err);
    if (!rc) rc = check_model(run, vit, "patch similarity", err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens, D = c->dim, Np = c->n_prefix;
    if (query < 0 || query >= T)
        return vit_set_error(err, VIT_ERR_ARG,
                             "patch similarity: query token %d out of range "
                             "[0, %d)",
                             query, T);
    float *f = malloc((size_t)T * D * sizeof *f);
    if (!f) return vit_set_error(err, VIT_ERR_NOMEM, "patch similarity: out of memory");
    features_rows(f, run, vit, layer, 0, T);
    const float *q = f + (size_t)query * D;
    double qq = 0.0;
    for (int i = 0; i < D; i++) qq += (double)q[i] * q[i];
    for (int p = 0; p < c->n_patches; p++) {
        const float *k = f + (size_t)(Np + p) * D;
        double qk = 0.0, kk = 0.0;
        for (int i = 0; i < D; i++) qk += (double)q[i] * k[i], kk += (double)k[i] * k[i];
        out[p] = qq > 0.0 && kk > 0.0 ? (float)(qk / sqrt(qq * kk)) : 0.0f;
    }
    free(f);
    return VIT_OK;
}

static VitStatus check_head(const VitRun *run, const Vit *vit, int layer, const char *what,
                            VitError *err) {
    VitStatus rc = check_layer(run, layer, what, err);
    if (!rc) rc = check_model(run, vit, what, err);
    if (rc) return rc;
    if (run->cfg.n_classes <= 0 || !vit_has_head(vit) || run->cfg.n_classes != vit->cfg.n_classes)
        return vit_set_error(err, VIT_ERR_ARG, "%s: the model has no classification head", what);
    return VIT_OK;
}

/* The head (head.c, vit_head: the forward pass's own) on block `layer`'s output: n rows of
 * logits lg [n, C], token -1 the model's pooling, else token + i (i < n) in the place of
 * what it pools (VitHeadIO.token). */
static VitStatus lens_logits(float *lg, const VitRun *run, const Vit *vit, int layer, int token,
                             int n) {
    const VitConfig *c = &vit->cfg;
    size_t W = (size_t)vit_head_width(c), D = (size_t)c->dim, C = (size_t)c->n_classes;
    float *hin = malloc((size_t)n * (W + D) * sizeof *hin);
    float *ld = malloc((size_t)n * C * sizeof *ld);
    float *e = vit->w.text_emb ? malloc((size_t)n * c->embed_dim * sizeof *e) : NULL;
    size_t ns = vit_head_scratch_floats(c);
    float *sc = ns ? malloc(ns * sizeof *sc) : NULL;
    if (!hin || !ld || (vit->w.text_emb && !e) || (ns && !sc)) {
        free(hin), free(ld), free(e), free(sc);
        return VIT_ERR_NOMEM;
    }
    vit_head(NULL, vit,
             &(VitHeadIO){.logits = lg,
                          .logits_dist = ld,
                          .embed = e,
                          .hin = hin,
                          .x = layer_tokens(run, layer),
                          .in_stride = token < 0 ? (size_t)c->n_tokens : 0,
                          .row_stride = 1,
                          .n = n,
                          .token = token,
                          .token_step = 1,
                          .drop = run->intervention ? run->intervention->drop : NULL,
                          .scratch = sc});
    free(hin), free(ld), free(e), free(sc);
    return VIT_OK;
}

VitStatus vit_logit_lens(float *probs, const VitRun *run, const Vit *vit, int layer, int token,
                         VitError *err) {
    VitStatus rc = check_head(run, vit, layer, "logit lens", err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    if (token < 0 || token >= c->n_tokens)
        return vit_set_error(err, VIT_ERR_ARG, "logit lens: token %d out of range [0, %d)", token,
                             c->n_tokens);
    /* token 0: the head as the model applies it (DeiT's two heads, a pooled head's
     * pooling of the layer); another token in the place of what the head pools */
    if (lens_logits(probs, run, vit, layer, token == 0 ? -1 : token, 1))
        return vit_set_error(err, VIT_ERR_NOMEM, "logit lens: out of memory");
    vit_probs_rows(probs, probs, 1, c->n_classes, vit); /* softmax; SigLIP's sigmoid */
    return VIT_OK;
}

VitStatus vit_logit_lens_map(float *out, const VitRun *run, const Vit *vit, int layer, int cls,
                             VitError *err) {
    VitStatus rc = check_head(run, vit, layer, "logit lens", err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    int C = c->n_classes, N = c->n_patches;
    if (cls < 0 || cls >= C)
        return vit_set_error(err, VIT_ERR_ARG, "logit lens: class %d out of range [0, %d)", cls, C);
    float *lg = malloc((size_t)N * C * sizeof *lg);
    if (!lg || lens_logits(lg, run, vit, layer, c->n_prefix, N)) {
        free(lg);
        return vit_set_error(err, VIT_ERR_NOMEM, "logit lens: out of memory for %d x %d logits", N,
                             C);
    }
    /* each patch's softmax, in double; SigLIP's sigmoid of its own logit */
    for (int p = 0; p < N; p++) {
        const float *l = lg + (size_t)p * C;
        if (vit->w.text_sigmoid && vit->w.text_emb) {
            out[p] = (float)(1.0 / (1.0 + exp(-(double)l[cls])));
            continue;
        }
        double mx = l[0], s = 0.0;
        for (int k = 1; k < C; k++)
            if (l[k] > mx) mx = l[k];
        for (int k = 0; k < C; k++) s += exp((double)l[k] - mx);
        out[p] = (float)(exp((double)l[cls] - mx) / s);
    }
    free(lg);
    return VIT_OK;
}

/* --- high-norm tokens ------------------------------------------------------- */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median of v[n] (sorts scratch[n]); the mean of the middle two when n is even. */
static double median(float *scratch, const float *v, int n) {
    memcpy(scratch, v, (size_t)n * sizeof *scratch);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_float);
    return n % 2 ? scratch[n / 2] : 0.5 * ((double)scratch[n / 2 - 1] + scratch[n / 2]);
}

/* The threshold of one layer's norms[T]: max(median + k * MAD over the patches,
 * abs_threshold). */
static double norm_threshold(const float *norms, const VitConfig *c, float k, float abs_threshold,
                             float *scratch) {
    int N = c->n_patches;
    const float *patch = norms + c->n_prefix;
    double med = median(scratch, patch, N);
    for (int p = 0; p < N; p++) scratch[N + p] = (float)fabs(patch[p] - med);
    double mad = median(scratch, scratch + N, N);
    double thr = med + (double)k * mad;
    return abs_threshold > 0 && abs_threshold > thr ? abs_threshold : thr;
}

int vit_high_norm_tokens(int *idx, int *first, float *threshold, const VitRun *run, int layer,
                         float k, float abs_threshold, VitError *err) {
    if (check_layer(run, layer, "high-norm tokens", err)) return -1;
    if (!(k >= 0.0f) || !isfinite(k) || !(abs_threshold >= 0.0f) || !isfinite(abs_threshold)) {
        vit_set_error(err, VIT_ERR_ARG, "high-norm tokens: k %g and threshold %g must be >= 0",
                      (double)k, (double)abs_threshold);
        return -1;
    }
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens;
    /* norms of layers 0 .. layer, and each layer's threshold */
    float *norms = malloc((size_t)(layer + 1) * T * sizeof *norms);
    float *scratch = malloc((size_t)2 * c->n_patches * sizeof *scratch);
    double *thr = malloc((size_t)(layer + 1) * sizeof *thr);
    if (!norms || !scratch || !thr) {
        free(norms), free(scratch), free(thr);
        vit_set_error(err, VIT_ERR_NOMEM, "high-norm tokens: out of memory");
        return -1;
    }
    for (int l = 0; l <= layer; l++) {
        vit_token_norms(norms + (size_t)l * T, run, l, NULL);
        thr[l] = norm_threshold(norms + (size_t)l * T, c, k, abs_threshold, scratch);
    }
    const float *top = norms + (size_t)layer * T;
    if (threshold) *threshold = (float)thr[layer];
    int n = 0;
    for (int t = 0; t < T; t++)
        if (top[t] > thr[layer]) {
            int j = n++; /* insertion by decreasing norm, ties by token index */
            while (j > 0 && top[idx[j - 1]] < top[t]) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = t;
        }
    if (first)
        for (int i = 0; i < n; i++) {
            int l0 = layer;
            while (l0 > 0 && norms[(size_t)(l0 - 1) * T + idx[i]] > thr[l0 - 1]) l0--;
            first[i] = l0;
        }
    free(norms), free(scratch), free(thr);
    return n;
}

/* --- TokenRank -------------------------------------------------------------- */

VitStatus vit_tokenrank(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                        VitError *err) {
    const VitConfig *c = &run->cfg;
    if (!run->att && !run->qk)
        return vit_set_error(err, VIT_ERR_ARG, "TokenRank: no forward pass has been run");
    if (layer < 0 || layer >= c->n_layers || head >= c->n_heads || fusion < VIT_FUSE_MEAN ||
        fusion > VIT_FUSE_MIN)
        return vit_set_error(err, VIT_ERR_ARG,
                             "TokenRank: layer %d, head %d or fusion %d out of range (%d layers, "
                             "%d heads)",
                             layer, head, (int)fusion, c->n_layers, c->n_heads);
    int T = c->n_tokens;
    float *a = malloc((size_t)T * T * sizeof *a);
    double *pi = malloc((size_t)3 * T * sizeof *pi);
    AttReader rd;
    VitStatus rc = a && pi ? vit_att_reader_init(&rd, run, err)
                           : vit_set_error(err, VIT_ERR_NOMEM, "TokenRank: out of memory");
    if (rc) {
        free(a), free(pi);
        return rc;
    }
    if (head >= 0) {
        for (int b = 0; b < vit_att_blocks(T); b++) {
            int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
            memcpy(a + (size_t)r0 * T, vit_att_reader_block(&rd, layer, head, b),
                   (size_t)(r1 - r0) * T * sizeof *a);
        }
    } else {
        vit_fuse_heads(a, &rd, layer, fusion);
    }
    vit_att_reader_free(&rd);
    if (vit_cancelled(run)) {
        free(a), free(pi);
        return vit_cancelled_error(err, "TokenRank");
    }
    /* rows renormalised to sum 1 (max and min fusion do not), then
     * P = 0.99 A + 0.01 / T (helpers.py prep_for_power_method, alpha 0.99) and
     * pi <- P^T pi (power_method) until the L1 change is below 1e-9 */
    double *rs = pi + 2 * (size_t)T; /* row sums; a row of zeros moves uniformly */
    for (int i = 0; i < T; i++) {
        rs[i] = 0.0;
        for (int j = 0; j < T; j++) rs[i] += a[(size_t)i * T + j];
    }
    double *x = pi, *y = pi + T;
    for (int j = 0; j < T; j++) x[j] = 1.0 / T;
    for (int it = 0; it < 1000; it++) {
        double spill = 0.0; /* what zero rows spread over every token */
        for (int j = 0; j < T; j++) y[j] = 0.0;
        for (int i = 0; i < T; i++) {
            if (!(rs[i] > 0.0)) {
                spill += 0.99 * x[i] / T;
                continue;
            }
            double xi = 0.99 * x[i] / rs[i];
            const float *row = a + (size_t)i * T;
            for (int j = 0; j < T; j++) y[j] += xi * row[j];
        }
        double s = 0.0, change = 0.0;
        for (int j = 0; j < T; j++) s += (y[j] += 0.01 / T + spill);
        for (int j = 0; j < T; j++) {
            y[j] /= s;
            change += fabs(y[j] - x[j]);
        }
        double *t = x;
        x = y, y = t;
        if (change < 1e-9) break;
    }
    for (int j = 0; j < T; j++) out[j] = (float)x[j];
    free(a), free(pi);
    return VIT_OK;
}
