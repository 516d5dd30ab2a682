/* scene.c - Model and Scene: the engine calls the app makes, with no SDL or GL, so that
 * the window, its worker thread and the headless modes share them. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "view/scene.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- Model ----------------------------------------------------------------- */

VitStatus model_load(Model *m, const char *path, const VitLoadOptions *opt, const char *labels_path,
                     int labels_required, VitError *err) {
    memset(m, 0, sizeof *m);
    VitLoadOptions o = {0};
    if (opt) o = *opt;
    o.config_path = NULL; /* config.json beside the weights */
    VitStatus rc = vit_load(&m->vit, path, &o, err);
    if (rc) return rc;
    /* models/deit-small/model.safetensors reads better as "deit-small" */
    snprintf(m->name, sizeof m->name, "%s", m->vit.cfg.name);
    const char *slash = strrchr(path, '/');
    if (!strcmp(m->name, "model") && slash && slash > path) {
        const char *dir = slash;
        while (dir > path && dir[-1] != '/') dir--;
        int n = (int)(slash - dir);
        if (n > 0 && strncmp(dir, ".", (size_t)n) && strncmp(dir, "..", (size_t)n))
            snprintf(m->name, sizeof m->name, "%.*s", n, dir);
    }
    /* the names config.json gave, unless a labels file loads; a labels file that fails is
     * an error only when the user named it (labels_required), else the model keeps its own */
    m->labels = (const char(*)[VIT_LABEL_BYTES])m->vit.labels;
    if (labels_path && m->vit.cfg.n_classes > 0) {
        VitError lerr;
        rc = vit_labels_load(&m->owned_labels, labels_path, m->vit.cfg.n_classes, &lerr);
        if (rc == VIT_OK) {
            m->labels = (const char(*)[VIT_LABEL_BYTES])m->owned_labels;
        } else if (labels_required) {
            if (err) *err = lerr;
            model_free(m);
            return rc;
        }
    } else if (labels_path && labels_required) {
        rc = VIT_ERR_ARG;
        if (err) {
            err->code = rc;
            snprintf(err->msg, sizeof err->msg,
                     "%s: model has no classification head, so --labels %s does not apply", path,
                     labels_path);
        }
        model_free(m);
        return rc;
    }
    return VIT_OK;
}

void model_free(Model *m) {
    if (!m) return;
    clip_free(m->clip);
    free(m->owned_labels);
    vit_free(&m->vit);
    memset(m, 0, sizeof *m);
}

int model_text_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VIT_MAX_THREADS ? VIT_MAX_THREADS : (int)n;
}

/* The CLIP head (the classes' embeddings, the phrase's) onto m's model, its labels m's. */
static int apply_head(Model *m, ClipText *ct, char *msg, size_t n) {
    VitError err;
    if (clip_apply(ct, &m->vit, ct->phrase, ct->phrase[0] ? ct->phrase_emb : NULL,
                   ct->phrase_truncated, ct->phrase_tokens, &err)) {
        snprintf(msg, n, "%s", err.msg);
        return -1;
    }
    m->labels = (const char(*)[VIT_LABEL_BYTES])ct->labels;
    return 0;
}

int model_open_text(Model *m, const ClipSpec *spec, int strict, char *msg, size_t n) {
    if (clip_open(&m->clip, &m->vit, m->vit.path, spec, strict, model_text_threads(), msg, n))
        return -1;
    ClipText *ct = m->clip;
    if (!ct || clip_head_size(ct, ct->phrase[0] != 0) == 0) return 0; /* no head to make */
    return apply_head(m, ct, msg, n);
}

int model_classes_install(Model *m, float *emb, double ms, char *msg, size_t n) {
    ClipText *ct = m->clip;
    if (!ct) {
        free(emb);
        snprintf(msg, n, "not a CLIP model");
        return -1;
    }
    if (clip_classes_install(ct, emb, ms, msg, n)) return -1;
    return apply_head(m, ct, msg, n);
}

