/* vit/maps.h - maps over the patch grid: attention, rollout, flow; the explorer's masks. Part
 * of vit.h, which includes every part (and the overview: shapes, token order, the families
 * loaded); include that. */
#ifndef VIT_MAPS_H
#define VIT_MAPS_H

#include "vit/run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Maps over the patch grid: out [gh, gw], read from run->att, or recomputed
 * from the kept queries and keys when the attention is not kept (same values).
 * `query` is a token index: 0 the CLS token, Np + r*gw + c the patch (r, c).
 * A map holds the patch columns of a row only; the rest of the row, what goes
 * to the prefix tokens, is vit_prefix_share's.
 * Errors: VIT_ERR_ARG for an out-of-range layer/head/query/ratio;
 * VIT_ERR_NOMEM (rollout scratch). */

typedef enum { VIT_FUSE_MEAN = 0, VIT_FUSE_MAX, VIT_FUSE_MIN } VitFusion;

const char *vit_fusion_name(VitFusion f); /* "mean", "max", "min" */

/* Attention of `query` to every patch, one layer and head:
 * out[p] = att[layer, head, query, Np + p]. */
VitStatus vit_map_attention(float *out, const VitRun *run, int layer, int head, int query,
                            VitError *err);

/* Head fusion: out[p] = fuse_h att[layer, h, query, Np + p] (mean, max or min
 * over heads). */
VitStatus vit_map_fused(float *out, const VitRun *run, int layer, VitFusion fusion, int query,
                        VitError *err);

/* Attention entropy: how focused each patch's attention is. For head >= 0,
 *   out[p] = H_{Np+p} = -sum_j att[layer, head, Np + p, j] * ln att[layer, head, Np + p, j]
 * the entropy in nats (0 ln 0 = 0) of query token Np + p's attention row over all T keys,
 * the prefix tokens (CLS, distillation, registers) included as keys: 0 when the patch
 * attends to one token only, ln T when it attends to all alike. The map is over the
 * patch queries; the prefix tokens' own rows are not in it. head < 0: the heads' maps
 * fused, out[p] = fuse_h H_{h, Np+p} (mean, max or min over heads: the most diffuse and
 * the most focused head), as the app's per-head kinds fuse: not the entropy of the fused
 * attention, which for max and min is no distribution. Each row is summed in double,
 * the map stored in float. Attention read as the other maps read it (kept or
 * recomputed, the same values). Errors: VIT_ERR_ARG (layer or head out of range, an
 * unknown fusion with head < 0, no forward pass), VIT_ERR_NOMEM (head < 0: [H + 3, N]
 * scratch), VIT_ERR_CANCELLED. */
VitStatus vit_map_entropy(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                          VitError *err);

/* Every vit_map_entropy map of layers layer0 .. layer0 + n_layers - 1 at once, as the
 * app's overviews show them: out [n_layers, H + 3, N], per layer the maps of heads
 * 0 .. H-1, then the mean, max and min fusion (VitFusion order), each bit for bit the
 * vit_map_entropy call it stands for; each head's attention is read once. Reports
 * layers done (VitRun.control). Errors: those of vit_map_entropy, VIT_ERR_ARG for
 * layer0 < 0 or n_layers < 1. */
VitStatus vit_map_entropy_layers(float *out, const VitRun *run, int layer0, int n_layers,
                                 VitError *err);

/* Attention rollout (Abnar & Zuidema 2020, §3), up to and including `layer`:
 *   A_l  = fuse_h att[l, h]                                   [T, T]
 *   discard: the floor(discard_ratio * T*(T-Np)) smallest entries of A_l
 *            whose key is a patch (columns >= Np) are set to 0; attention to
 *            prefix tokens (the CLS token) is never discarded. Ties break by
 *            lower row-major index first.
 *   Â_l  = rownorm(0.5 * A_l + 0.5 * I)     rows renormalised to sum 1
 *            (for mean fusion without discard this is exactly 0.5A + 0.5I)
 *   R_l  = Â_l · Â_{l-1} · ... · Â_0
 *   out[p] = R_layer[query, Np + p]
 * head >= 0 gives per-head rollout (Appendix A.1): Â_{layer,h} (that head's
 * attention, identity added, rows renormalised, no discard) times the
 * head-fused rollout R_{layer-1} of the layers below (I when layer == 0).
 * head < 0 gives the head-fused rollout. discard_ratio in [0, 1), read as the
 * decimal the caller wrote (0.9f counts 90%, not 89.999998%).
 * Allocates O(T*T) scratch internally. */
VitStatus vit_rollout(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                      float discard_ratio, int query, VitError *err);

