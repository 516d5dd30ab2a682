/* vit/model.h - the model: its configuration, weights and vit_load. Part of vit.h, which
 * includes every part (and the overview: shapes, token order, the families loaded); include
 * that. */
#ifndef VIT_MODEL_H
#define VIT_MODEL_H

#include "vit/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Model */

/* How vit_preprocess fits a photo to the input size (timm's crop_mode). */
typedef enum {
    VIT_CROP_CENTER =
        0,          /* keep the aspect ratio, resize to cover floor(S / crop_pct), centre crop */
    VIT_CROP_SQUASH /* resize each side to floor(S / crop_pct), centre crop: with crop_pct 1
                       the whole photo is kept, its aspect ratio is not */
} VitCropMode;

/* The MLP's activation (a layout's "mlp_activation"). */
typedef enum {
    VIT_ACT_GELU = 0,  /* exact GELU, x Phi(x) (torch.nn.GELU(): timm, transformers, torchvision) */
    VIT_ACT_GELU_TANH, /* GELU's tanh approximation (nn.GELU(approximate='tanh')) */
    VIT_ACT_QUICK_GELU, /* x sigmoid(1.702 x) (OpenAI CLIP's QuickGELU) */
    VIT_ACT_RELU,       /* max(x, 0) */
    VIT_ACT_SILU        /* x sigmoid(x) (SiLU, Swish: the gate of DINOv3's SwiGLU MLP) */
} VitActivation;

/* The activation's name as the field writes it: "GELU", "GELU (tanh)", "QuickGELU",
 * "ReLU", "SiLU". Static string. */
const char *vit_activation_name(VitActivation a);

/* What the classifier head reads of the last block's output (VitConfig.head_pool), the
 * pooling of timm's VisionTransformer.pool / forward_head and of transformers'
 * classifiers. Every case: the final norm (if any) on the tokens it reads, the pooling,
 * fc_norm (if any), then the head (engine/passes/head.c, vit_head). */
typedef enum {
    VIT_POOL_CLS = 0,  /* the CLS token (timm global_pool 'token'; DeiT: and the distillation
                          token, for its own head): [D] */
    VIT_POOL_MEAN,     /* the mean of the patch tokens, prefix tokens (CLS, distillation,
                          registers) left out (timm global_pool 'avg', num_prefix_tokens:),
                          then fc_norm: timm's BEiT/EVA/MAE-style classifiers, whose final
                          norm is Identity: [D] */
    VIT_POOL_CLS_MEAN, /* [CLS ; mean of the patch tokens], both after the final norm
                          (transformers' Dinov2ForImageClassification,
                          Dinov2WithRegistersForImageClassification): [2D] */
    VIT_POOL_MAP       /* SigLIP's attention-pooling ("MAP") head (transformers'
                          SiglipMultiheadAttentionPoolingHead, big_vision's MAPHead): a learned
                          probe attends over the patch tokens after the final norm (H heads,
                          VitRun.probe_att), out_proj, then p = o + MLP(LayerNorm(o)): [D], the
                          image embedding (VitWeights.map) */
} VitPooling;

/* The pooling's name: "CLS token", "mean of patches", "[CLS ; mean of patches]",
 * "attention pooling". Static string. */
const char *vit_pooling_name(VitPooling p);

/* Whose conventions a checkpoint follows: its layout's "naming" (hf.json: Hugging Face
 * transformers'; every other shipped layout: timm's); VIT_NAMES_OPENAI: a CLIP text tower
 * in OpenAI's names (vit_text_load). */
typedef enum { VIT_NAMES_TIMM = 0, VIT_NAMES_HF, VIT_NAMES_OPENAI } VitNaming;

/* Rotary position embedding (RoPE, Su et al. 2021) on the queries and keys of the patch
 * tokens, in place of a learned position embedding. The prefix tokens (CLS, registers)
 * are not rotated. Each kind fixes which dimensions form a rotated pair and how a
 * patch's angles follow from its place in the grid; VitWeights.rope holds the angles'
 * cosines and sines for the input grid. */
