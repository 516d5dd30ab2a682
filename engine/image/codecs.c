/* codecs.c - the image formats Debian's libraries decode: JPEG (libjpeg-turbo), WebP
 * (libwebp), TIFF (libtiff), HEIF/AVIF (libheif), and the EXIF orientation tag
 * (libexif). decode.c picks one by the file's first bytes.
 *
 * JPEG, WebP and TIFF are decoded as Pillow decodes them, with the same libraries and
 * settings, so that vitlens and PIL + timm see the same 8-bit pixels (tests/parity,
 * preprocess): Pillow's JpegImagePlugin / libImaging/JpegDecode.c, WebPImagePlugin /
 * _webp.c (the animation decoder, RGBA) and TiffImagePlugin, then convert('RGB').
 *
 * Every decoder reads the size the file declares and refuses one over max_pixels
 * before it decodes or allocates anything for the pixels, and turns every library
 * error into VIT_ERR_IMAGE with the file's name and the library's reason. The
 * libraries never print: libjpeg's error_exit longjmps back here and its messages
 * are formatted into ours; libtiff's handlers are per file (TIFFOpenOptions) and
 * keep its first error for the message. */
#include "internal.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */

#include <jerror.h>
#include <jpeglib.h>
#include <libexif/exif-data.h>
#include <libheif/heif.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* --- helpers ------------------------------------------------------------------ */

/* The size check every decoder makes before decoding: 1 (and err set) when w x h px
 * is empty or over max_pixels. */
static int size_refused(VitError *err, const char *path, uint64_t w, uint64_t h,
                        uint64_t max_pixels) {
    if (w < 1 || h < 1) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: image is %llux%llu px: empty", path,
                      (unsigned long long)w, (unsigned long long)h);
        return 1;
    }
    if (w * h > max_pixels) {
        vit_set_error(err, VIT_ERR_IMAGE,
                      "%s: image is %llux%llu px, more than the limit of %llu pixels", path,
                      (unsigned long long)w, (unsigned long long)h, (unsigned long long)max_pixels);
        return 1;
    }
    return 0;
}

/* A library's message without the newline some end with, into buf [n]. */
static const char *one_line(char *buf, size_t n, const char *msg) {
    snprintf(buf, n, "%s", msg ? msg : "unknown error");
    for (size_t k = strlen(buf); k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == ' '); k--)
        buf[k - 1] = 0;
    return buf;
}

static uint8_t *alloc_rgb(int w, int h) {
    return malloc((size_t)w * (size_t)h * 3);
}

/* --- EXIF orientation (libexif) ------------------------------------------------- */

static int is_tiff_header(const uint8_t *p, size_t n) {
    return n >= 4 && ((p[0] == 'I' && p[1] == 'I' && p[2] == 42 && p[3] == 0) ||
                      (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && p[3] == 42));
}

/* The orientation tag (0x0112) of IFD 0 of an EXIF block, as Pillow's getexif reads it
 * for ImageOps.exif_transpose; 1 when there is none or it is not 1..8. p [n bytes]
 * starts with "Exif\0\0" (a JPEG's APP1), with the TIFF header itself (a WebP's EXIF
 * chunk may), or with HEIF's 4-byte offset to the TIFF header. libexif's
 * FOLLOW_SPECIFICATION option is turned off: it would add or change tags. */
