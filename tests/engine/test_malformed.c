/* test_malformed.c - the catalogue of malformed inputs (docs/malformed-inputs.md).
 *
 * One case per file a user may hand vitlens by mistake or on purpose: weights,
 * config.json, labels, images, CLIP's vocabulary and text. Each case writes its input under
 * SCRATCH_DIR/<case>/, calls the engine's public API as the app does, and
 * checks the status and that the message names the file and says what is
 * wrong; or, for an input that should work, that it works and gives the right
 * pixels. CMake registers every case as its own test, malformed_<case>, from the
 * CASE lines of the table at the bottom.
 *
 * usage: test_malformed SCRATCH_DIR [CASE]   every case, or one (exit 77: skipped)
 *        test_malformed --markdown SCRATCH_DIR    the docs table's rows, from real runs
 *        test_malformed --doc DOC SCRATCH_DIR     every row is in DOC, as printed
 *        test_malformed --registered CASE...      CMake registered exactly the table */
#define _DEFAULT_SOURCE /* wait4: a child's CPU time and peak RSS (load_bounded) */
#include "encode.h"
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* --- a case and what it found ---------------------------------------------- */

typedef struct Ctx Ctx;

typedef struct {
    const char *name;  /* test malformed_<name>, scratch folder <name> */
    const char *input; /* what the user gave, for the table */
    const char *works; /* NULL: refused; else what "works" means, for the table */
    void (*run)(Ctx *c);
} Case;

struct Ctx {
    const Case *def;
    char dir[1024]; /* SCRATCH_DIR/<name> */
    int done, skipped;
    VitStatus rc;
    char msg[sizeof(((VitError *)0)->msg)]; /* the engine's message, "" when it worked */
};

static void in_dir(const Ctx *c, char *out, size_t n, const char *file) {
    path_join(out, n, c->dir, file);
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The engine refused `path` with status `want` and a message naming the file
 * and holding every key. */
static void expect_refused(Ctx *c, VitStatus rc, const VitError *err, VitStatus want,
                           const char *path, const char *const *keys) {
    check_err(rc, err, want, base_name(path), keys, c->def->input);
    c->done = 1;
    c->rc = rc;
    snprintf(c->msg, sizeof c->msg, "%s", rc == VIT_OK ? "" : err->msg);
}

/* The engine accepted it (rc == VIT_OK) and the result is right (ok). */
static void expect_works(Ctx *c, VitStatus rc, const VitError *err, int ok, const char *what) {
    if (check_err(rc, err, VIT_OK, NULL, NULL, c->def->input))
        check(ok, "%s: %s", c->def->input, what);
    c->done = 1;
    c->rc = rc;
    snprintf(c->msg, sizeof c->msg, "%s", rc == VIT_OK ? "" : err->msg);
}

/* Root reads files whatever their mode: a permission case cannot be made. */
static int skip_if_root(Ctx *c) {
    if (geteuid() != 0) return 0;
    printf("skipped - %s: running as root, who can read any file\n", c->def->input);
    c->skipped = 1;
    return 1;
}

/* --- inputs ---------------------------------------------------------------- */

/* The model every weights case starts from: width 64 (1 head), 2 blocks, patch
 * 8, a 2x2 grid (16 px), MLP 128, 10 classes. */
static void base_model(Model *m) {
    model_tiny(m, 64, 2, 8, 2, 128, 10);
}

static void load_expect(Ctx *c, const char *path, VitStatus want, const char *const *keys) {
    Vit vit;
    VitError err = {0};
    VitStatus rc = vit_load(&vit, path, NULL, &err);
    expect_refused(c, rc, &err, want, path, keys);
    vit_free(&vit);
}

/* A raw .safetensors: the JSON header as given, then `data` zero bytes. */
static void header_expect(Ctx *c, const char *json, size_t data, VitStatus want,
                          const char *const *keys) {
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    write_st(path, json, data);
    load_expect(c, path, want, keys);
}

/* The base model with one value of `tensor` replaced by raw bits. */
static void poke_expect(Ctx *c, const char *dtype, const char *tensor, size_t at, uint32_t bits,
                        const char *const *keys) {
    Model m;
    base_model(&m);
    model_set_dtype(&m, dtype);
    size_t n;
    uint8_t *b = model_bytes(&m, &n);
    int eb = strcmp(dtype, "F32") == 0 ? 4 : 2;
    uint8_t *d = model_data(&m, b, tensor) + at * (size_t)eb;
    for (int k = 0; k < eb; k++) d[k] = (uint8_t)(bits >> (8 * k));
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    write_bytes(path, b, n);
    free(b);
    load_expect(c, path, VIT_ERR_FORMAT, keys);
}

/* model.safetensors (the base model) and config.json beside it, loaded as the
 * app does: no options, the config found next to the weights. */
static void config_expect(Ctx *c, const char *json, const char *const *keys) {
    char path[1100], cfg[1100];
    Model m;
    base_model(&m);
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    in_dir(c, cfg, sizeof cfg, "config.json");
    write_bytes(cfg, json, strlen(json));
    Vit vit;
    VitError err = {0};
    VitStatus rc = vit_load(&vit, path, NULL, &err);
    expect_refused(c, rc, &err, VIT_ERR_FORMAT, cfg, keys);
    vit_free(&vit);
}

static void image_expect(Ctx *c, const char *path, VitStatus want, const char *const *keys) {
    VitImage img;
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    expect_refused(c, rc, &err, want, path, keys);
    if (rc != VIT_OK && img.rgb) check(0, "%s: VitImage not zeroed after the error", c->def->input);
    vit_image_free(&img);
}

/* Write a PNG, load it, compare with the RGB bytes expected (w*h*3). */
static void png_works(Ctx *c, const char *file, uint32_t w, uint32_t h, int depth, int color,
                      const uint8_t *samples, const uint8_t *want_rgb) {
    char path[1100];
    in_dir(c, path, sizeof path, file);
    size_t n;
    uint8_t *png = test_png(&n, w, h, depth, color, samples);
    write_bytes(path, png, n);
    free(png);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    int ok = rc == VIT_OK && img.w == (int)w && img.h == (int)h &&
             memcmp(img.rgb, want_rgb, (size_t)w * h * 3) == 0;
    char what[160];
    snprintf(what, sizeof what, "%ux%u, RGB as expected (first pixel %d %d %d)", w, h,
             rc ? -1 : img.rgb[0], rc ? -1 : img.rgb[1], rc ? -1 : img.rgb[2]);
    expect_works(c, rc, &err, ok, what);
    vit_image_free(&img);
}

/* --- the cases: weights ---------------------------------------------------- */

static void case_weights_empty(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "empty.safetensors");
    write_bytes(path, "", 0);
    load_expect(c, path, VIT_ERR_FORMAT, KEYS("file is empty (0 bytes)"));
}

static void case_weights_text(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "notes.safetensors");
    const char *text = "these are not the weights you are looking for\n";
    write_bytes(path, text, strlen(text));
    load_expect(c, path, VIT_ERR_FORMAT,
                KEYS("does not fit in the file", "not a safetensors file"));
}

static void case_weights_directory(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "folder.safetensors");
    make_dir(path);
    load_expect(c, path, VIT_ERR_IO, KEYS("is a directory, not a weights file"));
}

static void case_weights_unreadable(Ctx *c) {
    if (skip_if_root(c)) return;
    char path[1100];
    Model m;
    base_model(&m);
    in_dir(c, path, sizeof path, "locked.safetensors");
    model_write(&m, path);
    chmod(path, 0);
    load_expect(c, path, VIT_ERR_IO, KEYS("cannot open", "Permission denied"));
    chmod(path, 0644); /* so that the scratch folder can be removed */
}

/* The 8-byte header length; 16 bytes of "{   ...   }" follow it. */
static void length_expect(Ctx *c, uint64_t len, const char *const *keys) {
    uint8_t buf[8 + 16];
    memset(buf, ' ', sizeof buf);
    buf[8] = '{';
    buf[sizeof buf - 1] = '}';
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(len >> (8 * b));
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    write_bytes(path, buf, sizeof buf);
    load_expect(c, path, VIT_ERR_FORMAT, keys);
}

static void case_header_length_zero(Ctx *c) {
    length_expect(c, 0, KEYS("header length 0 does not fit"));
}

static void case_header_length_past_end(Ctx *c) {
    length_expect(c, 1000, KEYS("header length 1000 does not fit", "(16 bytes"));
}

static void case_header_length_absurd(Ctx *c) {
    length_expect(c, 1ull << 63, KEYS("header length 9223372036854775808 does not fit"));
}

/* A header length the file holds (sparse, mostly zeros) but over the limit. */
static void case_header_over_limit(Ctx *c) {
    char path[1100], key[80];
    in_dir(c, path, sizeof path, "model.safetensors");
    uint64_t len = (uint64_t)VIT_MAX_HEADER_BYTES + 8;
    uint8_t buf[8];
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(len >> (8 * b));
    unlink(path);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, 8, f) == 8;
    if (f) ok = fclose(f) == 0 && ok;
    ok = ok && truncate(path, (off_t)(8 + len + 64)) == 0;
    if (!check(ok, "write a sparse %llu-byte file", (unsigned long long)(8 + len + 64))) return;
    snprintf(key, sizeof key, "header length %llu exceeds the limit %u", (unsigned long long)len,
             VIT_MAX_HEADER_BYTES);
    load_expect(c, path, VIT_ERR_FORMAT, KEYS(key));
    unlink(path); /* not worth keeping */
}

static void case_header_invalid_json(Ctx *c) {
    header_expect(c, "{\"cls_token\": {\"dtype\": \"F32\", \"shape\": [1, 1, 64],", 0,
                  VIT_ERR_FORMAT, KEYS("header is not valid JSON", "near byte"));
}

static void case_header_not_object(Ctx *c) {
    header_expect(c, "[1, 2, 3]", 0, VIT_ERR_FORMAT, KEYS("header is JSON but not an object"));
}

static void case_tensor_not_object(Ctx *c) {
    header_expect(c, "{\"cls_token\": [1, 1, 64]}", 0, VIT_ERR_FORMAT,
                  KEYS("tensor 'cls_token': entry is not an object"));
}

#define ENTRY(name, dt, sh, off)                                                                   \
    "\"" name "\": {\"dtype\": \"" dt "\", \"shape\": " sh ", \"data_offsets\": " off "}"

static void case_tensor_duplicate(Ctx *c) {
    /* clang-format off */
    static const char json[] = "{" ENTRY("cls_token", "F32", "[1]", "[0, 4]") ", "
                                   ENTRY("cls_token", "F32", "[1]", "[4, 8]") "}";
    /* clang-format on */
    header_expect(c, json, 8, VIT_ERR_FORMAT, KEYS("tensor 'cls_token' appears twice"));
}

static void case_too_many_tensors(Ctx *c) {
    size_t n = (size_t)VIT_MAX_TENSORS + 1, cap = n * 16 + 16, k = 0;
    char *json = malloc(cap), key[64];
    json[k++] = '{';
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(json + k, cap - k, "%s\"t%zu\":0", i ? "," : "", i);
    json[k++] = '}';
    json[k] = 0;
    snprintf(key, sizeof key, "%zu tensors exceeds the limit %d", n, VIT_MAX_TENSORS);
    header_expect(c, json, 0, VIT_ERR_FORMAT, KEYS(key));
    free(json);
}

static void case_dtype_unknown(Ctx *c) {
    Model m;
    base_model(&m);
    snprintf(model_find(&m, "blocks.1.mlp.fc1.weight")->dtype, sizeof m.t[0].dtype, "F99");
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    load_expect(c, path, VIT_ERR_FORMAT,
                KEYS("tensor 'blocks.1.mlp.fc1.weight'", "unknown dtype 'F99'"));
}

static void case_offsets_reversed(Ctx *c) {
    header_expect(c, "{" ENTRY("cls_token", "F32", "[2]", "[8, 0]") "}", 8, VIT_ERR_FORMAT,
                  KEYS("tensor 'cls_token'", "data_offsets [8, 0] are reversed"));
}

static void case_offsets_overlap(Ctx *c) {
    /* clang-format off */
    static const char json[] = "{" ENTRY("cls_token", "F32", "[4]", "[0, 16]") ", "
                                   ENTRY("pos_embed", "F32", "[4]", "[8, 24]") "}";
    /* clang-format on */
    header_expect(c, json, 24, VIT_ERR_FORMAT,
                  KEYS("'cls_token' [0, 16] and 'pos_embed' [8, 24] overlap"));
}

static void case_offsets_past_end(Ctx *c) {
    header_expect(c, "{" ENTRY("cls_token", "F32", "[4]", "[0, 16]") "}", 8, VIT_ERR_FORMAT,
                  KEYS("tensor 'cls_token'", "end past the data area (8 bytes)"));
}

static void case_size_mismatch(Ctx *c) {
    header_expect(c, "{" ENTRY("cls_token", "F32", "[2]", "[0, 12]") "}", 16, VIT_ERR_FORMAT,
                  KEYS("tensor 'cls_token'", "12 bytes in data_offsets, expected 8"));
}

static void case_shape_overflow(Ctx *c) {
    static const char json[] =
        "{" ENTRY("cls_token", "F32", "[4294967296, 4294967296, 16]", "[0, 8]") "}";
    header_expect(c, json, 8, VIT_ERR_FORMAT,
                  KEYS("tensor 'cls_token'", "shape [4294967296, 4294967296, 16] overflows"));
}

static void case_weights_nan(Ctx *c) {
    poke_expect(c, "F32", "blocks.1.attn.qkv.weight", 100, 0x7fc00000u,
                KEYS("tensor 'blocks.1.attn.qkv.weight'", "element 100 of 12288 is NaN"));
}

static void case_weights_inf_f16(Ctx *c) {
    poke_expect(c, "F16", "head.weight", 7, 0x7c00u,
                KEYS("tensor 'head.weight'", "element 7 of 640 is +inf"));
}

static void case_qkv_rank_1d(Ctx *c) {
    Model m;
    base_model(&m);
    TSpec *t = model_find(&m, "blocks.0.attn.qkv.weight");
    t->ndim = 1;
    t->shape[0] = 3 * 64 * 64;
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("tensor 'blocks.0.attn.qkv.weight'", "shape [12288], expected [192, 64]"));
}

static void case_tensor_missing(Ctx *c) {
    Model m;
    base_model(&m);
    model_remove(&m, "blocks.1.mlp.fc2.bias");
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    load_expect(c, path, VIT_ERR_SHAPE, KEYS("tensor 'blocks.1.mlp.fc2.bias' is missing"));
}

/* 256 KB of weights: width 1, patch 1, a 256x256 grid (65537 tokens, the most
 * allowed), one block, one head. Its [T, T] attention alone is 16 GiB. */
static void case_activations_huge(Ctx *c) {
    Model m;
    model_tiny(&m, 1, 1, 1, 256, 1, 0);
    char path[1100], cfg[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    in_dir(c, cfg, sizeof cfg, "config.json");
    const char *json = "{\"num_heads\": 1}";
    write_bytes(cfg, json, strlen(json));
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("would need 16.0 GiB of activations", "limit of 4 GiB"));
}

