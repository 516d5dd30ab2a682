/* layout_build.c - a checkpoint's tensors converted into timm's names (layout.h; why and
 * which conversions: layout.c's top comment): CLS token and position embedding to
 * [1, 1, D], [1, T, D], a linear patch embedding to a convolution's, per-head or separate
 * query/key/value to one fused qkv, an image projection transposed, every tensor to F32;
 * the tensors already as the engine reads them are copied as they are. */
#include "layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT_MAX_HEADS 1024

/* --- building the timm table ----------------------------------------------------------- */

typedef struct {
    StFile out;
    int out_cap; /* entries of out.tensors */
    const StFile *src;
    float **conv; /* [src->n]: a source tensor's F32 copy once copy_as made one */
    float *buf;
    size_t used, cap;           /* floats */
    const char *fname, *layout; /* the layout's file, for messages */
    VitError *err;
} Build;

static float *reserve(Build *b, size_t n) {
    size_t at = (b->used + 15) & ~(size_t)15, end; /* 64-byte aligned */
    if (!vit_size_add(&end, at, n) || end > b->cap) return NULL;
    b->used = end;
    return b->buf + at;
}

/* dst[n] = elements first .. first + n - 1 of t, as F32. */
static void to_f32_part(float *dst, const StTensor *t, size_t first, size_t n) {
    const uint8_t *src = t->data + first * t->elem_bytes;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else if (t->dtype == ST_BF16) {
            uint32_t bits = (uint32_t)(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            memcpy(&dst[i], &bits, 4);
        } else {
            dst[i] = ld_half_to_float((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
        }
    }
}

static void to_f32(float *dst, const StTensor *t) {
    to_f32_part(dst, t, 0, t->n_elems);
}

/* A new tensor `name` [ndim: shape] in the output table: its F32 data to fill, in the
 * build's buffer; or, `in_place` given, those F32 bytes as they are. */
static float *add_tensor(Build *b, const char *name, int ndim, const int64_t *shape,
                         const uint8_t *in_place) {
    size_t n, n_bytes;
    int sized = vit_shape_elems(&n, shape, ndim) && vit_size_mul(&n_bytes, n, 4);
    float *d = !sized ? NULL : in_place ? (float *)(uintptr_t)in_place : reserve(b, n);
    if (sized && !d) {
        /* the conversions never need more floats than the checkpoint holds, but for a
         * layout that sends several roles to one tensor (or one block's to every block) */
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: converting '%s' needs more floats than the checkpoint holds: does "
                      "layout %s send several roles to one tensor?",
                      b->fname, name, b->layout);
        return NULL;
    }
    if (b->out.n == b->out_cap) { /* one entry per role and block: may exceed the file's */
        int nc = b->out_cap * 2;
        StTensor *nt =
            b->out_cap >= VIT_MAX_TENSORS ? NULL : realloc(b->out.tensors, (size_t)nc * sizeof *nt);
        if (!nt) {
            vit_set_error(b->err, VIT_ERR_NOMEM, "%s: out of memory converting '%s'", b->fname,
                          name);
            return NULL;
        }
        memset(nt + b->out_cap, 0, (size_t)(nc - b->out_cap) * sizeof *nt);
        b->out.tensors = nt, b->out_cap = nc;
    }
    StTensor *t = &b->out.tensors[b->out.n];
    if (!d || !(t->name = strdup(name))) {
        vit_set_error(b->err, VIT_ERR_NOMEM, "%s: out of memory converting '%s'", b->fname, name);
        return NULL;
    }
    b->out.n++;
    t->dtype = ST_F32, t->elem_bytes = 4;
    snprintf(t->dtype_name, sizeof t->dtype_name, "F32");
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->n_elems = n;
    t->data = (const uint8_t *)d;
    t->begin = in_place ? 0 : (size_t)((const uint8_t *)d - (const uint8_t *)b->buf);
    t->end = t->begin + n_bytes;
    return d;
}

/* A tensor a role can take: F32, F16 or BF16, and not empty. Every role's weight has rows
 * (a scalar [] has one element): a dimension of 0 makes a tensor of no bytes whatever
 * its other dimensions say, [2^53, 0] or [0, 3 * 2^50], whose sizes must not reach a
 * loop or an allocation. */
static int usable(Build *b, const StTensor *t) {
    char sh[160];
    if (t->dtype == ST_OTHER) {
        vit_set_error(b->err, VIT_ERR_FORMAT,
                      "%s: tensor '%s': dtype %s, expected F32, F16 or BF16", b->fname, t->name,
                      t->dtype_name);
        return 0;
    }
    if (t->n_elems == 0) {
        vit_set_error(b->err, VIT_ERR_SHAPE, "%s: tensor '%s': shape %s: an empty weight", b->fname,
                      t->name, st_shape_str(sh, sizeof sh, t->shape, t->ndim));
        return 0;
    }
    return 1;
}

/* Copy tensor t as `name`, with its shape, or reshaped to [1, ..., rest] (`lead` leading
 * ones added until ndim dims). */
static int copy_as(Build *b, const char *name, const StTensor *t, int ndim) {
    if (!usable(b, t)) return 0;
    int64_t sh[ST_MAX_DIMS];
    int nd = t->ndim;
    if (ndim && nd > ndim) { /* drop leading 1s */
        int k = 0;
        while (nd - k > ndim && t->shape[k] == 1) k++;
        if (nd - k != ndim) goto bad;
        memcpy(sh, t->shape + k, (size_t)(nd - k) * sizeof *sh);
        nd -= k;
    } else {
        memcpy(sh, t->shape, (size_t)nd * sizeof *sh);
    }
    if (ndim && nd < ndim) {
        memmove(sh + (ndim - nd), sh, (size_t)nd * sizeof *sh);
        for (int i = 0; i < ndim - nd; i++) sh[i] = 1;
        nd = ndim;
    }
    if (t->dtype == ST_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
        /* F32 in place: renamed and reshaped, not copied (the checkpoint's data stays) */
        float *d = add_tensor(b, name, nd, sh, t->data);
        return d != NULL;
    }
    /* converted once: every role that names it reads the same copy (a layout may send
     * several roles to one tensor, and the buffer holds each source tensor once) */
    float **conv = &b->conv[t - b->src->tensors];
    if (*conv) return add_tensor(b, name, nd, sh, (const uint8_t *)*conv) != NULL;
    float *d = add_tensor(b, name, nd, sh, NULL);
    if (!d) return 0;
    to_f32(d, t);
    *conv = d;
    return 1;
bad:
    vit_set_error(b->err, VIT_ERR_SHAPE, "%s: tensor '%s' has %d dims, expected %d for %s",
                  b->fname, t->name, t->ndim, ndim, name);
    return 0;
}

/* The attention's q, k, v of block l: fused / in_proj as is; separate or per-head lists
 * concatenated into timm's qkv [3A, D] (bias [3A] when all three have one), A = H * Dh
 * the attention's width (D / H-sized heads: A = D; a notebook's Linear(D, Dh) per head
 * with any Dh: A = H * Dh). */
static int build_qkv(Build *b, const StFile *st, const Layout *lay, int l, int *n_heads) {
    char nm[96];
    const char *fw = layout_pattern(lay, "blocks.{l}.attn.qkv.weight");
    if (fw) {
        const StTensor *w = layout_find_at(st, fw, l, 0), *bb;
        const char *fb = layout_pattern(lay, "blocks.{l}.attn.qkv.bias");
        if (!w) return -1;
        snprintf(nm, sizeof nm, "blocks.%d.attn.qkv.weight", l);
        if (!copy_as(b, nm, w, 2)) return 0;
        if (fb && (bb = layout_find_at(st, fb, l, 0))) {
            snprintf(nm, sizeof nm, "blocks.%d.attn.qkv.bias", l);
            if (!copy_as(b, nm, bb, 1)) return 0;
        }
        return 1;
    }
    static const char *const wr[3] = {"blocks.{l}.attn.q.weight", "blocks.{l}.attn.k.weight",
                                      "blocks.{l}.attn.v.weight"};
    static const char *const br[3] = {"blocks.{l}.attn.q.bias", "blocks.{l}.attn.k.bias",
                                      "blocks.{l}.attn.v.bias"};
    const StTensor *parts[2][3][LAYOUT_MAX_HEADS];
    int nh[2][3] = {{0}}, have_b = 0;
    int64_t rows[2][3] = {{0}}, in = -1;
    for (int wb = 0; wb < 2; wb++)
        for (int j = 0; j < 3; j++) {
            const char *pat = layout_pattern(lay, wb ? br[j] : wr[j]);
            if (!pat) {
                if (!wb) return -1;
                continue;
            }
            int per_head = strstr(pat, "{h}") != NULL;
            for (int h = 0; h < (per_head ? LAYOUT_MAX_HEADS : 1); h++) {
                const StTensor *t = layout_find_at(st, pat, l, h);
                if (!t) break;
                if (!usable(b, t)) return 0;
                if (t->ndim != (wb ? 1 : 2) || (!wb && in >= 0 && t->shape[1] != in)) {
                    vit_set_error(b->err, VIT_ERR_SHAPE,
                                  "%s: tensor '%s' is not a %s of the attention's input", b->fname,
                                  t->name, wb ? "bias [Dh]" : "Linear weight [Dh, D]");
                    return 0;
                }
                if (!wb) in = t->shape[1];
                parts[wb][j][nh[wb][j]++] = t;
                /* non-empty (usable), so at most the file's size: checked all the same */
                size_t sum;
                if (!vit_size_add(&sum, (size_t)rows[wb][j], (size_t)t->shape[0]) ||
                    sum > INT64_MAX / 3) {
                    vit_set_error(b->err, VIT_ERR_SHAPE,
                                  "%s: block %d: the heads' %s rows add up to more than a shape "
                                  "holds (at '%s')",
                                  b->fname, l, wb ? "bias" : "weight", t->name);
                    return 0;
                }
                rows[wb][j] = (int64_t)sum;
            }
            if (!nh[wb][j] && !wb) return -1;
            have_b += wb && nh[wb][j];
        }
    if (nh[0][0] != nh[0][1] || nh[0][0] != nh[0][2] || (have_b && have_b != 3) ||
        (have_b && (nh[1][0] != nh[0][0] || nh[1][1] != nh[0][0] || nh[1][2] != nh[0][0]))) {
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: block %d: query, key and value come in %d, %d and %d parts (%d of "
                      "them with biases): expected the same for each",
                      b->fname, l, nh[0][0], nh[0][1], nh[0][2], have_b);
        return 0;
    }
    /* the attention's width A = H * Dh: the same for query, key and value, every head
     * Dh rows (a notebook's per-head Linear(D, Dh) with any Dh, seed 004's Dh = D) */
    int64_t A = rows[0][0], Dh = A / nh[0][0];
    int uneven = rows[0][1] != A || rows[0][2] != A;
    for (int wb = 0; wb < 1 + (have_b == 3) && !uneven; wb++)
        for (int j = 0; j < 3; j++)
            for (int h = 0; h < nh[wb][j]; h++) uneven |= parts[wb][j][h]->shape[0] != Dh;
    if (uneven || A % nh[0][0]) {
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: block %d: the %d heads' queries, keys and values (and their biases) "
                      "are not all the same size: %lld, %lld and %lld rows in all",
                      b->fname, l, nh[0][0], (long long)rows[0][0], (long long)rows[0][1],
                      (long long)rows[0][2]);
        return 0;
    }
    if (nh[0][0] > 1) *n_heads = nh[0][0];
    for (int wb = 0; wb < 1 + (have_b == 3); wb++) {
        snprintf(nm, sizeof nm, wb ? "blocks.%d.attn.qkv.bias" : "blocks.%d.attn.qkv.weight", l);
        int64_t sh[2] = {3 * A, in}; /* A <= INT64_MAX / 3: the sums above */
        float *d = add_tensor(b, nm, wb ? 1 : 2, sh, NULL);
        if (!d) return 0;
        for (int j = 0; j < 3; j++)
            for (int h = 0; h < nh[wb][j]; h++) {
                to_f32(d, parts[wb][j][h]);
                d += parts[wb][j][h]->n_elems;
            }
    }
    return 1;
}

