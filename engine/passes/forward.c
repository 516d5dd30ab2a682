/* forward.c - the ViT forward pass, keeping every attention matrix (or what
 * recomputes it exactly).
 *
 * Row-major throughout. Linear weights keep PyTorch's [out, in] layout, so a
 * linear layer is out[T, O] = inp[T, I] . w[O, I]^T + b[O], i.e.
 * cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ...). The bias is
 * written into the output first and the product added with beta = 1, which is
 * torch.addmm's order (bias + inp @ w.T).
 *
 * Threads (engine/passes/pool.c): one pool per VitRun, OpenBLAS single-threaded inside
 * it; every step is a set of items the running threads take. A linear layer is one
 * slice of output columns per thread (its rows of w: the weights are read once in
 * all), with the step after it on the same slice while it is in cache: GELU after
 * fc1, the residual add after proj and fc2. Attention runs in blocks of query rows of
 * one head (att_block): scores, softmax and probabilities . values while the block
 * is in cache, one item each. LayerNorm splits rows.
 *
 * The residual stream runs through VitRun.tokens: block l reads tokens[l], proj's
 * epilogue writes the middle of the block xm = tokens[l] + ls1 * proj(ctx) (into
 * run->x), fc2's writes tokens[l + 1] = xm + ls2 * fc2(...). Kept for the backward
 * pass (VitRun.blocks_kept): every layer's queries and keys, values, xm (proj's
 * epilogue writes it there) and fc1's output (GELU's epilogue reads it and writes
 * run->hid).
 *
 * What is skipped: the last block's output is read only at the tokens the head
 * classifies (CLS, distillation), so after its attention only those rows go
 * through proj and the MLP (none for a backbone without head), unless the run
 * keeps every token (VitRunOptions.all_tokens, for the token views); the
 * attention itself, all of it, is what the maps need. */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* --- buffers --------------------------------------------------------------- */

/* *acc += a * b with overflow check; returns 0 on overflow. */
static int add_floats(size_t *acc, size_t a, size_t b) {
    if (b && a > SIZE_MAX / b) return 0;
    if (*acc > SIZE_MAX - a * b) return 0;
    *acc += a * b;
    return 1;
}

/* The attention's share of the buffers: [L, H, T, T] kept with the current layer's
 * queries and keys [T, 2D], or queries and keys [L, T, 2D] and a [VIT_ATT_BLOCK, T]
 * block per thread. */
static int att_floats(size_t *n, const VitConfig *c, int keep, int n_threads) {
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, L = (size_t)c->n_layers,
           H = (size_t)c->n_heads, LH = 0, TT = 0, LT = 0;
    if (!add_floats(&TT, T, T)) return 0;
    if (keep) return add_floats(&LH, L, H) && add_floats(n, LH, TT) && add_floats(n, T, 2 * D);
    return add_floats(&LT, L, T) && add_floats(n, LT, 2 * D) &&
           add_floats(n, (size_t)n_threads * VIT_ATT_BLOCK, T);
}

/* What keeping the block internals adds to att_floats(keep 1): queries and keys
 * of the other L - 1 layers, values [L, T, D] instead of [T, D], xm [L, T, D] and
 * hpre [L, T, F]. */
static int block_floats(size_t *n, const VitConfig *c) {
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, L = (size_t)c->n_layers,
           F = (size_t)c->mlp_dim, L1T = 0, LT = 0;
    return L >= 1 && add_floats(&L1T, L - 1, T) && add_floats(n, L1T, 3 * D) &&
           add_floats(&LT, L, T) && add_floats(n, LT, D + F);
}

/* --- stopping early (VitControl) -------------------------------------------- */

/* The fields are plain ints in vit.h (no <stdatomic.h> there); GCC's and Clang's
 * __atomic builtins make every access atomic. Relaxed order: the flag carries no data. */
void vit_control_cancel(VitControl *c) {
    __atomic_store_n(&c->cancel_, 1, __ATOMIC_RELAXED);
}

void vit_control_reset(VitControl *c) {
    __atomic_store_n(&c->cancel_, 0, __ATOMIC_RELAXED);
    vit_control_report(c, 0, 0);
}

int vit_control_cancelled(const VitControl *c) {
    return __atomic_load_n(&c->cancel_, __ATOMIC_RELAXED) != 0;
}

void vit_control_report(VitControl *c, int done, int total) {
    __atomic_store_n(&c->total_, total, __ATOMIC_RELAXED);
    __atomic_store_n(&c->done_, done, __ATOMIC_RELAXED);
}

