/* compare.c - the compare view: two panes side by side, each a model + photo + map kind
 * drawn as the single view draws it, with one patch cursor; a third pane, A - B on a
 * diverging scale, when the two maps share a grid.
 *
 * Pane A is the explorer's view (app->view on the front Scene); pane B the same settings
 * on a second Scene: the photo on screen through a second model (--compare MODEL2), or a
 * second photo through the same model (--compare-image IMAGE2), or MODEL2 on IMAGE2. Pane
 * B's model is loaded and its photo run on the worker (worker_start_compare), the first pane
 * answering meanwhile. Each pane's map is view_compute's (the single view's maps bit for
 * bit), drawn over its crop on the CPU (as --export's export_blend samples it: the crop
 * fitted to the pane once per photo, then only each cell's colour mixed in) into one picture
 * in the renderer's picture slot COMPARE_SLOT: a key that changes a map draws and uploads it
 * again; the cursor's boxes are the renderer's outlines over it (RenFrame.boxes), so that a
 * mouse move redraws two small boxes.
 *
 * The patch cursor: the patch under the mouse in one pane boxes the patch at the same
 * place of the photo in the other (compare_patch: through each model's crop and grid).
 * Linked (the default), pane B's layer and head follow pane A's by relative depth
 * (compare_layer) and its query patch is A's mapped; ; unlinks them, and then the arrows
 * move the pane under the mouse. */
#include "window/app.h"
#include "headless/export.h"
#include "render/colormap.h"
#include "window/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PANE_PX  448 /* each pane's box in the picture, px (the crops fitted into it) */
#define GAP_PX   16  /* between panes */
#define LABEL_PX 34  /* the label strip above the panes */

_Static_assert(LESSON_CACHE < REN_PICTURES, "the lesson's picture slots leave COMPARE_SLOT free");

/* What the panes' picture is drawn from: when it changes, the maps and picture are made
 * again (a mouse move changes only the boxes). */
typedef struct {
    View va, vb;
    const void *sa, *sb;
    unsigned long loads, gen, score_gen;
    int colormap, bilinear, shared, show_diff, overlay, linked;
    int ready_a, ready_b, expl_a, expl_b; /* the class-specific maps there, and whose */
    float opacity;
} CompareKey;
_Static_assert(sizeof(CompareKey) <= sizeof(((App *)0)->cmp.key), "cmp.key holds a CompareKey");

/* --- the panes' Scenes and views -------------------------------------------------- */

static const Model *model_b(const App *app) {
    return app->cmp.model ? app->cmp.model : app->model;
}

static const Scene *scene_of(const App *app, int pane) {
    return pane == 1 ? &app->cmp.scene : app_scene(app);
}

/* Is the map of pane i on the patch grid (one value a patch), so that patches map? */
static int patch_map(const App *app, int i) {
    const Scene *sc = scene_of(app, i);
    const ViewMaps *m = &app->cmp.m[i];
    return app->cmp.ok[i] && map_kind_channels(m->view.kind) == 1 && m->w == sc->run.cfg.grid_w &&
           m->h == sc->run.cfg.grid_h;
}

/* Pane B's view made from pane A's: the kind, discard ratio and class as they are (the
 * class only for a second photo: a second model numbers its classes its own way), the
 * layer and head by relative depth (a fusion stays that fusion), the query patch at the
 * same place of the photo. */
static View linked_view(const App *app) {
    const Scene *sa = app_scene(app), *sb = &app->cmp.scene;
    const VitConfig *ca = &sa->run.cfg, *cb = &sb->run.cfg;
    View v = app->view;
    v.layer = compare_layer(app->view.layer, ca->n_layers, cb->n_layers);
    if (app->view.head >= ca->n_heads)
        v.head = cb->n_heads + (app->view.head - ca->n_heads);
    else
        v.head = compare_layer(app->view.head, ca->n_heads, cb->n_heads);
    if (app->cmp.model_path[0]) v.target = VIEW_TOP1;
    v.query = 0;
    if (app->view.query >= ca->n_prefix) {
        int pb = compare_patch(sa, app->view.query - ca->n_prefix, sb);
        if (pb >= 0) v.query = cb->n_prefix + pb;
    }
    v.joint = 0;
    view_clamp(&v, cb);
    return v;
}

