/* vit/lesson.h - the lesson: how a ViT computes, step by step. Part of vit.h, which includes
 * every part (and the overview: shapes, token order, the families loaded); include that. */
#ifndef VIT_LESSON_H
#define VIT_LESSON_H

#include "vit/run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * The lesson: how a ViT computes, step by step, on one photo (the app's lesson view,
 * `vitlens --lesson-export`). Every number a step shows comes from these calls, which
 * read the forward pass (VitRun) or rerun one block of it with the forward pass's own
 * code (engine/passes/block.c) on its own input tokens: the same values, not a second
 * model. The steps follow the notebooks a class builds a ViT in (Dosovitskiy et al.
 * 2021, "An Image is Worth 16x16 Words", §3.1, eq. 1-4; Fig. 7 for the filters and the
 * position embedding):
 *   patches (unfold, row-major) -> patch embedding (a stride-P convolution = a matmul)
 *   -> CLS token first, + position embedding -> per block: LayerNorm, q/k/v per head,
 *   q.k^T / sqrt(Dh), softmax, the weighted sum of values, heads concatenated and
 *   projected, the residual add, the MLP with GELU, the second residual add -> the
 *   final LayerNorm of the CLS token, the head, softmax. */

/* Step 1-2, patch `patch` (0 .. N-1, grid row patch / gw, column patch % gw: the order
 * of unfold and of a stride-P convolution's flatten(2)): pixels [3, P, P] (= [3*P*P],
 * may be NULL) its normalised values as the patch embedding reads them (the im2col row
 * of the forward pass, run->input cut at the patch), embedding [D] (may be NULL) the
 * patch embedding of that patch alone, patch_w . pixels + patch_b (the convolution's
 * output at the patch, before the position embedding). Both caller's.
 * Errors: VIT_ERR_ARG (patch out of range, no forward pass). */
VitStatus vit_lesson_patch(float *pixels, float *embedding, const VitRun *run, const Vit *vit,
                           int patch, VitError *err);

/* Step 2, the patch embedding's filters as images (ViT paper, Fig. 7 left: "RGB
 * embedding filters (first 28 principal components)"): a PCA of the D filters
 * patch_w [D, 3*P*P], each a row, centred on the mean filter, in double (LAPACK's
 * dsyevr on the smaller of the scatter [3PP, 3PP] and Gram [D, D] matrices). comps
 * [k, 3, P, P] the first k unit principal components (decreasing variance), each
 * with its largest |loading| positive (the first within 1e-9 of it); var [k] (may be
 * NULL) each one's share of the total variance. k is at most min(D - 1, 3*P*P); ask
 * for more and the extra rows are 0. Returns the number of components written, or -1
 * on error (VIT_ERR_ARG: k < 1 or a NULL comps; VIT_ERR_NOMEM; VIT_ERR_FORMAT: dsyevr
 * failed). Allocates O(min(D, 3PP)^2 + D*3PP) doubles, freed before it returns. */
int vit_lesson_filters(float *comps, float *var, const Vit *vit, int k, VitError *err);

/* Step 3, the position embeddings' similarity (ViT paper, Fig. 7 centre): out [N, N],
 * out[i, j] the cosine similarity of patch i's and patch j's position embedding (the
 * rows the forward pass adds, resampled to the input grid: pos_embed[pos_prefix + i]),
 * in double; row i is patch i's gh x gw grid. A zero vector gives 0. Caller's. A rotary
 * model (cfg.rope) has no such rows: the rows of its rotation table (VitWeights.rope,
 * cosines then sines) take their place, whose cosine similarity is the mean over the
 * rotated pairs of cos(a_i - a_j), what the scores see of two positions. */
void vit_lesson_pos_similarity(float *out, const Vit *vit);

/* Step 4, inside block `layer` for one head and one query token. vit_lesson_block
 * reruns the block on its input tokens run->tokens[layer] with vit_forward's own block
 * (engine/passes/block.c: the same calls, on the run's thread pool, so its output
 * equals run->tokens[layer + 1] bit for bit wherever the run computed it) and keeps
 * every intermediate; vit_lesson_select then reads one (head, token) out of them
 * without engine work beyond one [<= VIT_ATT_BLOCK, T] product of queries and keys.
 * Buffers are [T, .] rows in token order; the selected token's view is at the end. */
