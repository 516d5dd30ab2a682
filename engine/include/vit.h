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
 *     vit_preprocess(run.input, &run.crop, &vit.cfg, &img, &err);
 *     vit_forward(&run, &vit);
 *     float map[vit.cfg.n_patches];
 *     vit_map_attention(map, &run, &vit.cfg, 11, 0, 0, NULL);      // layer 12, head 1, CLS
 *     vit_image_free(&img); vit_run_free(&run); vit_free(&vit);
 *
 * Shapes (row-major, PyTorch's layout; linear weights are [out, in]):
 *   S  input side in px (square input; S = P * grid)   P  patch side in px
 *   gh, gw  patch grid rows, columns                    N  = gh * gw patches
 *   Np number of prefix tokens (1: the CLS token)       T  = Np + N tokens
 *   D  width   H heads   Dh = D / H   F MLP width   L layers   C classes
 * Token order is timm's: [CLS, patch(0,0), patch(0,1), ..., patch(gh-1,gw-1)].
 * A "map" is a float array [gh, gw] over the patches, row-major.
 *
 * The architecture is timm's VisionTransformer (vision_transformer.py): pre-norm
 * blocks, fused qkv with bias, exact (erf) GELU, learned position embedding,
 * final LayerNorm, classification from the CLS token.
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
    VIT_ERR_IO,     /* cannot open/read/map a file */
    VIT_ERR_FORMAT, /* malformed .safetensors / JSON / labels */
    VIT_ERR_SHAPE,  /* tensor missing or shapes inconsistent with the architecture */
    VIT_ERR_NOMEM,  /* allocation failed or a size would overflow */
    VIT_ERR_ARG,    /* bad argument (out-of-range layer, head, ...) */
    VIT_ERR_IMAGE   /* not a decodable image, or too large */
} VitStatus;

typedef struct {
    VitStatus code;
    char msg[512]; /* "file: what is wrong (got X, expected Y)" */
} VitError;

/* Short name of a status, e.g. "format". Static string. */
const char *vit_status_name(VitStatus s);

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
#define VIT_MAX_LAYERS  256         /* L */
#define VIT_MAX_WIDTH   65536       /* D and F (ViT-22B: D 6144, F 24576) */
#define VIT_MAX_PATCH   1024        /* P, px */
#define VIT_MAX_TOKENS  (1 + 65536) /* T: the CLS token and up to a 256 x 256 patch grid */
#define VIT_MAX_CLASSES (1 << 20)   /* C (ImageNet-21k: 21843) */
#define VIT_MAX_PREFIX  16          /* Np: the CLS token, register tokens */
/* One forward pass's buffers (vit_run_init), mostly the attention kept for the
 * maps, L*H*T*T floats: DeiT-Base 21 MiB, ViT-L/16 at 384 px 0.5 GiB. A small
 * file can declare a model whose pass would need terabytes; vit_load refuses it. */
#define VIT_MAX_ACTIVATION_BYTES (4ull << 30)
#define VIT_LABEL_BYTES          96 /* per label, including the NUL (longer names are cut) */

/* ---------------------------------------------------------------------------
 * Model */

/* Everything the forward pass needs to know about a model's shapes and its
 * preprocessing. Inferred from tensor shapes, then config.json beside the
 * weights, then VitLoadOptions (later wins). */
typedef struct {
    char name[128];     /* file name without directory and extension */
    int image_size;     /* S, px */
    int patch_size;     /* P, px */
    int grid_h, grid_w; /* gh, gw */
    int n_patches;      /* N = gh * gw */
    int n_prefix;       /* Np: prefix tokens before the patches (1: CLS) */
    int n_tokens;       /* T = Np + N */
    int dim;            /* D */
    int n_heads;        /* H (default D / 64) */
    int head_dim;       /* Dh = D / H */
    int mlp_dim;        /* F */
    int n_layers;       /* L */
    int n_classes;      /* C, 0 for a backbone without head.* */
    float ln_eps;       /* LayerNorm epsilon (timm: 1e-6) */
    float crop_pct;     /* eval resize: shorter side -> floor(S / crop_pct) (timm: 0.875) */
    float mean[3];      /* per-channel normalisation on [0, 1] pixels (ImageNet defaults) */
    float std[3];
} VitConfig;

/* Weights of one transformer block; pointers to F32 data (into the mapping, or
 * owned converted copies). Linear weights are [out, in]. */
typedef struct {
    const float *norm1_w, *norm1_b; /* [D] */
    const float *qkv_w, *qkv_b;     /* [3D, D], [3D]: rows are q (D), k (D), v (D) */
    const float *proj_w, *proj_b;   /* [D, D], [D] */
    const float *norm2_w, *norm2_b; /* [D] */
    const float *fc1_w, *fc1_b;     /* [F, D], [F] */
    const float *fc2_w, *fc2_b;     /* [D, F], [D] */
} VitBlock;

typedef struct {
    const float *cls_token; /* [D] */
    const float *pos_embed; /* [T, D] */
    const float *patch_w;   /* [D, 3, P, P] (= [D, 3*P*P]) */
    const float *patch_b;   /* [D] */
    VitBlock *blocks;       /* [L], owned */
    const float *norm_w;    /* [D] */
    const float *norm_b;    /* [D] */
    const float *head_w;    /* [C, D], NULL when C == 0 */
    const float *head_b;    /* [C],    NULL when C == 0 */
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
    float *owned; /* F16/BF16/unaligned tensors converted to F32 */
    size_t owned_floats;
} Vit;

/* Options for vit_load; pass NULL for the defaults. */
typedef struct {
    int n_heads;             /* > 0: override the number of heads */
    const char *config_path; /* config.json to read; NULL: "config.json" beside the weights
                                (a missing default config is not an error) */
} VitLoadOptions;