/* Pane i's maps (view_compute into its own buffers), or why not: ok[i] 0 and why[i]. */
static void pane_maps(App *app, int i, const View *v) {
    const Scene *sc = scene_of(app, i);
    const Model *m = i == 1 ? model_b(app) : app->model;
    ViewMaps *vm = &app->cmp.m[i];
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    app->cmp.ok[i] = 0;
    app->cmp.why[i][0] = '\0';
    vm->view = *v; /* what the pane shows, its map or why not */
    const char *why_not =
        map_kind_unusable_scored(v->kind, &sc->run.cfg, scene_embedding_score(sc));
    if (why_not) {
        snprintf(app->cmp.why[i], sizeof app->cmp.why[i], "%s %s", k->title, why_not);
        return;
    }
    if (k->rgb || view_on_worker(v)) {
        snprintf(app->cmp.why[i], sizeof app->cmp.why[i], "%s: not in the compare view", k->name);
        return;
    }
    if (!view_ready(sc, v)) { /* the class-specific maps: the worker computes them */
        snprintf(app->cmp.why[i], sizeof app->cmp.why[i], "computing %s\xe2\x80\xa6", k->name);
        return;
    }
    size_t n = map_kind_max_floats(&sc->run.cfg, 0);
    float *map = realloc(vm->map, n * sizeof *map);
    if (map) vm->map = map;
    float *norm = map ? realloc(vm->norm, n * sizeof *norm) : NULL;
    if (norm) vm->norm = norm;
    if (!map || !norm) {
        snprintf(app->cmp.why[i], sizeof app->cmp.why[i], "out of memory for the map");
        return;
    }
    /* the request the single view makes (requests.c, app_maps_request), overview off */
    vm->view = *v;
    vm->overview = VIEW_SINGLE;
    vm->shared = app->shared_scale;
    vm->labels = m->labels;
    vm->atlas = NULL;
    VitError err;
    if (view_compute(vm, sc, &err)) {
        snprintf(app->cmp.why[i], sizeof app->cmp.why[i], "%.150s", err.msg);
        return;
    }
    app->cmp.ok[i] = 1;
}

/* The class-specific maps pane B's view needs, on the worker when it is idle (its event
 * comes to app_compare_done: the Scene is pane B's). */
static void request_explain_b(App *app, const View *v) {
    Scene *sb = &app->cmp.scene;
    if (app->busy || view_ready(sb, v) || view_on_worker(v) ||
        map_kind_unusable_scored(v->kind, &sb->run.cfg, scene_embedding_score(sb)) ||
        MAP_KINDS[v->kind].rgb)
        return;
    worker_start_explain(&app->worker, sb, view_class(v, sb), v->discard_ratio,
                         MAP_KINDS[v->kind].lrp);
    app->busy = 1;
}

/* --- drawing ---------------------------------------------------------------------- */

static const uint8_t COL_TEXT[3] = {230, 230, 235}, COL_DIM[3] = {150, 150, 160};

/* The box of patch p of pane i (its grid over the crop's place). */
static void patch_box(const App *app, int i, int p, int *x0, int *y0, int *x1, int *y1) {
    const VitConfig *c = &scene_of(app, i == 2 ? 0 : i)->run.cfg;
    int r = p / c->grid_w, col = p % c->grid_w, pw = app->cmp.pane_w[i], ph = app->cmp.pane_h[i];
    *x0 = app->cmp.pane_x[i] + col * pw / c->grid_w;
    *x1 = app->cmp.pane_x[i] + (col + 1) * pw / c->grid_w;
    *y0 = app->cmp.pane_y[i] + r * ph / c->grid_h;
    *y1 = app->cmp.pane_y[i] + (r + 1) * ph / c->grid_h;
}

/* Pane i's crop fitted to pw x ph as export_blend samples it (a box filter when shrunk,
 * nearest when enlarged): made once per photo and pane size, kept in cmp.fit[i]. NULL out
 * of memory. */
static const uint8_t *fitted_crop(App *app, int i, const Scene *sc, int pw, int ph) {
    unsigned long gen = i == 1 ? app->cmp.gen : app->loads;
    if (app->cmp.fit[i] && app->cmp.fit_sc[i] == sc && app->cmp.fit_gen[i] == gen &&
        app->cmp.fit_w[i] == pw && app->cmp.fit_h[i] == ph)
        return app->cmp.fit[i];
    uint8_t *f = realloc(app->cmp.fit[i], (size_t)pw * ph * 3);
    if (!f) return NULL;
    static const float zero = 0.0f;
    ExportStyle plain = {0.0f, 0.0f, 0, 0}; /* opacity 0: the crop alone */
    export_blend(f, pw, pw, ph, sc->crop_rgb, &zero, 1, 1, &sc->run.cfg, &plain);
    app->cmp.fit[i] = f, app->cmp.fit_sc[i] = sc, app->cmp.fit_gen[i] = gen;
    app->cmp.fit_w[i] = pw, app->cmp.fit_h[i] = ph;
    return f;
}

/* Colours of cells [mh, mw] over the fitted crop fit [ph, pw, 3] into out (row stride
 * stride px), nearest per cell as export_blend samples a map (the cell of pixel x:
 * (int)((x + 0.5) mw / pw)): px = (crop (256 - a) + colour a + 128) >> 8, a = alpha[cell] in
 * 0 .. 256 (the opacity; 0: the crop alone). 0, or -1 out of memory. */
