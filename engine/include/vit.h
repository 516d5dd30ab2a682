/* vit.h - the vitlens engine: load a Vision Transformer, run it on a photo,
 * keep every attention matrix, and turn them into maps over the patch grid.
 *
 * No SDL, no GL, no printing: every call returns a VitStatus and, when given a
 * VitError, a message that names the file and what is wrong.
 *
 * Typical use:
 *
 *     Vit vit = {0}; VitRun run = {0}; VitImage img = {0}; VitError err;
 *     if (vit_load(&vit, "deit.safetensors", NULL, &err)) { puts(err.msg); ... }
 *     vit_run_init(&run, &vit, &err);
 *     vit_image_load(&img, "cat.png", &err);
 *     vit_preprocess(run.input, NULL, NULL, NULL, NULL, &vit.cfg, &img, &err);
 *     vit_forward(&run, &vit);
 *     float map[vit.cfg.n_patches];
 *     vit_map_attention(map, &run, 11, 0, 0, NULL);      // layer 12, head 1, CLS
 *     vit_image_free(&img); vit_run_free(&run); vit_free(&vit);
 *
 * Shapes (row-major, PyTorch's layout; linear weights are [out, in]):
 *   Sh, Sw  input height, width in px (Sh = P * gh)      P  patch side in px
 *   gh, gw  patch grid rows, columns                    N  = gh * gw patches
 *   Np number of prefix tokens: the CLS token, DeiT's distillation token,
 *      register tokens                                  T  = Np + N tokens
 *   R  register tokens   D width   H heads   Dh head size (D / H but for a notebook's
 *   per-head Linear(D, Dh) lists)   A = H * Dh the attention's width   F MLP width
 *   L  layers   C classes
 * Token order is timm's: [CLS, dist?, reg_0 .. reg_{R-1}, patch(0,0), patch(0,1),
 * ..., patch(gh-1,gw-1)]. A "map" is a float array [gh, gw] over the patches,
 * row-major; what goes to the prefix tokens is read apart (vit_prefix_share).
 *
 * The architecture is timm's VisionTransformer (vision_transformer.py): pre-norm
 * blocks, exact (erf) GELU, learned position embedding, final LayerNorm,
 * classification from the CLS token. Also loaded, each tested against a
 * PyTorch reference of its family (tests/parity):
 *   - timm's names, and Hugging Face transformers' ViTModel,
 *     ViTForImageClassification, DeiTForImageClassification(WithTeacher)
 *     (separate query/key/value; config.json gives eps, heads, size, labels);
 *   - DeiT's distillation token (the prediction averages the CLS and
 *     distillation heads, as timm and transformers do);
 *   - register tokens (timm vit_*_reg4_dinov2: inserted after the position
 *     embedding, which they do not have);
 *   - LayerScale (ls1/ls2 gamma: DINOv2, DeiT III);
 *   - any input size, square or not, with the position embedding resampled
 *     bicubically as the checkpoint's library does (timm: resample_abs_pos_embed,
 *     antialiased; transformers: interpolate_pos_encoding, not antialiased).
 *   - PyTorch checkpoints (torch.save's zip, engine/load/pth.c: a restricted
 *     unpickler, nothing in the file is run);
 *   - every checkpoint's tensor names through a layout (JSON, engine/load/layout.c),
 *     the shipped ones in assets/layouts/, tried in this order: timm.json (timm's
 *     names), hf.json (transformers': "vit." / "deit." / no prefix; "naming": "hf"
 *     for its conventions), torchvision.json (torchvision's ViTs),
 *     notebook-heads.json, notebook-linear.json, notebook-msa.json (the notebooks'
 *     ViTs); a user's own with VitLoadOptions.layout_path (timm.json is the template
 *     to copy). Read in place, or converted at load into the layout above; what a
 *     conversion cannot express is in VitConfig: the attention's scale
 *     (att_scale), the MLP's activation (mlp_act), a Tanh after the head.
 *   - CLIP's image tower (norm_pre, an image projection, a text head: see "CLIP"
 *     at the end of this file).
 *   - pooled heads (VitConfig.head_pool): timm's average pooling with fc_norm (BEiT/EVA/
 *     MAE-style classifiers), transformers' Dinov2ForImageClassification ([CLS ; mean]).
 *   - DINOv3 (transformers' DINOv3ViTModel, timm's vit_*_patch16_dinov3): a rotary
 *     position embedding (VitRope) instead of a learned one, 4 registers, LayerScale, no
 *     key bias, and in the larger models a SwiGLU MLP (VitConfig.mlp_gated).
 *   - EVA-02 (timm's eva02_*: the Eva class, eva.py): a learned position embedding and
 *     EVA's rotary one (VIT_ROPE_EVA), q/v biases without a key bias, a SwiGLU MLP (fc1
 *     packed [gate; value] in Ti and S; fc1_g, fc1_x and a LayerNorm over the hidden
 *     before fc2 in B and L: VitConfig.mlp_norm), average pooling with fc_norm.
 *   - SigLIP and SigLIP 2's image tower (transformers' SiglipModel / SiglipVisionModel,
 *     vision_model.*; assets/layouts/siglip-hf.json): NO CLS token, an attention-pooling
 *     head (VIT_POOL_MAP: a probe's attention over the patches, then LayerNorm + MLP),
 *     whose output is the image embedding (E = D, no projection) and, with a text head,
 *     sigmoid scores (vit_set_text_sigmoid). SigLIP 2's text tower is SigLIP's with 256 000
 *     token embeddings (vit_text_load), read with Gemma's tokenizer (vit_tokenizer_load).
 * Models without a CLS token (SigLIP). The token layout is then the patches alone:
 * n_prefix = 0, T = N, token t is patch t; nothing is invented in the CLS's place, so
 * every map of the attention between tokens is the model's own. A map's `query` is a
 * token (a patch: no query reads "the CLS token"); where the model looks when it pools is
 * the probe's attention, VitRun.probe_att [H, N] (the app's "probe" map kind). The
 * class-specific maps that end at the CLS row (Chefer, gradient rollout) end at the
 * probe's instead (vit_explain); Grad-CAM, LeGrad, AttnLRP and gradient x input read all
 * the patches anyway.
 * Not supported, refused with a message: DINOv2 ViT-g's SwiGLU MLP, timm's ViTs without a
 * CLS token (class_token=False, the *_gap_* models), timm's own SigLIP towers
 * (attn_pool.*), SigLIP 2's NaFlex models (Siglip2Model), EVA-CLIP's towers, q/k norm.
 */
#ifndef VIT_H
#define VIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Errors */

typedef enum {
    VIT_OK = 0,
    VIT_ERR_IO,       /* cannot open/read/map a file */
    VIT_ERR_FORMAT,   /* malformed .safetensors / JSON / labels */
    VIT_ERR_SHAPE,    /* tensor missing or shapes inconsistent with the architecture */
    VIT_ERR_NOMEM,    /* allocation failed or a size would overflow */
    VIT_ERR_ARG,      /* bad argument (out-of-range layer, head, ...) */
    VIT_ERR_IMAGE,    /* not a decodable image, or too large */
    VIT_ERR_CANCELLED /* stopped early by the caller (VitControl): the outputs are undefined */
} VitStatus;

typedef struct {
    VitStatus code;
    char msg[512]; /* "file: what is wrong (got X, expected Y)" */
} VitError;

/* Short name of a status, e.g. "format". Static string. */
const char *vit_status_name(VitStatus s);

/* Text from a file made safe to print on a terminal: `in` copied into out [cap bytes,
 * NUL-terminated] with every byte a terminal would act on written as \xNN: the C0
 * controls (ESC, BEL, CR, newline, ...), DEL, the C1 controls in UTF-8 (U+0080 to
 * U+009F: CSI is U+009B) and every byte that is not part of valid UTF-8; a backslash
 * stays one. Valid UTF-8 text is kept as it is. Cut before an escape that would not fit,
 * never inside one or inside a character. Returns out. Every VitError message passes
 * through it (names from a checkpoint are in them), and so do the labels a model brings. */
char *vit_escape(char *out, size_t cap, const char *in);

/* err (if not NULL) filled with code and a printf-style message passed through vit_escape
 * (a file's name in it cannot move the terminal); returns code. The engine's and the app's
 * one way to report an error. */
