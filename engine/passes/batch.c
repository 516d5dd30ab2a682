/* batch.c - the forward pass of several inputs at once, class probabilities only
 * (vit_forward_batch), for faithfulness tests: every perturbed copy of a photo in one
 * pass rather than one pass each.
 *
 * Row-major. Linear weights keep PyTorch's [out, in] layout: out[R, O] = inp[R, I] .
 * w[O, I]^T + b[O] (vit_linear, engine/passes/block.c). The maths is vit_forward's, the
 * same block (vit_block) on the same steps; what differs is the layout: the n images'
 * token rows are stacked, image after image, into [n*T, .] buffers, so that each linear
 * layer is one GEMM over n*T rows and its weights are packed and read once for the
 * batch, not once per image. Attention alone is per image: image i's queries see image
 * i's keys and values only (rows [i*T, (i+1)*T)).
 *
 * The residual stream stays in place in x: proj's and fc2's epilogues add into it
 * (x = x + ls * y), where vit_forward, which keeps every layer's tokens, writes the
 * sum into the next buffer; the arithmetic is the same. The last block is computed
 * only for the rows the head reads (CLS, and DeiT's distillation token): its attention
 * for those query rows alone, then proj and the MLP on them gathered into xh [hr, n, D]
 * (every image's CLS row, then every image's distillation row), so that the head too
 * is one GEMM over the n rows. A pooled head (VitConfig.head_pool) reads every token: its
 * last block is computed as the others, and the head pools each image's rows of x. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- buffers ----------------------------------------------------------------- */

/* ctx's columns: the attention's width A (vit_att_width), or D when wider (it holds the
 * embedded tokens before norm_pre, [T, D]). */
static size_t ctx_cols(const VitConfig *c) {
    int A = vit_att_width(c);
    return (size_t)(A > c->dim ? A : c->dim);
}

/* The floats of vit_batch_init (vit.h): B*(N*3P^2 + T*(2D + 3A + ctx_cols + F) + 2D + 2C
 * + E) + n_threads*VIT_ATT_BLOCK*T into *n; 0 when that overflows size_t. */
static int batch_floats(size_t *n, const VitConfig *c, int max_batch, int n_threads) {
    size_t B = (size_t)max_batch, N = (size_t)c->n_patches, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)vit_mlp_in_width(c), C = (size_t)c->n_classes,
           P = (size_t)c->patch_size, A = (size_t)vit_att_width(c), per = 0;
    *n = 0;
    return vit_add_product(&per, N, 3 * P * P) &&
           vit_add_product(&per, T, 2 * D + 3 * A + ctx_cols(c) + F) &&
           vit_add_product(&per, 2, D + C) && vit_add_product(&per, 1, (size_t)c->embed_dim) &&
           vit_add_product(n, B, per) && vit_add_product(n, (size_t)n_threads * VIT_ATT_BLOCK, T) &&
           vit_add_product(n, 1, vit_head_scratch_floats(c));
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VIT_MAX_THREADS ? VIT_MAX_THREADS : (int)n;
}

VitStatus vit_batch_init(VitBatch *b, const Vit *vit, int max_batch, int n_threads, VitError *err) {
    memset(b, 0, sizeof *b);
    const VitConfig *c = &vit->cfg;
    if (max_batch < 1 || n_threads < 0 || n_threads > VIT_MAX_THREADS)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: batch of up to %d inputs on %d threads (expected at least 1 "
                             "input, 0 .. %d threads)",
                             c->name, max_batch, n_threads, VIT_MAX_THREADS);
    if (!vit_has_head(vit))
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: a backbone without classification head: no class "
                             "probabilities to compute",
                             c->name);
    if (!n_threads) n_threads = default_threads();
    size_t n = 0;
    /* row counts are ints in the GEMM calls: n*T rows must fit one */
    if ((size_t)max_batch * (size_t)c->n_tokens > (size_t)INT32_MAX ||
        !batch_floats(&n, c, max_batch, n_threads) || n > VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: a batch of %d inputs needs more than the limit of %llu bytes "
                             "of activations",
                             c->name, max_batch, (unsigned long long)VIT_MAX_ACTIVATION_BYTES);
    b->mem = malloc(n * sizeof(float));
    if (!b->mem)
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: cannot allocate %zu MB of activations for %d inputs", c->name,
                             n * sizeof(float) >> 20, max_batch);
    if (!(b->pool = vit_pool_new(n_threads))) {
        free(b->mem);
        b->mem = NULL;
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot start %d threads", c->name, n_threads);
    }
    size_t B = (size_t)max_batch, N = (size_t)c->n_patches, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)vit_mlp_in_width(c), C = (size_t)c->n_classes,
           P = (size_t)c->patch_size, A = (size_t)vit_att_width(c);
    float *p = b->mem;
    b->patches = p, p += B * N * 3 * P * P;
    b->x = p, p += B * T * D;
    b->xn = p, p += B * T * D;
    b->qk = p, p += B * T * 2 * A;
    b->v = p, p += B * T * A;
    b->ctx = p, p += B * T * ctx_cols(c);
    b->hid = p, p += B * T * F;
    b->xh = p, p += 2 * B * D;
    b->logits = p, p += B * C;
    b->logits_dist = p, p += B * C;
    b->embed = p, p += B * (size_t)c->embed_dim;
    b->att_scratch = p, p += (size_t)n_threads * VIT_ATT_BLOCK * T;
    b->head_scratch = p, p += vit_head_scratch_floats(c);
    memset(b->mem, 0, n * sizeof(float));
    b->cfg = *c;
    b->max_batch = max_batch;
    b->n_threads = n_threads;
    b->mem_floats = n;
    return VIT_OK;
}

