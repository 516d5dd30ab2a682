/* vit/tokens.h - what the tokens hold: views of the residual stream. Part of vit.h, which
 * includes every part (and the overview: shapes, token order, the families loaded); include
 * that. */
#ifndef VIT_TOKENS_H
#define VIT_TOKENS_H

#include "vit/maps.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * What the tokens hold: views of the residual stream VitRun.tokens.
 *
 * `layer` is a block, 0 .. L-1: these read block `layer`'s output tokens,
 * tokens[layer + 1] [T, D] (the last block's for every token needs a run made with
 * VitRunOptions.all_tokens; without it, VIT_ERR_ARG). "Features" are those tokens
 * through the model's final LayerNorm (norm_w, norm_b), as DINOv2's
 * get_intermediate_layers(norm=True) and the logit lens read a layer. */

/* Features of block `layer`'s output: out[t] = LayerNorm(tokens[layer + 1][t]) with
 * the final norm's weights and eps. out: [T, D], caller's. Errors: VIT_ERR_ARG. */
VitStatus vit_features(float *out, const VitRun *run, const Vit *vit, int layer, VitError *err);

/* L2 norm of every token of block `layer`'s output (the residual stream, before
 * any norm, as Darcet et al. 2023, "Vision Transformers Need Registers", §2 measure
 * their high-norm tokens): out [T], summed in double. Errors: VIT_ERR_ARG. */
VitStatus vit_token_norms(float *out, const VitRun *run, int layer, VitError *err);

/* Patch similarity: the cosine similarity of `query`'s feature (vit_features) to
 * every patch's at the layer, out [N] in [-1, 1]; computed in double. A zero feature
 * gives 0. Errors: VIT_ERR_ARG (layer, query out of range), VIT_ERR_NOMEM. */
VitStatus vit_patch_similarity(float *out, const VitRun *run, const Vit *vit, int layer, int query,
                               VitError *err);

/* Logit lens: the model's head (its norm, pooling, fc_norm and classifier, the forward
 * pass's own code) applied to a layer's tokens, probs [C]. Token 0 (the CLS): the head as
 * the model applies it, on block `layer`'s output: softmax(head(norm(x_0))), for a
 * distilled model (DeiT) the mean of head(norm(x_0)) and head_dist(norm(x_1)), for a
 * pooled head (VitConfig.head_pool) the pooling of that layer's patch tokens
 * (softmax(head(fc_norm(mean_p norm(x_p)))), or [norm(x_0) ; mean_p norm(x_p)]). At the
 * last layer this is run->probs. Another token t stands in the place of what the head
 * pools: softmax(head(norm(x_t))) for a CLS head (the CLS head's weights; the
 * distillation head is not used), softmax(head(fc_norm(norm(x_t)))) for the mean of the
 * patches (as if every patch were token t), softmax(head([norm(x_0) ; norm(x_t)])) for
 * [CLS ; mean] (the layer's own CLS beside it). A model without a CLS token (SigLIP's MAP head):
 * token 0 is its first patch but asks, as above, for the head as the model applies it (the
 * probe over the layer's patches); another token t gives the head with every patch being
 * token t (the probe's softmax over one key: out_proj(v(norm(x_t))) + MLP); the
 * probabilities are SigLIP's sigmoids. Errors: VIT_ERR_ARG (no head: C == 0;
 * range), VIT_ERR_NOMEM. */
VitStatus vit_logit_lens(float *probs, const VitRun *run, const Vit *vit, int layer, int token,
                         VitError *err);

/* The logit lens over the patches: out[p] = vit_logit_lens(layer, Np + p)[cls], the
 * probability of class `cls` the head reads from each patch's token put in the place of
 * what it pools (CLS head: softmax(head(norm(x))), the CLS head's weights, the
 * distillation head not used; a pooled head: see vit_logit_lens). out [N]. Errors:
 * VIT_ERR_ARG, VIT_ERR_NOMEM. */
VitStatus vit_logit_lens_map(float *out, const VitRun *run, const Vit *vit, int layer, int cls,
                             VitError *err);

