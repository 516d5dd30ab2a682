/* block.c - one transformer block (timm Block.forward) and the steps it is made of:
 * the row kernels (LayerNorm, GELU, the residual add, softmax), the attention a block
 * of query rows at a time, and the parallel steps over the pool (linear layers with
 * their epilogues, queries/keys/values, LayerNorm, im2col). vit_block runs the block
 * for the forward pass (engine/passes/forward.c), the batched forward pass (batch.c)
 * and the backward pass's recompute (backward.c); what differs between them is where
 * the block reads and writes (VitBlockIO, internal.h).
 *
 * Row-major throughout. Linear weights keep PyTorch's [out, in] layout, so a
 * linear layer is out[T, O] = inp[T, I] . w[O, I]^T + b[O], i.e.
 * cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ...). The bias is
 * written into the output first and the product added with beta = 1, which is
 * torch.addmm's order (bias + inp @ w.T).
 *
 * Threads (engine/passes/pool.c): OpenBLAS single-threaded inside the pool; every step
 * is a set of items the running threads take. A linear layer is one slice of output
 * columns per thread (its rows of w: the weights are read once in all), with the step
 * after it on the same slice while it is in cache: GELU after fc1, the residual add
 * after proj and fc2. Attention runs in blocks of query rows of one head: scores,
 * softmax and probabilities . values while the block is in cache, one item each.
 * LayerNorm splits rows. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* glibc's vector math library (libmvec) has SIMD erff and expf on x86-64 from
 * 2.35. Declaring them "simd" lets the compiler vectorise the GELU and softmax
 * loops below (CMake builds this file with -fno-math-errno and a vectoriser cost
 * model that allows it); libmvec's results are within 4 ulp of the scalar ones,
 * which tests/parity holds to the float64 reference. Elsewhere the loops stay
 * scalar and give the same answers up to those ulps.
 * VECTOR_CLONES compiles a loop twice, for x86-64-v3 (AVX2, FMA: libmvec's 8-wide
 * variants) and for the baseline, and picks one at load time (an ifunc): the
 * build stays portable to CPUs without AVX2. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)
__attribute__((simd("notinbranch"))) float erff(float);
__attribute__((simd("notinbranch"))) float expf(float);
#endif
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

/* --- row kernels ----------------------------------------------------------- */

/* The steps below write slices of rows [c0, c1) of [R, ld] matrices, often into memory
 * the pass has not touched for a while (the kept layers' queries and keys, values, xm,
 * fc1's output hpre; the block outputs in tokens). There each cache line written is a miss the
 * hardware prefetcher does not see coming across the row stride: 3.8 ns per float
 * against 0.46 when the row PREFETCH_ROWS ahead is asked for first (a test on the
 * project's machine: the bias rows of a [197, 192] slice, cold). */
enum { PREFETCH_ROWS = 4 };

static inline void prefetch_for_write(float *row, int c0, int c1) {
#if defined(__GNUC__)
    for (int i = c0; i < c1; i += 16) __builtin_prefetch(row + i, 1, 3); /* 64-byte lines */
#else
    (void)row, (void)c0, (void)c1;
#endif
}

/* torch.nn.LayerNorm over the last dim: out = (x - mean) / sqrt(var + eps) * w + b,
 * biased variance, rows [r0, r1). Moments in double, so that the result does not
 * depend on the summation order. */
