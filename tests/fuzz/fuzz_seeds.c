/* fuzz_seeds.c - writes the seed corpora of the fuzz targets: small valid files
 * of every kind each target reads, made here rather than committed.
 *
 *   OUT/safetensors/  tiny timm ViTs: F32, F16, BF16, misaligned F32, a 2-block
 *                     backbone without head, patch 2 on a 3 x 3 grid
 *   OUT/config/       config.json in timm's and Hugging Face's layouts, labels files
 *   OUT/image/        PNG (RGB, grey, grey + alpha, RGBA, 16-bit), JPEG (baseline,
 *                     progressive, grey, CMYK, EXIF orientation 6), WebP (lossy,
 *                     lossless, alpha), TIFF (raw, LZW, deflate; grey; Orientation 8;
 *                     RGBA with unassociated alpha, contiguous and planar),
 *                     HEIC and AVIF (irot + EXIF; when libheif can encode them), BMP,
 *                     TGA (RLE and not), HDR, PNM (P5, P6, 8 and 16-bit), GIF, PSD,
 *                     PIC (raw and run-length)
 *   OUT/pickle_ops/   programs of choices for fuzz_pickle_ops: the empty one (a state
 *   OUT/layout/       dict of one tensor; timm's own names, F32) and a few others; and
 *                     one of each hostile class of issue 34 that the grammars reach
 *                     (class-*: a dict that holds itself, a DAG of wrappers, millions of
 *                     values from a small zip; zero x huge dims through the shipped
 *                     layouts' conversions), which fail the replays until the loader
 *                     refuses them in time
 *
 * Every seed is checked to load (a seed the engine refuses would only teach the
 * fuzzer the error path). usage: fuzz_seeds OUT; exit 0 on success. */
#include "encode.h"
#include "load/loader.h" /* Slot */
#include "testlib.h"

#include <stb_image_write.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *out_dir;
static int n_seeds, n_bad;

/* Remove the files a previous run left in OUT/kind (a seed since renamed, say). */
static void clear_kind(const char *kind) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, out_dir, kind);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        path_join(path, sizeof path, dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

static void seed(const char *kind, const char *name, const void *p, size_t n) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, out_dir, kind);
    path_join(path, sizeof path, dir, name);
    if (make_dir(dir) || write_bytes(path, p, n)) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
    n_seeds++;
}

static void seed_text(const char *kind, const char *name, const char *text) {
    seed(kind, name, text, strlen(text));
}

static void expect_ok(VitStatus rc, const VitError *err, const char *name) {
    if (rc == VIT_OK) return;
    fprintf(stderr, "fuzz_seeds: seed %s does not load: %s\n", name, err->msg);
    n_bad++;
}

/* --- safetensors ----------------------------------------------------------- */

static void seed_model(const char *name, const Model *m) {
    size_t n;
    uint8_t *b = model_bytes(m, &n);
    if (!b) exit(1);
    seed("safetensors", name, b, n);
    free(b);
    char path[1100], dir[1024];
    path_join(dir, sizeof dir, out_dir, "safetensors");
    path_join(path, sizeof path, dir, name);
    Vit vit;
    VitError err;
    VitLoadOptions opt = {.n_heads = 2}; /* as fuzz_safetensors loads them */
    expect_ok(vit_load(&vit, path, &opt, &err), &err, name);
    vit_free(&vit);
}

static void seeds_safetensors(void) {
    Model m;
    model_tiny(&m, 8, 1, 4, 2, 16, 3);
    seed_model("tiny_f32.safetensors", &m);
    model_set_dtype(&m, "F16");
    seed_model("tiny_f16.safetensors", &m);
    model_set_dtype(&m, "BF16");
    seed_model("tiny_bf16.safetensors", &m);
    model_tiny(&m, 8, 1, 4, 2, 16, 3);
    m.extra_pad = 1; /* F32 data not 4-aligned: copied */
    seed_model("tiny_misaligned.safetensors", &m);
    model_tiny(&m, 4, 2, 2, 3, 8, 0);
    seed_model("backbone_2blocks.safetensors", &m);
}

/* --- config.json and labels ------------------------------------------------ */