VitStatus vit_set_error(VitError *err, VitStatus code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---------------------------------------------------------------------------
 * Limits. A file is checked against these before anything sized by it is
 * allocated, and refused with a message naming the limit. Each is far above
 * any real ViT, so that only a broken or hostile file meets one; the numbers
 * and the cases behind them are in docs/malformed-inputs.md. */

/* safetensors JSON header. DeiT-Tiny's is 14 KB (153 tensors, ~92 bytes each);
 * 8 MiB holds VIT_MAX_TENSORS entries of 128 bytes. The limit bounds cJSON too,
 * which needs up to 40 bytes of nodes per header byte (a header of "[0,0,...]"):
 * at most 320 MiB. */
#define VIT_MAX_HEADER_BYTES (8u << 20)
#define VIT_MAX_TENSORS      65536 /* header entries; a 256-block ViT uses 3080 */
/* config.json. ImageNet-21k's 21843 label names take ~1 MB; cJSON at most 160 MiB. */
#define VIT_MAX_CONFIG_BYTES (4u << 20)
#define VIT_MAX_LABEL_LINE   4096 /* bytes per line of a labels file, newline and NUL included */
/* Decoded width * height: 300 MB of RGB. A 100-megapixel photo passes; Pillow
 * warns from 89 M pixels ("decompression bomb"). */
#define VIT_MAX_IMAGE_PIXELS (100u * 1000u * 1000u)
/* Architecture, from the tensor shapes. */
#define VIT_MAX_LAYERS  256   /* L */
#define VIT_MAX_WIDTH   65536 /* D and F (ViT-22B: D 6144, F 24576) */
#define VIT_MAX_PATCH   1024  /* P, px */
#define VIT_MAX_PATCHES 65536 /* N: a 256 x 256 patch grid */
#define VIT_MAX_PREFIX  16    /* Np: the CLS token, distillation and register tokens */
#define VIT_MAX_TOKENS  (VIT_MAX_PREFIX + VIT_MAX_PATCHES) /* T */
#define VIT_MAX_CLASSES (1 << 20)                          /* C (ImageNet-21k: 21843) */
#define VIT_MAX_INPUT   16384                              /* Sh, Sw in px (VitLoadOptions) */
/* One forward pass's buffers (vit_run_init) with the attention kept for the
 * maps, L*H*T*T floats: DeiT-Base 21 MiB, ViT-L/16 at 384 px 0.5 GiB. A small
 * file can declare a model whose pass would need terabytes; vit_load refuses it.
 * The limit holds for the full size even when the run keeps only queries and
 * keys (VIT_ATT_RECOMPUTE): it bounds what VIT_ATT_KEEP would allocate and the
 * [T, T] a rollout recomputes per layer. */
#define VIT_MAX_ACTIVATION_BYTES (4ull << 30)
#define VIT_LABEL_BYTES          96  /* per label, including the NUL (longer names are cut) */
#define VIT_LEFT_OUT_BYTES       256 /* VitConfig.left_out, including the NUL */

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
                                   token (SigLIP: T = N, see the top of this file) */
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
    int default_preprocess; /* 1: a PyTorch checkpoint for which neither config.json nor the
                               layout gave the preprocessing: ImageNet's mean/std and timm's
                               crop are assumed (the app says so) */
    char left_out[VIT_LEFT_OUT_BYTES]; /* a part of the checkpoint the model opened without,
                               and why, or "": e.g. "tensor 'classifier.weight' left out:
                               Dinov2ForImageClassification's classifier over [CLS ; mean of
                               the patch tokens], ... opened as its backbone" (the layout's
                               "left_out"; the app says so where the head would be) */
    /* CLIP's image tower (issue 27; see "CLIP" at the end of this file) */
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
    /* CLIP (cfg.norm_pre, cfg.embed_dim; see "CLIP" at the end of this file) */
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
 * this file for the families; VIT_ERR_SHAPE naming the tensor, role and layout nothing
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

/* ---------------------------------------------------------------------------
 * Forward pass
 *
 * Memory. The maps read every layer's attention. Kept whole it is L*H*T*T
 * floats: DeiT-Small 7 MiB, ViT-B/16 22 MiB, but DINOv2 ViT-L/14 at 518 px
 * (T = 1370) 2.9 GB, more than its weights. Above VIT_ATT_KEEP_MAX_BYTES (or
 * when asked, VitRunOptions.att) the run keeps each layer's queries and keys
 * instead, L*T*2D floats (DINOv2-L at 518 px: 269 MB), and a map recomputes the
 * attention rows it reads with the forward pass's own function on the same
 * numbers, block of query rows by block (at most VIT_ATT_BLOCK rows): the values
 * are the same bit for bit, not an approximation (tests/engine test_att_storage).
 * What a map then costs: vit_map_attention one block of one head (<= 128*T*Dh
 * multiply-adds and a softmax), vit_map_fused one block per head, vit_rollout
 * every head of every layer up to `layer`, as much as the attention of a
 * forward pass. When the attention is kept, so are (if they fit beside it in
 * VIT_ATT_KEEP_MAX_BYTES) the block internals vit_backward reads, L*T*(4D + F)
 * floats.
 *
 * Threads. vit_forward runs on the run's own pool of n_threads threads (the
 * caller's thread included; default one per online core). OpenBLAS's own
 * threading is turned off (openblas_set_num_threads(1), process-wide) so that
 * its idle threads never spin beside the pool's; GEMMs are split over the pool
 * instead. Each step is a set of items (column slices of a layer, blocks of rows,
 * (head, block) pairs of the attention) that the running threads take in turn; the
 * caller starts at once and never waits for a pool thread that has not started on
 * one, so on a machine busy with other work the pass is no slower than on one
 * thread. Idle pool threads spin for a few microseconds, then sleep.
 *
 * BLAS kernels. OpenBLAS picks its kernels from the CPU's model when it is loaded, and
 * falls back to its SSE3 ("Prescott") ones on a CPU newer than the library (Debian 12's
 * 0.3.21 on recent Xeons: about 3x slower). Every program linked with the engine's pool
 * then starts itself again, before main, with OPENBLAS_CORETYPE set to the kernels the
 * CPU can run (SkylakeX for AVX-512, Haswell for AVX2 + FMA); a user's own
 * OPENBLAS_CORETYPE is kept. vit_blas_core() names the kernels in use.
 *
 * Stopping early. A window runs these calls on a worker thread and must be able to drop
 * one that nobody waits for any more (a newer request, or quitting): VitRun.control,
 * when set, points at a VitControl that vit_forward checks before each layer and each
 * attention block, and the maps that read the attention (vit_map_attention, vit_map_fused,
 * vit_map_entropy, vit_prefix_share, vit_rollout, vit_rollout_layers, vit_attention_distance,
 * vit_attention_flow, vit_tokenrank, vit_explain's Chefer and gradient rollout) before each
 * layer and each block of rows they recompute. Once another thread has called
 * vit_control_cancel, the call returns within about one block's work: a map with
 * VIT_ERR_CANCELLED, vit_forward (which returns nothing) with the run's outputs
 * undefined. The same VitControl reports how far a call is (vit_forward, the rollouts and
 * the distance: layers done of layers to do; attention flow: tokens), for a progress
 * line. The backward pass (vit_backward) and vit_forward_batch do not check it. */

#define VIT_ATT_KEEP_MAX_BYTES (512ull << 20) /* VIT_ATT_AUTO keeps [L, H, T, T] up to this */
#define VIT_ATT_BLOCK          128            /* query rows per attention block */
#define VIT_MAX_THREADS        256

typedef enum {
    VIT_ATT_AUTO = 0, /* keep the attention when it takes at most VIT_ATT_KEEP_MAX_BYTES */
    VIT_ATT_KEEP,     /* keep att [L, H, T, T]: a map is a read */
    VIT_ATT_RECOMPUTE /* keep queries and keys [L, T, 2D]; a map recomputes its rows */
} VitAttStorage;

/* A flag and a progress counter shared between the thread running a long call and the
 * thread that may stop it or watch it (see "Stopping early" above). Zero-initialise;
 * the fields are private, read and written atomically through the functions below. */
typedef struct {
    int cancel_;       /* nonzero: stop */
    int done_, total_; /* the running call's steps (layers) done, of total_ */
} VitControl;

/* Ask the call running with c to stop (any thread). */
void vit_control_cancel(VitControl *c);
/* Clear the flag and the progress, before c is given to a new call (no call running). */
void vit_control_reset(VitControl *c);
/* Has vit_control_cancel been called since the last reset? (any thread) */
int vit_control_cancelled(const VitControl *c);
/* Report progress: `done` steps of `total` (the engine calls it between layers; a caller
 * that chains several calls may call it too). */
void vit_control_report(VitControl *c, int done, int total);
/* The last progress reported: *done of *total (0 of 0: none yet). Any thread. */
void vit_control_progress(const VitControl *c, int *done, int *total);

/* ---------------------------------------------------------------------------
 * Interventions: "what if?" on the running model
 *
 * A VitIntervention changes the model a forward pass runs: set VitRun.intervention
 * (vit_forward, the maps that recompute the attention, vit_backward: class-specific
 * maps of the intervened model) or VitBatch.intervention (vit_forward_batch). NULL,
 * or one with nothing active (vit_intervention_active 0), runs the model as it is,
 * bit for bit (tests/engine test_intervention). Give only one that
 * vit_intervention_check accepts: vit_forward returns nothing and cannot refuse one
 * (vit_forward_batch and vit_backward check it). Each part is tested against a
 * PyTorch reference of timm's architecture with the change written into it
 * (tests/parity/test_interventions.py):
 *   ablate [L, H]  head ablation (Michel et al. 2019, "Are Sixteen Heads Really Better
 *                  than One?", §2; transformers' head_mask): head h of layer l gives
 *                  nothing to the block: its part of the attention output, ctx[:, h*Dh ..
 *                  (h+1)*Dh), is 0 before proj (proj's bias stays). transformers multiplies
 *                  the probabilities by the mask (attention_probs * head_mask), the same
 *                  output; its returned attention is then 0, whereas VitRun.att (and the
 *                  maps) keep what the ablated head computes: where it looks, unused.
 *   drop [N]       patch removal: the patches are taken out of the token sequence, as if
 *                  timm ran on the tokens [prefix, kept patches] with each kept patch's
 *                  own position embedding (a ViT takes any number of tokens). The engine
 *                  keeps T and masks instead, so that every buffer and map keeps its
 *                  [gh, gw] shape: a score whose key is a dropped patch is -inf before
 *                  the softmax (its probability exactly 0, the others normalised over the
 *                  kept tokens), which gives every kept token the numbers of the shorter
 *                  sequence (to the GEMMs' order of summation); a dropped patch's own
 *                  attention row is set to 0. att[l, h] of a dropped patch p: row and
 *                  column Np + p are 0. Its token and every map's value at p mean
 *                  nothing: vit_intervention_mask sets them to NaN (the app draws the
 *                  patch hatched). Rollout's discard ratio counts the zeros of the
 *                  dropped columns among the smallest entries.
 *   fill [N]       patch replacement: the patch's pixels are 0 after normalisation, the
 *                  channels' means (vit_patch_mix with fill NULL: --eval's deletion), so
 *                  its token is the patch embedding's bias plus its position embedding.
 *                  Unlike a dropped patch it stays in the sequence and is attended to.
 *                  A patch both dropped and filled is dropped.
 *   pos_embed      VIT_POS_SHUFFLE: patch p gets the position embedding of patch
 *                  pos_perm[p] (pos_perm [N] a permutation of 0 .. N-1, e.g. from
 *                  vit_pos_permutation); the prefix tokens keep theirs. VIT_POS_ZERO:
 *                  no position embedding is added at all (prefix tokens included).
 *   temperature    A = softmax(s / tau), s = q k^T / sqrt(Dh) (the softmax temperature
 *                  of Hinton et al. 2015), every head of layer temp_layer (0-based);
 *                  tau > 1 flattens the attention, tau < 1 sharpens it; 0: none. The
 *                  engine scales q by 1 / (sqrt(Dh) tau) in the score GEMM.
 * Ownership: the arrays are the caller's, read during the calls only. */

typedef enum {
    VIT_POS_KEEP = 0, /* the model's position embedding */
    VIT_POS_SHUFFLE,  /* patch p gets patch pos_perm[p]'s */
    VIT_POS_ZERO      /* none added */
} VitPosEdit;

typedef struct {
    const uint8_t *ablate; /* [L, H] non-zero: head ablated, or NULL */
    const uint8_t *drop;   /* [N] non-zero: patch dropped from the sequence, or NULL */
    const uint8_t *fill;   /* [N] non-zero: patch's pixels set to the mean (0), or NULL */
    VitPosEdit pos_embed;  /* VIT_POS_KEEP (zero-initialised), _SHUFFLE, _ZERO */
    const int *pos_perm;   /* [N] VIT_POS_SHUFFLE's permutation */
    int temp_layer;        /* 0 .. L-1: the layer temperature applies to */
    float temperature;     /* tau > 0, or 0: no temperature */
} VitIntervention;

/* Does iv change anything (NULL: 0)? An ablate / drop / fill array with no non-zero
 * entry does not. Sizes from cfg. */
int vit_intervention_active(const VitIntervention *iv, const VitConfig *cfg);

/* Check iv against the model of cfg. Errors (VIT_ERR_ARG, the message names the part):
 * every patch dropped, pos_embed not a VitPosEdit, VIT_POS_SHUFFLE without pos_perm or
 * with one that is not a permutation of 0 .. N-1, a temperature that is not finite, or
 * < 0, or given with temp_layer outside 0 .. L-1. NULL is fine (nothing to check). */
VitStatus vit_intervention_check(const VitIntervention *iv, const VitConfig *cfg, VitError *err);

/* A seeded permutation perm [n] of 0 .. n-1: Fisher-Yates (for i = n-1 down to 1, swap
 * i with j = x mod (i + 1)), x the successive 64-bit outputs of splitmix64 seeded with
 * seed (as vit_random_map), from the identity. The same seed gives the same permutation
 * on every machine; the modulo's bias is below n / 2^64. n < 1: nothing written. */
void vit_pos_permutation(int *perm, int n, uint64_t seed);

/* map [N] over the patches: the dropped patches of iv (drop) set to NaN; nothing
 * without drop. What a map of an intervened run shows at a patch that is not in the
 * sequence. */
void vit_intervention_mask(float *map, const VitIntervention *iv, const VitConfig *cfg);

/* Options for vit_run_init_with; zero-initialised means the defaults. */
typedef struct {
    int n_threads;     /* threads for vit_forward, 1 .. VIT_MAX_THREADS; 0: one per online core */
    VitAttStorage att; /* how the attention is kept for the maps (see above) */
    int all_tokens;    /* 1: the last block's output is computed for every token, as the token
                          views (vit_features, vit_token_norms, ...) read it; 0: only the rows
                          the head reads (CLS, distillation token), 1/L of a pass less */
} VitRunOptions;

struct VitPool;

/* Activations and outputs of one forward pass. One allocation made by
 * vit_run_init, carved into named buffers; vit_forward allocates nothing. */
typedef struct {
    VitConfig cfg;      /* copy of the model's config the buffers were sized for */
    float *input;       /* [3, Sh, Sw] normalised pixels (vit_preprocess writes it) */
    float *x;           /* [T, D] the residual stream between a block's attention and its
                           MLP (scratch; per layer in xm when blocks_kept) */
    float *xn;          /* [T, D] LayerNorm output, then proj/fc2 output */
    float *qk;          /* [T, 2A] queries, keys of the current layer; [L, T, 2A] every
                           layer's when the attention is not kept (for the maps) or the block
                           internals are (blocks_kept, for the backward pass) */
    float *v;           /* [T, A] values; [L, T, A] every layer's when blocks_kept */
    float *ctx;         /* [T, A] attention output before proj */
    float *hid;         /* [T, F] MLP hidden */
    float *patches;     /* [N, 3*P*P] im2col of the input */
    float *tokens;      /* [L + 1, T, D] the residual stream: tokens[0] the embedded input
                           (patch embedding, prefix tokens, position embedding), tokens[l + 1]
                           block l's output; of the last block's output only the rows the
                           head reads (CLS, distillation token) are computed, unless
                           all_tokens */
    float *att;         /* [L, H, T, T] softmax attention probabilities, rows sum to 1; NULL
                           when not kept (att_kept 0): read maps through the functions below */
    float *logits;      /* [C] (NULL when C == 0); with a distillation head the mean of both */
    float *probs;       /* [C] softmax of logits (NULL when C == 0) */
    float *logits_dist; /* [C] the distillation head's own logits, written when the model has
                           one (w.head_dist_w); NULL when C == 0 */
    float *img_embed;   /* [E] CLIP's image embedding img_proj(norm(z_L)[CLS]), not normalised
                           (vit_image_embed); SigLIP's: the MAP head's output [D]; NULL when
                           E == 0 */
    float *probe_att;   /* [H, N] the MAP head's probe attention over the patches, per head,
                           rows sum to 1 (an intervention's dropped patches 0): where a SigLIP
                           tower looks when it pools (cfg.head_pool VIT_POOL_MAP); else NULL */
    int crop_x, crop_y, crop_w, crop_h; /* source-image px rectangle the model saw */
    int n_threads;                      /* threads vit_forward uses */
    int att_kept;                       /* 1: att holds [L, H, T, T]; 0: recomputed from qk */
    int all_tokens;                     /* 1: tokens[L] holds every token (VitRunOptions) */
    VitControl *control; /* NULL (vit_run_init's), or the flag and progress of the calls made
                            on this run (see "Stopping early"); set by the caller. The maps
                            read the run as const: a caller may give one thread's calls a
                            copy of the VitRun with its own control */
    const VitIntervention *intervention; /* NULL (vit_run_init's), or the changes to the
                            model (see "Interventions") that vit_forward, the maps that
                            recompute the attention and vit_backward apply; set by the
                            caller, the same for all the calls on one forward pass */
    /* private */
    float *att_scratch;  /* [n_threads, VIT_ATT_BLOCK, T] when att is not kept */
    int blocks_kept;     /* 1: qk, v [L, ...], xm and hpre hold every layer's (vit_backward) */
    float *xm;           /* [L, T, D] the residual stream between attention and MLP (last
                            layer: the head's rows), when blocks_kept */
    float *hpre;         /* [L, T, F] fc1's output before GELU (the same rows), when blocks_kept */
    float *pre;          /* [T, D] the embedded tokens before norm_pre (cfg.norm_pre), for the
                            backward pass; NULL without norm_pre */
    float *head_scratch; /* the MAP head's (vit_head_scratch_floats), or NULL */
    struct VitPool *pool;
    float *mem;
    size_t mem_floats;
} VitRun;

/* Allocate the buffers for one forward pass of `vit` and start its threads.
 * opt may be NULL (the defaults: a thread per core, VIT_ATT_AUTO).
 * Errors: VIT_ERR_NOMEM (also over VIT_MAX_ACTIVATION_BYTES, which vit_load
 * already refuses; or threads that cannot start), VIT_ERR_ARG (options out of
 * range). Free with vit_run_free (NULL-safe, accepts a zeroed VitRun). */
VitStatus vit_run_init_with(VitRun *run, const Vit *vit, const VitRunOptions *opt, VitError *err);
VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err); /* opt NULL */

/* The name of OpenBLAS's kernels in use ("SkylakeX", "Haswell", "Zen", "Prescott", ...;
 * see "BLAS kernels" above), a static string; for benchmarks and bug reports. */
const char *vit_blas_core(void);
void vit_run_free(VitRun *run);

/* Run the model on run->input [3, Sh, Sw]. Fills the attention (run->att
 * [L, H, T, T], or the queries and keys that recompute it), run->logits [C] and
 * run->probs [C]. All linear layers and attention products go through
 * cblas_sgemm; allocates nothing. Not reentrant on one run; several runs may
 * run at once on one Vit.
 * timm: x = cat(cls, dist?, reg?, patch_embed(x)) with pos_embed added to the
 *           tokens it covers (_pos_embed)
 *       for blk: x = x + ls1 * attn(norm1(x)); x = x + ls2 * mlp(norm2(x))
 *       logits = head(norm(x)[:, 0])   (distilled: (head(x0) + head_dist(x1)) / 2)
 * With run->control set: reports the layers done, and returns early once cancelled (then
 * logits, probs and the attention are undefined: the caller, who cancelled, knows). */
void vit_forward(VitRun *run, const Vit *vit);

/* Buffers of vit_forward_batch for up to max_batch inputs (B): one allocation and a
 * thread pool, made by vit_batch_init. Nothing of a pass is kept but the class
 * probabilities: no attention, no residual stream. */
typedef struct {
    VitConfig cfg; /* copy of the model's config the buffers were sized for */
    int max_batch; /* B: the most inputs one vit_forward_batch call takes */
    int n_threads; /* threads vit_forward_batch uses */

    /* NULL, or the changes to the model (see "Interventions") applied to every input;
       set by the caller */
    const VitIntervention *intervention;

    /* private */
    float *patches;      /* [B*N, 3*P*P] im2col of the inputs */
    float *x;            /* [B*T, D] the residual stream, image after image */
    float *xn;           /* [B*T, D] LayerNorm output, then proj/fc2 output; first the patch
                            embedding [B*N, D] */
    float *qk;           /* [B*T, 2A] queries, keys of the current layer */
    float *v;            /* [B*T, A] values */
    float *ctx;          /* [B*T, A] attention output before proj */
    float *hid;          /* [B*T, F] MLP hidden */
    float *xh;           /* [2, B, D] the last block's rows the head reads: every image's CLS
                            token, then every image's distillation token */
    float *logits;       /* [B, C] */
    float *logits_dist;  /* [B, C] the distillation head's */
    float *embed;        /* [B, E] CLIP's image embeddings (a text head) */
    float *att_scratch;  /* [n_threads, VIT_ATT_BLOCK, T] */
    float *head_scratch; /* the MAP head's (vit_head_scratch_floats), or NULL */
    struct VitPool *pool;
    float *mem;
    size_t mem_floats;

    /* [n, L, H] the heads ablated per input (vit_head_importance), or NULL: intervention's
       for all */
    const uint8_t *ablate_each;
} VitBatch;

/* Allocate the buffers of vit_forward_batch for up to max_batch inputs of `vit` and
 * start n_threads threads (1 .. VIT_MAX_THREADS, the caller's included; 0: one per
 * online core, as VitRunOptions). One allocation of
 *   B*(N*3*P*P + T*(2D + 3A + max(A, D) + F) + 2D + 2C + E) + n_threads*VIT_ATT_BLOCK*T   floats
 * (DeiT-Tiny: 2.0 MiB per input, 65 MiB for B = 32).
 * Errors: VIT_ERR_ARG (max_batch < 1, n_threads out of range, a model without head:
 * C == 0), VIT_ERR_NOMEM (the size overflows or is over VIT_MAX_ACTIVATION_BYTES, or
 * the allocation or the threads fail). On error *b is zeroed. Like vit_run_init, turns
 * OpenBLAS's own threading off (process-wide). Free with vit_batch_free (NULL-safe,
 * accepts a zeroed VitBatch). */
VitStatus vit_batch_init(VitBatch *b, const Vit *vit, int max_batch, int n_threads, VitError *err);
void vit_batch_free(VitBatch *b);

