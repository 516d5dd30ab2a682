/* vit/run.h - the forward pass (VitRun, threads, cancelling) and interventions. Part of vit.h,
 * which includes every part (and the overview: shapes, token order, the families loaded);
 * include that. */
#ifndef VIT_RUN_H
#define VIT_RUN_H

#include "vit/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Forward pass
 *
 * Memory. The maps read every layer's attention. Kept whole it is L*H*T*T
 * floats: DeiT-Small 7 MiB, ViT-B/16 22 MiB, but DINOv2 ViT-L/14 at 518 px
 * (T = 1370) 2.9 GB, more than its weights. Above VIT_ATT_KEEP_MAX_BYTES (or
 * when asked, VitRunOptions.att) the run keeps each layer's queries and keys
 * instead, L*T*2D floats (DINOv2-L at 518 px: 269 MB), and a map recomputes the
 * attention rows it reads with the forward pass's own function on the same
 * numbers, block of query rows by block (at most VIT_ATT_BLOCK rows): the values
 * are the same bit for bit, not an approximation (tests/engine test_att_storage).
 * What a map then costs: vit_map_attention one block of one head (<= 128*T*Dh
 * multiply-adds and a softmax), vit_map_fused one block per head, vit_rollout
 * every head of every layer up to `layer`, as much as the attention of a
 * forward pass. When the attention is kept, so are (if they fit beside it in
 * VIT_ATT_KEEP_MAX_BYTES) the block internals vit_backward reads, L*T*(4D + F)
 * floats.
 *
 * Threads. vit_forward runs on the run's own pool of n_threads threads (the
 * caller's thread included; default one per online core). OpenBLAS's own
 * threading is turned off (openblas_set_num_threads(1), process-wide) so that
 * its idle threads never spin beside the pool's; GEMMs are split over the pool
 * instead. Each step is a set of items (column slices of a layer, blocks of rows,
 * (head, block) pairs of the attention) that the running threads take in turn; the
 * caller starts at once and never waits for a pool thread that has not started on
 * one, so on a machine busy with other work the pass is no slower than on one
 * thread. Idle pool threads spin for a few microseconds, then sleep.
 *
 * BLAS kernels. OpenBLAS picks its kernels from the CPU's model when it is loaded, and
 * falls back to its SSE3 ("Prescott") ones on a CPU newer than the library (Debian 12's
 * 0.3.21 on recent Xeons: about 3x slower). Every program linked with the engine's pool
 * then starts itself again, before main, with OPENBLAS_CORETYPE set to the kernels the
 * CPU can run (SkylakeX for AVX-512, Haswell for AVX2 + FMA); a user's own
 * OPENBLAS_CORETYPE is kept. vit_blas_core() names the kernels in use.
 *
 * Stopping early. A window runs these calls on a worker thread and must be able to drop
 * one that nobody waits for any more (a newer request, or quitting): VitRun.control,
 * when set, points at a VitControl that vit_forward checks before each layer and each
 * attention block, and the maps that read the attention (vit_map_attention, vit_map_fused,
 * vit_map_entropy, vit_prefix_share, vit_rollout, vit_rollout_layers, vit_attention_distance,
 * vit_attention_flow, vit_tokenrank, vit_explain's Chefer and gradient rollout) before each
 * layer and each block of rows they recompute. Once another thread has called
 * vit_control_cancel, the call returns within about one block's work: a map with
 * VIT_ERR_CANCELLED, vit_forward (which returns nothing) with the run's outputs
 * undefined. The same VitControl reports how far a call is (vit_forward, the rollouts and
 * the distance: layers done of layers to do; attention flow: tokens), for a progress
 * line. The backward pass (vit_backward) and vit_forward_batch do not check it. */

#define VIT_ATT_KEEP_MAX_BYTES (512ull << 20) /* VIT_ATT_AUTO keeps [L, H, T, T] up to this */
#define VIT_ATT_BLOCK          128            /* query rows per attention block */
#define VIT_MAX_THREADS        256

typedef enum {
    VIT_ATT_AUTO = 0, /* keep the attention when it takes at most VIT_ATT_KEEP_MAX_BYTES */
    VIT_ATT_KEEP,     /* keep att [L, H, T, T]: a map is a read */
    VIT_ATT_RECOMPUTE /* keep queries and keys [L, T, 2D]; a map recomputes its rows */
} VitAttStorage;

/* A flag and a progress counter shared between the thread running a long call and the
 * thread that may stop it or watch it (see "Stopping early" above). Zero-initialise;
 * the fields are private, read and written atomically through the functions below. */
typedef struct {
    int cancel_;       /* nonzero: stop */
    int done_, total_; /* the running call's steps (layers) done, of total_ */
} VitControl;

/* Ask the call running with c to stop (any thread). */
void vit_control_cancel(VitControl *c);
/* Clear the flag and the progress, before c is given to a new call (no call running). */
void vit_control_reset(VitControl *c);
/* Has vit_control_cancel been called since the last reset? (any thread) */
int vit_control_cancelled(const VitControl *c);
/* Report progress: `done` steps of `total` (the engine calls it between layers; a caller
 * that chains several calls may call it too). */
void vit_control_report(VitControl *c, int done, int total);
/* The last progress reported: *done of *total (0 of 0: none yet). Any thread. */
void vit_control_progress(const VitControl *c, int *done, int *total);

/* ---------------------------------------------------------------------------
 * Interventions: "what if?" on the running model
 *
 * A VitIntervention changes the model a forward pass runs: set VitRun.intervention
 * (vit_forward, the maps that recompute the attention, vit_backward: class-specific
 * maps of the intervened model) or VitBatch.intervention (vit_forward_batch). NULL,
 * or one with nothing active (vit_intervention_active 0), runs the model as it is,
 * bit for bit (tests/engine test_intervention). Give only one that
 * vit_intervention_check accepts: vit_forward returns nothing and cannot refuse one
 * (vit_forward_batch and vit_backward check it). Each part is tested against a
 * PyTorch reference of timm's architecture with the change written into it
 * (tests/parity/test_interventions.py):
 *   ablate [L, H]  head ablation (Michel et al. 2019, "Are Sixteen Heads Really Better
 *                  than One?", §2; transformers' head_mask): head h of layer l gives
 *                  nothing to the block: its part of the attention output, ctx[:, h*Dh ..
 *                  (h+1)*Dh), is 0 before proj (proj's bias stays). transformers multiplies
 *                  the probabilities by the mask (attention_probs * head_mask), the same
 *                  output; its returned attention is then 0, whereas VitRun.att (and the
 *                  maps) keep what the ablated head computes: where it looks, unused.
 *   drop [N]       patch removal: the patches are taken out of the token sequence, as if
 *                  timm ran on the tokens [prefix, kept patches] with each kept patch's
 *                  own position embedding (a ViT takes any number of tokens). The engine
 *                  keeps T and masks instead, so that every buffer and map keeps its
 *                  [gh, gw] shape: a score whose key is a dropped patch is -inf before
 *                  the softmax (its probability exactly 0, the others normalised over the
 *                  kept tokens), which gives every kept token the numbers of the shorter
 *                  sequence (to the GEMMs' order of summation); a dropped patch's own
 *                  attention row is set to 0. att[l, h] of a dropped patch p: row and
 *                  column Np + p are 0. Its token and every map's value at p mean
 *                  nothing: vit_intervention_mask sets them to NaN (the app draws the
 *                  patch hatched). Rollout's discard ratio counts the zeros of the
 *                  dropped columns among the smallest entries.
 *   fill [N]       patch replacement: the patch's pixels are 0 after normalisation, the
 *                  channels' means (vit_patch_mix with fill NULL: --eval's deletion), so
 *                  its token is the patch embedding's bias plus its position embedding.
 *                  Unlike a dropped patch it stays in the sequence and is attended to.
 *                  A patch both dropped and filled is dropped.
 *   pos_embed      VIT_POS_SHUFFLE: patch p gets the position embedding of patch
 *                  pos_perm[p] (pos_perm [N] a permutation of 0 .. N-1, e.g. from
 *                  vit_pos_permutation); the prefix tokens keep theirs. VIT_POS_ZERO:
 *                  no position embedding is added at all (prefix tokens included).
 *   temperature    A = softmax(s / tau), s = q k^T / sqrt(Dh) (the softmax temperature
 *                  of Hinton et al. 2015), every head of layer temp_layer (0-based);
 *                  tau > 1 flattens the attention, tau < 1 sharpens it; 0: none. The
 *                  engine scales q by 1 / (sqrt(Dh) tau) in the score GEMM.
 * Ownership: the arrays are the caller's, read during the calls only. */

typedef enum {
    VIT_POS_KEEP = 0, /* the model's position embedding */
    VIT_POS_SHUFFLE,  /* patch p gets patch pos_perm[p]'s */
    VIT_POS_ZERO      /* none added */
} VitPosEdit;

typedef struct {
    const uint8_t *ablate; /* [L, H] non-zero: head ablated, or NULL */
    const uint8_t *drop;   /* [N] non-zero: patch dropped from the sequence, or NULL */
    const uint8_t *fill;   /* [N] non-zero: patch's pixels set to the mean (0), or NULL */
    VitPosEdit pos_embed;  /* VIT_POS_KEEP (zero-initialised), _SHUFFLE, _ZERO */
    const int *pos_perm;   /* [N] VIT_POS_SHUFFLE's permutation */
    int temp_layer;        /* 0 .. L-1: the layer temperature applies to */
    float temperature;     /* tau > 0, or 0: no temperature */
} VitIntervention;

/* Does iv change anything (NULL: 0)? An ablate / drop / fill array with no non-zero
 * entry does not. Sizes from cfg. */
int vit_intervention_active(const VitIntervention *iv, const VitConfig *cfg);

/* Check iv against the model of cfg. Errors (VIT_ERR_ARG, the message names the part):
 * every patch dropped, pos_embed not a VitPosEdit, VIT_POS_SHUFFLE without pos_perm or
 * with one that is not a permutation of 0 .. N-1, a temperature that is not finite, or
 * < 0, or given with temp_layer outside 0 .. L-1. NULL is fine (nothing to check). */
VitStatus vit_intervention_check(const VitIntervention *iv, const VitConfig *cfg, VitError *err);

/* A seeded permutation perm [n] of 0 .. n-1: Fisher-Yates (for i = n-1 down to 1, swap
 * i with j = x mod (i + 1)), x the successive 64-bit outputs of splitmix64 seeded with
 * seed (as vit_random_map), from the identity. The same seed gives the same permutation
 * on every machine; the modulo's bias is below n / 2^64. n < 1: nothing written. */
void vit_pos_permutation(int *perm, int n, uint64_t seed);

/* map [N] over the patches: the dropped patches of iv (drop) set to NaN; nothing
 * without drop. What a map of an intervened run shows at a patch that is not in the
 * sequence. */
void vit_intervention_mask(float *map, const VitIntervention *iv, const VitConfig *cfg);

/* Options for vit_run_init_with; zero-initialised means the defaults. */
typedef struct {
    int n_threads;     /* threads for vit_forward, 1 .. VIT_MAX_THREADS; 0: one per online core */
    VitAttStorage att; /* how the attention is kept for the maps (see above) */
    int all_tokens;    /* 1: the last block's output is computed for every token, as the token
                          views (vit_features, vit_token_norms, ...) read it; 0: only the rows
                          the head reads (CLS, distillation token), 1/L of a pass less */
} VitRunOptions;

struct VitPool;

/* Activations and outputs of one forward pass. One allocation made by
 * vit_run_init, carved into named buffers; vit_forward allocates nothing. */
typedef struct {
    VitConfig cfg;      /* copy of the model's config the buffers were sized for */
    float *input;       /* [3, Sh, Sw] normalised pixels (vit_preprocess writes it) */
    float *x;           /* [T, D] the residual stream between a block's attention and its
                           MLP (scratch; per layer in xm when blocks_kept) */
    float *xn;          /* [T, D] LayerNorm output, then proj/fc2 output */
    float *qk;          /* [T, 2A] queries, keys of the current layer; [L, T, 2A] every
                           layer's when the attention is not kept (for the maps) or the block
                           internals are (blocks_kept, for the backward pass) */
    float *v;           /* [T, A] values; [L, T, A] every layer's when blocks_kept */
    float *ctx;         /* [T, A] attention output before proj */
    float *hid;         /* [T, F] MLP hidden */
    float *patches;     /* [N, 3*P*P] im2col of the input */
    float *tokens;      /* [L + 1, T, D] the residual stream: tokens[0] the embedded input
                           (patch embedding, prefix tokens, position embedding), tokens[l + 1]
                           block l's output; of the last block's output only the rows the
                           head reads (CLS, distillation token) are computed, unless
                           all_tokens */
    float *att;         /* [L, H, T, T] softmax attention probabilities, rows sum to 1; NULL
                           when not kept (att_kept 0): read maps through the functions below */
    float *logits;      /* [C] (NULL when C == 0); with a distillation head the mean of both */
    float *probs;       /* [C] softmax of logits (NULL when C == 0) */
    float *logits_dist; /* [C] the distillation head's own logits, written when the model has
                           one (w.head_dist_w); NULL when C == 0 */
    float *img_embed;   /* [E] CLIP's image embedding img_proj(norm(z_L)[CLS]), not normalised
                           (vit_image_embed); SigLIP's: the MAP head's output [D]; NULL when
                           E == 0 */
    float *probe_att;   /* [H, N] the MAP head's probe attention over the patches, per head,
                           rows sum to 1 (an intervention's dropped patches 0): where a SigLIP
                           tower looks when it pools (cfg.head_pool VIT_POOL_MAP); else NULL */
    int crop_x, crop_y, crop_w, crop_h; /* source-image px rectangle the model saw */
    int n_threads;                      /* threads vit_forward uses */
    int att_kept;                       /* 1: att holds [L, H, T, T]; 0: recomputed from qk */
    int all_tokens;                     /* 1: tokens[L] holds every token (VitRunOptions) */
    VitControl *control; /* NULL (vit_run_init's), or the flag and progress of the calls made
                            on this run (see "Stopping early"); set by the caller. The maps
                            read the run as const: a caller may give one thread's calls a
                            copy of the VitRun with its own control */
    const VitIntervention *intervention; /* NULL (vit_run_init's), or the changes to the
                            model (see "Interventions") that vit_forward, the maps that
                            recompute the attention and vit_backward apply; set by the
                            caller, the same for all the calls on one forward pass */
    /* private */
    float *att_scratch;  /* [n_threads, VIT_ATT_BLOCK, T] when att is not kept */
    int blocks_kept;     /* 1: qk, v [L, ...], xm and hpre hold every layer's (vit_backward) */
    float *xm;           /* [L, T, D] the residual stream between attention and MLP (last
                            layer: the head's rows), when blocks_kept */
    float *hpre;         /* [L, T, F] fc1's output before GELU (the same rows), when blocks_kept */
    float *pre;          /* [T, D] the embedded tokens before norm_pre (cfg.norm_pre), for the
                            backward pass; NULL without norm_pre */
    float *head_scratch; /* the MAP head's (vit_head_scratch_floats), or NULL */
    struct VitPool *pool;
    float *mem;
    size_t mem_floats;
} VitRun;

/* Allocate the buffers for one forward pass of `vit` and start its threads.
 * opt may be NULL (the defaults: a thread per core, VIT_ATT_AUTO).
 * Errors: VIT_ERR_NOMEM (also over VIT_MAX_ACTIVATION_BYTES, which vit_load
 * already refuses; or threads that cannot start), VIT_ERR_ARG (options out of
 * range). Free with vit_run_free (NULL-safe, accepts a zeroed VitRun). */
VitStatus vit_run_init_with(VitRun *run, const Vit *vit, const VitRunOptions *opt, VitError *err);
VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err); /* opt NULL */