typedef struct {
    VitConfig cfg;
    int layer;   /* the block whose internals are held, -1 before vit_lesson_block */
    float *x;    /* [T, D] the block's input (tokens[layer]) */
    float *xn1;  /* [T, D] norm1(x) */
    float *qk;   /* [T, 2A] queries then keys, heads side by side (Dh columns each) */
    float *v;    /* [T, A] values */
    float *att;  /* [H, T, T] softmax(q k^T / sqrt(Dh)) per head */
    float *ctx;  /* [T, A] every head's weighted sum of values, concatenated */
    float *proj; /* [T, D] proj(ctx), before LayerScale and the residual add */
    float *xm;   /* [T, D] x + ls1 * proj(ctx): after the first residual add */
    float *xn2;  /* [T, D] norm2(xm) */
    float *hpre; /* [T, F] fc1(xn2), before GELU */
    float *hid;  /* [T, F] GELU(hpre) */
    float *mlp;  /* [T, D] fc2(hid), before LayerScale and the residual add */
    float *out;  /* [T, D] xm + ls2 * mlp: the block's output */
    /* the selected (head, token), written by vit_lesson_select */
    int head, token;  /* -1 before vit_lesson_select */
    float ln_mean;    /* norm1's mean of x[token] */
    float ln_std;     /* norm1's sqrt(var + eps) of x[token] (biased variance) */
    float *query;     /* [Dh] the token's query in this head */
    float *keys;      /* [T, Dh] every token's key in this head */
    float *values;    /* [T, Dh] every token's value in this head */
    float *scores;    /* [T] q . k_j / sqrt(Dh), the forward pass's product before softmax */
    float *probs;     /* [T] softmax(scores): the attention row, bit for bit what
                         vit_map_attention (patches) and vit_prefix_share (prefix) read */
    float norm_in;    /* |x[token]|, the residual stream before the attention add */
    float norm_mid;   /* |xm[token]|, after it */
    float norm_out;   /* |out[token]|, after the MLP add */
    float gelu_share; /* share of the F hidden units with GELU(hpre) > 0 at the token */
    /* a rotary model (cfg.rope): the rotation of the token's query and key in this head
       (VIT_ROPE_DINOV3's pairs (i, i + Dh/2), i < Dh/2), as the run applied it (a position
       shuffle: the angles of patch pos_perm[p]; --pos zero: none); zeros otherwise */
    float *query0;      /* [Dh] the query before the rotation (query: after it) */
    float *key0;        /* [Dh] the token's key before the rotation (keys[token]: after) */
    float *angles;      /* [Dh/2] pair i's rotation angle, rad in (-pi, pi]: pairs i < Dh/4
                           turn with the patch's row (y), the others with its column (x);
                           0 for a prefix token (not rotated) */
    float *rope_scores; /* [N] query . R(a_p) key0 / sqrt(Dh) for every patch p: the token's
                           own key moved to patch p, i.e. q0^T R(a_p - a_token) k0, which
                           depends on the offset of p from the token only (before any
                           temperature) */
    /* private */
    float *mem;
    float *sel;
    const float *rope; /* [N, Dh] the block's rotary table (VitWeights.rope), or NULL */
} VitLesson;

/* Allocate a VitLesson for runs of vit: T*(11D + 2F) + H*T*T + (2T + 4)*Dh +
 * (3 + VIT_ATT_BLOCK)*T floats (DeiT-Tiny: 3.6 MB). Errors: VIT_ERR_NOMEM. Free with
 * vit_lesson_free (NULL-safe, accepts a zeroed VitLesson). */
VitStatus vit_lesson_init(VitLesson *ls, const Vit *vit, VitError *err);
void vit_lesson_free(VitLesson *ls);

