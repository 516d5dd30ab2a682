/* activations.c - the floats a forward pass of a config takes (engine/load/): what
 * vit_load refuses over VIT_MAX_ACTIVATION_BYTES (model.c) and what vit_run_init allocates
 * (engine/passes/forward.c), from the VitConfig alone. Here, below the passes, so that
 * loading never calls up into them (docs/architecture.md, the engine's layers): the
 * passes carve their buffers in the order these counts add them up (forward.c's
 * vit_run_init_with, head.c's vit_head_probe_scratch, probe.c's carve). The counts that
 * can overflow size_t say so by returning 0. */
#include "internal.h"

#include <stdint.h>

/* --- the attention and the block internals ------------------------------------ */

/* The attention's share of the buffers: [L, H, T, T] kept with the current layer's
 * queries and keys [T, 2A], or queries and keys [L, T, 2A] and a [VIT_ATT_BLOCK, T]
 * block per thread (A: vit_att_width). */
static int att_floats(size_t *n, const VitConfig *c, int keep, int n_threads) {
    size_t T = (size_t)c->n_tokens, A = (size_t)vit_att_width(c), L = (size_t)c->n_layers,
           H = (size_t)c->n_heads, LH = 0, TT = 0, LT = 0;
    if (!vit_add_product(&TT, T, T)) return 0;
    if (keep)
        return vit_add_product(&LH, L, H) && vit_add_product(n, LH, TT) &&
               vit_add_product(n, T, 2 * A);
    return vit_add_product(&LT, L, T) && vit_add_product(n, LT, 2 * A) &&
           vit_add_product(n, (size_t)n_threads * VIT_ATT_BLOCK, T);
}

/* What keeping the block internals adds to att_floats(keep 1): queries and keys
 * of the other L - 1 layers, values [L, T, A] instead of [T, A], xm [L, T, D] and
 * hpre [L, T, Fi] (Fi = vit_mlp_in_width: F, or 2F gated). */
static int block_floats(size_t *n, const VitConfig *c) {
    size_t T = (size_t)c->n_tokens, D = (size_t)c->dim, L = (size_t)c->n_layers,
           F = (size_t)vit_mlp_in_width(c), A = (size_t)vit_att_width(c), L1T = 0, LT = 0;
    return L >= 1 && vit_add_product(&L1T, L - 1, T) && vit_add_product(n, L1T, 3 * A) &&
           vit_add_product(&LT, L, T) && vit_add_product(n, LT, D + F);
}

/* --- the heads' scratch ------------------------------------------------------- */

/* The probe's scratch: probe.c's carve (q, o, a, hn [D] each, t [2D], h [F], kv [N, 2D]). */
size_t vit_probe_scratch(int N, int D, int F) {
    return (size_t)D * 6 + (size_t)F + (size_t)N * 2 * D;
}

size_t vit_head_scratch_floats(const VitConfig *c) {
    if (c->head_pool != VIT_POOL_MAP) return 0;
    size_t N = (size_t)c->n_patches, D = (size_t)c->dim, H = (size_t)c->n_heads;
    return N * D + H * N + vit_probe_scratch(c->n_patches, c->dim, c->mlp_dim);
}

/* --- a run's buffers ---------------------------------------------------------- */

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
           D = (size_t)c->dim, F = (size_t)vit_mlp_in_width(c), N = (size_t)c->n_patches,
           P = (size_t)c->patch_size, C = (size_t)c->n_classes, L = (size_t)c->n_layers,
           A = (size_t)vit_att_width(c);
    size_t n = 0, PP = 0, LT1 = 0;
    int ok = vit_add_product(&PP, 3 * P, P) && vit_add_product(&n, 3 * Sh, Sw) &&
             vit_add_product(&n, N, PP) && vit_add_product(&n, 2 * T, D) &&
             vit_add_product(&n, 2 * T, A) && vit_add_product(&n, T, F) &&
             vit_add_product(&LT1, L + 1, T) && vit_add_product(&n, LT1, D) &&
             att_floats(&n, c, keep_att, n_threads) &&
             (!vit_keep_blocks(c, keep_att) || block_floats(&n, c)) && vit_add_product(&n, 3, C) &&
             vit_add_product(&n, 1, (size_t)c->embed_dim) &&
             vit_add_product(&n, c->norm_pre ? T : 0, D) &&
             vit_add_product(&n, c->head_pool == VIT_POOL_MAP ? (size_t)c->n_heads : 0, N) &&
             vit_add_product(&n, 1, vit_head_scratch_floats(c));
    *n_floats = ok ? n : SIZE_MAX;
    return ok;
}
