/* backward.c - the gradient of one class's logit through the ViT, by hand.
 *
 * What flows back is only what the explanation maps read: the gradients at the
 * activations (attention probabilities, block outputs, input pixels), never at the
 * weights. A linear layer out = inp . w^T + b sends back d_inp = d_out . w, i.e.
 * cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ...) on PyTorch's [out, in]
 * weights, split over the run's pool by columns of d_inp (back_linear).
 *
 * Memory. The forward pass keeps the residual stream at every block boundary
 * (VitRun.tokens [L + 1, T, D]). When the run keeps its attention and the block
 * internals fit beside it (VitRun.blocks_kept: DeiT-Tiny to ViT-B at 224 px), the
 * forward pass also keeps per layer what the backward reads: queries and keys,
 * values, the residual xm between attention and MLP and fc1's output before GELU;
 * the backward pass reads them. Otherwise (the attention recomputed: large inputs),
 * going down from the top, each block's internals are recomputed from its input
 * tokens by the forward pass's own block (vit_block, up to fc1; the attention
 * probabilities read from run->att or recomputed by vit_att_block, the very numbers
 * the forward pass had), then differentiated: one block's activations
 * at a time, as activation checkpointing does. Either way the same numbers.
 *
 * A block, timm's Block.forward:
 *   xn = norm1(x); q, k, v = qkv(xn); A_h = softmax(q_h k_h^T / sqrt(Dh))
 *   ctx = A v; xm = x + ls1 * proj(ctx); z = xm + ls2 * fc2(gelu(fc1(norm2(xm))))
 * and back, with dz given:
 *   dxm = dz + norm2'(ls2 * dz . fc2_w (.) gelu'(hpre) . fc1_w)
 *   dctx = ls1 * dxm . proj_w
 *   dA_h = dctx_h . v_h^T;  dv_h = A_h^T . dctx_h
 *   dS_h = A_h (.) (dA_h - rowsum(dA_h (.) A_h))          (softmax's Jacobian)
 *   dq_h = dS_h . k_h / sqrt(Dh);  dk_h = dS_h^T . q_h / sqrt(Dh)
 *   dx = dxm + norm1'([dq dk dv] . qkv_w)
 * LayerNorm y = (x - mean) * rstd * w + b sends back
 *   dx = rstd * (g - mean(g) - xhat * mean(g (.) xhat)),  g = dy (.) w, xhat = (x - mean) * rstd.
 * AttnLRP's pass (lrp 1) changes three steps: rstd is a constant (dx = rstd * (g -
 * mean(g))), gelu' becomes gelu(x)/x, and dS = 0 (A a constant: nothing reaches q, k).
 * DINOv3's parts: a rotary embedding q' = R_p q, k' = R_p k (a rotation per patch p) sends
 * dq = R_p^T dq' back (the rotation by -a); a gated MLP h = act(g) * u (g, u the gate's and
 * the value's outputs) sends dg = dh u act'(g), du = dh act(g) (AttnLRP: the uniform rule,
 * half of dh to each factor, and act(g)/g for act'). EVA-02's: the same rotation on
 * interleaved pairs; the sub-LN of B/L's MLP, fc2(norm(h)), LayerNorm's backward over F
 * (AttnLRP: its standard deviation held constant, as every LayerNorm's). */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- buffers --------------------------------------------------------------- */

/* One block's activations and gradients, carved from the end of VitGrad.mem (the
 * activations only when the run does not keep them: VitRun.blocks_kept). */
typedef struct {
    float *xn1;    /* [T, D] norm1 output */
    float *qk;     /* [T, 2D] queries, keys */
    float *v;      /* [T, D] values */
    float *ctx;    /* [T, D] attention output before proj */
    float *xm;     /* [T, D] residual stream between attention and MLP */
    float *xn2;    /* [T, D] norm2 output */
    float *hpre;   /* [T, Fi] fc1 output before GELU (Fi = vit_mlp_in_width: 2F gated) */
    float *dz;     /* [T, D] gradient at the block's output, then at its input */
    float *dxm;    /* [T, D] at xm */
    float *dtmp;   /* [T, D] */
    float *dh;     /* [T, Fi] at the MLP hidden (gated: at the product, then the gates and
                      values) */
    float *hn;     /* [T, F] a gated MLP's product, the sub-LN's input (cfg.mlp_norm) */
    float *dhn;    /* [T, F] the gradient at the sub-LN's output, then at its input */
    float *dqkv;   /* [T, 3D] at queries, keys, values */
    float *dctx;   /* [T, D] at ctx (when g->dctx does not keep it) */
    float *att;    /* [n_threads, 2, VIT_ATT_BLOCK, T] attention / gradient blocks */
    float *dpatch; /* [N, 3*P*P] at the im2col rows */
    float *hdz;    /* [HR, D] LeGrad's gradient at a layer's head rows (HR: head_rows) */
    float *hctx;   /* [HR, A] and at its ctx */
    float *row;    /* [T] LeGrad's row of dA */
    float *head;   /* [vit_head_backward_floats] the head's gradient (head.c) */
} Scratch;