int vit_exif_orientation(const uint8_t *p, size_t n) {
    size_t at = n;
    if (n >= 6 && memcmp(p, "Exif\0\0", 6) == 0)
        at = 6;
    else if (is_tiff_header(p, n))
        at = 0;
    else if (n >= 4) { /* HEIF: big-endian offset from byte 4 to the TIFF header */
        uint32_t off = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (off <= n - 4 && is_tiff_header(p + 4 + off, n - 4 - off)) at = 4 + (size_t)off;
    }
    if (at >= n || !is_tiff_header(p + at, n - at)) return 1;
    size_t len = n - at;
    if (len > 0xfff0) len = 0xfff0; /* an APP1 segment's most; IFD 0 comes first */
    uint8_t *buf = malloc(6 + len);
    ExifData *ed = buf ? exif_data_new() : NULL;
    int o = 1;
    if (ed) {
        memcpy(buf, "Exif\0\0", 6);
        memcpy(buf + 6, p + at, len);
        exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
        exif_data_load_data(ed, buf, (unsigned int)(6 + len));
        ExifEntry *e = exif_content_get_entry(ed->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
        if (e && e->format == EXIF_FORMAT_SHORT && e->components >= 1 && e->size >= 2)
            o = exif_get_short(e->data, exif_data_get_byte_order(ed));
        exif_data_unref(ed);
    }
    free(buf);
    return o >= 1 && o <= 8 ? o : 1;
}

/* --- JPEG (libjpeg-turbo) ----------------------------------------------------- */

/* A progressive JPEG may hold any number of scans, each a pass over the whole image:
 * a small file can keep libjpeg busy for minutes. libjpeg-turbo's own fuzzers stop at
 * 500 (TJPARAM_SCANLIMIT); cameras and encoders write at most a dozen or so. */
#define JPEG_MAX_SCANS 500

typedef struct {
    struct jpeg_error_mgr pub; /* first: libjpeg sees a jpeg_error_mgr */
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
    int rows_done; /* every row read: a missing EOI after them is no error (as in Pillow) */
} JpegError;

/* libjpeg's error_exit: never returns to libjpeg (its default would exit()). */
static void jpeg_fail(j_common_ptr ci) {
    JpegError *e = (JpegError *)ci->err;
    if (!e->msg[0]) ci->err->format_message(ci, e->msg);
    longjmp(e->jump, 1);
}

/* Warnings (corrupt data that libjpeg decodes through) are dropped, as Pillow's decoder
 * drops them; except the end of the file before the end of the image: Pillow refuses a
 * truncated JPEG ("image file is truncated"), and so does vitlens. */
static void jpeg_message(j_common_ptr ci, int level) {
    JpegError *e = (JpegError *)ci->err;
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF && !e->rows_done) {
        snprintf(e->msg, sizeof e->msg, "truncated: the file ends before the image data does");
        longjmp(e->jump, 1);
    }
}

static void jpeg_progress(j_common_ptr ci) {
    j_decompress_ptr d = (j_decompress_ptr)ci;
    JpegError *e = (JpegError *)ci->err;
    if (d->input_scan_number > JPEG_MAX_SCANS) {
        snprintf(e->msg, sizeof e->msg, "more than %d scans", JPEG_MAX_SCANS);
        longjmp(e->jump, 1);
    }
}

typedef struct {
    struct jpeg_decompress_struct ci;
    JpegError err;
    uint8_t *rgb, *row;
} JpegDec;

/* One row of libjpeg's output (nc components) into RGB. CMYK: Pillow reads a CMYK JPEG
 * as Adobe-inverted ("CMYK;I": c = 255 - sample), then convert('RGB') computes
 * r = (255 - k) - (c (255 - k) / 255, rounded) and clips (libImaging/Convert.c, cmyk2rgb). */
