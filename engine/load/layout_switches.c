/* layout_switches.c - a layout file's JSON (layout.h; the format: docs/your-own-vit.md):
 * checked whole when it is read (layout_parse), then its switches set into the loader once
 * the layout applies (layout_apply_switches): whose conventions, attention scale,
 * activations, pooling, LayerNorm eps, preprocessing, CLIP's configs, class names. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT_MAX_PREFIXES 8

/* --- the layout file ---------------------------------------------------------------- */

/* A string, or an array of strings (alternatives: "tensors"' values, "prefix"), none
 * longer than a name may be. */
static int is_names(const cJSON *j) {
    if (cJSON_IsString(j)) return strlen(j->valuestring) < LD_NAME_BYTES - 16;
    if (!cJSON_IsArray(j) || !j->child) return 0;
    for (const cJSON *e = j->child; e; e = e->next)
        if (!cJSON_IsString(e) || strlen(e->valuestring) >= LD_NAME_BYTES - 16) return 0;
    return 1;
}

/* "tensors": each key a role, each value a tensor name or an array of alternatives. */
static VitStatus parse_tensors(const Layout *lay, const char *file, VitError *err) {
    for (const cJSON *t = lay->tensors->child; t; t = t->next) {
        int known = 0;
        for (int r = 0; r < N_ROLES && !known; r++)
            known = !strcmp(t->string, layout_roles[r].role);
        if (!known)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: \"tensors\": '%s' is not a role (see docs/your-own-vit.md)",
                                 file, t->string);
        if (!is_names(t))
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: \"tensors\": '%s' is not a tensor name (a string, or an "
                                 "array of alternatives) under %d characters",
                                 file, t->string, LD_NAME_BYTES - 16);
    }
    return VIT_OK;
}

/* "rope" (none, dinov3, eva), "rope_theta", "rope_ref_grid" (needed by "eva"). */
static VitStatus parse_rope(Layout *lay, const cJSON *root, const char *file, VitError *err) {
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(root, "rope");
    static const char *const ropes[] = {"none", "dinov3", "eva"}; /* VitRope's order */
    int rk = 0;
    while (rope && rk < 3 && !(cJSON_IsString(rope) && !strcmp(rope->valuestring, ropes[rk]))) rk++;
    if (rk == 3)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope\" must be \"dinov3\" (DINOv3's rotary position "
                             "embedding), \"eva\" (EVA-02's) or \"none\"",
                             file);
    lay->rope = (VitRope)rk;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
    if (th && !(cJSON_IsNumber(th) && th->valuedouble > 1 && th->valuedouble <= 1e9))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope_theta\" must be a number in (1, 1e9] (DINOv3: 100)", file);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, "rope_ref_grid");
    if ((ref || lay->rope == VIT_ROPE_EVA) &&
        !(cJSON_IsNumber(ref) && ref->valuedouble >= 1 && ref->valuedouble <= 256 &&
          ref->valuedouble == (int)ref->valuedouble))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"rope_ref_grid\" must be a whole number of patches in [1, "
                             "256] (EVA-02's: 16), given with \"rope\": \"eva\"",
                             file);
    return VIT_OK;
}

/* "detect": a name, an array of names (all present), or an array of such arrays (any one). */
static VitStatus parse_detect(const cJSON *root, const char *file, VitError *err) {
    const cJSON *det = cJSON_GetObjectItemCaseSensitive(root, "detect");
    int det_ok = !det || is_names(det);
    if (!det_ok && cJSON_IsArray(det) && det->child) { /* an array of groups */
        det_ok = 1;
        for (const cJSON *e = det->child; e; e = e->next) det_ok &= cJSON_IsArray(e) && is_names(e);
    }
    if (!det_ok)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"detect\" must be a tensor name, an array of them (all "
                             "present: the layout matches), or an array of such arrays (any "
                             "one all present)",
                             file);
    return VIT_OK;
}

/* root, the JSON of `file`, checked whole into lay: every key the format knows, each of
 * the kind it must be (the tensor names' patterns are resolved later, layout_resolve). */
