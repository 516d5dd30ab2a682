/* lesson.c - the numbers of the lesson's steps (vit.h, "The lesson"): a patch as the
 * patch embedding reads it, the patch embedding's filters (PCA), the position
 * embeddings' similarity, one block rerun with the forward pass's own code and read at
 * one head and query token, and the head on the CLS token.
 *
 * Nothing here is a second model: the block is vit_block (engine/passes/block.c) on the
 * run's pool and on the run's own input tokens, the attention row is read through the
 * maps' AttReader, the scores are vit_att_block's product before its softmax.
 * Linear weights are PyTorch's [out, in]. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- steps 1 to 3: the input side ------------------------------------------------ */

VitStatus vit_lesson_patch(float *pixels, float *embedding, const VitRun *run, const Vit *vit,
                           int patch, VitError *err) {
    const VitConfig *c = &vit->cfg;
    int N = c->n_patches, P = c->patch_size, D = c->dim, K = 3 * P * P;
    if (!run->patches || run->cfg.n_patches != N || run->cfg.dim != D)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: the run was not made for %s", c->name);
    if (patch < 0 || patch >= N)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: patch %d out of range [0, %d)", patch, N);
    /* timm PatchEmbed: Conv2d(3, D, P, stride P) = im2col rows . patch_w^T + patch_b;
     * the forward pass's im2col row of this patch (vit_im2col: [3, P, P] order) */
    const float *row = run->patches + (size_t)patch * K;
    if (pixels) memcpy(pixels, row, (size_t)K * sizeof(float));
    if (embedding)
        vit_linear(NULL, (VitLinear){.out = embedding,
                                     .ld_out = D,
                                     .inp = row,
                                     .w = vit->w.patch_w,
                                     .b = vit->w.patch_b,
                                     .T = 1,
                                     .n_in = K,
                                     .n_out = D});
    return VIT_OK;
}

int vit_lesson_filters(float *comps, float *var, const Vit *vit, int k, VitError *err) {
    const VitConfig *c = &vit->cfg;
    int D = c->dim, K = 3 * c->patch_size * c->patch_size;
    if (!comps || k < 1) {
        vit_set_error(err, VIT_ERR_ARG, "lesson filters: %d components asked", k);
        return -1;
    }
    int kk = k < D - 1 ? k : D - 1;
    if (kk > K) kk = K;
    memset(comps, 0, (size_t)k * K * sizeof *comps);
    if (var) memset(var, 0, (size_t)k * sizeof *var);
    if (kk < 1) return 0;
    double *vec = malloc((size_t)kk * K * sizeof *vec), *v = malloc((size_t)kk * sizeof *v);
    double *mean = malloc((size_t)K * sizeof *mean), total = 0.0;
    VitStatus rc = !vec || !v || !mean
                       ? vit_set_error(err, VIT_ERR_NOMEM, "lesson filters: out of memory")
                       : vit_pca_top(vec, v, mean, &total, vit->w.patch_w, NULL, D, D, K, kk, err);
    for (int i = 0; !rc && i < kk; i++) {
        const double *u = vec + (size_t)i * K;
        double s = vit_loading_sign(u, K);
        for (int j = 0; j < K; j++) comps[(size_t)i * K + j] = (float)(s * u[j]);
        if (var) var[i] = total > 0.0 ? (float)(v[i] / total) : 0.0f;
    }
    free(vec), free(v), free(mean);
    return rc ? -1 : kk;
}

void vit_lesson_pos_similarity(float *out, const Vit *vit) {
    const VitConfig *c = &vit->cfg;
    int N = c->n_patches, D = c->dim;
    const float *pos = vit->w.pos_embed + (size_t)vit->w.pos_prefix * D;
    /* a rotary model: the rows of its rotation table (cosines, sines), whose cosine
     * similarity is the mean over the pairs of cos(a_i - a_j), the relative position the
     * scores see */
    if (!vit->w.pos_embed) pos = vit->w.rope, D = c->head_dim;
    double *norm = malloc((size_t)N * sizeof *norm);
    for (int i = 0; i < N; i++) {
        double s = 0.0;
        for (int d = 0; d < D; d++) s += (double)pos[(size_t)i * D + d] * pos[(size_t)i * D + d];
        if (norm) norm[i] = sqrt(s);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            const float *a = pos + (size_t)i * D, *b = pos + (size_t)j * D;
            double s = 0.0, na = 0.0, nb = 0.0;
            for (int d = 0; d < D; d++) s += (double)a[d] * b[d];
            if (norm) {
                na = norm[i], nb = norm[j];
            } else { /* no memory for the norms: each pair computes its own */
                for (int d = 0; d < D; d++) na += (double)a[d] * a[d], nb += (double)b[d] * b[d];
                na = sqrt(na), nb = sqrt(nb);
            }
            out[(size_t)i * N + j] = na > 0.0 && nb > 0.0 ? (float)(s / (na * nb)) : 0.0f;
        }
    free(norm);
}

