/* internal.h - engine-private helpers shared between the engine's .c files. Not installed,
 * never included by app/. */
#ifndef VIT_INTERNAL_H
#define VIT_INTERNAL_H

#include "vit.h"

#include <stddef.h>
#include <stdint.h>

/* --- sizes read from a file ------------------------------------------------------------- */
/* Every product or sum of sizes a file declares (a tensor's shape, a header's counts) goes
 * through these before any loop or allocation sized by it: a hostile file's [2^53, 0]
 * or 1024 heads of 2^53 rows must not wrap. Each returns 1 with the result in *out, or 0
 * when it overflows size_t, *out then SIZE_MAX (so that a size checked against a limit
 * afterwards is refused too). */
static inline int vit_size_mul(size_t *out, size_t a, size_t b) {
    if (__builtin_mul_overflow(a, b, out)) return *out = SIZE_MAX, 0;
    return 1;
}
static inline int vit_size_add(size_t *out, size_t a, size_t b) {
    if (__builtin_add_overflow(a, b, out)) return *out = SIZE_MAX, 0;
    return 1;
}
/* The elements of a shape [ndim] as a header holds it (int64): 0 when a dimension is
 * negative or the product overflows size_t. */
static inline int vit_shape_elems(size_t *out, const int64_t *shape, int ndim) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || !vit_size_mul(&n, n, (size_t)shape[i])) return *out = SIZE_MAX, 0;
    *out = n;
    return 1;
}
/* *acc += a * b, with the overflow checked: 0 (and *acc unchanged) when it overflows
 * size_t, else 1. For buffer sizes: a chain of them && together. */
static inline int vit_add_product(size_t *acc, size_t a, size_t b) {
    size_t ab, sum;
    if (!vit_size_mul(&ab, a, b) || !vit_size_add(&sum, *acc, ab)) return 0;
    *acc = sum;
    return 1;
}

/* Last path component, for messages. */
const char *vit_basename(const char *path);

/* The activations' counts (engine/load/activations.c: vit_load checks them, the passes
 * allocate them). Floats vit_run_init allocates for a model of config c, keeping the attention
 * (keep_att 1) or queries and keys (0, with n_threads scratch blocks), into
 * *n_floats. 0 when the count overflows size_t (then *n_floats = SIZE_MAX). */
int vit_run_floats(const VitConfig *c, int keep_att, int n_threads, size_t *n_floats);

/* Does a run of config c keep [L, H, T, T] when asked `how`? */
int vit_keep_att(const VitConfig *c, VitAttStorage how);

/* Does a run of config c that keeps its attention or not (keep_att) also keep the
 * block internals the backward pass reads (VitRun.blocks_kept): when the attention
 * is kept and it and they fit VIT_ATT_KEEP_MAX_BYTES together. */
int vit_keep_blocks(const VitConfig *c, int keep_att);

/* Has run->control been cancelled (0 without a control)? Read atomically: cheap enough
 * for every block of a loop. */
int vit_cancelled(const VitRun *run);
/* vit_control_report on run->control, if any. */
void vit_report(const VitRun *run, int done, int total);
/* VIT_ERR_CANCELLED with "what: cancelled" (maps.c). */
VitStatus vit_cancelled_error(VitError *err, const char *what);

/* --- thread pool (engine/passes/pool.c) ----------------------------------------- */

typedef struct VitPool VitPool;
/* A task's item: do item `item` of `n_items` of ctx, on thread `thread` (0: the
 * caller, 1 .. n_threads - 1: a worker; for per-thread scratch only: what an item
 * computes must not depend on the thread that runs it). */
typedef void (*VitTask)(void *ctx, int item, int n_items, int thread);

/* Start n_threads - 1 workers (the caller is thread 0). NULL on failure. Turns
 * OpenBLAS's own threads off first (vit_blas_setup). */
VitPool *vit_pool_new(int n_threads);

/* OpenBLAS inside the engine (engine/passes/blas.c): its own threads off, process-wide
 * (the pool's threads call it instead). Linking blas.c also makes a program start again
 * with OpenBLAS's AVX2 or AVX-512 kernels when the library fell back to SSE3 ones on a
 * CPU it does not know (vit.h, "Threads"). */
void vit_blas_setup(void);
/* Run items 0 .. n_items - 1 of fn on p's threads, each once, in any order and on any
 * thread (NULL p: all on the caller); returns when all are done. The caller works on
 * the items itself and never waits for a worker that has not started on any. */