/* The patch embedding: a convolution's [D, 3, P, P] as is; a linear layer's [D, 3*P*P]
 * permuted from the layout's flatten order into the convolution's. */
static int build_patch(Build *b, const StTensor *t, const char *kind, const char *flatten,
                       const char *file) {
    if (!usable(b, t)) return 0;
    if (strcmp(kind, "linear") != 0) return copy_as(b, "patch_embed.proj.weight", t, 4);
    /* D, K >= 1 (usable); P bounded before its square is taken */
    int64_t D = t->shape[0], K = t->ndim == 2 ? t->shape[1] : 0,
            P = (int64_t)llround(sqrt((double)K / 3.0));
    size_t PP3 = 0;
    if (t->ndim != 2 || P < 1 || P > VIT_MAX_PATCH ||
        !vit_size_mul(&PP3, 3 * (size_t)P, (size_t)P) || PP3 != (size_t)K) {
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: tensor '%s' (the linear patch embedding) is not [D, 3*P*P]", b->fname,
                      t->name);
        return 0;
    }
    int cpp = !strcmp(flatten, "c p1 p2"), ppc = !strcmp(flatten, "p1 p2 c");
    if (!cpp && !ppc) {
        vit_set_error(b->err, VIT_ERR_FORMAT,
                      "%s: \"flatten\": '%s', expected \"c p1 p2\" (torch's unfold, a "
                      "convolution's order) or \"p1 p2 c\" (einops' rearrange)",
                      file, flatten);
        return 0;
    }
    int64_t sh[4] = {D, 3, P, P};
    float *d = add_tensor(b, "patch_embed.proj.weight", 4, sh, NULL), *tmp = malloc(PP3 * 4);
    if (!d || !tmp) {
        free(tmp);
        if (d) vit_set_error(b->err, VIT_ERR_NOMEM, "%s: out of memory", b->fname);
        return 0;
    }
    to_f32(d, t);
    if (ppc)
        for (int64_t o = 0; o < D; o++) {
            float *row = d + o * K;
            for (int64_t c = 0; c < 3; c++)
                for (int64_t i = 0; i < P * P; i++) tmp[c * P * P + i] = row[i * 3 + c];
            memcpy(row, tmp, PP3 * 4);
        }
    free(tmp);
    return 1;
}