typedef enum {
    VIT_ROPE_NONE = 0,
    VIT_ROPE_DINOV3 /* DINOv3 (Simeoni et al. 2025; transformers' DINOv3ViTRopePositionEmbedding,
                       timm's RotaryEmbeddingDinoV3): patch (i, j) of a gh x gw grid at
                       y = 2 (i + 0.5) / gh - 1, x = 2 (j + 0.5) / gw - 1 (each axis in (-1, 1),
                       whatever the input size); Fq = Dh / 4 periods theta^(f / Fq) (theta:
                       rope_theta, DINOv3 100); angle a[f] = 2 pi y / period_f and a[Fq + f]
                       = 2 pi x / period_f, f < Fq; rotate-half pairing: dimensions d and
                       d + Dh/2 are rotated by a[d] (u' = u cos a + rotate_half(u) sin a,
                       rotate_half(u) = [-u[Dh/2:], u[:Dh/2]]) */
    ,
    VIT_ROPE_EVA /* EVA-02 (Fang et al. 2023; timm's RotaryEmbeddingCat, rope_type 'cat',
                    apply_rot_embed_cat): patch (i, j) of a gh x gw grid at integer
                    coordinates scaled to the reference grid (rope_ref_h x rope_ref_w, the
                    pretraining grid: 16 x 16), y = i rh / gh, x = j rw / gw (no centring,
                    no normalisation); Fq = Dh / 4 frequencies b_f = theta^(-f / Fq) (theta
                    10000); angle a[f] = y b_f and a[Fq + f] = x b_f, f < Fq; interleaved
                    pairing: dimensions 2m and 2m + 1 are rotated by a[m] (u'_2m = u_2m cos
                    - u_2m+1 sin, u'_2m+1 = u_2m+1 cos + u_2m sin). Used beside a learned
                    position embedding */
} VitRope;

/* Everything the forward pass needs to know about a model's shapes and its
 * preprocessing. Inferred from tensor shapes, then config.json beside the
 * weights, then VitLoadOptions (later wins). */