VECTOR_CLONES
void vit_layernorm_rows(float *restrict out, const float *restrict inp, const float *w,
                        const float *b, int r0, int r1, int D, float eps) {
    for (int t = r0; t < r1; t++) {
        const float *x = inp + (size_t)t * D;
        float *y = out + (size_t)t * D;
        double m = 0.0, v = 0.0;
#pragma omp simd reduction(+ : m)
        for (int i = 0; i < D; i++) m += x[i];
        m /= D;
#pragma omp simd reduction(+ : v)
        for (int i = 0; i < D; i++) v += (x[i] - m) * (x[i] - m);
        v /= D;
        float mean = (float)m, rstd = (float)(1.0 / sqrt(v + eps));
        for (int i = 0; i < D; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    }
}

/* Exact GELU (torch.nn.GELU(approximate='none')) on columns [c0, c1) of x[R, ld]. */
VECTOR_CLONES
void vit_gelu_cols(float *x, int ld, int R, int c0, int c1) {
    for (int r = 0; r < R; r++) {
        float *row = x + (size_t)r * ld;
        for (int i = c0; i < c1; i++)
            row[i] = 0.5f * row[i] * (1.0f + erff(row[i] * 0.70710678118654752f));
    }
}

/* The GELU step of the backward pass (backward.c), on rows [r0, r1) of dh[., F]
 * given the pre-activation hpre[., F]:
 *   exact: dh *= gelu'(x) = Phi(x) + x phi(x)  (d/dx of 0.5 x (1 + erf(x / sqrt 2)))
 *   lrp:   dh *= gelu(x) / x = Phi(x)  (AttnLRP's identity rule: gelu(x) written as
 *          x * (gelu(x) / x) with the ratio held constant; exact GELU is x Phi(x)) */
VECTOR_CLONES
void vit_gelu_backward_rows(float *restrict dh, const float *restrict hpre, int r0, int r1, int F,
                            int lrp) {
    const float inv_sqrt2 = 0.70710678118654752f, inv_sqrt2pi = 0.39894228040143268f;
    for (int r = r0; r < r1; r++) {
        float *d = dh + (size_t)r * F;
        const float *x = hpre + (size_t)r * F;
        if (lrp)
            for (int i = 0; i < F; i++) {
                d[i] *= 0.5f * (1.0f + erff(x[i] * inv_sqrt2));
            }
        else
            for (int i = 0; i < F; i++) {
                float cdf = 0.5f * (1.0f + erff(x[i] * inv_sqrt2));
                d[i] *= cdf + x[i] * inv_sqrt2pi * expf(-0.5f * x[i] * x[i]);
            }
    }
}

/* GELU of src into dst on columns [c0, c1) of [R, ld]: vit_gelu_cols out of place,
 * the same arithmetic (the same vector loop), so the same values. */
VECTOR_CLONES
static void gelu_cols_to(float *restrict dst, const float *restrict src, int ld, int R, int c0,
                         int c1) {
    for (int r = 0; r < R; r++) {
        const float *s = src + (size_t)r * ld;
        float *d = dst + (size_t)r * ld;
        for (int i = c0; i < c1; i++)
            d[i] = 0.5f * s[i] * (1.0f + erff(s[i] * 0.70710678118654752f));
    }
}

/* The other activations than exact GELU (a layout's "mlp_activation"), of src into dst
 * (may be src) on columns [c0, c1) of [R, ld]:
 *   gelu_tanh  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (torch.nn.GELU('tanh'))
 *   quick_gelu x sigmoid(1.702 x)                                (CLIP's QuickGELU)
 *   relu       max(x, 0) */
static float act_one(float x, VitActivation act) {
    switch (act) {
    case VIT_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case VIT_ACT_QUICK_GELU: return x / (1.0f + expf(-1.702f * x));
    case VIT_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case VIT_ACT_SILU: return x / (1.0f + expf(-x));
    case VIT_ACT_GELU: break;
    }
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/* What the backward pass multiplies by at x: act'(x), or act(x) / x (lrp: AttnLRP's
 * identity rule, the ratio held constant). */
static float act_grad(float x, VitActivation act, int lrp) {
    switch (act) {
    case VIT_ACT_RELU: return x > 0.0f ? 1.0f : 0.0f; /* relu' and relu(x) / x alike */
    case VIT_ACT_QUICK_GELU: {
        float sg = 1.0f / (1.0f + expf(-1.702f * x));
        return lrp ? sg : sg + 1.702f * x * sg * (1.0f - sg);
    }
    case VIT_ACT_SILU: {
        float sg = 1.0f / (1.0f + expf(-x));
        return lrp ? sg : sg * (1.0f + x * (1.0f - sg));
    }
    case VIT_ACT_GELU_TANH: {
        const float k = 0.79788456080286536f;
        float th = tanhf(k * (x + 0.044715f * x * x * x));
        return lrp ? 0.5f * (1.0f + th)
                   : 0.5f * (1.0f + th) +
                         0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case VIT_ACT_GELU: break;
    }
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    return lrp ? cdf : cdf + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

const char *vit_activation_name(VitActivation a) {
    switch (a) {
    case VIT_ACT_GELU_TANH: return "GELU (tanh)";
    case VIT_ACT_QUICK_GELU: return "QuickGELU";
    case VIT_ACT_RELU: return "ReLU";
    case VIT_ACT_SILU: return "SiLU";
    case VIT_ACT_GELU: break;
    }
    return "GELU";
}

static void act_cols_to(float *dst, const float *src, int ld, int R, int c0, int c1,
                        VitActivation act) {
    for (int r = 0; r < R; r++)
        for (int i = c0; i < c1; i++)
            dst[(size_t)r * ld + i] = act_one(src[(size_t)r * ld + i], act);
}

void vit_act_cols(float *x, int ld, int R, int c0, int c1, VitActivation act) {
    if (act == VIT_ACT_GELU)
        vit_gelu_cols(x, ld, R, c0, c1);
    else
        act_cols_to(x, x, ld, R, c0, c1, act);
}

void vit_act_backward_rows(float *dh, const float *hpre, int r0, int r1, int F, int lrp,
                           VitActivation act) {
    for (int r = r0; r < r1; r++)
        for (int i = 0; i < F; i++)
            dh[(size_t)r * F + i] *= act_grad(hpre[(size_t)r * F + i], act, lrp);
}

/* A gated MLP's product (cfg.mlp_gated) on rows [r0, r1): pre [., 2F] holds the gate
 * (columns 0 .. F-1) and the value (F .. 2F-1) before it;
 *   forward   hid[r, i] = act(gate) * value             (hid's rows ld_hid apart; may be pre:
 *                                                       the first F columns, in place)
 *   backward  from d = dh[r, i] at the product, into dh[r, i] the gate's, dh[r, F + i] the
 *             value's gradient (dh [., 2F]): d value act'(gate), d act(gate); lrp (AttnLRP:
 *             the uniform rule for a product, half to each factor, and the identity rule for
 *             act): d value act(gate)/gate / 2, d act(gate) / 2. */
/* SiLU (SwiGLU, DINOv3's gated MLP) in a vector loop of its own, as gelu_cols_to: through
 * act_one the switch kept expf scalar, and the product cost 3x the GELU epilogue (6% of
 * DINOv3 S+/16's forward pass, perf). */
VECTOR_CLONES
void vit_glu_rows(float *hid, int ld_hid, const float *pre, int r0, int r1, int F,
                  VitActivation act) {
    for (int r = r0; r < r1; r++) {
        const float *restrict g = pre + (size_t)r * 2 * F;
        float *restrict h = hid + (size_t)r * ld_hid;
        if (act == VIT_ACT_SILU)
#pragma omp simd
            for (int i = 0; i < F; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * g[F + i];
        else
            for (int i = 0; i < F; i++) h[i] = act_one(g[i], act) * g[F + i];
    }
}

void vit_glu_backward_rows(float *dh, const float *pre, int r0, int r1, int F, int lrp,
                           VitActivation act) {
    for (int r = r0; r < r1; r++) {
        const float *g = pre + (size_t)r * 2 * F;
        float *d = dh + (size_t)r * 2 * F;
        for (int i = 0; i < F; i++) {
            float dp = lrp ? 0.5f * d[i] : d[i];
            d[F + i] = dp * act_one(g[i], act);
            d[i] = dp * g[F + i] * act_grad(g[i], act, lrp);
        }
    }
}

/* timm SwiGLU.norm (EVA-02 B/L's sub-LN): LayerNorm in place over F columns of rows
 * [r0, r1) of x [., ld]; the moments first, in double, then each row rewritten. */
void vit_layernorm_inplace_rows(float *x, int ld, const float *w, const float *b, int r0, int r1,
                                int F, float eps) {
    for (int t = r0; t < r1; t++) {
        float *y = x + (size_t)t * ld;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < F; i++) m += y[i];
        m /= F;
        for (int i = 0; i < F; i++) v += (y[i] - m) * (y[i] - m);
        v /= F;
        float mean = (float)m, rstd = (float)(1.0 / sqrt(v + eps));
        for (int i = 0; i < F; i++) y[i] = (y[i] - mean) * rstd * w[i] + b[i];
    }
}

/* x[R, ld] = x_in + gamma * y[R, ld] on columns [c0, c1), or x_in + y without
 * LayerScale (x_in may be x itself).
 * timm: x = x + self.ls1(self.attn(...))   (LayerScale: x * gamma) */
VECTOR_CLONES
static void residual_cols(float *x, const float *x_in, const float *restrict y, const float *gamma,
                          int ld, int R, int c0, int c1) {
    for (int r = 0; r < R; r++) {
        float *xr = x + (size_t)r * ld;
        const float *ir = x_in + (size_t)r * ld, *yr = y + (size_t)r * ld;
        if (r + PREFETCH_ROWS < R) prefetch_for_write(xr + (size_t)PREFETCH_ROWS * ld, c0, c1);
        if (gamma)
#pragma omp simd
            for (int i = c0; i < c1; i++) xr[i] = ir[i] + gamma[i] * yr[i];
        else
#pragma omp simd
            for (int i = c0; i < c1; i++) xr[i] = ir[i] + yr[i];
    }
}

/* Row-wise softmax in place: x[R, C]. */
VECTOR_CLONES
static void softmax_rows(float *x, int R, int C) {
    for (int r = 0; r < R; r++) {
        float *row = x + (size_t)r * C;
        float mx = row[0];
#pragma omp simd reduction(max : mx)
        for (int i = 1; i < C; i++) mx = row[i] > mx ? row[i] : mx;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < C; i++) {
            row[i] = expf(row[i] - mx);
            sum += row[i];
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < C; i++) row[i] *= inv;
    }
}

void vit_softmax_rows(float *x, int R, int C) {
    softmax_rows(x, R, C);
}

/* --- attention blocks ------------------------------------------------------ */

int vit_att_blocks(int T) {
    return (T + VIT_ATT_BLOCK - 1) / VIT_ATT_BLOCK;
}

int vit_att_block_start(int T, int b) {
    int nb = vit_att_blocks(T);
    if (b >= nb) return T;
    return (int)((long long)b * T / nb); /* balanced: at most VIT_ATT_BLOCK rows each */
}

float vit_att_scale(const VitConfig *c) {
    return c->att_scale > 0 ? c->att_scale : 1.0f / sqrtf((float)c->head_dim);
}

/* The causal mask over a prefix tree (VitAttMod.parent, CLIP's text tower): row r sees
 * itself and its ancestors, which come before it (parent[r] < r), so no row of [r0, r1)
 * sees a key past r1 - 1: the scores of columns [0, r1) alone, the rest of each row 0.
 * OpenAI CLIP: attn_mask = empty(T, T).fill_(-inf).triu_(1), added to the scores; over
 * the tree every key but the row's ancestors -inf too (indices decreasing along the
 * chain: one pass from the last column down). */
static void att_block_tree(float *out, const float *q, const float *k, int ld, int r0, int r1,
                           int T, int Dh, float scale, int gemm_only, const int *parent) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, Dh, scale,
                q + (size_t)r0 * ld, ld, k, ld, 0.0f, out, T);
    if (gemm_only) return;
    for (int r = r0; r < r1; r++) {
        float *row = out + (size_t)(r - r0) * T;
        for (int j = r1 - 1, a = r; j >= 0; j--)
            if (j == a)
                a = parent[a];
            else
                row[j] = -INFINITY;
        softmax_rows(row, 1, r1);
        memset(row + r1, 0, (size_t)(T - r1) * sizeof(float));
    }
}

/* timm Attention.forward (explicit path, fused_attn=False), for query rows
 * [r0, r1) of one head:
 *   attn = (q * scale) @ k.transpose(-2, -1); attn = attn.softmax(dim=-1)
 * out[r1 - r0, T]; q, k: that head's columns of [T, ld] matrices. */
void vit_att_block(float *out, const float *q, const float *k, int ld, int r0, int r1, int T,
                   int Dh, float scale, int gemm_only, const VitAttMod *m) {
    if (m && m->temp > 0.0f) scale /= m->temp; /* softmax(s / tau) */
    if (m && m->parent) {
        att_block_tree(out, q, k, ld, r0, r1, T, Dh, scale, gemm_only, m->parent);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, T, Dh, scale, q + (size_t)r0 * ld,
                ld, k, ld, 0.0f, out, T);
    if (gemm_only) return;
    if (!m || !m->drop) {
        softmax_rows(out, r1 - r0, T);
        return;
    }
    /* dropped patches: no query sees them (score -inf: probability 0); their own rows 0 */
    int Np = m->n_prefix;
    for (int r = 0; r < r1 - r0; r++)
        for (int p = 0; p < T - Np; p++)
            if (m->drop[p]) out[(size_t)r * T + Np + p] = -INFINITY;
    softmax_rows(out, r1 - r0, T);
    for (int r = r0; r < r1; r++)
        if (r >= Np && m->drop[r - Np])
            memset(out + (size_t)(r - r0) * T, 0, (size_t)T * sizeof(float));
}

/* --- rotary position embedding ---------------------------------------------- */

/* RoPE (VitRope) on rows [r0, r1) of x [., ld], tokens of one input (row t: token t): each
 * patch token t >= Np, patch p = t - Np, gets the angles of table row perm[p] (perm NULL: p)
 * of rope [N, Dh] (cosines, then sines); its n_heads heads of Dh columns from column 0
 * (the queries' then the keys' heads: 2H of them in a [T, 2A] qk) are each rotated, pair i
 * by angle a_i:
 *   rotate-half (DINOv3): pair (i, i + Dh/2)
 *     transformers: q * cos + rotate_half(q) * sin,  rotate_half(u) = cat(-u[Dh/2:], u[:Dh/2])
 *   interleaved (EVA-02): pair (2i, 2i + 1)
 *     timm apply_rot_embed_cat: x * cos + rot(x) * sin,  rot(x) = [-x1, x0, -x3, x2, ...]
 * sign -1 rotates by -a, the transpose: the backward pass's, from the rotated queries' and
 * keys' gradients to the unrotated ones'. The prefix rows are left as they are. */
void vit_rope_rows(float *x, int ld, const float *rope, const int *perm, int r0, int r1, int Np,
                   int n_heads, int Dh, int interleaved, float sign) {
    int h2 = Dh / 2, step = interleaved ? 2 : 1, other = interleaved ? 1 : h2;
    for (int t = r0 < Np ? Np : r0; t < r1; t++) {
        int p = t - Np;
        const float *cs = rope + (size_t)(perm ? perm[p] : p) * Dh, *sn = cs + h2;
        float *row = x + (size_t)t * ld;
        for (int h = 0; h < n_heads; h++) {
            float *u = row + (size_t)h * Dh;
            for (int i = 0; i < h2; i++) {
                float *ua = u + i * step, *ub = ua + other;
                float a = *ua, b = *ub, c = cs[i], si = sign * sn[i];
                *ua = a * c - b * si;
                *ub = b * c + a * si;
            }
        }
    }
}

typedef struct {
    float *x;
    const float *rope;
    const int *perm;
    int ld, n, T, Np, n_heads, Dh, interleaved;
    float sign;
} Rope;

static void rope_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const Rope *a = arg;
    long long rows = (long long)a->n * a->T;
    for (long long r = rows * item / n_items; r < rows * (item + 1) / n_items;) {
        int img = (int)(r / a->T), t0 = (int)(r % a->T);
        long long end = rows * (item + 1) / n_items, img_end = (long long)(img + 1) * a->T;
        int t1 = (int)((end < img_end ? end : img_end) - (long long)img * a->T);
        vit_rope_rows(a->x + (size_t)img * a->T * a->ld, a->ld, a->rope, a->perm, t0, t1, a->Np,
                      a->n_heads, a->Dh, a->interleaved, a->sign);
        r = (long long)img * a->T + t1;
    }
}