/* The image projection: a Linear weight [E, D] as is, or OpenAI's visual.proj [D, E]
 * (x @ proj) transposed into one. */
static int build_proj(Build *b, const StTensor *t, const char *how, const char *file) {
    if (!usable(b, t)) return 0;
    int linear = !strcmp(how, "linear"), matmul = !strcmp(how, "x @ proj");
    if (!linear && !matmul) {
        vit_set_error(b->err, VIT_ERR_FORMAT,
                      "%s: \"image_proj\": '%s', expected \"linear\" (a weight [E, D]) or "
                      "\"x @ proj\" (a matrix [D, E])",
                      file, how);
        return 0;
    }
    if (t->ndim != 2) {
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: tensor '%s' (the image projection) has %d dims, expected 2", b->fname,
                      t->name, t->ndim);
        return 0;
    }
    if (linear) return copy_as(b, "image_proj.weight", t, 2);
    /* D, E >= 1 (usable): D * E = n_elems, a size the file holds */
    int64_t D = t->shape[0], E = t->shape[1], sh[2] = {E, D};
    size_t n_bytes;
    float *d = add_tensor(b, "image_proj.weight", 2, sh, NULL);
    float *tmp = vit_size_mul(&n_bytes, t->n_elems, 4) ? malloc(n_bytes) : NULL;
    if (!d || !tmp) {
        free(tmp);
        if (d) vit_set_error(b->err, VIT_ERR_NOMEM, "%s: out of memory", b->fname);
        return 0;
    }
    to_f32(tmp, t);
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < E; j++) d[j * D + i] = tmp[i * E + j];
    free(tmp);
    return 1;
}

