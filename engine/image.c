/* image.c - decode images (stb_image) and timm's eval preprocessing.
 *
 * timm builds its eval transform (timm/data/transforms_factory.py,
 * transforms_imagenet_eval) from torchvision, scale = floor(S / crop_pct):
 *   crop_mode 'center': Resize(scale, BICUBIC) of the shorter side (square S),
 *                       ResizeKeepRatio(scale) (non-square S; bilinear)
 *   crop_mode 'squash': Resize((scale_h, scale_w), BICUBIC)
 *   then CenterCrop(S), ToTensor(), Normalize(mean, std), on a PIL image.
 * Resize of a PIL image is Pillow's Image.resize, a separable convolution with
 * 8-bit rounding after each pass (libImaging/Resample.c). It is reproduced
 * here bit for bit so that, from the same decoded pixels, the model sees the
 * same input as under PyTorch, not merely a similar one. Only the pixels the
 * crop keeps are resampled (pil_resize_crop), for every mode.
 * Decoding is stb_image's: PNG (lossless) matches Pillow exactly; a JPEG can
 * differ from Pillow's libjpeg-turbo by a level or two on ~1% of pixels
 * (tests/parity measures it), before any resizing. */
#include "internal.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include <stb_image.h>

#include <errno.h>
#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- decoding -------------------------------------------------------------- */

/* stbi_info tries every format in turn and keeps the last one's reason, so a
 * PNG it refuses as too large (over 2^30 samples) reads as "not of any known
 * type". The size a PNG declares is at bytes 16..23, in its IHDR chunk: read
 * it for the message. 1 when f holds a PNG signature and IHDR. */
static int png_declared_size(FILE *f, uint32_t *w, uint32_t *h) {
    static const uint8_t sig[12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    uint8_t b[24];
    if (fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, sizeof b, f) != sizeof b ||
        memcmp(b, sig, sizeof sig) != 0 || memcmp(b + 12, "IHDR", 4) != 0)
        return 0;
    *w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    *h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    return 1;
}

/* Debian 12's stb_image (2.27) writes past its Huffman tables when a JPEG's DHT
 * segment declares more than 256 codes in one table: stbi__build_huffman fills
 * size[257] and the table's values[256] with as many entries as the 16 counts add
 * up to, up to 4080 (tests/fuzz found it; it corrupts the heap). stbi_info already
 * reads the tables, so the file is checked before stb sees it: walk the marker
 * segments as stb does (fill bytes, stuffed bytes and restart markers in the
 * entropy-coded data, DHT segments between scans) and return the first table's
 * count over 256, or 0 when there is none or the file is not a JPEG. */
static int jpeg_huffman_overflow(FILE *f) {
    int c;
    if (fseek(f, 0, SEEK_SET) != 0 || getc(f) != 0xFF) return 0;
    while ((c = getc(f)) == 0xFF) {
    }
    if (c != 0xD8) return 0; /* SOI: stb skips fill bytes before it too */
    for (;;) {
        if ((c = getc(f)) == EOF) return 0;
        if (c != 0xFF) continue; /* entropy-coded data */
        while ((c = getc(f)) == 0xFF) {
        }
        if (c == EOF || c == 0xD9) return 0;                              /* EOI */
        if (c == 0x00 || c == 0x01 || (c >= 0xD0 && c <= 0xD8)) continue; /* no length */
        int hi = getc(f), lo = getc(f);
        if (hi == EOF || lo == EOF) return 0;
        long len = (long)(hi << 8 | lo) - 2;
        if (c != 0xC4) { /* not a DHT: skip the segment */
            if (len > 0 && fseek(f, len, SEEK_CUR) != 0) return 0;
            continue;
        }
        /* stb's loop over the tables of one DHT segment. Past the end of the file stb
         * reads zeros and goes on: so does this (a file cut inside its counts still
         * adds up to them; the fuzzer found that one too). */
        while (len > 0) {
            int n = 0;
            getc(f); /* table class and id */
            for (int i = 0; i < 16; i++) {
                int k = getc(f);
                n += k == EOF ? 0 : k;
            }
            if (n > 256) return n;
            if (fseek(f, n, SEEK_CUR) != 0) return 0;
            len -= 17 + n;
        }
    }
}