void vit_rope(VitPool *pool, float *x, int ld, int n, const float *rope, const int *perm,
              const VitConfig *c, int n_heads, float sign) {
    Rope a = {x,           rope,        perm,    ld,          n,
              c->n_tokens, c->n_prefix, n_heads, c->head_dim, c->rope == VIT_ROPE_EVA,
              sign};
    vit_pool_run(pool, rope_task, &a, vit_pool_threads(pool));
}

/* --- parallel steps -------------------------------------------------------- */

typedef VitLinear Linear;

/* out[T, O] = inp[T, I] . w[O, I]^T + b[O]   (torch.nn.functional.linear) on item
 * `item`'s slice of the O columns (multiples of 16: whole vectors of the kernel).
 * (n_in, n_out rather than I, O: OpenBLAS's cblas.h pulls in <complex.h>'s I.) */
static void linear_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const Linear *a = arg;
    int chunk = ((a->n_out + n_items - 1) / n_items + 15) & ~15;
    int c0 = item * chunk, c1 = c0 + chunk < a->n_out ? c0 + chunk : a->n_out;
    if (c0 >= c1 || a->T == 0) return;
    for (int t = 0; t < a->T && !a->gemm_only; t++) {
        float *row = a->out + (size_t)t * a->ld_out + c0;
        if (t + PREFETCH_ROWS < a->T)
            prefetch_for_write(row + (size_t)PREFETCH_ROWS * a->ld_out, 0, c1 - c0);
        if (a->b)
            memcpy(row, a->b + c0, (size_t)(c1 - c0) * sizeof(float));
        else
            memset(row, 0, (size_t)(c1 - c0) * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->T, c1 - c0, a->n_in, 1.0f, a->inp,
                a->ld_in ? a->ld_in : a->n_in, a->w + (size_t)c0 * a->n_in, a->n_in, 1.0f,
                a->out + c0, a->ld_out);
    if (a->gemm_only) return;
    if (a->act && (a->epilogue == VIT_EPI_GELU || a->epilogue == VIT_EPI_GELU_TO))
        act_cols_to(a->epilogue == VIT_EPI_GELU ? a->out : a->x, a->out, a->ld_out, a->T, c0, c1,
                    a->act);
    else if (a->epilogue == VIT_EPI_GELU)
        vit_gelu_cols(a->out, a->ld_out, a->T, c0, c1);
    else if (a->epilogue == VIT_EPI_GELU_TO)
        gelu_cols_to(a->x, a->out, a->ld_out, a->T, c0, c1);
    if (a->epilogue == VIT_EPI_RESIDUAL)
        residual_cols(a->x, a->x_in ? a->x_in : a->x, a->out, a->gamma, a->ld_out, a->T, c0, c1);
}

