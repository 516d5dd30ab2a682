/* status.c - the status line: on the left what the view shows (model, layer, head or
 * fusion, kind, query, class, the kind's own part, mask), only what its kind reads; on
 * the right the perturbation test, the job running with its progress, a notice, or the
 * top-1 class; and the window's title. */
#include "window/app.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DOT "  \xc2\xb7  " /* U+00B7 middle dot: between the status line's parts */

/* What the worker is doing, for the status line: "rollout 5/12", "forward pass 3/12",
 * "attention flow 120/197" (layers; tokens for the flow), or without a count when the
 * job does not report one. */
static void app_job_status(const App *app, char *buf, size_t n) {
    const Worker *w = &app->worker;
    char what[96];
    if (w->maps) {
        const MapKindInfo *k = &MAP_KINDS[w->maps->view.kind];
        snprintf(what, sizeof what, "%s%s", k->name,
                 w->maps->overview == VIEW_TABLE   ? ", every layer's heads"
                 : w->maps->overview == VIEW_HEADS ? ", every head"
                                                   : "");
    } else if (w->slow) {
        snprintf(what, sizeof what, "%s", MAP_KINDS[w->view.kind].name);
    } else if (w->explain) {
        snprintf(what, sizeof what, "backward pass");
    } else if (w->perturb) {
        snprintf(what, sizeof what, "perturbation test");
    } else if (w->phrase) {
        snprintf(what, sizeof what, "text tower");
    } else {
        snprintf(what, sizeof what, "%s", w->model_path[0] ? "loading the model" : "forward pass");
    }
    /* read without the lock: the engine's VitControl counters are atomic, and a count a
     * frame old is fine for a status line */
    int done, total;
    worker_progress(w, &done, &total);
    if (total > 0)
        snprintf(buf, n, "%s %d/%d\xe2\x80\xa6", what, done, total);
    else
        snprintf(buf, n, "%s\xe2\x80\xa6", what);
}

/* s [n] += (a middle dot if s has text) + printf(fmt, ...): a part of the status line. */
static void append(char *s, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *s, size_t n, const char *fmt, ...) {
    size_t len = strlen(s);
    if (len + 1 >= n) return;
    if (len) len += (size_t)snprintf(s + len, n - len, "%s", DOT);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s + len, n - len, fmt, ap);
    va_end(ap);
}

/* The notes after the kind's own part, each when it applies: the EXIF orientation, the
 * video or camera, Ctrl+R's recording, the interventions, a classifier left out, class
 * names assumed from the layout, a checkpoint's default preprocessing. */
static void status_notes(char *extra, size_t n, App *app, const Scene *sc, const VitConfig *c) {
    if (sc && sc->orientation > 1) /* a phone photo stored sideways */
        append(extra, n, "%s EXIF orientation %d",
               sc->ignore_orientation ? "as stored, ignoring" : "turned upright by its",
               sc->orientation);
    if (app->live.on) { /* a video or camera: where, how fast, what was dropped */
        char live[160];
        app_live_status(app, live, sizeof live);
        append(extra, n, "%s", live);
    }
    char rec[600];
    app_record_status(app, rec, sizeof rec); /* Ctrl+R: "recording to NAME" */
    if (rec[0]) append(extra, n, "%s", rec);
    if (interv_any(&app->iv_spec)) { /* what if: the interventions asked */
        char d[160];
        interv_describe(d, sizeof d, &app->iv_spec, 1);
        append(extra, n, "what if: %s", d);
    }
    if (c && c->left_out[0]) /* e.g. Dinov2ForImageClassification's classifier */
        append(extra, n, "backbone only: its classifier is not supported");
    if (c && app->model && model_labels_assumed(app->model)) /* e.g. timm's 1000 classes */
        append(extra, n, "class names assumed from the %s layout", c->layout);
    if (c && c->default_preprocess) /* a .pth without config.json nor a layout's */
        append(extra, n, "no config: ImageNet mean/std, crop 0.875");
}

/* The right side, first that applies: the perturbation test (unless a notice must show),
 * the worker's job, a notice, else the top-1 class; the class texts' progress before it. */