/* The same rollout's whole row over every token: out[t] = R_layer[query, t], out [T] (prefix
 * tokens first, then the patches): its patch part is vit_rollout's map and its prefix part
 * vit_prefix_share's with rollout 1, bit for bit, from one rollout instead of two (which
 * matters when the attention is recomputed). Errors: those of vit_rollout. */
VitStatus vit_rollout_tokens(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                             float discard_ratio, int query, VitError *err);

/* Every rollout map of layers layer0 .. layer0 + n_layers - 1 at once, as the
 * app's overviews show them: out [n_layers, H + 3, N], per layer the per-head
 * rollout of heads 0 .. H-1 (the layers below fused by the mean) and then the
 * rollout with mean, max and min fusion, each bit for bit the vit_rollout call it
 * stands for (same discard_ratio and query). Faster than those (H + 3) * n_layers
 * calls: each fused, discarded matrix of the layers below is made once per
 * fusion, not once per map. Allocates (layer0 + n_layers) * T^2 floats of scratch.
 * When the run recomputes its attention (VitRun.att_kept 0), every layer up to
 * the top is recomputed once per fusion: three times a forward pass's attention.
 * Errors: those of vit_rollout, VIT_ERR_ARG for layer0 < 0 or n_layers < 1. */
VitStatus vit_rollout_layers(float *out, const VitRun *run, int layer0, int n_layers,
                             float discard_ratio, int query, VitError *err);

/* The prefix-token part of the row a map is read from: out[Np], out[i] the
 * share of `query`'s attention (rollout: of its rolled-out row) that goes to
 * prefix token i (0 the CLS token, then the distillation and register tokens).
 * Together with the map's N values it sums to 1 (the row does). Arguments as
 * the map functions: rollout 0 reads att[layer] (head >= 0 one head, else the
 * head fusion), rollout 1 the rollout with head, fusion and discard_ratio.
 * Errors: those of the map functions. */
VitStatus vit_prefix_share(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                           int rollout, float discard_ratio, int query, VitError *err);

/* Short name of prefix token i of cfg: "CLS", "dist", "reg1" .. "regR"
 * (1-based, as a user counts). Writes into buf (n bytes); returns buf. */
const char *vit_prefix_name(char *buf, size_t n, const VitConfig *cfg, int i);

/* ---------------------------------------------------------------------------
 * Explorer maps: masks and distances for the classroom views. */

/* DINO's attention mask (Caron et al. 2021, "Emerging Properties in
 * Self-Supervised Vision Transformers", Fig. 3; its visualize_attention.py
 * keeps the patches whose ascending cumulative share exceeds 1 - fraction):
 * the smallest set of patches holding at least `fraction` of the map's mass.
 * Patches are taken in decreasing order of value (ties: lower patch index
 * first) while the sum of those already taken is below fraction * sum(map),
 * summed in double. mask [n]: 1 in the set, 0 outside. map [n] >= 0, e.g. a
 * vit_map_attention or vit_rollout map: its mass is over the patches only
 * (attention to prefix tokens is not part of it), as DINO's is. fraction in
 * (0, 1]; 1 keeps every patch whose value is > 0; an all-zero map gives an empty mask. n_kept (may
 * be NULL): the size of the set. Errors: VIT_ERR_ARG (n < 1, fraction out of range, a negative,
 * infinite or NaN value), VIT_ERR_NOMEM. Allocates O(n) scratch. */
VitStatus vit_mass_mask(uint8_t *mask, int *n_kept, const float *map, int n, float fraction,
                        VitError *err);

/* Mean attention distance (Dosovitskiy et al. 2021, "An Image is Worth 16x16
 * Words", §4.5 and Fig. 7 right: "the distance between the query pixel and all
 * other pixels, weighted by the attention weight", here for one image):
 *   out[l*H + h] = mean over patch queries i of
 *                  sum_j att[l, h, Np+i, Np+j] * d(i, j) / sum_j att[l, h, Np+i, Np+j]
 * over the patch keys j, d(i, j) = P * Euclidean distance between the grid
 * positions of patches i and j: px of the model's input (Sh x Sw px), centre to
 * centre. out: [L, H], px. Prefix tokens (the CLS token, registers) are neither
 * queries nor keys: each query's attention to the patches is renormalised to
 * sum 1, so attention to the CLS token is left out rather than counted at
 * distance 0 (which would lower a head's distance by its share of attention
 * to the CLS token). A query whose patch attention is all 0 is skipped.
 * Errors: VIT_ERR_ARG (no forward pass), VIT_ERR_NOMEM. O(L*H*N^2); when the
 * attention is recomputed, as much again as a forward pass's attention. */
VitStatus vit_attention_distance(float *out, const VitRun *run, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_MAPS_H */