void vit_pool_run(VitPool *p, VitTask fn, void *ctx, int n_items);
/* Threads of p, the caller included (1 for NULL). */
int vit_pool_threads(const VitPool *p);
void vit_pool_free(VitPool *p); /* joins the workers; NULL-safe */

/* --- attention blocks (engine/passes/block.c), shared with the maps -------------- */

/* Query rows are processed in vit_att_blocks(T) blocks of at most VIT_ATT_BLOCK
 * rows; block b holds rows [vit_att_block_start(T, b), vit_att_block_start(T, b + 1)). */
int vit_att_blocks(int T);
int vit_att_block_start(int T, int b);

/* What an intervention (vit.h) changes in one layer's attention: the temperature tau
 * (0: none) and the dropped patches drop [N] (NULL: none) after n_prefix tokens.
 * parent [T] (NULL: none), the causal mask of CLIP's text tower (engine/text/text.c) over
 * a tree of token sequences: query r sees key r and its ancestors parent[r],
 * parent[parent[r]], ... (parent[r] < r, -1 for a root), every other key's score -inf
 * before the softmax. One sequence is the chain parent[r] = r - 1: OpenAI CLIP's
 * build_attention_mask (-inf above the diagonal, added to the scores); sequences that
 * share their first tokens share those rows (a prefix tree, rows in depth-first order). */
typedef struct {
    float temp;
    const uint8_t *drop;
    int n_prefix;
    const int *parent;
    /* a rotary model (VitConfig.rope) under a position edit: the patches' queries and keys
       rotated by the angles of patch pos_perm[p] (VIT_POS_SHUFFLE), or not at all (no_rope:
       VIT_POS_ZERO); vit_block reads them, vit_att_block does not */
    const int *pos_perm;
    int no_rope;
} VitAttMod;

/* Layer `layer`'s VitAttMod of iv into *m: m, or NULL when iv changes nothing there. */
const VitAttMod *vit_att_mod(VitAttMod *m, const VitIntervention *iv, const VitConfig *c,
                             int layer);

/* out[r1 - r0, T] = softmax(q[r0:r1] . k^T * scale) for one head (scale: vit_att_scale):
 * q, k point at that head's first column in [T, ld] matrices. The forward pass and the
 * maps (recomputing) call this alone, so both get the same values. gemm_only: skip the
 * softmax (vit_forward_gemms). m (NULL: none): softmax(s / tau), the dropped patches'
 * columns -inf before the softmax and their rows 0 after it; parent (drop and temp not
 * used with it): row r's columns other than r and its ancestors -inf before the softmax
 * (probability exactly 0), the scores of columns >= r1 not computed (they are 0). */
void vit_att_block(float *out, const float *q, const float *k, int ld, int r0, int r1, int T,
                   int Dh, float scale, int gemm_only, const VitAttMod *m);

/* The scale of the attention's scores for config c: c->att_scale, or 1/sqrt(Dh). */
float vit_att_scale(const VitConfig *c);

/* x[Npos + N, D] += the position embedding as iv says (NULL: the model's): the rows of
 * the tokens it covers, x pointing at the first (vit_forward and vit_forward_batch). */
void vit_add_pos_embed(float *x, const Vit *vit, const VitIntervention *iv);

/* Zero the im2col rows patches [N, 3*P*P] of iv's filled patches (none without fill). */
void vit_fill_patches(float *patches, const VitIntervention *iv, const VitConfig *c);

/* --- a block's steps (engine/passes/block.c), shared with the backward pass ------ */

enum { VIT_EPI_NONE, VIT_EPI_GELU, VIT_EPI_GELU_TO, VIT_EPI_RESIDUAL };

/* A linear layer out[T, O] = inp[T, I] . w[O, I]^T + b[O] (torch.nn.functional.linear),
 * split over the pool by output columns, then the epilogue on each thread's slice. */
typedef struct {
    float *out;       /* [T, ld_out] */
    const float *inp; /* [T, n_in], rows ld_in apart (0: n_in) */
    const float *w;   /* [n_out, n_in] */
    const float *b;   /* [n_out] or NULL */
    int ld_out, T, n_in, n_out, ld_in;
    int epilogue;       /* VIT_EPI_*: on the thread's columns after its GEMM */
    float *x;           /* VIT_EPI_RESIDUAL: x[T, ld_out] = x_in + gamma * out;
                           VIT_EPI_GELU_TO: x[T, ld_out] = gelu(out) (VIT_EPI_GELU: in place) */
    const float *x_in;  /* VIT_EPI_RESIDUAL: [T, ld_out], or NULL: x itself (x += ...) */
    const float *gamma; /* LayerScale or NULL */
    int gemm_only;
    VitActivation act; /* VIT_EPI_GELU, VIT_EPI_GELU_TO: the activation (0: exact GELU) */
} VitLinear;
void vit_linear(VitPool *pool, VitLinear a);

