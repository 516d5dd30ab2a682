/* text_load.c - vit_text_load (text.c's top comment: the model it reads): a CLIP or SigLIP
 * checkpoint's text tower in Hugging Face's or OpenAI/OpenCLIP's names, read with vit_load's
 * readers (engine/load/), its configs beside the weights, every tensor bound to its block. */
#include "load/loader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- tensor names ------------------------------------------------------------ */

/* clang-format off */
/* One block's tensors; printf formats taking the block index. */
typedef enum {
    B_LN1_W, B_LN1_B, B_QKV_W, B_QKV_B, B_Q_W, B_Q_B, B_K_W, B_K_B, B_V_W, B_V_B,
    B_OUT_W, B_OUT_B, B_LN2_W, B_LN2_B, B_FC1_W, B_FC1_B, B_FC2_W, B_FC2_B, B_LS1, B_LS2,
    N_BSLOTS
} BSlot;

typedef struct {
    const char *what; /* for messages */
    const char *tok, *pos, *norm_w, *norm_b;
    const char *block[N_BSLOTS]; /* NULL: the naming has no such tensor */
} TextNames;

#define OB "transformer.resblocks.%d."
static const TextNames names_openai = {
    "CLIP text tower (OpenAI/OpenCLIP names)",
    "token_embedding.weight", "positional_embedding", "ln_final.weight", "ln_final.bias",
    {[B_LN1_W] = OB "ln_1.weight",            [B_LN1_B] = OB "ln_1.bias",
     [B_QKV_W] = OB "attn.in_proj_weight",    [B_QKV_B] = OB "attn.in_proj_bias",
     [B_OUT_W] = OB "attn.out_proj.weight",   [B_OUT_B] = OB "attn.out_proj.bias",
     [B_LN2_W] = OB "ln_2.weight",            [B_LN2_B] = OB "ln_2.bias",
     [B_FC1_W] = OB "mlp.c_fc.weight",        [B_FC1_B] = OB "mlp.c_fc.bias",
     [B_FC2_W] = OB "mlp.c_proj.weight",      [B_FC2_B] = OB "mlp.c_proj.bias",
     [B_LS1] = OB "ls_1.gamma",               [B_LS2] = OB "ls_2.gamma"}};
#define HB "text_model.encoder.layers.%d."
/* transformers' text encoder layers: CLIPModel's and SiglipModel's are named alike */
#define HF_TEXT_NAMES                                                                          \
    "text_model.embeddings.token_embedding.weight",                                            \
        "text_model.embeddings.position_embedding.weight",                                     \
        "text_model.final_layer_norm.weight", "text_model.final_layer_norm.bias",              \
    {                                                                                          \
        [B_LN1_W] = HB "layer_norm1.weight", [B_LN1_B] = HB "layer_norm1.bias",                \
        [B_Q_W] = HB "self_attn.q_proj.weight", [B_Q_B] = HB "self_attn.q_proj.bias",          \
        [B_K_W] = HB "self_attn.k_proj.weight", [B_K_B] = HB "self_attn.k_proj.bias",          \
        [B_V_W] = HB "self_attn.v_proj.weight", [B_V_B] = HB "self_attn.v_proj.bias",          \
        [B_OUT_W] = HB "self_attn.out_proj.weight", [B_OUT_B] = HB "self_attn.out_proj.bias",  \
        [B_LN2_W] = HB "layer_norm2.weight", [B_LN2_B] = HB "layer_norm2.bias",                \
        [B_FC1_W] = HB "mlp.fc1.weight", [B_FC1_B] = HB "mlp.fc1.bias",                        \
        [B_FC2_W] = HB "mlp.fc2.weight", [B_FC2_B] = HB "mlp.fc2.bias"                         \
    }
static const TextNames names_hf = {
    "CLIP text tower (Hugging Face CLIPModel names)",
    HF_TEXT_NAMES};
