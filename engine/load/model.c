/* model.c - vit_load: map a .safetensors file, infer the ViT's architecture
 * from the tensor shapes, read config.json, point the weights.
 *
 * timm names (timm/models/vision_transformer.py, deit.py):
 *   cls_token [1,1,D]  dist_token [1,1,D]?  reg_token [1,R,D]?
 *   pos_embed [1,Npos+N,D]  patch_embed.proj.{weight [D,3,P,P], bias [D]}
 *   blocks.N.{norm1,norm2}.{weight,bias} [D]  blocks.N.attn.qkv.{weight [3D,D], bias [3D]}
 *   blocks.N.attn.proj.{weight [D,D], bias [D]}  blocks.N.ls{1,2}.gamma [D]?
 *   blocks.N.mlp.fc1.{weight [F,D], bias [F]}  blocks.N.mlp.fc2.{weight [D,F], bias [D]}
 *   norm.{weight,bias} [D]  head.{weight [C,D], bias [C]}  head_dist.{weight, bias}?
 * transformers names (models/vit/modeling_vit.py, models/deit/modeling_deit.py):
 *   see names_hf below: embeddings.*, encoder.layer.N.{layernorm_before,
 *   attention.attention.{query,key,value}, attention.output.dense, layernorm_after,
 *   intermediate.dense, output.dense}, layernorm, classifier (or cls_classifier and
 *   distillation_classifier), under "vit." / "deit." or no prefix. */
#include "internal.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- loading context ------------------------------------------------------- */

/* What config.json says (parse_config). */
typedef struct {
    int n_heads, image_h, image_w;
    int crop_mode; /* 0: absent, else VitCropMode + 1 */
    float ln_eps, crop_pct, mean[3], std[3];
    int has_eps, has_crop, has_mean, has_std;
    cJSON *labels; /* array of strings, or object "0": "name" (detached copy) */
} CfgValues;

typedef struct {
    Vit *vit;
    StFile st;
    const char *fname; /* basename for messages */
    VitError *err;
    size_t owned_used;
    /* config.json (read_config) */
    CfgValues cv;
    const char *cfg_file; /* the config read, or NULL */
    char cfg_path[1100];  /* the default one: config.json beside the weights */
    /* tensor names (detect_naming) */
    VitNaming naming;
    const char *const *names; /* [N_SLOTS] printf formats */
    const char *prefix;       /* transformers: "vit.", "deit." or "" */
    const char *what;         /* "timm ViT", for messages */
    int teacher;              /* transformers' DeiT with a distillation head */
    char name[160];           /* the last slot_name */
} Loader;

/* The architecture read from the tensor shapes (vit_load's infer_* steps), in
 * vit.h's symbols; int64_t as the header's shapes are, until checked. */
typedef struct {
    int64_t D, R, F;  /* width, register tokens, MLP width */
    int has_dist, Np; /* distillation token; prefix tokens Np = 1 + has_dist + R */
    int P;            /* patch px */
    int64_t Tp;       /* rows of the position embedding: Npos + gh0*gw0 */
    int Npos;         /* prefix tokens with a position embedding: Np or 0 */
    int64_t gh0, gw0; /* the training grid, the position embedding's */
    int64_t gh, gw;   /* the input grid */
    int L, H;         /* blocks, heads */
} Arch;

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0)
            bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Bytes of F32 storage needed for a tensor that cannot be used in place. */
static size_t needs_copy(const Loader *ld, const StTensor *t) {
    if (t->dtype == ST_OTHER) return 0;
    if (t->dtype != ST_F32) return t->n_elems;
    return ((uintptr_t)(ld->st.data + t->begin) % sizeof(float)) ? t->n_elems : 0;
}

/* Index of the first NaN or infinity in w[0..n), or n. Tested on the bits, in
 * blocks whose inner loop vectorises: a load reads every weight once. */
static size_t first_nonfinite(const float *w, size_t n) {
    enum { BLOCK = 4096 };
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t end = n - at < BLOCK ? n : at + BLOCK;
        uint32_t bad = 0;
        for (size_t i = at; i < end; i++) {
            uint32_t b;
            memcpy(&b, &w[i], sizeof b);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
        if (!bad) continue;
        for (size_t i = at; i < end; i++)
            if (!isfinite(w[i])) return i;
    }
    return n;
}

/* Weights that are NaN or infinite make every activation after them, and so
 * every map, NaN: refuse the file, naming the tensor and the first bad element. */
static const float *finite_or_null(Loader *ld, const StTensor *t, const float *w) {
    size_t i = first_nonfinite(w, t->n_elems);
    if (i == t->n_elems) return w;
    vit_set_error(ld->err, VIT_ERR_FORMAT,
                  "%s: tensor '%s': element %zu of %zu is %s (a NaN or infinite weight makes "
                  "every map meaningless)",
                  ld->fname, t->name, i, t->n_elems,
                  isnan(w[i]) ? "NaN" : (w[i] > 0 ? "+inf" : "-inf"));
    return NULL;
}

/* Find `name`, check its dtype and shape against `shape` (ndim dims; -1 matches
 * any size and is filled in), check that every value is finite, return F32
 * data. NULL (with err set) on error. */
static const float *tensor(Loader *ld, const char *name, int ndim, int64_t *shape) {
    char got[160], want[160];
    const StTensor *t = st_find(&ld->st, name);
    if (!t) {
        vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (not a %s?)", ld->fname,
                      name, ld->what);
        return NULL;
    }
    if (t->dtype == ST_OTHER) {
        vit_set_error(ld->err, VIT_ERR_FORMAT,
                      "%s: tensor '%s': dtype %s, expected F32, F16 or BF16", ld->fname, name,
                      t->dtype_name);
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (shape[i] >= 0 && shape[i] != t->shape[i]) ok = 0;
    if (!ok) {
        for (int i = 0; i < ndim; i++)
            if (shape[i] < 0) shape[i] = -1;
        vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s': shape %s, expected %s", ld->fname,
                      name, st_shape_str(got, sizeof got, t->shape, t->ndim),
                      st_shape_str(want, sizeof want, shape, ndim));
        return NULL;
    }
    for (int i = 0; i < ndim; i++) shape[i] = t->shape[i];
    const uint8_t *src = ld->st.data + t->begin;
    if (!needs_copy(ld, t)) return finite_or_null(ld, t, (const float *)(const void *)src);

    Vit *vit = ld->vit;
    float *dst = vit->owned + ld->owned_used;
    ld->owned_used += t->n_elems;
    for (size_t i = 0; i < t->n_elems; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
            if (t->dtype == ST_F16) {
                dst[i] = half_to_float(h);
            } else {
                uint32_t bits = (uint32_t)h << 16;
                memcpy(&dst[i], &bits, 4);
            }
        }
    }
    return finite_or_null(ld, t, dst);
}

/* --- config.json ----------------------------------------------------------- */

