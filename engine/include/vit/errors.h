/* vit/errors.h - errors (VitStatus, VitError) and the limits a file is checked against. Part
 * of vit.h, which includes every part (and the overview: shapes, token order, the families
 * loaded); include that. */
#ifndef VIT_ERRORS_H
#define VIT_ERRORS_H

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

#ifdef __cplusplus
}
#endif
#endif /* VIT_ERRORS_H */
