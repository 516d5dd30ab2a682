/* test_text_malformed.c - CLIP's text tower (vit_text_load, vit_text_embed) on the files
 * and arguments a user may hand it by mistake: a checkpoint with an image tower only, a
 * file with no tower at all, text tensors of the wrong shape or missing, a truncated file,
 * a NaN weight, configs asking for what the tower cannot do, token ids out of range. Each
 * case (test_malformed.c's style) writes its input under SCRATCH_DIR/<case>/, calls the
 * public API as the app does and checks the status and that the message names the file
 * and says what is wrong; the cases that must work check that they do: a text-only file
 * loads and embeds, and an F16 copy of a tower gives the F32 one's embeddings exactly.
 * CMake registers each CASE line below as the test text_malformed_<case>.
 *
 * usage: test_text_malformed SCRATCH_DIR [CASE]   every case, or one */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* --- a tiny text tower ---------------------------------------------------------- */

/* V 64 tokens, ctx 16, W 64 (W / 64 = 1 head), F 128, E 32, L 2. */
enum { V = 64, CTX = 16, W = 64, F = 128, E = 32, L = 2 };

static void add(Model *m, const char *name, int ndim, int64_t a, int64_t b) {
    model_add(m, name, "F32", ndim, (int64_t[]){a, b});
}

/* The text tower in OpenAI's names (hf 0) or Hugging Face's (hf 1). */
static void text_tower(Model *m, int hf) {
    char n[64];
    add(m, hf ? "text_model.embeddings.token_embedding.weight" : "token_embedding.weight", 2, V, W);
    add(m, hf ? "text_model.embeddings.position_embedding.weight" : "positional_embedding", 2, CTX,
        W);
    for (int l = 0; l < L; l++) {
#define N(fmt) (snprintf(n, sizeof n, fmt, l), n)
        if (hf) {
            static const char *const lin[] = {"self_attn.q_proj", "self_attn.k_proj",
                                              "self_attn.v_proj", "self_attn.out_proj"};
            add(m, N("text_model.encoder.layers.%d.layer_norm1.weight"), 1, W, 0);
            add(m, N("text_model.encoder.layers.%d.layer_norm1.bias"), 1, W, 0);
            for (int i = 0; i < 4; i++) {
                char f[96];
                snprintf(f, sizeof f, "text_model.encoder.layers.%%d.%s.weight", lin[i]);
                add(m, N(f), 2, W, W);
                snprintf(f, sizeof f, "text_model.encoder.layers.%%d.%s.bias", lin[i]);
                add(m, N(f), 1, W, 0);
            }
            add(m, N("text_model.encoder.layers.%d.layer_norm2.weight"), 1, W, 0);
            add(m, N("text_model.encoder.layers.%d.layer_norm2.bias"), 1, W, 0);
            add(m, N("text_model.encoder.layers.%d.mlp.fc1.weight"), 2, F, W);
            add(m, N("text_model.encoder.layers.%d.mlp.fc1.bias"), 1, F, 0);
            add(m, N("text_model.encoder.layers.%d.mlp.fc2.weight"), 2, W, F);
            add(m, N("text_model.encoder.layers.%d.mlp.fc2.bias"), 1, W, 0);
        } else {
            add(m, N("transformer.resblocks.%d.ln_1.weight"), 1, W, 0);
            add(m, N("transformer.resblocks.%d.ln_1.bias"), 1, W, 0);
            add(m, N("transformer.resblocks.%d.attn.in_proj_weight"), 2, 3 * W, W);
            add(m, N("transformer.resblocks.%d.attn.in_proj_bias"), 1, 3 * W, 0);
            add(m, N("transformer.resblocks.%d.attn.out_proj.weight"), 2, W, W);
            add(m, N("transformer.resblocks.%d.attn.out_proj.bias"), 1, W, 0);
            add(m, N("transformer.resblocks.%d.ln_2.weight"), 1, W, 0);
            add(m, N("transformer.resblocks.%d.ln_2.bias"), 1, W, 0);
            add(m, N("transformer.resblocks.%d.mlp.c_fc.weight"), 2, F, W);
            add(m, N("transformer.resblocks.%d.mlp.c_fc.bias"), 1, F, 0);
            add(m, N("transformer.resblocks.%d.mlp.c_proj.weight"), 2, W, F);
            add(m, N("transformer.resblocks.%d.mlp.c_proj.bias"), 1, W, 0);
        }
#undef N
    }
    add(m, hf ? "text_model.final_layer_norm.weight" : "ln_final.weight", 1, W, 0);
    add(m, hf ? "text_model.final_layer_norm.bias" : "ln_final.bias", 1, W, 0);
    if (hf)
        add(m, "text_projection.weight", 2, E, W);
    else
        add(m, "text_projection", 2, W, E);
    model_add(m, "logit_scale", "F32", 0, NULL);
}

