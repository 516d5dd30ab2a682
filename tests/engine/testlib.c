/* testlib.c - checks, file helpers and the tiny-ViT .safetensors writer shared
 * by the engine's C tests (see testlib.h). */
#include "testlib.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- checks ---------------------------------------------------------------- */

static int n_checks, n_failed;

int check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    n_checks++;
    if (!ok) n_failed++;
    printf("%s - ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return ok;
}

int check_err(VitStatus rc, const VitError *err, VitStatus want, const char *file,
              const char *const *keys, const char *what) {
    char why[256] = "";
    if (rc != want)
        snprintf(why, sizeof why, "status %s, expected %s", vit_status_name(rc),
                 vit_status_name(want));
    else if (want != VIT_OK && err->code != want) /* on success err is left as it was */
        snprintf(why, sizeof why, "err.code %s, expected %s", vit_status_name(err->code),
                 vit_status_name(want));
    else if (file && !strstr(err->msg, file))
        snprintf(why, sizeof why, "message does not name the file '%s'", file);
    for (int i = 0; !why[0] && keys && keys[i]; i++)
        if (!strstr(err->msg, keys[i])) snprintf(why, sizeof why, "message lacks \"%s\"", keys[i]);
    if (why[0]) return check(0, "%s: %s; message: \"%s\"", what, why, rc == VIT_OK ? "" : err->msg);
    return check(1, "%s -> %s: %s", what, vit_status_name(rc), rc == VIT_OK ? "" : err->msg);
}

int t_finish(const char *test_name) {
    printf("%s: %d checks, %d failed\n", test_name, n_checks, n_failed);
    return n_failed || !n_checks ? 1 : 0;
}

/* --- files ----------------------------------------------------------------- */

void path_join(char *out, size_t n, const char *dir, const char *file) {
    if ((size_t)snprintf(out, n, "%s/%s", dir, file) >= n) {
        fprintf(stderr, "path too long: %s/%s\n", dir, file);
        exit(2);
    }
}

int make_dir(const char *path) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int write_bytes(const char *path, const void *p, size_t n) {
    /* A new file rather than a truncated one: ext4 flushes a file rewritten
     * after truncation to 0 on close, which makes thousands of rewrites slow. */
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = n && fwrite(p, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (!k) break;
    }
    fclose(f);
    *n = len;
    return buf;
}

/* --- growable text --------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} Text;

static void text_printf(Text *t, const char *fmt, ...) T_PRINTF(2, 3);
static void text_printf(Text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) exit(2);
        if (t->p && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + (size_t)k + 1) cap *= 2;
        char *np = realloc(t->p, cap);
        if (!np) exit(2);
        t->p = np;
        t->cap = cap;
    }
}

/* --- tiny ViT writer ------------------------------------------------------- */

TSpec *model_add(Model *m, const char *name, const char *dtype, int ndim, const int64_t *shape) {
    if (m->n == T_MAX_TENSORS || ndim > 8) {
        fprintf(stderr, "model_add: too many tensors or dims\n");
        exit(2);
    }
    TSpec *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    return t;
}

static void add1(Model *m, const char *name, int64_t a) {
    model_add(m, name, "F32", 1, (int64_t[]){a});
}
static void add2(Model *m, const char *name, int64_t a, int64_t b) {
    model_add(m, name, "F32", 2, (int64_t[]){a, b});
}