static int read_file(const char *path, char **out, size_t *n_out, size_t max_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            /* at the limit: one byte more means the file is over it (buf has cap + 1) */
            if (cap >= max_bytes && fread(buf + n, 1, 1, f) == 1) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return -1;
            }
            if (cap >= max_bytes) break;
            cap = cap ? cap * 2 : 4096;
            if (cap > max_bytes) cap = max_bytes;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return -1;
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int bad = ferror(f) ? (errno ? errno : EIO) : 0; /* keep read's reason, e.g. EISDIR */
    fclose(f);
    if (bad) {
        free(buf);
        errno = bad;
        return -1;
    }
    buf[n] = 0;
    *out = buf;
    *n_out = n;
    return 0;
}

/* Positive integer value of key `k` in obj, 0 if absent, -1 if of the wrong type. */
static int cfg_int(const cJSON *obj, const char *k, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (!cJSON_IsNumber(j) || j->valuedouble <= 0 || j->valuedouble > 1e6 ||
        floor(j->valuedouble) != j->valuedouble)
        return -1;
    *out = (int)j->valuedouble;
    return 1;
}

/* The range is checked on the float the engine keeps: 1e-90 is above 0 as a double
 * but rounds to 0 as a float, and a LayerNorm eps, crop or std of 0 divides by zero
 * (tests/fuzz found it). */
static int in_range(const cJSON *j, double lo, double hi) {
    return cJSON_IsNumber(j) && j->valuedouble > lo && j->valuedouble <= hi &&
           (float)j->valuedouble > lo; /* the cast is defined: |value| <= hi */
}

static int cfg_float(const cJSON *obj, const char *k, float *out, double lo, double hi) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (!in_range(j, lo, hi)) return -1;
    *out = (float)j->valuedouble;
    return 1;
}

static int cfg_vec3(const cJSON *obj, const char *k, float out[3], double lo, double hi) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 3) return -1;
    int i = 0;
    for (const cJSON *e = j->child; e; e = e->next, i++) {
        if (!in_range(e, lo, hi)) return -1;
        out[i] = (float)e->valuedouble;
    }
    return 1;
}

/* image size: an int, or [H, W] / [3, H, W]. */
static int cfg_size(const cJSON *obj, const char *k, int *out_h, int *out_w) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (cJSON_IsArray(j)) {
        int n = cJSON_GetArraySize(j);
        if (n != 2 && n != 3) return -1;
        const cJSON *h = cJSON_GetArrayItem(j, n - 2), *w = cJSON_GetArrayItem(j, n - 1);
        if (!cJSON_IsNumber(h) || !cJSON_IsNumber(w)) return -1;
        double v[2] = {h->valuedouble, w->valuedouble};
        for (int i = 0; i < 2; i++)
            if (!(v[i] > 0 && v[i] <= VIT_MAX_INPUT) || floor(v[i]) != v[i]) return -1;
        *out_h = (int)v[0];
        *out_w = (int)v[1];
        return 1;
    }
    int s = 0, r = cfg_int(obj, k, &s);
    if (r > 0 && s > VIT_MAX_INPUT) return -1;
    if (r > 0) *out_h = *out_w = s;
    return r;
}

/* A string value among `allowed` (NULL-terminated): its index + 1, 0 if absent, -1 otherwise. */
static int cfg_enum(const cJSON *obj, const char *k, const char *const *allowed) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (!cJSON_IsString(j)) return -1;
    for (int i = 0; allowed[i]; i++)
        if (strcmp(j->valuestring, allowed[i]) == 0) return i + 1;
    return -1;
}

/* What a config key must hold, for messages (the checks are cfg_* above). */
static const char *cfg_expected(const char *key) {
    if (strstr(key, "heads")) return "a positive integer";
    if (strstr(key, "size")) return "a positive integer, or [H, W] or [3, H, W], at most 16384";
    if (strcmp(key, "crop_mode") == 0)
        return "\"center\" or \"squash\" (\"border\" is not supported)";
    if (strcmp(key, "hidden_act") == 0) return "\"gelu\" (the exact GELU vitlens computes)";
    if (strstr(key, "eps") || strcmp(key, "crop_pct") == 0) return "a number in (0, 1]";
    if (strstr(key, "mean")) return "3 numbers in (-10, 10]";
    if (strstr(key, "std")) return "3 numbers in (0, 10]";
    return "an array of class names or an object {\"0\": name, ...}"; /* label_names, id2label */
}

/* Parse config.json: timm's hub layout ({"num_heads"?, "label_names": [...],
 * "pretrained_cfg": {"input_size", "crop_pct", "crop_mode", "mean", "std"}}) and
 * Hugging Face transformers' ({"num_attention_heads", "image_size",
 * "layer_norm_eps", "hidden_act", "image_mean", "image_std", "id2label"}). Keys
 * are read from the top level and from "pretrained_cfg"; wrong types are errors
 * naming the key, and so is an activation other than the exact GELU. */
static VitStatus parse_config(CfgValues *cv, const char *path, VitError *err) {
    char *text = NULL;
    size_t n = 0;
    const char *fname = vit_basename(path);
    if (read_file(path, &text, &n, VIT_MAX_CONFIG_BYTES)) {
        if (errno == EFBIG)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: config is larger than the limit of %u bytes", path,
                                 VIT_MAX_CONFIG_BYTES);
        return vit_set_error(err, VIT_ERR_IO, "%s: cannot read config: %s", path, strerror(errno));
    }
    const char *end = NULL; /* cJSON's error position, without its global */
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root) {
        /* config.json is edited by hand: say where, as an editor would */
        int line = 1, col = 1;
        for (const char *c = text; end && c < end && c < text + n; c++, col++)
            if (*c == '\n') line++, col = 0;
        free(text);
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: not valid JSON (error at line %d, column %d)", fname, line, col);
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: is JSON but not an object", fname);
    }
    const cJSON *objs[2] = {root, cJSON_GetObjectItemCaseSensitive(root, "pretrained_cfg")};
    if (objs[1] && !cJSON_IsObject(objs[1])) objs[1] = NULL;
    const char *bad = NULL;     /* the first key with a wrong value */
    const cJSON *bad_in = NULL; /* the object holding it */
    for (int o = 0; o < 2 && !bad; o++) {
        const cJSON *j = objs[o];
        if (!j) continue;
        static const char *heads_keys[] = {"num_heads", "n_heads", "num_attention_heads"};
        for (int i = 0; i < 3 && !bad; i++)
            if (cfg_int(j, heads_keys[i], &cv->n_heads) < 0) bad = heads_keys[i];
        static const char *size_keys[] = {"image_size", "img_size", "input_size"};
        for (int i = 0; i < 3 && !bad; i++)
            if (cfg_size(j, size_keys[i], &cv->image_h, &cv->image_w) < 0) bad = size_keys[i];
        static const char *const crop_modes[] = {"center", "squash", NULL};
        int r_mode = bad ? 0 : cfg_enum(j, "crop_mode", crop_modes);
        if (r_mode < 0) bad = "crop_mode";
        if (r_mode > 0) cv->crop_mode = r_mode;
        /* transformers: "gelu" is the exact erf GELU; "gelu_new", "quick_gelu", ... are not */
        static const char *const acts[] = {"gelu", NULL};
        if (!bad && cfg_enum(j, "hidden_act", acts) < 0) bad = "hidden_act";
        int r = 0;
        static const char *eps_keys[] = {"layer_norm_eps", "ln_eps"};
        for (int i = 0; i < 2 && !bad; i++) {
            if ((r = cfg_float(j, eps_keys[i], &cv->ln_eps, 0.0, 1.0)) < 0)
                bad = eps_keys[i];
            else if (r)
                cv->has_eps = 1;
        }
        if (!bad) {
            if ((r = cfg_float(j, "crop_pct", &cv->crop_pct, 0.0, 1.0)) < 0)
                bad = "crop_pct";
            else if (r)
                cv->has_crop = 1;
        }
        static const char *mean_keys[] = {"mean", "image_mean"}, *std_keys[] = {"std", "image_std"};
        for (int i = 0; i < 2 && !bad; i++) {
            if ((r = cfg_vec3(j, mean_keys[i], cv->mean, -10.0, 10.0)) < 0)
                bad = mean_keys[i];
            else if (r)
                cv->has_mean = 1;
            if (bad) break;
            if ((r = cfg_vec3(j, std_keys[i], cv->std, 0.0, 10.0)) < 0)
                bad = std_keys[i];
            else if (r)
                cv->has_std = 1;
        }
        if (bad) bad_in = j;
    }
    if (!bad) {
        const char *lab_key = "label_names"; /* not lab->string: freed with root below */
        cJSON *lab = cJSON_GetObjectItemCaseSensitive(root, lab_key);
        if (!lab) lab = cJSON_GetObjectItemCaseSensitive(root, lab_key = "id2label");
        if (lab) {
            if (cJSON_IsArray(lab) || cJSON_IsObject(lab))
                cv->labels = cJSON_DetachItemViaPointer(root, lab);
            else
                bad = lab_key, bad_in = root;
        }
    }
    VitStatus rc = VIT_OK;
    if (bad) {
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(bad_in, bad));
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: key '%s%s' is %.60s%s, expected %s", fname,
                           bad_in == root ? "" : "pretrained_cfg.", bad, got ? got : "?",
                           got && strlen(got) > 60 ? "..." : "", cfg_expected(bad));
        free(got);
    }
    cJSON_Delete(root);
    return rc;
}