/* "position_prefix": "cls" with register tokens (transformers' Dinov2WithRegistersEmbeddings:
 * embeddings = [cls ; patches] + pos, then [emb[:, :1] ; registers ; emb[:, 1:]]): the CLS
 * row of pos [1, 1 + N, D] folded into the CLS token, cls_token = cls + pos[:, 0], and
 * pos_embed = pos[:, 1:] [1, N, D], which the engine reads as timm's no_embed_class (no
 * position for any prefix token), as timm's _convert_dinov2 converts these checkpoints.
 * The same sum in float32 as transformers' forward pass. */
static int build_cls_fold(Build *b, const StTensor *cls, const StTensor *pos) {
    char sc[64], sp[64];
    if (!usable(b, cls) || !usable(b, pos)) return 0;
    /* both non-empty (usable): D >= 1 */
    int64_t D = pos->ndim >= 2 ? pos->shape[pos->ndim - 1] : 0;
    int64_t rows = D ? (int64_t)(pos->n_elems / (size_t)D) : 0;
    int lead1 = 1;
    for (int i = 0; i + 2 < pos->ndim; i++) lead1 &= pos->shape[i] == 1;
    if (!D || !lead1 || rows < 2 || cls->ndim < 1 || cls->shape[cls->ndim - 1] != D ||
        cls->n_elems != (size_t)D) {
        vit_set_error(b->err, VIT_ERR_SHAPE,
                      "%s: tensors '%s' %s and '%s' %s: expected a CLS token [1, 1, D] and a "
                      "position embedding [1, 1 + N, D] with a row for the CLS token",
                      b->fname, cls->name, st_shape_str(sc, sizeof sc, cls->shape, cls->ndim),
                      pos->name, st_shape_str(sp, sizeof sp, pos->shape, pos->ndim));
        return 0;
    }
    int64_t sh_cls[3] = {1, 1, D}, sh_pos[3] = {1, rows - 1, D};
    float *c = add_tensor(b, "cls_token", 3, sh_cls, NULL);
    if (!c) return 0;
    to_f32(c, cls);
    for (int64_t i = 0; i < D; i++) {
        float p0;
        to_f32_part(&p0, pos, (size_t)i, 1);
        c[i] += p0;
    }
    if (pos->dtype == ST_F32 && (uintptr_t)pos->data % sizeof(float) == 0) /* rows 1.. in place */
        return add_tensor(b, "pos_embed", 3, sh_pos, pos->data + (size_t)D * 4) != NULL;
    float *p = add_tensor(b, "pos_embed", 3, sh_pos, NULL);
    if (p) to_f32_part(p, pos, (size_t)D, pos->n_elems - (size_t)D);
    return p != NULL;
}

