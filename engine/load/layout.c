/* layout.c - layouts as data (engine/load/): a JSON file maps each role of a ViT (patch
 * embedding, CLS token, position embedding, each block's norms, attention, output
 * projection, MLP, the final norm, the head) to the tensor names of a checkpoint, and
 * gives the switches the name alone cannot (whose conventions, attention scale, LayerNorm
 * eps, activation after the head, how a linear patch embedding flattens a patch,
 * preprocessing). Every checkpoint's tensors are named by one: timm's (timm.json),
 * Hugging Face transformers' (hf.json: "vit." / "deit." / no prefix, "naming": "hf";
 * hf-dinov2.json, hf-dinov2-reg.json: Dinov2Model, Dinov2WithRegistersModel),
 * torchvision's and the notebooks' ship in assets/layouts/, are compiled in (layouts.c,
 * made by CMake) and tried in turn (timm's and Hugging Face's first); a user's own is given
 * with VitLoadOptions.layout_path (--layout FILE). The format: docs/your-own-vit.md.
 *
 * A layout's tensors are read in place (names.c, through the slots' patterns) when they
 * are as the engine reads them: timm's fused qkv or separate query/key/value, a CLS token
 * [1, 1, D], a convolution's patch embedding. Otherwise the checkpoint's tensors are
 * converted, once, into the roles' names, so that the forward pass stays one code path:
 *   - the CLS token [D] or [1, D], the position embedding [T, D]: to [1, 1, D], [1, T, D];
 *   - a linear patch embedding [D, 3*P*P] on flattened patches: permuted into the
 *     convolution's [D, 3, P, P] (flatten "c p1 p2": torch's unfold / a conv's own order,
 *     the identity; "p1 p2 c": einops' rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)'));
 *   - transformers' DINOv2 with registers ("position_prefix": "cls"): the CLS's position
 *     row folded into the CLS token, the other rows read as the patches' (build_cls_fold);
 *   - attention as per-head lists ("{h}": the notebooks' ModuleList of heads, concatenated
 *     head by head), separate query/key/value, or nn.MultiheadAttention's in_proj_weight
 *     [3D, D] (already timm's fused qkv rows): to timm's fused qkv [3A, D], A = H * Dh
 *     the attention's width (a notebook's per-head Linear(D, Dh) may have any Dh);
 *   - every tensor to F32. */
#include "loader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shipped layouts (layouts.c, generated from assets/layouts/ *.json). */
extern const char *const vit_layouts[];
extern const char *const vit_layout_files[];
extern const int vit_n_layouts;

#define LAYOUT_MAX_HEADS    1024
#define LAYOUT_MAX_PREFIXES 8

/* The roles, one per slot (loader.h), in timm's names ({l}: the block). Required ones must
 * match. The attention's separate q/k/v are not timm names: converted, they become
 * blocks.{l}.attn.qkv; read in place, transformers' separate query, key, value. */
static const struct {
    const char *role;
    int required;
} roles[N_SLOTS] = {
    [S_CLS] = {"cls_token", 1},
    [S_DIST] = {"dist_token", 0}, /* DeiT's distillation token */
    [S_REG] = {"reg_token", 0},   /* register tokens */
    [S_POS] = {"pos_embed", 1},
    [S_PATCH_W] = {"patch_embed.proj.weight", 1},
    [S_PATCH_B] = {"patch_embed.proj.bias", 0},
    [S_NORM1_W] = {"blocks.{l}.norm1.weight", 1},
    [S_NORM1_B] = {"blocks.{l}.norm1.bias", 1},
    [S_QKV_W] = {"blocks.{l}.attn.qkv.weight", 0}, /* fused, or in_proj_weight */
    [S_QKV_B] = {"blocks.{l}.attn.qkv.bias", 0},
    [S_Q_W] = {"blocks.{l}.attn.q.weight", 0}, /* separate or per-head ({h}) */
    [S_K_W] = {"blocks.{l}.attn.k.weight", 0},
    [S_V_W] = {"blocks.{l}.attn.v.weight", 0},
    [S_Q_B] = {"blocks.{l}.attn.q.bias", 0},
    [S_K_B] = {"blocks.{l}.attn.k.bias", 0},
    [S_V_B] = {"blocks.{l}.attn.v.bias", 0},
    [S_PROJ_W] = {"blocks.{l}.attn.proj.weight", 1},
    [S_PROJ_B] = {"blocks.{l}.attn.proj.bias", 0},
    [S_LS1] = {"blocks.{l}.ls1.gamma", 0}, /* LayerScale */
    [S_NORM2_W] = {"blocks.{l}.norm2.weight", 1},
    [S_NORM2_B] = {"blocks.{l}.norm2.bias", 1},
    [S_FC1_W] = {"blocks.{l}.mlp.fc1.weight", 1},
    [S_FC1_B] = {"blocks.{l}.mlp.fc1.bias", 1},
    [S_FC2_W] = {"blocks.{l}.mlp.fc2.weight", 1},
    [S_FC2_B] = {"blocks.{l}.mlp.fc2.bias", 1},
    [S_LS2] = {"blocks.{l}.ls2.gamma", 0},
    [S_FC1G_W] = {"blocks.{l}.mlp.fc1_g.weight", 0}, /* a gated MLP's gate (fc1: its value) */
    [S_FC1G_B] = {"blocks.{l}.mlp.fc1_g.bias", 0},
    [S_MLP_NORM_W] = {"blocks.{l}.mlp.norm.weight", 0}, /* a LayerNorm over a gated MLP's */
    [S_MLP_NORM_B] = {"blocks.{l}.mlp.norm.bias", 0},   /* hidden before fc2 (EVA-02 B/L) */
    [S_NORM_W] = {"norm.weight", 1},
    [S_NORM_B] = {"norm.bias", 1},
    [S_HEAD_W] = {"head.weight", 0},
    [S_HEAD_B] = {"head.bias", 0},
    [S_HDIST_W] = {"head_dist.weight", 0}, /* DeiT's distillation head */
    [S_HDIST_B] = {"head_dist.bias", 0},
    [S_FC_NORM_W] = {"fc_norm.weight", 0},   /* timm's LayerNorm after an average pooling, where */
    [S_FC_NORM_B] = {"fc_norm.bias", 0},     /* the final norm is an Identity (no norm.*) */
    [S_NORM_PRE_W] = {"norm_pre.weight", 0}, /* CLIP's ln_pre: a LayerNorm before the blocks */
    [S_NORM_PRE_B] = {"norm_pre.bias", 0},
    [S_IMG_PROJ_W] = {"image_proj.weight", 0}, /* CLIP's image projection: [E, D], or [D, E]
                                                  with "image_proj": "x @ proj" (OpenAI's
                                                  visual.proj) */
    [S_LOGIT_SCALE] = {"logit_scale", 0},      /* CLIP's log logit scale, a scalar */
    /* SigLIP's attention-pooling head ("pooling": "map"; VitProbeHead) */
    [S_MAP_PROBE] = {"attn_pool.probe", 0},           /* [1, 1, D] */
    [S_MAP_IN_W] = {"attn_pool.in_proj.weight", 0},   /* [3D, D] packed q; k; v */
    [S_MAP_IN_B] = {"attn_pool.in_proj.bias", 0},     /* [3D] */
    [S_MAP_OUT_W] = {"attn_pool.out_proj.weight", 0}, /* [D, D] */
    [S_MAP_OUT_B] = {"attn_pool.out_proj.bias", 0},
    [S_MAP_LN_W] = {"attn_pool.norm.weight", 0},
    [S_MAP_LN_B] = {"attn_pool.norm.bias", 0},
    [S_MAP_FC1_W] = {"attn_pool.mlp.fc1.weight", 0},
    [S_MAP_FC1_B] = {"attn_pool.mlp.fc1.bias", 0},
    [S_MAP_FC2_W] = {"attn_pool.mlp.fc2.weight", 0},
    [S_MAP_FC2_B] = {"attn_pool.mlp.fc2.bias", 0},
};
#define N_ROLES N_SLOTS