/* OpenAI CLIP's image tower's first tensors (what vit_load reads; enough to be told). */
static void image_tower(Model *m) {
    model_add(m, "visual.conv1.weight", "F32", 4, (int64_t[]){W, 3, 8, 8});
    add(m, "visual.class_embedding", 1, W, 0);
    add(m, "visual.positional_embedding", 2, 5, W);
    add(m, "visual.ln_pre.weight", 1, W, 0);
    add(m, "visual.proj", 2, W, E);
}

/* --- cases ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *input;
    void (*run)(const char *dir, const char *input);
} Case;

static void write_model(const Model *m, const char *dir, const char *file, char *path, size_t n) {
    path_join(path, n, dir, file);
    if (model_write(m, path) != 0) check(0, "write %s", path);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char path[1100];
    path_join(path, sizeof path, dir, file);
    write_bytes(path, text, strlen(text));
}

/* vit_text_load on path must fail with want, the message naming the file (named, or the
 * weights' when NULL) and keys. */
static void load_expect_named(const char *path, const char *named, VitStatus want,
                              const char *const *keys, const char *what) {
    VitText t;
    VitError err = {0};
    VitStatus rc = vit_text_load(&t, path, &err);
    const char *s = strrchr(path, '/');
    check_err(rc, &err, want, named ? named : s ? s + 1 : path, keys, what);
    if (rc) printf("       message: %s\n", err.msg);
    vit_text_free(&t);
}

static void load_expect(const char *path, VitStatus want, const char *const *keys,
                        const char *what) {
    load_expect_named(path, NULL, want, keys, what);
}

static void case_image_only(const char *dir, const char *input) {
    Model m = {0};
    image_tower(&m);
    char path[1100];
    write_model(&m, dir, "clip-image.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_FORMAT,
                KEYS("no text tower", "an image tower only", "visual.", "token_embedding.weight"),
                input);
}

static void case_vit_only(const char *dir, const char *input) {
    Model m;
    model_tiny(&m, 64, 2, 8, 2, 128, 10);
    char path[1100];
    write_model(&m, dir, "deit.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_FORMAT, KEYS("no text tower", "an image tower only", "cls_token"),
                input);
}

static void case_no_tower(const char *dir, const char *input) {
    Model m = {0};
    add(&m, "encoder.weight", 2, 4, 4);
    char path[1100];
    write_model(&m, dir, "other.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_FORMAT, KEYS("no text tower", "not a CLIP checkpoint?"), input);
}

/* A text tower alone loads, and embeds: a finite embedding of E values. */
static void text_only_works(const char *dir, const char *input, int hf) {
    Model m = {0};
    text_tower(&m, hf);
    image_tower(&m); /* and with the image tower beside it: the same */
    char path[1100], both[1100];
    write_model(&m, dir, "clip.safetensors", both, sizeof both);
    m.n -= 5;
    write_model(&m, dir, "clip-text.safetensors", path, sizeof path);
    VitText t, t2;
    VitError err = {0};
    VitStatus rc = vit_text_load(&t, path, &err);
    if (!check_err(rc, &err, VIT_OK, NULL, NULL, input)) return;
    check(t.cfg.vocab_size == V && t.cfg.context == CTX && t.cfg.width == W && t.cfg.n_heads == 1 &&
              t.cfg.n_layers == L && t.cfg.mlp_dim == F && t.cfg.embed_dim == E &&
              t.cfg.act == VIT_ACT_QUICK_GELU &&
              t.cfg.naming == (hf ? VIT_NAMES_HF : VIT_NAMES_OPENAI),
          "%s: V %d ctx %d W %d H %d L %d F %d E %d act %d", input, t.cfg.vocab_size, t.cfg.context,
          t.cfg.width, t.cfg.n_heads, t.cfg.n_layers, t.cfg.mlp_dim, t.cfg.embed_dim,
          (int)t.cfg.act);
    check(fabsf(t.logit_scale - expf(model_value("logit_scale", "F32", 0))) < 1e-5f,
          "%s: logit_scale %g is exp() of the file's", input, (double)t.logit_scale);
    int ids[2][5] = {{62, 5, 9, 63, 0}, {62, 63}}, lens[2] = {5, 2};
    const int *rows[2] = {ids[0], ids[1]};
    float emb[2][E], emb2[2][E];
    rc = vit_text_embed(&emb[0][0], &t, rows, lens, 2, 2, &err);
    int finite = 1;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < E; j++) finite &= isfinite(emb[i][j]) != 0;
    if (check_err(rc, &err, VIT_OK, NULL, NULL, input)) check(finite, "%s: finite", input);
    rc = vit_text_load(&t2, both, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, "both towers")) {
        rc = vit_text_embed(&emb2[0][0], &t2, rows, lens, 2, 1, &err);
        check(!rc && !memcmp(emb, emb2, sizeof emb),
              "%s: the file with both towers embeds the same, bit for bit", input);
    }
    vit_text_free(&t2);
    vit_text_free(&t);
}