/* The rows any head of config c reads per input, at most (vit_head_rows): the CLS and
 * distillation tokens, or every token for a pooled head. */
static size_t head_rows(const VitConfig *c) {
    return c->head_pool == VIT_POOL_CLS ? 2 : (size_t)c->n_tokens;
}

/* Floats of the buffers: kept ones (into g->...) and scratch; p NULL counts only. */
static int carve(VitGrad *g, Scratch *s, const VitConfig *c, int kept, int n_threads,
                 size_t *n_floats) {
    int redo = !vit_keep_blocks(c, kept); /* the block internals recomputed here */
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, F = (size_t)vit_mlp_in_width(c),
           L = (size_t)c->n_layers, H = (size_t)c->n_heads, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, S = (size_t)c->image_h * (size_t)c->image_w,
           A = (size_t)vit_att_width(c);
    size_t HR = head_rows(c);
    /* name, rows, cols: in this order in memory */
    size_t LH = 0, TT = 0, LT = 0, TB = 0, PP = 0;
    if (!vit_add_product(&LH, L, H) || !vit_add_product(&TT, T, T) || !vit_add_product(&LT, L, T) ||
        !vit_add_product(&TB, (size_t)n_threads * 2 * VIT_ATT_BLOCK, T) ||
        !vit_add_product(&PP, 3 * P, P))
        return 0;
    struct {
        float **p;
        size_t a, b;
    } parts[] = {
        {&g->grad_att, kept ? LH : 0, TT},
        {&g->dctx, kept ? 0 : LT, A},
        {&g->grad_tokens, LT, D},
        {&g->grad_input, 3, S},
        {&g->lrp_input, 3, S},
        {&g->cam_act, N, D},
        {&g->cam_grad, N, D},
        {&g->legrad, L, N},
        {&g->probe_grad, c->head_pool == VIT_POOL_MAP ? H : 0, N},
        {&s->xn1, T, D},
        {&s->qk, redo ? T : 0, 2 * A},
        {&s->v, redo ? T : 0, A},
        {&s->ctx, redo ? T : 0, A},
        {&s->xm, redo ? T : 0, D},
        {&s->xn2, redo ? T : 0, D},
        {&s->hpre, redo ? T : 0, F},
        {&s->dz, T, D},
        {&s->dxm, T, D},
        {&s->dtmp, T, D},
        {&s->dh, T, F},
        {&s->hn, c->mlp_norm ? T : 0, (size_t)c->mlp_dim},
        {&s->dhn, c->mlp_norm ? T : 0, (size_t)c->mlp_dim},
        {&s->dqkv, T, 3 * A},
        {&s->dctx, T, A},
        {&s->att, TB, 1},
        {&s->dpatch, N, PP},
        {&s->hdz, HR, D},
        {&s->hctx, HR, A},
        {&s->row, 1, T},
        {&s->head, 1, vit_head_backward_floats(c)},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t before = n;
        if (!vit_add_product(&n, parts[i].a, parts[i].b)) return 0;
        *parts[i].p = g->mem && n > before ? g->mem + before : NULL;
    }
    *n_floats = n;
    return 1;
}

VitStatus vit_grad_init(VitGrad *g, const Vit *vit, const VitRun *run, VitError *err) {
    memset(g, 0, sizeof *g);
    const VitConfig *c = &vit->cfg;
    if (run->cfg.n_tokens != c->n_tokens || run->cfg.dim != c->dim ||
        vit_att_width(&run->cfg) != vit_att_width(c) || run->cfg.n_layers != c->n_layers ||
        run->cfg.mlp_dim != c->mlp_dim || run->cfg.image_h != c->image_h ||
        run->cfg.image_w != c->image_w || !run->pool)
        return vit_set_error(err, VIT_ERR_ARG, "%s: the run was not made for this model", c->name);
    Scratch s;
    size_t n = 0;
    if (!carve(g, &s, c, run->att_kept, run->n_threads, &n) ||
        n > VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: backward pass buffers over the limit of %llu bytes", c->name,
                             (unsigned long long)VIT_MAX_ACTIVATION_BYTES);
    g->mem = calloc(n, sizeof(float));
    if (!g->mem)
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot allocate %zu MB for the backward pass",
                             c->name, n * sizeof(float) >> 20);
    carve(g, &s, c, run->att_kept, run->n_threads, &n);
    g->mem_floats = n;
    g->cfg = *c;
    g->target = -1;
    g->grad_att_kept = run->att_kept;
    g->n_threads = run->n_threads;
    return VIT_OK;
}