/* High-norm tokens (Darcet et al. 2023): the tokens of block `layer`'s output whose
 * norm n_t > median + k * MAD (median absolute deviation from the median, both over
 * the patch tokens, not scaled), and n_t > abs_threshold when abs_threshold > 0 (the
 * paper's 150 for DINOv2 ViT-L/g). idx [T] receives the token indices, patches and
 * prefix tokens alike, in decreasing norm; returns how many (0 .. T), or -1 on error
 * (err set). first [T] (may be NULL): for each listed token, the first layer l0 <=
 * layer from which its norm exceeds its own layer's threshold at every layer l0 ..
 * layer. threshold (may be NULL): layer's threshold. */
int vit_high_norm_tokens(int *idx, int *first, float *threshold, const VitRun *run, int layer,
                         float k, float abs_threshold, VitError *err);

/* TokenRank (Erel et al. 2025, "Attention (as Discrete-Time Markov Chains)"): the
 * attention matrix of a layer as a Markov chain, P = 0.99 * A + 0.01 / T (every
 * row of A sums to 1), and its stationary distribution pi = pi P by power
 * iteration from the uniform distribution until the L1 change is below 1e-9 (at
 * most 1000 steps), in double. A is one head's attention (head >= 0) or the heads
 * fused (head < 0), rows renormalised to sum 1 (mean fusion already does). out [T],
 * sums to 1: a global importance of each token. Errors: VIT_ERR_ARG, VIT_ERR_NOMEM. */
VitStatus vit_tokenrank(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                        VitError *err);

/* Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers",
 * §3): the layered graph with a node per token before block 0 and after every block
 * 0 .. layer, and an edge from token j after block l-1 to token i after block l of
 * capacity A_l[i, j], A_l = rownorm(0.5 * mean_h att[l, h] + 0.5 * I) (the residual;
 * the mean's rows sum to 1, so the renormalisation only removes float rounding, as
 * the paper's code does; these are vit_rollout's Â_l with mean fusion and no
 * discard). out[j] = the maximum flow from token j's input node to `query`'s node
 * after block `layer`, for every token j, prefix tokens included: out [T], each in
 * [0, 1] (the query's node takes in at most its row sum, 1). Raw flows: the paper's
 * code divides them by their sum, which the caller may do. Exact: vit_max_flow_layers
 * on those capacities. The attention is read as the maps read it (kept or
 * recomputed, the same values). Deep in a ViT the flow is mostly limited where it
 * enters: for DeiT-Tiny's CLS token after the last block out[j] = min(1, sum_i
 * A_0[i, j]), token j's capacity out of the input, for 99 to 100% of the tokens of the
 * test photos (tests/flow), so the map shows block 0's received attention, clipped.
 * Cost: T max-flow problems on (layer + 1) * T^2 edges, spread over run->n_threads
 * threads of its own, not the run's pool: it only reads the run, so it may run beside
 * the other maps, not beside vit_forward on the same run. DeiT-Tiny, the CLS token
 * after the last block: ~0.1 s at 1 thread, ~0.05 s at 2 (bench/bench_flow.c).
 * Allocates (layer + 1) * T^2 floats and per thread (layer + 1) * T^2 doubles
 * (DeiT-Tiny: 1.8 MB + 3.7 MB per thread).
 * Errors: VIT_ERR_ARG (layer, query out of range, no forward pass), VIT_ERR_NOMEM. */
VitStatus vit_attention_flow(float *out, const VitRun *run, int layer, int query, VitError *err);

/* The max flows of vit_attention_flow on given capacities, for tests and other graphs:
 * levels 0 .. n_layers of T nodes each, cap [n_layers, T, T], cap[l][i][j] the
 * capacity of the edge from token j at level l to token i at level l + 1 (>= 0,
 * finite; 0 is no edge). out[j] = the max flow from (0, j) to (n_layers, query), for
 * every j: out [T]. Dinic's algorithm in double (engine/maps/flow.c; exact up to the
 * rounding of double sums), rounded to float. The T problems are handed out to
 * min(n_threads, T) threads of its own, the caller's included (one that cannot start
 * or allocate is left out, the others do its share); the result does not depend on
 * the thread count. Reentrant: no state outside the call. Memory: per thread
 * n_layers * T^2 doubles and O(n_layers * T) more.
 * Errors: VIT_ERR_ARG (NULL out or cap, n_layers outside 1 .. VIT_MAX_LAYERS, T
 * outside 1 .. VIT_MAX_TOKENS, query outside [0, T), n_threads outside 1 ..
 * VIT_MAX_THREADS, a negative, infinite or NaN capacity: the message gives its
 * index), VIT_ERR_NOMEM. */