/* SiglipModel (transformers modeling_siglip.py SiglipTextTransformer): the same names */
static const TextNames names_siglip = {
    "SigLIP text tower (Hugging Face SiglipModel names)",
    HF_TEXT_NAMES};
#undef OB
#undef HB
#undef HF_TEXT_NAMES
/* clang-format on */

/* --- loading ------------------------------------------------------------------- */

typedef struct {
    Loader ld;
    const TextNames *nm;
    char name[160];
} TextLoader;

static const char *bname(TextLoader *tl, BSlot s, int l) {
    snprintf(tl->name, sizeof tl->name, tl->nm->block[s], l);
    return tl->name;
}

static const float *tensor1(TextLoader *tl, const char *name, int64_t n0) {
    int64_t sh[1] = {n0};
    return ld_tensor(&tl->ld, name, 1, sh);
}

static const float *tensor2(TextLoader *tl, const char *name, int64_t n0, int64_t n1) {
    int64_t sh[2] = {n0, n1};
    return ld_tensor(&tl->ld, name, 2, sh);
}

static int has(TextLoader *tl, const char *name) {
    return st_find(&tl->ld.st, name) != NULL;
}

/* Does any tensor's name start with prefix? The first such name, or NULL. */
static const char *find_prefix(const StFile *st, const char *prefix) {
    size_t n = strlen(prefix);
    for (int i = 0; i < st->n; i++)
        if (!strncmp(st->tensors[i].name, prefix, n)) return st->tensors[i].name;
    return NULL;
}

/* The naming from the token embedding's name; without one, say what the file holds. */
static VitStatus detect_naming(TextLoader *tl, VitText *t) {
    Loader *ld = &tl->ld;
    if (has(tl, names_hf.tok) && has(tl, "text_model.head.weight")) {
        /* SiglipModel: CLIP's Hugging Face names, a head Linear(W, E) with bias instead of
           text_projection, the last position pooled without a mask */
        tl->nm = &names_siglip, t->cfg.naming = VIT_NAMES_HF, t->cfg.pool = VIT_TEXT_POOL_LAST;
    } else if (has(tl, names_hf.tok)) {
        tl->nm = &names_hf, t->cfg.naming = VIT_NAMES_HF;
    } else if (has(tl, names_openai.tok)) {
        tl->nm = &names_openai, t->cfg.naming = VIT_NAMES_OPENAI;
    } else {
        static const char *const image_prefixes[] = {"vision_model.",        "visual.", "cls_token",
                                                     "embeddings.cls_token", "vit.",    "deit."};
        const char *img = NULL;
        for (size_t i = 0; !img && i < sizeof image_prefixes / sizeof *image_prefixes; i++)
            img = find_prefix(&ld->st, image_prefixes[i]);
        if (img)
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: no text tower: an image tower only (tensor '%.80s'), "
                                 "without 'text_model.embeddings.token_embedding.weight' "
                                 "(Hugging Face CLIPModel) or 'token_embedding.weight' "
                                 "(OpenAI/OpenCLIP): load a CLIP checkpoint that has both "
                                 "towers for text",
                                 ld->fname, img);
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: no text tower: neither "
                             "'text_model.embeddings.token_embedding.weight' (Hugging Face "
                             "CLIPModel) nor 'token_embedding.weight' (OpenAI/OpenCLIP) among "
                             "its %d tensors; not a CLIP checkpoint?",
                             ld->fname, ld->st.n);
    }
    ld->what = tl->nm->what;
    return VIT_OK;
}

/* --- the configs beside the weights ------------------------------------------ */

static cJSON *read_json(const char *path, const char *fname, VitError *err, VitStatus *rc) {
    char *buf = NULL;
    size_t n = 0;
    *rc = VIT_OK;
    if (ld_read_file(path, &buf, &n, VIT_MAX_CONFIG_BYTES) != 0) {
        *rc = vit_set_error(err, VIT_ERR_IO, "%s: cannot read %s", path, fname);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        *rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: not a JSON object", path);
    }
    return root;
}