/* Load a .safetensors file with timm's VisionTransformer tensor names.
 * Memory-maps the file read-only; validates the header (length inside the
 * file, JSON, dtypes F32/F16/BF16, offsets inside the data area and not
 * overlapping, size = prod(shape) * dtype size) and every tensor's shape
 * against the architecture inferred from cls_token, pos_embed,
 * patch_embed.proj.weight, blocks.N.* and head.*. F16/BF16 are converted to F32.
 * Files over the limits above (header, tensors, config, L, D, F, P, T, C, and
 * the activations vit_run_init would allocate) are refused.
 * Errors: VIT_ERR_IO, VIT_ERR_FORMAT, VIT_ERR_SHAPE, VIT_ERR_NOMEM, with a
 * message naming the file and tensor. On error *vit is left freed (zeroed).
 * Free with vit_free. */
VitStatus vit_load(Vit *vit, const char *path, const VitLoadOptions *opt, VitError *err);

/* Release everything vit_load made; leaves *vit zeroed. NULL-safe. */
void vit_free(Vit *vit);

/* ---------------------------------------------------------------------------
 * Forward pass */

/* Activations and outputs of one forward pass. One allocation made by
 * vit_run_init, carved into named buffers; vit_forward allocates nothing. */
typedef struct {
    VitConfig cfg;  /* copy of the model's config the buffers were sized for */
    float *input;   /* [3, S, S] normalised pixels (vit_preprocess writes it) */
    float *x;       /* [T, D] residual stream */
    float *xn;      /* [T, D] LayerNorm output */
    float *qkv;     /* [T, 3D] */
    float *ctx;     /* [T, D] attention output before proj */
    float *hid;     /* [T, F] MLP hidden */
    float *patches; /* [N, 3*P*P] im2col of the input */
    float *att;     /* [L, H, T, T] softmax attention probabilities, rows sum to 1 */
    float *logits;  /* [C] (NULL when C == 0) */
    float *probs;   /* [C] softmax of logits (NULL when C == 0) */
    int crop_x, crop_y, crop_w, crop_h; /* source-image px rectangle the model saw */
    /* private */
    float *mem;
    size_t mem_floats;
} VitRun;

/* Allocate the buffers for one forward pass of `vit`. Errors: VIT_ERR_NOMEM
 * (also over VIT_MAX_ACTIVATION_BYTES, which vit_load already refuses).
 * Free with vit_run_free (NULL-safe, accepts a zeroed VitRun). */
VitStatus vit_run_init(VitRun *run, const Vit *vit, VitError *err);
void vit_run_free(VitRun *run);

/* Run the model on run->input [3, S, S]. Fills run->att [L, H, T, T],
 * run->logits [C] and run->probs [C]. All linear layers and attention
 * products go through cblas_sgemm; allocates nothing.
 * timm: x = cat(cls, patch_embed(x)) + pos_embed
 *       for blk: x = x + attn(norm1(x)); x = x + mlp(norm2(x))
 *       logits = head(norm(x)[:, 0])                                       */
void vit_forward(VitRun *run, const Vit *vit);

/* ---------------------------------------------------------------------------
 * Images and preprocessing */

typedef struct {
    int w, h;     /* px */
    uint8_t *rgb; /* [h, w, 3], owned (free with vit_image_free) */
} VitImage;

/* Decode an image file (PNG, JPEG, BMP, GIF, TGA, PNM, ... via stb_image) to
 * 8-bit RGB. Grey and alpha channels are dropped/expanded as PIL's
 * convert('RGB') does. Checks the declared size with stbi_info before decoding:
 * more than VIT_MAX_IMAGE_PIXELS is VIT_ERR_IMAGE. Errors: VIT_ERR_IO,
 * VIT_ERR_IMAGE. Free with vit_image_free. */
VitStatus vit_image_load(VitImage *img, const char *path, VitError *err);
VitStatus vit_image_from_rgb(VitImage *img, const uint8_t *rgb, int w, int h, VitError *err);
void vit_image_free(VitImage *img);

/* timm's eval transform (timm/data/transforms_factory.py, crop_mode 'center'):
 * Resize(floor(S / crop_pct)) of the shorter side with PIL's bicubic filter
 * (reproduced bit-exactly, including its 8-bit passes), CenterCrop(S) as
 * torchvision rounds it, ToTensor (/255), Normalize(mean, std).
 * out: [3, S, S]. crop: the source-image rectangle (px, may be fractional in
 * effect, rounded outwards) that the model sees; any of crop_* may be NULL.
 * Errors: VIT_ERR_NOMEM, VIT_ERR_ARG (empty image). */
VitStatus vit_preprocess(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                         const VitConfig *cfg, const VitImage *img, VitError *err);

/* The same resize + centre crop, as 8-bit RGB [S, S, 3]: the picture the model
 * saw, for drawing. Caller owns out (S*S*3 bytes). */
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
 * Maps over the patch grid: out [gh, gw], read from run->att.
 * `query` is a token index: 0 the CLS token, Np + r*gw + c the patch (r, c).
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
 * positions of patches i and j: px of the model's input (S px wide), centre to
 * centre. out: [L, H], px. Prefix tokens (the CLS token, registers) are neither
 * queries nor keys: each query's attention to the patches is renormalised to
 * sum 1, so attention to the CLS token is left out rather than counted at
 * distance 0 (which would lower a head's distance by its share of attention
 * to the CLS token). A query whose patch attention is all 0 is skipped.
 * Errors: VIT_ERR_ARG (no forward pass), VIT_ERR_NOMEM. O(L*H*N^2). */
VitStatus vit_attention_distance(float *out, const VitRun *run, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_H */
