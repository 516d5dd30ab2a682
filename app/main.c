/* main.c - vitlens: see where a Vision Transformer looks.
 *
 * Reads as: options (options.c) -> headless modes (--top, --export) or the window:
 * init -> loop -> shutdown. The App holds all state; app_handle_event is the
 * one event switch. The model runs once per photo on the worker thread
 * (worker.c); a key only recomputes a [gh, gw] map and uploads it (render.c). */
#include "colormap.h"
#include "eval.h"
#include "export.h"
#include "files.h"
#include "mapkind.h"
#include "models.h"
#include "options.h"
#include "render.h"
#include "scene.h"
#include "settings.h"
#include "worker.h"

#include <SDL.h>
#include <SDL_syswm.h> /* F without a window manager: Xlib on X11 */
#include <errno.h>
#include <sys/stat.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Headless: --top, --export */

/* --top and --export of one photo (dir: where its files go). */
static int headless_photo(const Options *o, Model *m, const char *image, const char *dir,
                          JointFeatures *joint) {
    Scene sc = {.ignore_orientation = o->ignore_orientation, .att = o->att};
    VitError err;
    int rc = 1;
    if (scene_run(&sc, &m->vit, image, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    /* --class, or the top-1: the class-specific maps that --export writes */
    int target = -1;
    if (o->class_arg) {
        char msg[600];
        if (model_find_class(m, o->class_arg, &target, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            goto done;
        }
    } else if (m->vit.cfg.n_classes > 0) {
        vit_top_k(&target, sc.run.probs, m->vit.cfg.n_classes, 1);
    }
    if (dir && target >= 0) {
        if (scene_explain(&sc, target, o->discard, 1, &err)) {
            fprintf(stderr, "vitlens: %s\n", err.msg);
            goto done;
        }
        scene_explain_swap(&sc);
    }
    rc = 0;
    if (o->top_k) rc |= export_top(stdout, m, &sc, o->top_k);
    ExportStyle st = {o->opacity, o->discard, o->colormap, o->bilinear};
    if (!rc && dir) rc |= export_maps(stdout, dir, m, &sc, target, &st, joint);
done:
    scene_free(&sc);
    return rc;
}

/* --top, --export: one photo; --export of several, each into DIR/STEM/, with the
 * feature PCA over all of them (L06_pca-joint) beside each one's own. */
static int run_headless(const Options *o) {
    Model m;
    VitError err;
    if (model_load(&m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    int rc = 0, n = o->n_image_args;
    if (n <= 1) {
        rc = headless_photo(o, &m, o->image_path, o->export_dir, NULL);
        model_free(&m);
        return rc;
    }
    JointFeatures jf = {0};
    jf.paths = calloc((size_t)n, sizeof *jf.paths);
    if (!jf.paths) {
        fprintf(stderr, "vitlens: out of memory\n");
        model_free(&m);
        return 1;
    }
    jf.n_images = n;
    for (int i = 0; i < n; i++) snprintf(jf.paths[i], sizeof jf.paths[i], "%s", o->image_args[i]);
    if (mkdir(o->export_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "vitlens: %s: cannot create directory: %s\n", o->export_dir,
                strerror(errno));
        rc = 1;
    }
    if (!rc && scene_joint_features(&jf, &m.vit, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        rc = 1;
    }
    if (!rc && jf.skipped[0]) fprintf(stderr, "vitlens: skipped: %s\n", jf.skipped);
    for (int i = 0; i < n && !rc; i++) {
        if (jf.image_of[i] < 0) continue;
        char dir[2048], stem[256];
        const char *base = strrchr(jf.paths[i], '/');
        snprintf(stem, sizeof stem, "%s", base ? base + 1 : jf.paths[i]);
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = '\0';
        snprintf(dir, sizeof dir, "%s/%s", o->export_dir, stem);
        rc = headless_photo(o, &m, jf.paths[i], dir, &jf);
    }
    joint_features_free(&jf);
    free(jf.paths);
    model_free(&m);
    return rc;
}

/* ---------------------------------------------------------------------------
 * App state */

typedef enum { OV_NONE = 0, OV_HEADS, OV_TABLE } Overview;

/* Shift+P: where the perturbation test of the map on screen is */
typedef enum { PERT_OFF = 0, PERT_COMPUTING, PERT_PLAYING, PERT_DONE } PerturbPhase;
static const char *const PERT_PHASE_NAMES[] = {"off", "computing", "playing", "done"};

typedef struct {
    const Options *opt;
    SDL_Window *win;
    SDL_GLContext gl;
    Ren ren;
    Worker worker;
    Uint32 ev_done; /* worker finished a job */

    Model *model;    /* current model (heap) */
    Scene scenes[2]; /* scenes[front] is on screen, the other is the worker's back buffer */
    int front, has_scene;
    float *map;      /* [h, w] raw values of the current map (w x h: map_kind_size) */
    float *map_norm; /* [h, w] normalised for display */
    uint8_t *mask;   /* [h, w] the attention mask */
    float *atlas;    /* [L * (H + 3), h, w] the overview's maps, normalised */
    ViewMaps vm;     /* the maps being computed (here, or by the worker during a view job)
                        into its own buffers, which then swap with map, map_norm, atlas */
    ViewMaps shown;  /* what view_compute said of the maps on screen (status, list) */
    /* what the atlas on the GPU was computed for: a key that changes only the
     * selection (the table's layer or head, the heads' head) redraws it, no more */
    struct {
        unsigned long loads; /* the scene (0: none) */
        Overview mode;
        View view; /* the fields its kind reads; layer: OV_HEADS only */
        int shared;
        char legend_hi[32], legend_lo[32], legend_caption[32];
    } atlas_of;
    float map_lo, map_hi;
    int map_w, map_h;                    /* of the current map */
    int has_prefix;                      /* the kind has a prefix-token share */
    float prefix_share[VIT_MAX_PREFIX];  /* [Np] the view's row at the prefix tokens */
    char prefix_name[VIT_MAX_PREFIX][8]; /* "CLS", "reg1", ... */
    const char *prefix_names[VIT_MAX_PREFIX];

    View view;
    KeyList keys; /* for the help overlay, as --help lists them */
    int overlay, grid, help;
    float opacity;
    Overview overview;
    int colormap, shared_scale, bilinear;
    int show_mask, mask_pct, mask_kept; /* mask fraction in percent */
    int show_preds, show_distance;
    char model_path[1024];  /* the current model's weights: remembered on quit */
    char labels_path[1024]; /* and its labels file, "" if none */
    char next_labels[1200]; /* labels for the next model app_open starts ("": --labels) */
    /* W: the downloaded models in the list panel, Up / Down, Enter opens one, Esc closes */
    int picking, n_picks, pick;
    ModelEntry picks[REN_MAX_LIST];
    int cursor_row, cursor_col; /* the keyboard's patch cursor */
    int hover_row, hover_col;   /* the patch under the mouse, -1: none */
    int hover_cell;             /* the overview cell under the mouse, -1: none */
    float mouse_x, mouse_y;     /* framebuffer px */
    int fullscreen;
    int save_pending;
    unsigned long saves;

    char **images; /* the command line's images (slideshow), [n_images] */
    int n_images, image_at;
    JointFeatures joint; /* the slideshow's features, for the feature PCA over every photo */

    /* the list panel: the logit lens's class per layer, the high-norm tokens */
    int n_list, list_marked, n_high_norm;
    int high_norm[VIT_MAX_PREFIX + 1024]; /* the high-norm tokens of the view (token norms) */
    char list_title[96];
    char list_text[REN_MAX_LIST][96];
    const char *list_labels[REN_MAX_LIST];
    float list_values[REN_MAX_LIST];
    char list_right_text[REN_MAX_LIST][16];
    const char *list_right[REN_MAX_LIST];

    int busy;           /* a job is running */
    int class_kind;     /* the class-specific kind 1-5 and a click on the panel switch to */
    int shown_kind;     /* the kind of the map on screen (a class-specific view waiting for
                           its maps keeps showing the one before), -1: none */
    char pending[1024]; /* dropped while busy: started next (the latest wins) */
    char photo[1024];   /* the photo last asked for (N steps on from it), "" if none */
    char error[600];    /* shown on the error line until the next success */
    char notice[600];   /* shown on the right of the status line until the next key */
    char status_left[1024], status_right[256]; /* left: room for every part in full */
    char legend_hi[32], legend_lo[32], legend_caption[32];
    char pred_text[REN_MAX_PREDS][128];
    char dist_caption[96], tooltip[128];
    char cell_labels[VIT_MAX_LAYERS * 4][16]; /* overview labels, >= H + 3 */
    const char *cell_label_ptrs[VIT_MAX_LAYERS * 4];
    char col_text[VIT_MAX_LAYERS][12];
    const char *col_ptrs[VIT_MAX_LAYERS], *row_ptrs[VIT_MAX_LAYERS * 4];
    int announce;        /* print "ready" after the next frame */
    int announce_maps;   /* set announce once the view job of a new photo is shown */
    unsigned long loads; /* worker jobs finished, for the trace */
    int trace;           /* VITLENS_TRACE */
    unsigned long frames;
    /* Shift+P: the perturbation test of the map on screen, as an animation */
    struct {
        PerturbPhase phase;
        int most_first;       /* the order of the run asked for last */
        unsigned long id;     /* the run asked for last: a finished job of another is dropped */
        Perturbation *job;    /* the run the worker computes (its own until the event), or NULL */
        Perturbation *queued; /* asked for while the worker was busy: started next, or NULL */
        Perturbation run;     /* the run on screen (PERT_PLAYING, PERT_DONE) */
        Perturbation ghost;   /* the other order's run of the same map, drawn dim, or zeroed */
        Uint32 t0;            /* SDL_GetTicks when the animation started */
        int step;             /* the step on screen, -1: none yet */
        int announce;         /* print the trace's "perturb done" line after the next frame */
        uint8_t *removed;     /* [N] 1: removed at `step` */
        char title[64], subtitle[160], caption[96], ghost_caption[96];
    } pert;
    int running, dirty;
    Uint64 t_input; /* when the first key since the last frame was handled, 0: none */
    int again;      /* ren_present asked for another frame */
} App;

/* VITLENS_TRACE: "startup WHAT MS", ms since main() began, for the launch's timeline. */
static Uint64 t_main;
static void startup_mark(const App *app, const char *what) {
    if (!app->trace) return;
    printf("startup %s %.1f\n", what,
           (double)(SDL_GetPerformanceCounter() - t_main) * 1e3 /
               (double)SDL_GetPerformanceFrequency());
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && SDL_strcasecmp(s + n - k, suffix) == 0;
}

static const Scene *app_scene(const App *app) {
    return app->has_scene ? &app->scenes[app->front] : NULL;
}

static void app_set_error(App *app, const char *msg) {
    snprintf(app->error, sizeof app->error, "%.590s", msg);
    fprintf(stderr, "vitlens: %s\n", msg);
    app->dirty = 1;
}

static int app_query_patch(const App *app, int *row, int *col) {
    const VitConfig *c = &app->model->vit.cfg;
    if (app->view.query < c->n_prefix) return 0;
    int p = app->view.query - c->n_prefix;
    *row = p / c->grid_w, *col = p % c->grid_w;
    return 1;
}

/* Are overview a (mode ma, shared scale sa) and b the same maps? Compares what the
 * kind reads; the head (and, in the table, the layer) is only the selection. */
static int same_atlas(const View *a, Overview ma, int sa, const View *b, Overview mb, int sb) {
    const MapKindInfo *k = &MAP_KINDS[b->kind];
    return ma == mb && sa == sb && a->kind == b->kind && (mb == OV_TABLE || a->layer == b->layer) &&
           (!k->uses_query || a->query == b->query) &&
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
        app->overview = OV_NONE;
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
    app->atlas_of.loads = app->loads, app->atlas_of.mode = (Overview)m->overview;
    app->atlas_of.view = m->view, app->atlas_of.shared = m->shared;
    memcpy(app->atlas_of.legend_hi, app->legend_hi, sizeof app->legend_hi);
    memcpy(app->atlas_of.legend_lo, app->legend_lo, sizeof app->legend_lo);
    memcpy(app->atlas_of.legend_caption, app->legend_caption, sizeof app->legend_caption);
}

/* The view's class-specific maps on the worker thread (scene_explain on the front
 * Scene). When the worker is busy, nothing now: app_job_done updates the map when it
 * is done, which asks again if the view still waits. */
static void app_request_explain(App *app) {
    if (!app->has_scene || app->busy) return;
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

/* The list panel: the downloaded models while W's list is open, else the view's list
 * as view_compute made it (the logit lens per layer, the high-norm tokens). */
static void app_update_list(App *app) {
    const ViewMaps *m = &app->shown;
    app->n_list = 0, app->list_marked = -1;
    if (app->picking) { /* W: the downloaded models, the current one marked "open" */
        for (int i = 0; i < app->n_picks; i++) {
            snprintf(app->list_text[i], sizeof app->list_text[i], "%.90s", app->picks[i].name);
            snprintf(app->list_right_text[i], sizeof app->list_right_text[i], "%s",
                     strcmp(app->picks[i].weights, app->model_path) ? "" : "open");
            app->list_values[i] = 0.0f;
        }
        app->n_list = app->n_picks, app->list_marked = app->pick;
        snprintf(app->list_title, sizeof app->list_title,
                 "models: Up / Down, Enter opens, Esc closes");
    } else if (app->shown_kind >= 0) {
        int n = m->n_list < REN_MAX_LIST ? m->n_list : REN_MAX_LIST;
        for (int i = 0; i < n; i++) {
            memcpy(app->list_text[i], m->list_text[i], sizeof app->list_text[i]);
            memcpy(app->list_right_text[i], m->list_right[i], sizeof app->list_right_text[i]);
            app->list_values[i] = m->list_values[i];
        }
        app->n_list = n, app->list_marked = m->list_marked < n ? m->list_marked : -1;
        snprintf(app->list_title, sizeof app->list_title, "%s", m->list_title);
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
    m->overview = (ViewOverview)app->overview;
    m->shared = app->shared_scale;
    m->labels = app->model->labels;
}

/* FNV-1a of n floats' bytes, for the trace: the map on screen, compared across runs. */
static unsigned long trace_hash(const float *x, size_t n) {
    const unsigned char *b = (const unsigned char *)x;
    unsigned long h = 2166136261ul;
    for (size_t i = 0; i < n * sizeof *x; i++) h = ((h ^ b[i]) * 16777619ul) & 0xfffffffful;
    return h;
}

/* The maps app->vm holds (computed here or by the worker) go on screen: its buffers swap
 * with the ones shown, then the uploads, the legend, the mask, the list, the overview. */
static void app_show_maps(App *app, const char *by) {
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
    if (app->trace) {
        size_t n = (size_t)w * h * map_kind_channels(m->view.kind);
        printf("maps by=%s kind=%s layer=%d head=%d query=%d target=%d overview=%d shared=%d "
               "lo=%.9g hi=%.9g map=%08lx atlas=",
               by, k->tag, m->view.layer, m->view.head, m->view.query, m->view.target,
               (int)m->overview, m->shared, (double)m->lo, (double)m->hi, trace_hash(app->map, n));
        if (m->n_atlas)
            printf("%08lx\n", trace_hash(app->atlas, (size_t)m->n_atlas * n));
        else
            printf("-\n");
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
    if (k->rgb)
        ren_upload_map_rgba(&app->ren, app->map_norm, w, h, c->grid_w, c->grid_h);
    else
        ren_upload_map(&app->ren, app->map_norm, w, h, c->grid_w, c->grid_h);
    app->n_high_norm = m->n_high_norm;
    memcpy(app->high_norm, m->high_norm, (size_t)m->n_high_norm * sizeof *m->high_norm);
    app_update_list(app);
    snprintf(app->legend_hi, sizeof app->legend_hi, "%.2g", (double)m->hi);
    snprintf(app->legend_lo, sizeof app->legend_lo, "%.2g", (double)m->lo);
    snprintf(app->legend_caption, sizeof app->legend_caption, "%s",
             m->shared && k->per_head ? "the layer" : "this map");
    if (m->view.kind == MAP_TOKEN_NORMS) { /* the high-norm tokens outlined */
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
        app_show_overview(app, m->n_atlas && m->overview == (ViewOverview)app->overview ? m : NULL);
    app->dirty = 1;
}

/* Is a view job's result m what the window shows now: the single map of the view, with
 * the overview's atlas, if one is on, already on the GPU? */
static int app_maps_current(const App *app, const ViewMaps *m) {
    ViewMaps want;
    app_maps_request(app, &want);
    want.overview = m->overview;
    return view_maps_same_request(m, &want, app->model->vit.cfg.n_heads) &&
           (app->overview == OV_NONE || app_atlas_is_for(app, &app->view));
}

/* Is the running view job m still of use? When it computes the overview on screen (a
 * head or table cell selected meanwhile changes only the single map, which follows); or,
 * without an overview to compute, the view's map. */
static int app_maps_wanted(const App *app, const ViewMaps *m) {
    if (m->overview != VIEW_SINGLE)
        return same_atlas(&m->view, (Overview)m->overview, m->shared, &app->view, app->overview,
                          app->shared_scale);
    ViewMaps want;
    app_maps_request(app, &want);
    want.overview = VIEW_SINGLE;
    return view_maps_same_request(m, &want, app->model->vit.cfg.n_heads) &&
           (app->overview == OV_NONE || app_atlas_is_for(app, &app->view));
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

/* Recompute the maps of the current view (and the overview, the mask) and upload them:
 * here when that is quick, else on the worker (the old maps stay on screen meanwhile). */
static void app_update_map(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc) return;
    const VitConfig *c = &sc->run.cfg;
    const MapKindInfo *k = &MAP_KINDS[app->view.kind];
    VitError err;
    if (app->overview && !k->per_head) app->overview = OV_NONE; /* no per-head maps to show */
    if (k->uses_target && c->n_classes == 0) { /* DINO, DINOv2: say so, draw nothing wrong */
        snprintf(app->notice, sizeof app->notice,
                 "%s has no classification head: no class-specific maps", app->model->name);
        app->view.kind = MAP_ATTENTION;
    }
    app_cancel_stale(app);
    if (!view_ready(sc, &app->view)) { /* the worker computes them; the old map stays */
        app_request_explain(app);
        app->dirty = 1;
        return;
    }
    int on_worker = app_maps_on_worker(sc);
    if (on_worker && app->busy) { /* app_job_done asks again when the worker is free */
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

/* ---------------------------------------------------------------------------
 * Shift+P: the perturbation test of the map on screen, as an animation. The worker
 * computes the class probability after every step (scene_perturb); then the window
 * removes the patches step by step over PERTURB_MS, whatever its frame rate, beside
 * the curve of the probability falling, and keeps the last frame. */

#define PERTURB_MS 8000

/* The class's first name ("tabby" of "tabby, tabby cat"), or "class 281". */
static void app_class_name(char *buf, size_t n, const App *app, int cls) {
    const char *label = model_label(app->model, cls);
    if (label)
        snprintf(buf, n, "%.*s", (int)strcspn(label, ","), label);
    else
        snprintf(buf, n, "class %d", cls);
}

/* A probability as a percentage, with a decimal below 10%. */
static void pct_text(char *buf, size_t n, float p) {
    snprintf(buf, n, 100.0 * p < 9.95 ? "%.1f%%" : "%.0f%%", 100.0 * p);
}

static void perturbation_drop(Perturbation **p) {
    if (!*p) return;
    perturbation_free(*p);
    free(*p);
    *p = NULL;
}

/* Back to the normal view; a job still running is dropped when it ends. */
static void app_perturb_stop(App *app) {
    if (app->pert.phase == PERT_OFF) return;
    app->pert.phase = PERT_OFF;
    app->pert.id++;
    perturbation_drop(&app->pert.queued);
    perturbation_free(&app->pert.run);
    perturbation_free(&app->pert.ghost);
    app->dirty = 1;
}

static void app_perturb_start(App *app, Perturbation *p) {
    worker_start_perturb(&app->worker, &app->scenes[app->front], p);
    app->pert.job = p;
    app->busy = 1;
    app->dirty = 1;
}

/* Show step `step` of the run: its removed patches uploaded. */
static void app_perturb_show(App *app, int step) {
    const Perturbation *p = &app->pert.run;
    const VitConfig *c = &app_scene(app)->run.cfg;
    uint8_t *removed = realloc(app->pert.removed, (size_t)p->n_patches);
    if (!removed) {
        app_set_error(app, "out of memory for the perturbation test");
        app_perturb_stop(app);
        return;
    }
    app->pert.removed = removed;
    int count = vit_perturb_count(step, p->n_steps, p->n_patches);
    memset(removed, 0, (size_t)p->n_patches);
    for (int i = 0; i < count; i++) removed[p->order[i]] = 1;
    ren_upload_removed(&app->ren, removed, c->grid_w, c->grid_h);
    app->pert.step = step;
    app->dirty = 1;
}

/* Shift+P: the test of the view's map (pixel maps summed per patch) for the view's
 * class; most relevant first, or the other order when one is on screen already. */
static void app_perturb_key(App *app) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    const MapKindInfo *k = &MAP_KINDS[app->view.kind];
    if (!sc) {
        snprintf(app->notice, sizeof app->notice, "perturbation test: no photo yet");
        return;
    }
    if (c->n_classes == 0) {
        snprintf(app->notice, sizeof app->notice,
                 "%s has no classification head: no class probability to follow", app->model->name);
        return;
    }
    if (k->rgb) {
        snprintf(app->notice, sizeof app->notice,
                 "perturbation test: the %s's colours do not rank the patches", k->name);
        return;
    }
    if (app->shown_kind != app->view.kind || !view_ready(sc, &app->view) ||
        !view_same_map(&app->shown.view, &app->view, c->n_heads) ||
        app->shown.view.target != app->view.target) { /* a view job still computes it */
        snprintf(app->notice, sizeof app->notice, "perturbation test: wait for the map");
        return;
    }
    int w, h, most_first = app->pert.phase == PERT_OFF ? 1 : !app->pert.most_first;
    map_kind_size(&w, &h, app->view.kind, &sc->run.cfg);
    float *map = malloc((size_t)w * h * sizeof *map);
    Perturbation *p = calloc(1, sizeof *p);
    VitError err;
    if (!map || !p) {
        app_set_error(app, "out of memory for the perturbation test");
        free(map), free(p);
        return;
    }
    /* the map on screen (computed here or on the worker): nothing is recomputed */
    memcpy(map, app->map, (size_t)w * h * sizeof *map);
    if (perturbation_init(p, map, k->pixels, &sc->run.cfg, most_first, view_class(&app->view, sc),
                          &err)) {
        app_set_error(app, err.msg);
        free(map), free(p);
        return;
    }
    free(map);
    /* the run on screen stays, dim, beside the new one: the same map in the other order */
    if (app->pert.run.probs) {
        perturbation_free(&app->pert.ghost);
        app->pert.ghost = app->pert.run;
        memset(&app->pert.run, 0, sizeof app->pert.run);
    }
    if (app->pert.ghost.probs && app->pert.ghost.most_first == most_first)
        perturbation_free(&app->pert.ghost);
    p->id = ++app->pert.id;
    app->pert.most_first = most_first;
    app->pert.phase = PERT_COMPUTING;
    app->pert.step = -1;
    if (app->picking) { /* W's list closes: the plot takes the side panel */
        app->picking = 0;
        app_update_list(app);
    }
    if (app->overview) { /* the test runs on the single map */
        app->overview = OV_NONE;
        app_update_map(app);
    }
    perturbation_drop(&app->pert.queued);
    if (app->busy)
        app->pert.queued = p; /* after the running job (app_job_done) */
    else
        app_perturb_start(app, p);
    app->dirty = 1;
}

/* The worker computed a run: play it if it is still the one asked for. */
static void app_perturb_done(App *app) {
    Worker *w = &app->worker;
    Perturbation *p = w->perturb;
    w->perturb = NULL, app->pert.job = NULL;
    if (p->id != app->pert.id || app->pert.phase != PERT_COMPUTING) {
        perturbation_drop(&p); /* stopped, or another asked for meanwhile */
        return;
    }
    if (w->status != VIT_OK) {
        app_set_error(app, w->err.msg);
        perturbation_drop(&p);
        app_perturb_stop(app);
        return;
    }
    perturbation_free(&app->pert.run);
    app->pert.run = *p; /* its arrays move to the run on screen */
    free(p);
    app->pert.phase = PERT_PLAYING;
    app->pert.t0 = SDL_GetTicks();
    app_perturb_show(app, 0);
}

/* The animation's clock: the step due now; the last one stays on screen. */
static void app_perturb_tick(App *app) {
    if (app->pert.phase != PERT_PLAYING) return;
    int n = app->pert.run.n_steps;
    Uint32 ms = SDL_GetTicks() - app->pert.t0;
    int step = ms >= PERTURB_MS ? n : (int)((Uint64)ms * (Uint64)n / PERTURB_MS);
    if (step == app->pert.step) return;
    app_perturb_show(app, step);
    if (step == n) app->pert.phase = PERT_DONE, app->pert.announce = 1;
}

/* Milliseconds until the next step is due (the main loop sleeps that long at most). */
static int app_perturb_wait_ms(const App *app) {
    Uint64 n = (Uint64)app->pert.run.n_steps;
    Uint32 due = app->pert.t0 + (Uint32)(((Uint64)(app->pert.step + 1) * PERTURB_MS + n - 1) / n);
    Uint32 now = SDL_GetTicks();
    return due > now ? (int)(due - now) : 1;
}

/* Area under the run's curve from 0 to step (trapezoids, x in [0, 1]): vit_auc's at the
 * last step. */
static double app_perturb_auc(const Perturbation *p, int step) {
    double a = 0.0;
    for (int s = 1; s <= step; s++) a += 0.5 * ((double)p->probs[s - 1] + (double)p->probs[s]);
    return a / (double)p->n_steps;
}

/* The status line's right part during the test: the order, the step, the probability. */
static void app_perturb_status(App *app, char *buf, size_t n) {
    const Perturbation *p = &app->pert.run;
    const char *order = app->pert.most_first ? "positive" : "negative";
    if (app->pert.phase == PERT_COMPUTING || !p->probs) {
        snprintf(buf, n, "perturbation test: computing\xe2\x80\xa6");
        return;
    }
    int s = app->pert.step < 0 ? 0 : app->pert.step;
    int count = vit_perturb_count(s, p->n_steps, p->n_patches);
    char cls[96], prob[16], top[96];
    app_class_name(cls, sizeof cls, app, p->target);
    pct_text(prob, sizeof prob, p->probs[s]);
    app_class_name(top, sizeof top, app, p->top[s]);
    snprintf(buf, n, "%s perturbation: %d%% removed \xc2\xb7 P(%.60s) %s \xc2\xb7 top-1 %s %.60s",
             order, (int)lround(100.0 * count / p->n_patches), cls, prob,
             p->top[s] == p->target ? "still" : "now", top);
}

/* The frame's picture and plot panel during the test. */
static void app_perturb_frame(App *app, RenFrame *f) {
    const Scene *sc = app_scene(app);
    const Perturbation *p = &app->pert.run, *g = &app->pert.ghost;
    int shown = app->pert.phase >= PERT_PLAYING && p->probs && app->pert.step >= 0;
    char cls[96], a[16], b[16];
    app_class_name(cls, sizeof cls, app, shown ? p->target : view_class(&app->view, sc));
    f->plot = 1;
    f->plot_alt = !app->pert.most_first;
    f->plot_steps = shown ? p->n_steps : g->probs ? g->n_steps : 1;
    f->plot_ghost = g->probs && g->n_steps == f->plot_steps ? g->probs : NULL;
    snprintf(app->pert.title, sizeof app->pert.title, "%s perturbation",
             app->pert.most_first ? "positive" : "negative");
    f->plot_title = app->pert.title;
    f->plot_subtitle = app->pert.subtitle;
    f->plot_caption = app->pert.caption;
    if (f->plot_ghost) { /* the other order's AUC beside this one's */
        snprintf(app->pert.ghost_caption, sizeof app->pert.ghost_caption, "grey: %s, AUC %.3f",
                 g->most_first ? "positive" : "negative", vit_auc(g->probs, g->n_steps + 1));
        f->plot_ghost_caption = app->pert.ghost_caption;
    }
    if (!shown) {
        snprintf(app->pert.subtitle, sizeof app->pert.subtitle, "P(%.60s): computing\xe2\x80\xa6",
                 cls);
        snprintf(app->pert.caption, sizeof app->pert.caption, "%s relevant first",
                 app->pert.most_first ? "most" : "least");
        return;
    }
    int s = app->pert.step;
    f->removed = 1;
    for (int ch = 0; ch < 3; ch++) f->fill_rgb[ch] = sc->run.cfg.mean[ch];
    f->plot_y = p->probs;
    f->plot_n = s + 1;
    pct_text(a, sizeof a, p->probs[0]);
    pct_text(b, sizeof b, p->probs[s]);
    snprintf(app->pert.subtitle, sizeof app->pert.subtitle, "P(%.60s) %s \xe2\x86\x92 %s", cls, a,
             b);
    snprintf(app->pert.caption, sizeof app->pert.caption, "AUC %.3f%s", app_perturb_auc(p, s),
             s < p->n_steps ? " so far" : "");
}

/* The trace's line of a finished run: every step's probability and top-1, the order. */
static void app_perturb_trace(const App *app) {
    const Perturbation *p = &app->pert.run;
    printf("perturb done mode=%s target=%d steps=%d patches=%d auc=%.9g curve=",
           p->most_first ? "positive" : "negative", p->target, p->n_steps, p->n_patches,
           vit_auc(p->probs, p->n_steps + 1));
    for (int s = 0; s <= p->n_steps; s++) printf("%s%.9g", s ? "," : "", (double)p->probs[s]);
    printf(" top=");
    for (int s = 0; s <= p->n_steps; s++) printf("%s%d", s ? "," : "", p->top[s]);
    printf(" order=");
    for (int i = 0; i < p->n_patches; i++) printf("%s%d", i ? "," : "", p->order[i]);
    printf("\n");
}

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
    } else {
        snprintf(what, sizeof what, "%s", w->model_path[0] ? "loading the model" : "forward pass");
    }
    int done, total;
    worker_progress(w, &done, &total);
    if (total > 0)
        snprintf(buf, n, "%s %d/%d\xe2\x80\xa6", what, done, total);
    else
        snprintf(buf, n, "%s\xe2\x80\xa6", what);
}

/* The status line: model, layer, head or fusion, map kind, query, target class,
 * mask | top-1 class. Only what the view's kind reads is shown. */
static void app_update_status(App *app) {
    const VitConfig *c = &app->model->vit.cfg;
    const View *v = &app->view;
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    const Scene *sc = app_scene(app);
    const char *dot = "  \xc2\xb7  "; /* U+00B7 middle dot */
    char layer[48] = "", head[64] = "", kind[64], query[64] = "", target[160] = "", mask[64] = "";
    if (k->per_layer)
        snprintf(layer, sizeof layer, "%slayer %d/%d", dot, v->layer + 1, c->n_layers);
    if (k->per_head) {
        char h[48];
        view_head_text(h, sizeof h, v, c->n_heads);
        if (app->overview == OV_TABLE)
            snprintf(h, sizeof h, "layers \xc3\x97 heads");
        else if (app->overview == OV_HEADS)
            snprintf(h, sizeof h, "all %d heads", c->n_heads);
        snprintf(head, sizeof head, "%s%s", dot, h);
    }
    if (k->uses_discard && v->discard_ratio > 0.0f)
        snprintf(kind, sizeof kind, "%s, discard %.1f", k->name, (double)v->discard_ratio);
    else
        snprintf(kind, sizeof kind, "%s", k->name);
    if (k->uses_query && v->query != 0) {
        char q[48];
        view_query_text(q, sizeof q, v, c);
        snprintf(query, sizeof query, "%sfrom %s", dot, q);
    }
    int target_class = k->uses_target && sc ? view_class(v, sc) : -1;
    if (target_class >= 0) {
        const char *label = model_label(app->model, target_class);
        if (label)
            snprintf(target, sizeof target, "%sfor: %.100s", dot, label);
        else
            snprintf(target, sizeof target, "%sfor: class %d", dot, target_class);
    }
    if (app->show_mask && !app->overview && !k->rgb && v->kind != MAP_TOKEN_NORMS)
        snprintf(mask, sizeof mask, "%smask %d%%: %d %s", dot, app->mask_pct, app->mask_kept,
                 k->pixels ? "px" : "patches");
    char more[300] = "", extra[240] = "";
    if (k->status && sc && app->shown_kind == v->kind) /* computed with the map */
        snprintf(extra, sizeof extra, "%s", app->shown.status);
    if (k->rgb && sc && app->shown_kind == v->kind && app->map_w > 0) { /* foreground patches */
        int fg = 0, n = app->map_w * app->map_h;
        for (int i = 0; i < n; i++) fg += app->map[(size_t)i * 4 + 3] > 0.5f;
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof extra - len, ": %d of %d patches foreground", fg, n);
    }
    if (sc && sc->orientation > 1) { /* a phone photo stored sideways */
        size_t len = strlen(extra);
        snprintf(extra + len, sizeof extra - len, "%s%s EXIF orientation %d", len ? dot : "",
                 sc->ignore_orientation ? "as stored, ignoring" : "turned upright by its",
                 sc->orientation);
    }
    if (extra[0]) snprintf(more, sizeof more, "%s%s", dot, extra);
    snprintf(app->status_left, sizeof app->status_left, "%s%s%s%s%s%s%s%s%s%s%s", app->model->name,
             layer, head, dot, kind, query, target, more, mask, app->overlay ? "" : dot,
             app->overlay ? "" : "overlay off");
    app->status_right[0] = '\0';
    if (app->pert.phase != PERT_OFF && !app->notice[0]) {
        app_perturb_status(app, app->status_right, sizeof app->status_right);
    } else if (app->busy) {
        app_job_status(app, app->status_right, sizeof app->status_right);
    } else if (app->notice[0]) {
        snprintf(app->status_right, sizeof app->status_right, "%.250s", app->notice);
    } else if (sc && c->n_classes > 0 && sc->run.probs) {
        int top;
        vit_top_k(&top, sc->run.probs, c->n_classes, 1);
        const char *label = model_label(app->model, top);
        char cls[32];
        snprintf(cls, sizeof cls, "class %d", top);
        snprintf(app->status_right, sizeof app->status_right, "%s  %.1f%%", label ? label : cls,
                 100.0 * sc->run.probs[top]);
    }
    char title[512];
    snprintf(title, sizeof title, "vitlens \xe2\x80\x94 %s \xe2\x80\x94 %s",
             sc ? sc->name : "no image", app->model->name);
    SDL_SetWindowTitle(app->win, title);
}

/* Start loading a photo, or a model when path ends in .safetensors (the current
 * photo is then run through it). While busy, the path waits for the running job. */
static void app_open(App *app, const char *path) {
    if (!ends_with(path, ".safetensors")) snprintf(app->photo, sizeof app->photo, "%s", path);
    if (app->busy) {
        snprintf(app->pending, sizeof app->pending, "%s", path);
        /* a newer photo makes the running view job, worker map or photo's forward pass
         * useless: stopped, it ends at once and the pending photo starts (app_job_done) */
        const Worker *w = &app->worker;
        if (w->maps || w->slow ||
            (!w->explain && !w->perturb && !w->model_path[0] && !ends_with(path, ".safetensors")))
            worker_cancel(&app->worker);
        return;
    }
    const Scene *sc = app_scene(app);
    Scene *back = &app->scenes[app->has_scene ? !app->front : app->front];
    if (ends_with(path, ".safetensors")) {
        worker_start(&app->worker, path, &app->opt->load,
                     app->next_labels[0] ? app->next_labels : app->opt->labels_path, app->model,
                     sc ? sc->path : NULL, back);
        app->next_labels[0] = '\0';
    } else
        worker_start(&app->worker, NULL, NULL, NULL, app->model, path, back);
    app->busy = 1;
    app->dirty = 1;
}

/* Buffers sized by the scene's shapes: the largest map of any kind. */
static int app_scene_buffers(App *app, const Scene *sc) {
    const VitConfig *c = &sc->run.cfg;
    size_t N = map_kind_max_floats(c, 0), K = (size_t)(c->n_heads + VIEW_N_FUSIONS);
    size_t N_atlas = map_kind_max_floats(c, 1);
    float *map = realloc(app->map, N * sizeof *map);
    if (map) app->map = map;
    float *norm = realloc(app->map_norm, N * sizeof *norm);
    if (norm) app->map_norm = norm;
    uint8_t *mask = realloc(app->mask, N);
    if (mask) app->mask = mask;
    float *atlas = realloc(app->atlas, (size_t)c->n_layers * K * N_atlas * sizeof *atlas);
    if (atlas) app->atlas = atlas;
    if (!map || !norm || !mask || !atlas) return -1;
    /* the same again for the maps being computed (no view job runs: the worker is idle) */
    if (!(map = realloc(app->vm.map, N * sizeof *map))) return -1;
    app->vm.map = map;
    if (!(norm = realloc(app->vm.norm, N * sizeof *norm))) return -1;
    app->vm.norm = norm;
    if (!(atlas = realloc(app->vm.atlas, (size_t)c->n_layers * K * N_atlas * sizeof *atlas)))
        return -1;
    app->vm.atlas = atlas;
    if (app->cursor_row >= c->grid_h || app->cursor_col >= c->grid_w || app->cursor_row < 0)
        app->cursor_row = c->grid_h / 2, app->cursor_col = c->grid_w / 2;
    return 0;
}

/* The worker is done: swap in its result or show its error. */
static void app_job_result(App *app) {
    Worker *w = &app->worker;
    app->busy = 0;
    if (app->trace && w->status == VIT_ERR_CANCELLED) /* for tests: what a newer request saved */
        printf("job cancelled %s\n", w->maps      ? "maps"
                                     : w->slow    ? "slow"
                                     : w->explain ? "explain"
                                                  : "forward");
    if (w->perturb || w->explain || w->slow || w->maps) { /* a job on the front Scene */
        if (w->perturb) {
            app_perturb_done(app);
        } else if (w->status == VIT_ERR_CANCELLED) { /* asked again below, if still wanted */
        } else if (w->status != VIT_OK) {            /* class-specific, worker or view maps */
            app_set_error(app, w->err.msg);
            if (w->maps && app->announce_maps) /* the photo is on screen, if not its maps */
                app->announce = 1, app->announce_maps = 0;
            if (!w->maps) {
                app->view.kind = app->shown_kind >= 0 ? app->shown_kind : MAP_ATTENTION;
                app->view.joint = 0;
            }
        } else if (w->maps) {
            app_show_maps(app, "worker");
            app->error[0] = '\0';
        } else if (w->slow) {
            scene_slow_swap(&app->scenes[app->front]);
            if (w->joint && w->joint->skipped[0])
                snprintf(app->notice, sizeof app->notice, "skipped: %.500s", w->joint->skipped);
            app->error[0] = '\0';
        } else {
            scene_explain_swap(&app->scenes[app->front]);
            app->error[0] = '\0';
        }
        app->dirty = 1;
        if (app->pending[0]) { /* a photo dropped meanwhile goes first */
            char path[1024];
            snprintf(path, sizeof path, "%s", app->pending);
            app->pending[0] = '\0';
            app_open(app, path);
            return;
        }
        if (w->maps && w->status != VIT_ERR_CANCELLED && app_maps_current(app, w->maps))
            return;          /* done (or failed: the error shows, asking again would fail again) */
        app_update_map(app); /* or asks for the next class if the view moved on */
        return;
    }
    app->loads++;
    if (w->status == VIT_ERR_CANCELLED) { /* a newer photo: pending, opened below */
    } else if (w->status != VIT_OK) {
        app_set_error(app, w->err.msg);
    } else {
        if (w->ran || w->new_model) /* another photo or model: not the test's map */
            app_perturb_stop(app);
        if (w->new_model) { /* the worker is idle: nothing reads the old model any more */
            Model *old = app->model;
            app->model = w->new_model;
            w->new_model = NULL;
            snprintf(app->model_path, sizeof app->model_path, "%s", w->model_path);
            snprintf(app->labels_path, sizeof app->labels_path, "%s", w->labels_path);
            model_free(old);
            free(old);
            joint_features_free(&app->joint); /* of the old model */
            view_clamp(&app->view, &app->model->vit.cfg);
        }
        if (w->ran) {
            if (app->has_scene) app->front = !app->front;
            app->has_scene = 1;
        }
        const Scene *sc = app_scene(app);
        if (sc) {
            if (app_scene_buffers(app, sc)) {
                app_set_error(app, "out of memory for the maps");
                app->has_scene = 0;
            } else {
                startup_mark(app, "scene");
                ren_upload_image(&app->ren, sc->crop_rgb, sc->crop_w_px, sc->crop_h_px);
                app_update_map(app);
                if (app->busy && app->worker.maps) /* "ready" once its maps are on screen */
                    app->announce_maps = 1;
                else
                    app->announce = 1;
            }
        }
        app->error[0] = '\0';
    }
    app->dirty = 1;
    if (app->pending[0]) {
        char path[1024];
        snprintf(path, sizeof path, "%s", app->pending);
        app->pending[0] = '\0';
        app_open(app, path);
    }
}

/* The worker is done: its result; then a perturbation test asked for meanwhile. */
static void app_job_done(App *app) {
    app_job_result(app);
    if (!app->busy && app->pert.queued) {
        Perturbation *p = app->pert.queued;
        app->pert.queued = NULL;
        app_perturb_start(app, p);
    }
}

/* ---------------------------------------------------------------------------
 * Events: the one switch */

/* N / P: the next / previous image of the command line's list when it has more
 * than one; else of the folder of the photo last asked for; without one, the
 * first / last demo scene of the built-in model. */
static void app_step_photo(App *app, int step) {
    if (app->n_images > 1) {
        app->image_at = ((app->image_at + step) % app->n_images + app->n_images) % app->n_images;
        app_open(app, app->images[app->image_at]);
        return;
    }
    const char *from = app->photo[0] ? app->photo : app->opt->demo_dir;
    char path[1024];
    if (!from[0]) {
        app_set_error(app, "no photo yet: drop one on the window");
    } else if (files_step(path, sizeof path, from, step)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%.500s: no image in that folder", from);
        app_set_error(app, msg);
    } else {
        app_open(app, path);
    }
}

/* Make patch (row, col) the query token. */
static void app_set_query(App *app, int row, int col) {
    const VitConfig *c = &app->model->vit.cfg;
    app->cursor_row = row < 0 ? 0 : row >= c->grid_h ? c->grid_h - 1 : row;
    app->cursor_col = col < 0 ? 0 : col >= c->grid_w ? c->grid_w - 1 : col;
    app->view.query = c->n_prefix + app->cursor_row * c->grid_w + app->cursor_col;
}

/* I J K L / Shift+arrows: the first press makes the cursor's patch the query,
 * the next ones move it. */
static void app_move_cursor(App *app, int drow, int dcol) {
    int r, c;
    if (!app_query_patch(app, &r, &c))
        app_set_query(app, app->cursor_row, app->cursor_col);
    else
        app_set_query(app, r + drow, c + dcol);
}

/* Open overview cell k (an atlas index) as the single view. */
static void app_open_cell(App *app, int k) {
    const VitConfig *c = &app->model->vit.cfg;
    int K = c->n_heads + VIEW_N_FUSIONS;
    if (k < 0) return;
    if (app->overview == OV_TABLE)
        app->view.layer = k / K, app->view.head = k % K;
    else
        app->view.head = k;
    app->overview = OV_NONE;
}

/* Does a window manager run on the window's X display? An EWMH manager keeps a
 * window named by the root window's _NET_SUPPORTING_WM_CHECK. 1 on other video
 * drivers (Wayland, ...), whose compositor always answers a fullscreen request. */
static int has_window_manager(SDL_Window *win) {
#if defined(SDL_VIDEO_DRIVER_X11) && defined(VITLENS_X11)
    SDL_SysWMinfo info;
    SDL_VERSION(&info.version);
    if (!SDL_GetWindowWMInfo(win, &info) || info.subsystem != SDL_SYSWM_X11) return 1;
    Display *dpy = info.info.x11.display;
    Atom check = XInternAtom(dpy, "_NET_SUPPORTING_WM_CHECK", True);
    Atom type = None;
    int format = 0;
    unsigned long n = 0, left = 0;
    unsigned char *data = NULL;
    int found = check != None &&
                XGetWindowProperty(dpy, DefaultRootWindow(dpy), check, 0, 1, False, XA_WINDOW,
                                   &type, &format, &n, &left, &data) == Success &&
                type == XA_WINDOW && n == 1;
    if (data) XFree(data);
    return found;
#else
    (void)win;
    return 1;
#endif
}

/* F: presenter mode. SDL asks the window manager (_NET_WM_STATE_FULLSCREEN) and
 * reports the display's size at once; with no manager to answer (kiosk, projector,
 * bare X, Xvfb) the X window kept its size and the frame was cut (issue 17). There
 * the window itself turns borderless and covers its display; the next F puts back
 * its place, size and border. One window per process: the saved geometry is static. */
static struct {
    int own; /* 1: fullscreen done here, not by SDL and a window manager */
    int x, y, w, h, bordered;
} fs_saved;

static void app_toggle_fullscreen(App *app) {
    int fs = !app->fullscreen;
    char msg[300];
    if (!fs && fs_saved.own) {
        SDL_SetWindowBordered(app->win, fs_saved.bordered ? SDL_TRUE : SDL_FALSE);
        SDL_SetWindowSize(app->win, fs_saved.w, fs_saved.h);
        SDL_SetWindowPosition(app->win, fs_saved.x, fs_saved.y);
        fs_saved.own = 0;
        app->fullscreen = 0;
        return;
    }
    if (fs && !has_window_manager(app->win)) {
        SDL_Rect r;
        int d = SDL_GetWindowDisplayIndex(app->win);
        if (d < 0 || SDL_GetDisplayBounds(d, &r) != 0) {
            snprintf(msg, sizeof msg, "fullscreen: %s", SDL_GetError());
            app_set_error(app, msg);
            return;
        }
        SDL_GetWindowPosition(app->win, &fs_saved.x, &fs_saved.y);
        SDL_GetWindowSize(app->win, &fs_saved.w, &fs_saved.h);
        fs_saved.bordered = !(SDL_GetWindowFlags(app->win) & SDL_WINDOW_BORDERLESS);
        SDL_SetWindowBordered(app->win, SDL_FALSE);
        SDL_SetWindowPosition(app->win, r.x, r.y);
        SDL_SetWindowSize(app->win, r.w, r.h);
        SDL_RaiseWindow(app->win);
        fs_saved.own = 1;
        app->fullscreen = 1;
        return;
    }
    if (SDL_SetWindowFullscreen(app->win, fs ? SDL_WINDOW_FULLSCREEN_DESKTOP : 0) != 0) {
        snprintf(msg, sizeof msg, "fullscreen: %s", SDL_GetError());
        app_set_error(app, msg);
        return;
    }
    app->fullscreen = fs;
}

/* Explain the class of the top-5 panel's row `rank` (0: the most probable): the
 * view targets it, switching to a class-specific kind if it shows another. */
static void app_target_rank(App *app, int rank) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    if (!sc) return;
    if (c->n_classes == 0) {
        snprintf(app->notice, sizeof app->notice,
                 "%s has no classification head: no class to explain", app->model->name);
        return;
    }
    int top[REN_MAX_PREDS], k = c->n_classes < REN_MAX_PREDS ? c->n_classes : REN_MAX_PREDS;
    if (rank < 0 || rank >= k) return;
    vit_top_k(top, sc->run.probs, c->n_classes, k);
    app->view.target = top[rank];
    if (!MAP_KINDS[app->view.kind].uses_target) app->view.kind = app->class_kind;
    app->overview = OV_NONE;
    app_update_map(app);
}

/* E / Shift+E: the next / previous kind of the table; without a classification
 * head the class-specific ones are passed over, and the status line says why. */
static void app_step_kind(App *app, int step) {
    View *v = &app->view;
    int skipped = 0;
    for (int i = 0; i < MAP_KIND_COUNT; i++) {
        v->kind = (v->kind + step + MAP_KIND_COUNT) % MAP_KIND_COUNT;
        if (!MAP_KINDS[v->kind].uses_target || app->model->vit.cfg.n_classes > 0) break;
        skipped = 1;
    }
    if (MAP_KINDS[v->kind].uses_target) app->class_kind = v->kind;
    if (skipped)
        snprintf(app->notice, sizeof app->notice,
                 "%s has no classification head: no class-specific maps", app->model->name);
}

/* W: open or close the list of the downloaded models (models.h). */
static void app_toggle_models(App *app) {
    app->picking = !app->picking;
    if (app->picking) {
        app->n_picks = models_list(app->picks, REN_MAX_LIST), app->pick = 0;
        for (int i = 0; i < app->n_picks; i++)
            if (!strcmp(app->picks[i].weights, app->model_path)) app->pick = i;
        if (app->n_picks == 0) {
            char dirs[MODELS_MAX_DIRS][1024];
            int n = models_dirs(dirs);
            snprintf(app->notice, sizeof app->notice,
                     "no downloaded models in %.200s%s%.200s (scripts/download-model.sh NAME)",
                     n > 0 ? dirs[0] : "", n > 1 ? " or " : "", n > 1 ? dirs[n - 1] : "");
            app->picking = 0;
        }
    }
    app_update_list(app);
}

/* The keys of the open models list: 1 when the key was one of them. */
static int app_pick_key(App *app, SDL_Keycode key) {
    switch (key) {
    case SDLK_UP: app->pick = app->pick > 0 ? app->pick - 1 : app->n_picks - 1; break;
    case SDLK_DOWN: app->pick = (app->pick + 1) % app->n_picks; break;
    case SDLK_ESCAPE: app_toggle_models(app); return 1;
    case SDLK_RETURN:
    case SDLK_KP_ENTER: { /* loaded on the worker, as a dropped model; its labels with it */
        const ModelEntry *m = &app->picks[app->pick];
        snprintf(app->next_labels, sizeof app->next_labels, "%s", m->labels);
        char path[1200];
        snprintf(path, sizeof path, "%s", m->weights);
        app_toggle_models(app);
        if (strcmp(path, app->model_path)) app_open(app, path);
        return 1;
    }
    default: return 0;
    }
    app_update_list(app);
    return 1;
}

static void app_key_action(App *app, const SDL_Keysym *ks) {
    const VitConfig *c = &app->model->vit.cfg;
    View *v = &app->view;
    SDL_Keycode key = ks->sym;
    int shift = (ks->mod & KMOD_SHIFT) != 0;
    int map_changed = 0;
    app->notice[0] = '\0';
    if (app->picking && app_pick_key(app, key)) {
        app->dirty = 1;
        return;
    }
    if (key == SDLK_x && shift) { /* the feature PCA over every photo of the slideshow */
        int on = !(v->kind == MAP_FEATURES_PCA && v->joint);
        v->kind = on ? MAP_FEATURES_PCA : MAP_ATTENTION, v->joint = on;
        app_update_map(app);
        app->dirty = 1;
        return;
    }
    for (int k = 0; k < MAP_KIND_COUNT; k++)
        if (MAP_KINDS[k].key && key == (SDL_Keycode)MAP_KINDS[k].key &&
            shift == MAP_KINDS[k].shift) { /* R: rollout on / off, Shift+R: attention flow */
            v->kind = v->kind == k ? MAP_ATTENTION : k;
            v->joint = 0;
            app_update_map(app);
            app->dirty = 1;
            return;
        }
    switch (key) {
    case SDLK_ESCAPE:
    case SDLK_q: app->running = 0; break;
    case SDLK_LEFT:
        if (shift)
            app_move_cursor(app, 0, -1), map_changed = 1;
        else if (v->layer > 0)
            v->layer--, map_changed = 1;
        break;
    case SDLK_RIGHT:
        if (shift)
            app_move_cursor(app, 0, 1), map_changed = 1;
        else if (v->layer < c->n_layers - 1)
            v->layer++, map_changed = 1;
        break;
    case SDLK_UP:
        if (shift)
            app_move_cursor(app, -1, 0), map_changed = 1;
        else if (v->head > 0)
            v->head--, map_changed = 1;
        break;
    case SDLK_DOWN:
        if (shift)
            app_move_cursor(app, 1, 0), map_changed = 1;
        else if (v->head < c->n_heads + VIEW_N_FUSIONS - 1)
            v->head++, map_changed = 1;
        break;
    case SDLK_i: app_move_cursor(app, -1, 0), map_changed = 1; break;
    case SDLK_k: app_move_cursor(app, 1, 0), map_changed = 1; break;
    case SDLK_j: app_move_cursor(app, 0, -1), map_changed = 1; break;
    case SDLK_l: app_move_cursor(app, 0, 1), map_changed = 1; break;
    case SDLK_c: map_changed = v->query != 0, v->query = 0; break;
    case SDLK_e: /* the next / previous row of the map kinds' table */
        app_step_kind(app, shift ? -1 : 1), map_changed = 1;
        break;
    case SDLK_1:
    case SDLK_2:
    case SDLK_3:
    case SDLK_4:
    case SDLK_5: app_target_rank(app, (int)(key - SDLK_1)); break;
    case SDLK_KP_1:
    case SDLK_KP_2:
    case SDLK_KP_3:
    case SDLK_KP_4:
    case SDLK_KP_5: app_target_rank(app, (int)(key - SDLK_KP_1)); break;
    case SDLK_LEFTBRACKET:
    case SDLK_RIGHTBRACKET: {
        /* in tenths, so that stepping never accumulates float error: 0.0 .. 0.9 */
        int t = (int)lroundf(v->discard_ratio * 10.0f) + (key == SDLK_RIGHTBRACKET ? 1 : -1);
        if (t < 0 || t > 9) break;
        v->discard_ratio = (float)t / 10.0f;
        map_changed = MAP_KINDS[v->kind].uses_discard;
        break;
    }
    case SDLK_a:
    case SDLK_t:
        if (c->n_heads + VIEW_N_FUSIONS > VIT_MAX_LAYERS * 4) {
            app_set_error(app, "too many heads for an overview");
            break;
        }
        if (!MAP_KINDS[v->kind].per_head) {
            snprintf(app->notice, sizeof app->notice, "%s has no per-head maps to show",
                     MAP_KINDS[v->kind].title);
            break;
        }
        if (key == SDLK_t) {
            app->overview = app->overview == OV_TABLE ? OV_NONE : OV_TABLE, map_changed = 1;
            break;
        }
        app->overview = app->overview == OV_HEADS ? OV_NONE : OV_HEADS, map_changed = 1;
        break;
    case SDLK_RETURN:
    case SDLK_KP_ENTER:
        if (app->overview) {
            int K = c->n_heads + VIEW_N_FUSIONS;
            app_open_cell(app, app->overview == OV_TABLE ? v->layer * K + v->head : v->head);
            map_changed = 1;
        }
        break;
    case SDLK_0:
    case SDLK_KP_0: app->show_preds = !app->show_preds; break;
    case SDLK_d: app->show_distance = !app->show_distance; break;
    case SDLK_m: app->show_mask = !app->show_mask, map_changed = 1; break;
    case SDLK_COMMA:
    case SDLK_PERIOD: {
        int pct = app->mask_pct + (key == SDLK_PERIOD ? 5 : -5);
        if (pct < 5 || pct > 100) break;
        app->mask_pct = pct;
        map_changed = app->show_mask;
        break;
    }
    case SDLK_v:
        app->colormap = (app->colormap + (shift ? COLORMAP_COUNT - 1 : 1)) % COLORMAP_COUNT;
        ren_set_colormap(&app->ren, app->colormap);
        break;
    case SDLK_u: app->shared_scale = !app->shared_scale, map_changed = 1; break;
    case SDLK_b: app->bilinear = !app->bilinear; break;
    case SDLK_n: app_step_photo(app, shift ? -1 : 1); break;
    case SDLK_p: /* Shift+P: the perturbation test of the map; P the previous image */
        if (shift)
            app_perturb_key(app);
        else
            app_step_photo(app, -1);
        break;
    case SDLK_s: app->save_pending = 1; break;
    case SDLK_f: app_toggle_fullscreen(app); break;
    case SDLK_g: app->grid = !app->grid; break;
    case SDLK_o: app->overlay = !app->overlay; break;
    case SDLK_h: app->help = !app->help; break;
    case SDLK_w: app_toggle_models(app); break;
    case SDLK_PLUS:
    case SDLK_EQUALS: /* '+' is shift+'=' on most layouts */
    case SDLK_KP_PLUS:
        app->opacity = app->opacity + 0.1f > 1.0f ? 1.0f : app->opacity + 0.1f;
        break;
    case SDLK_MINUS:
    case SDLK_KP_MINUS:
        app->opacity = app->opacity - 0.1f < 0.0f ? 0.0f : app->opacity - 0.1f;
        break;
    default: return;
    }
    if (map_changed) app_update_map(app);
    app->dirty = 1;
}

/* Did the view change from `before`: another map (the fields its kind reads), class or
 * overview? */
static int app_view_moved(const App *app, const View *before, Overview overview) {
    return !view_same_map(before, &app->view, app->model->vit.cfg.n_heads) ||
           before->target != app->view.target || overview != app->overview;
}

/* A key: its action. One that changes the view, the photo or the model (N, P, W's list)
 * also ends a perturbation test, whose picture is of the view it started on. */
static void app_key(App *app, const SDL_Keysym *ks) {
    View before = app->view;
    Overview overview = app->overview;
    int shift = (ks->mod & KMOD_SHIFT) != 0;
    app_key_action(app, ks);
    if (ks->sym == SDLK_p && shift) return; /* the test's own key */
    if (ks->sym == SDLK_n || ks->sym == SDLK_p || ks->sym == SDLK_w ||
        app_view_moved(app, &before, overview))
        app_perturb_stop(app);
}

/* Window coordinates (SDL's mouse events) to framebuffer px (high-DPI). */
static void app_mouse_px(const App *app, int x, int y, float *fx, float *fy) {
    int ww = 1, wh = 1, fw = 1, fh = 1;
    SDL_GetWindowSize(app->win, &ww, &wh);
    SDL_GL_GetDrawableSize(app->win, &fw, &fh);
    *fx = (float)x * (float)fw / (float)(ww > 0 ? ww : 1);
    *fy = (float)y * (float)fh / (float)(wh > 0 ? wh : 1);
}

/* What is under the mouse: a patch of the single view, or an overview cell. */
static void app_hover(App *app, int x, int y) {
    app_mouse_px(app, x, y, &app->mouse_x, &app->mouse_y);
    int r = -1, c = -1, cell = -1;
    if (app->has_scene && !app->overview) {
        if (ren_patch_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y, &r, &c)) r = c = -1;
    } else if (app->has_scene) {
        cell = ren_cell_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y);
    }
    if (r != app->hover_row || c != app->hover_col || cell != app->hover_cell) app->dirty = 1;
    app->hover_row = r, app->hover_col = c, app->hover_cell = cell;
    if (app->hover_row >= 0 || app->hover_cell >= 0) app->dirty = 1; /* the tooltip follows */
}

static void app_click_action(App *app, int x, int y) {
    app_hover(app, x, y);
    if (!app->has_scene) return;
    app->notice[0] = '\0';
    int rank = ren_pred_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y);
    if (rank >= 0) { /* a row of the top-5 panel: explain that class */
        app_target_rank(app, rank);
        return;
    }
    if (app->overview) {
        if (app->hover_cell < 0) return;
        app_open_cell(app, app->hover_cell);
        app->hover_cell = -1;
    } else {
        if (app->hover_row < 0) return;
        app_set_query(app, app->hover_row, app->hover_col);
    }
    app_update_map(app);
}

/* A click: its action; one that changes the view ends a perturbation test. */
static void app_click(App *app, int x, int y) {
    View before = app->view;
    Overview overview = app->overview;
    app_click_action(app, x, y);
    if (app_view_moved(app, &before, overview)) app_perturb_stop(app);
}

static void app_handle_event(App *app, const SDL_Event *e) {
    switch (e->type) {
    case SDL_QUIT: app->running = 0; break;
    case SDL_KEYDOWN:
        if (!app->t_input) app->t_input = SDL_GetPerformanceCounter();
        app_key(app, &e->key.keysym);
        break;
    case SDL_MOUSEMOTION: app_hover(app, e->motion.x, e->motion.y); break;
    case SDL_MOUSEBUTTONDOWN:
        if (e->button.button == SDL_BUTTON_LEFT) app_click(app, e->button.x, e->button.y);
        break;
    case SDL_DROPFILE:
        if (e->drop.file) app_open(app, e->drop.file);
        SDL_free(e->drop.file);
        break;
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED ||
            e->window.event == SDL_WINDOWEVENT_EXPOSED ||
            e->window.event == SDL_WINDOWEVENT_SHOWN) {
            ren_expose(&app->ren);
            app->dirty = 1;
        }
        if (e->window.event == SDL_WINDOWEVENT_LEAVE)
            app->hover_row = app->hover_col = app->hover_cell = -1, app->dirty = 1;
        break;
    default:
        if (e->type == app->ev_done) app_job_done(app);
        break;
    }
}

/* ---------------------------------------------------------------------------
 * Drawing */

/* The side panels' contents: top-5 and the attention distance plot. */
static void app_panels(App *app, RenFrame *f) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    if (!sc) return;
    if (app->show_preds && c->n_classes > 0 && sc->run.probs) {
        int top[REN_MAX_PREDS], k = c->n_classes < REN_MAX_PREDS ? c->n_classes : REN_MAX_PREDS;
        vit_top_k(top, sc->run.probs, c->n_classes, k);
        for (int i = 0; i < k; i++) {
            const char *label = model_label(app->model, top[i]);
            if (label)
                snprintf(app->pred_text[i], sizeof app->pred_text[i], "%s", label);
            else
                snprintf(app->pred_text[i], sizeof app->pred_text[i], "class %d", top[i]);
            f->pred_labels[i] = app->pred_text[i];
            f->pred_probs[i] = sc->run.probs[top[i]];
            if (MAP_KINDS[app->view.kind].uses_target && top[i] == view_class(&app->view, sc))
                f->pred_marked = i;
        }
        f->n_preds = k;
        f->pred_title =
            MAP_KINDS[app->view.kind].uses_target ? "top-5: click or 1-5 to explain" : NULL;
    }
    const float *dist = sc->distance; /* computed by the worker (scene_run) */
    if (app->show_distance && dist) {
        int L = c->n_layers, H = c->n_heads;
        float mx = 0.0f, layer_mean = 0.0f;
        for (int i = 0; i < L * H; i++) mx = dist[i] > mx ? dist[i] : mx;
        for (int h = 0; h < H; h++) layer_mean += dist[app->view.layer * H + h] / H;
        f->distance = dist;
        f->dist_layers = L, f->dist_heads = H;
        f->dist_layer = app->view.layer, f->dist_head = app->view.head;
        f->dist_max_px = 20.0f * ceilf(mx / 20.0f + 1e-6f);
        if (app->view.head < H)
            snprintf(app->dist_caption, sizeof app->dist_caption,
                     "layer %d, head %d: %.0f px (layer mean %.0f)", app->view.layer + 1,
                     app->view.head + 1, (double)dist[app->view.layer * H + app->view.head],
                     (double)layer_mean);
        else
            snprintf(app->dist_caption, sizeof app->dist_caption, "layer %d: mean of heads %.0f px",
                     app->view.layer + 1, (double)layer_mean);
        f->dist_caption = app->dist_caption;
    }
}

/* Overview layout and labels. */
static void app_overview_frame(App *app, RenFrame *f) {
    const VitConfig *c = &app->model->vit.cfg;
    int H = c->n_heads, K = H + VIEW_N_FUSIONS, L = c->n_layers;
    for (int k = 0; k < K; k++) {
        if (k < H)
            snprintf(app->cell_labels[k], sizeof app->cell_labels[k], "head %d", k + 1);
        else
            snprintf(app->cell_labels[k], sizeof app->cell_labels[k], "%s",
                     vit_fusion_name((VitFusion)(k - H)));
        app->cell_label_ptrs[k] = app->cell_labels[k];
        app->row_ptrs[k] = app->cell_labels[k];
    }
    if (app->overview == OV_HEADS) {
        /* the most columns that keep the thumbnails largest in a 4:3-ish area */
        f->n_cols = (int)ceil(sqrt((double)K * 1.2));
        f->n_rows = (K + f->n_cols - 1) / f->n_cols;
        f->col_stride = 1, f->row_stride = f->n_cols;
        f->selected = app->view.head;
        f->cell_labels = app->cell_label_ptrs;
    } else {
        for (int l = 0; l < L; l++) {
            snprintf(app->col_text[l], sizeof app->col_text[l], "%d", l + 1);
            app->col_ptrs[l] = app->col_text[l];
        }
        f->n_cols = L, f->n_rows = K;
        f->col_stride = K, f->row_stride = 1;
        f->selected = app->view.layer * K + app->view.head;
        f->col_labels = app->col_ptrs;
        f->row_labels = app->row_ptrs;
    }
}

/* The current map's value under the mouse: at the map's resolution, the patch's
 * for a patch map (as ren_patch_at finds it), the input pixel's for a pixel map. */
static float app_hover_value(const App *app) {
    const Ren *r = &app->ren;
    int w = r->image_w_px > 0 ? r->image_w_px : 1, h = r->image_h_px > 0 ? r->image_h_px : 1;
    int x = (int)((long)((int)app->mouse_x - r->image_x) * app->map_w / w);
    int y = (int)((long)((int)app->mouse_y - r->image_y) * app->map_h / h);
    x = x < 0 ? 0 : x >= app->map_w ? app->map_w - 1 : x;
    y = y < 0 ? 0 : y >= app->map_h ? app->map_h - 1 : y;
    if (MAP_KINDS[app->shown_kind >= 0 ? app->shown_kind : 0].rgb) /* 1 foreground, 0 not */
        return app->map[((size_t)y * app->map_w + x) * 4 + 3];
    return app->map[y * app->map_w + x];
}

/* S: the frame as drawn, as a PNG named after the view. */
static void app_save(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc) {
        snprintf(app->notice, sizeof app->notice, "nothing to save yet");
        return;
    }
    char name[512], path[1600], msg[2000];
    View v = app->view;
    v.target = view_class(&v, sc); /* the class in the name, not "top-1" */
    view_file_name(name, sizeof name, sc->name, app->model->name, &v, &app->model->vit.cfg,
                   app->overview == OV_TABLE   ? "table"
                   : app->overview == OV_HEADS ? "heads"
                                               : NULL);
    snprintf(path, sizeof path, "%s/%s", app->opt->save_dir ? app->opt->save_dir : ".", name);
    int w, h;
    uint8_t *rgb = ren_read_rgb(&app->ren, &w, &h);
    if (!rgb) {
        app_set_error(app, "out of memory for the screenshot");
        return;
    }
    if (export_png(path, rgb, w, h, msg, sizeof msg)) {
        app_set_error(app, msg);
    } else {
        app->saves++;
        snprintf(app->notice, sizeof app->notice, "saved %s", name);
        printf("saved %s\n", path);
    }
    free(rgb);
}

static void app_draw(App *app) {
    app_update_status(app);
    int qr = -1, qc = -1; /* the query box, for a kind whose map reads the query */
    if (MAP_KINDS[app->view.kind].uses_query) app_query_patch(app, &qr, &qc);
    RenFrame f = {
        .overlay = app->overlay,
        .grid = app->grid,
        .help = app->help,
        .busy = app->busy,
        .opacity = app->opacity,
        .status_left = app->status_left,
        .status_right = app->status_right,
        .error = app->error[0] ? app->error : NULL,
        .placeholder = app->busy ? "loading\xe2\x80\xa6" : "drop a photo here",
        .help_rows = app->keys.rows,
        .n_help = app->keys.n,
        .spinner_turns = (float)(SDL_GetTicks() % 1000u) / 1000.0f,
        .mode = app->overview == OV_TABLE   ? REN_TABLE
                : app->overview == OV_HEADS ? REN_HEADS
                                            : REN_SINGLE,
        .bilinear = app->bilinear,
        .query_row = qr,
        .query_col = qc,
        .mask = (app->show_mask && !MAP_KINDS[app->view.kind].rgb) ||
                (app->view.kind == MAP_TOKEN_NORMS && app->shown_kind == MAP_TOKEN_NORMS &&
                 app->n_high_norm > 0),
        .rgb = MAP_KINDS[app->view.kind].rgb && app->shown_kind == app->view.kind,
        .n_list = app->n_list,
        .list_title = app->list_title,
        .list_labels = app->list_labels,
        .list_values = app->list_values,
        .list_right = app->list_right,
        .list_marked = app->list_marked,
        .legend_hi = app->legend_hi,
        .legend_lo = app->legend_lo,
        .legend_caption = app->legend_caption,
        .selected = -1,
        .pred_marked = -1,
        .n_prefix = app->has_scene && app->has_prefix ? app_scene(app)->run.cfg.n_prefix : 0,
        .prefix_share = app->prefix_share,
        .prefix_names = app->prefix_names,
    };
    if (app->overview) app_overview_frame(app, &f);
    app_panels(app, &f);
    if (app->pert.phase != PERT_OFF && app->has_scene) app_perturb_frame(app, &f);
    const Scene *sc = app_scene(app);
    if (sc && app->hover_row >= 0 && !app->overview && app->map_w > 0) {
        snprintf(app->tooltip, sizeof app->tooltip, "row %d, col %d  \xc2\xb7  %.3g",
                 app->hover_row + 1, app->hover_col + 1, (double)app_hover_value(app));
        f.tooltip = app->tooltip;
    } else if (sc && app->hover_cell >= 0 && app->overview) {
        int K = sc->run.cfg.n_heads + VIEW_N_FUSIONS;
        int l = app->overview == OV_TABLE ? app->hover_cell / K : app->view.layer;
        int k = app->overview == OV_TABLE ? app->hover_cell % K : app->hover_cell;
        snprintf(app->tooltip, sizeof app->tooltip, "layer %d  \xc2\xb7  %s", l + 1,
                 app->cell_labels[k]);
        f.tooltip = app->tooltip;
    }
    f.tip_x = app->mouse_x, f.tip_y = app->mouse_y;
    Uint64 t0 = SDL_GetPerformanceCounter();
    ren_draw(&app->ren, &f);
    Uint64 t1 = SDL_GetPerformanceCounter();
    if (app->trace) glFinish(); /* for the trace's times: the rasterising apart */
    Uint64 t2 = SDL_GetPerformanceCounter();
    if (app->save_pending) {
        app->save_pending = 0;
        app_save(app);
        if (app->notice[0]) { /* show "saved" at once, without the notice in the file */
            app_update_status(app);
            ren_draw(&app->ren, &f);
        }
    }
    int again = ren_present(&app->ren);
    app->frames++;
    if (app->trace || app->announce) glFinish(); /* the frame is on screen before we say so */
    Uint64 t3 = SDL_GetPerformanceCounter();
    if (app->announce && app->has_scene) {
        startup_mark(app, "first-map-frame");
        printf("ready %s\n", app_scene(app)->path);
        app->announce = 0;
    }
    if (app->trace) {
        const Ren *r = &app->ren;
        /* the prefix tokens' share of the view's row: "CLS:0.1234,reg1:0.0567" */
        char prefix[VIT_MAX_PREFIX * 20] = "-";
        for (int i = 0, k = 0; sc && app->has_prefix && i < sc->run.cfg.n_prefix; i++)
            k += snprintf(prefix + k, sizeof prefix - (size_t)k, "%s%s:%.4f", i ? "," : "",
                          app->prefix_name[i], (double)app->prefix_share[i]);
        /* rollout= stays for bench/app_latency.py; kind= is the view's kind (its file tag) */
        printf("frame %lu layer=%d head=%d rollout=%d kind=%s target=%d discard=%.2f overlay=%d "
               "opacity=%.2f grid=%d "
               "help=%d busy=%d loads=%lu scene=%d error=%d image=%d,%d,%d image_h=%d prefix=%s "
               "window=%d,%d query=%d overview=%d colormap=%s scale=%s bilinear=%d mask=%d "
               "fraction=%d kept=%d preds=%d distance=%d hover=%d,%d cell=%d fullscreen=%d "
               "image_at=%d saves=%lu cells=%d,%d,%d,%d,%d,%d panel=%d,%d class=%d explained=%d "
               "shown=%s marked=%d joint=%d list=%d listmark=%d highnorm=%d picking=%d listw=%d ",
               app->frames, app->view.layer, app->view.head, app->view.kind == MAP_ROLLOUT,
               MAP_KINDS[app->view.kind].tag, app->view.target, (double)app->view.discard_ratio,
               app->overlay, (double)app->opacity, app->grid, app->help, app->busy, app->loads,
               app->has_scene, app->error[0] != 0, r->image_x, r->image_y, r->image_w_px,
               r->image_h_px, prefix, r->fb_w, r->fb_h, app->view.query, app->overview,
               colormap_names[app->colormap], app->shared_scale ? "layer" : "map", app->bilinear,
               app->show_mask, app->mask_pct, app->mask_kept, f.n_preds, f.distance != NULL,
               app->hover_row, app->hover_col, app->hover_cell, app->fullscreen, app->image_at,
               app->saves, r->cells_x, r->cells_y, r->cell_w_px, r->cell_h_px, r->cell_step_x,
               r->cell_step_y, r->panel_x, r->panel_w, sc ? view_class(&app->view, sc) : -1,
               sc ? sc->expl_target : -1,
               app->shown_kind >= 0 ? MAP_KINDS[app->shown_kind].tag : "none", f.pred_marked,
               app->view.joint, app->n_list, app->list_marked, app->n_high_norm, app->picking,
               r->list_w);
        /* the perturbation test: its order, phase, step, the probability there, the plot */
        const Perturbation *p = &app->pert.run;
        int on = app->pert.phase >= PERT_PLAYING && p->probs && app->pert.step >= 0;
        /* where the frame's time went, ms: from the first key or click handled since the
         * last frame (its action, the map's update), recording the primitives and issuing
         * the draws, rasterising them, copying to the window and the swap */
        double ms = 1e3 / (double)SDL_GetPerformanceFrequency();
        /* settled=0: a new window size shown with a swap of the old back buffer (see
         * ren_present); the frame that shows this state follows at once */
        printf("redraw=%d redraw_px=%ld mismatch=%ld settled=%d ms_input=%.2f ms_draw=%.2f "
               "ms_raster=%.2f ms_swap=%.2f ",
               r->last_rects, r->last_px, r->last_mismatch, !again,
               app->t_input ? (double)(t3 - app->t_input) * ms : -1.0, (double)(t1 - t0) * ms,
               (double)(t2 - t1) * ms, (double)(t3 - t2) * ms);
        app->t_input = 0;
        printf("perturb=%s pphase=%s pstep=%d/%d pprob=%.6f premoved=%d plot=%d,%d,%d,%d\n",
               app->pert.phase == PERT_OFF ? "off"
               : app->pert.most_first      ? "positive"
                                           : "negative",
               PERT_PHASE_NAMES[app->pert.phase], on ? app->pert.step : 0, on ? p->n_steps : 0,
               on ? (double)p->probs[app->pert.step] : -1.0,
               on ? vit_perturb_count(app->pert.step, p->n_steps, p->n_patches) : 0, r->plot_x,
               r->plot_y, r->plot_w, r->plot_h);
        printf("status %s | %s\n", app->status_left, app->status_right);
        if (app->pert.announce && app->pert.phase == PERT_DONE) app_perturb_trace(app);
        app->pert.announce = 0;
    }
    fflush(stdout);
    app->again = again;
}

/* ---------------------------------------------------------------------------
 * Init, loop, shutdown */

/* --stdin-drops: each line of stdin becomes an SDL_DROPFILE event, handled as a real drop. */
static int stdin_drops(void *unused) {
    (void)unused;
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        SDL_Event e;
        SDL_zero(e);
        e.type = SDL_DROPFILE;
        e.drop.file = SDL_strdup(line);
        if (e.drop.file && SDL_PushEvent(&e) != 1) SDL_free(e.drop.file);
    }
    return 0;
}

