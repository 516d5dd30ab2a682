/* model.c - vit_load: map a .safetensors file, infer timm's VisionTransformer
 * architecture from the tensor shapes, read config.json, point the weights.
 *
 * timm names (timm/models/vision_transformer.py):
 *   cls_token [1,1,D]  pos_embed [1,T,D]  patch_embed.proj.{weight [D,3,P,P], bias [D]}
 *   blocks.N.{norm1,norm2}.{weight,bias} [D]  blocks.N.attn.qkv.{weight [3D,D], bias [3D]}
 *   blocks.N.attn.proj.{weight [D,D], bias [D]}  blocks.N.mlp.fc1.{weight [F,D], bias [F]}
 *   blocks.N.mlp.fc2.{weight [D,F], bias [D]}  norm.{weight,bias} [D]
 *   head.{weight [C,D], bias [C]} */
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

typedef struct {
    Vit *vit;
    StFile st;
    const char *fname; /* basename for messages */
    VitError *err;
    size_t owned_used;
} Loader;

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
        vit_set_error(ld->err, VIT_ERR_SHAPE, "%s: tensor '%s' is missing (not a timm ViT?)",
                      ld->fname, name);
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

static const float *tensor1(Loader *ld, const char *name, int64_t n0) {
    int64_t s[1] = {n0};
    return tensor(ld, name, 1, s);
}
static const float *tensor2(Loader *ld, const char *name, int64_t n0, int64_t n1) {
    int64_t s[2] = {n0, n1};
    return tensor(ld, name, 2, s);
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

/* image size: an int, or [H, W] / [3, H, W] with H == W (square inputs only). */
static int cfg_size(const cJSON *obj, const char *k, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (cJSON_IsArray(j)) {
        int n = cJSON_GetArraySize(j);
        if (n != 2 && n != 3) return -1;
        const cJSON *h = cJSON_GetArrayItem(j, n - 2), *w = cJSON_GetArrayItem(j, n - 1);
        if (!cJSON_IsNumber(h) || !cJSON_IsNumber(w) || h->valuedouble != w->valuedouble ||
            h->valuedouble <= 0 || h->valuedouble > 1e5 || floor(h->valuedouble) != h->valuedouble)
            return -1;
        *out = (int)h->valuedouble;
        return 1;
    }
    return cfg_int(obj, k, out);
}

/* What a config key must hold, for messages (the checks are cfg_* above). */
static const char *cfg_expected(const char *key) {
    if (strstr(key, "heads")) return "a positive integer";
    if (strstr(key, "size")) return "a positive integer, or [H, W] or [3, H, W] with H == W";
    if (strstr(key, "eps") || strcmp(key, "crop_pct") == 0) return "a number in (0, 1]";
    if (strstr(key, "mean")) return "3 numbers in (-10, 10]";
    if (strstr(key, "std")) return "3 numbers in (0, 10]";
    return "an array of class names or an object {\"0\": name, ...}"; /* label_names, id2label */
}

typedef struct {
    int n_heads, image_size;
    float ln_eps, crop_pct, mean[3], std[3];
    int has_eps, has_crop, has_mean, has_std;
    cJSON *labels; /* array of strings, or object "0": "name" (detached copy) */
} CfgValues;

/* Parse config.json: timm's hub layout ({"num_heads"?, "label_names": [...],
 * "pretrained_cfg": {"input_size", "crop_pct", "mean", "std"}}) and Hugging Face
 * transformers' ({"num_attention_heads", "image_size", "layer_norm_eps",
 * "image_mean", "image_std", "id2label"}). Keys are read from the top level and
 * from "pretrained_cfg"; wrong types are errors naming the key. */
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
            if (cfg_size(j, size_keys[i], &cv->image_size) < 0) bad = size_keys[i];
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

/* --- entry points ---------------------------------------------------------- */

VitStatus vit_load(Vit *vit, const char *path, const VitLoadOptions *opt, VitError *err) {
    memset(vit, 0, sizeof *vit);
    VitError local;
    if (!err) err = &local;
    Loader ld = {.vit = vit, .fname = vit_basename(path), .err = err};
    CfgValues cv = {0};
    VitStatus rc = VIT_OK;
    VitConfig *c = &vit->cfg;
    int fd = -1;
    char name[96];

    snprintf(vit->path, sizeof vit->path, "%s", path);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        rc = vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rc = vit_set_error(err, VIT_ERR_IO, "%s: %s", path,
                           S_ISDIR(sb.st_mode) ? "is a directory, not a weights file"
                                               : "not a regular file");
        goto fail;
    }
    if (sb.st_size == 0) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: file is empty (0 bytes)", ld.fname);
        goto fail;
    }
    vit->map_bytes = (size_t)sb.st_size;
    vit->map_addr = mmap(NULL, vit->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (vit->map_addr == MAP_FAILED) {
        vit->map_addr = NULL;
        rc = vit_set_error(err, VIT_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    close(fd);
    fd = -1;
    if ((rc = st_parse(&ld.st, vit->map_addr, vit->map_bytes, ld.fname, err))) goto fail;

    /* Storage for tensors that cannot be used in place (F16/BF16, unaligned F32). */
    size_t n_owned = 0;
    for (int i = 0; i < ld.st.n; i++) n_owned += needs_copy(&ld, &ld.st.tensors[i]);
    if (n_owned) {
        vit->owned = malloc(n_owned * sizeof(float));
        if (!vit->owned) {
            rc =
                vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory converting %zu weights to F32",
                              ld.fname, n_owned);
            goto fail;
        }
        vit->owned_floats = n_owned;
    }

    /* Model name: the file name without extension. */
    snprintf(c->name, sizeof c->name, "%s", ld.fname);
    char *dot = strrchr(c->name, '.');
    if (dot && dot != c->name) *dot = 0;

    /* config.json: explicit path, or beside the weights when present. */
    char cfg_path[1100];
    const char *cfg_file = opt ? opt->config_path : NULL;
    if (!cfg_file) {
        size_t dir = (size_t)(ld.fname - path);
        snprintf(cfg_path, sizeof cfg_path, "%.*sconfig.json", (int)dir, path);
        if (access(cfg_path, F_OK) == 0) cfg_file = cfg_path;
    }
    if (cfg_file && (rc = parse_config(&cv, cfg_file, err))) goto fail;

    /* Variants this loader does not implement yet: refuse rather than compute
     * something else than the model does. */
    static const char *unsupported[] = {"dist_token",         "reg_token",
                                        "fc_norm.weight",     "norm_pre.weight",
                                        "blocks.0.ls1.gamma", "blocks.0.attn.q_norm.weight"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (st_find(&ld.st, unsupported[i])) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               "%s: tensor '%s' belongs to a ViT variant that "
                               "vitlens does not support yet",
                               ld.fname, unsupported[i]);
            goto fail;
        }

    /* --- architecture from shapes */
    int64_t s3[4] = {1, 1, -1};
    VitWeights *w = &vit->w;
    if (!(w->cls_token = tensor(&ld, "cls_token", 3, s3))) goto shape_fail;
    int64_t D = s3[2];
    if (D < 1 || D > VIT_MAX_WIDTH) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: tensor 'cls_token': width %lld out of range [1, %d]", ld.fname,
                           (long long)D, VIT_MAX_WIDTH);
        goto fail;
    }
    int64_t sp[4] = {D, 3, -1, -1};
    if (!(w->patch_w = tensor(&ld, "patch_embed.proj.weight", 4, sp))) goto shape_fail;
    if (sp[2] != sp[3] || sp[2] < 1 || sp[2] > VIT_MAX_PATCH) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: tensor 'patch_embed.proj.weight': kernel %lldx%lld, expected a "
                           "square patch of at most %d px",
                           ld.fname, (long long)sp[2], (long long)sp[3], VIT_MAX_PATCH);
        goto fail;
    }
    int P = (int)sp[2];
    if (!(w->patch_b = tensor1(&ld, "patch_embed.proj.bias", D))) goto shape_fail;
    int64_t spos[3] = {1, -1, D};
    if (!(w->pos_embed = tensor(&ld, "pos_embed", 3, spos))) goto shape_fail;
    int64_t T = spos[1], N = T - 1;
    if (N < 1 || T > VIT_MAX_TOKENS) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: tensor 'pos_embed': %lld tokens, expected the "
                           "CLS token plus 1 to %d patches",
                           ld.fname, (long long)T, VIT_MAX_TOKENS - 1);
        goto fail;
    }
    int grid;
    if (cv.image_size) {
        if (cv.image_size % P) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               "%s: image size %d is not a multiple of the patch "
                               "size %d",
                               cfg_file, cv.image_size, P);
            goto fail;
        }
        grid = cv.image_size / P;
        if ((int64_t)grid * grid != N) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               "%s: tensor 'pos_embed': %lld patch positions, but "
                               "image size %d / patch %d gives a %dx%d grid",
                               ld.fname, (long long)N, cv.image_size, P, grid, grid);
            goto fail;
        }
    } else {
        grid = (int)llround(sqrt((double)N));
        if ((int64_t)grid * grid != N) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               "%s: tensor 'pos_embed': %lld patch positions is "
                               "not a square grid; give image_size in config.json",
                               ld.fname, (long long)N);
            goto fail;
        }
    }

    int L = 0;
    for (; L <= VIT_MAX_LAYERS; L++) {
        snprintf(name, sizeof name, "blocks.%d.norm1.weight", L);
        if (!st_find(&ld.st, name)) break;
    }
    if (L == 0 || L > VIT_MAX_LAYERS) {
        rc = vit_set_error(
            err, VIT_ERR_SHAPE,
            L ? "%s: more than %d blocks"
              : "%s: tensor 'blocks.0.norm1.weight' is missing (no transformer blocks; "
                "not a timm ViT?)",
            ld.fname, VIT_MAX_LAYERS);
        goto fail;
    }
    /* Blocks are numbered 0..L-1: a block after a gap would otherwise be
     * silently dropped and the model run with fewer layers than it has. */
    for (int i = 0; i < ld.st.n; i++) {
        const char *tn = ld.st.tensors[i].name;
        if (strncmp(tn, "blocks.", 7) != 0 || tn[7] < '0' || tn[7] > '9') continue;
        char *end;
        long k = strtol(tn + 7, &end, 10);
        if (*end == '.' && k >= L) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               "%s: tensor '%s' belongs to block %ld, but "
                               "'blocks.%d.norm1.weight' is missing (blocks must be "
                               "numbered 0..L-1 without gaps)",
                               ld.fname, tn, k, L);
            goto fail;
        }
    }
    int64_t sf[2] = {-1, D};
    if (!tensor(&ld, "blocks.0.mlp.fc1.weight", 2, sf)) goto shape_fail;
    int64_t F = sf[0];
    if (F < 1 || F > VIT_MAX_WIDTH) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: tensor 'blocks.0.mlp.fc1.weight': MLP width %lld out of range "
                           "[1, %d]",
                           ld.fname, (long long)F, VIT_MAX_WIDTH);
        goto fail;
    }

    int H = (int)(D / 64);
    if (cv.n_heads) H = cv.n_heads;
    if (opt && opt->n_heads > 0) H = opt->n_heads;
    if (H < 1 || D % H) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: width %lld cannot be split into %d heads; give "
                           "the head count (--heads, or num_heads in config.json)",
                           ld.fname, (long long)D, H);
        goto fail;
    }

    c->patch_size = P;
    c->grid_h = c->grid_w = grid;
    c->image_size = grid * P;
    c->n_patches = (int)N;
    c->n_prefix = 1;
    c->n_tokens = (int)T;
    c->dim = (int)D;
    c->n_heads = H;
    c->head_dim = (int)D / H;
    c->mlp_dim = (int)F;
    c->n_layers = L;
    c->ln_eps = cv.has_eps ? cv.ln_eps : 1e-6f;
    c->crop_pct = cv.has_crop ? cv.crop_pct : 0.875f;
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memcpy(c->mean, cv.has_mean ? cv.mean : mean, sizeof mean);
    memcpy(c->std, cv.has_std ? cv.std : std, sizeof std);

    /* --- weights */
    w->blocks = calloc((size_t)L, sizeof *w->blocks);
    if (!w->blocks) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", ld.fname);
        goto fail;
    }
    /* The shape probes above may have converted a few tensors already: convert
     * again from the start so each tensor has exactly one slot. */
    ld.owned_used = 0;
    if (!(w->cls_token = tensor(&ld, "cls_token", 3, (int64_t[3]){1, 1, D}))) goto shape_fail;
    if (!(w->pos_embed = tensor(&ld, "pos_embed", 3, (int64_t[3]){1, T, D}))) goto shape_fail;
    if (!(w->patch_w = tensor(&ld, "patch_embed.proj.weight", 4, (int64_t[4]){D, 3, P, P})))
        goto shape_fail;
    if (!(w->patch_b = tensor1(&ld, "patch_embed.proj.bias", D))) goto shape_fail;
    for (int l = 0; l < L; l++) {
        VitBlock *b = &w->blocks[l];
#define T1(field, suffix, n0)                                                                      \
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);                                        \
    if (!(b->field = tensor1(&ld, name, n0))) goto shape_fail;