/* A PNM as stb_image tells one: "P5" (grey) or "P6" (RGB). Leaves f rewound. */
static int is_pnm(FILE *f) {
    uint8_t b[2];
    int yes = fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, 2, f) == 2 && b[0] == 'P' &&
              (b[1] == '5' || b[1] == '6');
    rewind(f);
    return yes;
}

/* Debian's stb_image 2.27 reads a PNM header's numbers into an int with no bound
 * (stbi__pnm_getinteger: signed overflow, undefined behaviour; tests/fuzz found it
 * with a 60-digit width). Read the width, height and maxval as stb does (whitespace
 * and # comments between them) and return 1 when one is over INT_MAX. Leaves f rewound. */
static int pnm_number_overflows(FILE *f) {
    if (!is_pnm(f) || fseek(f, 2, SEEK_SET) != 0) return 0;
    int c = getc(f), over = 0;
    for (int k = 0; k < 3 && !over; k++) {
        for (;;) {
            while (c == ' ' || (c >= '\t' && c <= '\r')) c = getc(f); /* stb's pnm_isspace */
            if (c != '#') break;
            while (c != EOF && c != '\n' && c != '\r') c = getc(f);
        }
        int64_t v = 0;
        for (; c >= '0' && c <= '9' && !over; c = getc(f))
            over = (v = v * 10 + (c - '0')) > INT_MAX;
        if (v == 0) break; /* stb stops there too */
    }
    rewind(f);
    return over;
}

/* A 16-bit PNM (maxval over 255) as 8-bit RGB [h, w, 3], stb_image-allocated. Debian's
 * stb_image 2.27 gets these wrong twice: asked for RGB it converts the channels as if
 * they were 8-bit (stbi__convert_format, not ..._format16) and then reads twice the
 * buffer that made, a heap overflow on any 16-bit grey PGM (tests/fuzz found it); and
 * it keeps the big-endian samples in file order, so its "high byte" is the low one.
 * Here the samples are read as they are, the first (most significant) byte of each
 * is kept, as for 16-bit PNGs, and grey is replicated. maxval scales nothing, as in
 * stb_image's 8-bit PNMs. NULL on error (stbi_failure_reason says why). */
static uint8_t *load_pnm16(FILE *f, int *w, int *h) {
    int comp;
    uint16_t *px = stbi_load_from_file_16(f, w, h, &comp, 0);
    if (!px) return NULL;
    const uint8_t *be = (const uint8_t *)px; /* sample i is bytes 2i (high), 2i + 1 */
    size_t n = (size_t)*w * (size_t)*h;
    uint8_t *rgb = (comp == 1 || comp == 3) ? STBI_MALLOC(n * 3) : NULL;
    for (size_t i = 0; rgb && i < n; i++)
        for (int ch = 0; ch < 3; ch++) rgb[3 * i + ch] = be[2 * (i * comp + (comp == 3 ? ch : 0))];
    stbi_image_free(px);
    return rgb;
}

VitStatus vit_image_load(VitImage *img, const char *path, VitError *err) {
    return vit_image_load_max(img, path, VIT_MAX_IMAGE_PIXELS, err);
}