/* --- the cases: layouts (weights named by a layout file or a shipped layout) --------- */

/* timm's roles, each named as itself: the layout of model_tiny's tensors. */
/* clang-format off */
static const char *const TIMM_ROLES[] = {
    "cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias",
    "blocks.{l}.norm1.weight", "blocks.{l}.norm1.bias", "blocks.{l}.attn.qkv.weight",
    "blocks.{l}.attn.qkv.bias", "blocks.{l}.attn.proj.weight", "blocks.{l}.attn.proj.bias",
    "blocks.{l}.norm2.weight", "blocks.{l}.norm2.bias", "blocks.{l}.mlp.fc1.weight",
    "blocks.{l}.mlp.fc1.bias", "blocks.{l}.mlp.fc2.weight", "blocks.{l}.mlp.fc2.bias",
    "norm.weight", "norm.bias", "head.weight", "head.bias", NULL};
/* clang-format on */

/* A layout file `name`.json in timm's names ("naming": "timm": read in place), each role
 * its own tensor but for the pairs of `as` (role, tensor; a NULL tensor leaves the role
 * out); `extra`: more top-level keys. Its path into out. */
static void layout_write(Ctx *c, char *out, size_t n, const char *name, const char *const *as,
                         const char *extra) {
    char file[96], json[4096];
    size_t k = 0;
    snprintf(file, sizeof file, "%s.json", name);
    in_dir(c, out, n, file);
    k += (size_t)snprintf(json + k, sizeof json - k,
                          "{\"name\": \"%s\", \"naming\": \"timm\", %s%s\"tensors\": {", name,
                          extra, extra[0] ? ", " : "");
    int first = 1;
    for (const char *const *r = TIMM_ROLES; *r; r++) {
        const char *t = *r;
        for (const char *const *a = as; a && *a; a += 2)
            if (!strcmp(a[0], *r)) t = a[1];
        if (!t) continue;
        k += (size_t)snprintf(json + k, sizeof json - k, "%s\"%s\": \"%s\"", first ? "" : ", ", *r,
                              t);
        first = 0;
    }
    for (const char *const *a = as; a && *a; a += 2) { /* roles model_tiny has no tensor for */
        int timm = 0;
        for (const char *const *r = TIMM_ROLES; *r && !timm; r++) timm = !strcmp(a[0], *r);
        if (!timm && a[1])
            k += (size_t)snprintf(json + k, sizeof json - k, ", \"%s\": \"%s\"", a[0], a[1]);
    }
    snprintf(json + k, sizeof json - k, "}}\n");
    write_bytes(out, json, strlen(json));
}

/* Drop the "naming" layout_write gives: then the tensors are not read as a library saves
 * them but converted into the roles' names where their shapes differ (layout.c, in_place). */
static void unname_layout(const char *path) {
    char json[4096], *at;
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(json, 1, sizeof json - 1, f) : 0;
    if (f) fclose(f);
    json[n] = '\0';
    static const char key[] = "\"naming\": \"timm\", ";
    if ((at = strstr(json, key))) memmove(at, at + strlen(key), strlen(at + strlen(key)) + 1);
    write_bytes(path, json, strlen(json));
}

/* vit_load(weights, --layout lay): refused with `want`, the message naming `named`. */
static void layout_expect(Ctx *c, const char *weights, const char *lay, VitStatus want,
                          const char *named, const char *const *keys) {
    Vit vit;
    VitError err = {0};
    VitLoadOptions opt = {.layout_path = lay};
    VitStatus rc = vit_load(&vit, weights, lay ? &opt : NULL, &err);
    expect_refused(c, rc, &err, want, named, keys);
    vit_free(&vit);
}

/* Remove from m the tensors that a layout's pairs `as` (role, the tensor it reads; NULL
 * ends) send elsewhere: each role's own name ("{l}" for blocks 0 and 1), unless it reads
 * itself. The checkpoint then holds the tensors the layout reads, no more. */
static void remove_aliased_roles(Model *m, const char *const *as) {
    char nm[64];
    for (const char *const *a = as; *a; a += 2) {
        if (!strcmp(a[0], a[1])) continue;
        for (int l = 0; l < 2 && strstr(a[0], "{l}"); l++) {
            snprintf(nm, sizeof nm, "blocks.%d.%s", l, a[0] + strlen("blocks.{l}."));
            model_remove(m, nm);
        }
        if (!strstr(a[0], "{l}")) model_remove(m, a[0]);
    }
}

/* The finding of issue 34: a layout naming one F16 tensor for several roles (blocks.l's
 * norm1.weight as its norm1 and norm2 weights and biases, its projection's and fc2's bias;
 * block 0's as the final norm). Each role converted its own F32 copy into a buffer sized
 * for one copy per tensor: a heap overflow (ASan: WRITE in ld_tensor). Now the tensor is
 * converted once and its roles share the copy. */
