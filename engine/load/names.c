/* names.c - the tensors vit_load reads (engine/load/), one slot per tensor (Slot,
 * loader.h), by the names the layout gives them (layout.c: timm's, Hugging Face's, ...:
 * assets/layouts/); and the F32 data of one tensor, its dtype and shape checked, F16/BF16
 * or unaligned F32 converted into the Vit's own storage, every value checked finite.
 *
 * The shapes each role's tensor must have (the roles are timm's names):
 *   cls_token [1,1,D]  dist_token [1,1,D]?  reg_token [1,R,D]?
 *   pos_embed [1,Npos+N,D]  patch_embed.proj.{weight [D,3,P,P], bias [D]}
 *   blocks.N.{norm1,norm2}.{weight,bias} [D]  blocks.N.attn.qkv.{weight [3D,D], bias [3D]}
 *     or blocks.N.attn.{q,k,v}.{weight [D,D], bias [D]} (transformers' separate ones)
 *   blocks.N.attn.proj.{weight [D,D], bias [D]}  blocks.N.ls{1,2}.gamma [D]?
 *   blocks.N.mlp.fc1.{weight [F,D], bias [F]}  blocks.N.mlp.fc2.{weight [D,F], bias [D]}
 *   norm.{weight,bias} [D]  head.{weight [C,D], bias [C]}  head_dist.{weight, bias}?
 *   norm_pre.{weight,bias} [D]? (CLIP's ln_pre: timm's pre_norm models)
 *   image_proj.weight [E,D]? logit_scale []? (CLIP, from a layout: not timm's own names)
 * Each library's names for them: assets/layouts/timm.json (vision_transformer.py,
 * deit.py), hf.json (transformers' modeling_vit.py, modeling_deit.py), torchvision.json,
 * clip-hf.json, clip-openai.json, notebook-*.json. */
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
        if (!ld->layout_name[0]) /* engine/text/text.c: no layout */
            vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (not a %s?)",
                          ld->fname, name, ld->what ? ld->what : "ViT");
        else
            vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (layout '%s', %s)",
                          ld->fname, name, ld->layout_name, ld->layout_file);
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

    /* converted once: a layout may name one tensor for several roles (tied weights), and
       arch.c's probes read a few before bind_weights does */
    size_t at = (size_t)(t - ld->st.tensors);
    if (ld->converted && ld->converted[at]) return ld->converted[at];
    Vit *vit = ld->vit;
    if (!ld->converted || ld->owned_used > vit->owned_floats ||
        t->n_elems > vit->owned_floats - ld->owned_used) {
        vit_set_error(ld->err, VIT_ERR_FORMAT,
                      "%s: tensor '%s': no room for its %zu converted floats (%zu of %zu taken): "
                      "a bug in vitlens, please report it",
                      ld->fname, name, t->n_elems, ld->owned_used, vit->owned_floats);
        return NULL;
    }
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
    if (!finite_or_null(ld, t, dst)) return NULL;
    return ld->converted[at] = dst;
}

/* --- tensors by slot: the names the layout gives (layout.c) --------------------------- */

/* Name of slot s (block l) in the layout's names, into ld->name; NULL when the layout
 * names no such tensor. */
const char *ld_slot_name(Loader *ld, Slot s, int l) {
    const char *pat = ld->pat[s];
    if (!pat[0]) return NULL;
    size_t k = 0;
    for (; *pat && k + 1 < sizeof ld->name; pat++) {
        if (strncmp(pat, "{l}", 3) != 0) {
            ld->name[k++] = *pat;
            continue;
        }
        int w = snprintf(ld->name + k, sizeof ld->name - k, "%d", l);
        if (w < 0 || (size_t)w >= sizeof ld->name - k) break;
        k += (size_t)w, pat += 2;
    }
    ld->name[k] = 0; /* a pattern is at most LD_NAME_BYTES - 8 (layout.c): never cut */
    return ld->name;
}

int ld_has_slot(Loader *ld, Slot s, int l) {
    const char *n = ld_slot_name(ld, s, l);
    return n && st_find(&ld->st, n);
}

VitStatus ld_unnamed(Loader *ld, Slot s) {
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: layout '%s' (%s) names no tensor for the role %s, which this model "
                         "needs (docs/your-own-vit.md)",
                         ld->fname, ld->layout_name, ld->layout_file, ld_role(s));
}

/* ld_tensor() of slot s: F32 data of the given shape, NULL (err set) on error. */
const float *ld_slot_tensor(Loader *ld, Slot s, int l, int ndim, int64_t *shape) {
    const char *name = ld_slot_name(ld, s, l);
    if (!name) {
        ld_unnamed(ld, s);
        return NULL;
    }
    if (!st_find(&ld->st, name)) {
        ld_missing(ld, s, name);
        return NULL;
    }
    return ld_tensor(ld, name, ndim, shape);
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