/* --- step 4: inside a block ---------------------------------------------------------- */

/* Floats of a VitLesson's buffers: the block [T, 7D + 4A + 2F] and [H, T, T] (A:
 * vit_att_width), the selection (2T + 1) Dh + 2T and a block of scores [VIT_ATT_BLOCK, T]. */
static size_t lesson_floats(const VitConfig *c, size_t *sel) {
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, F = (size_t)c->mlp_dim,
           H = (size_t)c->n_heads, Dh = (size_t)c->head_dim, A = (size_t)vit_att_width(c);
    *sel = (2 * T + 4) * Dh + 3 * T + (size_t)VIT_ATT_BLOCK * T; /* + RoPE's 3 Dh + T */
    return T * (7 * D + 4 * A + F + (size_t)vit_mlp_in_width(c)) + H * T * T + *sel;
}

VitStatus vit_lesson_init(VitLesson *ls, const Vit *vit, VitError *err) {
    memset(ls, 0, sizeof *ls);
    const VitConfig *c = &vit->cfg;
    size_t sel, n = lesson_floats(c, &sel), T = (size_t)c->n_tokens, D = (size_t)c->dim,
                F = (size_t)c->mlp_dim, Dh = (size_t)c->head_dim, A = (size_t)vit_att_width(c);
    if (n > VIT_MAX_ACTIVATION_BYTES / sizeof(float) || !(ls->mem = calloc(n, sizeof(float))))
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot allocate %zu MB for the lesson",
                             c->name, n * sizeof(float) >> 20);
    ls->cfg = *c;
    ls->layer = ls->head = ls->token = -1;
    float *p = ls->mem;
    float **td[] = {&ls->x, &ls->xn1, &ls->proj, &ls->xm, &ls->xn2, &ls->mlp, &ls->out};
    for (size_t i = 0; i < sizeof td / sizeof *td; i++, p += T * D) *td[i] = p;
    ls->v = p, p += T * A;
    ls->ctx = p, p += T * A;
    ls->qk = p, p += T * 2 * A;
    ls->hpre = p, p += T * (size_t)vit_mlp_in_width(c);
    ls->hid = p, p += T * F;
    ls->att = p, p += (size_t)c->n_heads * T * T;
    ls->query = p, p += Dh;
    ls->keys = p, p += T * Dh;
    ls->values = p, p += T * Dh;
    ls->scores = p, p += T;
    ls->probs = p, p += T;
    ls->query0 = p, p += Dh;
    ls->key0 = p, p += Dh;
    ls->angles = p, p += Dh;     /* Dh/2 used */
    ls->rope_scores = p, p += T; /* N used */
    ls->sel = p;                 /* [VIT_ATT_BLOCK, T] */
    return VIT_OK;
}

void vit_lesson_free(VitLesson *ls) {
    if (!ls) return;
    free(ls->mem);
    memset(ls, 0, sizeof *ls);
    ls->layer = ls->head = ls->token = -1;
}

static int same_shapes(const VitConfig *a, const VitConfig *b) {
    return a->n_tokens == b->n_tokens && a->dim == b->dim && a->n_heads == b->n_heads &&
           a->head_dim == b->head_dim && a->mlp_dim == b->mlp_dim && a->n_layers == b->n_layers &&
           a->n_prefix == b->n_prefix;
}