const char *ld_role(Slot s) {
    return roles[s].role;
}

/* --- names ------------------------------------------------------------------- */

/* pattern with {l} and {h} replaced; 0 when it does not fit. */
static int expand(char *out, size_t n, const char *pat, int l, int h) {
    size_t k = 0;
    for (const char *s = pat; *s; s++) {
        int v = -1;
        if (!strncmp(s, "{l}", 3)) v = l;
        if (!strncmp(s, "{h}", 3)) v = h;
        if (v >= 0) {
            int w = snprintf(out + k, n - k, "%d", v);
            if (w < 0 || (size_t)w >= n - k) return 0;
            k += (size_t)w, s += 2;
        } else {
            if (k + 1 >= n) return 0;
            out[k++] = *s;
        }
    }
    out[k] = 0;
    return 1;
}

/* pattern with {p} replaced by prefix, into out [LD_NAME_BYTES] with room left for the
 * digits of {l} and {h}; 0 when it does not fit. */
static int with_prefix(char *out, const char *pat, const char *prefix) {
    size_t k = 0, np = strlen(prefix), room = LD_NAME_BYTES - 16;
    for (const char *s = pat; *s; s++) {
        if (!strncmp(s, "{p}", 3)) {
            if (k + np > room) return 0;
            memcpy(out + k, prefix, np);
            k += np, s += 2;
        } else {
            if (k + 1 > room) return 0;
            out[k++] = *s;
        }
    }
    out[k] = 0;
    return 1;
}

static const StTensor *find_at(const StFile *st, const char *pat, int l, int h) {
    char nm[256];
    return expand(nm, sizeof nm, pat, l, h) ? st_find(st, nm) : NULL;
}

/* --- the layout's switches ---------------------------------------------------------- */

typedef struct {
    const cJSON *root, *tensors;
    const char *name;
    const char *file;   /* for messages: the user's file, or "assets/layouts/x.json" */
    const char *prefix; /* the "prefix" the patterns' {p} stands for */
    VitNaming naming;   /* "naming": whose conventions (the position embedding's resampling,
                           VitConfig.naming) */
    int library;        /* "naming" given: a library's own checkpoints, read as it saves them */
    VitRope rope;       /* "rope": a rotary position embedding ("dinov3": no pos_embed needed;
                           "eva": beside the learned one) */
    int cls_pos_only;   /* "position_prefix": "cls": a position row for the CLS token, none
                           for the registers (transformers' Dinov2WithRegistersEmbeddings) */
    int no_cls;         /* "class_token": false: the model has none (SigLIP) */
    char pat[N_ROLES][LD_NAME_BYTES]; /* each role's pattern, {p} replaced; "" if none */
} Layout;

/* Must the checkpoint hold role r's tensor? The position embedding not with DINOv3's rotary
 * one. */
static int required(const Layout *lay, int r) {
    return roles[r].required && !(r == S_POS && lay->rope == VIT_ROPE_DINOV3) &&
           !(r == S_CLS && lay->no_cls);
}