/* The class scores of n inputs at once, 1 <= n <= b->max_batch: inputs [n, 3, Sh, Sw]
 * normalised pixels (each as VitRun.input, e.g. from vit_preprocess), logits [n, C] (the
 * mean of both heads for a distilled model, as VitRun.logits) and probs [n, C] (their
 * softmax), each caller's and may be NULL. For faithfulness tests, which run many
 * perturbed copies of one photo: the n inputs' token rows are stacked, so every linear
 * layer (patch embedding, query/key/value, proj, fc1, fc2, head) is one GEMM over n*T
 * rows (n*N for the patch embedding) rather than n GEMMs; attention stays within each
 * image (per image and head, blocks of VIT_ATT_BLOCK query rows), and the last block is
 * computed only for the rows the head reads (CLS, distillation token). Row i equals
 * vit_forward's logits and probs for input i alone up to float rounding (the GEMMs'
 * blocking differs: tests/engine test_batch holds it to 1e-5 of the largest logit).
 * Runs on b's pool; allocates nothing; not reentrant on one b. Throughput against n
 * vit_forward calls (docs/benchmarks.md): 1.03-1.1x at 1 thread (the pass is GEMM-bound),
 * more where the pool's hand-offs between threads are dear (DeiT-Tiny at 2 threads on a
 * busy machine: 1.6x at n = 8 to 32, since a batch makes them once for all n).
 * With b->intervention set, every input runs on the intervened model (see
 * "Interventions").
 * Errors: VIT_ERR_ARG (n out of range, inputs NULL, b not made by vit_batch_init for a
 * model of vit's shapes, an intervention vit_intervention_check refuses), with nothing
 * written. */
VitStatus vit_forward_batch(VitBatch *b, const Vit *vit, const float *inputs, int n, float *logits,
                            float *probs, VitError *err);

/* Head importance for class `target` (Michel et al. 2019, "Are Sixteen Heads Really Better
 * than One?", §3-4, with the measured change rather than their gradient proxy):
 *   importance[l, h] = p_target(model) - p_target(model with head (l, h) ablated)
 * the drop in the class probability when that head alone is ablated (vit.h
 * "Interventions": its output zeroed before proj), on top of b->intervention (a head it
 * ablates already: 0). importance [L, H] caller's; base_prob (may be NULL): p_target of
 * the model without the extra ablation. input [3, Sh, Sw] normalised pixels. The L*H
 * passes run on b (made by vit_batch_init for vit, any max_batch >= 1) and share their
 * start: the passes that ablate a head of layer l start from the unablated stream at layer
 * l, H of them batched (up to max_batch); L*H*(L+1)/2 + L blocks in all, 0.54 of L*H full
 * passes for L = 12. The values are those of vit_forward_batch on each ablated model,
 * within its tolerance (tests/parity/test_interventions.py: against PyTorch). Allocates
 * T*D floats and max_batch*(C + L*H) bytes of scratch, freed before it returns. Leaves
 * b->intervention as it was. Errors: VIT_ERR_ARG (b not made for this model, no head, a
 * class out of range, no input, an intervention vit_intervention_check refuses),
 * VIT_ERR_NOMEM. */
VitStatus vit_head_importance(float *importance, float *base_prob, VitBatch *b, const Vit *vit,
                              const float *input, int target, VitError *err);

/* The pruning curve (Michel et al. 2019, Fig. 2: heads pruned in increasing order of
 * importance): order [L*H] the heads (l * H + h) by increasing importance (ties: the lower
 * index first; vit_patch_order's rule), probs [L*H + 1] p_target with the first k of
 * order ablated, k = 0 .. L*H (k = 0: the model; "keep the top L*H - k heads"), on top of
 * b->intervention. importance [L, H] from vit_head_importance. The L*H + 1 passes share
 * their starts as vit_head_importance's do (passes k and k' compute the same input to
 * layer l when the heads order[k .. k') all lie in layers >= l): at layer l one stream per
 * distinct set of heads ablated below it, batched max_batch at a time, as much work as
 * vit_head_importance. Allocates (L + 1) * max_batch * T*D floats of scratch. Errors:
 * those of vit_head_importance, and a NaN or infinite importance. */
VitStatus vit_head_pruning(float *probs, int *order, VitBatch *b, const Vit *vit,
                           const float *input, const float *importance, int target, VitError *err);

/* ---------------------------------------------------------------------------
 * Images and preprocessing */

typedef struct {
    int w, h;           /* px, once turned upright (w and h swap for orientations 5..8) */
    uint8_t *rgb;       /* [h, w, 3], owned (free with vit_image_free) */
    int orientation;    /* 1..8: the file's EXIF orientation tag (TIFF: its Orientation
                         * tag), 1 when it has none; applied to rgb unless
                         * VitImageOptions.ignore_orientation (HEIF/AVIF: see below) */
    const char *format; /* static: "JPEG", "PNG", "WebP", "TIFF", "HEIF", "AVIF", "BMP",
                         * "GIF", "TGA", "PSD", "HDR", "PIC", "PNM"; "RGB" from
                         * vit_image_from_rgb */
} VitImage;

typedef struct {
    int ignore_orientation; /* 1: the pixels as stored, not turned by the EXIF orientation
                             * (nor by HEIF's irot/imir): what PIL's Image.open and timm
                             * give, for parity with a pipeline that does not turn */
} VitImageOptions;

/* Decode an image file to 8-bit RGB, as Pillow's Image.open(path).convert('RGB')
 * gives it, then turn it upright as its EXIF orientation says (Pillow's
 * ImageOps.exif_transpose): the picture a viewer shows is the one the model sees.
 * The decoder is picked by the file's first bytes:
 *   JPEG        libjpeg-turbo with Pillow's settings (islow DCT, fancy upsampling;
 *               grey replicated; CMYK/YCCK read Adobe-inverted and made RGB by
 *               Pillow's formula): the same pixels as Pillow on the same libjpeg
 *   WebP        libwebp, first frame of an animation, alpha dropped: Pillow's pixels
 *   TIFF        libtiff's RGBA interface, first image: Pillow's pixels for 8-bit RGB,
 *               RGBA, grey, palette and bilevel TIFFs, raw, LZW, deflate, PackBits, G4
 *               (tested); 16-bit samples are rounded to 8 bits by libtiff (Pillow keeps
 *               the high byte: up to one level apart), CMYK and YCbCr by libtiff's
 *               formulas (not compared with Pillow's)
 *   HEIF, AVIF  libheif, primary image; libheif applies the file's own rotation and
 *               mirroring (irot/imir boxes, which the HEIF standard puts before EXIF),
 *               so the EXIF tag is reported in orientation but not applied on top
 *   other       stb_image: PNG (exact), BMP, GIF (first frame), TGA, PSD, HDR, PIC,
 *               PNM; 16-bit samples keep their most significant byte
 * The orientation comes from a JPEG's first EXIF APP1 segment, a WebP's EXIF chunk, a
 * TIFF's Orientation tag (read with libexif, libtiff); PNG's eXIf is not read. PIL's
 * Image.open ignores it for JPEG and WebP (timm sees such a photo sideways; pass
 * ignore_orientation to match), while Pillow 9.4 turns a TIFF when it loads it, as the
 * default here does (its exif_transpose then turns a TIFF twice).
 * The declared size is checked before decoding: more than VIT_MAX_IMAGE_PIXELS (or
 * empty) is VIT_ERR_IMAGE, as is every decoder's error (truncated, corrupt,
 * unsupported: the message names the file and says what; libraries never print).
 * Refused besides: JPEGs with 2 components, 12-bit, or over 500 scans; files over
 * 1 GiB. Errors: VIT_ERR_IO (cannot open), VIT_ERR_IMAGE, VIT_ERR_NOMEM. On error
 * *img is zeroed. Free with vit_image_free. opt may be NULL (the defaults: turned). */
VitStatus vit_image_load_with(VitImage *img, const char *path, const VitImageOptions *opt,
                              VitError *err);
/* vit_image_load_with(img, path, NULL, err). */
VitStatus vit_image_load(VitImage *img, const char *path, VitError *err);
/* A copy of rgb [h, w, 3] (orientation 1, format "RGB"). Errors: VIT_ERR_IMAGE (empty
 * or over VIT_MAX_IMAGE_PIXELS), VIT_ERR_NOMEM. */
VitStatus vit_image_from_rgb(VitImage *img, const uint8_t *rgb, int w, int h, VitError *err);
void vit_image_free(VitImage *img);

/* timm's eval transform (timm/data/transforms_factory.py,
 * transforms_imagenet_eval), scale = (floor(Sh / crop_pct), floor(Sw / crop_pct)):
 *   center, square input:  Resize(scale) of the shorter side, PIL bicubic
 *   center, Sh != Sw:      ResizeKeepRatio(scale): both sides times
 *                          min(scale_h / h, scale_w / w), rounded, PIL bilinear
 *                          (timm passes no interpolation there)
 *   squash:                Resize((scale_h, scale_w)), PIL bicubic
 * then CenterCrop((Sh, Sw)) as torchvision rounds it, ToTensor (/255),
 * Normalize(mean, std). Pillow's filters are reproduced bit-exactly, 8-bit
 * passes included. Only the crop of the resize is computed: memory and time
 * grow with Sh, Sw and the image, not with the resized size (a long strip's
 * would be gigabytes). out: [3, Sh, Sw]. crop: the source-image rectangle
 * (px, rounded outwards) that the model sees; any of crop_* may be NULL.
 * Errors: VIT_ERR_NOMEM, VIT_ERR_ARG (empty image). */
VitStatus vit_preprocess(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                         const VitConfig *cfg, const VitImage *img, VitError *err);

/* The same resize + centre crop, as 8-bit RGB [Sh, Sw, 3]: the picture the
 * model saw, for drawing. Caller owns out (Sh*Sw*3 bytes). */
VitStatus vit_preprocess_rgb(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                             VitError *err);

/* ---------------------------------------------------------------------------
 * Labels and predictions */

/* Read class names: the ImageNet synset format "n01440764 tench, Tinca tinca"
 * (the leading wnid is dropped, the first name is kept whole: "tench, Tinca tinca")
 * or one plain name per line. Exactly n_classes non-empty lines are expected
 * (fewer or more is VIT_ERR_FORMAT naming the counts). labels: [n_classes]
 * strings, owned; free with free(). */
VitStatus vit_labels_load(char (**labels)[VIT_LABEL_BYTES], const char *path, int n_classes,
                          VitError *err);

/* Indices of the k largest probabilities, descending. idx: [k]. k <= C. */
void vit_top_k(int *idx, const float *probs, int n_classes, int k);

/* ---------------------------------------------------------------------------
 * Maps over the patch grid: out [gh, gw], read from run->att, or recomputed
 * from the kept queries and keys when the attention is not kept (same values).
 * `query` is a token index: 0 the CLS token, Np + r*gw + c the patch (r, c).
 * A map holds the patch columns of a row only; the rest of the row, what goes
 * to the prefix tokens, is vit_prefix_share's.
 * Errors: VIT_ERR_ARG for an out-of-range layer/head/query/ratio;
 * VIT_ERR_NOMEM (rollout scratch). */

typedef enum { VIT_FUSE_MEAN = 0, VIT_FUSE_MAX, VIT_FUSE_MIN } VitFusion;

const char *vit_fusion_name(VitFusion f); /* "mean", "max", "min" */

/* Attention of `query` to every patch, one layer and head:
 * out[p] = att[layer, head, query, Np + p]. */
VitStatus vit_map_attention(float *out, const VitRun *run, int layer, int head, int query,
                            VitError *err);

/* Head fusion: out[p] = fuse_h att[layer, h, query, Np + p] (mean, max or min
 * over heads). */
VitStatus vit_map_fused(float *out, const VitRun *run, int layer, VitFusion fusion, int query,
                        VitError *err);

/* Attention entropy: how focused each patch's attention is. For head >= 0,
 *   out[p] = H_{Np+p} = -sum_j att[layer, head, Np + p, j] * ln att[layer, head, Np + p, j]
 * the entropy in nats (0 ln 0 = 0) of query token Np + p's attention row over all T keys,
 * the prefix tokens (CLS, distillation, registers) included as keys: 0 when the patch
 * attends to one token only, ln T when it attends to all alike. The map is over the
 * patch queries; the prefix tokens' own rows are not in it. head < 0: the heads' maps
 * fused, out[p] = fuse_h H_{h, Np+p} (mean, max or min over heads: the most diffuse and
 * the most focused head), as the app's per-head kinds fuse: not the entropy of the fused
 * attention, which for max and min is no distribution. Each row is summed in double,
 * the map stored in float. Attention read as the other maps read it (kept or
 * recomputed, the same values). Errors: VIT_ERR_ARG (layer or head out of range, an
 * unknown fusion with head < 0, no forward pass), VIT_ERR_NOMEM (head < 0: [H + 3, N]
 * scratch), VIT_ERR_CANCELLED. */
VitStatus vit_map_entropy(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                          VitError *err);

/* Every vit_map_entropy map of layers layer0 .. layer0 + n_layers - 1 at once, as the
 * app's overviews show them: out [n_layers, H + 3, N], per layer the maps of heads
 * 0 .. H-1, then the mean, max and min fusion (VitFusion order), each bit for bit the
 * vit_map_entropy call it stands for; each head's attention is read once. Reports
 * layers done (VitRun.control). Errors: those of vit_map_entropy, VIT_ERR_ARG for
 * layer0 < 0 or n_layers < 1. */
VitStatus vit_map_entropy_layers(float *out, const VitRun *run, int layer0, int n_layers,
                                 VitError *err);

/* Attention rollout (Abnar & Zuidema 2020, §3), up to and including `layer`:
 *   A_l  = fuse_h att[l, h]                                   [T, T]
 *   discard: the floor(discard_ratio * T*(T-Np)) smallest entries of A_l
 *            whose key is a patch (columns >= Np) are set to 0; attention to
 *            prefix tokens (the CLS token) is never discarded. Ties break by
 *            lower row-major index first.
 *   Â_l  = rownorm(0.5 * A_l + 0.5 * I)     rows renormalised to sum 1
 *            (for mean fusion without discard this is exactly 0.5A + 0.5I)
 *   R_l  = Â_l · Â_{l-1} · ... · Â_0
 *   out[p] = R_layer[query, Np + p]
 * head >= 0 gives per-head rollout (Appendix A.1): Â_{layer,h} (that head's
 * attention, identity added, rows renormalised, no discard) times the
 * head-fused rollout R_{layer-1} of the layers below (I when layer == 0).
 * head < 0 gives the head-fused rollout. discard_ratio in [0, 1), read as the
 * decimal the caller wrote (0.9f counts 90%, not 89.999998%).
 * Allocates O(T*T) scratch internally. */
VitStatus vit_rollout(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                      float discard_ratio, int query, VitError *err);

/* The same rollout's whole row over every token: out[t] = R_layer[query, t], out [T] (prefix
 * tokens first, then the patches): its patch part is vit_rollout's map and its prefix part
 * vit_prefix_share's with rollout 1, bit for bit, from one rollout instead of two (which
 * matters when the attention is recomputed). Errors: those of vit_rollout. */
VitStatus vit_rollout_tokens(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                             float discard_ratio, int query, VitError *err);

/* Every rollout map of layers layer0 .. layer0 + n_layers - 1 at once, as the
 * app's overviews show them: out [n_layers, H + 3, N], per layer the per-head
 * rollout of heads 0 .. H-1 (the layers below fused by the mean) and then the
 * rollout with mean, max and min fusion, each bit for bit the vit_rollout call it
 * stands for (same discard_ratio and query). Faster than those (H + 3) * n_layers
 * calls: each fused, discarded matrix of the layers below is made once per
 * fusion, not once per map. Allocates (layer0 + n_layers) * T^2 floats of scratch.
 * When the run recomputes its attention (VitRun.att_kept 0), every layer up to
 * the top is recomputed once per fusion: three times a forward pass's attention.
 * Errors: those of vit_rollout, VIT_ERR_ARG for layer0 < 0 or n_layers < 1. */
VitStatus vit_rollout_layers(float *out, const VitRun *run, int layer0, int n_layers,
                             float discard_ratio, int query, VitError *err);

/* The prefix-token part of the row a map is read from: out[Np], out[i] the
 * share of `query`'s attention (rollout: of its rolled-out row) that goes to
 * prefix token i (0 the CLS token, then the distillation and register tokens).
 * Together with the map's N values it sums to 1 (the row does). Arguments as
 * the map functions: rollout 0 reads att[layer] (head >= 0 one head, else the
 * head fusion), rollout 1 the rollout with head, fusion and discard_ratio.
 * Errors: those of the map functions. */
VitStatus vit_prefix_share(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                           int rollout, float discard_ratio, int query, VitError *err);

