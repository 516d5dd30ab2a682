/* vit/backward.h - the backward pass and the class-specific maps. Part of vit.h, which
 * includes every part (and the overview: shapes, token order, the families loaded); include
 * that. */
#ifndef VIT_BACKWARD_H
#define VIT_BACKWARD_H

#include "vit/run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Backward pass: why this class?
 *
 * vit_backward differentiates one class's logit y_c (for a DeiT distilled model
 * the averaged logit (head(x_0) + head_dist(x_1)) / 2 that is the prediction)
 * through the whole model by hand, next to the forward pass (backward.c), for
 * the class-specific maps (vit_explain). No weight gradients: only what flows to
 * the activations. When the run keeps its attention and the block internals fit
 * beside it in VIT_ATT_KEEP_MAX_BYTES (DeiT-Tiny to ViT-B at 224 px: +14 / 29 /
 * 58 MB), the forward pass keeps every layer's queries and keys, values, residual
 * between attention and MLP and fc1's output before GELU, and vit_backward reads
 * them; otherwise it recomputes each block's internals from the block's input
 * tokens (VitRun.tokens), one block at a time from the top (the same numbers), so
 * its memory is one block's activations plus what it keeps:
 *   - att kept by the run (att_kept 1): grad_att [L, H, T, T] dy_c/dA_l;
 *     otherwise the attention output's gradient dctx [L, T, A], from which a map
 *     recomputes dA = dctx_h . v_h^T block by block, with layer l's values v
 *     recomputed once per layer from VitRun.tokens[l] (norm1, then the value
 *     projection: the same calls on the same pool and numbers, so the maps are the
 *     same bit for bit);
 *   - grad_tokens [L, T, D], grad_input [3, Sh, Sw], and small per-method parts.
 * AttnLRP's modified gradient (lrp_input) is a second pass of the same code with
 * its rules (Achtibat et al. 2024): LayerNorm's standard deviation held constant,
 * GELU as the identity rule x * (gelu(x)/x), attention probabilities held
 * constant (CP-LRP: nothing flows into queries and keys).
 * Runs on the run's thread pool. */

typedef enum {
    VIT_GRAD_EXACT = 1, /* the true gradients (grad_att, grad_tokens, grad_input, ...) */
    VIT_GRAD_LRP = 2,   /* AttnLRP's modified gradient at the input (lrp_input) */
    VIT_GRAD_ALL = 3,
    VIT_GRAD_ADD = 4,   /* with a pass: keep the other pass's results of the last call (the same
                           run, forward pass and class), e.g. AttnLRP's pass only once its map is
                           asked for; without it they are dropped */
    VIT_GRAD_LEGRAD = 8 /* LeGrad's E_l alone (g->legrad, what VIT_EXPLAIN_LEGRAD reads), the
                           same numbers as the exact pass's: per layer the head's gradient
                           through the block's top on the rows the head reads (1 or 2), not a
                           whole backward pass (ViT-B/16: a few ms, against ~2 forward passes);
                           a run that recomputes its attention recomputes each block too. The
                           exact pass makes them as well (g->what then says VIT_GRAD_EXACT) */
} VitGradWhat;

/* A score to explain: what vit_backward_score differentiates, S(logits) or S(e). One small
 * function gives the seed of the backward pass, the score's gradient at the head's output:
 *   on_logits 1: grad(d [C], NULL, C, lrp, s): d = dS/dlogits, a constant vector (the
 *     score is linear in the logits: one logit is a one-hot, a contrast e_a - e_b); the
 *     pass sends sum_c d[c] dlogits[c]/dz back (a class with d[c] = 0 costs nothing).
 *   on_logits 0: grad(d [E], e [E], E, lrp, s): d = dS/de at e, the model's pooled
 *     embedding (vit_embedding: what the head reads, or CLIP's projection of it; E =
 *     vit_embedding_dim); for LeGrad it is called again at each layer's embedding. A model
 *     without a head can be explained by such a score.
 * lrp 1: AttnLRP's pass asks; a score may hold a norm constant there, as the LayerNorm
 * rule holds the standard deviation (vit_score_cosine: |e| constant, so that e . d = S).
 * The engine calls grad only from vit_backward_score's thread. */