/* The name of OpenBLAS's kernels in use ("SkylakeX", "Haswell", "Zen", "Prescott", ...;
 * see "BLAS kernels" above), a static string; for benchmarks and bug reports. */
const char *vit_blas_core(void);
void vit_run_free(VitRun *run);

/* Run the model on run->input [3, Sh, Sw]. Fills the attention (run->att
 * [L, H, T, T], or the queries and keys that recompute it), run->logits [C] and
 * run->probs [C]. All linear layers and attention products go through
 * cblas_sgemm; allocates nothing. Not reentrant on one run; several runs may
 * run at once on one Vit.
 * timm: x = cat(cls, dist?, reg?, patch_embed(x)) with pos_embed added to the
 *           tokens it covers (_pos_embed)
 *       for blk: x = x + ls1 * attn(norm1(x)); x = x + ls2 * mlp(norm2(x))
 *       logits = head(norm(x)[:, 0])   (distilled: (head(x0) + head_dist(x1)) / 2)
 * With run->control set: reports the layers done, and returns early once cancelled (then
 * logits, probs and the attention are undefined: the caller, who cancelled, knows). */
void vit_forward(VitRun *run, const Vit *vit);

/* Buffers of vit_forward_batch for up to max_batch inputs (B): one allocation and a
 * thread pool, made by vit_batch_init. Nothing of a pass is kept but the class
 * probabilities: no attention, no residual stream. */
