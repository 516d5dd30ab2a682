/* test_loader.c - vit_load on tiny timm ViTs written here, then on every kind
 * of malformed .safetensors: each must give the right status and a message
 * naming the file and what is wrong, never a crash (run it under ASan/UBSan).
 *
 * usage: test_loader SCRATCH_DIR   (files are written there and left for inspection) */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[900]; /* scratch root */

/* Load `path`; expect status `want` and a message naming the file's base name
 * and every key. Also: err.code agrees, the Vit is zeroed after a failure, and
 * a load with err == NULL returns the same status. */
static int expect_load(const char *path, const VitLoadOptions *opt, VitStatus want,
                       const char *const *keys, const char *what) {
    static const Vit zero;
    Vit *vit = malloc(sizeof *vit);
    VitError err;
    memset(vit, 0x5a, sizeof *vit); /* garbage in: vit_load must not trust it */
    memset(&err, 0, sizeof err);
    VitStatus rc = vit_load(vit, path, opt, &err);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int ok = check_err(rc, &err, want, want == VIT_OK ? NULL : base, keys, what);
    if (rc != VIT_OK && memcmp(vit, &zero, sizeof zero) != 0)
        ok = check(0, "%s: the Vit is not zeroed after a failed load", what);
    vit_free(vit);
    VitStatus rc2 = vit_load(vit, path, opt, NULL);
    if (rc2 != rc)
        ok = check(0, "%s: with err == NULL the status is %s, not %s", what, vit_status_name(rc2),
                   vit_status_name(rc));
    vit_free(vit);
    free(vit);
    return ok;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* --- valid models ---------------------------------------------------------- */

static int same_floats(const float *a, const float *b, size_t n) {
    return a && b && memcmp(a, b, n * sizeof(float)) == 0;
}

/* Does w[0..n) hold model_value(name, dtype, i)? Compared bit for bit. */
static int holds(const float *w, const char *name, const char *dtype, size_t n) {
    if (!w) return 0;
    for (size_t i = 0; i < n; i++) {
        float v = model_value(name, dtype, i);
        if (memcmp(&w[i], &v, sizeof v) != 0) {
            printf("     %s[%zu] = %a, expected %a\n", name, i, (double)w[i], (double)v);
            return 0;
        }
    }
    return 1;
}

static void check_config(const VitConfig *c, int S, int P, int grid, int D, int H, int F, int L,
                         int C, const char *name, const char *what) {
    int ok = c->image_h == S && c->image_w == S && c->patch_size == P && c->grid_h == grid &&
             c->grid_w == grid && c->n_patches == grid * grid && c->n_prefix == 1 &&
             c->n_tokens == 1 + grid * grid && c->dim == D && c->n_heads == H &&
             c->head_dim == D / H && c->mlp_dim == F && c->n_layers == L && c->n_classes == C &&
             strcmp(c->name, name) == 0;
    check(ok,
          "%s: config S=%d P=%d grid=%dx%d N=%d Np=%d T=%d D=%d H=%d Dh=%d F=%d L=%d C=%d "
          "name '%s' (expected S=%d P=%d grid=%d D=%d H=%d F=%d L=%d C=%d '%s')",
          what, c->image_h, c->patch_size, c->grid_h, c->grid_w, c->n_patches, c->n_prefix,
          c->n_tokens, c->dim, c->n_heads, c->head_dim, c->mlp_dim, c->n_layers, c->n_classes,
          c->name, S, P, grid, D, H, F, L, C, name);
}

static void test_valid(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "valid");
    make_dir(dir);
    Model m;

    /* D=64, 2 blocks, patch 8, 16 px, 10 classes */
    model_tiny(&m, 64, 2, 8, 2, 128, 10);
    path_join(path, sizeof path, dir, "tiny_head.safetensors");
    model_write(&m, path);
    Vit vit = {0};
    VitError err = {0};
    VitStatus rc = vit_load(&vit, path, NULL, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "tiny_head.safetensors loads")) {
        const VitConfig *c = &vit.cfg;
        check_config(c, 16, 8, 2, 64, 1, 128, 2, 10, "tiny_head", "tiny_head");
        check(c->ln_eps == 1e-6f && c->crop_pct == 0.875f && c->mean[0] == 0.485f &&
                  c->std[2] == 0.225f,
              "tiny_head: defaults ln_eps %g crop_pct %g mean[0] %g std[2] %g", (double)c->ln_eps,
              (double)c->crop_pct, (double)c->mean[0], (double)c->std[2]);
        check(strcmp(vit.path, path) == 0 && vit.labels == NULL,
              "tiny_head: path kept, no labels without config.json");
        const VitWeights *w = &vit.w;
        check(holds(w->cls_token, "cls_token", "F32", 64) &&
                  holds(w->pos_embed, "pos_embed", "F32", 5 * 64) &&
                  holds(w->patch_w, "patch_embed.proj.weight", "F32", 64 * 3 * 64) &&
                  holds(w->blocks[1].qkv_w, "blocks.1.attn.qkv.weight", "F32", 192 * 64) &&
                  holds(w->blocks[1].fc2_b, "blocks.1.mlp.fc2.bias", "F32", 64) &&
                  holds(w->norm_b, "norm.bias", "F32", 64) &&
                  holds(w->head_w, "head.weight", "F32", 10 * 64) &&
                  holds(w->head_b, "head.bias", "F32", 10),
              "tiny_head: weights hold the values written (cls, pos, patch, qkv, fc2, norm, "
              "head)");
        check(vit.owned == NULL && vit.owned_floats == 0,
              "tiny_head: aligned F32 is used in place (no converted copy)");
    }
    vit_free(&vit);

    /* The same file with 4 heads from VitLoadOptions. */
    VitLoadOptions opt = {.n_heads = 4};
    rc = vit_load(&vit, path, &opt, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "tiny_head.safetensors with n_heads = 4"))
        check_config(&vit.cfg, 16, 8, 2, 64, 4, 128, 2, 10, "tiny_head", "n_heads = 4");
    vit_free(&vit);

    /* A backbone: D=128 (2 heads by default), 1 block, patch 8, 32 px, no head. */
    model_tiny(&m, 128, 1, 8, 4, 256, 0);
    path_join(path, sizeof path, dir, "tiny.backbone.safetensors");
    model_write(&m, path);
    rc = vit_load(&vit, path, NULL, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "tiny.backbone.safetensors (no head) loads")) {
        check_config(&vit.cfg, 32, 8, 4, 128, 2, 256, 1, 0, "tiny.backbone", "backbone");
        check(vit.w.head_w == NULL && vit.w.head_b == NULL, "backbone: head_w, head_b NULL");
    }
    vit_free(&vit);

    /* Unaligned F32 data (header length 8k + 1): converted copies, same values. */
    model_tiny(&m, 64, 1, 8, 2, 128, 3);
    m.extra_pad = 1;
    path_join(path, sizeof path, dir, "unaligned.safetensors");
    model_write(&m, path);
    rc = vit_load(&vit, path, NULL, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "unaligned.safetensors (F32 at odd offsets)")) {
        const VitWeights *w = &vit.w;
        check(((uintptr_t)w->cls_token % sizeof(float)) == 0 &&
                  holds(w->cls_token, "cls_token", "F32", 64) &&
                  holds(w->blocks[0].fc1_w, "blocks.0.mlp.fc1.weight", "F32", 128 * 64) &&
                  holds(w->head_b, "head.bias", "F32", 3),
              "unaligned: weights are aligned copies holding the values written");
    }
    vit_free(&vit);

    /* Extra tensors timm does not use are ignored. */
    model_tiny(&m, 64, 1, 8, 2, 128, 0);
    model_add(&m, "extra.counter", "I64", 1, (int64_t[]){4});
    path_join(path, sizeof path, dir, "extra.safetensors");
    model_write(&m, path);
    expect_load(path, NULL, VIT_OK, NULL, "extra.safetensors (an unused I64 tensor) loads");
}