static void jpeg_row_to_rgb(uint8_t *out, const uint8_t *in, int w, int nc) {
    for (int x = 0; x < w; x++, out += 3, in += nc) {
        if (nc == 1) {
            out[0] = out[1] = out[2] = in[0];
            continue;
        }
        int nk = in[3]; /* 255 - k, k = 255 - in[3] */
        for (int ch = 0; ch < 3; ch++) {
            int t = (255 - in[ch]) * nk + 128, v = nk - ((t + (t >> 8)) >> 8);
            out[ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

VitStatus vit_decode_jpeg(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err) {
    JpegDec *d = calloc(1, sizeof *d); /* on the heap: nothing setjmp could clobber */
    if (!d) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
    VitStatus rc = VIT_ERR_IMAGE;
    d->ci.err = jpeg_std_error(&d->err.pub);
    d->err.pub.error_exit = jpeg_fail;
    d->err.pub.emit_message = jpeg_message;
    d->err.progress.progress_monitor = jpeg_progress;
    if (setjmp(d->err.jump)) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode JPEG: %s", path, d->err.msg);
        goto done;
    }
    jpeg_create_decompress(&d->ci);
    d->ci.progress = &d->err.progress;
    jpeg_mem_src(&d->ci, data, (unsigned long)n);
    jpeg_save_markers(&d->ci, JPEG_APP0 + 1, 0xffff); /* EXIF */
    jpeg_read_header(&d->ci, TRUE);
    int w = (int)d->ci.image_width, h = (int)d->ci.image_height, nc = d->ci.num_components;
    if (size_refused(err, path, (uint64_t)w, (uint64_t)h, max_pixels)) goto done;
    /* the first EXIF segment, as Pillow's; saved markers live until jpeg_finish_decompress */
    out->orientation = 1;
    for (jpeg_saved_marker_ptr m = d->ci.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6)) {
            out->orientation = vit_exif_orientation(m->data, m->data_length);
            break;
        }
    /* Pillow's modes by component count (JpegImagePlugin.SOF): L, RGB, CMYK; the colour
     * space of the data is libjpeg's guess from the JFIF/Adobe markers, as in Pillow. */
    if (nc != 1 && nc != 3 && nc != 4) {
        vit_set_error(err, VIT_ERR_IMAGE,
                      "%s: cannot decode JPEG: %d components, expected 1, 3 or 4", path, nc);
        goto done;
    }
    d->ci.out_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
    /* libjpeg's defaults, which Pillow keeps (it changes them in draft mode only) */
    d->ci.dct_method = JDCT_ISLOW;
    d->ci.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&d->ci);
    d->rgb = alloc_rgb(w, h);
    d->row = malloc((size_t)w * (size_t)nc);
    if (!d->rgb || !d->row) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path, w, h);
        goto done;
    }
    while (d->ci.output_scanline < d->ci.output_height) {
        uint8_t *dst = d->rgb + (size_t)d->ci.output_scanline * (size_t)w * 3;
        JSAMPROW r = nc == 3 ? dst : d->row;
        jpeg_read_scanlines(&d->ci, &r, 1);
        if (nc != 3) jpeg_row_to_rgb(dst, d->row, w, nc);
    }
    d->err.rows_done = 1;
    jpeg_finish_decompress(&d->ci);
    out->rgb = d->rgb, out->w = w, out->h = h;
    d->rgb = NULL;
    rc = VIT_OK;
done:
    jpeg_destroy_decompress(&d->ci);
    free(d->rgb);
    free(d->row);
    free(d);
    return rc;
}

/* --- WebP (libwebp) ----------------------------------------------------------- */

static const char *webp_status(VP8StatusCode st) {
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt bitstream";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated: not enough data";
    default: return "unknown error";
    }
}

/* Pillow decodes every WebP, still or animated, with libwebp's animation decoder to
 * RGBA (not premultiplied), its first frame on the canvas; convert('RGB') drops alpha,
 * keeping the colour under transparent pixels as libwebp decoded it. So does this. */
VitStatus vit_decode_webp(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err) {
    WebPBitstreamFeatures feat;
    VP8StatusCode st = WebPGetFeatures(data, n, &feat);
    if (st != VP8_STATUS_OK)
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode WebP: %s", path,
                             webp_status(st));
    /* the size its header declares (VP8X: the canvas), before the chunks are walked */
    if (size_refused(err, path, (uint64_t)feat.width, (uint64_t)feat.height, max_pixels))
        return VIT_ERR_IMAGE;
    WebPData wd = {data, n};
    WebPDemuxer *dmx = WebPDemux(&wd);
    if (!dmx)
        return vit_set_error(
            err, VIT_ERR_IMAGE,
            "%s: cannot decode WebP: truncated or corrupt (its chunks do not add up)", path);
    uint32_t w = WebPDemuxGetI(dmx, WEBP_FF_CANVAS_WIDTH),
             h = WebPDemuxGetI(dmx, WEBP_FF_CANVAS_HEIGHT);
    out->orientation = 1;
    WebPChunkIterator it;
    if (WebPDemuxGetChunk(dmx, "EXIF", 1, &it)) {
        out->orientation = vit_exif_orientation(it.chunk.bytes, it.chunk.size);
        WebPDemuxReleaseChunkIterator(&it);
    }
    WebPDemuxDelete(dmx);
    if (size_refused(err, path, w, h, max_pixels)) return VIT_ERR_IMAGE;
    WebPAnimDecoderOptions opt;
    if (!WebPAnimDecoderOptionsInit(&opt))
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: libwebp version mismatch", path);
    opt.color_mode = MODE_RGBA;
    opt.use_threads = 0;
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &opt);
    uint8_t *frame = NULL;
    int ts = 0;
    if (!dec || !WebPAnimDecoderGetNext(dec, &frame, &ts)) {
        WebPAnimDecoderDelete(dec);
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode WebP: corrupt or truncated image data", path);
    }
    uint8_t *rgb = alloc_rgb((int)w, (int)h);
    if (!rgb) {
        WebPAnimDecoderDelete(dec);
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a %ux%u image", path, w, h);
    }
    for (size_t i = 0; i < (size_t)w * h; i++)
        rgb[3 * i] = frame[4 * i], rgb[3 * i + 1] = frame[4 * i + 1],
                rgb[3 * i + 2] = frame[4 * i + 2];
    WebPAnimDecoderDelete(dec);
    out->rgb = rgb, out->w = (int)w, out->h = (int)h;
    return VIT_OK;
}

