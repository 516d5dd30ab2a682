/* encode.c - test files made with Debian's encoders (encode.h). */
#include "encode.h"
#include "testlib.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jpeglib.h>
#include <libheif/heif.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>
#include <webp/encode.h>

/* --- EXIF ---------------------------------------------------------------------- */

const uint8_t *exif_tiff_block(size_t *n, int orientation) {
    /* "II", 42, IFD 0 at byte 8: 1 entry, tag 0x0112 SHORT x 1 = orientation; no next IFD */
    static uint8_t b[26] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0};
    b[18] = (uint8_t)orientation;
    *n = sizeof b;
    return b;
}

/* --- JPEG ---------------------------------------------------------------------- */

uint8_t *enc_jpeg(size_t *n, const uint8_t *px, int w, int h, int comp, int quality,
                  int progressive, int orientation) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    unsigned char *buf = NULL;
    unsigned long size = 0;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &buf, &size);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comp;
    ci.in_color_space = comp == 1 ? JCS_GRAYSCALE : comp == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&ci); /* CMYK: an Adobe marker, as Pillow writes */
    jpeg_set_quality(&ci, quality, TRUE);
    if (progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    if (orientation) {
        size_t k;
        const uint8_t *tiff = exif_tiff_block(&k, orientation);
        uint8_t app1[6 + 26];
        memcpy(app1, "Exif\0\0", 6);
        memcpy(app1 + 6, tiff, k);
        jpeg_write_marker(&ci, JPEG_APP0 + 1, app1, (unsigned int)(6 + k));
    }
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)comp);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    uint8_t *out = malloc(size);
    if (out) memcpy(out, buf, size);
    free(buf);
    *n = size;
    return out;
}

/* --- WebP ---------------------------------------------------------------------- */

uint8_t *enc_webp(size_t *n, const uint8_t *px, int w, int h, int comp, int lossless) {
    uint8_t *enc = NULL;
    int stride = w * comp;
    size_t size = comp == 4 ? (lossless ? WebPEncodeLosslessRGBA(px, w, h, stride, &enc)
                                        : WebPEncodeRGBA(px, w, h, stride, 80, &enc))
                            : (lossless ? WebPEncodeLosslessRGB(px, w, h, stride, &enc)
                                        : WebPEncodeRGB(px, w, h, stride, 80, &enc));
    uint8_t *out = size ? malloc(size) : NULL;
    if (out) memcpy(out, enc, size);
    WebPFree(enc);
    *n = size;
    return out;
}

/* --- TIFF ---------------------------------------------------------------------- */

uint8_t *enc_tiff(size_t *n, const uint8_t *px, int w, int h, int comp, int planar, int compression,
                  int orientation) {
    char path[] = "/tmp/vitlens_tiff_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    TIFF *t = TIFFOpen(path, "w");
    uint8_t *out = NULL;
    if (t) {
        TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)w);
        TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)h);
        TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
        TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, comp);
        TIFFSetField(t, TIFFTAG_PHOTOMETRIC, comp == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
        TIFFSetField(t, TIFFTAG_PLANARCONFIG, planar ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
        TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 8);
        if (comp == 4) {
            uint16_t extra[1] = {EXTRASAMPLE_UNASSALPHA};
            TIFFSetField(t, TIFFTAG_EXTRASAMPLES, 1, extra);
        }
        if (orientation) TIFFSetField(t, TIFFTAG_ORIENTATION, orientation);
        int ok = 1;
        uint8_t *row = malloc((size_t)w);
        for (int c = 0; c < (planar ? comp : 1) && ok && row; c++)
            for (int y = 0; y < h && ok; y++) {
                const uint8_t *src = px + (size_t)y * w * comp;
                if (planar)
                    for (int x = 0; x < w; x++) row[x] = src[(size_t)x * comp + c];
                ok =
                    TIFFWriteScanline(t, planar ? row : (void *)src, (uint32_t)y, (uint16_t)c) == 1;
            }
        ok = ok && row;
        free(row);
        TIFFClose(t);
        out = ok ? read_bytes(path, n) : NULL;
    }
    unlink(path);
    return out;
}

/* --- HEIF and AVIF ------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n;
} Mem;

static struct heif_error heif_put(struct heif_context *ctx, const void *data, size_t size,
                                  void *user) {
    (void)ctx;
    Mem *m = user;
    struct heif_error ok = {heif_error_Ok, heif_suberror_Unspecified, "ok"};
    uint8_t *q = realloc(m->p, m->n + size);
    if (!q) return (struct heif_error){heif_error_Encoding_error, heif_suberror_Unspecified, "oom"};
    memcpy(q + m->n, data, size);
    m->p = q, m->n += size;
    return ok;
}

uint8_t *enc_heif(size_t *n, const uint8_t *rgb, int w, int h, int avif, int orientation,
                  int exif_too) {
    if (!avif && getenv("VITLENS_TEST_NO_HEVC_ENCODER")) return NULL; /* tests/memcheck */
    struct heif_context *ctx = heif_context_alloc();
    struct heif_encoder *enc = NULL;
    struct heif_image *im = NULL;
    struct heif_image_handle *hd = NULL;
    struct heif_encoding_options *opt = heif_encoding_options_alloc();
    Mem m = {NULL, 0};
    int ok = ctx && opt &&
             heif_context_get_encoder_for_format(
                 ctx, avif ? heif_compression_AV1 : heif_compression_HEVC, &enc)
                     .code == heif_error_Ok &&
             heif_image_create(w, h, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &im).code ==
                 heif_error_Ok &&
             heif_image_add_plane(im, heif_channel_interleaved, w, h, 8).code == heif_error_Ok;
    if (ok) {
        int stride;
        uint8_t *p = heif_image_get_plane(im, heif_channel_interleaved, &stride);
        for (int y = 0; y < h; y++)
            memcpy(p + (size_t)y * stride, rgb + (size_t)y * w * 3, (size_t)w * 3);
        heif_encoder_set_lossy_quality(enc, 90);
        heif_encoder_set_logging_level(enc, 0);
        if (orientation) opt->image_orientation = (enum heif_orientation)orientation;
        ok = heif_context_encode_image(ctx, im, enc, opt, &hd).code == heif_error_Ok;
    }
    if (ok && exif_too) {
        size_t k;
        const uint8_t *tiff = exif_tiff_block(&k, orientation ? orientation : 1);
        ok = heif_context_add_exif_metadata(ctx, hd, tiff, (int)k).code == heif_error_Ok;
    }
    struct heif_writer writer = {1, heif_put};
    if (ok) ok = heif_context_write(ctx, &writer, &m).code == heif_error_Ok;
    heif_image_handle_release(hd);
    heif_image_release(im);
    if (enc) heif_encoder_release(enc);
    heif_encoding_options_free(opt);
    heif_context_free(ctx);
    if (!ok) {
        free(m.p);
        return NULL;
    }
    *n = m.n;
    return m.p;
}
