/* head.c - the classifier head, one function for every caller (vit_head: vit_forward,
 * vit_forward_batch, the logit lens; its gradient vit_head_backward: vit_backward), and
 * CLIP's image embedding with the phrase as a head (vit.h, "CLIP"): vit_set_text_head,
 * vit_image_embed, and the text head's forward and gradient.
 *
 * Row-major. Linear weights keep PyTorch's [out, in] layout: out[n, O] = inp[n, I] .
 * w[O, I]^T + b[O] (vit_linear).
 *
 * The classifier head (VitConfig.head_pool), on z the last block's output [T, D]:
 *   VIT_POOL_CLS       h = norm(z_0)                         timm: x = self.norm(x);
 *                                                               x = x[:, 0] (global_pool 'token')
 *                      DeiT distilled: (head(norm(z_0)) + head_dist(norm(z_1))) / 2
 *   VIT_POOL_MEAN      h = fc_norm(mean_{r >= Np} norm(z_r))  timm forward_head: x = self.pool(x)
 *                                                               (global_pool 'avg': the tokens
 *                                                               num_prefix_tokens:); x =
 *                                                               self.fc_norm(x); norm and fc_norm
 *                                                               each an Identity when absent
 *   VIT_POOL_CLS_MEAN  h = [norm(z_0) ; mean_{r >= Np} norm(z_r)]   transformers'
 *                                                               Dinov2ForImageClassification:
 *                                                               cat([cls_token,
 *                                                               patch_tokens.mean(dim=1)]),
 *                                                               registers excluded (1 +
 *                                                               num_register_tokens:)
 *   logits = head(h) = h . head_w^T + head_b (or CLIP's text head), tanh'd for a notebook's
 *   Sequential(Linear, Tanh).
 *   VIT_POOL_MAP       h = MAP(norm(z_r) for the patches r)     transformers'
 *                                                               SiglipVisionTransformer:
 *                                                               last_hidden_state =
 *                                                               self.post_layernorm(...);
 *                                                               pooler_output =
 *                                                               self.head(last_hidden_state)
 *                      (probe.c: the probe's attention kept per head); h is SigLIP's image
 *                      embedding (E = D, no projection), the text head's input.
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
    /* CLIP's model.py: x = self.ln_post(x[:, 0, :]); x = x @ self.proj; SigLIP: no
     * projection, the MAP head's output is the embedding (E = D) */
    if (!w->img_proj_w) {
        if (!gemm_only) memcpy(e, xn, (size_t)n * E * sizeof *e);
    } else
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
        for (int j = 0; j < C; j++)
            logits[(size_t)i * C + j] = logits[(size_t)i * C + j] * k + w->text_bias;
    }
}

void vit_probs_rows(float *probs, const float *logits, int n, int C, const Vit *vit) {
    size_t nC = (size_t)n * C;
    if (probs != logits) memcpy(probs, logits, nC * sizeof *probs);
    if (!vit->w.text_sigmoid || !vit->w.text_emb) {
        vit_softmax_rows(probs, n, C);
        return;
    }
    /* SiglipModel: torch.sigmoid(logits_per_image), each pair on its own */
    for (size_t i = 0; i < nC; i++) probs[i] = 1.0f / (1.0f + expf(-probs[i]));
}

void vit_text_head_grad(float *dxn, const float *xn, int target, const Vit *vit, int lrp,
                        float *scratch) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int D = c->dim, E = c->embed_dim;
    float *e = scratch, *g = scratch + E;
    /* e = P xn, P = img_proj_w [E, D]; SigLIP: e = xn */
    if (w->img_proj_w)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, E, D, 1.0f, w->img_proj_w, D, xn, 1, 0.0f, e, 1);
    else
        memcpy(e, xn, (size_t)E * sizeof *e);
    const float *t = w->text_emb + (size_t)target * E;
    double n2 = 0.0, te = 0.0;
    for (int j = 0; j < E; j++) n2 += (double)e[j] * e[j], te += (double)t[j] * e[j];
    if (n2 > 0.0) {
        double k = w->text_scale / sqrt(n2), r = lrp ? 0.0 : te / n2;
        for (int j = 0; j < E; j++) g[j] = (float)(k * (t[j] - r * e[j]));
    } else {
        memset(g, 0, (size_t)E * sizeof *g);
    }
    /* dxn = P^T g (SigLIP: g) */
    if (w->img_proj_w)
        cblas_sgemv(CblasRowMajor, CblasTrans, E, D, 1.0f, w->img_proj_w, D, g, 1, 0.0f, dxn, 1);
    else
        memcpy(dxn, g, (size_t)D * sizeof *dxn);
}