/* F16 and BF16 files load to the same config, with values equal to their F32
 * upcast (edge values included), and match the F32 file elsewhere. */
static void test_dtypes(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "valid");
    Model m;
    model_tiny(&m, 64, 2, 8, 2, 128, 10);
    path_join(path, sizeof path, dir, "tiny_head.safetensors");
    Vit ref = {0};
    VitError err = {0};
    if (!check_err(vit_load(&ref, path, NULL, &err), &err, VIT_OK, NULL, NULL,
                   "reference F32 tiny_head loads"))
        return;
    static const char *dtypes[] = {"F16", "BF16"};
    for (int k = 0; k < 2; k++) {
        const char *dt = dtypes[k];
        char file[64];
        snprintf(file, sizeof file, "tiny_head_%s.safetensors", dt);
        model_tiny(&m, 64, 2, 8, 2, 128, 10);
        model_set_dtype(&m, dt);
        path_join(path, sizeof path, dir, file);
        model_write(&m, path);
        Vit vit = {0};
        VitStatus rc = vit_load(&vit, path, NULL, &err);
        if (!check_err(rc, &err, VIT_OK, NULL, NULL, file)) continue;
        VitConfig a = vit.cfg, b = ref.cfg;
        memset(a.name, 0, sizeof a.name);
        memset(b.name, 0, sizeof b.name);
        check(memcmp(&a, &b, sizeof a) == 0, "%s: same config as the F32 file", dt);
        const VitWeights *w = &vit.w, *r = &ref.w;
        check(holds(w->cls_token, "cls_token", dt, 64),
              "%s: cls_token upcast exactly, edge values included (%a %a %a %a %a)", dt,
              (double)w->cls_token[0], (double)w->cls_token[1], (double)w->cls_token[2],
              (double)w->cls_token[3], (double)w->cls_token[4]);
        int same =
            same_floats(w->pos_embed, r->pos_embed, 5 * 64) &&
            same_floats(w->patch_w, r->patch_w, 64 * 3 * 64) &&
            same_floats(w->patch_b, r->patch_b, 64) && same_floats(w->norm_w, r->norm_w, 64) &&
            same_floats(w->head_w, r->head_w, 10 * 64) && same_floats(w->head_b, r->head_b, 10);
        for (int l = 0; l < 2; l++) {
            const VitBlock *x = &w->blocks[l], *y = &r->blocks[l];
            same = same && same_floats(x->qkv_w, y->qkv_w, 192 * 64) &&
                   same_floats(x->qkv_b, y->qkv_b, 192) &&
                   same_floats(x->proj_w, y->proj_w, 64 * 64) &&
                   same_floats(x->norm2_b, y->norm2_b, 64) &&
                   same_floats(x->fc1_w, y->fc1_w, 128 * 64) &&
                   same_floats(x->fc2_w, y->fc2_w, 64 * 128) && same_floats(x->fc2_b, y->fc2_b, 64);
        }
        check(same, "%s: every other weight equals the F32 file's", dt);
        check(vit.owned != NULL, "%s: weights are converted copies owned by the Vit", dt);
        vit_free(&vit);
    }
    vit_free(&ref);
}

/* NaN and infinite weights are refused, naming the tensor and the element:
 * F32 used in place, F32 copied (unaligned), F16 and BF16 converted. */
static void test_nonfinite(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "nonfinite");
    make_dir(dir);
    static const struct {
        const char *file, *dtype, *tensor;
        int pad;         /* Model.extra_pad: 1 misaligns F32 */
        size_t at;       /* element */
        uint32_t bits;   /* F32, or F16/BF16 in the low 16 bits */
        const char *key; /* how the message names the value */
    } tab[] = {
        {"nan_f32.safetensors", "F32", "blocks.1.attn.qkv.weight", 0, 4100, 0x7fc00000u, "NaN"},
        {"inf_f32_unaligned.safetensors", "F32", "blocks.0.mlp.fc2.bias", 1, 63, 0x7f800000u,
         "+inf"},
        {"ninf_f32_cls.safetensors", "F32", "cls_token", 0, 0, 0xff800000u, "-inf"},
        {"nan_f16.safetensors", "F16", "head.weight", 0, 639, 0x7e00u, "NaN"},
        {"inf_f16.safetensors", "F16", "pos_embed", 0, 5, 0x7c00u, "+inf"},
        {"ninf_bf16.safetensors", "BF16", "norm.bias", 0, 1, 0xff80u, "-inf"},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        Model m;
        model_tiny(&m, 64, 2, 8, 2, 128, 10);
        model_set_dtype(&m, tab[i].dtype);
        m.extra_pad = tab[i].pad;
        size_t n;
        uint8_t *b = model_bytes(&m, &n);
        uint8_t *d = model_data(&m, b, tab[i].tensor);
        int eb = strcmp(tab[i].dtype, "F32") == 0 ? 4 : 2;
        for (int k = 0; k < eb; k++)
            d[tab[i].at * (size_t)eb + (size_t)k] = (uint8_t)(tab[i].bits >> (8 * k));
        path_join(path, sizeof path, dir, tab[i].file);
        write_bytes(path, b, n);
        free(b);
        char t[80], e[48], what[160];
        snprintf(t, sizeof t, "'%s'", tab[i].tensor);
        snprintf(e, sizeof e, "element %zu of", tab[i].at);
        snprintf(what, sizeof what, "%s: %s at %s[%zu]", tab[i].file, tab[i].key, tab[i].tensor,
                 tab[i].at);
        expect_load(path, NULL, VIT_ERR_FORMAT, KEYS(t, e, tab[i].key, "meaningless"), what);
    }
}

/* --- config.json ----------------------------------------------------------- */

static void write_text(const char *path, const char *text) {
    write_bytes(path, text, strlen(text));
}

/* A folder `name` under the test's folder (dir) holding tiny.safetensors (path): the tiny
 * model (D 64, 1 layer, patch 8, grid 2, F 128, 3 classes) that a config.json beside it
 * configures. */
static void tiny_in_folder(char *dir, size_t dir_n, char *path, size_t path_n, const char *name) {
    path_join(dir, dir_n, g_dir, name);
    make_dir(dir);
    Model m;
    model_tiny(&m, 64, 1, 8, 2, 128, 3);
    path_join(path, path_n, dir, "tiny.safetensors");
    model_write(&m, path);
}

