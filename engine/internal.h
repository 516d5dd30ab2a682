/* internal.h - engine-private helpers shared between the engine's .c files. Not installed,
 * never included by app/. */
#ifndef VIT_INTERNAL_H
#define VIT_INTERNAL_H

#include "vit.h"

#include <stddef.h>
#include <stdint.h>

/* Fill err (if not NULL) with code and a printf-style message; returns code. */
VitStatus vit_set_error(VitError *err, VitStatus code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Last path component, for messages. */
const char *vit_basename(const char *path);

/* Floats vit_run_init allocates for a model of config c, keeping the attention
 * (keep_att 1) or queries and keys (0, with n_threads scratch blocks), into
 * *n_floats. 0 when the count overflows size_t (then *n_floats = SIZE_MAX). */
int vit_run_floats(const VitConfig *c, int keep_att, int n_threads, size_t *n_floats);

/* Does a run of config c keep [L, H, T, T] when asked `how`? */
int vit_keep_att(const VitConfig *c, VitAttStorage how);

/* --- thread pool (engine/pool.c) ----------------------------------------- */

typedef struct VitPool VitPool;
/* A task: thread `i` of `n` does its share of ctx. */
typedef void (*VitTask)(void *ctx, int i, int n);

/* Start n_threads - 1 workers (the caller is thread 0). NULL on failure. */
VitPool *vit_pool_new(int n_threads);
/* Run fn on every thread of p (NULL p: on the caller alone); returns when all are done. */
void vit_pool_run(VitPool *p, VitTask fn, void *ctx);
void vit_pool_free(VitPool *p); /* joins the workers; NULL-safe */

/* --- attention blocks (engine/forward.c), shared with the maps ------------ */

/* Query rows are processed in vit_att_blocks(T) blocks of at most VIT_ATT_BLOCK
 * rows; block b holds rows [vit_att_block_start(T, b), vit_att_block_start(T, b + 1)). */
int vit_att_blocks(int T);
int vit_att_block_start(int T, int b);

/* out[r1 - r0, T] = softmax(q[r0:r1] . k^T / sqrt(Dh)) for one head: q, k point at
 * that head's first column in [T, ld] matrices. The forward pass and the maps
 * (recomputing) call this alone, so both get the same values. gemm_only: skip the
 * softmax (vit_forward_gemms). */
void vit_att_block(float *out, const float *q, const float *k, int ld, int r0, int r1, int T,
                   int Dh, int gemm_only);

/* The GEMM floor of vit_forward: exactly its cblas_sgemm calls, same shapes,
 * transposes, strides and buffers, and nothing else, for bench/ to time. The
 * buffers end up holding garbage; run vit_forward before reading any map. */
void vit_forward_gemms(VitRun *run, const Vit *vit);

/* vit_image_load with a pixel limit other than VIT_MAX_IMAGE_PIXELS: tests/fuzz
 * uses a smaller one, so that no run spends seconds decoding 100 M pixels. */
VitStatus vit_image_load_max(VitImage *img, const char *path, uint64_t max_pixels, VitError *err);

/* --- safetensors (engine/safetensors.c) ---------------------------------- */

typedef enum { ST_F32, ST_F16, ST_BF16, ST_OTHER } StDtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;          /* owned */
    char dtype_name[16]; /* as written in the header, e.g. "F32" */
    StDtype dtype;
    int elem_bytes;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t n_elems;    /* prod(shape), overflow-checked */
    size_t begin, end; /* byte offsets into the data area */
} StTensor;

typedef struct {
    const uint8_t *data; /* data area (after the header), not owned */
    size_t data_bytes;
    StTensor *tensors; /* [n], owned */
    int n;
} StFile;

/* Parse and validate the header of a safetensors file held in memory
 * [file, file + file_bytes). `name` is used in messages. On success st owns
 * its table; free with st_free. Errors: VIT_ERR_FORMAT, VIT_ERR_NOMEM. */
VitStatus st_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *name,
                   VitError *err);
const StTensor *st_find(const StFile *st, const char *name);
void st_free(StFile *st);

/* "[a, b, c]" into buf. */
const char *st_shape_str(char *buf, size_t n, const int64_t *shape, int ndim);

#endif