static int blend_cells(uint8_t *out, int stride, int pw, int ph, const uint8_t *fit,
                       const uint8_t (*rgb)[3], const int *alpha, int mw, int mh) {
    int *col_of = malloc((size_t)pw * sizeof *col_of);
    if (!col_of) return -1;
    for (int x = 0; x < pw; x++) {
        int c = (int)(((float)x + 0.5f) * (float)mw / (float)pw);
        col_of[x] = c >= mw ? mw - 1 : c;
    }
    for (int y = 0; y < ph; y++) {
        int r = (int)(((float)y + 0.5f) * (float)mh / (float)ph);
        size_t row = (size_t)(r >= mh ? mh - 1 : r) * mw;
        const uint8_t *src = fit + (size_t)y * pw * 3;
        uint8_t *dst = out + (size_t)y * stride * 3;
        for (int x = 0; x < pw; x++) {
            const uint8_t *c = rgb[row + col_of[x]];
            int a = alpha[row + col_of[x]];
            for (int ch = 0; ch < 3; ch++)
                dst[x * 3 + ch] = (uint8_t)((src[x * 3 + ch] * (256 - a) + c[ch] * a + 128) >> 8);
        }
    }
    free(col_of);
    return 0;
}

/* The map norm [mh, mw] in [0, 1] through the colormap over the fitted crop (blend_cells),
 * or (diff) the difference in [-1, 1] on a diverging scale: white at 0, red where A is
 * higher, blue where B is, full at 1; a NaN cell (B's crop does not reach it) the crop
 * alone. 0, or -1 out of memory. */
static int blend_map(uint8_t *out, int stride, int pw, int ph, const uint8_t *fit, const float *m,
                     int mw, int mh, int colormap, float opacity, int diff) {
    size_t n = (size_t)mw * mh;
    uint8_t(*rgb)[3] = malloc(n * sizeof *rgb);
    int *alpha = malloc(n * sizeof *alpha);
    int rc = -1;
    if (rgb && alpha) {
        int a = (int)lrintf(opacity * 256.0f);
        for (size_t k = 0; k < n; k++) {
            alpha[k] = isnan(m[k]) ? 0 : a;
            if (!diff) {
                memcpy(rgb[k], colormap_luts[colormap][colormap_index(m[k])], 3);
                continue;
            }
            float d = isnan(m[k]) ? 0.0f : m[k], t = fabsf(d) > 1.0f ? 1.0f : fabsf(d);
            uint8_t fade = (uint8_t)lrintf(255.0f * (1.0f - t));
            rgb[k][0] = d > 0 ? 255 : fade, rgb[k][1] = fade, rgb[k][2] = d < 0 ? 255 : fade;
        }
        rc = blend_cells(out, stride, pw, ph, fit, (const uint8_t(*)[3])rgb, alpha, mw, mh);
    }
    free(rgb), free(alpha);
    return rc;
}

/* The panes' picture without the boxes (cmp.base), its layout, the difference and the
 * statistics. 0, or -1 out of memory. */