static void seeds_config(void) {
    static const char *const configs[][2] = {
        {"timm_config.json",
         "{\n  \"architecture\": \"vit_tiny_patch4\",\n  \"num_classes\": 3,\n"
         "  \"num_heads\": 2,\n  \"label_names\": [\"tench, Tinca tinca\", \"goldfish\", "
         "\"great white shark\"],\n  \"pretrained_cfg\": {\n    \"input_size\": [3, 8, 8],\n"
         "    \"crop_pct\": 0.9,\n    \"mean\": [0.5, 0.5, 0.5],\n"
         "    \"std\": [0.5, 0.5, 0.5]\n  }\n}\n"},
        {"hf_config.json",
         "{\"num_attention_heads\": 4, \"image_size\": 8, \"layer_norm_eps\": 1e-12,\n"
         " \"image_mean\": [0.485, 0.456, 0.406], \"image_std\": [0.229, 0.224, 0.225],\n"
         " \"id2label\": {\"0\": \"cat\", \"1\": \"dog\", \"2\": \"bird\"}}\n"},
        {"sizes_config.json", "{\"img_size\": [8, 8], \"n_heads\": 1, \"ln_eps\": 1e-6, "
                              "\"crop_pct\": 1.0, \"label_names\": [\"a\", \"b\", \"c\"]}"},
        {"minimal_config.json", "{\"num_heads\": 2}"},
        {"squash_config.json",
         "{\"pretrained_cfg\": {\"crop_mode\": \"squash\", \"crop_pct\": 1.0}, "
         "\"hidden_act\": \"gelu\", \"num_heads\": 2}"},
    };
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, out_dir, "config");
    Model m;
    model_tiny(&m, 8, 1, 4, 2, 16, 3);
    char model_path[1100];
    path_join(model_path, sizeof model_path, out_dir, "config_model.safetensors");
    if (model_write(&m, model_path)) exit(1);
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        seed_text("config", configs[i][0], configs[i][1]);
        path_join(path, sizeof path, dir, configs[i][0]);
        Vit vit;
        VitError err;
        VitLoadOptions opt = {.config_path = path};
        expect_ok(vit_load(&vit, model_path, &opt, &err), &err, configs[i][0]);
        vit_free(&vit);
    }
    remove(model_path);
    static const char *const labels[][2] = {
        {"synset_labels.txt", "n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius "
                              "auratus\nn01484850 great white shark, white shark\n"},
        {"plain_labels.txt", "cat\r\ndog\n\n  bird  \n"},
    };
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        seed_text("config", labels[i][0], labels[i][1]);
        path_join(path, sizeof path, dir, labels[i][0]);
        char(*names)[VIT_LABEL_BYTES];
        VitError err;
        expect_ok(vit_labels_load(&names, path, 3, &err), &err, labels[i][0]);
        free(names);
    }
}

/* --- images ---------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n;
} Buf;

static void buf_put(void *ctx, void *data, int size) {
    Buf *b = ctx;
    uint8_t *np = realloc(b->p, b->n + (size_t)size);
    if (!np) exit(1);
    memcpy(np + b->n, data, (size_t)size);
    b->p = np;
    b->n += (size_t)size;
}

static void seed_image(const char *name, const uint8_t *p, size_t n) {
    seed("image", name, p, n);
    char path[1100], dir[1024];
    path_join(dir, sizeof dir, out_dir, "image");
    path_join(path, sizeof path, dir, name);
    VitImage img;
    VitError err;
    expect_ok(vit_image_load(&img, path, &err), &err, name);
    vit_image_free(&img);
}

/* stb_image_write's writers, by kind: 0 PNG, 1 JPEG, 2 BMP, 3 TGA. */
static void seed_stbiw(const char *name, int kind, int w, int h, int comp) {
    uint8_t px[16 * 16 * 4];
    for (int i = 0; i < w * h * comp; i++) px[i] = (uint8_t)(i * 37 + (i / comp) * 11);
    Buf b = {0};
    int ok = kind == 0   ? stbi_write_png_to_func(buf_put, &b, w, h, comp, px, w * comp)
             : kind == 1 ? stbi_write_jpg_to_func(buf_put, &b, w, h, comp, px, 90)
             : kind == 2 ? stbi_write_bmp_to_func(buf_put, &b, w, h, comp, px)
                         : stbi_write_tga_to_func(buf_put, &b, w, h, comp, px);
    if (!ok) exit(1);
    seed_image(name, b.p, b.n);
    free(b.p);
}

/* A file from encode.c's encoders (NULL: that encoder is missing here; a HEIF one may be). */
static void seed_encoded(const char *name, uint8_t *file, size_t n, int required) {
    if (!file) {
        if (!required) return;
        fprintf(stderr, "fuzz_seeds: cannot encode %s\n", name);
        exit(1);
    }
    seed_image(name, file, n);
    free(file);
}