void model_tiny(Model *m, int D, int L, int P, int grid, int F, int C) {
    memset(m, 0, sizeof *m);
    char name[64];
    model_add(m, "cls_token", "F32", 3, (int64_t[]){1, 1, D});
    model_add(m, "pos_embed", "F32", 3, (int64_t[]){1, 1 + grid * grid, D});
    model_add(m, "patch_embed.proj.weight", "F32", 4, (int64_t[]){D, 3, P, P});
    add1(m, "patch_embed.proj.bias", D);
    for (int l = 0; l < L; l++) {
#define B(suffix) (snprintf(name, sizeof name, "blocks.%d.%s", l, suffix), name)
        add1(m, B("norm1.weight"), D);
        add1(m, B("norm1.bias"), D);
        add2(m, B("attn.qkv.weight"), 3 * D, D);
        add1(m, B("attn.qkv.bias"), 3 * D);
        add2(m, B("attn.proj.weight"), D, D);
        add1(m, B("attn.proj.bias"), D);
        add1(m, B("norm2.weight"), D);
        add1(m, B("norm2.bias"), D);
        add2(m, B("mlp.fc1.weight"), F, D);
        add1(m, B("mlp.fc1.bias"), F);
        add2(m, B("mlp.fc2.weight"), D, F);
        add1(m, B("mlp.fc2.bias"), D);
#undef B
    }
    add1(m, "norm.weight", D);
    add1(m, "norm.bias", D);
    if (C) {
        add2(m, "head.weight", C, D);
        add1(m, "head.bias", C);
    }
}

TSpec *model_find(Model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->t[i].name, name) == 0) return &m->t[i];
    return NULL;
}

int model_remove(Model *m, const char *prefix) {
    int k = 0, removed = 0;
    for (int i = 0; i < m->n; i++) {
        if (strncmp(m->t[i].name, prefix, strlen(prefix)) == 0)
            removed++;
        else
            m->t[k++] = m->t[i];
    }
    m->n = k;
    return removed;
}

void model_set_dtype(Model *m, const char *dtype) {
    for (int i = 0; i < m->n; i++) snprintf(m->t[i].dtype, sizeof m->t[i].dtype, "%s", dtype);
}

static int dtype_bytes(const char *dt) {
    static const struct {
        const char *name;
        int bytes;
    } tab[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8},
               {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(dt, tab[i].name) == 0) return tab[i].bytes;
    return 4; /* unknown dtypes: the loader must reject them before sizes matter */
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

float model_value(const char *name, const char *dtype, size_t i) {
    static const float f16_edges[5] = {0x1p-24f, -0x1p-14f, 1023 * 0x1p-24f, 65504.0f, -1.5f};
    static const float bf16_edges[5] = {0x1p-126f, -0x1p100f, 0x1.fep127f, 0x1p-133f, -0.5f};
    if (strcmp(name, "cls_token") == 0 && i < 5) {
        if (strcmp(dtype, "F16") == 0) return f16_edges[i];
        if (strcmp(dtype, "BF16") == 0) return bf16_edges[i];
    }
    return (float)((int)((fnv1a(name) + (uint64_t)i * 7u) % 97u) - 48) / 64.0f;
}

/* IEEE binary16 bits of f; the writer only stores values that are exact. */
static uint16_t f16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    float a = fabsf(f), mant;
    uint16_t bits;
    if (a == 0.0f) return sign;
    if (a < 0x1p-14f) { /* subnormal: a = m * 2^-24 */
        mant = a / 0x1p-24f;
        bits = (uint16_t)mant;
    } else {
        int e;
        float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
        mant = (fr * 2.0f - 1.0f) * 1024.0f;
        if (e - 1 > 15) mant = 0.5f; /* out of range: flagged below */
        bits = (uint16_t)(((e - 1 + 15) << 10) | (int)mant);
    }
    if (mant != floorf(mant)) {
        fprintf(stderr, "testlib: %g is not exact in F16\n", (double)f);
        exit(2);
    }
    return sign | bits;
}

static uint16_t bf16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if (x & 0xffffu) {
        fprintf(stderr, "testlib: %g is not exact in BF16\n", (double)f);
        exit(2);
    }
    return (uint16_t)(x >> 16);
}

