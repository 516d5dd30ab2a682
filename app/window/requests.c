/* requests.c - view -> requests: what the view on screen needs computed and where.
 *
 * A key changes app->view; app_update_map then decides: the class-specific maps or a
 * worker kind's map not computed yet go to the worker (scene_explain, view_slow_map);
 * the view's maps (view_compute: map, scale, prefix bars, overview, list panel) are
 * computed here when the run keeps its attention (a read) and on the worker when it is
 * recomputed (seconds). A job a newer key made useless is cancelled. When the maps are
 * there, app_show_maps uploads them (and the atlas only when it changed). */
#include "window/app.h"
#include "window/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Are overview a (mode ma, shared scale sa) and b the same maps? Compares what the
 * kind reads; the head (and, in the table, the layer) is only the selection. */
static int same_atlas(const View *a, ViewOverview ma, int sa, const View *b, ViewOverview mb,
                      int sb) {
    const MapKindInfo *k = &MAP_KINDS[b->kind];
    return ma == mb && sa == sb && a->kind == b->kind &&
           (mb == VIEW_TABLE || a->layer == b->layer) && (!k->uses_query || a->query == b->query) &&
           (!k->uses_discard || a->discard_ratio == b->discard_ratio) &&
           (!k->uses_target || a->target == b->target);
}

/* Does the atlas hold the maps of v's overview? */
static int app_atlas_is_for(const App *app, const View *v) {
    return app->atlas_of.loads == app->loads &&
           same_atlas(&app->atlas_of.view, app->atlas_of.mode, app->atlas_of.shared, v,
                      app->overview, app->shared_scale);
}

/* The overview's legend: its range, or the cached one when the atlas on the GPU is
 * already the view's (only the selection moved). m: the maps just computed, NULL when cached. */
static void app_show_overview(App *app, const ViewMaps *m) {
    if (!m) {
        memcpy(app->legend_hi, app->atlas_of.legend_hi, sizeof app->legend_hi);
        memcpy(app->legend_lo, app->atlas_of.legend_lo, sizeof app->legend_lo);
        memcpy(app->legend_caption, app->atlas_of.legend_caption, sizeof app->legend_caption);
        return;
    }
    int table = m->overview == VIEW_TABLE;
    app->atlas_of.loads = 0;
    if (ren_upload_atlas(&app->ren, app->atlas, m->n_atlas, m->w, m->h)) {
        app_set_error(app, "the overview is larger than the GPU's largest texture");
        app->overview = VIEW_SINGLE;
        return;
    }
    if (m->shared && !table) { /* one range for the whole grid: show it */
        snprintf(app->legend_hi, sizeof app->legend_hi, "%.2g", (double)m->atlas_hi);
        snprintf(app->legend_lo, sizeof app->legend_lo, "%.2g", (double)m->atlas_lo);
    } else {
        snprintf(app->legend_hi, sizeof app->legend_hi, "max");
        snprintf(app->legend_lo, sizeof app->legend_lo, "min");
    }
    snprintf(app->legend_caption, sizeof app->legend_caption, "%s",
             m->shared ? (table ? "each layer" : "the layer") : "each map");
    app->atlas_of.loads = app->loads, app->atlas_of.mode = m->overview;
    app->atlas_of.view = m->view, app->atlas_of.shared = m->shared;
    memcpy(app->atlas_of.legend_hi, app->legend_hi, sizeof app->legend_hi);
    memcpy(app->atlas_of.legend_lo, app->legend_lo, sizeof app->legend_lo);
    memcpy(app->atlas_of.legend_caption, app->legend_caption, sizeof app->legend_caption);
}

/* The view's class-specific maps on the worker thread (scene_explain on the front
 * Scene). When the worker is busy, nothing now: app_job_done updates the map when it
 * is done, which asks again if the view still waits. */
static void app_request_explain(App *app) {
    if (!app->has_scene || app->busy || app_live_waiting(app)) return; /* a video's frame first */
    Scene *sc = &app->scenes[app->front];
    if (view_on_worker(&app->view)) { /* attention flow, the PCA over the slideshow */
        JointFeatures *jf = NULL;
        if (app->view.joint) {
            jf = &app->joint;
            if (!jf->paths) { /* the slideshow: the command line's photos, or this one */
                int n = app->n_images > 1 ? app->n_images : 1;
                jf->paths = calloc((size_t)n, sizeof *jf->paths);
                if (!jf->paths) {
                    app_set_error(app, "out of memory for the slideshow");
                    return;
                }
                for (int i = 0; i < n; i++)
                    snprintf(jf->paths[i], sizeof jf->paths[i], "%s",
                             app->n_images > 1 ? app->images[i] : sc->path);
                jf->n_images = n;
                jf->vit = NULL;
            }
        }
        worker_start_slow(&app->worker, sc, &app->view, jf);
        app->busy = 1;
        app->dirty = 1;
        return;
    }
    worker_start_explain(&app->worker, sc, view_class(&app->view, sc), app->view.discard_ratio,
                         MAP_KINDS[app->view.kind].lrp);
    app->busy = 1;
    app->dirty = 1;
}