void vit_control_progress(const VitControl *c, int *done, int *total) {
    *done = __atomic_load_n(&c->done_, __ATOMIC_RELAXED);
    *total = __atomic_load_n(&c->total_, __ATOMIC_RELAXED);
    if (*done > *total) *done = *total; /* read between the two stores of a report */
}

int vit_cancelled(const VitRun *run) {
    return run->control && vit_control_cancelled(run->control);
}

void vit_report(const VitRun *run, int done, int total) {
    if (run->control) vit_control_report(run->control, done, total);
}

/* --- buffers, continued ------------------------------------------------------ */

int vit_keep_att(const VitConfig *c, VitAttStorage how) {
    if (how != VIT_ATT_AUTO) return how == VIT_ATT_KEEP;
    size_t n = 0;
    return att_floats(&n, c, 1, 1) && n <= VIT_ATT_KEEP_MAX_BYTES / sizeof(float);
}

int vit_keep_blocks(const VitConfig *c, int keep_att) {
    size_t n = 0;
    return keep_att && att_floats(&n, c, 1, 1) && block_floats(&n, c) &&
           n <= VIT_ATT_KEEP_MAX_BYTES / sizeof(float);
}

int vit_run_floats(const VitConfig *c, int keep_att, int n_threads, size_t *n_floats) {
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)c->mlp_dim, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, C = (size_t)c->n_classes, L = (size_t)c->n_layers;
    size_t n = 0, PP = 0, LT1 = 0;
    int ok = add_floats(&PP, 3 * P, P) && add_floats(&n, 3 * Sh, Sw) && add_floats(&n, N, PP) &&
             add_floats(&n, 4 * T, D) && add_floats(&n, T, F) && add_floats(&LT1, L + 1, T) &&
             add_floats(&n, LT1, D) && att_floats(&n, c, keep_att, n_threads) &&
             (!vit_keep_blocks(c, keep_att) || block_floats(&n, c)) && add_floats(&n, 3, C);
    *n_floats = ok ? n : SIZE_MAX;
    return ok;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VIT_MAX_THREADS ? VIT_MAX_THREADS : (int)n;
}

VitStatus vit_run_init_with(VitRun *run, const Vit *vit, const VitRunOptions *opt, VitError *err) {
    memset(run, 0, sizeof *run);
    const VitConfig *c = &vit->cfg;
    VitRunOptions o = opt ? *opt : (VitRunOptions){0};
    if (o.n_threads < 0 || o.n_threads > VIT_MAX_THREADS || o.att < VIT_ATT_AUTO ||
        o.att > VIT_ATT_RECOMPUTE)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: run options: %d threads (expected 0 .. %d), attention storage "
                             "%d (expected 0 .. 2)",
                             c->name, o.n_threads, VIT_MAX_THREADS, (int)o.att);
    int n_threads = o.n_threads ? o.n_threads : default_threads();
    int keep = vit_keep_att(c, o.att), blocks = vit_keep_blocks(c, keep);
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)c->mlp_dim, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, L = (size_t)c->n_layers, H = (size_t)c->n_heads,
           C = (size_t)c->n_classes;
    size_t n = 0;
    if (!vit_run_floats(c, keep, n_threads, &n) || n > VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: activations over the limit of %llu bytes (vit_load refuses "
                             "such a model)",
                             c->name, (unsigned long long)VIT_MAX_ACTIVATION_BYTES);
    run->mem = malloc(n * sizeof(float));
    if (!run->mem)
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot allocate %zu MB of activations",
                             c->name, n * sizeof(float) >> 20);
    /* OpenBLAS's own threads would wait for work beside this pool's: one pool only. */
    openblas_set_num_threads(1);
    if (!(run->pool = vit_pool_new(n_threads))) {
        free(run->mem);
        run->mem = NULL;
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot start %d threads", c->name, n_threads);
    }
    run->mem_floats = n;
    run->cfg = *c;
    run->n_threads = n_threads;
    run->att_kept = keep;
    run->all_tokens = o.all_tokens != 0;
    run->blocks_kept = blocks;
    float *p = run->mem;
    run->input = p;
    p += 3 * Sh * Sw;
    run->patches = p;
    p += N * 3 * P * P;
    run->x = p;
    p += T * D;
    run->xn = p;
    p += T * D;
    run->ctx = p;
    p += T * D;
    run->v = p;
    p += (blocks ? L : 1) * T * D;
    run->hid = p;
    p += T * F;
    run->tokens = p;
    p += (L + 1) * T * D;
    run->qk = p;
    p += (keep && !blocks ? 1 : L) * T * 2 * D;
    if (blocks) {
        run->xm = p;
        p += L * T * D;
        run->hpre = p;
        p += L * T * F;
    }
    if (keep) {
        run->att = p;
        p += L * H * T * T;
    } else {
        run->att_scratch = p;
        p += (size_t)n_threads * VIT_ATT_BLOCK * T;
    }
    if (C) {
        run->logits = p;
        p += C;
        run->probs = p;
        p += C;
        run->logits_dist = p; /* a run may serve another model of the same shapes */
        p += C;
    }
    memset(run->mem, 0, n * sizeof(float));
    run->crop_w = c->image_w;
    run->crop_h = c->image_h;
    return VIT_OK;
}

VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err) {
    return vit_run_init_with(run, vit, NULL, err);
}

void vit_run_free(VitRun *run) {
    if (!run) return;
    vit_pool_free(run->pool);
    free(run->mem);
    memset(run, 0, sizeof *run);
}

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

/* timm Attention.forward (explicit path, fused_attn=False), for query rows
 * [r0, r1) of one head:
 *   attn = (q * scale) @ k.transpose(-2, -1); attn = attn.softmax(dim=-1)
 * out[r1 - r0, T]; q, k: that head's columns of [T, ld] matrices. */
void vit_att_block(float *out, const float *q, const float *k, int ld, int r0, int r1, int T,
                   int Dh, int gemm_only) {
    float scale = 1.0f / sqrtf((float)Dh);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, T, Dh, scale, q + (size_t)r0 * ld,
                ld, k, ld, 0.0f, out, T);
    if (!gemm_only) softmax_rows(out, r1 - r0, T);
}

typedef struct {
    const float *qk, *v; /* [T, 2D] (queries, then keys), [T, D] */
    float *ctx;          /* [T, D] */
    float *att;          /* [H, T, T] kept, or NULL: scratch blocks */
    float *scratch;      /* [n_threads, VIT_ATT_BLOCK, T] when att is NULL */
    int T, D, H, ctx_rows, gemm_only;
    const VitRun *run; /* its control: cancelled, the items left are skipped; or NULL */
} Attention;

/* x = (attn @ v).transpose(1, 2).reshape(B, T, D): one item per (head, block of
 * query rows), heads side by side in ctx; only the rows < ctx_rows that the rest of
 * the pass reads. */
static void attention_task(void *arg, int item, int n_items, int thread) {
    (void)n_items;
    const Attention *a = arg;
    int T = a->T, D = a->D, Dh = D / a->H, nb = vit_att_blocks(T);
    if (a->run && vit_cancelled(a->run)) return;
    int h = item / nb, b = item % nb;
    int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
    float *p = a->att ? a->att + ((size_t)h * T + r0) * T
                      : a->scratch + (size_t)thread * VIT_ATT_BLOCK * T;
    vit_att_block(p, a->qk + h * Dh, a->qk + D + h * Dh, 2 * D, r0, r1, T, Dh, a->gemm_only);
    int rows = (r1 < a->ctx_rows ? r1 : a->ctx_rows) - r0;
    if (rows > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dh, T, 1.0f, p, T,
                    a->v + h * Dh, D, 0.0f, a->ctx + (size_t)r0 * D + h * Dh, D);
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
                a->n_in, a->w + (size_t)c0 * a->n_in, a->n_in, 1.0f, a->out + c0, a->ld_out);
    if (a->gemm_only) return;
    if (a->epilogue == VIT_EPI_GELU) vit_gelu_cols(a->out, a->ld_out, a->T, c0, c1);
    if (a->epilogue == VIT_EPI_GELU_TO) gelu_cols_to(a->x, a->out, a->ld_out, a->T, c0, c1);
    if (a->epilogue == VIT_EPI_RESIDUAL)
        residual_cols(a->x, a->x_in ? a->x_in : a->x, a->out, a->gamma, a->ld_out, a->T, c0, c1);
}

void vit_linear(VitPool *pool, VitLinear a) {
    vit_pool_run(pool, linear_task, &a, vit_pool_threads(pool));
}

static void linear(VitPool *pool, Linear a) {
    vit_linear(pool, a);
}

