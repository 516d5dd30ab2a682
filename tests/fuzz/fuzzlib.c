/* fuzzlib.c - see fuzzlib.h. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzzlib.h"
#include "internal.h" /* vit_run_floats */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void memfile_init(MemFile *f, const char *name) {
    f->fd = memfd_create(name, 0);
    if (f->fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void memfile_set(MemFile *f, const uint8_t *data, size_t n) {
    if (ftruncate(f->fd, 0) != 0) {
        perror("ftruncate");
        abort();
    }
    for (size_t at = 0; at < n;) {
        ssize_t k = pwrite(f->fd, data + at, n - at, (off_t)at);
        if (k <= 0) {
            perror("pwrite");
            abort();
        }
        at += (size_t)k;
    }
}

void fuzz_check_error(VitStatus rc, const VitError *err, const char *what) {
    if (rc == VIT_OK) return;
    if (err->code != rc || memchr(err->msg, 0, sizeof err->msg) == NULL || err->msg[0] == 0) {
        fprintf(stderr, "%s: status %d but err.code %d, message \"%.*s\"\n", what, rc, err->code,
                (int)sizeof err->msg, err->msg);
        abort();
    }
}

/* Forward passes above this many floats of activations are skipped: they cost
 * time, not coverage (the limits themselves are vit_load's and are reached). */
#define FUZZ_MAX_RUN_FLOATS (1u << 20)

static void fail(const char *what) {
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

static void check_config(const VitConfig *c) {
    if (c->n_tokens != c->n_prefix + c->n_patches || c->n_patches != c->grid_h * c->grid_w ||
        c->dim != c->n_heads * c->head_dim || c->image_h != c->grid_h * c->patch_size ||
        c->image_w != c->grid_w * c->patch_size || c->n_layers < 1 ||
        c->n_layers > VIT_MAX_LAYERS || c->dim < 1 || c->mlp_dim < 1 || c->n_classes < 0 ||
        c->n_classes > VIT_MAX_CLASSES || c->n_tokens > VIT_MAX_TOKENS)
        fail("vit_load accepted a model whose config does not add up");
}

/* A small picture for vit_preprocess: a colour gradient, 40 x 30 px. */
static void test_image(VitImage *img) {
    static uint8_t rgb[30][40][3];
    for (int y = 0; y < 30; y++)
        for (int x = 0; x < 40; x++) {
            rgb[y][x][0] = (uint8_t)(x * 6);
            rgb[y][x][1] = (uint8_t)(y * 8);
            rgb[y][x][2] = (uint8_t)(x * y);
        }
    VitError err;
    if (vit_image_from_rgb(img, &rgb[0][0][0], 40, 30, &err)) fail(err.msg);
}

static void run_maps(const Vit *vit) {
    const VitConfig *c = &vit->cfg;
    size_t n_floats;
    if (!vit_run_floats(c, vit_keep_att(c, VIT_ATT_AUTO), 1, &n_floats) ||
        n_floats > FUZZ_MAX_RUN_FLOATS)
        return;
    VitRun run = {0};
    VitImage img = {0};
    VitError err;
    VitRunOptions one_thread = {.n_threads = 1}; /* no pool to start per input */
    VitStatus rc = vit_run_init_with(&run, vit, &one_thread, &err);
    fuzz_check_error(rc, &err, "vit_run_init");
    if (rc) return;
    test_image(&img);
    rc = vit_preprocess(run.input, &run.crop_x, &run.crop_y, &run.crop_w, &run.crop_h, c, &img,
                        &err);
    fuzz_check_error(rc, &err, "vit_preprocess");
    vit_forward(&run, vit);
    float *map = malloc((size_t)c->n_patches * sizeof *map);
    if (!map) fail("out of memory");
    int L = c->n_layers - 1, H = c->n_heads - 1, q = c->n_tokens - 1;
    if (vit_map_attention(map, &run, L, H, q, &err) ||
        vit_map_fused(map, &run, 0, VIT_FUSE_MAX, 0, &err) ||
        vit_rollout(map, &run, L, -1, VIT_FUSE_MEAN, 0.5f, 0, &err) ||
        vit_rollout(map, &run, L, H, VIT_FUSE_MIN, 0.0f, q, &err))
        fail(err.msg);
    /* out of range: refused, not read */
    if (vit_map_attention(map, &run, L + 1, 0, 0, &err) != VIT_ERR_ARG ||
        vit_rollout(map, &run, 0, 0, VIT_FUSE_MEAN, 0.0f, q + 1, &err) != VIT_ERR_ARG)
        fail("an out-of-range layer or query was not refused");
    if (c->n_classes) {
        int top[3];
        vit_top_k(top, run.probs, c->n_classes, c->n_classes < 3 ? c->n_classes : 3);
    }
    free(map);
    vit_image_free(&img);
    vit_run_free(&run);
}

void fuzz_model_input(MemFile *f, const char *name, const uint8_t *data, size_t size) {
    if (!f->path[0]) memfile_init(f, name);
    memfile_set(f, data, size);
    VitLoadOptions opt = {.n_heads = 2};
    fuzz_model_load(f->path, &opt);
}

void fuzz_model_load(const char *path, const VitLoadOptions *opt) {
    Vit vit;
    VitError err;
    memset(&err, 'x', sizeof err); /* a refusal must write its own code and message */
    VitStatus rc = vit_load(&vit, path, opt, &err);
    fuzz_check_error(rc, &err, "vit_load");
    if (rc) {
        static const Vit zero;
        if (memcmp(&vit, &zero, sizeof vit) != 0) fail("vit_load failed but left *vit not zeroed");
        return;
    }
    check_config(&vit.cfg);
    run_maps(&vit);
    vit_free(&vit);
}

/* --- choices and output ------------------------------------------------------ */

unsigned pick(Choices *c, unsigned n) {
    unsigned v = 0;
    for (int k = 0; k < (n > 256 ? 2 : 1); k++) v = (v << 8) | (c->at < c->n ? c->p[c->at++] : 0);
    return n > 1 ? v % n : 0;
}

/* Room for k more bytes (the caller checked max). */
static void out_grow(Out *o, size_t k) {
    if (o->n + k <= o->cap) return;
    size_t nc = o->cap ? o->cap : 4096;
    while (nc < o->n + k) nc *= 2;
    uint8_t *np = realloc(o->p, nc);
    if (!np) fail("out of memory");
    o->p = np, o->cap = nc;
}

void out_put(Out *o, const void *b, size_t k) {
    if (o->over || k > o->max - o->n) {
        o->over = 1;
        return;
    }
    out_grow(o, k);
    memcpy(o->p + o->n, b, k);
    o->n += k;
}

void out_repeat(Out *o, size_t from, size_t times) {
    size_t unit = o->n - from;
    if (o->over || !unit || !times) return;
    if (times > (o->max - o->n) / unit) {
        o->over = 1;
        return;
    }
    size_t want = o->n + unit * times;
    out_grow(o, want - o->n);
    while (o->n < want) { /* [from, n) holds whole units: copy as many as fit, doubling */
        size_t k = o->n - from < want - o->n ? o->n - from : want - o->n;
        memcpy(o->p + o->n, o->p + from, k);
        o->n += k;
    }
}

void out_str(Out *o, const char *s) {
    out_put(o, s, strlen(s));
}

void out_printf(Out *o, const char *fmt, ...) {
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (k > 0) out_put(o, b, (size_t)k < sizeof b ? (size_t)k : sizeof b - 1);
}

void fuzz_dump(const uint8_t *b, size_t n) {
    const char *path = getenv("VITLENS_FUZZ_DUMP");
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}