/* "FILE beside the weights" into path; 1 when it exists. */
static int beside(char *path, size_t n, const char *weights, const char *fname, const char *file) {
    size_t dir = (size_t)(fname - weights);
    snprintf(path, n, "%.*s%s", (int)dir, weights, file);
    return access(path, F_OK) == 0;
}

static VitStatus bad_key(VitError *err, const char *path, const char *key, const cJSON *j,
                         const char *expected) {
    char *got = cJSON_PrintUnformatted(j);
    VitStatus rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: key '%s' is %.60s, expected %s", path,
                                 key, got ? got : "?", expected);
    free(got);
    return rc;
}

/* heads (a positive int) of obj[key] into *h when present. */
static VitStatus read_heads(int *h, const cJSON *obj, const char *key, const char *path,
                            const char *full, VitError *err) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!j) return VIT_OK;
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 1 && j->valuedouble <= VIT_MAX_WIDTH) ||
        floor(j->valuedouble) != j->valuedouble)
        return bad_key(err, path, full, j, "a number of heads >= 1");
    *h = (int)j->valuedouble;
    return VIT_OK;
}

static VitStatus read_eps(float *eps, const cJSON *obj, const char *key, const char *path,
                          const char *full, VitError *err) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!j) return VIT_OK;
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0 && j->valuedouble <= 1) ||
        !((float)j->valuedouble > 0))
        return bad_key(err, path, full, j, "a LayerNorm eps in (0, 1]");
    *eps = (float)j->valuedouble;
    return VIT_OK;
}

/* Hugging Face: config.json's text_config (CLIPTextConfig). */
static VitStatus read_hf_config(VitText *t, const char *path, const char *fname, VitError *err) {
    char cp[1100];
    if (!beside(cp, sizeof cp, path, fname, "config.json")) return VIT_OK;
    VitStatus rc;
    cJSON *root = read_json(cp, "config.json", err, &rc);
    if (!root) return rc;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (tc && !cJSON_IsObject(tc)) {
        rc = bad_key(err, cp, "text_config", tc, "an object");
        goto done;
    }
    if (!tc) goto done; /* a config without it: CLIPTextConfig's defaults */
    if ((rc = read_heads(&t->cfg.n_heads, tc, "num_attention_heads", cp,
                         "text_config.num_attention_heads", err)) ||
        (rc =
             read_eps(&t->cfg.ln_eps, tc, "layer_norm_eps", cp, "text_config.layer_norm_eps", err)))
        goto done;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(tc, "hidden_act");
    if (act) {
        /* transformers' ACT2FN: "gelu" exact, "gelu_new" / "gelu_pytorch_tanh" the tanh
         * approximation, "quick_gelu" x sigmoid(1.702 x) */
        const char *s = cJSON_IsString(act) ? act->valuestring : "";
        if (!strcmp(s, "quick_gelu"))
            t->cfg.act = VIT_ACT_QUICK_GELU;
        else if (!strcmp(s, "gelu"))
            t->cfg.act = VIT_ACT_GELU;
        else if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh"))
            t->cfg.act = VIT_ACT_GELU_TANH;
        else {
            rc = bad_key(err, cp, "text_config.hidden_act", act,
                         "\"quick_gelu\", \"gelu\", \"gelu_new\" or \"gelu_pytorch_tanh\"");
            goto done;
        }
        t->cfg.act_from = "config.json text_config.hidden_act";
    }
done:
    cJSON_Delete(root);
    return rc;
}