/* --- TIFF (libtiff) ----------------------------------------------------------- */

typedef struct {
    const uint8_t *data;
    size_t n, pos;
    const char *name; /* the file, which libtiff's messages start with */
    char msg[200];    /* libtiff's first error */
} TiffMem;

static tmsize_t tiff_read(thandle_t h, void *buf, tmsize_t size) {
    TiffMem *m = h;
    size_t k = size < 0 ? 0 : (size_t)size;
    if (k > m->n - m->pos) k = m->n - m->pos;
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return (tmsize_t)k;
}

static tmsize_t tiff_write(thandle_t h, void *buf, tmsize_t size) {
    (void)h, (void)buf, (void)size;
    return -1;
}

static toff_t tiff_seek(thandle_t h, toff_t off, int whence) {
    TiffMem *m = h;
    uint64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->n : 0;
    if (off > UINT64_MAX - base || base + off > m->n) return (toff_t)-1;
    m->pos = (size_t)(base + off);
    return m->pos;
}

static int tiff_close(thandle_t h) {
    (void)h;
    return 0;
}

static toff_t tiff_size(thandle_t h) {
    return ((TiffMem *)h)->n;
}

static int tiff_map(thandle_t h, void **base, toff_t *size) {
    (void)h, (void)base, (void)size;
    return 0; /* not mapped: libtiff reads through tiff_read */
}

static void tiff_unmap(thandle_t h, void *base, toff_t size) {
    (void)h, (void)base, (void)size;
}

/* libtiff's error handler for this file: keep the first message, print nothing. */
static int tiff_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif, (void)module;
    TiffMem *m = user;
    if (m->msg[0]) return 1;
    vsnprintf(m->msg, sizeof m->msg, fmt, ap);
    size_t k = strlen(m->name); /* ours names the file already */
    if (!strncmp(m->msg, m->name, k) && m->msg[k] == ':' && m->msg[k + 1] == ' ')
        memmove(m->msg, m->msg + k + 2, strlen(m->msg + k + 2) + 1);
    return 1; /* handled: libtiff's global handler (stderr) is not called */
}

static int tiff_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1;
}

static uint32_t pack_abgr(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | 0xff000000u;
}

/* libtiff's RGBA interface premultiplies unassociated alpha into the colour; Pillow
 * keeps the colour ("RGBA" mode) and convert('RGB') drops the alpha. These put
 * routines replace libtiff's for 8-bit RGB with unassociated alpha: the colour as
 * stored, extra samples skipped. */
static void put_contig_rgb(TIFFRGBAImage *img, uint32_t *cp, uint32_t x, uint32_t y, uint32_t w,
                           uint32_t h, int32_t fromskew, int32_t toskew, unsigned char *pp) {
    (void)x, (void)y;
    int spp = img->samplesperpixel;
    for (; h > 0; h--, cp += toskew, pp += (ptrdiff_t)fromskew * spp)
        for (uint32_t i = 0; i < w; i++, pp += spp) *cp++ = pack_abgr(pp);
}

