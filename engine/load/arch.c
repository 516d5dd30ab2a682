/* arch.c - the architecture from the tensor shapes (engine/load/): the variants vit_load
 * refuses, then width, prefix tokens, patch size, the position embedding's grid, the
 * input grid, blocks, MLP width and heads (config.json and the options where the shapes
 * cannot tell), into the Vit's VitConfig. The variants vitlens does not implement are
 * refused by the layouts' "unsupported" tensors (layout.c). Each step returns VIT_OK, or a
 * VitStatus with ld->err set naming the tensor, what it holds and what was expected. */
#include "loader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_square(int64_t n, int64_t *side) {
    if (n < 1) return 0;
    int64_t s = (int64_t)llround(sqrt((double)n));
    *side = s;
    return s * s == n;
}

/* The width D from the CLS token; the prefix tokens [CLS, dist?, reg_0 .. reg_{R-1}]
 * (timm VisionTransformer._pos_embed); the patch size P from the patch embedding. */
static VitStatus infer_embeddings(Loader *ld, Arch *a) {
    /* D: the CLS token's, or without one (SigLIP, the layout's "class_token": false) the
     * patch embedding's outputs */
    a->has_cls = !ld->no_cls;
    Slot ds = a->has_cls ? S_CLS : S_PATCH_W;
    int64_t s3[3] = {1, 1, -1}, s4[4] = {-1, 3, -1, -1};
    if (a->has_cls ? !ld_slot_tensor(ld, S_CLS, 0, 3, s3)
                   : !ld_slot_tensor(ld, S_PATCH_W, 0, 4, s4))
        return ld->err->code;
    int64_t D = a->D = a->has_cls ? s3[2] : s4[0];
    if (D < 1 || D > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': width %lld out of range [1, %d]", ld->fname,
                             ld_slot_name(ld, ds, 0), (long long)D, VIT_MAX_WIDTH);
    int has_dist = a->has_dist = ld_has_slot(ld, S_DIST, 0);
    if (!a->has_cls && (has_dist || ld_has_slot(ld, S_REG, 0)))
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: a distillation or register token in a model without a CLS "
                             "token (layout '%s'): a combination vitlens does not know",
                             ld->fname, ld->layout_name);
    if (has_dist && !ld_slot_tensor(ld, S_DIST, 0, 3, (int64_t[3]){1, 1, D})) return ld->err->code;
    if (ld_has_slot(ld, S_REG, 0)) {
        int64_t sr[3] = {1, -1, D};
        if (!ld_slot_tensor(ld, S_REG, 0, 3, sr)) return ld->err->code;
        a->R = sr[1];
        if (a->R < 1 || 1 + has_dist + a->R > VIT_MAX_PREFIX)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s': %lld register tokens, expected 1 to %d",
                                 ld->fname, ld_slot_name(ld, S_REG, 0), (long long)a->R,
                                 VIT_MAX_PREFIX - 1 - has_dist);
    }
    if (ld->cv.n_registers && ld->cv.n_registers - 1 != a->R)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: num_register_tokens is %d, but %s has %lld register tokens",
                             ld->cfg_file ? vit_basename(ld->cfg_file) : "config.json",
                             ld->cv.n_registers - 1, ld->fname, (long long)a->R);
    a->Np = a->has_cls + has_dist + (int)a->R;
    int64_t sp[4] = {D, 3, -1, -1};
    if (!ld_slot_tensor(ld, S_PATCH_W, 0, 4, sp)) return ld->err->code;
    if (sp[2] != sp[3] || sp[2] < 1 || sp[2] > VIT_MAX_PATCH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': kernel %lldx%lld, expected a square patch of at "
                             "most %d px",
                             ld->fname, ld_slot_name(ld, S_PATCH_W, 0), (long long)sp[2],
                             (long long)sp[3], VIT_MAX_PATCH);
    a->P = (int)sp[2];
    /* CLIP's conv1 (timm's pre_norm models) has no bias */
    if (ld_has_slot(ld, S_PATCH_B, 0) && !ld_slot1(ld, S_PATCH_B, 0, D)) return ld->err->code;
    return VIT_OK;
}

/* The position embedding: [1, Npos + gh0*gw0, D] for the training grid, Npos
 * = Np (timm's default, transformers) or 0 (timm no_embed_class: register
 * models, DeiT III). The grid is square unless config.json gives [H, W]. A rotary
 * model (the layout's "rope") may have none: its grid is config.json's image_size, else
 * the layout's crop, / P. */
