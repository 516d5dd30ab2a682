/* model.c - vit_load and vit_free: map a .safetensors file, read config.json
 * (config.c), name the tensors by a layout (layout.c: timm's, transformers', ...), infer
 * the architecture from the shapes (arch.c), point the weights into the mapping (or the converted
 * copies), resample the position embedding for another input grid (posembed.c) and attach the class
 * names. loader.h holds what these files share: the Loader, the Arch, the tensor slots. */
#include "loader.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- vit_load's steps ------------------------------------------------------- */
/* Each returns VIT_OK, or a VitStatus with ld->err set; vit_load frees what they
 * leave in ld and vit. A NULL from ld_tensor() has set ld->err: they return its code. */

/* Map the weights file read-only and parse its safetensors header into ld->st; or read a
 * PyTorch checkpoint (pth.c) into ld->st, its storages then owned by the Vit. */
static VitStatus map_file(Loader *ld, const char *path) {
    Vit *vit = ld->vit;
    VitStatus rc = VIT_OK;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: %s", path,
                           S_ISDIR(sb.st_mode) ? "is a directory, not a weights file"
                                               : "not a regular file");
    } else if (sb.st_size == 0) {
        rc = vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: file is empty (0 bytes)", ld->fname);
    } else {
        vit->map_bytes = (size_t)sb.st_size;
        vit->map_addr = mmap(NULL, vit->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (vit->map_addr == MAP_FAILED) {
            vit->map_addr = NULL;
            rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
    }
    close(fd); /* the mapping outlives it */
    if (rc) return rc;
    const uint8_t *file = vit->map_addr;
    if (pth_is_legacy(file, vit->map_bytes))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: a PyTorch checkpoint in the legacy format (before PyTorch 1.6, "
                             "or _use_new_zipfile_serialization=False), which vitlens does not "
                             "read: in Python, torch.save(torch.load(path), \"model.pth\") "
                             "writes the current format (for a whole model, save "
                             "model.state_dict())",
                             ld->fname);
    if (!pth_is_zip(file, vit->map_bytes))
        return st_parse(&ld->st, file, vit->map_bytes, ld->fname, ld->err);
    /* a PyTorch checkpoint: its storages are read into memory, the mapping is not needed */
    ld->pth = 1;
    VitStatus prc = pth_parse(&ld->st, file, vit->map_bytes, ld->fname, ld->err);
    munmap(vit->map_addr, vit->map_bytes);
    vit->map_addr = NULL, vit->map_bytes = 0;
    if (prc) return prc;
    vit->data_owned = ld->st.owned; /* the weights point into it: the Vit keeps it */
    ld->st.owned = NULL;
    return VIT_OK;
}

/* Storage for the tensors that cannot be used in place (F16/BF16, unaligned
 * F32): ld_tensor() converts them to F32 into it. */
static VitStatus alloc_converted(Loader *ld) {
    Vit *vit = ld->vit;
    size_t n_owned = 0, n_bytes;
    for (int i = 0; i < ld->st.n; i++)
        if (!vit_size_add(&n_owned, n_owned, ld_needs_copy(ld, &ld->st.tensors[i]))) break;
    if (!n_owned) return VIT_OK;
    if (!vit_size_mul(&n_bytes, n_owned, sizeof(float)))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: the tensors to convert to F32 add up to more than memory holds",
                             ld->fname);
    vit->owned = malloc(n_bytes);
    ld->converted = calloc((size_t)ld->st.n, sizeof *ld->converted);
    if (!vit->owned || !ld->converted)
        return vit_set_error(ld->err, VIT_ERR_NOMEM,
                             "%s: out of memory converting %zu weights to F32", ld->fname, n_owned);
    vit->owned_floats = n_owned;
    return VIT_OK;
}

/* The two steps above for the CLIP text tower's loader (engine/text/text.c): the file
 * read as vit_load reads it, into ld->st, the storage held in ld->vit. */
VitStatus ld_map_file(Loader *ld, const char *path) {
    return map_file(ld, path);
}
VitStatus ld_alloc_converted(Loader *ld) {
    return alloc_converted(ld);
}

/* config.json into ld->cv: the options' path, or the one beside the weights when
 * there is one. */