typedef struct {
    VitConfig cfg; /* copy of the model's config the buffers were sized for */
    int max_batch; /* B: the most inputs one vit_forward_batch call takes */
    int n_threads; /* threads vit_forward_batch uses */

    /* NULL, or the changes to the model (see "Interventions") applied to every input;
       set by the caller */
    const VitIntervention *intervention;

    /* private */
    float *patches;      /* [B*N, 3*P*P] im2col of the inputs */
    float *x;            /* [B*T, D] the residual stream, image after image */
    float *xn;           /* [B*T, D] LayerNorm output, then proj/fc2 output; first the patch
                            embedding [B*N, D] */
    float *qk;           /* [B*T, 2A] queries, keys of the current layer */
    float *v;            /* [B*T, A] values */
    float *ctx;          /* [B*T, A] attention output before proj */
    float *hid;          /* [B*T, F] MLP hidden */
    float *xh;           /* [2, B, D] the last block's rows the head reads: every image's CLS
                            token, then every image's distillation token */
    float *logits;       /* [B, C] */
    float *logits_dist;  /* [B, C] the distillation head's */
    float *embed;        /* [B, E] CLIP's image embeddings (a text head) */
    float *att_scratch;  /* [n_threads, VIT_ATT_BLOCK, T] */
    float *head_scratch; /* the MAP head's (vit_head_scratch_floats), or NULL */
    struct VitPool *pool;
    float *mem;
    size_t mem_floats;

    /* [n, L, H] the heads ablated per input (vit_head_importance), or NULL: intervention's
       for all */
    const uint8_t *ablate_each;
} VitBatch;