VitStatus vit_image_load_max(VitImage *img, const char *path, uint64_t max_pixels, VitError *err) {
    memset(img, 0, sizeof *img);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return vit_set_error(err, VIT_ERR_IO, "%s: is a directory, not an image", path);
    FILE *f = fopen(path, "rb");
    if (!f) return vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
        fclose(f);
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: file is empty (0 bytes), not an image", path);
    }
    int n_codes = jpeg_huffman_overflow(f);
    if (n_codes) {
        fclose(f);
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: corrupt JPEG: a Huffman table declares %d codes, at most 256",
                             path, n_codes);
    }
    if (pnm_number_overflows(f)) {
        fclose(f);
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: corrupt PNM: a number in its header is over %d", path, INT_MAX);
    }
    rewind(f);
    /* The declared size first: nothing is decoded or allocated for an image over the limit. */
    int w, h, comp;
    if (!stbi_info_from_file(f, &w, &h, &comp)) {
        uint32_t pw, ph;
        int png = png_declared_size(f, &pw, &ph);
        fclose(f);
        if (png && (uint64_t)pw * ph > max_pixels)
            return vit_set_error(err, VIT_ERR_IMAGE,
                                 "%s: image is %ux%u px, more than the limit of %llu pixels", path,
                                 pw, ph, (unsigned long long)max_pixels);
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: not an image vitlens can read (%s)", path,
                             stbi_failure_reason());
    }
    if (w < 1 || h < 1 || (uint64_t)w * (uint64_t)h > max_pixels) {
        fclose(f);
        if (w < 1 || h < 1)
            return vit_set_error(err, VIT_ERR_IMAGE, "%s: image is %dx%d px: empty", path, w, h);
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: image is %dx%d px, more than the limit of %llu pixels", path, w,
                             h, (unsigned long long)max_pixels);
    }
    /* req_comp 3: grey is replicated and alpha dropped, as PIL's convert('RGB'). */
    uint8_t *rgb = is_pnm(f) && stbi_is_16_bit_from_file(f)
                       ? load_pnm16(f, &w, &h)
                       : stbi_load_from_file(f, &w, &h, &comp, 3);
    fclose(f);
    if (!rgb)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode image, truncated or corrupt (%s)", path,
                             stbi_failure_reason());
    img->w = w;
    img->h = h;
    img->rgb = rgb;
    return VIT_OK;
}

VitStatus vit_image_from_rgb(VitImage *img, const uint8_t *rgb, int w, int h, VitError *err) {
    memset(img, 0, sizeof *img);
    if (w < 1 || h < 1 || (uint64_t)w * (uint64_t)h > VIT_MAX_IMAGE_PIXELS)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "image is %dx%d px: empty or over the limit of %u "
                             "pixels",
                             w, h, VIT_MAX_IMAGE_PIXELS);
    size_t n = (size_t)w * (size_t)h * 3;
    /* stb's allocator, so that vit_image_free's stbi_image_free matches */
    img->rgb = STBI_MALLOC(n);
    if (!img->rgb)
        return vit_set_error(err, VIT_ERR_NOMEM, "out of memory for a %dx%d image", w, h);
    memcpy(img->rgb, rgb, n);
    img->w = w;
    img->h = h;
    return VIT_OK;
}

void vit_image_free(VitImage *img) {
    if (!img) return;
    stbi_image_free(img->rgb);
    memset(img, 0, sizeof *img);
}

/* --- Pillow's bicubic and bilinear resample --------------------------------- */

/* Pillow keeps 8-bit filter weights as fixed point with 22 fractional bits:
 * 32 bits - 8 for the pixel - 2 for overshoot of the negative-lobed filter. */
#define PRECISION_BITS 22

/* Keys' cubic convolution kernel with a = -0.5, support 2. */
static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* The triangle kernel, support 1. */
static double bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

typedef struct {
    double (*fn)(double);
    double support;
} Filter;

static const Filter FILTER_BICUBIC = {bicubic, 2.0}, FILTER_BILINEAR = {bilinear, 1.0};

typedef struct {
    int ksize;  /* taps per output pixel (max) */
    int *first; /* [n] first input index */
    int *count; /* [n] taps used */
    int32_t *k; /* [n, ksize] fixed-point weights */
} Taps;

/* Weights mapping in_size samples to out_size with filter f, for the n outputs
 * o0 .. o0+n-1: the filter is stretched by the downscale factor (antialiasing),
 * each output's weights are normalised to sum 1 in double, then rounded half away
 * from zero to fixed point. An output's weights depend only on its index, so the
 * outputs of a crop come out exactly as they would in the whole resize. */