static int draw_base(App *app) {
    const Scene *sa = app_scene(app), *sb = &app->cmp.scene;
    int same_grid = patch_map(app, 0) && patch_map(app, 1) &&
                    sa->run.cfg.grid_w == sb->run.cfg.grid_w &&
                    sa->run.cfg.grid_h == sb->run.cfg.grid_h;
    int Na = sa->run.cfg.grid_w * sa->run.cfg.grid_h;
    /* B's map on A's grid: the statistics, and the difference when the grids are one */
    app->cmp.stats = (CompareStats){NAN, NAN, 0};
    app->cmp.has_diff = 0;
    if (patch_map(app, 0) && patch_map(app, 1)) {
        float *rb = malloc((size_t)Na * sizeof *rb);
        float *d = realloc(app->cmp.diff, (size_t)Na * sizeof *d);
        if (d) app->cmp.diff = d;
        if (!rb || !d) {
            free(rb);
            return -1;
        }
        compare_resample(rb, app->cmp.m[1].map, sa, sb);
        app->cmp.stats = compare_stats(app->cmp.m[0].map, rb, Na);
        if (same_grid) {
            compare_resample(rb, app->cmp.m[1].norm, sa, sb);
            for (int p = 0; p < Na; p++) d[p] = app->cmp.m[0].norm[p] - rb[p];
            app->cmp.has_diff = app->cmp.show_diff;
        }
        free(rb);
    }
    int n = app->cmp.has_diff ? 3 : 2;
    int w = n * PANE_PX + (n - 1) * GAP_PX, h = LABEL_PX + PANE_PX;
    if (w != app->cmp.w || h != app->cmp.h || !app->cmp.base) {
        uint8_t *b = realloc(app->cmp.base, (size_t)w * h * 3);
        if (!b) return -1;
        app->cmp.base = b;
        app->cmp.w = w, app->cmp.h = h;
    }
    app->cmp.n_panes = n;
    uint8_t *base = app->cmp.base;
    memset(base, 24, (size_t)w * h * 3);
    ExportStyle st = {app->overlay ? app->opacity : 0.0f, app->view.discard_ratio, app->colormap,
                      app->bilinear};
    struct Text *font = app->ren.has_text ? &app->ren.text : NULL;
    for (int i = 0; i < n; i++) {
        const Scene *sc = scene_of(app, i == 2 ? 0 : i);
        int sw = sc->crop_w_px, sh = sc->crop_h_px;
        int pw = sw >= sh ? PANE_PX : PANE_PX * sw / sh,
            ph = sw >= sh ? PANE_PX * sh / sw : PANE_PX;
        int x0 = i * (PANE_PX + GAP_PX) + (PANE_PX - pw) / 2, y0 = LABEL_PX + (PANE_PX - ph) / 2;
        app->cmp.pane_x[i] = x0, app->cmp.pane_y[i] = y0;
        app->cmp.pane_w[i] = pw, app->cmp.pane_h[i] = ph;
        uint8_t *out = base + ((size_t)y0 * w + x0) * 3;
        const ViewMaps *m = &app->cmp.m[i == 2 ? 0 : i];
        int ok = i < 2 && app->cmp.ok[i];
        const uint8_t *fit = fitted_crop(app, i == 2 ? 0 : i, sc, pw, ph);
        if (!fit) return -1;
        if (i < 2 && ok && app->bilinear) { /* between cell centres: export_blend's own path */
            export_blend(out, w, pw, ph, sc->crop_rgb, m->norm, m->w, m->h, &sc->run.cfg, &st);
        } else if (i == 2 || ok) { /* the difference is on A's grid (patch maps) */
            const VitConfig *c = &sc->run.cfg;
            if (i == 2 ? blend_map(out, w, pw, ph, fit, app->cmp.diff, c->grid_w, c->grid_h,
                                   app->colormap, st.opacity > 0 ? 0.75f : 0.0f, 1)
                       : blend_map(out, w, pw, ph, fit, m->norm, m->w, m->h, app->colormap,
                                   st.opacity, 0))
                return -1;
        } else { /* no map: the crop alone */
            for (int y = 0; y < ph; y++)
                memcpy(out + (size_t)y * w * 3, fit + (size_t)y * pw * 3, (size_t)pw * 3);
        }
        char label[256];
        const Model *mo = i == 1 ? model_b(app) : app->model;
        if (i == 2)
            snprintf(label, sizeof label, "A \xe2\x88\x92 B  (red: A higher, blue: B)");
        else if (!ok)
            snprintf(label, sizeof label, "%c: %.60s \xc2\xb7 %.60s", 'A' + i, mo->name,
                     app->cmp.why[i]);
        else
            snprintf(label, sizeof label, "%c: %.60s \xc2\xb7 %.60s", 'A' + i, mo->name, sc->name);
        export_text(base, w, h, font, label, 18, i * (PANE_PX + GAP_PX) + 4, 6, PANE_PX - 8,
                    ok || i == 2 ? COL_TEXT : COL_DIM);
    }
    return 0;
}

/* The cursor's boxes for the frame (RenFrame.boxes, the picture's px): the patch under
 * the mouse in white, the patch at the same place of the photo in the other pane in amber
 * (and on the difference pane, which is on A's grid). */
static void cursor_boxes(App *app, RenFrame *f) {
    static const float white[4] = {1.0f, 1.0f, 1.0f, 1.0f}, amber[4] = {1.0f, 0.784f, 0.0f, 1.0f};
    int hp = app->cmp.hover_pane, n = 0, x0, y0, x1, y1;
    if (hp < 0 || app->cmp.hover_patch < 0) return;
    int at[3][3] = {{hp, app->cmp.hover_patch, 0},
                    {hp == 1 ? 0 : 1, app->cmp.box_patch, 1},
                    {2, app->cmp.box_patch, 1}};
    for (int k = 0; k < 3; k++) {
        if (at[k][1] < 0 || (k == 2 && (hp != 1 || !app->cmp.has_diff))) continue;
        patch_box(app, at[k][0], at[k][1], &x0, &y0, &x1, &y1);
        float *b = app->cmp.box[n];
        b[0] = (float)x0, b[1] = (float)y0, b[2] = (float)(x1 - x0), b[3] = (float)(y1 - y0);
        memcpy(app->cmp.box_rgba[n++], at[k][2] ? amber : white, sizeof white);
    }
    f->n_boxes = n, f->boxes = (const float(*)[4])app->cmp.box;
    f->box_rgba = (const float(*)[4])app->cmp.box_rgba;
}

