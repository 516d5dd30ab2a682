/* image.c - timm's eval preprocessing, bit for bit as PIL + torchvision compute it.
 *
 * timm builds its eval transform (timm/data/transforms_factory.py,
 * transforms_imagenet_eval) from torchvision, scale = floor(S / crop_pct):
 *   crop_mode 'center': Resize(scale, BICUBIC) of the shorter side (square S),
 *                       ResizeKeepRatio(scale) (non-square S; bilinear)
 *   crop_mode 'squash': Resize((scale_h, scale_w), BICUBIC)
 *   then CenterCrop(S), ToTensor(), Normalize(mean, std), on a PIL image.
 * torchvision's own weights (ImageClassification: Resize(256, BILINEAR), CenterCrop(224))
 * are the 'center' mode with crop_pct 224/256 and the bilinear filter (resize_bilinear).
 * Resize of a PIL image is Pillow's Image.resize, a separable convolution with
 * 8-bit rounding after each pass (libImaging/Resample.c). It is reproduced
 * here bit for bit so that, from the same decoded pixels, the model sees the
 * same input as under PyTorch, not merely a similar one. Only the pixels the
 * crop keeps are resampled (pil_resize_crop), for every mode. Decoding is
 * decode.c's, which gives Pillow's pixels for PNG, JPEG, WebP and TIFF. */
#include "internal.h"

#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
/* Taps per output pixel, at most: the filter's support, stretched when downscaling. */
static int taps_size(int in_size, int out_size, const Filter *f) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    return (int)ceil(f->support * filterscale) * 2 + 1;
}

static int taps_init(Taps *tp, int in_size, int out_size, const Filter *f, int o0, int n) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = taps_size(in_size, out_size, f);
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
    g.filter = cfg->resize_bilinear ? &FILTER_BILINEAR : &FILTER_BICUBIC;
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

/* Resize + centre crop to out [Sh, Sw, 3], resampling at most max_work pixels and taps. */
static VitStatus resize_crop(uint8_t *out, Geometry *geo, const VitConfig *cfg, const VitImage *img,
                             uint64_t max_work, VitError *err) {
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
    /* The crop's cost, which the limit above does not see when the resize is squashed
     * (--whole) rather than kept to the aspect ratio: the horizontal pass makes Sw px of
     * every input row the crop reads (about Sh * h / rh of them), and each output px has
     * its taps, as many as the downscale factor times 4. A 2 x 729225 PGM squashed to
     * 224 x 224 px made 163 M pixels in 2.4 s (tests/fuzz found it; at the pixel limit,
     * 2 x 50 M px: minutes), and a 50 M x 2 one needed 800 MB of taps. Pillow does the
     * same work, keeping every row. The limit, VIT_MAX_IMAGE_PIXELS: no crop costs more
     * than resampling the largest image accepted; it is reached by strips over ~400:1. */
    uint64_t rows = g.rh > img->h ? (uint64_t)Sh : ((uint64_t)Sh * img->h + g.rh - 1) / g.rh;
    uint64_t work = (uint64_t)Sw * rows + (uint64_t)Sw * taps_size(img->w, g.rw, g.filter) +
                    (uint64_t)Sh * taps_size(img->h, g.rh, g.filter);
    if (work > max_work)
        return vit_set_error(err, VIT_ERR_ARG,
                             "preprocess: a %dx%d image is too elongated: resizing it for a "
                             "%dx%d px input resamples %llu pixels and taps, more than %llu",
                             img->w, img->h, Sw, Sh, (unsigned long long)work,
                             (unsigned long long)max_work);
    if (!pil_resize_crop(out, img, g.rw, g.rh, g.filter, g.left, g.top, Sw, Sh))
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "preprocess: out of memory resizing %dx%d to %dx%d", img->w, img->h,
                             g.rw, g.rh);
    if (geo) *geo = g;
    return VIT_OK;
}

VitStatus vit_preprocess_rgb(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                             VitError *err) {
    return resize_crop(out, NULL, cfg, img, VIT_MAX_IMAGE_PIXELS, err);
}

VitStatus vit_preprocess_rgb_max(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                                 uint64_t max_work, VitError *err) {
    return resize_crop(out, NULL, cfg, img, max_work, err);
}

VitStatus vit_preprocess(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                         const VitConfig *cfg, const VitImage *img, VitError *err) {
    return vit_preprocess_max(out, crop_x, crop_y, crop_w, crop_h, cfg, img, VIT_MAX_IMAGE_PIXELS,
                              err);
}

VitStatus vit_preprocess_max(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                             const VitConfig *cfg, const VitImage *img, uint64_t max_work,
                             VitError *err) {
    int Sh = cfg->image_h, Sw = cfg->image_w;
    size_t plane = (size_t)Sh * Sw;
    uint8_t *rgb = malloc(plane * 3);
    if (!rgb) return vit_set_error(err, VIT_ERR_NOMEM, "preprocess: out of memory");
    Geometry g;
    VitStatus rc = resize_crop(rgb, &g, cfg, img, max_work, err);
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
