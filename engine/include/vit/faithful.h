/* vit/faithful.h - faithfulness: perturbation, localisation, sanity checks. Part of vit.h,
 * which includes every part (and the overview: shapes, token order, the families loaded);
 * include that. */
#ifndef VIT_FAITHFUL_H
#define VIT_FAITHFUL_H

#include "vit/run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Faithfulness: perturbation, localisation, sanity checks
 *
 * Which map can I trust? The parts of `vitlens --eval`: the inputs of the tests, the
 * curve of the model's scores on them (vit_perturb_curve: the forward passes), and the
 * scores of the results.
 *   - Perturbation tests (Chefer et al. 2021, "Transformer Interpretability Beyond
 *     Attention Visualization", §4): patches are removed in vit_patch_order, most
 *     relevant first ("positive": a faithful map makes the score fall fast, a low AUC)
 *     or least relevant first ("negative": a high AUC), vit_perturb_count(s, n_steps,
 *     N) of them at step s; the score after each step is a curve (vit_perturb_curve),
 *     vit_auc its area.
 *     (Chefer et al.'s code ranks the pixels of the map upsampled to the input;
 *     vitlens removes whole patches, the tokens the model sees.)
 *   - Deletion and insertion (Petsiuk et al. 2018, "RISE: Randomized Input Sampling
 *     for Explanation of Black-box Models", its causal metrics): deletion removes the
 *     most relevant patches first (vit_patch_mix, fill NULL); insertion starts from a
 *     blurred copy (vit_blur) and puts the input's patches back, most relevant first
 *     (vit_patch_mix, base the blurred input, fill the input).
 *   - Localisation against a mask of the object (vit_mask_to_patches): the pointing
 *     game, the energy-based pointing game, the IoU of the top-k patches.
 *   - Sanity check (Adebayo et al. 2018, "Sanity Checks for Saliency Maps", the model
 *     parameter randomisation test): vit_spearman of the map of the trained model and
 *     of one with randomised weights; a map that does not change does not explain
 *     what the model learnt. Adebayo et al. report it with and without absolute
 *     values: pass |map| for the latter.
 *   - Baselines any map should beat: vit_random_map, vit_gaussian_map.
 * Maps here are [N] over the patches (row-major [gh, gw], patch p at row p / gw,
 * column p % gw) unless said otherwise; a mask is bytes, non-zero in, 0 out. The
 * functions that return a double return NaN when they cannot give a score, and
 * those that take a VitError then fill it (VIT_ERR_ARG unless said otherwise). */

/* Order of the patches for a perturbation test: order [n] the indices 0 .. n-1 by
 * decreasing map value (most_first 1: "positive" perturbation, the most relevant
 * first) or increasing (most_first 0: "negative"). Ties, in both directions: the
 * lower index first, so a constant map gives 0 .. n-1 either way and the order
 * depends on the map alone (-0 and +0 tie). map [n]; order [n], caller's. Nothing
 * allocated, O(n log n). Errors: VIT_ERR_ARG (order or map NULL, n < 1, a NaN or
 * infinite value: the message gives its index). */
VitStatus vit_patch_order(int *order, const float *map, int n, int most_first, VitError *err);

/* How many of n patches are removed after step `step` of n_steps: round-half-up(step
 * * n / n_steps), in exact 64-bit integer arithmetic, so step 0 removes none, step
 * n_steps all n, and the count never decreases with step (n 196 in 10 steps: 0, 20,
 * 39, 59, 78, 98, 118, 137, 157, 176, 196). step is clamped to [0, n_steps]; n_steps
 * < 1 or n < 1 gives 0. (Chefer et al.'s code truncates instead, int(N * f) of a
 * float fraction f: one lower wherever the fraction's part is .5 or more.) */
int vit_perturb_count(int step, int n_steps, int n);

/* One perturbed input: out [3, Sh, Sw] = base [3, Sh, Sw] with the pixels of the
 * patches order[0 .. k) (patch p: the P x P px square at grid row p / gw, column
 * p % gw, all three channels) taken from fill [3, Sh, Sw], or set to 0 when fill is
 * NULL. 0 is the channel's mean after vit_preprocess's normalisation: RISE's deletion
 * (zeros of the normalised input). Chefer et al.'s code sets the pixels to 0 before
 * normalising, i.e. black: pass a fill of (0 - mean[c]) / std[c] per channel c for
 * that. Sh, Sw, P, gw, N from cfg (image_h, image_w, patch_size, grid_w, n_patches).
 * k is clamped to N; entries of order outside [0, N) are skipped. out may equal base
 * (in place); it must not overlap fill. All arrays caller's. */
void vit_patch_mix(float *out, const float *base, const float *fill, const VitConfig *cfg,
                   const int *order, int k);

/* The perturbation curve of one map (Chefer et al. 2021, §4: positive and negative
 * perturbation; Petsiuk et al. 2018, RISE: deletion and insertion): the class
 * probabilities of the model on base with the first counts[i] patches of order replaced
 * by fill's, for each i < n_counts:
 *   probs[i, :] = softmax(head(vit(vit_patch_mix(base, fill, order, counts[i]))))
 * base, fill [3, Sh, Sw] normalised inputs (VitRun.input; fill NULL: zeros, i.e.
 * deletion and perturbation; insertion: base the blurred input (vit_blur) and fill the
 * input). order [N] from vit_patch_order. counts [n_counts], each in [0, N], in any
 * order and repeats allowed: typically vit_perturb_count(s, n_steps, N) for s = 0 ..
 * n_steps. probs [n_counts, C], caller's (the mean of both heads for a distilled model,
 * as VitRun.probs). Runs vit_forward_batch on b (made by vit_batch_init for vit or a
 * model of the same shapes) b->max_batch inputs at a time, in the order of counts: the
 * values are those of vit_forward_batch, within its tolerance of vit_forward's. To read
 * the curve of class c: probs[i*C + c]; its area: vit_auc. Allocates min(max_batch,
 * n_counts) * 3*Sh*Sw floats of scratch, freed before it returns. Errors: VIT_ERR_ARG (a
 * NULL array, n_counts < 1, a count outside [0, N], b not made for this model, a model
 * without head), VIT_ERR_NOMEM; on error probs is partly written. */
VitStatus vit_perturb_curve(float *probs, VitBatch *b, const Vit *vit, const float *base,
                            const float *fill, const int *order, const int *counts, int n_counts,
                            VitError *err);

/* Gaussian blur, the start of RISE's insertion test (its substrate, a blur by
 * gkern(klen=11, nsig=5): sigma 5, radius 5): out [C, H, W] = in [C, H, W] convolved
 * per channel with g[x] g[y], g[x] = exp(-x^2 / (2 sigma^2)) for x in [-radius,
 * radius] normalised to sum 1, separably (rows, then columns) in double, pixels
 * outside the image counting as 0 (torch.nn.functional.conv2d with padding = radius,
 * as RISE runs it: the border darkens towards 0). sigma in px.
 * Where RISE differs: gkern makes its kernel with scipy's gaussian_filter of an 11 x
 * 11 delta (sigma 5, truncated at 4 sigma = 20 px, mode 'reflect'), so the Gaussian's
 * tails beyond 5 px are folded back into the 11 taps: its 1-D taps run 0.0880 (ends)
 * to 0.0940 (centre), nearly a box, where this function's at sigma 5, radius 5 run
 * 0.0663 to 0.1094 (largest difference 0.022 per 1-D tap, 0.0033 per 2-D tap; the
 * two blurs of a 64 x 64 image of unit-variance noise differ by up to 0.065). RISE
 * also keeps the 2-D kernel in float32 and sums in float32 (3.6e-7 from this
 * function on normalised-image values, tests/faithful).
 * out [C, H, W] caller's, must not overlap in. Allocates H*W doubles of scratch.
 * Errors: VIT_ERR_ARG (out or in NULL, out == in, C < 1, H or W outside [1,
 * VIT_MAX_INPUT], sigma not a finite value > 0, radius outside [0, VIT_MAX_INPUT]),
 * VIT_ERR_NOMEM. */
VitStatus vit_blur(float *out, const float *in, int n_channels, int h, int w, float sigma,
                   int radius, VitError *err);

/* Area under a curve y [n] sampled at n evenly spaced x from 0 to 1 (step s at x = s
 * / (n - 1)), by the trapezoid rule, summed in double: (sum y - y[0] / 2 - y[n-1] / 2)
 * / (n - 1), RISE's auc() and numpy.trapz(y, dx=1/(n-1)). The AUC the perturbation
 * tests report; y in the score's units. NaN when y is NULL or n < 2. */
double vit_auc(const float *y, int n);

/* A map reduced to the patches, out [N]: pixels 1, map [Sh, Sw] over the input
 * pixels, each patch's P x P pixels summed in double (a sum, not a mean: the mass a
 * patch holds); pixels 0, map [N] already over the patches, copied. Sizes from cfg.
 * out may equal map when pixels is 0. */
void vit_map_to_patches(float *out, const float *map, const VitConfig *cfg, int pixels);

/* A mask of the object over the model's input pixels, mask [Sh, Sw] (non-zero in),
 * to the patches: out[p] = 1 when at least half of patch p's P*P pixels are in the
 * mask (2 * count >= P*P, in integers: 8 of 16 pixels is in, 4 of 9 is not), else 0.
 * Returns the number of patches in. out [N], caller's. Sizes from cfg. */
int vit_mask_to_patches(uint8_t *out, const uint8_t *mask, const VitConfig *cfg);

/* Pointing game (Zhang et al. 2016, "Top-down Neural Attention by Excitation
 * Backprop", at patch granularity and without their 15 px tolerance): the share of
 * the map's maximal patches (every patch equal to the maximum) that lie in the mask:
 * 1 (a hit) or 0 (a miss) for a unique maximum, k / m when k of m tied maxima are in;
 * a constant map gives the mask's share of the patches. map [n], mask [n].
 * Errors (NaN): map or mask NULL, n < 1, a NaN or infinite value (the message gives
 * its index), an empty mask. */
double vit_pointing_game(const float *map, const uint8_t *mask, int n, VitError *err);

/* Energy-based pointing game (Wang et al. 2020, "Score-CAM: Score-Weighted Visual
 * Explanations for Convolutional Neural Networks", §5.2): the share of the map's
 * positive mass inside the mask, sum of max(map, 0) over the mask / sum of max(map,
 * 0) over all n patches, in double; in [0, 1]. Score-CAM takes it over pixels in a
 * bounding box; give it a pixel map and mask through vit_map_to_patches and
 * vit_mask_to_patches for patches, or call it with n = Sh*Sw for pixels.
 * Errors (NaN): those of vit_pointing_game, and a map with no value > 0 (0 / 0). */
double vit_energy_pointing(const float *map, const uint8_t *mask, int n, VitError *err);

/* IoU of the map's top-k patches with the mask, k = the number of patches in the
 * mask: the first k of vit_patch_order(most_first 1) (ties: lower index first)
 * against the mask, |top-k and mask| / |top-k or mask|; in [0, 1], 1 when the k most
 * relevant patches are exactly the mask. Allocates n ints.
 * Errors (NaN): those of vit_pointing_game, VIT_ERR_NOMEM. */
double vit_topk_iou(const float *map, const uint8_t *mask, int n, VitError *err);

/* How far two maps agree on where the relevance is (the compare view's status line,
 * `vitlens --agreement`): the IoU of a [n]'s and b [n]'s top patches, each the first k
 * of vit_patch_order(most_first 1), k = floor(top_frac * n + 0.5) in double, clamped to
 * [1, n] (top_frac 0.1, n 196: k 20); ties at the cut go to the lower index, as
 * numpy's argsort(-a, kind="stable")[:k]. Returns |top(a) and top(b)| / |top(a) or
 * top(b)| in [0, 1]: 1 when the two sets are the same, 0 when disjoint; two
 * independent random maps give k / (2n - k) on average (0.053 at top_frac 0.1).
 * Errors (NaN, err filled): a or b NULL, n < 1, top_frac not in (0, 1], a NaN or
 * infinite value (the message names the map and index), a constant map (every patch
 * tied: it has no top patches; as vit_spearman gives NaN), out of memory (2n ints). */
double vit_top_iou(const float *a, const float *b, int n, double top_frac, VitError *err);

/* Spearman's rank correlation of a [n] and b [n] (scipy.stats.spearmanr): the
 * Pearson correlation of their ranks, a tie group sharing the mean of its ranks, in
 * double; in [-1, 1]. NaN when either is constant (every rank equal), n < 2, a or b
 * NULL, a value NaN or infinite, or out of memory (2n doubles and n ints). */
double vit_spearman(const float *a, const float *b, int n);

/* Baseline: a uniform random map out [n] in [0, 1), float(x >> 40) / 2^24 for each
 * 64-bit output x of splitmix64 seeded with seed (the generator's state lives in the
 * call: the same seed gives the same map on every machine and thread). n < 1: nothing
 * written. */
void vit_random_map(float *out, int n, uint64_t seed);

/* Baseline: a centred isotropic Gaussian over the grid, out [gh, gw] = exp(-d^2 / (2
 * s^2)), d the distance in patches from the grid's centre ((gh-1)/2, (gw-1)/2), s =
 * sigma_frac * min(gh, gw) patches; 1 at the centre, computed in double. A map of
 * "the object is in the middle" (the centre bias of ImageNet photos). sigma_frac +inf
 * gives all 1; sigma_frac <= 0 or NaN the limit s -> 0: 1 on a patch at the exact
 * centre (odd gh and gw), 0 elsewhere. gh or gw < 1: nothing written. */
void vit_gaussian_map(float *out, int gh, int gw, float sigma_frac);

#ifdef __cplusplus
}
#endif
#endif /* VIT_FAITHFUL_H */