/* --- the classifier head -------------------------------------------------------- */

int vit_head_rows(const Vit *vit) {
    if (vit->cfg.head_pool != VIT_POOL_CLS) return vit->cfg.n_tokens;
    return vit->w.head_dist_w ? 2 : 1;
}

/* out [D] = the final norm of one token x [D] (a copy without one) */
static void norm_row(float *out, const float *x, const Vit *vit) {
    const VitWeights *w = &vit->w;
    if (w->norm_w)
        vit_layernorm_rows(out, x, w->norm_w, w->norm_b, 0, 1, vit->cfg.dim, vit->cfg.ln_eps);
    else
        memcpy(out, x, (size_t)vit->cfg.dim * sizeof *out);
}

/* h [D] = torch.nn.LayerNorm in place (fc_norm; vit_layernorm_rows's arithmetic) */
static void layernorm_in_place(float *h, const float *w, const float *b, int D, float eps) {
    double m = 0.0, v = 0.0;
    for (int i = 0; i < D; i++) m += h[i];
    m /= D;
    for (int i = 0; i < D; i++) v += (h[i] - m) * (h[i] - m);
    v /= D;
    float mean = (float)m, rstd = (float)(1.0 / sqrt(v + eps));
    for (int i = 0; i < D; i++) h[i] = (h[i] - mean) * rstd * w[i] + b[i];
}

/* What the pooling of one input reads (VitHeadIO): its tokens and the rows it averages. */
typedef struct {
    const VitHeadIO *io;
    const Vit *vit;
    int fc_norm; /* apply fc_norm (vit_head_backward wants the pooled vector before it) */
} PoolArgs;

/* Token r of input i (VitHeadIO's strides). */
static const float *token_row(const VitHeadIO *io, int D, int i, int r) {
    return io->x + ((size_t)i * io->in_stride + (size_t)r * io->row_stride) * D;
}

/* Is token r of the sequence in it (not a patch an intervention dropped)? */
static int kept(const uint8_t *drop, int Np, int r) {
    return !drop || r < Np || !drop[r - Np];
}

/* h [D] = mean over the tokens [r0, r1) of input i of norm(z_r) (summed in float, as
 * torch's mean of a float tensor; each row normalised with vit_layernorm_rows's
 * arithmetic), the dropped patches left out. */
static void mean_rows(float *h, const PoolArgs *a, int i, int r0, int r1) {
    const Vit *vit = a->vit;
    const float *nw = vit->w.norm_w, *nb = vit->w.norm_b;
    int D = vit->cfg.dim, n = 0;
    memset(h, 0, (size_t)D * sizeof *h);
    for (int r = r0; r < r1; r++) {
        if (!kept(a->io->drop, vit->cfg.n_prefix, r)) continue;
        n++;
        const float *x = token_row(a->io, D, i, r);
        if (!nw) {
            for (int k = 0; k < D; k++) h[k] += x[k];
            continue;
        }
        double m = 0.0, v = 0.0;
        for (int k = 0; k < D; k++) m += x[k];
        m /= D;
        for (int k = 0; k < D; k++) v += (x[k] - m) * (x[k] - m);
        v /= D;
        float mean = (float)m, rstd = (float)(1.0 / sqrt(v + vit->cfg.ln_eps));
        for (int k = 0; k < D; k++) h[k] += (x[k] - mean) * rstd * nw[k] + nb[k];
    }
    float inv = 1.0f / (float)(n > 0 ? n : 1); /* vit_intervention_check keeps one */
    for (int k = 0; k < D; k++) h[k] *= inv;
}

