/* decode.c - image files to 8-bit RGB, turned as their EXIF orientation says.
 *
 * The file's first bytes pick the decoder:
 *   FF D8              JPEG        libjpeg-turbo (codecs.c), as Pillow decodes it
 *   RIFF....WEBP       WebP        libwebp (codecs.c), as Pillow decodes it
 *   II*\0, MM\0*, ...  TIFF        libtiff (codecs.c)
 *   ....ftyp           HEIF, AVIF  libheif (codecs.c)
 *   anything else      stb_image: PNG, BMP, GIF, TGA, PSD, HDR, PIC, PNM
 * stb_image is built without its JPEG decoder (STBI_NO_JPEG): it differs from
 * libjpeg-turbo's by a level or two, and Debian's 2.27 overran its Huffman tables on
 * a malformed file (docs/robustness.md). Then the EXIF orientation (JPEG, WebP; the
 * TIFF Orientation tag) turns the pixels as Pillow's ImageOps.exif_transpose does,
 * unless VitImageOptions.ignore_orientation; HEIF turns itself (libheif). */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* stb_image grows a PNG's buffers with realloc as the file asks: the IDAT chunks' data,
 * and the inflated image data, which it doubles for as long as the zlib stream goes on.
 * A 1 MB PNG of 1 x 1 px whose stream inflates to 1 GB of zeros took 1 GB and 2 s (Pillow
 * inflates the one row it needs). stb_decode sets how far these buffers may grow for the
 * file it decodes; past that stb gets NULL and refuses the file. Thread-local, the one
 * mutable global of the engine: stb's allocator macros take no context, and two threads
 * may decode at once. */
static _Thread_local size_t stb_realloc_limit = SIZE_MAX;
static _Thread_local int stb_realloc_refused;

static void *stb_realloc(void *p, size_t n) {
    if (n <= stb_realloc_limit) return realloc(p, n);
    stb_realloc_refused = 1;
    return NULL;
}

#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#define STBI_NO_JPEG
#define STBI_MALLOC(n)     malloc(n)
#define STBI_REALLOC(p, n) stb_realloc(p, n)
#define STBI_FREE(p)       free(p)
#include <stb_image.h>

/* A file handed to libjpeg, libwebp, libtiff or libheif is read whole first. An
 * uncompressed 16-bit RGBA TIFF at VIT_MAX_IMAGE_PIXELS is 800 MB. */
#define MAX_FILE_BYTES (1ull << 30)

/* --- stb_image ---------------------------------------------------------------- */

/* stb_image decodes a file through these callbacks, which read as its own stdio ones
 * do, except that a short read zeroes the rest of what was asked. stb 2.27 ignores the
 * count of some reads (a TGA's rows, a flat HDR's pixels, a PNM's samples) and kept
 * what the buffer held before, heap or stack, as pixels of a cut file (valgrind on the
 * fuzzing corpus). It still sees the short count where it checks one. */
static int stb_read(void *user, char *data, int size) {
    if (size <= 0) return 0;
    size_t got = fread(data, 1, (size_t)size, user);
    memset(data + got, 0, (size_t)size - got);
    return (int)got;
}

static void stb_skip(void *user, int n) {
    fseek(user, n, SEEK_CUR);
    int c = fgetc(user); /* as stb's: a read resets feof() */
    if (c != EOF) ungetc(c, user);
}

static int stb_eof(void *user) {
    return feof((FILE *)user) || ferror((FILE *)user);
}

static const stbi_io_callbacks stb_io = {stb_read, stb_skip, stb_eof};

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

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
    *w = be32(b + 16), *h = be32(b + 20);
    return 1;
}

/* A PNM as stb_image tells one: "P5" (grey) or "P6" (RGB). Leaves f rewound. */
static int is_pnm(FILE *f) {
    uint8_t b[2];
    int yes = fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, 2, f) == 2 && b[0] == 'P' &&
              (b[1] == '5' || b[1] == '6');
    rewind(f);
    return yes;
}