void vit_grad_free(VitGrad *g) {
    if (!g) return;
    free(g->mem);
    memset(g, 0, sizeof *g);
}

/* --- parallel steps -------------------------------------------------------- */

/* out[M, n_in] = beta * out + dy[M, n_out] . w[n_out, n_in]: a linear layer's
 * input gradient, this thread's slice of the n_in columns (multiples of 16). */
typedef struct {
    float *out;
    const float *dy, *w;
    int ld_out, ld_dy, M, n_out, n_in;
    float beta;
} BackLinear;

static void back_linear_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const BackLinear *a = arg;
    int chunk = ((a->n_in + n_items - 1) / n_items + 15) & ~15;
    int c0 = item * chunk, c1 = c0 + chunk < a->n_in ? c0 + chunk : a->n_in;
    if (c0 >= c1 || a->M == 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->M, c1 - c0, a->n_out, 1.0f, a->dy,
                a->ld_dy, a->w + c0, a->n_in, a->beta, a->out + c0, a->ld_out);
}

static void back_linear(VitPool *pool, BackLinear a) {
    if (a.M > 0) vit_pool_run(pool, back_linear_task, &a, vit_pool_threads(pool));
}

/* LayerNorm's backward on rows [r0, r1): dx (+)= ... from x (the norm's input), its
 * weight w and dy; moments in double as the forward pass takes them. */
void vit_layernorm_backward_rows(float *dx, const float *x, const float *w, const float *dy, int r0,
                                 int r1, int D, float eps, int lrp, int accumulate) {
    for (int t = r0; t < r1; t++) {
        const float *xr = x + (size_t)t * D, *dyr = dy + (size_t)t * D;
        float *dxr = dx + (size_t)t * D;
        double m = 0.0, var = 0.0;
        for (int i = 0; i < D; i++) m += xr[i];
        m /= D;
        for (int i = 0; i < D; i++) var += (xr[i] - m) * (xr[i] - m);
        var /= D;
        double rstd = 1.0 / sqrt(var + eps), sg = 0.0, sgx = 0.0;
        for (int i = 0; i < D; i++) {
            double gi = (double)dyr[i] * w[i];
            sg += gi;
            sgx += gi * (xr[i] - m) * rstd;
        }
        sg /= D, sgx /= D;
        if (lrp) sgx = 0.0; /* the standard deviation held constant */
        for (int i = 0; i < D; i++) {
            double xhat = (xr[i] - m) * rstd;
            float d = (float)(rstd * ((double)dyr[i] * w[i] - sg - xhat * sgx));
            dxr[i] = accumulate ? dxr[i] + d : d;
        }
    }
}

typedef struct {
    float *dx;
    const float *x, *w, *dy;
    int T, D, lrp, accumulate;
    float eps;
} LnBack;

static void ln_back_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const LnBack *a = arg;
    int r0 = (int)((long long)a->T * item / n_items);
    int r1 = (int)((long long)a->T * (item + 1) / n_items);
    vit_layernorm_backward_rows(a->dx, a->x, a->w, a->dy, r0, r1, a->D, a->eps, a->lrp,
                                a->accumulate);
}

static void ln_back(VitPool *pool, LnBack a) {
    if (a.T > 0) vit_pool_run(pool, ln_back_task, &a, vit_pool_threads(pool));
}

typedef struct {
    float *dh;
    const float *hpre;
    int T, F, lrp;
    VitActivation act;
    int gated; /* a gated MLP's product and gate (vit_glu_backward_rows): dh, hpre [T, 2F] */
} GeluBack;

static void gelu_back_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const GeluBack *a = arg;
    int r0 = (int)((long long)a->T * item / n_items);
    int r1 = (int)((long long)a->T * (item + 1) / n_items);
    if (a->gated)
        vit_glu_backward_rows(a->dh, a->hpre, r0, r1, a->F, a->lrp, a->act);
    else if (a->act)
        vit_act_backward_rows(a->dh, a->hpre, r0, r1, a->F, a->lrp, a->act);
    else
        vit_gelu_backward_rows(a->dh, a->hpre, r0, r1, a->F, a->lrp);
}

/* dA[r1 - r0, T] = dctx_h[r0:r1] . v_h^T: the gradient at the attention
 * probabilities of one head, rows [r0, r1). dctx, v: that head's first column of
 * [T, D] matrices. The backward pass and the maps (recomputing it) call this
 * alone, so both get the same values. */
