/* loader.h - what the files of engine/load/ that make vit_load share (model.c, arch.c,
 * names.c, layout.c, config.c, posembed.c): the loading context, the architecture read
 * from the shapes, the tensor slots (the roles of a layout) and their functions. Private to
 * engine/load/. */
#ifndef VIT_LOADER_H
#define VIT_LOADER_H

#include "internal.h"

#include <cJSON.h>
#include <stdint.h>

/* --- loading context ------------------------------------------------------- */

/* The tensors vit_load reads, one slot each: the roles a layout names (layout.c's
 * layout_roles[], where each slot has its role, timm's name of the tensor). */
/* clang-format off */
typedef enum {
    S_CLS, S_DIST, S_REG, S_POS, S_PATCH_W, S_PATCH_B,                        /* embeddings */
    S_NORM1_W, S_NORM1_B, S_QKV_W, S_QKV_B, S_Q_W, S_Q_B, S_K_W, S_K_B, S_V_W, S_V_B,
    S_PROJ_W, S_PROJ_B, S_LS1, S_NORM2_W, S_NORM2_B, S_FC1_W, S_FC1_B, S_FC2_W, S_FC2_B,
    S_LS2, S_FC1G_W, S_FC1G_B, S_MLP_NORM_W, S_MLP_NORM_B,                    /* block l */
    S_NORM_W, S_NORM_B, S_HEAD_W, S_HEAD_B, S_HDIST_W, S_HDIST_B,             /* norm, heads */
    S_FC_NORM_W, S_FC_NORM_B,                                                 /* pooled heads */
    S_NORM_PRE_W, S_NORM_PRE_B, S_IMG_PROJ_W, S_LOGIT_SCALE,                  /* CLIP */
    S_MAP_PROBE, S_MAP_IN_W, S_MAP_IN_B, S_MAP_OUT_W, S_MAP_OUT_B, S_MAP_LN_W, S_MAP_LN_B,
    S_MAP_FC1_W, S_MAP_FC1_B, S_MAP_FC2_W, S_MAP_FC2_B,                       /* SigLIP's MAP */
    N_SLOTS
} Slot;
/* clang-format on */

#define LD_NAME_BYTES 160 /* a tensor name, or a layout's pattern of one */

/* What config.json says (ld_parse_config). */
typedef struct {
    int n_heads, image_h, image_w;
    int crop_mode; /* 0: absent, else VitCropMode + 1 */
    float ln_eps, crop_pct, mean[3], std[3];
    int has_eps, has_crop, has_mean, has_std;
    int act;               /* 0: not given, else VitActivation + 1 (hidden_act, quick_gelu, a timm
                              architecture named *quickgelu*) */
    cJSON *labels;         /* array of strings, or object "0": "name" (detached copy) */
    int swiglu;            /* transformers' use_swiglu_ffn: true (DINOv2 ViT-g, refused) */
    int n_registers;       /* 0: not given, else num_register_tokens + 1 */
    char global_pool[16];  /* timm's "global_pool" ("token", "avg", ...), "" when not given */
    char architecture[64]; /* timm's "architecture" (e.g. "eva02_tiny_patch14_336"), cut to
                              63 bytes; "" when not given */
    float rope_theta;      /* transformers' DINOv3ViTConfig rope_theta, 0: not given */
    int gated;             /* use_gated_mlp (DINOv3ViTConfig; an early version's use_swiglu_ffn):
                              0 not given, 1 false, 2 true */
    int resample;          /* preprocessor_config.json's "resample" (PIL's filter): 0 not given,
                              2 bilinear (SigLIP 2's), 3 bicubic (CLIP's, SigLIP's) */
} CfgValues;