/* Fill vit->labels [C] from a label_names array or an id2label object. */
static VitStatus labels_from_json(Vit *vit, const cJSON *lab, const char *fname, VitError *err) {
    int C = vit->cfg.n_classes;
    int n = cJSON_GetArraySize(lab);
    if (n != C)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: %d label names, but the model has %d classes", fname, n, C);
    vit->labels = calloc((size_t)C, sizeof *vit->labels);
    if (!vit->labels) return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", fname);
    int i = 0;
    for (const cJSON *e = lab->child; e; e = e->next, i++) {
        int idx = i;
        if (cJSON_IsObject(lab)) {
            char *end = NULL;
            long v = strtol(e->string, &end, 10);
            if (!*e->string || *end || v < 0 || v >= C)
                return vit_set_error(err, VIT_ERR_FORMAT,
                                     "%s: id2label key '%.32s' is not a class "
                                     "index in [0, %d)",
                                     fname, e->string, C);
            idx = (int)v;
        }
        if (!cJSON_IsString(e))
            return vit_set_error(err, VIT_ERR_FORMAT, "%s: label %d is not a string", fname, idx);
        snprintf(vit->labels[idx], VIT_LABEL_BYTES, "%s", e->valuestring);
    }
    return VIT_OK;
}

/* --- tensor names: timm and Hugging Face transformers ----------------------- */

/* The tensors vit_load reads, one slot each. */
/* clang-format off */
typedef enum {
    S_CLS, S_DIST, S_REG, S_POS, S_PATCH_W, S_PATCH_B,                        /* embeddings */
    S_NORM1_W, S_NORM1_B, S_QKV_W, S_QKV_B, S_Q_W, S_Q_B, S_K_W, S_K_B, S_V_W, S_V_B,
    S_PROJ_W, S_PROJ_B, S_LS1, S_NORM2_W, S_NORM2_B, S_FC1_W, S_FC1_B, S_FC2_W, S_FC2_B,
    S_LS2,                                                                    /* block l */
    S_NORM_W, S_NORM_B, S_HEAD_W, S_HEAD_B, S_HDIST_W, S_HDIST_B,             /* norm, heads */
    N_SLOTS
} Slot;

/* printf formats taking (prefix, block index); NULL: the naming has no such tensor.
 * timm: vision_transformer.py / deit.py state dicts. transformers: modeling_vit.py,
 * modeling_deit.py, where the prefix is "vit." (ViTForImageClassification),
 * "deit." (DeiTForImageClassification[WithTeacher]) or "" (ViTModel, as
 * facebook/dino-vits16); heads have no prefix. With a teacher the heads are
 * cls_classifier and distillation_classifier (names_hf_teacher). */
#define TB "%sblocks.%d."
static const char *const names_timm[N_SLOTS] = {
    [S_CLS] = "%scls_token",                [S_DIST] = "%sdist_token",
    [S_REG] = "%sreg_token",                [S_POS] = "%spos_embed",
    [S_PATCH_W] = "%spatch_embed.proj.weight", [S_PATCH_B] = "%spatch_embed.proj.bias",
    [S_NORM1_W] = TB "norm1.weight",        [S_NORM1_B] = TB "norm1.bias",
    [S_QKV_W] = TB "attn.qkv.weight",       [S_QKV_B] = TB "attn.qkv.bias",
    [S_PROJ_W] = TB "attn.proj.weight",     [S_PROJ_B] = TB "attn.proj.bias",
    [S_LS1] = TB "ls1.gamma",               [S_LS2] = TB "ls2.gamma",
    [S_NORM2_W] = TB "norm2.weight",        [S_NORM2_B] = TB "norm2.bias",
    [S_FC1_W] = TB "mlp.fc1.weight",        [S_FC1_B] = TB "mlp.fc1.bias",
    [S_FC2_W] = TB "mlp.fc2.weight",        [S_FC2_B] = TB "mlp.fc2.bias",
    [S_NORM_W] = "%snorm.weight",           [S_NORM_B] = "%snorm.bias",
    [S_HEAD_W] = "%shead.weight",           [S_HEAD_B] = "%shead.bias",
    [S_HDIST_W] = "%shead_dist.weight",     [S_HDIST_B] = "%shead_dist.bias",
};
#define HB "%sencoder.layer.%d."
#define HA HB "attention.attention."
static const char *const names_hf[N_SLOTS] = {
    [S_CLS] = "%sembeddings.cls_token",     [S_DIST] = "%sembeddings.distillation_token",
    [S_POS] = "%sembeddings.position_embeddings",
    [S_PATCH_W] = "%sembeddings.patch_embeddings.projection.weight",
    [S_PATCH_B] = "%sembeddings.patch_embeddings.projection.bias",
    [S_NORM1_W] = HB "layernorm_before.weight", [S_NORM1_B] = HB "layernorm_before.bias",
    [S_Q_W] = HA "query.weight",            [S_Q_B] = HA "query.bias",
    [S_K_W] = HA "key.weight",              [S_K_B] = HA "key.bias",
    [S_V_W] = HA "value.weight",            [S_V_B] = HA "value.bias",
    [S_PROJ_W] = HB "attention.output.dense.weight",
    [S_PROJ_B] = HB "attention.output.dense.bias",
    [S_NORM2_W] = HB "layernorm_after.weight", [S_NORM2_B] = HB "layernorm_after.bias",
    [S_FC1_W] = HB "intermediate.dense.weight", [S_FC1_B] = HB "intermediate.dense.bias",
    [S_FC2_W] = HB "output.dense.weight",   [S_FC2_B] = HB "output.dense.bias",
    [S_NORM_W] = "%slayernorm.weight",      [S_NORM_B] = "%slayernorm.bias",
    [S_HEAD_W] = "%.0sclassifier.weight",   [S_HEAD_B] = "%.0sclassifier.bias",
};
static const char *const names_hf_teacher[N_SLOTS] = {
    [S_HEAD_W] = "%.0scls_classifier.weight",
    [S_HEAD_B] = "%.0scls_classifier.bias",
    [S_HDIST_W] = "%.0sdistillation_classifier.weight",
    [S_HDIST_B] = "%.0sdistillation_classifier.bias",
};
#undef TB
#undef HB
#undef HA
/* clang-format on */