static VitStatus read_config(Loader *ld, const char *path, const VitLoadOptions *opt) {
    ld->cfg_file = opt ? opt->config_path : NULL;
    if (!ld->cfg_file) {
        size_t dir = (size_t)(ld->fname - path);
        snprintf(ld->cfg_path, sizeof ld->cfg_path, "%.*sconfig.json", (int)dir, path);
        if (access(ld->cfg_path, F_OK) == 0) ld->cfg_file = ld->cfg_path;
    }
    return ld->cfg_file ? ld_parse_config(&ld->cv, ld->cfg_file, ld->err) : VIT_OK;
}

/* Block l's query, key and value: timm's fused qkv (rows q, k, v, A each) when the layout
 * names one, else separate query, key, value (transformers'; biases if qkv_bias). A: the
 * attention's width H * Dh (D but for a notebook's per-head lists, layout.c). */
static VitStatus bind_qkv(Loader *ld, VitBlock *b, int l, int64_t D, int64_t A) {
    int bad = 0;
    if (ld->pat[S_QKV_W][0]) {
        /* A and D are at most VIT_MAX_WIDTH (arch.c), but read from the file: checked */
        size_t A3, AD;
        if (A < 1 || D < 1 || !vit_size_mul(&A3, 3, (size_t)A) ||
            !vit_size_mul(&AD, (size_t)A, (size_t)D) || A3 > INT64_MAX)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: block %d: an attention of width %lld on an input of %lld",
                                 ld->fname, l, (long long)A, (long long)D);
        if (!(b->qkv_w = ld_slot2(ld, S_QKV_W, l, (int64_t)A3, D))) return ld->err->code;
        b->qkv_b = ld_slot1_opt(ld, S_QKV_B, l, (int64_t)A3, &bad);
        if (bad) return ld->err->code;
        b->q_w = b->qkv_w, b->k_w = b->qkv_w + AD, b->v_w = b->k_w + AD;
        if (b->qkv_b) {
            b->q_b = b->qkv_b, b->k_b = b->qkv_b + A, b->v_b = b->k_b + A;
            return VIT_OK;
        }
        /* timm's Eva (DINOv3, EVA-02): a fused weight, separate q_bias and v_bias, the key's
         * bias a zero buffer (k_b NULL: vit_qkv adds none) */
        b->q_b = ld_slot1_opt(ld, S_Q_B, l, A, &bad);
        b->k_b = ld_slot1_opt(ld, S_K_B, l, A, &bad);
        b->v_b = ld_slot1_opt(ld, S_V_B, l, A, &bad);
        if (bad) return ld->err->code;
        if (!b->q_b != !b->v_b)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: block %d has a bias for the %s but not for the %s", ld->fname,
                                 l, b->q_b ? "query" : "value", b->q_b ? "value" : "query");
        return VIT_OK;
    }
    if (!ld->pat[S_Q_W][0]) /* a user's layout, read in place */
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: layout '%s' (%s) names no tensor for the attention: the role "
                             "blocks.{l}.attn.qkv.weight (fused), or blocks.{l}.attn.q.weight "
                             "and its key and value (docs/your-own-vit.md)",
                             ld->fname, ld->layout_name, ld->layout_file);
    if (!(b->q_w = ld_slot2(ld, S_Q_W, l, A, D)) || !(b->k_w = ld_slot2(ld, S_K_W, l, A, D)) ||
        !(b->v_w = ld_slot2(ld, S_V_W, l, A, D)))
        return ld->err->code;
    b->q_b = ld_slot1_opt(ld, S_Q_B, l, A, &bad);
    b->k_b = ld_slot1_opt(ld, S_K_B, l, A, &bad);
    b->v_b = ld_slot1_opt(ld, S_V_B, l, A, &bad);
    if (bad) return ld->err->code;
    /* a key without bias beside a query and value with one (DINOv3's key_bias false) adds
     * nothing (k_b NULL); any other mix is a mistake */
    if (!b->q_b != !b->v_b || (b->k_b && !b->q_b))
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: block %d has biases for some of query, key, value but not all "
                             "(only the key's may be absent)",
                             ld->fname, l);
    return VIT_OK;
}

/* Block l's tensors, in the order of the block's forward pass (a->packed: a gated MLP's
 * fc1 [2F, D] read as the gate's rows, then the value's). */