static void test_config(void) {
    char dir[1024], path[1100], cfg[1100];
    tiny_in_folder(dir, sizeof dir, path, sizeof path, "config");

    /* config.json beside the weights */
    path_join(cfg, sizeof cfg, dir, "config.json");
    write_text(cfg, "{\"num_heads\": 4, \"label_names\": [\"zero\", \"one\", \"two\"],\n"
                    " \"pretrained_cfg\": {\"input_size\": [3, 16, 16], \"crop_pct\": 0.9,\n"
                    "   \"mean\": [0.5, 0.5, 0.5], \"std\": [0.25, 0.25, 0.25]}}\n");
    Vit vit = {0};
    VitError err = {0};
    VitStatus rc = vit_load(&vit, path, NULL, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "tiny.safetensors with config.json beside it")) {
        check_config(&vit.cfg, 16, 8, 2, 64, 4, 128, 1, 3, "tiny", "config.json num_heads 4");
        check(vit.cfg.crop_pct == 0.9f && vit.cfg.mean[1] == 0.5f && vit.cfg.std[2] == 0.25f,
              "config.json: crop_pct %g, mean[1] %g, std[2] %g", (double)vit.cfg.crop_pct,
              (double)vit.cfg.mean[1], (double)vit.cfg.std[2]);
        check(vit.labels && strcmp(vit.labels[2], "two") == 0, "config.json: label_names read");
    }
    vit_free(&vit);

    /* VitLoadOptions.n_heads wins over config.json */
    VitLoadOptions opt = {.n_heads = 2};
    rc = vit_load(&vit, path, &opt, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "n_heads = 2 over config.json's 4"))
        check_config(&vit.cfg, 16, 8, 2, 64, 2, 128, 1, 3, "tiny", "options over config");
    vit_free(&vit);

    /* an explicit config_path, id2label form */
    path_join(cfg, sizeof cfg, dir, "hf.json");
    write_text(cfg, "{\"num_attention_heads\": 8, \"image_size\": 16, \"layer_norm_eps\": 1e-5,"
                    " \"id2label\": {\"2\": \"c\", \"0\": \"a\", \"1\": \"b\"}}");
    opt = (VitLoadOptions){.config_path = cfg};
    rc = vit_load(&vit, path, &opt, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "config_path hf.json (transformers keys)")) {
        check_config(&vit.cfg, 16, 8, 2, 64, 8, 128, 1, 3, "tiny", "hf.json num_attention_heads");
        check(vit.cfg.ln_eps == 1e-5f && vit.labels && strcmp(vit.labels[0], "a") == 0 &&
                  strcmp(vit.labels[2], "c") == 0,
              "hf.json: layer_norm_eps and id2label read");
    }
    vit_free(&vit);

    /* bad configs, given as config_path */
    static const char W[] = "tiny.safetensors"; /* shape errors name the weights */
    /* clang-format off */
    static const struct {
        const char *file, *text;
        VitStatus want;
        const char *names; /* the file the message names; NULL: the config */
        const char *keys[5]; /* NULL-terminated */
    } bad[] = {
        {"heads_string.json", "{\"num_heads\": \"four\"}", VIT_ERR_FORMAT, NULL,
         {"'num_heads' is \"four\"", "expected a positive integer"}},
        {"heads_zero.json", "{\"num_heads\": 0}", VIT_ERR_FORMAT, NULL, {"num_heads"}},
        {"heads_three.json", "{\"num_heads\": 3}", VIT_ERR_SHAPE, W, {"width 64", "3 heads"}},
        {"not_json.json", "num_heads = 4", VIT_ERR_FORMAT, NULL, {"not valid JSON", "line 1"}},
        {"bad_line3.json", "{\"num_heads\": 4,\n \"mean\": [0.5, 0.5,\n  0.5 0.5]}",
         VIT_ERR_FORMAT, NULL, {"not valid JSON", "line 3, column 7"}},
        {"array.json", "[4]", VIT_ERR_FORMAT, NULL, {"JSON but not an object"}},
        {"empty.json", "", VIT_ERR_FORMAT, NULL, {"not valid JSON"}},
        {"pretrained_mean.json", "{\"pretrained_cfg\": {\"mean\": \"imagenet\"}}",
         VIT_ERR_FORMAT, NULL, {"'pretrained_cfg.mean' is \"imagenet\"", "expected 3 numbers"}},
        {"size_mismatch.json", "{\"image_size\": 32}", VIT_ERR_SHAPE, W,
         {"5 positions", "32x32", "4x4 grid"}},
        {"size_not_multiple.json", "{\"image_size\": 20}", VIT_ERR_SHAPE, NULL,
         {"not a multiple", "20"}},
        {"size_not_grid.json", "{\"pretrained_cfg\": {\"input_size\": [3, 16, 32]}}",
         VIT_ERR_SHAPE, W, {"5 positions", "16x32", "2x4 grid"}},
        {"size_zero.json", "{\"pretrained_cfg\": {\"input_size\": [3, 0, 32]}}",
         VIT_ERR_FORMAT, NULL, {"input_size", "[H, W]"}},
        {"crop_mode.json", "{\"pretrained_cfg\": {\"crop_mode\": \"border\"}}", VIT_ERR_FORMAT,
         NULL, {"'pretrained_cfg.crop_mode' is \"border\"", "not supported"}},
        {"hidden_act.json", "{\"hidden_act\": \"gelu_new\"}", VIT_ERR_FORMAT, NULL,
         {"'hidden_act' is \"gelu_new\"", "exact GELU"}},
        {"crop_pct.json", "{\"crop_pct\": 1.5}", VIT_ERR_FORMAT, NULL, {"crop_pct"}},
        {"mean_short.json", "{\"mean\": [0.5, 0.5]}", VIT_ERR_FORMAT, NULL,
         {"'mean' is [0.5,0.5]", "expected 3 numbers"}},
        {"std_zero.json", "{\"std\": [0.5, 0, 0.5]}", VIT_ERR_FORMAT, NULL, {"std"}},
        {"labels_count.json", "{\"label_names\": [\"a\", \"b\"]}", VIT_ERR_FORMAT, NULL,
         {"2 label names", "3 classes"}},
        {"labels_type.json", "{\"label_names\": 7}", VIT_ERR_FORMAT, NULL, {"'label_names'"}},
        {"id2label_type.json", "{\"id2label\": \"cat\"}", VIT_ERR_FORMAT, NULL, {"'id2label'"}},
        {"labels_not_strings.json", "{\"label_names\": [1, 2, 3]}", VIT_ERR_FORMAT, NULL,
         {"label"}},
        {"id2label_range.json", "{\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"12\": \"c\"}}",
         VIT_ERR_FORMAT, NULL, {"id2label key '12'", "[0, 3)"}},
        {"id2label_key.json", "{\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"x\": \"c\"}}",
         VIT_ERR_FORMAT, NULL, {"id2label key 'x'"}},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path_join(cfg, sizeof cfg, dir, bad[i].file);
        write_text(cfg, bad[i].text);
        opt = (VitLoadOptions){.config_path = cfg};
        char what[160];
        snprintf(what, sizeof what, "config %s", bad[i].file);
        VitStatus r = vit_load(&vit, path, &opt, &err);
        check_err(r, &err, bad[i].want, bad[i].names ? bad[i].names : bad[i].file, bad[i].keys,
                  what);
        vit_free(&vit);
    }
    path_join(cfg, sizeof cfg, dir, "no_such_config.json");
    opt = (VitLoadOptions){.config_path = cfg};
    check_err(vit_load(&vit, path, &opt, &err), &err, VIT_ERR_IO, "no_such_config.json",
              KEYS("cannot read config"), "config_path that does not exist");
    vit_free(&vit);
    opt = (VitLoadOptions){.config_path = dir};
    check_err(vit_load(&vit, path, &opt, &err), &err, VIT_ERR_IO, "config",
              KEYS("cannot read config", "Is a directory"), "config_path that is a directory");
    vit_free(&vit);

    /* "{   ...   }" of exactly VIT_MAX_CONFIG_BYTES is read; one byte more is
     * refused without parsing it. */
    size_t big_n = (size_t)VIT_MAX_CONFIG_BYTES + 1;
    char *big = malloc(big_n);
    memset(big, ' ', big_n);
    big[0] = '{';
    for (int over = 0; over < 2; over++) {
        size_t n = big_n - 1 + (size_t)over;
        big[n - 1] = '}';
        path_join(cfg, sizeof cfg, dir, over ? "big_over.json" : "big_at_limit.json");
        write_bytes(cfg, big, n);
        opt = (VitLoadOptions){.config_path = cfg};
        char what[96];
        snprintf(what, sizeof what, "a config.json of %zu bytes (the limit %s)", n,
                 over ? "+ 1" : "exactly");
        check_err(vit_load(&vit, path, &opt, &err), &err, over ? VIT_ERR_FORMAT : VIT_OK,
                  over ? "big_over.json" : NULL, over ? KEYS("larger than the limit") : NULL, what);
        vit_free(&vit);
    }
    free(big);
}

/* --- malformed headers ----------------------------------------------------- */

/* Raw files: the JSON text as written, then data_bytes zero bytes. */
static void test_headers(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "header");
    make_dir(dir);
    /* One malformed header per line; CLS: {"cls_token": {"dtype": dt, "shape": sh,
     * "data_offsets": off}}, ENTRY: one such "name": {...} pair. */
    /* clang-format off */
#define CLS(dt, sh, off) \
    "{\"cls_token\": {\"dtype\": " dt ", \"shape\": " sh ", \"data_offsets\": " off "}}"
