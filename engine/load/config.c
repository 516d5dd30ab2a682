/* config.c - config.json beside the weights (engine/load/): timm's hub layout and Hugging
 * Face transformers', read into CfgValues (heads, input size, LayerNorm eps, crop,
 * normalisation, class names) with every key's type checked, and the class names it
 * carries into the Vit. */
#include "loader.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ld_read_file(const char *path, char **out, size_t *n_out, size_t max_bytes) {
    return read_file(path, out, n_out, max_bytes);
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
    if (strcmp(key, "hidden_act") == 0)
        return "\"gelu\" (the exact GELU), \"quick_gelu\" (CLIP's), \"gelu_pytorch_tanh\", "
               "\"relu\" or \"silu\"";
    if (strcmp(key, "quick_gelu") == 0) return "true or false";
    if (strcmp(key, "architecture") == 0) return "a string";
    if (strcmp(key, "use_swiglu_ffn") == 0 || strcmp(key, "use_gated_mlp") == 0)
        return "true or false";
    if (strcmp(key, "global_pool") == 0) return "a string (\"token\", \"avg\")";
    if (strcmp(key, "rope_theta") == 0) return "a number in (1, 1e9]";
    if (strcmp(key, "num_register_tokens") == 0) return "an integer from 0 to 15";
    if (strstr(key, "eps") || strcmp(key, "crop_pct") == 0) return "a number in (0, 1]";
    if (strstr(key, "mean")) return "3 numbers in (-10, 10]";
    if (strstr(key, "std")) return "3 numbers in (0, 10]";
    return "an array of class names or an object {\"0\": name, ...}"; /* label_names, id2label */
}

/* config.json read and parsed into *root, a JSON object (the caller cJSON_Deletes it).
 * Errors: VIT_ERR_IO unreadable, VIT_ERR_FORMAT over VIT_MAX_CONFIG_BYTES, not JSON
 * (with the line and column), not an object. */
static VitStatus config_root(cJSON **root, const char *path, VitError *err) {
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
    *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!*root) {
        /* config.json is edited by hand: say where, as an editor would */
        int line = 1, col = 1;
        for (const char *c = text; end && c < end && c < text + n; c++, col++)
            if (*c == '\n') line++, col = 0;
        free(text);
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: not valid JSON (error at line %d, column %d)", fname, line, col);
    }
    free(text);
    if (!cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: is JSON but not an object", fname);
    }
    return VIT_OK;
}

/* The keys read from each of the top level, "pretrained_cfg" and "vision_config" (j):
 * heads, input size, crop mode, activation, LayerNorm eps, crop_pct, mean and std. The
 * first key with a wrong value, or NULL. */
static const char *config_object(CfgValues *cv, const cJSON *j) {
    const char *bad = NULL;
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
    /* transformers' ACT2FN: "gelu" is the exact erf GELU, "quick_gelu" CLIP's
     * x sigmoid(1.702 x), "gelu_pytorch_tanh" the tanh approximation */
    static const char *const acts[] = {"gelu", "gelu_pytorch_tanh", "quick_gelu", "relu", "silu",
                                       NULL};
    int r_act = bad ? 0 : cfg_enum(j, "hidden_act", acts);
    if (r_act < 0) bad = "hidden_act";
    if (r_act > 0) cv->act = r_act; /* the order of VitActivation, + 1 */
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
    return bad;
}

/* The keys read from the top level only, after the others (bad: the first wrong key so
 * far, or NULL): the SwiGLU and gated MLPs, the pooling, the rotary base, the registers and
 * the class names (detached from root into cv->labels). The first wrong key, or NULL. */