void vit_linear(VitPool *pool, VitLinear a) {
    vit_pool_run(pool, linear_task, &a, vit_pool_threads(pool));
}

static void linear(VitPool *pool, Linear a) {
    vit_linear(pool, a);
}

void vit_values(VitPool *pool, float *v, const float *xn, const VitBlock *b, int T, int D, int A,
                int gemm_only) {
    linear(pool, (Linear){.out = v,
                          .ld_out = A,
                          .inp = xn,
                          .w = b->v_w,
                          .b = b->v_b,
                          .T = T,
                          .n_in = D,
                          .n_out = A,
                          .gemm_only = gemm_only});
}

/* Up to three linear layers in one hand-off: items [i*n_each, (i+1)*n_each) are layer
 * i's column slices, the slices vit_linear gives it. */
typedef struct {
    Linear layer[3];
    int n_each;
} Linears;

static void linears_task(void *arg, int item, int n_items, int thread) {
    (void)n_items;
    Linears *a = arg;
    linear_task(&a->layer[item / a->n_each], item % a->n_each, a->n_each, thread);
}

void vit_qkv(VitPool *pool, float *qk, float *v, const float *xn, const VitBlock *b, int T, int D,
             int A, int gemm_only) {
    Linear in = {.inp = xn, .T = T, .n_in = D, .n_out = A, .ld_out = 2 * A, .gemm_only = gemm_only};
    Linears ls = {.n_each = vit_pool_threads(pool)};
    int n = 0;
    if (b->qkv_w && (b->qkv_b || !b->q_b)) { /* fused: queries and keys in one GEMM, values in
                                                 another */
        ls.layer[n] = in;
        ls.layer[n].out = qk, ls.layer[n].w = b->qkv_w, ls.layer[n].b = b->qkv_b;
        ls.layer[n++].n_out = 2 * A;
    } else { /* transformers: query, key, then value; timm's Eva: qkv's rows with q_bias, no
                key bias (NULL: none added), v_bias */
        const float *ws[2] = {b->q_w, b->k_w}, *bs[2] = {b->q_b, b->k_b};
        for (int i = 0; i < 2; i++, n++) {
            ls.layer[n] = in;
            ls.layer[n].out = qk + (size_t)i * A, ls.layer[n].w = ws[i], ls.layer[n].b = bs[i];
        }
    }
    ls.layer[n] = in;
    ls.layer[n].out = v, ls.layer[n].ld_out = A, ls.layer[n].w = b->v_w, ls.layer[n++].b = b->v_b;
    vit_pool_run(pool, linears_task, &ls, n * ls.n_each);
}