/* --- opening, results, leaving -------------------------------------------------- */

/* Pane B's job on the idle worker: the second model (the app's when there is none) on the
 * second photo (the one on screen when there is none). */
static void start_job(App *app) {
    const Scene *sa = app_scene(app);
    Scene *sb = &app->cmp.scene;
    app->cmp.queued = 0;
    sb->ignore_orientation = app->opt->ignore_orientation;
    sb->att = app->opt->att;
    sb->control = &app->worker.control; /* a newer photo stops it (app_open) */
    app->cmp.has_scene = 0;             /* the worker's until its event */
    const char *photo = app->cmp.by_image ? app->cmp.image_path : sa->path;
    if (!app->cmp.model_path[0]) {
        worker_start_compare(&app->worker, NULL, NULL, NULL, app->model, photo, sb);
    } else if (app->cmp.model && !strcmp(app->cmp.model_loaded_from, app->cmp.model_path)) {
        /* the second model loaded once: the next photo runs through it without a load */
        worker_start_compare(&app->worker, NULL, NULL, NULL, app->cmp.model, photo, sb);
    } else {
        /* MODEL2 as --model takes it: a path, a downloaded model's NAME (with its labels), or
         * builtin; one that is none of them leaves pane A alone, the message on the error line */
        char weights[1200] = "", labels[1200] = "", msg[1600];
        const char *path = app->cmp.model_path, *lab = NULL;
        if (!strcmp(path, "builtin")) {
            path = app->opt->default_model;
        } else if (models_resolve(weights, sizeof weights, labels, sizeof labels, path, msg,
                                  sizeof msg)) {
            char line[1700];
            snprintf(line, sizeof line, "compare: %s", msg);
            app_set_error(app, line);
            app->cmp.want = 0;
            if (app->cmp.on) app_compare_leave(app);
            return;
        } else {
            path = weights, lab = labels[0] ? labels : NULL;
        }
        if (app->cmp.labels_path[0]) lab = app->cmp.labels_path;
        worker_start_compare(&app->worker, path, &app->opt->load, lab, app->model, photo, sb);
    }
    app->cmp.loading = 1;
    app->busy = 1;
    app->dirty = 1;
}

/* Pane B's job again, with the second model and photo as they are: now, or once the
 * worker is idle (a job of pane B running is stopped: a newer one). */
static void restart(App *app) {
    app->cmp.want = 1; /* open the view when it is done */
    if (app->busy || !app->has_scene) {
        app->cmp.queued = 1;
        if (app->busy && app->cmp.loading) worker_cancel(&app->worker); /* a newer pane B */
        return;
    }
    start_job(app);
}

void app_compare_open(App *app, const char *model_path, const char *labels_path,
                      const char *image_path) {
    if (!model_path && !image_path) return;
    snprintf(app->cmp.labels_path, sizeof app->cmp.labels_path, "%s",
             labels_path ? labels_path : "");
    snprintf(app->cmp.model_path, sizeof app->cmp.model_path, "%s", model_path ? model_path : "");
    snprintf(app->cmp.image_path, sizeof app->cmp.image_path, "%s", image_path ? image_path : "");
    app->cmp.by_image = image_path != NULL;
    restart(app);
}

int app_compare_start_queued(App *app) {
    if (!app->cmp.queued || app->busy || !app->has_scene) return 0;
    start_job(app);
    return 1;
}

int app_compare_toggle(App *app, int unused) {
    (void)unused;
    if (app->cmp.on) {
        app_compare_leave(app);
        return 0;
    }
    if (!app->has_scene) return 0;
    const char *photo = app_scene(app)->path;
    if (app->cmp.has_scene && (app->cmp.by_image || !strcmp(app->cmp.scene.path, photo)) &&
        (app->cmp.model_path[0] || app->cmp.scene.vit == &app->model->vit)) {
        app->cmp.on = 1; /* pane B as it was: the same photo still on screen */
        app->cmp.uploaded = 0;
        memset(app->cmp.key, 0, sizeof app->cmp.key);
        if (app_score_sync(app)) app_update_map(app); /* --similar's score again */
    } else if (app->cmp.model_path[0] || app->cmp.image_path[0]) {
        restart(app);
    } else {
        snprintf(app->notice, sizeof app->notice,
                 "no second model or photo yet: --compare MODEL2, --compare-image IMAGE2, or "
                 "Shift+drop a file");
    }
    app->dirty = 1;
    return 0;
}

