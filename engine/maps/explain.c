/* explain.c - class-specific explanation maps from a forward pass (VitRun) and the
 * backward pass of one class's logit (VitGrad, backward.c). The formulas, papers
 * and reference repositories are in vit.h (vit_explain).
 *
 * The attention A_l is read through AttReader (kept, or recomputed from queries and
 * keys) and its gradient dA_l through GradReader (kept in g->grad_att, or
 * recomputed as dctx_h . v_h^T by vit_grad_att_block, the backward pass's own call,
 * with the layer's values v recomputed once per layer from VitRun.tokens by norm1
 * and the value projection on the run's pool, as the backward pass computed them),
 * a block of query rows at a time, so the maps are the same either way. Products
 * over layers are taken for the CLS row only, as a row vector times each layer's
 * matrix from the top down (maps.c's rollout does the same): O(L T^2), no T^3. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* --- methods --------------------------------------------------------------- */

static const char *const NAMES[VIT_EXPLAIN_COUNT] = {
    "chefer", "grad-rollout", "gradcam", "legrad", "attnlrp", "grad-input",
};

const char *vit_explain_name(VitExplain m) {
    return m >= 0 && m < VIT_EXPLAIN_COUNT ? NAMES[m] : "?";
}

int vit_explain_pixels(VitExplain m) {
    return m == VIT_EXPLAIN_ATTNLRP || m == VIT_EXPLAIN_GRAD_INPUT;
}

/* --- reading the gradient at the attention --------------------------------- */

typedef struct {
    const VitRun *run;
    const VitGrad *g;
    const Vit *vit;
    float *buf;    /* [VIT_ATT_BLOCK, T] when recomputing */
    float *v, *xn; /* [T, A], [T, D] when recomputing: layer v_layer's values, its norm1 output */
    int v_layer;   /* the layer v holds, -1: none yet */
} GradReader;

/* Layer l's values as the backward pass had them: norm1 of the block's input
 * tokens, then the value projection, the forward pass's own calls on the run's
 * pool (the same thread split, so the same bits). Once per layer. */
static const float *values_of(GradReader *gr, int layer) {
    const VitConfig *c = &gr->run->cfg;
    int T = c->n_tokens, D = c->dim, A = vit_att_width(c);
    if (gr->v_layer != layer) {
        const VitBlock *b = &gr->vit->w.blocks[layer];
        vit_layernorm(gr->run->pool, gr->xn, gr->run->tokens + (size_t)layer * T * D, b->norm1_w,
                      b->norm1_b, T, D, c->ln_eps);
        vit_values(gr->run->pool, gr->v, gr->xn, b, T, D, A, 0);
        gr->v_layer = layer;
    }
    return gr->v;
}

/* Block b of dA[layer, head]: [rows of the block, T]. */
static const float *grad_block(GradReader *gr, int layer, int head, int b) {
    const VitConfig *c = &gr->run->cfg;
    size_t T = (size_t)c->n_tokens, A = (size_t)vit_att_width(c), Dh = (size_t)c->head_dim;
    int r0 = vit_att_block_start((int)T, b), r1 = vit_att_block_start((int)T, b + 1);
    if (gr->g->grad_att)
        return gr->g->grad_att + (((size_t)layer * c->n_heads + head) * T + r0) * T;
    VitAttMod mod;
    vit_grad_att_block(gr->buf, gr->g->dctx + (size_t)layer * T * A + head * Dh,
                       values_of(gr, layer) + head * Dh, (int)A, r0, r1, (int)T, (int)Dh,
                       vit_att_mod(&mod, gr->run->intervention, c, layer));
    return gr->buf;
}

/* out[T, T] = sum_h op(A_l,h, dA_l,h) / H, op: 0 the product, 1 its positive part. */
static void fuse_grad_att(float *out, AttReader *rd, GradReader *gr, int layer, int positive) {
    const VitConfig *c = &rd->run->cfg;
    int H = c->n_heads, T = c->n_tokens, nb = vit_att_blocks(T);
    memset(out, 0, (size_t)T * T * sizeof(float));
    for (int h = 0; h < H; h++)
        for (int b = 0; b < nb; b++) {
            int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
            const float *a = vit_att_reader_block(rd, layer, h, b);
            const float *da = grad_block(gr, layer, h, b);
            float *o = out + (size_t)r0 * T;
            for (size_t i = 0; i < (size_t)(r1 - r0) * T; i++) {
                float p = a[i] * da[i];
                o[i] += positive && p < 0.0f ? 0.0f : p;
            }
        }
    for (size_t i = 0; i < (size_t)T * T; i++) out[i] /= (float)H;
}