/* Allocate the buffers of vit_forward_batch for up to max_batch inputs of `vit` and
 * start n_threads threads (1 .. VIT_MAX_THREADS, the caller's included; 0: one per
 * online core, as VitRunOptions). One allocation of
 *   B*(N*3*P*P + T*(2D + 3A + max(A, D) + F) + 2D + 2C + E) + n_threads*VIT_ATT_BLOCK*T   floats
 * (DeiT-Tiny: 2.0 MiB per input, 65 MiB for B = 32).
 * Errors: VIT_ERR_ARG (max_batch < 1, n_threads out of range, a model without head:
 * C == 0), VIT_ERR_NOMEM (the size overflows or is over VIT_MAX_ACTIVATION_BYTES, or
 * the allocation or the threads fail). On error *b is zeroed. Like vit_run_init, turns
 * OpenBLAS's own threading off (process-wide). Free with vit_batch_free (NULL-safe,
 * accepts a zeroed VitBatch). */
VitStatus vit_batch_init(VitBatch *b, const Vit *vit, int max_batch, int n_threads, VitError *err);
void vit_batch_free(VitBatch *b);

/* The class scores of n inputs at once, 1 <= n <= b->max_batch: inputs [n, 3, Sh, Sw]
 * normalised pixels (each as VitRun.input, e.g. from vit_preprocess), logits [n, C] (the
 * mean of both heads for a distilled model, as VitRun.logits) and probs [n, C] (their
 * softmax), each caller's and may be NULL. For faithfulness tests, which run many
 * perturbed copies of one photo: the n inputs' token rows are stacked, so every linear
 * layer (patch embedding, query/key/value, proj, fc1, fc2, head) is one GEMM over n*T
 * rows (n*N for the patch embedding) rather than n GEMMs; attention stays within each
 * image (per image and head, blocks of VIT_ATT_BLOCK query rows), and the last block is
 * computed only for the rows the head reads (CLS, distillation token). Row i equals
 * vit_forward's logits and probs for input i alone up to float rounding (the GEMMs'
 * blocking differs: tests/engine test_batch holds it to 1e-5 of the largest logit).
 * Runs on b's pool; allocates nothing; not reentrant on one b. Throughput against n
 * vit_forward calls (docs/benchmarks.md): 1.03-1.1x at 1 thread (the pass is GEMM-bound),
 * more where the pool's hand-offs between threads are dear (DeiT-Tiny at 2 threads on a
 * busy machine: 1.6x at n = 8 to 32, since a batch makes them once for all n).
 * With b->intervention set, every input runs on the intervened model (see
 * "Interventions").
 * Errors: VIT_ERR_ARG (n out of range, inputs NULL, b not made by vit_batch_init for a
 * model of vit's shapes, an intervention vit_intervention_check refuses), with nothing
 * written. */