typedef struct {
    char name[128];             /* file name without directory and extension */
    VitNaming naming;           /* timm's or Hugging Face's conventions (the layout's) */
    int image_h, image_w;       /* Sh, Sw: input px = P * (gh, gw) */
    int patch_size;             /* P, px */
    int grid_h, grid_w;         /* gh, gw */
    int n_patches;              /* N = gh * gw */
    int n_prefix;               /* Np = 1 + has_dist_token + n_registers; 0 without a CLS
                                   token (SigLIP: T = N, see the top of vit.h) */
    int has_dist_token;         /* 1: DeiT's distillation token, token 1 */
    int n_registers;            /* R: register tokens, tokens 1 + has_dist_token .. Np - 1 */
    int n_tokens;               /* T = Np + N */
    int pos_grid_h, pos_grid_w; /* grid of the stored position embedding (the training size);
                                   resampled to (gh, gw) at load when they differ */
    int dim;                    /* D */
    int n_heads;                /* H (default D / 64) */
    int head_dim;               /* Dh: D / H, or a notebook's per-head Linear(D, Dh) size
                                   (any; the attention's width A = H * Dh, e.g. seed 004's
                                   Linear(D, D) per head: A = H * D) */
    int mlp_dim;                /* F */
    int n_layers;               /* L */
    int n_classes;              /* C, 0 for a backbone without head */
    float ln_eps;               /* LayerNorm epsilon (timm: 1e-6, transformers: 1e-12) */
    VitCropMode crop_mode;      /* eval resize, see VitCropMode (timm: center) */
    float crop_pct;             /* eval resize to floor(S / crop_pct) per side (timm: 0.875) */
    int resize_bilinear;        /* 1: that resize is bilinear (torchvision's weights: Resize(256,
                                   BILINEAR)); 0: bicubic (timm) */
    float mean[3];              /* per-channel normalisation on [0, 1] pixels (ImageNet defaults) */
    float std[3];
    float att_scale;        /* the attention's scores are q.k * att_scale: 1/sqrt(Dh) (timm,
                               transformers, torchvision), or 1/sqrt(D) (some notebooks'
                               "C ** -0.5"); 0: 1/sqrt(Dh) */
    VitActivation mlp_act;  /* the MLP's activation (default exact GELU) */
    int head_tanh;          /* 1: logits = tanh(head(x)) (a notebook's Sequential(Linear,
                               Tanh)); the probabilities are their softmax */
    VitPooling head_pool;   /* what the head reads (VIT_POOL_CLS: the CLS token); its input
                               is vit_head_width(cfg) wide: D, or 2D for VIT_POOL_CLS_MEAN */
    char layout[32];        /* the layout that named the tensors (layout.c): its "name",
                               e.g. "timm", "hf", "torchvision", or a user's */
    int labels_assumed;     /* 1: the class names are the layout's list (the head its
                               models are published with, e.g. ImageNet-1k's for 1000
                               classes), not the checkpoint's own: the app says so */
    int default_preprocess; /* 1: a PyTorch checkpoint for which neither config.json nor the
                               layout gave the preprocessing: ImageNet's mean/std and timm's
                               crop are assumed (the app says so) */
    char left_out[VIT_LEFT_OUT_BYTES]; /* a part of the checkpoint the model opened without,
                               and why, or "": e.g. "tensor 'classifier.weight' left out:
                               Dinov2ForImageClassification's classifier over [CLS ; mean of
                               the patch tokens], ... opened as its backbone" (the layout's
                               "left_out"; the app says so where the head would be) */
    /* CLIP's image tower (issue 27; see "CLIP" in vit/text.h) */
    int norm_pre;      /* 1: a LayerNorm on the embedded tokens before the first block (CLIP's
                          ln_pre, transformers' pre_layrnorm, timm's norm_pre) */
    int embed_dim;     /* E: the image projection's output (CLIP: 512 for B/32 and B/16);
                          SigLIP: D, the MAP head's output (no projection: img_proj_w NULL);
                          0 without an image embedding */
    float logit_scale; /* exp() of the checkpoint's logit_scale (CLIP: 100), 0 when it has none */
    int clip;          /* 1: a CLIP image tower (its head is a text head, vit_set_text_head) */
    /* DINOv3 (issue 35) */
    VitRope rope;     /* rotary position embedding on the patches' queries and keys (DINOv3:
                         no learned position embedding then, pos_embed NULL; EVA-02: both), or
                         VIT_ROPE_NONE */
    float rope_theta; /* RoPE's base: config.json's rope_theta, else the layout's (DINOv3: 100,
                         EVA-02: 10000) */
    int rope_ref_h, rope_ref_w; /* VIT_ROPE_EVA: the reference grid the coordinates are scaled
                                   to (the layout's "rope_ref_grid": EVA-02 16 x 16); else 0 */
    int mlp_gated; /* 1: a gated MLP (SwiGLU): fc2(act(fc1_g(x)) * fc1(x)), act = mlp_act
                      (SiLU), fc1_g the gate (transformers' gate_proj, timm's fc1_g), fc1 the
                      value (up_proj, fc1_x); its hidden width F */
    int mlp_norm;  /* 1: a LayerNorm over the gated MLP's hidden F before fc2 (EVA-02 B/L's
                      sub-LN, timm's SwiGLU mlp.norm): fc2(norm(act(fc1_g x) * fc1 x)) */
} VitConfig;

/* The MLP's first layer's outputs per token: F, or 2F for a gated MLP (gate, then value). */
static inline int vit_mlp_in_width(const VitConfig *c) {
    return c->mlp_gated ? 2 * c->mlp_dim : c->mlp_dim;
}

/* A = H * Dh (units: floats per token), the attention's width: the columns of the queries, keys,
 * values and ctx, proj's input. D for timm's and transformers' ViTs; a notebook's per-head
 * Linear(D, Dh) lists may have any Dh (seed 004: Dh = D, A = H * D). */
static inline int vit_att_width(const VitConfig *c) {
    return c->n_heads * c->head_dim;
}

/* The classifier head's input width (units: floats): D, or 2D for [CLS ; mean of the
 * patches] (VIT_POOL_CLS_MEAN); head_w is [C, vit_head_width]. */
static inline int vit_head_width(const VitConfig *c) { /* MAP: D */
    return c->head_pool == VIT_POOL_CLS_MEAN ? 2 * c->dim : c->dim;
}

/* Weights of one transformer block; pointers to F32 data (into the mapping, or
 * owned converted copies). Linear weights are [out, in]. */