static const char *role_pattern(const Layout *lay, const char *role) {
    for (int r = 0; r < N_ROLES; r++)
        if (!strcmp(roles[r].role, role)) return lay->pat[r][0] ? lay->pat[r] : NULL;
    return NULL;
}

/* Is the CLS's position row to be folded into it: "position_prefix": "cls", and the
 * checkpoint has register tokens and a position embedding? (Without registers the CLS row
 * is the position embedding's one prefix row, as the engine reads it.) */
static int cls_fold(const Layout *lay, const StFile *st) {
    return lay->cls_pos_only && lay->pat[S_REG][0] && st_find(st, lay->pat[S_REG]) &&
           lay->pat[S_POS][0] && st_find(st, lay->pat[S_POS]) && lay->pat[S_CLS][0] &&
           st_find(st, lay->pat[S_CLS]);
}

/* A string, or an array of strings (alternatives: "tensors"' values, "prefix"), none
 * longer than a name may be. */
static int is_names(const cJSON *j) {
    if (cJSON_IsString(j)) return strlen(j->valuestring) < LD_NAME_BYTES - 16;
    if (!cJSON_IsArray(j) || !j->child) return 0;
    for (const cJSON *e = j->child; e; e = e->next)
        if (!cJSON_IsString(e) || strlen(e->valuestring) >= LD_NAME_BYTES - 16) return 0;
    return 1;
}

static VitStatus layout_parse(Layout *lay, cJSON *root, const char *file, VitError *err) {
    lay->root = root, lay->file = file, lay->prefix = "";
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
    lay->tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsObject(root) || !cJSON_IsString(nm) || !cJSON_IsObject(lay->tensors))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: a layout needs \"name\" (a string) and \"tensors\" (an object "
                             "of role: tensor name)",
                             file);
    lay->name = nm->valuestring;
    for (const cJSON *t = lay->tensors->child; t; t = t->next) {
        int known = 0;
        for (int r = 0; r < N_ROLES && !known; r++) known = !strcmp(t->string, roles[r].role);
        if (!known)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: \"tensors\": '%s' is not a role (see docs/your-own-vit.md)",
                                 file, t->string);
        if (!is_names(t))
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: \"tensors\": '%s' is not a tensor name (a string, or an "
                                 "array of alternatives) under %d characters",
                                 file, t->string, LD_NAME_BYTES - 16);
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "prefix");
    if (pre && (!is_names(pre) || cJSON_GetArraySize(pre) > LAYOUT_MAX_PREFIXES))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"prefix\" must be a string or an array of at most %d strings "
                             "(what {p} in the tensor names stands for)",
                             file, LAYOUT_MAX_PREFIXES);
    const cJSON *naming = cJSON_GetObjectItemCaseSensitive(root, "naming");
    if (naming && !(cJSON_IsString(naming) &&
                    (!strcmp(naming->valuestring, "timm") || !strcmp(naming->valuestring, "hf"))))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"naming\" must be \"timm\" (timm's conventions, the default) "
                             "or \"hf\" (Hugging Face transformers')",
                             file);
    lay->naming = naming && !strcmp(naming->valuestring, "hf") ? VIT_NAMES_HF : VIT_NAMES_TIMM;
    lay->library = naming != NULL;
    static const char *const why[2] = {"unsupported", "left_out"};
    for (int k = 0; k < 2; k++) {
        const cJSON *uns = cJSON_GetObjectItemCaseSensitive(root, why[k]);
        int ok = !uns || cJSON_IsObject(uns);
        for (const cJSON *u = ok && uns ? uns->child : NULL; u; u = u->next)
            ok &= cJSON_IsString(u) && strlen(u->string) < LD_NAME_BYTES - 16;
        if (!ok)
            return vit_set_error(
                err, VIT_ERR_FORMAT, "%s: \"%s\" must be an object of tensor name: %s", file,
                why[k], k ? "why the model opens without it" : "the variant it belongs to");
    }
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "position_prefix");
    if (pp && !(cJSON_IsString(pp) && !strcmp(pp->valuestring, "cls")))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"position_prefix\" must be \"cls\" (the position embedding has "
                             "a row for the CLS token, none for the register tokens), or absent",
                             file);
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(root, "position_antialias");
    if (pa && !cJSON_IsBool(pa))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"position_antialias\" must be true or false", file);
    lay->cls_pos_only = pp != NULL;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "class_token");
    if (ct && !cJSON_IsBool(ct))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"class_token\" must be true (the default) or false (no CLS "
                             "token: SigLIP's towers, pooled by \"map\")",
                             file);
    lay->no_cls = cJSON_IsFalse(ct);
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(root, "rope");
    static const char *const ropes[] = {"none", "dinov3", "eva"}; /* VitRope's order */
    int rk = 0;
    while (rope && rk < 3 && !(cJSON_IsString(rope) && !strcmp(rope->valuestring, ropes[rk]))) rk++;
    if (rk == 3)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope\" must be \"dinov3\" (DINOv3's rotary position "
                             "embedding), \"eva\" (EVA-02's) or \"none\"",
                             file);
    lay->rope = (VitRope)rk;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
    if (th && !(cJSON_IsNumber(th) && th->valuedouble > 1 && th->valuedouble <= 1e9))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope_theta\" must be a number in (1, 1e9] (DINOv3: 100)", file);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, "rope_ref_grid");
    if ((ref || lay->rope == VIT_ROPE_EVA) &&
        !(cJSON_IsNumber(ref) && ref->valuedouble >= 1 && ref->valuedouble <= 256 &&
          ref->valuedouble == (int)ref->valuedouble))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope_ref_grid\" must be a whole number of patches in [1, "
                             "256] (EVA-02's: 16), given with \"rope\": \"eva\"",
                             file);
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(root, "glu_packed");
    if (gp && !cJSON_IsBool(gp))
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: \"glu_packed\" must be true or false", file);
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(root, "detect");
    int det_ok = !det || is_names(det);
    if (!det_ok && cJSON_IsArray(det) && det->child) { /* an array of groups */
        det_ok = 1;
        for (const cJSON *e = det->child; e; e = e->next) det_ok &= cJSON_IsArray(e) && is_names(e);
    }
    if (!det_ok)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"detect\" must be a tensor name, an array of them (all "
                             "present: the layout matches), or an array of such arrays (any "
                             "one all present)",
                             file);
    return VIT_OK;
}