void vit_grad_att_block(float *out, const float *dctx, const float *v, int ld, int r0, int r1,
                        int T, int Dh, const VitAttMod *m) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, T, Dh, 1.0f,
                dctx + (size_t)r0 * ld, ld, v, ld, 0.0f, out, T);
    if (!m || !m->drop) return;
    /* a dropped patch is not in the sequence: no gradient at its row or column */
    int Np = m->n_prefix;
    for (int r = r0; r < r1; r++) {
        float *o = out + (size_t)(r - r0) * T;
        if (r >= Np && m->drop[r - Np]) {
            memset(o, 0, (size_t)T * sizeof(float));
            continue;
        }
        for (int p = 0; p < T - Np; p++)
            if (m->drop[p]) o[Np + p] = 0.0f;
    }
}

/* --- one block ------------------------------------------------------------- */

typedef struct {
    const VitRun *run;
    const Vit *vit;
    VitGrad *g;
    Scratch s;
    VitPool *pool;
    int lrp;
    /* the current block */
    int layer, rows; /* rows: the rows with a gradient at the output (T, or the head's) */
    const float *qk, *v, *xm, *hpre; /* [T, 2A], [T, A], [T, D], [T, F]: the run's (kept) or
                                        the scratch's (recomputed); A: vit_att_width */
    float *dctx;                     /* [T, A]: g->dctx of the layer, or scratch */
} Bw;

/* The attention probabilities of block b of head h in the current layer: a pointer
 * into run->att, or recomputed into buf as the forward pass computed them. */
static const float *att_of(Bw *bw, int h, int b, float *buf) {
    const VitRun *run = bw->run;
    int T = run->cfg.n_tokens, A = vit_att_width(&run->cfg), Dh = run->cfg.head_dim,
        H = run->cfg.n_heads;
    int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
    if (run->att) return run->att + (((size_t)bw->layer * H + h) * T + r0) * T;
    VitAttMod mod;
    vit_att_block(buf, bw->qk + (size_t)h * Dh, bw->qk + A + (size_t)h * Dh, 2 * A, r0, r1, T, Dh,
                  vit_att_scale(&run->cfg), 0,
                  vit_att_mod(&mod, run->intervention, &run->cfg, bw->layer));
    return buf;
}

/* An intervention's head mask (vit.h): an ablated head's ctx columns are 0 in the forward
 * pass, so the gradient at them is 0 too: dctx[R, A]'s columns of the layer's ablated heads
 * zeroed (then dA, dS, dq, dk, dv of the head are 0). */
static void mask_dctx(const Bw *bw, float *dctx, int R) {
    const VitIntervention *iv = bw->run->intervention;
    const VitConfig *c = &bw->run->cfg;
    if (!iv || !iv->ablate) return;
    int H = c->n_heads, Dh = c->head_dim, A = vit_att_width(c);
    for (int h = 0; h < H; h++)
        if (iv->ablate[(size_t)bw->layer * H + h])
            for (int r = 0; r < R; r++)
                memset(dctx + (size_t)r * A + (size_t)h * Dh, 0, (size_t)Dh * sizeof(float));
}

/* The attention's backward: from dctx to dqkv's columns of each head (dq, dk, dv),
 * and dA into g->grad_att when it is kept (exact pass). When the run keeps the
 * attention (reading a block is free) a head is two items, its dv and its dA, dS,
 * dq, dk, so that a few heads balance over the threads (DeiT-Tiny: 3 on 2); when it
 * recomputes it, one item per head. Each sum is taken in the same order either way. */