/* Short name of prefix token i of cfg: "CLS", "dist", "reg1" .. "regR"
 * (1-based, as a user counts). Writes into buf (n bytes); returns buf. */
const char *vit_prefix_name(char *buf, size_t n, const VitConfig *cfg, int i);

/* ---------------------------------------------------------------------------
 * Explorer maps: masks and distances for the classroom views. */

/* DINO's attention mask (Caron et al. 2021, "Emerging Properties in
 * Self-Supervised Vision Transformers", Fig. 3; its visualize_attention.py
 * keeps the patches whose ascending cumulative share exceeds 1 - fraction):
 * the smallest set of patches holding at least `fraction` of the map's mass.
 * Patches are taken in decreasing order of value (ties: lower patch index
 * first) while the sum of those already taken is below fraction * sum(map),
 * summed in double. mask [n]: 1 in the set, 0 outside. map [n] >= 0, e.g. a
 * vit_map_attention or vit_rollout map: its mass is over the patches only
 * (attention to prefix tokens is not part of it), as DINO's is. fraction in
 * (0, 1]; 1 keeps every patch whose value is > 0; an all-zero map gives an empty mask. n_kept (may
 * be NULL): the size of the set. Errors: VIT_ERR_ARG (n < 1, fraction out of range, a negative,
 * infinite or NaN value), VIT_ERR_NOMEM. Allocates O(n) scratch. */
VitStatus vit_mass_mask(uint8_t *mask, int *n_kept, const float *map, int n, float fraction,
                        VitError *err);

/* Mean attention distance (Dosovitskiy et al. 2021, "An Image is Worth 16x16
 * Words", §4.5 and Fig. 7 right: "the distance between the query pixel and all
 * other pixels, weighted by the attention weight", here for one image):
 *   out[l*H + h] = mean over patch queries i of
 *                  sum_j att[l, h, Np+i, Np+j] * d(i, j) / sum_j att[l, h, Np+i, Np+j]
 * over the patch keys j, d(i, j) = P * Euclidean distance between the grid
 * positions of patches i and j: px of the model's input (Sh x Sw px), centre to
 * centre. out: [L, H], px. Prefix tokens (the CLS token, registers) are neither
 * queries nor keys: each query's attention to the patches is renormalised to
 * sum 1, so attention to the CLS token is left out rather than counted at
 * distance 0 (which would lower a head's distance by its share of attention
 * to the CLS token). A query whose patch attention is all 0 is skipped.
 * Errors: VIT_ERR_ARG (no forward pass), VIT_ERR_NOMEM. O(L*H*N^2); when the
 * attention is recomputed, as much again as a forward pass's attention. */
VitStatus vit_attention_distance(float *out, const VitRun *run, VitError *err);

/* ---------------------------------------------------------------------------
 * Backward pass: why this class?
 *
 * vit_backward differentiates one class's logit y_c (for a DeiT distilled model
 * the averaged logit (head(x_0) + head_dist(x_1)) / 2 that is the prediction)
 * through the whole model by hand, next to the forward pass (backward.c), for
 * the class-specific maps (vit_explain). No weight gradients: only what flows to
 * the activations. When the run keeps its attention and the block internals fit
 * beside it in VIT_ATT_KEEP_MAX_BYTES (DeiT-Tiny to ViT-B at 224 px: +14 / 29 /
 * 58 MB), the forward pass keeps every layer's queries and keys, values, residual
 * between attention and MLP and fc1's output before GELU, and vit_backward reads
 * them; otherwise it recomputes each block's internals from the block's input
 * tokens (VitRun.tokens), one block at a time from the top (the same numbers), so
 * its memory is one block's activations plus what it keeps:
 *   - att kept by the run (att_kept 1): grad_att [L, H, T, T] dy_c/dA_l;
 *     otherwise the attention output's gradient dctx [L, T, A], from which a map
 *     recomputes dA = dctx_h . v_h^T block by block, with layer l's values v
 *     recomputed once per layer from VitRun.tokens[l] (norm1, then the value
 *     projection: the same calls on the same pool and numbers, so the maps are the
 *     same bit for bit);
 *   - grad_tokens [L, T, D], grad_input [3, Sh, Sw], and small per-method parts.
 * AttnLRP's modified gradient (lrp_input) is a second pass of the same code with
 * its rules (Achtibat et al. 2024): LayerNorm's standard deviation held constant,
 * GELU as the identity rule x * (gelu(x)/x), attention probabilities held
 * constant (CP-LRP: nothing flows into queries and keys).
 * Runs on the run's thread pool. */

typedef enum {
    VIT_GRAD_EXACT = 1, /* the true gradients (grad_att, grad_tokens, grad_input, ...) */
    VIT_GRAD_LRP = 2,   /* AttnLRP's modified gradient at the input (lrp_input) */
    VIT_GRAD_ALL = 3,
    VIT_GRAD_ADD = 4,   /* with a pass: keep the other pass's results of the last call (the same
                           run, forward pass and class), e.g. AttnLRP's pass only once its map is
                           asked for; without it they are dropped */
    VIT_GRAD_LEGRAD = 8 /* LeGrad's E_l alone (g->legrad, what VIT_EXPLAIN_LEGRAD reads), the
                           same numbers as the exact pass's: per layer the head's gradient
                           through the block's top on the rows the head reads (1 or 2), not a
                           whole backward pass (ViT-B/16: a few ms, against ~2 forward passes);
                           a run that recomputes its attention recomputes each block too. The
                           exact pass makes them as well (g->what then says VIT_GRAD_EXACT) */
} VitGradWhat;

/* A score to explain: what vit_backward_score differentiates, S(logits) or S(e). One small
 * function gives the seed of the backward pass, the score's gradient at the head's output:
 *   on_logits 1: grad(d [C], NULL, C, lrp, s): d = dS/dlogits, a constant vector (the
 *     score is linear in the logits: one logit is a one-hot, a contrast e_a - e_b); the
 *     pass sends sum_c d[c] dlogits[c]/dz back (a class with d[c] = 0 costs nothing).
 *   on_logits 0: grad(d [E], e [E], E, lrp, s): d = dS/de at e, the model's pooled
 *     embedding (vit_embedding: what the head reads, or CLIP's projection of it; E =
 *     vit_embedding_dim); for LeGrad it is called again at each layer's embedding. A model
 *     without a head can be explained by such a score.
 * lrp 1: AttnLRP's pass asks; a score may hold a norm constant there, as the LayerNorm
 * rule holds the standard deviation (vit_score_cosine: |e| constant, so that e . d = S).
 * The engine calls grad only from vit_backward_score's thread. */
typedef struct VitScore VitScore;
struct VitScore {
    int on_logits;
    void (*grad)(float *d, const float *e, int n, int lrp, const VitScore *s);
    int a, b;         /* the classes of vit_score_logit (a) and vit_score_contrast (a, b) */
    const float *ref; /* [E] vit_score_cosine's other embedding, the caller's, held constant */
};

/* S = logits[c], the class-specific maps' usual score (vit_backward). */
VitScore vit_score_logit(int c);
/* S = logits[a] - logits[b]: why a rather than b (a != b; vit_backward_score checks the
 * range). */
VitScore vit_score_contrast(int a, int b);
/* S = cos(e, ref) = e . ref / (|e| |ref|), ref [E] held constant (the other photo's
 * vit_embedding; kept by the caller while the pass runs): dS/de = (ref / |ref| - S e /
 * |e|) / |e|; 0 when e or ref is 0. AttnLRP's pass: ref / (|ref| |e|). */
VitScore vit_score_cosine(const float *ref);

/* E: the width of vit_embedding (CLIP's embed_dim with an image projection, else
 * vit_head_width: D, or 2D for VIT_POOL_CLS_MEAN). */
int vit_embedding_dim(const Vit *vit);

/* e [E] (caller's, vit_embedding_dim) = the model's pooled embedding after the last
 * vit_forward on run: the head's input h (the final norm, the model's pooling - CLS token,
 * mean of the patches, [CLS ; mean], the MAP head - and fc_norm; DeiT's CLS row), or for
 * a CLIP tower img_proj(h) (vit_image_embed's). Works without a head. Allocates [3D].
 * Errors: VIT_ERR_ARG (run not made for vit, no forward pass), VIT_ERR_NOMEM. */
VitStatus vit_embedding(float *e, const VitRun *run, const Vit *vit, VitError *err);

typedef struct {
    VitConfig cfg;      /* the config the buffers were sized for */
    int target;         /* c: the class of the last vit_backward, -1 before; -2 after
                           vit_backward_score of a score other than one logit */
    VitScore score;     /* the score of the last pass (a copy; its ref is the caller's) */
    int what;           /* the passes (VitGradWhat) whose results g holds, for class target */
    int grad_att_kept;  /* 1: grad_att holds [L, H, T, T] */
    float *grad_att;    /* [L, H, T, T] dy_c/dA_l, A_l the softmax probabilities; NULL when
                           the run recomputes its attention (read maps through vit_explain) */
    float *grad_tokens; /* [L, T, D] dy_c/dz_l, z_l block l's output tokens (for the last
                           block only the rows the head reads are non-zero) */
    float *grad_input;  /* [3, Sh, Sw] dy_c/d input, the normalised pixels run->input */
    float *lrp_input;   /* [3, Sh, Sw] AttnLRP's modified gradient at the input */
    float *cam_act;     /* [N, D] the last block's norm1 output at the patch tokens */
    float *cam_grad;    /* [N, D] dy_c/d cam_act (Grad-CAM's target layer) */
    float *legrad;      /* [L, N] LeGrad's E_l: mean over heads and query rows of
                           ReLU(ds_l/dA_l) at the patch columns, s_l = head(norm(z_l))_c */
    float *probe_grad;  /* [H, N] dy_c / d VitRun.probe_att, the MAP head's probe attention
                           (exact pass; cfg.head_pool VIT_POOL_MAP), else NULL */
    /* private */
    float *dctx;   /* [L, T, A] when grad_att is not kept (A = H * Dh) */
    int n_threads; /* the most threads a run may have (per-thread scratch) */
    float *mem;
    size_t mem_floats;
} VitGrad;

/* Allocate the buffers of vit_backward for runs of `vit` shaped like `run`
 * (attention kept or recomputed, thread count); a model without a head too (for a score
 * of its embedding: vit_backward_score). Sized for C: made again when C changes.
 * Errors: VIT_ERR_ARG (a run made for another model), VIT_ERR_NOMEM. Free with
 * vit_grad_free (NULL-safe, accepts a zeroed VitGrad). */
VitStatus vit_grad_init(VitGrad *g, const Vit *vit, const VitRun *run, VitError *err);
void vit_grad_free(VitGrad *g);

/* The gradients of logit `target` (0 .. C-1; -1: the top-1 class) after
 * vit_forward(run, vit): `what` selects the exact pass, the AttnLRP pass or
 * both (VitGradWhat), plus VIT_GRAD_ADD to keep the other pass's results of the
 * previous call for the same class and forward pass (the caller's promise: nothing
 * can tell a new forward pass on the same run). g->what then says which passes'
 * results g holds. Allocates a few [T]-sized buffers per call.
 * The gradients are those of the model run->intervention made (see "Interventions": an
 * ablated head passes none back, a dropped patch's row and column of grad_att are 0, a
 * filled patch's pixels get none; tests/parity/test_interventions.py against autograd).
 * Errors: VIT_ERR_ARG (class out of range, no head, g not made for this run, an
 * add for another class, an intervention vit_intervention_check refuses), VIT_ERR_NOMEM. */
VitStatus vit_backward(VitGrad *g, const VitRun *run, const Vit *vit, int target, int what,
                       VitError *err);

/* vit_backward for any score (VitScore): the same pass seeded with the score's gradient at
 * the logits (dS/dlogits [C]) or at the pooled embedding (dS/de [E]) instead of a one-hot;
 * every buffer of g then holds dS/d... (grad_att [L, H, T, T] dS/dA_l, grad_input, ...) and
 * vit_explain explains S. vit_backward(target) is this with vit_score_logit(target), bit
 * for bit. VIT_GRAD_ADD: the same score (kind, classes, ref pointer) as the last call.
 * Errors: vit_backward's, and VIT_ERR_ARG for a logit score on a model without a head, a
 * class out of range, a contrast of a class with itself, no grad function or no ref. */
VitStatus vit_backward_score(VitGrad *g, const VitRun *run, const Vit *vit, const VitScore *s,
                             int what, VitError *err);

/* Class-specific explanation maps, from a run and its VitGrad (exact pass; AttnLRP
 * also needs the LRP pass). Raw values, not normalised. */
typedef enum {
    VIT_EXPLAIN_CHEFER = 0,   /* patch map [gh, gw] */
    VIT_EXPLAIN_GRAD_ROLLOUT, /* patch map [gh, gw]; uses discard_ratio */
    VIT_EXPLAIN_GRADCAM,      /* patch map [gh, gw] */
    VIT_EXPLAIN_LEGRAD,       /* patch map [gh, gw] */
    VIT_EXPLAIN_ATTNLRP,      /* pixel map [Sh, Sw] */
    VIT_EXPLAIN_GRAD_INPUT,   /* pixel map [Sh, Sw] */
    VIT_EXPLAIN_COUNT
} VitExplain;

/* Short name of a method: "chefer", "grad-rollout", "gradcam", "legrad",
 * "attnlrp", "grad-input". Static string. */
const char *vit_explain_name(VitExplain m);

/* 1 when the method's map is [Sh, Sw] (pixels), 0 when [gh, gw] (patches). */
int vit_explain_pixels(VitExplain m);

/* One explanation map into out ([gh, gw] or [Sh, Sw], vit_explain_pixels):
 *   CHEFER (Chefer, Gur, Wolf, "Generic Attention-model Explainability", ICCV
 *     2021, eq. 5-6; hila-chefer/Transformer-MM-Explainability):
 *       R = I; for l = 0 .. L-1: R <- R + mean_h((dA_l (.) A_l)^+) . R;
 *       out = R[CLS, patches]
 *   GRAD_ROLLOUT (jacobgil/vit-explain grad_rollout, with each layer's gradient
 *     paired with its own attention, vit-explain issue #6):
 *       F_l = max(mean_h(A_l (.) dA_l), 0) (clamped after the head mean, as the
 *       code does); the discard of vit_rollout (patch columns only); Â_l =
 *       rownorm((F_l + I) / 2); out = (Â_{L-1} ... Â_0)[CLS, patches]
 *   Without a CLS token (SigLIP's MAP head) both end at the probe's row instead of the
 *     CLS's: Chefer out = Abar_probe . R[:, patches], Abar_probe = mean_h((dA_p (.) A_p)^+)
 *     over the probe's attention A_p [H, N] and its gradient (VitGrad.probe_grad); the
 *     gradient rollout out = f . (Â_{L-1} ... Â_0)[:, patches], f = max(mean_h(A_p (.)
 *     dA_p), 0) normalised to sum 1 (the probe is no token: no identity added)
 *   GRADCAM (Selvaraju et al. 2017; jacobgil/pytorch-grad-cam's ViT recipe,
 *     target layer blocks[-1].norm1, every prefix token dropped):
 *       w = mean over patches of cam_grad [D]; out = ReLU(cam_act . w)
 *   LEGRAD (Bousselham et al. 2024, WalBouss/LeGrad compute_legrad_clip, with
 *     s_l = head(norm(z_l[CLS]))_c): out = sum_l legrad[l]
 *   ATTNLRP (Achtibat et al., ICML 2024, rachtibat/LRP-eXplains-Transformers,
 *     gradient x input form with the CP-LRP variant): out[y, x] =
 *       sum_ch input[ch, y, x] * lrp_input[ch, y, x]
 *   GRAD_INPUT: out[y, x] = sum_ch input[ch, y, x] * grad_input[ch, y, x]
 * When the run recomputes its attention (grad_att NULL), CHEFER and GRAD_ROLLOUT
 * recompute each layer's values on the run's thread pool: vit_explain is then not
 * reentrant with vit_forward, vit_backward or another vit_explain on the same run
 * (call them one after the other, as for vit_backward).
 * Errors: VIT_ERR_ARG (unknown method, no backward pass, or the pass that the
 * method needs not run, run or g not made for vit, discard_ratio outside [0, 1)),
 * VIT_ERR_NOMEM. */