static const char *layout_str(const Layout *lay, const char *k, const char *dflt) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(lay->root, k);
    return cJSON_IsString(j) ? j->valuestring : dflt;
}

/* Each role's pattern with {p} standing for `prefix`: of alternatives, the first whose
 * block 0 (head 0) the checkpoint holds, else the last. */
static void layout_resolve(Layout *lay, const StFile *st, const char *prefix) {
    lay->prefix = prefix;
    for (int r = 0; r < N_ROLES; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(lay->tensors, roles[r].role);
        lay->pat[r][0] = 0;
        for (const cJSON *e = cJSON_IsArray(v) ? v->child : v; e; e = e->next) {
            if (!with_prefix(lay->pat[r], e->valuestring, prefix)) lay->pat[r][0] = 0;
            if (!cJSON_IsArray(v) || !e->next || find_at(st, lay->pat[r], 0, 0)) break;
        }
    }
}

/* Does the checkpoint hold every tensor of det (one name, or an array of names)? */
static int holds_all(const Layout *lay, const StFile *st, const cJSON *det) {
    char nm[LD_NAME_BYTES];
    for (const cJSON *e = cJSON_IsArray(det) ? det->child : det; e; e = e->next) {
        if (!with_prefix(nm, e->valuestring, lay->prefix) || !st_find(st, nm)) return 0;
        if (!cJSON_IsArray(det)) break;
    }
    return 1;
}

/* Does the checkpoint hold the layout's "detect" tensor (all of them, given an array; all
 * of one of them, given an array of arrays), or else its CLS token and block 0's norm1? */
static int layout_matches(const Layout *lay, const StFile *st) {
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(lay->root, "detect");
    if (det && cJSON_IsArray(det) && cJSON_IsArray(det->child)) { /* groups: any one */
        for (const cJSON *g = det->child; g; g = g->next)
            if (holds_all(lay, st, g)) return 1;
        return 0;
    }
    if (det) return holds_all(lay, st, det);
    const char *a = role_pattern(lay, "cls_token");
    const char *b = role_pattern(lay, "blocks.{l}.norm1.weight");
    return a && b && find_at(st, a, 0, 0) && find_at(st, b, 0, 0);
}

/* Resolve the layout for the first of its prefixes with which it matches the checkpoint;
 * 1 when one does. Without a match the first prefix stays (for the messages). */
static int layout_choose(Layout *lay, const StFile *st) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(lay->root, "prefix");
    const cJSON *e = cJSON_IsArray(pre) ? pre->child : pre;
    if (!e) {
        layout_resolve(lay, st, "");
        return layout_matches(lay, st);
    }
    for (const cJSON *p = e; p; p = cJSON_IsArray(pre) ? p->next : NULL) {
        layout_resolve(lay, st, p->valuestring);
        if (layout_matches(lay, st)) return 1;
    }
    layout_resolve(lay, st, e->valuestring);
    return 0;
}

/* Must the checkpoint hold role r's tensor? Its roles[] flag, except the final norm
 * when the checkpoint has an fc_norm (timm: norm is an Identity then, not saved). */
