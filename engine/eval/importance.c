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
 * work for L = 12. The pruning curve's L*H + 1 passes share theirs the same way (see
 * prune_from). The values are vit_forward_batch's (each input's rows are the same steps on
 * the same numbers; the batch's GEMMs round within its tolerance). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static VitStatus check_args(VitBatch *b, const Vit *vit, const float *input, int target,
                            VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!b || !b->mem || b->cfg.n_tokens != c->n_tokens || b->cfg.dim != c->dim ||
        b->cfg.n_layers != c->n_layers || b->cfg.n_heads != c->n_heads ||
        b->cfg.n_classes != c->n_classes || !vit_has_head(vit))
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

/* The pruning passes share their starts too: pass k (the first k of order ablated) and
 * pass k' compute the same input to layer l when the heads order[k .. k') all lie in
 * layers >= l, i.e. when as many of order[0 .. k) as of order[0 .. k') lie in layers < l
 * (below[l][k], a count, not decreasing in k). So at layer l the passes fall into runs
 * of equal below[l + 1][k]: one stream each, computed once from their common input
 * (batched, max_batch at a time), then each run splits further at the next layer. */
typedef struct {
    VitBatch *b;
    const Vit *vit;
    const int *order, *below; /* [LH], [(L + 1) * (LH + 1)] */
    const uint8_t *base;      /* [LH] the intervention's ablated heads, or NULL */
    float *level;             /* [L, max_batch, T*D] each layer's output streams */
    uint8_t *masks;           /* [max_batch, LH] */
    float *p;                 /* [max_batch, C] */
    int *starts;              /* [L, max_batch + 1] each layer's runs being computed */
    float *probs;
    int target;
} Prune;

static void prune_from(Prune *q, int l, const float *stream, int k0, int k1) {
    const VitConfig *c = &q->vit->cfg;
    int L = c->n_layers, LH = L * c->n_heads, C = c->n_classes, nb = q->b->max_batch;
    size_t TD = (size_t)c->n_tokens * c->dim;
    const int *next = q->below + (size_t)(l + 1) * (LH + 1);
    int k = k0;
    while (k < k1) { /* up to nb runs of passes [k, k1) with equal next[k] */
        int *starts = q->starts + (size_t)l * (nb + 1), n = 0;
        while (k < k1 && n < nb) {
            starts[n++] = k;
            int v = next[k];
            while (k < k1 && next[k] == v) k++;
        }
        starts[n] = k;
        for (int i = 0; i < n; i++) { /* run i: its first pass's heads ablated */
            memcpy(q->b->x + (size_t)i * TD, stream, TD * sizeof(float));
            uint8_t *m = q->masks + (size_t)i * LH;
            if (q->base)
                memcpy(m, q->base, (size_t)LH);
            else
                memset(m, 0, (size_t)LH);
            for (int j = 0; j < starts[i]; j++) m[q->order[j]] = 1;
        }
        q->b->ablate_each = q->masks;
        if (l == L - 1) {
            vit_batch_layers(q->b, q->vit, n, l, L);
            vit_batch_head(q->b, q->vit, n, NULL, q->p);
            q->b->ablate_each = NULL;
            for (int i = 0; i < n; i++)
                for (int kk = starts[i]; kk < starts[i + 1]; kk++)
                    q->probs[kk] = q->p[(size_t)i * C + q->target];
            continue;
        }
        vit_batch_layers(q->b, q->vit, n, l, l + 1);
        q->b->ablate_each = NULL;
        float *out = q->level + (size_t)(l + 1) * nb * TD;
        memcpy(out, q->b->x, (size_t)n * TD * sizeof(float));
        for (int i = 0; i < n; i++)
            prune_from(q, l + 1, out + (size_t)i * TD, starts[i], starts[i + 1]);
    }
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
    int nb = b->max_batch;
    Prune q = {.b = b,
               .vit = vit,
               .order = order,
               .base = iv ? iv->ablate : NULL,
               .probs = probs,
               .target = target};
    int *below = malloc((size_t)(L + 1) * (LH + 1) * sizeof(int));
    q.level = malloc((size_t)(L + 1) * nb * TD * sizeof(float));
    q.masks = malloc((size_t)nb * LH);
    q.p = malloc((size_t)nb * C * sizeof(float));
    q.starts = malloc((size_t)L * (nb + 1) * sizeof(int));
    float *x0 = malloc(TD * sizeof(float));
    if (!below || !q.level || !q.masks || !q.p || !q.starts || !x0) {
        free(below), free(q.level), free(q.masks), free(q.p), free(q.starts), free(x0);
        return vit_set_error(err, VIT_ERR_NOMEM, "head pruning: out of memory");
    }
    for (int l = 0; l <= L; l++) /* below[l][k]: heads of order[0 .. k) in layers < l */
        for (int k = 0, n = 0; k <= LH; k++) {
            below[(size_t)l * (LH + 1) + k] = n;
            if (k < LH && order[k] / H < l) n++;
        }
    q.below = below;
    b->ablate_each = NULL;
    vit_batch_embed(b, vit, input, 1);
    memcpy(x0, b->x, TD * sizeof(float));
    prune_from(&q, 0, x0, 0, LH + 1);
    b->ablate_each = NULL;
    free(below), free(q.level), free(q.masks), free(q.p), free(q.starts), free(x0);
    return VIT_OK;
}