/* JPEG (libjpeg-turbo), WebP, TIFF and HEIF/AVIF: the decoders of engine/image/codecs.c. */
static void seeds_codecs(void) {
    uint8_t px[16 * 12 * 4];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7 + (i / 48) * 13);
    size_t n;
    uint8_t *f;
    f = enc_jpeg(&n, px, 16, 12, 3, 90, 0, 0);
    seed_encoded("baseline.jpg", f, n, 1);
    f = enc_jpeg(&n, px, 16, 12, 3, 75, 1, 0);
    seed_encoded("progressive.jpg", f, n, 1);
    f = enc_jpeg(&n, px, 11, 7, 1, 90, 0, 0);
    seed_encoded("grey_libjpeg.jpg", f, n, 1);
    f = enc_jpeg(&n, px, 9, 6, 4, 90, 0, 0);
    seed_encoded("cmyk.jpg", f, n, 1);
    f = enc_jpeg(&n, px, 12, 8, 3, 90, 0, 6);
    seed_encoded("exif6.jpg", f, n, 1);
    f = enc_webp(&n, px, 16, 12, 3, 0);
    seed_encoded("lossy.webp", f, n, 1);
    f = enc_webp(&n, px, 16, 12, 3, 1);
    seed_encoded("lossless.webp", f, n, 1);
    f = enc_webp(&n, px, 12, 12, 4, 0);
    seed_encoded("alpha.webp", f, n, 1);
    f = enc_tiff(&n, px, 16, 12, 3, 0, 1, 0);
    seed_encoded("rgb.tif", f, n, 1);
    f = enc_tiff(&n, px, 16, 12, 3, 0, 5, 0); /* LZW */
    seed_encoded("rgb_lzw.tif", f, n, 1);
    f = enc_tiff(&n, px, 10, 12, 1, 0, 8, 8); /* deflate, Orientation 8 */
    seed_encoded("grey_deflate.tif", f, n, 1);
    f = enc_tiff(&n, px, 16, 12, 4, 0, 1, 0); /* RGB + unassociated alpha */
    seed_encoded("rgba.tif", f, n, 1);
    f = enc_tiff(&n, px, 16, 12, 4, 1, 5, 0); /* the same, planes apart, LZW */
    seed_encoded("rgba_planar.tif", f, n, 1);
    f = enc_heif(&n, px, 16, 12, 0, 6, 1);
    seed_encoded("irot.heic", f, n, 0);
    f = enc_heif(&n, px, 16, 12, 1, 0, 0);
    seed_encoded("rgb.avif", f, n, 0);
}

