/* names.c - the tensors vit_load reads (engine/load/): their names in timm's and Hugging
 * Face transformers' layouts, one slot per tensor (Slot, loader.h), the naming picked from
 * the CLS token's name; and the F32 data of one tensor, its dtype and shape checked,
 * F16/BF16 or unaligned F32 converted into the Vit's own storage, every value checked
 * finite.
 *
 * timm names (timm/models/vision_transformer.py, deit.py):
 *   cls_token [1,1,D]  dist_token [1,1,D]?  reg_token [1,R,D]?
 *   pos_embed [1,Npos+N,D]  patch_embed.proj.{weight [D,3,P,P], bias [D]}
 *   blocks.N.{norm1,norm2}.{weight,bias} [D]  blocks.N.attn.qkv.{weight [3D,D], bias [3D]}
 *   blocks.N.attn.proj.{weight [D,D], bias [D]}  blocks.N.ls{1,2}.gamma [D]?
 *   blocks.N.mlp.fc1.{weight [F,D], bias [F]}  blocks.N.mlp.fc2.{weight [D,F], bias [D]}
 *   norm.{weight,bias} [D]  head.{weight [C,D], bias [C]}  head_dist.{weight, bias}?
 *   norm_pre.{weight,bias} [D]? (CLIP's ln_pre: timm's pre_norm models)
 *   image_proj.weight [E,D]? logit_scale []? (CLIP, from a layout: not timm's own names)
 * transformers names (models/vit/modeling_vit.py, models/deit/modeling_deit.py):
 *   see names_hf below: embeddings.*, encoder.layer.N.{layernorm_before,
 *   attention.attention.{query,key,value}, attention.output.dense, layernorm_after,
 *   intermediate.dense, output.dense}, layernorm, classifier (or cls_classifier and
 *   distillation_classifier), under "vit." / "deit." or no prefix. */
#include "loader.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* --- one tensor's data ------------------------------------------------------- */

float ld_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0)
            bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Bytes of F32 storage needed for a tensor that cannot be used in place. */
size_t ld_needs_copy(const Loader *ld, const StTensor *t) {
    (void)ld;
    if (t->dtype == ST_OTHER) return 0;
    if (t->dtype != ST_F32) return t->n_elems;
    return ((uintptr_t)t->data % sizeof(float)) ? t->n_elems : 0;
}

/* Index of the first NaN or infinity in w[0..n), or n. Tested on the bits, in
 * blocks whose inner loop vectorises: a load reads every weight once. */
static size_t first_nonfinite(const float *w, size_t n) {
    enum { BLOCK = 4096 };
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t end = n - at < BLOCK ? n : at + BLOCK;
        uint32_t bad = 0;
        for (size_t i = at; i < end; i++) {
            uint32_t b;
            memcpy(&b, &w[i], sizeof b);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
        if (!bad) continue;
        for (size_t i = at; i < end; i++)
            if (!isfinite(w[i])) return i;
    }
    return n;
}

/* Weights that are NaN or infinite make every activation after them, and so
 * every map, NaN: refuse the file, naming the tensor and the first bad element. */
static const float *finite_or_null(Loader *ld, const StTensor *t, const float *w) {
    size_t i = first_nonfinite(w, t->n_elems);
    if (i == t->n_elems) return w;
    vit_set_error(ld->err, VIT_ERR_FORMAT,
                  "%s: tensor '%s': element %zu of %zu is %s (a NaN or infinite weight makes "
                  "every map meaningless)",
                  ld->fname, t->name, i, t->n_elems,
                  isnan(w[i]) ? "NaN" : (w[i] > 0 ? "+inf" : "-inf"));
    return NULL;
}

/* Find `name`, check its dtype and shape against `shape` (ndim dims; -1 matches
 * any size and is filled in), check that every value is finite, return F32
 * data. NULL (with err set) on error. */