static void put_separate_rgb(TIFFRGBAImage *img, uint32_t *cp, uint32_t x, uint32_t y, uint32_t w,
                             uint32_t h, int32_t fromskew, int32_t toskew, unsigned char *r,
                             unsigned char *g, unsigned char *b, unsigned char *a) {
    (void)img, (void)x, (void)y, (void)a;
    for (; h > 0; h--, cp += toskew, r += fromskew, g += fromskew, b += fromskew)
        for (uint32_t i = 0; i < w; i++) {
            uint8_t p[3] = {*r++, *g++, *b++};
            *cp++ = pack_abgr(p);
        }
}

/* The first image of the file through libtiff's RGBA interface (TIFFRGBAImage), which
 * reads every photometric interpretation, bit depth and compression libtiff knows.
 * Pixels as stored (req_orientation = the file's own): vitlens applies the TIFF
 * Orientation tag itself, as it does EXIF's, and Pillow's exif_transpose does. */
VitStatus vit_decode_tiff(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, VitError *err) {
    TiffMem m = {data, n, 0, path, ""};
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, tiff_error, &m);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, tiff_warning, &m);
    /* "rm": read, and never ask for a memory map (tiff_map declines anyway) */
    TIFF *tif = TIFFClientOpenExt(path, "rm", (thandle_t)&m, tiff_read, tiff_write, tiff_seek,
                                  tiff_close, tiff_size, tiff_map, tiff_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!tif)
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot read TIFF: %s", path,
                             m.msg[0] ? m.msg : "not a valid TIFF file");
    VitStatus rc = VIT_ERR_IMAGE;
    uint32_t *raster = NULL;
    uint32_t w = 0, h = 0;
    uint16_t orient = 1;
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &orient);
    if (size_refused(err, path, w, h, max_pixels)) goto done;
    char emsg[1024] = "";
    TIFFRGBAImage img;
    if (!TIFFRGBAImageOK(tif, emsg) || !TIFFRGBAImageBegin(&img, tif, 0, emsg)) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode TIFF: %s", path,
                      m.msg[0] ? m.msg : emsg);
        goto done;
    }
    img.req_orientation = img.orientation;
    if (img.alpha == EXTRASAMPLE_UNASSALPHA && img.bitspersample == 8 &&
        img.photometric == PHOTOMETRIC_RGB && img.samplesperpixel >= 4) {
        if (img.isContig)
            img.put.contig = put_contig_rgb;
        else
            img.put.separate = put_separate_rgb;
    }
    raster = malloc((size_t)w * h * sizeof *raster);
    if (!raster) {
        TIFFRGBAImageEnd(&img);
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a %ux%u image", path, w, h);
        goto done;
    }
    int ok = TIFFRGBAImageGet(&img, raster, w, h);
    TIFFRGBAImageEnd(&img);
    if (!ok) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode TIFF: %s", path,
                      m.msg[0] ? m.msg : "truncated or corrupt image data");
        goto done;
    }
    /* ABGR words to RGB bytes in place: byte 3i is written after word i is read */
    uint8_t *rgb = (uint8_t *)raster;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        uint32_t v = raster[i];
        rgb[3 * i] = (uint8_t)TIFFGetR(v), rgb[3 * i + 1] = (uint8_t)TIFFGetG(v),
                rgb[3 * i + 2] = (uint8_t)TIFFGetB(v);
    }
    uint8_t *shrunk = realloc(rgb, (size_t)w * h * 3);
    out->rgb = shrunk ? shrunk : rgb, out->w = (int)w, out->h = (int)h;
    out->orientation = orient >= 1 && orient <= 8 ? orient : 1;
    raster = NULL;
    rc = VIT_OK;
done:
    free(raster);
    TIFFClose(tif);
    return rc;
}

/* --- HEIF and AVIF (libheif) -------------------------------------------------- */

/* The primary image, 8-bit RGB. libheif applies the file's own transformations (the
 * irot / imir boxes, and clap) unless ignore_transformations: by the HEIF standard
 * these, not the EXIF tag, say how to show the picture, so vitlens applies no EXIF
 * orientation on top (that would turn an iPhone photo twice). out->orientation is
 * the EXIF tag all the same, for the caller to report. */