VitStatus vit_max_flow_layers(float *out, const float *cap, int n_layers, int T, int query,
                              int n_threads, VitError *err);

/* Feature PCA, the DINOv2 paper's Fig. 1 recipe (Oquab et al. 2023, §7.1 and the
 * Fig. 1/9 captions): x [M, D] feature rows, n_images blocks of M / n_images rows
 * (the patch features of one image, or of several stacked, so that one set of
 * components colours them all alike).
 *   1. Per image, a PCA of its rows: centred on their mean, scatter matrix in double,
 *      eigenvectors by LAPACK's dsyevr. First component c1, its sign chosen so that
 *      the mean projection of the rows with border[i] = 1 (patches on an image's
 *      edge: background in most photos) is below that of the other rows. When the
 *      two means are equal (within 1e-9 of the largest |projection|), or the image's
 *      border is NULL, all 1 or all 0: c1's largest |loading| is made positive
 *      instead. Foreground: the rows whose centred projection on c1 is > 0 (above
 *      1e-9 of the largest |projection|: a row at the mean is background). Fewer than
 *      4 foreground rows in an image: every row of it is foreground.
 *   2. One PCA of every image's foreground rows together (centred on their own
 *      mean): components 1 to 3, each with its largest |loading| positive; each one's
 *      projections, min-max scaled over the foreground to [0, 1], give R, G and B.
 * Rules that rounding alone could otherwise decide: a "largest |loading|" is the
 * first (lowest column) within 1e-9 (relative) of the largest, so that a column and
 * its negated copy tie; a component whose variance is at most 1e-10 of the total
 * (the rows do not vary along it) gives 0, and so does a component that cannot
 * exist (D < 3, or M < 4: n rows vary along n - 1 directions at most). Components
 * of equal variance (a repeated eigenvalue) are not unique: any rotation of them is
 * a PCA, and which one dsyevr returns decides the colours.
 * rgb [M, 3]: the colour of each foreground row, 0 for the background. fg [M]
 * (may be NULL): 1 foreground, 0 background. Both caller's; nothing is kept.
 * Time: O(M D min(M, D) + min(M, D)^3); one thread of OpenBLAS, 2 ms for 196 x 192
 * (DeiT-Tiny), 40 ms for 784 x 768, 0.3 s for 5476 x 1024.
 * The recipe as the DINOv2 issues give it, and where vitlens differs: #23 (a user's
 * script): scikit-learn's PCA (centred, SVD) of the patch features of 4 images
 * stacked, the first component min-max scaled and cut at a hand-picked value
 * (0.35, 0.5) with the side picked by eye, a second PCA of the foreground patches,
 * each of its 3 components min-max scaled, the background black. vitlens cuts the
 * centred projection at 0 (the paper's Fig. 9 caption: patches with a negative
 * score are removed) and picks the side with the border; its loading sign rule is
 * scikit-learn's svd_flip(u_based_decision=False). #45: the features are the final
 * norm's patch tokens (x_norm_patchtokens; here vit_features of the patch rows), and
 * the first PCA runs per image, only the second across images, as here: one first
 * component over photos of different subjects tells the photos apart rather than
 * foreground from background (DeiT-Tiny's last block over the four photos of
 * tests/pca: the rocket's would have no foreground, the cat's 0.92 of its inner
 * patches and 0.98 of its edge; per image the cat's is 0.67 and 0.40). #412 points
 * to the maintainers' features notebook (PR #187), which projects on a precomputed
 * foreground direction (standard.npy, ViT-B) instead of computing a first component.
 * Errors: VIT_ERR_ARG (rgb or x NULL, M < 1, D < 1, n_images < 1 or not dividing M,
 * a non-finite x), VIT_ERR_NOMEM, VIT_ERR_FORMAT (dsyevr failed: the message gives
 * its info). */