#define T2(field, suffix, n0, n1)                                                                  \
    snprintf(name, sizeof name, "blocks.%d.%s", l, suffix);                                        \
    if (!(b->field = tensor2(&ld, name, n0, n1))) goto shape_fail;
        T1(norm1_w, "norm1.weight", D)
        T1(norm1_b, "norm1.bias", D)
        T2(qkv_w, "attn.qkv.weight", 3 * D, D)
        T1(qkv_b, "attn.qkv.bias", 3 * D)
        T2(proj_w, "attn.proj.weight", D, D)
        T1(proj_b, "attn.proj.bias", D)
        T1(norm2_w, "norm2.weight", D)
        T1(norm2_b, "norm2.bias", D)
        T2(fc1_w, "mlp.fc1.weight", F, D)
        T1(fc1_b, "mlp.fc1.bias", F)
        T2(fc2_w, "mlp.fc2.weight", D, F)
        T1(fc2_b, "mlp.fc2.bias", D)
#undef T1
#undef T2
    }
    if (!(w->norm_w = tensor1(&ld, "norm.weight", D))) goto shape_fail;
    if (!(w->norm_b = tensor1(&ld, "norm.bias", D))) goto shape_fail;
    if (st_find(&ld.st, "head.weight") || st_find(&ld.st, "head.bias")) {
        int64_t sh[2] = {-1, D};
        if (!(w->head_w = tensor(&ld, "head.weight", 2, sh))) goto shape_fail;
        if (sh[0] < 1 || sh[0] > VIT_MAX_CLASSES) {
            rc = vit_set_error(err, VIT_ERR_SHAPE,
                               sh[0] < 1 ? "%s: tensor 'head.weight' has no classes"
                                         : "%s: tensor 'head.weight': %lld classes, more than "
                                           "the limit of %d",
                               ld.fname, (long long)sh[0], VIT_MAX_CLASSES);
            goto fail;
        }
        c->n_classes = (int)sh[0];
        if (!(w->head_b = tensor1(&ld, "head.bias", sh[0]))) goto shape_fail;
    }

    /* A few MB of pos_embed can declare a model whose forward pass would need
     * terabytes: refuse it here rather than in vit_run_init or the allocator. */
    size_t act = 0;
    if (!vit_run_floats(c, &act) || act > VIT_MAX_ACTIVATION_BYTES / sizeof(float)) {
        rc = vit_set_error(err, VIT_ERR_SHAPE,
                           "%s: one forward pass would need %.1f GiB of activations (the "
                           "attention kept for the maps is L*H*T*T = %d*%d*%d*%d floats), more "
                           "than the limit of %.0f GiB",
                           ld.fname, (double)act * sizeof(float) / (1u << 30), L, H, (int)T, (int)T,
                           (double)VIT_MAX_ACTIVATION_BYTES / (1u << 30));
        goto fail;
    }

    if (cv.labels && c->n_classes) {
        if ((rc = labels_from_json(vit, cv.labels, cfg_file ? vit_basename(cfg_file) : "config",
                                   err)))
            goto fail;
    }
    cJSON_Delete(cv.labels);
    st_free(&ld.st);
    return VIT_OK;

shape_fail:
    rc = err->code;
fail:
    if (fd >= 0) close(fd);
    cJSON_Delete(cv.labels);
    st_free(&ld.st);
    vit_free(vit);
    return rc;
}

void vit_free(Vit *vit) {
    if (!vit) return;
    if (vit->map_addr) munmap(vit->map_addr, vit->map_bytes);
    free(vit->owned);
    free(vit->w.blocks);
    free(vit->labels);
    memset(vit, 0, sizeof *vit);
}