static int taps_init(Taps *tp, int in_size, int out_size, const Filter *f, int o0, int n) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    tp->ksize = ksize;
    tp->first = malloc((size_t)n * sizeof(int));
    tp->count = malloc((size_t)n * sizeof(int));
    tp->k = calloc((size_t)n * (size_t)ksize, sizeof(int32_t));
    double *w = malloc((size_t)ksize * sizeof(double));
    if (!tp->first || !tp->count || !tp->k || !w) {
        free(w);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int o = o0 + i;
        double center = (o + 0.5) * scale, ss = 1.0 / filterscale, sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        int m = hi - lo;
        for (int j = 0; j < m; j++) {
            w[j] = f->fn((j + lo - center + 0.5) * ss);
            sum += w[j];
        }
        for (int j = 0; j < m; j++) {
            double v = sum != 0.0 ? w[j] / sum : w[j];
            tp->k[(size_t)i * ksize + j] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
                                                           : 0.5 + v * (1 << PRECISION_BITS));
        }
        tp->first[i] = lo;
        tp->count[i] = m;
    }
    free(w);
    return 1;
}

static void taps_free(Taps *tp) {
    free(tp->first);
    free(tp->count);
    free(tp->k);
}

static uint8_t clip8(int32_t v) {
    if (v < 0) return 0;
    v >>= PRECISION_BITS;
    return v > 255 ? 255 : (uint8_t)v;
}

/* Pillow's horizontal pass on one row of RGB8: out[n, 3] from input row y of img,
 * one output pixel per tap set; without taps (the width keeps its size) the n
 * pixels from column left are copied. */
static void resample_row(uint8_t *out, const VitImage *img, int y, const Taps *tp, int left,
                         int n) {
    const uint8_t *row = img->rgb + (size_t)y * img->w * 3;
    if (!tp) {
        memcpy(out, row + (size_t)left * 3, (size_t)n * 3);
        return;
    }
    for (int o = 0; o < n; o++) {
        const int32_t *k = tp->k + (size_t)o * tp->ksize;
        const uint8_t *src = row + (size_t)tp->first[o] * 3;
        int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
        for (int i = 0; i < tp->count[o]; i++) {
            s0 += src[3 * i + 0] * k[i];
            s1 += src[3 * i + 1] * k[i];
            s2 += src[3 * i + 2] * k[i];
        }
        out[3 * o + 0] = clip8(s0), out[3 * o + 1] = clip8(s1), out[3 * o + 2] = clip8(s2);
    }
}

/* The cw x ch crop at (left, top) of Pillow's Image.resize((rw, rh), BICUBIC or
 * BILINEAR) of RGB8, out: [ch, cw, 3]. Pillow resizes horizontally first, each
 * row rounded to 8 bits, then vertically, and skips the pass of a side that keeps
 * its size. Only the crop is computed: the cw output columns of the horizontal
 * pass, on the input rows that the ch output rows of the vertical pass read. The
 * vertical pass streams: each input row, once resampled horizontally, is added
 * into the int32 sums of the output rows whose taps cover it, in input-row order,
 * which is the order of Pillow's sum over taps. Every output pixel is the same sum
 * as in the whole resize, so the crop is bit-exact, while memory is the crop's
 * (ch x cw sums and one row) and does not grow with the resized size (a 2 x 500000
 * px image resized to a 36 px short side is 340 M pixels; its crop is 36 x 36) or
 * with the image's height (squashing that strip to 224 x 224 px no longer keeps
 * 500000 resampled rows). */
