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

/* Floats vit_run_init allocates for a model of config c, into *n_floats.
 * 0 when the count overflows size_t (then *n_floats = SIZE_MAX). */
int vit_run_floats(const VitConfig *c, size_t *n_floats);

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