VitStatus vit_explain(float *out, VitExplain m, const VitRun *run, const VitGrad *g, const Vit *vit,
                      float discard_ratio, VitError *err);

/* Cascading randomisation (Adebayo et al. 2018, "Sanity Checks for Saliency Maps",
 * §3.1), for the sanity check of the maps: dst becomes a copy of src whose
 * classification head (and distillation head) and top n_blocks blocks (L-1 down to
 * L-n_blocks) are re-initialised as timm initialises a VisionTransformer: linear
 * weights N(0, 0.02^2) (trunc_normal_(std=.02): redrawn beyond +-2), biases 0,
 * LayerNorm weight 1 and bias 0; LayerScale is kept (its init value is not in the
 * checkpoint); with a CLIP text head (vit_set_text_head) the image projection is
 * re-initialised in the head's place (the text embeddings are the phrase, not weights
 * of the image model). n_blocks 0: the head only (the cascade's first step); the trained
 * model is src itself. The patch embedding, tokens, position embedding and final
 * norm are kept. Same seed, same weights on every machine (splitmix64 + Box-Muller in
 * double, engine/eval/randomize.c). dst shares src's other tensors: free it (vit_free)
 * before src. dst->labels is NULL. Memory: n_blocks * (4D^2 + D^2 + 2FD + ...) + 2CD
 * + ED floats. Errors: VIT_ERR_ARG (n_blocks outside 0 .. L), VIT_ERR_NOMEM; on error dst
 * is zeroed. */
VitStatus vit_randomized(Vit *dst, const Vit *src, int n_blocks, uint64_t seed, VitError *err);

/* ---------------------------------------------------------------------------
 * What the tokens hold: views of the residual stream VitRun.tokens.
 *
 * `layer` is a block, 0 .. L-1: these read block `layer`'s output tokens,
 * tokens[layer + 1] [T, D] (the last block's for every token needs a run made with
 * VitRunOptions.all_tokens; without it, VIT_ERR_ARG). "Features" are those tokens
 * through the model's final LayerNorm (norm_w, norm_b), as DINOv2's
 * get_intermediate_layers(norm=True) and the logit lens read a layer. */

/* Features of block `layer`'s output: out[t] = LayerNorm(tokens[layer + 1][t]) with
 * the final norm's weights and eps. out: [T, D], caller's. Errors: VIT_ERR_ARG. */
VitStatus vit_features(float *out, const VitRun *run, const Vit *vit, int layer, VitError *err);

/* L2 norm of every token of block `layer`'s output (the residual stream, before
 * any norm, as Darcet et al. 2023, "Vision Transformers Need Registers", §2 measure
 * their high-norm tokens): out [T], summed in double. Errors: VIT_ERR_ARG. */
VitStatus vit_token_norms(float *out, const VitRun *run, int layer, VitError *err);

/* Patch similarity: the cosine similarity of `query`'s feature (vit_features) to
 * every patch's at the layer, out [N] in [-1, 1]; computed in double. A zero feature
 * gives 0. Errors: VIT_ERR_ARG (layer, query out of range), VIT_ERR_NOMEM. */
VitStatus vit_patch_similarity(float *out, const VitRun *run, const Vit *vit, int layer, int query,
                               VitError *err);

/* Logit lens: the model's head (its norm, pooling, fc_norm and classifier, the forward
 * pass's own code) applied to a layer's tokens, probs [C]. Token 0 (the CLS): the head as
 * the model applies it, on block `layer`'s output: softmax(head(norm(x_0))), for a
 * distilled model (DeiT) the mean of head(norm(x_0)) and head_dist(norm(x_1)), for a
 * pooled head (VitConfig.head_pool) the pooling of that layer's patch tokens
 * (softmax(head(fc_norm(mean_p norm(x_p)))), or [norm(x_0) ; mean_p norm(x_p)]). At the
 * last layer this is run->probs. Another token t stands in the place of what the head
 * pools: softmax(head(norm(x_t))) for a CLS head (the CLS head's weights; the
 * distillation head is not used), softmax(head(fc_norm(norm(x_t)))) for the mean of the
 * patches (as if every patch were token t), softmax(head([norm(x_0) ; norm(x_t)])) for
 * [CLS ; mean] (the layer's own CLS beside it). A model without a CLS token (SigLIP's MAP head):
 * token 0 is its first patch but asks, as above, for the head as the model applies it (the
 * probe over the layer's patches); another token t gives the head with every patch being
 * token t (the probe's softmax over one key: out_proj(v(norm(x_t))) + MLP); the
 * probabilities are SigLIP's sigmoids. Errors: VIT_ERR_ARG (no head: C == 0;
 * range), VIT_ERR_NOMEM. */
VitStatus vit_logit_lens(float *probs, const VitRun *run, const Vit *vit, int layer, int token,
                         VitError *err);

/* The logit lens over the patches: out[p] = vit_logit_lens(layer, Np + p)[cls], the
 * probability of class `cls` the head reads from each patch's token put in the place of
 * what it pools (CLS head: softmax(head(norm(x))), the CLS head's weights, the
 * distillation head not used; a pooled head: see vit_logit_lens). out [N]. Errors:
 * VIT_ERR_ARG, VIT_ERR_NOMEM. */
VitStatus vit_logit_lens_map(float *out, const VitRun *run, const Vit *vit, int layer, int cls,
                             VitError *err);

/* High-norm tokens (Darcet et al. 2023): the tokens of block `layer`'s output whose
 * norm n_t > median + k * MAD (median absolute deviation from the median, both over
 * the patch tokens, not scaled), and n_t > abs_threshold when abs_threshold > 0 (the
 * paper's 150 for DINOv2 ViT-L/g). idx [T] receives the token indices, patches and
 * prefix tokens alike, in decreasing norm; returns how many (0 .. T), or -1 on error
 * (err set). first [T] (may be NULL): for each listed token, the first layer l0 <=
 * layer from which its norm exceeds its own layer's threshold at every layer l0 ..
 * layer. threshold (may be NULL): layer's threshold. */
int vit_high_norm_tokens(int *idx, int *first, float *threshold, const VitRun *run, int layer,
                         float k, float abs_threshold, VitError *err);

/* TokenRank (Erel et al. 2025, "Attention (as Discrete-Time Markov Chains)"): the
 * attention matrix of a layer as a Markov chain, P = 0.99 * A + 0.01 / T (every
 * row of A sums to 1), and its stationary distribution pi = pi P by power
 * iteration from the uniform distribution until the L1 change is below 1e-9 (at
 * most 1000 steps), in double. A is one head's attention (head >= 0) or the heads
 * fused (head < 0), rows renormalised to sum 1 (mean fusion already does). out [T],
 * sums to 1: a global importance of each token. Errors: VIT_ERR_ARG, VIT_ERR_NOMEM. */
VitStatus vit_tokenrank(float *out, const VitRun *run, int layer, int head, VitFusion fusion,
                        VitError *err);

/* Attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers",
 * §3): the layered graph with a node per token before block 0 and after every block
 * 0 .. layer, and an edge from token j after block l-1 to token i after block l of
 * capacity A_l[i, j], A_l = rownorm(0.5 * mean_h att[l, h] + 0.5 * I) (the residual;
 * the mean's rows sum to 1, so the renormalisation only removes float rounding, as
 * the paper's code does; these are vit_rollout's Â_l with mean fusion and no
 * discard). out[j] = the maximum flow from token j's input node to `query`'s node
 * after block `layer`, for every token j, prefix tokens included: out [T], each in
 * [0, 1] (the query's node takes in at most its row sum, 1). Raw flows: the paper's
 * code divides them by their sum, which the caller may do. Exact: vit_max_flow_layers
 * on those capacities. The attention is read as the maps read it (kept or
 * recomputed, the same values). Deep in a ViT the flow is mostly limited where it
 * enters: for DeiT-Tiny's CLS token after the last block out[j] = min(1, sum_i
 * A_0[i, j]), token j's capacity out of the input, for 99 to 100% of the tokens of the
 * test photos (tests/flow), so the map shows block 0's received attention, clipped.
 * Cost: T max-flow problems on (layer + 1) * T^2 edges, spread over run->n_threads
 * threads of its own, not the run's pool: it only reads the run, so it may run beside
 * the other maps, not beside vit_forward on the same run. DeiT-Tiny, the CLS token
 * after the last block: ~0.1 s at 1 thread, ~0.05 s at 2 (bench/bench_flow.c).
 * Allocates (layer + 1) * T^2 floats and per thread (layer + 1) * T^2 doubles
 * (DeiT-Tiny: 1.8 MB + 3.7 MB per thread).
 * Errors: VIT_ERR_ARG (layer, query out of range, no forward pass), VIT_ERR_NOMEM. */
VitStatus vit_attention_flow(float *out, const VitRun *run, int layer, int query, VitError *err);

/* The max flows of vit_attention_flow on given capacities, for tests and other graphs:
 * levels 0 .. n_layers of T nodes each, cap [n_layers, T, T], cap[l][i][j] the
 * capacity of the edge from token j at level l to token i at level l + 1 (>= 0,
 * finite; 0 is no edge). out[j] = the max flow from (0, j) to (n_layers, query), for
 * every j: out [T]. Dinic's algorithm in double (engine/maps/flow.c; exact up to the
 * rounding of double sums), rounded to float. The T problems are handed out to
 * min(n_threads, T) threads of its own, the caller's included (one that cannot start
 * or allocate is left out, the others do its share); the result does not depend on
 * the thread count. Reentrant: no state outside the call. Memory: per thread
 * n_layers * T^2 doubles and O(n_layers * T) more.
 * Errors: VIT_ERR_ARG (NULL out or cap, n_layers outside 1 .. VIT_MAX_LAYERS, T
 * outside 1 .. VIT_MAX_TOKENS, query outside [0, T), n_threads outside 1 ..
 * VIT_MAX_THREADS, a negative, infinite or NaN capacity: the message gives its
 * index), VIT_ERR_NOMEM. */
VitStatus vit_max_flow_layers(float *out, const float *cap, int n_layers, int T, int query,
                              int n_threads, VitError *err);

/* Feature PCA, the DINOv2 paper's Fig. 1 recipe (Oquab et al. 2023, §7.1 and the
 * Fig. 1/9 captions): x [M, D] feature rows, n_images blocks of M / n_images rows
 * (the patch features of one image, or of several stacked, so that one set of
 * components colours them all alike).
 *   1. Per image, a PCA of its rows: centred on their mean, scatter matrix in double,
 *      eigenvectors by LAPACK's dsyevr. First component c1, its sign chosen so that
 *      the mean projection of the rows with border[i] = 1 (patches on an image's
 *      edge: background in most photos) is below that of the other rows. When the
 *      two means are equal (within 1e-9 of the largest |projection|), or the image's
 *      border is NULL, all 1 or all 0: c1's largest |loading| is made positive
 *      instead. Foreground: the rows whose centred projection on c1 is > 0 (above
 *      1e-9 of the largest |projection|: a row at the mean is background). Fewer than
 *      4 foreground rows in an image: every row of it is foreground.
 *   2. One PCA of every image's foreground rows together (centred on their own
 *      mean): components 1 to 3, each with its largest |loading| positive; each one's
 *      projections, min-max scaled over the foreground to [0, 1], give R, G and B.
 * Rules that rounding alone could otherwise decide: a "largest |loading|" is the
 * first (lowest column) within 1e-9 (relative) of the largest, so that a column and
 * its negated copy tie; a component whose variance is at most 1e-10 of the total
 * (the rows do not vary along it) gives 0, and so does a component that cannot
 * exist (D < 3, or M < 4: n rows vary along n - 1 directions at most). Components
 * of equal variance (a repeated eigenvalue) are not unique: any rotation of them is
 * a PCA, and which one dsyevr returns decides the colours.
 * rgb [M, 3]: the colour of each foreground row, 0 for the background. fg [M]
 * (may be NULL): 1 foreground, 0 background. Both caller's; nothing is kept.
 * Time: O(M D min(M, D) + min(M, D)^3); one thread of OpenBLAS, 2 ms for 196 x 192
 * (DeiT-Tiny), 40 ms for 784 x 768, 0.3 s for 5476 x 1024.
 * The recipe as the DINOv2 issues give it, and where vitlens differs: #23 (a user's
 * script): scikit-learn's PCA (centred, SVD) of the patch features of 4 images
 * stacked, the first component min-max scaled and cut at a hand-picked value
 * (0.35, 0.5) with the side picked by eye, a second PCA of the foreground patches,
 * each of its 3 components min-max scaled, the background black. vitlens cuts the
 * centred projection at 0 (the paper's Fig. 9 caption: patches with a negative
 * score are removed) and picks the side with the border; its loading sign rule is
 * scikit-learn's svd_flip(u_based_decision=False). #45: the features are the final
 * norm's patch tokens (x_norm_patchtokens; here vit_features of the patch rows), and
 * the first PCA runs per image, only the second across images, as here: one first
 * component over photos of different subjects tells the photos apart rather than
 * foreground from background (DeiT-Tiny's last block over the four photos of
 * tests/pca: the rocket's would have no foreground, the cat's 0.92 of its inner
 * patches and 0.98 of its edge; per image the cat's is 0.67 and 0.40). #412 points
 * to the maintainers' features notebook (PR #187), which projects on a precomputed
 * foreground direction (standard.npy, ViT-B) instead of computing a first component.
 * Errors: VIT_ERR_ARG (rgb or x NULL, M < 1, D < 1, n_images < 1 or not dividing M,
 * a non-finite x), VIT_ERR_NOMEM, VIT_ERR_FORMAT (dsyevr failed: the message gives
 * its info). */
VitStatus vit_feature_pca(float *rgb, uint8_t *fg, const float *x, int m, int d, int n_images,
                          const uint8_t *border, VitError *err);

/* The feature PCA split in two, so that one basis colours many inputs alike (a video's
 * frames: a part keeps its colour as it moves). vit_feature_pca(rgb, fg, x, ...) is
 * vit_pca_fit(&b, x, ...) then vit_pca_project(rgb, fg, &b, x, ...), bit for bit.
 * Everything vit_feature_pca computes from its rows is kept (D: the feature width): */
typedef struct {
    int d;           /* D, the width it was fitted on; 0: not fitted */
    int held_fg;     /* 1: step 1 is kept (fitted on one image, n_images 1): a row is
                        foreground when fg_sign * (x - fg_mean) . fg_dir > fg_cut;
                        0 (several images): each input image's own step 1 */
    double *fg_mean; /* [D] step 1's mean row (owns the allocation of all four arrays) */
    double *fg_dir;  /* [D] step 1's first component, unit; 0 when the rows did not vary */
    double fg_sign;  /* +1 or -1: the side of fg_dir that is foreground */
    double fg_cut;   /* 1e-9 of the fit's largest |projection| on fg_dir */
    double *mean;    /* [D] step 2's mean, of the fit's foreground rows */
    double *comp;    /* [3, D] step 2's components 1 to 3, unit rows; 0 for a dead one */
    double sign[3];  /* each component's sign: its largest |loading| made positive */
    double lo[3];    /* min and max of sign[c] * (x - mean) . comp[c] over the fit's */
    double hi[3];    /*   foreground rows: channel c = (that - lo) / (hi - lo) */
    int live[3];     /* 1: channel c varies (variance above 1e-10 of the total, hi > lo);
                        0: channel c is 0 */
} VitPcaBasis;

/* Fit the basis b on x [M, D] (n_images, border [M] as vit_feature_pca's): step 1 per
 * image (kept when n_images is 1), step 2's mean, components, signs and min-max over
 * every image's foreground. b is overwritten (a basis in it freed first); free it with
 * vit_pca_basis_free, also after an error. Time: vit_feature_pca's.
 * Errors: vit_feature_pca's, and VIT_ERR_ARG for b NULL. */
VitStatus vit_pca_fit(VitPcaBasis *b, const float *x, int m, int d, int n_images,
                      const uint8_t *border, VitError *err);