/* OpenAI/OpenCLIP: open_clip_config.json's model_cfg (open_clip's CLIPTextCfg). */
static VitStatus read_openclip_config(VitText *t, const char *path, const char *fname,
                                      VitError *err) {
    char cp[1100];
    if (!beside(cp, sizeof cp, path, fname, "open_clip_config.json")) return VIT_OK;
    VitStatus rc;
    cJSON *root = read_json(cp, "open_clip_config.json", err, &rc);
    if (!root) return rc;
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(root, "model_cfg");
    if (!cJSON_IsObject(mc)) {
        rc = mc ? bad_key(err, cp, "model_cfg", mc, "an object")
                : vit_set_error(err, VIT_ERR_FORMAT, "%s: no 'model_cfg' object", cp);
        goto done;
    }
    const cJSON *qg = cJSON_GetObjectItemCaseSensitive(mc, "quick_gelu");
    if (qg && !cJSON_IsBool(qg)) {
        rc = bad_key(err, cp, "model_cfg.quick_gelu", qg, "true or false");
        goto done;
    }
    /* open_clip: act_layer = QuickGELU if quick_gelu else nn.GELU (default False) */
    t->cfg.act = qg && cJSON_IsTrue(qg) ? VIT_ACT_QUICK_GELU : VIT_ACT_GELU;
    t->cfg.act_from = qg ? "open_clip_config.json model_cfg.quick_gelu"
                         : "open_clip_config.json without quick_gelu (open_clip's GELU)";
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(mc, "text_cfg");
    if (!tc) goto done;
    if (!cJSON_IsObject(tc)) {
        rc = bad_key(err, cp, "model_cfg.text_cfg", tc, "an object");
        goto done;
    }
    if ((rc = read_heads(&t->cfg.n_heads, tc, "heads", cp, "model_cfg.text_cfg.heads", err)))
        goto done;
    const cJSON *nk = cJSON_GetObjectItemCaseSensitive(tc, "norm_kwargs");
    if (cJSON_IsObject(nk) &&
        (rc = read_eps(&t->cfg.ln_eps, nk, "eps", cp, "model_cfg.text_cfg.norm_kwargs.eps", err)))
        goto done;
    /* what this tower does not do: refused rather than computed otherwise */
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(tc, "pool_type");
    if (pool && !(cJSON_IsString(pool) && !strcmp(pool->valuestring, "argmax"))) {
        rc = bad_key(err, cp, "model_cfg.text_cfg.pool_type", pool,
                     "\"argmax\" (the end-of-text token: the only pooling vitlens implements)");
        goto done;
    }
    static const char *const unsupported[] = {"no_causal_mask", "embed_cls", "final_ln_after_pool",
                                              "hf_model_name"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(tc, unsupported[i]);
        if (j && !cJSON_IsFalse(j) && !cJSON_IsNull(j)) {
            char key[64];
            snprintf(key, sizeof key, "model_cfg.text_cfg.%s", unsupported[i]);
            rc = bad_key(err, cp, key, j, "false or absent (vitlens runs CLIP's text tower only)");
            goto done;
        }
    }
done:
    cJSON_Delete(root);
    return rc;
}

/* --- the weights ---------------------------------------------------------------- */