static void att_back_task(void *arg, int item, int n_items, int thread) {
    (void)n_items;
    Bw *bw = arg;
    const VitConfig *c = &bw->run->cfg;
    int T = c->n_tokens, A = vit_att_width(c), Dh = c->head_dim, H = c->n_heads,
        nb = vit_att_blocks(T);
    int split = bw->run->att != NULL;
    float scale = vit_att_scale(c);
    VitAttMod mod; /* scores = scale / tau * q k^T under an intervention's temperature */
    const VitAttMod *m = vit_att_mod(&mod, bw->run->intervention, c, bw->layer);
    if (m && m->temp > 0.0f) scale /= m->temp;
    float *abuf = bw->s.att + (size_t)thread * 2 * VIT_ATT_BLOCK * T;
    float *gbuf = abuf + (size_t)VIT_ATT_BLOCK * T;
    float *dqkv = bw->s.dqkv;
    size_t ld = 3 * (size_t)A;
    int h = item % H, do_dv = !split || item >= H, do_dqk = !split || item < H;
    float *dq = dqkv + (size_t)h * Dh, *dk = dq + A, *dv = dq + 2 * A;
    for (int t = 0; t < T; t++) {
        if (do_dqk) {
            memset(dq + t * ld, 0, (size_t)Dh * sizeof(float));
            memset(dk + t * ld, 0, (size_t)Dh * sizeof(float));
        }
        if (do_dv) memset(dv + t * ld, 0, (size_t)Dh * sizeof(float));
    }
    if (!do_dv && bw->lrp) return; /* CP-LRP: A is a constant, dq = dk = 0 */
    const float *q = bw->qk + (size_t)h * Dh, *k = q + A, *v = bw->v + (size_t)h * Dh;
    const float *dctx = bw->dctx + (size_t)h * Dh;
    for (int b = 0; b < nb; b++) {
        int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1), rb = r1 - r0;
        if (r0 >= bw->rows) break;
        const float *a = att_of(bw, h, b, abuf);
        /* dv_h += A^T . dctx_h */
        if (do_dv)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, Dh, rb, 1.0f, a, T,
                        dctx + (size_t)r0 * A, A, 1.0f, dv, (int)ld);
        if (bw->lrp || !do_dqk) continue;
        float *ga = bw->g->grad_att; /* the exact pass keeps dA there when it can */
        float *da = ga ? ga + (((size_t)bw->layer * H + h) * T + r0) * T : gbuf;
        vit_grad_att_block(da, dctx, v, A, r0, r1, T, Dh, m);
        /* dS = A (.) (dA - rowsum(dA (.) A)), into gbuf */
        for (int r = 0; r < rb; r++) {
            const float *ar = a + (size_t)r * T, *dar = da + (size_t)r * T;
            float *ds = gbuf + (size_t)r * T;
            double dot = 0.0;
            for (int j = 0; j < T; j++) dot += (double)dar[j] * ar[j];
            float fdot = (float)dot;
            for (int j = 0; j < T; j++) ds[j] = ar[j] * (dar[j] - fdot);
        }
        /* scores = scale * q k^T: dq = scale dS . k, dk += scale dS^T . q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rb, Dh, T, scale, gbuf, T, k, 2 * A,
                    0.0f, dq + (size_t)r0 * ld, (int)ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, Dh, rb, scale, gbuf, T,
                    q + (size_t)r0 * 2 * A, 2 * A, 1.0f, dk, (int)ld);
    }
}

/* Block `layer`'s internals: the run's, kept by the forward pass (blocks_kept), or
 * recomputed from the block's input tokens (rows: how many rows of ctx, xm, xn2,
 * hpre are needed). xn1 (norm1's output) only where Grad-CAM reads it, when kept. */
static void block_internals(Bw *bw, const VitBlock *b, int need_xn1) {
    const VitRun *run = bw->run;
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens, D = c->dim, A = vit_att_width(c);
    size_t l = (size_t)bw->layer;
    const float *x = run->tokens + l * T * D;
    Scratch *s = &bw->s;
    if (run->blocks_kept) {
        bw->qk = run->qk + l * T * 2 * A, bw->v = run->v + l * T * A;
        bw->xm = run->xm + l * T * D, bw->hpre = run->hpre + l * T * vit_mlp_in_width(c);
        if (need_xn1) vit_layernorm(bw->pool, s->xn1, x, b->norm1_w, b->norm1_b, T, D, c->ln_eps);
        return;
    }
    bw->qk = s->qk, bw->v = s->v, bw->xm = s->xm, bw->hpre = s->hpre;
    VitAttMod mod;
    /* the forward pass's block (vit_block) up to fc1, on the same numbers */
    VitBlockIO io = {.n = 1,
                     .rows = bw->rows,
                     .x = x,
                     .res = x,
                     .xn1 = s->xn1,
                     .qk = s->qk,
                     .v = s->v,
                     .att_in = run->att ? run->att + l * c->n_heads * T * T : NULL,
                     .scratch = s->att,
                     .ctx = s->ctx,
                     .tmp = s->dtmp,
                     .xm = s->xm,
                     .xn2 = s->xn2,
                     .hpre = s->hpre,
                     .ablate = run->intervention && run->intervention->ablate
                                   ? run->intervention->ablate + l * c->n_heads
                                   : NULL,
                     .mod = vit_att_mod(&mod, run->intervention, c, (int)l)};
    vit_block(bw->pool, b, c, &io);
}

/* out[R, D] = gamma (.) x[R, D], or x itself without LayerScale. */
static const float *scaled(float *out, const float *x, const float *gamma, int R, int D) {
    if (!gamma) return x;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < D; i++) out[(size_t)r * D + i] = gamma[i] * x[(size_t)r * D + i];
    return out;
}

/* From dz[R, D], the gradient at the block's output, through the MLP and proj:
 * dxm[R, D] at the residual between them and dctx[R, A] at the attention output. */