static VitStatus bind_block(Loader *ld, VitBlock *b, int l, const Arch *a) {
    int64_t D = a->D, A = a->A, F = a->F, Fi = a->packed ? 2 * a->F : a->F;
    VitStatus rc;
    if (!(b->norm1_w = ld_slot1(ld, S_NORM1_W, l, D)) ||
        !(b->norm1_b = ld_slot1(ld, S_NORM1_B, l, D)))
        return ld->err->code;
    if ((rc = bind_qkv(ld, b, l, D, A))) return rc;
    if (!(b->proj_w = ld_slot2(ld, S_PROJ_W, l, D, A)) ||
        !(b->proj_b = ld_slot1(ld, S_PROJ_B, l, D)) ||
        !(b->norm2_w = ld_slot1(ld, S_NORM2_W, l, D)) ||
        !(b->norm2_b = ld_slot1(ld, S_NORM2_B, l, D)) ||
        !(b->fc1_w = ld_slot2(ld, S_FC1_W, l, Fi, D)) ||
        !(b->fc1_b = ld_slot1(ld, S_FC1_B, l, Fi)) ||
        !(b->fc2_w = ld_slot2(ld, S_FC2_W, l, D, F)) || !(b->fc2_b = ld_slot1(ld, S_FC2_B, l, D)))
        return ld->err->code;
    int bad = 0;
    if (a->packed) { /* timm GluMlp: x1, x2 = fc1(x).chunk(2); act(x1) * x2 */
        b->fc1g_w = b->fc1_w, b->fc1g_b = b->fc1_b;
        b->fc1_w += (size_t)F * D, b->fc1_b += F;
    } else if (ld->vit->cfg.mlp_gated && (!(b->fc1g_w = ld_slot2(ld, S_FC1G_W, l, F, D)) ||
                                          !(b->fc1g_b = ld_slot1(ld, S_FC1G_B, l, F)))) {
        return ld->err->code;
    }
    if (a->mlp_norm && (!(b->mlp_norm_w = ld_slot1(ld, S_MLP_NORM_W, l, F)) ||
                        !(b->mlp_norm_b = ld_slot1(ld, S_MLP_NORM_B, l, F))))
        return ld->err->code;
    b->rope = ld->vit->w.rope;
    b->ls1 = ld_slot1_opt(ld, S_LS1, l, D, &bad); /* LayerScale (DINOv2, DeiT III) */
    b->ls2 = ld_slot1_opt(ld, S_LS2, l, D, &bad);
    return bad ? ld->err->code : VIT_OK;
}

/* The classifier head [C, W] when there is one (C into vit->cfg; W = vit_head_width: D,
 * or 2D for [CLS ; mean]), and DeiT's distillation head beside it. */
static VitStatus bind_heads(Loader *ld, const Arch *a) {
    Vit *vit = ld->vit;
    VitWeights *w = &vit->w;
    int64_t D = a->D, sh[2] = {-1, vit_head_width(&vit->cfg)};
    if (!ld_has_slot(ld, S_HEAD_W, 0) && !ld_has_slot(ld, S_HEAD_B, 0)) return VIT_OK;
    if (!(w->head_w = ld_slot_tensor(ld, S_HEAD_W, 0, 2, sh))) return ld->err->code;
    if (sh[0] < 1 || sh[0] > VIT_MAX_CLASSES)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             sh[0] < 1 ? "%s: tensor '%s' has no classes"
                                       : "%s: tensor '%s': %lld classes, more than "
                                         "the limit of %d",
                             ld->fname, ld_slot_name(ld, S_HEAD_W, 0), (long long)sh[0],
                             VIT_MAX_CLASSES);
    vit->cfg.n_classes = (int)sh[0];
    if (!(w->head_b = ld_slot1(ld, S_HEAD_B, 0, sh[0]))) return ld->err->code;
    /* DeiT distilled: a second head on the distillation token */
    if (!ld_has_slot(ld, S_HDIST_W, 0) && !ld_has_slot(ld, S_HDIST_B, 0)) return VIT_OK;
    if (vit->cfg.head_pool != VIT_POOL_CLS)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is a distillation head beside a head that reads "
                             "the %s, not the CLS token: a combination vitlens does not know",
                             ld->fname, ld_slot_name(ld, S_HDIST_W, 0),
                             vit_pooling_name(vit->cfg.head_pool));
    if (!a->has_dist) { /* named by the one the checkpoint holds: a layout may name one */
        Slot s = ld_has_slot(ld, S_HDIST_W, 0) ? S_HDIST_W : S_HDIST_B;
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is a distillation head, but there is no "
                             "distillation token",
                             ld->fname, ld_slot_name(ld, s, 0));
    }
    if (!(w->head_dist_w = ld_slot2(ld, S_HDIST_W, 0, sh[0], D)) ||
        !(w->head_dist_b = ld_slot1(ld, S_HDIST_B, 0, sh[0])))
        return ld->err->code;
    return VIT_OK;
}