/* torch.nn.LayerNorm over rows [r0, r1) of inp[., D] (moments in double), and the
 * same split over the pool for rows [0, T). */
void vit_layernorm_rows(float *out, const float *inp, const float *w, const float *b, int r0,
                        int r1, int D, float eps);
void vit_layernorm(VitPool *pool, float *out, const float *inp, const float *w, const float *b,
                   int T, int D, float eps);

/* Row-wise softmax in place, x[R, C]: vit_forward's own, which gives run->probs. */
void vit_softmax_rows(float *x, int R, int C);

/* The patch embedding's GEMM input, as vit_forward makes it: im2col of n_images inputs
 * [n_images, 3, Sh, Sw] of config c into patches [n_images*N, 3*P*P] (row i*N + n: patch
 * n of input i, its pixels in the weight's [3, P, P] order), rows split over the pool. */
void vit_im2col(VitPool *pool, float *patches, const float *inputs, int n_images,
                const VitConfig *c);

/* Exact GELU in place on columns [c0, c1) of x[R, ld]. */
void vit_gelu_cols(float *x, int ld, int R, int c0, int c1);
/* The MLP's activation act (VitConfig.mlp_act) in place on columns [c0, c1) of x[R, ld]:
 * the same arithmetic as vit_block's epilogue, so the same values. */
void vit_act_cols(float *x, int ld, int R, int c0, int c1, VitActivation act);

/* dh[r, :] *= GELU's derivative at hpre[r, :] (exact), or gelu(x)/x (lrp: AttnLRP's
 * identity rule), rows [r0, r1) of [., F]. */
void vit_gelu_backward_rows(float *dh, const float *hpre, int r0, int r1, int F, int lrp);
/* The same for the other activations (act != VIT_ACT_GELU): dh *= act'(x), or act(x) / x
 * (lrp). */
void vit_act_backward_rows(float *dh, const float *hpre, int r0, int r1, int F, int lrp,
                           VitActivation act);

/* A gated MLP's product (VitConfig.mlp_gated) on rows [r0, r1) of pre [., 2F] (gates, then
 * values): hid[r, :F] = act(gate) * value, hid's rows ld_hid apart (hid may be pre); and its
 * backward, from dh[r, :F] at the product to dh [., 2F] at the gates and values (lrp:
 * AttnLRP's uniform rule, half to each factor, and act(x)/x for act'). block.c. */
void vit_glu_rows(float *hid, int ld_hid, const float *pre, int r0, int r1, int F,
                  VitActivation act);
void vit_glu_backward_rows(float *dh, const float *pre, int r0, int r1, int F, int lrp,
                           VitActivation act);
/* A LayerNorm in place over rows [r0, r1) of x [., ld], F columns each (the sub-LN of a
 * gated MLP, VitConfig.mlp_norm; moments in double as vit_layernorm_rows). block.c. */
void vit_layernorm_inplace_rows(float *x, int ld, const float *w, const float *b, int r0, int r1,
                                int F, float eps);

/* The rotary embedding (VitRope) on rows [r0, r1) of x [., ld], the tokens of one input:
 * the patches' rows (t >= Np; patch t - Np takes row perm[t - Np] of rope [N, Dh], perm
 * NULL: its own) have each of their n_heads heads of Dh columns rotated, pair i (i, i + Dh/2;
 * interleaved: 2i, 2i + 1) by the angle whose cosine is rope[., i] and sine rope[., Dh/2 + i]
 * times sign (1: the forward pass; -1: the inverse, the backward pass's). vit_rope: rows
 * [0, n*T) of n inputs stacked, split over the pool, pairs as c->rope has them. block.c. */
void vit_rope_rows(float *x, int ld, const float *rope, const int *perm, int r0, int r1, int Np,
                   int n_heads, int Dh, int interleaved, float sign);
void vit_rope(VitPool *pool, float *x, int ld, int n, const float *rope, const int *perm,
              const VitConfig *c, int n_heads, float sign);