typedef struct {
    float *out;
    const float *inp, *w, *b;
    int T, D, gemm_only;
    float eps;
} LayerNorm;

static void layernorm_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const LayerNorm *a = arg;
    if (a->gemm_only) return;
    int r0 = (int)((long long)a->T * item / n_items);
    int r1 = (int)((long long)a->T * (item + 1) / n_items);
    vit_layernorm_rows(a->out, a->inp, a->w, a->b, r0, r1, a->D, a->eps);
}

static void layernorm(VitPool *pool, LayerNorm a) {
    if (a.T > 0) vit_pool_run(pool, layernorm_task, &a, vit_pool_threads(pool));
}

void vit_layernorm(VitPool *pool, float *out, const float *inp, const float *w, const float *b,
                   int T, int D, float eps) {
    layernorm(pool, (LayerNorm){out, inp, w, b, T, D, 0, eps});
}

typedef struct {
    float *patches;     /* [n_images*N, 3*P*P] */
    const float *input; /* [n_images, 3, Sh, Sw] */
    int Sh, Sw, P, gw, N, n_images;
} Im2col;

/* A P x P stride-P convolution is a GEMM over im2col rows
 * patches[n, ch*P*P + ky*P + kx], matching the weight's [D, 3, P, P] layout. */
static void im2col_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const Im2col *a = arg;
    int P = a->P, K = 3 * P * P;
    size_t plane = (size_t)a->Sh * a->Sw;
    long long rows = (long long)a->N * a->n_images;
    for (long long r = rows * item / n_items; r < rows * (item + 1) / n_items; r++) {
        int n = (int)(r % a->N), gy = n / a->gw, gx = n % a->gw;
        const float *input = a->input + (size_t)(r / a->N) * 3 * plane;
        float *row = a->patches + (size_t)r * K;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < P; ky++)
                memcpy(row + (ch * P + ky) * P,
                       input + ch * plane + ((size_t)gy * P + ky) * a->Sw + (size_t)gx * P,
                       (size_t)P * sizeof(float));
    }
}

