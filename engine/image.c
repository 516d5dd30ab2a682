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
 * same input as under PyTorch, not merely a similar one.
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

VitStatus vit_image_load(VitImage *img, const char *path, VitError *err) {
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
    /* The declared size first: nothing is decoded or allocated for an image over the limit. */
    int w, h, comp;
    if (!stbi_info_from_file(f, &w, &h, &comp)) {
        uint32_t pw, ph;
        int png = png_declared_size(f, &pw, &ph);
        fclose(f);
        if (png && (uint64_t)pw * ph > VIT_MAX_IMAGE_PIXELS)
            return vit_set_error(err, VIT_ERR_IMAGE,
                                 "%s: image is %ux%u px, more than the limit of %u pixels", path,
                                 pw, ph, VIT_MAX_IMAGE_PIXELS);
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: not an image vitlens can read (%s)", path,
                             stbi_failure_reason());
    }
    if (w < 1 || h < 1 || (uint64_t)w * (uint64_t)h > VIT_MAX_IMAGE_PIXELS) {
        fclose(f);
        if (w < 1 || h < 1)
            return vit_set_error(err, VIT_ERR_IMAGE, "%s: image is %dx%d px: empty", path, w, h);
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: image is %dx%d px, more than the limit of %u pixels", path, w, h,
                             VIT_MAX_IMAGE_PIXELS);
    }
    /* req_comp 3: grey is replicated and alpha dropped, as PIL's convert('RGB'). */
    uint8_t *rgb = stbi_load_from_file(f, &w, &h, &comp, 3);
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
    int *first; /* [out] first input index */
    int *count; /* [out] taps used */
    int32_t *k; /* [out, ksize] fixed-point weights */
} Taps;

/* Weights mapping in_size samples to out_size: the filter is stretched by the
 * downscale factor (antialiasing), each output's weights are normalised to sum
 * 1 in double, then rounded half away from zero to fixed point. */
static int taps_init(Taps *tp, int in_size, int out_size, const Filter *f) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    tp->ksize = ksize;
    tp->first = malloc((size_t)out_size * sizeof(int));
    tp->count = malloc((size_t)out_size * sizeof(int));
    tp->k = calloc((size_t)out_size * (size_t)ksize, sizeof(int32_t));
    double *w = malloc((size_t)ksize * sizeof(double));
    if (!tp->first || !tp->count || !tp->k || !w) {
        free(w);
        return 0;
    }
    for (int o = 0; o < out_size; o++) {
        double center = (o + 0.5) * scale, ss = 1.0 / filterscale, sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        for (int i = 0; i < n; i++) {
            w[i] = f->fn((i + lo - center + 0.5) * ss);
            sum += w[i];
        }
        for (int i = 0; i < n; i++) {
            double v = sum != 0.0 ? w[i] / sum : w[i];
            tp->k[(size_t)o * ksize + i] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
                                                           : 0.5 + v * (1 << PRECISION_BITS));
        }
        tp->first[o] = lo;
        tp->count[o] = n;
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

/* One separable pass over RGB8. Horizontal: out[h, out_n, 3] from in[h, w, 3]
 * along x. Vertical: out[out_n, w, 3] from in[h, w, 3] along y. */
static void resample_pass(uint8_t *out, const uint8_t *in, int w, int h, const Taps *tp, int out_n,
                          int horizontal) {
    if (horizontal) {
        for (int y = 0; y < h; y++)
            for (int o = 0; o < out_n; o++) {
                const int32_t *k = tp->k + (size_t)o * tp->ksize;
                const uint8_t *src = in + ((size_t)y * w + tp->first[o]) * 3;
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < tp->count[o]; i++) {
                    s0 += src[3 * i + 0] * k[i];
                    s1 += src[3 * i + 1] * k[i];
                    s2 += src[3 * i + 2] * k[i];
                }
                uint8_t *d = out + ((size_t)y * out_n + o) * 3;
                d[0] = clip8(s0), d[1] = clip8(s1), d[2] = clip8(s2);
            }
    } else {
        for (int o = 0; o < out_n; o++) {
            const int32_t *k = tp->k + (size_t)o * tp->ksize;
            for (int x = 0; x < w; x++) {
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < tp->count[o]; i++) {
                    const uint8_t *src = in + ((size_t)(tp->first[o] + i) * w + x) * 3;
                    s0 += src[0] * k[i];
                    s1 += src[1] * k[i];
                    s2 += src[2] * k[i];
                }
                uint8_t *d = out + ((size_t)o * w + x) * 3;
                d[0] = clip8(s0), d[1] = clip8(s1), d[2] = clip8(s2);
            }
        }
    }
}

/* Pillow Image.resize((rw, rh), BICUBIC or BILINEAR) of RGB8: horizontal pass
 * first, each pass skipped when that side keeps its size. out: [rh, rw, 3]. */
static int pil_resize(uint8_t *out, const VitImage *img, int rw, int rh, const Filter *f) {
    uint8_t *tmp = NULL;
    const uint8_t *src = img->rgb;
    int w = img->w, ok = 0;
    Taps th = {0}, tv = {0};
    if (rw != img->w) {
        tmp = malloc((size_t)img->h * rw * 3);
        if (!tmp || !taps_init(&th, img->w, rw, f)) goto done;
        resample_pass(rh == img->h ? out : tmp, src, img->w, img->h, &th, rw, 1);
        src = tmp;
        w = rw;
    }
    if (rh != img->h) {
        if (!taps_init(&tv, img->h, rh, f)) goto done;
        resample_pass(out, src, w, img->h, &tv, rh, 0);
    } else if (rw == img->w) {
        memcpy(out, img->rgb, (size_t)rw * rh * 3);
    }
    ok = 1;
done:
    taps_free(&th);
    taps_free(&tv);
    free(tmp);
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
    uint8_t *resized = malloc((size_t)g.rw * g.rh * 3);
    if (!resized || !pil_resize(resized, img, g.rw, g.rh, g.filter)) {
        free(resized);
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "preprocess: out of memory resizing %dx%d to %dx%d", img->w, img->h,
                             g.rw, g.rh);
    }
    for (int y = 0; y < Sh; y++)
        memcpy(out + (size_t)y * Sw * 3, resized + ((size_t)(y + g.top) * g.rw + g.left) * 3,
               (size_t)Sw * 3);
    free(resized);
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