static size_t n_elems(const TSpec *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

uint8_t *model_bytes(const Model *m, size_t *n_out) {
    Text h = {0};
    size_t off = 0;
    text_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int k = 0; k < m->n; k++) {
        const TSpec *t = &m->t[k];
        size_t nb = n_elems(t) * (size_t)dtype_bytes(t->dtype);
        text_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (int i = 0; i < t->ndim; i++)
            text_printf(&h, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        text_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    text_printf(&h, "}");
    while (h.n % 8) text_printf(&h, " ");
    for (int i = 0; i < m->extra_pad; i++) text_printf(&h, " ");

    size_t total = 8 + h.n + off;
    uint8_t *buf = calloc(total ? total : 1, 1);
    if (!buf) exit(2);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    memcpy(buf + 8, h.p, h.n);
    uint8_t *d = buf + 8 + h.n;
    for (int k = 0; k < m->n; k++) {
        const TSpec *t = &m->t[k];
        size_t ne = n_elems(t);
        int eb = dtype_bytes(t->dtype);
        for (size_t i = 0; i < ne; i++, d += eb) {
            float v = model_value(t->name, t->dtype, i);
            if (strcmp(t->dtype, "F32") == 0) {
                memcpy(d, &v, 4); /* little-endian host */
            } else if (strcmp(t->dtype, "F16") == 0 || strcmp(t->dtype, "BF16") == 0) {
                uint16_t b = t->dtype[0] == 'F' ? f16_bits(v) : bf16_bits(v);
                d[0] = (uint8_t)b;
                d[1] = (uint8_t)(b >> 8);
            } /* other dtypes: zero bytes */
        }
    }
    free(h.p);
    *n_out = total;
    return buf;
}

int model_write(const Model *m, const char *path) {
    size_t n;
    uint8_t *b = model_bytes(m, &n);
    int rc = write_bytes(path, b, n);
    free(b);
    return rc;
}

uint8_t *model_data(const Model *m, uint8_t *b, const char *name) {
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = (h << 8) | b[i];
    size_t off = 8 + (size_t)h; /* tensors follow the header in m's order */
    for (int k = 0; k < m->n; k++) {
        if (strcmp(m->t[k].name, name) == 0) return b + off;
        off += n_elems(&m->t[k]) * (size_t)dtype_bytes(m->t[k].dtype);
    }
    return NULL;
}

int write_st(const char *path, const char *json, size_t data_bytes) {
    size_t nj = strlen(json), total = 8 + nj + data_bytes;
    uint8_t *buf = calloc(total, 1);
    if (!buf) return -1;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)nj >> (8 * i));
    memcpy(buf + 8, json, nj);
    int rc = write_bytes(path, buf, total);
    free(buf);
    return rc;
}

/* --- PNG bytes by hand --------------------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* Append a PNG chunk: length, type, data, CRC of type + data. */
static size_t png_chunk(uint8_t *out, const char *type, const uint8_t *data, uint32_t n) {
    put_be32(out, n);
    memcpy(out + 4, type, 4);
    if (n) memcpy(out + 8, data, n);
    put_be32(out + 8 + n, crc32_of(out + 4, 4 + (size_t)n));
    return 12 + (size_t)n;
}

uint8_t *test_png(size_t *n, uint32_t w, uint32_t h, int depth, int color, const uint8_t *samples) {
    static const int channels[7] = {1, 0, 3, 0, 2, 0, 4};
    size_t row = (size_t)w * (size_t)channels[color] * (size_t)depth / 8;
    size_t raw_n = samples ? (row + 1) * h : 0; /* each row: filter byte 0, samples */
    size_t z_n = 2 + (raw_n / 65535 + 1) * 5 + raw_n + 4;
    uint8_t *raw = malloc(raw_n + 1), *z = malloc(z_n), *out = malloc(64 + z_n);
    for (uint32_t y = 0; samples && y < h; y++) {
        raw[y * (row + 1)] = 0;
        memcpy(raw + y * (row + 1) + 1, samples + y * row, row);
    }
    size_t k = 0;
    z[k++] = 0x78, z[k++] = 0x01; /* zlib: deflate, 32K window, no dictionary */
    for (size_t at = 0; at < raw_n || at == 0; at += 65535) {
        size_t len = raw_n - at < 65535 ? raw_n - at : 65535;
        z[k++] = at + len >= raw_n; /* BFINAL, BTYPE 00: stored */
        z[k++] = (uint8_t)len, z[k++] = (uint8_t)(len >> 8);
        z[k++] = (uint8_t)~len, z[k++] = (uint8_t)(~len >> 8);
        memcpy(z + k, raw + at, len);
        k += len;
        if (!raw_n) break;
    }
    uint32_t a = 1, b = 0; /* Adler-32 of the raw rows */
    for (size_t i = 0; i < raw_n; i++) a = (a + raw[i]) % 65521u, b = (b + a) % 65521u;
    put_be32(z + k, b << 16 | a);
    k += 4;

    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13];
    put_be32(ihdr, w);
    put_be32(ihdr + 4, h);
    ihdr[8] = (uint8_t)depth, ihdr[9] = (uint8_t)color, ihdr[10] = ihdr[11] = ihdr[12] = 0;
    size_t m = 0;
    memcpy(out, sig, 8);
    m = 8;
    m += png_chunk(out + m, "IHDR", ihdr, 13);
    if (samples) m += png_chunk(out + m, "IDAT", z, (uint32_t)k);
    m += png_chunk(out + m, "IEND", NULL, 0);
    free(raw);
    free(z);
    *n = m;
    return out;
}