VitStatus vit_lesson_block(VitLesson *ls, const VitRun *run, const Vit *vit, int layer,
                           VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!ls->mem || !same_shapes(&ls->cfg, c) || !same_shapes(&run->cfg, c) || !run->tokens)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: not made for %s", c->name);
    if (layer < 0 || layer >= c->n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: layer %d out of range [0, %d)", layer,
                             c->n_layers);
    int T = c->n_tokens, D = c->dim, F = c->mlp_dim;
    const VitBlock *b = &vit->w.blocks[layer];
    ls->layer = ls->head = ls->token = -1;
    memcpy(ls->x, run->tokens + (size_t)layer * T * D, (size_t)T * D * sizeof(float));
    /* timm Block.forward, every query row, the attention kept; stopped after fc1 so
     * that proj's output (tmp) survives the MLP */
    const VitIntervention *iv = run->intervention; /* the model the run ran */
    VitAttMod mod;
    VitBlockIO io = {.n = 1,
                     .rows = T,
                     .x = ls->x,
                     .res = ls->x,
                     .xn1 = ls->xn1,
                     .qk = ls->qk,
                     .v = ls->v,
                     .att = ls->att,
                     .ctx = ls->ctx,
                     .tmp = ls->proj,
                     .xm = ls->xm,
                     .xn2 = ls->xn2,
                     .hpre = ls->hpre,
                     .hid = NULL,
                     .out = ls->out,
                     .run = run,
                     .ablate = iv && iv->ablate ? iv->ablate + (size_t)layer * c->n_heads : NULL,
                     .mod = vit_att_mod(&mod, iv, c, layer)};
    if (!vit_block(run->pool, b, c, &io)) return vit_cancelled_error(err, "lesson");
    /* the block's last step as vit_block makes it: hid = act(hpre) (the same
     * arithmetic as its epilogue: GELU, or the layout's activation), out = xm + ls2 * fc2(hid)
     * timm: x = x + self.ls2(self.mlp.fc2(self.mlp.act(self.mlp.fc1(self.norm2(x))))) */
    if (c->mlp_gated) { /* act(gate) * value, as vit_block's product (and its sub-LN) */
        vit_glu_rows(ls->hid, F, ls->hpre, 0, T, F, c->mlp_act);
        if (b->mlp_norm_w)
            vit_layernorm_inplace_rows(ls->hid, F, b->mlp_norm_w, b->mlp_norm_b, 0, T, F,
                                       c->ln_eps);
    } else {
        memcpy(ls->hid, ls->hpre, (size_t)T * F * sizeof(float));
        vit_act_cols(ls->hid, F, T, 0, F, c->mlp_act);
    }
    vit_linear(run->pool, (VitLinear){.out = ls->mlp,
                                      .ld_out = D,
                                      .inp = ls->hid,
                                      .w = b->fc2_w,
                                      .b = b->fc2_b,
                                      .T = T,
                                      .n_in = F,
                                      .n_out = D,
                                      .epilogue = VIT_EPI_RESIDUAL,
                                      .x = ls->out,
                                      .x_in = ls->xm,
                                      .gamma = b->ls2});
    ls->layer = layer;
    ls->rope = c->rope ? b->rope : NULL;
    return VIT_OK;
}

/* The selected token's rotation (VitLesson.query0 .. rope_scores), as vit_block rotated
 * it: u' = u cos a + rotate_half(u) sin a on pairs (i, i + Dh/2) (vit_rope_rows), undone
 * by the transpose (u = u' cos a - rotate_half(u') sin a), then the token's own
 * key rotated to every patch's angles and scored against the rotated query. */
static void lesson_rope(VitLesson *ls, const VitAttMod *mod, int token) {
    const VitConfig *c = &ls->cfg;
    int Dh = c->head_dim, h2 = Dh / 2, Np = c->n_prefix, N = c->n_patches;
    const int *perm = mod ? mod->pos_perm : NULL;
    int off = mod && mod->no_rope; /* --pos zero: nothing rotated */
    const float *q = ls->query, *k = ls->keys + (size_t)token * Dh;
    const float *cs =
        !off && token >= Np ? ls->rope + (size_t)(perm ? perm[token - Np] : token - Np) * Dh : NULL;
    for (int i = 0; i < h2; i++) {
        float co = cs ? cs[i] : 1.0f, si = cs ? cs[i + h2] : 0.0f;
        ls->angles[i] = atan2f(si, co);
        ls->query0[i] = q[i] * co + q[i + h2] * si;
        ls->query0[i + h2] = q[i + h2] * co - q[i] * si;
        ls->key0[i] = k[i] * co + k[i + h2] * si;
        ls->key0[i + h2] = k[i + h2] * co - k[i] * si;
    }
    float scale = vit_att_scale(c);
    for (int p = 0; p < N; p++) {
        const float *cp = off ? NULL : ls->rope + (size_t)(perm ? perm[p] : p) * Dh;
        double s = 0.0;
        for (int i = 0; i < h2; i++) { /* query . R(a_p) key0 */
            float co = cp ? cp[i] : 1.0f, si = cp ? cp[i + h2] : 0.0f, a = ls->key0[i],
                  b = ls->key0[i + h2];
            s += (double)q[i] * (a * co - b * si) + (double)q[i + h2] * (b * co + a * si);
        }
        ls->rope_scores[p] = (float)s * scale;
    }
}