int model_phrase_class(const Model *m) {
    return clip_phrase_class(m->clip);
}

int model_labels_assumed(const Model *m) {
    return m->vit.cfg.labels_assumed && m->labels &&
           m->labels == (const char(*)[VIT_LABEL_BYTES])m->vit.labels;
}

void model_warn(FILE *f, const Model *m) {
    const VitConfig *c = &m->vit.cfg;
    if (model_labels_assumed(m))
        fprintf(f,
                "vitlens: %s: no class names of its own: the %s layout's list of %d assumed "
                "(the classes its models are published with); --labels FILE names a head "
                "trained on others\n",
                m->vit.path, c->layout, c->n_classes);
    if (c->default_preprocess)
        fprintf(f,
                "vitlens: %s: no config.json beside it nor preprocessing in its layout: "
                "ImageNet's mean/std and timm's crop (0.875, bicubic) assumed; put the "
                "model's config.json beside it for its own\n",
                m->vit.path);
    if (c->left_out[0]) fprintf(f, "vitlens: %s: %s\n", m->vit.path, c->left_out);
}

const char *model_label(const Model *m, int c) {
    if (!m->labels || c < 0 || c >= m->vit.cfg.n_classes) return NULL;
    return m->labels[c];
}

/* label's stem (model_class_stem) into buf[n], n > 0; empty when nothing is left */
static void phrase_stem(char *buf, size_t n, const char *label) {
    size_t j = 0, cap = n - 1 < 48 ? n - 1 : 48;
    for (const unsigned char *p = (const unsigned char *)label; *p && j < cap; p++) {
        int ch = *p >= 'A' && *p <= 'Z' ? *p + 32 : *p;
        int keep = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch >= 0x80;
        size_t len = 1, k = 1; /* a UTF-8 lead byte: its whole character */
        if (ch >= 0xc0) len = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : 2;
        while (k < len && (p[k] & 0xc0) == 0x80) k++;
        if (keep && (k < len || (ch >= 0x80 && ch < 0xc0))) keep = 0; /* not UTF-8: a '-' */
        if (keep && j + len > cap) break; /* cut before a character, never inside */
        if (keep) {
            memcpy(buf + j, p, len), j += len, p += len - 1;
            if (len == 1) buf[j - 1] = (char)ch;
        } else if (j > 0 && buf[j - 1] != '-') {
            buf[j++] = '-'; /* a run of others (space, '/', '.', punctuation, control): one '-',
                             * none first (no option, no hidden file), none last */
        }
    }
    while (j > 0 && buf[j - 1] == '-') j--;
    buf[j] = '\0';
}

void model_class_stem(char *buf, size_t n, const Model *m, int c) {
    if (!n) return;
    const char *label = m->clip ? model_label(m, c) : NULL;
    char mine[64] = "", other[64];
    if (label) phrase_stem(mine, sizeof mine, label);
    for (int k = 0; mine[0] && k < m->vit.cfg.n_classes; k++) {
        if (k == c) continue;
        phrase_stem(other, sizeof other, model_label(m, k) ? model_label(m, k) : "");
        if (!strcmp(mine, other)) mine[0] = '\0'; /* "a cat" and "A cat!": by number */
    }
    if (mine[0])
        snprintf(buf, n, "%s", mine);
    else
        snprintf(buf, n, "class%d", c);
}

void scene_score_contrast(SceneScore *s, const Model *m, int a, int b) {
    char sa[64], sb[64];
    const char *la = model_label(m, a), *lb = model_label(m, b);
    model_class_stem(sa, sizeof sa, m, a);
    model_class_stem(sb, sizeof sb, m, b);
    s->score = vit_score_contrast(a, b);
    snprintf(s->stem, sizeof s->stem, "%s-vs-%s", sa, sb);
    if (la && lb)
        snprintf(s->title, sizeof s->title,
                 "why \"%.120s\" rather than \"%.120s\" (logit %d - logit %d)", la, lb, a, b);
    else
        snprintf(s->title, sizeof s->title,
                 "why class %d rather than class %d (logit %d - logit %d)", a, b, a, b);
}

