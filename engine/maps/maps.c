/* maps.c - maps over the patch grid from the captured attention [L, H, T, T]:
 * per-head attention, head fusion, attention rollout (Abnar & Zuidema 2020,
 * "Quantifying Attention Flow in Transformers", §3 and Appendix A.1), attention
 * entropy, and the explorer's mask and mean attention distance. Every map reads the attention
 * through AttReader, a block of query rows at a time: a pointer into run->att,
 * or the block recomputed from the kept queries and keys (the same values). */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- helpers --------------------------------------------------------------- */

const char *vit_fusion_name(VitFusion f) {
    switch (f) {
    case VIT_FUSE_MEAN: return "mean";
    case VIT_FUSE_MAX: return "max";
    case VIT_FUSE_MIN: return "min";
    }
    return "?";
}

static VitStatus check_args(const VitRun *run, int layer, int head, int query, VitError *err) {
    const VitConfig *c = &run->cfg;
    if (!run->att && !run->qk)
        return vit_set_error(err, VIT_ERR_ARG, "map: no forward pass has been run");
    if (layer < 0 || layer >= c->n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "map: layer %d out of range [0, %d)", layer,
                             c->n_layers);
    if (head >= c->n_heads)
        return vit_set_error(err, VIT_ERR_ARG, "map: head %d out of range [0, %d)", head,
                             c->n_heads);
    if (query < 0 || query >= c->n_tokens)
        return vit_set_error(err, VIT_ERR_ARG, "map: query token %d out of range [0, %d)", query,
                             c->n_tokens);
    return VIT_OK;
}

/* --- reading the attention ------------------------------------------------- */

/* AttReader (internal.h): att[layer, head] a block of query rows at a time. */

VitStatus vit_att_reader_init(AttReader *rd, const VitRun *run, VitError *err) {
    *rd = (AttReader){run, NULL, 0, 0, -1};
    if (run->att) return VIT_OK;
    rd->buf = malloc((size_t)VIT_ATT_BLOCK * run->cfg.n_tokens * sizeof(float));
    if (!rd->buf)
        return vit_set_error(err, VIT_ERR_NOMEM, "map: out of memory for [%d, %d]", VIT_ATT_BLOCK,
                             run->cfg.n_tokens);
    return VIT_OK;
}

void vit_att_reader_free(AttReader *rd) {
    free(rd->buf);
}

/* Block b of att[layer, head]: [rows of the block, T]. */
const float *vit_att_reader_block(AttReader *rd, int layer, int head, int b) {
    const VitRun *run = rd->run;
    size_t T = (size_t)run->cfg.n_tokens, A = (size_t)vit_att_width(&run->cfg);
    int r0 = vit_att_block_start((int)T, b), r1 = vit_att_block_start((int)T, b + 1);
    if (run->att) return run->att + (((size_t)layer * run->cfg.n_heads + head) * T + r0) * T;
    if (rd->block != b || rd->layer != layer || rd->head != head) {
        if (vit_cancelled(run)) return rd->buf; /* stale: the caller returns cancelled */
        int Dh = run->cfg.head_dim;
        const float *qk = run->qk + (size_t)layer * T * 2 * A;
        VitAttMod mod;
        vit_att_block(rd->buf, qk + (size_t)head * Dh, qk + A + (size_t)head * Dh, (int)(2 * A), r0,
                      r1, (int)T, Dh, vit_att_scale(&run->cfg), 0,
                      vit_att_mod(&mod, run->intervention, &run->cfg, layer));
        rd->layer = layer, rd->head = head, rd->block = b;
    }
    return rd->buf;
}

/* Row `query` of att[layer, head]: [T]. */
static const float *att_row(AttReader *rd, int layer, int head, int query) {
    int T = rd->run->cfg.n_tokens, nb = vit_att_blocks(T);
    int b = (int)((long long)query * nb / T);
    while (b + 1 < nb && vit_att_block_start(T, b + 1) <= query) b++;
    while (b > 0 && vit_att_block_start(T, b) > query) b--;
    return vit_att_reader_block(rd, layer, head, b) +
           (size_t)(query - vit_att_block_start(T, b)) * T;
}

