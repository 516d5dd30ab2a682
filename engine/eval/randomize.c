/* randomize.c - cascading model-parameter randomisation (Adebayo et al. 2018,
 * "Sanity Checks for Saliency Maps", §3.1): a copy of a model whose classification
 * head and top blocks are re-initialised, for the sanity check of vitlens --eval.
 *
 * The copy shares every tensor it keeps with the original (pointers into its
 * mapping) and owns the re-initialised ones, one allocation. Re-initialised as timm
 * initialises a VisionTransformer (vision_transformer.py, init_weights /
 * _init_weights with the default 'jax'-less scheme, trunc_normal_(std=.02) for
 * every nn.Linear):
 *   linear weights  N(0, 0.02^2) truncated to [-2, 2] (absolute, as timm's
 *                   trunc_normal_(std=.02) leaves a = -2, b = 2: in effect untruncated)
 *   linear biases   0
 *   LayerNorm       weight 1, bias 0
 *   LayerScale      kept (timm sets it to init_values, which a checkpoint does not record)
 * The random numbers come from splitmix64 and Box-Muller in double, in a fixed
 * order (head, then blocks from the top, each tensor in its VitBlock field order),
 * so a seed gives the same weights on every machine. */
#include "internal.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#include <stdlib.h>
#include <string.h>