typedef struct VitScore VitScore;
struct VitScore {
    int on_logits;
    void (*grad)(float *d, const float *e, int n, int lrp, const VitScore *s);
    int a, b;         /* the classes of vit_score_logit (a) and vit_score_contrast (a, b) */
    const float *ref; /* [E] vit_score_cosine's other embedding, the caller's, held constant */
};

/* S = logits[c], the class-specific maps' usual score (vit_backward). */
VitScore vit_score_logit(int c);
/* S = logits[a] - logits[b]: why a rather than b (a != b; vit_backward_score checks the
 * range). */
VitScore vit_score_contrast(int a, int b);
/* S = cos(e, ref) = e . ref / (|e| |ref|), ref [E] held constant (the other photo's
 * vit_embedding; kept by the caller while the pass runs): dS/de = (ref / |ref| - S e /
 * |e|) / |e|; 0 when e or ref is 0. AttnLRP's pass: ref / (|ref| |e|). */
VitScore vit_score_cosine(const float *ref);

/* E: the width of vit_embedding (CLIP's embed_dim with an image projection, else
 * vit_head_width: D, or 2D for VIT_POOL_CLS_MEAN). */
int vit_embedding_dim(const Vit *vit);

/* e [E] (caller's, vit_embedding_dim) = the model's pooled embedding after the last
 * vit_forward on run: the head's input h (the final norm, the model's pooling - CLS token,
 * mean of the patches, [CLS ; mean], the MAP head - and fc_norm; DeiT's CLS row), or for
 * a CLIP tower img_proj(h) (vit_image_embed's). Works without a head. Allocates [3D].
 * Errors: VIT_ERR_ARG (run not made for vit, no forward pass), VIT_ERR_NOMEM. */
VitStatus vit_embedding(float *e, const VitRun *run, const Vit *vit, VitError *err);

typedef struct {
    VitConfig cfg;      /* the config the buffers were sized for */
    int target;         /* c: the class of the last vit_backward, -1 before; -2 after
                           vit_backward_score of a score other than one logit */
    VitScore score;     /* the score of the last pass (a copy; its ref is the caller's) */
    int what;           /* the passes (VitGradWhat) whose results g holds, for class target */
    int grad_att_kept;  /* 1: grad_att holds [L, H, T, T] */
    float *grad_att;    /* [L, H, T, T] dy_c/dA_l, A_l the softmax probabilities; NULL when
                           the run recomputes its attention (read maps through vit_explain) */
    float *grad_tokens; /* [L, T, D] dy_c/dz_l, z_l block l's output tokens (for the last
                           block only the rows the head reads are non-zero) */
    float *grad_input;  /* [3, Sh, Sw] dy_c/d input, the normalised pixels run->input */
    float *lrp_input;   /* [3, Sh, Sw] AttnLRP's modified gradient at the input */
    float *cam_act;     /* [N, D] the last block's norm1 output at the patch tokens */
    float *cam_grad;    /* [N, D] dy_c/d cam_act (Grad-CAM's target layer) */
    float *legrad;      /* [L, N] LeGrad's E_l: mean over heads and query rows of
                           ReLU(ds_l/dA_l) at the patch columns, s_l = head(norm(z_l))_c */
    float *probe_grad;  /* [H, N] dy_c / d VitRun.probe_att, the MAP head's probe attention
                           (exact pass; cfg.head_pool VIT_POOL_MAP), else NULL */
    /* private */
    float *dctx;   /* [L, T, A] when grad_att is not kept (A = H * Dh) */
    int n_threads; /* the most threads a run may have (per-thread scratch) */
    float *mem;
    size_t mem_floats;
} VitGrad;