#define ENTRY(name, dt, sh, off) \
    "\"" name "\": {\"dtype\": \"" dt "\", \"shape\": " sh ", \"data_offsets\": " off "}"
    static const struct {
        const char *file, *json;
        size_t data;
        VitStatus want;
        const char *keys[5]; /* NULL-terminated */
    } tab[] = {
        /* not JSON, not an object */
        {"not_json", "{\"cls_token\": {\"dtype\": \"F32\",", 0, VIT_ERR_FORMAT, {"not valid JSON"}},
        {"garbage", "\x89PNG\r\n\x1a\n....", 0, VIT_ERR_FORMAT, {"not valid JSON"}},
        {"array_root", "[1, 2, 3]", 0, VIT_ERR_FORMAT, {"not an object"}},
        {"string_root", "\"cls_token\"", 0, VIT_ERR_FORMAT, {"not an object"}},
        {"number_root", "42", 0, VIT_ERR_FORMAT, {"not an object"}},
        {"entry_array", "{\"cls_token\": [1, 1, 64]}", 0, VIT_ERR_FORMAT,
         {"'cls_token'", "not an object"}},
        {"entry_null", "{\"pos_embed\": null}", 0, VIT_ERR_FORMAT,
         {"'pos_embed'", "not an object"}},
        /* dtype */
        {"no_dtype", "{\"cls_token\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
         VIT_ERR_FORMAT, {"'cls_token'", "dtype"}},
        {"dtype_number", CLS("32", "[2]", "[0, 8]"), 8, VIT_ERR_FORMAT, {"'cls_token'", "dtype"}},
        {"dtype_unknown", CLS("\"F99\"", "[2]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "unknown dtype 'F99'"}},
        {"dtype_lowercase", CLS("\"f32\"", "[2]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"unknown dtype 'f32'"}},
        /* shape */
        {"no_shape", "{\"cls_token\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8,
         VIT_ERR_FORMAT, {"'cls_token'", "'shape'"}},
        {"shape_string", CLS("\"F32\"", "\"2\"", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "'shape'"}},
        {"shape_negative", CLS("\"F32\"", "[-2]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "non-negative integers"}},
        {"shape_fraction", CLS("\"F32\"", "[1.5]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"non-negative integers"}},
        {"shape_string_dim", CLS("\"F32\"", "[\"2\"]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"non-negative integers"}},
        {"shape_above_2p53", CLS("\"F32\"", "[18014398509481984]", "[0, 8]"), 8, VIT_ERR_FORMAT,
         {"non-negative integers"}},
        {"shape_nine_dims", CLS("\"F32\"", "[1, 1, 1, 1, 1, 1, 1, 1, 2]", "[0, 8]"), 8,
         VIT_ERR_FORMAT, {"'cls_token'", "at most 8"}},
        {"shape_overflow", CLS("\"F32\"", "[4294967296, 4294967296, 16]", "[0, 8]"), 8,
         VIT_ERR_FORMAT, {"'cls_token'", "[4294967296, 4294967296, 16]", "overflows"}},
        {"shape_overflow_bytes", CLS("\"F32\"", "[2147483648, 2147483648]", "[0, 0]"), 8,
         VIT_ERR_FORMAT, {"'cls_token'", "overflows"}},
        /* data_offsets */
        {"no_offsets", "{\"cls_token\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, VIT_ERR_FORMAT,
         {"'cls_token'", "data_offsets"}},
        {"offsets_three", CLS("\"F32\"", "[2]", "[0, 4, 8]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "data_offsets"}},
        {"offsets_strings", CLS("\"F32\"", "[2]", "[\"0\", \"8\"]"), 8, VIT_ERR_FORMAT,
         {"data_offsets"}},
        {"offsets_negative", CLS("\"F32\"", "[2]", "[-8, 0]"), 8, VIT_ERR_FORMAT, {"data_offsets"}},
        {"offsets_object", CLS("\"F32\"", "[2]", "{\"b\": 0}"), 8, VIT_ERR_FORMAT,
         {"data_offsets"}},
        {"offsets_reversed", CLS("\"F32\"", "[2]", "[8, 0]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "[8, 0]", "reversed"}},
        {"offsets_past_end", CLS("\"F32\"", "[4]", "[0, 16]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "[0, 16]", "past the data area (8 bytes)"}},
        {"offsets_huge", CLS("\"U8\"", "[9007199254740992]", "[0, 9007199254740992]"), 8,
         VIT_ERR_FORMAT, {"'cls_token'", "past the data area"}},
        {"offsets_begin_past_end", CLS("\"F32\"", "[0]", "[64, 64]"), 8, VIT_ERR_FORMAT,
         {"'cls_token'", "past the data area"}},
        /* size = prod(shape) x dtype size */
        {"size_mismatch", CLS("\"F32\"", "[2]", "[0, 12]"), 16, VIT_ERR_FORMAT,
         {"'cls_token'", "12 bytes", "expected 8"}},
        {"size_mismatch_f16", CLS("\"F16\"", "[4]", "[0, 16]"), 16, VIT_ERR_FORMAT,
         {"'cls_token'", "16 bytes", "expected 8", "F16"}},
        {"size_mismatch_i64", CLS("\"I64\"", "[2]", "[0, 8]"), 16, VIT_ERR_FORMAT,
         {"'cls_token'", "8 bytes", "expected 16"}},
        /* overlapping tensors, repeated names */
        {"overlap", "{" ENTRY("cls_token", "F32", "[4]", "[0, 16]") ", "
                        ENTRY("pos_embed", "F32", "[4]", "[8, 24]") "}", 24, VIT_ERR_FORMAT,
         {"'cls_token'", "'pos_embed'", "overlap"}},
        {"overlap_same", "{" ENTRY("cls_token", "F32", "[4]", "[0, 16]") ", "
                             ENTRY("pos_embed", "F32", "[4]", "[0, 16]") "}", 16, VIT_ERR_FORMAT,
         {"'cls_token'", "'pos_embed'", "overlap"}},
        {"overlap_inside", "{" ENTRY("norm.weight", "F32", "[8]", "[0, 32]") ", "
                               ENTRY("a", "F32", "[1]", "[32, 36]") ", "
                               ENTRY("norm.bias", "F32", "[2]", "[8, 16]") "}", 36, VIT_ERR_FORMAT,
         {"'norm.weight'", "'norm.bias'", "overlap"}},
        {"duplicate", "{" ENTRY("cls_token", "F32", "[1]", "[0, 4]") ", "
                          ENTRY("cls_token", "F32", "[1]", "[4, 8]") "}", 8, VIT_ERR_FORMAT,
         {"'cls_token'", "twice"}},
        /* valid headers without the tensors of a ViT */
        {"empty_object", "{}", 0, VIT_ERR_SHAPE, {"'cls_token'", "missing"}},
        {"metadata_only", "{\"__metadata__\": {\"format\": \"pt\"}}", 0, VIT_ERR_SHAPE,
         {"'cls_token'", "missing"}},
        {"just_cls", CLS("\"F32\"", "[1, 1, 2]", "[0, 8]"), 8, VIT_ERR_SHAPE,
         {"'patch_embed.proj.weight'", "missing"}},
    };
    /* clang-format on */
#undef CLS
#undef ENTRY
    char file[128], what[160];
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        snprintf(file, sizeof file, "%s.safetensors", tab[i].file);
        path_join(path, sizeof path, dir, file);
        write_st(path, tab[i].json, tab[i].data);
        snprintf(what, sizeof what, "header %s", file);
        expect_load(path, NULL, tab[i].want, tab[i].keys, what);
    }

    /* JSON nested deeper than cJSON's limit: an error, not a stack overflow. */
    {
        size_t depth = 100000, k = 0;
        char *deep = malloc(2 * depth + 16);
        k += (size_t)sprintf(deep, "{\"a\":");
        for (size_t i = 0; i < depth; i++) deep[k++] = '[';
        for (size_t i = 0; i < depth; i++) deep[k++] = ']';
        deep[k++] = '}';
        deep[k] = 0;
        path_join(path, sizeof path, dir, "deep.safetensors");
        write_st(path, deep, 0);
        free(deep);
        expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("not valid JSON"),
                    "header deep.safetensors (100000 nested arrays)");
    }

    /* The 8-byte length itself. */
    static const struct {
        const char *file;
        uint64_t len;
        size_t extra; /* bytes after the length field */
        const char *keys[3];
    } lens[] = {
        {"len_zero", 0, 16, {"header length 0"}},
        {"len_one", 1, 16, {"header length 1"}},
        {"len_past_end", 1000, 16, {"header length 1000", "(16 bytes"}},
        {"len_one_past_end", 17, 16, {"header length 17"}},
        {"len_2p32", 1ull << 32, 16, {"header length 4294967296"}},
        {"len_above_limit", (uint64_t)VIT_MAX_HEADER_BYTES + 1, 16, {"header length 8388609"}},
        {"len_2p63", 1ull << 63, 16, {"header length 9223372036854775808"}},
        {"len_max", UINT64_MAX, 16, {"header length 18446744073709551615"}},
    };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t buf[8 + 16];
        memset(buf, ' ', sizeof buf);
        buf[8] = '{';
        buf[8 + lens[i].extra - 1] = '}';
        for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(lens[i].len >> (8 * b));
        snprintf(file, sizeof file, "%s.safetensors", lens[i].file);
        path_join(path, sizeof path, dir, file);
        write_bytes(path, buf, 8 + lens[i].extra);
        snprintf(what, sizeof what, "length field %s (%llu)", file,
                 (unsigned long long)lens[i].len);
        expect_load(path, NULL, VIT_ERR_FORMAT, lens[i].keys, what);
    }

    /* A header length that fits in a (sparse) file but is over the limit. */
    {
        path_join(path, sizeof path, dir, "len_over_limit_sparse.safetensors");
        uint64_t len = (uint64_t)VIT_MAX_HEADER_BYTES + 8;
        uint8_t buf[8];
        for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(len >> (8 * b));
        FILE *f = fopen(path, "wb");
        int ok = f && fwrite(buf, 1, 8, f) == 8;
        if (f) ok = fclose(f) == 0 && ok;
        ok = ok && truncate(path, (off_t)(8 + len + 64)) == 0;
        if (check(ok, "write a sparse %llu-byte file", (unsigned long long)(8 + len + 64)))
            expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("header length 8388616", "limit"),
                        "header longer than VIT_MAX_HEADER_BYTES in a file that holds it");
        unlink(path); /* not worth keeping */
    }

    /* More tensors than VIT_MAX_TENSORS (entries need not be valid: the count is checked first). */
    {
        size_t n = (size_t)VIT_MAX_TENSORS + 1, cap = n * 16 + 16, k = 0;
        char *json = malloc(cap);
        json[k++] = '{';
        for (size_t i = 0; i < n; i++)
            k += (size_t)snprintf(json + k, cap - k, "%s\"t%zu\":0", i ? "," : "", i);
        json[k++] = '}';
        json[k] = 0;
        path_join(path, sizeof path, dir, "too_many_tensors.safetensors");
        write_st(path, json, 0);
        free(json);
        expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("65537 tensors", "limit"),
                    "header with VIT_MAX_TENSORS + 1 entries");
    }
}

/* --- malformed models ------------------------------------------------------ */

typedef enum { OP_NONE, OP_REMOVE, OP_SHAPE, OP_DTYPE, OP_ADD } OpKind;

typedef struct {
    OpKind kind;
    const char *name; /* tensor (OP_REMOVE: a name prefix) */
    const char *dtype;
    int ndim;
    int64_t shape[4];
} Op;

static void test_models(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "model");
    make_dir(dir);
    /* base: D=64, L=2, P=8, grid 2 (16 px), F=2D, C=10; L, D, n_heads: 0 = base/default */
    /* clang-format off */
#define RM(n) {.kind = OP_REMOVE, .name = n}
#define SHAPE(n, nd, ...) {.kind = OP_SHAPE, .name = n, .ndim = nd, .shape = {__VA_ARGS__}}
#define DTYPE(n, dt) {.kind = OP_DTYPE, .name = n, .dtype = dt}
#define ADD(n, nd, ...) \
    {.kind = OP_ADD, .name = n, .dtype = "F32", .ndim = nd, .shape = {__VA_ARGS__}}
#define NOOP {.kind = OP_NONE}
    static const struct {
        const char *file;
        int L, D, n_heads;
        Op ops[3];
        VitStatus want;
        const char *keys[5]; /* NULL-terminated */
    } tab[] = {
        /* missing tensors */
        {"missing_proj", 0, 0, 0, {RM("blocks.0.attn.proj.weight")}, VIT_ERR_SHAPE,
         {"'blocks.0.attn.proj.weight'", "missing"}},
        {"missing_last_bias", 0, 0, 0, {RM("blocks.1.mlp.fc2.bias")}, VIT_ERR_SHAPE,
         {"'blocks.1.mlp.fc2.bias'", "missing"}},
        {"missing_cls", 0, 0, 0, {RM("cls_token")}, VIT_ERR_SHAPE, {"'cls_token'", "missing"}},
        {"missing_pos", 0, 0, 0, {RM("pos_embed")}, VIT_ERR_SHAPE, {"'pos_embed'", "missing"}},
        {"missing_patch", 0, 0, 0, {RM("patch_embed.proj.weight")}, VIT_ERR_SHAPE,
         {"'patch_embed.proj.weight'", "missing"}},
        {"missing_norm", 0, 0, 0, {RM("norm.bias")}, VIT_ERR_SHAPE, {"'norm.bias'", "missing"}},
        {"missing_head_bias", 0, 0, 0, {RM("head.bias")}, VIT_ERR_SHAPE,
         {"'head.bias'", "missing"}},
        {"missing_head_weight", 0, 0, 0, {RM("head.weight")}, VIT_ERR_SHAPE,
         {"'head.weight'", "missing"}},
        {"no_blocks", 0, 0, 0, {RM("blocks.")}, VIT_ERR_SHAPE,
         {"'blocks.0.norm1.weight'", "missing"}},
        /* wrong shapes */
        {"qkv_shape", 0, 0, 0, {SHAPE("blocks.0.attn.qkv.weight", 2, 96, 32)}, VIT_ERR_SHAPE,
         {"'blocks.0.attn.qkv.weight'", "shape [96, 32]", "expected [192, 64]"}},
        {"qkv_rank", 0, 0, 0, {SHAPE("blocks.1.attn.qkv.weight", 3, 192, 64, 1)}, VIT_ERR_SHAPE,
         {"'blocks.1.attn.qkv.weight'", "[192, 64, 1]", "expected [192, 64]"}},
        {"qkv_bias", 0, 0, 0, {SHAPE("blocks.1.attn.qkv.bias", 1, 191)}, VIT_ERR_SHAPE,
         {"'blocks.1.attn.qkv.bias'", "[191]", "expected [192]"}},
        {"fc1_width_differs", 0, 0, 0, {SHAPE("blocks.1.mlp.fc1.weight", 2, 96, 64)},
         VIT_ERR_SHAPE, {"'blocks.1.mlp.fc1.weight'", "[96, 64]", "expected [128, 64]"}},
        {"mlp_empty", 0, 0, 0, {SHAPE("blocks.0.mlp.fc1.weight", 2, 0, 64)}, VIT_ERR_SHAPE,
         {"'blocks.0.mlp.fc1.weight'", "MLP width 0"}},
        {"fc2_shape", 0, 0, 0, {SHAPE("blocks.0.mlp.fc2.weight", 2, 128, 64)}, VIT_ERR_SHAPE,
         {"'blocks.0.mlp.fc2.weight'", "[128, 64]", "expected [64, 128]"}},
        {"norm1_width", 0, 0, 0, {SHAPE("blocks.0.norm1.weight", 1, 32)}, VIT_ERR_SHAPE,
         {"'blocks.0.norm1.weight'", "[32]", "expected [64]"}},
        {"pos_width", 0, 0, 0, {SHAPE("pos_embed", 3, 1, 5, 32)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "[1, 5, 32]", "expected [1, -1, 64]"}},
        {"pos_not_square", 0, 0, 0, {SHAPE("pos_embed", 3, 1, 6, 64)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "5 patch positions", "not a square grid"}},
        {"pos_no_patches", 0, 0, 0, {SHAPE("pos_embed", 3, 1, 1, 64)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "1 tokens"}},
        {"pos_empty", 0, 0, 0, {SHAPE("pos_embed", 3, 1, 0, 64)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "0 tokens"}},
        {"cls_shape", 0, 0, 0, {SHAPE("cls_token", 3, 1, 2, 64)}, VIT_ERR_SHAPE,
         {"'cls_token'", "[1, 2, 64]", "expected [1, 1, -1]"}},
        {"cls_rank", 0, 0, 0, {SHAPE("cls_token", 1, 64)}, VIT_ERR_SHAPE,
         {"'cls_token'", "shape [64]"}},
        {"cls_empty", 0, 0, 0, {SHAPE("cls_token", 3, 1, 1, 0)}, VIT_ERR_SHAPE,
         {"'cls_token'", "width 0"}},
        {"patch_not_square", 0, 0, 0, {SHAPE("patch_embed.proj.weight", 4, 64, 3, 8, 4)},
         VIT_ERR_SHAPE, {"'patch_embed.proj.weight'", "kernel 8x4"}},
        {"patch_grey", 0, 0, 0, {SHAPE("patch_embed.proj.weight", 4, 64, 1, 8, 8)},
         VIT_ERR_SHAPE, {"'patch_embed.proj.weight'", "[64, 1, 8, 8]", "expected [64, 3, -1, -1]"}},
        {"patch_bias", 0, 0, 0, {SHAPE("patch_embed.proj.bias", 1, 63)}, VIT_ERR_SHAPE,
         {"'patch_embed.proj.bias'", "[63]", "expected [64]"}},
        {"head_bias", 0, 0, 0, {SHAPE("head.bias", 1, 9)}, VIT_ERR_SHAPE,
         {"'head.bias'", "[9]", "expected [10]"}},
        {"head_width", 0, 0, 0, {SHAPE("head.weight", 2, 10, 32)}, VIT_ERR_SHAPE,
         {"'head.weight'", "[10, 32]", "expected [-1, 64]"}},
        {"head_empty", 0, 0, 0, {SHAPE("head.weight", 2, 0, 64), SHAPE("head.bias", 1, 0)},
         VIT_ERR_SHAPE, {"'head.weight'", "no classes"}},
        /* dtypes the model cannot use */
        {"dtype_i64", 0, 0, 0, {DTYPE("blocks.0.norm1.bias", "I64")}, VIT_ERR_FORMAT,
         {"'blocks.0.norm1.bias'", "dtype I64", "expected F32, F16 or BF16"}},
        {"dtype_u8_cls", 0, 0, 0, {DTYPE("cls_token", "U8")}, VIT_ERR_FORMAT,
         {"'cls_token'", "dtype U8"}},
        {"dtype_f64_head", 0, 0, 0, {DTYPE("head.weight", "F64")}, VIT_ERR_FORMAT,
         {"'head.weight'", "dtype F64"}},
        {"dtype_unknown", 0, 0, 0, {DTYPE("blocks.1.mlp.fc1.weight", "F99")}, VIT_ERR_FORMAT,
         {"'blocks.1.mlp.fc1.weight'", "unknown dtype 'F99'"}},
        /* depth: blocks numbered 0..L-1 without gaps */
        {"depth_gap", 3, 0, 0, {RM("blocks.1.")}, VIT_ERR_SHAPE,
         {"'blocks.2.", "'blocks.1.norm1.weight' is missing"}},
        {"depth_gap_norm1", 0, 0, 0, {RM("blocks.1.norm1.weight")}, VIT_ERR_SHAPE,
         {"'blocks.1.", "'blocks.1.norm1.weight' is missing"}},
        {"depth_no_block0", 0, 0, 0, {RM("blocks.0.")}, VIT_ERR_SHAPE,
         {"'blocks.0.norm1.weight'", "missing"}},
        /* prefix tokens: the position embedding must fit them */
        {"reg_token_no_room", 0, 0, 0, {ADD("reg_token", 3, 1, 4, 64)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "5 tokens", "5 prefix tokens"}},
        {"reg_token_width", 0, 0, 0, {ADD("reg_token", 3, 1, 4, 32)}, VIT_ERR_SHAPE,
         {"'reg_token'", "[1, 4, 32]", "expected [1, -1, 64]"}},
        {"reg_token_many", 0, 0, 0, {ADD("reg_token", 3, 1, 16, 64)}, VIT_ERR_SHAPE,
         {"'reg_token'", "16 register tokens", "1 to 15"}},
        {"dist_token_no_pos", 0, 0, 0, {ADD("dist_token", 3, 1, 1, 64)}, VIT_ERR_SHAPE,
         {"'pos_embed'", "3 patch positions", "not a square grid"}},
        {"head_dist_no_token", 0, 0, 0,
         {ADD("head_dist.weight", 2, 10, 64), ADD("head_dist.bias", 1, 10)}, VIT_ERR_SHAPE,
         {"'head_dist.weight'", "no distillation token"}},
        {"ls_width", 0, 0, 0, {ADD("blocks.1.ls2.gamma", 1, 32)}, VIT_ERR_SHAPE,
         {"'blocks.1.ls2.gamma'", "[32]", "expected [64]"}},
        /* timm's fc_norm (a pooled head) without its bias */
        {"fc_norm", 0, 0, 0, {ADD("fc_norm.weight", 1, 64)}, VIT_ERR_SHAPE,
         {"'fc_norm.weight'", "without its bias"}},
        /* variants not implemented */
        {"swiglu_packed", 0, 0, 0, {SHAPE("blocks.0.mlp.fc2.weight", 2, 64, 64)}, VIT_ERR_SHAPE,
         {"'blocks.0.mlp.fc2.weight'", "SwiGLU", "does not support"}},
        /* BEiT (timm beit_*): a bias per head on every attention score, which the engine
         * does not add: refused, never run as a plain ViT (it loaded and ran before) */
        {"beit_rel_pos", 0, 0, 0, {ADD("blocks.0.attn.relative_position_bias_table", 2, 12, 8)},
         VIT_ERR_SHAPE, {"'blocks.0.attn.relative_position_bias_table'", "BEiT", "does not support"}},
        {"beit_shared_rel_pos", 0, 0, 0, {ADD("rel_pos_bias.relative_position_bias_table", 2, 12, 8)},
         VIT_ERR_SHAPE, {"'rel_pos_bias.relative_position_bias_table'", "BEiT"}},
        {"beit_gamma", 0, 0, 0, {ADD("blocks.0.gamma_1", 1, 64)}, VIT_ERR_SHAPE,
         {"'blocks.0.gamma_1'", "BEiT"}},
        /* heads */
        {"heads_3", 0, 0, 3, {NOOP}, VIT_ERR_SHAPE, {"width 64", "3 heads"}},
        {"heads_more_than_width", 0, 0, 128, {NOOP}, VIT_ERR_SHAPE, {"width 64", "128 heads"}},
        {"width_32_default_heads", 0, 32, 0, {NOOP}, VIT_ERR_SHAPE, {"width 32", "0 heads"}},
    };
    /* clang-format on */
#undef RM
#undef SHAPE
#undef DTYPE
#undef ADD
#undef NOOP
    char file[128], what[200];
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        int D = tab[i].D ? tab[i].D : 64, L = tab[i].L ? tab[i].L : 2;
        Model m;
        model_tiny(&m, D, L, 8, 2, 2 * D, 10);
        int applied = 1;
        for (int k = 0; k < 3; k++) {
            const Op *op = &tab[i].ops[k];
            TSpec *t =
                op->kind == OP_SHAPE || op->kind == OP_DTYPE ? model_find(&m, op->name) : NULL;
            switch (op->kind) {
            case OP_NONE: break;
            case OP_REMOVE: applied &= model_remove(&m, op->name) > 0; break;
            case OP_SHAPE:
                if (!t) {
                    applied = 0;
                    break;
                }
                t->ndim = op->ndim;
                memcpy(t->shape, op->shape, sizeof op->shape);
                break;
            case OP_DTYPE:
                if (t)
                    snprintf(t->dtype, sizeof t->dtype, "%s", op->dtype);
                else
                    applied = 0;
                break;
            case OP_ADD: model_add(&m, op->name, op->dtype, op->ndim, op->shape); break;
            }
        }
        snprintf(file, sizeof file, "%s.safetensors", tab[i].file);
        path_join(path, sizeof path, dir, file);
        if (!check(applied && model_write(&m, path) == 0, "write %s", file)) continue;
        VitLoadOptions opt = {.n_heads = tab[i].n_heads};
        snprintf(what, sizeof what, "model %s", file);
        expect_load(path, tab[i].n_heads ? &opt : NULL, tab[i].want, tab[i].keys, what);
    }

    /* Small files that declare huge models: width 1, patch 1, one block, one head.
     * A 257x257 grid is over VIT_MAX_TOKENS; a 256x256 grid is not, but its one
     * [T, T] attention matrix alone would be 16 GiB. */
    static const struct {
        const char *file;
        int grid;
        const char *keys[4]; /* NULL-terminated */
    } huge[] = {
        {"tokens_66050", 257, {"'pos_embed'", "66050 tokens", "65536 patches"}},
        {"activations_16gib", 256, {"16.0 GiB of activations", "limit of 4 GiB"}},
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        Model m;
        model_tiny(&m, 1, 1, 1, huge[i].grid, 1, 0);
        snprintf(file, sizeof file, "%s.safetensors", huge[i].file);
        path_join(path, sizeof path, dir, file);
        if (!check(model_write(&m, path) == 0, "write %s", file)) continue;
        VitLoadOptions opt = {.n_heads = 1};
        snprintf(what, sizeof what, "model %s (%dx%d patches of 1 px, width 1)", file, huge[i].grid,
                 huge[i].grid);
        expect_load(path, &opt, VIT_ERR_SHAPE, huge[i].keys, what);
    }
}

/* --- files that are not safetensors at all --------------------------------- */

static void test_files(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "files");
    make_dir(dir);

    path_join(path, sizeof path, dir, "does_not_exist.safetensors");
    unlink(path);
    expect_load(path, NULL, VIT_ERR_IO, KEYS("cannot open"), "a file that does not exist");

    path_join(path, sizeof path, dir, "a_directory.safetensors");
    make_dir(path);
    expect_load(path, NULL, VIT_ERR_IO, KEYS("is a directory, not a weights file"), "a directory");

    path_join(path, sizeof path, dir, "empty.safetensors");
    write_bytes(path, "", 0);
    expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("empty"), "an empty file");

    for (int n = 1; n < 8; n++) {
        char file[64], what[96];
        snprintf(file, sizeof file, "short%d.safetensors", n);
        path_join(path, sizeof path, dir, file);
        write_bytes(path, "\x10\0\0\0\0\0\0", (size_t)n);
        char nb[32];
        snprintf(nb, sizeof nb, "%d bytes", n);
        snprintf(what, sizeof what, "a %d-byte file", n);
        expect_load(path, NULL, VIT_ERR_FORMAT, KEYS(nb, "too short"), what);
    }

    path_join(path, sizeof path, dir, "photo.png.safetensors");
    static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x02\0\0\0";
    write_bytes(path, png, sizeof png - 1);
    expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("header length"), "a PNG named .safetensors");

    path_join(path, sizeof path, dir, "notes.safetensors");
    const char *text = "these are not the weights you are looking for\n";
    write_bytes(path, text, strlen(text));
    expect_load(path, NULL, VIT_ERR_FORMAT, KEYS("header length"), "a text file");

    if (access("/dev/null", R_OK) == 0)
        expect_load("/dev/null", NULL, VIT_ERR_IO, KEYS("not a regular file"),
                    "/dev/null (a character device)");
}

/* --- truncated copies and random damage ------------------------------------ */

/* The smallest model that loads: D=8 (2 heads), 1 block, patch 2, 4 px. */
static uint8_t *small_model(size_t *n, size_t *header_end) {
    Model m;
    model_tiny(&m, 8, 1, 2, 2, 16, 3);
    uint8_t *b = model_bytes(&m, n);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = (h << 8) | b[i];
    *header_end = 8 + (size_t)h;
    return b;
}

static void test_truncated(void) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "truncated");
    make_dir(dir);
    size_t n, header_end;
    uint8_t *full = small_model(&n, &header_end);
    VitLoadOptions opt = {.n_heads = 2};
    path_join(path, sizeof path, dir, "small.safetensors");
    write_bytes(path, full, n);
    expect_load(path, &opt, VIT_OK, NULL, "small.safetensors (D=8, the truncation source) loads");

    int counts[VIT_ERR_IMAGE + 1] = {0}, bad = 0;
    for (size_t len = 0; len < n; len++) {
        path_join(path, sizeof path, dir, "small_cut.safetensors");
        write_bytes(path, full, len);
        Vit vit;
        VitError err = {0};
        VitStatus rc = vit_load(&vit, path, &opt, &err);
        if (rc <= VIT_ERR_IMAGE) counts[rc]++;
        int ok = rc != VIT_OK && err.code == rc && strstr(err.msg, "small_cut.safetensors");
        if (!ok && bad++ < 10)
            check(0, "prefix of %zu of %zu bytes: %s \"%s\"", len, n, vit_status_name(rc),
                  rc ? err.msg : "");
        vit_free(&vit);
    }
    check(!bad,
          "every prefix of small.safetensors (0..%zu bytes, header ends at %zu) fails with a "
          "message naming the file: %d format, %d shape, %d i/o, %d other",
          n - 1, header_end, counts[VIT_ERR_FORMAT], counts[VIT_ERR_SHAPE], counts[VIT_ERR_IO],
          (int)n - counts[VIT_ERR_FORMAT] - counts[VIT_ERR_SHAPE] - counts[VIT_ERR_IO]);

    /* The D=64 model, cut every 61 bytes through header and data. */
    Model m;
    model_tiny(&m, 64, 2, 8, 2, 128, 10);
    size_t n64;
    uint8_t *big = model_bytes(&m, &n64);
    bad = 0;
    int loads = 0;
    for (size_t len = 0; len < n64; len += 61, loads++) {
        path_join(path, sizeof path, dir, "tiny_cut.safetensors");
        write_bytes(path, big, len);
        Vit vit;
        VitError err = {0};
        VitStatus rc = vit_load(&vit, path, NULL, &err);
        if ((rc == VIT_OK || !strstr(err.msg, "tiny_cut.safetensors")) && bad++ < 10)
            check(0, "tiny_head cut to %zu of %zu bytes: %s \"%s\"", len, n64, vit_status_name(rc),
                  rc ? err.msg : "");
        vit_free(&vit);
    }
    check(!bad, "%d prefixes of the %zu-byte tiny_head (stride 61) fail with a message", loads,
          n64);

    /* Trailing bytes after the data area are tolerated (the format allows padding). */
    uint8_t *longer = malloc(n + 100);
    memcpy(longer, full, n);
    memset(longer + n, 0xff, 100);
    path_join(path, sizeof path, dir, "small_trailing.safetensors");
    write_bytes(path, longer, n + 100);
    expect_load(path, &opt, VIT_OK, NULL, "small.safetensors + 100 trailing bytes loads");
    free(longer);
    free(big);
    free(full);
}

/* xorshift64*: a fixed-seed generator so that a failure can be replayed. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

/* Damage the header of a valid file at random; whatever loads must also run. */
static void test_fuzz(int iterations) {
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, g_dir, "fuzz");
    make_dir(dir);
    path_join(path, sizeof path, dir, "fuzz.safetensors");
    size_t n, header_end;
    uint8_t *full = small_model(&n, &header_end);
    uint8_t *buf = malloc(n);
    VitLoadOptions opt = {.n_heads = 2};
    static const char interesting[] = "{}[]\":,-.eE0123456789 \\";
    int counts[VIT_ERR_IMAGE + 1] = {0}, bad = 0, ran = 0;
    for (int it = 0; it < iterations; it++) {
        memcpy(buf, full, n);
        int kind = (int)(rnd() % 8), hits = 1 + (int)(rnd() % 4);
        for (int h = 0; h < hits; h++) {
            size_t at = 8 + rnd() % (header_end - 8);
            switch (kind) {
            case 0: /* the length field */ buf[rnd() % 8] = (uint8_t)rnd(); break;
            case 1: /* any byte of the header */ buf[at] = (uint8_t)rnd(); break;
            case 2: /* JSON punctuation and digits */
            case 3: buf[at] = (uint8_t)interesting[rnd() % (sizeof interesting - 1)]; break;
            default: { /* a digit: shapes and offsets change, the JSON stays valid */
                size_t k = at;
                while (k < header_end && (buf[k] < '0' || buf[k] > '9')) k++;
                if (k < header_end) buf[k] = (uint8_t)('0' + rnd() % 10);
                break;
            }
            }
        }
        write_bytes(path, buf, n);
        Vit vit;
        VitError err = {0};
        VitStatus rc = vit_load(&vit, path, &opt, &err);
        if (rc <= VIT_ERR_IMAGE) counts[rc]++;
        if (rc != VIT_OK && (err.code != rc || !strstr(err.msg, "fuzz.safetensors"))) {
            if (bad++ < 10)
                check(0, "fuzz iteration %d: %s with message \"%s\"", it, vit_status_name(rc),
                      err.msg);
        } else if (rc == VIT_OK) {
            /* accepted: the forward pass must stay inside the weights it was given */
            VitRun run = {0};
            if (vit_run_init(&run, &vit, &err) == VIT_OK) {
                vit_forward(&run, &vit);
                ran++;
            }
            vit_run_free(&run);
        }
        vit_free(&vit);
    }
    check(!bad,
          "fuzz: %d damaged copies of small.safetensors (seeded), no crash, every error names "
          "the file: %d ok (%d run through vit_forward), %d format, %d shape, %d i/o, %d nomem",
          iterations, counts[VIT_OK], ran, counts[VIT_ERR_FORMAT], counts[VIT_ERR_SHAPE],
          counts[VIT_ERR_IO], counts[VIT_ERR_NOMEM]);
    free(buf);
    free(full);
}

/* --- vit_free -------------------------------------------------------------- */

/* --- terminal codes from a file ------------------------------------------------ */

/* No byte a terminal acts on: C0 controls, DEL, C1 in UTF-8 (C2 80..9F). */
static int printable(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)) return 0;
    return 1;
}