/* Name of slot s (block l) in the loader's naming, into ld->name; NULL when
 * the naming has no such tensor. */
static const char *slot_name(Loader *ld, Slot s, int l) {
    const char *fmt = ld->teacher && names_hf_teacher[s] ? names_hf_teacher[s] : ld->names[s];
    if (!fmt) return NULL;
    snprintf(ld->name, sizeof ld->name, fmt, ld->prefix, l);
    return ld->name;
}

static int has_slot(Loader *ld, Slot s, int l) {
    const char *n = slot_name(ld, s, l);
    return n && st_find(&ld->st, n);
}

/* tensor() of slot s: F32 data of the given shape, NULL (err set) on error. */
static const float *slot_tensor(Loader *ld, Slot s, int l, int ndim, int64_t *shape) {
    return tensor(ld, slot_name(ld, s, l), ndim, shape);
}
static const float *slot1(Loader *ld, Slot s, int l, int64_t n0) {
    int64_t sh[1] = {n0};
    return slot_tensor(ld, s, l, 1, sh);
}
static const float *slot2(Loader *ld, Slot s, int l, int64_t n0, int64_t n1) {
    int64_t sh[2] = {n0, n1};
    return slot_tensor(ld, s, l, 2, sh);
}
/* An optional tensor: NULL without error when absent; *bad set on a real error. */
static const float *slot1_opt(Loader *ld, Slot s, int l, int64_t n0, int *bad) {
    if (!has_slot(ld, s, l)) return NULL;
    const float *p = slot1(ld, s, l, n0);
    if (!p) *bad = 1;
    return p;
}

/* Pick the naming from the CLS token's name. 0, or VitStatus with err set. */
static VitStatus detect_naming(Loader *ld) {
    static const char *const hf_prefixes[] = {"vit.", "deit.", ""};
    char n[96];
    if (st_find(&ld->st, "cls_token")) {
        ld->naming = VIT_NAMES_TIMM, ld->names = names_timm, ld->prefix = "";
        ld->what = "timm ViT";
        return VIT_OK;
    }
    for (size_t i = 0; i < sizeof hf_prefixes / sizeof hf_prefixes[0]; i++) {
        snprintf(n, sizeof n, "%sembeddings.cls_token", hf_prefixes[i]);
        if (!st_find(&ld->st, n)) continue;
        snprintf(n, sizeof n, "%sencoder.layer.0.norm1.weight", hf_prefixes[i]);
        if (st_find(&ld->st, n))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' is Hugging Face's Dinov2Model naming, which "
                                 "vitlens does not support: use timm's vit_*_dinov2 checkpoint",
                                 ld->fname, n);
        ld->naming = VIT_NAMES_HF, ld->names = names_hf, ld->prefix = hf_prefixes[i];
        ld->what = "Hugging Face ViT";
        ld->teacher = st_find(&ld->st, "cls_classifier.weight") != NULL;
        return VIT_OK;
    }
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: tensor 'cls_token' is missing (not a timm ViT, nor a Hugging Face "
                         "one with 'embeddings.cls_token')",
                         ld->fname);
}

/* --- position embedding resampling ------------------------------------------ */