static void case_layout_aliased_f16(Ctx *c) {
    /* clang-format off */
    static const char *const as[] = { /* role, the tensor it reads */
        "blocks.{l}.norm1.bias",     "blocks.{l}.norm1.weight",
        "blocks.{l}.attn.proj.bias", "blocks.{l}.norm1.weight",
        "blocks.{l}.norm2.weight",   "blocks.{l}.norm1.weight",
        "blocks.{l}.norm2.bias",     "blocks.{l}.norm1.weight",
        "blocks.{l}.mlp.fc2.bias",   "blocks.{l}.norm1.weight",
        "norm.weight",               "blocks.0.norm1.weight",
        "norm.bias",                 "blocks.0.norm1.weight", NULL};
    /* clang-format on */
    Model m;
    base_model(&m);
    model_set_dtype(&m, "F16");
    remove_aliased_roles(&m, as); /* as the finding's checkpoint */
    char path[1100], lay[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    layout_write(c, lay, sizeof lay, "aliased", as, "");
    Vit vit;
    VitError err = {0};
    VitLoadOptions opt = {.layout_path = lay};
    VitStatus rc = vit_load(&vit, path, &opt, &err);
    int shared = rc == VIT_OK, values = rc == VIT_OK;
    for (int l = 0; shared && l < vit.cfg.n_layers; l++) {
        const VitBlock *b = &vit.w.blocks[l];
        shared = b->norm1_b == b->norm1_w && b->proj_b == b->norm1_w && b->norm2_w == b->norm1_w &&
                 b->norm2_b == b->norm1_w && b->fc2_b == b->norm1_w &&
                 (l == 0 || b->norm1_w != vit.w.blocks[0].norm1_w);
    }
    shared = shared && vit.w.norm_w == vit.w.blocks[0].norm1_w &&
             vit.w.norm_b == vit.w.blocks[0].norm1_w;
    for (int i = 0; values && i < vit.cfg.dim; i++)
        values = vit.w.norm_b[i] == model_value("blocks.0.norm1.weight", "F16", (size_t)i) &&
                 vit.w.blocks[1].fc2_b[i] == model_value("blocks.1.norm1.weight", "F16", (size_t)i);
    expect_works(c, rc, &err, shared && values,
                 "every role of a block's norm1.weight reads its one F32 copy, with its values");
    vit_free(&vit);
}

/* The same aliasing through the layout's conversion (the CLS token stored as [D], so the
 * tensors are converted into the roles' names, not read in place), in F32 and F16: a
 * table entry per role and block, more than the checkpoint's tensors. Found by
 * fuzz_layout's campaign: the table was sized by the checkpoint (heap-buffer-overflow
 * WRITE in add_tensor), and each role's F16 copy took the buffer's room again. */
static void case_layout_aliased_convert(Ctx *c) {
    /* clang-format off */
    static const char *const as[] = { /* role, the tensor it reads */
        "cls_token",                 "cls_token",
        "blocks.{l}.norm1.bias",     "blocks.{l}.norm1.weight",
        "blocks.{l}.attn.proj.bias", "blocks.{l}.norm1.weight",
        "blocks.{l}.norm2.weight",   "blocks.{l}.norm1.weight",
        "blocks.{l}.norm2.bias",     "blocks.{l}.norm1.weight",
        "blocks.{l}.mlp.fc1.bias",   "blocks.{l}.mlp.fc1.bias",
        "blocks.{l}.mlp.fc2.bias",   "blocks.{l}.norm1.weight",
        "norm.weight",               "blocks.0.norm1.weight",
        "norm.bias",                 "blocks.0.norm1.weight", NULL};
    /* clang-format on */
    int ok = 1;
    VitStatus rc = VIT_OK;
    VitError err = {0};
    for (int f16 = 0; f16 < 2 && ok && !rc; f16++) {
        Model m;
        base_model(&m);
        if (f16) model_set_dtype(&m, "F16");
        TSpec *cls = model_find(&m, "cls_token");
        cls->ndim = 1, cls->shape[0] = 64; /* [D]: converted to [1, 1, D] */
        remove_aliased_roles(&m, as);
        char nm[64];
        char path[1100], lay[1100];
        in_dir(c, path, sizeof path, f16 ? "model_f16.safetensors" : "model.safetensors");
        model_write(&m, path);
        layout_write(c, lay, sizeof lay, "aliased-convert", as, "");
        unname_layout(lay); /* a user's layout: a CLS token of [D] is converted */
        Vit vit;
        VitLoadOptions opt = {.layout_path = lay};
        rc = vit_load(&vit, path, &opt, &err);
        const char *dt = f16 ? "F16" : "F32";
        for (int l = 0; !rc && ok && l < vit.cfg.n_layers; l++) {
            const VitBlock *b = &vit.w.blocks[l];
            snprintf(nm, sizeof nm, "blocks.%d.norm1.weight", l);
            ok = b->norm1_b == b->norm1_w && b->proj_b == b->norm1_w && b->fc2_b == b->norm1_w;
            for (int i = 0; ok && i < vit.cfg.dim; i++)
                ok = b->norm2_b[i] == model_value(nm, dt, (size_t)i) &&
                     vit.w.norm_b[i] == model_value("blocks.0.norm1.weight", dt, (size_t)i) &&
                     vit.w.cls_token[i] == model_value("cls_token", dt, (size_t)i);
        }
        vit_free(&vit);
    }
    expect_works(c, rc, &err, ok,
                 "in F32 and F16, every role reads its tensor's one F32 copy, with its values");
}

/* A layout file naming no tensor for the blocks' first norm (read in place: its roles
 * are not matched before the architecture is read). The message said tensor '(null)'. */
static void case_layout_no_norm1(Ctx *c) {
    Model m;
    base_model(&m);
    char path[1100], lay[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    layout_write(c, lay, sizeof lay, "no-norm1", KEYS("blocks.{l}.norm1.weight", NULL), "");
    layout_expect(c, path, lay, VIT_ERR_SHAPE, path,
                  KEYS("layout 'no-norm1' (no-norm1.json) names no tensor for the role "
                       "blocks.{l}.norm1.weight"));
}

/* A layout naming no tensor for a block's attention (neither a fused qkv nor a query) or
 * for its second MLP layer: arch.c looked the unnamed tensor up by a NULL name (a crash
 * in strcmp). */
static void no_role_expect(Ctx *c, const char *name, const char *role, const char *what) {
    Model m;
    base_model(&m);
    char path[1100], lay[1100], key[160];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    layout_write(c, lay, sizeof lay, name, KEYS(role, NULL), "");
    snprintf(key, sizeof key, "layout '%s' (%s.json) names no tensor %s", name, name, what);
    layout_expect(c, path, lay, VIT_ERR_SHAPE, path, KEYS(key));
}

static void case_layout_no_qkv(Ctx *c) {
    no_role_expect(c, "no-qkv", "blocks.{l}.attn.qkv.weight", "for the attention");
}

static void case_layout_no_fc2(Ctx *c) {
    no_role_expect(c, "no-fc2", "blocks.{l}.mlp.fc2.weight",
                   "for the role blocks.{l}.mlp.fc2.weight");
}

/* A layout naming a distillation head's bias and not its weight, on a model without a
 * distillation token: the message named the weight the layout does not name, '(null)'. */
static void case_layout_dist_bias_only(Ctx *c) {
    Model m;
    base_model(&m);
    model_add(&m, "head_dist.bias", "F32", 1, (int64_t[]){10});
    char path[1100], lay[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    layout_write(c, lay, sizeof lay, "dist-bias", KEYS("head_dist.bias", "head_dist.bias"), "");
    layout_expect(c, path, lay, VIT_ERR_SHAPE, path,
                  KEYS("tensor 'head_dist.bias' is a distillation head, but there is no "
                       "distillation token"));
}

/* A layout whose "preprocess" crops 1 px of a 1e300 px resize: crop_pct 0 as a float, and
 * every photo was then refused as "too elongated", the layout not named. */
static void case_layout_crop_zero(Ctx *c) {
    Model m;
    base_model(&m);
    char path[1100], lay[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    layout_write(c, lay, sizeof lay, "crop", NULL,
                 "\"preprocess\": {\"resize\": 1e300, \"crop\": 1}");
    layout_expect(
        c, path, lay, VIT_ERR_FORMAT, lay,
        KEYS("\"preprocess\": \"resize\" 1e+300 and \"crop\" 1", "1 <= crop <= resize <= 16384"));
}

/* --- hostile shapes through the shipped layouts' conversions (layout.c) ------------- */

/* A .safetensors of specs[n], every value 0: more tensors than a Model holds. The
 * shapes' element counts must not overflow (a 0 dimension makes any shape empty). */
static void specs_write(const char *path, const TSpec *specs, int n) {
    size_t cap = (size_t)n * 200 + 64, k = 0, off = 0;
    char *json = malloc(cap);
    if (!json) exit(2);
    k += (size_t)snprintf(json + k, cap - k, "{");
    for (int i = 0; i < n; i++) {
        const TSpec *t = &specs[i];
        size_t ne = 1; /* [2^53, 0]: 0 */
        for (int d = 0; d < t->ndim; d++) ne *= (size_t)t->shape[d];
        size_t nb = ne * (strcmp(t->dtype, "F32") ? 2 : 4);
        k += (size_t)snprintf(json + k, cap - k, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [",
                              i ? ", " : "", t->name, t->dtype);
        for (int d = 0; d < t->ndim; d++)
            k += (size_t)snprintf(json + k, cap - k, "%s%lld", d ? ", " : "",
                                  (long long)t->shape[d]);
        k += (size_t)snprintf(json + k, cap - k, "], \"data_offsets\": [%zu, %zu]}", off, off + nb);
        off += nb;
    }
    snprintf(json + k, cap - k, "}");
    write_st(path, json, off);
    free(json);
}

#define TWO_53 9007199254740992LL /* the largest size a safetensors header holds exactly */

/* CLIP's image tower in OpenAI's names (the shipped layout clip-openai), width 64, one
 * block, patch 8 on a 2x2 grid, MLP 128, projection [64, 32]. */
static void clip_openai_model(Model *m) {
    const int64_t D = 64, F = 128;
    memset(m, 0, sizeof *m);
#define V(s) "visual." s
#define R(s) "visual.transformer.resblocks.0." s
    model_add(m, V("class_embedding"), "F32", 1, (int64_t[]){D});
    model_add(m, V("positional_embedding"), "F32", 2, (int64_t[]){5, D});
    model_add(m, V("conv1.weight"), "F32", 4, (int64_t[]){D, 3, 8, 8});
    model_add(m, V("ln_pre.weight"), "F32", 1, (int64_t[]){D});
    model_add(m, V("ln_pre.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, R("ln_1.weight"), "F32", 1, (int64_t[]){D});
    model_add(m, R("ln_1.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, R("attn.in_proj_weight"), "F32", 2, (int64_t[]){3 * D, D});
    model_add(m, R("attn.in_proj_bias"), "F32", 1, (int64_t[]){3 * D});
    model_add(m, R("attn.out_proj.weight"), "F32", 2, (int64_t[]){D, D});
    model_add(m, R("attn.out_proj.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, R("ln_2.weight"), "F32", 1, (int64_t[]){D});
    model_add(m, R("ln_2.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, R("mlp.c_fc.weight"), "F32", 2, (int64_t[]){F, D});
    model_add(m, R("mlp.c_fc.bias"), "F32", 1, (int64_t[]){F});
    model_add(m, R("mlp.c_proj.weight"), "F32", 2, (int64_t[]){D, F});
    model_add(m, R("mlp.c_proj.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, V("ln_post.weight"), "F32", 1, (int64_t[]){D});
    model_add(m, V("ln_post.bias"), "F32", 1, (int64_t[]){D});
    model_add(m, V("proj"), "F32", 2, (int64_t[]){D, 32});
#undef V
#undef R
}

/* OpenAI's visual.proj [2^53, 0]: no bytes, and the layout's transpose into [E, D] looped
 * over its 2^53 rows. */
static void case_clip_proj_zero_dim(Ctx *c) {
    Model m;
    clip_openai_model(&m);
    TSpec *p = model_find(&m, "visual.proj");
    p->shape[0] = TWO_53, p->shape[1] = 0;
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("tensor 'visual.proj': shape [9007199254740992, 0]: an empty weight"));
}

/* A notebook's ViT with per-head attention (the shipped layout notebook-heads: a
 * ModuleList of heads, each a Linear(D, Dh) query, key, value), width 64, heads 16 wide,
 * one block, patch 8 on a 2x2 grid, MLP 128, 10 classes; each head's query, key and
 * value [rows, in] into specs (at most 3 * n_heads + 20). Returns how many. */
static int notebook_heads_specs(TSpec *s, int n_heads, int64_t rows, int64_t in) {
    const int64_t D = 64, F = 128;
    Model m;
    memset(&m, 0, sizeof m);
    model_add(&m, "class_embedding", "F32", 3, (int64_t[]){1, 1, D});
    model_add(&m, "position_embedding", "F32", 3, (int64_t[]){1, 5, D});
    model_add(&m, "patch_embedding.conv.weight", "F32", 4, (int64_t[]){D, 3, 8, 8});
    model_add(&m, "patch_embedding.conv.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.ln1.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.ln1.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.attn.proj.weight", "F32", 2, (int64_t[]){D, D});
    model_add(&m, "blocks.0.attn.proj.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.ln2.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.ln2.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "blocks.0.ffn.0.weight", "F32", 2, (int64_t[]){F, D});
    model_add(&m, "blocks.0.ffn.0.bias", "F32", 1, (int64_t[]){F});
    model_add(&m, "blocks.0.ffn.2.weight", "F32", 2, (int64_t[]){D, F});
    model_add(&m, "blocks.0.ffn.2.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "layer_norm.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "layer_norm.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "mlp_head.weight", "F32", 2, (int64_t[]){10, D});
    model_add(&m, "mlp_head.bias", "F32", 1, (int64_t[]){10});
    memcpy(s, m.t, (size_t)m.n * sizeof *s);
    int n = m.n;
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int h = 0; h < n_heads; h++)
        for (int j = 0; j < 3; j++, n++) {
            memset(&s[n], 0, sizeof s[n]);
            snprintf(s[n].name, sizeof s[n].name, "blocks.0.attn.heads.%d.%s.weight", h, qkv[j]);
            snprintf(s[n].dtype, sizeof s[n].dtype, "F32");
            s[n].ndim = 2, s[n].shape[0] = rows, s[n].shape[1] = in;
        }
    return n;
}

/* Per-head queries, keys and values of no rows, [0, 64]: heads of width 0. */
static void case_notebook_q_zero_dim(Ctx *c) {
    TSpec s[3 * 4 + 20];
    int n = notebook_heads_specs(s, 4, 0, 64);
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    specs_write(path, s, n);
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("tensor 'blocks.0.attn.heads.0.query.weight': shape [0, 64]: an empty "
                     "weight"));
}

/* 512 heads, each query, key and value [2^53, 0] (no bytes): the attention's width A, the
 * heads' rows added up, is 2^62, and the fused qkv's 3 * A rows overflowed int64 (UBSan
 * stopped there; the release build said "shape [-4611686018427387904, 0]"). */
static void case_qkv_3a_overflow(Ctx *c) {
    enum { H = 512 };
    TSpec *s = calloc(3 * H + 20, sizeof *s);
    if (!s) exit(2);
    int n = notebook_heads_specs(s, H, TWO_53, 0);
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    specs_write(path, s, n);
    free(s);
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("tensor 'blocks.0.attn.heads.0.query.weight': shape [9007199254740992, 0]: "
                     "an empty weight"));
}

/* The other notebook's linear patch embedding (the shipped layout notebook-linear),
 * linear_patching.weight [0, 3 * P * P] with P = 2^25: no bytes, and the permutation's
 * row buffer of 3 * P * P floats (12 PiB) was allocated (ASan stopped there). */
static void case_linear_patch_zero_dim(Ctx *c) {
    const int64_t D = 64, F = 128, P = 1 << 25;
    Model m;
    memset(&m, 0, sizeof m);
    model_add(&m, "class_embedding", "F32", 3, (int64_t[]){1, 1, D});
    model_add(&m, "positional_embedding", "F32", 3, (int64_t[]){1, 5, D});
    model_add(&m, "linear_patching.weight", "F32", 2, (int64_t[]){0, 3 * P * P});
    model_add(&m, "linear_patching.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "encoder.0.norm1.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "encoder.0.norm1.bias", "F32", 1, (int64_t[]){D});
    static const char *const qkv[3] = {"q", "k", "v"};
    char nm[64];
    for (int j = 0; j < 3; j++) {
        snprintf(nm, sizeof nm, "encoder.0.msa.%s_weights.0.weight", qkv[j]);
        model_add(&m, nm, "F32", 2, (int64_t[]){D, D});
        snprintf(nm, sizeof nm, "encoder.0.msa.%s_weights.0.bias", qkv[j]);
        model_add(&m, nm, "F32", 1, (int64_t[]){D});
    }
    model_add(&m, "encoder.0.msa.linear.weight", "F32", 2, (int64_t[]){D, D});
    model_add(&m, "encoder.0.msa.linear.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "encoder.0.norm2.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "encoder.0.norm2.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "encoder.0.mlp.0.weight", "F32", 2, (int64_t[]){F, D});
    model_add(&m, "encoder.0.mlp.0.bias", "F32", 1, (int64_t[]){F});
    model_add(&m, "encoder.0.mlp.2.weight", "F32", 2, (int64_t[]){D, F});
    model_add(&m, "encoder.0.mlp.2.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "mlp_head.0.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "mlp_head.0.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "mlp_head.1.weight", "F32", 2, (int64_t[]){10, D});
    model_add(&m, "mlp_head.1.bias", "F32", 1, (int64_t[]){10});
    char path[1100];
    in_dir(c, path, sizeof path, "model.safetensors");
    model_write(&m, path);
    load_expect(c, path, VIT_ERR_SHAPE,
                KEYS("tensor 'linear_patching.weight': shape [0, 3377699720527872]: an empty "
                     "weight"));
}

/* --- the cases: config.json and labels ------------------------------------- */

static void case_config_heads_string(Ctx *c) {
    config_expect(c, "{\"num_heads\": \"four\"}",
                  KEYS("key 'num_heads' is \"four\", expected a positive integer"));
}

static void case_config_mean_two(Ctx *c) {
    config_expect(c, "{\"pretrained_cfg\": {\"mean\": [0.485, 0.456], \"std\": [0.5, 0.5, 0.5]}}",
                  KEYS("key 'pretrained_cfg.mean' is [0.485,0.456], expected 3 numbers"));
}

/* 1e-90 is above 0 as a double and 0 as the float the engine keeps: LayerNorm would
 * divide by zero on a constant row (tests/fuzz found it). */
static void case_config_eps_underflow(Ctx *c) {
    config_expect(c, "{\"layer_norm_eps\": 1e-90}",
                  KEYS("key 'layer_norm_eps' is 1e-90, expected a number in (0, 1]"));
}

static void case_config_invalid_json(Ctx *c) {
    config_expect(c,
                  "{\n  \"num_heads\": 4,\n  \"crop_pct\": 0.9\n  \"mean\": [0.5, 0.5, 0.5]\n}\n",
                  KEYS("not valid JSON (error at line 4, column 3)"));
}

static void case_labels_too_few(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "labels.txt");
    const char *text = "n01440764 tench, Tinca tinca\n"
                       "n01443537 goldfish, Carassius auratus\n"
                       "n01484850 great white shark\n";
    write_bytes(path, text, strlen(text));
    char(*labels)[VIT_LABEL_BYTES] = NULL;
    VitError err = {0};
    VitStatus rc = vit_labels_load(&labels, path, 10, &err);
    expect_refused(c, rc, &err, VIT_ERR_FORMAT, path,
                   KEYS("3 labels, but the model has 10 classes"));
    if (labels) check(0, "labels_too_few: *labels is not NULL after the error");
    free(labels);
}

/* --- the cases: images ----------------------------------------------------- */

static void case_image_empty(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "empty.png");
    write_bytes(path, "", 0);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("file is empty (0 bytes)"));
}

static void case_image_text(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "notes.jpg");
    const char *text = "a cat sat on the mat\n";
    write_bytes(path, text, strlen(text));
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("not an image vitlens can read"));
}

static void case_image_directory(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "photos.png");
    make_dir(path);
    image_expect(c, path, VIT_ERR_IO, KEYS("is a directory, not an image"));
}

static void case_image_unreadable(Ctx *c) {
    if (skip_if_root(c)) return;
    char path[1100];
    in_dir(c, path, sizeof path, "locked.png");
    uint8_t px[3] = {1, 2, 3};
    size_t n;
    uint8_t *png = test_png(&n, 1, 1, 8, 2, px);
    write_bytes(path, png, n);
    free(png);
    chmod(path, 0);
    image_expect(c, path, VIT_ERR_IO, KEYS("cannot open", "Permission denied"));
    chmod(path, 0644);
}

/* A 32x32 RGB PNG cut halfway through its pixel data: the header is whole. */
static void case_png_truncated(Ctx *c) {
    uint8_t px[32 * 32 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
    size_t n;
    uint8_t *png = test_png(&n, 32, 32, 8, 2, px);
    char path[1100];
    in_dir(c, path, sizeof path, "cut.png");
    write_bytes(path, png, n / 2);
    free(png);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot decode image, truncated or corrupt"));
}

/* A JPEG header: SOI, a baseline SOF0 declaring 60000 x 60000 px (3.6 G px, under
 * libjpeg's 65500 px a side), 3 components, and the SOS that ends the header. */
static void case_jpeg_huge_sof(Ctx *c) {
    static const uint8_t jpg[] = {0xff, 0xd8,                   /* SOI */
                                  0xff, 0xc0, 0x00, 17,         /* SOF0, 17 bytes */
                                  8,    0xea, 0x60, 0xea, 0x60, /* 8 bits, height, width */
                                  3,    1,    0x11, 0,    2,    0x11, 0,
                                  3,    0x11, 0,    0xff, 0xda, 0x00, 12, /* SOS, 12 bytes */
                                  3,    1,    0x00, 2,    0x11, 3,    0x11,
                                  0,    63,   0,    0xff, 0xd9}; /* EOI */
    char path[1100];
    in_dir(c, path, sizeof path, "huge.jpg");
    write_bytes(path, jpg, sizeof jpg);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("image is 60000x60000 px, more than the limit of 100000000 pixels"));
}

/* A JPEG whose DHT segment declares 304 codes in one Huffman table (16 code
 * lengths with 19 codes each): Debian's stb_image wrote them past its 256-entry
 * tables (tests/fuzz found it); libjpeg-turbo, which decodes JPEG now, refuses it. */
static void case_jpeg_huffman_overflow(Ctx *c) {
    enum { N_CODES = 16 * 19, SEG = 2 + 17 + N_CODES };
    uint8_t jpg[2 + 2 + SEG + 2];
    size_t k = 0;
    jpg[k++] = 0xff, jpg[k++] = 0xd8; /* SOI */
    jpg[k++] = 0xff, jpg[k++] = 0xc4; /* DHT */
    jpg[k++] = SEG >> 8, jpg[k++] = SEG & 0xff;
    jpg[k++] = 0x00; /* DC table 0 */
    for (int i = 0; i < 16; i++) jpg[k++] = 19;
    for (int i = 0; i < N_CODES; i++) jpg[k++] = (uint8_t)i;
    jpg[k++] = 0xff, jpg[k++] = 0xd9; /* EOI */
    char path[1100];
    in_dir(c, path, sizeof path, "huffman.jpg");
    write_bytes(path, jpg, k);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("cannot decode JPEG: Bogus Huffman table definition"));
}

/* A smooth 64 x 48 RGB test picture. */
static void test_picture(uint8_t *px, int w, int h, int comp) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < comp; ch++)
                px[((size_t)y * w + x) * comp + ch] = (uint8_t)(x * 3 + y * 2 + ch * 60);
}

/* write n bytes of a file made by an encoder (NULL: the encoder failed) */
static int write_encoded(Ctx *c, const char *path, uint8_t *file, size_t n) {
    if (!check(file != NULL, "%s: the encoder made a file", c->def->input)) {
        c->done = 1;
        return 0;
    }
    write_bytes(path, file, n);
    free(file);
    return 1;
}

/* A 64 x 48 baseline JPEG cut halfway through its entropy-coded data. */
static void case_jpeg_truncated(Ctx *c) {
    uint8_t px[64 * 48 * 3];
    test_picture(px, 64, 48, 3);
    size_t n;
    uint8_t *jpg = enc_jpeg(&n, px, 64, 48, 3, 90, 0, 0);
    char path[1100];
    in_dir(c, path, sizeof path, "cut.jpg");
    if (!write_encoded(c, path, jpg, n * 2 / 3)) return;
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("cannot decode JPEG: truncated: the file ends before the image data does"));
}

/* An 8 x 8 grey progressive JPEG with 501 scans (the same DC scan again and again,
 * which libjpeg decodes with a warning): every scan is a pass over the whole image. */
static void case_jpeg_many_scans(Ctx *c) {
    enum { SCANS = 501 };
    static const uint8_t head[] = {
        0xff, 0xd8,           /* SOI */
        0xff, 0xdb, 0, 67, 0, /* DQT 0: 64 ones */
        1,    1,    1, 1,  1,    1,    1, 1,  1, 1, 1, 1, 1, 1, 1, 1,    1, 1, 1, 1,
        1,    1,    1, 1,  1,    1,    1, 1,  1, 1, 1, 1, 1, 1, 1, 1,    1, 1, 1, 1,
        1,    1,    1, 1,  1,    1,    1, 1,  1, 1, 1, 1, 1, 1, 1, 1,    1, 1, 1, 1,
        1,    1,    1, 1,  0xff, 0xc2, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0,  /* SOF2: 8x8, grey */
        0xff, 0xc4, 0, 20, 0x00,                                             /* DHT DC 0: */
        1,    0,    0, 0,  0,    0,    0, 0,  0, 0, 0, 0, 0, 0, 0, 0,    0}; /* "0" = 0 */
    static const uint8_t scan[] = {0xff, 0xda, 0, 8, 1, 1, 0x00, 0, 0, 0,    /* SOS: DC first */
                                   0x7f};                                    /* diff 0, pad */
    size_t n = sizeof head + SCANS * sizeof scan + 2, k = 0;
    uint8_t *jpg = malloc(n);
    memcpy(jpg, head, sizeof head), k += sizeof head;
    for (int i = 0; i < SCANS; i++) memcpy(jpg + k, scan, sizeof scan), k += sizeof scan;
    jpg[k++] = 0xff, jpg[k++] = 0xd9;
    char path[1100];
    in_dir(c, path, sizeof path, "scans.jpg");
    write_bytes(path, jpg, k);
    free(jpg);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot decode JPEG: more than 500 scans"));
}

/* A 64 x 48 lossy WebP cut halfway. */
static void case_webp_truncated(Ctx *c) {
    uint8_t px[64 * 48 * 3];
    test_picture(px, 64, 48, 3);
    size_t n;
    uint8_t *webp = enc_webp(&n, px, 64, 48, 3, 0);
    char path[1100];
    in_dir(c, path, sizeof path, "cut.webp");
    if (!write_encoded(c, path, webp, n / 2)) return;
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot decode WebP", "truncated"));
}

/* A lossless WebP whose VP8L header declares 16384 x 16384 px (268 M px, WebP's most). */
static void case_webp_huge(Ctx *c) {
    uint8_t webp[] = {'R',  'I',  'F',  'F',  24,   0,  0, 0, 'W', 'E',  'B',
                      'P',  'V',  'P',  '8',  'L',  12, 0, 0, 0,   0x2f, /* VP8L signature */
                      0xff, 0xff, 0xff, 0xff, 0x00,                      /* 14 + 14 bits: 16383 */
                      0,    0,    0,    0,    0,    0,  0};              /* bits no one reads */
    webp[20 + 4] &= 0x0f; /* alpha hint 0, version 0: the bits after the two sizes */
    char path[1100];
    in_dir(c, path, sizeof path, "huge.webp");
    write_bytes(path, webp, sizeof webp);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("image is 16384x16384 px, more than the limit of 100000000 pixels"));
}

/* A 64 x 48 RGB TIFF (LZW, strips of 8 rows) cut halfway through its strips; libtiff
 * writes the directory last, so the cut keeps the header and loses the directory. */
static void case_tiff_truncated(Ctx *c) {
    uint8_t px[64 * 48 * 3];
    test_picture(px, 64, 48, 3);
    size_t n;
    uint8_t *tif = enc_tiff(&n, px, 64, 48, 3, 0, 5 /* LZW */, 0);
    char path[1100];
    in_dir(c, path, sizeof path, "cut.tif");
    if (!write_encoded(c, path, tif, n / 2)) return;
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot read TIFF"));
}

/* A TIFF whose strips are cut: the directory first, the pixel data short. */
static void case_tiff_strips_cut(Ctx *c) {
    /* little-endian, IFD at 8: 9 entries, then 200 bytes of a 64 x 48 grey strip */
    enum { W = 64, H = 48, N_ENTRIES = 9, DATA_AT = 8 + 2 + N_ENTRIES * 12 + 4 };
    uint8_t tif[DATA_AT + 200];
    memset(tif, 0x55, sizeof tif);
    const uint16_t tags[N_ENTRIES][2] = {{256, W},       {257, H}, {258, 8}, {259, 1},    {262, 1},
                                         {273, DATA_AT}, {277, 1}, {278, H}, {279, W * H}};
    size_t k = 0;
    tif[k++] = 'I', tif[k++] = 'I', tif[k++] = 42, tif[k++] = 0;
    tif[k++] = 8, tif[k++] = 0, tif[k++] = 0, tif[k++] = 0;
    tif[k++] = N_ENTRIES, tif[k++] = 0;
    for (int i = 0; i < N_ENTRIES; i++) {
        uint8_t e[12] = {(uint8_t)tags[i][0], (uint8_t)(tags[i][0] >> 8), 4, 0, 1, 0, 0, 0,
                         (uint8_t)tags[i][1], (uint8_t)(tags[i][1] >> 8), 0, 0}; /* LONG x 1 */
        memcpy(tif + k, e, 12), k += 12;
    }
    memset(tif + k, 0, 4); /* no next IFD */
    char path[1100];
    in_dir(c, path, sizeof path, "short.tif");
    write_bytes(path, tif, sizeof tif);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot decode TIFF", "Read error"));
}

/* A TIFF directory declaring 100000 x 100000 px, with no pixel data. */
static void case_tiff_huge(Ctx *c) {
    enum { N_ENTRIES = 9 };
    uint8_t tif[8 + 2 + N_ENTRIES * 12 + 4];
    const uint32_t tags[N_ENTRIES][2] = {{256, 100000}, {257, 100000}, {258, 8},
                                         {259, 1},      {262, 1},      {273, 8},
                                         {277, 1},      {278, 100000}, {279, 1}};
    size_t k = 0;
    tif[k++] = 'I', tif[k++] = 'I', tif[k++] = 42, tif[k++] = 0;
    tif[k++] = 8, tif[k++] = 0, tif[k++] = 0, tif[k++] = 0;
    tif[k++] = N_ENTRIES, tif[k++] = 0;
    for (int i = 0; i < N_ENTRIES; i++) {
        uint32_t v = tags[i][1];
        uint8_t e[12] = {(uint8_t)tags[i][0],
                         (uint8_t)(tags[i][0] >> 8),
                         4,
                         0,
                         1,
                         0,
                         0,
                         0,
                         (uint8_t)v,
                         (uint8_t)(v >> 8),
                         (uint8_t)(v >> 16),
                         (uint8_t)(v >> 24)};
        memcpy(tif + k, e, 12), k += 12;
    }
    memset(tif + k, 0, 4);
    char path[1100];
    in_dir(c, path, sizeof path, "huge.tif");
    write_bytes(path, tif, sizeof tif);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("image is 100000x100000 px, more than the limit of 100000000 pixels"));
}

/* A small HEIC (libheif's x265 encoder); NULL and the case skipped without one. */
static uint8_t *heic_or_skip(Ctx *c, size_t *n) {
    uint8_t px[64 * 48 * 3];
    test_picture(px, 64, 48, 3);
    uint8_t *heic = enc_heif(n, px, 64, 48, 0, 0, 0);
    if (!heic) {
        printf("skipped - %s: no HEVC encoder (none in libheif, or "
               "VITLENS_TEST_NO_HEVC_ENCODER)\n",
               c->def->input);
        c->skipped = 1;
    }
    return heic;
}

/* A 64 x 48 HEIC cut halfway (libheif writes the metadata first, the coded image last). */
static void case_heic_truncated(Ctx *c) {
    size_t n;
    uint8_t *heic = heic_or_skip(c, &n);
    if (!heic) return;
    char path[1100];
    in_dir(c, path, sizeof path, "cut.heic");
    write_bytes(path, heic, n / 2);
    free(heic);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot read HEIF"));
}

/* The same HEIC with its ispe box (the image's size) saying 20000 x 20000 px. */
static void case_heic_huge(Ctx *c) {
    size_t n;
    uint8_t *heic = heic_or_skip(c, &n);
    if (!heic) return;
    int patched = 0;
    for (size_t i = 0; i + 16 <= n; i++)
        if (!memcmp(heic + i, "ispe", 4)) { /* "ispe", version + flags, width, height */
            static const uint8_t wh[8] = {0, 0, 0x4e, 0x20, 0, 0, 0x4e, 0x20};
            memcpy(heic + i + 8, wh, 8);
            patched++;
        }
    char path[1100];
    in_dir(c, path, sizeof path, "huge.heic");
    write_bytes(path, heic, n);
    free(heic);
    if (!check(patched > 0, "%s: found the ispe box to patch", c->def->input)) return;
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("image is 20000x20000 px, more than the limit of 100000000 pixels"));
}

/* An MP4 video's start: an ISO media file, as HEIF is, but not an image. */
static void case_mp4_video(Ctx *c) {
    static const uint8_t mp4[] = {0,   0,   0, 24, 'f', 't', 'y', 'p', 'i', 's', 'o',
                                  'm', 0,   0, 2,  0,   'i', 's', 'o', 'm', 'm', 'p',
                                  '4', '1', 0, 0,  0,   8,   'f', 'r', 'e', 'e'};
    char path[1100];
    in_dir(c, path, sizeof path, "clip.mp4");
    write_bytes(path, mp4, sizeof mp4);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("not an image vitlens can read", "not HEIF or AVIF"));
}

/* A PGM whose width has 40 digits: Debian's stb_image 2.27 overflows an int reading
 * it (undefined behaviour; UBSan reports it; tests/fuzz found it). */
static void case_pnm_huge_number(Ctx *c) {
    static const char pgm[] = "P5 9999999999999999999999999999999999999999 1 255\n\x01";
    char path[1100];
    in_dir(c, path, sizeof path, "wide.pgm");
    write_bytes(path, pgm, sizeof pgm - 1);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("corrupt PNM: a number in its header is over 2147483647"));
}