void scene_score_similar(SceneScore *s, const float *ref, const char *other) {
    const char *base = strrchr(other, '/');
    char name[256], stem[64];
    snprintf(name, sizeof name, "%s", base ? base + 1 : other);
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = '\0';
    phrase_stem(stem, sizeof stem, name);
    s->score = vit_score_cosine(ref);
    snprintf(s->stem, sizeof s->stem, "similar-to-%s", stem[0] ? stem : "image2");
    snprintf(s->title, sizeof s->title, "what makes it like %.200s (cos of the embeddings)",
             base ? base + 1 : other);
}

/* a[0, n) equals b[0, n) ignoring ASCII case */
static int same_text(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int x = (unsigned char)a[i], y = (unsigned char)b[i];
        x = x >= 'A' && x <= 'Z' ? x + 32 : x, y = y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (x != y) return 0;
    }
    return 1;
}

/* Does the label have `name` as its whole or as one of its comma-separated names? */
static int label_names(const char *label, const char *name) {
    size_t n = strlen(name);
    for (const char *p = label; *p;) {
        while (*p == ' ') p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ') len--;
        if (len == n && same_text(p, name, n)) return 1;
        if (!end) break;
        p = end + 1;
    }
    return strlen(label) == n && same_text(label, name, n);
}

int model_find_class(const Model *m, const char *opt, const char *arg, int *cls, char *msg,
                     size_t n) {
    int C = m->vit.cfg.n_classes;
    if (C == 0) {
        snprintf(msg, n, "%s %s: %s has no classification head, so no class to explain", opt, arg,
                 m->name);
        return -1;
    }
    /* all digits: a class index; anything else is looked up as a name */
    char *end;
    long id = strtol(arg, &end, 10);
    if (*arg && !*end) {
        if (id < 0 || id >= C) {
            snprintf(msg, n, "%s %s: out of range, %s has classes 0 to %d", opt, arg, m->name,
                     C - 1);
            return -1;
        }
        *cls = (int)id;
        return 0;
    }
    for (int c = 0; m->labels && c < C; c++)
        if (label_names(m->labels[c], arg)) {
            *cls = c;
            return 0;
        }
    snprintf(msg, n, "%s %s: no class of %s has that name%s", opt, arg, m->name,
             m->labels ? "" : " (it has no class names: give an index)");
    return -1;
}

/* --- Scene ----------------------------------------------------------------- */

/* Do run's buffers have the shapes vit needs? */
static int run_fits(const VitRun *run, const VitConfig *c) {
    const VitConfig *r = &run->cfg;
    return run->mem && r->image_h == c->image_h && r->image_w == c->image_w &&
           r->patch_size == c->patch_size && r->grid_h == c->grid_h && r->grid_w == c->grid_w &&
           r->n_prefix == c->n_prefix && r->n_tokens == c->n_tokens && r->dim == c->dim &&
           r->n_heads == c->n_heads && r->mlp_dim == c->mlp_dim && r->n_layers == c->n_layers &&
           r->n_classes == c->n_classes;
}

/* The crop as the intervened model sees it: a filled patch in the mean colour (0 after
 * normalisation: the mean, mean[ch] * 255), a dropped one hatched (diagonal stripes of
 * dark grey over the photo dimmed), rgb [Sh, Sw, 3]. */