/* Block l's tensors, their shapes checked against W and F. */
static VitStatus bind_block(TextLoader *tl, VitBlock *b, int l, int64_t W, int64_t F) {
    Loader *ld = &tl->ld;
    if (!(b->norm1_w = tensor1(tl, bname(tl, B_LN1_W, l), W)) ||
        !(b->norm1_b = tensor1(tl, bname(tl, B_LN1_B, l), W)))
        return ld->err->code;
    if (tl->nm->block[B_QKV_W]) { /* nn.MultiheadAttention's in_proj: rows q, k, v */
        if (!(b->qkv_w = tensor2(tl, bname(tl, B_QKV_W, l), 3 * W, W)) ||
            !(b->qkv_b = tensor1(tl, bname(tl, B_QKV_B, l), 3 * W)))
            return ld->err->code;
        b->q_w = b->qkv_w, b->k_w = b->qkv_w + W * W, b->v_w = b->qkv_w + 2 * W * W;
        b->q_b = b->qkv_b, b->k_b = b->qkv_b + W, b->v_b = b->qkv_b + 2 * W;
    } else if (!(b->q_w = tensor2(tl, bname(tl, B_Q_W, l), W, W)) ||
               !(b->q_b = tensor1(tl, bname(tl, B_Q_B, l), W)) ||
               !(b->k_w = tensor2(tl, bname(tl, B_K_W, l), W, W)) ||
               !(b->k_b = tensor1(tl, bname(tl, B_K_B, l), W)) ||
               !(b->v_w = tensor2(tl, bname(tl, B_V_W, l), W, W)) ||
               !(b->v_b = tensor1(tl, bname(tl, B_V_B, l), W))) {
        return ld->err->code;
    }
    if (!(b->proj_w = tensor2(tl, bname(tl, B_OUT_W, l), W, W)) ||
        !(b->proj_b = tensor1(tl, bname(tl, B_OUT_B, l), W)) ||
        !(b->norm2_w = tensor1(tl, bname(tl, B_LN2_W, l), W)) ||
        !(b->norm2_b = tensor1(tl, bname(tl, B_LN2_B, l), W)) ||
        !(b->fc1_w = tensor2(tl, bname(tl, B_FC1_W, l), F, W)) ||
        !(b->fc1_b = tensor1(tl, bname(tl, B_FC1_B, l), F)) ||
        !(b->fc2_w = tensor2(tl, bname(tl, B_FC2_W, l), W, F)) ||
        !(b->fc2_b = tensor1(tl, bname(tl, B_FC2_B, l), W)))
        return ld->err->code;
    /* OpenCLIP's LayerScale (ls_init_value): ls_1, ls_2 gamma [W], when present */
    for (int i = 0; i < 2 && tl->nm->block[B_LS1]; i++) {
        const char *n = bname(tl, i ? B_LS2 : B_LS1, l);
        if (!has(tl, n)) continue;
        const float *g = tensor1(tl, n, W);
        if (!g) return ld->err->code;
        *(i ? &b->ls2 : &b->ls1) = g;
    }
    return VIT_OK;
}

/* text_projection: HF's Linear [E, W] (OpenCLIP's linear projection too, with its bias),
 * or OpenAI's parameter [W, E] transposed into t->proj_owned. */
static VitStatus bind_projection(TextLoader *tl, VitText *t, int64_t W) {
    Loader *ld = &tl->ld;
    int64_t sh[2] = {-1, W};
    if (t->cfg.pool == VIT_TEXT_POOL_LAST) { /* SigLIP: pooled_output = self.head(pooled) */
        if (!(t->proj_w = ld_tensor(ld, "text_model.head.weight", 2, sh))) return ld->err->code;
        if (sh[0] >= 1 && sh[0] <= VIT_MAX_WIDTH &&
            !(t->proj_b = tensor1(tl, "text_model.head.bias", sh[0])))
            return ld->err->code;
    } else if (has(tl, "text_projection.weight")) {
        if (!(t->proj_w = ld_tensor(ld, "text_projection.weight", 2, sh))) return ld->err->code;
        if (has(tl, "text_projection.bias") &&
            !(t->proj_b = tensor1(tl, "text_projection.bias", sh[0])))
            return ld->err->code;
    } else if (t->cfg.naming == VIT_NAMES_OPENAI && has(tl, "text_projection")) {
        sh[0] = W, sh[1] = -1;
        const float *p = ld_tensor(ld, "text_projection", 2, sh);
        if (!p) return ld->err->code;
        if (sh[1] >= 1 && sh[1] <= VIT_MAX_WIDTH &&
            (t->proj_owned = malloc((size_t)sh[1] * (size_t)W * sizeof(float)))) {
            for (int64_t w = 0; w < W; w++)
                for (int64_t e = 0; e < sh[1]; e++) t->proj_owned[e * W + w] = p[w * sh[1] + e];
        } else if (sh[1] >= 1 && sh[1] <= VIT_MAX_WIDTH) {
            return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", ld->fname);
        }
        t->proj_w = t->proj_owned;
        sh[0] = sh[1];
    } else {
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: no text projection ('%s' is missing): a text encoder without "
                             "CLIP's projection (CLIPTextModel?) has no embedding to compare with "
                             "an image's",
                             ld->fname,
                             t->cfg.naming == VIT_NAMES_HF ? "text_projection.weight"
                                                           : "text_projection");
    }
    if (sh[0] < 1 || sh[0] > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: the text projection's output has %lld dims, expected 1 .. %d",
                             ld->fname, (long long)sh[0], VIT_MAX_WIDTH);
    t->cfg.embed_dim = (int)sh[0];
    return VIT_OK;
}

