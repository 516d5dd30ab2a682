/* head.c - CLIP's image embedding and the phrase as a head (vit.h, "CLIP"):
 * vit_set_text_head, vit_image_embed, and the text head's forward and gradient that
 * forward.c, batch.c, backward.c and the logit lens (tokens.c) share.
 *
 * CLIP (Radford et al. 2021; openai/CLIP clip/model.py CLIP.forward):
 *   image_features = encode_image(image)           e = img_proj(ln_post(z_L[CLS]))
 *   image_features /= image_features.norm(dim=-1)   e / |e|
 *   logits_per_image = logit_scale.exp() * image_features @ text_features.t()
 * with text_features normalised too. Here the text embeddings are normalised once, in
 * vit_set_text_head, and the image's in the head:
 *   logits[c] = s * (t_c . e) / |e|,  t_c unit rows of text_emb [C, E], s the scale.
 * Its gradient at e (what vit_backward sends into the image projection):
 *   dy_c/de = s / |e| * (t_c - (t_c . e) e / |e|^2)
 * AttnLRP's pass holds |e| constant, as its LayerNorm rule holds the standard deviation
 * (Achtibat et al. 2024): dy_c/de = s t_c / |e|, so that e . dy_c/de = y_c (the
 * relevance is conserved; the exact gradient of the 0-homogeneous cosine gives 0). */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int vit_has_head(const Vit *vit) {
    return vit->cfg.n_classes > 0 && (vit->w.head_w || vit->w.text_emb);
}

/* s / |e| for one embedding e [E] (0 for e = 0: the cosine is then 0, not NaN) */
static float inv_norm(const float *e, int E, float s) {
    double n2 = 0.0;
    for (int j = 0; j < E; j++) n2 += (double)e[j] * e[j];
    return n2 > 0.0 ? (float)(s / sqrt(n2)) : 0.0f;
}

void vit_text_head(VitPool *pool, float *logits, float *e, const float *xn, int n, const Vit *vit,
                   int gemm_only) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int D = c->dim, E = c->embed_dim, C = c->n_classes;
    /* CLIP's model.py: x = self.ln_post(x[:, 0, :]); x = x @ self.proj */
    vit_linear(pool, (VitLinear){.out = e,
                                 .ld_out = E,
                                 .inp = xn,
                                 .w = w->img_proj_w,
                                 .T = n,
                                 .n_in = D,
                                 .n_out = E,
                                 .gemm_only = gemm_only});
    if (!logits || !w->text_emb || !C) return;
    vit_linear(pool, (VitLinear){.out = logits,
                                 .ld_out = C,
                                 .inp = e,
                                 .w = w->text_emb,
                                 .T = n,
                                 .n_in = E,
                                 .n_out = C,
                                 .gemm_only = gemm_only});
    if (gemm_only) return;
    for (int i = 0; i < n; i++) {
        float k = inv_norm(e + (size_t)i * E, E, w->text_scale);
        for (int j = 0; j < C; j++) logits[(size_t)i * C + j] *= k;
    }
}

void vit_text_head_grad(float *dxn, const float *xn, int target, const Vit *vit, int lrp,
                        float *scratch) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int D = c->dim, E = c->embed_dim;
    float *e = scratch, *g = scratch + E;
    /* e = P xn, P = img_proj_w [E, D] */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, E, D, 1.0f, w->img_proj_w, D, xn, 1, 0.0f, e, 1);
    const float *t = w->text_emb + (size_t)target * E;
    double n2 = 0.0, te = 0.0;
    for (int j = 0; j < E; j++) n2 += (double)e[j] * e[j], te += (double)t[j] * e[j];
    if (n2 > 0.0) {
        double k = w->text_scale / sqrt(n2), r = lrp ? 0.0 : te / n2;
        for (int j = 0; j < E; j++) g[j] = (float)(k * (t[j] - r * e[j]));
    } else {
        memset(g, 0, (size_t)E * sizeof *g);
    }
    /* dxn = P^T g */
    cblas_sgemv(CblasRowMajor, CblasTrans, E, D, 1.0f, w->img_proj_w, D, g, 1, 0.0f, dxn, 1);
}

/* --- entry points --------------------------------------------------------------- */