/* CLIP's parts (vit.h, "CLIP"): the LayerNorm before the blocks (ln_pre, timm's
 * norm_pre), the image projection [E, D] and the logit scale (stored as its log). */
static VitStatus bind_clip(Loader *ld, const Arch *a) {
    Vit *vit = ld->vit;
    VitWeights *w = &vit->w;
    VitConfig *c = &vit->cfg;
    int64_t D = a->D;
    int bad = 0;
    w->norm_pre_w = ld_slot1_opt(ld, S_NORM_PRE_W, 0, D, &bad);
    w->norm_pre_b = ld_slot1_opt(ld, S_NORM_PRE_B, 0, D, &bad);
    if (bad) return ld->err->code;
    if (!w->norm_pre_w != !w->norm_pre_b)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: the norm before the blocks (norm_pre / ln_pre) has %s but not "
                             "its %s",
                             ld->fname, w->norm_pre_w ? "a weight" : "a bias",
                             w->norm_pre_w ? "bias" : "weight");
    c->norm_pre = w->norm_pre_w != NULL;
    if (ld_has_slot(ld, S_IMG_PROJ_W, 0)) {
        int64_t sh[2] = {-1, D};
        if (!(w->img_proj_w = ld_slot_tensor(ld, S_IMG_PROJ_W, 0, 2, sh))) return ld->err->code;
        if (sh[0] < 1 || sh[0] > VIT_MAX_WIDTH)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: the image projection has %lld outputs, expected 1 to %d",
                                 ld->fname, (long long)sh[0], VIT_MAX_WIDTH);
        c->embed_dim = (int)sh[0];
        c->clip = 1;
    }
    if (ld_has_slot(ld, S_LOGIT_SCALE, 0)) {
        const StTensor *t = st_find(&ld->st, ld_slot_name(ld, S_LOGIT_SCALE, 0));
        int64_t sh[1] = {1};
        const float *v = t->ndim == 0 ? ld_tensor(ld, t->name, 0, sh)
                                      : ld_slot_tensor(ld, S_LOGIT_SCALE, 0, 1, sh);
        if (!v) return ld->err->code;
        /* CLIP's model.py: logit_scale.exp(); trained to ln(100), clamped there */
        if (!(*v > -30.0f && *v < 30.0f))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: tensor '%s' is %g: expected the log of a scale, in "
                                 "(-30, 30) (CLIP: ln 100 = 4.605)",
                                 ld->fname, t->name, (double)*v);
        c->logit_scale = expf(*v);
    }
    return VIT_OK;
}

/* SigLIP's attention-pooling head (VIT_POOL_MAP, VitProbeHead): the probe [1, 1, D],
 * nn.MultiheadAttention's packed in_proj [3D, D] (q; k; v) and out_proj, the LayerNorm and
 * the MLP (the tower's F: SiglipMLP(config) both). Its output is the image embedding: E = D,
 * no projection (SiglipVisionTransformer's pooler_output is SiglipModel's image_embeds). */