static int role_needed(const Layout *lay, const StFile *st, int r) {
    if (r == S_NORM_W || r == S_NORM_B) {
        const char *fc = role_pattern(lay, roles[S_FC_NORM_W].role);
        if (fc && find_at(st, fc, 0, 0)) return 0;
    }
    return required(lay, r);
}

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
    const char *fw = role_pattern(lay, "blocks.{l}.attn.qkv.weight");
    if (fw) {
        const StTensor *w = find_at(st, fw, l, 0), *bb;
        const char *fb = role_pattern(lay, "blocks.{l}.attn.qkv.bias");
        if (!w) return -1;
        snprintf(nm, sizeof nm, "blocks.%d.attn.qkv.weight", l);
        if (!copy_as(b, nm, w, 2)) return 0;
        if (fb && (bb = find_at(st, fb, l, 0))) {
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
            const char *pat = role_pattern(lay, wb ? br[j] : wr[j]);
            if (!pat) {
                if (!wb) return -1;
                continue;
            }
            int per_head = strstr(pat, "{h}") != NULL;
            for (int h = 0; h < (per_head ? LAYOUT_MAX_HEADS : 1); h++) {
                const StTensor *t = find_at(st, pat, l, h);
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
    expand(nm, sizeof nm, pat ? pat : "?", l, 0);
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
    int fold = cls_fold(lay, st);
    for (int r = 0; r < N_ROLES; r++) {
        const char *role = roles[r].role;
        if (strstr(role, "{l}")) continue;
        const char *pat = role_pattern(lay, role);
        const StTensor *t = pat ? find_at(st, pat, 0, 0) : NULL;
        if (!t) {
            if (!role_needed(lay, st, r)) continue;
            return missing_in_block(b, lay, pat, 0);
        }
        if (fold && r == S_POS) continue; /* with the CLS token */
        int ok = fold && r == S_CLS ? build_cls_fold(b, t, find_at(st, lay->pat[S_POS], 0, 0))
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
    const char *n1 = role_pattern(lay, "blocks.{l}.norm1.weight");
    if (!n1 || !find_at(st, n1, 0, 0)) return missing_in_block(b, lay, n1, 0);
    for (int l = 0; l < VIT_MAX_LAYERS && find_at(st, n1, l, 0); l++) {
        for (int r = 0; r < N_ROLES; r++) {
            const char *role = roles[r].role;
            if (!strstr(role, "{l}") || strstr(role, ".attn.q") || strstr(role, ".attn.k.") ||
                strstr(role, ".attn.v."))
                continue;
            const char *pat = role_pattern(lay, role);
            const StTensor *t = pat ? find_at(st, pat, l, 0) : NULL;
            if (!t) {
                if (!roles[r].required) continue;
                return missing_in_block(b, lay, pat, l);
            }
            expand(nm, sizeof nm, role, l, 0);
            if (!copy_as(b, nm, t, 0)) return b->err->code;
        }
        int q = build_qkv(b, st, lay, l, n_heads);
        if (q < 0) {
            const char *qp = role_pattern(lay, "blocks.{l}.attn.qkv.weight");
            return missing_in_block(b, lay, qp ? qp : role_pattern(lay, "blocks.{l}.attn.q.weight"),
                                    l);
        }
        if (!q) return b->err->code;
    }
    return VIT_OK;
}

/* "name [shape], ..." of st's tensors, cut to fit. */
static void list_tensors(char *out, size_t n, const StFile *st) {
    size_t k = 0;
    char sh[64];
    out[0] = 0;
    for (int i = 0; i < st->n && k + 1 < n; i++) {
        int w = snprintf(out + k, n - k, "%s%s %s", i ? ", " : "", st->tensors[i].name,
                         st_shape_str(sh, sizeof sh, st->tensors[i].shape, st->tensors[i].ndim));
        if (w < 0 || (size_t)w >= n - k) {
            if (n > 5) snprintf(out + n - 5, 5, "...");
            return;
        }
        k += (size_t)w;
    }
}

/* A role's tensor is missing: the message names it, the role and the layout, and lists
 * the checkpoint's tensors. */
static VitStatus missing_error(VitError *err, const char *fname, const char *nm, const char *role,
                               const char *lay_name, const char *lay_file, const StFile *st) {
    char list[300];
    list_tensors(list, sizeof list, st);
    return vit_set_error(err, VIT_ERR_SHAPE,
                         "%s: tensor '%s' is missing: nothing matches the role %s of layout "
                         "'%s' (%s); the checkpoint's tensors: %s",
                         fname, nm, role, lay_name, lay_file, list);
}

VitStatus ld_missing(Loader *ld, Slot s, const char *name) {
    return missing_error(ld->err, ld->fname, name, roles[s].role, ld->layout_name, ld->layout_file,
                         &ld->st);
}

/* The first required role whose block-0 tensor the checkpoint lacks, or that the layout
 * does not name; -1 when there is none. */
static int unmatched_role(const Layout *lay, const StFile *st) {
    for (int r = 0; r < N_ROLES; r++) {
        const char *pat = role_pattern(lay, roles[r].role);
        int need = role_needed(lay, st, r);
        if (r == S_Q_W) need = !role_pattern(lay, "blocks.{l}.attn.qkv.weight");
        if (r == S_QKV_W) need = !role_pattern(lay, "blocks.{l}.attn.q.weight");
        if (need && (!pat || !find_at(st, pat, 0, 0))) return r;
    }
    return -1;
}

/* --- the switches into the loader ------------------------------------------------------ */

/* A JSON value for a message: the number, or what it is instead. */
static const char *number_str(char *out, size_t n, const cJSON *j) {
    if (!j) return "missing";
    if (!cJSON_IsNumber(j)) return "not a number";
    snprintf(out, n, "%g", j->valuedouble);
    return out;
}

static VitStatus apply_switches(Loader *ld, const Layout *lay) {
    const char *scale = layout_str(lay, "attention_scale", "head_dim");
    const char *act = layout_str(lay, "mlp_activation", "gelu");
    const char *hact = layout_str(lay, "head_activation", "none");
    if (strcmp(scale, "head_dim") && strcmp(scale, "dim"))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"attention_scale\": '%s', expected \"head_dim\" (1/sqrt(D/H)) "
                             "or \"dim\" (1/sqrt(D))",
                             lay->file, scale);
    static const char *const acts[] = {"gelu", "gelu_tanh", "quick_gelu", "relu"};
    int a = 0;
    while (a < 4 && strcmp(act, acts[a])) a++;
    if (a == 4)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"mlp_activation\": '%s', expected \"gelu\" (exact, erf), "
                             "\"gelu_tanh\", \"quick_gelu\" or \"relu\"",
                             lay->file, act);
    ld->mlp_act = a;
    if (strcmp(hact, "none") && strcmp(hact, "tanh"))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"head_activation\": '%s', expected \"none\" or \"tanh\"",
                             lay->file, hact);
    /* CLIP's own configs beside the weights (vit.h, "CLIP"), before the layout's defaults:
     * what they give wins over the layout's preprocessing and activation */
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(lay->root, "clip_configs");
    if (cJSON_IsTrue(clip)) {
        static const char *const side[2] = {"preprocessor_config.json", "open_clip_config.json"};
        const char *path = ld->vit->path;
        size_t dir = (size_t)(vit_basename(path) - path);
        for (int k = 0; k < 2; k++) {
            char p[1100];
            snprintf(p, sizeof p, "%.*s%s", (int)dir, path, side[k]);
            FILE *f = fopen(p, "rb");
            if (!f) continue;
            fclose(f);
            VitStatus rc = ld_parse_clip_config(&ld->cv, p, k, ld->err);
            if (rc) return rc;
        }
        if (ld->cv.act) ld->mlp_act = ld->cv.act - 1;
    }
    /* how the library resamples the position embedding for another input size */
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(lay->root, "position_antialias");
    ld->pos_antialias = pa ? cJSON_IsTrue(pa) : lay->naming == VIT_NAMES_TIMM;
    ld->att_scale_dim = !strcmp(scale, "dim");
    ld->rope = lay->rope;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(lay->root, "rope_theta");
    ld->rope_theta = th ? (float)th->valuedouble : 100.0f; /* checked by layout_parse */
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(lay->root, "rope_ref_grid");
    ld->rope_ref = ref ? (int)ref->valuedouble : 0;
    ld->glu_packed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay->root, "glu_packed"));
    ld->head_tanh = !strcmp(hact, "tanh");
    /* what the head reads: "cls" (the CLS token, the default), "mean" (of the patch
     * tokens), "cls_mean" ([CLS ; mean], transformers' Dinov2ForImageClassification) */
    static const char *const pools[] = {"cls", "mean", "cls_mean", "map"};
    const char *pool = layout_str(lay, "pooling", "cls");
    int pl = 0;
    while (pl < 4 && strcmp(pool, pools[pl])) pl++;
    if (pl == 4)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"pooling\": '%s', expected \"cls\" (the CLS token), \"mean\" "
                             "(the mean of the patch tokens), \"cls_mean\" ([CLS ; mean]) or "
                             "\"map\" (SigLIP's attention pooling: the attn_pool.* roles)",
                             lay->file, pool);
    if ((pl == VIT_POOL_MAP) != lay->no_cls)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"pooling\": \"map\" goes with \"class_token\": false and "
                             "only with it (a model without a CLS token pools by attention)",
                             lay->file);
    ld->head_pool = pl; /* VitPooling's order */
    ld->no_cls = lay->no_cls;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(lay->root, "layer_norm_eps");
    if (eps && !ld->cv.has_eps) {
        if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1 ||
            (float)eps->valuedouble <= 0)
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"layer_norm_eps\" must be a number in (0, 1]", lay->file);
        ld->cv.ln_eps = (float)eps->valuedouble, ld->cv.has_eps = 1;
    }
    /* preprocessing: {"resize": 256, "crop": 224, "mean": [..], "std": [..]} */
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(lay->root, "preprocess");
    if (cJSON_IsObject(pp)) {
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(pp, "resize");
        const cJSON *cr = cJSON_GetObjectItemCaseSensitive(pp, "crop");
        /* crop_pct = crop / resize: a crop of 1 px from a resize of 1e300 was 0 as a float,
           and every photo then "too elongated" to resize; refused here, by its keys */
        if ((rs || cr) &&
            !(cJSON_IsNumber(rs) && cJSON_IsNumber(cr) && cr->valuedouble >= 1 &&
              rs->valuedouble >= cr->valuedouble && rs->valuedouble <= VIT_MAX_INPUT)) {
            char rv[32], cv[32];
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"resize\" %s and \"crop\" %s: expected "
                                 "sizes in px with 1 <= crop <= resize <= %d",
                                 lay->file, number_str(rv, sizeof rv, rs),
                                 number_str(cv, sizeof cv, cr), VIT_MAX_INPUT);
        }
        if (rs && !ld->cv.has_crop)
            ld->cv.crop_pct = (float)(cr->valuedouble / rs->valuedouble), ld->cv.has_crop = 1;
        if (cr) ld->default_size = (int)cr->valuedouble;
        const cJSON *cm = cJSON_GetObjectItemCaseSensitive(pp, "crop_mode");
        if (cm && !(cJSON_IsString(cm) &&
                    (!strcmp(cm->valuestring, "center") || !strcmp(cm->valuestring, "squash"))))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"crop_mode\" must be \"center\" or "
                                 "\"squash\"",
                                 lay->file);
        ld->crop_squash = cm && !strcmp(cm->valuestring, "squash");
        const cJSON *ip = cJSON_GetObjectItemCaseSensitive(pp, "interpolation");
        if (cJSON_IsString(ip) && strcmp(ip->valuestring, "bilinear") &&
            strcmp(ip->valuestring, "bicubic"))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"interpolation\" '%s', expected "
                                 "\"bicubic\" or \"bilinear\"",
                                 lay->file, ip->valuestring);
        ld->resize_bilinear = cJSON_IsString(ip) && !strcmp(ip->valuestring, "bilinear");
        const char *k[2] = {"mean", "std"};
        for (int s = 0; s < 2; s++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(pp, k[s]);
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3 ||
                (s ? ld->cv.has_std : ld->cv.has_mean))
                continue;
            float *o = s ? ld->cv.std : ld->cv.mean;
            int i = 0, ok = 1;
            for (const cJSON *e = v->child; e; e = e->next, i++)
                ok &= cJSON_IsNumber(e) && e->valuedouble > (s ? 0 : -10) && e->valuedouble < 10,
                    o[i] = (float)e->valuedouble;
            if (!ok)
                return vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: \"preprocess\": bad \"%s\"",
                                     lay->file, k[s]);
            *(s ? &ld->cv.has_std : &ld->cv.has_mean) = 1;
        }
    }
    /* class names for the head the layout's models are published with (torchvision's
       ImageNet-1k), kept for attach_labels: a fine-tuned head of another size gets none */
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(lay->root, "labels");
    if (lab) {
        if (!cJSON_IsArray(lab))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"labels\" must be an array of class names", lay->file);
        if (!(ld->layout_labels = cJSON_Duplicate(lab, 1)))
            return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", lay->file);
    }
    snprintf(ld->layout_name, sizeof ld->layout_name, "%s", lay->name);
    return VIT_OK;
}

