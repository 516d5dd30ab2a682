/* forward.c - the ViT forward pass, keeping every attention matrix (or what
 * recomputes it exactly): the run's buffers (VitRun), stopping early (VitControl),
 * and the pass itself: the patch embedding, L blocks (vit_block, engine/passes/block.c,
 * which holds the steps, their threads and their layout), the head.
 *
 * The residual stream runs through VitRun.tokens: block l reads tokens[l], proj's
 * epilogue writes the middle of the block xm = tokens[l] + ls1 * proj(ctx) (into
 * run->x), fc2's writes tokens[l + 1] = xm + ls2 * fc2(...). Kept for the backward
 * pass (VitRun.blocks_kept): every layer's queries and keys, values, xm (proj's
 * epilogue writes it there) and fc1's output (GELU's epilogue reads it and writes
 * run->hid).
 *
 * What is skipped: the last block's output is read only at the tokens the head
 * classifies (CLS, distillation; every token for a pooled head), so after its attention
 * only those rows go through proj and the MLP (none for a backbone without head), unless
 * the run keeps every token (VitRunOptions.all_tokens, for the token views). A run that keeps
 * the attention computes all of it, which is what the maps need; one that recomputes
 * it skips the last block's blocks of query rows that nothing after reads. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- stopping early (VitControl) -------------------------------------------- */

/* The fields are plain ints in vit.h (no <stdatomic.h> there); GCC's and Clang's
 * __atomic builtins make every access atomic. Relaxed order: the flag carries no data. */
void vit_control_cancel(VitControl *c) {
    __atomic_store_n(&c->cancel_, 1, __ATOMIC_RELAXED);
}

void vit_control_reset(VitControl *c) {
    __atomic_store_n(&c->cancel_, 0, __ATOMIC_RELAXED);
    vit_control_report(c, 0, 0);
}

int vit_control_cancelled(const VitControl *c) {
    return __atomic_load_n(&c->cancel_, __ATOMIC_RELAXED) != 0;
}

void vit_control_report(VitControl *c, int done, int total) {
    __atomic_store_n(&c->total_, total, __ATOMIC_RELAXED);
    __atomic_store_n(&c->done_, done, __ATOMIC_RELAXED);
}

void vit_control_progress(const VitControl *c, int *done, int *total) {
    *done = __atomic_load_n(&c->done_, __ATOMIC_RELAXED);
    *total = __atomic_load_n(&c->total_, __ATOMIC_RELAXED);
    if (*done > *total) *done = *total; /* read between the two stores of a report */
}

int vit_cancelled(const VitRun *run) {
    return run->control && vit_control_cancelled(run->control);
}

void vit_report(const VitRun *run, int done, int total) {
    if (run->control) vit_control_report(run->control, done, total);
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VIT_MAX_THREADS ? VIT_MAX_THREADS : (int)n;
}

VitStatus vit_run_init_with(VitRun *run, const Vit *vit, const VitRunOptions *opt, VitError *err) {
    memset(run, 0, sizeof *run);
    const VitConfig *c = &vit->cfg;
    VitRunOptions o = opt ? *opt : (VitRunOptions){0};
    if (o.n_threads < 0 || o.n_threads > VIT_MAX_THREADS || o.att < VIT_ATT_AUTO ||
        o.att > VIT_ATT_RECOMPUTE)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: run options: %d threads (expected 0 .. %d), attention storage "
                             "%d (expected 0 .. 2)",
                             c->name, o.n_threads, VIT_MAX_THREADS, (int)o.att);
    int n_threads = o.n_threads ? o.n_threads : default_threads();
    int keep = vit_keep_att(c, o.att), blocks = vit_keep_blocks(c, keep);
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)vit_mlp_in_width(c), N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, L = (size_t)c->n_layers, H = (size_t)c->n_heads,
           C = (size_t)c->n_classes, A = (size_t)vit_att_width(c);
    size_t n = 0;
    if (!vit_run_floats(c, keep, n_threads, &n) || n > VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: activations over the limit of %llu bytes (vit_load refuses "
                             "such a model)",
                             c->name, (unsigned long long)VIT_MAX_ACTIVATION_BYTES);
    run->mem = malloc(n * sizeof(float));
    if (!run->mem)
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot allocate %zu MB of activations",
                             c->name, n * sizeof(float) >> 20);
    if (!(run->pool = vit_pool_new(n_threads))) {
        free(run->mem);
        run->mem = NULL;
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot start %d threads", c->name, n_threads);
    }
    run->mem_floats = n;
    run->cfg = *c;
    run->n_threads = n_threads;
    run->att_kept = keep;
    run->all_tokens = o.all_tokens != 0;
    run->blocks_kept = blocks;
    float *p = run->mem;
    run->input = p;
    p += 3 * Sh * Sw;
    run->patches = p;
    p += N * 3 * P * P;
    run->x = p;
    p += T * D;
    run->xn = p;
    p += T * D;
    run->ctx = p;
    p += T * A;
    run->v = p;
    p += (blocks ? L : 1) * T * A;
    run->hid = p;
    p += T * F;
    run->tokens = p;
    p += (L + 1) * T * D;
    run->qk = p;
    p += (keep && !blocks ? 1 : L) * T * 2 * A;
    if (blocks) {
        run->xm = p;
        p += L * T * D;
        run->hpre = p;
        p += L * T * F;
    }
    if (keep) {
        run->att = p;
        p += L * H * T * T;
    } else {
        run->att_scratch = p;
        p += (size_t)n_threads * VIT_ATT_BLOCK * T;
    }
    if (C) {
        run->logits = p;
        p += C;
        run->probs = p;
        p += C;
        run->logits_dist = p; /* a run may serve another model of the same shapes */
        p += C;
    }
    if (c->embed_dim > 0) {
        run->img_embed = p;
        p += (size_t)c->embed_dim;
    }
    if (c->norm_pre) {
        run->pre = p;
        p += T * D;
    }
    if (c->head_pool == VIT_POOL_MAP) {
        run->probe_att = p;
        p += H * N;
        run->head_scratch = p;
        p += vit_head_scratch_floats(c);
    }
    memset(run->mem, 0, n * sizeof(float));
    run->crop_w = c->image_w;
    run->crop_h = c->image_h;
    return VIT_OK;
}

VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err) {
    return vit_run_init_with(run, vit, NULL, err);
}

void vit_run_free(VitRun *run) {
    if (!run) return;
    vit_pool_free(run->pool);
    free(run->mem);
    memset(run, 0, sizeof *run);
}

/* --- entry points ---------------------------------------------------------- */

/* The embedded tokens into tokens[0], block 0's input; with norm_pre (CLIP's ln_pre) they
 * go into run->pre first, and tokens[0] = norm_pre(pre). gemm_only: forward_pass's. */
static void embed_tokens(VitRun *run, const Vit *vit, int gemm_only) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    VitPool *pool = run->pool;
    int N = c->n_patches, T = c->n_tokens, D = c->dim, Np = c->n_prefix,
        K = 3 * c->patch_size * c->patch_size;
    float *x = c->norm_pre ? run->pre : run->tokens;
    /* timm: x = self.patch_embed(x)  (Conv2d then flatten(2).transpose(1, 2)) */
    const VitIntervention *iv = run->intervention;
    if (!gemm_only) vit_im2col(pool, run->patches, run->input, 1, c);
    if (!gemm_only) vit_fill_patches(run->patches, iv, c); /* a filled patch: pixels 0 */
    vit_linear(pool, (VitLinear){.out = x + (size_t)Np * D,
                                 .ld_out = D,
                                 .inp = run->patches,
                                 .w = w->patch_w,
                                 .b = w->patch_b,
                                 .T = N,
                                 .n_in = K,
                                 .n_out = D,
                                 .gemm_only = gemm_only});
    /* timm _pos_embed: to_cat = [cls_token, dist_token?, reg_token?]
     *   pos_embed covers the prefix (default): x = cat(to_cat + [x]) + pos_embed
     *   no_embed_class (registers):             x = cat(to_cat + [x + pos_embed]) */
    if (gemm_only) return;
    if (w->cls_token) memcpy(x, w->cls_token, (size_t)D * sizeof(float)); /* SigLIP: none */
    if (w->dist_token) memcpy(x + D, w->dist_token, (size_t)D * sizeof(float));
    if (w->reg_token)
        memcpy(x + (size_t)(1 + c->has_dist_token) * D, w->reg_token,
               (size_t)c->n_registers * D * sizeof(float));
    vit_add_pos_embed(x + (size_t)(Np - w->pos_prefix) * D, vit, iv);
    /* CLIP's model.py: x = self.ln_pre(x) (transformers: pre_layrnorm) */
    if (c->norm_pre)
        vit_layernorm(pool, run->tokens, x, w->norm_pre_w, w->norm_pre_b, T, D, c->ln_eps);
}

/* Block l: tokens[l] through xm (the block's middle) into tokens[l + 1], `rows` rows of
 * its output computed; the block internals the backward pass reads, per layer when kept
 * (blocks_kept). Returns the rows computed (io.rows, 0: nothing after reads more), -1 when
 * the run was cancelled inside the block. */