void vit_batch_free(VitBatch *b) {
    if (!b) return;
    vit_pool_free(b->pool);
    free(b->mem);
    memset(b, 0, sizeof *b);
}

/* --- steps --------------------------------------------------------------------- */

/* Image i's input tokens x[i*T .. (i+1)*T) from its patch embedding pe[N, D]:
 * timm _pos_embed: to_cat = [cls_token, dist_token?, reg_token?]
 *   pos_embed covers the prefix (default): x = cat(to_cat + [x]) + pos_embed
 *   no_embed_class (registers):             x = cat(to_cat + [x + pos_embed])
 * the same sums, in the same order, as vit_forward's. */
static void embed_tokens(float *x, const float *pe, const Vit *vit, const VitIntervention *iv) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    size_t D = (size_t)c->dim, Np = (size_t)c->n_prefix, N = (size_t)c->n_patches;
    memcpy(x + Np * D, pe, N * D * sizeof(float));
    if (w->cls_token) memcpy(x, w->cls_token, D * sizeof(float)); /* SigLIP: none */
    if (w->dist_token) memcpy(x + D, w->dist_token, D * sizeof(float));
    if (w->reg_token)
        memcpy(x + (1 + (size_t)c->has_dist_token) * D, w->reg_token,
               (size_t)c->n_registers * D * sizeof(float));
    vit_add_pos_embed(x + (Np - (size_t)w->pos_prefix) * D, vit, iv);
}

/* Does b fit vit's shapes (a batch may serve another model of the same shapes)? */
static int same_shapes(const VitConfig *a, const VitConfig *c) {
    return a->image_h == c->image_h && a->image_w == c->image_w && a->patch_size == c->patch_size &&
           a->grid_w == c->grid_w && a->n_patches == c->n_patches && a->n_prefix == c->n_prefix &&
           a->has_dist_token == c->has_dist_token && a->n_registers == c->n_registers &&
           a->n_tokens == c->n_tokens && a->dim == c->dim && a->n_heads == c->n_heads &&
           a->mlp_dim == c->mlp_dim && a->n_layers == c->n_layers && a->n_classes == c->n_classes &&
           a->norm_pre == c->norm_pre;
}

/* --- the blocks and the head, from any layer ------------------------------------ */

void vit_batch_embed(VitBatch *b, const Vit *vit, const float *inputs, int n) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    const VitIntervention *iv = b->intervention;
    VitPool *pool = b->pool;
    int N = c->n_patches, T = c->n_tokens, D = c->dim, K = 3 * c->patch_size * c->patch_size;
    float *x = b->x, *xn = b->xn;

    /* timm: x = self.patch_embed(x): one GEMM over the n*N patches of every image */
    vit_im2col(pool, b->patches, inputs, n, c);
    for (int i = 0; i < n; i++) /* a filled patch: pixels 0 */
        vit_fill_patches(b->patches + (size_t)i * N * K, iv, c);
    vit_linear(pool, (VitLinear){.out = xn,
                                 .ld_out = D,
                                 .inp = b->patches,
                                 .w = w->patch_w,
                                 .b = w->patch_b,
                                 .T = n * N,
                                 .n_in = K,
                                 .n_out = D});
    /* with norm_pre (CLIP's ln_pre) the embedded tokens go into ctx first, then
     * x = norm_pre(ctx) */
    float *e = c->norm_pre ? b->ctx : x;
    for (int i = 0; i < n; i++)
        embed_tokens(e + (size_t)i * T * D, xn + (size_t)i * N * D, vit, iv);
    if (c->norm_pre) vit_layernorm(pool, x, e, w->norm_pre_w, w->norm_pre_b, n * T, D, c->ln_eps);
}