/* The block's queries and keys qk[T, 2A] and values v[T, A] from its LayerNorm
 * output xn[T, D]: timm's fused qkv or transformers' query/key/value (A: vit_att_width). */
void vit_qkv(VitPool *pool, float *qk, float *v, const float *xn, const VitBlock *b, int T, int D,
             int A, int gemm_only);
/* Its values alone, v[T, A] (the same call vit_qkv makes): the maps recompute a
 * layer's values with it when the backward pass did not keep them (explain.c). */
void vit_values(VitPool *pool, float *v, const float *xn, const VitBlock *b, int T, int D, int A,
                int gemm_only);

/* dA[r1 - r0, T] = dctx_h[r0:r1] . v_h^T for one head (backward.c): dctx, v point at
 * that head's first column in [T, ld] matrices. The backward pass and the maps
 * (recomputing dA when it is not kept) call this alone, so both get the same values.
 * m (NULL: none): a dropped patch's row and column of dA are 0 (it is not in the
 * sequence). */
void vit_grad_att_block(float *out, const float *dctx, const float *v, int ld, int r0, int r1,
                        int T, int Dh, const VitAttMod *m);

/* --- one transformer block (engine/passes/block.c) ------------------------------- */

/* Where one block reads and writes (timm Block.forward):
 *   xn1 = norm1(x); q, k, v = qkv(xn1); A_h = softmax(q_h k_h^T / sqrt(Dh)); ctx = A v
 *   xm = res + ls1 * proj(ctx); hpre = fc1(norm2(xm)); out = xm + ls2 * fc2(gelu(hpre))
 * for n inputs of T tokens stacked [n*T, .] (input i's rows [i*T, (i+1)*T)). After the
 * attention only the first `rows` query rows of each input go on (T; or the tokens the
 * head reads, in the last block); when rows < T those rows are gathered, row r of input
 * i at r*n + i, in ctx, res, tmp, xm, xn2, hpre, hid and out (for n = 1 the same as
 * stacked). The three callers:
 *   vit_forward        n 1, every layer's tokens, queries and keys (and, kept for the
 *                      backward pass, values, xm, hpre) in the run; att: the run's
 *   vit_forward_batch  n inputs, the stream in place (res = xm = out); the last block
 *                      gathered and head_block
 *   vit_backward       n 1, recomputing a block's internals: att_in (the run's) or
 *                      recomputed in scratch; hid NULL (stop after fc1)
 * Buffers may be shared where a step's input is read before its output is written:
 * xn1, xn2 and tmp may be one buffer; res, xm and out may be one (in place). */
typedef struct {
    int n;               /* inputs */
    int rows;            /* query rows of each input after the attention: 0 .. T */
    int head_block;      /* 1: rows [0, rows) of each input are one block of their own
                            (the batch's last block: 1 or 2 rows, not a first standard block of
                            ~VIT_ATT_BLOCK); 0: the standard blocks (vit_att_block_start), whose
                            values the maps and the backward pass reproduce */
    const float *x;      /* [n*T, D] the block's input */
    const float *res;    /* [rows*n, D] proj's residual input: x's rows that go on (x itself
                            when stacked or n = 1) */
    float *xn1;          /* [n*T, D] norm1's output */
    float *qk, *v;       /* [n*T, 2A] queries then keys, [n*T, A] values (A: vit_att_width) */
    float *att;          /* n = 1: [H, T, T] the probabilities, kept (every block computed),
                            or NULL: computed a block at a time into scratch */
    const float *att_in; /* n = 1: [H, T, T] the probabilities already computed (read, not
                            recomputed), or NULL */
    float *scratch;      /* [threads, VIT_ATT_BLOCK, T] when att and att_in are NULL */
    float *ctx;          /* [rows*n, A] (rows of each input < rows only) */
    float *tmp;          /* [rows*n, D] proj's and fc2's outputs before the residual */
    float *xm;           /* [rows*n, D] between attention and MLP */
    float *xn2;          /* [rows*n, D] norm2's output */
    float *hpre;         /* [rows*n, Fi] fc1's output before GELU, or NULL: GELU in place in
                            hid (Fi = vit_mlp_in_width: 2F for a gated MLP, gates then values) */
    float *hid;          /* [rows*n, F] GELU's output ([rows*n, Fi] without hpre: a gated MLP's
                            product in its first F columns), or NULL: stop after fc1 (into hpre) */
    float *out;          /* [rows*n, D] the block's output */
    const VitRun *run;   /* its control (cancelled: the items left are skipped), or NULL */
    int gemm_only;       /* vit_forward_gemms: the cblas_sgemm calls alone */

    /* an intervention's (vit.h), NULL: none */
    const uint8_t *ablate; /* [H] input 0's heads, input i's at ablate + i * ablate_stride:
                              non-zero: the head's ctx columns are 0 (head mask) */
    size_t ablate_stride;
    const VitAttMod *mod; /* the layer's temperature and dropped patches */
} VitBlockIO;