typedef struct {
    const float *norm1_w, *norm1_b; /* [D] */
    const float *qkv_w, *qkv_b;     /* [3A, D], [3A] when q, k, v lie back to back (timm's fused
                                       qkv: one GEMM), else NULL; A = H * Dh (D for timm's) */
    const float *q_w, *k_w, *v_w;   /* [A, D] each: rows of qkv_w, or transformers' separate
                                       query, key, value */
    const float *q_b, *k_b, *v_b;   /* [A] each, NULL without qkv bias */
    const float *proj_w, *proj_b;   /* [D, A], [D] */
    const float *ls1, *ls2;         /* [D] LayerScale gamma after attention / MLP, or NULL */
    const float *norm2_w, *norm2_b; /* [D] */
    const float *fc1_w, *fc1_b;     /* [F, D], [F]: the value of a gated MLP */
    const float *fc1g_w, *fc1g_b;   /* [F, D], [F]: a gated MLP's gate (cfg.mlp_gated), or NULL */
    const float *mlp_norm_w, *mlp_norm_b; /* [F] the sub-LN before fc2 (cfg.mlp_norm), or
                                             NULL */
    const float *fc2_w, *fc2_b;           /* [D, F], [D] */
    const float *rope;                    /* [N, Dh] the rotary table (VitWeights.rope, the same for
                                             every block), or NULL */
} VitBlock;

/* SigLIP's attention-pooling head (VIT_POOL_MAP), in transformers'
 * SiglipMultiheadAttentionPoolingHead names: vision_model.head.{probe,
 * attention.in_proj_weight/bias, attention.out_proj.*, layernorm.*, mlp.fc1.*, mlp.fc2.*}.
 * Its attention has the tower's H heads, its MLP the tower's F and activation, its
 * LayerNorm the tower's eps. */
typedef struct {
    const float *probe;         /* [D] (the file's [1, 1, D]) */
    const float *in_w, *in_b;   /* [3D, D], [3D]: rows q, then k, then v */
    const float *out_w, *out_b; /* [D, D], [D] */
    const float *ln_w, *ln_b;   /* [D] */
    const float *fc1_w, *fc1_b; /* [F, D], [F] */
    const float *fc2_w, *fc2_b; /* [D, F], [D] */
} VitProbeHead;

typedef struct {
    const float *cls_token;   /* [D], or NULL: no CLS token (SigLIP, n_prefix 0) */
    const float *dist_token;  /* [D] DeiT's distillation token, or NULL */
    const float *reg_token;   /* [R, D] register tokens, or NULL */
    const float *pos_embed;   /* [Npos + N, D] for the input grid (resampled when it is not the
                                 training grid); Npos = pos_prefix; NULL with DINOv3's rotary
                                 embedding (cfg.rope; EVA-02 has both) */
    const float *rope;        /* [N, Dh] per patch the cosines [Dh/2] then the sines [Dh/2] of
                                 its rotation angles (VitRope), for the input grid; NULL
                                 without cfg.rope */
    int pos_prefix;           /* Npos: prefix tokens with a position embedding, Np or 0 (timm
                                 no_embed_class: registers, DeiT III) */
    const float *patch_w;     /* [D, 3, P, P] (= [D, 3*P*P]) */
    const float *patch_b;     /* [D], or NULL: no bias (CLIP's conv1) */
    VitBlock *blocks;         /* [L], owned */
    const float *norm_w;      /* [D], or NULL: no final norm (timm's avg-pooled classifiers,
                                 whose norm is Identity and fc_norm follows the pooling) */
    const float *norm_b;      /* [D] */
    const float *fc_norm_w;   /* [D] the LayerNorm after the pooling (timm's fc_norm), or NULL */
    const float *fc_norm_b;   /* [D] */
    const float *head_w;      /* [C, W] (W = vit_head_width: D, or 2D), NULL when C == 0 */
    const float *head_b;      /* [C],    NULL when C == 0 */
    const float *head_dist_w; /* [C, D] the distillation token's head, or NULL */
    const float *head_dist_b; /* [C] */
    /* CLIP (cfg.norm_pre, cfg.embed_dim; see "CLIP" in vit/text.h) */
    const float *norm_pre_w, *norm_pre_b; /* [D] LayerNorm after the position embedding, or
                                             NULL */
    const float *img_proj_w;              /* [E, D] the image projection, a Linear without bias
                                             (OpenAI's visual.proj [D, E] is transposed at load), or
                                             NULL (SigLIP: the embedding is the pooled [D]) */
    const float *text_emb; /* [C, E] the text head's embeddings, unit rows (vit_set_text_head),
                              or NULL: head_w is the head */
    float text_scale;      /* the text head's logit scale */
    float text_bias;       /* added to the text head's logits (SigLIP's logit_bias), else 0 */
    int text_sigmoid;      /* 1: probs = sigmoid(logits) each (SigLIP, vit_set_text_sigmoid);
                              0: softmax over the classes */
    VitProbeHead map;      /* SigLIP's MAP head (cfg.head_pool VIT_POOL_MAP), else NULLs */
} VitWeights;