void vit_im2col(VitPool *pool, float *patches, const float *inputs, int n_images,
                const VitConfig *c) {
    Im2col ic = {patches,       inputs,    c->image_h,   c->image_w,
                 c->patch_size, c->grid_w, c->n_patches, n_images};
    vit_pool_run(pool, im2col_task, &ic, vit_pool_threads(pool));
}

typedef struct {
    float *hid;
    int ld_hid;
    const float *pre;
    int R, F;
    VitActivation act;
    const float *norm_w, *norm_b; /* the sub-LN after the product (cfg.mlp_norm), or NULL */
    float eps;
} Glu;

static void glu_task(void *arg, int item, int n_items, int thread) {
    (void)thread;
    const Glu *a = arg;
    int r0 = (int)((long long)a->R * item / n_items),
        r1 = (int)((long long)a->R * (item + 1) / n_items);
    vit_glu_rows(a->hid, a->ld_hid, a->pre, r0, r1, a->F, a->act);
    if (a->norm_w)
        vit_layernorm_inplace_rows(a->hid, a->ld_hid, a->norm_w, a->norm_b, r0, r1, a->F, a->eps);
}

/* --- one block ------------------------------------------------------------- */

/* Row r of input img in a matrix of the rows that go on after the attention: stacked
 * (img*T + r) when every row goes on, else gathered (r*n + img); for n = 1 the two are
 * the same. */