VitStatus layout_parse(Layout *lay, cJSON *root, const char *file, VitError *err) {
    VitStatus rc;
    lay->root = root, lay->file = file, lay->prefix = "";
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
    lay->tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsObject(root) || !cJSON_IsString(nm) || !cJSON_IsObject(lay->tensors))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: a layout needs \"name\" (a string) and \"tensors\" (an object "
                             "of role: tensor name)",
                             file);
    lay->name = nm->valuestring;
    if ((rc = parse_tensors(lay, file, err))) return rc;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "prefix");
    if (pre && (!is_names(pre) || cJSON_GetArraySize(pre) > LAYOUT_MAX_PREFIXES))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"prefix\" must be a string or an array of at most %d strings "
                             "(what {p} in the tensor names stands for)",
                             file, LAYOUT_MAX_PREFIXES);
    const cJSON *naming = cJSON_GetObjectItemCaseSensitive(root, "naming");
    if (naming && !(cJSON_IsString(naming) &&
                    (!strcmp(naming->valuestring, "timm") || !strcmp(naming->valuestring, "hf"))))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"naming\" must be \"timm\" (timm's conventions, the default) "
                             "or \"hf\" (Hugging Face transformers')",
                             file);
    lay->naming = naming && !strcmp(naming->valuestring, "hf") ? VIT_NAMES_HF : VIT_NAMES_TIMM;
    lay->library = naming != NULL;
    static const char *const why[2] = {"unsupported", "left_out"};
    for (int k = 0; k < 2; k++) {
        const cJSON *uns = cJSON_GetObjectItemCaseSensitive(root, why[k]);
        int ok = !uns || cJSON_IsObject(uns);
        for (const cJSON *u = ok && uns ? uns->child : NULL; u; u = u->next)
            ok &= cJSON_IsString(u) && strlen(u->string) < LD_NAME_BYTES - 16;
        if (!ok)
            return vit_set_error(
                err, VIT_ERR_FORMAT, "%s: \"%s\" must be an object of tensor name: %s", file,
                why[k], k ? "why the model opens without it" : "the variant it belongs to");
    }
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "position_prefix");
    if (pp && !(cJSON_IsString(pp) && !strcmp(pp->valuestring, "cls")))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"position_prefix\" must be \"cls\" (the position embedding has "
                             "a row for the CLS token, none for the register tokens), or absent",
                             file);
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(root, "position_antialias");
    if (pa && !cJSON_IsBool(pa))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"position_antialias\" must be true or false", file);
    lay->cls_pos_only = pp != NULL;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "class_token");
    if (ct && !cJSON_IsBool(ct))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: \"class_token\" must be true (the default) or false (no CLS "
                             "token: SigLIP's towers, pooled by \"map\")",
                             file);
    lay->no_cls = cJSON_IsFalse(ct);
    if ((rc = parse_rope(lay, root, file, err))) return rc;
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(root, "glu_packed");
    if (gp && !cJSON_IsBool(gp))
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: \"glu_packed\" must be true or false", file);
    return parse_detect(root, file, err);
}

const char *layout_str(const Layout *lay, const char *k, const char *dflt) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(lay->root, k);
    return cJSON_IsString(j) ? j->valuestring : dflt;
}

/* --- the switches into the loader ------------------------------------------------------ */

/* A JSON value for a message: the number, or what it is instead. */
static const char *number_str(char *out, size_t n, const cJSON *j) {
    if (!j) return "missing";
    if (!cJSON_IsNumber(j)) return "not a number";
    snprintf(out, n, "%g", j->valuedouble);
    return out;
}

/* CLIP's own configs beside the weights ("clip_configs": true; vit.h, "CLIP"), read before
 * the layout's defaults: what they give wins over the layout's preprocessing and
 * activation. */
static VitStatus clip_configs(Loader *ld, const Layout *lay) {
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(lay->root, "clip_configs");
    if (cJSON_IsTrue(clip)) {
        static const char *const side[2] = {"preprocessor_config.json", "open_clip_config.json"};
        const char *path = ld->vit->path;
        size_t dir = (size_t)(vit_basename(path) - path);
        for (int k = 0; k < 2; k++) {
            char p[1100];
            snprintf(p, sizeof p, "%.*s%s", (int)dir, path, side[k]);
            FILE *f = fopen(p, "rb");
            if (!f) continue;
            fclose(f);
            VitStatus rc = ld_parse_clip_config(&ld->cv, p, k, ld->err);
            if (rc) return rc;
        }
        if (ld->cv.act) ld->mlp_act = ld->cv.act - 1;
    }
    return VIT_OK;
}