/* A loaded model. Zero-initialise before vit_load; vit_free accepts a zeroed or
 * half-built Vit. Read-only after vit_load, so several threads may run
 * forward passes on it, each with its own VitRun. */
typedef struct {
    VitConfig cfg;
    VitWeights w;
    char path[1024];                 /* the weights file */
    char (*labels)[VIT_LABEL_BYTES]; /* [C] class names from config.json (id2label), or NULL */
    /* private */
    void *map_addr; /* read-only mmap of the file */
    size_t map_bytes;
    void *data_owned;   /* a PyTorch checkpoint's storages, read from its zip */
    void *layout_owned; /* tensors a layout converted (layout.c) */
    float *owned;       /* F16/BF16/unaligned tensors converted to F32 */
    size_t owned_floats;
    float *pos_owned;  /* the position embedding resampled to the input grid */
    float *rope_owned; /* the rotary table (VitWeights.rope) */
    float *text_owned; /* the text head's embeddings (vit_set_text_head) */
    void *text_labels; /* the text head's labels (vit->labels points here), or NULL */
} Vit;

/* Options for vit_load; pass NULL for the defaults. */
typedef struct {
    int n_heads;             /* > 0: override the number of heads */
    const char *config_path; /* config.json to read; NULL: "config.json" beside the weights
                                (a missing default config is not an error) */
    int image_h, image_w;    /* > 0: run at this input size, px, each a multiple of P (the
                                position embedding is resampled); 0: the config's or training size */
    int whole_image;         /* 1: keep the whole photo: crop_mode squash, crop_pct 1 */
    const char *layout_path; /* a layout file (JSON, docs/your-own-vit.md) naming the
                                checkpoint's tensors, used whether the shipped ones match or
                                not; NULL: the first shipped layout (assets/layouts/: timm's,
                                transformers', torchvision's, the notebooks') that matches */
} VitLoadOptions;

/* Load a ViT: a .safetensors file, or a PyTorch checkpoint (a zip, told by its first
 * bytes: .pth, .pt, pytorch_model.bin), its tensors named by a layout (opt->layout_path,
 * else the first shipped one that matches: timm's, transformers', ...; see the top of
 * vit.h for the families; VIT_ERR_SHAPE naming the tensor, role and layout nothing
 * matched, with the checkpoint's tensors, or a variant the layout says is unsupported).
 * A checkpoint's data.pkl is read by pth.c's restricted unpickler (a state dict's
 * globals only; anything else refused by name, nothing called), its storages copied
 * out of the zip (VIT_ERR_FORMAT on a storage shorter than declared, a tensor past its
 * storage, a non-contiguous tensor, more storage than 16x
 * the file, the legacy format, a whole pickled model).
 * A .safetensors is memory-mapped read-only; validates the header (length inside the
 * file, JSON, dtypes F32/F16/BF16, offsets inside the data area and not
 * overlapping, size = prod(shape) * dtype size) and every tensor's shape
 * against the architecture inferred from the CLS token, position embedding,
 * patch embedding, blocks and heads. F16/BF16 are converted to F32. When the
 * input size is not the training size, the position embedding is resampled
 * into memory owned by vit (timm's conventions: F.interpolate bicubic, antialias=True
 * as resample_abs_pos_embed; a layout's "naming": "hf": antialias=False as
 * interpolate_pos_encoding; align_corners=False, computed in double).
 * Files over the limits above (header, tensors, config, L, D, F, P, T, C, and
 * the activations vit_run_init would allocate) are refused.
 * Errors: VIT_ERR_IO, VIT_ERR_FORMAT, VIT_ERR_SHAPE, VIT_ERR_NOMEM, VIT_ERR_ARG
 * (an input size that is not a multiple of P), with a message naming the file
 * and tensor. On error *vit is left freed (zeroed). Free with vit_free. */
VitStatus vit_load(Vit *vit, const char *path, const VitLoadOptions *opt, VitError *err);

/* Release everything vit_load made; leaves *vit zeroed. NULL-safe. */
void vit_free(Vit *vit);

#ifdef __cplusplus
}
#endif
#endif /* VIT_MODEL_H */