const float *ld_tensor(Loader *ld, const char *name, int ndim, int64_t *shape) {
    char got[160], want[160];
    const StTensor *t = st_find(&ld->st, name);
    if (!t) {
        vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (not a %s?)", ld->fname,
                      name, ld->what);
        return NULL;
    }
    if (t->dtype == ST_OTHER) {
        vit_set_error(ld->err, VIT_ERR_FORMAT,
                      "%s: tensor '%s': dtype %s, expected F32, F16 or BF16", ld->fname, name,
                      t->dtype_name);
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (shape[i] >= 0 && shape[i] != t->shape[i]) ok = 0;
    if (!ok) {
        for (int i = 0; i < ndim; i++)
            if (shape[i] < 0) shape[i] = -1;
        vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s': shape %s, expected %s", ld->fname,
                      name, st_shape_str(got, sizeof got, t->shape, t->ndim),
                      st_shape_str(want, sizeof want, shape, ndim));
        return NULL;
    }
    for (int i = 0; i < ndim; i++) shape[i] = t->shape[i];
    const uint8_t *src = t->data;
    if (!ld_needs_copy(ld, t)) return finite_or_null(ld, t, (const float *)(const void *)src);

    Vit *vit = ld->vit;
    float *dst = vit->owned + ld->owned_used;
    ld->owned_used += t->n_elems;
    for (size_t i = 0; i < t->n_elems; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
            if (t->dtype == ST_F16) {
                dst[i] = ld_half_to_float(h);
            } else {
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&dst[i], &bits, 4);
            }
        }
    }
    return finite_or_null(ld, t, dst);
}

/* --- tensor names: timm and Hugging Face transformers ----------------------- */

/* clang-format off */
/* printf formats taking (prefix, block index); NULL: the naming has no such tensor.
 * timm: vision_transformer.py / deit.py state dicts. transformers: modeling_vit.py,
 * modeling_deit.py, where the prefix is "vit." (ViTForImageClassification),
 * "deit." (DeiTForImageClassification[WithTeacher]) or "" (ViTModel, as
 * facebook/dino-vits16); heads have no prefix. With a teacher the heads are
 * cls_classifier and distillation_classifier (names_hf_teacher). */
#define TB "%sblocks.%d."
static const char *const names_timm[N_SLOTS] = {
    [S_CLS] = "%scls_token",                [S_DIST] = "%sdist_token",
    [S_REG] = "%sreg_token",                [S_POS] = "%spos_embed",
    [S_PATCH_W] = "%spatch_embed.proj.weight", [S_PATCH_B] = "%spatch_embed.proj.bias",
    [S_NORM1_W] = TB "norm1.weight",        [S_NORM1_B] = TB "norm1.bias",
    [S_QKV_W] = TB "attn.qkv.weight",       [S_QKV_B] = TB "attn.qkv.bias",
    [S_PROJ_W] = TB "attn.proj.weight",     [S_PROJ_B] = TB "attn.proj.bias",
    [S_LS1] = TB "ls1.gamma",               [S_LS2] = TB "ls2.gamma",
    [S_NORM2_W] = TB "norm2.weight",        [S_NORM2_B] = TB "norm2.bias",
    [S_FC1_W] = TB "mlp.fc1.weight",        [S_FC1_B] = TB "mlp.fc1.bias",
    [S_FC2_W] = TB "mlp.fc2.weight",        [S_FC2_B] = TB "mlp.fc2.bias",
    [S_NORM_W] = "%snorm.weight",           [S_NORM_B] = "%snorm.bias",
    [S_HEAD_W] = "%shead.weight",           [S_HEAD_B] = "%shead.bias",
    [S_HDIST_W] = "%shead_dist.weight",     [S_HDIST_B] = "%shead_dist.bias",
    [S_NORM_PRE_W] = "%snorm_pre.weight",   [S_NORM_PRE_B] = "%snorm_pre.bias",
    [S_IMG_PROJ_W] = "%simage_proj.weight", [S_LOGIT_SCALE] = "%slogit_scale",
};
#define HB "%sencoder.layer.%d."
#define HA HB "attention.attention."
static const char *const names_hf[N_SLOTS] = {
    [S_CLS] = "%sembeddings.cls_token",     [S_DIST] = "%sembeddings.distillation_token",
    [S_POS] = "%sembeddings.position_embeddings",
    [S_PATCH_W] = "%sembeddings.patch_embeddings.projection.weight",
    [S_PATCH_B] = "%sembeddings.patch_embeddings.projection.bias",
    [S_NORM1_W] = HB "layernorm_before.weight", [S_NORM1_B] = HB "layernorm_before.bias",
    [S_Q_W] = HA "query.weight",            [S_Q_B] = HA "query.bias",
    [S_K_W] = HA "key.weight",              [S_K_B] = HA "key.bias",
    [S_V_W] = HA "value.weight",            [S_V_B] = HA "value.bias",
    [S_PROJ_W] = HB "attention.output.dense.weight",
    [S_PROJ_B] = HB "attention.output.dense.bias",
    [S_NORM2_W] = HB "layernorm_after.weight", [S_NORM2_B] = HB "layernorm_after.bias",
    [S_FC1_W] = HB "intermediate.dense.weight", [S_FC1_B] = HB "intermediate.dense.bias",
    [S_FC2_W] = HB "output.dense.weight",   [S_FC2_B] = HB "output.dense.bias",
    [S_NORM_W] = "%slayernorm.weight",      [S_NORM_B] = "%slayernorm.bias",
    [S_HEAD_W] = "%.0sclassifier.weight",   [S_HEAD_B] = "%.0sclassifier.bias",
};
static const char *const names_hf_teacher[N_SLOTS] = {
    [S_HEAD_W] = "%.0scls_classifier.weight",
    [S_HEAD_B] = "%.0scls_classifier.bias",
    [S_HDIST_W] = "%.0sdistillation_classifier.weight",
    [S_HDIST_B] = "%.0sdistillation_classifier.bias",
};
#undef TB
#undef HB
#undef HA
/* clang-format on */