/* Keys' cubic convolution kernel with parameter a. */
static double cubic(double x, double a) {
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* w[n_out, n_in]: 1-D weights of torch's F.interpolate(mode='bicubic',
 * align_corners=False), scale = n_in / n_out (aten/src/ATen/native/UpSample.h
 * and cpu/UpSampleKernel.cpp):
 *   antialias=False: a = -0.75 at the 4 taps around scale * (o + 0.5) - 0.5,
 *     indices clamped to the border;
 *   antialias=True: a = -0.5 (Pillow's), the kernel widened by scale when
 *     downsampling, centre scale * (o + 0.5), taps outside dropped and the
 *     weights renormalised to sum 1. */
static void bicubic_weights(double *w, int n_in, int n_out, int antialias) {
    double scale = (double)n_in / n_out;
    memset(w, 0, (size_t)n_out * n_in * sizeof *w);
    for (int o = 0; o < n_out; o++) {
        double *row = w + (size_t)o * n_in;
        if (!antialias) {
            double x = scale * (o + 0.5) - 0.5, x0 = floor(x), t = x - x0;
            for (int k = 0; k < 4; k++) {
                int i = (int)x0 - 1 + k;
                i = i < 0 ? 0 : i > n_in - 1 ? n_in - 1 : i;
                row[i] += cubic(t - (k - 1), -0.75);
            }
            continue;
        }
        double support = scale >= 1.0 ? 2.0 * scale : 2.0, inv = scale >= 1.0 ? 1.0 / scale : 1.0;
        double center = scale * (o + 0.5), sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > n_in ? n_in : hi;
        for (int i = lo; i < hi; i++) sum += row[i] = cubic((i - center + 0.5) * inv, -0.5);
        for (int i = lo; i < hi && sum != 0.0; i++) row[i] /= sum;
    }
}

/* out[Npos + gh*gw, D] from pos[Npos + gh0*gw0, D]: the prefix rows copied, the
 * grid resampled separably (rows, then columns) in double.
 * timm (layers/pos_embed.py, resample_abs_pos_embed):
 *   posemb = F.interpolate(posemb, size=new_size, mode='bicubic', antialias=True)
 * transformers (ViTEmbeddings.interpolate_pos_encoding): the same, antialias=False.
 * 0 on out of memory. */
static int resample_pos_embed(float *out, const float *pos, int n_prefix, int gh0, int gw0, int gh,
                              int gw, int D, int antialias) {
    double *wy = malloc((size_t)gh * gh0 * sizeof *wy), *wx = malloc((size_t)gw * gw0 * sizeof *wx);
    double *tmp = malloc((size_t)gh * gw0 * D * sizeof *tmp),
           *acc = malloc((size_t)D * sizeof *acc);
    int ok = wy && wx && tmp && acc;
    if (ok) {
        memcpy(out, pos, (size_t)n_prefix * D * sizeof *out);
        const float *grid = pos + (size_t)n_prefix * D;
        bicubic_weights(wy, gh0, gh, antialias);
        bicubic_weights(wx, gw0, gw, antialias);
        for (int y = 0; y < gh; y++) /* tmp[y, x0, :] = sum_y0 wy[y, y0] grid[y0, x0, :] */
            for (int x0 = 0; x0 < gw0; x0++) {
                double *t = tmp + ((size_t)y * gw0 + x0) * D;
                for (int d = 0; d < D; d++) t[d] = 0.0;
                for (int y0 = 0; y0 < gh0; y0++) {
                    double k = wy[(size_t)y * gh0 + y0];
                    if (k == 0.0) continue;
                    const float *g = grid + ((size_t)y0 * gw0 + x0) * D;
                    for (int d = 0; d < D; d++) t[d] += k * g[d];
                }
            }
        for (int y = 0; y < gh; y++) /* out[y, x, :] = sum_x0 wx[x, x0] tmp[y, x0, :] */
            for (int x = 0; x < gw; x++) {
                for (int d = 0; d < D; d++) acc[d] = 0.0;
                for (int x0 = 0; x0 < gw0; x0++) {
                    double k = wx[(size_t)x * gw0 + x0];
                    if (k == 0.0) continue;
                    const double *t = tmp + ((size_t)y * gw0 + x0) * D;
                    for (int d = 0; d < D; d++) acc[d] += k * t[d];
                }
                float *o = out + ((size_t)n_prefix + (size_t)y * gw + x) * D;
                for (int d = 0; d < D; d++) o[d] = (float)acc[d];
            }
    }
    free(wy), free(wx), free(tmp), free(acc);
    return ok;
}

static int is_square(int64_t n, int64_t *side) {
    if (n < 1) return 0;
    int64_t s = (int64_t)llround(sqrt((double)n));
    *side = s;
    return s * s == n;
}

/* --- vit_load's steps ------------------------------------------------------- */
/* Each returns VIT_OK, or a VitStatus with ld->err set; vit_load frees what they
 * leave in ld and vit. A NULL from tensor() has set ld->err: they return its code. */

/* Map the weights file read-only and parse its safetensors header into ld->st. */
static VitStatus map_file(Loader *ld, const char *path) {
    Vit *vit = ld->vit;
    VitStatus rc = VIT_OK;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: %s", path,
                           S_ISDIR(sb.st_mode) ? "is a directory, not a weights file"
                                               : "not a regular file");
    } else if (sb.st_size == 0) {
        rc = vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: file is empty (0 bytes)", ld->fname);
    } else {
        vit->map_bytes = (size_t)sb.st_size;
        vit->map_addr = mmap(NULL, vit->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (vit->map_addr == MAP_FAILED) {
            vit->map_addr = NULL;
            rc = vit_set_error(ld->err, VIT_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
    }
    close(fd); /* the mapping outlives it */
    if (rc) return rc;
    return st_parse(&ld->st, vit->map_addr, vit->map_bytes, ld->fname, ld->err);
}

/* Storage for the tensors that cannot be used in place (F16/BF16, unaligned
 * F32): tensor() converts them to F32 into it. */
static VitStatus alloc_converted(Loader *ld) {
    Vit *vit = ld->vit;
    size_t n_owned = 0;
    for (int i = 0; i < ld->st.n; i++) n_owned += needs_copy(ld, &ld->st.tensors[i]);
    if (!n_owned) return VIT_OK;
    vit->owned = malloc(n_owned * sizeof(float));
    if (!vit->owned)
        return vit_set_error(ld->err, VIT_ERR_NOMEM,
                             "%s: out of memory converting %zu weights to F32", ld->fname, n_owned);
    vit->owned_floats = n_owned;
    return VIT_OK;
}

/* config.json into ld->cv: the options' path, or the one beside the weights when
 * there is one. */
static VitStatus read_config(Loader *ld, const char *path, const VitLoadOptions *opt) {
    ld->cfg_file = opt ? opt->config_path : NULL;
    if (!ld->cfg_file) {
        size_t dir = (size_t)(ld->fname - path);
        snprintf(ld->cfg_path, sizeof ld->cfg_path, "%.*sconfig.json", (int)dir, path);
        if (access(ld->cfg_path, F_OK) == 0) ld->cfg_file = ld->cfg_path;
    }
    return ld->cfg_file ? parse_config(&ld->cv, ld->cfg_file, ld->err) : VIT_OK;
}

/* Variants this loader does not implement: refuse rather than compute
 * something else than the model does. */
static VitStatus refuse_variants(const Loader *ld) {
    static const char *unsupported[][2] = {
        {"fc_norm.weight", "average pooling with fc_norm"},
        {"norm_pre.weight", "a norm before the blocks (norm_pre)"},
        {"attn_pool.latent", "attention pooling"},
        {"blocks.0.attn.q_norm.weight", "q/k norm"},
        {"blocks.0.mlp.fc1_g.weight", "a SwiGLU MLP"},
        {"blocks.0.mlp.w12.weight", "a SwiGLU MLP"},
        {"blocks.0.mlp.norm.weight", "a norm inside the MLP"},
    };
    if (ld->naming != VIT_NAMES_TIMM) return VIT_OK;
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (st_find(&ld->st, unsupported[i][0]))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' belongs to a ViT variant (%s) that vitlens does "
                                 "not support",
                                 ld->fname, unsupported[i][0], unsupported[i][1]);
    return VIT_OK;
}

/* The width D from the CLS token; the prefix tokens [CLS, dist?, reg_0 .. reg_{R-1}]
 * (timm VisionTransformer._pos_embed); the patch size P from the patch embedding. */
static VitStatus infer_embeddings(Loader *ld, Arch *a) {
    int64_t s3[3] = {1, 1, -1};
    if (!slot_tensor(ld, S_CLS, 0, 3, s3)) return ld->err->code;
    int64_t D = a->D = s3[2];
    if (D < 1 || D > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': width %lld out of range [1, %d]", ld->fname,
                             slot_name(ld, S_CLS, 0), (long long)D, VIT_MAX_WIDTH);
    int has_dist = a->has_dist = has_slot(ld, S_DIST, 0);
    if (has_dist && !slot_tensor(ld, S_DIST, 0, 3, (int64_t[3]){1, 1, D})) return ld->err->code;
    if (has_slot(ld, S_REG, 0)) {
        int64_t sr[3] = {1, -1, D};
        if (!slot_tensor(ld, S_REG, 0, 3, sr)) return ld->err->code;
        a->R = sr[1];
        if (a->R < 1 || 1 + has_dist + a->R > VIT_MAX_PREFIX)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor 'reg_token': %lld register tokens, expected 1 to %d",
                                 ld->fname, (long long)a->R, VIT_MAX_PREFIX - 1 - has_dist);
    }
    a->Np = 1 + has_dist + (int)a->R;
    int64_t sp[4] = {D, 3, -1, -1};
    if (!slot_tensor(ld, S_PATCH_W, 0, 4, sp)) return ld->err->code;
    if (sp[2] != sp[3] || sp[2] < 1 || sp[2] > VIT_MAX_PATCH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': kernel %lldx%lld, expected a square patch of at "
                             "most %d px",
                             ld->fname, slot_name(ld, S_PATCH_W, 0), (long long)sp[2],
                             (long long)sp[3], VIT_MAX_PATCH);
    a->P = (int)sp[2];
    if (!slot1(ld, S_PATCH_B, 0, D)) return ld->err->code;
    return VIT_OK;
}