static void status_right(App *app, const Scene *sc) {
    char *out = app->status_right;
    size_t n = sizeof app->status_right;
    out[0] = '\0';
    if (app->pert.phase != PERT_OFF && !app->notice[0]) {
        app_perturb_status(app, out, n);
    } else if (app->busy && !(app->live.on && app->worker.rgb)) { /* not every frame's job */
        app_job_status(app, out, n);
    } else if (app->notice[0]) {
        snprintf(out, n, "%.250s", app->notice);
    } else if (sc && sc->run.cfg.n_classes > 0 && sc->run.probs) {
        int top;
        vit_top_k(&top, sc->run.probs, sc->run.cfg.n_classes, 1);
        const char *label = model_label(app->model, top);
        char cls[32];
        snprintf(cls, sizeof cls, "class %d", top);
        snprintf(out, n, "%s  %.1f%%", label ? label : cls, 100.0 * sc->run.probs[top]);
    }
    if (app->classes.busy && app->classes.of == app->model) { /* the texter, beside the rest */
        int done, total;
        worker_progress(&app->texter, &done, &total);
        char rest[sizeof app->status_right];
        snprintf(rest, sizeof rest, "%s", out);
        snprintf(out, n, "embedding the classes: %d / %d%s%.200s", done,
                 total > 0 ? total : app->model->clip->pending_texts, rest[0] ? DOT : "", rest);
    }
}

void app_update_status(App *app) {
    const VitConfig *c = &app->model->vit.cfg;
    const View *v = &app->view;
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    const Scene *sc = app_scene(app);
    const char *dot = DOT;
    /* each part empty unless the kind reads that field of the view (MapKindInfo's uses_*,
     * per_*): the line names only what changes the map */
    char layer[48] = "", head[64] = "", kind[64], query[64] = "", target[340] = "", mask[64] = "";
    if (k->per_layer)
        snprintf(layer, sizeof layer, "%slayer %d/%d", dot, v->layer + 1, c->n_layers);
    if (k->per_head) {
        char h[48];
        view_head_text(h, sizeof h, v, c->n_heads, &app->iv_spec);
        if (app->overview == VIEW_TABLE)
            snprintf(h, sizeof h, "layers \xc3\x97 heads");
        else if (app->overview == VIEW_HEADS)
            snprintf(h, sizeof h, "all %d heads", c->n_heads);
        snprintf(head, sizeof head, "%s%s", dot, h);
    }
    if (k->uses_discard && v->discard_ratio > 0.0f)
        snprintf(kind, sizeof kind, "%s, discard %.1f", k->name, (double)v->discard_ratio);
    else
        snprintf(kind, sizeof kind, "%s", k->name);
    if (k->uses_query && v->query != 0) { /* the CLS token (0) is the default: not named */
        char q[48];
        view_query_text(q, sizeof q, v, c);
        snprintf(query, sizeof query, "%sfrom %s", dot, q);
    }
    int target_class = k->uses_target && sc ? view_class(v, sc) : -1;
    if (target_class == SCENE_SCORE) { /* --contrast, --similar */
        snprintf(target, sizeof target, "%s%.320s", dot, app_score_title(app));
    } else if (target_class >= 0) {
        const char *label = model_label(app->model, target_class);
        if (label)
            snprintf(target, sizeof target, "%sfor: %.100s", dot, label);
        else
            snprintf(target, sizeof target, "%sfor: class %d", dot, target_class);
    }
    if (app->show_mask && !app->overview && !k->rgb && !k->outline)
        snprintf(mask, sizeof mask, "%smask %d%%: %d %s", dot, app->mask_pct, app->mask_kept,
                 k->pixels ? "px" : "patches");
    char more[700] = "", extra[640] = "";
    if (k->status && sc && app->shown_kind == v->kind) /* computed with the map */
        snprintf(extra, sizeof extra, "%s", app->shown.status);
    if (k->rgb && sc && app->shown_kind == v->kind && app->map_w > 0) { /* foreground patches */
        int fg = 0, n = app->map_w * app->map_h;
        for (int i = 0; i < n; i++) fg += app->map[(size_t)i * 4 + 3] > 0.5f;
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof extra - len, ": %d of %d patches foreground", fg, n);
    }
    status_notes(extra, sizeof extra, app, sc, c);
    if (extra[0]) snprintf(more, sizeof more, "%s%s", dot, extra);
    /* part by part: a line longer than the buffer is cut (the renderer elides it anyway) */
    const char *parts[] = {app->model->name,
                           layer,
                           head,
                           dot,
                           kind,
                           query,
                           target,
                           more,
                           mask,
                           app->overlay ? "" : dot,
                           app->overlay ? "" : "overlay off"};
    size_t at = 0;
    app->status_left[0] = '\0';
    for (size_t i = 0; i < sizeof parts / sizeof *parts && at + 1 < sizeof app->status_left; i++)
        at += (size_t)snprintf(app->status_left + at, sizeof app->status_left - at, "%s", parts[i]);
    status_right(app, sc);
    char title[512];
    snprintf(title, sizeof title, "vitlens \xe2\x80\x94 %s \xe2\x80\x94 %s",
             sc ? sc->name : "no image", app->model->name);
    SDL_SetWindowTitle(app->win, title);
}