/* logit_scale, a scalar (shape [] or [1]), optional: t->logit_scale = exp(it). */
static VitStatus bind_logit_scale(TextLoader *tl, VitText *t) {
    Loader *ld = &tl->ld;
    const StTensor *st = st_find(&ld->st, "logit_scale");
    if (!st) return VIT_OK;
    int64_t sh[1] = {1};
    const float *p = ld_tensor(ld, "logit_scale", st->ndim == 0 ? 0 : 1, sh);
    if (!p) return ld->err->code;
    double s = exp((double)p[0]);
    if (!(s > 0) || s > 1e30)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: tensor 'logit_scale' is %g: its exp() is not a usable scale",
                             ld->fname, (double)p[0]);
    t->logit_scale = (float)s;
    return VIT_OK;
}

/* SigLIP's logit_bias, a scalar (shape [] or [1]), optional: 0 without it. */
static VitStatus bind_logit_bias(TextLoader *tl, VitText *t) {
    Loader *ld = &tl->ld;
    const StTensor *st = st_find(&ld->st, "logit_bias");
    if (!st) return VIT_OK;
    int64_t sh[1] = {1};
    const float *p = ld_tensor(ld, "logit_bias", st->ndim == 0 ? 0 : 1, sh);
    if (!p) return ld->err->code;
    if (!isfinite(p[0]))
        return vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: tensor 'logit_bias' is %g", ld->fname,
                             (double)p[0]);
    t->logit_bias = p[0];
    return VIT_OK;
}

static VitStatus bind_weights(TextLoader *tl, VitText *t) {
    Loader *ld = &tl->ld;
    const TextNames *nm = tl->nm;
    VitTextConfig *c = &t->cfg;
    VitStatus rc;
    int64_t tok[2] = {-1, -1};
    if (!(t->token_embed = ld_tensor(ld, nm->tok, 2, tok))) return ld->err->code;
    if (tok[0] < 1 || tok[0] > VIT_TEXT_MAX_VOCAB || tok[1] < 1 || tok[1] > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': shape [%lld, %lld], expected [V, W] with V in 1 .. "
                             "%d and W in 1 .. %d",
                             ld->fname, nm->tok, (long long)tok[0], (long long)tok[1],
                             VIT_TEXT_MAX_VOCAB, VIT_MAX_WIDTH);
    int64_t V = tok[0], W = tok[1], pos[2] = {-1, W};
    if (!(t->pos_embed = ld_tensor(ld, nm->pos, 2, pos))) return ld->err->code;
    if (pos[0] < 1 || pos[0] > VIT_TEXT_MAX_CONTEXT)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': %lld positions, expected 1 .. %d", ld->fname,
                             nm->pos, (long long)pos[0], VIT_TEXT_MAX_CONTEXT);
    c->vocab_size = (int)V, c->width = (int)W, c->context = (int)pos[0];
    /* L: the blocks 0, 1, ... that have their first LayerNorm */
    int L = 0;
    while (L <= VIT_MAX_LAYERS && has(tl, bname(tl, B_LN1_W, L))) L++;
    if (L == 0)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is missing: a text tower "
                             "without blocks",
                             ld->fname, bname(tl, B_LN1_W, 0));
    if (L > VIT_MAX_LAYERS)
        return vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: more than %d text blocks", ld->fname,
                             VIT_MAX_LAYERS);
    c->n_layers = L;
    int64_t fc1[2] = {-1, W};
    if (!ld_tensor(ld, bname(tl, B_FC1_W, 0), 2, fc1)) return ld->err->code;
    if (fc1[0] < 1 || fc1[0] > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': MLP width %lld, expected "
                             "1 .. %d",
                             ld->fname, bname(tl, B_FC1_W, 0), (long long)fc1[0], VIT_MAX_WIDTH);
    c->mlp_dim = (int)fc1[0];
    if (!(t->blocks = calloc((size_t)L, sizeof *t->blocks)))
        return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", ld->fname);
    for (int l = 0; l < L; l++)
        if ((rc = bind_block(tl, &t->blocks[l], l, W, c->mlp_dim))) return rc;
    if (!(t->norm_w = tensor1(tl, nm->norm_w, W)) || !(t->norm_b = tensor1(tl, nm->norm_b, W)))
        return ld->err->code;
    if ((rc = bind_projection(tl, t, W))) return rc;
    if ((rc = bind_logit_bias(tl, t))) return rc;
    return bind_logit_scale(tl, t);
}