static void top_backward(Bw *bw, const VitBlock *b, const float *dz, int R, float *dxm,
                         float *dctx) {
    const VitConfig *c = &bw->run->cfg;
    int D = c->dim, F = c->mlp_dim, A = vit_att_width(c);
    Scratch *s = &bw->s;
    memcpy(dxm, dz, (size_t)R * D * sizeof(float));
    /* timm: x = x + ls2(fc2(gelu(fc1(norm2(x))))) */
    const float *dy2 = scaled(s->dtmp, dz, b->ls2, R, D);
    if (c->mlp_gated && b->mlp_norm_w) {
        /* fc2(norm(h)), h = act(fc1_g(x)) * fc1(x): d at norm's output, h recomputed from
         * hpre as vit_block made it, norm's backward, then into dh's first F columns */
        back_linear(bw->pool, (BackLinear){s->dhn, dy2, b->fc2_w, F, D, R, D, F, 0.0f});
        vit_glu_rows(s->hn, F, bw->hpre, 0, R, F, c->mlp_act);
        ln_back(bw->pool,
                (LnBack){s->dhn, s->hn, b->mlp_norm_w, s->dhn, R, F, bw->lrp, 0, c->ln_eps});
        for (int r = 0; r < R; r++)
            memcpy(s->dh + (size_t)r * 2 * F, s->dhn + (size_t)r * F, (size_t)F * sizeof(float));
    }
    if (c->mlp_gated) { /* fc2(act(fc1_g(x)) * fc1(x)): dh [R, 2F], the gates', the values' */
        if (!b->mlp_norm_w)
            back_linear(bw->pool, (BackLinear){s->dh, dy2, b->fc2_w, 2 * F, D, R, D, F, 0.0f});
        GeluBack gb = {s->dh, bw->hpre, R, F, bw->lrp, c->mlp_act, 1};
        vit_pool_run(bw->pool, gelu_back_task, &gb, vit_pool_threads(bw->pool));
        back_linear(bw->pool, (BackLinear){s->dtmp, s->dh, b->fc1g_w, D, 2 * F, R, F, D, 0.0f});
        back_linear(bw->pool, (BackLinear){s->dtmp, s->dh + F, b->fc1_w, D, 2 * F, R, F, D, 1.0f});
    } else {
        back_linear(bw->pool, (BackLinear){s->dh, dy2, b->fc2_w, F, D, R, D, F, 0.0f});
        GeluBack gb = {s->dh, bw->hpre, R, F, bw->lrp, c->mlp_act, 0};
        vit_pool_run(bw->pool, gelu_back_task, &gb, vit_pool_threads(bw->pool));
        back_linear(bw->pool, (BackLinear){s->dtmp, s->dh, b->fc1_w, D, F, R, F, D, 0.0f});
    }
    ln_back(bw->pool, (LnBack){dxm, bw->xm, b->norm2_w, s->dtmp, R, D, bw->lrp, 1, c->ln_eps});
    /* timm: x = x + ls1(proj(ctx)) */
    const float *dy1 = scaled(s->dtmp, dxm, b->ls1, R, D);
    back_linear(bw->pool, (BackLinear){dctx, dy1, b->proj_w, A, D, R, D, A, 0.0f});
}

/* The patches an intervention drops (the head's mean leaves them out), or NULL. */
static const uint8_t *head_drop(const VitRun *run) {
    return run->intervention ? run->intervention->drop : NULL;
}

/* LeGrad's E_l for the current layer: s_l = head(norm(z_l))_c, its gradient at
 * A_l (rows of the head's tokens only: s_l reads them alone), ReLU, mean over
 * heads and all T query rows, at the patch columns, into g->legrad[layer]. */
static void legrad_layer(Bw *bw, const VitBlock *b, const VitScore *sc) {
    const VitConfig *c = &bw->run->cfg;
    int T = c->n_tokens, D = c->dim, H = c->n_heads, Dh = c->head_dim, Np = c->n_prefix,
        N = c->n_patches, Nh = vit_head_rows(bw->vit), A = vit_att_width(c);
    float *dzs = bw->s.hdz, *dctx = bw->s.hctx, *row = bw->s.row;
    vit_head_backward(dzs, NULL, bw->run->tokens + (size_t)(bw->layer + 1) * T * D, sc, bw->vit, 0,
                      head_drop(bw->run), bw->s.head);
    top_backward(bw, b, dzs, Nh, bw->s.dxm, dctx);
    mask_dctx(bw, dctx, Nh);
    float *e = bw->g->legrad + (size_t)bw->layer * N;
    VitAttMod mod;
    memset(e, 0, (size_t)N * sizeof(float));
    for (int h = 0; h < H; h++)
        for (int r = 0; r < Nh; r++) { /* the other T - Nh rows of ds_l/dA_l are 0 */
            vit_grad_att_block(row, dctx + (size_t)h * Dh, bw->v + (size_t)h * Dh, A, r, r + 1, T,
                               Dh, vit_att_mod(&mod, bw->run->intervention, c, bw->layer));
            for (int p = 0; p < N; p++)
                if (row[Np + p] > 0.0f) e[p] += row[Np + p];
        }
    float inv = (float)(1.0 / ((double)H * T));
    for (int p = 0; p < N; p++) e[p] *= inv;
}

/* --- the pass -------------------------------------------------------------- */