/* The position embedding: [1, Npos + gh0*gw0, D] for the training grid, Npos
 * = Np (timm's default, transformers) or 0 (timm no_embed_class: register
 * models, DeiT III). The grid is square unless config.json gives [H, W]. */
static VitStatus infer_pos_grid(Loader *ld, Arch *a) {
    const CfgValues *cv = &ld->cv;
    int Np = a->Np, P = a->P;
    int64_t spos[3] = {1, -1, a->D};
    if (!slot_tensor(ld, S_POS, 0, 3, spos)) return ld->err->code;
    char pos_nm[sizeof ld->name];
    memcpy(pos_nm, ld->name, sizeof pos_nm); /* slot_name reuses ld->name */
    int64_t Tp = spos[1], gh0 = 0, gw0 = 0, side = 0;
    int Npos = Np;
    if (Tp - Np < 1 || Tp - Np > VIT_MAX_PATCHES) {
        if (!(Tp > 1 && Tp <= VIT_MAX_PATCHES && is_square(Tp, &side)))
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s': %lld tokens, expected the %d prefix token%s "
                                 "plus 1 to %d patches",
                                 ld->fname, pos_nm, (long long)Tp, Np, Np > 1 ? "s" : "",
                                 VIT_MAX_PATCHES);
        Npos = 0;
    }
    if (cv->image_h) {
        if (cv->image_h % P || cv->image_w % P)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: image size %dx%d is not a multiple of the patch size %d",
                                 ld->cfg_file, cv->image_h, cv->image_w, P);
        gh0 = cv->image_h / P, gw0 = cv->image_w / P;
        if (Tp - gh0 * gw0 == Np)
            Npos = Np;
        else if (Tp == gh0 * gw0)
            Npos = 0;
        else
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s': %lld positions, but image size %dx%d / patch "
                                 "%d gives a %lldx%lld grid (plus %d prefix token%s)",
                                 ld->fname, pos_nm, (long long)Tp, cv->image_h, cv->image_w, P,
                                 (long long)gh0, (long long)gw0, Np, Np > 1 ? "s" : "");
    } else if (Npos == Np && is_square(Tp - Np, &side)) {
        gh0 = gw0 = side;
    } else if (Tp > 1 && is_square(Tp, &side)) {
        Npos = 0, gh0 = gw0 = side; /* no position embedding for the prefix tokens */
    } else {
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': %lld patch positions is not a square grid; give "
                             "image_size in config.json",
                             ld->fname, pos_nm, (long long)(Tp - Np));
    }
    a->Tp = Tp, a->Npos = Npos, a->gh0 = gh0, a->gw0 = gw0;
    return VIT_OK;
}

/* The input grid: VitLoadOptions, else config.json, else the training grid. */
static VitStatus input_grid(Loader *ld, Arch *a, const VitLoadOptions *opt) {
    int P = a->P;
    a->gh = a->gh0, a->gw = a->gw0;
    if (opt && (opt->image_h > 0 || opt->image_w > 0)) {
        int ih = opt->image_h > 0 ? opt->image_h : opt->image_w;
        int iw = opt->image_w > 0 ? opt->image_w : opt->image_h;
        if (ih % P || iw % P || ih > VIT_MAX_INPUT || iw > VIT_MAX_INPUT)
            return vit_set_error(ld->err, VIT_ERR_ARG,
                                 "%s: input size %dx%d px: each side must be a multiple of the "
                                 "patch size %d, at most %d",
                                 ld->fname, ih, iw, P, VIT_MAX_INPUT);
        a->gh = ih / P, a->gw = iw / P;
    }
    if (a->gh * a->gw > VIT_MAX_PATCHES)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: a %lldx%lld patch grid is over the limit of %d patches",
                             ld->fname, (long long)a->gh, (long long)a->gw, VIT_MAX_PATCHES);
    return VIT_OK;
}

/* L: the blocks numbered 0..L-1. A block after a gap would otherwise be silently
 * dropped and the model run with fewer layers than it has. */
static VitStatus count_blocks(Loader *ld, Arch *a) {
    int L = 0;
    for (; L <= VIT_MAX_LAYERS && has_slot(ld, S_NORM1_W, L);) L++;
    if (L > VIT_MAX_LAYERS)
        return vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: more than %d blocks", ld->fname,
                             VIT_MAX_LAYERS);
    if (L == 0)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is missing (no transformer blocks; not a %s?)",
                             ld->fname, slot_name(ld, S_NORM1_W, 0), ld->what);
    char blk[64];
    snprintf(blk, sizeof blk, ld->naming == VIT_NAMES_TIMM ? "%sblocks." : "%sencoder.layer.",
             ld->prefix);
    size_t blk_n = strlen(blk);
    for (int i = 0; i < ld->st.n; i++) {
        const char *tn = ld->st.tensors[i].name;
        if (strncmp(tn, blk, blk_n) != 0 || tn[blk_n] < '0' || tn[blk_n] > '9') continue;
        char *end;
        long k = strtol(tn + blk_n, &end, 10);
        if (*end == '.' && k >= L)
            return vit_set_error(ld->err, VIT_ERR_SHAPE,
                                 "%s: tensor '%s' belongs to block %ld, but '%s' is missing "
                                 "(blocks must be numbered 0..L-1 without gaps)",
                                 ld->fname, tn, k, slot_name(ld, S_NORM1_W, L));
    }
    a->L = L;
    return VIT_OK;
}

/* F: the MLP width, from block 0's fc1. */
static VitStatus infer_mlp_width(Loader *ld, Arch *a) {
    int64_t D = a->D, sf[2] = {-1, D};
    if (!slot_tensor(ld, S_FC1_W, 0, 2, sf)) return ld->err->code;
    int64_t F = a->F = sf[0];
    if (F < 1 || F > VIT_MAX_WIDTH)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s': MLP width %lld out of range [1, %d]", ld->fname,
                             slot_name(ld, S_FC1_W, 0), (long long)F, VIT_MAX_WIDTH);
    /* timm's SwiGLUPacked (DINOv2 ViT-g): fc1 holds both halves, fc2 takes F/2 */
    const StTensor *fc2 = st_find(&ld->st, slot_name(ld, S_FC2_W, 0));
    if (fc2 && fc2->ndim == 2 && fc2->shape[0] == D && 2 * fc2->shape[1] == F)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is [%lld, %lld], half of fc1's width: a SwiGLU "
                             "MLP (DINOv2 ViT-g), which vitlens does not support",
                             ld->fname, fc2->name, (long long)fc2->shape[0],
                             (long long)fc2->shape[1]);
    return VIT_OK;
}