static float row_norm(const float *x, int D) {
    double s = 0.0;
    for (int i = 0; i < D; i++) s += (double)x[i] * x[i];
    return (float)sqrt(s);
}

VitStatus vit_lesson_select(VitLesson *ls, const VitRun *run, int head, int token, VitError *err) {
    const VitConfig *c = &ls->cfg;
    int T = c->n_tokens, D = c->dim, F = c->mlp_dim, Dh = c->head_dim, l = ls->layer,
        A = vit_att_width(c);
    if (l < 0 || !same_shapes(&run->cfg, c))
        return vit_set_error(err, VIT_ERR_ARG, "lesson: no block computed for this run");
    if (head < 0 || head >= c->n_heads)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: head %d out of range [0, %d)", head,
                             c->n_heads);
    if (token < 0 || token >= T)
        return vit_set_error(err, VIT_ERR_ARG, "lesson: query token %d out of range [0, %d)", token,
                             T);
    size_t t = (size_t)token;
    /* norm1's moments, as vit_layernorm_rows computes them (double) */
    const float *x = ls->x + t * D;
    double m = 0.0, var = 0.0;
    for (int i = 0; i < D; i++) m += x[i];
    m /= D;
    for (int i = 0; i < D; i++) var += (x[i] - m) * (x[i] - m);
    var /= D;
    ls->ln_mean = (float)m;
    ls->ln_std = (float)sqrt(var + c->ln_eps);
    /* this head's query, keys, values: its Dh columns */
    memcpy(ls->query, ls->qk + t * 2 * A + (size_t)head * Dh, (size_t)Dh * sizeof(float));
    for (int j = 0; j < T; j++) {
        memcpy(ls->keys + (size_t)j * Dh, ls->qk + (size_t)j * 2 * A + A + (size_t)head * Dh,
               (size_t)Dh * sizeof(float));
        memcpy(ls->values + (size_t)j * Dh, ls->v + (size_t)j * A + (size_t)head * Dh,
               (size_t)Dh * sizeof(float));
    }
    /* the scores: the forward pass's product of the token's block of query rows,
     * before its softmax (vit_att_block, gemm_only) */
    int nb = vit_att_blocks(T), blk = 0;
    while (blk + 1 < nb && vit_att_block_start(T, blk + 1) <= token) blk++;
    int r0 = vit_att_block_start(T, blk), r1 = vit_att_block_start(T, blk + 1);
    VitAttMod mod;
    vit_att_block(ls->sel, ls->qk + (size_t)head * Dh, ls->qk + A + (size_t)head * Dh, 2 * A, r0,
                  r1, T, Dh, vit_att_scale(c), 1,
                  vit_att_mod(&mod, run->intervention, c, ls->layer));
    memcpy(ls->scores, ls->sel + (t - (size_t)r0) * T, (size_t)T * sizeof(float));
    /* the probabilities as the maps read them */
    AttReader rd;
    VitStatus rc = vit_att_reader_init(&rd, run, err);
    if (rc) return rc;
    const float *blkp = vit_att_reader_block(&rd, l, head, blk);
    memcpy(ls->probs, blkp + (t - (size_t)r0) * T, (size_t)T * sizeof(float));
    vit_att_reader_free(&rd);
    if (vit_cancelled(run)) return vit_cancelled_error(err, "lesson");
    if (c->rope && ls->rope)
        lesson_rope(ls, vit_att_mod(&mod, run->intervention, c, ls->layer), token);
    ls->norm_in = row_norm(x, D);
    ls->norm_mid = row_norm(ls->xm + t * D, D);
    ls->norm_out = row_norm(ls->out + t * D, D);
    int on = 0;
    for (int i = 0; i < F; i++) on += ls->hid[t * F + (size_t)i] > 0.0f;
    ls->gelu_share = (float)on / (float)F;
    ls->head = head, ls->token = token;
    return VIT_OK;
}