void app_compare_done(App *app) {
    Worker *w = &app->worker;
    app->busy = 0;
    app->dirty = 1;
    if (w->explain) { /* pane B's class-specific maps */
        if (w->status == VIT_OK)
            scene_explain_swap(&app->cmp.scene);
        else if (w->status != VIT_ERR_CANCELLED)
            app_set_error(app, w->err.msg);
        return;
    }
    app->cmp.loading = 0;
    if (w->status == VIT_ERR_CANCELLED) { /* a newer pane B or photo: asked again */
        app->cmp.queued = app->cmp.want;
        return;
    }
    if (w->status != VIT_OK) { /* pane A as it was, the message on the error line */
        char msg[700];
        snprintf(msg, sizeof msg, "compare: %.600s", w->err.msg);
        app_set_error(app, msg);
        app->cmp.want = 0;
        if (app->cmp.on) app_compare_leave(app);
        return;
    }
    if (w->new_model || !app->cmp.model_path[0]) { /* the second model, or none */
        if (app->cmp.model) model_free(app->cmp.model);
        free(app->cmp.model);
        app->cmp.model = w->new_model; /* kept for the next photos */
        w->new_model = NULL;
        snprintf(app->cmp.model_loaded_from, sizeof app->cmp.model_loaded_from, "%s",
                 app->cmp.model ? app->cmp.model_path : "");
    }
    app->cmp.has_scene = 1;
    app->cmp.gen++;
    app->error[0] = '\0';
    if (app->cmp.want && !app->cmp.on) {
        app->cmp.on = 1;
        app->cmp.linked = 1;
        app->cmp.show_diff = 1;
        app->cmp.hover_pane = app->cmp.hover_patch = app->cmp.box_patch = -1;
        app->cmp.uploaded = 0;
        if (app->lesson.on) app->lesson.on = 0; /* no lesson under the compare view */
    }
    app->cmp.want = 0;
    if (app->trace)
        printf("compare ready model=%s photo=%s\n", model_b(app)->name, app->cmp.scene.path);
    app_score_sync(app); /* the worker is idle: --similar's e_B, pane B's --contrast */
    app_compare_hover(app);
}

void app_compare_leave(App *app) {
    app->cmp.on = 0;
    app->cmp.want = 0;
    app->cmp.hover_pane = app->cmp.hover_patch = app->cmp.box_patch = -1;
    const Scene *sa = app_scene(app);
    if (sa) ren_upload_image(&app->ren, sa->crop_rgb, sa->crop_w_px, sa->crop_h_px);
    app->dirty = 1;
    if (app->trace) printf("compare left\n");
    if (app_score_sync(app)) app_update_map(app); /* --similar's score goes with the view */
}

void app_compare_model_changed(App *app) {
    if (app->cmp.model) return; /* pane B has its own model */
    app->cmp.has_scene = 0;     /* run through the old one: asked again through the new */
    if (app->cmp.on) restart(app);
}

/* A new photo in pane A: the second model runs it too. */
void app_compare_photo_changed(App *app) {
    if (!app->cmp.on || app->cmp.by_image) return;
    restart(app);
}

void app_compare_free(App *app) {
    if (app->cmp.model) model_free(app->cmp.model);
    free(app->cmp.model);
    scene_free(&app->cmp.scene);
    for (int i = 0; i < 2; i++) free(app->cmp.m[i].map), free(app->cmp.m[i].norm);
    free(app->cmp.diff);
    for (int i = 0; i < 2; i++) free(app->cmp.fit[i]);
    free(app->cmp.base);
}

/* --- keys, the mouse, the frame ----------------------------------------------------- */