static int pil_resize_crop(uint8_t *out, const VitImage *img, int rw, int rh, const Filter *f,
                           int left, int top, int cw, int ch) {
    Taps th = {0}, tv = {0};
    uint8_t *row = NULL;
    int32_t *acc = NULL;
    int ok = 0;
    size_t n_row = (size_t)cw * 3;
    if (rw != img->w && !taps_init(&th, img->w, rw, f, left, cw)) goto done;
    const Taps *h = rw != img->w ? &th : NULL;
    if (rh == img->h) { /* no vertical pass: output row y is input row top + y */
        for (int y = 0; y < ch; y++) resample_row(out + y * n_row, img, top + y, h, left, cw);
        ok = 1;
        goto done;
    }
    row = malloc(n_row);
    acc = malloc((size_t)ch * n_row * sizeof *acc);
    if (!row || !acc || !taps_init(&tv, img->h, rh, f, top, ch)) goto done;
    for (size_t i = 0; i < (size_t)ch * n_row; i++) acc[i] = 1 << (PRECISION_BITS - 1);
    /* An output row's taps start (first) and end (first + count) at input rows that
     * never decrease with the output row. */
    int y1 = 0, o_lo = 0;
    for (int o = 0; o < ch; o++)
        if (tv.first[o] + tv.count[o] > y1) y1 = tv.first[o] + tv.count[o];
    for (int y = tv.first[0]; y < y1; y++) {
        while (o_lo < ch && tv.first[o_lo] + tv.count[o_lo] <= y) o_lo++;
        if (o_lo < ch && tv.first[o_lo] > y) continue; /* a row no output reads */
        resample_row(row, img, y, h, left, cw);
        for (int o = o_lo; o < ch && tv.first[o] <= y; o++) {
            int i = y - tv.first[o];
            if (i >= tv.count[o]) continue;
            int32_t k = tv.k[(size_t)o * tv.ksize + i], *a = acc + o * n_row;
            for (size_t j = 0; j < n_row; j++) a[j] += row[j] * k;
        }
    }
    for (size_t i = 0; i < (size_t)ch * n_row; i++) out[i] = clip8(acc[i]);
    ok = 1;
done:
    taps_free(&th);
    taps_free(&tv);
    free(row);
    free(acc);
    return ok;
}

/* --- timm eval transform --------------------------------------------------- */

typedef struct {
    int rw, rh;           /* size after the resize */
    int left, top;        /* CenterCrop offset in the resized image */
    const Filter *filter; /* Pillow filter of the resize */
} Geometry;

/* A size in px computed in double, as an int. Converting a value past INT_MAX
 * is undefined; such sizes (a 10000000x1 image) are clamped to INT_MAX for the
 * caller's size check to refuse. */
static int px_size(double v) {
    if (!(v >= 0.0)) return 0;
    return v < (double)INT_MAX ? (int)v : INT_MAX;
}

/* timm: scale_size = math.floor(img_size / crop_pct); crop_pct is a Python
 * float there, a float32 here: guard the exact-multiple case (224 / 0.875). */
static int scale_size(int S, float crop_pct) {
    double exact = S / (double)crop_pct;
    if (fabs(exact - nearbyint(exact)) < 1e-4) return px_size(nearbyint(exact));
    return px_size(floor(exact));
}

/* The resize of timm's eval transform, as torchvision 0.14 rounds it (Python's
 * round(), half to even, under FE_TONEAREST), and F.center_crop's offsets. */
static Geometry eval_geometry(const VitConfig *cfg, int w, int h) {
    Geometry g;
    int Sh = cfg->image_h, Sw = cfg->image_w;
    int sh = scale_size(Sh, cfg->crop_pct), sw = scale_size(Sw, cfg->crop_pct);
    int saved = fegetround();
    fesetround(FE_TONEAREST);
    g.filter = &FILTER_BICUBIC;
    if (cfg->crop_mode == VIT_CROP_SQUASH) { /* Resize((sh, sw)) */
        g.rw = sw, g.rh = sh;
    } else if (sh == sw) { /* Resize(sh): the shorter side to sh, the longer truncated */
        int s = w <= h ? w : h, l = w <= h ? h : w;
        int new_long = px_size((double)sh * l / s);
        g.rw = w <= h ? sh : new_long;
        g.rh = w <= h ? new_long : sh;
    } else { /* ResizeKeepRatio((sh, sw)), longest=0: cover the target; its default filter */
        double rh = (double)h / sh, rw = (double)w / sw, ratio = rh < rw ? rh : rw;
        g.rh = px_size(nearbyint(h / ratio));
        g.rw = px_size(nearbyint(w / ratio));
        g.filter = &FILTER_BILINEAR;
    }
    g.top = (int)nearbyint((g.rh - Sh) / 2.0);
    g.left = (int)nearbyint((g.rw - Sw) / 2.0);
    fesetround(saved);
    return g;
}