static VitStatus bind_map(Loader *ld, const Arch *a) {
    Vit *vit = ld->vit;
    VitProbeHead *m = &vit->w.map;
    VitConfig *c = &vit->cfg;
    int64_t D = a->D, F = a->F;
    if (c->head_pool != VIT_POOL_MAP) return VIT_OK;
    if (a->A != D)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: an attention of width %lld on a width of %lld beside an "
                             "attention-pooling head: a combination vitlens does not know",
                             ld->fname, (long long)a->A, (long long)D);
    if (!(m->probe = ld_slot_tensor(ld, S_MAP_PROBE, 0, 3, (int64_t[3]){1, 1, D})) ||
        !(m->in_w = ld_slot2(ld, S_MAP_IN_W, 0, 3 * D, D)) ||
        !(m->in_b = ld_slot1(ld, S_MAP_IN_B, 0, 3 * D)) ||
        !(m->out_w = ld_slot2(ld, S_MAP_OUT_W, 0, D, D)) ||
        !(m->out_b = ld_slot1(ld, S_MAP_OUT_B, 0, D)) ||
        !(m->ln_w = ld_slot1(ld, S_MAP_LN_W, 0, D)) ||
        !(m->ln_b = ld_slot1(ld, S_MAP_LN_B, 0, D)) ||
        !(m->fc1_w = ld_slot2(ld, S_MAP_FC1_W, 0, F, D)) ||
        !(m->fc1_b = ld_slot1(ld, S_MAP_FC1_B, 0, F)) ||
        !(m->fc2_w = ld_slot2(ld, S_MAP_FC2_W, 0, D, F)) ||
        !(m->fc2_b = ld_slot1(ld, S_MAP_FC2_B, 0, D)))
        return ld->err->code;
    c->embed_dim = (int)D;
    c->clip = 1; /* its head is a text head (vit_set_text_head) */
    return VIT_OK;
}

/* The rotary table vit->w.rope [N, Dh] of the input grid (VitRope): per patch (i, j) the
 * cosines, then the sines, of its Dh/2 angles, computed in double (transformers and timm
 * compute them in float32: the difference is float rounding). EVA-02:
 *   timm build_fourier_pos_embed(in_pixels=False): bands = 1 / theta ** (arange(Dh/4) /
 *     (Dh/4)); t = arange(g) / g * ref (per axis); angles = [t_y * bands, t_x * bands],
 *     repeat_interleave(2): pair (2m, 2m + 1) shares angle m
 * DINOv3:
 *   transformers: inv_freq = 1 / base ** arange(0, 1, 4 / head_dim)   (Dh/4 of them)
 *     coords = 2 * ((i + 0.5) / gh, (j + 0.5) / gw) - 1;  angles = 2 pi coords[:, :, None]
 *     * inv_freq: [y angles, x angles] (flatten), tile(2): dimensions d and d + Dh/2 share
 *     angle d */
static VitStatus make_rope(Loader *ld) {
    Vit *vit = ld->vit;
    VitConfig *c = &vit->cfg;
    if (!c->rope) return VIT_OK;
    int Dh = c->head_dim, gh = c->grid_h, gw = c->grid_w, Fq = Dh / 4;
    if (Dh % 4)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: head size %d: %s rotary embedding needs a multiple of 4 "
                             "(Dh/4 frequencies per axis)",
                             ld->fname, Dh, c->rope == VIT_ROPE_EVA ? "EVA-02's" : "DINOv3's");
    size_t n;
    if (!vit_size_mul(&n, (size_t)c->n_patches, (size_t)Dh) ||
        !(vit->rope_owned = malloc(n * sizeof(float))))
        return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory for the rotary table",
                             ld->fname);
    const double two_pi = 6.283185307179586477;
    if (c->rope == VIT_ROPE_EVA) {
        for (int i = 0; i < gh; i++)
            for (int j = 0; j < gw; j++) {
                double y = (double)i * c->rope_ref_h / gh, x = (double)j * c->rope_ref_w / gw;
                float *row = vit->rope_owned + ((size_t)i * gw + j) * Dh;
                for (int f = 0; f < Fq; f++) {
                    double band = pow((double)c->rope_theta, -(double)f / Fq);
                    double ay = y * band, ax = x * band;
                    row[f] = (float)cos(ay), row[Dh / 2 + f] = (float)sin(ay);
                    row[Fq + f] = (float)cos(ax), row[Dh / 2 + Fq + f] = (float)sin(ax);
                }
            }
        vit->w.rope = vit->rope_owned;
        return VIT_OK;
    }
    for (int i = 0; i < gh; i++)
        for (int j = 0; j < gw; j++) {
            double y = 2.0 * (i + 0.5) / gh - 1.0, x = 2.0 * (j + 0.5) / gw - 1.0;
            float *row = vit->rope_owned + ((size_t)i * gw + j) * Dh;
            for (int f = 0; f < Fq; f++) {
                double period = pow((double)c->rope_theta, (double)f / Fq);
                double ay = two_pi * y / period, ax = two_pi * x / period;
                row[f] = (float)cos(ay), row[Dh / 2 + f] = (float)sin(ay);
                row[Fq + f] = (float)cos(ax), row[Dh / 2 + Fq + f] = (float)sin(ax);
            }
        }
    vit->w.rope = vit->rope_owned;
    return VIT_OK;
}