int app_compare_key(App *app, const SDL_Keysym *ks) {
    SDL_Keycode key = ks->sym;
    if (key == SDLK_BACKSLASH) {
        app_compare_toggle(app, 0);
        return 1;
    }
    if (!app->cmp.on) return 0;
    View *vb = &app->cmp.view_b;
    const VitConfig *cb = &app->cmp.scene.run.cfg;
    switch (key) {
    case SDLK_ESCAPE: app_compare_leave(app); return 1;
    case SDLK_SEMICOLON:
        app->cmp.linked = !app->cmp.linked;
        snprintf(app->notice, sizeof app->notice, "%s",
                 app->cmp.linked ? "panes linked: layer, head and query move together"
                                 : "panes apart: the arrows move the pane under the mouse");
        break;
    case SDLK_QUOTE:
        app->cmp.show_diff = !app->cmp.show_diff;
        if (app->cmp.show_diff && !app->cmp.has_diff && app->cmp.has_scene) {
            const VitConfig *ca = &app_scene(app)->run.cfg;
            if (ca->grid_h != cb->grid_h || ca->grid_w != cb->grid_w)
                snprintf(app->notice, sizeof app->notice,
                         "no difference pane: the grids differ (%dx%d against %dx%d)", ca->grid_h,
                         ca->grid_w, cb->grid_h, cb->grid_w);
        }
        break;
    case SDLK_LEFT:
    case SDLK_RIGHT:
    case SDLK_UP:
    case SDLK_DOWN:
        /* apart, with the mouse over pane B: its own layer and head */
        if (app->cmp.linked || app->cmp.hover_pane != 1 || !app->cmp.has_scene) return 0;
        if (key == SDLK_LEFT && vb->layer > 0) vb->layer--;
        if (key == SDLK_RIGHT && vb->layer < cb->n_layers - 1) vb->layer++;
        if (key == SDLK_UP && vb->head > 0) vb->head--;
        if (key == SDLK_DOWN && vb->head < cb->n_heads + VIEW_N_FUSIONS - 1) vb->head++;
        break;
    case SDLK_a:
    case SDLK_t:
    case SDLK_w:
    case SDLK_PAGEDOWN:
    case SDLK_PAGEUP:
    case SDLK_SLASH:
    case SDLK_KP_DIVIDE:
        snprintf(app->notice, sizeof app->notice, "not in the compare view (Esc leaves it)");
        break;
    case SDLK_p:
        if (!(ks->mod & KMOD_SHIFT)) return 0;
        snprintf(app->notice, sizeof app->notice, "not in the compare view (Esc leaves it)");
        break;
    default: return 0;
    }
    app->dirty = 1;
    return 1;
}

void app_compare_hover(App *app) {
    int pane = -1, patch = -1, box = -1;
    const Ren *r = &app->ren;
    if (app->cmp.on && app->cmp.has_scene && app->has_scene && app->cmp.w > 0 &&
        r->image_w_px > 0 && r->image_h_px > 0 && r->picture_shown == COMPARE_SLOT) {
        /* framebuffer px -> the picture's px -> a pane's crop -> its patch */
        float px = (app->mouse_x - (float)r->image_x) * (float)app->cmp.w / (float)r->image_w_px;
        float py = (app->mouse_y - (float)r->image_y) * (float)app->cmp.h / (float)r->image_h_px;
        for (int i = 0; i < app->cmp.n_panes; i++) {
            float x = px - (float)app->cmp.pane_x[i], y = py - (float)app->cmp.pane_y[i];
            if (x < 0 || y < 0 || x >= (float)app->cmp.pane_w[i] || y >= (float)app->cmp.pane_h[i])
                continue;
            const VitConfig *c = &scene_of(app, i == 2 ? 0 : i)->run.cfg;
            int row = (int)(y * (float)c->grid_h / (float)app->cmp.pane_h[i]);
            int col = (int)(x * (float)c->grid_w / (float)app->cmp.pane_w[i]);
            pane = i, patch = row * c->grid_w + col;
            const Scene *from = scene_of(app, i == 2 ? 0 : i), *to = scene_of(app, i == 1 ? 0 : 1);
            box = compare_patch(from, patch, to);
            break;
        }
    }
    if (pane != app->cmp.hover_pane || patch != app->cmp.hover_patch) app->dirty = 1;
    app->cmp.hover_pane = pane, app->cmp.hover_patch = patch, app->cmp.box_patch = box;
}

int app_compare_patch_a(const App *app) {
    if (!app->cmp.on || app->cmp.hover_pane < 0) return -1;
    return app->cmp.hover_pane == 1 ? app->cmp.box_patch : app->cmp.hover_patch;
}

void app_compare_prepare(App *app) {
    if (!app->cmp.on || !app->has_scene || !app->cmp.has_scene || app->cmp.loading) return;
    if (app->cmp.linked) app->cmp.view_b = linked_view(app);
    view_clamp(&app->cmp.view_b, &app->cmp.scene.run.cfg);
    CompareKey k;
    memset(&k, 0, sizeof k); /* the padding too: compared as bytes */
    k.va = app->view, k.vb = app->cmp.view_b;
    k.sa = app_scene(app), k.sb = &app->cmp.scene;
    k.loads = app->loads, k.gen = app->cmp.gen, k.score_gen = app->score.gen;
    k.colormap = app->colormap, k.bilinear = app->bilinear, k.shared = app->shared_scale;
    k.show_diff = app->cmp.show_diff, k.overlay = app->overlay, k.linked = app->cmp.linked;
    k.opacity = app->opacity;
    /* the class-specific maps: each Scene's own (pane A's asked for by the explorer's
     * requests, B's here once the worker is idle); the panes drawn again once they are there */
    k.ready_a = view_ready(app_scene(app), &app->view);
    k.ready_b = view_ready(&app->cmp.scene, &app->cmp.view_b);
    k.expl_a = app_scene(app)->expl_target, k.expl_b = app->cmp.scene.expl_target;
    request_explain_b(app, &app->cmp.view_b);
    if (memcmp(&k, app->cmp.key, sizeof k) || !app->cmp.base) {
        Uint64 t0 = SDL_GetPerformanceCounter();
        pane_maps(app, 0, &app->view);
        pane_maps(app, 1, &app->cmp.view_b);
        Uint64 t1 = SDL_GetPerformanceCounter();
        if (draw_base(app)) {
            app_set_error(app, "out of memory for the compare view");
            app_compare_leave(app);
            return;
        }
        memcpy(app->cmp.key, &k, sizeof k);
        app->cmp.uploaded = 0; /* a new picture */
        double ms = 1e3 / (double)SDL_GetPerformanceFrequency();
        app->cmp.ms_maps = (double)(t1 - t0) * ms;
        app->cmp.ms_picture = (double)(SDL_GetPerformanceCounter() - t1) * ms;
        if (app->trace) trace_compare_maps(app);
    }
    if (!app->cmp.uploaded) {
        ren_picture_upload(&app->ren, COMPARE_SLOT, app->cmp.base, app->cmp.w, app->cmp.h);
        ren_picture_show(&app->ren, COMPARE_SLOT, app->cmp.w, app->cmp.h);
        app->cmp.uploaded = 1;
    }
}