/* Deflate's bits, least significant first; Huffman codes go most significant bit first. */
typedef struct {
    uint8_t *p;
    size_t n_bits;
} Bits;

static void put_bits(Bits *b, uint32_t v, int n) {
    for (int i = 0; i < n; i++, b->n_bits++) {
        if (!(b->n_bits & 7)) b->p[b->n_bits >> 3] = 0;
        b->p[b->n_bits >> 3] |= (uint8_t)(((v >> i) & 1u) << (b->n_bits & 7));
    }
}

static void put_code(Bits *b, uint32_t code, int len) {
    for (int i = len - 1; i >= 0; i--) put_bits(b, code >> i, 1);
}

uint8_t *test_png_inflating(size_t *n, size_t inflated) {
    size_t copies = (inflated - 1) / 258, literals = inflated - 1 - copies * 258;
    size_t z_cap = 2 + (3 + 8 * (1 + literals) + 13 * copies + 7) / 8 + 1 + 4;
    uint8_t *z = malloc(z_cap), *out = malloc(64 + z_cap);
    z[0] = 0x78, z[1] = 0x01;
    Bits b = {z + 2, 0};
    put_bits(&b, 1, 1); /* BFINAL */
    put_bits(&b, 1, 2); /* BTYPE 01: fixed Huffman codes */
    for (size_t i = 0; i < 1 + literals; i++) put_code(&b, 0x30, 8); /* literal 0 */
    for (size_t i = 0; i < copies; i++) {
        put_code(&b, 0xc5, 8); /* length code 285: 258 bytes */
        put_code(&b, 0, 5);    /* distance code 0: 1 byte back */
    }
    put_code(&b, 0, 7); /* end of block */
    size_t k = 2 + (b.n_bits + 7) / 8;
    put_be32(z + k, (uint32_t)(inflated % 65521u) << 16 | 1u); /* Adler-32 of zeros */
    k += 4;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0};
    memcpy(out, sig, 8);
    size_t m = 8;
    m += png_chunk(out + m, "IHDR", ihdr, 13);
    m += png_chunk(out + m, "IDAT", z, (uint32_t)k);
    m += png_chunk(out + m, "IEND", NULL, 0);
    free(z);
    *n = m;
    return out;
}

uint8_t *test_pic(size_t *n, uint16_t w, uint16_t h, const uint8_t *rgb, size_t keep) {
    size_t data = (size_t)w * h * 3 < keep ? (size_t)w * h * 3 : keep;
    uint8_t *out = calloc(1, 108 + data);
    memcpy(out, "\x53\x80\xf6\x34", 4); /* magic; then version and comment, zero */
    memcpy(out + 88, "PICT", 4);
    out[92] = (uint8_t)(w >> 8), out[93] = (uint8_t)w, out[94] = (uint8_t)(h >> 8);
    out[95] = (uint8_t)h;                             /* then ratio, fields and pad, zero */
    static const uint8_t packet[4] = {0, 8, 0, 0xe0}; /* last, 8 bits, uncompressed, RGB */
    memcpy(out + 104, packet, 4);
    memcpy(out + 108, rgb, data);
    *n = 108 + data;
    return out;
}