/* LeGrad's E_l alone (VIT_GRAD_LEGRAD): legrad_layer on each block's internals, as the
 * exact pass calls it (the same rows recomputed when the run does not keep them), without
 * the rest of the backward pass. */
static void legrad_pass(Bw *bw, const VitScore *sc) {
    const VitConfig *c = &bw->vit->cfg;
    int L = c->n_layers, T = c->n_tokens, Nh = vit_head_rows(bw->vit);
    for (int l = L - 1; l >= 0; l--) {
        const VitBlock *b = &bw->vit->w.blocks[l];
        bw->layer = l;
        bw->rows = l == L - 1 ? Nh : T;
        block_internals(bw, b, 0);
        legrad_layer(bw, b, sc);
    }
}

/* One backward pass, exact (lrp 0) or AttnLRP's (lrp 1), for the score sc. */
static void backward_pass(Bw *bw, const VitScore *sc) {
    const VitRun *run = bw->run;
    const Vit *vit = bw->vit;
    const VitConfig *c = &vit->cfg;
    VitGrad *g = bw->g;
    Scratch *s = &bw->s;
    int T = c->n_tokens, D = c->dim, L = c->n_layers, N = c->n_patches, Np = c->n_prefix,
        P = c->patch_size, K = 3 * P * P, Nh = vit_head_rows(vit), A = vit_att_width(c);
    int exact = !bw->lrp;

    /* the head (head.c): dz at the last block's output, its head rows */
    memset(s->dz, 0, (size_t)T * D * sizeof(float));
    vit_head_backward(s->dz, exact ? g->probe_grad : NULL, run->tokens + (size_t)L * T * D, sc, vit,
                      bw->lrp, head_drop(run), s->head);

    for (int l = L - 1; l >= 0; l--) {
        const VitBlock *b = &vit->w.blocks[l];
        bw->layer = l;
        bw->rows = l == L - 1 ? Nh : T;
        int keep = exact && !g->grad_att_kept; /* dctx for the maps' dA */
        bw->dctx = keep ? g->dctx + (size_t)l * T * A : s->dctx;
        block_internals(bw, b, exact && l == L - 1);
        if (exact) {
            memcpy(g->grad_tokens + (size_t)l * T * D, s->dz, (size_t)T * D * sizeof(float));
            legrad_layer(bw, b, sc);
        }
        memset(bw->dctx, 0, (size_t)T * A * sizeof(float));
        top_backward(bw, b, s->dz, bw->rows, s->dxm, bw->dctx);
        mask_dctx(bw, bw->dctx, bw->rows);
        if (exact && g->grad_att_kept && bw->rows < T)
            memset(g->grad_att + (size_t)l * c->n_heads * T * T, 0,
                   (size_t)c->n_heads * T * T * sizeof(float));
        vit_pool_run(bw->pool, att_back_task, bw, bw->run->att ? 2 * c->n_heads : c->n_heads);
        /* the rotary embedding (vit_block): dq, dk at the rotated queries and keys rotated
         * back, R^T = R(-a), to the projections' outputs (AttnLRP: dq = dk = 0) */
        VitAttMod mod;
        const VitAttMod *m = vit_att_mod(&mod, run->intervention, c, l);
        if (c->rope && b->rope && exact && !(m && m->no_rope))
            vit_rope(bw->pool, s->dqkv, 3 * A, 1, b->rope, m ? m->pos_perm : NULL, c,
                     2 * c->n_heads, -1.0f);
        /* dxn1 = [dq dk dv] . qkv_w */
        if (b->qkv_w) {
            back_linear(bw->pool,
                        (BackLinear){s->dtmp, s->dqkv, b->qkv_w, D, 3 * A, T, 3 * A, D, 0.0f});
        } else {
            const float *ws[3] = {b->q_w, b->k_w, b->v_w};
            for (int i = 0; i < 3; i++)
                back_linear(bw->pool, (BackLinear){s->dtmp, s->dqkv + (size_t)i * A, ws[i], D,
                                                   3 * A, T, A, D, i ? 1.0f : 0.0f});
        }
        if (exact && l == L - 1) { /* Grad-CAM's target layer: blocks[-1].norm1 */
            memcpy(g->cam_act, s->xn1 + (size_t)Np * D, (size_t)N * D * sizeof(float));
            memcpy(g->cam_grad, s->dtmp + (size_t)Np * D, (size_t)N * D * sizeof(float));
        }
        /* dz <- dxm + norm1'(dxn1): the gradient at the block's input */
        memcpy(s->dz, s->dxm, (size_t)bw->rows * D * sizeof(float));
        if (bw->rows < T)
            memset(s->dz + (size_t)bw->rows * D, 0, (size_t)(T - bw->rows) * D * sizeof(float));
        ln_back(bw->pool, (LnBack){s->dz, run->tokens + (size_t)l * T * D, b->norm1_w, s->dtmp, T,
                                   D, bw->lrp, 1, c->ln_eps});
    }

    /* CLIP's ln_pre: tokens[0] = norm_pre(pre), back to the embedded tokens */
    const float *dx0 = s->dz;
    if (c->norm_pre) {
        ln_back(bw->pool,
                (LnBack){s->dxm, run->pre, vit->w.norm_pre_w, s->dz, T, D, bw->lrp, 0, c->ln_eps});
        dx0 = s->dxm;
    }
    /* the patch embedding: a linear layer over im2col rows, then back to pixels */
    back_linear(bw->pool,
                (BackLinear){s->dpatch, dx0 + (size_t)Np * D, vit->w.patch_w, K, D, N, D, K, 0.0f});
    float *out = bw->lrp ? g->lrp_input : g->grad_input;
    vit_fill_patches(s->dpatch, run->intervention, c); /* a filled patch's pixels: not used */
    int Sw = c->image_w, gw = c->grid_w;
    size_t plane = (size_t)c->image_h * Sw;
    for (int n = 0; n < N; n++) {
        int gy = n / gw, gx = n % gw;
        const float *row = s->dpatch + (size_t)n * K;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < P; ky++)
                memcpy(out + ch * plane + ((size_t)gy * P + ky) * Sw + (size_t)gx * P,
                       row + (ch * P + ky) * P, (size_t)P * sizeof(float));
    }
}