static size_t on_row(const VitBlockIO *io, int T, int img, int r) {
    return io->rows < T ? (size_t)r * io->n + img : (size_t)img * T + r;
}

typedef struct {
    const VitBlockIO *io;
    int T, A, H; /* A = H * Dh: the attention's width (D but for a notebook's wider heads) */
    float scale; /* vit_att_scale */
} Attention;

/* timm Attention.forward (fused_attn=False): attn = softmax((q * scale) @ k^T);
 * x = (attn @ v).transpose(1, 2).reshape(B, T, A): one item per (input, head, block of
 * query rows), heads side by side in ctx; only the rows < io->rows go into ctx. A block
 * with no such row is skipped unless its probabilities are kept (io->att). */
static void attention_task(void *arg, int item, int n_items, int thread) {
    (void)n_items;
    const Attention *a = arg;
    const VitBlockIO *io = a->io;
    int T = a->T, A = a->A, H = a->H, Dh = A / H, nb = io->head_block ? 1 : vit_att_blocks(T);
    if (io->run && vit_cancelled(io->run)) return;
    int img = item / (H * nb), h = item / nb % H, blk = item % nb;
    int r0 = io->head_block ? 0 : vit_att_block_start(T, blk);
    int r1 = io->head_block ? io->rows : vit_att_block_start(T, blk + 1);
    int rows = (r1 < io->rows ? r1 : io->rows) - r0; /* of this block, into ctx */
    if (rows <= 0 && !io->att) return;
    const float *qk = io->qk + (size_t)img * T * 2 * A, *v = io->v + (size_t)img * T * A;
    const float *p;
    if (io->att_in) {
        p = io->att_in + ((size_t)h * T + r0) * T;
    } else {
        float *out = io->att ? io->att + ((size_t)h * T + r0) * T
                             : io->scratch + (size_t)thread * VIT_ATT_BLOCK * T;
        vit_att_block(out, qk + h * Dh, qk + A + h * Dh, 2 * A, r0, r1, T, Dh, a->scale,
                      io->gemm_only, io->mod);
        p = out;
    }
    if (rows <= 0) return;
    size_t ld = io->rows < T ? (size_t)io->n * A : (size_t)A;
    if (io->ablate && io->ablate[img * io->ablate_stride + h]) { /* head mask: ctx_h = 0 */
        float *c0 = io->ctx + on_row(io, T, img, r0) * A + h * Dh;
        for (int r = 0; r < rows; r++) memset(c0 + r * ld, 0, (size_t)Dh * sizeof(float));
        return;
    }
    /* under a prefix tree's mask the probabilities past column r1 - 1 are 0: not summed */
    int n_keys = io->mod && io->mod->parent ? r1 : T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dh, n_keys, 1.0f, p, T, v + h * Dh,
                A, 0.0f, io->ctx + on_row(io, T, img, r0) * A + h * Dh, (int)ld);
}

