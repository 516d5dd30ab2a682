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

size_t vit_probe_scratch(int N, int D, int F) {
    return (size_t)D * 6 + (size_t)F + (size_t)N * 2 * D;
}

void vit_probe_forward(VitPool *pool, float *out, float *att, const float *y, const VitProbeHead *w,
                       int N, int D, int H, int F, float eps, VitActivation act, float *scratch) {
    int Dh = D / H;
    float *q = scratch, *o = q + D, *a = o + D, *hn = a + D, *t = hn + D, *h = t + 2 * D,
          *kv = h + F;
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