/* vit_forward_batch's steps (batch.c), for a caller that starts from tokens of its own
 * (vit_head_importance): layers [l0, l1) on n inputs' tokens in b->x [n*T, D] (their
 * input to layer l0), in place; l1 == L ends with the last block's head rows in b->xh.
 * Each input's head masks from b->ablate_each, else b->intervention's. */
void vit_batch_layers(VitBatch *b, const Vit *vit, int n, int l0, int l1);
/* Before them: the patch embedding, prefix tokens and position embedding of inputs
 * [n, 3, Sh, Sw] into b->x (b->intervention's fill and position embedding). */
void vit_batch_embed(VitBatch *b, const Vit *vit, const float *inputs, int n);
/* Then the final norm and the head on b->xh: logits, probs [n, C] (either may be NULL). */
void vit_batch_head(VitBatch *b, const Vit *vit, int n, float *logits, float *probs);

/* One block b of config c on the pool. Returns 0 when io->run was cancelled (the
 * outputs are undefined), else 1. */
int vit_block(VitPool *pool, const VitBlock *b, const VitConfig *c, const VitBlockIO *io);

/* --- SigLIP's attention-pooling head (engine/passes/probe.c) ------------------- */

/* The MAP head's weights: VitProbeHead (vit.h, VitWeights.map). */

/* Floats of scratch vit_probe_forward needs (engine/load/activations.c). */
size_t vit_probe_scratch(int N, int D, int F);
/* out [D] = the MAP head on y [N, D] (the tower's final LayerNorm output, patches only),
 * att [H, N] the probe's attention per head (rows sum to 1); H divides D; act the MLP's
 * activation (SigLIP: VIT_ACT_GELU_TANH), eps the head's LayerNorm eps (1e-6). On the pool;
 * allocates nothing. */
void vit_probe_forward(VitPool *pool, float *out, float *att, const float *y, const VitProbeHead *w,
                       int N, int D, int H, int F, float eps, VitActivation act, float *scratch);
/* What vit_probe_forward left in its scratch (the lesson's probe step reads it, as the
 * backward pass does): q [D] the probe's query (heads side by side, Dh each), o [D] the
 * heads' weighted sums of values concatenated (before out_proj), a [D] = out_proj(o), t
 * [D] = fc2(act(fc1(LayerNorm(a)))); the head's output is a + t. Pointers into scratch. */
typedef struct {
    const float *q, *o, *a, *t;
} VitProbeParts;
VitProbeParts vit_probe_parts(const float *scratch, int D, int F);

/* The MAP head's gradient: dy [N, D] = d (g . out) / d y for out = vit_probe_forward(y), g
 * [D] (the gradient at the head's output), and datt [H, N] (NULL: not wanted) = d (g . out)
 * / d att, the probe attention's gradient; recomputing the forward pass on the caller's
 * thread. lrp: AttnLRP's rules (Achtibat et al. 2024): the head's LayerNorm's standard
 * deviation held constant, the activation as act(x)/x, the probe's attention
 * probabilities held constant (CP-LRP: nothing flows into the keys). scratch: [floats of
 * vit_probe_backward_floats]. */
void vit_probe_backward(float *dy, float *datt, const float *y, const float *g,
                        const VitProbeHead *w, int N, int D, int H, int F, float eps,
                        VitActivation act, int lrp, float *scratch);
size_t vit_probe_backward_floats(int N, int D, int H, int F);

/* Floats of scratch the head needs per call (VitHeadIO.scratch): the MAP head's normalised
 * patches [N, D], its attention [H, N] and vit_probe_scratch; 0 for the other poolings
 * (engine/load/activations.c). */
size_t vit_head_scratch_floats(const VitConfig *c);
/* Where vit_head's MAP head (VIT_POOL_MAP, one input) leaves vit_probe_forward's scratch
 * inside VitHeadIO.scratch: vit_probe_parts(vit_head_probe_scratch(c, scratch), D, F). */
const float *vit_head_probe_scratch(const VitConfig *c, const float *scratch);