static void case_text_only_openai(const char *dir, const char *input) {
    text_only_works(dir, input, 0);
}

static void case_text_only_hf(const char *dir, const char *input) {
    text_only_works(dir, input, 1);
}

/* The tower with tensor `name` given another shape. */
static void reshape_expect(const char *dir, const char *input, int hf, const char *name, int ndim,
                           int64_t a, int64_t b, const char *const *keys) {
    Model m = {0};
    text_tower(&m, hf);
    TSpec *s = model_find(&m, name);
    if (!check(s != NULL, "tensor %s in the test's model", name)) return;
    s->ndim = ndim, s->shape[0] = a, s->shape[1] = b;
    char path[1100];
    write_model(&m, dir, "clip.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_SHAPE, keys, input);
}

static void case_shape_in_proj(const char *dir, const char *input) {
    reshape_expect(dir, input, 0, "transformer.resblocks.1.attn.in_proj_weight", 2, 2 * W, W,
                   KEYS("'transformer.resblocks.1.attn.in_proj_weight'", "shape [128, 64]",
                        "expected [192, 64]"));
}

static void case_shape_projection(const char *dir, const char *input) {
    /* Hugging Face's [E, W] under OpenAI's name, whose layout is [W, E] */
    reshape_expect(dir, input, 0, "text_projection", 2, E, W,
                   KEYS("'text_projection'", "shape [32, 64]", "expected [64, -1]"));
}

static void case_shape_hf_fc2(const char *dir, const char *input) {
    reshape_expect(dir, input, 1, "text_model.encoder.layers.0.mlp.fc2.weight", 2, F, W,
                   KEYS("'text_model.encoder.layers.0.mlp.fc2.weight'", "shape [128, 64]",
                        "expected [64, 128]"));
}

static void case_shape_position(const char *dir, const char *input) {
    reshape_expect(dir, input, 1, "text_model.embeddings.position_embedding.weight", 2, CTX, W / 2,
                   KEYS("'text_model.embeddings.position_embedding.weight'", "shape [16, 32]",
                        "expected [-1, 64]"));
}

static void case_missing_ln_final(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 0);
    model_remove(&m, "ln_final.bias");
    char path[1100];
    write_model(&m, dir, "clip.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_SHAPE, KEYS("'ln_final.bias' is missing"), input);
}

static void case_no_projection(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 1);
    model_remove(&m, "text_projection.weight");
    char path[1100];
    write_model(&m, dir, "text-encoder.safetensors", path, sizeof path);
    load_expect(path, VIT_ERR_SHAPE, KEYS("no text projection", "'text_projection.weight'"), input);
}

static void case_truncated(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 0);
    size_t n;
    uint8_t *b = model_bytes(&m, &n);
    char path[1100];
    path_join(path, sizeof path, dir, "clip.safetensors");
    write_bytes(path, b, n - 1000); /* the last tensors' data cut off */
    free(b);
    load_expect(path, VIT_ERR_FORMAT, KEYS("past the data area", "file truncated?"), input);
}

static void case_nan_weight(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 0);
    size_t n;
    uint8_t *b = model_bytes(&m, &n);
    float nan = NAN;
    memcpy(model_data(&m, b, "token_embedding.weight") + 4 * 70, &nan, 4);
    char path[1100];
    path_join(path, sizeof path, dir, "clip.safetensors");
    write_bytes(path, b, n);
    free(b);
    load_expect(path, VIT_ERR_FORMAT, KEYS("'token_embedding.weight'", "element 70", "NaN"), input);
}