/* A 2 x 12000 px strip at DeiT's 224 px input: resized to 256 x 1536000 px (1.2 GB)
 * before the centre crop, which the engine alone computes. Outside the sanitizer
 * builds (whose allocator needs room of its own) the preprocessing runs in a child
 * process with 256 MB of data space: resizing the whole strip would not fit. */
static void case_image_long_strip(Ctx *c) {
    enum { W = 2, H = 12000, S = 224 };
    static uint8_t px[H][W][3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int ch = 0; ch < 3; ch++) px[y][x][ch] = (uint8_t)(y * 3 + x * 100 + ch * 50);
    size_t n;
    uint8_t *png = test_png(&n, W, H, 8, 2, &px[0][0][0]);
    char path[1100];
    in_dir(c, path, sizeof path, "strip.png");
    write_bytes(path, png, n);
    free(png);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    int ok = 0;
    if (rc == VIT_OK) {
        VitConfig cfg = {.image_h = S,
                         .image_w = S,
                         .crop_pct = 0.875f,
                         .mean = {0.5f, 0.5f, 0.5f},
                         .std = {0.5f, 0.5f, 0.5f}};
        static float in[3 * S * S];
#if defined(__SANITIZE_ADDRESS__)
        rc = vit_preprocess(in, NULL, NULL, NULL, NULL, &cfg, &img, &err);
        ok = rc == VIT_OK;
#else
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit lim = {256u << 20, 256u << 20};
            setrlimit(RLIMIT_DATA, &lim);
            _exit(vit_preprocess(in, NULL, NULL, NULL, NULL, &cfg, &img, &err) == VIT_OK ? 0 : 1);
        }
        int status = 0;
        ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0;
        if (ok) rc = vit_preprocess(in, NULL, NULL, NULL, NULL, &cfg, &img, &err);
#endif
        /* the middle of the strip, stretched: every value a normalised 8-bit level */
        for (int i = 0; ok && rc == VIT_OK && i < 3 * S * S; i++)
            ok = in[i] >= -1.0f && in[i] <= 1.0f;
    }
    expect_works(c, rc, &err, ok, "preprocessed in 256 MB: only the 224 x 224 crop is resized");
    vit_image_free(&img);
}

/* A 2 x 500000 PGM (1 MB) squashed whole (--whole: crop_pct 1) to 224 x 224 px: the
 * horizontal pass would make 224 px of each of its 500000 rows, 112 M pixels (a 2 x
 * 729225 one took 2.4 s; tests/fuzz found it). Refused before any is made. */
static void case_image_tall_strip_squash(Ctx *c) {
    enum { W = 2, H = 500000, S = 224 };
    static uint8_t pgm[32 + W * H];
    int k = snprintf((char *)pgm, 32, "P5 %d %d 255\n", W, H);
    for (int i = 0; i < W * H; i++) pgm[k + i] = (uint8_t)(i * 7);
    char path[1100];
    in_dir(c, path, sizeof path, "tall.pgm");
    write_bytes(path, pgm, (size_t)k + W * H);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    if (rc == VIT_OK) {
        VitConfig cfg = {.image_h = S,
                         .image_w = S,
                         .crop_mode = VIT_CROP_SQUASH,
                         .crop_pct = 1.0f,
                         .mean = {0.5f, 0.5f, 0.5f},
                         .std = {0.5f, 0.5f, 0.5f}};
        static float in[3 * S * S];
        rc = vit_preprocess(in, NULL, NULL, NULL, NULL, &cfg, &img, &err);
    }
    expect_refused(c, rc, &err, VIT_ERR_ARG, "2x500000",
                   KEYS("too elongated", "224x224 px input resamples", "more than 100000000"));
    vit_image_free(&img);
}

static void case_png_huge_ihdr(Ctx *c) {
    size_t n;
    uint8_t *png = test_png(&n, 100000, 100000, 8, 2, NULL);
    char path[1100];
    in_dir(c, path, sizeof path, "huge.png");
    write_bytes(path, png, n);
    free(png);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("image is 100000x100000 px, more than the limit of 100000000 pixels"));
}

/* 1x1: loads, and the model sees that one colour over its whole input. */
static void case_image_1x1(Ctx *c) {
    uint8_t px[3] = {200, 100, 50};
    char path[1100];
    in_dir(c, path, sizeof path, "dot.png");
    size_t n;
    uint8_t *png = test_png(&n, 1, 1, 8, 2, px);
    write_bytes(path, png, n);
    free(png);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    VitConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.image_h = cfg.image_w = 16;
    cfg.patch_size = 8;
    cfg.crop_pct = 0.875f;
    for (int ch = 0; ch < 3; ch++) cfg.mean[ch] = 0.5f, cfg.std[ch] = 0.25f;
    float in[3 * 16 * 16];
    int ok = 0;
    if (rc == VIT_OK && (rc = vit_preprocess(in, NULL, NULL, NULL, NULL, &cfg, &img, &err)) == 0) {
        ok = img.w == 1 && img.h == 1;
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 16 * 16; i++)
                ok &= in[ch * 256 + i] == ((float)px[ch] / 255.0f - 0.5f) / 0.25f;
    }
    expect_works(c, rc, &err, ok, "1x1, the 16x16 input is (px/255 - mean)/std everywhere");
    vit_image_free(&img);
}