/* probs [n, C] from logits [n, C]: sigmoid of each (SigLIP's text head,
 * VitWeights.text_sigmoid), else softmax over each row (vit_softmax_rows). In place when
 * probs == logits. */
void vit_probs_rows(float *probs, const float *logits, int n, int C, const Vit *vit);

/* --- the classifier head and CLIP's (engine/passes/head.c) ------------------------- */

/* Rows of the last block's output the head reads, per input: the CLS token (1), and
 * DeiT's distillation token (2); every token (T) for a pooled head (VitConfig.head_pool).
 * The forward passes compute the last block for those rows only. */
int vit_head_rows(const Vit *vit);

/* One call of the head (vit_head) on n inputs. Input i's token r is at
 * x + (i * in_stride + r * row_stride) * D: (T, 1) for inputs stacked [n*T, D] (vit_forward,
 * the logit lens, a pooled head in vit_forward_batch), (1, n) for rows gathered row r of
 * input i at r*n + i (vit_forward_batch's last block: the CLS rows of every input, then
 * the distillation rows). */
typedef struct {
    float *logits;      /* [n, C], or NULL: hin (and embed) only */
    float *logits_dist; /* [n, C] scratch for DeiT's distillation head */
    float *embed;       /* [n, E] CLIP's image embeddings, or NULL (needed with a text head) */
    float *hin;         /* [n, W] out: the head's input (W = vit_head_width: the pooled
                           tokens after norm and fc_norm), then [n, D] the distillation
                           token's rows for DeiT */
    const float *x;     /* the tokens, before the final norm */
    size_t in_stride, row_stride; /* in rows of D floats, above */
    int n;
    int token; /* -1: the model's pooling; t >= 0 (the logit lens): input i's token
                  t + i * token_step in the place of what the pooling gives: the CLS's
                  (CLS; no distillation head), the mean of the patches' (MEAN, and
                  CLS_MEAN beside the input's own CLS) */
    int token_step;
    const uint8_t *drop; /* [N] an intervention's dropped patches (not in the sequence: left
                            out of a mean and of the MAP head's keys), or NULL */
    int gemm_only;       /* vit_forward_gemms: the GEMMs alone */
    float *probe_att;    /* [n, H, N] out: the MAP head's probe attention (model's pooling
                            only), or NULL */
    float *scratch;      /* [vit_head_scratch_floats] for the MAP head, else unused */
} VitHeadIO;

/* The classifier head of every caller (vit_forward, vit_forward_batch, the logit lens):
 * norm, pooling (VitConfig.head_pool), fc_norm, then the head: logits [n, C] = head(hin)
 * (a linear layer, or CLIP's text head, vit_text_head), DeiT's two heads averaged, tanh
 * for head_tanh. CLIP's image embedding into embed when given. The pooling's inputs are
 * split over the pool (NULL: the caller alone). No softmax. */
void vit_head(VitPool *pool, const Vit *vit, const VitHeadIO *io);

/* vit_head's gradient for one input: dz [R, D] = dS / d z (S the score sc: a logit, a
 * contrast, a function of the pooled embedding; vit.h's VitScore), R =
 * vit_head_rows (rows the head does not read are 0), z [T, D] the tokens before the final
 * norm (the last block's output, or a layer's for LeGrad); drop: VitHeadIO's. lrp: AttnLRP's rules
 * (the LayerNorms' standard deviation and CLIP's |e| held constant). datt [H, N] (MAP head
 * only; NULL: not wanted): dS / d the probe's attention, a dropped patch's 0.
 * scratch: [floats of vit_head_backward_floats]. */
void vit_head_backward(float *dz, float *datt, const float *z, const VitScore *sc, const Vit *vit,
                       int lrp, const uint8_t *drop, float *scratch);
size_t vit_head_backward_floats(const VitConfig *c);

/* Is s a vit_score_logit? Is s a score vit_backward_score can take for vit (VIT_ERR_ARG
 * with the reason: no grad function, a cosine without ref, a logit score without a head,
 * a class out of range, a contrast of a class with itself)? (head.c) */
int vit_score_is_logit(const VitScore *s);
VitStatus vit_score_check(const VitScore *s, const Vit *vit, VitError *err);

/* LayerNorm's backward on rows [r0, r1) of [., D] (backward.c): dx (=, or += with
 * accumulate) rstd * (g - mean(g) - xhat * mean(g (.) xhat)), g = dy (.) w, from x the
 * norm's input; lrp: the standard deviation held constant (the xhat term dropped). */