static void test_escape(void) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain text [1, 2]", "plain text [1, 2]"},
        {"\x1b]0;OWNED\x07\x1b[2J", "\\x1b]0;OWNED\\x07\\x1b[2J"}, /* OSC title, clear */
        {"\x1b]52;c;cm0gLXJm\x07", "\\x1b]52;c;cm0gLXJm\\x07"},    /* OSC 52 clipboard */
        {"a\nb\rc\td\x7f", "a\\x0ab\\x0dc\\x09d\\x7f"},
        {"csi \xc2\x9b"
         "31m",
         "csi \\xc2\\x9b31m"}, /* U+009B, the C1 CSI */
        {"caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x90\x88", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x90\x88"},
        {"bad \xff\xc3 \xed\xa0\x80", "bad \\xff\\xc3 \\xed\\xa0\\x80"}, /* not UTF-8, surrogate */
        {"back\\slash", "back\\slash"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vit_escape(out, sizeof out, cases[i].in);
        check(!strcmp(out, cases[i].want) && printable(out), "vit_escape case %zu: '%s'", i, out);
    }
    /* cut before an escape or a character that does not fit, never inside one */
    vit_escape(out, 6,
               "ab\x1b"
               "cd");
    check(!strcmp(out, "ab"), "vit_escape cut before \\x1b: '%s'", out);
    vit_escape(out, 4, "ab\xc3\xa9");
    check(!strcmp(out, "ab"), "vit_escape cut before a 2-byte character: '%s'", out);
    /* a control byte that reaches a message (here the path of a labels file) is escaped */
    VitError err = {0};
    char(*none)[VIT_LABEL_BYTES] = NULL;
    vit_labels_load(&none, "/nonexistent/\x1b[2J\x07.txt", 3, &err);
    check(strstr(err.msg, "/nonexistent/\\x1b[2J\\x07.txt: cannot open") == err.msg &&
              printable(err.msg),
          "a message escapes the path's terminal codes: '%s'", err.msg);

    /* labels from config.json and from a labels file: printed by --top, so escaped */
    char dir[1024], path[1100], cfg[1100], lab[1100];
    tiny_in_folder(dir, sizeof dir, path, sizeof path, "escape");
    path_join(cfg, sizeof cfg, dir, "config.json");
    write_text(cfg, "{\"num_heads\": 4, \"label_names\": [\"zero\", \"\\u001b]0;x\\u0007one\","
                    " \"t\\u009bwo\"]}");
    Vit vit = {0};
    VitStatus rc = vit_load(&vit, path, NULL, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "config.json with terminal codes in labels"))
        check(vit.labels && !strcmp(vit.labels[1], "\\x1b]0;x\\x07one") &&
                  !strcmp(vit.labels[2], "t\\xc2\\x9bwo"),
              "config.json labels escaped: '%s', '%s'", vit.labels ? vit.labels[1] : "",
              vit.labels ? vit.labels[2] : "");
    path_join(lab, sizeof lab, dir, "labels.txt");
    write_text(lab, "zero\n\x1b[2Jone\ntwo\n");
    char(*labels)[VIT_LABEL_BYTES] = NULL;
    rc = vit_labels_load(&labels, lab, 3, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "labels file with terminal codes"))
        check(!strcmp(labels[1], "\\x1b[2Jone"), "labels file escaped: '%s'", labels[1]);
    free(labels);
    vit_free(&vit);
}