/* H: the options', else config.json's, else D/64 (ViTs' 64-wide heads). */
static VitStatus head_count(Loader *ld, Arch *a, const VitLoadOptions *opt) {
    int H = (int)(a->D / 64);
    if (ld->cv.n_heads) H = ld->cv.n_heads;
    if (opt && opt->n_heads > 0) H = opt->n_heads;
    if (H < 1 || a->D % H)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: width %lld cannot be split into %d heads; give "
                             "the head count (--heads, or num_heads in config.json)",
                             ld->fname, (long long)a->D, H);
    a->H = H;
    return VIT_OK;
}

/* vit->cfg from the architecture, then config.json, then the options. */
static void set_config(Loader *ld, const Arch *a, const VitLoadOptions *opt) {
    VitConfig *c = &ld->vit->cfg;
    const CfgValues *cv = &ld->cv;
    /* Model name: the file name without extension. */
    snprintf(c->name, sizeof c->name, "%s", ld->fname);
    char *dot = strrchr(c->name, '.');
    if (dot && dot != c->name) *dot = 0;
    c->naming = ld->naming;
    int64_t N = a->gh * a->gw, T = a->Np + N;
    c->patch_size = a->P;
    c->grid_h = (int)a->gh, c->grid_w = (int)a->gw;
    c->image_h = (int)a->gh * a->P, c->image_w = (int)a->gw * a->P;
    c->pos_grid_h = (int)a->gh0, c->pos_grid_w = (int)a->gw0;
    c->n_patches = (int)N;
    c->n_prefix = a->Np;
    c->has_dist_token = a->has_dist;
    c->n_registers = (int)a->R;
    c->n_tokens = (int)T;
    c->dim = (int)a->D;
    c->n_heads = a->H;
    c->head_dim = (int)a->D / a->H;
    c->mlp_dim = (int)a->F;
    c->n_layers = a->L;
    c->ln_eps = cv->has_eps ? cv->ln_eps : ld->naming == VIT_NAMES_HF ? 1e-12f : 1e-6f;
    c->crop_mode = cv->crop_mode ? (VitCropMode)(cv->crop_mode - 1) : VIT_CROP_CENTER;
    c->crop_pct = cv->has_crop ? cv->crop_pct : 0.875f;
    if (opt && opt->whole_image) c->crop_mode = VIT_CROP_SQUASH, c->crop_pct = 1.0f;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(c->mean, cv->has_mean ? cv->mean : mean, sizeof mean);
    memcpy(c->std, cv->has_std ? cv->std : std, sizeof std);
}

/* Block l's query, key and value: timm's fused qkv (rows q, k, v, D each), or
 * transformers' separate query, key, value (biases if qkv_bias). */
static VitStatus bind_qkv(Loader *ld, VitBlock *b, int l, int64_t D) {
    int bad = 0;
    if (ld->naming == VIT_NAMES_TIMM) {
        if (!(b->qkv_w = slot2(ld, S_QKV_W, l, 3 * D, D))) return ld->err->code;
        b->qkv_b = slot1_opt(ld, S_QKV_B, l, 3 * D, &bad);
        if (bad) return ld->err->code;
        b->q_w = b->qkv_w, b->k_w = b->qkv_w + D * D, b->v_w = b->qkv_w + 2 * D * D;
        if (b->qkv_b) b->q_b = b->qkv_b, b->k_b = b->qkv_b + D, b->v_b = b->qkv_b + 2 * D;
        return VIT_OK;
    }
    if (!(b->q_w = slot2(ld, S_Q_W, l, D, D)) || !(b->k_w = slot2(ld, S_K_W, l, D, D)) ||
        !(b->v_w = slot2(ld, S_V_W, l, D, D)))
        return ld->err->code;
    b->q_b = slot1_opt(ld, S_Q_B, l, D, &bad);
    b->k_b = slot1_opt(ld, S_K_B, l, D, &bad);
    b->v_b = slot1_opt(ld, S_V_B, l, D, &bad);
    if (bad) return ld->err->code;
    if (!b->q_b != !b->k_b || !b->q_b != !b->v_b)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: block %d has biases for some of query, key, value but not all",
                             ld->fname, l);
    return VIT_OK;
}

/* Block l's tensors, in the order of the block's forward pass. */
static VitStatus bind_block(Loader *ld, VitBlock *b, int l, int64_t D, int64_t F) {
    VitStatus rc;
    if (!(b->norm1_w = slot1(ld, S_NORM1_W, l, D)) || !(b->norm1_b = slot1(ld, S_NORM1_B, l, D)))
        return ld->err->code;
    if ((rc = bind_qkv(ld, b, l, D))) return rc;
    if (!(b->proj_w = slot2(ld, S_PROJ_W, l, D, D)) || !(b->proj_b = slot1(ld, S_PROJ_B, l, D)) ||
        !(b->norm2_w = slot1(ld, S_NORM2_W, l, D)) || !(b->norm2_b = slot1(ld, S_NORM2_B, l, D)) ||
        !(b->fc1_w = slot2(ld, S_FC1_W, l, F, D)) || !(b->fc1_b = slot1(ld, S_FC1_B, l, F)) ||
        !(b->fc2_w = slot2(ld, S_FC2_W, l, D, F)) || !(b->fc2_b = slot1(ld, S_FC2_B, l, D)))
        return ld->err->code;
    int bad = 0;
    b->ls1 = slot1_opt(ld, S_LS1, l, D, &bad); /* LayerScale (DINOv2, DeiT III) */
    b->ls2 = slot1_opt(ld, S_LS2, l, D, &bad);
    return bad ? ld->err->code : VIT_OK;
}

/* The classifier head [C, D] when there is one (C into vit->cfg), and DeiT's
 * distillation head beside it. */
static VitStatus bind_heads(Loader *ld, const Arch *a) {
    Vit *vit = ld->vit;
    VitWeights *w = &vit->w;
    int64_t D = a->D, sh[2] = {-1, D};
    if (!has_slot(ld, S_HEAD_W, 0) && !has_slot(ld, S_HEAD_B, 0)) return VIT_OK;
    if (!(w->head_w = slot_tensor(ld, S_HEAD_W, 0, 2, sh))) return ld->err->code;
    if (sh[0] < 1 || sh[0] > VIT_MAX_CLASSES)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             sh[0] < 1 ? "%s: tensor '%s' has no classes"
                                       : "%s: tensor '%s': %lld classes, more than "
                                         "the limit of %d",
                             ld->fname, slot_name(ld, S_HEAD_W, 0), (long long)sh[0],
                             VIT_MAX_CLASSES);
    vit->cfg.n_classes = (int)sh[0];
    if (!(w->head_b = slot1(ld, S_HEAD_B, 0, sh[0]))) return ld->err->code;
    /* DeiT distilled: a second head on the distillation token */
    if (!has_slot(ld, S_HDIST_W, 0) && !has_slot(ld, S_HDIST_B, 0)) return VIT_OK;
    if (!a->has_dist)
        return vit_set_error(ld->err, VIT_ERR_SHAPE,
                             "%s: tensor '%s' is a distillation head, but there is no "
                             "distillation token",
                             ld->fname, slot_name(ld, S_HDIST_W, 0));
    if (!(w->head_dist_w = slot2(ld, S_HDIST_W, 0, sh[0], D)) ||
        !(w->head_dist_b = slot1(ld, S_HDIST_B, 0, sh[0])))
        return ld->err->code;
    return VIT_OK;
}