/* Input i's head input hin[i] [W] (and its distillation row), as VitConfig.head_pool says. */
static void pool_input(const PoolArgs *a, int i) {
    const VitHeadIO *io = a->io;
    const Vit *vit = a->vit;
    const VitConfig *c = &vit->cfg;
    int D = c->dim, W = vit_head_width(c), Np = c->n_prefix, T = c->n_tokens;
    float *h = io->hin + (size_t)i * W;
    /* the logit lens: token t where the pooling's output comes from */
    int t = io->token < 0 ? -1 : io->token + i * io->token_step;
    int r0 = t < 0 ? Np : t, r1 = t < 0 ? T : t + 1; /* the rows a mean reads */
    switch (c->head_pool) {
    case VIT_POOL_MAP: break; /* map_input, on the pool's threads */
    case VIT_POOL_CLS:
        norm_row(h, token_row(io, D, i, t < 0 ? 0 : t), vit);
        if (t < 0 && vit->w.head_dist_w)
            norm_row(io->hin + (size_t)io->n * W + (size_t)i * D, token_row(io, D, i, 1), vit);
        break;
    case VIT_POOL_MEAN: mean_rows(h, a, i, r0, r1); break;
    case VIT_POOL_CLS_MEAN:
        norm_row(h, token_row(io, D, i, 0), vit);
        mean_rows(h + D, a, i, r0, r1);
        break;
    }
    if (a->fc_norm && vit->w.fc_norm_w && W == D)
        layernorm_in_place(h, vit->w.fc_norm_w, vit->w.fc_norm_b, D, c->ln_eps);
}

const float *vit_head_probe_scratch(const VitConfig *c, const float *scratch) {
    return scratch + (size_t)c->n_patches * c->dim + (size_t)c->n_heads * c->n_patches;
}

/* The MAP head of input i (VIT_POOL_MAP): y = the final norm of its patches in the
 * sequence (a dropped one is not a key), then vit_probe_forward into hin[i]; its attention
 * into probe_att [H, N] of input i with the dropped patches 0. For the logit lens (token t),
 * y is token t alone: the probe's softmax over one key is 1, the head's output is what it
 * gives when every patch is token t. */
static void map_input(VitPool *pool, const VitHeadIO *io, const Vit *vit, int i) {
    const VitConfig *c = &vit->cfg;
    int D = c->dim, N = c->n_patches, H = c->n_heads, Np = c->n_prefix, T = c->n_tokens;
    /* y [N, D], att [H, N], then the probe's scratch (vit_head_probe_scratch says where) */
    float *y = io->scratch, *att = y + (size_t)N * D, *s = att + (size_t)H * N;
    int t = io->token < 0 ? -1 : io->token + i * io->token_step, n = 0;
    for (int r = t < 0 ? Np : t; r < (t < 0 ? T : t + 1); r++)
        if (t >= 0 || kept(io->drop, Np, r))
            norm_row(y + (size_t)n++ * D, token_row(io, D, i, r), vit);
    vit_probe_forward(pool, io->hin + (size_t)i * D, att, y, &vit->w.map, n, D, H, c->mlp_dim,
                      c->ln_eps, c->mlp_act, s);
    if (!io->probe_att || t >= 0) return;
    float *pa = io->probe_att + (size_t)i * H * N;
    for (int h = 0; h < H; h++) {
        int k = 0;
        for (int p = 0; p < N; p++)
            pa[(size_t)h * N + p] = kept(io->drop, 0, p) ? att[(size_t)h * n + k++] : 0.0f;
    }
}

static void pool_task(void *arg, int item, int n_items, int thread) {
    (void)n_items, (void)thread;
    pool_input(arg, item);
}