void app_update_list(App *app) {
    const ViewMaps *m = &app->shown;
    app->n_list = 0, app->list_marked = -1;
    if (app->picking) { /* W: the downloaded models, the current one marked "open" */
        for (int i = 0; i < app->n_picks; i++) {
            size_t nl = 0; /* the name, cut at 90 bytes */
            while (nl < 90 && app->picks[i].name[nl]) nl++;
            memcpy(app->list_text[i], app->picks[i].name, nl);
            app->list_text[i][nl] = 0;
            snprintf(app->list_right_text[i], sizeof app->list_right_text[i], "%s",
                     strcmp(app->picks[i].weights, app->model_path) ? "" : "open");
            app->list_values[i] = 0.0f;
        }
        app->n_list = app->n_picks, app->list_marked = app->pick;
        snprintf(app->list_title, sizeof app->list_title,
                 "models: Up / Down, Enter opens, Esc closes");
    } else if (app->shown_kind >= 0) {
        const ViewList *l = &m->list;
        int n = l->n < REN_MAX_LIST ? l->n : REN_MAX_LIST;
        for (int i = 0; i < n; i++) {
            memcpy(app->list_text[i], l->text[i], sizeof app->list_text[i]);
            memcpy(app->list_right_text[i], l->right[i], sizeof app->list_right_text[i]);
            app->list_values[i] = l->values[i];
        }
        app->n_list = n, app->list_marked = l->marked < n ? l->marked : -1;
        snprintf(app->list_title, sizeof app->list_title, "%s", l->title);
    }
    for (int i = 0; i < app->n_list; i++) {
        app->list_labels[i] = app->list_text[i];
        app->list_right[i] = app->list_right_text[i];
    }
}

/* Is computing the view's maps too slow for a frame? When the run keeps its attention a
 * map is a read (microseconds to a few ms): the key's own frame shows it. When the
 * attention is recomputed from queries and keys (large inputs, VITLENS_ATT=recompute),
 * anything that reads it costs from milliseconds (one head's map) to seconds (a rollout,
 * the overviews, the layer's range): all of it goes to the worker. */
static int app_maps_on_worker(const Scene *sc) {
    return !sc->run.att_kept;
}

/* What the view on screen needs computed: into m's request fields. */
static void app_maps_request(const App *app, ViewMaps *m) {
    m->view = app->view;
    m->overview = app->overview;
    m->shared = app->shared_scale;
    m->labels = app->model->labels;
}

void app_show_maps(App *app, const char *by) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &sc->run.cfg;
    ViewMaps *m = &app->vm;
    const MapKindInfo *k = &MAP_KINDS[m->view.kind];
    int w = m->w, h = m->h;
    float *t = app->map;
    app->map = m->map, m->map = t;
    t = app->map_norm, app->map_norm = m->norm, m->norm = t;
    if (m->n_atlas) t = app->atlas, app->atlas = m->atlas, m->atlas = t;
    app->shown = *m; /* its result (its buffer pointers are the ones now in vm: unused) */
    trace_maps(app, m, by);
    if (app->t_phrase && MAP_KINDS[m->view.kind].uses_target && /* CLIP: Enter -> its map */
        m->view.target == model_phrase_class(app->model)) {
        if (app->trace)
            printf("phrase shown ms=%.1f\n", (double)(SDL_GetPerformanceCounter() - app->t_phrase) *
                                                 1e3 / (double)SDL_GetPerformanceFrequency());
        app->t_phrase = 0;
    }
    app->map_w = w, app->map_h = h;
    app->has_prefix = m->n_prefix > 0;
    memset(app->prefix_share, 0, sizeof app->prefix_share);
    memcpy(app->prefix_share, m->prefix, (size_t)m->n_prefix * sizeof *m->prefix);
    for (int i = 0; i < c->n_prefix; i++) {
        vit_prefix_name(app->prefix_name[i], sizeof app->prefix_name[i], c, i);
        app->prefix_names[i] = app->prefix_name[i];
    }
    app->map_lo = m->lo, app->map_hi = m->hi;
    app->shown_kind = m->view.kind;
    if (app->announce_maps) app->announce = 1, app->announce_maps = 0;
    ren_upload_map(&app->ren, app->map_norm, k->rgb, w, h, c->grid_w, c->grid_h);
    app->n_high_norm = m->list.n_outline;
    memcpy(app->high_norm, m->list.outline, (size_t)m->list.n_outline * sizeof *m->list.outline);
    app_update_list(app);
    snprintf(app->legend_hi, sizeof app->legend_hi, "%.2g", (double)m->hi);
    snprintf(app->legend_lo, sizeof app->legend_lo, "%.2g", (double)m->lo);
    snprintf(app->legend_caption, sizeof app->legend_caption, "%s",
             m->shared && k->per_head ? "the layer" : "this map");
    if (k->outline) { /* the tokens of its list outlined: the high-norm tokens */
        memset(app->mask, 0, (size_t)w * h);
        for (int i = 0; i < app->n_high_norm; i++)
            if (app->high_norm[i] >= c->n_prefix) app->mask[app->high_norm[i] - c->n_prefix] = 1;
        ren_upload_mask(&app->ren, app->mask, w, h);
    } else if (app->show_mask && !k->rgb) {
        VitError err;
        if (vit_mass_mask(app->mask, &app->mask_kept, app->map, w * h,
                          (float)app->mask_pct / 100.0f, &err)) {
            app_set_error(app, err.msg);
            app->show_mask = 0;
        } else {
            ren_upload_mask(&app->ren, app->mask, w, h);
        }
    }
    if (app->overview) /* an overview of another mode (the view moved on) is not uploaded */
        app_show_overview(app, m->n_atlas && m->overview == app->overview ? m : NULL);
    app->dirty = 1;
}