/* 16 bits per sample: the high byte, as Pillow keeps for 16-bit RGB. */
static void case_png_16bit(Ctx *c) {
    static const uint8_t s[2 * 3 * 2] = {0x12, 0x34, 0xff, 0xff, 0x00, 0xff,
                                         0x80, 0x00, 0x7f, 0xff, 0x01, 0x00};
    static const uint8_t want[6] = {0x12, 0xff, 0x00, 0x80, 0x7f, 0x01};
    png_works(c, "deep.png", 2, 1, 16, 2, s, want);
}

/* 16-bit grey: the high byte in all three channels. (Pillow's convert('RGB')
 * clips its 32-bit "I" mode at 255 instead, turning this image white.) */
static void case_png_16bit_grey(Ctx *c) {
    static const uint8_t s[3 * 2] = {0x12, 0x34, 0x00, 0xff, 0xff, 0x00};
    static const uint8_t want[9] = {0x12, 0x12, 0x12, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff};
    png_works(c, "deep_grey.png", 3, 1, 16, 0, s, want);
}

static void case_png_grey(Ctx *c) {
    static const uint8_t s[3] = {0, 128, 255};
    static const uint8_t want[9] = {0, 0, 0, 128, 128, 128, 255, 255, 255};
    png_works(c, "grey.png", 3, 1, 8, 0, s, want);
}

/* A 16-bit grey PGM (maxval 65535, big-endian samples): Debian's stb_image 2.27
 * overran its buffer making such a file RGB (tests/fuzz found it). */
static void case_pgm_16bit_grey(Ctx *c) {
    static const uint8_t pgm[] = "P5\n3 1\n65535\n\x12\x34\x00\xff\xff\x00";
    static const uint8_t want[9] = {0x12, 0x12, 0x12, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff};
    char path[1100];
    in_dir(c, path, sizeof path, "deep.pgm");
    write_bytes(path, pgm, sizeof pgm - 1);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    int ok = rc == VIT_OK && img.w == 3 && img.h == 1 && memcmp(img.rgb, want, 9) == 0;
    expect_works(c, rc, &err, ok, "3x1, the high byte in each channel");
    vit_image_free(&img);
}

/* A zero-length IDAT chunk before the image data (legal: the data is the concatenation
 * of the IDATs), and one after it: Debian's stb_image 2.27 added the first one's offset
 * to a null pointer (tests/fuzz found it); the engine drops such chunks. */
static void case_png_empty_idat(Ctx *c) {
    static const uint8_t s[6] = {10, 20, 30, 40, 50, 60};
    static const uint8_t empty_idat[12] = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xaf, 0x06, 0x1e};
    size_t n;
    uint8_t *png = test_png(&n, 2, 1, 8, 2, s), *b = malloc(n + 2 * sizeof empty_idat);
    size_t idat = 8 + 25, iend = n - 12; /* after the signature and IHDR; IEND */
    memcpy(b, png, idat);
    memcpy(b + idat, empty_idat, sizeof empty_idat);
    memcpy(b + idat + 12, png + idat, iend - idat);
    memcpy(b + iend + 12, empty_idat, sizeof empty_idat);
    memcpy(b + iend + 24, png + iend, 12);
    free(png);
    char path[1100];
    in_dir(c, path, sizeof path, "empty_idat.png");
    write_bytes(path, b, n + 24);
    free(b);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    int ok = rc == VIT_OK && img.w == 2 && img.h == 1 && memcmp(img.rgb, s, 6) == 0;
    expect_works(c, rc, &err, ok, "2x1, the pixels of its one IDAT with data");
    vit_image_free(&img);
}

/* A 5x6 PNG whose IDAT chunk declares 0x41000012 bytes (1 GB) and holds 34: Debian's
 * stb_image 2.27 allocated the declared length before reading it (tests/fuzz found it). */
static void case_png_idat_past_end(Ctx *c) {
    uint8_t px[5 * 6] = {0};
    size_t n;
    uint8_t *png = test_png(&n, 5, 6, 8, 0, px);
    size_t idat = 8 + 25;
    png[idat] = 0x41, png[idat + 1] = 0x00, png[idat + 2] = 0x00, png[idat + 3] = 0x12;
    char path[1100];
    in_dir(c, path, sizeof path, "long.png");
    write_bytes(path, png, n);
    free(png);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("truncated or corrupt", "IDAT chunk at byte 33 declares 1090519058 bytes"));
}

/* A 1x1 PNG whose zlib stream goes on for 16 MiB of zeros (a 106 KB file): Debian's
 * stb_image 2.27 inflates all of it into a buffer it doubles as it goes. */
static void case_png_inflate_bomb(Ctx *c) {
    size_t n;
    uint8_t *png = test_png_inflating(&n, 16u << 20);
    char path[1100];
    in_dir(c, path, sizeof path, "bomb.png");
    write_bytes(path, png, n);
    free(png);
    image_expect(c, path, VIT_ERR_IMAGE,
                 KEYS("compressed data inflates to over", "far more than a 1x1 image needs"));
}

/* A PGM cut in its pixel data: Debian's stb_image 2.27 did not check that its read of
 * the samples got them all, and the missing pixels were whatever the heap held
 * (valgrind, replaying a fuzzing input). */
static void case_pnm_truncated(Ctx *c) {
    static const char pgm[] = "P5\n4 4\n255\n\x01\x02\x03\x04\x05";
    char path[1100];
    in_dir(c, path, sizeof path, "cut.pgm");
    write_bytes(path, pgm, sizeof pgm - 1);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("truncated or corrupt", "need 16 bytes, 5 are left"));
}

/* A file cut in the pixel data that stb_image reads in one call (a TGA's rows, a flat
 * HDR's pixels): stb 2.27 ignored the short read and kept what its buffer held, heap or
 * stack (valgrind on the fuzzing corpus). The engine's read callback zeroes what a
 * short read leaves: the image is the same file with zeros for its missing bytes. */
static void cut_same_as_zeros(Ctx *c, const char *name, const uint8_t *file, size_t n_cut,
                              size_t n_whole) {
    uint8_t padded[256] = {0};
    memcpy(padded, file, n_cut);
    char cut[1100], whole[1100];
    in_dir(c, cut, sizeof cut, name);
    in_dir(c, whole, sizeof whole, "zeros");
    write_bytes(cut, file, n_cut);
    write_bytes(whole, padded, n_whole);
    VitImage a = {0}, b = {0};
    VitError err = {0}, err_b = {0};
    VitStatus rc = vit_image_load(&a, cut, &err);
    int ok = rc == VIT_OK && vit_image_load(&b, whole, &err_b) == VIT_OK && a.w == b.w &&
             a.h == b.h && !memcmp(a.rgb, b.rgb, (size_t)a.w * a.h * 3);
    expect_works(c, rc, &err, ok, "the pixels of the file completed with zeros");
    vit_image_free(&a);
    vit_image_free(&b);
}

static void case_tga_truncated(Ctx *c) {
    /* 4 x 2 grey, uncompressed (type 3), 3 of its 8 samples */
    static const uint8_t tga[18 + 3] = {0, 0, 3, 0, 0, 0, 0, 0,  0,  0, 0,
                                        0, 4, 0, 2, 0, 8, 0, 10, 20, 30};
    cut_same_as_zeros(c, "cut.tga", tga, sizeof tga, 18 + 8);
}

static void case_hdr_truncated(Ctx *c) {
    /* 4 x 2, flat RGBE (narrower than 8 px: never run-length), 1 pixel and a half of 8 */
    static const char hdr[] = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 4\n"
                              "\x80\x40\x20\x81\x10\x20";
    size_t head = sizeof hdr - 1 - 6;
    cut_same_as_zeros(c, "cut.hdr", (const uint8_t *)hdr, sizeof hdr - 1, head + 4 * 8);
}

/* A Softimage PIC cut in its pixel data: Debian's stb_image 2.27 freed its buffer and
 * then converted the null pointer left, a segfault (stb issue #1452, CVE-2023-43898). */
static void case_pic_truncated(Ctx *c) {
    uint8_t rgb[4 * 4 * 3] = {0};
    size_t n;
    uint8_t *pic = test_pic(&n, 4, 4, rgb, 2);
    char path[1100];
    in_dir(c, path, sizeof path, "cut.pic");
    write_bytes(path, pic, n);
    free(pic);
    image_expect(c, path, VIT_ERR_IMAGE, KEYS("cannot decode image", "PIC file too short"));
}

/* A whole PIC: read as RGBA (load_pic in engine/image/decode.c), the alpha dropped. */
static void case_pic(Ctx *c) {
    static const uint8_t rgb[6] = {10, 20, 30, 40, 50, 60};
    size_t n;
    uint8_t *pic = test_pic(&n, 2, 1, rgb, sizeof rgb);
    char path[1100];
    in_dir(c, path, sizeof path, "rgb.pic");
    write_bytes(path, pic, n);
    free(pic);
    VitImage img = {0};
    VitError err = {0};
    VitStatus rc = vit_image_load(&img, path, &err);
    int ok = rc == VIT_OK && img.w == 2 && img.h == 1 && memcmp(img.rgb, rgb, 6) == 0 &&
             strcmp(img.format, "PIC") == 0;
    expect_works(c, rc, &err, ok, "2x1, its RGB");
    vit_image_free(&img);
}

/* RGBA: alpha dropped, colour kept even where fully transparent (PIL's convert('RGB')). */
static void case_png_rgba(Ctx *c) {
    static const uint8_t s[8] = {10, 20, 30, 0, 40, 50, 60, 255};
    static const uint8_t want[6] = {10, 20, 30, 40, 50, 60};
    png_works(c, "rgba.png", 2, 1, 8, 6, s, want);
}

/* --- the cases: PyTorch checkpoints ---------------------------------------- */

/* A protocol-2 pickle, written byte by byte as torch.save would (nothing here is ever
 * unpickled by Python); grown as needed, freed by pth_expect (or pk_free). */
typedef struct {
    uint8_t *b;
    size_t n, cap;
} Pk;