static void test_free(void) {
    Vit vit;
    memset(&vit, 0, sizeof vit);
    vit_free(&vit);
    vit_free(&vit);
    vit_free(NULL);
    check(1, "vit_free on a zeroed Vit, twice, and on NULL");

    char path[1100];
    path_join(path, sizeof path, g_dir, "valid/tiny_head.safetensors");
    VitError err;
    if (check(vit_load(&vit, path, NULL, &err) == VIT_OK, "reload tiny_head")) {
        vit_free(&vit);
        static const Vit zero;
        check(memcmp(&vit, &zero, sizeof vit) == 0, "vit_free leaves the Vit zeroed");
        vit_free(&vit);
        check(1, "vit_free twice after a load");
    }
    check(strcmp(vit_status_name(VIT_ERR_FORMAT), "format") == 0 &&
              strcmp(vit_status_name((VitStatus)99), "unknown") == 0,
          "vit_status_name: \"%s\", \"%s\"", vit_status_name(VIT_ERR_FORMAT),
          vit_status_name((VitStatus)99));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
    if (make_dir(g_dir) != 0) {
        fprintf(stderr, "cannot create %s\n", g_dir);
        return 2;
    }
    int iterations = 3000;
    const char *env = getenv("VITLENS_FUZZ_ITERATIONS");
    if (env && atoi(env) > 0) iterations = atoi(env);

    test_valid();
    test_dtypes();
    test_nonfinite();
    test_config();
    test_headers();
    test_models();
    test_files();
    test_truncated();
    test_fuzz(iterations);
    test_free();
    test_escape();
    return t_finish("test_loader");
}