/* Colour x [M, D] (n_images blocks of M / n_images rows) with the fitted basis b:
 * foreground by b's step 1 (held_fg: its cut, per image; else each image's own first
 * component, its sign by border [M] or NULL, as vit_feature_pca), fewer than 4
 * foreground rows in an image: all of it; then rgb [M, 3] = the foreground rows'
 * projections on b's components, scaled by b's lo .. hi and clamped to [0, 1] (rows
 * unlike the fit's may fall outside it), 0 for the background and a dead channel;
 * fg [M] (may be NULL) 1 foreground, 0 background. Time O(M D) with held_fg, else step
 * 1's PCAs. Errors: VIT_ERR_ARG (rgb, b or x NULL, b not fitted, M, D, n_images or a
 * non-finite x as vit_feature_pca), VIT_ERR_SHAPE (D is not b's), VIT_ERR_NOMEM,
 * VIT_ERR_FORMAT (dsyevr, without held_fg). */
VitStatus vit_pca_project(float *rgb, uint8_t *fg, const VitPcaBasis *b, const float *x, int m,
                          int d, int n_images, const uint8_t *border, VitError *err);

/* Free b's arrays and zero it (a zeroed or freed basis is fine). */
void vit_pca_basis_free(VitPcaBasis *b);

/* ---------------------------------------------------------------------------
 * Faithfulness: perturbation, localisation, sanity checks
 *
 * Which map can I trust? The parts of `vitlens --eval`: the inputs of the tests, the
 * curve of the model's scores on them (vit_perturb_curve: the forward passes), and the
 * scores of the results.
 *   - Perturbation tests (Chefer et al. 2021, "Transformer Interpretability Beyond
 *     Attention Visualization", §4): patches are removed in vit_patch_order, most
 *     relevant first ("positive": a faithful map makes the score fall fast, a low AUC)
 *     or least relevant first ("negative": a high AUC), vit_perturb_count(s, n_steps,
 *     N) of them at step s; the score after each step is a curve (vit_perturb_curve),
 *     vit_auc its area.
 *     (Chefer et al.'s code ranks the pixels of the map upsampled to the input;
 *     vitlens removes whole patches, the tokens the model sees.)
 *   - Deletion and insertion (Petsiuk et al. 2018, "RISE: Randomized Input Sampling
 *     for Explanation of Black-box Models", its causal metrics): deletion removes the
 *     most relevant patches first (vit_patch_mix, fill NULL); insertion starts from a
 *     blurred copy (vit_blur) and puts the input's patches back, most relevant first
 *     (vit_patch_mix, base the blurred input, fill the input).
 *   - Localisation against a mask of the object (vit_mask_to_patches): the pointing
 *     game, the energy-based pointing game, the IoU of the top-k patches.
 *   - Sanity check (Adebayo et al. 2018, "Sanity Checks for Saliency Maps", the model
 *     parameter randomisation test): vit_spearman of the map of the trained model and
 *     of one with randomised weights; a map that does not change does not explain
 *     what the model learnt. Adebayo et al. report it with and without absolute
 *     values: pass |map| for the latter.
 *   - Baselines any map should beat: vit_random_map, vit_gaussian_map.
 * Maps here are [N] over the patches (row-major [gh, gw], patch p at row p / gw,
 * column p % gw) unless said otherwise; a mask is bytes, non-zero in, 0 out. The
 * functions that return a double return NaN when they cannot give a score, and
 * those that take a VitError then fill it (VIT_ERR_ARG unless said otherwise). */

/* Order of the patches for a perturbation test: order [n] the indices 0 .. n-1 by
 * decreasing map value (most_first 1: "positive" perturbation, the most relevant
 * first) or increasing (most_first 0: "negative"). Ties, in both directions: the
 * lower index first, so a constant map gives 0 .. n-1 either way and the order
 * depends on the map alone (-0 and +0 tie). map [n]; order [n], caller's. Nothing
 * allocated, O(n log n). Errors: VIT_ERR_ARG (order or map NULL, n < 1, a NaN or
 * infinite value: the message gives its index). */
VitStatus vit_patch_order(int *order, const float *map, int n, int most_first, VitError *err);

/* How many of n patches are removed after step `step` of n_steps: round-half-up(step
 * * n / n_steps), in exact 64-bit integer arithmetic, so step 0 removes none, step
 * n_steps all n, and the count never decreases with step (n 196 in 10 steps: 0, 20,
 * 39, 59, 78, 98, 118, 137, 157, 176, 196). step is clamped to [0, n_steps]; n_steps
 * < 1 or n < 1 gives 0. (Chefer et al.'s code truncates instead, int(N * f) of a
 * float fraction f: one lower wherever the fraction's part is .5 or more.) */
int vit_perturb_count(int step, int n_steps, int n);

/* One perturbed input: out [3, Sh, Sw] = base [3, Sh, Sw] with the pixels of the
 * patches order[0 .. k) (patch p: the P x P px square at grid row p / gw, column
 * p % gw, all three channels) taken from fill [3, Sh, Sw], or set to 0 when fill is
 * NULL. 0 is the channel's mean after vit_preprocess's normalisation: RISE's deletion
 * (zeros of the normalised input). Chefer et al.'s code sets the pixels to 0 before
 * normalising, i.e. black: pass a fill of (0 - mean[c]) / std[c] per channel c for
 * that. Sh, Sw, P, gw, N from cfg (image_h, image_w, patch_size, grid_w, n_patches).
 * k is clamped to N; entries of order outside [0, N) are skipped. out may equal base
 * (in place); it must not overlap fill. All arrays caller's. */
void vit_patch_mix(float *out, const float *base, const float *fill, const VitConfig *cfg,
                   const int *order, int k);

/* The perturbation curve of one map (Chefer et al. 2021, §4: positive and negative
 * perturbation; Petsiuk et al. 2018, RISE: deletion and insertion): the class
 * probabilities of the model on base with the first counts[i] patches of order replaced
 * by fill's, for each i < n_counts:
 *   probs[i, :] = softmax(head(vit(vit_patch_mix(base, fill, order, counts[i]))))
 * base, fill [3, Sh, Sw] normalised inputs (VitRun.input; fill NULL: zeros, i.e.
 * deletion and perturbation; insertion: base the blurred input (vit_blur) and fill the
 * input). order [N] from vit_patch_order. counts [n_counts], each in [0, N], in any
 * order and repeats allowed: typically vit_perturb_count(s, n_steps, N) for s = 0 ..
 * n_steps. probs [n_counts, C], caller's (the mean of both heads for a distilled model,
 * as VitRun.probs). Runs vit_forward_batch on b (made by vit_batch_init for vit or a
 * model of the same shapes) b->max_batch inputs at a time, in the order of counts: the
 * values are those of vit_forward_batch, within its tolerance of vit_forward's. To read
 * the curve of class c: probs[i*C + c]; its area: vit_auc. Allocates min(max_batch,
 * n_counts) * 3*Sh*Sw floats of scratch, freed before it returns. Errors: VIT_ERR_ARG (a
 * NULL array, n_counts < 1, a count outside [0, N], b not made for this model, a model
 * without head), VIT_ERR_NOMEM; on error probs is partly written. */
VitStatus vit_perturb_curve(float *probs, VitBatch *b, const Vit *vit, const float *base,
                            const float *fill, const int *order, const int *counts, int n_counts,
                            VitError *err);

/* Gaussian blur, the start of RISE's insertion test (its substrate, a blur by
 * gkern(klen=11, nsig=5): sigma 5, radius 5): out [C, H, W] = in [C, H, W] convolved
 * per channel with g[x] g[y], g[x] = exp(-x^2 / (2 sigma^2)) for x in [-radius,
 * radius] normalised to sum 1, separably (rows, then columns) in double, pixels
 * outside the image counting as 0 (torch.nn.functional.conv2d with padding = radius,
 * as RISE runs it: the border darkens towards 0). sigma in px.
 * Where RISE differs: gkern makes its kernel with scipy's gaussian_filter of an 11 x
 * 11 delta (sigma 5, truncated at 4 sigma = 20 px, mode 'reflect'), so the Gaussian's
 * tails beyond 5 px are folded back into the 11 taps: its 1-D taps run 0.0880 (ends)
 * to 0.0940 (centre), nearly a box, where this function's at sigma 5, radius 5 run
 * 0.0663 to 0.1094 (largest difference 0.022 per 1-D tap, 0.0033 per 2-D tap; the
 * two blurs of a 64 x 64 image of unit-variance noise differ by up to 0.065). RISE
 * also keeps the 2-D kernel in float32 and sums in float32 (3.6e-7 from this
 * function on normalised-image values, tests/faithful).
 * out [C, H, W] caller's, must not overlap in. Allocates H*W doubles of scratch.
 * Errors: VIT_ERR_ARG (out or in NULL, out == in, C < 1, H or W outside [1,
 * VIT_MAX_INPUT], sigma not a finite value > 0, radius outside [0, VIT_MAX_INPUT]),
 * VIT_ERR_NOMEM. */
VitStatus vit_blur(float *out, const float *in, int n_channels, int h, int w, float sigma,
                   int radius, VitError *err);

/* Area under a curve y [n] sampled at n evenly spaced x from 0 to 1 (step s at x = s
 * / (n - 1)), by the trapezoid rule, summed in double: (sum y - y[0] / 2 - y[n-1] / 2)
 * / (n - 1), RISE's auc() and numpy.trapz(y, dx=1/(n-1)). The AUC the perturbation
 * tests report; y in the score's units. NaN when y is NULL or n < 2. */
double vit_auc(const float *y, int n);

/* A map reduced to the patches, out [N]: pixels 1, map [Sh, Sw] over the input
 * pixels, each patch's P x P pixels summed in double (a sum, not a mean: the mass a
 * patch holds); pixels 0, map [N] already over the patches, copied. Sizes from cfg.
 * out may equal map when pixels is 0. */
void vit_map_to_patches(float *out, const float *map, const VitConfig *cfg, int pixels);

/* A mask of the object over the model's input pixels, mask [Sh, Sw] (non-zero in),
 * to the patches: out[p] = 1 when at least half of patch p's P*P pixels are in the
 * mask (2 * count >= P*P, in integers: 8 of 16 pixels is in, 4 of 9 is not), else 0.
 * Returns the number of patches in. out [N], caller's. Sizes from cfg. */
int vit_mask_to_patches(uint8_t *out, const uint8_t *mask, const VitConfig *cfg);

/* Pointing game (Zhang et al. 2016, "Top-down Neural Attention by Excitation
 * Backprop", at patch granularity and without their 15 px tolerance): the share of
 * the map's maximal patches (every patch equal to the maximum) that lie in the mask:
 * 1 (a hit) or 0 (a miss) for a unique maximum, k / m when k of m tied maxima are in;
 * a constant map gives the mask's share of the patches. map [n], mask [n].
 * Errors (NaN): map or mask NULL, n < 1, a NaN or infinite value (the message gives
 * its index), an empty mask. */
double vit_pointing_game(const float *map, const uint8_t *mask, int n, VitError *err);

/* Energy-based pointing game (Wang et al. 2020, "Score-CAM: Score-Weighted Visual
 * Explanations for Convolutional Neural Networks", §5.2): the share of the map's
 * positive mass inside the mask, sum of max(map, 0) over the mask / sum of max(map,
 * 0) over all n patches, in double; in [0, 1]. Score-CAM takes it over pixels in a
 * bounding box; give it a pixel map and mask through vit_map_to_patches and
 * vit_mask_to_patches for patches, or call it with n = Sh*Sw for pixels.
 * Errors (NaN): those of vit_pointing_game, and a map with no value > 0 (0 / 0). */
double vit_energy_pointing(const float *map, const uint8_t *mask, int n, VitError *err);

/* IoU of the map's top-k patches with the mask, k = the number of patches in the
 * mask: the first k of vit_patch_order(most_first 1) (ties: lower index first)
 * against the mask, |top-k and mask| / |top-k or mask|; in [0, 1], 1 when the k most
 * relevant patches are exactly the mask. Allocates n ints.
 * Errors (NaN): those of vit_pointing_game, VIT_ERR_NOMEM. */
double vit_topk_iou(const float *map, const uint8_t *mask, int n, VitError *err);

/* How far two maps agree on where the relevance is (the compare view's status line,
 * `vitlens --agreement`): the IoU of a [n]'s and b [n]'s top patches, each the first k
 * of vit_patch_order(most_first 1), k = floor(top_frac * n + 0.5) in double, clamped to
 * [1, n] (top_frac 0.1, n 196: k 20); ties at the cut go to the lower index, as
 * numpy's argsort(-a, kind="stable")[:k]. Returns |top(a) and top(b)| / |top(a) or
 * top(b)| in [0, 1]: 1 when the two sets are the same, 0 when disjoint; two
 * independent random maps give k / (2n - k) on average (0.053 at top_frac 0.1).
 * Errors (NaN, err filled): a or b NULL, n < 1, top_frac not in (0, 1], a NaN or
 * infinite value (the message names the map and index), a constant map (every patch
 * tied: it has no top patches; as vit_spearman gives NaN), out of memory (2n ints). */
double vit_top_iou(const float *a, const float *b, int n, double top_frac, VitError *err);

/* Spearman's rank correlation of a [n] and b [n] (scipy.stats.spearmanr): the
 * Pearson correlation of their ranks, a tie group sharing the mean of its ranks, in
 * double; in [-1, 1]. NaN when either is constant (every rank equal), n < 2, a or b
 * NULL, a value NaN or infinite, or out of memory (2n doubles and n ints). */
double vit_spearman(const float *a, const float *b, int n);

/* Baseline: a uniform random map out [n] in [0, 1), float(x >> 40) / 2^24 for each
 * 64-bit output x of splitmix64 seeded with seed (the generator's state lives in the
 * call: the same seed gives the same map on every machine and thread). n < 1: nothing
 * written. */
void vit_random_map(float *out, int n, uint64_t seed);

/* Baseline: a centred isotropic Gaussian over the grid, out [gh, gw] = exp(-d^2 / (2
 * s^2)), d the distance in patches from the grid's centre ((gh-1)/2, (gw-1)/2), s =
 * sigma_frac * min(gh, gw) patches; 1 at the centre, computed in double. A map of
 * "the object is in the middle" (the centre bias of ImageNet photos). sigma_frac +inf
 * gives all 1; sigma_frac <= 0 or NaN the limit s -> 0: 1 on a patch at the exact
 * centre (odd gh and gw), 0 elsewhere. gh or gw < 1: nothing written. */
void vit_gaussian_map(float *out, int gh, int gw, float sigma_frac);

/* ---------------------------------------------------------------------------
 * The lesson: how a ViT computes, step by step, on one photo (the app's lesson view,
 * `vitlens --lesson-export`). Every number a step shows comes from these calls, which
 * read the forward pass (VitRun) or rerun one block of it with the forward pass's own
 * code (engine/passes/block.c) on its own input tokens: the same values, not a second
 * model. The steps follow the notebooks a class builds a ViT in (Dosovitskiy et al.
 * 2021, "An Image is Worth 16x16 Words", §3.1, eq. 1-4; Fig. 7 for the filters and the
 * position embedding):
 *   patches (unfold, row-major) -> patch embedding (a stride-P convolution = a matmul)
 *   -> CLS token first, + position embedding -> per block: LayerNorm, q/k/v per head,
 *   q.k^T / sqrt(Dh), softmax, the weighted sum of values, heads concatenated and
 *   projected, the residual add, the MLP with GELU, the second residual add -> the
 *   final LayerNorm of the CLS token, the head, softmax. */

/* Step 1-2, patch `patch` (0 .. N-1, grid row patch / gw, column patch % gw: the order
 * of unfold and of a stride-P convolution's flatten(2)): pixels [3, P, P] (= [3*P*P],
 * may be NULL) its normalised values as the patch embedding reads them (the im2col row
 * of the forward pass, run->input cut at the patch), embedding [D] (may be NULL) the
 * patch embedding of that patch alone, patch_w . pixels + patch_b (the convolution's
 * output at the patch, before the position embedding). Both caller's.
 * Errors: VIT_ERR_ARG (patch out of range, no forward pass). */
VitStatus vit_lesson_patch(float *pixels, float *embedding, const VitRun *run, const Vit *vit,
                           int patch, VitError *err);