static const char *config_top(CfgValues *cv, cJSON *root, const char *bad) {
    /* transformers' Dinov2Config / Dinov2WithRegistersConfig: the SwiGLU MLP (ViT-g),
     * which vitlens refuses (arch.c), and the register count, checked against the tensors */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "use_swiglu_ffn");
    const cJSON *nr = cJSON_GetObjectItemCaseSensitive(root, "num_register_tokens");
    if (!bad && sw && !cJSON_IsBool(sw)) bad = "use_swiglu_ffn";
    cv->swiglu = cJSON_IsTrue(sw);
    /* timm's hub config: "global_pool" ("token", "avg", ...), what the head reads (arch.c) */
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(root, "global_pool");
    if (!bad && gp && !cJSON_IsString(gp)) bad = "global_pool";
    if (cJSON_IsString(gp))
        snprintf(cv->global_pool, sizeof cv->global_pool, "%s", gp->valuestring);
    /* transformers' DINOv3ViTConfig: the gated MLP (checked against the tensors, arch.c) and
     * the rotary embedding's base */
    const cJSON *gm = cJSON_GetObjectItemCaseSensitive(root, "use_gated_mlp");
    if (!bad && gm && !cJSON_IsBool(gm)) bad = "use_gated_mlp";
    if (gm) cv->gated = cJSON_IsTrue(gm) ? 2 : 1;
    if (!bad && cfg_float(root, "rope_theta", &cv->rope_theta, 1.0, 1e9) < 0) bad = "rope_theta";
    if (!bad && nr) {
        if (!cJSON_IsNumber(nr) || !(nr->valuedouble >= 0 && nr->valuedouble < VIT_MAX_PREFIX) ||
            floor(nr->valuedouble) != nr->valuedouble)
            bad = "num_register_tokens";
        else
            cv->n_registers = 1 + (int)nr->valuedouble;
    }
    if (!bad) {
        const char *lab_key = "label_names"; /* not lab->string: freed with root below */
        cJSON *lab = cJSON_GetObjectItemCaseSensitive(root, lab_key);
        if (!lab) lab = cJSON_GetObjectItemCaseSensitive(root, lab_key = "id2label");
        if (lab) {
            if (cJSON_IsArray(lab) || cJSON_IsObject(lab))
                cv->labels = cJSON_DetachItemViaPointer(root, lab);
            else
                bad = lab_key;
        }
    }
    return bad;
}

/* Parse config.json: timm's hub layout ({"num_heads"?, "label_names": [...],
 * "pretrained_cfg": {"input_size", "crop_pct", "crop_mode", "mean", "std"}}) and
 * Hugging Face transformers' ({"num_attention_heads", "image_size",
 * "layer_norm_eps", "hidden_act", "image_mean", "image_std", "id2label"}). Keys
 * are read from the top level and from "pretrained_cfg"; wrong types are errors
 * naming the key, and so is an activation other than the exact GELU. */
VitStatus ld_parse_config(CfgValues *cv, const char *path, VitError *err) {
    cJSON *root = NULL;
    VitStatus rc = config_root(&root, path, err);
    if (rc) return rc;
    /* transformers' CLIPConfig: the image tower's keys in vision_config */
    const cJSON *objs[3] = {root, cJSON_GetObjectItemCaseSensitive(root, "pretrained_cfg"),
                            cJSON_GetObjectItemCaseSensitive(root, "vision_config")};
    for (int o = 1; o < 3; o++)
        if (objs[o] && !cJSON_IsObject(objs[o])) objs[o] = NULL;
    const char *bad = NULL;     /* the first key with a wrong value */
    const cJSON *bad_in = root; /* the object holding it */
    /* timm's hub config: {"architecture": "vit_base_patch16_clip_quickgelu_224", ...} */
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architecture");
    if (arch && !cJSON_IsString(arch))
        bad = "architecture";
    else if (arch && strstr(arch->valuestring, "quickgelu"))
        cv->act = VIT_ACT_QUICK_GELU + 1;
    if (arch && cJSON_IsString(arch))
        snprintf(cv->architecture, sizeof cv->architecture, "%s", arch->valuestring);
    for (int o = 0; o < 3 && !bad; o++)
        if (objs[o] && (bad = config_object(cv, objs[o]))) bad_in = objs[o];
    bad = config_top(cv, root, bad);
    if (bad) {
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(bad_in, bad));
        rc = vit_set_error(
            err, VIT_ERR_FORMAT, "%s: key '%s%s' is %.60s%s, expected %s", vit_basename(path),
            bad_in == root      ? ""
            : bad_in == objs[1] ? "pretrained_cfg."
                                : "vision_config.",
            bad, got ? got : "?", got && strlen(got) > 60 ? "..." : "", cfg_expected(bad));
        free(got);
    }
    cJSON_Delete(root);
    return rc;
}

/* A size of preprocessor_config.json: an int, {"shortest_edge": n} or {"height": h,
 * "width": w} (h == w); 0 absent, -1 otherwise. */
static int pp_size(const cJSON *obj, const char *k, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, k);
    if (!j) return 0;
    if (cJSON_IsObject(j)) {
        int s = 0, h = 0, w = 0;
        if (cfg_int(j, "shortest_edge", &s) > 0) return *out = s, 1;
        if (cfg_int(j, "height", &h) > 0 && cfg_int(j, "width", &w) > 0 && h == w)
            return *out = h, 1;
        return -1;
    }
    return cfg_int(obj, k, out);
}