/* --- the maps -------------------------------------------------------------- */

/* The row a model without a CLS token starts from (SigLIP, n_prefix 0): the MAP head's
 * probe, a query of its own over the patches (run->probe_att, g->probe_grad [H, N]):
 * Chefer's mean_h((dA (.) A)^+) (its relevance to each token, the R of the tokens below
 * following; the probe has no identity: it is not a token of the sequence), or the
 * gradient rollout's max(mean_h(A (.) dA), 0) normalised to sum 1 (no residual around the
 * head's attention: no 0.5 I either). v [T] in double. */
static void probe_row(double *v, VitExplain m, const VitRun *run, const VitGrad *g) {
    const VitConfig *c = &run->cfg;
    int H = c->n_heads, N = c->n_patches;
    double sum = 0.0;
    for (int p = 0; p < N; p++) {
        double s = 0.0;
        for (int h = 0; h < H; h++) {
            double x = (double)run->probe_att[(size_t)h * N + p] * g->probe_grad[(size_t)h * N + p];
            s += m == VIT_EXPLAIN_CHEFER && x < 0.0 ? 0.0 : x;
        }
        s /= H;
        v[p] = s < 0.0 ? 0.0 : s;
        sum += v[p];
    }
    if (m == VIT_EXPLAIN_GRAD_ROLLOUT && sum > 0.0)
        for (int p = 0; p < N; p++) v[p] /= sum;
}

/* Chefer et al. 2021 and the gradient-weighted rollout: the CLS row (the probe's, without a
 * CLS token) of a product of per-layer [T, T] matrices, top layer first. */
static VitStatus cls_row_product(float *out, VitExplain m, const VitRun *run, const VitGrad *g,
                                 const Vit *vit, float discard_ratio, VitError *err) {
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens, Np = c->n_prefix, N = c->n_patches;
    size_t TT = (size_t)T * T;
    AttReader rd;
    VitStatus rc = vit_att_reader_init(&rd, run, err);
    if (rc) return rc;
    GradReader gr = {.run = run, .g = g, .vit = vit, .v_layer = -1};
    int discard = m == VIT_EXPLAIN_GRAD_ROLLOUT && discard_ratio > 0.0f;
    float *a = malloc(TT * sizeof(float));
    double *v = malloc(3 * (size_t)T * sizeof(double));
    Entry *scratch = discard ? malloc(TT * sizeof(Entry)) : NULL;
    if (!g->grad_att) {
        gr.buf = malloc((size_t)VIT_ATT_BLOCK * T * sizeof(float));
        gr.v = malloc((size_t)T * ((size_t)vit_att_width(c) + (size_t)c->dim) * sizeof(float));
        gr.xn = gr.v ? gr.v + (size_t)T * vit_att_width(c) : NULL;
    }
    if (!a || !v || (discard && !scratch) || (!g->grad_att && (!gr.buf || !gr.v))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for [%d, %d]",
                           vit_explain_name(m), T, T);
        goto done;
    }
    if (Np == 0 && run->probe_att && g->probe_grad) /* SigLIP: no CLS, the probe's row */
        probe_row(v, m, run, g);
    else
        for (int i = 0; i < T; i++) v[i] = i == 0 ? 1.0 : 0.0;
    for (int l = c->n_layers - 1; l >= 0; l--) {
        if (m == VIT_EXPLAIN_CHEFER) {
            /* R_l = R_{l-1} + Abar_l R_{l-1}: e_0^T (I + Abar_{L-1}) ... (I + Abar_0),
             * Abar_l = mean_h((dA (.) A)^+) (Transformer-MM-Explainability avg_heads:
             * grad * cam, clamp(min=0), mean over heads) */
            fuse_grad_att(a, &rd, &gr, l, 1);
            double *w = v + 2 * (size_t)T; /* v <- v + v . Abar_l, the identity in double */
            memcpy(w, v, (size_t)T * sizeof(double));
            vit_row_times(w, v + T, a, T);
            for (int i = 0; i < T; i++) v[i] += w[i];
            continue;
        } else {
            /* vit-explain: (attention * grad).mean(heads), then < 0 set to 0 */
            fuse_grad_att(a, &rd, &gr, l, 0);
            for (size_t i = 0; i < TT; i++) a[i] = a[i] < 0.0f ? 0.0f : a[i];
            if (discard) vit_discard_smallest(a, T, Np, discard_ratio, scratch);
            vit_add_identity_rownorm(a, T);
        }
        vit_row_times(v, v + T, a, T);
    }
    for (int p = 0; p < N; p++) out[p] = (float)v[Np + p];
    if (vit_cancelled(run)) rc = vit_cancelled_error(err, vit_explain_name(m));
