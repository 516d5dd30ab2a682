/* forward.c - the ViT forward pass, keeping every attention matrix.
 *
 * Row-major throughout. Linear weights keep PyTorch's [out, in] layout, so a
 * linear layer is out[T, O] = inp[T, I] . w[O, I]^T + b[O], i.e.
 * cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ...). The bias is
 * written into the output first and the product added with beta = 1, which is
 * torch.addmm's order (bias + inp @ w.T). */
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
 * scalar and give the same answers up to those ulps. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)
__attribute__((simd("notinbranch"))) float erff(float);
__attribute__((simd("notinbranch"))) float expf(float);
#endif
#endif

/* --- buffers --------------------------------------------------------------- */

/* a * b + c with overflow check into *acc; returns 0 on overflow. */
static int add_floats(size_t *acc, size_t a, size_t b) {
    if (b && a > SIZE_MAX / b) return 0;
    if (*acc > SIZE_MAX - a * b) return 0;
    *acc += a * b;
    return 1;
}

int vit_run_floats(const VitConfig *c, size_t *n_floats) {
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)c->mlp_dim, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, L = (size_t)c->n_layers, H = (size_t)c->n_heads,
           C = (size_t)c->n_classes;
    size_t n = 0, LH = 0, TT = 0, PP = 0;
    int ok = add_floats(&LH, L, H) && add_floats(&TT, T, T) && add_floats(&PP, 3 * P, P) &&
             add_floats(&n, 3 * Sh, Sw) && add_floats(&n, N, PP) && add_floats(&n, 3 * T, D) &&
             add_floats(&n, T, 3 * D) && add_floats(&n, T, F) && add_floats(&n, LH, TT) &&
             add_floats(&n, 3, C);
    *n_floats = ok ? n : SIZE_MAX;
    return ok;
}

VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err) {
    memset(run, 0, sizeof *run);
    const VitConfig *c = &vit->cfg;
    size_t Sh = (size_t)c->image_h, Sw = (size_t)c->image_w, T = (size_t)c->n_tokens,
           D = (size_t)c->dim, F = (size_t)c->mlp_dim, N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, L = (size_t)c->n_layers, H = (size_t)c->n_heads,
           C = (size_t)c->n_classes;
    size_t n = 0;
    if (!vit_run_floats(c, &n) || n > VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "%s: activations over the limit of %llu bytes (vit_load refuses "
                             "such a model)",
                             c->name, (unsigned long long)VIT_MAX_ACTIVATION_BYTES);
    run->mem = malloc(n * sizeof(float));
    if (!run->mem)
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: cannot allocate %zu MB of activations",
                             c->name, n * sizeof(float) >> 20);
    run->mem_floats = n;
    run->cfg = *c;
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
    run->qkv = p;
    p += T * 3 * D;
    run->hid = p;
    p += T * F;
    run->att = p;
    p += L * H * T * T;
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

void vit_run_free(VitRun *run) {
    if (!run) return;
    free(run->mem);
    memset(run, 0, sizeof *run);
}

/* --- layers ---------------------------------------------------------------- */

/* out[T, O] = inp[T, I] . w[O, I]^T + b[O]   (torch.nn.functional.linear), rows
 * of out ld_out floats apart; b may be NULL (no bias).
 * (n_in, n_out rather than I, O: OpenBLAS's cblas.h pulls in <complex.h>'s I.) */
static void linear_forward_ld(float *out, int ld_out, const float *inp, const float *w,
                              const float *b, int T, int n_in, int n_out) {
    for (int t = 0; t < T; t++) {
        float *row = out + (size_t)t * ld_out;
        if (b)
            memcpy(row, b, (size_t)n_out * sizeof(float));
        else
            memset(row, 0, (size_t)n_out * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, n_in, 1.0f, inp, n_in, w, n_in,
                1.0f, out, ld_out);
}

static void linear_forward(float *out, const float *inp, const float *w, const float *b, int T,
                           int n_in, int n_out) {
    linear_forward_ld(out, n_out, inp, w, b, T, n_in, n_out);
}

/* x[T, D] += gamma[D] * y[T, D], or x += y without LayerScale (gamma NULL).
 * timm: x = x + self.ls1(self.attn(...))   (LayerScale: x * gamma) */
static void residual_add(float *x, const float *y, const float *gamma, int T, int D) {
    size_t n = (size_t)T * D;
    if (!gamma) {
        for (size_t i = 0; i < n; i++) x[i] += y[i];
        return;
    }
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) x[(size_t)t * D + i] += gamma[i] * y[(size_t)t * D + i];
}