void vit_head(VitPool *pool, const Vit *vit, const VitHeadIO *io) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int n = io->n, C = c->n_classes, W = vit_head_width(c), D = c->dim;
    int gemm_only = io->gemm_only;
    if (!gemm_only && c->head_pool == VIT_POOL_MAP) {
        for (int i = 0; i < n; i++) map_input(pool, io, vit, i); /* its GEMMs on the pool */
    } else if (!gemm_only) {
        PoolArgs a = {io, vit, 1};
        vit_pool_run(pool, pool_task, &a, n);
    }
    /* CLIP: the image embedding e = h @ proj, and with a text head
     * logits = logit_scale * cos(e, t_c) (+ SigLIP's logit_bias) */
    if (io->embed && c->embed_dim > 0)
        vit_text_head(pool, C ? io->logits : NULL, io->embed, io->hin, n, vit, gemm_only);
    if (!C || !io->logits) return;
    if (!w->text_emb)
        vit_linear(pool, (VitLinear){.out = io->logits,
                                     .ld_out = C,
                                     .inp = io->hin,
                                     .w = w->head_w,
                                     .b = w->head_b,
                                     .T = n,
                                     .n_in = W,
                                     .n_out = C,
                                     .gemm_only = gemm_only});
    size_t nC = (size_t)n * C;
    if (w->head_dist_w && io->token < 0 && c->head_pool == VIT_POOL_CLS) {
        /* deit.py forward_head, transformers' DeiTForImageClassificationWithTeacher:
         * (head(x[:, 0]) + head_dist(x[:, 1])) / 2 */
        vit_linear(pool, (VitLinear){.out = io->logits_dist,
                                     .ld_out = C,
                                     .inp = io->hin + (size_t)n * W,
                                     .w = w->head_dist_w,
                                     .b = w->head_dist_b,
                                     .T = n,
                                     .n_in = D,
                                     .n_out = C,
                                     .gemm_only = gemm_only});
        if (!gemm_only)
            for (size_t i = 0; i < nC; i++)
                io->logits[i] = (io->logits[i] + io->logits_dist[i]) / 2;
    }
    if (c->head_tanh && !gemm_only) /* a notebook's Sequential(Linear, Tanh) */
        for (size_t i = 0; i < nC; i++) io->logits[i] = tanhf(io->logits[i]);
}

size_t vit_head_backward_floats(const VitConfig *c) {
    size_t n = 8 * (size_t)c->dim + (size_t)c->n_classes + 2 * (size_t)c->embed_dim;
    if (c->head_pool == VIT_POOL_MAP) /* y [N, D], dy [N, D], the forward's and the gradient's */
        n += 2 * (size_t)c->n_patches * c->dim + vit_head_scratch_floats(c) +
             vit_probe_backward_floats(c->n_patches, c->dim, c->n_heads, c->mlp_dim) +
             (size_t)c->n_heads * c->n_patches;
    return n;
}

/* vit_head_backward for the MAP head: dz [T, D] (zeroed by the caller) from g = d y /
 * d hin [D]: through the head (vit_probe_backward) to the normalised patches, then the
 * final norm's backward at each patch in the sequence. */
static void map_backward(float *dz, float *datt, const float *z, const float *g, const Vit *vit,
                         int lrp, const uint8_t *drop, float *scratch) {
    const VitConfig *c = &vit->cfg;
    int D = c->dim, N = c->n_patches, H = c->n_heads, Np = c->n_prefix, n = 0;
    float *y = scratch, *dy = y + (size_t)N * D, *s = dy + (size_t)N * D;
    for (int p = 0; p < N; p++)
        if (kept(drop, 0, p)) norm_row(y + (size_t)n++ * D, z + (size_t)(Np + p) * D, vit);
    float *da = datt ? s + vit_probe_backward_floats(n, D, H, c->mlp_dim) : NULL; /* [H, n] */
    vit_probe_backward(dy, da, y, g, &vit->w.map, n, D, H, c->mlp_dim, c->ln_eps, c->mlp_act, lrp,
                       s);
    for (int h = 0; datt && h < H; h++) /* [H, n] -> [H, N], a dropped patch 0 */
        for (int p = 0, j = 0; p < N; p++)
            datt[(size_t)h * N + p] = kept(drop, 0, p) ? da[(size_t)h * n + j++] : 0.0f;
    int k = 0;
    for (int p = 0; p < N; p++) {
        if (!kept(drop, 0, p)) continue;
        float *dzr = dz + (size_t)(Np + p) * D;
        const float *dyk = dy + (size_t)k++ * D;
        if (vit->w.norm_w)
            vit_layernorm_backward_rows(dzr, z + (size_t)(Np + p) * D, vit->w.norm_w, dyk, 0, 1, D,
                                        c->ln_eps, lrp, 0);
        else
            memcpy(dzr, dyk, (size_t)D * sizeof *dzr);
    }
}

/* g [W (+ D)] += k * d logits[target] / d hin (and its distillation row): one class of
 * the head (a linear layer, tanh'd, DeiT's two heads averaged, or CLIP's text head); gt
 * [2D] and tsc [2E] scratch. */