static void pk_raw(Pk *p, const void *s, size_t n) {
    if (p->n + n > p->cap) {
        size_t nc = p->cap ? p->cap : 1024;
        while (nc < p->n + n) nc *= 2;
        uint8_t *nb = realloc(p->b, nc);
        if (!nb) exit(2);
        p->b = nb, p->cap = nc;
    }
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void pk_free(Pk *p) {
    free(p->b);
    memset(p, 0, sizeof *p);
}
static void pk_str(Pk *p, const char *s) {
    pk_raw(p, s, strlen(s));
}
static void pk_repeat(Pk *p, const char *s, size_t times) {
    for (size_t i = 0; i < times; i++) pk_str(p, s);
}
static void pk_unicode(Pk *p, const char *s) { /* BINUNICODE */
    uint32_t n = (uint32_t)strlen(s);
    uint8_t h[5] = {'X', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    pk_raw(p, h, 5);
    pk_raw(p, s, n);
}
static void pk_int(Pk *p, int32_t v) { /* BININT */
    uint32_t u = (uint32_t)v;
    uint8_t h[5] = {'J', (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    pk_raw(p, h, 5);
}
static void pk_ints(Pk *p, int n, const int32_t *v) { /* a tuple */
    pk_str(p, "(");
    for (int i = 0; i < n; i++) pk_int(p, v[i]);
    pk_str(p, "t");
}
static void pk_memo(Pk *p, char op, uint32_t idx) { /* LONG_BINPUT 'r', LONG_BINGET 'j' */
    uint8_t h[5] = {(uint8_t)op, (uint8_t)idx, (uint8_t)(idx >> 8), (uint8_t)(idx >> 16),
                    (uint8_t)(idx >> 24)};
    pk_raw(p, h, 5);
}

/* {name: tensor} as torch.save writes a state dict of one tensor: shape [n0, n1] with the
 * given strides, at `offset` elements in storage `key` of `numel` elements of `stype`
 * (torch.FloatStorage, ...). `od` [od_n]: the GLOBAL that makes the dict (collections
 * OrderedDict; it may hold a NUL). */
static void pk_state_dict_of(Pk *p, const char *name, const char *stype, int32_t numel,
                             int32_t offset, const int32_t shape[2], const int32_t stride[2],
                             const char *od, size_t od_n) {
    pk_str(p, "\x80\x02}(");
    pk_unicode(p, name);
    pk_str(p, "ctorch._utils\n_rebuild_tensor_v2\n((");
    pk_unicode(p, "storage");
    pk_str(p, "ctorch\n");
    pk_str(p, stype);
    pk_str(p, "\n");
    pk_unicode(p, "0");
    pk_unicode(p, "cpu");
    pk_int(p, numel);
    pk_str(p, "tQ");
    pk_int(p, offset);
    pk_ints(p, 2, shape);
    pk_ints(p, 2, stride);
    pk_str(p, "\x89");
    pk_raw(p, od, od_n);
    pk_str(p, ")RtRu.");
}
static void pk_state_dict(Pk *p, const char *name, const char *stype, int32_t numel, int32_t offset,
                          const int32_t shape[2], const int32_t stride[2]) {
    pk_state_dict_of(p, name, stype, numel, offset, shape, stride, "ccollections\nOrderedDict\n",
                     25);
}

/* One entry of a zip: stored or deflated, plain or encrypted (traditional PKWARE). */
typedef struct {
    const char *name;
    const void *data;
    size_t n;
    int deflate, encrypt;
} ZipEntry;

static void write_zip(const char *path, const ZipEntry *e, int n) {
    int zerr = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!za) {
        check(0, "%s: cannot create the zip (libzip error %d)", path, zerr);
        return;
    }
    for (int i = 0; i < n; i++) {
        zip_source_t *src = zip_source_buffer(za, e[i].data, e[i].n, 0);
        zip_int64_t idx = src ? zip_file_add(za, e[i].name, src, ZIP_FL_ENC_UTF_8) : -1;
        if (idx < 0 ||
            zip_set_file_compression(za, (zip_uint64_t)idx,
                                     e[i].deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 9) ||
            (e[i].encrypt &&
             zip_file_set_encryption(za, (zip_uint64_t)idx, ZIP_EM_TRAD_PKWARE, "vitlens")))
            check(0, "%s: cannot add %s: %s", path, e[i].name, zip_strerror(za));
    }
    if (zip_close(za) != 0) check(0, "%s: cannot write the zip: %s", path, zip_strerror(za));
}

/* A torch.save zip: archive/data.pkl, archive/data/0 (bytes [n_data]), archive/version;
 * deflated or stored. */
static void write_pth(const char *path, const Pk *pkl, const void *data, size_t n_data,
                      int deflate) {
    const ZipEntry e[] = {{"archive/data.pkl", pkl->b, pkl->n, deflate, 0},
                          {"archive/data/0", data, n_data, deflate, 0},
                          {"archive/version", "3\n", 2, deflate, 0}};
    write_zip(path, e, 3);
}

/* model.pth holding data.pkl = pk (freed) and one storage of n_data zero bytes; loaded. */
static void pth_expect(Ctx *c, Pk *pk, size_t n_data, int deflate, VitStatus want,
                       const char *const *keys) {
    char path[1100];
    in_dir(c, path, sizeof path, "model.pth");
    void *data = calloc(n_data ? n_data : 1, 1);
    write_pth(path, pk, data, n_data, deflate);
    free(data);
    pk_free(pk);
    load_expect(c, path, want, keys);
}

/* A hostile file under 1 MB is refused (VIT_ERR_FORMAT, the message holding keys) within
 * 1 s of CPU and 256 MB: vit_load runs in a child process limited to 256 MB of data space
 * (more is a failure to allocate, VIT_ERR_NOMEM) and 20 s of CPU (more kills it), whose
 * CPU time and peak RSS are checked. The sanitizer builds, whose allocator and shadow
 * memory need room of their own, and a run under valgrind (VITLENS_TEST_VALGRIND, set by
 * tests/memcheck: 10-50x slower) load in the process: bounded only by ctest's timeout. */
static void load_bounded(Ctx *c, const char *path, const char *const *keys) {
    char what[1200];
    snprintf(what, sizeof what, "%s (%s)", c->def->input, base_name(path));
#if defined(__SANITIZE_ADDRESS__)
    (void)what;
    load_expect(c, path, VIT_ERR_FORMAT, keys);
#else
    if (getenv("VITLENS_TEST_VALGRIND")) {
        load_expect(c, path, VIT_ERR_FORMAT, keys);
        return;
    }
    VitError err = {0};
    int fd[2];
    if (!check(pipe(fd) == 0, "%s: pipe", what)) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit mem = {256u << 20, 256u << 20}, cpu = {20, 20};
        setrlimit(RLIMIT_DATA, &mem);
        setrlimit(RLIMIT_CPU, &cpu);
        close(fd[0]);
        Vit vit;
        vit_load(&vit, path, NULL, &err);
        _exit(write(fd[1], &err, sizeof err) == (ssize_t)sizeof err ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    for (ssize_t r; pid > 0 && got < sizeof err &&
                    (r = read(fd[0], (char *)&err + got, sizeof err - got)) > 0;)
        got += (size_t)r;
    close(fd[0]);
    int status = 0;
    struct rusage ru = {0};
    int ok = pid > 0 && wait4(pid, &status, 0, &ru) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0 && got == sizeof err;
    check(ok, "%s: the load finishes (signal %d: over 20 s of CPU?)", what,
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    double cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    check(cpu_s <= 1.0, "%s: %.2f s of CPU, at most 1 s", what, cpu_s);
    check(ru.ru_maxrss <= 256 * 1024, "%s: peak RSS %ld MB, at most 256 MB", what,
          ru.ru_maxrss / 1024);
    if (!ok) {
        err.code = VIT_ERR_IO;
        snprintf(err.msg, sizeof err.msg, "(the load did not finish)");
    }
    expect_refused(c, err.code, &err, VIT_ERR_FORMAT, path, keys);
#endif
}

/* model.pth of data.pkl = pk (freed), nothing else but a version; loaded within bounds. */
static void pth_bounded(Ctx *c, Pk *pk, int deflate, const char *const *keys) {
    char path[1100];
    in_dir(c, path, sizeof path, "model.pth");
    const ZipEntry e[] = {{"archive/data.pkl", pk->b, pk->n, deflate, 0},
                          {"archive/version", "3\n", 2, 0, 0}};
    write_zip(path, e, 2);
    pk_free(pk);
    load_bounded(c, path, keys);
}

/* os.system or builtins.eval called by REDUCE on a command that would create a file:
 * refused by name, and the file is not there. */
static void pth_code_expect(Ctx *c, const char *global, const char *const *keys) {
    char marker[1100], cmd[1200];
    in_dir(c, marker, sizeof marker, "pwned");
    remove(marker);
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    Pk pk = {0};
    pk_str(&pk, "\x80\x02}(");
    pk_unicode(&pk, "cls_token");
    pk_str(&pk, global);
    pk_unicode(&pk, cmd);
    pk_str(&pk, "\x85Ru.");
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT, keys);
    check(access(marker, F_OK) != 0, "%s: the command in the checkpoint ran", c->def->input);
}

static void case_pth_os_system(Ctx *c) {
    pth_code_expect(c, "cos\nsystem\n", KEYS("'os.system'", "nothing was run"));
}

static void case_pth_builtins_eval(Ctx *c) {
    pth_code_expect(c, "cbuiltins\neval\n", KEYS("'builtins.eval'", "nothing was run"));
}

static void case_pth_whole_model(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02"
                "c__main__\nViT\n)\x81}b.");
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT,
               KEYS("'__main__.ViT'", "whole pickled model", "model.state_dict()"));
}

static void case_pth_legacy(Ctx *c) {
    static const uint8_t legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                     0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
    char path[1100];
    in_dir(c, path, sizeof path, "old.pth");
    write_bytes(path, legacy, sizeof legacy);
    load_expect(c, path, VIT_ERR_FORMAT, KEYS("legacy format", "torch.save"));
}

static void case_pth_storage_short(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 1000, 0, (int32_t[2]){10, 100},
                  (int32_t[2]){100, 1});
    pth_expect(c, &pk, 40, 0, VIT_ERR_FORMAT,
               KEYS("'archive/data/0' holds 40 bytes", "the pickle says 4000"));
}

static void case_pth_offset_past_end(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 10, 8, (int32_t[2]){2, 2}, (int32_t[2]){2, 1});
    pth_expect(c, &pk, 40, 0, VIT_ERR_FORMAT,
               KEYS("tensor 'cls_token'", "[8, 12)", "past the end of its storage", "10 elements"));
}

static void case_pth_not_contiguous(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 4, 0, (int32_t[2]){2, 2}, (int32_t[2]){1, 2});
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT, KEYS("tensor 'cls_token'", "not contiguous"));
}

static void case_pth_zip_bomb(Ctx *c) {
    Pk pk = {0}; /* 20 M floats: 80 MiB of zeros, deflated to ~80 KB */
    pk_state_dict(&pk, "cls_token", "FloatStorage", 20 << 20, 0, (int32_t[2]){1, 20 << 20},
                  (int32_t[2]){20 << 20, 1});
    pth_expect(c, &pk, (size_t)80 << 20, 1, VIT_ERR_FORMAT,
               KEYS("'archive/data/0' inflates to 83886080 bytes", "zip bomb"));
}

static void case_pth_wrong_dtype(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "LongStorage", 4, 0, (int32_t[2]){1, 4}, (int32_t[2]){4, 1});
    pth_expect(c, &pk, 32, 0, VIT_ERR_FORMAT, KEYS("tensor 'cls_token'", "dtype I64"));
}

static void case_pth_unknown_storage(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "ComplexFloatStorage", 4, 0, (int32_t[2]){1, 4},
                  (int32_t[2]){4, 1});
    pth_expect(c, &pk, 32, 0, VIT_ERR_FORMAT, KEYS("'torch.ComplexFloatStorage'"));
}

static void case_pth_truncated(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 64, 0, (int32_t[2]){1, 64},
                  (int32_t[2]){64, 1});
    char path[1100];
    in_dir(c, path, sizeof path, "cut.pth");
    float data[64] = {0};
    write_pth(path, &pk, data, sizeof data, 0);
    pk_free(&pk);
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    if (!check(b != NULL, "%s: cannot read back", path)) return;
    write_bytes(path, b, n / 2);
    free(b);
    load_expect(c, path, VIT_ERR_FORMAT, KEYS("cut.pth", "not a readable zip"));
}

static void case_pth_no_layout(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "my_token", "FloatStorage", 4, 0, (int32_t[2]){1, 4}, (int32_t[2]){4, 1});
    pth_expect(c, &pk, 16, 0, VIT_ERR_SHAPE,
               KEYS("tensor 'cls_token' is missing", "my_token [1, 4]", "--layout FILE"));
}

/* --- the cases: hostile checkpoints (issue 34) -------------------------------------- */

/* {'model': d, 'state_dict': d} where d is the dict itself (its memo entry): a search of
 * the wrappers that follows every key never ends. */
static void case_pth_dict_cycle(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02}");
    pk_memo(&pk, 'r', 0);
    pk_str(&pk, "(");
    pk_unicode(&pk, "model");
    pk_memo(&pk, 'j', 0);
    pk_unicode(&pk, "state_dict");
    pk_memo(&pk, 'j', 0);
    pk_str(&pk, "u.");
    pth_bounded(c, &pk, 0, KEYS("no state dict in the checkpoint"));
}

/* 60 levels of dicts, each holding the one below under 'model' and 'state_dict', the
 * last empty: 2^60 paths through 60 dicts. */
static void case_pth_dict_dag(Ctx *c) {
    enum { LEVELS = 60 };
    Pk pk = {0};
    pk_str(&pk, "\x80\x02}");
    pk_memo(&pk, 'r', 0);
    pk_str(&pk, "0");
    for (uint32_t k = 1; k < LEVELS; k++) {
        pk_str(&pk, "}");
        pk_memo(&pk, 'r', k);
        pk_str(&pk, "(");
        pk_unicode(&pk, "model");
        pk_memo(&pk, 'j', k - 1);
        pk_unicode(&pk, "state_dict");
        pk_memo(&pk, 'j', k - 1);
        pk_str(&pk, "u0");
    }
    pk_memo(&pk, 'j', LEVELS - 1);
    pk_str(&pk, ".");
    pth_bounded(c, &pk, 0, KEYS("no state dict in the checkpoint"));
}

/* VIT_MAX_TENSORS tensors, each of its own storage (the pickle deflated: ~300 KB; what
 * repeats memo'd, as torch.save would): the first 65535 empty, the last of one element in
 * a storage whose entry is missing. Found by a linear search each, the storages cost
 * 65536^2 / 2 key comparisons. */
static void case_pth_many_storages(Ctx *c) {
    enum { N = 65536 };
    Pk pk = {0};
    char key[16];
    pk_str(&pk, "\x80\x02}(");
    for (int i = 0; i < N; i++) {
        int last = i == N - 1;
        snprintf(key, sizeof key, "t%d", i);
        pk_unicode(&pk, key);
        if (i == 0) { /* memo 1: the rebuilder, 2: 'storage', 3: the type, 4: 'cpu' */
            pk_str(&pk, "ctorch._utils\n_rebuild_tensor_v2\nq\x01((");
            pk_unicode(&pk, "storage");
            pk_str(&pk, "q\x02"
                        "ctorch\nFloatStorage\nq\x03");
        } else {
            pk_str(&pk, "h\x01((h\x02h\x03");
        }
        snprintf(key, sizeof key, "%d", i);
        pk_unicode(&pk, key);
        if (i == 0) { /* 4: 'cpu', 5: 0, 6: (0,), 7: (1,) */
            pk_unicode(&pk, "cpu");
            pk_str(&pk, "q\x04");
            pk_int(&pk, 0);
            pk_str(&pk, "q\x05tQh\x05");
            pk_ints(&pk, 1, (int32_t[1]){0});
            pk_str(&pk, "q\x06");
            pk_ints(&pk, 1, (int32_t[1]){1});
            pk_str(&pk, "q\x07tR");
        } else if (!last) {
            pk_str(&pk, "h\x04h\x05tQh\x05h\x06h\x07tR");
        } else { /* numel 1, size (1,) */
            pk_str(&pk, "h\x04");
            pk_int(&pk, 1);
            pk_str(&pk, "tQh\x05h\x07h\x07tR");
        }
    }
    pk_str(&pk, "u.");
    pth_bounded(c, &pk, 1, KEYS("entry 'archive/data/65535' is missing"));
}

/* data.pkl of 8 M opcodes (")0": an empty tuple, popped) deflated into a 16 KB file: at
 * ~240 bytes a value, 2 GB. */
static void case_pth_pickle_inflate(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02");
    pk_repeat(&pk, ")0", (size_t)8 << 20);
    pk_str(&pk, "}.");
    pth_bounded(c, &pk, 1, KEYS("data.pkl inflates to 16777220 bytes", "refused before inflating"));
}

/* data.pkl of 65 MiB of "N0" (None, popped), deflated into a ~70 KB file: over the 64 MiB a
 * data.pkl may have, refused by its size in the zip's directory before anything is read. */
static void case_pth_pickle_too_long(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02");
    pk_repeat(&pk, "N0", (size_t)65 << 19);
    pk_str(&pk, "}.");
    pth_bounded(c, &pk, 1, KEYS("data.pkl is 68157444 bytes, expected 1 to 67108864"));
}

/* A 41 KB data.pkl, stored: a list of 8192 pairs (one memo'd tuple), then 4000 times
 * OrderedDict(that list): each REDUCE of 6 bytes makes a dict of 8192 items, 4000 of them
 * 0.5 GB of item arrays. */
static void case_pth_pickle_values(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02"
                "ccollections\nOrderedDict\nq\x01"
                "0");
    pk_unicode(&pk, "k");
    pk_str(&pk, "N\x86q\x02"
                "0(");
    pk_repeat(&pk, "h\x02", 8192);
    pk_str(&pk, "l\x85q\x03"
                "0");
    pk_repeat(&pk, "h\x01h\x03R0", 4000);
    pk_str(&pk, "}.");
    pth_bounded(c, &pk, 0, KEYS("data.pkl makes more values than", "refused"));
}

/* Two storages of 40 MiB of zeros, deflated (~80 KB), beside 1.5 MB of stored padding:
 * 80 MiB is not 16x the whole file (+ 64 MiB), but it is 1000x the storages' entries. */
static void case_pth_padding_bomb(Ctx *c) {
    enum { NUMEL = 10 << 20, PAD = 1536 << 10 };
    Pk pk = {0};
    pk_str(&pk, "\x80\x02}(");
    for (int s = 0; s < 2; s++) {
        pk_unicode(&pk, s ? "pos_embed" : "cls_token");
        pk_str(&pk, "ctorch._utils\n_rebuild_tensor_v2\n((");
        pk_unicode(&pk, "storage");
        pk_str(&pk, "ctorch\nFloatStorage\n");
        pk_unicode(&pk, s ? "1" : "0");
        pk_unicode(&pk, "cpu");
        pk_int(&pk, NUMEL);
        pk_str(&pk, "tQ");
        pk_int(&pk, 0);
        pk_ints(&pk, 2, (int32_t[2]){1, NUMEL});
        pk_ints(&pk, 2, (int32_t[2]){NUMEL, 1});
        pk_str(&pk, "tR");
    }
    pk_str(&pk, "u.");
    uint8_t *zeros = calloc((size_t)NUMEL * 4, 1);
    if (!zeros) exit(2);
    const ZipEntry e[] = {{"archive/data.pkl", pk.b, pk.n, 0, 0},
                          {"archive/data/0", zeros, (size_t)NUMEL * 4, 1, 0},
                          {"archive/data/1", zeros, (size_t)NUMEL * 4, 1, 0},
                          {"archive/padding", zeros, PAD, 0, 0},
                          {"archive/version", "3\n", 2, 0, 0}};
    char path[1100];
    in_dir(c, path, sizeof path, "padded.pth");
    write_zip(path, e, 5);
    free(zeros);
    pk_free(&pk);
    load_bounded(c, path, KEYS("the storages inflate to 83886080 bytes", "zip bomb"));
}