/* Allocate the buffers of vit_backward for runs of `vit` shaped like `run`
 * (attention kept or recomputed, thread count); a model without a head too (for a score
 * of its embedding: vit_backward_score). Sized for C: made again when C changes.
 * Errors: VIT_ERR_ARG (a run made for another model), VIT_ERR_NOMEM. Free with
 * vit_grad_free (NULL-safe, accepts a zeroed VitGrad). */
VitStatus vit_grad_init(VitGrad *g, const Vit *vit, const VitRun *run, VitError *err);
void vit_grad_free(VitGrad *g);

/* The gradients of logit `target` (0 .. C-1; -1: the top-1 class) after
 * vit_forward(run, vit): `what` selects the exact pass, the AttnLRP pass or
 * both (VitGradWhat), plus VIT_GRAD_ADD to keep the other pass's results of the
 * previous call for the same class and forward pass (the caller's promise: nothing
 * can tell a new forward pass on the same run). g->what then says which passes'
 * results g holds. Allocates a few [T]-sized buffers per call.
 * The gradients are those of the model run->intervention made (see "Interventions": an
 * ablated head passes none back, a dropped patch's row and column of grad_att are 0, a
 * filled patch's pixels get none; tests/parity/test_interventions.py against autograd).
 * Errors: VIT_ERR_ARG (class out of range, no head, g not made for this run, an
 * add for another class, an intervention vit_intervention_check refuses), VIT_ERR_NOMEM. */
VitStatus vit_backward(VitGrad *g, const VitRun *run, const Vit *vit, int target, int what,
                       VitError *err);

/* vit_backward for any score (VitScore): the same pass seeded with the score's gradient at
 * the logits (dS/dlogits [C]) or at the pooled embedding (dS/de [E]) instead of a one-hot;
 * every buffer of g then holds dS/d... (grad_att [L, H, T, T] dS/dA_l, grad_input, ...) and
 * vit_explain explains S. vit_backward(target) is this with vit_score_logit(target), bit
 * for bit. VIT_GRAD_ADD: the same score (kind, classes, ref pointer) as the last call.
 * Errors: vit_backward's, and VIT_ERR_ARG for a logit score on a model without a head, a
 * class out of range, a contrast of a class with itself, no grad function or no ref. */
VitStatus vit_backward_score(VitGrad *g, const VitRun *run, const Vit *vit, const VitScore *s,
                             int what, VitError *err);

/* Class-specific explanation maps, from a run and its VitGrad (exact pass; AttnLRP
 * also needs the LRP pass). Raw values, not normalised. */
typedef enum {
    VIT_EXPLAIN_CHEFER = 0,   /* patch map [gh, gw] */
    VIT_EXPLAIN_GRAD_ROLLOUT, /* patch map [gh, gw]; uses discard_ratio */
    VIT_EXPLAIN_GRADCAM,      /* patch map [gh, gw] */
    VIT_EXPLAIN_LEGRAD,       /* patch map [gh, gw] */
    VIT_EXPLAIN_ATTNLRP,      /* pixel map [Sh, Sw] */
    VIT_EXPLAIN_GRAD_INPUT,   /* pixel map [Sh, Sw] */
    VIT_EXPLAIN_COUNT
} VitExplain;

/* Short name of a method: "chefer", "grad-rollout", "gradcam", "legrad",
 * "attnlrp", "grad-input". Static string. */
const char *vit_explain_name(VitExplain m);

/* 1 when the method's map is [Sh, Sw] (pixels), 0 when [gh, gw] (patches). */
int vit_explain_pixels(VitExplain m);