int app_maps_current(const App *app, const ViewMaps *m) {
    ViewMaps want;
    app_maps_request(app, &want);
    want.overview = m->overview;
    return view_maps_same_request(m, &want, app->model->vit.cfg.n_heads) &&
           (app->overview == VIEW_SINGLE || app_atlas_is_for(app, &app->view));
}

/* Is the running view job m still of use? When it computes the overview on screen (a
 * head or table cell selected meanwhile changes only the single map, which follows); or,
 * without an overview to compute, the view's map. */
static int app_maps_wanted(const App *app, const ViewMaps *m) {
    if (m->overview != VIEW_SINGLE)
        return same_atlas(&m->view, m->overview, m->shared, &app->view, app->overview,
                          app->shared_scale);
    ViewMaps want;
    app_maps_request(app, &want);
    want.overview = VIEW_SINGLE;
    return view_maps_same_request(m, &want, app->model->vit.cfg.n_heads) &&
           (app->overview == VIEW_SINGLE || app_atlas_is_for(app, &app->view));
}

/* A newer request makes the running job useless: a view job or a worker map (attention
 * flow) of another view is cancelled; its event still comes, and app_job_done then asks
 * for the view on screen now. A forward pass is cancelled by a newer photo (app_open);
 * the backward pass and the perturbation test run to their end. */
static void app_cancel_stale(App *app) {
    Worker *w = &app->worker;
    int H = app->model->vit.cfg.n_heads;
    if (!app->busy) return;
    if (w->maps) {
        if (!app_maps_wanted(app, w->maps)) worker_cancel(w);
    } else if (w->slow) {
        if (!view_on_worker(&app->view) || !view_same_map(&w->view, &app->view, H))
            worker_cancel(w);
    }
}

void app_update_map(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc) return;
    const MapKindInfo *k = &MAP_KINDS[app->view.kind];
    VitError err;
    if (app->overview && !k->per_head) app->overview = VIEW_SINGLE; /* no per-head maps to show */
    if (!app_kind_usable(app, app->view.kind)) { /* DINO, DINOv2: say so, draw nothing wrong */
        snprintf(app->notice, sizeof app->notice, "%s: %s %s", app->model->name,
                 MAP_KINDS[app->view.kind].title, app_kind_why_not(app, app->view.kind));
        app->view.kind = MAP_ATTENTION;
    }
    if (app->busy && app->worker.lesson) { /* the run's pool is the lesson's block job's */
        app->dirty = 1;                    /* asked again when it is done */
        return;
    }
    app_cancel_stale(app);
    if (!view_ready(sc, &app->view)) { /* the worker computes them; the old map stays */
        app_request_explain(app);
        app->dirty = 1;
        return;
    }
    int on_worker = app_maps_on_worker(sc);
    if (on_worker && (app->busy || app_live_waiting(app))) { /* asked again when it is free */
        app->dirty = 1;
        return;
    }
    ViewMaps *m = &app->vm;
    app_maps_request(app, m);
    if (app->overview && app_atlas_is_for(app, &app->view))
        m->overview =
            VIEW_SINGLE; /* the atlas on the GPU is this view's: only the selection moved */
    if (on_worker) {
        worker_start_maps(&app->worker, sc, m);
        app->busy = 1;
        app->dirty = 1;
        return;
    }
    if (view_compute(m, sc, &err)) {
        app_set_error(app, err.msg);
        return;
    }
    app_show_maps(app, "gui");
}