static VitStatus infer_pos_grid(Loader *ld, Arch *a) {
    const CfgValues *cv = &ld->cv;
    int Np = a->Np, P = a->P;
    if (ld->rope && !ld_has_slot(ld, S_POS, 0)) {
        /* a rotary model without a learned position embedding (DINOv3): any grid; the
         * default input size is config.json's image_size, else the layout's crop */
        int sh = cv->image_h ? cv->image_h : ld->default_size ? ld->default_size : 224;
        int sw = cv->image_h ? cv->image_w : sh;
        if (sh % P || sw % P)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: image size %dx%d is not a multiple of the patch size %d",
                                 cv->image_h ? ld->cfg_file : ld->layout_file, sh, sw, P);
        a->Tp = 0, a->Npos = 0, a->gh0 = sh / P, a->gw0 = sw / P;
        return VIT_OK;
    }
    int64_t spos[3] = {1, -1, a->D};
    if (!ld_slot_tensor(ld, S_POS, 0, 3, spos)) return ld->err->code;
    char pos_nm[sizeof ld->name];
    memcpy(pos_nm, ld->name, sizeof pos_nm); /* slot_name reuses ld->name */
    int64_t Tp = spos[1], gh0 = 0, gw0 = 0, side = 0;
    int Npos = Np;
    if (Tp - Np < 1 || Tp - Np > VIT_MAX_PATCHES) {
        if (!(Tp > 1 && Tp <= VIT_MAX_PATCHES && is_square(Tp, &side)))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s': %lld tokens, expected the %d prefix token%s "
                                 "plus 1 to %d patches",
                                 ld->fname, pos_nm, (long long)Tp, Np, Np > 1 ? "s" : "",
                                 VIT_MAX_PATCHES);
        Npos = 0;
    }
    if (cv->image_h) {
        if (cv->image_h % P || cv->image_w % P)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: image size %dx%d is not a multiple of the patch size %d",
                                 ld->cfg_file, cv->image_h, cv->image_w, P);
        gh0 = cv->image_h / P, gw0 = cv->image_w / P;
        if (Tp - gh0 * gw0 == Np)
            Npos = Np;
        else if (Tp == gh0 * gw0)
            Npos = 0;
        else
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s': %lld positions, but image size %dx%d / patch "
                                 "%d gives a %lldx%lld grid (plus %d prefix token%s)",
                                 ld->fname, pos_nm, (long long)Tp, cv->image_h, cv->image_w, P,
                                 (long long)gh0, (long long)gw0, Np, Np > 1 ? "s" : "");
    } else if (Npos == Np && is_square(Tp - Np, &side)) {
        gh0 = gw0 = side;
    } else if (Tp > 1 && is_square(Tp, &side)) {
        Npos = 0, gh0 = gw0 = side; /* no position embedding for the prefix tokens */
    } else {
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': %lld patch positions is not a square grid; give "
                             "image_size in config.json",
                             ld->fname, pos_nm, (long long)(Tp - Np));
    }
    a->Tp = Tp, a->Npos = Npos, a->gh0 = gh0, a->gw0 = gw0;
    return VIT_OK;
}

/* The input grid: VitLoadOptions, else config.json, else the training grid. */
static VitStatus input_grid(Loader *ld, Arch *a, const VitLoadOptions *opt) {
    int P = a->P;
    a->gh = a->gh0, a->gw = a->gw0;
    if (opt && (opt->image_h > 0 || opt->image_w > 0)) {
        int ih = opt->image_h > 0 ? opt->image_h : opt->image_w;
        int iw = opt->image_w > 0 ? opt->image_w : opt->image_h;
        if (ih % P || iw % P || ih > VIT_MAX_INPUT || iw > VIT_MAX_INPUT)
            return vit_set_error(ld->err, VIT_ERR_ARG,
                                 "%s: input size %dx%d px: each side must be a multiple of the "
                                 "patch size %d, at most %d",
                                 ld->fname, ih, iw, P, VIT_MAX_INPUT);
        a->gh = ih / P, a->gw = iw / P;
    }
    if (a->gh * a->gw > VIT_MAX_PATCHES)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: a %lldx%lld patch grid is over the limit of %d patches",
                             ld->fname, (long long)a->gh, (long long)a->gw, VIT_MAX_PATCHES);
    return VIT_OK;
}