/* --- random numbers -------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, never 0. */
static double uniform01(uint64_t *s) {
    return ((double)(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* n samples of N(0, std^2) by Box-Muller, each redrawn while |x| > 2 (timm's
 * trunc_normal_ bounds). */
static void normal_fill(float *out, size_t n, double std, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        double x;
        do {
            double u = uniform01(s), v = uniform01(s);
            x = std * sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
        } while (fabs(x) > 2.0);
        out[i] = (float)x;
    }
}

/* --- the copy -------------------------------------------------------------- */

/* Carves re-initialised tensors out of dst->owned. */
typedef struct {
    float *next;
    uint64_t seed;
} Carve;

static const float *fresh_normal(Carve *c, size_t n) {
    float *p = c->next;
    normal_fill(p, n, 0.02, &c->seed);
    c->next += n;
    return p;
}

static const float *fresh_const(Carve *c, size_t n, float value, const float *had) {
    if (!had) return NULL; /* a tensor the model does not have stays absent */
    float *p = c->next;
    for (size_t i = 0; i < n; i++) p[i] = value;
    c->next += n;
    return p;
}

/* Floats that re-initialising one block takes (A: the attention's width H * Dh). */
static size_t block_floats(const VitConfig *c) {
    size_t D = (size_t)c->dim, F = (size_t)c->mlp_dim, A = (size_t)vit_att_width(c);
    return 3 * A * D + 3 * A                /* q, k, v (fused or not) and their biases */
           + D * A + D                      /* proj */
           + 4 * D                          /* norm1, norm2 */
           + F * D + F + D * F + D          /* fc1, fc2 */
           + (c->mlp_gated ? F * D + F : 0) /* a gated MLP's gate */
           + (c->mlp_norm ? 2 * F : 0);     /* and its sub-LN */
}

static void reinit_block(VitBlock *b, const VitConfig *cfg, Carve *c) {
    size_t D = (size_t)cfg->dim, F = (size_t)cfg->mlp_dim, A = (size_t)vit_att_width(cfg);
    b->norm1_w = fresh_const(c, D, 1.0f, b->norm1_w),
    b->norm1_b = fresh_const(c, D, 0.0f, b->norm1_b);
    /* queries, keys and values as one [3A, D] block (the fused layout), rows of it */
    const float *qkv = fresh_normal(c, 3 * A * D);
    int had_bias = b->q_b != NULL;
    const float *qkv_b = had_bias ? fresh_const(c, 3 * A, 0.0f, b->q_b) : NULL;
    b->qkv_w = qkv, b->qkv_b = qkv_b; /* contiguous now: the fused GEMM, whatever the naming */
    b->q_w = qkv, b->k_w = qkv + A * D, b->v_w = qkv + 2 * A * D;
    b->q_b = qkv_b, b->k_b = had_bias ? qkv_b + A : NULL, b->v_b = had_bias ? qkv_b + 2 * A : NULL;
    b->proj_w = fresh_normal(c, D * A), b->proj_b = fresh_const(c, D, 0.0f, b->proj_b);
    b->norm2_w = fresh_const(c, D, 1.0f, b->norm2_w),
    b->norm2_b = fresh_const(c, D, 0.0f, b->norm2_b);
    b->fc1_w = fresh_normal(c, F * D), b->fc1_b = fresh_const(c, F, 0.0f, b->fc1_b);
    b->fc2_w = fresh_normal(c, D * F), b->fc2_b = fresh_const(c, D, 0.0f, b->fc2_b);
    if (cfg->mlp_gated)
        b->fc1g_w = fresh_normal(c, F * D), b->fc1g_b = fresh_const(c, F, 0.0f, b->fc1g_b);
    b->mlp_norm_w = fresh_const(c, F, 1.0f, b->mlp_norm_w);
    b->mlp_norm_b = fresh_const(c, F, 0.0f, b->mlp_norm_b);
}

VitStatus vit_randomized(Vit *dst, const Vit *src, int n_blocks, uint64_t seed, VitError *err) {
    if (!dst || !src || !src->w.blocks)
        return vit_set_error(err, VIT_ERR_ARG, "randomised model: no model");
    const VitConfig *cfg = &src->cfg;
    if (n_blocks < 0 || n_blocks > cfg->n_layers)
        return vit_set_error(err, VIT_ERR_ARG,
                             "randomised model: %d blocks to re-initialise, expected 0 .. %d",
                             n_blocks, cfg->n_layers);
    memset(dst, 0, sizeof *dst);
    size_t D = (size_t)cfg->dim, C = (size_t)cfg->n_classes, E = (size_t)cfg->embed_dim,
           W = (size_t)vit_head_width(cfg); /* the head's input: D, or 2D */
    size_t F = (size_t)cfg->mlp_dim, map = cfg->head_pool == VIT_POOL_MAP
                                               ? 4 * D * D + 2 * F * D + F + 8 * D
                                               : 0; /* SigLIP's MAP head */
    size_t n = (size_t)n_blocks * block_floats(cfg) + (C * W + C) + (C * D + C) + E * D + map;
    dst->owned = malloc(n * sizeof(float));
    dst->w.blocks = malloc((size_t)cfg->n_layers * sizeof *dst->w.blocks);
    if (!dst->owned || !dst->w.blocks) {
        vit_free(dst);
        return vit_set_error(err, VIT_ERR_NOMEM, "randomised model: out of memory for %zu weights",
                             n);
    }
    VitBlock *blocks = dst->w.blocks;
    dst->cfg = src->cfg, dst->w = src->w, dst->w.blocks = blocks, dst->owned_floats = n;
    memcpy(dst->path, src->path, sizeof dst->path);
    memcpy(blocks, src->w.blocks, (size_t)cfg->n_layers * sizeof *blocks);

    Carve c = {dst->owned, seed};
    if (map) {
        /* SigLIP: the head is the MAP head (the text head is the phrase): its probe, its
         * attention's and MLP's linear layers N(0, 0.02^2), its LayerNorm 1 and 0 */
        VitProbeHead *m = &dst->w.map;
        m->probe = fresh_normal(&c, D);
        m->in_w = fresh_normal(&c, 3 * D * D), m->in_b = fresh_const(&c, 3 * D, 0.0f, m->in_b);
        m->out_w = fresh_normal(&c, D * D), m->out_b = fresh_const(&c, D, 0.0f, m->out_b);
        m->ln_w = fresh_const(&c, D, 1.0f, m->ln_w), m->ln_b = fresh_const(&c, D, 0.0f, m->ln_b);
        m->fc1_w = fresh_normal(&c, F * D), m->fc1_b = fresh_const(&c, F, 0.0f, m->fc1_b);
        m->fc2_w = fresh_normal(&c, D * F), m->fc2_b = fresh_const(&c, D, 0.0f, m->fc2_b);
    } else if (src->w.text_emb) {
        /* CLIP: the text head is the phrase, not a weight; the image projection is the
         * learned layer before it, re-initialised as a linear layer */
        dst->w.img_proj_w = fresh_normal(&c, E * D);
    } else if (C) {
        dst->w.head_w = fresh_normal(&c, C * W),
        dst->w.head_b = fresh_const(&c, C, 0.0f, src->w.head_b);
        if (src->w.head_dist_w) {
            dst->w.head_dist_w = fresh_normal(&c, C * D);
            dst->w.head_dist_b = fresh_const(&c, C, 0.0f, src->w.head_dist_b);
        }
    }
    for (int l = cfg->n_layers - 1; l >= cfg->n_layers - n_blocks; l--)
        reinit_block(&blocks[l], cfg, &c);
    return VIT_OK;
}