/* --- entry point ------------------------------------------------------------------------ */

static char *read_text(const char *path, VitError *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        vit_set_error(err, VIT_ERR_IO, "%s: cannot open the layout", path);
        return NULL;
    }
    char *s = malloc(VIT_MAX_CONFIG_BYTES + 1);
    size_t n = s ? fread(s, 1, VIT_MAX_CONFIG_BYTES + 1, f) : 0;
    fclose(f);
    if (!s || n > VIT_MAX_CONFIG_BYTES) {
        free(s);
        vit_set_error(err, s ? VIT_ERR_FORMAT : VIT_ERR_NOMEM, "%s: layout over %u bytes", path,
                      VIT_MAX_CONFIG_BYTES);
        return NULL;
    }
    s[n] = 0;
    return s;
}

/* A tensor the layout says belongs to a variant vitlens does not implement ("unsupported":
 * timm's fc_norm, transformers' Dinov2Model, ...): refused rather than run as another
 * model than it is. */
static VitStatus check_unsupported(Loader *ld, const Layout *lay) {
    const cJSON *uns = cJSON_GetObjectItemCaseSensitive(lay->root, "unsupported");
    char nm[LD_NAME_BYTES];
    for (const cJSON *u = uns ? uns->child : NULL; u; u = u->next)
        if (with_prefix(nm, u->string, lay->prefix) && st_find(&ld->st, nm))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' belongs to a ViT variant (%s) that vitlens "
                                 "does not support",
                                 ld->fname, nm, u->valuestring);
    return VIT_OK;
}