typedef struct {
    Vit *vit;
    StFile st;
    const char *fname; /* basename for messages */
    VitError *err;
    /* F16/BF16/unaligned tensors converted to F32 into vit->owned [vit->owned_floats], each
       once (ld_tensor): the first owned_used floats are taken; converted[i] is tensor i's
       copy (ld->st.tensors[i]), NULL until made. Sized by ld_alloc_converted, for the table
       ld->st holds then; the caller frees `converted` */
    size_t owned_used;
    const float **converted;
    /* config.json (read_config) */
    CfgValues cv;
    const char *cfg_file; /* the config read, or NULL */
    char cfg_path[1100];  /* the default one: config.json beside the weights */
    /* tensor names: the layout's pattern of each slot (layout.c), "" when it names none */
    char pat[N_SLOTS][LD_NAME_BYTES];
    char name[LD_NAME_BYTES]; /* the last slot_name */
    /* the layout (layout.c) applied: its name, file and switches */
    char layout_name[32]; /* VitConfig.layout */
    char layout_file[96]; /* for messages: the user's file, or "assets/layouts/x.json" */
    VitNaming naming;     /* whose conventions: the layout's "naming" */
    const char *what;     /* without a layout (engine/text/text.c): "CLIP text tower", for
                             ld_tensor's messages */
    int att_scale_dim;    /* scores scaled by 1/sqrt(D), not 1/sqrt(Dh) */
    int head_tanh;        /* Tanh after the head */
    int head_pool;        /* the layout's "pooling": VitPooling (VIT_POOL_CLS: its default) */
    int no_cls;           /* the layout's "class_token": false: no CLS token (SigLIP) */
    int mlp_act;          /* VitActivation */
    int resize_bilinear;  /* the layout's preprocessing resizes bilinearly */
    VitRope rope;         /* the layout's "rope": a rotary position embedding's kind */
    float rope_theta;     /* the layout's "rope_theta" (config.json's rope_theta wins) */
    int rope_ref;         /* the layout's "rope_ref_grid": EVA's reference grid side (16) */
    int glu_packed;       /* the layout's "glu_packed": fc1 may hold a gated MLP's gate and
                             value rows [2F, D] (timm's GluMlp, gate_last=False) */
    int crop_squash;      /* the layout's "preprocess" "crop_mode": "squash" (config.json's
                             crop_mode wins) */
    int default_size;     /* the layout's "preprocess" "crop", px: the input size of a model
                             with neither a position embedding nor config.json's image_size */
    int pos_antialias;    /* the position embedding resamples with antialiasing: the
                             layout's "position_antialias", else timm's naming (yes) or
                             transformers' (no) */
    char left_out[VIT_LEFT_OUT_BYTES]; /* VitConfig.left_out: a tensor the layout leaves out */
    int pth;                           /* the file is a PyTorch checkpoint */
    int layout_heads;                  /* H from per-head lists, or 0 */
    void *layout_owned;                /* the converted tensors (the Vit keeps them) */
    cJSON *layout_labels;              /* the layout's "labels" (a copy), used when C matches and
                                          config.json names none */
} Loader;

/* The architecture read from the tensor shapes (vit_load's infer_* steps), in
 * vit.h's symbols; int64_t as the header's shapes are, until checked. */
typedef struct {
    int64_t D, R, F;  /* width, register tokens, MLP width */
    int64_t A;        /* the attention's width H * Dh (queries' rows; D for timm's ViTs) */
    int has_cls;      /* a CLS token (0: SigLIP's towers, the layout's "class_token": false) */
    int has_dist, Np; /* distillation token; prefix tokens Np = has_cls + has_dist + R */
    int P;            /* patch px */
    int64_t Tp;       /* rows of the position embedding: Npos + gh0*gw0 */
    int Npos;         /* prefix tokens with a position embedding: Np or 0 */
    int64_t gh0, gw0; /* the training grid, the position embedding's */
    int64_t gh, gw;   /* the input grid */
    int L, H;         /* blocks, heads */
    int pool;         /* VitPooling: what the head reads */
    int gated;        /* a gated MLP: block 0 has a gate (fc1_g), or a packed fc1 */
    int packed;       /* the gated MLP's fc1 [2F, D] holds the gate's rows, then the value's
                         (timm's GluMlp, gate_last=False: EVA-02 Ti and S) */
    int mlp_norm;     /* the gated MLP has a sub-LN (mlp.norm [F]) before fc2 */
} Arch;

/* --- model.c: vit_load's first steps, shared with engine/text/text.c ---------------- */

/* Map the weights file (or read a PyTorch checkpoint's storages) into ld->st, the
 * mapping or storages held in ld->vit (vit_free releases them). Errors: VIT_ERR_IO,
 * VIT_ERR_FORMAT naming the file, VIT_ERR_NOMEM. */
VitStatus ld_map_file(Loader *ld, const char *path);
/* ld->vit->owned sized for every tensor of ld->st that ld_tensor must convert (F16, BF16,
 * unaligned), and ld->converted [ld->st.n] (the caller frees it; ld->st must not change
 * after). Errors: VIT_ERR_NOMEM, VIT_ERR_FORMAT (the sizes overflow). */
VitStatus ld_alloc_converted(Loader *ld);

/* --- names.c: tensors by name and by slot ------------------------------------------ */

/* Find `name`, check its dtype and shape against `shape` (ndim dims; -1 matches
 * any size and is filled in), check that every value is finite, return F32
 * data: in place, or converted once into ld->vit->owned (a tensor read for several roles,
 * or probed before it is bound, shares its one copy). NULL (with ld->err set) on error. */