/* Resize + centre crop to out [Sh, Sw, 3]. */
static VitStatus resize_crop(uint8_t *out, Geometry *geo, const VitConfig *cfg, const VitImage *img,
                             VitError *err) {
    if (!img || !img->rgb || img->w < 1 || img->h < 1)
        return vit_set_error(err, VIT_ERR_ARG, "preprocess: empty image");
    int Sh = cfg->image_h, Sw = cfg->image_w;
    Geometry g = eval_geometry(cfg, img->w, img->h);
    if ((uint64_t)g.rw * g.rh > 4ull * VIT_MAX_IMAGE_PIXELS)
        return vit_set_error(err, VIT_ERR_ARG,
                             "preprocess: a %dx%d image is too elongated: resizing it for a "
                             "%dx%d px input needs more than %llu pixels",
                             img->w, img->h, Sw, Sh, 4ull * VIT_MAX_IMAGE_PIXELS);
    if (g.rw < Sw || g.rh < Sh)
        return vit_set_error(err, VIT_ERR_ARG,
                             "preprocess: resize to %dx%d cannot be cropped to %dx%d", g.rw, g.rh,
                             Sw, Sh);
    if (!pil_resize_crop(out, img, g.rw, g.rh, g.filter, g.left, g.top, Sw, Sh))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "preprocess: out of memory resizing %dx%d to %dx%d", img->w, img->h,
                             g.rw, g.rh);
    if (geo) *geo = g;
    return VIT_OK;
}

VitStatus vit_preprocess_rgb(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                             VitError *err) {
    return resize_crop(out, NULL, cfg, img, err);
}

VitStatus vit_preprocess(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                         const VitConfig *cfg, const VitImage *img, VitError *err) {
    int Sh = cfg->image_h, Sw = cfg->image_w;
    size_t plane = (size_t)Sh * Sw;
    uint8_t *rgb = malloc(plane * 3);
    if (!rgb) return vit_set_error(err, VIT_ERR_NOMEM, "preprocess: out of memory");
    Geometry g;
    VitStatus rc = resize_crop(rgb, &g, cfg, img, err);
    if (rc) {
        free(rgb);
        return rc;
    }
    /* ToTensor: v / 255 in float32; Normalize: (x - mean) / std in float32. */
    for (int ch = 0; ch < 3; ch++)
        for (size_t i = 0; i < plane; i++)
            out[ch * plane + i] = ((float)rgb[i * 3 + ch] / 255.0f - cfg->mean[ch]) / cfg->std[ch];
    free(rgb);
    /* The crop in source pixels: resized px r covers source [r, r+1) * (w / rw). */
    double sx = (double)img->w / g.rw, sy = (double)img->h / g.rh;
    int x0 = (int)floor(g.left * sx), y0 = (int)floor(g.top * sy);
    int x1 = (int)ceil((g.left + Sw) * sx), y1 = (int)ceil((g.top + Sh) * sy);
    if (x1 > img->w) x1 = img->w;
    if (y1 > img->h) y1 = img->h;
    if (crop_x) *crop_x = x0;
    if (crop_y) *crop_y = y0;
    if (crop_w) *crop_w = x1 - x0;
    if (crop_h) *crop_h = y1 - y0;
    return VIT_OK;
}