/* The same score (VitGrad.score): VIT_GRAD_ADD's condition. */
static int same_score(const VitScore *a, const VitScore *b) {
    return a->grad == b->grad && a->on_logits == b->on_logits && a->a == b->a && a->b == b->b &&
           a->ref == b->ref;
}

VitStatus vit_backward(VitGrad *g, const VitRun *run, const Vit *vit, int target, int what,
                       VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!vit_has_head(vit))
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: a backbone without a classification head: no class to explain%s",
                             c->name, c->clip ? " (a CLIP tower: give it a text head)" : "");
    if (target == -1 && run->probs) vit_top_k(&target, run->probs, c->n_classes, 1);
    VitScore sc = vit_score_logit(target);
    return vit_backward_score(g, run, vit, &sc, what, err);
}

VitStatus vit_backward_score(VitGrad *g, const VitRun *run, const Vit *vit, const VitScore *sc,
                             int what, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!g->mem || g->cfg.n_tokens != c->n_tokens || g->cfg.dim != c->dim ||
        vit_att_width(&g->cfg) != vit_att_width(c) || g->cfg.n_layers != c->n_layers ||
        g->cfg.n_classes != c->n_classes || g->grad_att_kept != run->att_kept ||
        run->n_threads > g->n_threads || !run->tokens || (c->norm_pre && !run->pre) ||
        run->blocks_kept != vit_keep_blocks(c, g->grad_att_kept))
        return vit_set_error(err, VIT_ERR_ARG, "%s: backward buffers not made for this run",
                             c->name);
    VitStatus st = vit_intervention_check(run->intervention, c, err);
    if (st) return st;
    if ((st = vit_score_check(sc, vit, err))) return st;
    int target = vit_score_is_logit(sc) ? sc->a : -2;
    int passes = what & (VIT_GRAD_ALL | VIT_GRAD_LEGRAD), add = (what & VIT_GRAD_ADD) != 0;
    if (!passes || (what & ~(VIT_GRAD_ALL | VIT_GRAD_ADD | VIT_GRAD_LEGRAD)))
        return vit_set_error(err, VIT_ERR_ARG,
                             "backward: what %d, expected passes 1 .. 3 or 8 (+ 4)", what);
    if (add && (g->target != target || !same_score(&g->score, sc)))
        return vit_set_error(err, VIT_ERR_ARG,
                             "backward: adds a pass to class %d's gradients, but asks for class %d",
                             g->target, target);
    Bw bw = {.run = run, .vit = vit, .g = g, .pool = run->pool};
    size_t n;
    carve(g, &bw.s, c, g->grad_att_kept, g->n_threads, &n);
    if (passes & VIT_GRAD_EXACT) passes &= ~VIT_GRAD_LEGRAD; /* the exact pass makes E_l */
    int kept = add ? g->what & ~passes : 0; /* a pass each writes only its own outputs */
    g->target = -1;
    if (passes & VIT_GRAD_EXACT)
        bw.lrp = 0, backward_pass(&bw, sc);
    else if (passes & VIT_GRAD_LEGRAD)
        bw.lrp = 0, legrad_pass(&bw, sc);
    if (passes & VIT_GRAD_LRP) bw.lrp = 1, backward_pass(&bw, sc);
    g->target = target;
    g->score = *sc;
    g->what = kept | passes;
    return VIT_OK;
}