/* "pooling": what the head reads, "cls" (the CLS token, the default), "mean" (of the patch
 * tokens), "cls_mean" ([CLS ; mean], transformers' Dinov2ForImageClassification) or "map"
 * (SigLIP's attention pooling, only without a CLS token). */
static VitStatus pooling(Loader *ld, const Layout *lay) {
    static const char *const pools[] = {"cls", "mean", "cls_mean", "map"};
    const char *pool = layout_str(lay, "pooling", "cls");
    int pl = 0;
    while (pl < 4 && strcmp(pool, pools[pl])) pl++;
    if (pl == 4)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"pooling\": '%s', expected \"cls\" (the CLS token), \"mean\" "
                             "(the mean of the patch tokens), \"cls_mean\" ([CLS ; mean]) or "
                             "\"map\" (SigLIP's attention pooling: the attn_pool.* roles)",
                             lay->file, pool);
    if ((pl == VIT_POOL_MAP) != lay->no_cls)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"pooling\": \"map\" goes with \"class_token\": false and "
                             "only with it (a model without a CLS token pools by attention)",
                             lay->file);
    ld->head_pool = pl; /* VitPooling's order */
    ld->no_cls = lay->no_cls;
    return VIT_OK;
}

/* "preprocess": {"resize": 256, "crop": 224, "crop_mode", "interpolation", "mean": [..],
 * "std": [..]}, each given where the model's own configs gave none. */
static VitStatus preprocess(Loader *ld, const Layout *lay) {
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(lay->root, "preprocess");
    if (cJSON_IsObject(pp)) {
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(pp, "resize");
        const cJSON *cr = cJSON_GetObjectItemCaseSensitive(pp, "crop");
        /* crop_pct = crop / resize: a crop of 1 px from a resize of 1e300 was 0 as a float,
           and every photo then "too elongated" to resize; refused here, by its keys */
        if ((rs || cr) &&
            !(cJSON_IsNumber(rs) && cJSON_IsNumber(cr) && cr->valuedouble >= 1 &&
              rs->valuedouble >= cr->valuedouble && rs->valuedouble <= VIT_MAX_INPUT)) {
            char rv[32], cv[32];
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"resize\" %s and \"crop\" %s: expected "
                                 "sizes in px with 1 <= crop <= resize <= %d",
                                 lay->file, number_str(rv, sizeof rv, rs),
                                 number_str(cv, sizeof cv, cr), VIT_MAX_INPUT);
        }
        if (rs && !ld->cv.has_crop)
            ld->cv.crop_pct = (float)(cr->valuedouble / rs->valuedouble), ld->cv.has_crop = 1;
        if (cr) ld->default_size = (int)cr->valuedouble;
        const cJSON *cm = cJSON_GetObjectItemCaseSensitive(pp, "crop_mode");
        if (cm && !(cJSON_IsString(cm) &&
                    (!strcmp(cm->valuestring, "center") || !strcmp(cm->valuestring, "squash"))))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"crop_mode\" must be \"center\" or "
                                 "\"squash\"",
                                 lay->file);
        ld->crop_squash = cm && !strcmp(cm->valuestring, "squash");
        const cJSON *ip = cJSON_GetObjectItemCaseSensitive(pp, "interpolation");
        if (cJSON_IsString(ip) && strcmp(ip->valuestring, "bilinear") &&
            strcmp(ip->valuestring, "bicubic"))
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"preprocess\": \"interpolation\" '%s', expected "
                                 "\"bicubic\" or \"bilinear\"",
                                 lay->file, ip->valuestring);
        ld->resize_bilinear = cJSON_IsString(ip) && !strcmp(ip->valuestring, "bilinear");
        const char *k[2] = {"mean", "std"};
        for (int s = 0; s < 2; s++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(pp, k[s]);
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 3 ||
                (s ? ld->cv.has_std : ld->cv.has_mean))
                continue;
            float *o = s ? ld->cv.std : ld->cv.mean;
            int i = 0, ok = 1;
            for (const cJSON *e = v->child; e; e = e->next, i++)
                ok &= cJSON_IsNumber(e) && e->valuedouble > (s ? 0 : -10) && e->valuedouble < 10,
                    o[i] = (float)e->valuedouble;
            if (!ok)
                return vit_set_error(ld->err, VIT_ERR_FORMAT, "%s: \"preprocess\": bad \"%s\"",
                                     lay->file, k[s]);
            *(s ? &ld->cv.has_std : &ld->cv.has_mean) = 1;
        }
    }
    return VIT_OK;
}