/* Name of slot s (block l) in the loader's naming, into ld->name; NULL when
 * the naming has no such tensor. */
const char *ld_slot_name(Loader *ld, Slot s, int l) {
    const char *fmt = ld->teacher && names_hf_teacher[s] ? names_hf_teacher[s] : ld->names[s];
    if (!fmt) return NULL;
    snprintf(ld->name, sizeof ld->name, fmt, ld->prefix, l);
    return ld->name;
}

int ld_has_slot(Loader *ld, Slot s, int l) {
    const char *n = ld_slot_name(ld, s, l);
    return n && st_find(&ld->st, n);
}

/* ld_tensor() of slot s: F32 data of the given shape, NULL (err set) on error. */
const float *ld_slot_tensor(Loader *ld, Slot s, int l, int ndim, int64_t *shape) {
    return ld_tensor(ld, ld_slot_name(ld, s, l), ndim, shape);
}
const float *ld_slot1(Loader *ld, Slot s, int l, int64_t n0) {
    int64_t sh[1] = {n0};
    return ld_slot_tensor(ld, s, l, 1, sh);
}
const float *ld_slot2(Loader *ld, Slot s, int l, int64_t n0, int64_t n1) {
    int64_t sh[2] = {n0, n1};
    return ld_slot_tensor(ld, s, l, 2, sh);
}
/* An optional tensor: NULL without error when absent; *bad set on a real error. */
const float *ld_slot1_opt(Loader *ld, Slot s, int l, int64_t n0, int *bad) {
    if (!ld_has_slot(ld, s, l)) return NULL;
    const float *p = ld_slot1(ld, s, l, n0);
    if (!p) *bad = 1;
    return p;
}

/* Pick the naming from the CLS token's name. 0, or VitStatus with err set. */
VitStatus ld_detect_naming(Loader *ld) {
    static const char *const hf_prefixes[] = {"vit.", "deit.", ""};
    char n[96];
    if (st_find(&ld->st, "cls_token")) {
        ld->naming = VIT_NAMES_TIMM, ld->names = names_timm, ld->prefix = "";
        ld->what = "timm ViT";
        return VIT_OK;
    }
    for (size_t i = 0; i < sizeof hf_prefixes / sizeof hf_prefixes[0]; i++) {
        snprintf(n, sizeof n, "%sembeddings.cls_token", hf_prefixes[i]);
        if (!st_find(&ld->st, n)) continue;
        snprintf(n, sizeof n, "%sencoder.layer.0.norm1.weight", hf_prefixes[i]);
        if (st_find(&ld->st, n))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' is Hugging Face's Dinov2Model naming, which "
                                 "vitlens does not support: use timm's vit_*_dinov2 checkpoint",
                                 ld->fname, n);
        ld->naming = VIT_NAMES_HF, ld->names = names_hf, ld->prefix = hf_prefixes[i];
        ld->what = "Hugging Face ViT";
        ld->teacher = st_find(&ld->st, "cls_classifier.weight") != NULL;
        return VIT_OK;
    }
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: tensor 'cls_token' is missing (not a timm ViT, nor a Hugging Face "
                         "one with 'embeddings.cls_token')",
                         ld->fname);
}