/* Every tensor into vit->w, its shape checked against the architecture and its
 * values finite; F16/BF16 and unaligned F32 converted into vit->owned. */
static VitStatus bind_weights(Loader *ld, const Arch *a) {
    VitWeights *w = &ld->vit->w;
    int64_t D = a->D;
    VitStatus rc;
    w->blocks = calloc((size_t)a->L, sizeof *w->blocks);
    if (!w->blocks) return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", ld->fname);
    /* The shape probes of the infer_* steps may have converted a few tensors
     * already: convert again from the start so each tensor has exactly one slot. */
    ld->owned_used = 0;
    if (!(w->cls_token = slot_tensor(ld, S_CLS, 0, 3, (int64_t[3]){1, 1, D})) ||
        (a->has_dist && !(w->dist_token = slot_tensor(ld, S_DIST, 0, 3, (int64_t[3]){1, 1, D}))) ||
        (a->R && !(w->reg_token = slot_tensor(ld, S_REG, 0, 3, (int64_t[3]){1, a->R, D}))) ||
        !(w->pos_embed = slot_tensor(ld, S_POS, 0, 3, (int64_t[3]){1, a->Tp, D})))
        return ld->err->code;
    w->pos_prefix = a->Npos;
    if (!(w->patch_w = slot_tensor(ld, S_PATCH_W, 0, 4, (int64_t[4]){D, 3, a->P, a->P})) ||
        !(w->patch_b = slot1(ld, S_PATCH_B, 0, D)))
        return ld->err->code;
    for (int l = 0; l < a->L; l++)
        if ((rc = bind_block(ld, &w->blocks[l], l, D, a->F))) return rc;
    if (!(w->norm_w = slot1(ld, S_NORM_W, 0, D)) || !(w->norm_b = slot1(ld, S_NORM_B, 0, D)))
        return ld->err->code;
    return bind_heads(ld, a);
}

/* A few MB of pos_embed can declare a model whose forward pass would need
 * terabytes: refuse it here rather than in vit_run_init or the allocator. */
static VitStatus check_activations(const Loader *ld) {
    const VitConfig *c = &ld->vit->cfg;
    size_t act = 0;
    if (vit_run_floats(c, 1, 1, &act) && act <= VIT_MAX_ACTIVATION_BYTES / sizeof(float))
        return VIT_OK;
    return vit_set_error(ld->err, VIT_ERR_SHAPE,
                         "%s: one forward pass would need %.1f GiB of activations (the "
                         "attention kept for the maps is L*H*T*T = %d*%d*%d*%d floats), more "
                         "than the limit of %.0f GiB",
                         ld->fname, (double)act * sizeof(float) / (1u << 30), c->n_layers,
                         c->n_heads, c->n_tokens, c->n_tokens,
                         (double)VIT_MAX_ACTIVATION_BYTES / (1u << 30));
}

/* Another input grid than the training one: resample the position embedding
 * into vit->pos_owned. */
static VitStatus fit_pos_embed(Loader *ld) {
    Vit *vit = ld->vit;
    const VitConfig *c = &vit->cfg;
    VitWeights *w = &vit->w;
    if (c->grid_h == c->pos_grid_h && c->grid_w == c->pos_grid_w) return VIT_OK;
    vit->pos_owned =
        malloc(((size_t)w->pos_prefix + (size_t)c->n_patches) * (size_t)c->dim * sizeof(float));
    if (!vit->pos_owned || !resample_pos_embed(vit->pos_owned, w->pos_embed, w->pos_prefix,
                                               c->pos_grid_h, c->pos_grid_w, c->grid_h, c->grid_w,
                                               c->dim, ld->naming == VIT_NAMES_TIMM))
        return vit_set_error(ld->err, VIT_ERR_NOMEM,
                             "%s: out of memory resampling the position embedding", ld->fname);
    w->pos_embed = vit->pos_owned;
    return VIT_OK;
}

/* Class names from config.json, for a model with a classifier head. */
static VitStatus attach_labels(Loader *ld) {
    if (!ld->cv.labels || !ld->vit->cfg.n_classes) return VIT_OK;
    return labels_from_json(ld->vit, ld->cv.labels,
                            ld->cfg_file ? vit_basename(ld->cfg_file) : "config", ld->err);
}

/* --- entry points ---------------------------------------------------------- */

VitStatus vit_load(Vit *vit, const char *path, const VitLoadOptions *opt, VitError *err) {
    memset(vit, 0, sizeof *vit);
    VitError local;
    if (!err) err = &local;
    Loader ld = {.vit = vit, .fname = vit_basename(path), .err = err};
    Arch a = {0};
    VitStatus rc;

    snprintf(vit->path, sizeof vit->path, "%s", path);
    if ((rc = map_file(&ld, path))) goto fail;
    if ((rc = alloc_converted(&ld))) goto fail;
    if ((rc = read_config(&ld, path, opt))) goto fail;
    if ((rc = detect_naming(&ld))) goto fail;
    if ((rc = refuse_variants(&ld))) goto fail;
    /* the architecture from the tensor shapes, config.json and the options */
    if ((rc = infer_embeddings(&ld, &a))) goto fail;
    if ((rc = infer_pos_grid(&ld, &a))) goto fail;
    if ((rc = input_grid(&ld, &a, opt))) goto fail;
    if ((rc = count_blocks(&ld, &a))) goto fail;
    if ((rc = infer_mlp_width(&ld, &a))) goto fail;
    if ((rc = head_count(&ld, &a, opt))) goto fail;
    set_config(&ld, &a, opt);
    /* the weights */
    if ((rc = bind_weights(&ld, &a))) goto fail;
    if ((rc = check_activations(&ld))) goto fail;
    if ((rc = fit_pos_embed(&ld))) goto fail;
    rc = attach_labels(&ld);

fail: /* and success: the header table and config.json's values are not kept */
    cJSON_Delete(ld.cv.labels);
    st_free(&ld.st);
    if (rc) vit_free(vit);
    return rc;
}

void vit_free(Vit *vit) {
    if (!vit) return;
    if (vit->map_addr) munmap(vit->map_addr, vit->map_bytes);
    free(vit->owned);
    free(vit->pos_owned);
    free(vit->w.blocks);
    free(vit->labels);
    memset(vit, 0, sizeof *vit);
}