static void paint_interventions(uint8_t *rgb, const VitIntervention *iv, const VitConfig *c) {
    int P = c->patch_size, Sw = c->image_w;
    for (int p = 0; p < c->n_patches; p++) {
        int dropped = iv->drop && iv->drop[p], filled = iv->fill && iv->fill[p];
        if (!dropped && !filled) continue;
        int y0 = p / c->grid_w * P, x0 = p % c->grid_w * P;
        for (int y = y0; y < y0 + P; y++)
            for (int x = x0; x < x0 + P; x++) {
                uint8_t *px = rgb + ((size_t)y * Sw + x) * 3;
                for (int ch = 0; ch < 3; ch++) {
                    if (dropped) /* hatched: stripes every 6 px */
                        px[ch] = (x + y) % 6 < 2 ? 40 : (uint8_t)(px[ch] / 3 + 150);
                    else
                        px[ch] = (uint8_t)lrintf(c->mean[ch] * 255.0f);
                }
            }
    }
}

/* scene_run and scene_run_rgb: the photo's pixels img (NULL: read from path) and what follows
 * them. */
static VitStatus run_image(Scene *sc, const Vit *vit, const char *path, const VitImage *given,
                           VitError *err) {
    VitStatus rc;
    const VitConfig *c = &vit->cfg;
    /* a model of other shapes (or the first photo): the run and every buffer sized by the
     * config are freed and made again; a photo of the same model reuses them all */
    if (!run_fits(&sc->run, c)) {
        vit_run_free(&sc->run);
        vit_grad_free(&sc->grad);
        free(sc->crop_rgb);
        free(sc->distance);
        free(sc->expl[0]);
        free(sc->expl[1]);
        free(sc->slow[0]);
        free(sc->slow[1]);
        sc->crop_rgb = NULL;
        sc->distance = NULL;
        sc->expl[0] = sc->expl[1] = NULL;
        sc->slow[0] = sc->slow[1] = NULL;
        /* every token of the last block too: the token views read it */
        VitRunOptions ro = {.all_tokens = 1, .att = sc->att};
        if ((rc = vit_run_init_with(&sc->run, vit, &ro, err))) return rc;
        sc->crop_rgb = malloc((size_t)c->image_h * (size_t)c->image_w * 3);
        sc->distance = malloc((size_t)c->n_layers * c->n_heads * sizeof *sc->distance);
        if (!sc->crop_rgb || !sc->distance) {
            if (err) {
                err->code = VIT_ERR_NOMEM;
                snprintf(err->msg, sizeof err->msg, "out of memory for a %dx%d crop", c->image_w,
                         c->image_h);
            }
            return VIT_ERR_NOMEM;
        }
    }
    sc->run.cfg = *c; /* same shapes; the model's name and normalisation may differ */
    sc->vit = vit;
    sc->grad.target = -1; /* a new photo: no class explained yet */
    sc->expl_target = sc->back_target = -1;
    sc->slow_valid = sc->back_slow_valid = 0;
    sc->crop_w_px = c->image_w;
    sc->crop_h_px = c->image_h;

    /* the network's input (normalised, [3, Sh, Sw]) and the same crop as 8-bit RGB
     * [Sh, Sw, 3] for the heatmap's background */
    VitImage loaded = {0};
    VitImageOptions io = {.ignore_orientation = sc->ignore_orientation};
    if (!given && (rc = vit_image_load_with(&loaded, path, &io, err))) return rc;
    const VitImage *img = given ? given : &loaded;
    sc->orientation = img->orientation;
    sc->format = img->format;
    rc = vit_preprocess(sc->run.input, &sc->run.crop_x, &sc->run.crop_y, &sc->run.crop_w,
                        &sc->run.crop_h, c, img, err);
    if (rc == VIT_OK) rc = vit_preprocess_rgb(sc->crop_rgb, c, img, err);
    sc->src_w = img->w;
    sc->src_h = img->h;
    vit_image_free(&loaded);
    if (rc) return rc;
    const VitIntervention *iv = interv_for(sc->interv, c);
    sc->run.control = sc->control; /* this thread's calls only: cleared before returning */
    sc->has_plain = 0;
    if (iv && c->n_classes && sc->plain_given && sc->plain_probs) { /* known: the owner's */
        sc->has_plain = 1;
    } else if (iv && c->n_classes &&
               sc->want_plain) { /* the unchanged model first: the +/- of the predictions */
        float *pp = realloc(sc->plain_probs, (size_t)c->n_classes * sizeof *pp);
        if (pp) {
            sc->plain_probs = pp;
            sc->run.intervention = NULL;
            vit_forward(&sc->run, vit);
            memcpy(pp, sc->run.probs, (size_t)c->n_classes * sizeof *pp);
            sc->has_plain = 1;
        }
    }
    sc->plain_given = 0;
    sc->run.intervention = iv;
    if (iv) paint_interventions(sc->crop_rgb, iv, c);
    vit_forward(&sc->run, vit);
    if (sc->control && vit_control_cancelled(sc->control)) {
        sc->run.control = NULL;
        if (err) {
            err->code = VIT_ERR_CANCELLED;
            snprintf(err->msg, sizeof err->msg, "%s: forward pass cancelled", path);
        }
        return VIT_ERR_CANCELLED;
    }
    /* mean attention distance per layer and head, [L, H]: D's side panel plots it */
    rc = vit_attention_distance(sc->distance, &sc->run, err);
    sc->run.control = NULL;
    if (rc) return rc;

    snprintf(sc->path, sizeof sc->path, "%s", path);
    const char *slash = strrchr(sc->path, '/');
    sc->name = slash ? slash + 1 : sc->path;
    return VIT_OK;
}