/* A PNM's header as stb_image reads it: width, height and maxval, whitespace and #
 * comments between them, one character after the maxval; then the samples. Two bugs of
 * Debian's stb_image 2.27 are checked with it (tests/fuzz found both):
 *  - it reads the numbers into an int with no bound (stbi__pnm_getinteger: signed
 *    overflow, undefined behaviour; a 60-digit width): over is set when one is over
 *    INT_MAX, and the walk stops there.
 *  - it reads the samples without checking that the file held them, so a cut PNM's
 *    pixels were whatever the heap held (valgrind: uninitialised values in the
 *    preprocessing): data is where the samples start, to check against the file's size. */
typedef struct {
    int64_t num[3]; /* width, height, maxval */
    long data;      /* the offset of the first sample */
    int channels;   /* 1 (P5) or 3 (P6) */
    int over;       /* a number is over INT_MAX */
} PnmHeader;

/* 1 when f is a PNM (*ph filled), else 0. Leaves f rewound. */
static int pnm_header(FILE *f, PnmHeader *ph) {
    memset(ph, 0, sizeof *ph);
    if (!is_pnm(f) || fseek(f, 1, SEEK_SET) != 0) return 0;
    ph->channels = getc(f) == '6' ? 3 : 1;
    int c = getc(f);
    for (int k = 0; k < 3 && !ph->over; k++) {
        for (;;) {
            while (c == ' ' || (c >= '\t' && c <= '\r')) c = getc(f); /* stb's pnm_isspace */
            if (c != '#') break;
            while (c != EOF && c != '\n' && c != '\r') c = getc(f);
        }
        int64_t v = 0;
        for (; c >= '0' && c <= '9' && !ph->over; c = getc(f))
            ph->over = (v = v * 10 + (c - '0')) > INT_MAX;
        ph->num[k] = v;
        if (v == 0) break; /* stb stops there too */
    }
    ph->data = ftell(f); /* after the character that ended the maxval */
    rewind(f);
    return 1;
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
    uint16_t *px = stbi_load_16_from_callbacks(&stb_io, f, w, h, &comp, 0);
    if (!px) return NULL;
    const uint8_t *be = (const uint8_t *)px; /* sample i is bytes 2i (high), 2i + 1 */
    size_t n = (size_t)*w * (size_t)*h;
    uint8_t *rgb = (comp == 1 || comp == 3) ? STBI_MALLOC(n * 3) : NULL;
    for (size_t i = 0; rgb && i < n; i++)
        for (int ch = 0; ch < 3; ch++) rgb[3 * i + ch] = be[2 * (i * comp + (comp == 3 ? ch : 0))];
    stbi_image_free(px);
    return rgb;
}

/* A Softimage PIC as stb_image tells one, by its first 4 bytes. Leaves f rewound. */
static int is_pic(FILE *f) {
    uint8_t b[4];
    int yes =
        fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, 4, f) == 4 && !memcmp(b, "\x53\x80\xf6\x34", 4);
    rewind(f);
    return yes;
}

/* A PIC as RGB [h, w, 3], stb_image-allocated. Debian's stb_image 2.27 goes on when a
 * PIC's pixel data fails to decode (cut short, a bad packet type): it frees its RGBA
 * buffer, then converts the null pointer left to the channels asked for, and the
 * conversion reads through it (a segfault on a 110-byte file; stb issue #1452,
 * CVE-2023-43898). Asked for RGBA, its own layout, stb returns the buffer unconverted,
 * so the null pointer comes back as a failure; the alpha is dropped here, in place.
 * NULL on error (stbi_failure_reason says why). */
static uint8_t *load_pic(FILE *f, int *w, int *h) {
    int comp;
    uint8_t *px = stbi_load_from_callbacks(&stb_io, f, w, h, &comp, 4);
    size_t n = px ? (size_t)*w * (size_t)*h : 0;
    for (size_t i = 0; i < n; i++) /* pixel i moves from 4i to 3i: never over one unread */
        px[3 * i] = px[4 * i], px[3 * i + 1] = px[4 * i + 1], px[3 * i + 2] = px[4 * i + 2];
    return px;
}