/* "labels": class names for the head the layout's models are published with (torchvision's
 * ImageNet-1k), kept for attach_labels: a fine-tuned head of another size gets none. An
 * array of names, or a string naming the shipped layout whose array to take (timm.json's
 * "torchvision": one list of ImageNet-1k's names in the project). */
static VitStatus labels(Loader *ld, const Layout *lay) {
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(lay->root, "labels");
    if (!lab) return VIT_OK;
    cJSON *other = NULL;
    if (cJSON_IsString(lab)) {
        const char *text = layout_shipped(lab->valuestring);
        other = text ? cJSON_Parse(text) : NULL;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(other, "labels");
        if (!cJSON_IsArray(list)) {
            cJSON_Delete(other);
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"labels\": '%.40s' is not a shipped layout with a list "
                                 "of class names (assets/layouts/NAME.json)",
                                 lay->file, lab->valuestring);
        }
        lab = list;
    }
    if (!cJSON_IsArray(lab)) {
        cJSON_Delete(other);
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"labels\" must be an array of class names, or the name of a "
                             "shipped layout that has one",
                             lay->file);
    }
    ld->layout_labels = cJSON_Duplicate(lab, 1);
    cJSON_Delete(other);
    if (!ld->layout_labels)
        return vit_set_error(ld->err, VIT_ERR_NOMEM, "%s: out of memory", lay->file);
    return VIT_OK;
}

/* The layout's switches into ld, checked: attention scale, activations, CLIP's configs,
 * the position embedding's resampling, rotary embedding, pooling, LayerNorm eps,
 * preprocessing, class names. */
VitStatus layout_apply_switches(Loader *ld, const Layout *lay) {
    const char *scale = layout_str(lay, "attention_scale", "head_dim");
    const char *act = layout_str(lay, "mlp_activation", "gelu");
    const char *hact = layout_str(lay, "head_activation", "none");
    if (strcmp(scale, "head_dim") && strcmp(scale, "dim"))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"attention_scale\": '%s', expected \"head_dim\" (1/sqrt(D/H)) "
                             "or \"dim\" (1/sqrt(D))",
                             lay->file, scale);
    static const char *const acts[] = {"gelu", "gelu_tanh", "quick_gelu", "relu"};
    int a = 0;
    while (a < 4 && strcmp(act, acts[a])) a++;
    if (a == 4)
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"mlp_activation\": '%s', expected \"gelu\" (exact, erf), "
                             "\"gelu_tanh\", \"quick_gelu\" or \"relu\"",
                             lay->file, act);
    ld->mlp_act = a;
    if (strcmp(hact, "none") && strcmp(hact, "tanh"))
        return vit_set_error(ld->err, VIT_ERR_FORMAT,
                             "%s: \"head_activation\": '%s', expected \"none\" or \"tanh\"",
                             lay->file, hact);
    VitStatus rc = clip_configs(ld, lay);
    if (rc) return rc;
    /* how the library resamples the position embedding for another input size */
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(lay->root, "position_antialias");
    ld->pos_antialias = pa ? cJSON_IsTrue(pa) : lay->naming == VIT_NAMES_TIMM;
    ld->att_scale_dim = !strcmp(scale, "dim");
    ld->rope = lay->rope;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(lay->root, "rope_theta");
    ld->rope_theta = th ? (float)th->valuedouble : 100.0f; /* checked by layout_parse */
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(lay->root, "rope_ref_grid");
    ld->rope_ref = ref ? (int)ref->valuedouble : 0;
    ld->glu_packed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay->root, "glu_packed"));
    ld->head_tanh = !strcmp(hact, "tanh");
    if ((rc = pooling(ld, lay))) return rc;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(lay->root, "layer_norm_eps");
    if (eps && !ld->cv.has_eps) {
        if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1 ||
            (float)eps->valuedouble <= 0)
            return vit_set_error(ld->err, VIT_ERR_FORMAT,
                                 "%s: \"layer_norm_eps\" must be a number in (0, 1]", lay->file);
        ld->cv.ln_eps = (float)eps->valuedouble, ld->cv.has_eps = 1;
    }
    if ((rc = preprocess(ld, lay)) || (rc = labels(ld, lay))) return rc;
    snprintf(ld->layout_name, sizeof ld->layout_name, "%s", lay->name);
    return VIT_OK;
}
