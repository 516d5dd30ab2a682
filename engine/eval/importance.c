/* importance.c - which heads matter for a class (Michel et al. 2019, "Are Sixteen Heads
 * Really Better than One?"): the drop in the class probability when each head alone is
 * ablated, and the pruning curve that ablates the least important heads first (their
 * Fig. 2, here with the measured drop as the importance rather than their gradient
 * proxy).
 *
 * The L*H ablated passes share their start: ablating head h of layer l changes nothing
 * before layer l, so the unablated stream is computed once, layer by layer, and the H
 * passes that ablate a head of layer l start from it there (vit_batch_layers, batched
 * across those H inputs): L*H*(L+1)/2 + L layers in all instead of L*H*L, 0.54 of the
 * work for L = 12. The values are vit_forward_batch's (each input's rows are the same
 * steps on the same numbers; the batch's GEMMs round within its tolerance). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static VitStatus check_args(VitBatch *b, const Vit *vit, const float *input, int target,
                            VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!b || !b->mem || b->cfg.n_tokens != c->n_tokens || b->cfg.dim != c->dim ||
        b->cfg.n_layers != c->n_layers || b->cfg.n_heads != c->n_heads ||
        b->cfg.n_classes != c->n_classes || !vit->w.head_w)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: head importance: batch buffers not made by vit_batch_init for "
                             "this model (one with a head)",
                             c->name);
    if (!input) return vit_set_error(err, VIT_ERR_ARG, "%s: head importance: no input", c->name);
    if (target < 0 || target >= c->n_classes)
        return vit_set_error(err, VIT_ERR_ARG, "%s: head importance: class %d out of range [0, %d)",
                             c->name, target, c->n_classes);
    return vit_intervention_check(b->intervention, c, err);
}

VitStatus vit_head_importance(float *importance, float *base_prob, VitBatch *b, const Vit *vit,
                              const float *input, int target, VitError *err) {
    VitStatus st = check_args(b, vit, input, target, err);
    if (st) return st;
    if (!importance) return vit_set_error(err, VIT_ERR_ARG, "head importance: no output");
    const VitConfig *c = &vit->cfg;
    const VitIntervention *iv = b->intervention;
    int L = c->n_layers, H = c->n_heads, C = c->n_classes, LH = L * H;
    size_t TD = (size_t)c->n_tokens * c->dim;
    int nb = H < b->max_batch ? H : b->max_batch; /* inputs per call */
    float *stream = malloc(TD * sizeof(float)), *probs = malloc((size_t)nb * C * sizeof(float));
    uint8_t *masks = malloc((size_t)nb * LH);
    if (!stream || !probs || !masks) {
        free(stream), free(probs), free(masks);
        return vit_set_error(err, VIT_ERR_NOMEM, "head importance: out of memory");
    }
    /* the unablated stream at layer 0 (with the intervention's changes) */
    b->ablate_each = NULL;
    vit_batch_embed(b, vit, input, 1);
    memcpy(stream, b->x, TD * sizeof(float));
    float base = 0.0f;
    for (int l = 0; l < L; l++) {
        /* the passes that ablate a head of layer l, from the stream's input to layer l */
        for (int h0 = 0; h0 < H; h0 += nb) {
            int k = H - h0 < nb ? H - h0 : nb;
            for (int i = 0; i < k; i++) {
                memcpy(b->x + (size_t)i * TD, stream, TD * sizeof(float));
                uint8_t *m = masks + (size_t)i * LH;
                if (iv && iv->ablate)
                    memcpy(m, iv->ablate, (size_t)LH);
                else
                    memset(m, 0, (size_t)LH);
                m[l * H + h0 + i] = 1;
            }
            b->ablate_each = masks;
            vit_batch_layers(b, vit, k, l, L);
            vit_batch_head(b, vit, k, NULL, probs);
            b->ablate_each = NULL;
            for (int i = 0; i < k; i++) importance[l * H + h0 + i] = probs[(size_t)i * C + target];
        }
        /* the stream one layer on (the last: the unablated model's probability) */
        memcpy(b->x, stream, TD * sizeof(float));
        vit_batch_layers(b, vit, 1, l, l + 1);
        if (l + 1 < L) {
            memcpy(stream, b->x, TD * sizeof(float));
        } else {
            vit_batch_head(b, vit, 1, NULL, probs);
            base = probs[target];
        }
    }
    for (int i = 0; i < LH; i++) /* a head the intervention ablates already: no change */
        importance[i] = iv && iv->ablate && iv->ablate[i] ? 0.0f : base - importance[i];
    if (base_prob) *base_prob = base;
    free(stream), free(probs), free(masks);
    return VIT_OK;
}

VitStatus vit_head_pruning(float *probs, int *order, VitBatch *b, const Vit *vit,
                           const float *input, const float *importance, int target, VitError *err) {
    VitStatus st = check_args(b, vit, input, target, err);
    if (st) return st;
    const VitConfig *c = &vit->cfg;
    int L = c->n_layers, H = c->n_heads, C = c->n_classes, LH = L * H;
    if (!probs || !order || !importance)
        return vit_set_error(err, VIT_ERR_ARG, "head pruning: a NULL array");
    for (int i = 0; i < LH; i++)
        if (!isfinite(importance[i]))
            return vit_set_error(err, VIT_ERR_ARG,
                                 "head pruning: importance[%d] (layer %d, head %d) is %g, expected "
                                 "a finite value",
                                 i, i / H, i % H, (double)importance[i]);
    st = vit_patch_order(order, importance, LH, 0, err); /* least important first */
    if (st) return st;
    const VitIntervention *iv = b->intervention;
    size_t TD = (size_t)c->n_tokens * c->dim;
    int nb = b->max_batch, n = LH + 1;
    float *x0 = malloc(TD * sizeof(float)), *p = malloc((size_t)nb * C * sizeof(float));
    uint8_t *masks = malloc((size_t)nb * LH);
    if (!x0 || !p || !masks) {
        free(x0), free(p), free(masks);
        return vit_set_error(err, VIT_ERR_NOMEM, "head pruning: out of memory");
    }
    b->ablate_each = NULL;
    vit_batch_embed(b, vit, input, 1);
    memcpy(x0, b->x, TD * sizeof(float));
    for (int k0 = 0; k0 < n; k0 += nb) { /* input i: the k0 + i least important ablated */
        int m = n - k0 < nb ? n - k0 : nb;
        for (int i = 0; i < m; i++) {
            memcpy(b->x + (size_t)i * TD, x0, TD * sizeof(float));
            uint8_t *mk = masks + (size_t)i * LH;
            if (iv && iv->ablate)
                memcpy(mk, iv->ablate, (size_t)LH);
            else
                memset(mk, 0, (size_t)LH);
            for (int j = 0; j < k0 + i; j++) mk[order[j]] = 1;
        }
        b->ablate_each = masks;
        vit_batch_layers(b, vit, m, 0, L);
        vit_batch_head(b, vit, m, NULL, p);
        b->ablate_each = NULL;
        for (int i = 0; i < m; i++) probs[k0 + i] = p[(size_t)i * C + target];
    }
    free(x0), free(p), free(masks);
    return VIT_OK;
}