VitStatus vit_forward_batch(VitBatch *b, const Vit *vit, const float *inputs, int n, float *logits,
                            float *probs, VitError *err);

/* Head importance for class `target` (Michel et al. 2019, "Are Sixteen Heads Really Better
 * than One?", §3-4, with the measured change rather than their gradient proxy):
 *   importance[l, h] = p_target(model) - p_target(model with head (l, h) ablated)
 * the drop in the class probability when that head alone is ablated (vit.h
 * "Interventions": its output zeroed before proj), on top of b->intervention (a head it
 * ablates already: 0). importance [L, H] caller's; base_prob (may be NULL): p_target of
 * the model without the extra ablation. input [3, Sh, Sw] normalised pixels. The L*H
 * passes run on b (made by vit_batch_init for vit, any max_batch >= 1) and share their
 * start: the passes that ablate a head of layer l start from the unablated stream at layer
 * l, H of them batched (up to max_batch); L*H*(L+1)/2 + L blocks in all, 0.54 of L*H full
 * passes for L = 12. The values are those of vit_forward_batch on each ablated model,
 * within its tolerance (tests/parity/test_interventions.py: against PyTorch). Allocates
 * T*D floats and max_batch*(C + L*H) bytes of scratch, freed before it returns. Leaves
 * b->intervention as it was. Errors: VIT_ERR_ARG (b not made for this model, no head, a
 * class out of range, no input, an intervention vit_intervention_check refuses),
 * VIT_ERR_NOMEM. */
VitStatus vit_head_importance(float *importance, float *base_prob, VitBatch *b, const Vit *vit,
                              const float *input, int target, VitError *err);

/* The pruning curve (Michel et al. 2019, Fig. 2: heads pruned in increasing order of
 * importance): order [L*H] the heads (l * H + h) by increasing importance (ties: the lower
 * index first; vit_patch_order's rule), probs [L*H + 1] p_target with the first k of
 * order ablated, k = 0 .. L*H (k = 0: the model; "keep the top L*H - k heads"), on top of
 * b->intervention. importance [L, H] from vit_head_importance. The L*H + 1 passes share
 * their starts as vit_head_importance's do (passes k and k' compute the same input to
 * layer l when the heads order[k .. k') all lie in layers >= l): at layer l one stream per
 * distinct set of heads ablated below it, batched max_batch at a time, as much work as
 * vit_head_importance. Allocates (L + 1) * max_batch * T*D floats of scratch. Errors:
 * those of vit_head_importance, and a NaN or infinite importance. */
VitStatus vit_head_pruning(float *probs, int *order, VitBatch *b, const Vit *vit,
                           const float *input, const float *importance, int target, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_RUN_H */