void vit_layernorm_backward_rows(float *dx, const float *x, const float *w, const float *dy, int r0,
                                 int r1, int D, float eps, int lrp, int accumulate);

/* Does the model have a head to differentiate: C > 0 and a classifier (head_w) or a
 * text head (text_emb)? */
int vit_has_head(const Vit *vit);
/* CLIP's image embeddings e [n, E] = xn [n, D] . img_proj_w^T of n rows of the final
 * norm's output, then (logits not NULL and a text head set) logits [n, C] = text_scale *
 * (e / |e|) . text_emb^T. On the pool; gemm_only: the GEMMs alone (vit_forward_gemms). */
void vit_text_head(VitPool *pool, float *logits, float *e, const float *xn, int n, const Vit *vit,
                   int gemm_only);
/* dxn [D] = d logits[target] / d xn of one row xn [D] of the final norm's output, through
 * the text head (exact; lrp: |e| held constant, AttnLRP). scratch: [2E]. */
void vit_text_head_grad(float *dxn, const float *xn, int target, const Vit *vit, int lrp,
                        float *scratch);

/* --- reading the attention (engine/maps/maps.c), shared with explain.c ---------- */

/* Reads att[layer, head] a block of query rows at a time (vit_att_blocks): a
 * pointer into run->att when the run kept it; otherwise the block recomputed into
 * buf from the kept queries and keys by vit_att_block, the very call the forward
 * pass made on the same numbers, so the values are the same. buf holds one block. */
typedef struct {
    const VitRun *run;
    float *buf;             /* [VIT_ATT_BLOCK, T] when recomputing, else NULL */
    int layer, head, block; /* what buf holds; block -1: nothing yet */
} AttReader;

VitStatus vit_att_reader_init(AttReader *rd, const VitRun *run, VitError *err);
void vit_att_reader_free(AttReader *rd);
/* Block b of att[layer, head]: [rows of the block, T]. */
const float *vit_att_reader_block(AttReader *rd, int layer, int head, int b);

/* out[T, T] = fuse_h att[layer, h] (rows: queries, columns: keys). */
void vit_fuse_heads(float *out, AttReader *rd, int layer, VitFusion fusion);

typedef struct {
    float v;
    uint32_t i;
} Entry;

/* Rollout's discard: zero the floor(ratio * T*(T-Np)) smallest entries of a[T, T]
 * among the keys that are patches (columns >= Np); ties: lower row-major index
 * first. scratch: [T*T]. */
int vit_discard_smallest(float *a, int T, int Np, float ratio, Entry *scratch);
/* a[T, T] <- rownorm(0.5 a + 0.5 I). */
void vit_add_identity_rownorm(float *a, int T);
/* v[T] <- v[T] . a[T, T]; tmp: [T] scratch. */
void vit_row_times(double *v, double *tmp, const float *a, int T);

/* --- PCA (engine/maps/pca.c), shared with the lesson's filters (lesson.c) --------- */

/* +1 or -1: the sign that makes v [d]'s largest |loading| positive (the first within
 * 1e-9 of the largest). */
double vit_loading_sign(const double *v, int d);
/* PCA of the n rows of x [m, d] that sel [m] selects (NULL: all m, n = m), in double:
 * their mean [d], the top k components vec [k, d] (unit rows, decreasing variance, signs
 * as dsyevr gives them; beyond the rank the data can have: 0 with variance 0), each
 * one's scatter var [k] (sum of squared projections) and the total scatter (the trace).
 * Errors: VIT_ERR_NOMEM, VIT_ERR_FORMAT (dsyevr failed). */
VitStatus vit_pca_top(double *vec, double *var, double *mean, double *total, const float *x,
                      const uint8_t *sel, int n, int m, int d, int k, VitError *err);

/* The GEMM floor of vit_forward: exactly its cblas_sgemm calls, same shapes,
 * transposes, strides and buffers, and nothing else, for bench/ to time. The
 * buffers end up holding garbage; run vit_forward before reading any map. */
void vit_forward_gemms(VitRun *run, const Vit *vit);

/* --- preprocessing (engine/image/image.c) ------------------------------------------ */

/* vit_preprocess and vit_preprocess_rgb with a limit on the crop's resampling work
 * (pixels made by the horizontal pass plus taps) other than VIT_MAX_IMAGE_PIXELS:
 * tests/fuzz uses a smaller one, as for decoding. */
VitStatus vit_preprocess_max(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                             const VitConfig *cfg, const VitImage *img, uint64_t max_work,
                             VitError *err);