/* A tensor the layout leaves out ("left_out": Dinov2ForImageClassification's classifier):
 * the model opens without it, and ld->left_out says which and why (VitConfig.left_out). */
static void note_left_out(Loader *ld, const Layout *lay) {
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(lay->root, "left_out");
    char nm[LD_NAME_BYTES];
    ld->left_out[0] = 0;
    for (const cJSON *u = lo ? lo->child : NULL; u && !ld->left_out[0]; u = u->next)
        if (with_prefix(nm, u->string, lay->prefix) && st_find(&ld->st, nm))
            snprintf(ld->left_out, sizeof ld->left_out, "tensor '%s' left out: %s", nm,
                     u->valuestring);
}

/* The blocks are numbered 0..L-1 without gaps: a block after a gap would otherwise be
 * silently dropped and the model run with fewer layers than it has. L: the blocks with a
 * norm1; any other tensor named like a block (the norm1 pattern up to {l}, a number, a
 * dot) must be one of them. */
static VitStatus check_blocks(Loader *ld, const Layout *lay) {
    const char *n1 = lay->pat[S_NORM1_W], *at = strstr(n1, "{l}");
    int L = 0;
    while (L <= VIT_MAX_LAYERS && find_at(&ld->st, n1, L, 0)) L++;
    if (!at || L > VIT_MAX_LAYERS) return VIT_OK; /* arch.c says so */
    size_t blk_n = (size_t)(at - n1);
    for (int i = 0; i < ld->st.n; i++) {
        const char *tn = ld->st.tensors[i].name;
        if (strncmp(tn, n1, blk_n) != 0 || tn[blk_n] < '0' || tn[blk_n] > '9') continue;
        char *end, want[256];
        long k = strtol(tn + blk_n, &end, 10);
        if (*end == '.' && k >= L) {
            expand(want, sizeof want, n1, L, 0);
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' belongs to block %ld, but '%s' is missing "
                                 "(blocks must be numbered 0..L-1 without gaps)",
                                 ld->fname, tn, k, want);
        }
    }
    return VIT_OK;
}

/* Can names.c read the layout's tensors where they are? Not when a role needs converting:
 * a linear patch embedding, per-head lists, an image projection to transpose, a CLS token
 * or position embedding without their leading 1s (which a library's own checkpoints,
 * "naming", always have). */
static int in_place(const Layout *lay, const StFile *st) {
    if (!strcmp(layout_str(lay, "patch_embedding", "conv"), "linear")) return 0;
    if (lay->pat[S_IMG_PROJ_W][0] && strcmp(layout_str(lay, "image_proj", "linear"), "linear"))
        return 0; /* OpenAI's visual.proj [D, E], transposed */
    for (int r = S_Q_W; r <= S_V_B; r++)
        if (strstr(lay->pat[r], "{h}")) return 0;
    if (cls_fold(lay, st)) return 0;
    if (lay->library) return 1;
    const StTensor *c = find_at(st, lay->pat[S_CLS], 0, 0), *p = find_at(st, lay->pat[S_POS], 0, 0);
    return c && p && c->ndim == 3 && p->ndim == 3;
}