/* A stored storage whose bytes no longer match the CRC-32 in the zip's directory: one
 * byte changed, as a damaged download would. */
static void case_pth_crc_mismatch(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 16, 0, (int32_t[2]){1, 16},
                  (int32_t[2]){16, 1});
    uint8_t data[64];
    for (int i = 0; i < 64; i++) data[i] = (uint8_t)(i * 7 + 1);
    char path[1100];
    in_dir(c, path, sizeof path, "damaged.pth");
    write_pth(path, &pk, data, sizeof data, 0);
    pk_free(&pk);
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    if (!check(b != NULL, "%s: cannot read back", path)) return;
    uint8_t *at = NULL;
    for (size_t i = 0; !at && i + sizeof data <= n; i++)
        if (!memcmp(b + i, data, sizeof data)) at = b + i;
    if (check(at != NULL, "%s: the storage's bytes are in the file", path)) at[10] ^= 0x40;
    write_bytes(path, b, n);
    free(b);
    load_expect(c, path, VIT_ERR_FORMAT,
                KEYS("entry 'archive/data/0': CRC-32 mismatch", "the download is damaged"));
}

/* Every entry encrypted (zip -e), as torch.load cannot read either. */
static void case_pth_encrypted(Ctx *c) {
    Pk pk = {0};
    pk_state_dict(&pk, "cls_token", "FloatStorage", 4, 0, (int32_t[2]){1, 4}, (int32_t[2]){4, 1});
    float data[4] = {1, 2, 3, 4};
    const ZipEntry e[] = {{"archive/data.pkl", pk.b, pk.n, 0, 1},
                          {"archive/byteorder", "little", 6, 0, 1},
                          {"archive/data/0", data, sizeof data, 0, 1},
                          {"archive/version", "3\n", 2, 0, 1}};
    char path[1100];
    in_dir(c, path, sizeof path, "secret.pth");
    write_zip(path, e, 4);
    pk_free(&pk);
    load_expect(c, path, VIT_ERR_FORMAT,
                KEYS("entry 'archive/byteorder' is encrypted", "plain torch.save zips"));
}

/* GLOBAL "collections\0os\nOrderedDict\n": compared as a C string, the module would read
 * as "collections". */
static void case_pth_global_nul(Ctx *c) {
    static const char od[] = "ccollections\0os\nOrderedDict\n";
    Pk pk = {0};
    pk_state_dict_of(&pk, "cls_token", "FloatStorage", 4, 0, (int32_t[2]){1, 4}, (int32_t[2]){4, 1},
                     od, sizeof od - 1);
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT, KEYS("GLOBAL at byte", "a NUL byte"));
}

/* STACK_GLOBAL of the strings "collections" and "OrderedDict\0os" (13 + 1 + 2 bytes). */
static void case_pth_stack_global_nul(Ctx *c) {
    static const char od[] = "\x8c\x0b"
                             "collections\x8c\x0e"
                             "OrderedDict\0os\x93";
    Pk pk = {0};
    pk_state_dict_of(&pk, "cls_token", "FloatStorage", 4, 0, (int32_t[2]){1, 4}, (int32_t[2]){4, 1},
                     od, sizeof od - 1);
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT, KEYS("STACK_GLOBAL at byte", "a NUL byte"));
}

/* A GLOBAL whose module is terminal escapes: OSC 0 (the window title), ED (clear the
 * screen), SGR, OSC 52 (set the clipboard), each ended by BEL. The message names the
 * global with every control byte escaped: nothing below 0x20 but '\n', no DEL.
 * (vit_set_error escapes them: issue 34, on main.) */
static void case_pth_global_ansi(Ctx *c) {
    Pk pk = {0};
    pk_str(&pk, "\x80\x02"
                "c\x1b]0;OWNED\x07\x1b[2J\x1b[1;31m\x1b]52;c;b3duZWQ=\x07\x7fos\nsystem\n"
                ")R.");
    pth_expect(c, &pk, 16, 0, VIT_ERR_FORMAT, KEYS("names the global", "\\x1b"));
    int clean = 1;
    for (const char *s = c->msg; *s; s++)
        clean &= ((unsigned char)*s >= 0x20 || *s == '\n') && *s != 0x7f;
    check(clean, "%s: the message holds raw control bytes: %s", c->def->input, c->msg);
}

/* --- CLIP's vocabulary and text ------------------------------------------------ */

/* bytes_to_unicode's symbol of byte b (OpenAI's simple_tokenizer.py) as UTF-8 in s, JSON-
 * escaped when json. */
static void byte_symbol(char *s, int b, int json) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE, n = 0;
    for (int i = 0; i < b; i++)
        n += !((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE);
    unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n;
    if (json && (cp == '"' || cp == '\\'))
        s[0] = '\\', s[1] = (char)cp, s[2] = 0;
    else if (cp < 0x80)
        s[0] = (char)cp, s[1] = 0;
    else
        s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 63)), s[2] = 0;
}

/* A tiny Hugging Face vocabulary in c->dir: vocab.json with the 512 byte symbols, "ab</w>",
 * <|startoftext|> and <|endoftext|> (515 ids); merges.txt with "#version: 0.2", "a b</w>"
 * and `extra` (NULL: none) as its third line. */
static void write_tiny_vocab(Ctx *c, const char *extra) {
    char path[1100], sym[8];
    size_t cap = 32768, n = 0;
    char *js = malloc(cap);
    if (!js) exit(2);
    n += (size_t)snprintf(js + n, cap - n, "{");
    for (int i = 0; i < 512; i++) {
        byte_symbol(sym, i & 255, 1);
        n += (size_t)snprintf(js + n, cap - n, "\"%s%s\": %d, ", sym, i < 256 ? "" : "</w>", i);
    }
    n += (size_t)snprintf(js + n, cap - n,
                          "\"ab</w>\": 512, \"<|startoftext|>\": 513, \"<|endoftext|>\": 514}");
    in_dir(c, path, sizeof path, "vocab.json");
    write_bytes(path, js, n);
    n = (size_t)snprintf(js, cap, "#version: 0.2\na b</w>\n%s%s", extra ? extra : "",
                         extra ? "\n" : "");
    in_dir(c, path, sizeof path, "merges.txt");
    write_bytes(path, js, n);
    free(js);
}

static void vocab_expect(Ctx *c, const char *path, VitStatus want, const char *file,
                         const char *const *keys) {
    VitTokenizer *tok = NULL;
    VitError err = {0};
    VitStatus rc = vit_tokenizer_load(&tok, path, &err);
    check_err(rc, &err, want, file, keys, c->def->input);
    check(rc != VIT_OK || tok, "%s: a tokenizer when it loads", c->def->input);
    c->done = 1, c->rc = rc;
    snprintf(c->msg, sizeof c->msg, "%s", rc == VIT_OK ? "" : err.msg);
    vit_tokenizer_free(tok);
}

/* OpenAI's file (gzip): "#version" and n merges of two byte symbols; cut to `keep` bytes of
 * the compressed file (0: whole). */
static void write_gz_vocab(Ctx *c, const char *path, int n, size_t keep) {
    char tmp[1100], a[8], b[8];
    in_dir(c, tmp, sizeof tmp, "whole.gz");
    gzFile f = gzopen(tmp, "wb");
    if (!f) exit(2);
    gzprintf(f, "\"bpe_simple_vocab_16e6.txt#version: 0.2\n");
    for (int i = 0; i < n; i++) { /* distinct pairs of byte symbols ("!" .. "~") */
        byte_symbol(a, '!' + i % 90, 0), byte_symbol(b, '!' + i / 90 % 90, 0);
        gzprintf(f, "%s %s\n", a, b);
    }
    gzclose(f);
    size_t len;
    uint8_t *data = read_bytes(tmp, &len);
    if (!data) exit(2);
    write_bytes(path, data, keep ? keep : len);
    free(data);
}

static void case_vocab_missing(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "bpe_simple_vocab_16e6.txt.gz");
    vocab_expect(c, path, VIT_ERR_IO, "bpe_simple_vocab_16e6.txt.gz", KEYS("cannot open"));
}

static void case_vocab_not_gzip(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "bpe_simple_vocab_16e6.txt.gz");
    write_bytes(path, "a b\nab c\n", 9);
    vocab_expect(c, path, VIT_ERR_FORMAT, "bpe_simple_vocab_16e6.txt.gz", KEYS("not a gzip file"));
}

static void case_vocab_gz_truncated(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "bpe_simple_vocab_16e6.txt.gz");
    write_gz_vocab(c, path, 4000, 300);
    vocab_expect(c, path, VIT_ERR_FORMAT, "bpe_simple_vocab_16e6.txt.gz",
                 KEYS("corrupt or cut short"));
}

static void case_vocab_gz_short(Ctx *c) {
    char path[1100];
    in_dir(c, path, sizeof path, "bpe_simple_vocab_16e6.txt.gz");
    write_gz_vocab(c, path, 3, 0);
    vocab_expect(c, path, VIT_ERR_FORMAT, "bpe_simple_vocab_16e6.txt.gz",
                 KEYS("3 merges", "48894"));
}

static void case_merges_one_symbol(Ctx *c) {
    write_tiny_vocab(c, "ab");
    vocab_expect(c, c->dir, VIT_ERR_FORMAT, "merges.txt", KEYS("line 3", "two symbols"));
}

static void case_merges_unknown_symbol(Ctx *c) {
    write_tiny_vocab(c, "\xe4\xb8\x80 x");
    vocab_expect(c, c->dir, VIT_ERR_FORMAT, "merges.txt", KEYS("line 3", "no earlier line"));
}

static void case_merges_missing(Ctx *c) {
    char path[1100];
    write_tiny_vocab(c, NULL);
    in_dir(c, path, sizeof path, "merges.txt");
    remove(path);
    in_dir(c, path, sizeof path, "vocab.json");
    vocab_expect(c, path, VIT_ERR_IO, "vocab.json", KEYS("merges.txt side by side"));
}

static void case_vocab_json_not_object(Ctx *c) {
    char path[1100];
    write_tiny_vocab(c, NULL);
    in_dir(c, path, sizeof path, "vocab.json");
    write_bytes(path, "[1, 2, 3]", 9);
    vocab_expect(c, c->dir, VIT_ERR_FORMAT, "vocab.json", KEYS("not a JSON object"));
}

/* vit_tokenize of text with the tiny vocabulary: refused with `keys` (want != VIT_OK), or
 * the ids [SOT, ids..., EOT] of want_ids. */
static void text_expect(Ctx *c, const char *text, VitStatus want, const char *const *keys,
                        const int *want_ids, int n_want) {
    VitTokenizer *tok = NULL;
    VitError err = {0};
    write_tiny_vocab(c, NULL);
    if (!check(vit_tokenizer_load(&tok, c->dir, &err) == VIT_OK, "the tiny vocabulary: %s",
               err.msg))
        return;
    int ids[VIT_TEXT_CONTEXT], n = 0, cut = 0;
    VitStatus rc = vit_tokenize(ids, &n, &cut, tok, text, VIT_TEXT_CONTEXT, &err);
    if (want != VIT_OK) {
        check_err(rc, &err, want, NULL, keys, c->def->input);
    } else {
        int same = rc == VIT_OK && n == n_want && !cut;
        for (int i = 0; same && i < n; i++) same = ids[i] == want_ids[i];
        check(same, "%s: %d ids", c->def->input, n);
    }
    c->done = 1, c->rc = rc;
    snprintf(c->msg, sizeof c->msg, "%s", rc == VIT_OK ? "" : err.msg);
    vit_tokenizer_free(tok);
}

static void case_text_empty(Ctx *c) {
    text_expect(c, "", VIT_ERR_ARG, KEYS("the text is empty"), NULL, 0);
}

static void case_text_whitespace(Ctx *c) {
    text_expect(c, " \t\n\xe3\x80\x80 ", VIT_ERR_ARG, KEYS("only whitespace"), NULL, 0);
}

static void case_text_controls(Ctx *c) {
    text_expect(c, "\x01\x1b[31m&#7;", VIT_ERR_ARG, KEYS("nothing is left"), NULL, 0);
}

static void case_text_invalid_utf8(Ctx *c) {
    text_expect(c, "caf\xe9 au lait", VIT_ERR_ARG, KEYS("not valid UTF-8", "0xE9 at offset 3"),
                NULL, 0);
}

static void case_text_too_long(Ctx *c) {
    char *t = malloc(20001);
    if (!t) exit(2);
    memset(t, 'a', 20000);
    t[20000] = 0;
    text_expect(c, t, VIT_ERR_ARG, KEYS("20000 bytes", "16384"), NULL, 0);
    free(t);
}

static void case_vocab_tiny(Ctx *c) {
    static const int want[] = {513, 512, 514}; /* ab</w>: the merge, between SOT and EOT */
    text_expect(c, "AB", VIT_OK, NULL, want, 3);
}

/* --- the table ------------------------------------------------------------- */