int vit_block(VitPool *pool, const VitBlock *b, const VitConfig *c, const VitBlockIO *io) {
    int T = c->n_tokens, D = c->dim, H = c->n_heads, F = c->mlp_dim, n = io->n, g = io->gemm_only;
    int A = vit_att_width(c);
    int R = io->rows * n; /* rows after the attention */
    /* timm: x = x + self.ls1(self.attn(self.norm1(x))) */
    layernorm(pool, (LayerNorm){io->xn1, io->x, b->norm1_w, b->norm1_b, n * T, D, g, c->ln_eps});
    vit_qkv(pool, io->qk, io->v, io->xn1, b, n * T, D, A, g);
    /* transformers DINOv3ViTAttention: q, k = apply_rotary_pos_emb(q, k, cos, sin), the
     * patches' rows only (num_prefix_tokens = T - N), before the scores */
    if (c->rope && b->rope && !g && !(io->mod && io->mod->no_rope))
        vit_rope(pool, io->qk, 2 * A, n, b->rope, io->mod ? io->mod->pos_perm : NULL, c, 2 * H,
                 1.0f);
    Attention at = {io, T, A, H, vit_att_scale(c)};
    vit_pool_run(pool, attention_task, &at, n * H * (io->head_block ? 1 : vit_att_blocks(T)));
    if (io->run && vit_cancelled(io->run)) return 0;
    if (R == 0) return 1;
    linear(pool, (Linear){.out = io->tmp,
                          .ld_out = D,
                          .inp = io->ctx,
                          .w = b->proj_w,
                          .b = b->proj_b,
                          .T = R,
                          .n_in = A,
                          .n_out = D,
                          .epilogue = VIT_EPI_RESIDUAL,
                          .x = io->xm,
                          .x_in = io->res,
                          .gamma = b->ls1,
                          .gemm_only = g});
    /* timm: x = x + self.ls2(self.mlp(self.norm2(x)))   (fc1 -> GELU -> fc2) */
    layernorm(pool, (LayerNorm){io->xn2, io->xm, b->norm2_w, b->norm2_b, R, D, g, c->ln_eps});
    int ld_hid = F; /* hid's row stride: fc2's input */
    if (c->mlp_gated) {
        /* transformers DINOv3ViTGatedMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)); the
         * gate and the value side by side, [R, 2F], in hpre (kept), else in hid, where the
         * product then overwrites the gates (hid's rows 2F apart) */
        float *pre = io->hpre ? io->hpre : io->hid;
        Linear in = {
            .inp = io->xn2, .T = R, .n_in = D, .n_out = F, .ld_out = 2 * F, .gemm_only = g};
        Linears ls = {.n_each = vit_pool_threads(pool)};
        ls.layer[0] = in, ls.layer[0].out = pre, ls.layer[0].w = b->fc1g_w,
        ls.layer[0].b = b->fc1g_b;
        ls.layer[1] = in, ls.layer[1].out = pre + F, ls.layer[1].w = b->fc1_w,
        ls.layer[1].b = b->fc1_b;
        vit_pool_run(pool, linears_task, &ls, 2 * ls.n_each);
        if (!io->hid) return 1;
        if (!io->hpre) ld_hid = 2 * F;
        if (!g) { /* timm SwiGLU (EVA-02 B/L): fc2(norm(act(fc1_g(x)) * fc1_x(x))) */
            Glu gl = {io->hid,    ld_hid,        pre,           R,        F,
                      c->mlp_act, b->mlp_norm_w, b->mlp_norm_b, c->ln_eps};
            vit_pool_run(pool, glu_task, &gl, vit_pool_threads(pool));
        }
    } else {
        /* hpre given: fc1's output kept there, GELU from there into hid; else in place */
        linear(pool, (Linear){.out = io->hpre ? io->hpre : io->hid,
                              .ld_out = F,
                              .inp = io->xn2,
                              .w = b->fc1_w,
                              .b = b->fc1_b,
                              .T = R,
                              .n_in = D,
                              .n_out = F,
                              .epilogue = !io->hid   ? VIT_EPI_NONE
                                          : io->hpre ? VIT_EPI_GELU_TO
                                                     : VIT_EPI_GELU,
                              .x = io->hid,
                              .gemm_only = g,
                              .act = c->mlp_act});
        if (!io->hid) return 1;
    }
    linear(pool, (Linear){.out = io->tmp,
                          .ld_out = D,
                          .inp = io->hid,
                          .ld_in = ld_hid,
                          .w = b->fc2_w,
                          .b = b->fc2_b,
                          .T = R,
                          .n_in = F,
                          .n_out = D,
                          .epilogue = VIT_EPI_RESIDUAL,
                          .x = io->out,
                          .x_in = io->xm,
                          .gamma = b->ls2,
                          .gemm_only = g});
    return 1;
}