/* Apply one layout: its slots' patterns into ld->pat (ld->st read in place, or replaced by
 * its tensors converted into the roles' names), its switches into ld; or an error
 * (ld->err). */
static VitStatus apply(Loader *ld, const Layout *lay) {
    VitStatus rc = check_unsupported(ld, lay);
    if (!rc) rc = check_blocks(ld, lay);
    if (rc) return rc;
    note_left_out(ld, lay);
    snprintf(ld->layout_file, sizeof ld->layout_file, "%s", lay->file);
    ld->naming = lay->naming;
    if (in_place(lay, &ld->st)) { /* names.c reads them, and says what is missing */
        memcpy(ld->pat, lay->pat, sizeof ld->pat);
        return apply_switches(ld, lay);
    }
    int r = unmatched_role(lay, &ld->st);
    if (r >= 0) {
        char nm[256];
        const char *pat = role_pattern(lay, roles[r].role);
        if (pat && expand(nm, sizeof nm, pat, 0, 0))
            return missing_error(ld->err, ld->fname, nm, roles[r].role, lay->name, lay->file,
                                 &ld->st);
        list_tensors(nm, sizeof nm, &ld->st);
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: layout '%s' (%s) names no tensor for the role %s; the "
                             "checkpoint's tensors: %s",
                             ld->fname, lay->name, lay->file, roles[r].role, nm);
    }
    Build b = {.fname = ld->fname, .err = ld->err};
    int n_heads = 0;
    rc = build(&b, lay, &ld->st, &n_heads);
    free(b.conv);
    if (!rc) rc = apply_switches(ld, lay);
    if (rc) {
        st_free(&b.out);
        return rc;
    }
    /* read as converted: the roles' own names, query/key/value fused into qkv */
    for (int s = 0; s < N_SLOTS; s++)
        snprintf(ld->pat[s], sizeof ld->pat[s], "%s",
                 s >= S_Q_W && s <= S_V_B ? "" : roles[s].role);
    if (n_heads) ld->layout_heads = n_heads;
    st_free(&ld->st);
    ld->st = b.out;
    /* the converted tensors; the others still point into the checkpoint's data */
    ld->layout_owned = ld->st.owned;
    ld->st.owned = NULL;
    return VIT_OK;
}

VitStatus ld_apply_layout(Loader *ld, const char *user_layout) {
    VitStatus rc = VIT_OK;
    ld->err->code = VIT_OK;
    if (user_layout) {
        char *txt = read_text(user_layout, ld->err);
        if (!txt) return ld->err->code;
        cJSON *root = cJSON_Parse(txt);
        free(txt);
        Layout lay;
        if (!root)
            rc = vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: not valid JSON", user_layout);
        else if (!(rc = layout_parse(&lay, root, vit_basename(user_layout), ld->err))) {
            layout_choose(&lay, &ld->st); /* the user's layout applies, matched or not */
            rc = apply(ld, &lay);
        }
        cJSON_Delete(root);
        return rc;
    }
    /* the shipped layouts, timm's and Hugging Face's first (CMakeLists.txt) */
    for (int i = 0; i < vit_n_layouts; i++) {
        cJSON *root = cJSON_Parse(vit_layouts[i]);
        Layout lay;
        char file[96];
        snprintf(file, sizeof file, "assets/layouts/%s.json", vit_layout_files[i]);
        if (!root || layout_parse(&lay, root, file, ld->err)) {
            cJSON_Delete(root); /* a shipped layout is tested: cannot happen */
            continue;
        }
        if (layout_choose(&lay, &ld->st)) {
            rc = apply(ld, &lay);
            cJSON_Delete(root);
            return rc;
        }
        cJSON_Delete(root);
    }
    /* a CLIP checkpoint's text tower alone */
    static const char *const text_only[] = {"text_model.embeddings.token_embedding.weight",
                                            "token_embedding.weight"};
    for (size_t i = 0; i < sizeof text_only / sizeof *text_only; i++)
        if (st_find(&ld->st, text_only[i]))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: a CLIP text tower only (tensor '%s'), no image tower "
                                 "(vision_model.* or visual.*): it cannot run on a photo",
                                 ld->fname, text_only[i]);
    char list[300], names[160] = "";
    size_t k = 0;
    for (int i = 0; i < vit_n_layouts && k < sizeof names; i++)
        k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "",
                              vit_layout_files[i]);
    /* timm's class_token=False (the *_gap_* models, timm's own SigLIP towers): pooled without a
     * CLS token; the engine reads a model without one only with an attention-pooling head in
     * transformers' names (siglip-hf.json) */
    if (st_find(&ld->st, "patch_embed.proj.weight") && st_find(&ld->st, "blocks.0.norm1.weight"))
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: timm's names without 'cls_token': a ViT without a CLS token "
                             "(timm class_token=False, e.g. the *_gap_* models, pooled by %s), "
                             "which vitlens reads only as SigLIP in transformers' names "
                             "(SiglipModel, vision_model.*)",
                             ld->fname,
                             st_find(&ld->st, "attn_pool.latent") ? "timm's attention pooling "
                                                                    "(attn_pool.*)"
                             : st_find(&ld->st, "fc_norm.weight") ? "the mean of the patches and "
                                                                    "fc_norm"
                                                                  : "the mean of the patches");
    list_tensors(list, sizeof list, &ld->st);
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: tensor 'cls_token' is missing: neither timm's names nor those of "
                         "another layout of assets/layouts/ (%s); its tensors: %s. Write a "
                         "layout and pass --layout FILE (docs/your-own-vit.md)",
                         ld->fname, names, list);
}