/* One line per case; CMake reads the names from the lines that start with CASE. */
#define CASE(name, input, works)                                                                   \
    { #name, input, works, case_##name }
static const Case cases[] = {
    /* clang-format off */
    CASE(weights_empty, "weights: a zero-byte file", NULL),
    CASE(weights_text, "weights: a text file named `.safetensors`", NULL),
    CASE(weights_directory, "weights: a directory", NULL),
    CASE(weights_unreadable, "weights: a file without read permission", NULL),
    CASE(header_length_zero, "header length 0", NULL),
    CASE(header_length_past_end, "header length 1000 in a 24-byte file", NULL),
    CASE(header_length_absurd, "header length 2^63", NULL),
    CASE(header_over_limit, "header length over `VIT_MAX_HEADER_BYTES`, in a file that holds it",
         NULL),
    CASE(header_invalid_json, "header that is not valid JSON (cut short)", NULL),
    CASE(header_not_object, "header that is JSON but not an object: `[1, 2, 3]`", NULL),
    CASE(tensor_not_object, "a tensor entry that is not an object: `\"cls_token\": [1, 1, 64]`",
         NULL),
    CASE(tensor_duplicate, "the same tensor name twice", NULL),
    CASE(too_many_tensors, "`VIT_MAX_TENSORS` + 1 header entries", NULL),
    CASE(dtype_unknown, "unknown dtype `F99`", NULL),
    CASE(offsets_reversed, "data_offsets reversed: `[8, 0]`", NULL),
    CASE(offsets_overlap, "two tensors' data_offsets overlap", NULL),
    CASE(offsets_past_end, "data_offsets past the end of the file", NULL),
    CASE(size_mismatch, "data_offsets size differs from shape x dtype size", NULL),
    CASE(shape_overflow, "shape whose element count overflows 64 bits", NULL),
    CASE(weights_nan, "a NaN among the weights (F32)", NULL),
    CASE(weights_inf_f16, "an infinity among the weights (F16)", NULL),
    CASE(qkv_rank_1d, "a tensor of the wrong rank: qkv weight 1-D", NULL),
    CASE(tensor_missing, "a required tensor missing", NULL),
    CASE(activations_huge, "256 KB of weights declaring 65537 tokens (16 GiB of attention)",
         NULL),
    CASE(layout_aliased_f16, "layout: one F16 tensor named for seven roles",
         "loads; the tensor is converted to F32 once and its roles share the copy"),
    CASE(layout_aliased_convert,
         "layout: tensors named for several roles each, converted (CLS token stored as [D])",
         "loads; the converted table holds an entry per role and block, each source tensor "
         "converted once"),
    CASE(layout_no_norm1, "layout: no tensor named for the blocks' first norm", NULL),
    CASE(layout_no_qkv, "layout: no tensor named for the blocks' attention", NULL),
    CASE(layout_no_fc2, "layout: no tensor named for the blocks' second MLP layer", NULL),
    CASE(layout_dist_bias_only, "layout: a distillation head's bias named, not its weight", NULL),
    CASE(layout_crop_zero, "layout: `\"preprocess\"` crops 1 px of a 1e300 px resize", NULL),
    CASE(clip_proj_zero_dim, "CLIP (OpenAI's names): `visual.proj` of shape [2^53, 0]", NULL),
    CASE(notebook_q_zero_dim, "notebook's per-head attention: queries of shape [0, 64]", NULL),
    CASE(qkv_3a_overflow, "notebook's per-head attention: 512 heads of [2^53, 0] (3 x 2^62 rows)",
         NULL),
    CASE(linear_patch_zero_dim, "notebook's linear patch embedding of shape [0, 3 x 2^50]", NULL),
    CASE(pth_os_system, "checkpoint: a `GLOBAL os system` called by REDUCE on a shell command", NULL),
    CASE(pth_builtins_eval, "checkpoint: a `GLOBAL builtins eval` called by REDUCE", NULL),
    CASE(pth_whole_model, "checkpoint: a whole pickled model (`torch.save(model)`)", NULL),
    CASE(pth_legacy, "checkpoint: PyTorch's legacy format (before 1.6)", NULL),
    CASE(pth_storage_short, "checkpoint: a storage of 1000 floats whose entry holds 40 bytes", NULL),
    CASE(pth_offset_past_end, "checkpoint: a tensor at offset 8 of a 10-element storage, 4 elements", NULL),
    CASE(pth_not_contiguous, "checkpoint: a transposed (non-contiguous) tensor", NULL),
    CASE(pth_zip_bomb, "checkpoint: a deflated storage of 80 MiB of zeros in an 80 KB file", NULL),
    CASE(pth_wrong_dtype, "checkpoint: the CLS token as int64 (LongStorage)", NULL),
    CASE(pth_unknown_storage, "checkpoint: a storage type vitlens does not read (complex)", NULL),
    CASE(pth_truncated, "checkpoint: a .pth cut in half", NULL),
    CASE(pth_no_layout, "checkpoint: names no layout matches", NULL),
    CASE(pth_dict_cycle, "checkpoint: a dict holding itself under `model` and `state_dict` (memo)", NULL),
    CASE(pth_dict_dag, "checkpoint: 60 levels of dicts, each holding the next under two wrapper keys", NULL),
    CASE(pth_many_storages, "checkpoint: 65536 tensors in 65536 storages (a 320 KB file)", NULL),
    CASE(pth_pickle_inflate, "checkpoint: a 16 KB file whose deflated data.pkl holds 8 M opcodes", NULL),
    CASE(pth_pickle_too_long, "checkpoint: a deflated data.pkl of 65 MiB, over the limit", NULL),
    CASE(pth_pickle_values, "checkpoint: a 41 KB data.pkl making 4000 dicts of 8192 items (memo)", NULL),
    CASE(pth_padding_bomb, "checkpoint: 80 MiB of zeros in two deflated storages beside 1.5 MB of padding", NULL),
    CASE(pth_crc_mismatch, "checkpoint: a storage whose bytes do not match its CRC-32", NULL),
    CASE(pth_encrypted, "checkpoint: a zip whose entries are encrypted", NULL),
    CASE(pth_global_nul, "checkpoint: `GLOBAL collections\\0os OrderedDict` (a NUL in the module)", NULL),
    CASE(pth_stack_global_nul, "checkpoint: `STACK_GLOBAL` of `collections` and `OrderedDict\\0os`", NULL),
    CASE(pth_global_ansi, "checkpoint: a GLOBAL named by terminal escapes (OSC 0, OSC 52, ED, BEL)", NULL),
    CASE(config_heads_string, "config.json: `\"num_heads\": \"four\"`", NULL),
    CASE(config_mean_two, "config.json: `mean` with 2 entries", NULL),
    CASE(config_eps_underflow, "config.json: `layer_norm_eps` 1e-90, 0 as a float", NULL),
    CASE(config_invalid_json, "config.json: invalid JSON (a missing comma)", NULL),
    CASE(labels_too_few, "labels file with 3 lines for 10 classes", NULL),
    CASE(vocab_missing, "CLIP vocabulary: a missing `bpe_simple_vocab_16e6.txt.gz`", NULL),
    CASE(vocab_not_gzip, "CLIP vocabulary: a text file named `.txt.gz`", NULL),
    CASE(vocab_gz_truncated, "CLIP vocabulary: a `.txt.gz` cut to its first 300 bytes", NULL),
    CASE(vocab_gz_short, "CLIP vocabulary: a whole `.txt.gz` of 3 merges", NULL),
    CASE(merges_one_symbol, "CLIP vocabulary: a `merges.txt` line of one symbol", NULL),
    CASE(merges_unknown_symbol, "CLIP vocabulary: a merge of a symbol no line made", NULL),
    CASE(merges_missing, "CLIP vocabulary: `vocab.json` without its `merges.txt`", NULL),
    CASE(vocab_json_not_object, "CLIP vocabulary: a `vocab.json` that is a list", NULL),
    CASE(vocab_tiny, "CLIP vocabulary: 515 ids in `vocab.json` + `merges.txt`; the text `AB`",
         "`[SOT, ab</w>, EOT]`: lower-cased, merged, the word's end marked"),
    CASE(text_empty, "CLIP text: empty", NULL),
    CASE(text_whitespace, "CLIP text: spaces, a tab, a newline, an ideographic space", NULL),
    CASE(text_controls, "CLIP text: control characters, a terminal escape, `&#7;`", NULL),
    CASE(text_invalid_utf8, "CLIP text: Latin-1 `café au lait`", NULL),
    CASE(text_too_long, "CLIP text: 20000 bytes", NULL),
    CASE(image_empty, "image: a zero-byte `.png`", NULL),
    CASE(image_text, "image: a text file named `.jpg`", NULL),
    CASE(image_directory, "image: a directory", NULL),
    CASE(image_unreadable, "image: a file without read permission", NULL),
    CASE(png_truncated, "PNG cut halfway through its pixel data", NULL),
    CASE(jpeg_huge_sof, "JPEG whose SOF header declares 60000x60000", NULL),
    CASE(png_huge_ihdr, "PNG whose IHDR declares 100000x100000", NULL),
    CASE(png_idat_past_end, "PNG whose IDAT chunk declares 1 GB in a 104-byte file (found by fuzzing)",
         NULL),
    CASE(png_inflate_bomb, "a 1x1 PNG whose image data inflates to 16 MiB (a 106 KB file)", NULL),
    CASE(jpeg_huffman_overflow, "JPEG whose Huffman table declares 304 codes (found by fuzzing)",
         NULL),
    CASE(jpeg_truncated, "JPEG cut in its image data", NULL),
    CASE(jpeg_many_scans, "progressive JPEG with 501 scans", NULL),
    CASE(webp_truncated, "WebP cut halfway", NULL),
    CASE(webp_huge, "WebP whose VP8L header declares 16384x16384", NULL),
    CASE(tiff_truncated, "TIFF cut halfway (its directory lost)", NULL),
    CASE(tiff_strips_cut, "TIFF whose strip is shorter than its directory says", NULL),
    CASE(tiff_huge, "TIFF whose directory declares 100000x100000", NULL),
    CASE(heic_truncated, "HEIC cut halfway", NULL),
    CASE(heic_huge, "HEIC whose ispe box declares 20000x20000", NULL),
    CASE(mp4_video, "an MP4 video (an ISO media file, as HEIF is)", NULL),
    CASE(pnm_huge_number, "PGM whose width has 40 digits (found by fuzzing)", NULL),
    CASE(pnm_truncated, "PGM cut in its pixel data (found by valgrind on a fuzzing input)", NULL),
    CASE(pic_truncated, "Softimage PIC cut in its pixel data", NULL),
    CASE(tga_truncated, "uncompressed TGA cut in its pixel data (found by valgrind on fuzzing inputs)",
         "loads; the missing pixels are black, as in stb_image's other formats"),
    CASE(hdr_truncated, "flat Radiance HDR cut in its pixel data (found by valgrind on fuzzing inputs)",
         "loads; the missing pixels are black"),
    CASE(image_long_strip, "a 2x12000 PNG at a 224 px input: 1.2 GB if resized whole",
         "preprocessed in 256 MB: only the 224 x 224 crop is resized"),
    CASE(image_tall_strip_squash, "a 2x500000 PGM squashed (`--whole`) to 224 px (found by fuzzing)",
         NULL),
    CASE(image_1x1, "a 1x1 PNG",
         "loads; the model sees its one colour over the whole input"),
    CASE(png_16bit, "a 16-bit RGB PNG", "loads as 8-bit RGB, the high byte of each sample"),
    CASE(png_16bit_grey, "a 16-bit grey PNG",
         "loads as RGB, the high byte in each channel (Pillow clips at 255 instead)"),
    CASE(png_grey, "an 8-bit grey PNG", "loads as RGB, grey copied to each channel"),
    CASE(png_rgba, "an RGBA PNG", "loads as RGB, alpha dropped"),
    CASE(png_empty_idat, "PNG with a zero-length IDAT chunk before its data (found by fuzzing)",
         "loads; the empty chunk is dropped"),
    CASE(pic, "a Softimage PIC", "loads as RGB"),
    CASE(pgm_16bit_grey, "a 16-bit grey PGM (found by fuzzing)",
         "loads as RGB, the high byte in each channel"),
    /* clang-format on */
};
#undef CASE
#define N_CASES (int)(sizeof cases / sizeof cases[0])

/* --- main ------------------------------------------------------------------ */

static int run_case(Ctx *c, const Case *def, const char *scratch) {
    memset(c, 0, sizeof *c);
    c->def = def;
    path_join(c->dir, sizeof c->dir, scratch, def->name);
    if (make_dir(c->dir) != 0) return check(0, "%s: cannot create %s", def->name, c->dir);
    def->run(c);
    if (!c->done && !c->skipped) return check(0, "%s: the case checked nothing", def->name);
    return 1;
}

/* The docs table row: | `case` | input | outcome | message |, the scratch
 * folder cut from the message so that only the file name is left. */
static void table_row(char *out, size_t n, const Ctx *c) {
    const Case *d = c->def;
    char msg[1024] = "", prefix[1100];
    snprintf(prefix, sizeof prefix, "%s/", c->dir);
    size_t k = 0;
    for (const char *s = c->msg; *s && k + 3 < sizeof msg;) {
        if (strncmp(s, prefix, strlen(prefix)) == 0) {
            s += strlen(prefix);
            continue;
        }
        if (*s == '|') msg[k++] = '\\';
        msg[k++] = *s++;
    }
    msg[k] = 0;
    if (d->works)
        snprintf(out, n, "| `%s` | %s | works | %s |", d->name, d->input, d->works);
    else
        snprintf(out, n, "| `%s` | %s | refused (%s) | `%s` |", d->name, d->input,
                 vit_status_name(c->rc), msg);
}

/* Does DOC hold the line `row`, or (prefix_only) a line starting with it? */
static int doc_has(const char *doc, const char *row, int prefix_only) {
    size_t n = strlen(row);
    for (const char *s = doc; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : NULL)
        if (strncmp(s, row, n) == 0 && (prefix_only || s[n] == '\n' || s[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    static Ctx ctx[128];
    _Static_assert(sizeof ctx / sizeof ctx[0] >= N_CASES, "ctx too small");
    if (argc >= 2 && strcmp(argv[1], "--registered") == 0) {
        int n_found = 0;
        for (int i = 0; i < N_CASES; i++) {
            int found = 0;
            for (int a = 2; a < argc; a++) found |= strcmp(argv[a], cases[i].name) == 0;
            check(found, "case %s is registered with CMake", cases[i].name);
            n_found += found;
        }
        check(n_found == argc - 2, "CMake registered %d names, %d of them cases", argc - 2,
              n_found);
        return t_finish("test_malformed --registered");
    }
    int markdown = argc == 3 && strcmp(argv[1], "--markdown") == 0;
    const char *doc_path = argc == 4 && strcmp(argv[1], "--doc") == 0 ? argv[2] : NULL;
    const char *scratch = markdown ? argv[2] : doc_path ? argv[3] : argv[1];
    const char *only = !markdown && !doc_path && argc == 3 ? argv[2] : NULL;
    if (argc < 2 || argc > 4 || (argc == 4 && !doc_path) || scratch[0] == '-') {
        fprintf(stderr,
                "usage: %s SCRATCH_DIR [CASE] | --markdown SCRATCH_DIR | --doc DOC SCRATCH_DIR "
                "| --registered CASE...\n",
                argv[0]);
        return 2;
    }
    if (make_dir(scratch) != 0) {
        fprintf(stderr, "cannot create %s\n", scratch);
        return 2;
    }
    int ran = 0, skipped = 0;
    for (int i = 0; i < N_CASES; i++) {
        if (only && strcmp(only, cases[i].name) != 0) continue;
        run_case(&ctx[i], &cases[i], scratch);
        ran++;
        skipped += ctx[i].skipped;
    }
    if (only && !ran) {
        fprintf(stderr, "no case named %s\n", only);
        return 2;
    }
    if (only && skipped) return 77; /* ctest: SKIP_RETURN_CODE */

    char row[2048];
    if (markdown)
        for (int i = 0; i < N_CASES; i++) {
            if (ctx[i].skipped) continue;
            table_row(row, sizeof row, &ctx[i]);
            fprintf(stderr, "%s\n", row);
        }
    if (doc_path) {
        size_t n;
        char *doc = (char *)read_bytes(doc_path, &n);
        if (!check(doc != NULL, "read %s", doc_path)) return t_finish("test_malformed --doc");
        char *z = realloc(doc, n + 1);
        if (!z) exit(2);
        doc = z;
        doc[n] = 0;
        for (int i = 0; i < N_CASES; i++) {
            if (ctx[i].skipped) { /* its row was written from a run as a user */
                snprintf(row, sizeof row, "| `%s` | ", cases[i].name);
                check(doc_has(doc, row, 1), "%s has a row for %s (skipped here)", doc_path,
                      cases[i].name);
                continue;
            }
            table_row(row, sizeof row, &ctx[i]);
            check(doc_has(doc, row, 0), "%s has the row, as the engine says it:\n%s", doc_path,
                  row);
        }
        free(doc);
    }
    printf("%d cases run, %d skipped\n", ran, skipped);
    return t_finish("test_malformed");
}