static void logit_grad(float *g, const float *hin, int target, float k, const Vit *vit, int lrp,
                       float *gt, float *tsc) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int D = c->dim, W = vit_head_width(c);
    int distilled = w->head_dist_w && c->head_pool == VIT_POOL_CLS;
    if (w->text_emb) { /* CLIP: y = s cos(img_proj(h), t_c) (above) */
        vit_text_head_grad(gt, hin, target, vit, lrp, tsc);
        for (int i = 0; i < D; i++) g[i] += k * gt[i];
        return;
    }
    if (distilled) k *= 0.5f;
    if (c->head_tanh) { /* y = tanh(s): dy/ds = 1 - y^2, s the head's output on h */
        double s = w->head_b ? w->head_b[target] : 0.0;
        for (int i = 0; i < W; i++) s += (double)hin[i] * w->head_w[(size_t)target * W + i];
        double y = tanh(s);
        k *= (float)(1.0 - y * y);
    }
    for (int i = 0; i < W; i++) g[i] += k * w->head_w[(size_t)target * W + i];
    if (distilled)
        for (int i = 0; i < D; i++) g[D + i] += k * w->head_dist_w[(size_t)target * D + i];
}

/* g [W] = dS / d hin for a score of the embedding: e = hin, or CLIP's img_proj(hin) (then
 * g = img_proj^T dS/de); e, de [E] scratch (tsc [2E], or gt [2D] without projection). */
static void embed_grad(float *g, const float *hin, const VitScore *sc, const Vit *vit, int lrp,
                       float *gt, float *tsc) {
    const VitConfig *c = &vit->cfg;
    const float *P = vit->w.img_proj_w;
    int D = c->dim, E = vit_embedding_dim(vit);
    if (!P) {
        sc->grad(g, hin, E, lrp, sc);
        return;
    }
    float *e = tsc, *de = tsc + E;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, E, D, 1.0f, P, D, hin, 1, 0.0f, e, 1);
    sc->grad(de, e, E, lrp, sc);
    cblas_sgemv(CblasRowMajor, CblasTrans, E, D, 1.0f, P, D, de, 1, 0.0f, g, 1);
    (void)gt;
}

void vit_head_backward(float *dz, float *datt, const float *z, const VitScore *sc, const Vit *vit,
                       int lrp, const uint8_t *drop, float *scratch) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int D = c->dim, W = vit_head_width(c), R = vit_head_rows(vit), Np = c->n_prefix,
        T = c->n_tokens, C = c->n_classes;
    float *hin = scratch,                   /* [2D] the head's input (then the distillation row) */
        *g = hin + 2 * D,                   /* [2D] dS / d hin (then dS / d the distillation row) */
            *p = g + 2 * D,                 /* [D] the pooled vector before fc_norm */
                *dp = p + D,                /* [D] dS / d p */
                    *gt = dp + D,           /* [2D] one class's d y / d hin */
                        *seed = gt + 2 * D, /* [C] dS / d logits */
                            *tsc = seed + C; /* [2E] the text head's */
    int fc = w->fc_norm_w && W == D;
    /* the forward pooling of this input, as vit_head does it, fc_norm apart */
    VitHeadIO io = {.hin = hin,
                    .x = z,
                    .in_stride = (size_t)T,
                    .row_stride = 1,
                    .n = 1,
                    .token = -1,
                    .drop = drop,
                    .scratch = tsc + 2 * c->embed_dim};
    PoolArgs a = {&io, vit, 0};
    if (c->head_pool == VIT_POOL_MAP)
        map_input(NULL, &io, vit, 0);
    else
        pool_input(&a, 0);
    if (fc) {
        memcpy(p, hin, (size_t)D * sizeof *p);
        layernorm_in_place(hin, w->fc_norm_w, w->fc_norm_b, D, c->ln_eps);
    }
    /* g = dS / d hin: sum_c dS/dlogits[c] d logits[c] / d hin, or through the embedding */
    memset(g, 0, 2 * (size_t)D * sizeof *g);
    if (sc->on_logits) {
        sc->grad(seed, NULL, C, lrp, sc);
        for (int k = 0; k < C; k++)
            if (seed[k] != 0.0f) logit_grad(g, hin, k, seed[k], vit, lrp, gt, tsc);
    } else {
        embed_grad(g, hin, sc, vit, lrp, gt, tsc);
    }
    if (fc) { /* fc_norm's backward at p */
        vit_layernorm_backward_rows(dp, p, w->fc_norm_w, g, 0, 1, D, c->ln_eps, lrp, 0);
        memcpy(g, dp, (size_t)D * sizeof *g);
    }
    memset(dz, 0, (size_t)R * D * sizeof *dz);
    if (c->head_pool == VIT_POOL_MAP) {
        map_backward(dz, datt, z, g, vit, lrp, drop, tsc + 2 * c->embed_dim);
        return;
    }
    /* the rows: norm's backward (dz = dn without a norm) at each token the head read */
    const float *g_mean = c->head_pool == VIT_POOL_CLS_MEAN ? g + D : g;
    int distilled = w->head_dist_w && c->head_pool == VIT_POOL_CLS;
    if (c->head_pool == VIT_POOL_CLS) {
        int rows = distilled ? 2 : 1;
        if (w->norm_w)
            vit_layernorm_backward_rows(dz, z, w->norm_w, g, 0, rows, D, c->ln_eps, lrp, 0);
        else
            memcpy(dz, g, (size_t)rows * D * sizeof *dz);
        return;
    }
    if (c->head_pool == VIT_POOL_CLS_MEAN) {
        if (w->norm_w)
            vit_layernorm_backward_rows(dz, z, w->norm_w, g, 0, 1, D, c->ln_eps, lrp, 0);
        else
            memcpy(dz, g, (size_t)D * sizeof *dz);
    }
    /* the mean: each patch token's share d y / d p / N (the patches in the sequence) */
    float *dn = dp;
    int n = 0;
    for (int r = Np; r < T; r++) n += kept(drop, Np, r);
    float inv = 1.0f / (float)(n > 0 ? n : 1);
    for (int i = 0; i < D; i++) dn[i] = g_mean[i] * inv;
    for (int r = Np; r < T; r++) {
        if (!kept(drop, Np, r)) continue;
        float *dzr = dz + (size_t)r * D;
        if (w->norm_w)
            vit_layernorm_backward_rows(dzr, z + (size_t)r * D, w->norm_w, dn, 0, 1, D, c->ln_eps,
                                        lrp, 0);
        else
            memcpy(dzr, dn, (size_t)D * sizeof *dzr);
    }
}