/* A PNG's chunks walked by their lengths, as stb_image walks them, for two bugs of
 * Debian's stb_image 2.27 (tests/fuzz found both). It appends each IDAT chunk to a
 * buffer it allocates at the first chunk with data:
 *  - a zero-length IDAT before that one adds its offset to a null pointer
 *    (stb_image.h:5130, undefined behaviour). Such chunks are legal and carry nothing:
 *    empty_first tells load_stb to drop them.
 *  - it grows the buffer to a chunk's declared length before reading it, 1 GB for a
 *    75-byte file. An IDAT longer than the rest of the file is cut or corrupt, and stb
 *    refuses it once the read comes short: cut_at tells load_stb to refuse it first.
 * Walks nothing unless f is a PNG whose first chunk is IHDR (stb refuses any other);
 * gives f's size whatever it holds. Leaves f rewound. */
typedef struct {
    int empty_first;  /* a zero-length IDAT comes before the first IDAT with data */
    long cut_at;      /* the offset of an IDAT longer than the rest of the file, or -1 */
    uint32_t cut_len; /* its declared length, bytes */
    long cut_left;    /* the bytes after its 8-byte header */
    long file_bytes;  /* the size of f, any file */
} PngChunks;

static PngChunks png_chunks(FILE *f) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t b[8];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1, at = 8;
    PngChunks c = {0, -1, 0, 0, size > 0 ? size : 0};
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, 8, f) == 8 && !memcmp(b, sig, 8)) {
        for (int first = 1, data = 0; fread(b, 1, 8, f) == 8; first = 0) {
            uint32_t len = be32(b);
            if ((first && memcmp(b + 4, "IHDR", 4) != 0) || !memcmp(b + 4, "IEND", 4)) break;
            if (!memcmp(b + 4, "IDAT", 4)) {
                c.empty_first |= !data && len == 0;
                data |= len > 0;
                if (len > size - at - 8) {
                    c.cut_at = at, c.cut_len = len, c.cut_left = size - at - 8;
                    break;
                }
            }
            at += 12 + (long)len; /* length, type, data, CRC */
            if (fseek(f, at, SEEK_SET) != 0) break;
        }
    }
    rewind(f);
    return c;
}

/* f's PNG without its zero-length IDAT chunks, into a malloc'd *buf of *n bytes: every
 * other byte as it is, a cut last chunk too. Leaves f rewound. */
static VitStatus png_drop_empty_idat(uint8_t **buf, size_t *n, FILE *f, const char *path,
                                     VitError *err) {
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    rewind(f);
    if (size < 0)
        return vit_set_error(err, VIT_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    if ((uint64_t)size > MAX_FILE_BYTES)
        return vit_set_error(
            err, VIT_ERR_IMAGE,
            "%s: file is %ld bytes, over the %llu that any image vitlens reads needs", path, size,
            (unsigned long long)MAX_FILE_BYTES);
    uint8_t *p = malloc((size_t)size + 1); /* + 1: never malloc(0) */
    if (!p) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory reading the file", path);
    size_t end = fread(p, 1, (size_t)size, f), i = 8, o = 8;
    rewind(f);
    if (end != (size_t)size || end < 8) { /* changed since the signature was read */
        free(p);
        return vit_set_error(err, VIT_ERR_IO, "%s: read error", path);
    }
    while (end - i >= 8) {
        size_t next = end - i - 8 >= (uint64_t)be32(p + i) + 4 ? i + 12 + be32(p + i) : end;
        if (be32(p + i) != 0 || memcmp(p + i + 4, "IDAT", 4) != 0) {
            memmove(p + o, p + i, next - i);
            o += next - i;
        }
        i = next;
    }
    memmove(p + o, p + i, end - i);
    *buf = p, *n = o + (end - i);
    return VIT_OK;
}

/* The formats stb_image reads, by their first bytes, for VitImage.format. */
static const char *stb_format(const uint8_t *b, size_t n) {
    if (n >= 4 && !memcmp(b, "\x89PNG", 4)) return "PNG";
    if (n >= 2 && !memcmp(b, "BM", 2)) return "BMP";
    if (n >= 4 && !memcmp(b, "GIF8", 4)) return "GIF";
    if (n >= 4 && !memcmp(b, "8BPS", 4)) return "PSD";
    if (n >= 2 && !memcmp(b, "#?", 2)) return "HDR";
    if (n >= 4 && !memcmp(b, "\x53\x80\xf6\x34", 4)) return "PIC";
    if (n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return "PNM";
    return "TGA"; /* the one format without a signature */
}

/* What stb_image reads of f before it decodes: the PNM header's numbers, and the
 * declared size against the limit (nothing is decoded or allocated for an image over it):
 * *w, *h px and *comp channels. */
static VitStatus stb_check(int *w, int *h, int *comp, FILE *f, const char *path,
                           uint64_t max_pixels, VitError *err) {
    PnmHeader pnm;
    int is_pnm_file = pnm_header(f, &pnm);
    if (is_pnm_file && pnm.over)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: corrupt PNM: a number in its header is over %d", path, INT_MAX);
    rewind(f);
    if (!stbi_info_from_file(f, w, h, comp)) {
        uint32_t pw, ph;
        if (png_declared_size(f, &pw, &ph) && (uint64_t)pw * ph > max_pixels)
            return vit_set_error(err, VIT_ERR_IMAGE,
                                 "%s: image is %ux%u px, more than the limit of %llu pixels", path,
                                 pw, ph, (unsigned long long)max_pixels);
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: not an image vitlens can read (%s)", path,
                             stbi_failure_reason());
    }
    if (*w < 1 || *h < 1)
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: image is %dx%d px: empty", path, *w, *h);
    if ((uint64_t)*w * (uint64_t)*h > max_pixels)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: image is %dx%d px, more than the limit of %llu pixels", path, *w,
                             *h, (unsigned long long)max_pixels);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    rewind(f);
    uint64_t need =
        (uint64_t)*w * (uint64_t)*h * (uint64_t)pnm.channels * (pnm.num[2] > 255 ? 2 : 1);
    if (is_pnm_file && (size < pnm.data || need > (uint64_t)(size - pnm.data)))
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode image, truncated or corrupt (the PNM's %dx%d "
                             "pixels need %llu bytes, %ld are left in the file)",
                             path, *w, *h, (unsigned long long)need,
                             size < pnm.data ? 0L : size - pnm.data);
    return VIT_OK;
}

