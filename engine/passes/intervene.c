/* intervene.c - interventions on the running model (vit.h, "Interventions"): checking
 * a VitIntervention, what it changes in one layer's attention (VitAttMod, applied by
 * vit_att_block), in the embedding (the filled patches, the position embedding), and
 * the NaN a map shows at a dropped patch. The head mask itself is applied where the
 * attention output is written (vit_block's attention_task, block.c). */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- checking --------------------------------------------------------------- */

static int any(const uint8_t *a, size_t n) {
    if (!a) return 0;
    for (size_t i = 0; i < n; i++)
        if (a[i]) return 1;
    return 0;
}

int vit_intervention_active(const VitIntervention *iv, const VitConfig *c) {
    if (!iv) return 0;
    size_t N = (size_t)c->n_patches;
    return any(iv->ablate, (size_t)c->n_layers * c->n_heads) || any(iv->drop, N) ||
           any(iv->fill, N) || iv->pos_embed != VIT_POS_KEEP || iv->temperature != 0.0f;
}

VitStatus vit_intervention_check(const VitIntervention *iv, const VitConfig *c, VitError *err) {
    if (!iv) return VIT_OK;
    int N = c->n_patches;
    if (iv->drop) {
        int kept = 0;
        for (int p = 0; p < N; p++) kept += !iv->drop[p];
        if (!kept)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "intervention: every one of the %d patches dropped (at least "
                                 "one must stay)",
                                 N);
    }
    if (iv->pos_embed < VIT_POS_KEEP || iv->pos_embed > VIT_POS_ZERO)
        return vit_set_error(err, VIT_ERR_ARG,
                             "intervention: position embedding edit %d (expected 0 .. 2)",
                             (int)iv->pos_embed);
    if (iv->pos_embed == VIT_POS_SHUFFLE) {
        if (!iv->pos_perm)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "intervention: position embedding shuffled without a "
                                 "permutation");
        uint8_t *seen = calloc((size_t)N, 1);
        if (!seen) return vit_set_error(err, VIT_ERR_NOMEM, "intervention: out of memory");
        int bad = -1;
        for (int p = 0; p < N && bad < 0; p++) {
            int q = iv->pos_perm[p];
            if (q < 0 || q >= N || seen[q])
                bad = p;
            else
                seen[q] = 1;
        }
        free(seen);
        if (bad >= 0)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "intervention: position permutation entry %d is %d (expected a "
                                 "permutation of 0 .. %d)",
                                 bad, iv->pos_perm[bad], N - 1);
    }
    if (iv->temperature != 0.0f) {
        if (!isfinite(iv->temperature) || iv->temperature < 0.0f)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "intervention: temperature %g (expected a finite value > 0)",
                                 (double)iv->temperature);
        if (iv->temp_layer < 0 || iv->temp_layer >= c->n_layers)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "intervention: temperature on layer %d (expected 0 .. %d)",
                                 iv->temp_layer, c->n_layers - 1);
    }
    return VIT_OK;
}

/* --- what the passes apply -------------------------------------------------------- */

const VitAttMod *vit_att_mod(VitAttMod *m, const VitIntervention *iv, const VitConfig *c,
                             int layer) {
    if (!iv) return NULL;
    *m = (VitAttMod){.n_prefix = c->n_prefix};
    if (iv->temperature > 0.0f && iv->temp_layer == layer) m->temp = iv->temperature;
    if (any(iv->drop, (size_t)c->n_patches)) m->drop = iv->drop;
    /* a rotary model's position edit: the rotation's angles shuffled, or none */
    if (c->rope && iv->pos_embed == VIT_POS_SHUFFLE) m->pos_perm = iv->pos_perm;
    if (c->rope && iv->pos_embed == VIT_POS_ZERO) m->no_rope = 1;
    return m->temp > 0.0f || m->drop || m->pos_perm || m->no_rope ? m : NULL;
}

/* timm _pos_embed's sum, x + pos_embed, in vit_forward's order; the intervention picks
 * which rows of pos_embed each patch gets, or none. A rotary model has none to add: its
 * position edits are the rotation's (vit_att_mod). */
void vit_add_pos_embed(float *x, const Vit *vit, const VitIntervention *iv) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    size_t D = (size_t)c->dim, Npos = (size_t)w->pos_prefix, N = (size_t)c->n_patches;
    VitPosEdit e = iv ? iv->pos_embed : VIT_POS_KEEP;
    if (e == VIT_POS_ZERO || !w->pos_embed) return; /* none, or a rotary model's (vit_block) */
    if (e != VIT_POS_SHUFFLE || !iv->pos_perm) {
        for (size_t i = 0; i < (Npos + N) * D; i++) x[i] += w->pos_embed[i];
        return;
    }
    for (size_t i = 0; i < Npos * D; i++) x[i] += w->pos_embed[i];
    for (size_t p = 0; p < N; p++) {
        float *xr = x + (Npos + p) * D;
        const float *pr = w->pos_embed + (Npos + (size_t)iv->pos_perm[p]) * D;
        for (size_t i = 0; i < D; i++) xr[i] += pr[i];
    }
}

void vit_fill_patches(float *patches, const VitIntervention *iv, const VitConfig *c) {
    if (!iv || !iv->fill) return;
    size_t K = 3 * (size_t)c->patch_size * c->patch_size;
    for (int p = 0; p < c->n_patches; p++)
        if (iv->fill[p]) memset(patches + (size_t)p * K, 0, K * sizeof(float));
}

/* --- helpers for callers ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void vit_pos_permutation(int *perm, int n, uint64_t seed) {
    if (n < 1) return;
    for (int i = 0; i < n; i++) perm[i] = i;
    uint64_t s = seed;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64(&s) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

void vit_intervention_mask(float *map, const VitIntervention *iv, const VitConfig *c) {
    if (!iv || !iv->drop) return;
    for (int p = 0; p < c->n_patches; p++)
        if (iv->drop[p]) map[p] = NAN;
}
