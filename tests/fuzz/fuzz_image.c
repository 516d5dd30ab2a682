/* fuzz_image.c - libFuzzer target: arbitrary bytes as an image file.
 *
 * vit_image_load reads the declared size first and refuses more than
 * VIT_MAX_IMAGE_PIXELS, then decodes by the first bytes: libjpeg-turbo (JPEG),
 * libwebp (WebP), libtiff (TIFF), libheif (HEIF, AVIF) or stb_image (PNG, BMP,
 * GIF, TGA, PSD, HDR, PIC, PNM), and turns the image by its EXIF orientation (the
 * input's last byte, odd, asks for VitImageOptions.ignore_orientation instead).
 * A decoded image goes through timm's eval transform
 * (vit_preprocess, vit_preprocess_rgb) in each of its modes: centre crop of a
 * square input (bicubic) at two sizes and crops, of a non-square input
 * (ResizeKeepRatio, bilinear), and squash with crop_pct 1 (--whole).
 *
 * The target calls vit_image_load_max (internal.h), the same code with a limit of
 * FUZZ_MAX_PIXELS instead of VIT_MAX_IMAGE_PIXELS: decoding 100 million pixels
 * takes seconds and 300 MB, which would make every such input a libFuzzer timeout
 * or out-of-memory report about the limit rather than a bug. The limit itself is
 * tested by the malformed_* cases (png_huge_ihdr, jpeg_huge_sof, webp_huge, ...).
 * Likewise vit_preprocess_max and vit_preprocess_rgb_max limit the crop's resampling
 * to FUZZ_MAX_PIXELS (a 2 x 2 M px strip squashed took 18 s in the fuzz build);
 * malformed_image_tall_strip_squash tests the engine's own limit.
 *
 * Seeds: small PNG (8/16-bit, grey, RGBA), JPEG (baseline, progressive, grey, CMYK,
 * EXIF), WebP, TIFF, HEIC, AVIF, BMP, TGA, HDR, PNM, GIF, PSD and PIC files from fuzz_seeds. */
#include "fuzzlib.h"
#include "internal.h" /* vit_image_load_max */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_PIXELS (4u << 20)

static volatile unsigned pixel_sum; /* keeps the reads of every decoded pixel */

static void fail(const char *what) {
    fprintf(stderr, "fuzz_image: %s\n", what);
    abort();
}

/* The transform at input size Sh x Sw px, crop_pct and crop mode; checks the crop
 * rectangle. */
static void preprocess(const VitImage *img, int Sh, int Sw, float crop_pct, VitCropMode mode) {
    VitConfig c = {.image_h = Sh,
                   .image_w = Sw,
                   .crop_mode = mode,
                   .crop_pct = crop_pct,
                   .mean = {0.5f, 0.5f, 0.5f},
                   .std = {0.25f, 0.25f, 0.25f}};
    size_t n = (size_t)3 * Sh * Sw;
    float *out = malloc(n * sizeof *out);
    uint8_t *rgb = malloc(n);
    if (!out || !rgb) fail("out of memory");
    VitError err;
    memset(&err, 'x', sizeof err);
    int x, y, w, h;
    VitStatus rc = vit_preprocess_max(out, &x, &y, &w, &h, &c, img, FUZZ_MAX_PIXELS, &err);
    fuzz_check_error(rc, &err, "vit_preprocess");
    if (rc == VIT_OK) {
        if (x < 0 || y < 0 || w < 1 || h < 1 || x + w > img->w || y + h > img->h)
            fail("vit_preprocess: crop rectangle outside the image");
        for (size_t i = 0; i < n; i++)
            if (!isfinite(out[i]) || fabsf(out[i]) > 2.0f + 1e-6f) fail("pixel out of range");
    }
    memset(&err, 'x', sizeof err);
    rc = vit_preprocess_rgb_max(rgb, &c, img, FUZZ_MAX_PIXELS, &err);
    fuzz_check_error(rc, &err, "vit_preprocess_rgb");
    free(out);
    free(rgb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static MemFile f;
    if (!f.path[0]) memfile_init(&f, "image");
    memfile_set(&f, data, size);
    VitImage img;
    VitError err;
    memset(&err, 'x', sizeof err);
    VitImageOptions opt = {.ignore_orientation = size > 0 && (data[size - 1] & 1)};
    VitStatus rc = vit_image_load_max(&img, f.path, &opt, FUZZ_MAX_PIXELS, &err);
    fuzz_check_error(rc, &err, "vit_image_load");
    if (rc) {
        if (img.rgb || img.w || img.h) fail("vit_image_load failed but left an image");
        return 0;
    }
    if (img.w < 1 || img.h < 1 || (uint64_t)img.w * img.h > FUZZ_MAX_PIXELS)
        fail("vit_image_load accepted an image outside the limits");
    /* touch every pixel: a short buffer is an ASan report here */
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)img.w * img.h * 3; i++) sum += img.rgb[i];
    pixel_sum = sum;
    preprocess(&img, 32, 32, 0.875f, VIT_CROP_CENTER);
    preprocess(&img, 24, 24, 1.0f, VIT_CROP_CENTER);
    preprocess(&img, 16, 40, 0.9f, VIT_CROP_CENTER); /* ResizeKeepRatio, bilinear */
    preprocess(&img, 24, 16, 1.0f, VIT_CROP_SQUASH); /* --whole */
    vit_image_free(&img);
    return 0;
}