/* Rerun block `layer` (0 .. L-1) of the forward pass in run into ls, as above. One
 * block's work (1/L of a forward pass) on the run's pool: not reentrant with
 * vit_forward or another call using the same run's pool. The selection is cleared.
 * Errors: VIT_ERR_ARG (layer out of range, no forward pass, ls not made for vit). */
VitStatus vit_lesson_block(VitLesson *ls, const VitRun *run, const Vit *vit, int layer,
                           VitError *err);

/* Select head (0 .. H-1) and query token (0 .. T-1: 0 the CLS token, Np + r*gw + c the
 * patch (r, c)) of the block ls holds: fills ln_mean .. gelu_share, and for a rotary model
 * query0 .. rope_scores (the rotation undone on query and keys[token]: exact up to float
 * rounding). probs is read as
 * vit_map_attention reads it (run->att, or recomputed from the run's queries and keys).
 * Errors: VIT_ERR_ARG (range, no block yet), VIT_ERR_NOMEM (recomputed attention). */
VitStatus vit_lesson_select(VitLesson *ls, const VitRun *run, int head, int token, VitError *err);

/* Step 5, the head: cls_norm [D] = the final LayerNorm of the CLS token
 * (run->tokens[L][0]), the row the head reads (a pooled head, VitConfig.head_pool: the
 * first D floats of what it reads, fc_norm(mean of the patches) or the CLS half of
 * [CLS ; mean]); the logits and their softmax are
 * run->logits and run->probs (for a distilled model the mean of both heads, as
 * timm's inference), vit_top_k gives the top-5. Errors: VIT_ERR_ARG (a model without
 * head, C == 0: "the model has no classification head"; no forward pass). */
VitStatus vit_lesson_head(float *cls_norm, const VitRun *run, const Vit *vit, VitError *err);

/* Step 5 of a model pooled by attention (VitConfig.head_pool VIT_POOL_MAP: SigLIP's MAP
 * head; Zhai et al. 2023, big_vision MAPHead; transformers' SiglipMultiheadAttentionPoolingHead):
 * one learned probe vector, not a token of the image, is the query of an attention over the
 * final LayerNorm of the last block's patch tokens, per head; the heads' weighted sums of
 * values are concatenated and projected (out_proj), then e = a + MLP(LayerNorm(a)) is the
 * image embedding. vit_lesson_probe reruns the head with vit_forward's own call
 * (engine/passes/head.c, probe.c) on the run's pool and on the run's last block output,
 * an intervention's dropped patches left out as the run left them, and keeps every
 * intermediate; att equals run->probe_att and embedding the head's output (run->img_embed
 * when kept) bit for bit. */
typedef struct {
    float *att;         /* [H, N] the probe's attention per head, rows sum to 1 (dropped
                           patches 0) */
    const float *probe; /* [D] the learned probe (VitWeights.map.probe: a weight) */
    float *query;       /* [D] its query, probe Wq^T + bq, heads side by side (Dh each) */
    float *weighted;    /* [D] each head's attention-weighted sum of values, concatenated */
    float *attended;    /* [D] out_proj(weighted): the residual */
    float *mlp;         /* [D] fc2(act(fc1(LayerNorm(attended)))) */
    float *embedding;   /* [D] attended + mlp: the image embedding (the MAP head's output) */
    /* private */
    float *mem;
} VitLessonProbe;

/* Fill p (allocated: H*N + 5*D floats, and a scratch freed before it returns; free with
 * vit_lesson_probe_free, which accepts a zeroed VitLessonProbe). Not reentrant with
 * vit_forward or another call on the same run's pool. Errors: VIT_ERR_ARG (a model
 * without a MAP head: "... has no attention-pooling (MAP) head"; no forward pass),
 * VIT_ERR_NOMEM. */
VitStatus vit_lesson_probe(VitLessonProbe *p, const VitRun *run, const Vit *vit, VitError *err);
void vit_lesson_probe_free(VitLessonProbe *p);

#ifdef __cplusplus
}
#endif
#endif /* VIT_LESSON_H */