VitStatus scene_run(Scene *sc, const Vit *vit, const char *path, VitError *err) {
    return run_image(sc, vit, path, NULL, err);
}

VitStatus scene_run_rgb(Scene *sc, const Vit *vit, const uint8_t *rgb, int w, int h,
                        const char *name, VitError *err) {
    VitImage img = {0};
    VitStatus rc = vit_image_from_rgb(&img, rgb, w, h, err);
    if (rc == VIT_OK) rc = run_image(sc, vit, name, &img, err);
    vit_image_free(&img);
    return rc;
}

/* One class-specific map's slot in Scene.expl: the larger of a patch map [N] and a pixel
 * map [Sh, Sw], in floats, so that every kind fits the same stride. */
size_t scene_expl_stride(const VitConfig *c) {
    size_t N = (size_t)c->n_patches, S = (size_t)c->image_h * (size_t)c->image_w;
    return N > S ? N : S;
}

/* The score of two: the same kind, classes and reference (its pointer: the owner makes a
 * new SceneScore, or clears grad.target, when the reference's values change). */
static int same_score(const VitScore *a, const VitScore *b) {
    return a->on_logits == b->on_logits && a->grad == b->grad && a->a == b->a && a->b == b->b &&
           a->ref == b->ref;
}

VitStatus scene_explain(Scene *sc, int target, float discard, int lrp, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    VitStatus rc;
    const VitScore *score = target == SCENE_SCORE && sc->score ? &sc->score->score : NULL;
    if (!sc->vit || (c->n_classes == 0 && !(score && !score->on_logits))) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg,
                     "%s: no classification head, so no class to explain (attention and rollout "
                     "only)",
                     c->name);
        }
        return VIT_ERR_ARG;
    }
    /* written into the back buffer, so the window keeps drawing the front one while the
     * worker runs this; scene_explain_swap shows the result */
    size_t stride = scene_expl_stride(c);
    int back = !sc->expl_front;
    if (!sc->expl[back] && !(sc->expl[back] = malloc(VIT_EXPLAIN_COUNT * stride * sizeof(float)))) {
        if (err) {
            err->code = VIT_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory for the class-specific maps");
        }
        return VIT_ERR_NOMEM;
    }
    if (!sc->grad.mem && (rc = vit_grad_init(&sc->grad, sc->vit, &sc->run, err))) return rc;
    /* the passes asked for that grad does not hold for this class of this photo yet */
    int want = VIT_GRAD_EXACT | (lrp ? VIT_GRAD_LRP : 0);
    int same = score ? sc->grad.target == -2 && same_score(&sc->grad.score, score)
                     : sc->grad.target == target;
    int missing = same ? want & ~sc->grad.what : want, add = same ? VIT_GRAD_ADD : 0;
    if (missing &&
        (rc = score ? vit_backward_score(&sc->grad, &sc->run, sc->vit, score, missing | add, err)
                    : vit_backward(&sc->grad, &sc->run, sc->vit, target, missing | add, err))) {
        sc->grad.target = -1;
        return rc;
    }
    /* AttnLRP's map only when its relevance pass ran; its slot is left as it was */
    int has_lrp = (sc->grad.what & VIT_GRAD_LRP) != 0;
    for (int m = 0; m < VIT_EXPLAIN_COUNT; m++)
        if ((m != VIT_EXPLAIN_ATTNLRP || has_lrp) &&
            (rc = vit_explain(sc->expl[back] + (size_t)m * stride, (VitExplain)m, &sc->run,
                              &sc->grad, sc->vit, discard, err)))
            return rc;
    sc->back_target = target;
    sc->back_discard = discard;
    sc->back_lrp = has_lrp;
    return VIT_OK;
}