static void seeds_image(void) {
    seeds_codecs();
    seed_stbiw("rgb.png", 0, 7, 5, 3);
    seed_stbiw("grey.png", 0, 5, 6, 1);
    seed_stbiw("grey_alpha.png", 0, 4, 3, 2);
    seed_stbiw("rgba.png", 0, 6, 4, 4);
    seed_stbiw("rgb.jpg", 1, 16, 9, 3);
    seed_stbiw("grey.jpg", 1, 9, 8, 1);
    seed_stbiw("rgb.bmp", 2, 5, 3, 3);
    seed_stbiw("rgba.bmp", 2, 3, 3, 4);
    seed_stbiw("rgb_rle.tga", 3, 6, 2, 3);
    stbi_write_tga_with_rle = 0;
    seed_stbiw("grey.tga", 3, 3, 4, 1);

    uint8_t s16[3 * 2 * 3 * 2];
    for (size_t i = 0; i < sizeof s16; i++) s16[i] = (uint8_t)(i * 29);
    size_t n;
    uint8_t *png = test_png(&n, 3, 2, 16, 2, s16);
    seed_image("rgb16.png", png, n);
    free(png);
    png = test_png(&n, 3, 2, 16, 0, s16);
    seed_image("grey16.png", png, n);
    free(png);

    float hdr[4 * 3 * 3];
    for (int i = 0; i < 4 * 3 * 3; i++) hdr[i] = (float)i / 7.0f;
    Buf b = {0};
    if (!stbi_write_hdr_to_func(buf_put, &b, 4, 3, 3, hdr)) exit(1);
    seed_image("rgb.hdr", b.p, b.n);
    free(b.p);

    static const char p6[] = "P6\n# vitlens seed\n3 2\n255\n"
                             "\xff\x00\x00\x00\xff\x00\x00\x00\xff\x10\x20\x30\x40\x50\x60\x70\x80"
                             "\x90";
    seed_image("rgb.ppm", (const uint8_t *)p6, sizeof p6 - 1);
    static const char p5[] = "P5 2 2 255\n\x00\x40\x80\xff";
    seed_image("grey.pgm", (const uint8_t *)p5, sizeof p5 - 1);
    static const char p5_16[] = "P5 2 1 65535\n\x12\x34\xff\x00";
    seed_image("grey16.pgm", (const uint8_t *)p5_16, sizeof p5_16 - 1);
    static const char p6_16[] = "P6 1 1 1023\n\x03\xff\x01\x00\x00\x10";
    seed_image("rgb16.ppm", (const uint8_t *)p6_16, sizeof p6_16 - 1);
    /* the classic 1 x 1 GIF: a 2-colour global table, LZW minimum code size 2 */
    static const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a', 1, 0,    1, 0, 0x80, 0,
                                  0,   255, 255, 255, 0,   0,   0, ',',  0, 0, 0,    0,
                                  1,   0,   1,   0,   0,   2,   2, 0x44, 1, 0, ';'};
    seed_image("one.gif", gif, sizeof gif);
    /* PSD: 2 x 2 RGB, 8 bits, raw planes */
    static const uint8_t psd[] = {
        '8', 'B', 'P', 'S', 0, 1,       /* signature, version 1 */
        0,   0,   0,   0,   0, 0,       /* reserved */
        0,   3,                         /* channels */
        0,   0,   0,   2,   0, 0, 0, 2, /* height, width */
        0,   8,   0,   3,               /* depth, mode RGB */
        0,   0,   0,   0,   0, 0, 0, 0, /* colour mode data, image resources: empty */
        0,   0,   0,   0,   0, 0,       /* layers and masks: empty; compression: raw */
        255, 0,   0,   255,             /* R plane */
        0,   255, 0,   255,             /* G plane */
        0,   0,   255, 255};            /* B plane */
    seed_image("rgb.psd", psd, sizeof psd);
    /* Softimage PIC: 3 x 2 RGB, uncompressed; 4 x 2 with mixed run-length packets (per
     * row: a run of 2, 0x81, then 2 literals, 0x01), the packet type patched to 2 */
    uint8_t pic_rgb[3 * 2 * 3];
    for (size_t i = 0; i < sizeof pic_rgb; i++) pic_rgb[i] = (uint8_t)(i * 13);
    uint8_t *pic = test_pic(&n, 3, 2, pic_rgb, sizeof pic_rgb);
    seed_image("rgb.pic", pic, n);
    free(pic);
    static const uint8_t rle[22] = {0x81, 255, 0, 0, 0x01, 0, 255, 0, 0, 0, 255,
                                    0x81, 9,   8, 7, 0x01, 6, 5,   4, 3, 2, 1};
    pic = test_pic(&n, 4, 2, rle, sizeof rle);
    pic[106] = 2;
    seed_image("rle.pic", pic, n);
    free(pic);
}

/* Texts for CLIP's tokenizer: words, contractions, digits, accents, emoji, entities,
 * full-width letters, ligatures, the special tokens' text; ftfy's steps (references it
 * decodes until none is left, C1 controls, half-width katakana, terminal escapes, a '<'
 * that turns its HTML step off for the lines after it). */
static void seeds_tokenize(void) {
    static const char *const texts[] = {
        "a photo of a cat.",
        "It's the RED umbrella, isn't it?",
        "3.14 x86_64 ViT-B/16 224px",
        "caf\xc3\xa9 na\xc3\xafve S\xc3\xa3o Paulo \xce\x9f\xce\x94\xce\x9f\xce\xa3",
        "\xf0\x9f\x98\x80\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb \xe6\x9d\xb1\xe4\xba\xac",
        "&amp;lt; &#233; &#x1F600; &nbsp;&quot;",
        "\xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c \xef\xac\x81sh",
        "<|startoftext|>two<|endoftext|> three",
        " \t\n  spaced \xe2\x80\x83 out  ",
        "&amp;amp;amp; &EACUTE; &notit; &copy2024 &#128; &#0; &#xD800; \x1b[1;32mgreen\x1b[0m",
        "\xc2\x93quoted\xc2\x94 \xc2\x85 \xc5\x89 \xef\xbe\x8a\xef\xbe\x9f\xef\xbe\x9d\r\n",
        "a < b &amp;lt; c\n&lt;"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char name[32];
        snprintf(name, sizeof name, "text_%zu.txt", i);
        seed_text("tokenize", name, texts[i]);
    }
}