void app_compare_frame(App *app, RenFrame *f) {
    f->overlay = 0, f->grid = 0, f->mode = VIEW_SINGLE;
    f->query_row = f->query_col = -1;
    f->mask = 0, f->rgb = 0, f->n_list = 0, f->n_preds = 0, f->distance = NULL;
    f->n_prefix = 0, f->removed = 0, f->plot = 0, f->tooltip = NULL;
    f->legend_hi = f->legend_lo = f->legend_caption = NULL;
    f->placeholder = app->cmp.loading ? "loading the second pane\xe2\x80\xa6" : NULL;
    cursor_boxes(app, f);
}

/* "layer 12/12, mean of 3 heads" of pane i's view. */
static void pane_text(char *buf, size_t n, const App *app, int i) {
    const View *v = i ? &app->cmp.view_b : &app->view;
    const VitConfig *c = &scene_of(app, i)->run.cfg;
    char head[64];
    view_head_text(head, sizeof head, v, c->n_heads, NULL);
    snprintf(buf, n, "layer %d/%d, %s", v->layer + 1, c->n_layers, head);
}

void app_compare_status(App *app) {
    if (!app->cmp.on || !app->has_scene) return;
    char a[96], b[96], stats[192] = "";
    pane_text(a, sizeof a, app, 0);
    if (app->cmp.has_scene)
        pane_text(b, sizeof b, app, 1);
    else
        snprintf(b, sizeof b, "loading\xe2\x80\xa6");
    const CompareStats *s = &app->cmp.stats;
    if (!isnan(s->spearman))
        snprintf(stats, sizeof stats, " \xc2\xb7 Spearman %.3f \xc2\xb7 top-10%% IoU %.2f",
                 s->spearman, s->iou);
    else if (app->cmp.has_scene)
        snprintf(stats, sizeof stats, " \xc2\xb7 no rank correlation (not two patch maps)");
    const VitConfig *ca = &app_scene(app)->run.cfg, *cb = &app->cmp.scene.run.cfg;
    if (app->cmp.has_scene && patch_map(app, 0) && patch_map(app, 1) &&
        (ca->grid_h != cb->grid_h || ca->grid_w != cb->grid_w)) { /* B resampled for the stats */
        size_t k = strlen(stats);
        snprintf(stats + k, sizeof stats - k,
                 " \xc2\xb7 grids %dx%d and %dx%d: no A \xe2\x88\x92 B pane", ca->grid_h,
                 ca->grid_w, cb->grid_h, cb->grid_w);
    }
    char score[256] = ""; /* --similar's cosine, --contrast's classes */
    if (MAP_KINDS[app->view.kind].uses_target && app_scene(app)->score) {
        if (app->score.kind == APP_SCORE_SIMILAR)
            snprintf(score, sizeof score,
                     " of cos(e_A, e_B) = %.4f, what makes each photo like the other",
                     app->score.cosine);
        else
            snprintf(score, sizeof score, ", %.200s", app_score_title(app));
    }
    snprintf(app->status_left, sizeof app->status_left,
             "compare \xc2\xb7 %s%s: A %s \xc2\xb7 B %s%s", MAP_KINDS[app->view.kind].name, score,
             a, b, stats);
    if (app->notice[0])
        snprintf(app->status_right, sizeof app->status_right, "%.250s", app->notice);
    else
        snprintf(app->status_right, sizeof app->status_right, "%s \xc2\xb7 Esc leaves",
                 app->cmp.linked ? "linked (; apart)" : "apart (; links)");
}