/* --- entry points --------------------------------------------------------------- */

VitStatus vit_set_text_head(Vit *vit, const float *emb, int C, const char *const *labels,
                            float logit_scale, VitError *err) {
    if (!vit) return vit_set_error(err, VIT_ERR_ARG, "text head: no model");
    const VitConfig *c = &vit->cfg;
    int E = c->embed_dim;
    if (E <= 0)
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
                                 i, isfinite(n2) ? "zero" : "not finite");
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
    vit->w.text_bias = 0.0f, vit->w.text_sigmoid = 0; /* vit_set_text_sigmoid: SigLIP's */
    vit->w.head_w = vit->w.head_b = NULL;             /* a CLIP tower has no classifier beside it */
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
    for (int j = 0; j < C; j++) run->logits[j] = run->logits[j] * k + vit->w.text_bias;
    vit_probs_rows(run->probs, run->logits, 1, C, vit);
    return VIT_OK;
}

VitStatus vit_set_text_sigmoid(Vit *vit, float logit_bias, VitError *err) {
    if (!vit || !vit->w.text_emb)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: sigmoid scores: no text head (vit_set_text_head)",
                             vit ? vit->cfg.name : "?");
    if (!isfinite(logit_bias))
        return vit_set_error(err, VIT_ERR_ARG, "%s: sigmoid scores: logit bias %g is not finite",
                             vit->cfg.name, (double)logit_bias);
    vit->w.text_bias = logit_bias;
    vit->w.text_sigmoid = 1;
    return VIT_OK;
}