/* torch.nn.LayerNorm over the last dim: out = (x - mean) / sqrt(var + eps) * w + b,
 * biased variance. Moments in double so the result does not depend on summation order. */
static void layernorm_forward(float *out, const float *inp, const float *w, const float *b, int T,
                              int D, float eps) {
    for (int t = 0; t < T; t++) {
        const float *x = inp + (size_t)t * D;
        float *y = out + (size_t)t * D;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < D; i++) m += x[i];
        m /= D;
        for (int i = 0; i < D; i++) v += (x[i] - m) * (x[i] - m);
        v /= D;
        float mean = (float)m, rstd = (float)(1.0 / sqrt(v + eps));
        for (int i = 0; i < D; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    }
}

/* Exact GELU (torch.nn.GELU(approximate='none')): 0.5 x (1 + erf(x / sqrt 2)). */
static void gelu_forward(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* Row-wise softmax in place: x[R, C]. */
static void softmax_rows(float *x, int R, int C) {
    for (int r = 0; r < R; r++) {
        float *row = x + (size_t)r * C;
        float mx = row[0];
        for (int i = 1; i < C; i++) mx = row[i] > mx ? row[i] : mx;
        for (int i = 0; i < C; i++) row[i] = expf(row[i] - mx); /* vectorised */
        double sum = 0.0;
        for (int i = 0; i < C; i++) sum += row[i];
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < C; i++) row[i] *= inv;
    }
}

/* timm Attention.forward (explicit path, fused_attn=False):
 *   qkv = self.qkv(x).reshape(B, T, 3, H, Dh).permute(2, 0, 3, 1, 4)
 *   attn = (q * scale) @ k.transpose(-2, -1); attn = attn.softmax(dim=-1)
 *   x = (attn @ v).transpose(1, 2).reshape(B, T, D); x = self.proj(x)
 * Writes the probabilities to att [H, T, T] and the context to ctx [T, D]. */
static void attention_forward(float *ctx, float *att, const float *qkv, int T, int D, int H) {
    int Dh = D / H;
    float scale = 1.0f / sqrtf((float)Dh);
    for (int h = 0; h < H; h++) {
        const float *q = qkv + h * Dh, *k = qkv + D + h * Dh, *v = qkv + 2 * D + h * Dh;
        float *a = att + (size_t)h * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, Dh, scale, q, 3 * D, k, 3 * D,
                    0.0f, a, T);
        softmax_rows(a, T, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, Dh, T, 1.0f, a, T, v, 3 * D, 0.0f,
                    ctx + h * Dh, D);
    }
}

/* --- entry point ----------------------------------------------------------- */