/* Every tensor into vit->w, its shape checked against the architecture and its
 * values finite; F16/BF16 and unaligned F32 converted into vit->owned. */
static VitStatus bind_weights(Loader *ld, const Arch *a) {
    VitWeights *w = &ld->vit->w;
    int64_t D = a->D;
    VitStatus rc;
    w->blocks = calloc((size_t)a->L, sizeof *w->blocks);
    if (!w->blocks) return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", ld->fname);
    if ((a->has_cls && !(w->cls_token = ld_slot_tensor(ld, S_CLS, 0, 3, (int64_t[3]){1, 1, D}))) ||
        (a->has_dist &&
         !(w->dist_token = ld_slot_tensor(ld, S_DIST, 0, 3, (int64_t[3]){1, 1, D}))) ||
        (a->R && !(w->reg_token = ld_slot_tensor(ld, S_REG, 0, 3, (int64_t[3]){1, a->R, D}))) ||
        (a->Tp && !(w->pos_embed = ld_slot_tensor(ld, S_POS, 0, 3, (int64_t[3]){1, a->Tp, D}))))
        return ld->err->code;
    w->pos_prefix = a->Npos;
    int bad = 0;
    if (!(w->patch_w = ld_slot_tensor(ld, S_PATCH_W, 0, 4, (int64_t[4]){D, 3, a->P, a->P})))
        return ld->err->code;
    w->patch_b = ld_slot1_opt(ld, S_PATCH_B, 0, D, &bad); /* CLIP's conv1: none */
    if (bad) return ld->err->code;
    if ((rc = bind_clip(ld, a))) return rc;
    if ((rc = make_rope(ld))) return rc;
    for (int l = 0; l < a->L; l++)
        if ((rc = bind_block(ld, &w->blocks[l], l, a))) return rc;
    /* timm's fc_norm after an average pooling; the final norm is then an Identity (absent) */
    w->fc_norm_w = ld_slot1_opt(ld, S_FC_NORM_W, 0, D, &bad);
    w->fc_norm_b = ld_slot1_opt(ld, S_FC_NORM_B, 0, D, &bad);
    if (bad) return ld->err->code;
    if (!w->fc_norm_w != !w->fc_norm_b)
        return vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' (fc_norm) without its %s",
                             ld->fname,
                             ld_slot_name(ld, w->fc_norm_w ? S_FC_NORM_W : S_FC_NORM_B, 0),
                             w->fc_norm_w ? "bias" : "weight");
    if (w->fc_norm_w && ld->vit->cfg.head_pool == VIT_POOL_CLS_MEAN)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' (fc_norm, [D]) beside a head that reads [CLS ; "
                             "mean of the patches] (2D wide): a combination vitlens does not know",
                             ld->fname, ld_slot_name(ld, S_FC_NORM_W, 0));
    if (!w->fc_norm_w || ld_has_slot(ld, S_NORM_W, 0) || ld_has_slot(ld, S_NORM_B, 0))
        if (!(w->norm_w = ld_slot1(ld, S_NORM_W, 0, D)) ||
            !(w->norm_b = ld_slot1(ld, S_NORM_B, 0, D)))
            return ld->err->code;
    if ((rc = bind_map(ld, a))) return rc;
    return bind_heads(ld, a);
}

/* A few MB of pos_embed can declare a model whose forward pass would need
 * terabytes: refuse it here rather than in vit_run_init or the allocator. */