/* stb_image's decoding of f (file_bytes long), a w x h px image of comp channels checked
 * by stb_check, as RGB. The buffers stb grows (stb_realloc) get twice what the image
 * needs at 16 bits (a PNG's inflated rows with their filter bytes; interlaced ones are a
 * little longer), twice the file (its IDAT chunks) and 1 MiB. */
static VitStatus stb_decode(Decoded *out, FILE *f, long file_bytes, int w, int h, int comp,
                            const char *path, VitError *err) {
    size_t rows = (size_t)w * (size_t)h * (size_t)comp * 2 + (size_t)h;
    stb_realloc_limit = 2 * rows + 2 * (size_t)file_bytes + (1u << 20);
    stb_realloc_refused = 0;
    uint8_t *rgb;
    int ow, oh, ocomp;
    if (is_pnm(f) && stbi_is_16_bit_from_file(f))
        rgb = load_pnm16(f, &ow, &oh);
    else if (is_pic(f))
        rgb = load_pic(f, &ow, &oh);
    else /* req_comp 3: grey is replicated and alpha dropped, as PIL's convert('RGB'). */
        rgb = stbi_load_from_callbacks(&stb_io, f, &ow, &oh, &ocomp, 3);
    size_t limit = stb_realloc_limit;
    stb_realloc_limit = SIZE_MAX;
    if (!rgb && stb_realloc_refused)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode image: its compressed data inflates to over %zu "
                             "bytes, far more than a %dx%d image needs",
                             path, limit, w, h);
    if (!rgb)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode image, truncated or corrupt (%s)", path,
                             stbi_failure_reason());
    out->rgb = rgb, out->w = ow, out->h = oh, out->orientation = 1;
    return VIT_OK;
}

/* stb_image on the open file f: the checks, a PNG's chunks (png_chunks: a cut IDAT
 * refused, and read from a copy without zero-length IDATs when its first is one), and
 * decoding. */