VitStatus vit_preprocess_rgb_max(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                                 uint64_t max_work, VitError *err);

/* --- image decoding (engine/image/decode.c, engine/image/codecs.c) ---------------------- */

/* vit_image_load_with with a pixel limit other than VIT_MAX_IMAGE_PIXELS: tests/fuzz
 * uses a smaller one, so that no run spends seconds decoding 100 M pixels. */
VitStatus vit_image_load_max(VitImage *img, const char *path, const VitImageOptions *opt,
                             uint64_t max_pixels, VitError *err);

/* What a decoder gives decode.c: the pixels as stored, and how to turn them. */
typedef struct {
    uint8_t *rgb;      /* [h, w, 3], malloc'd */
    int w, h;          /* px */
    int orientation;   /* 1..8: the file's EXIF (TIFF: Orientation) tag, 1 when none */
    int heif_oriented; /* 1: the decoder turned the pixels itself (libheif's irot/imir) */
} Decoded;

/* codecs.c: decode the whole file `path`, data [n bytes], into *out. Each refuses a
 * declared size of more than max_pixels before decoding. Errors: VIT_ERR_IMAGE (the
 * message names path and says what is wrong), VIT_ERR_NOMEM. */
VitStatus vit_decode_jpeg(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err);
VitStatus vit_decode_webp(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err);
VitStatus vit_decode_tiff(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err);
VitStatus vit_decode_heif(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, int ignore_transformations, VitError *err);

/* The orientation tag of an EXIF block (libexif): 1..8, 1 when none. codecs.c. */
int vit_exif_orientation(const uint8_t *p, size_t n);

/* --- safetensors (engine/load/safetensors.c) ---------------------------------- */

typedef enum { ST_F32, ST_F16, ST_BF16, ST_OTHER } StDtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;          /* owned */
    char dtype_name[16]; /* as written in the header, e.g. "F32" */
    StDtype dtype;
    int elem_bytes;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t n_elems;      /* prod(shape), overflow-checked */
    size_t begin, end;   /* byte offsets into the data area */
    const uint8_t *data; /* its bytes: the data area + begin, or a converted copy (layout.c) */
} StTensor;

typedef struct {
    const uint8_t *data; /* data area (after the header), not owned */
    size_t data_bytes;
    StTensor *tensors; /* [n], owned */
    int n;
    void *owned; /* what the table's data points into when it is not the mapping (a .pth's
                    storages, a layout's converted tensors), freed by st_free; or NULL */
} StFile;

/* Parse and validate the header of a safetensors file held in memory
 * [file, file + file_bytes). `name` is used in messages. On success st owns
 * its table; free with st_free. Errors: VIT_ERR_FORMAT, VIT_ERR_NOMEM. */
VitStatus st_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *name,
                   VitError *err);
/* The tensor named `name`, or NULL (also for a NULL name). */
const StTensor *st_find(const StFile *st, const char *name);
void st_free(StFile *st);

/* --- PyTorch checkpoints (engine/load/pth.c) --------------------------------------- */

/* Does the file start as a zip (torch.save since 1.6)? As PyTorch's legacy format (before
 * 1.6, or _use_new_zipfile_serialization=False: a pickle starting with its magic number)? */
int pth_is_zip(const uint8_t *file, size_t n);
int pth_is_legacy(const uint8_t *file, size_t n);

/* Read a torch.save zip held in memory [file, file + file_bytes) into st: the state dict's
 * tensors (found alone or under a wrapper: "model", "state_dict", DINO's "teacher", ...;
 * "module.", "_orig_mod." and DINO's "backbone." prefixes stripped), their storages copied
 * into st->owned. data.pkl is read by a restricted unpickler (see the top of pth.c): any
 * global other than those of a state dict is refused, nothing is called. `fname` is used
 * in messages. Errors: VIT_ERR_FORMAT (the message names fname, the entry or global and
 * what is wrong), VIT_ERR_NOMEM. Free with st_free. */
VitStatus pth_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *fname,
                    VitError *err);

/* pth_parse's unpickler, state-dict search and tensor checks on a data.pkl alone
 * (pkl [n]), its storages' positions not checked: for tests/fuzz. */
VitStatus pth_check_pickle(const uint8_t *pkl, size_t n, const char *fname, VitError *err);

/* "[a, b, c]" into buf. */
const char *st_shape_str(char *buf, size_t n, const int64_t *shape, int ndim);

#endif