static int run_block(VitRun *run, const Vit *vit, int l, int rows, int gemm_only) {
    const VitConfig *c = &vit->cfg;
    int T = c->n_tokens, D = c->dim, H = c->n_heads, F = vit_mlp_in_width(c), A = vit_att_width(c);
    const VitIntervention *iv = run->intervention;
    float *xn = run->xn;
    int kb = run->blocks_kept;
    size_t lTD = (size_t)l * T * D, lTA = (size_t)l * T * A;
    const float *xin = run->tokens + lTD;
    VitAttMod mod;
    VitBlockIO io = {.n = 1,
                     .rows = rows,
                     .x = xin,
                     .res = xin,
                     .xn1 = xn,
                     .qk = run->att_kept && !kb ? run->qk : run->qk + 2 * lTA,
                     .v = kb ? run->v + lTA : run->v,
                     .att = run->att ? run->att + (size_t)l * H * T * T : NULL,
                     .scratch = run->att_scratch,
                     .ctx = run->ctx,
                     .tmp = xn,
                     .xm = kb ? run->xm + lTD : run->x,
                     .xn2 = xn,
                     .hpre = kb ? run->hpre + (size_t)l * T * F : NULL,
                     .hid = run->hid,
                     .out = run->tokens + lTD + (size_t)T * D,
                     .run = run,
                     .ablate = iv && iv->ablate ? iv->ablate + (size_t)l * H : NULL,
                     .mod = vit_att_mod(&mod, iv, c, l),
                     .gemm_only = gemm_only};
    if (!vit_block(run->pool, &vit->w.blocks[l], c, &io)) return -1;
    return io.rows;
}

/* The forward pass; gemm_only: the same cblas_sgemm calls on the same buffers
 * and nothing else (no im2col, bias, LayerNorm, softmax, GELU, residual). */
static void forward_pass(VitRun *run, const Vit *vit, int gemm_only) {
    const VitConfig *c = &vit->cfg;
    int T = c->n_tokens, D = c->dim, L = c->n_layers;
    /* rows of the last block's output the head reads: CLS (and distillation) token, or
     * every token for a pooled head (vit_head_rows); a CLIP tower's image embedding reads
     * the CLS token even without a text head, SigLIP's MAP head every patch; a backbone
     * without a head computes them too, for its embedding (vit_embedding, a score of it) */
    int clip = c->embed_dim > 0 && run->img_embed;
    int head_rows = vit_head_rows(vit);
    int last_rows = run->all_tokens ? T : head_rows; /* rows of the last block computed */

    embed_tokens(run, vit, gemm_only);
    for (int l = 0; l < L; l++) {
        if (vit_cancelled(run)) return; /* the outputs are undefined: the caller knows */
        vit_report(run, l, L);
        int rows = run_block(run, vit, l, l == L - 1 ? last_rows : T, gemm_only);
        if (rows < 0) return;
        if (rows == 0) break;
    }

    /* the last block's output: only its first last_rows rows were computed; the
     * others keep the block's input, as the stream did in place */
    float *x = run->tokens + (size_t)L * T * D;
    if (!gemm_only && last_rows < T)
        memcpy(x + (size_t)last_rows * D, x - (size_t)T * D + (size_t)last_rows * D,
               (size_t)(T - last_rows) * D * sizeof(float));

    /* the head (head.c): timm: x = self.norm(x); x = self.pool(x) (x[:, 0], or the mean
     * of the patch tokens); x = self.fc_norm(x); x = self.head(x). The norm is per token,
     * so normalising the rows the head reads alone gives the same numbers. */
    vit_report(run, L, L);
    if ((!c->n_classes && !clip) || vit_cancelled(run)) return;
    int C = c->n_classes;
    const VitIntervention *iv = run->intervention;
    vit_head(run->pool, vit,
             &(VitHeadIO){.logits = C ? run->logits : NULL,
                          .logits_dist = run->logits_dist,
                          .embed = clip ? run->img_embed : NULL,
                          .hin = run->xn,
                          .x = x,
                          .in_stride = (size_t)T,
                          .row_stride = 1,
                          .n = 1,
                          .token = -1,
                          .drop = iv ? iv->drop : NULL,
                          .gemm_only = gemm_only,
                          .probe_att = run->probe_att,
                          .scratch = run->head_scratch});
    if (!C) return;
    if (!gemm_only) vit_probs_rows(run->probs, run->logits, 1, C, vit);
}

void vit_forward(VitRun *run, const Vit *vit) {
    forward_pass(run, vit, 0);
}

void vit_forward_gemms(VitRun *run, const Vit *vit) {
    forward_pass(run, vit, 1);
}