static VitStatus load_stb(Decoded *out, FILE *f, const char *path, uint64_t max_pixels,
                          VitError *err) {
    int w, h, comp;
    VitStatus rc = stb_check(&w, &h, &comp, f, path, max_pixels, err);
    if (rc) return rc;
    PngChunks c = png_chunks(f);
    if (c.cut_at >= 0)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: cannot decode image, truncated or corrupt (the PNG's IDAT chunk "
                             "at byte %ld declares %u bytes, %ld are left in the file)",
                             path, c.cut_at, c.cut_len, c.cut_left);
    if (!c.empty_first) return stb_decode(out, f, c.file_bytes, w, h, comp, path, err);
    uint8_t *buf = NULL;
    size_t n = 0;
    if ((rc = png_drop_empty_idat(&buf, &n, f, path, err))) return rc;
    FILE *m = fmemopen(buf, n, "rb");
    rc = m ? stb_decode(out, m, (long)n, w, h, comp, path, err)
           : vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory: %s", path, strerror(errno));
    if (m) fclose(m);
    free(buf);
    return rc;
}

/* --- EXIF orientation ----------------------------------------------------------- */

/* in [h, w, 3] turned as EXIF orientation o (2..8) says, into a new buffer [h', w', 3]
 * (w' = h, h' = w for 5..8), as Pillow's ImageOps.exif_transpose: 2 FLIP_LEFT_RIGHT,
 * 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270 (90 degrees clockwise),
 * 7 TRANSVERSE, 8 ROTATE_90. Output pixel (x, y) is input pixel base + x ax + y ay
 * (byte offsets). NULL when out of memory. */
static uint8_t *orient(const uint8_t *in, int w, int h, int o) {
    ptrdiff_t P = 3, S = (ptrdiff_t)w * 3, right = (w - 1) * P, bottom = (h - 1) * S;
    ptrdiff_t base, ax, ay;
    switch (o) {
    case 2: base = right, ax = -P, ay = S; break;
    case 3: base = bottom + right, ax = -P, ay = -S; break;
    case 4: base = bottom, ax = P, ay = -S; break;
    case 5: base = 0, ax = S, ay = P; break;
    case 6: base = bottom, ax = -S, ay = P; break;
    case 7: base = bottom + right, ax = -S, ay = -P; break;
    default: base = right, ax = S, ay = -P; break; /* 8 */
    }
    int ow = o >= 5 ? h : w, oh = o >= 5 ? w : h;
    uint8_t *out = malloc((size_t)w * (size_t)h * 3), *d = out;
    for (int y = 0; out && y < oh; y++) {
        const uint8_t *s = in + base + y * ay;
        for (int x = 0; x < ow; x++, s += ax, d += 3) d[0] = s[0], d[1] = s[1], d[2] = s[2];
    }
    return out;
}

/* --- entry points ----------------------------------------------------------------- */

typedef enum { FMT_STB, FMT_JPEG, FMT_WEBP, FMT_TIFF, FMT_HEIF } Format;

static Format sniff(const uint8_t *b, size_t n) {
    if (n >= 2 && b[0] == 0xff && b[1] == 0xd8) return FMT_JPEG;
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return FMT_WEBP;
    if (n >= 4 && ((b[0] == 'I' && b[1] == 'I' && (b[2] == 42 || b[2] == 43) && b[3] == 0) ||
                   (b[0] == 'M' && b[1] == 'M' && b[2] == 0 && (b[3] == 42 || b[3] == 43))))
        return FMT_TIFF; /* classic TIFF and BigTIFF */
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4)) return FMT_HEIF;
    return FMT_STB;
}

/* The whole of f (size bytes when a regular file, else read to its end) into *data. */
static VitStatus read_all(uint8_t **data, size_t *n, FILE *f, const struct stat *sb,
                          const char *path, VitError *err) {
    if (S_ISREG(sb->st_mode) && (uint64_t)sb->st_size > MAX_FILE_BYTES)
        return vit_set_error(err, VIT_ERR_IMAGE,
                             "%s: file is %llu bytes, over the %llu that any image vitlens reads "
                             "needs",
                             path, (unsigned long long)sb->st_size,
                             (unsigned long long)MAX_FILE_BYTES);
    size_t cap = S_ISREG(sb->st_mode) ? (size_t)sb->st_size + 1 : 1 << 16, k = 0;
    uint8_t *p = NULL;
    for (;;) {
        if (k == cap || !p) {
            if (p) cap *= 2;
            if (cap > MAX_FILE_BYTES + 1) cap = MAX_FILE_BYTES + 1;
            uint8_t *q = realloc(p, cap);
            if (!q) {
                free(p);
                return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory reading the file",
                                     path);
            }
            p = q;
        }
        size_t got = fread(p + k, 1, cap - k, f);
        k += got;
        if (k > MAX_FILE_BYTES) {
            free(p);
            return vit_set_error(err, VIT_ERR_IMAGE,
                                 "%s: file is over the %llu bytes that any image vitlens reads "
                                 "needs",
                                 path, (unsigned long long)MAX_FILE_BYTES);
        }
        if (got == 0 || (k < cap && feof(f))) break;
    }
    if (ferror(f)) {
        free(p);
        return vit_set_error(err, VIT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    }
    *data = p, *n = k;
    return VIT_OK;
}