/* One explanation map into out ([gh, gw] or [Sh, Sw], vit_explain_pixels):
 *   CHEFER (Chefer, Gur, Wolf, "Generic Attention-model Explainability", ICCV
 *     2021, eq. 5-6; hila-chefer/Transformer-MM-Explainability):
 *       R = I; for l = 0 .. L-1: R <- R + mean_h((dA_l (.) A_l)^+) . R;
 *       out = R[CLS, patches]
 *   GRAD_ROLLOUT (jacobgil/vit-explain grad_rollout, with each layer's gradient
 *     paired with its own attention, vit-explain issue #6):
 *       F_l = max(mean_h(A_l (.) dA_l), 0) (clamped after the head mean, as the
 *       code does); the discard of vit_rollout (patch columns only); Â_l =
 *       rownorm((F_l + I) / 2); out = (Â_{L-1} ... Â_0)[CLS, patches]
 *   Without a CLS token (SigLIP's MAP head) both end at the probe's row instead of the
 *     CLS's: Chefer out = Abar_probe . R[:, patches], Abar_probe = mean_h((dA_p (.) A_p)^+)
 *     over the probe's attention A_p [H, N] and its gradient (VitGrad.probe_grad); the
 *     gradient rollout out = f . (Â_{L-1} ... Â_0)[:, patches], f = max(mean_h(A_p (.)
 *     dA_p), 0) normalised to sum 1 (the probe is no token: no identity added)
 *   GRADCAM (Selvaraju et al. 2017; jacobgil/pytorch-grad-cam's ViT recipe,
 *     target layer blocks[-1].norm1, every prefix token dropped):
 *       w = mean over patches of cam_grad [D]; out = ReLU(cam_act . w)
 *   LEGRAD (Bousselham et al. 2024, WalBouss/LeGrad compute_legrad_clip, with
 *     s_l = head(norm(z_l[CLS]))_c): out = sum_l legrad[l]
 *   ATTNLRP (Achtibat et al., ICML 2024, rachtibat/LRP-eXplains-Transformers,
 *     gradient x input form with the CP-LRP variant): out[y, x] =
 *       sum_ch input[ch, y, x] * lrp_input[ch, y, x]
 *   GRAD_INPUT: out[y, x] = sum_ch input[ch, y, x] * grad_input[ch, y, x]
 * When the run recomputes its attention (grad_att NULL), CHEFER and GRAD_ROLLOUT
 * recompute each layer's values on the run's thread pool: vit_explain is then not
 * reentrant with vit_forward, vit_backward or another vit_explain on the same run
 * (call them one after the other, as for vit_backward).
 * Errors: VIT_ERR_ARG (unknown method, no backward pass, or the pass that the
 * method needs not run, run or g not made for vit, discard_ratio outside [0, 1)),
 * VIT_ERR_NOMEM. */
VitStatus vit_explain(float *out, VitExplain m, const VitRun *run, const VitGrad *g, const Vit *vit,
                      float discard_ratio, VitError *err);

/* Cascading randomisation (Adebayo et al. 2018, "Sanity Checks for Saliency Maps",
 * §3.1), for the sanity check of the maps: dst becomes a copy of src whose
 * classification head (and distillation head) and top n_blocks blocks (L-1 down to
 * L-n_blocks) are re-initialised as timm initialises a VisionTransformer: linear
 * weights N(0, 0.02^2) (trunc_normal_(std=.02): redrawn beyond +-2), biases 0,
 * LayerNorm weight 1 and bias 0; LayerScale is kept (its init value is not in the
 * checkpoint); with a CLIP text head (vit_set_text_head) the image projection is
 * re-initialised in the head's place (the text embeddings are the phrase, not weights
 * of the image model). n_blocks 0: the head only (the cascade's first step); the trained
 * model is src itself. The patch embedding, tokens, position embedding and final
 * norm are kept. Same seed, same weights on every machine (splitmix64 + Box-Muller in
 * double, engine/eval/randomize.c). dst shares src's other tensors: free it (vit_free)
 * before src. dst->labels is NULL. Memory: n_blocks * (4D^2 + D^2 + 2FD + ...) + 2CD
 * + ED floats. Errors: VIT_ERR_ARG (n_blocks outside 0 .. L), VIT_ERR_NOMEM; on error dst
 * is zeroed. */
VitStatus vit_randomized(Vit *dst, const Vit *src, int n_blocks, uint64_t seed, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_BACKWARD_H */