static VitStatus check_activations(const Loader *ld) {
    const VitConfig *c = &ld->vit->cfg;
    size_t act = 0;
    if (vit_run_floats(c, 1, 1, &act) && act <= VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return VIT_OK;
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: one forward pass would need %.1f GiB of activations (the "
                         "attention kept for the maps is L*H*T*T = %d*%d*%d*%d floats), more "
                         "than the limit of %.0f GiB",
                         ld->fname, (double)act * sizeof(float) / (1u << 30), c->n_layers,
                         c->n_heads, c->n_tokens, c->n_tokens,
                         (double)VIT_MAX_ACTIVATION_BYTES / (1u << 30));
}

/* Another input grid than the training one: resample the position embedding
 * into vit->pos_owned. */
static VitStatus fit_pos_embed(Loader *ld) {
    Vit *vit = ld->vit;
    const VitConfig *c = &vit->cfg;
    VitWeights *w = &vit->w;
    if (!w->pos_embed || (c->grid_h == c->pos_grid_h && c->grid_w == c->pos_grid_w)) return VIT_OK;
    size_t rows, n;
    if (vit_size_add(&rows, (size_t)w->pos_prefix, (size_t)c->n_patches) &&
        vit_size_mul(&n, rows, (size_t)c->dim) && vit_size_mul(&n, n, sizeof(float)))
        vit->pos_owned = malloc(n);
    if (!vit->pos_owned ||
        !ld_resample_pos_embed(vit->pos_owned, w->pos_embed, w->pos_prefix, c->pos_grid_h,
                               c->pos_grid_w, c->grid_h, c->grid_w, c->dim, ld->pos_antialias))
        return vit_set_error(ld->err, VIT_ERR_NOMEM,
                             "%s: out of memory resampling the position embedding", ld->fname);
    w->pos_embed = vit->pos_owned;
    return VIT_OK;
}

/* Class names from config.json, else the layout's when their number is the head's, for a
 * model with a classifier head. */
static VitStatus attach_labels(Loader *ld) {
    int C = ld->vit->cfg.n_classes;
    if (!C) return VIT_OK;
    if (ld->cv.labels)
        return ld_labels_from_json(ld->vit, ld->cv.labels,
                                   ld->cfg_file ? vit_basename(ld->cfg_file) : "config", ld->err);
    if (ld->layout_labels && cJSON_GetArraySize(ld->layout_labels) == C) {
        ld->vit->cfg.labels_assumed = 1;
        return ld_labels_from_json(ld->vit, ld->layout_labels, ld->layout_name, ld->err);
    }
    return VIT_OK;
}

/* --- entry points ---------------------------------------------------------- */

VitStatus vit_load(Vit *vit, const char *path, const VitLoadOptions *opt, VitError *err) {
    memset(vit, 0, sizeof *vit);
    VitError local;
    if (!err) err = &local;
    Loader ld = {.vit = vit, .fname = vit_basename(path), .err = err};
    Arch a = {0};
    VitStatus rc;

    snprintf(vit->path, sizeof vit->path, "%s", path);
    if ((rc = map_file(&ld, path))) goto fail;
    if ((rc = read_config(&ld, path, opt))) goto fail;
    /* the layout that names the tensors (layout.c): timm's, transformers', ... */
    if ((rc = ld_apply_layout(&ld, opt ? opt->layout_path : NULL))) goto fail;
    vit->layout_owned = ld.layout_owned; /* the tensors a layout converted */
    if ((rc = alloc_converted(&ld))) goto fail;
    /* the architecture from the tensor shapes, config.json and the options */
    if ((rc = ld_infer_arch(&ld, &a, opt))) goto fail;
    /* the weights */
    if ((rc = bind_weights(&ld, &a))) goto fail;
    if ((rc = check_activations(&ld))) goto fail;
    if ((rc = fit_pos_embed(&ld))) goto fail;
    rc = attach_labels(&ld);

fail: /* and success: the header table and config.json's values are not kept */
    free(ld.converted);
    cJSON_Delete(ld.cv.labels);
    cJSON_Delete(ld.layout_labels);
    st_free(&ld.st);
    if (rc) vit_free(vit);
    return rc;
}

void vit_free(Vit *vit) {
    if (!vit) return;
    if (vit->map_addr) munmap(vit->map_addr, vit->map_bytes);
    free(vit->owned);
    free(vit->data_owned);
    free(vit->layout_owned);
    free(vit->pos_owned);
    free(vit->rope_owned);
    free(vit->w.blocks);
    if ((void *)vit->labels != vit->text_labels) free(vit->labels);
    free(vit->text_owned);
    free(vit->text_labels);
    memset(vit, 0, sizeof *vit);
}