VitStatus vit_decode_heif(Decoded *out, const char *path, const uint8_t *data, size_t n,
                          uint64_t max_pixels, int ignore_transformations, VitError *err) {
    if (n > INT32_MAX) return vit_set_error(err, VIT_ERR_IMAGE, "%s: HEIF file over 2 GiB", path);
    enum heif_filetype_result ft = heif_check_filetype(data, (int)n);
    if (ft == heif_filetype_no)
        return vit_set_error(
            err, VIT_ERR_IMAGE,
            "%s: not an image vitlens can read (an ISO media file, not HEIF or AVIF)", path);
    struct heif_context *ctx = heif_context_alloc();
    struct heif_image_handle *hd = NULL;
    struct heif_image *im = NULL;
    struct heif_decoding_options *opt = NULL;
    uint8_t *exif = NULL, *rgb = NULL;
    VitStatus rc = VIT_ERR_IMAGE;
    char line[200];
    if (!ctx) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
    struct heif_error he = heif_context_read_from_memory_without_copy(ctx, data, n, NULL);
    if (he.code == heif_error_Ok) he = heif_context_get_primary_image_handle(ctx, &hd);
    if (he.code != heif_error_Ok) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot read HEIF: %s", path,
                      one_line(line, sizeof line, he.message));
        goto done;
    }
    /* both the coded size and the size once turned */
    int iw = heif_image_handle_get_ispe_width(hd), ih = heif_image_handle_get_ispe_height(hd);
    int w = heif_image_handle_get_width(hd), h = heif_image_handle_get_height(hd);
    if (size_refused(err, path, (uint64_t)(iw < 0 ? 0 : iw), (uint64_t)(ih < 0 ? 0 : ih),
                     max_pixels) ||
        size_refused(err, path, (uint64_t)(w < 0 ? 0 : w), (uint64_t)(h < 0 ? 0 : h), max_pixels))
        goto done;
    out->orientation = 1;
    heif_item_id id;
    if (heif_image_handle_get_list_of_metadata_block_IDs(hd, "Exif", &id, 1) == 1) {
        size_t k = heif_image_handle_get_metadata_size(hd, id);
        exif = k ? malloc(k) : NULL;
        if (exif && heif_image_handle_get_metadata(hd, id, exif).code == heif_error_Ok)
            out->orientation = vit_exif_orientation(exif, k);
    }
    opt = heif_decoding_options_alloc();
    if (!opt) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    opt->ignore_transformations = ignore_transformations ? 1 : 0;
    opt->convert_hdr_to_8bit = 1;
    he = heif_decode_image(hd, &im, heif_colorspace_RGB, heif_chroma_interleaved_RGB, opt);
    if (he.code != heif_error_Ok) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode HEIF: %s", path,
                      one_line(line, sizeof line, he.message));
        goto done;
    }
    int stride = 0;
    const uint8_t *p = heif_image_get_plane_readonly(im, heif_channel_interleaved, &stride);
    w = heif_image_get_width(im, heif_channel_interleaved);
    h = heif_image_get_height(im, heif_channel_interleaved);
    if (!p || w < 1 || h < 1 || stride < 3 * w) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: cannot decode HEIF: no 8-bit RGB picture", path);
        goto done;
    }
    if (size_refused(err, path, (uint64_t)w, (uint64_t)h, max_pixels)) goto done;
    rgb = alloc_rgb(w, h);
    if (!rgb) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a %dx%d image", path, w, h);
        goto done;
    }
    for (int y = 0; y < h; y++)
        memcpy(rgb + (size_t)y * w * 3, p + (size_t)y * stride, (size_t)w * 3);
    out->rgb = rgb, out->w = w, out->h = h;
    out->heif_oriented = !ignore_transformations;
    rgb = NULL;
    rc = VIT_OK;
done:
    free(rgb);
    free(exif);
    heif_decoding_options_free(opt);
    heif_image_release(im);
    heif_image_handle_release(hd);
    heif_context_free(ctx);
    return rc;
}