VitStatus vit_set_text_head(Vit *vit, const float *emb, int C, const char *const *labels,
                            float logit_scale, VitError *err) {
    if (!vit) return vit_set_error(err, VIT_ERR_ARG, "text head: no model");
    const VitConfig *c = &vit->cfg;
    int E = c->embed_dim;
    if (E <= 0 || !vit->w.img_proj_w)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: the model has no image projection (not a CLIP image tower): "
                             "a text cannot be its head",
                             c->name);
    if (!emb || C < 1 || C > VIT_MAX_CLASSES)
        return vit_set_error(err, VIT_ERR_ARG, "%s: text head: %d embeddings%s (expected 1 .. %d)",
                             c->name, C, emb ? "" : " at NULL", VIT_MAX_CLASSES);
    if (!(logit_scale > 0.0f) || !isfinite(logit_scale))
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: text head: logit scale %g, expected a finite number > 0 (CLIP: "
                             "100)",
                             c->name, (double)logit_scale);
    float *t = malloc((size_t)C * E * sizeof *t);
    char(*lab)[VIT_LABEL_BYTES] = labels ? calloc((size_t)C, sizeof *lab) : NULL;
    if (!t || (labels && !lab)) {
        free(t), free(lab);
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: text head: out of memory for %d x %d",
                             c->name, C, E);
    }
    for (int i = 0; i < C; i++) {
        const float *r = emb + (size_t)i * E;
        double n2 = 0.0;
        for (int j = 0; j < E; j++) n2 += (double)r[j] * r[j];
        if (!(n2 > 0.0) || !isfinite(n2)) {
            free(t), free(lab);
            return vit_set_error(err, VIT_ERR_ARG,
                                 "%s: text head: embedding %d is %s: it has no direction", c->name,
                                 i, n2 > 0.0 ? "not finite" : "zero");
        }
        double k = 1.0 / sqrt(n2); /* F.normalize / text_features.norm(dim=-1) */
        for (int j = 0; j < E; j++) t[(size_t)i * E + j] = (float)(r[j] * k);
        if (lab) snprintf(lab[i], VIT_LABEL_BYTES, "%s", labels[i] ? labels[i] : "");
    }
    if (vit->labels && (void *)vit->labels != vit->text_labels) free(vit->labels);
    free(vit->text_owned);
    free(vit->text_labels);
    vit->text_owned = t;
    vit->text_labels = lab;
    vit->labels = lab;
    vit->w.text_emb = t;
    vit->w.text_scale = logit_scale;
    vit->w.head_w = vit->w.head_b = NULL; /* a CLIP tower has no classifier beside it */
    vit->w.head_dist_w = vit->w.head_dist_b = NULL;
    vit->cfg.n_classes = C;
    vit->cfg.head_tanh = 0;
    return VIT_OK;
}

VitStatus vit_text_logits(VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!vit->w.text_emb)
        return vit_set_error(err, VIT_ERR_ARG, "%s: no text head (vit_set_text_head)", c->name);
    if (!run || !run->img_embed || !run->logits || run->cfg.n_classes != c->n_classes ||
        run->cfg.embed_dim != c->embed_dim || run->cfg.dim != c->dim)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: text logits: the run was not made for this model and its %d "
                             "phrases",
                             c->name, c->n_classes);
    int C = c->n_classes, E = c->embed_dim;
    vit_linear(NULL, (VitLinear){.out = run->logits,
                                 .ld_out = C,
                                 .inp = run->img_embed,
                                 .w = vit->w.text_emb,
                                 .T = 1,
                                 .n_in = E,
                                 .n_out = C});
    float k = inv_norm(run->img_embed, E, vit->w.text_scale);
    for (int j = 0; j < C; j++) run->logits[j] *= k;
    memcpy(run->probs, run->logits, (size_t)C * sizeof(float));
    vit_softmax_rows(run->probs, 1, C);
    return VIT_OK;
}

VitStatus vit_image_embed(float *e, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (c->embed_dim <= 0 || !vit->w.img_proj_w)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: the model has no image projection (not a CLIP image tower): "
                             "no image embedding",
                             c->name);
    if (!run || !run->img_embed || run->cfg.embed_dim != c->embed_dim || run->cfg.dim != c->dim ||
        run->cfg.n_tokens != c->n_tokens)
        return vit_set_error(err, VIT_ERR_ARG, "%s: image embedding: the run was not made for it",
                             c->name);
    if (!e) return vit_set_error(err, VIT_ERR_ARG, "%s: image embedding: no output", c->name);
    memcpy(e, run->img_embed, (size_t)c->embed_dim * sizeof *e);
    return VIT_OK;
}