/* Block l lacks the tensor of a role (pattern pat); block 0's were checked before
 * (unmatched_role). */
static VitStatus missing_in_block(Build *b, const Layout *lay, const char *pat, int l) {
    char nm[256];
    layout_expand(nm, sizeof nm, pat ? pat : "?", l, 0);
    return vit_set_error(b->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (layout '%s', %s)",
                         b->fname, nm, lay->name, lay->file);
}

/* st's tensors as the layout names them, into b->out in timm's names. */
static VitStatus build(Build *b, const Layout *lay, const StFile *st, int *n_heads) {
    char nm[128];
    size_t total = 0, n_bytes = 0;
    int sized = 1;
    for (int i = 0; i < st->n && sized; i++) /* + 16: reserve's alignment */
        sized =
            vit_size_add(&total, total, st->tensors[i].n_elems) && vit_size_add(&total, total, 16);
    sized = sized && vit_size_mul(&n_bytes, total ? total : 1, sizeof(float));
    b->cap = total;
    b->buf = sized ? malloc(n_bytes) : NULL;
    b->out_cap = st->n + 1;
    b->out.tensors = calloc((size_t)b->out_cap, sizeof *b->out.tensors);
    b->layout = lay->file;
    b->src = st;
    b->conv = calloc((size_t)st->n + 1, sizeof *b->conv);
    if (!b->buf || !b->out.tensors || !b->conv)
        return vit_set_error(b->err, VIT_ERR_NOMEM, "%s: out of memory converting %zu weights",
                             b->fname, total);
    b->out.owned = b->buf;
    b->out.data = (const uint8_t *)b->buf;
    b->out.data_bytes = n_bytes;
    /* global roles; the CLS's position row folded into it (build_cls_fold) */
    int fold = layout_cls_fold(lay, st);
    for (int r = 0; r < N_ROLES; r++) {
        const char *role = layout_roles[r].role;
        if (strstr(role, "{l}")) continue;
        const char *pat = layout_pattern(lay, role);
        const StTensor *t = pat ? layout_find_at(st, pat, 0, 0) : NULL;
        if (!t) {
            if (!layout_role_needed(lay, st, r)) continue;
            return missing_in_block(b, lay, pat, 0);
        }
        if (fold && r == S_POS) continue; /* with the CLS token */
        int ok = fold && r == S_CLS
                     ? build_cls_fold(b, t, layout_find_at(st, lay->pat[S_POS], 0, 0))
                 : !strcmp(role, "cls_token") ? copy_as(b, role, t, 3)
                 : !strcmp(role, "pos_embed") ? copy_as(b, role, t, 3)
                 : !strcmp(role, "patch_embed.proj.weight")
                     ? build_patch(b, t, layout_str(lay, "patch_embedding", "conv"),
                                   layout_str(lay, "flatten", "c p1 p2"), lay->file)
                 : !strcmp(role, "image_proj.weight")
                     ? build_proj(b, t, layout_str(lay, "image_proj", "linear"), lay->file)
                     : copy_as(b, role, t, 0);
        if (!ok) return b->err->code;
    }
    /* blocks 0, 1, ... while norm1 is there */
    const char *n1 = layout_pattern(lay, "blocks.{l}.norm1.weight");
    if (!n1 || !layout_find_at(st, n1, 0, 0)) return missing_in_block(b, lay, n1, 0);
    for (int l = 0; l < VIT_MAX_LAYERS && layout_find_at(st, n1, l, 0); l++) {
        for (int r = 0; r < N_ROLES; r++) {
            const char *role = layout_roles[r].role;
            if (!strstr(role, "{l}") || strstr(role, ".attn.q") || strstr(role, ".attn.k.") ||
                strstr(role, ".attn.v."))
                continue;
            const char *pat = layout_pattern(lay, role);
            const StTensor *t = pat ? layout_find_at(st, pat, l, 0) : NULL;
            if (!t) {
                if (!layout_roles[r].required) continue;
                return missing_in_block(b, lay, pat, l);
            }
            layout_expand(nm, sizeof nm, role, l, 0);
            if (!copy_as(b, nm, t, 0)) return b->err->code;
        }
        int q = build_qkv(b, st, lay, l, n_heads);
        if (q < 0) {
            const char *qp = layout_pattern(lay, "blocks.{l}.attn.qkv.weight");
            return missing_in_block(b, lay,
                                    qp ? qp : layout_pattern(lay, "blocks.{l}.attn.q.weight"), l);
        }
        if (!q) return b->err->code;
    }
    return VIT_OK;
}

VitStatus layout_build(StFile *out, const Layout *lay, const StFile *st, int *n_heads,
                       const char *fname, VitError *err) {
    Build b = {.fname = fname, .err = err};
    VitStatus rc = build(&b, lay, st, n_heads);
    free(b.conv);
    if (rc) {
        st_free(&b.out);
        return rc;
    }
    *out = b.out;
    return VIT_OK;
}
