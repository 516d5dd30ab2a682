/* probe.c - the attention-pooling ("MAP") head of SigLIP's image tower: a learned probe
 * token attends over the N patch tokens, then a LayerNorm + MLP with a residual.
 *
 * The published computation (transformers modeling_siglip.py @ 1c51a62f5861,
 * SiglipMultiheadAttentionPoolingHead; big_vision models/vit.py MAPHead; Zhai et al. 2023):
 *   probe = self.probe.repeat(batch_size, 1, 1)                     [1, D]
 *   hidden_state = self.attention(probe, hidden_state, hidden_state)[0]
 *       nn.MultiheadAttention(D, H, batch_first=True): in_proj_weight [3D, D] packed q; k; v,
 *       q = probe Wq^T + bq, k = y Wk^T + bk, v = y Wv^T + bv, per head
 *       a_h = softmax(q_h k_h^T / sqrt(Dh)) [N], o = concat_h a_h v_h, o = o Wo^T + bo
 *   residual = hidden_state
 *   hidden_state = residual + self.mlp(self.layernorm(hidden_state))
 *   return hidden_state[:, 0]                                         [D]
 * No residual from the probe around the attention; the MLP is SiglipMLP (fc1, the tower's
 * activation, gelu_pytorch_tanh for SigLIP, fc2). a_h [N] is the only query SigLIP has over
 * its patches (no CLS token): the map of "where it looks", kept per head.
 *
 * Row-major; Linear weights PyTorch's [out, in] (vit_linear). */
#include "internal.h"

#include <math.h>
#include <string.h>

#include <cblas.h>

/* The forward pass's intermediates in its scratch (the backward pass reads them). */
typedef struct {
    float *q;  /* [D] the probe's query */
    float *o;  /* [D] the attention's output before out_proj */
    float *a;  /* [D] after out_proj: the residual, and the LayerNorm's input */
    float *hn; /* [D] the LayerNorm's output */
    float *t;  /* [2D] fc2's output */
    float *h;  /* [F] fc1's output, then the activation's (in place) */
    float *kv; /* [N, 2D] keys, values */
} Parts;

/* vit_probe_scratch (engine/load/activations.c) counts these floats and the keys'. */
static Parts carve(float *scratch, int D, int F) {
    Parts p;
    p.q = scratch, p.o = p.q + D, p.a = p.o + D, p.hn = p.a + D, p.t = p.hn + D, p.h = p.t + 2 * D,
    p.kv = p.h + F;
    return p;
}

VitProbeParts vit_probe_parts(const float *scratch, int D, int F) {
    Parts p = carve((float *)scratch, D, F); /* read only: carve's pointers, made const */
    return (VitProbeParts){.q = p.q, .o = p.o, .a = p.a, .t = p.t};
}

void vit_probe_forward(VitPool *pool, float *out, float *att, const float *y, const VitProbeHead *w,
                       int N, int D, int H, int F, float eps, VitActivation act, float *scratch) {
    int Dh = D / H;
    Parts p = carve(scratch, D, F);
    float *q = p.q, *o = p.o, *a = p.a, *hn = p.hn, *t = p.t, *h = p.h, *kv = p.kv;
    /* q = probe Wq^T + bq: in_proj rows [0, D) */
    vit_linear(pool, (VitLinear){.out = q,
                                 .ld_out = D,
                                 .inp = w->probe,
                                 .w = w->in_w,
                                 .b = w->in_b,
                                 .T = 1,
                                 .n_in = D,
                                 .n_out = D});
    /* k, v = y [Wk; Wv]^T + [bk; bv]: rows [D, 3D), one GEMM, kv [N, 2D] */
    vit_linear(pool, (VitLinear){.out = kv,
                                 .ld_out = 2 * D,
                                 .inp = y,
                                 .w = w->in_w + (size_t)D * D,
                                 .b = w->in_b + D,
                                 .T = N,
                                 .n_in = D,
                                 .n_out = 2 * D});
    float scale = 1.0f / sqrtf((float)Dh);
    for (int hd = 0; hd < H; hd++) {
        float *ah = att + (size_t)hd * N, mx = -INFINITY;
        const float *qh = q + (size_t)hd * Dh;
        for (int n = 0; n < N; n++) {
            const float *kh = kv + (size_t)n * 2 * D + (size_t)hd * Dh;
            float s = 0.0f;
            for (int j = 0; j < Dh; j++) s += qh[j] * kh[j];
            ah[n] = s * scale;
            if (ah[n] > mx) mx = ah[n];
        }
        double sum = 0.0;
        for (int n = 0; n < N; n++) sum += ah[n] = expf(ah[n] - mx);
        float inv = (float)(1.0 / sum);
        float *oh = o + (size_t)hd * Dh;
        memset(oh, 0, (size_t)Dh * sizeof *oh);
        for (int n = 0; n < N; n++) {
            ah[n] *= inv;
            const float *vh = kv + (size_t)n * 2 * D + D + (size_t)hd * Dh;
            for (int j = 0; j < Dh; j++) oh[j] += ah[n] * vh[j];
        }
    }
    /* out_proj, then hidden_state = residual + mlp(layernorm(hidden_state)) */
    vit_linear(pool, (VitLinear){.out = a,
                                 .ld_out = D,
                                 .inp = o,
                                 .w = w->out_w,
                                 .b = w->out_b,
                                 .T = 1,
                                 .n_in = D,
                                 .n_out = D});
    vit_layernorm_rows(hn, a, w->ln_w, w->ln_b, 0, 1, D, eps);
    vit_linear(pool, (VitLinear){.out = h,
                                 .ld_out = F,
                                 .inp = hn,
                                 .w = w->fc1_w,
                                 .b = w->fc1_b,
                                 .T = 1,
                                 .n_in = D,
                                 .n_out = F});
    vit_act_cols(h, F, 1, 0, F, act);
    vit_linear(pool, (VitLinear){.out = t,
                                 .ld_out = D,
                                 .inp = h,
                                 .w = w->fc2_w,
                                 .b = w->fc2_b,
                                 .T = 1,
                                 .n_in = F,
                                 .n_out = D});
    for (int d = 0; d < D; d++) out[d] = a[d] + t[d];
}