void scene_forget_explain(Scene *sc) {
    sc->grad.target = -1;
    sc->grad.what = 0;
    sc->expl_target = sc->back_target = -1;
}

void scene_explain_swap(Scene *sc) {
    sc->expl_front = !sc->expl_front;
    sc->expl_target = sc->back_target;
    sc->expl_discard = sc->back_discard;
    sc->expl_lrp = sc->back_lrp;
    sc->back_target = -1;
}

int scene_class(const Scene *sc, int target) {
    const VitConfig *c = &sc->run.cfg;
    if (sc->score) return SCENE_SCORE;
    if (c->n_classes <= 0) return -1;
    if (target >= 0 && target < c->n_classes) return target;
    if (!sc->run.probs) return -1;
    int top;
    vit_top_k(&top, sc->run.probs, c->n_classes, 1);
    return top;
}

void scene_target_stem(char *buf, size_t n, const Model *m, const Scene *sc, int target) {
    if (target == SCENE_SCORE && sc->score)
        snprintf(buf, n, "%s", sc->score->stem);
    else
        model_class_stem(buf, n, m, target);
}

void scene_target_title(char *buf, size_t n, const Model *m, const Scene *sc, int target) {
    if (target == SCENE_SCORE && sc->score) {
        snprintf(buf, n, "%s", sc->score->title);
        return;
    }
    const char *label = model_label(m, target);
    snprintf(buf, n, "why %s%.200s%s (class %d)", label ? "\"" : "", label ? label : "this class",
             label ? "\"" : "", target);
}

/* --- worker maps ------------------------------------------------------------ */

/* Fills err with "out of memory for WHAT"; returns VIT_ERR_NOMEM. */
static VitStatus nomem(VitError *err, const char *what) {
    if (err) {
        err->code = VIT_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory for %s", what);
    }
    return VIT_ERR_NOMEM;
}

Scene scene_with_control(const Scene *sc, VitControl *ctl) {
    Scene s = *sc;
    s.run.control = ctl;
    return s;
}

void scene_slow_swap(Scene *sc) {
    sc->slow_front = !sc->slow_front;
    memcpy(sc->slow_tag, sc->back_slow_tag, sizeof sc->slow_tag);
    sc->slow_valid = sc->back_slow_valid;
    sc->back_slow_valid = 0;
}

/* --- perturbation test ----------------------------------------------------- */