VitStatus vit_feature_pca(float *rgb, uint8_t *fg, const float *x, int m, int d, int n_images,
                          const uint8_t *border, VitError *err);

/* The feature PCA split in two, so that one basis colours many inputs alike (a video's
 * frames: a part keeps its colour as it moves). vit_feature_pca(rgb, fg, x, ...) is
 * vit_pca_fit(&b, x, ...) then vit_pca_project(rgb, fg, &b, x, ...), bit for bit.
 * Everything vit_feature_pca computes from its rows is kept (D: the feature width): */
typedef struct {
    int d;           /* D, the width it was fitted on; 0: not fitted */
    int held_fg;     /* 1: step 1 is kept (fitted on one image, n_images 1): a row is
                        foreground when fg_sign * (x - fg_mean) . fg_dir > fg_cut;
                        0 (several images): each input image's own step 1 */
    double *fg_mean; /* [D] step 1's mean row (owns the allocation of all four arrays) */
    double *fg_dir;  /* [D] step 1's first component, unit; 0 when the rows did not vary */
    double fg_sign;  /* +1 or -1: the side of fg_dir that is foreground */
    double fg_cut;   /* 1e-9 of the fit's largest |projection| on fg_dir */
    double *mean;    /* [D] step 2's mean, of the fit's foreground rows */
    double *comp;    /* [3, D] step 2's components 1 to 3, unit rows; 0 for a dead one */
    double sign[3];  /* each component's sign: its largest |loading| made positive */
    double lo[3];    /* min and max of sign[c] * (x - mean) . comp[c] over the fit's */
    double hi[3];    /*   foreground rows: channel c = (that - lo) / (hi - lo) */
    int live[3];     /* 1: channel c varies (variance above 1e-10 of the total, hi > lo);
                        0: channel c is 0 */
} VitPcaBasis;

/* Fit the basis b on x [M, D] (n_images, border [M] as vit_feature_pca's): step 1 per
 * image (kept when n_images is 1), step 2's mean, components, signs and min-max over
 * every image's foreground. b is overwritten (a basis in it freed first); free it with
 * vit_pca_basis_free, also after an error. Time: vit_feature_pca's.
 * Errors: vit_feature_pca's, and VIT_ERR_ARG for b NULL. */
VitStatus vit_pca_fit(VitPcaBasis *b, const float *x, int m, int d, int n_images,
                      const uint8_t *border, VitError *err);

/* Colour x [M, D] (n_images blocks of M / n_images rows) with the fitted basis b:
 * foreground by b's step 1 (held_fg: its cut, per image; else each image's own first
 * component, its sign by border [M] or NULL, as vit_feature_pca), fewer than 4
 * foreground rows in an image: all of it; then rgb [M, 3] = the foreground rows'
 * projections on b's components, scaled by b's lo .. hi and clamped to [0, 1] (rows
 * unlike the fit's may fall outside it), 0 for the background and a dead channel;
 * fg [M] (may be NULL) 1 foreground, 0 background. Time O(M D) with held_fg, else step
 * 1's PCAs. Errors: VIT_ERR_ARG (rgb, b or x NULL, b not fitted, M, D, n_images or a
 * non-finite x as vit_feature_pca), VIT_ERR_SHAPE (D is not b's), VIT_ERR_NOMEM,
 * VIT_ERR_FORMAT (dsyevr, without held_fg). */
VitStatus vit_pca_project(float *rgb, uint8_t *fg, const VitPcaBasis *b, const float *x, int m,
                          int d, int n_images, const uint8_t *border, VitError *err);

/* Free b's arrays and zero it (a zeroed or freed basis is fine). */
void vit_pca_basis_free(VitPcaBasis *b);

#ifdef __cplusplus
}
#endif
#endif /* VIT_TOKENS_H */