/* --- entry points: loading ------------------------------------------------------ */

VitStatus vit_text_load(VitText *t, const char *path, VitError *err) {
    memset(t, 0, sizeof *t);
    VitError local;
    if (!err) err = &local;
    TextLoader tl = {
        .ld = {
            .vit = &t->file, .fname = vit_basename(path), .err = err, .what = "CLIP text tower"}};
    Loader *ld = &tl.ld;
    VitStatus rc;
    snprintf(t->path, sizeof t->path, "%s", path);
    snprintf(t->file.path, sizeof t->file.path, "%s", path);
    if ((rc = ld_map_file(ld, path))) goto fail;
    if ((rc = ld_alloc_converted(ld))) goto fail;
    if ((rc = detect_naming(&tl, t))) goto fail;
    /* the defaults, then the config beside the weights */
    t->cfg.ln_eps = 1e-5f;
    t->cfg.act = VIT_ACT_QUICK_GELU;
    t->cfg.act_from = t->cfg.naming == VIT_NAMES_HF
                          ? "Hugging Face CLIPTextConfig's default (no text_config.hidden_act)"
                          : "OpenAI's weights (OpenAI names, no open_clip_config.json)";
    if (t->cfg.pool == VIT_TEXT_POOL_LAST) { /* SiglipTextConfig's defaults (its config.json
                                                often sets none of them) */
        t->cfg.ln_eps = 1e-6f, t->cfg.act = VIT_ACT_GELU_TANH, t->cfg.n_heads = 12;
        t->cfg.act_from = "Hugging Face SiglipTextConfig's default (gelu_pytorch_tanh)";
        t->sigmoid = 1;
    }
    rc = t->cfg.naming == VIT_NAMES_HF ? read_hf_config(t, path, ld->fname, err)
                                       : read_openclip_config(t, path, ld->fname, err);
    if (rc) goto fail;
    if ((rc = bind_weights(&tl, t))) goto fail;
    /* heads: the config's, else OpenAI's rule */
    if (!t->cfg.n_heads) t->cfg.n_heads = t->cfg.width >= 64 ? t->cfg.width / 64 : 1;
    if (t->cfg.n_heads > t->cfg.width || t->cfg.width % t->cfg.n_heads) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: %d heads do not divide the text tower's width %d (the config "
                           "beside it, or W / 64)",
                           ld->fname, t->cfg.n_heads, t->cfg.width);
        goto fail;
    }
fail: /* and success: the header table is not kept */
    free(ld->converted);
    st_free(&ld->st);
    if (rc) vit_text_free(t);
    return rc;
}

void vit_text_free(VitText *t) {
    if (!t) return;
    vit_free(&t->file); /* the mapping, storages, converted tensors */
    free(t->blocks);
    free(t->proj_owned);
    memset(t, 0, sizeof *t);
}