/* Fills err with msg as given; returns VIT_ERR_ARG. */
static VitStatus bad_arg(VitError *err, const char *msg) {
    if (err) {
        err->code = VIT_ERR_ARG;
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return VIT_ERR_ARG;
}

VitStatus perturbation_init(Perturbation *p, const float *map, int pixels, const VitConfig *c,
                            int most_first, int target, VitError *err) {
    int N = c->n_patches;
    memset(p, 0, sizeof *p);
    if (target < 0 || target >= c->n_classes)
        return bad_arg(err, "perturbation test: no class to follow (a model without head?)");
    p->most_first = most_first, p->target = target, p->n_patches = N;
    p->n_steps = N < PERTURB_MAX_STEPS ? N : PERTURB_MAX_STEPS;
    p->map = malloc((size_t)N * sizeof *p->map);
    p->order = malloc((size_t)N * sizeof *p->order);
    p->probs = calloc((size_t)p->n_steps + 1, sizeof *p->probs);
    p->top = calloc((size_t)p->n_steps + 1, sizeof *p->top);
    if (!p->map || !p->order || !p->probs || !p->top) {
        perturbation_free(p);
        return nomem(err, "the perturbation test");
    }
    /* a pixel map is summed per patch: the test removes whole patches, ranked by mass */
    vit_map_to_patches(p->map, map, c, pixels);
    VitStatus rc = vit_patch_order(p->order, p->map, N, most_first, err);
    if (rc) perturbation_free(p);
    return rc;
}

void perturbation_free(Perturbation *p) {
    if (!p) return;
    free(p->map), free(p->order), free(p->probs), free(p->top);
    memset(p, 0, sizeof *p);
}

VitStatus scene_perturb(Perturbation *p, const Scene *sc, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    int C = c->n_classes, n_inputs = p->n_steps + 1;
    if (!sc->vit || C == 0) return bad_arg(err, "perturbation test: the model has no head");
    if (p->n_patches != c->n_patches || !p->order || p->target >= C)
        return bad_arg(err, "perturbation test: not of this photo's model");
    /* PERTURB_BATCH inputs at once, or as many as the activation limit allows */
    VitBatch b = {0};
    VitStatus rc = VIT_ERR_NOMEM;
    int B = n_inputs < PERTURB_BATCH ? n_inputs : PERTURB_BATCH;
    for (; B >= 1 && rc == VIT_ERR_NOMEM; B /= 2) {
        rc = vit_batch_init(&b, sc->vit, B, 0, err);
        if (!rc) break;
    }
    if (rc) return rc;
    b.intervention = sc->run.intervention; /* the intervened model's test */
    int *counts = malloc((size_t)n_inputs * sizeof *counts);
    float *probs = malloc((size_t)n_inputs * C * sizeof *probs);
    if (!counts || !probs) {
        rc = nomem(err, "the perturbation test");
        goto done;
    }
    /* step s removes counts[s] patches (step 0 none: the unperturbed score); fill NULL
     * sets them to 0 in the normalised input, the channel's mean (RISE's deletion) */
    for (int s = 0; s < n_inputs; s++) counts[s] = vit_perturb_count(s, p->n_steps, p->n_patches);
    if ((rc = vit_perturb_curve(probs, &b, sc->vit, sc->run.input, NULL, p->order, counts, n_inputs,
                                err)))
        goto done;
    for (int s = 0; s < n_inputs; s++) {
        p->probs[s] = probs[(size_t)s * C + p->target];
        vit_top_k(&p->top[s], probs + (size_t)s * C, C, 1);
    }
done:
    free(counts), free(probs);
    vit_batch_free(&b);
    return rc;
}

void scene_free(Scene *sc) {
    if (!sc) return;
    vit_grad_free(&sc->grad);
    free(sc->expl[0]);
    free(sc->expl[1]);
    free(sc->slow[0]);
    free(sc->slow[1]);
    vit_run_free(&sc->run);
    free(sc->crop_rgb);
    free(sc->distance);
    free(sc->plain_probs);
    memset(sc, 0, sizeof *sc);
}