const float *ld_tensor(Loader *ld, const char *name, int ndim, int64_t *shape);
/* Floats of F32 storage a tensor needs when it cannot be used in place (F16, BF16,
 * unaligned F32); 0 otherwise. */
size_t ld_needs_copy(const Loader *ld, const StTensor *t);
/* Name of slot s (block l) in the layout's names, into ld->name; NULL when the layout
 * names no such tensor. */
const char *ld_slot_name(Loader *ld, Slot s, int l);
int ld_has_slot(Loader *ld, Slot s, int l);
/* The layout names no tensor for slot s, which the model needs: VIT_ERR_SHAPE, the message
 * naming the layout, its file and the role. */
VitStatus ld_unnamed(Loader *ld, Slot s);
/* ld_tensor of slot s, of 1 or 2 dims, or any; NULL (ld->err set) on error. */
const float *ld_slot_tensor(Loader *ld, Slot s, int l, int ndim, int64_t *shape);
const float *ld_slot1(Loader *ld, Slot s, int l, int64_t n0);
const float *ld_slot2(Loader *ld, Slot s, int l, int64_t n0, int64_t n1);
/* An optional tensor: NULL without error when absent; *bad set on a real error. */
const float *ld_slot1_opt(Loader *ld, Slot s, int l, int64_t n0, int *bad);

/* F16 bits to float, exactly. */
float ld_half_to_float(uint16_t h);

/* --- layout.c: layouts as data ------------------------------------------------------- */

/* Name ld->st's tensors: the user's layout (a JSON file), or the first shipped layout that
 * matches (timm's, Hugging Face's, torchvision's, the notebooks'), gives each slot its
 * pattern (ld->pat) and its switches (into ld). Read in place when the tensors are as the
 * engine reads them; else converted, once, into the roles' names (ld->st replaced).
 * Errors: VIT_ERR_SHAPE naming the tensor and role nothing matched and listing the
 * tensors, or a variant the layout says vitlens lacks; VIT_ERR_FORMAT (a bad layout file
 * or dtype), VIT_ERR_NOMEM. */
VitStatus ld_apply_layout(Loader *ld, const char *user_layout);
/* Slot s's role: timm's name of the tensor ("blocks.{l}.norm1.weight"). */
const char *ld_role(Slot s);
/* Slot s's tensor `name` is not in ld->st: VIT_ERR_SHAPE, the message naming it, its role
 * and the layout, and listing the checkpoint's tensors. */
VitStatus ld_missing(Loader *ld, Slot s, const char *name);

/* --- config.c: config.json ------------------------------------------------------------ */

/* Read a whole file of at most max_bytes into *out (malloc'd, NUL-terminated, *n_out
 * bytes): 0, or -1 with errno set (EFBIG over the limit). */
int ld_read_file(const char *path, char **out, size_t *n_out, size_t max_bytes);
/* Parse config.json at path into cv (its labels a detached copy the caller frees with
 * cJSON_Delete). Errors: VIT_ERR_IO, VIT_ERR_FORMAT naming the key. */
VitStatus ld_parse_config(CfgValues *cv, const char *path, VitError *err);
/* The CLIP configs beside the weights (kind 0: Hugging Face's preprocessor_config.json,
 * 1: OpenCLIP's open_clip_config.json), into what cv does not hold yet: mean, std, the
 * crop, and (open_clip_config.json) the activation. Errors: VIT_ERR_IO, VIT_ERR_FORMAT
 * naming the key. */
VitStatus ld_parse_clip_config(CfgValues *cv, const char *path, int kind, VitError *err);
/* Fill vit->labels [C] from a label_names array or an id2label object. */
VitStatus ld_labels_from_json(Vit *vit, const cJSON *lab, const char *fname, VitError *err);

/* --- arch.c: the architecture from the shapes ------------------------------------------ */

/* Refuse the variants vitlens does not implement, then read the architecture into *a
 * and set ld->vit->cfg. */
VitStatus ld_infer_arch(Loader *ld, Arch *a, const VitLoadOptions *opt);

/* --- posembed.c ------------------------------------------------------------------------ */

/* out[Npos + gh*gw, D] from pos[Npos + gh0*gw0, D]: the prefix rows copied, the grid
 * resampled bicubically (antialias: timm's; else transformers'). 0 on out of memory. */
int ld_resample_pos_embed(float *out, const float *pos, int n_prefix, int gh0, int gw0, int gh,
                          int gw, int D, int antialias);

#endif