VitStatus vit_image_embed(float *e, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (c->embed_dim <= 0)
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

/* --- scores (vit.h's VitScore) -------------------------------------------------- */

static void logit_seed(float *d, const float *e, int n, int lrp, const VitScore *s) {
    (void)e, (void)lrp;
    memset(d, 0, (size_t)n * sizeof *d);
    d[s->a] = 1.0f;
}

static void contrast_seed(float *d, const float *e, int n, int lrp, const VitScore *s) {
    (void)e, (void)lrp;
    memset(d, 0, (size_t)n * sizeof *d);
    d[s->a] = 1.0f, d[s->b] = -1.0f;
}

/* cos(e, r) = e . r / (|e| |r|): d/de = (r / |r| - cos * e / |e|) / |e| */
static void cosine_grad(float *d, const float *e, int n, int lrp, const VitScore *s) {
    const float *r = s->ref;
    double ee = 0.0, rr = 0.0, er = 0.0;
    for (int i = 0; i < n; i++)
        ee += (double)e[i] * e[i], rr += (double)r[i] * r[i], er += (double)e[i] * r[i];
    if (ee <= 0.0 || rr <= 0.0) {
        memset(d, 0, (size_t)n * sizeof *d);
        return;
    }
    double ne = sqrt(ee), nr = sqrt(rr), cs = lrp ? 0.0 : er / (ne * nr);
    for (int i = 0; i < n; i++) d[i] = (float)((r[i] / nr - cs * e[i] / ne) / ne);
}

VitScore vit_score_logit(int c) {
    return (VitScore){.on_logits = 1, .grad = logit_seed, .a = c, .b = -1};
}

VitScore vit_score_contrast(int a, int b) {
    return (VitScore){.on_logits = 1, .grad = contrast_seed, .a = a, .b = b};
}

VitScore vit_score_cosine(const float *ref) {
    return (VitScore){.on_logits = 0, .grad = cosine_grad, .a = -1, .b = -1, .ref = ref};
}

int vit_score_is_logit(const VitScore *s) {
    return s->grad == logit_seed;
}

VitStatus vit_score_check(const VitScore *s, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    if (!s || !s->grad)
        return vit_set_error(err, VIT_ERR_ARG, "%s: a score without gradient", c->name);
    if (!s->on_logits) {
        if (s->grad == cosine_grad && !s->ref)
            return vit_set_error(err, VIT_ERR_ARG, "%s: a cosine score without its other embedding",
                                 c->name);
        return VIT_OK;
    }
    if (!vit_has_head(vit))
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: a backbone without a classification head: no class to explain%s",
                             c->name, c->clip ? " (a CLIP tower: give it a text head)" : "");
    int two = s->grad == contrast_seed;
    if (s->a < 0 || s->a >= c->n_classes || (two && (s->b < 0 || s->b >= c->n_classes)))
        return vit_set_error(err, VIT_ERR_ARG, "%s: class %d out of range [0, %d)", c->name,
                             s->a < 0 || s->a >= c->n_classes ? s->a : s->b, c->n_classes);
    if (two && s->a == s->b)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: a contrast of class %d with itself (its score is 0)", c->name,
                             s->a);
    return VIT_OK;
}

int vit_embedding_dim(const Vit *vit) {
    const VitConfig *c = &vit->cfg;
    return vit->w.img_proj_w && c->embed_dim > 0 ? c->embed_dim : vit_head_width(c);
}

VitStatus vit_embedding(float *e, const VitRun *run, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    int D = c->dim, T = c->n_tokens;
    if (!run || !run->tokens || run->cfg.dim != D || run->cfg.n_tokens != T ||
        run->cfg.n_layers != c->n_layers || (c->head_pool == VIT_POOL_MAP && !run->head_scratch))
        return vit_set_error(err, VIT_ERR_ARG, "%s: embedding: the run was not made for it",
                             c->name);
    if (!e) return vit_set_error(err, VIT_ERR_ARG, "%s: embedding: no output", c->name);
    float *hin = malloc(3 * (size_t)D * sizeof *hin);
    if (!hin) return vit_set_error(err, VIT_ERR_NOMEM, "%s: embedding: out of memory", c->name);
    VitHeadIO io = {.hin = hin,
                    .x = run->tokens + (size_t)c->n_layers * T * D,
                    .in_stride = (size_t)T,
                    .row_stride = 1,
                    .n = 1,
                    .token = -1,
                    .drop = run->intervention ? run->intervention->drop : NULL,
                    .scratch = run->head_scratch};
    /* the pooling alone (logits NULL), as vit_head does it in the forward pass */
    if (c->head_pool == VIT_POOL_MAP)
        map_input(NULL, &io, vit, 0);
    else
        pool_input(&(PoolArgs){&io, vit, 1}, 0);
    if (vit->w.img_proj_w && c->embed_dim > 0) /* the forward pass's call: the same numbers */
        vit_text_head(NULL, NULL, e, hin, 1, vit, 0);
    else
        memcpy(e, hin, (size_t)vit_head_width(c) * sizeof *e);
    free(hin);
    return VIT_OK;
}