VitStatus ld_parse_clip_config(CfgValues *cv, const char *path, int kind, VitError *err) {
    char *text = NULL;
    size_t n = 0;
    const char *fname = vit_basename(path);
    if (read_file(path, &text, &n, VIT_MAX_CONFIG_BYTES))
        return vit_set_error(err, errno == EFBIG ? VIT_ERR_FORMAT : VIT_ERR_IO,
                             "%s: cannot read: %s", path,
                             errno == EFBIG ? "larger than the limit" : strerror(errno));
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: not a JSON object", fname);
    }
    const char *bad = NULL;
    float mean[3], std[3];
    int r;
    /* transformers' CLIPImageProcessor: resize the short side to `size`, centre crop
     * `crop_size`, normalise; OpenCLIP: preprocess_cfg {"mean", "std", "resize_mode"} and
     * model_cfg {"quick_gelu"} (absent: false, open_clip's default GELU) */
    const cJSON *pp = kind ? cJSON_GetObjectItemCaseSensitive(root, "preprocess_cfg") : root;
    const char *mk = kind ? "mean" : "image_mean", *sk = kind ? "std" : "image_std";
    if (pp && !cJSON_IsObject(pp)) bad = "preprocess_cfg";
    if (!bad && pp && (r = cfg_vec3(pp, mk, mean, -10.0, 10.0)) != 0) {
        if (r < 0)
            bad = mk;
        else if (!cv->has_mean)
            memcpy(cv->mean, mean, sizeof mean), cv->has_mean = 1;
    }
    if (!bad && pp && (r = cfg_vec3(pp, sk, std, 0.0, 10.0)) != 0) {
        if (r < 0)
            bad = sk;
        else if (!cv->has_std)
            memcpy(cv->std, std, sizeof std), cv->has_std = 1;
    }
    if (!bad && !kind) {
        int size = 0, crop = 0, rs = pp_size(root, "size", &size),
            rc = pp_size(root, "crop_size", &crop);
        if (rs < 0)
            bad = "size";
        else if (rc < 0)
            bad = "crop_size";
        else if (rs > 0 && rc > 0 && crop <= size && !cv->has_crop)
            cv->crop_pct = (float)crop / (float)size, cv->has_crop = 1;
        /* the processor's PIL filter: 2 bilinear (SigLIP 2), 3 bicubic (CLIP, SigLIP); another
         * (nearest, Lanczos, box, Hamming) is not one vit_preprocess has: the layout's then */
        int rsm = 0;
        if (!bad && cfg_int(root, "resample", &rsm) > 0 && (rsm == 2 || rsm == 3))
            cv->resample = rsm;
    }
    if (!bad && kind) {
        static const char *const modes[] = {"shortest", "squash", NULL};
        int m = pp ? cfg_enum(pp, "resize_mode", modes) : 0;
        if (m < 0) bad = "resize_mode";
        if (m > 0 && !cv->crop_mode) cv->crop_mode = m; /* VIT_CROP_CENTER, _SQUASH + 1 */
        if (m == 2 && !cv->has_crop) cv->crop_pct = 1.0f, cv->has_crop = 1;
        const cJSON *mc = cJSON_GetObjectItemCaseSensitive(root, "model_cfg");
        const cJSON *q =
            cJSON_IsObject(mc) ? cJSON_GetObjectItemCaseSensitive(mc, "quick_gelu") : NULL;
        if (q && !cJSON_IsBool(q))
            bad = "quick_gelu";
        else if (!cv->act)
            cv->act = 1 + (cJSON_IsTrue(q) ? VIT_ACT_QUICK_GELU : VIT_ACT_GELU);
    }
    VitStatus rc = VIT_OK;
    if (bad)
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: key '%s' has a wrong value, expected %s",
                           fname, bad,
                           !strcmp(bad, "resize_mode")      ? "\"shortest\" or \"squash\""
                           : !strcmp(bad, "preprocess_cfg") ? "an object"
                           : !strcmp(bad, "size") || !strcmp(bad, "crop_size")
                               ? "a positive integer, {\"shortest_edge\": n} or {\"height\": n, "
                                 "\"width\": n}"
                               : cfg_expected(bad));
    cJSON_Delete(root);
    return rc;
}

/* Fill vit->labels [C] from a label_names array or an id2label object. */
VitStatus ld_labels_from_json(Vit *vit, const cJSON *lab, const char *fname, VitError *err) {
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
        vit_escape(vit->labels[idx], VIT_LABEL_BYTES, e->valuestring); /* printed by --top */
    }
    return VIT_OK;
}