/* Step 2, the patch embedding's filters as images (ViT paper, Fig. 7 left: "RGB
 * embedding filters (first 28 principal components)"): a PCA of the D filters
 * patch_w [D, 3*P*P], each a row, centred on the mean filter, in double (LAPACK's
 * dsyevr on the smaller of the scatter [3PP, 3PP] and Gram [D, D] matrices). comps
 * [k, 3, P, P] the first k unit principal components (decreasing variance), each
 * with its largest |loading| positive (the first within 1e-9 of it); var [k] (may be
 * NULL) each one's share of the total variance. k is at most min(D - 1, 3*P*P); ask
 * for more and the extra rows are 0. Returns the number of components written, or -1
 * on error (VIT_ERR_ARG: k < 1 or a NULL comps; VIT_ERR_NOMEM; VIT_ERR_FORMAT: dsyevr
 * failed). Allocates O(min(D, 3PP)^2 + D*3PP) doubles, freed before it returns. */
int vit_lesson_filters(float *comps, float *var, const Vit *vit, int k, VitError *err);

/* Step 3, the position embeddings' similarity (ViT paper, Fig. 7 centre): out [N, N],
 * out[i, j] the cosine similarity of patch i's and patch j's position embedding (the
 * rows the forward pass adds, resampled to the input grid: pos_embed[pos_prefix + i]),
 * in double; row i is patch i's gh x gw grid. A zero vector gives 0. Caller's. A rotary
 * model (cfg.rope) has no such rows: the rows of its rotation table (VitWeights.rope,
 * cosines then sines) take their place, whose cosine similarity is the mean over the
 * rotated pairs of cos(a_i - a_j), what the scores see of two positions. */
void vit_lesson_pos_similarity(float *out, const Vit *vit);

/* Step 4, inside block `layer` for one head and one query token. vit_lesson_block
 * reruns the block on its input tokens run->tokens[layer] with vit_forward's own block
 * (engine/passes/block.c: the same calls, on the run's thread pool, so its output
 * equals run->tokens[layer + 1] bit for bit wherever the run computed it) and keeps
 * every intermediate; vit_lesson_select then reads one (head, token) out of them
 * without engine work beyond one [<= VIT_ATT_BLOCK, T] product of queries and keys.
 * Buffers are [T, .] rows in token order; the selected token's view is at the end. */
typedef struct {
    VitConfig cfg;
    int layer;   /* the block whose internals are held, -1 before vit_lesson_block */
    float *x;    /* [T, D] the block's input (tokens[layer]) */
    float *xn1;  /* [T, D] norm1(x) */
    float *qk;   /* [T, 2A] queries then keys, heads side by side (Dh columns each) */
    float *v;    /* [T, A] values */
    float *att;  /* [H, T, T] softmax(q k^T / sqrt(Dh)) per head */
    float *ctx;  /* [T, A] every head's weighted sum of values, concatenated */
    float *proj; /* [T, D] proj(ctx), before LayerScale and the residual add */
    float *xm;   /* [T, D] x + ls1 * proj(ctx): after the first residual add */
    float *xn2;  /* [T, D] norm2(xm) */
    float *hpre; /* [T, F] fc1(xn2), before GELU */
    float *hid;  /* [T, F] GELU(hpre) */
    float *mlp;  /* [T, D] fc2(hid), before LayerScale and the residual add */
    float *out;  /* [T, D] xm + ls2 * mlp: the block's output */
    /* the selected (head, token), written by vit_lesson_select */
    int head, token;  /* -1 before vit_lesson_select */
    float ln_mean;    /* norm1's mean of x[token] */
    float ln_std;     /* norm1's sqrt(var + eps) of x[token] (biased variance) */
    float *query;     /* [Dh] the token's query in this head */
    float *keys;      /* [T, Dh] every token's key in this head */
    float *values;    /* [T, Dh] every token's value in this head */
    float *scores;    /* [T] q . k_j / sqrt(Dh), the forward pass's product before softmax */
    float *probs;     /* [T] softmax(scores): the attention row, bit for bit what
                         vit_map_attention (patches) and vit_prefix_share (prefix) read */
    float norm_in;    /* |x[token]|, the residual stream before the attention add */
    float norm_mid;   /* |xm[token]|, after it */
    float norm_out;   /* |out[token]|, after the MLP add */
    float gelu_share; /* share of the F hidden units with GELU(hpre) > 0 at the token */
    /* a rotary model (cfg.rope): the rotation of the token's query and key in this head
       (VIT_ROPE_DINOV3's pairs (i, i + Dh/2), i < Dh/2), as the run applied it (a position
       shuffle: the angles of patch pos_perm[p]; --pos zero: none); zeros otherwise */
    float *query0;      /* [Dh] the query before the rotation (query: after it) */
    float *key0;        /* [Dh] the token's key before the rotation (keys[token]: after) */
    float *angles;      /* [Dh/2] pair i's rotation angle, rad in (-pi, pi]: pairs i < Dh/4
                           turn with the patch's row (y), the others with its column (x);
                           0 for a prefix token (not rotated) */
    float *rope_scores; /* [N] query . R(a_p) key0 / sqrt(Dh) for every patch p: the token's
                           own key moved to patch p, i.e. q0^T R(a_p - a_token) k0, which
                           depends on the offset of p from the token only (before any
                           temperature) */
    /* private */
    float *mem;
    float *sel;
    const float *rope; /* [N, Dh] the block's rotary table (VitWeights.rope), or NULL */
} VitLesson;

/* Allocate a VitLesson for runs of vit: T*(11D + 2F) + H*T*T + (2T + 4)*Dh +
 * (3 + VIT_ATT_BLOCK)*T floats (DeiT-Tiny: 3.6 MB). Errors: VIT_ERR_NOMEM. Free with
 * vit_lesson_free (NULL-safe, accepts a zeroed VitLesson). */
VitStatus vit_lesson_init(VitLesson *ls, const Vit *vit, VitError *err);
void vit_lesson_free(VitLesson *ls);

/* Rerun block `layer` (0 .. L-1) of the forward pass in run into ls, as above. One
 * block's work (1/L of a forward pass) on the run's pool: not reentrant with
 * vit_forward or another call using the same run's pool. The selection is cleared.
 * Errors: VIT_ERR_ARG (layer out of range, no forward pass, ls not made for vit). */
VitStatus vit_lesson_block(VitLesson *ls, const VitRun *run, const Vit *vit, int layer,
                           VitError *err);

/* Select head (0 .. H-1) and query token (0 .. T-1: 0 the CLS token, Np + r*gw + c the
 * patch (r, c)) of the block ls holds: fills ln_mean .. gelu_share, and for a rotary model
 * query0 .. rope_scores (the rotation undone on query and keys[token]: exact up to float
 * rounding). probs is read as
 * vit_map_attention reads it (run->att, or recomputed from the run's queries and keys).
 * Errors: VIT_ERR_ARG (range, no block yet), VIT_ERR_NOMEM (recomputed attention). */
VitStatus vit_lesson_select(VitLesson *ls, const VitRun *run, int head, int token, VitError *err);

/* Step 5, the head: cls_norm [D] = the final LayerNorm of the CLS token
 * (run->tokens[L][0]), the row the head reads (a pooled head, VitConfig.head_pool: the
 * first D floats of what it reads, fc_norm(mean of the patches) or the CLS half of
 * [CLS ; mean]); the logits and their softmax are
 * run->logits and run->probs (for a distilled model the mean of both heads, as
 * timm's inference), vit_top_k gives the top-5. Errors: VIT_ERR_ARG (a model without
 * head, C == 0: "the model has no classification head"; no forward pass). */
VitStatus vit_lesson_head(float *cls_norm, const VitRun *run, const Vit *vit, VitError *err);

/* Step 5 of a model pooled by attention (VitConfig.head_pool VIT_POOL_MAP: SigLIP's MAP
 * head; Zhai et al. 2023, big_vision MAPHead; transformers' SiglipMultiheadAttentionPoolingHead):
 * one learned probe vector, not a token of the image, is the query of an attention over the
 * final LayerNorm of the last block's patch tokens, per head; the heads' weighted sums of
 * values are concatenated and projected (out_proj), then e = a + MLP(LayerNorm(a)) is the
 * image embedding. vit_lesson_probe reruns the head with vit_forward's own call
 * (engine/passes/head.c, probe.c) on the run's pool and on the run's last block output,
 * an intervention's dropped patches left out as the run left them, and keeps every
 * intermediate; att equals run->probe_att and embedding the head's output (run->img_embed
 * when kept) bit for bit. */
typedef struct {
    float *att;         /* [H, N] the probe's attention per head, rows sum to 1 (dropped
                           patches 0) */
    const float *probe; /* [D] the learned probe (VitWeights.map.probe: a weight) */
    float *query;       /* [D] its query, probe Wq^T + bq, heads side by side (Dh each) */
    float *weighted;    /* [D] each head's attention-weighted sum of values, concatenated */
    float *attended;    /* [D] out_proj(weighted): the residual */
    float *mlp;         /* [D] fc2(act(fc1(LayerNorm(attended)))) */
    float *embedding;   /* [D] attended + mlp: the image embedding (the MAP head's output) */
    /* private */
    float *mem;
} VitLessonProbe;

/* Fill p (allocated: H*N + 5*D floats, and a scratch freed before it returns; free with
 * vit_lesson_probe_free, which accepts a zeroed VitLessonProbe). Not reentrant with
 * vit_forward or another call on the same run's pool. Errors: VIT_ERR_ARG (a model
 * without a MAP head: "... has no attention-pooling (MAP) head"; no forward pass),
 * VIT_ERR_NOMEM. */
VitStatus vit_lesson_probe(VitLessonProbe *p, const VitRun *run, const Vit *vit, VitError *err);
void vit_lesson_probe_free(VitLessonProbe *p);

/* ---------------------------------------------------------------------------
 * The CLIP, SigLIP and SigLIP 2 tokenizers (engine/text/tokenizer.c, spiece.c)
 *
 * OpenAI CLIP's byte-level BPE (clip/simple_tokenizer.py, Radford et al. 2021): the text
 * cleaned (a fixed part of ftfy.fix_text, html.unescape twice, whitespace collapsed,
 * lower-cased), split by CLIP's pattern, each piece's UTF-8 bytes merged by rank, then
 * [<|startoftext|>, ..., <|endoftext|>]. The exact cleaning, and what of ftfy it leaves
 * out, is at the top of tokenizer.c; tests/text checks the ids against a reference
 * written from the published algorithm on 10 000 strings.
 *
 * SigLIP's tokenizer, behind the same calls (engine/text/spiece.c): Hugging Face's
 * SiglipTokenizer + processor(padding="max_length", truncation=True) over spiece.model (a
 * SentencePiece model read by Debian's libsentencepiece): every character lower-cased, the
 * text split on "</s>" / "<unk>", ASCII punctuation removed, whitespace collapsed,
 * SentencePiece without the dummy prefix, "</s>" appended, padded with "</s>" to exactly
 * max_ids (64 for SigLIP's text tower, which pools the last position: the padding is part
 * of the model's input). No SOT (vit_token_sot -1). tests/text/test_siglip_tokenizer.py
 * checks it against HF's steps written out, on a model it trains.
 *
 * SigLIP 2's, behind the same calls: Gemma's tokenizer.model (SentencePiece BPE with byte
 * fallback; "<pad>" 0, "<eos>" 1) as big_vision's SigLIP 2 demo tokenizes a text
 * (lower|tok(length=64, model="gemma", bos="no", eos="sticky")): A-Z lower-cased (ASCII
 * only, tf.strings.lower's default), SentencePiece on the text as it is, "<eos>" appended,
 * a longer text cut to max_ids - 1 ids and "<eos>", a shorter one padded with "<pad>" to
 * exactly max_ids (the last position, which the text tower pools, then holds "<pad>").
 * No punctuation removal, no BOS. Which tokenizer a .model file is comes from its pieces
 * (vit_tokenizer_kind). tests/text/test_gemma_tokenizer.py checks it against big_vision's
 * steps written out, on a BPE model it trains. */

#define VIT_TEXT_CONTEXT   77    /* CLIP's context length, tokens including SOT and EOT */
#define VIT_TEXT_MAX_BYTES 16384 /* a longer text is refused (77 tokens read far less) */

typedef struct VitTokenizer VitTokenizer; /* read-only after load: threads may share it */

/* Load CLIP's vocabulary: OpenAI's bpe_simple_vocab_16e6.txt.gz (gzip: zlib), or Hugging
 * Face's vocab.json + merges.txt (path: either file, or their folder; a folder with the
 * .gz works too). 49 408 ids: the 256 byte symbols, the same with "</w>", one per merge,
 * <|startoftext|> and <|endoftext|>. Or a SentencePiece model: a path ending ".model", or a
 * folder holding spiece.model or tokenizer.model (in that order) and no CLIP vocabulary;
 * SigLIP's (a "</s>" piece) or Gemma's (SigLIP 2: "<eos>" and "<pad>" its EOS and padding, byte
 * fallback), a model that is neither refused naming the file (VIT_ERR_FORMAT). *tok is the
 * caller's: free with vit_tokenizer_free. Errors: VIT_ERR_IO (missing file, naming it),
 * VIT_ERR_FORMAT (a corrupt or cut gzip, a merge line that is not two known symbols, naming file
 * and line; a vocab.json entry that is not a new id; a SentencePiece model of neither kind),
 * VIT_ERR_ARG (not a vocabulary's name), VIT_ERR_NOMEM. */
VitStatus vit_tokenizer_load(VitTokenizer **tok, const char *path, VitError *err);
void vit_tokenizer_free(VitTokenizer *tok); /* NULL-safe */

/* The vocabulary that came with a model file: beside it or in its "tokenizer" folder,
 * vocab.json + merges.txt (the path of vocab.json), bpe_simple_vocab_16e6.txt.gz,
 * spiece.model (SigLIP's) or tokenizer.model (SigLIP 2's Gemma tokenizer), in that order;
 * model_path may also be the model's folder. 1 and the path in path[n], or 0 (none, or a path
 * that does not fit). */
int vit_tokenizer_find(char *path, size_t n, const char *model_path);

/* text (a C string of UTF-8, at most VIT_TEXT_MAX_BYTES) -> ids[*n]: [SOT, ..., EOT], *n <= max_ids
 * (VIT_TEXT_CONTEXT for CLIP's text tower). SigLIP's: *n = max_ids always ([..., </s>, </s>
 * padding], the first max_ids - 1 pieces and "</s>" when cut; every text accepted, an
 * empty one is [</s>] padded, as in the original). SigLIP 2's (Gemma's): *n = max_ids
 * always ([..., <eos>, <pad> padding], the first max_ids - 1 ids and <eos> when cut; an empty
 * text is [<eos>] padded). A text with more tokens is cut as
 * clip.tokenize(truncate=True) cuts it: the first max_ids - 2 and EOT, *truncated = 1
 * (NULL: not asked). The text "<|endoftext|>" in it is that token, as in the original.
 * Errors: VIT_ERR_ARG (empty or whitespace-only text, nothing left after the cleaning,
 * invalid UTF-8 with the offset of its first bad byte, too long, max_ids < 2, NULL
 * arguments), VIT_ERR_NOMEM. */
VitStatus vit_tokenize(int *ids, int *n, int *truncated, const VitTokenizer *tok, const char *text,
                       int max_ids, VitError *err);
int vit_token_sot(const VitTokenizer *tok); /* <|startoftext|>: 49406 in CLIP's; SigLIP: -1 */
int vit_token_eot(const VitTokenizer *tok); /* <|endoftext|>: 49407; SigLIP's "</s>": 1,
                                               Gemma's "<eos>": 1 */
/* Which tokenizer tok is: "clip" (CLIP's BPE), "siglip" (SigLIP's spiece.model) or "gemma"
 * (SigLIP 2's Gemma tokenizer.model); a static string. */
const char *vit_tokenizer_kind(const VitTokenizer *tok);