/* The HF tower with config.json beside it. */
static void config_expect(const char *dir, const char *input, const char *file, const char *json,
                          int hf, VitStatus want, const char *const *keys) {
    Model m = {0};
    text_tower(&m, hf);
    char path[1100];
    write_model(&m, dir, "model.safetensors", path, sizeof path);
    write_text(dir, file, json);
    /* a config's mistake names the config; the tower's shape, the weights */
    load_expect_named(path, want == VIT_ERR_FORMAT ? file : NULL, want, keys, input);
}

static void case_config_heads(const char *dir, const char *input) {
    config_expect(dir, input, "config.json", "{\"text_config\": {\"num_attention_heads\": 7}}", 1,
                  VIT_ERR_SHAPE, KEYS("7 heads do not divide", "width 64"));
}

static void case_config_act(const char *dir, const char *input) {
    config_expect(dir, input, "config.json", "{\"text_config\": {\"hidden_act\": \"swish\"}}", 1,
                  VIT_ERR_FORMAT, KEYS("config.json", "text_config.hidden_act", "\"swish\""));
}

static void case_openclip_pool(const char *dir, const char *input) {
    config_expect(dir, input, "open_clip_config.json",
                  "{\"model_cfg\": {\"text_cfg\": {\"pool_type\": \"last\"}}}", 0, VIT_ERR_FORMAT,
                  KEYS("open_clip_config.json", "pool_type", "argmax"));
}

/* The HF config's activation and heads are read; the caller's override is honoured. */
static void case_config_read(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 1);
    char path[1100];
    write_model(&m, dir, "model.safetensors", path, sizeof path);
    write_text(dir, "config.json",
               "{\"text_config\": {\"hidden_act\": \"gelu\", \"num_attention_heads\": 4}}");
    VitText t;
    VitError err = {0};
    VitStatus rc = vit_text_load(&t, path, &err);
    if (check_err(rc, &err, VIT_OK, NULL, NULL, input)) {
        check(t.cfg.act == VIT_ACT_GELU && t.cfg.n_heads == 4 && strstr(t.cfg.act_from, "config"),
              "%s: GELU and 4 heads from config.json (act %d, H %d, from %s)", input,
              (int)t.cfg.act, t.cfg.n_heads, t.cfg.act_from);
        int ids[3] = {62, 7, 63}, len = 3;
        const int *row = ids;
        float a[E], b[E];
        rc = vit_text_embed(a, &t, &row, &len, 1, 1, &err);
        t.cfg.act = VIT_ACT_QUICK_GELU; /* the caller's override */
        rc |= vit_text_embed(b, &t, &row, &len, 1, 1, &err);
        check(!rc && memcmp(a, b, sizeof a) != 0, "%s: cfg.act changed after load is used", input);
        t.cfg.n_heads = 3;
        rc = vit_text_embed(b, &t, &row, &len, 1, 1, &err);
        check_err(rc, &err, VIT_ERR_ARG, "model.safetensors", KEYS("3 heads do not divide"),
                  "heads overridden to 3");
    }
    vit_text_free(&t);
}

static void case_embed_args(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 0);
    char path[1100];
    write_model(&m, dir, "clip.safetensors", path, sizeof path);
    VitText t;
    VitError err = {0};
    VitStatus rc = vit_text_load(&t, path, &err);
    if (!check_err(rc, &err, VIT_OK, NULL, NULL, input)) return;
    float out[2 * E];
    int good[3] = {62, 1, 63}, bad[3] = {62, V, 63}, neg[2] = {62, -1}, lens[2] = {3, 3};
    int long_ids[CTX + 1] = {0};
    const int *rows[2] = {good, bad};
    rc = vit_text_embed(out, &t, rows, lens, 2, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, "clip.safetensors",
              KEYS("sequence 1, token 1", "id 64", "[0, 64)"), "an id past the vocabulary");
    rows[1] = neg, lens[1] = 2;
    rc = vit_text_embed(out, &t, rows, lens, 2, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, "clip.safetensors", KEYS("sequence 1, token 1", "id -1"),
              "a negative id");
    rows[1] = long_ids, lens[1] = CTX + 1;
    rc = vit_text_embed(out, &t, rows, lens, 2, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, "clip.safetensors",
              KEYS("sequence 1 has 17 tokens", "1 .. 16"), "a sequence longer than the context");
    lens[1] = 0;
    rc = vit_text_embed(out, &t, rows, lens, 2, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, NULL, KEYS("sequence 1 has 0 tokens"), "an empty sequence");
    rc = vit_text_embed(out, &t, NULL, lens, 2, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, NULL, KEYS("NULL"), "ids NULL");
    rc = vit_text_embed(out, &t, rows, lens, 0, 1, &err);
    check(rc == VIT_OK, "no sequences: nothing to do");
    vit_text_free(&t);
    VitText z = {0};
    rc = vit_text_embed(out, &z, rows, lens, 1, 1, &err);
    check_err(rc, &err, VIT_ERR_ARG, NULL, KEYS("no text tower loaded"), "a zeroed VitText");
    vit_text_free(&z);
}