void vit_values(VitPool *pool, float *v, const float *xn, const VitBlock *b, int T, int D,
                int gemm_only) {
    linear(pool, (Linear){.out = v,
                          .ld_out = D,
                          .inp = xn,
                          .w = b->v_w,
                          .b = b->v_b,
                          .T = T,
                          .n_in = D,
                          .n_out = D,
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
             int gemm_only) {
    Linear in = {.inp = xn, .T = T, .n_in = D, .n_out = D, .ld_out = 2 * D, .gemm_only = gemm_only};
    Linears ls = {.n_each = vit_pool_threads(pool)};
    int n = 0;
    if (b->qkv_w) { /* fused: queries and keys in one GEMM, values in another */
        ls.layer[n] = in;
        ls.layer[n].out = qk, ls.layer[n].w = b->qkv_w, ls.layer[n].b = b->qkv_b;
        ls.layer[n++].n_out = 2 * D;
    } else { /* transformers: query, key, then value */
        const float *ws[2] = {b->q_w, b->k_w}, *bs[2] = {b->q_b, b->k_b};
        for (int i = 0; i < 2; i++, n++) {
            ls.layer[n] = in;
            ls.layer[n].out = qk + (size_t)i * D, ls.layer[n].w = ws[i], ls.layer[n].b = bs[i];
        }
    }
    ls.layer[n] = in;
    ls.layer[n].out = v, ls.layer[n].ld_out = D, ls.layer[n].w = b->v_w, ls.layer[n++].b = b->v_b;
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

/* --- entry points ---------------------------------------------------------- */

/* The forward pass; gemm_only: the same cblas_sgemm calls on the same buffers
 * and nothing else (no im2col, bias, LayerNorm, softmax, GELU, residual). */
static void forward_pass(VitRun *run, const Vit *vit, int gemm_only) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    VitPool *pool = run->pool;
    int N = c->n_patches, T = c->n_tokens, D = c->dim, H = c->n_heads, F = c->mlp_dim,
        Np = c->n_prefix, L = c->n_layers, K = 3 * c->patch_size * c->patch_size;
    float *x = run->tokens, *xn = run->xn; /* the residual stream: tokens[l] into block l */
    /* rows of the last block's output the head reads: CLS (and distillation) token */
    int head_rows = c->n_classes ? (w->head_dist_w ? 2 : 1) : 0;
    int last_rows = run->all_tokens ? T : head_rows; /* rows of the last block computed */

    /* timm: x = self.patch_embed(x)  (Conv2d then flatten(2).transpose(1, 2)) */
    if (!gemm_only) {
        Im2col ic = {run->patches,  run->input, c->image_h,   c->image_w,
                     c->patch_size, c->grid_w,  c->n_patches, 1};
        vit_pool_run(pool, im2col_task, &ic, vit_pool_threads(pool));
    }
    linear(pool, (Linear){.out = x + (size_t)Np * D,
                          .ld_out = D,
                          .inp = run->patches,
                          .w = w->patch_w,
                          .b = w->patch_b,
                          .T = N,
                          .n_in = K,
                          .n_out = D,
                          .gemm_only = gemm_only});
    /* timm _pos_embed: to_cat = [cls_token, dist_token?, reg_token?]
     *   pos_embed covers the prefix (default): x = cat(to_cat + [x]) + pos_embed
     *   no_embed_class (registers):             x = cat(to_cat + [x + pos_embed]) */
    if (!gemm_only) {
        memcpy(x, w->cls_token, (size_t)D * sizeof(float));
        if (w->dist_token) memcpy(x + D, w->dist_token, (size_t)D * sizeof(float));
        if (w->reg_token)
            memcpy(x + (size_t)(1 + c->has_dist_token) * D, w->reg_token,
                   (size_t)c->n_registers * D * sizeof(float));
        float *xp = x + (size_t)(Np - w->pos_prefix) * D;
        for (size_t i = 0; i < (size_t)(w->pos_prefix + N) * D; i++) xp[i] += w->pos_embed[i];
    }

    for (int l = 0; l < L; l++) {
        if (vit_cancelled(run)) return; /* the outputs are undefined: the caller knows */
        vit_report(run, l, L);
        const VitBlock *b = &w->blocks[l];
        int rows = l == L - 1 ? last_rows : T; /* rows needed after the attention */
        /* the residual stream x from tokens[l] through xm (the block's middle) into
         * tokens[l + 1]; the block internals the backward pass reads, per layer when kept */
        int kb = run->blocks_kept;
        const float *xin = run->tokens + (size_t)l * T * D;
        float *xm = kb ? run->xm + (size_t)l * T * D : run->x;
        x = run->tokens + (size_t)(l + 1) * T * D;
        float *qk = run->att_kept && !kb ? run->qk : run->qk + (size_t)l * T * 2 * D;
        float *v = kb ? run->v + (size_t)l * T * D : run->v;
        /* timm: x = x + self.ls1(self.attn(self.norm1(x))) */
        layernorm(pool, (LayerNorm){xn, xin, b->norm1_w, b->norm1_b, T, D, gemm_only, c->ln_eps});
        vit_qkv(pool, qk, v, xn, b, T, D, gemm_only);
        Attention at = {.qk = qk,
                        .v = v,
                        .ctx = run->ctx,
                        .T = T,
                        .D = D,
                        .H = H,
                        .ctx_rows = rows,
                        .gemm_only = gemm_only,
                        .att = run->att ? run->att + (size_t)l * H * T * T : NULL,
                        .scratch = run->att_scratch,
                        .run = run};
        vit_pool_run(pool, attention_task, &at, H * vit_att_blocks(T));
        if (rows == 0) break;
        if (vit_cancelled(run)) return;
        linear(pool, (Linear){.out = xn,
                              .ld_out = D,
                              .inp = run->ctx,
                              .w = b->proj_w,
                              .b = b->proj_b,
                              .T = rows,
                              .n_in = D,
                              .n_out = D,
                              .epilogue = VIT_EPI_RESIDUAL,
                              .x = xm,
                              .x_in = xin,
                              .gamma = b->ls1,
                              .gemm_only = gemm_only});
        /* timm: x = x + self.ls2(self.mlp(self.norm2(x)))   (fc1 -> GELU -> fc2) */
        layernorm(pool, (LayerNorm){xn, xm, b->norm2_w, b->norm2_b, rows, D, gemm_only, c->ln_eps});
        /* kept: fc1's output into hpre[l], GELU from there into hid */
        linear(pool, (Linear){.out = kb ? run->hpre + (size_t)l * T * F : run->hid,
                              .ld_out = F,
                              .inp = xn,
                              .w = b->fc1_w,
                              .b = b->fc1_b,
                              .T = rows,
                              .n_in = D,
                              .n_out = F,
                              .epilogue = kb ? VIT_EPI_GELU_TO : VIT_EPI_GELU,
                              .x = run->hid,
                              .gemm_only = gemm_only});
        linear(pool, (Linear){.out = xn,
                              .ld_out = D,
                              .inp = run->hid,
                              .w = b->fc2_w,
                              .b = b->fc2_b,
                              .T = rows,
                              .n_in = F,
                              .n_out = D,
                              .epilogue = VIT_EPI_RESIDUAL,
                              .x = x,
                              .x_in = xm,
                              .gamma = b->ls2,
                              .gemm_only = gemm_only});
    }

    /* the last block's output: only its first head_rows rows were computed; the
     * others keep the block's input, as the stream did in place */
    x = run->tokens + (size_t)L * T * D;
    if (!gemm_only && last_rows < T)
        memcpy(x + (size_t)last_rows * D, x - (size_t)T * D + (size_t)last_rows * D,
               (size_t)(T - last_rows) * D * sizeof(float));

    /* timm: x = self.norm(x); x = x[:, 0]; x = self.head(x). The norm is per
     * token, so normalising the CLS (and distillation) token alone gives the
     * same numbers. Distilled (deit.py forward_head, transformers'
     * DeiTForImageClassificationWithTeacher): (head(x[:, 0]) + head_dist(x[:, 1])) / 2 */
    vit_report(run, L, L);
    if (!c->n_classes || vit_cancelled(run)) return;
    int C = c->n_classes;
    if (!gemm_only) vit_layernorm_rows(xn, x, w->norm_w, w->norm_b, 0, head_rows, D, c->ln_eps);
    linear(pool, (Linear){.out = run->logits,
                          .ld_out = C,
                          .inp = xn,
                          .w = w->head_w,
                          .b = w->head_b,
                          .T = 1,
                          .n_in = D,
                          .n_out = C,
                          .gemm_only = gemm_only});
    if (w->head_dist_w) {
        linear(pool, (Linear){.out = run->logits_dist,
                              .ld_out = C,
                              .inp = xn + D,
                              .w = w->head_dist_w,
                              .b = w->head_dist_b,
                              .T = 1,
                              .n_in = D,
                              .n_out = C,
                              .gemm_only = gemm_only});
        if (!gemm_only)
            for (int i = 0; i < C; i++) run->logits[i] = (run->logits[i] + run->logits_dist[i]) / 2;
    }
    if (!gemm_only) {
        memcpy(run->probs, run->logits, (size_t)C * sizeof(float));
        softmax_rows(run->probs, 1, C);
    }
}

void vit_forward(VitRun *run, const Vit *vit) {
    forward_pass(run, vit, 0);
}

void vit_forward_gemms(VitRun *run, const Vit *vit) {
    forward_pass(run, vit, 1);
}