/* L: the blocks numbered 0..L-1 (layout.c has checked that no block follows a gap). */
static VitStatus count_blocks(Loader *ld, Arch *a) {
    if (!ld_slot_name(ld, S_NORM1_W, 0)) return ld_unnamed(ld, S_NORM1_W); /* a user's layout */
    int L = 0;
    for (; L <= VIT_MAX_LAYERS && ld_has_slot(ld, S_NORM1_W, L);) L++;
    if (L > VIT_MAX_LAYERS)
        return vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: more than %d blocks", ld->fname,
                             VIT_MAX_LAYERS);
    if (L == 0)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is missing (no transformer blocks; layout '%s')",
                             ld->fname, ld_slot_name(ld, S_NORM1_W, 0), ld->layout_name);
    a->L = L;
    return VIT_OK;
}

/* F: the MLP width, from block 0's fc1. */
static VitStatus infer_mlp_width(Loader *ld, Arch *a) {
    int64_t D = a->D, sf[2] = {-1, D};
    if (!ld_slot_tensor(ld, S_FC1_W, 0, 2, sf)) return ld->err->code;
    int64_t F = a->F = sf[0];
    if (F < 1 || F > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': MLP width %lld out of range [1, %d]", ld->fname,
                             ld_slot_name(ld, S_FC1_W, 0), (long long)F, VIT_MAX_WIDTH);
    /* a gated MLP (DINOv3's SwiGLU): the gate fc1_g [F, D] beside fc1, the value */
    a->gated = ld_has_slot(ld, S_FC1G_W, 0);
    if (a->gated && !ld_slot2(ld, S_FC1G_W, 0, F, D)) return ld->err->code;
    if (ld->cv.swiglu &&
        !ld->rope) /* transformers' Dinov2SwiGLUFFN: mlp.weights_in / weights_out */
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: use_swiglu_ffn is true: a SwiGLU MLP (DINOv2 ViT-g), which "
                             "vitlens does not support yet (issue 35)",
                             ld->cfg_file ? vit_basename(ld->cfg_file) : "config.json");
    /* timm's SwiGLUPacked / GluMlp(gate_last=False): fc1 holds the gate's rows, then the
     * value's, and fc2 takes F/2. EVA-02 Ti and S (a layout's "glu_packed"); DINOv2 ViT-g's
     * is refused (timm.json) */
    const StTensor *fc2 = st_find(&ld->st, ld_slot_name(ld, S_FC2_W, 0)); /* NULL: unnamed */
    if (fc2 && fc2->ndim == 2 && fc2->shape[0] == D && F % 2 == 0 && fc2->shape[1] == F / 2) {
        if (!ld->glu_packed || a->gated)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' is [%lld, %lld], half of fc1's width: a SwiGLU "
                                 "MLP (DINOv2 ViT-g), which vitlens does not support",
                                 ld->fname, fc2->name, (long long)fc2->shape[0],
                                 (long long)fc2->shape[1]);
        a->F = F / 2, a->gated = a->packed = 1;
    }
    /* timm's SwiGLU(norm_layer=...): a LayerNorm over the hidden before fc2 (EVA-02 B/L) */
    a->mlp_norm = ld_has_slot(ld, S_MLP_NORM_W, 0);
    if (a->mlp_norm && !a->gated)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': a norm inside an MLP without a gate, which "
                             "vitlens does not support (only EVA-02's SwiGLU with its sub-LN)",
                             ld->fname, ld_slot_name(ld, S_MLP_NORM_W, 0));
    if (ld->cv.gated && (ld->cv.gated == 2) != a->gated)
        return vit_set_error(
            ld->err, VIT_ERR_SHAPE,
            "%s: use_gated_mlp is %s, but %s %s a gated MLP's gate (tensor "
            "'%s')",
            ld->cfg_file ? vit_basename(ld->cfg_file) : "config.json",
            ld->cv.gated == 2 ? "true" : "false", ld->fname, a->gated ? "has" : "lacks",
            ld_slot_name(ld, S_FC1G_W, 0) ? ld->name : "blocks.0.mlp.fc1_g.weight");
    return VIT_OK;
}

/* EVA's rotary embedding (the layout's "rope": "eva") belongs to EVA-02 alone: every
 * EVA-02 has a SwiGLU MLP (EVA-01, timm's eva_giant_*, has a GELU one and no rotary
 * embedding), and timm's config.json names it eva02_*. Anything else the Eva class builds
 * (eva.py's vit_*_rope_* and Perception Encoder models: other rotary kinds) is refused. */
