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
 *   - every tensor to F32.
 *
 * This file: the roles, their names' patterns, which layout matches a checkpoint, and
 * ld_apply_layout; a layout file's JSON and its switches are layout_switches.c's, the
 * conversions layout_build.c's (layout.h: what they share). */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shipped layouts (layouts.c, generated from assets/layouts/ *.json). */
extern const char *const vit_layouts[];
extern const char *const vit_layout_files[];
extern const int vit_n_layouts;

const char *layout_shipped(const char *name) {
    for (int i = 0; i < vit_n_layouts; i++)
        if (!strcmp(vit_layout_files[i], name)) return vit_layouts[i];
    return NULL;
}

/* The roles, one per slot (loader.h), in timm's names ({l}: the block). Required ones must
 * match. The attention's separate q/k/v are not timm names: converted, they become
 * blocks.{l}.attn.qkv; read in place, transformers' separate query, key, value. */
const LayoutRole layout_roles[N_SLOTS] = {
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

const char *ld_role(Slot s) {
    return layout_roles[s].role;
}

/* --- names ------------------------------------------------------------------- */

/* pattern with {l} and {h} replaced; 0 when it does not fit. */
int layout_expand(char *out, size_t n, const char *pat, int l, int h) {
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
int layout_with_prefix(char *out, const char *pat, const char *prefix) {
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

const StTensor *layout_find_at(const StFile *st, const char *pat, int l, int h) {
    char nm[256];
    return layout_expand(nm, sizeof nm, pat, l, h) ? st_find(st, nm) : NULL;
}

/* --- the layout ---------------------------------------------------------------------- */

/* Must the checkpoint hold role r's tensor? The position embedding not with DINOv3's rotary
 * one. */
static int required(const Layout *lay, int r) {
    return layout_roles[r].required && !(r == S_POS && lay->rope == VIT_ROPE_DINOV3) &&
           !(r == S_CLS && lay->no_cls);
}

const char *layout_pattern(const Layout *lay, const char *role) {
    for (int r = 0; r < N_ROLES; r++)
        if (!strcmp(layout_roles[r].role, role)) return lay->pat[r][0] ? lay->pat[r] : NULL;
    return NULL;
}

/* Is the CLS's position row to be folded into it: "position_prefix": "cls", and the
 * checkpoint has register tokens and a position embedding? (Without registers the CLS row
 * is the position embedding's one prefix row, as the engine reads it.) */
int layout_cls_fold(const Layout *lay, const StFile *st) {
    return lay->cls_pos_only && lay->pat[S_REG][0] && st_find(st, lay->pat[S_REG]) &&
           lay->pat[S_POS][0] && st_find(st, lay->pat[S_POS]) && lay->pat[S_CLS][0] &&
           st_find(st, lay->pat[S_CLS]);
}

/* Each role's pattern with {p} standing for `prefix`: of alternatives, the first whose
 * block 0 (head 0) the checkpoint holds, else the last. */
static void layout_resolve(Layout *lay, const StFile *st, const char *prefix) {
    lay->prefix = prefix;
    for (int r = 0; r < N_ROLES; r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(lay->tensors, layout_roles[r].role);
        lay->pat[r][0] = 0;
        for (const cJSON *e = cJSON_IsArray(v) ? v->child : v; e; e = e->next) {
            if (!layout_with_prefix(lay->pat[r], e->valuestring, prefix)) lay->pat[r][0] = 0;
            if (!cJSON_IsArray(v) || !e->next || layout_find_at(st, lay->pat[r], 0, 0)) break;
        }
    }
}

/* Does the checkpoint hold every tensor of det (one name, or an array of names)? */
static int holds_all(const Layout *lay, const StFile *st, const cJSON *det) {
    char nm[LD_NAME_BYTES];
    for (const cJSON *e = cJSON_IsArray(det) ? det->child : det; e; e = e->next) {
        if (!layout_with_prefix(nm, e->valuestring, lay->prefix) || !st_find(st, nm)) return 0;
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
    const char *a = layout_pattern(lay, "cls_token");
    const char *b = layout_pattern(lay, "blocks.{l}.norm1.weight");
    return a && b && layout_find_at(st, a, 0, 0) && layout_find_at(st, b, 0, 0);
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

/* Must the checkpoint hold role r's tensor? Its layout_roles[] flag, except the final norm
 * when the checkpoint has an fc_norm (timm: norm is an Identity then, not saved). */
int layout_role_needed(const Layout *lay, const StFile *st, int r) {
    if (r == S_NORM_W || r == S_NORM_B) {
        const char *fc = layout_pattern(lay, layout_roles[S_FC_NORM_W].role);
        if (fc && layout_find_at(st, fc, 0, 0)) return 0;
    }
    return required(lay, r);
}

/* --- what is missing --------------------------------------------------------------------- */

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
    return missing_error(ld->err, ld->fname, name, layout_roles[s].role, ld->layout_name,
                         ld->layout_file, &ld->st);
}

/* The first required role whose block-0 tensor the checkpoint lacks, or that the layout
 * does not name; -1 when there is none. */
static int unmatched_role(const Layout *lay, const StFile *st) {
    for (int r = 0; r < N_ROLES; r++) {
        const char *pat = layout_pattern(lay, layout_roles[r].role);
        int need = layout_role_needed(lay, st, r);
        if (r == S_Q_W) need = !layout_pattern(lay, "blocks.{l}.attn.qkv.weight");
        if (r == S_QKV_W) need = !layout_pattern(lay, "blocks.{l}.attn.q.weight");
        if (need && (!pat || !layout_find_at(st, pat, 0, 0))) return r;
    }
    return -1;
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
        if (layout_with_prefix(nm, u->string, lay->prefix) && st_find(&ld->st, nm))
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
        if (layout_with_prefix(nm, u->string, lay->prefix) && st_find(&ld->st, nm))
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
    while (L <= VIT_MAX_LAYERS && layout_find_at(&ld->st, n1, L, 0)) L++;
    if (!at || L > VIT_MAX_LAYERS) return VIT_OK; /* arch.c says so */
    size_t blk_n = (size_t)(at - n1);
    for (int i = 0; i < ld->st.n; i++) {
        const char *tn = ld->st.tensors[i].name;
        if (strncmp(tn, n1, blk_n) != 0 || tn[blk_n] < '0' || tn[blk_n] > '9') continue;
        char *end, want[256];
        long k = strtol(tn + blk_n, &end, 10);
        if (*end == '.' && k >= L) {
            layout_expand(want, sizeof want, n1, L, 0);
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
    if (layout_cls_fold(lay, st)) return 0;
    if (lay->library) return 1;
    const StTensor *c = layout_find_at(st, lay->pat[S_CLS], 0, 0),
                   *p = layout_find_at(st, lay->pat[S_POS], 0, 0);
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
        return layout_apply_switches(ld, lay);
    }
    int r = unmatched_role(lay, &ld->st);
    if (r >= 0) {
        char nm[256];
        const char *pat = layout_pattern(lay, layout_roles[r].role);
        if (pat && layout_expand(nm, sizeof nm, pat, 0, 0))
            return missing_error(ld->err, ld->fname, nm, layout_roles[r].role, lay->name, lay->file,
                                 &ld->st);
        list_tensors(nm, sizeof nm, &ld->st);
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: layout '%s' (%s) names no tensor for the role %s; the "
                             "checkpoint's tensors: %s",
                             ld->fname, lay->name, lay->file, layout_roles[r].role, nm);
    }
    StFile out = {0};
    int n_heads = 0;
    rc = layout_build(&out, lay, &ld->st, &n_heads, ld->fname, ld->err);
    if (!rc) rc = layout_apply_switches(ld, lay);
    if (rc) {
        st_free(&out);
        return rc;
    }
    /* read as converted: the roles' own names, query/key/value fused into qkv */
    for (int s = 0; s < N_SLOTS; s++)
        snprintf(ld->pat[s], sizeof ld->pat[s], "%s",
                 s >= S_Q_W && s <= S_V_B ? "" : layout_roles[s].role);
    if (n_heads) ld->layout_heads = n_heads;
    st_free(&ld->st);
    ld->st = out;
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