/* --- step 5: the head -------------------------------------------------------------- */

VitStatus vit_lesson_head(float *cls_norm, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!c->n_classes || !run->logits)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: the model has no classification head (a backbone): no "
                             "logits to show",
                             c->name);
    if (!run->tokens || !same_shapes(&run->cfg, c))
        return vit_set_error(err, VIT_ERR_ARG, "lesson: the run was not made for %s", c->name);
    /* timm: x = self.norm(x); x = x[:, 0] (or the pooling, then fc_norm): the head's own
     * input (head.c), its first D floats */
    size_t W = (size_t)vit_head_width(c), D = (size_t)c->dim, S = vit_head_scratch_floats(c);
    float *hin = malloc((W + D + S) * sizeof *hin); /* and the MAP head's scratch */
    if (!hin) return vit_set_error(err, VIT_ERR_NOMEM, "lesson: out of memory");
    vit_head(NULL, vit,
             &(VitHeadIO){.hin = hin,
                          .x = run->tokens + (size_t)c->n_layers * c->n_tokens * D,
                          .in_stride = (size_t)c->n_tokens,
                          .row_stride = 1,
                          .n = 1,
                          .token = -1,
                          .drop = run->intervention ? run->intervention->drop : NULL,
                          .scratch = hin + W + D});
    memcpy(cls_norm, hin, D * sizeof *hin);
    free(hin);
    return VIT_OK;
}

/* --- step 5 of a MAP head: the probe ------------------------------------------------ */

void vit_lesson_probe_free(VitLessonProbe *p) {
    free(p->mem);
    memset(p, 0, sizeof *p);
}

VitStatus vit_lesson_probe(VitLessonProbe *p, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    memset(p, 0, sizeof *p);
    if (c->head_pool != VIT_POOL_MAP || !vit->w.map.probe)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: the model has no attention-pooling (MAP) head: no probe",
                             c->name);
    if (!run->tokens || !same_shapes(&run->cfg, c))
        return vit_set_error(err, VIT_ERR_ARG, "lesson: the run was not made for %s", c->name);
    size_t D = (size_t)c->dim, HN = (size_t)c->n_heads * c->n_patches,
           S = vit_head_scratch_floats(c);
    if (!(p->mem = malloc((HN + 5 * D) * sizeof *p->mem))) goto nomem;
    float *scratch = malloc(S * sizeof *scratch);
    if (!scratch) goto nomem;
    p->att = p->mem, p->query = p->att + HN, p->weighted = p->query + D;
    p->attended = p->weighted + D, p->mlp = p->attended + D, p->embedding = p->mlp + D;
    p->probe = vit->w.map.probe;
    /* vit_forward's call (forward.c), the logits and the text head's embedding left out:
     * the pooling alone, on the run's pool as the run did it */
    vit_head(run->pool, vit,
             &(VitHeadIO){.hin = p->embedding,
                          .x = run->tokens + (size_t)c->n_layers * c->n_tokens * D,
                          .in_stride = (size_t)c->n_tokens,
                          .row_stride = 1,
                          .n = 1,
                          .token = -1,
                          .drop = run->intervention ? run->intervention->drop : NULL,
                          .probe_att = p->att,
                          .scratch = scratch});
    VitProbeParts parts = vit_probe_parts(vit_head_probe_scratch(c, scratch), c->dim, c->mlp_dim);
    memcpy(p->query, parts.q, D * sizeof *p->query);
    memcpy(p->weighted, parts.o, D * sizeof *p->weighted);
    memcpy(p->attended, parts.a, D * sizeof *p->attended);
    memcpy(p->mlp, parts.t, D * sizeof *p->mlp);
    free(scratch);
    return VIT_OK;
nomem:
    vit_lesson_probe_free(p);
    return vit_set_error(err, VIT_ERR_NOMEM, "lesson: out of memory");
}