static VitStatus eva_checks(Loader *ld, const Arch *a) {
    const char *arch = ld->cv.architecture;
    if (ld->rope != VIT_ROPE_EVA) return VIT_OK;
    if (arch[0] && strncmp(arch, "eva02_", 6) != 0)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: architecture '%s' is a model of timm's Eva class other than "
                             "EVA-02 (eva02_*): its position embedding (rotary kind, reference "
                             "grid) is not one vitlens knows",
                             ld->cfg_file ? vit_basename(ld->cfg_file) : "config.json", arch);
    if (!a->gated)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: an Eva checkpoint (q_bias beside a fused qkv, or q_proj) "
                             "without EVA-02's SwiGLU MLP (tensor '%s' is [%lld, %lld]): EVA-01 "
                             "(timm's eva_giant_*) or another Eva model, which vitlens does not "
                             "support",
                             ld->fname, ld_slot_name(ld, S_FC1_W, 0), (long long)a->F,
                             (long long)a->D);
    return VIT_OK;
}

/* A: the attention's width H * Dh, the rows of block 0's queries (a third of a fused
 * qkv's); D for timm's and transformers' ViTs, H * Dh for a notebook's per-head
 * Linear(D, Dh) lists with Dh != D / H. A tensor that is not [rows, D] (rows a multiple
 * of 3 when fused) leaves A = D: binding the weights then names it and the shape
 * expected. */
static VitStatus attention_width(Loader *ld, Arch *a) {
    int fused = ld->pat[S_QKV_W][0] != 0;
    const StTensor *t = st_find(&ld->st, ld_slot_name(ld, fused ? S_QKV_W : S_Q_W, 0));
    a->A = a->D;
    if (!t || t->ndim != 2 || t->shape[1] != a->D || t->shape[0] < (fused ? 3 : 1) ||
        (fused && t->shape[0] % 3))
        return VIT_OK;
    int64_t A = fused ? t->shape[0] / 3 : t->shape[0];
    if (A > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is [%lld, %lld]: an attention width of %lld, over "
                             "the limit of %d",
                             ld->fname, t->name, (long long)t->shape[0], (long long)t->shape[1],
                             (long long)A, VIT_MAX_WIDTH);
    a->A = A;
    return VIT_OK;
}

/* H: the options', else config.json's, else the layout's per-head lists', else A/64
 * (ViTs' 64-wide heads); it must divide the attention's width A. */
static VitStatus head_count(Loader *ld, Arch *a, const VitLoadOptions *opt) {
    int H = (int)(a->A / 64);
    if (ld->layout_heads) H = ld->layout_heads; /* per-head lists: one tensor per head */
    if (ld->cv.n_heads) H = ld->cv.n_heads;
    if (opt && opt->n_heads > 0) H = opt->n_heads;
    if (H < 1 || a->A % H)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: attention width %lld cannot be split into %d heads; give "
                             "the head count (--heads, or num_heads in config.json)",
                             ld->fname, (long long)a->A, H);
    a->H = H;
    return VIT_OK;
}

/* What the head reads (VitConfig.head_pool): config.json's "global_pool" (timm: "token",
 * "avg"), else the mean of the patches when the checkpoint has an fc_norm (timm's
 * use_fc_norm: global_pool 'avg', the final norm an Identity), else the layout's
 * "pooling" (the CLS token; [CLS ; mean] for transformers' Dinov2ForImageClassification). */
static VitStatus head_pooling(Loader *ld, Arch *a) {
    const char *gp = ld->cv.global_pool;
    a->pool = ld->head_pool;
    if (a->pool == VIT_POOL_CLS && ld_has_slot(ld, S_FC_NORM_W, 0)) a->pool = VIT_POOL_MEAN;
    if (!gp[0]) return VIT_OK;
    if (!strcmp(gp, "token"))
        a->pool = VIT_POOL_CLS;
    else if (!strcmp(gp, "avg"))
        a->pool = VIT_POOL_MEAN;
    else
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: global_pool '%s': a head pooled by '%s', which vitlens does not "
                             "support (\"token\": the CLS token, \"avg\": the mean of the "
                             "patch tokens)",
                             ld->cfg_file ? vit_basename(ld->cfg_file) : "config.json", gp, gp);
    return VIT_OK;
}