/* ---------------------------------------------------------------------------
 * The CLIP text tower (engine/text/text.c): a phrase's embedding, to compare with an
 * image embedding (Radford et al. 2021, "Learning Transferable Visual Models From
 * Natural Language Supervision", §2.4; OpenAI CLIP's clip/model.py encode_text):
 *   x = token_embedding[ids] + positional_embedding[:n]            [n, W]
 *   L pre-norm blocks with a causal mask: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)),
 *       mlp = c_proj(act(c_fc(.))), act QuickGELU for OpenAI's weights
 *   e = ln_final(x)[argmax(ids)] @ text_projection                 [E]
 * argmax(ids) is the first end-of-text token: EOT (49407) is the largest id.
 * Symbols: V vocabulary, ctx context (77), W width, H heads, Dh = W / H, F MLP width,
 * L layers, E embedding (text_projection's output). The blocks are vit_forward's own
 * (engine/passes/block.c) with the causal mask as an option of the attention. */

#define VIT_TEXT_MAX_CONTEXT 4096      /* ctx: rows of the position embedding */
#define VIT_TEXT_MAX_VOCAB   (1 << 22) /* V: rows of the token embedding */

/* How a text tower reads its sequence and which row it pools. */
typedef enum {
    VIT_TEXT_POOL_EOT = 0, /* CLIP: a causal mask, the first largest id (argmax(ids): EOT) */
    VIT_TEXT_POOL_LAST,    /* SigLIP: no mask, exactly ctx ids (padded with "</s>"), the last
                              position pooled: HF SiglipTextTransformer's
                              last_hidden_state[:, -1, :], big_vision's "last" pool_type */
} VitTextPool;

typedef struct {
    int vocab_size;    /* V (49408) */
    int context;       /* ctx, tokens including SOT and EOT (77) */
    int width;         /* W (512 for B/32 and B/16) */
    int n_heads;       /* H: config.json's text_config.num_attention_heads, open_clip_config.json's
                          model_cfg.text_cfg.heads, else W / 64 (OpenAI's rule) */
    int n_layers;      /* L */
    int mlp_dim;       /* F (4 W) */
    int embed_dim;     /* E: text_projection's output (512) */
    float ln_eps;      /* LayerNorm eps: 1e-5 (config.json's text_config.layer_norm_eps) */
    VitActivation act; /* the MLP's activation, see act_from */
    VitNaming naming;  /* VIT_NAMES_HF (CLIPModel or SiglipModel: text_model.*) or
                          VIT_NAMES_OPENAI (OpenAI and OpenCLIP: token_embedding,
                          transformer.resblocks.N.*) */
    const char *act_from; /* static string: where act came from (for the app to show) */
    VitTextPool pool;     /* CLIP's (EOT, causal) or SigLIP's (LAST, no mask) */
} VitTextConfig;

/* A loaded text tower. Zero-initialise before vit_text_load; vit_text_free accepts a
 * zeroed or half-built VitText. Read-only after load (several threads may embed with it
 * at once), except that a caller may change cfg.act and cfg.n_heads before embedding
 * (an option that overrides the checkpoint's rule): vit_text_embed reads them and
 * checks W % H. Linear weights are [out, in] (vit.h's convention). */
typedef struct {
    VitTextConfig cfg;
    const float *token_embed;     /* [V, W] */
    const float *pos_embed;       /* [ctx, W] */
    VitBlock *blocks;             /* [L], owned: norm1 = ln_1, q/k/v (OpenAI's fused
                                     in_proj: qkv_w), proj = out_proj, norm2 = ln_2,
                                     fc1 = c_fc, fc2 = c_proj */
    const float *norm_w, *norm_b; /* ln_final [W] */
    const float *proj_w;          /* [E, W]: OpenAI's text_projection [W, E] transposed at
                                     load, so that e = proj_w . x */
    const float *proj_b;          /* [E] (OpenCLIP's proj_bias), or NULL */
    float logit_scale;            /* exp() of the checkpoint's logit_scale (CLIP's learned
                                     temperature, 100 for OpenAI's); 0 when it has none */
    float logit_bias;             /* SigLIP's logit_bias (0 when the file has none) */
    int sigmoid;                  /* 1: SigLIP: each label's probability is sigmoid(logit),
                                     independent of the others (vit_text_scores) */
    char path[1024];              /* the weights file */
    /* private */
    Vit file;          /* the mapping or the checkpoint's storages the weights point into, and
                          the F16/BF16 tensors converted to F32, held as vit_load holds them */
    float *proj_owned; /* OpenAI's text_projection transposed */
} VitText;

/* Load the text tower of a CLIP checkpoint: .safetensors or a PyTorch checkpoint (.pth,
 * .pt, .bin: torch.save's zip, read by vit_load's readers with their checks), the same
 * file as the image tower or one holding the text tower alone, in either naming:
 *   Hugging Face CLIPModel (modeling_clip.py): text_model.embeddings.token_embedding.weight
 *     [V, W], text_model.embeddings.position_embedding.weight [ctx, W],
 *     text_model.encoder.layers.N.{layer_norm1, self_attn.{q,k,v,out}_proj, layer_norm2,
 *     mlp.fc1, mlp.fc2}, text_model.final_layer_norm, text_projection.weight [E, W]
 *   OpenAI / OpenCLIP (clip/model.py, open_clip's TextTransformer): token_embedding.weight,
 *     positional_embedding [ctx, W], transformer.resblocks.N.{ln_1, attn.in_proj_weight
 *     [3W, W], attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_final,
 *     text_projection [W, E] (used as x @ P; OpenCLIP's linear text_projection.weight [E, W]
 *     and .bias also read)
 *   Hugging Face SiglipModel (modeling_siglip.py SiglipTextTransformer, detected by
 *     text_model.head.weight): CLIPModel's text_model.* names above, no text_projection but
 *     text_model.head.weight [E, W] and .bias [E] (a Linear with bias on the pooled row),
 *     and logit_bias (a scalar); cfg.pool VIT_TEXT_POOL_LAST (no mask, position ctx - 1),
 *     t->sigmoid 1. Defaults SiglipTextConfig's (google's config.json sets no size):
 *     12 heads, gelu_pytorch_tanh, eps 1e-6; config.json's text_config overrides them.
 *     The SiglipModel file also holds vision_model.* (vit_load's) and both logit tensors.
 * and logit_scale (a scalar; optional). L counts the blocks; every shape is checked
 * against W, F, E. The activation, heads and eps (the rule; the caller may override act
 * and n_heads afterwards, see VitText):
 *   Hugging Face names: config.json beside the weights, its text_config's hidden_act
 *     ("quick_gelu", "gelu", "gelu_new" / "gelu_pytorch_tanh"), num_attention_heads,
 *     layer_norm_eps; without them CLIPTextConfig's defaults: QuickGELU, eps 1e-5.
 *   OpenAI names: open_clip_config.json beside the weights: model_cfg.quick_gelu true ->
 *     QuickGELU, else GELU (open_clip's default); text_cfg.heads, text_cfg.norm_kwargs.eps.
 *     Without it QuickGELU: OpenAI's own weights (and OpenCLIP's "-quickgelu" models); an
 *     OpenCLIP model trained with GELU needs its open_clip_config.json, or cfg.act set.
 *   H: those configs, else W / 64 (OpenAI's build_model).
 * open_clip_config.json asking for what this tower does not do (pool_type other than
 * "argmax", no_causal_mask, embed_cls) is refused by name.
 * Errors: VIT_ERR_IO (cannot open), VIT_ERR_FORMAT (a malformed file or config, a NaN
 * weight; "FILE: no text tower ..." when the file has none, saying whether it holds an
 * image tower only), VIT_ERR_SHAPE (a tensor missing or of the wrong shape, named with
 * its file, got and expected), VIT_ERR_NOMEM. Free with vit_text_free. */
VitStatus vit_text_load(VitText *t, const char *path, VitError *err);
void vit_text_free(VitText *t);

/* Embeddings out [n, E] (projected, NOT normalised; row i for sequence i) of n token
 * sequences ids[i] [lens[i]] (1 <= lens[i] <= ctx, ids in [0, V): vit_tokenize's [SOT,
 * ..., EOT]; padding after EOT allowed), each pooled at its first largest id (OpenAI:
 * text.argmax(dim=-1), the first EOT), on n_threads threads (0: one per online core,
 * at most VIT_MAX_THREADS). The published model's values on the sequence padded to ctx,
 * computed with less work, exactly: with the causal mask token t depends on tokens 0 .. t
 * alone, so (1) the tokens after the pooled one change nothing it computes and are not
 * computed, and (2) sequences that start with the same tokens have the same rows there:
 * the sequences are merged into a prefix tree, each distinct prefix computed once (a
 * template's "a photo of a" once for all its class names), up to 256 rows a batch run as
 * one sequence through vit_forward's block with the tree as its causal mask (a row sees
 * itself and its ancestors; every other key's probability exactly 0). Each linear layer
 * is one GEMM over the batch's rows. Allocates about 256 (8W + F + E) floats of
 * activations and a thread pool, freed before it returns. Thread-safe on one VitText.
 * SigLIP (cfg.pool VIT_TEXT_POOL_LAST): each sequence exactly ctx (64) ids, vit_tokenize's
 * padded ones (the padding "</s>" is what the last position reads: the published pipelines
 * pass no attention mask, docs/families-2026.md §2.3), run whole with no mask, up to
 * 256 / ctx sequences a batch; a shorter sequence is refused (VIT_ERR_ARG).
 * Errors: VIT_ERR_ARG (a NULL array, n < 0, a length or id out of range naming the
 * sequence and position, H not dividing W), VIT_ERR_NOMEM; out is then undefined. */
VitStatus vit_text_embed(float *out, const VitText *t, const int *const *ids, const int *lens,
                         int n, int n_threads, VitError *err);

/* Zero-shot scores of n image embeddings img [n, E] (vit_image_embed; not normalised)
 * against C text embeddings txt [C, E] (vit_text_embed): logits [n, C] =
 * logit_scale * cos(img_i, txt_c) + logit_bias, probs [n, C] (either may be NULL) =
 * sigmoid(logits) each on its own when t->sigmoid (SigLIP, Zhai et al. 2023, §3: HF
 * SiglipModel.forward's logits_per_image; the probabilities of the labels do NOT sum to 1),
 * else softmax over the C labels (CLIP). t gives logit_scale, logit_bias, sigmoid and E.
 * Errors: VIT_ERR_ARG (NULL arrays, n or C < 1, no logit_scale in the checkpoint, a zero or
 * non-finite embedding). */
VitStatus vit_text_scores(float *logits, float *probs, const float *img, int n, const float *txt,
                          int C, const VitText *t, VitError *err);

/* ---------------------------------------------------------------------------
 * CLIP: the image tower and the phrase as a head (issue 27, clip-img)
 *
 * vit_load opens CLIP's image tower (Radford et al. 2021, openai/CLIP model.py
 * VisionTransformer; transformers' CLIPVisionModel) from a whole CLIP checkpoint,
 * .safetensors or .pth, in Hugging Face's CLIPModel names (vision_model.*,
 * visual_projection, logit_scale) or OpenAI's / OpenCLIP's (visual.*, logit_scale),
 * through the layouts assets/layouts/clip-hf.json and clip-openai.json; the text
 * tensors are ignored (the text tower: vit_text_load). The tower is timm's ViT with
 *   x = ln_pre(cat(cls, conv1(x)) + pos)   (cfg.norm_pre; conv1 without bias)
 *   blocks with QuickGELU (x sigmoid(1.702 x)) for OpenAI's weights, LayerNorm eps 1e-5
 *   e = norm(z_L)[CLS] @ proj             (ln_post, then img_proj_w [E, D])
 * The activation: config.json's vision_config.hidden_act (HF), open_clip_config.json's
 * model_cfg.quick_gelu (OpenCLIP: absent means GELU, as open_clip's own default); a
 * checkpoint in OpenAI's names without open_clip_config.json is OpenAI's: QuickGELU.
 * Preprocessing is CLIP's: the short side resized bicubically to S, centre crop S,
 * mean (0.48145466, 0.4578275, 0.40821073), std (0.26862954, 0.26130258, 0.27577711);
 * preprocessor_config.json (HF) or open_clip_config.json's preprocess_cfg beside the
 * weights override them. At another input size (VitLoadOptions) the position embedding
 * is resampled as the checkpoint's library does: antialiased (OpenCLIP's resize_pos_embed)
 * for OpenAI's names, not (transformers' interpolate_pos_encoding) for Hugging Face's.
 * Without a text head C = 0 and every image view works; the class-specific ones need a
 * head: vit_set_text_head. timm's own CLIP ViTs (norm_pre, the projection as a 512-class
 * head) open as timm ViTs with norm_pre, LayerNorm eps 1e-5, and QuickGELU when
 * config.json's architecture names it (vit_*_clip_quickgelu_*).
 * Tested against a PyTorch reference of the published architecture at ViT-B/32's and
 * ViT-B/16's shapes in both names (tests/parity/test_clip_image.py). */

/* Make the head CLIP's zero-shot head (CLIP's model.py forward: logit_scale *
 * image_features @ text_features.t() on normalised features):
 *   logits[c] = logit_scale * cos(e, emb[c]),  e = img_proj(norm(z_L)[CLS]),
 * emb [C, E] text embeddings (vit_text_embed; normalised here, copied), labels [C]
 * (copied, NULL: none; vit->labels then points at the copy, or is NULL). C >= 1,
 * logit_scale > 0 and finite (the checkpoint's: cfg.logit_scale). Replaces the
 * previous head; a VitRun, VitBatch or VitGrad made before must be made again when C
 * changes (they are sized for C). vit_backward differentiates logits[c] through the
 * normalisation of e; so every class-specific map (vit_explain) explains the phrase c,
 * and LeGrad's s_l is the same head on norm(z_l)[CLS] (LeGrad's compute_legrad_clip).
 * The AttnLRP pass holds |e| constant, as its LayerNorm rule holds the standard
 * deviation. Not thread-safe: no other call may use vit meanwhile.
 * Errors: VIT_ERR_ARG (no image projection, embed_dim 0: "has no image projection";
 * emb NULL, C out of 1 .. VIT_MAX_CLASSES, a zero or non-finite embedding, a bad
 * logit_scale), VIT_ERR_NOMEM; on error the previous head stays. */
VitStatus vit_set_text_head(Vit *vit, const float *emb, int C, const char *const *labels,
                            float logit_scale, VitError *err);

/* SigLIP's scores (Zhai et al. 2023, §3; transformers' SiglipModel.forward): after
 * vit_set_text_head, logits[c] = logit_scale * cos(e, emb[c]) + logit_bias and
 * probs[c] = sigmoid(logits[c]), each label on its own (they do not sum to 1), in
 * vit_forward, vit_forward_batch, vit_text_logits and the logit lens. A SigLIP image tower
 * has no projection: e is the MAP head's output (cfg.embed_dim = D, img_proj_w NULL).
 * vit_backward differentiates logits[c], whose sigmoid is the score (the score's gradient
 * is sigmoid'(y_c) > 0 times it: every map the same up to that factor). A new
 * vit_set_text_head returns to softmax until this is called again. Errors: VIT_ERR_ARG (no
 * text head, a logit_bias that is not finite). */
VitStatus vit_set_text_sigmoid(Vit *vit, float logit_bias, VitError *err);

/* A new phrase for the same photo without another forward pass: after vit_set_text_head
 * with the C that run was made for, run->logits and run->probs [C] of the new head from
 * the image embedding the last vit_forward kept (run->img_embed): C*E multiply-adds. The
 * forward pass's other buffers do not depend on the head (a CLIP tower computes its CLS
 * row with or without one), so vit_backward and vit_explain then explain the new phrases
 * on the same pass. Errors: VIT_ERR_ARG (no text head, a run made for another C or
 * model). */
VitStatus vit_text_logits(VitRun *run, const Vit *vit, VitError *err);

/* e [E] (caller's) = the image embedding of the last vit_forward on run: img_proj(
 * norm(z_L)[CLS]), not normalised (CLIP's encode_image). Errors: VIT_ERR_ARG (a model
 * without image projection, a run not made for vit). */
VitStatus vit_image_embed(float *e, const VitRun *run, const Vit *vit, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_H */