/* The status of a map whose run was cancelled (VitRun.control). */
VitStatus vit_cancelled_error(VitError *err, const char *what) {
    return vit_set_error(err, VIT_ERR_CANCELLED, "%s: cancelled", what);
}

/* out[i] = a[i] for the first head, then fused with each further head's a. */
static void fuse_into(float *out, const float *a, size_t n, int first, VitFusion fusion) {
    if (first) {
        memcpy(out, a, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (fusion == VIT_FUSE_MEAN)
            out[i] += a[i];
        else if (fusion == VIT_FUSE_MAX)
            out[i] = a[i] > out[i] ? a[i] : out[i];
        else
            out[i] = a[i] < out[i] ? a[i] : out[i];
    }
}

/* out[T, T] = fuse_h att[layer, h] (rows: queries, columns: keys). */
void vit_fuse_heads(float *out, AttReader *rd, int layer, VitFusion fusion) {
    int H = rd->run->cfg.n_heads, T = rd->run->cfg.n_tokens, nb = vit_att_blocks(T);
    for (int h = 0; h < H && !vit_cancelled(rd->run); h++) /* cancelled: out is garbage */
        for (int b = 0; b < nb; b++) {
            int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
            fuse_into(out + (size_t)r0 * T, vit_att_reader_block(rd, layer, h, b),
                      (size_t)(r1 - r0) * T, h == 0, fusion);
        }
    if (fusion == VIT_FUSE_MEAN && !vit_cancelled(rd->run))
        for (size_t i = 0; i < (size_t)T * T; i++) out[i] /= (float)H;
}

/* out[n] = fuse_h att[layer, h, query, first + i], i < n (head < 0), or one head's. */
static void fused_row(float *out, AttReader *rd, int layer, int head, VitFusion fusion, int query,
                      int first, int n) {
    int H = rd->run->cfg.n_heads;
    if (head >= 0) {
        memcpy(out, att_row(rd, layer, head, query) + first, (size_t)n * sizeof(float));
        return;
    }
    for (int h = 0; h < H; h++)
        fuse_into(out, att_row(rd, layer, h, query) + first, (size_t)n, h == 0, fusion);
    if (fusion == VIT_FUSE_MEAN)
        for (int i = 0; i < n; i++) out[i] /= (float)H;
}

/* floor(ratio * n) with the ratio read as the shortest decimal (up to 9 places)
 * that gives back the same float: 0.9f is 0.89999998, and floor(0.89999998 * 90)
 * would discard 80 entries, not the 81 the caller meant. Integer arithmetic from
 * there, so the product cannot fall just below an integer either. n < 2^32. */
static size_t discard_count(float ratio, size_t n) {
    uint64_t den = 1;
    for (int places = 1; places <= 9; places++) {
        den *= 10;
        double num = nearbyint((double)ratio * (double)den);
        if ((float)(num / (double)den) == ratio) return (size_t)((uint64_t)num * n / den);
    }
    return (size_t)floor((double)ratio * (double)n);
}

/* The order of the discard: by value, ties by lower row-major index. */
static int entry_less(const Entry *x, const Entry *y) {
    return x->v < y->v || (x->v == y->v && x->i < y->i);
}

/* Reorder e[0, n) so that e[0, k) holds its k smallest entries in the order of
 * entry_less (value, then index: a total order, so the set is unique), in any
 * order among themselves: quickselect, O(n) on average where a full qsort is
 * O(n log n). Every entry left of [lo, hi) is smaller than every entry in it. */
static void select_smallest(Entry *e, size_t n, size_t k) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        Entry t, pivot = e[lo + (hi - lo) / 2];
        e[lo + (hi - lo) / 2] = e[hi - 1], e[hi - 1] = pivot;
        size_t store = lo;
        for (size_t j = lo; j < hi - 1; j++)
            if (entry_less(&e[j], &pivot)) t = e[j], e[j] = e[store], e[store++] = t;
        e[hi - 1] = e[store], e[store] = pivot; /* the pivot in its sorted place */
        if (store == k) return;
        if (k < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Zero the floor(ratio * T*(T-Np)) smallest entries of a[T, T] among the keys
 * that are patches (columns >= Np); ties: lower row-major index first. */
int vit_discard_smallest(float *a, int T, int Np, float ratio, Entry *scratch) {
    size_t n = 0;
    for (int r = 0; r < T; r++)
        for (int col = Np; col < T; col++) {
            scratch[n].v = a[(size_t)r * T + col];
            scratch[n].i = (uint32_t)((size_t)r * T + col);
            n++;
        }
    size_t k = discard_count(ratio, n);
    if (k == 0) return 1;
    select_smallest(scratch, n, k);
    for (size_t j = 0; j < k; j++) a[scratch[j].i] = 0.0f;
    return 1;
}

/* a[T, T] <- rownorm(0.5 a + 0.5 I). */
void vit_add_identity_rownorm(float *a, int T) {
    for (int r = 0; r < T; r++) {
        float *row = a + (size_t)r * T;
        double s = 0.0;
        for (int col = 0; col < T; col++) {
            row[col] = 0.5f * row[col] + (col == r ? 0.5f : 0.0f);
            s += row[col];
        }
        float inv = (float)(1.0 / s);
        for (int col = 0; col < T; col++) row[col] *= inv;
    }
}

/* v[T] <- v[T] . a[T, T] */
void vit_row_times(double *v, double *tmp, const float *a, int T) {
    for (int col = 0; col < T; col++) tmp[col] = 0.0;
    for (int r = 0; r < T; r++) {
        if (v[r] == 0.0) continue;
        const float *row = a + (size_t)r * T;
        for (int col = 0; col < T; col++) tmp[col] += v[r] * row[col];
    }
    memcpy(v, tmp, (size_t)T * sizeof(double));
}

/* --- entry points ---------------------------------------------------------- */

VitStatus vit_map_attention(float *out, const VitRun *run, int layer, int head, int query,
                            VitError *err) {
    VitStatus rc = check_args(run, layer, head, query, err);
    if (rc) return rc;
    if (head < 0) return vit_set_error(err, VIT_ERR_ARG, "map: head %d is negative", head);
    AttReader rd;
    if ((rc = vit_att_reader_init(&rd, run, err))) return rc;
    fused_row(out, &rd, layer, head, VIT_FUSE_MEAN, query, run->cfg.n_prefix, run->cfg.n_patches);
    vit_att_reader_free(&rd);
    return vit_cancelled(run) ? vit_cancelled_error(err, "map") : VIT_OK;
}

VitStatus vit_map_fused(float *out, const VitRun *run, int layer, VitFusion fusion, int query,
                        VitError *err) {
    VitStatus rc = check_args(run, layer, 0, query, err);
    if (rc) return rc;
    if (fusion < VIT_FUSE_MEAN || fusion > VIT_FUSE_MIN)
        return vit_set_error(err, VIT_ERR_ARG, "map: unknown head fusion %d", (int)fusion);
    AttReader rd;
    if ((rc = vit_att_reader_init(&rd, run, err))) return rc;
    fused_row(out, &rd, layer, -1, fusion, query, run->cfg.n_prefix, run->cfg.n_patches);
    vit_att_reader_free(&rd);
    return vit_cancelled(run) ? vit_cancelled_error(err, "map") : VIT_OK;
}

/* The rolled-out row of `query` over every token: v[T] (double), up to and
 * including `layer` (see vit.h). v has room for 2T doubles (the second half is
 * scratch). Arguments already checked. */
static VitStatus rollout_row(double *v, const VitRun *run, int layer, int head, VitFusion fusion,
                             float discard_ratio, int query, VitError *err) {
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens, Np = c->n_prefix, nb = vit_att_blocks(T);
    size_t TT = (size_t)T * T;
    AttReader rd;
    VitStatus rc = vit_att_reader_init(&rd, run, err);
    if (rc) return rc;
    float *a = malloc(TT * sizeof(float));
    Entry *scratch = discard_ratio > 0.0f ? malloc(TT * sizeof(Entry)) : NULL;
    if (!a || (discard_ratio > 0.0f && !scratch)) {
        free(a), free(scratch), vit_att_reader_free(&rd);
        return vit_set_error(err, VIT_ERR_NOMEM, "rollout: out of memory for [%d, %d]", T, T);
    }
    /* The CLS (query) row of R_layer = Â_layer ... Â_0 is e_q^T Â_layer ... Â_0:
     * a row vector times each Â from the top layer down, O(L T^2), no T^3. */
    for (int i = 0; i < T; i++) v[i] = i == query ? 1.0 : 0.0;
    for (int l = layer; l >= 0 && !vit_cancelled(run); l--) {
        vit_report(run, layer - l, layer + 1);
        if (l == layer && head >= 0) { /* App. A.1: that head alone */
            for (int b = 0; b < nb; b++) {
                int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
                memcpy(a + (size_t)r0 * T, vit_att_reader_block(&rd, l, head, b),
                       (size_t)(r1 - r0) * T * sizeof(float));
            }
        } else {
            vit_fuse_heads(a, &rd, l, fusion);
            if (vit_cancelled(run)) break; /* no discard, no product of a garbage matrix */
            if (discard_ratio > 0.0f) vit_discard_smallest(a, T, Np, discard_ratio, scratch);
        }
        vit_add_identity_rownorm(a, T);
        vit_row_times(v, v + T, a, T);
    }
    free(a), free(scratch), vit_att_reader_free(&rd);
    if (vit_cancelled(run)) return vit_cancelled_error(err, "rollout");
    vit_report(run, layer + 1, layer + 1);
    return VIT_OK;
}

static VitStatus check_rollout(const VitRun *run, int layer, int head, VitFusion fusion,
                               float discard_ratio, int query, VitError *err) {
    VitStatus rc = check_args(run, layer, head, query, err);
    if (rc) return rc;
    if (fusion < VIT_FUSE_MEAN || fusion > VIT_FUSE_MIN)
        return vit_set_error(err, VIT_ERR_ARG, "rollout: unknown head fusion %d", (int)fusion);
    if (!(discard_ratio >= 0.0f && discard_ratio < 1.0f))
        return vit_set_error(err, VIT_ERR_ARG, "rollout: discard ratio %g outside [0, 1)",
                             (double)discard_ratio);
    return VIT_OK;
}

VitStatus vit_rollout(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                      float discard_ratio, int query, VitError *err) {
    VitStatus rc = check_rollout(run, layer, head, fusion, discard_ratio, query, err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    double *v = malloc(2 * (size_t)c->n_tokens * sizeof(double));
    if (!v)
        return vit_set_error(err, VIT_ERR_NOMEM, "rollout: out of memory for [%d, %d]", c->n_tokens,
                             c->n_tokens);
    rc = rollout_row(v, run, layer, head, fusion, discard_ratio, query, err);
    if (rc == VIT_OK)
        for (int p = 0; p < c->n_patches; p++) out[p] = (float)v[c->n_prefix + p];
    free(v);
    return rc;
}

VitStatus vit_rollout_tokens(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                             float discard_ratio, int query, VitError *err) {
    VitStatus rc = check_rollout(run, layer, head, fusion, discard_ratio, query, err);
    if (rc) return rc;
    int T = run->cfg.n_tokens;
    double *v = malloc(2 * (size_t)T * sizeof(double));
    if (!v) return vit_set_error(err, VIT_ERR_NOMEM, "rollout: out of memory for [%d, %d]", T, T);
    rc = rollout_row(v, run, layer, head, fusion, discard_ratio, query, err);
    if (rc == VIT_OK)
        for (int t = 0; t < T; t++) out[t] = (float)v[t];
    free(v);
    return rc;
}

VitStatus vit_rollout_layers(float *out, const VitRun *run, int layer0, int n_layers,
                             float discard_ratio, int query, VitError *err) {
    if (n_layers < 1 || layer0 < 0)
        return vit_set_error(err, VIT_ERR_ARG, "rollout: layers %d + %d, expected >= 0 and >= 1",
                             layer0, n_layers);
    int top = layer0 + n_layers - 1;
    VitStatus rc = check_rollout(run, top, 0, VIT_FUSE_MEAN, discard_ratio, query, err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    int T = c->n_tokens, Np = c->n_prefix, N = c->n_patches, H = c->n_heads;
    size_t TT = (size_t)T * T, K = (size_t)H + 3;
    AttReader rd;
    if ((rc = vit_att_reader_init(&rd, run, err))) return rc;
    float *hat = malloc((size_t)(top + 1) * TT * sizeof(float)); /* Â_0 .. Â_top, one fusion */
    Entry *scratch = discard_ratio > 0.0f ? malloc(TT * sizeof(Entry)) : NULL;
    double *v = malloc(2 * (size_t)T * sizeof(double));
    if (!hat || !v || (discard_ratio > 0.0f && !scratch)) {
        free(hat), free(scratch), free(v), vit_att_reader_free(&rd);
        return vit_set_error(err, VIT_ERR_NOMEM, "rollout: out of memory for %d x [%d, %d]",
                             top + 1, T, T);
    }
    /* The same steps as rollout_row, in the same order, so every map is bit for bit
     * the vit_rollout one; only the fused matrices are shared between the maps. When
     * the attention is recomputed, each layer's is recomputed once per fusion. */
    for (int f = VIT_FUSE_MEAN; f <= VIT_FUSE_MIN && !vit_cancelled(run); f++) {
        for (int l = 0; l <= top && !vit_cancelled(run); l++) {
            vit_report(run, f * (top + 1) + l, (VIT_FUSE_MIN + 1) * (top + 1));
            float *a = hat + (size_t)l * TT;
            vit_fuse_heads(a, &rd, l, (VitFusion)f);
            if (vit_cancelled(run)) break;
            if (discard_ratio > 0.0f) vit_discard_smallest(a, T, Np, discard_ratio, scratch);
            vit_add_identity_rownorm(a, T);
        }
        for (int l = layer0; l <= top && !vit_cancelled(run); l++) {
            float *o = out + (size_t)(l - layer0) * K * N;
            for (int h = (f == VIT_FUSE_MEAN ? 0 : H); h < H; h++) { /* App. A.1, below: mean */
                /* row `query` of rownorm(0.5 A + 0.5 I) of the head, as add_identity_rownorm */
                const float *row = att_row(&rd, l, h, query);
                float *tmp = (float *)(v + T); /* T floats fit in T doubles */
                double sum = 0.0;
                for (int col = 0; col < T; col++) {
                    tmp[col] = 0.5f * row[col] + (col == query ? 0.5f : 0.0f);
                    sum += tmp[col];
                }
                float inv = (float)(1.0 / sum);
                for (int col = 0; col < T; col++) v[col] = (double)(tmp[col] * inv);
                for (int j = l - 1; j >= 0; j--) vit_row_times(v, v + T, hat + (size_t)j * TT, T);
                for (int p = 0; p < N; p++) o[(size_t)h * N + p] = (float)v[Np + p];
            }
            for (int i = 0; i < T; i++) v[i] = i == query ? 1.0 : 0.0;
            for (int j = l; j >= 0; j--) vit_row_times(v, v + T, hat + (size_t)j * TT, T);
            for (int p = 0; p < N; p++) o[(size_t)(H + f) * N + p] = (float)v[Np + p];
        }
    }
    free(hat), free(scratch), free(v), vit_att_reader_free(&rd);
    if (vit_cancelled(run)) return vit_cancelled_error(err, "rollout");
    vit_report(run, (VIT_FUSE_MIN + 1) * (top + 1), (VIT_FUSE_MIN + 1) * (top + 1));
    return VIT_OK;
}

VitStatus vit_prefix_share(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                           int rollout, float discard_ratio, int query, VitError *err) {
    if (rollout) {
        VitStatus rc = check_rollout(run, layer, head, fusion, discard_ratio, query, err);
        if (rc) return rc;
        const VitConfig *c = &run->cfg;
        double *v = malloc(2 * (size_t)c->n_tokens * sizeof(double));
        if (!v)
            return vit_set_error(err, VIT_ERR_NOMEM, "rollout: out of memory for [%d, %d]",
                                 c->n_tokens, c->n_tokens);
        rc = rollout_row(v, run, layer, head, fusion, discard_ratio, query, err);
        if (rc == VIT_OK)
            for (int i = 0; i < c->n_prefix; i++) out[i] = (float)v[i];
        free(v);
        return rc;
    }
    VitStatus rc = check_args(run, layer, head < 0 ? 0 : head, query, err);
    if (rc) return rc;
    if (head < 0 && (fusion < VIT_FUSE_MEAN || fusion > VIT_FUSE_MIN))
        return vit_set_error(err, VIT_ERR_ARG, "map: unknown head fusion %d", (int)fusion);
    AttReader rd; /* as vit_map_attention / vit_map_fused, on the prefix columns */
    if ((rc = vit_att_reader_init(&rd, run, err))) return rc;
    fused_row(out, &rd, layer, head, fusion, query, 0, run->cfg.n_prefix);
    vit_att_reader_free(&rd);
    return vit_cancelled(run) ? vit_cancelled_error(err, "map") : VIT_OK;
}

const char *vit_prefix_name(char *buf, size_t n, const VitConfig *cfg, int i) {
    int reg0 = 1 + cfg->has_dist_token;
    if (i == 0)
        snprintf(buf, n, "CLS");
    else if (i < reg0)
        snprintf(buf, n, "dist");
    else if (i < cfg->n_prefix)
        snprintf(buf, n, "reg%d", i - reg0 + 1);
    else
        snprintf(buf, n, "?");
    return buf;
}

/* --- attention entropy -------------------------------------------------------- */

/* e[N]: the entropy of att[layer, head]'s patch query rows (Np .. T-1) over all T keys,
 * -sum_j a_j ln a_j in nats (0 ln 0 = 0), each row summed in double. */
static void head_entropy(float *e, AttReader *rd, int layer, int head) {
    const VitConfig *c = &rd->run->cfg;
    int T = c->n_tokens, Np = c->n_prefix, nb = vit_att_blocks(T);
    for (int b = 0; b < nb; b++) {
        int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
        if (r1 <= Np) continue;
        const float *blk = vit_att_reader_block(rd, layer, head, b);
        for (int r = r0 > Np ? r0 : Np; r < r1; r++) {
            const float *a = blk + (size_t)(r - r0) * T;
            double h = 0.0;
            for (int j = 0; j < T; j++)
                if (a[j] > 0.0f) h -= (double)a[j] * log((double)a[j]);
            e[r - Np] = (float)h;
        }
    }
}

/* out[H + 3, N] for one layer: the heads' entropy maps, then their mean, max and min
 * (VitFusion order). Only the heads (head >= 0: that one alone, into out[0]) when
 * fusions is 0. */
static void layer_entropy(float *out, AttReader *rd, int layer, int head, int fusions) {
    const VitConfig *c = &rd->run->cfg;
    int H = c->n_heads, N = c->n_patches;
    if (head >= 0) {
        head_entropy(out, rd, layer, head);
        return;
    }
    for (int h = 0; h < H && !vit_cancelled(rd->run); h++)
        head_entropy(out + (size_t)h * N, rd, layer, h);
    for (int f = VIT_FUSE_MEAN; f <= VIT_FUSE_MIN && fusions; f++) {
        float *o = out + (size_t)(H + f) * N;
        for (int h = 0; h < H; h++)
            fuse_into(o, out + (size_t)h * N, (size_t)N, h == 0, (VitFusion)f);
        if (f == VIT_FUSE_MEAN)
            for (int p = 0; p < N; p++) o[p] /= (float)H;
    }
}

VitStatus vit_map_entropy(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                          VitError *err) {
    VitStatus rc = check_args(run, layer, head, 0, err);
    if (rc) return rc;
    if (head < 0 && (fusion < VIT_FUSE_MEAN || fusion > VIT_FUSE_MIN))
        return vit_set_error(err, VIT_ERR_ARG, "entropy: unknown head fusion %d", (int)fusion);
    const VitConfig *c = &run->cfg;
    size_t N = (size_t)c->n_patches, H = (size_t)c->n_heads;
    float *all = head < 0 ? malloc((H + 3) * N * sizeof(float)) : NULL;
    AttReader rd;
    if (head < 0 && !all)
        return vit_set_error(err, VIT_ERR_NOMEM, "entropy: out of memory for [%zu, %zu]", H + 3, N);
    if ((rc = vit_att_reader_init(&rd, run, err))) {
        free(all);
        return rc;
    }
    layer_entropy(head < 0 ? all : out, &rd, layer, head, 1);
    if (head < 0) memcpy(out, all + (H + (size_t)fusion) * N, N * sizeof(float));
    free(all);
    vit_att_reader_free(&rd);
    return vit_cancelled(run) ? vit_cancelled_error(err, "entropy") : VIT_OK;
}

VitStatus vit_map_entropy_layers(float *out, const VitRun *run, int layer0, int n_layers,
                                 VitError *err) {
    if (n_layers < 1 || layer0 < 0)
        return vit_set_error(err, VIT_ERR_ARG, "entropy: layers %d + %d, expected >= 0 and >= 1",
                             layer0, n_layers);
    VitStatus rc = check_args(run, layer0 + n_layers - 1, 0, 0, err);
    if (rc) return rc;
    const VitConfig *c = &run->cfg;
    size_t per = ((size_t)c->n_heads + 3) * (size_t)c->n_patches;
    AttReader rd;
    if ((rc = vit_att_reader_init(&rd, run, err))) return rc;
    for (int i = 0; i < n_layers && !vit_cancelled(run); i++) {
        vit_report(run, i, n_layers);
        layer_entropy(out + (size_t)i * per, &rd, layer0 + i, -1, 1);
    }
    vit_att_reader_free(&rd);
    if (vit_cancelled(run)) return vit_cancelled_error(err, "entropy");
    vit_report(run, n_layers, n_layers);
    return VIT_OK;
}

/* --- explorer maps: attention mass mask, mean attention distance ------------ */

typedef struct {
    float v;
    int i;
} Ranked;

/* Descending by value; ties: lower patch index first. */
static int cmp_ranked_desc(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

VitStatus vit_mass_mask(uint8_t *mask, int *n_kept, const float *map, int n, float fraction,
                        VitError *err) {
    if (n_kept) *n_kept = 0;
    if (n < 1) return vit_set_error(err, VIT_ERR_ARG, "mask: %d patches, expected at least 1", n);
    if (!(fraction > 0.0f && fraction <= 1.0f))
        return vit_set_error(err, VIT_ERR_ARG, "mask: fraction %g outside (0, 1]",
                             (double)fraction);
    double total = 0.0;
    for (int p = 0; p < n; p++) {
        if (!(map[p] >= 0.0f) || isinf(map[p]))
            return vit_set_error(err, VIT_ERR_ARG, "mask: value %g at patch %d, expected >= 0",
                                 (double)map[p], p);
        total += map[p];
    }
    Ranked *r = malloc((size_t)n * sizeof *r);
    if (!r) return vit_set_error(err, VIT_ERR_NOMEM, "mask: out of memory for %d patches", n);
    for (int p = 0; p < n; p++) r[p] = (Ranked){map[p], p};
    qsort(r, (size_t)n, sizeof *r, cmp_ranked_desc);
    memset(mask, 0, (size_t)n);
    /* DINO keeps a patch while the mass of the larger patches before it is below
     * the fraction: the smallest set whose mass reaches fraction * total. */
    double goal = (double)fraction * total, sum = 0.0;
    int k = 0;
    if (fraction == 1.0f) /* all the mass: every patch that has some (no rounding at the end) */
        while (k < n && r[k].v > 0.0f) mask[r[k++].i] = 1;
    while (fraction < 1.0f && total > 0.0 && k < n && sum < goal) {
        sum += r[k].v;
        mask[r[k].i] = 1;
        k++;
    }
    free(r);
    if (n_kept) *n_kept = k;
    return VIT_OK;
}

VitStatus vit_attention_distance(float *out, const VitRun *run, VitError *err) {
    if (!run->att && !run->qk)
        return vit_set_error(err, VIT_ERR_ARG, "distance: no forward pass has been run");
    const VitConfig *c = &run->cfg;
    int L = c->n_layers, H = c->n_heads, T = c->n_tokens, Np = c->n_prefix;
    int gw = c->grid_w, N = c->n_patches, nb = vit_att_blocks(T);
    AttReader rd;
    VitStatus rc = vit_att_reader_init(&rd, run, err);
    if (rc) return rc;
    /* d(i, j) depends only on |row_i - row_j| and |col_i - col_j|: a [gh, gw]
     * table instead of an [N, N] one (a 256 x 256 grid would need 32 GB). */
    double *dist = malloc((size_t)N * sizeof *dist);
    if (!dist) {
        vit_att_reader_free(&rd);
        return vit_set_error(err, VIT_ERR_NOMEM, "distance: out of memory");
    }
    for (int dr = 0; dr < c->grid_h; dr++)
        for (int dc = 0; dc < gw; dc++)
            dist[dr * gw + dc] = (double)c->patch_size * sqrt((double)(dr * dr + dc * dc));
    for (int l = 0; l < L && !vit_cancelled(run); l++) {
        vit_report(run, l, L);
        for (int h = 0; h < H; h++) {
            double acc = 0.0;
            int n_queries = 0;
            /* the patch queries' rows, a block of query rows at a time (att_block) */
            for (int b = 0; b < nb; b++) {
                int r0 = vit_att_block_start(T, b), r1 = vit_att_block_start(T, b + 1);
                if (r1 <= Np) continue;
                const float *blk = vit_att_reader_block(&rd, l, h, b);
                for (int r = r0 > Np ? r0 : Np; r < r1; r++) {
                    const float *row = blk + (size_t)(r - r0) * T + Np;
                    int i = r - Np, ri = i / gw, ci = i % gw;
                    double w = 0.0, wd = 0.0;
                    /* j = jr * gw + jc in order (the sums' order): no division per key */
                    for (int jr = 0, j = 0; jr < c->grid_h; jr++) {
                        const double *drow = dist + abs(jr - ri) * gw;
                        for (int jc = 0; jc < gw; jc++, j++) {
                            w += row[j];
                            wd += row[j] * drow[abs(jc - ci)];
                        }
                    }
                    if (w > 0.0) acc += wd / w, n_queries++;
                }
            }
            out[l * H + h] = n_queries ? (float)(acc / n_queries) : 0.0f;
        }
    }
    free(dist);
    vit_att_reader_free(&rd);
    if (vit_cancelled(run)) return vit_cancelled_error(err, "distance");
    vit_report(run, L, L);
    return VIT_OK;
}