/* vit->cfg from the architecture, then config.json, then the options. */
static void set_config(Loader *ld, const Arch *a, const VitLoadOptions *opt) {
    VitConfig *c = &ld->vit->cfg;
    const CfgValues *cv = &ld->cv;
    /* Model name: the file name without extension. */
    snprintf(c->name, sizeof c->name, "%s", ld->fname);
    char *dot = strrchr(c->name, '.');
    if (dot && dot != c->name) *dot = 0;
    c->naming = ld->naming;
    int64_t N = a->gh * a->gw, T = a->Np + N;
    c->patch_size = a->P;
    c->grid_h = (int)a->gh, c->grid_w = (int)a->gw;
    c->image_h = (int)a->gh * a->P, c->image_w = (int)a->gw * a->P;
    c->pos_grid_h = (int)a->gh0, c->pos_grid_w = (int)a->gw0;
    c->n_patches = (int)N;
    c->n_prefix = a->Np;
    c->has_dist_token = a->has_dist;
    c->n_registers = (int)a->R;
    c->n_tokens = (int)T;
    c->dim = (int)a->D;
    c->n_heads = a->H;
    c->head_dim = (int)(a->A / a->H);
    c->mlp_dim = (int)a->F;
    c->n_layers = a->L;
    /* config.json's, else the layout's "layer_norm_eps" (hf.json: transformers' 1e-12);
       timm's CLIP ViTs (pre_norm: norm_pre) use nn.LayerNorm's default, 1e-5; timm's 1e-6 */
    c->ln_eps = cv->has_eps ? cv->ln_eps : ld_has_slot(ld, S_NORM_PRE_W, 0) ? 1e-5f : 1e-6f;
    c->crop_mode = cv->crop_mode     ? (VitCropMode)(cv->crop_mode - 1)
                   : ld->crop_squash ? VIT_CROP_SQUASH
                                     : VIT_CROP_CENTER;
    c->crop_pct = cv->has_crop ? cv->crop_pct : 0.875f;
    if (opt && opt->whole_image) c->crop_mode = VIT_CROP_SQUASH, c->crop_pct = 1.0f;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(c->mean, cv->has_mean ? cv->mean : mean, sizeof mean);
    memcpy(c->std, cv->has_std ? cv->std : std, sizeof std);
    c->default_preprocess = ld->pth && !cv->has_mean && !cv->has_std && !cv->has_crop;
    /* a layout's switches (layout.c) */
    c->att_scale = ld->att_scale_dim ? 1.0f / sqrtf((float)c->dim) : 0.0f;
    c->head_tanh = ld->head_tanh;
    c->head_pool = (VitPooling)a->pool;
    c->mlp_act = cv->act    ? (VitActivation)(cv->act - 1)
                 : a->gated ? VIT_ACT_SILU /* SwiGLU: timm's config.json names no activation */
                            : (VitActivation)ld->mlp_act;
    c->mlp_gated = a->gated;
    c->mlp_norm = a->mlp_norm;
    c->rope = ld->rope;
    if (c->rope == VIT_ROPE_EVA) c->rope_ref_h = c->rope_ref_w = ld->rope_ref;
    c->rope_theta = cv->rope_theta > 0 ? cv->rope_theta : ld->rope_theta;
    /* preprocessor_config.json's filter (SigLIP 2: bilinear), else the layout's */
    int bilinear = cv->resample ? cv->resample == 2 : ld->resize_bilinear;
    c->resize_bilinear = bilinear && !cv->crop_mode && !(opt && opt->whole_image);
    snprintf(c->layout, sizeof c->layout, "%s", ld->layout_name);
    vit_escape(c->left_out, sizeof c->left_out, ld->left_out); /* a name from the file */
}

VitStatus ld_infer_arch(Loader *ld, Arch *a, const VitLoadOptions *opt) {
    VitStatus rc;
    if ((rc = infer_embeddings(ld, a))) return rc;
    if ((rc = infer_pos_grid(ld, a))) return rc;
    if ((rc = input_grid(ld, a, opt))) return rc;
    if ((rc = count_blocks(ld, a))) return rc;
    if ((rc = infer_mlp_width(ld, a))) return rc;
    if ((rc = eva_checks(ld, a))) return rc;
    if ((rc = attention_width(ld, a))) return rc;
    if ((rc = head_count(ld, a, opt))) return rc;
    if ((rc = head_pooling(ld, a))) return rc;
    set_config(ld, a, opt);
    return VIT_OK;
}

/* --- names ------------------------------------------------------------------- */

const char *vit_pooling_name(VitPooling p) {
    switch (p) {
    case VIT_POOL_CLS: return "CLS token";
    case VIT_POOL_MEAN: return "mean of patches";
    case VIT_POOL_CLS_MEAN: return "[CLS ; mean of patches]";
    case VIT_POOL_MAP: return "attention pooling";
    }
    return "?";
}