done:
    free(a), free(v), free(scratch), free(gr.buf), free(gr.v);
    vit_att_reader_free(&rd);
    return rc;
}

VitStatus vit_explain(float *out, VitExplain m, const VitRun *run, const VitGrad *g, const Vit *vit,
                      float discard_ratio, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (m < 0 || m >= VIT_EXPLAIN_COUNT)
        return vit_set_error(err, VIT_ERR_ARG, "explain: unknown method %d", (int)m);
    /* LeGrad's E_l: from the exact pass or its own (VIT_GRAD_LEGRAD) */
    int need = m == VIT_EXPLAIN_ATTNLRP  ? VIT_GRAD_LRP
               : m == VIT_EXPLAIN_LEGRAD ? VIT_GRAD_EXACT | VIT_GRAD_LEGRAD
                                         : VIT_GRAD_EXACT;
    if (g->target == -1 || !(g->what & need) || (!run->att && !run->qk))
        return vit_set_error(err, VIT_ERR_ARG, "%s: no %sbackward pass has been run",
                             vit_explain_name(m), need == VIT_GRAD_LRP ? "AttnLRP " : "");
    if (!(discard_ratio >= 0.0f && discard_ratio < 1.0f))
        return vit_set_error(err, VIT_ERR_ARG, "%s: discard ratio %g outside [0, 1)",
                             vit_explain_name(m), (double)discard_ratio);
    if (run->cfg.n_tokens != c->n_tokens || run->cfg.dim != c->dim ||
        run->cfg.n_layers != c->n_layers || g->cfg.n_tokens != c->n_tokens ||
        g->cfg.dim != c->dim || g->cfg.n_layers != c->n_layers || !run->tokens || !run->pool)
        return vit_set_error(err, VIT_ERR_ARG, "%s: run or backward buffers not made for %s",
                             vit_explain_name(m), c->name);
    int N = c->n_patches, D = c->dim, L = c->n_layers;
    size_t S = (size_t)c->image_h * c->image_w;
    switch (m) {
    case VIT_EXPLAIN_CHEFER:
    case VIT_EXPLAIN_GRAD_ROLLOUT: return cls_row_product(out, m, run, g, vit, discard_ratio, err);
    case VIT_EXPLAIN_GRADCAM: {
        /* pytorch-grad-cam: weights = mean of the gradients over the spatial positions,
         * cam = ReLU(sum_d weights[d] * activations[d]) */
        double *w = calloc((size_t)D, sizeof(double));
        if (!w) return vit_set_error(err, VIT_ERR_NOMEM, "gradcam: out of memory");
        for (int p = 0; p < N; p++)
            for (int d = 0; d < D; d++) w[d] += g->cam_grad[(size_t)p * D + d];
        for (int d = 0; d < D; d++) w[d] /= N;
        for (int p = 0; p < N; p++) {
            double s = 0.0;
            for (int d = 0; d < D; d++) s += w[d] * g->cam_act[(size_t)p * D + d];
            out[p] = s > 0.0 ? (float)s : 0.0f;
        }
        free(w);
        return VIT_OK;
    }
    case VIT_EXPLAIN_LEGRAD:
        /* LeGrad: the explanation maps of the layers summed (min-max is for display) */
        for (int p = 0; p < N; p++) {
            double s = 0.0;
            for (int l = 0; l < L; l++) s += g->legrad[(size_t)l * N + p];
            out[p] = (float)s;
        }
        return VIT_OK;
    case VIT_EXPLAIN_ATTNLRP:
    case VIT_EXPLAIN_GRAD_INPUT: {
        const float *gi = m == VIT_EXPLAIN_ATTNLRP ? g->lrp_input : g->grad_input;
        for (size_t i = 0; i < S; i++)
            out[i] = run->input[i] * gi[i] + run->input[S + i] * gi[S + i] +
                     run->input[2 * S + i] * gi[2 * S + i];
        return VIT_OK;
    }
    default: break;
    }
    return vit_set_error(err, VIT_ERR_ARG, "explain: unknown method %d", (int)m);
}