/* --- the gradient ------------------------------------------------------------------ */

size_t vit_probe_backward_floats(int N, int D, int H, int F) {
    /* the forward's scratch, att [H, N], out [D], fc1's output [F], dh [F], dhn, da, do [D],
     * dkv [N, 2D] */
    return vit_probe_scratch(N, D, F) + (size_t)H * N + (size_t)D * 4 + (size_t)F * 2 +
           (size_t)N * 2 * D;
}

/* Backward, from g = d/d out (out = a + fc2(act(fc1(LN(a))))):
 *   dh  = act'(h1) (.) fc2_w^T g;  dhn = fc1_w^T dh;  da = g + LN'(a)^T dhn
 *   do  = out_w^T da;  per head, dA[n] = do_h . v_h[n], dv_h[n] = A[n] do_h,
 *   ds[n] = A[n] (dA[n] - sum_m A[m] dA[m]) (softmax'; 0 for CP-LRP), dk_h[n] = ds[n] q_h /
 * sqrt(Dh) dy  = [dk dv] . [Wk; Wv]    (the probe's query depends on no input) */
void vit_probe_backward(float *dy, float *datt, const float *y, const float *g,
                        const VitProbeHead *w, int N, int D, int H, int F, float eps,
                        VitActivation act, int lrp, float *scratch) {
    int Dh = D / H;
    Parts p = carve(scratch, D, F);
    float *att = scratch + vit_probe_scratch(N, D, F), *out = att + (size_t)H * N, *h1 = out + D,
          *dh = h1 + F, *dhn = dh + F, *da = dhn + D, *dout = da + D, *dkv = dout + D;
    vit_probe_forward(NULL, out, att, y, w, N, D, H, F, eps, act, scratch);
    /* fc1's output before the activation, again from the LayerNorm's output */
    memcpy(h1, w->fc1_b, (size_t)F * sizeof *h1);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, F, D, 1.0f, w->fc1_w, D, p.hn, 1, 1.0f, h1, 1);
    cblas_sgemv(CblasRowMajor, CblasTrans, D, F, 1.0f, w->fc2_w, F, g, 1, 0.0f, dh, 1);
    vit_act_backward_rows(dh, h1, 0, 1, F, lrp, act);
    cblas_sgemv(CblasRowMajor, CblasTrans, F, D, 1.0f, w->fc1_w, D, dh, 1, 0.0f, dhn, 1);
    vit_layernorm_backward_rows(da, p.a, w->ln_w, dhn, 0, 1, D, eps, lrp, 0);
    for (int d = 0; d < D; d++) da[d] += g[d];
    cblas_sgemv(CblasRowMajor, CblasTrans, D, D, 1.0f, w->out_w, D, da, 1, 0.0f, dout, 1);
    float scale = 1.0f / sqrtf((float)Dh);
    for (int hd = 0; hd < H; hd++) {
        const float *ah = att + (size_t)hd * N, *qh = p.q + (size_t)hd * Dh,
                    *doh = dout + (size_t)hd * Dh;
        double mean = 0.0; /* sum_m A[m] dA[m] */
        for (int n = 0; n < N; n++) {
            const float *vh = p.kv + (size_t)n * 2 * D + D + (size_t)hd * Dh;
            float dA = 0.0f;
            for (int j = 0; j < Dh; j++) dA += doh[j] * vh[j];
            dkv[(size_t)n * 2 * D + (size_t)hd * Dh] = dA; /* kept until ds below */
            if (datt) datt[(size_t)hd * N + n] = dA;
            mean += (double)ah[n] * dA;
            float *dvh = dkv + (size_t)n * 2 * D + D + (size_t)hd * Dh;
            for (int j = 0; j < Dh; j++) dvh[j] = ah[n] * doh[j];
        }
        for (int n = 0; n < N; n++) {
            float *dkh = dkv + (size_t)n * 2 * D + (size_t)hd * Dh;
            float ds = lrp ? 0.0f : ah[n] * (dkh[0] - (float)mean) * scale;
            for (int j = 0; j < Dh; j++) dkh[j] = ds * qh[j];
        }
    }
    /* dy [N, D] = dkv [N, 2D] . in_w[D:3D] [2D, D] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, D, 2 * D, 1.0f, dkv, 2 * D,
                w->in_w + (size_t)D * D, D, 0.0f, dy, D);
}