/* The structured targets read their input as choices (fuzzlib.h); an input's end reads as
 * choice 0, the usual path, so the empty input is a complete program. The others: the
 * first choices varied (fuzz_layout's first picks the family), 16 bytes long so that
 * libFuzzer's first mutations (up to the longest seed's length) reach 16 choices. */
static void seeds_structured(void) {
    static const char *const kinds[] = {"pickle_ops", "layout"};
    static const uint8_t progs[][16] = {{1, 0, 0, 0}, {2, 1, 3, 0}, {5, 3, 2, 7}, {9, 0, 4, 1}};
    for (int k = 0; k < 2; k++) {
        seed(kinds[k], "empty", "", 0);
        for (size_t i = 0; i < sizeof progs / sizeof *progs; i++) {
            char name[32];
            snprintf(name, sizeof name, "prog_%zu", i);
            seed(kinds[k], name, progs[i], sizeof progs[i]);
        }
    }
}

/* fuzz_pickle_ops's and fuzz_layout's programs of the hostile classes: the choices in the
 * order the targets read them (fuzz_pickle_ops.c, fuzz_layout.c; past the end, 0s). */
extern const char *const vit_layout_files[];
extern const int vit_n_layouts;

static uint8_t family(const char *name) {
    for (int i = 0; i < vit_n_layouts; i++)
        if (!strcmp(vit_layout_files[i], name)) return (uint8_t)i;
    fprintf(stderr, "fuzz_seeds: no shipped layout %s\n", name);
    exit(1);
}

static void seeds_classes(void) {
    /* data.pkl alone: {'model': itself, 'state_dict': itself} (mode 0, PROTO; a dict, memo
       put 0; SETITEMS of 2 pairs, each: key, its str, a memo get of the open dict) */
    static const uint8_t self_dict[] = {0, 0, 2, 1, 0, 0, 0, 1, 0, 0, 6,
                                        6, 0, 0, 0, 1, 0, 6, 6, 0, 0, 0};
    /* data.pkl alone: the chain's default, 32 dicts on None, each {'state_dict': below,
       'model_state_dict': below}: 2^32 paths to the bottom */
    static const uint8_t dag[] = {0, 0, 16};
    /* a deflated zip (mode 15), the repeat's default: EMPTY_TUPLE POP 2^23 times, then a
       state dict: 16 MB of opcodes and 2^23 values (2 GB) from a zip of 72 KB */
    static const uint8_t values[] = {15, 0, 17};
    seed("pickle_ops", "class-self-dict", self_dict, sizeof self_dict);
    seed("pickle_ops", "class-wrapper-dag", dag, sizeof dag);
    seed("pickle_ops", "class-values-zip", values, sizeof values);
    /* family, heads, dtype F32, .pth or not, 1 edit (a converted role: 0 the image
       projection, 1 the patch embedding, 2 the queries; scope, not removed, its ndim, the
       zero dim: 0 the last, the other dim: 0 2^53, 1 2^61, 3 3 * 2^40), then no --layout:
       the shipped layouts' detection */
    const uint8_t proj[] = {family("clip-openai"), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2};
    const uint8_t heads[] = {family("notebook-heads"), 0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 0, 1, 2};
    const uint8_t patch[] = {family("notebook-linear"), 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 3, 2};
    /* visual.proj [2^53, 0] transposed; every per-head query, key, value [2^61, 0] (a .pth:
       3 * A over int64); linear_patching.weight [0, 3 * 2^40] (K * 4 bytes of a row) */
    seed("layout", "class-clip-proj-2p53x0", proj, sizeof proj);
    seed("layout", "class-heads-qkv-2p61x0", heads, sizeof heads);
    seed("layout", "class-linear-patch-0x3p40", patch, sizeof patch);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds OUT_DIR\n");
        return 2;
    }
    out_dir = argv[1];
    if (make_dir(out_dir)) return 1;
    clear_kind("safetensors");
    clear_kind("config");
    clear_kind("image");
    clear_kind("tokenize");
    clear_kind("pickle_ops");
    clear_kind("layout");
    seeds_safetensors();
    seeds_config();
    seeds_image();
    seeds_tokenize();
    seeds_structured();
    seeds_classes();
    printf("fuzz_seeds: %d seeds in %s, %d that do not load\n", n_seeds, out_dir, n_bad);
    return n_bad ? 1 : 0;
}