static int app_init(App *app, const Options *o) {
    memset(app, 0, sizeof *app);
    app->opt = o;
    for (int i = 0; i < 2; i++) {
        app->scenes[i].ignore_orientation = o->ignore_orientation;
        app->scenes[i].att = o->att;
        app->scenes[i].control = &app->worker.control; /* the worker's jobs stop early */
    }
    app->overlay = 1;
    app->opacity = o->opacity;
    app->colormap = o->colormap;
    app->bilinear = o->bilinear;
    app->mask_pct = 60; /* DINO's figures */
    app->show_preds = o->settings.show_preds >= 0 ? o->settings.show_preds : 1;
    app->show_distance = o->settings.show_distance > 0;
    snprintf(app->notice, sizeof app->notice, "%s", o->settings_msg); /* read problems */
    snprintf(app->model_path, sizeof app->model_path, "%s", o->model_path);
    snprintf(app->labels_path, sizeof app->labels_path, "%s", o->labels_path ? o->labels_path : "");
    app->hover_row = app->hover_col = app->hover_cell = -1;
    app->cursor_row = -1;
    if (o->n_image_args > 0) {
        char msg[1200];
        if (files_expand(&app->images, &app->n_images, o->image_args, o->n_image_args, msg,
                         sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
    }
    const char *trace = getenv("VITLENS_TRACE");
    app->trace = trace && *trace && strcmp(trace, "0") != 0;
    startup_mark(app, "init");
    text_lookup_start(); /* fontconfig's lookup meanwhile */

    VitError err;
    app->model = calloc(1, sizeof *app->model);
    if (!app->model) {
        fprintf(stderr, "vitlens: out of memory\n");
        return -1;
    }
    if (model_load(app->model, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return -1;
    }
    startup_mark(app, "model");
    const VitConfig *c = &app->model->vit.cfg;
    app->view = (View){.kind = MAP_ATTENTION,
                       .layer = c->n_layers - 1,
                       .head = c->n_heads + VIT_FUSE_MEAN,
                       .discard_ratio = o->discard,
                       .target = VIEW_TOP1};
    app->class_kind = MAP_CHEFER, app->shown_kind = -1;
    if (o->class_arg) { /* --class: open on the first class-specific map, for that class */
        char msg[600];
        if (model_find_class(app->model, o->class_arg, &app->view.target, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
        app->view.kind = app->class_kind;
    }
    keys_list(&app->keys);

    /* The photo's forward pass starts first, on the worker thread, and runs while the
     * window and its OpenGL context are made (a few hundred ms under Xvfb's software
     * OpenGL): launch -> first heatmap is the longer of the two, not their sum. */
    if (SDL_Init(SDL_INIT_EVENTS) != 0) {
        fprintf(stderr, "vitlens: SDL_Init: %s\n", SDL_GetError());
        return -1;
    }
    app->ev_done = SDL_RegisterEvents(1);
    if (app->ev_done == (Uint32)-1 || worker_init(&app->worker, app->ev_done)) {
        fprintf(stderr, "vitlens: cannot start the worker thread: %s\n", SDL_GetError());
        return -1;
    }
    if (app->n_images > 0)
        app_open(app, app->images[0]);
    else if (o->image_path)
        app_open(app, o->image_path);
    startup_mark(app, "worker");
    /* Without a display (an SSH session) SDL falls back to its offscreen driver, whose
     * window nobody sees: say so at once rather than wait invisibly. SDL_VIDEODRIVER set
     * by hand (offscreen on purpose) is the user's choice. */
    const char *asked = SDL_getenv("SDL_VIDEODRIVER");
    if (SDL_InitSubSystem(SDL_INIT_VIDEO) != 0 ||
        (!(asked && asked[0]) && SDL_GetCurrentVideoDriver() &&
         (!strcmp(SDL_GetCurrentVideoDriver(), "offscreen") ||
          !strcmp(SDL_GetCurrentVideoDriver(), "dummy")))) {
        const char *drv = SDL_GetCurrentVideoDriver();
        fprintf(stderr,
                "vitlens: no display to open a window on (%s%s; DISPLAY and WAYLAND_DISPLAY "
                "are %s)\n"
                "vitlens: without a window: --top K IMAGE prints the predictions, --export DIR "
                "IMAGE writes every map as PNG (see --help)\n",
                drv ? "SDL's video driver: " : "", drv ? drv : SDL_GetError(),
                SDL_getenv("DISPLAY") || SDL_getenv("WAYLAND_DISPLAY") ? "set" : "not set");
        return -1;
    }
    startup_mark(app, "video");
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MAJOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MINOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_PROFILE_MASK, SDL_GL_CONTEXT_PROFILE_CORE);
    SDL_GL_SetAttribute(SDL_GL_DOUBLEBUFFER, 1);

    /* Square crop + status bar + room for the legend and the side panel (predictions,
     * attention distance); fits the usable display. */
    int h = 860;
    SDL_Rect usable;
    int has_usable = SDL_GetDisplayUsableBounds(0, &usable) == 0 && usable.h > 0;
    if (has_usable && usable.h * 0.88 < h) h = (int)(usable.h * 0.88);
    int w = (int)(h * 1.45f);
    if (has_usable && w > usable.w * 0.95) w = (int)(usable.w * 0.95);
    app->win =
        SDL_CreateWindow("vitlens", SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h,
                         SDL_WINDOW_OPENGL | SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!app->win) {
        fprintf(stderr, "vitlens: cannot open a window: %s\n", SDL_GetError());
        return -1;
    }
    SDL_SetWindowMinimumSize(app->win, 320, 320);
    startup_mark(app, "window");
    if (!(app->gl = SDL_GL_CreateContext(app->win))) {
        fprintf(stderr, "vitlens: cannot create an OpenGL 3.3 core context: %s\n", SDL_GetError());
        return -1;
    }
    if (SDL_GL_SetSwapInterval(1) != 0) SDL_ClearError(); /* no vsync is fine */
    startup_mark(app, "context");

    char msg[4096], warn[1024];
    if (ren_init(&app->ren, app->win, msg, sizeof msg, warn, sizeof warn)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        if (SDL_ShowSimpleMessageBox(SDL_MESSAGEBOX_ERROR, "vitlens: cannot start", msg, app->win))
            fprintf(stderr, "vitlens: (no dialog: %s)\n", SDL_GetError());
        return -1;
    }
    if (warn[0]) fprintf(stderr, "vitlens: %s (running without text)\n", warn);
    startup_mark(app, "renderer");

    if (o->stdin_drops) {
        SDL_Thread *t = SDL_CreateThread(stdin_drops, "vitlens-stdin", NULL);
        if (!t) {
            fprintf(stderr, "vitlens: cannot start the stdin reader: %s\n", SDL_GetError());
            return -1;
        }
        SDL_DetachThread(t); /* blocks in fgets; ends with the process */
    }
    SDL_EventState(SDL_DROPFILE, SDL_ENABLE);
    ren_set_colormap(&app->ren, app->colormap);
    app->running = 1;
    app->dirty = 1;
    return 0;
}

/* On quit: what the window shows, for the next run (settings.h); the built-in model is
 * not remembered, so that a run without --model stays on it. */
static void app_save_settings(const App *app) {
    const Options *o = app->opt;
    if (!o->settings_path[0]) return;
    Settings s = o->settings; /* keeps what this run did not change */
    s.colormap = app->colormap, s.opacity = app->opacity, s.bilinear = app->bilinear;
    s.show_preds = app->show_preds, s.show_distance = app->show_distance;
    int builtin = o->default_model[0] && !strcmp(app->model_path, o->default_model);
    settings_set_model(&s, builtin ? NULL : app->model_path, app->labels_path);
    char msg[1600];
    if (settings_save(&s, o->settings_path, msg, sizeof msg))
        fprintf(stderr, "vitlens: settings not saved: %s\n", msg);
}

static void app_free(App *app) {
    worker_free(&app->worker);         /* first: it may still be using the model and a scene */
    perturbation_drop(&app->pert.job); /* a result the window never received */
    perturbation_drop(&app->pert.queued);
    perturbation_free(&app->pert.run);
    perturbation_free(&app->pert.ghost);
    free(app->pert.removed);
    if (app->gl) ren_free(&app->ren);
    scene_free(&app->scenes[0]);
    scene_free(&app->scenes[1]);
    free(app->map);
    free(app->map_norm);
    free(app->mask);
    free(app->atlas);
    free(app->vm.map);
    free(app->vm.norm);
    free(app->vm.atlas);
    files_free_list(app->images, app->n_images);
    joint_features_free(&app->joint);
    free(app->joint.paths);
    if (app->model) model_free(app->model);
    free(app->model);
    text_lookup_end();
    if (app->gl) SDL_GL_DeleteContext(app->gl);
    if (app->win) SDL_DestroyWindow(app->win);
    SDL_Quit();
}

int main(int argc, char **argv) {
    t_main = SDL_GetPerformanceCounter();
    Options o;
    int rc = options_parse(&o, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (o.eval_merge) return eval_merge(&o); /* reads folders only: no model, no settings */
    int headless = o.top_k || o.export_dir || o.eval;
    settings_apply(&o, !headless); /* read only: the headless modes never write them */
    if (headless && o.settings_msg[0]) fprintf(stderr, "vitlens: %s\n", o.settings_msg);
    if (options_default_model(&o)) return 1;
    if (o.eval) return eval_run(&o);
    if (headless) return run_headless(&o);

    static App app; /* large (two scenes' paths); static keeps it off the stack */
    if (app_init(&app, &o)) {
        app_free(&app);
        return 1;
    }
    while (app.running) {
        SDL_Event e;
        /* idle: sleep in SDL_WaitEventTimeout; busy: wake up to turn the spinner */
        int wait = app.busy ? 50 : 250;
        if (app.pert.phase == PERT_PLAYING && app_perturb_wait_ms(&app) < wait)
            wait = app_perturb_wait_ms(&app); /* the animation's next step */
        /* idle with shaders left to build ahead: build one, between events */
        int warm = !app.dirty && !app.busy && app.has_scene && app.ren.warm_next >= 0;
        int got = app.dirty || warm ? SDL_PollEvent(&e) : SDL_WaitEventTimeout(&e, wait);
        if (!got && warm && !ren_warm_step(&app.ren)) app.ren.warm_next = -1;
        if (!got && app.busy) app.dirty = 1; /* timed out while working: turn the spinner */
        for (; got; got = SDL_PollEvent(&e)) app_handle_event(&app, &e);
        app_perturb_tick(&app);
        if (app.dirty && app.running) {
            app_draw(&app);
            app.dirty = app.again; /* the window's size changed: a whole frame follows */
        }
    }
    app_save_settings(&app);
    app_free(&app);
    return 0;
}