/* F16 weights (the values are multiples of 1/64: exact in F16) embed as the F32 ones. */
static void case_f16(const char *dir, const char *input) {
    Model m = {0};
    text_tower(&m, 0);
    char p32[1100], p16[1100];
    write_model(&m, dir, "clip32.safetensors", p32, sizeof p32);
    model_set_dtype(&m, "F16");
    write_model(&m, dir, "clip16.safetensors", p16, sizeof p16);
    VitText a, b;
    VitError err = {0};
    VitStatus rc = vit_text_load(&a, p32, &err);
    rc |= vit_text_load(&b, p16, &err);
    int ids[4] = {62, 3, 4, 63}, len = 4;
    const int *row = ids;
    float ea[E], eb[E];
    if (check_err(rc, &err, VIT_OK, NULL, NULL, input)) {
        rc = vit_text_embed(ea, &a, &row, &len, 1, 1, &err);
        rc |= vit_text_embed(eb, &b, &row, &len, 1, 2, &err);
        check(!rc && !memcmp(ea, eb, sizeof ea), "%s: F16 embeds as F32, bit for bit", input);
    }
    vit_text_free(&a);
    vit_text_free(&b);
}

/* One line per case; CMake reads the names from the lines that start with CASE. */
#define CASE(name, input)                                                                          \
    { #name, input, case_##name }
static const Case cases[] = {
    /* clang-format off */
    CASE(image_only, "a CLIP checkpoint with the image tower only (OpenAI names)"),
    CASE(vit_only, "a timm ViT (an image model, no text tower)"),
    CASE(no_tower, "a .safetensors of neither tower"),
    CASE(text_only_openai, "a text tower alone, OpenAI names (works)"),
    CASE(text_only_hf, "a text tower alone, Hugging Face names (works)"),
    CASE(shape_in_proj, "attn.in_proj_weight [2W, W]"),
    CASE(shape_projection, "OpenAI's text_projection stored [E, W]"),
    CASE(shape_hf_fc2, "Hugging Face mlp.fc2.weight transposed"),
    CASE(shape_position, "a position embedding of the wrong width"),
    CASE(missing_ln_final, "ln_final.bias missing"),
    CASE(no_projection, "Hugging Face names without text_projection (CLIPTextModel)"),
    CASE(truncated, "a text tower's .safetensors cut short"),
    CASE(nan_weight, "a NaN in the token embedding"),
    CASE(config_heads, "config.json: 7 heads for width 64"),
    CASE(config_act, "config.json: hidden_act \"swish\""),
    CASE(openclip_pool, "open_clip_config.json: pool_type \"last\""),
    CASE(config_read, "config.json's GELU and heads, and the caller's override (works)"),
    CASE(embed_args, "vit_text_embed: ids out of range, lengths, NULL"),
    CASE(f16, "an F16 text tower (works)"),
    /* clang-format on */
};

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s SCRATCH_DIR [CASE]\n", argv[0]);
        return 2;
    }
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (argc == 3 && strcmp(argv[2], cases[i].name) != 0) continue;
        char dir[1024];
        path_join(dir, sizeof dir, argv[1], cases[i].name);
        if (make_dir(dir) != 0) {
            fprintf(stderr, "cannot create %s\n", dir);
            return 2;
        }
        printf("# %s: %s\n", cases[i].name, cases[i].input);
        cases[i].run(dir, cases[i].input);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "no case named %s\n", argv[2]);
        return 2;
    }
    return t_finish("test_text_malformed");
}