void vit_forward(VitRun *run, const Vit *vit) {
    const VitConfig *c = &vit->cfg;
    const VitWeights *w = &vit->w;
    int Sw = c->image_w, P = c->patch_size, gw = c->grid_w, N = c->n_patches, T = c->n_tokens,
        D = c->dim, H = c->n_heads, F = c->mlp_dim, Np = c->n_prefix, K = 3 * P * P;
    size_t plane = (size_t)c->image_h * Sw;
    float *x = run->x, *xn = run->xn;

    /* Patch embedding: a P x P stride-P convolution is a GEMM over im2col rows
     * patches[n, ch*P*P + ky*P + kx], matching the weight's [D, 3, P, P] layout.
     * timm: x = self.patch_embed(x)  (Conv2d then flatten(2).transpose(1, 2)) */
    for (int n = 0; n < N; n++) {
        int gy = n / gw, gx = n % gw;
        float *row = run->patches + (size_t)n * K;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < P; ky++)
                memcpy(row + (ch * P + ky) * P,
                       run->input + ch * plane + ((size_t)gy * P + ky) * Sw + (size_t)gx * P,
                       (size_t)P * sizeof(float));
    }
    linear_forward(x + (size_t)Np * D, run->patches, w->patch_w, w->patch_b, N, K, D);
    /* timm _pos_embed: to_cat = [cls_token, dist_token?, reg_token?]
     *   pos_embed covers the prefix (default): x = cat(to_cat + [x]) + pos_embed
     *   no_embed_class (registers):             x = cat(to_cat + [x + pos_embed]) */
    memcpy(x, w->cls_token, (size_t)D * sizeof(float));
    if (w->dist_token) memcpy(x + D, w->dist_token, (size_t)D * sizeof(float));
    if (w->reg_token)
        memcpy(x + (size_t)(1 + c->has_dist_token) * D, w->reg_token,
               (size_t)c->n_registers * D * sizeof(float));
    float *xp = x + (size_t)(Np - w->pos_prefix) * D;
    for (size_t i = 0; i < (size_t)(w->pos_prefix + N) * D; i++) xp[i] += w->pos_embed[i];

    for (int l = 0; l < c->n_layers; l++) {
        const VitBlock *b = &w->blocks[l];
        /* timm: x = x + self.ls1(self.attn(self.norm1(x))) */
        layernorm_forward(xn, x, b->norm1_w, b->norm1_b, T, D, c->ln_eps);
        if (b->qkv_w) { /* fused: one GEMM */
            linear_forward(run->qkv, xn, b->qkv_w, b->qkv_b, T, D, 3 * D);
        } else { /* transformers: query, key, value into the same [T, 3D] layout */
            linear_forward_ld(run->qkv, 3 * D, xn, b->q_w, b->q_b, T, D, D);
            linear_forward_ld(run->qkv + D, 3 * D, xn, b->k_w, b->k_b, T, D, D);
            linear_forward_ld(run->qkv + 2 * D, 3 * D, xn, b->v_w, b->v_b, T, D, D);
        }
        attention_forward(run->ctx, run->att + (size_t)l * H * T * T, run->qkv, T, D, H);
        linear_forward(xn, run->ctx, b->proj_w, b->proj_b, T, D, D);
        residual_add(x, xn, b->ls1, T, D);
        /* timm: x = x + self.ls2(self.mlp(self.norm2(x)))   (fc1 -> GELU -> fc2) */
        layernorm_forward(xn, x, b->norm2_w, b->norm2_b, T, D, c->ln_eps);
        linear_forward(run->hid, xn, b->fc1_w, b->fc1_b, T, D, F);
        gelu_forward(run->hid, (size_t)T * F);
        linear_forward(xn, run->hid, b->fc2_w, b->fc2_b, T, F, D);
        residual_add(x, xn, b->ls2, T, D);
    }

    /* timm: x = self.norm(x); x = x[:, 0]; x = self.head(x). The norm is per
     * token, so normalising the CLS (and distillation) token alone gives the
     * same numbers. Distilled (deit.py forward_head, transformers'
     * DeiTForImageClassificationWithTeacher): (head(x[:, 0]) + head_dist(x[:, 1])) / 2 */
    int n_out = w->head_dist_w ? 2 : 1;
    layernorm_forward(xn, x, w->norm_w, w->norm_b, n_out, D, c->ln_eps);
    if (c->n_classes) {
        int C = c->n_classes;
        linear_forward(run->logits, xn, w->head_w, w->head_b, 1, D, C);
        if (w->head_dist_w) {
            linear_forward(run->logits_dist, xn + D, w->head_dist_w, w->head_dist_b, 1, D, C);
            for (int i = 0; i < C; i++) run->logits[i] = (run->logits[i] + run->logits_dist[i]) / 2;
        }
        memcpy(run->probs, run->logits, (size_t)C * sizeof(float));
        softmax_rows(run->probs, 1, C);
    }
}