VitStatus vit_image_load(VitImage *img, const char *path, VitError *err) {
    return vit_image_load_max(img, path, NULL, VIT_MAX_IMAGE_PIXELS, err);
}

VitStatus vit_image_load_with(VitImage *img, const char *path, const VitImageOptions *opt,
                              VitError *err) {
    return vit_image_load_max(img, path, opt, VIT_MAX_IMAGE_PIXELS, err);
}

VitStatus vit_image_load_max(VitImage *img, const char *path, const VitImageOptions *opt,
                             uint64_t max_pixels, VitError *err) {
    memset(img, 0, sizeof *img);
    int ignore = opt && opt->ignore_orientation;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return vit_set_error(err, VIT_ERR_IO, "%s: is a directory, not an image", path);
    FILE *f = fopen(path, "rb");
    if (!f) return vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t head[16];
    size_t n_head = fread(head, 1, sizeof head, f);
    if (n_head == 0) {
        fclose(f);
        return vit_set_error(err, VIT_ERR_IMAGE, "%s: file is empty (0 bytes), not an image", path);
    }
    Format fmt = sniff(head, n_head);
    Decoded d = {0};
    VitStatus rc;
    if (fmt == FMT_STB) {
        rc = load_stb(&d, f, path, max_pixels, err);
        fclose(f);
        img->format = stb_format(head, n_head);
    } else {
        uint8_t *data = NULL;
        size_t n = 0;
        rewind(f);
        rc = read_all(&data, &n, f, &sb, path, err);
        fclose(f);
        if (rc) return rc;
        switch (fmt) {
        case FMT_JPEG: rc = vit_decode_jpeg(&d, path, data, n, max_pixels, err); break;
        case FMT_WEBP: rc = vit_decode_webp(&d, path, data, n, max_pixels, err); break;
        case FMT_TIFF: rc = vit_decode_tiff(&d, path, data, n, max_pixels, err); break;
        default: rc = vit_decode_heif(&d, path, data, n, max_pixels, ignore, err); break;
        }
        img->format = fmt == FMT_JPEG                          ? "JPEG"
                      : fmt == FMT_WEBP                        ? "WebP"
                      : fmt == FMT_TIFF                        ? "TIFF"
                      : n >= 12 && !memcmp(data + 8, "avi", 3) ? "AVIF"
                                                               : "HEIF";
        free(data);
    }
    if (rc) {
        memset(img, 0, sizeof *img);
        return rc;
    }
    img->orientation = d.orientation >= 1 && d.orientation <= 8 ? d.orientation : 1;
    if (!ignore && !d.heif_oriented && img->orientation != 1) {
        uint8_t *turned = orient(d.rgb, d.w, d.h, img->orientation);
        free(d.rgb);
        if (!turned) {
            memset(img, 0, sizeof *img);
            return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory turning a %dx%d image",
                                 path, d.w, d.h);
        }
        d.rgb = turned;
        if (img->orientation >= 5) {
            int t = d.w;
            d.w = d.h, d.h = t;
        }
    }
    img->w = d.w, img->h = d.h, img->rgb = d.rgb;
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
    img->rgb = malloc(n);
    if (!img->rgb)
        return vit_set_error(err, VIT_ERR_NOMEM, "out of memory for a %dx%d image", w, h);
    memcpy(img->rgb, rgb, n);
    img->w = w;
    img->h = h;
    img->orientation = 1;
    img->format = "RGB";
    return VIT_OK;
}

/* Every decoder allocates with malloc (stb_image's STBI_MALLOC is malloc). */
void vit_image_free(VitImage *img) {
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
