/* testlib.h - what the engine's C tests share: one-line checks, small file
 * helpers, and a writer of tiny timm-layout ViTs as .safetensors.
 *
 * Every check prints one line, "ok   - what" or "FAIL - what: why", and
 * t_finish() turns any failure into a non-zero exit code. */
#ifndef VIT_TESTLIB_H
#define VIT_TESTLIB_H

#include "vit.h"

#include <stddef.h>
#include <stdint.h>

/* --- checks ---------------------------------------------------------------- */

#if defined(__GNUC__)
#define T_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define T_PRINTF(a, b)
#endif

/* Record one check; prints "ok" or "FAIL" and the formatted description. */
int check(int ok, const char *fmt, ...) T_PRINTF(2, 3);

/* An error check: rc == want, err->code == want, and err->msg contains `file`
 * (may be NULL) and every key of the NULL-terminated `keys` (may be NULL). */
int check_err(VitStatus rc, const VitError *err, VitStatus want, const char *file,
              const char *const *keys, const char *what);

/* Print the totals; returns the process exit code (1 on any failure). */
int t_finish(const char *test_name);

/* --- files ----------------------------------------------------------------- */

/* dir/file into out (aborts the test on truncation). */
void path_join(char *out, size_t n, const char *dir, const char *file);
int make_dir(const char *path); /* mkdir -p; 0 on success */
int write_bytes(const char *path, const void *p, size_t n);
uint8_t *read_bytes(const char *path, size_t *n); /* malloc'd, NULL on error */

/* --- tiny ViT writer ------------------------------------------------------- */

#define T_MAX_TENSORS 128

typedef struct {
    char name[128]; /* transformers' DINOv2 names with a prefix pass 64 */
    char dtype[12]; /* "F32", "F16", "BF16", or anything (then zero bytes are written) */
    int ndim;
    int64_t shape[8];
} TSpec;

typedef struct {
    TSpec t[T_MAX_TENSORS];
    int n;
    int extra_pad; /* spaces added after the 8-aligned header: != 0 mod 4 misaligns F32 data */
} Model;

/* timm VisionTransformer tensors for width D, L blocks, patch P px, a grid x
 * grid patch grid, MLP width F and C classes (C == 0: no head.*), all F32. */
void model_tiny(Model *m, int D, int L, int P, int grid, int F, int C);
TSpec *model_find(Model *m, const char *name);
/* Remove every tensor whose name starts with `prefix`; returns how many. */
int model_remove(Model *m, const char *prefix);
TSpec *model_add(Model *m, const char *name, const char *dtype, int ndim, const int64_t *shape);
void model_set_dtype(Model *m, const char *dtype); /* every tensor */

/* The value element i of tensor `name` holds when stored as `dtype`: multiples
 * of 1/64 in [-0.75, 0.75] (exact in F16 and BF16), except that cls_token[0..4]
 * holds edge values of F16 (subnormals, 65504) or BF16 (tiny, huge). */
float model_value(const char *name, const char *dtype, size_t i);

/* The whole file in memory (malloc'd) / written to path (0 on success). */
uint8_t *model_bytes(const Model *m, size_t *n);
int model_write(const Model *m, const char *path);
/* Where tensor `name`'s data starts in b, the bytes model_bytes(m) returned
 * (NULL when m has no such tensor): to plant a NaN, say. */
uint8_t *model_data(const Model *m, uint8_t *b, const char *name);

/* A raw safetensors file: 8-byte little-endian header length, the JSON text
 * as given, then data_bytes zero bytes. */
int write_st(const char *path, const char *json, size_t data_bytes);

/* --- PNG bytes by hand ----------------------------------------------------- */

/* A w x h PNG, `depth` bits per sample, colour type `color` (0 grey, 2 RGB,
 * 4 grey + alpha, 6 RGBA), from samples in row order (16 bits: big-endian, as
 * PNG stores them). The zlib stream is stored blocks, no compression: what
 * stb_image_write cannot write (16 bits). With samples NULL only the IHDR is
 * written: a size declared, no pixels. Returns malloc'd bytes (caller frees),
 * length in *n. */
uint8_t *test_png(size_t *n, uint32_t w, uint32_t h, int depth, int color, const uint8_t *samples);

/* A 1 x 1 RGB PNG, all zero, whose IDAT's zlib stream inflates to `inflated` bytes (at
 * least 4: the row's filter byte and its 3 samples; the rest is zeros past the image):
 * fixed-Huffman copies of 258 bytes, about 160 inflated bytes per byte of file.
 * Returns malloc'd bytes (caller frees), length in *n. */
uint8_t *test_png_inflating(size_t *n, size_t inflated);

/* A w x h Softimage PIC (the format stb_image reads: a 104-byte header, one packet of
 * 8-bit R, G, B, uncompressed) from rgb [h, w, 3], cut after `keep` bytes of pixel
 * data (w*h*3 or more: whole). Returns malloc'd bytes (caller frees), length in *n. */
uint8_t *test_pic(size_t *n, uint16_t w, uint16_t h, const uint8_t *rgb, size_t keep);

#endif