void vit_batch_layers(VitBatch *b, const Vit *vit, int n, int l0, int l1) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    const VitIntervention *iv = b->intervention;
    VitPool *pool = b->pool;
    int T = c->n_tokens, D = c->dim, L = c->n_layers, H = c->n_heads;
    /* rows the head reads: CLS (and distillation) token; a pooled head reads every token,
     * and its last block is computed as the others */
    int hr = vit_head_rows(vit);
    float *x = b->x, *xn = b->xn, *xh = b->xh;
    for (int l = l0; l < l1; l++) {
        int last = l == L - 1 && hr < T;
        /* the last block: only the head's rows go on, gathered (row r of image i at
         * r*n + i) into xh, where its residual stream continues */
        if (last)
            for (int r = 0; r < hr; r++)
                for (int i = 0; i < n; i++)
                    memcpy(xh + ((size_t)r * n + i) * D, x + ((size_t)i * T + r) * D,
                           (size_t)D * sizeof(float));
        float *xs = last ? xh : x; /* the stream, in place */
        /* head masks: each input's own (vit_head_importance), or the intervention's */
        const uint8_t *ab = b->ablate_each     ? b->ablate_each + (size_t)l * H
                            : iv && iv->ablate ? iv->ablate + (size_t)l * H
                                               : NULL;
        VitAttMod mod;
        VitBlockIO io = {.n = n,
                         .rows = last ? hr : T,
                         .head_block = last,
                         .x = x,
                         .res = xs,
                         .xn1 = xn,
                         .qk = b->qk,
                         .v = b->v,
                         .scratch = b->att_scratch,
                         .ctx = b->ctx,
                         .tmp = xn,
                         .xm = xs,
                         .xn2 = xn,
                         .hid = b->hid,
                         .out = xs,
                         .ablate = ab,
                         .ablate_stride = b->ablate_each ? (size_t)L * H : 0,
                         .mod = vit_att_mod(&mod, iv, c, l)};
        vit_block(pool, &w->blocks[l], c, &io);
    }
}

void vit_batch_head(VitBatch *b, const Vit *vit, int n, float *logits, float *probs) {
    const VitConfig *c = &vit->cfg;
    int T = c->n_tokens, C = c->n_classes;
    /* the head (head.c) on every input: the CLS (and distillation) rows gathered in xh
     * (row r of input i at r*n + i), or a pooled head on the stacked tokens in x */
    int gathered = vit_head_rows(vit) < T;
    vit_head(b->pool, vit,
             &(VitHeadIO){.logits = b->logits,
                          .logits_dist = b->logits_dist,
                          .embed = vit->w.text_emb ? b->embed : NULL,
                          .hin = b->xn,
                          .x = gathered ? b->xh : b->x,
                          .in_stride = gathered ? 1 : (size_t)T,
                          .row_stride = gathered ? (size_t)n : 1,
                          .n = n,
                          .token = -1,
                          .drop = b->intervention ? b->intervention->drop : NULL,
                          .scratch = b->head_scratch});
    size_t nC = (size_t)n * C;
    if (logits) memcpy(logits, b->logits, nC * sizeof(float));
    if (probs) vit_probs_rows(probs, b->logits, n, C, vit);
}

/* --- entry point --------------------------------------------------------------- */

VitStatus vit_forward_batch(VitBatch *b, const Vit *vit, const float *inputs, int n, float *logits,
                            float *probs, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!b || !b->mem || !same_shapes(&b->cfg, c) || !vit_has_head(vit))
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: batch buffers not made by vit_batch_init for this model",
                             c->name);
    if (n < 1 || n > b->max_batch || !inputs)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: batch of %d inputs%s (expected 1 .. %d, the max_batch of "
                             "vit_batch_init)",
                             c->name, n, inputs ? "" : " at NULL", b->max_batch);
    const VitIntervention *iv = b->intervention;
    VitStatus st = vit_intervention_check(iv, c, err);
    if (st) return st;
    vit_batch_embed(b, vit, inputs, n);
    vit_batch_layers(b, vit, n, 0, c->n_layers);
    vit_batch_head(b, vit, n, logits, probs);
    return VIT_OK;
}
