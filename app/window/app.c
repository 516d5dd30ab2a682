/* app.c - the App's state: made from the options and the remembered settings (the
 * model loaded, the first photo handed to the worker, then the window opened), saved
 * on quit (settings.h) and freed; the small reads every file of window/ shares. */
#include "window/app.h"
#include "config/files.h"
#include "config/settings.h"
#include "render/text.h"
#include "window/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the small reads every file of window/ shares -------------------------------- */

const Scene *app_scene(const App *app) {
    return app->has_scene ? &app->scenes[app->front] : NULL;
}

void app_set_error(App *app, const char *msg) {
    /* on the error line and on stderr: a user watching a terminal, or a test, sees it too */
    snprintf(app->error, sizeof app->error, "%.590s", msg);
    fprintf(stderr, "vitlens: %s\n", msg);
    app->dirty = 1;
}

int app_query_patch(const App *app, int *row, int *col) {
    const VitConfig *c = &app->model->vit.cfg;
    if (app->view.query < c->n_prefix) return 0;
    int p = app->view.query - c->n_prefix;
    *row = p / c->grid_w, *col = p % c->grid_w;
    return 1;
}

void app_class_name(char *buf, size_t n, const App *app, int cls) {
    const char *label = model_label(app->model, cls);
    if (label)
        snprintf(buf, n, "%.*s", (int)strcspn(label, ","), label); /* "tabby", not "tabby, ..." */
    else
        snprintf(buf, n, "class %d", cls);
}

/* --- start-up: state, model, worker, window ----------------------------------------- */

/* The App's fields from the options and the remembered settings; the command line's
 * images expanded (folders into their photos). 0, or -1 with a message on stderr. */
static int app_init_state(App *app, const Options *o) {
    memset(app, 0, sizeof *app);
    app->opt = o;
    for (int i = 0; i < 2; i++) {
        app->scenes[i].ignore_orientation = o->ignore_orientation;
        app->scenes[i].att = o->att;
        app->scenes[i].control = &app->worker.control; /* the worker's jobs stop early */
        app->scenes[i].interv = &app->interv[i];
        app->scenes[i].want_plain = 1; /* the top-5's +/- under interventions */
    }
    app->overlay = 1;
    app->opacity = o->opacity;
    app->colormap = o->colormap;
    app->bilinear = o->bilinear;
    app->mask_pct = 60; /* DINO's figures */
    app->show_preds = o->settings.show_preds >= 0 ? o->settings.show_preds : 1;
    app->show_distance = o->settings.show_distance > 0;
    app->show_controls = o->settings.show_controls != 0; /* on unless the settings say off */
    app->ctrl_hover = app->ctrl_pressed = app->menu_hover = -1;
    snprintf(app->notice, sizeof app->notice, "%s", o->settings_msg); /* read problems */
    snprintf(app->model_path, sizeof app->model_path, "%s", o->model_path);
    snprintf(app->labels_path, sizeof app->labels_path, "%s", o->labels_path ? o->labels_path : "");
    app->hover_row = app->hover_col = app->hover_cell = -1;
    app->cursor_row = -1; /* no cursor yet: the first grid centres it (app_scene_buffers) */
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
    return 0;
}

/* The model (--model, the last one or the built-in one) and the first view: the last
 * layer, the mean of the heads, attention; with --class, the first class-specific map
 * for that class. 0, or -1 with a message on stderr. */
static int app_init_model(App *app, const Options *o) {
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
    trace_startup(app, "model");
    char text_msg[1200]; /* CLIP: --classes, --prompts, --text as the head */
    /* --classes' texts not in the cache: embedded on the second worker once the window is
     * open (classes.c), unless --class or --contrast name a class before */
    ClipSpec spec = o->clip;
    spec.defer = !o->class_arg && !o->contrast_arg;
    if (model_open_text(app->model, &spec, 1, text_msg, sizeof text_msg)) {
        fprintf(stderr, "vitlens: %s\n", text_msg);
        return -1;
    }
    if (app->model->clip && app->model->clip->phrase_truncated)
        fprintf(stderr, "vitlens: --text: cut to %s's %d tokens; the rest is not read\n",
                clip_family(app->model->clip), clip_context(app->model->clip));
    const VitConfig *c = &app->model->vit.cfg;
    app->iv_spec = o->interv;
    if (interv_any(&o->interv)) { /* --ablate, ...: checked against the model */
        char msg[600];
        if (interv_build(&app->interv[0], &o->interv, c, msg, sizeof msg) ||
            interv_build(&app->interv[1], &o->interv, c, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -2;
        }
    }
    app->view = (View){.kind = MAP_ATTENTION,
                       .layer = c->n_layers - 1,
                       .head = c->n_heads + VIT_FUSE_MEAN,
                       .discard_ratio = o->discard,
                       .target = VIEW_TOP1};
    app->shown_kind = -1;                         /* no map on screen yet */
    for (int k = MAP_KIND_COUNT - 1; k >= 0; k--) /* the first class-specific row */
        if (MAP_KINDS[k].group == MAP_GROUP_CLASS) app->class_kind = k;
    if (model_phrase_class(app->model) >= 0) { /* --text: open on its map */
        app->view.target = model_phrase_class(app->model);
        app->view.kind = app->class_kind;
    } else if (o->class_arg) { /* --class: open on the first class-specific map, for that class */
        char msg[600];
        if (model_find_class(app->model, "--class", o->class_arg, &app->view.target, msg,
                             sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
        app->view.kind = app->class_kind;
    }
    return 0;
}

/* The worker thread, and the first photo handed to it at once. 0, or -1. */
static int app_init_worker(App *app, const Options *o) {
    /* The photo's forward pass starts first, on the worker thread, and runs while the
     * window and its OpenGL context are made (a few hundred ms under Xvfb's software
     * OpenGL): launch -> first heatmap is the longer of the two, not their sum. */
    /* the worker's, the video's frame thread's, then the recorder's (recording.c) */
    app->ev_done = SDL_RegisterEvents(3);
    app->ev_live = app->ev_done + 1;
    app->live.shown_index = -1;
    if (app->ev_done == (Uint32)-1 || worker_init(&app->worker, app->ev_done) ||
        worker_init(&app->texter, app->ev_done)) {
        fprintf(stderr, "vitlens: cannot start the worker thread: %s\n", SDL_GetError());
        return -1;
    }
    app->worker.clip = &o->clip; /* a model dropped later gets the command line's classes */
    for (int i = 0; o->start_photo && i < app->n_images; i++) /* where the last run left off */
        if (!strcmp(app->images[i], o->start_photo)) app->image_at = i;
    if (o->camera) /* its frames, as they come (the built-in model's demo not shown) */
        app_live_open(app, MEDIA_CAMERA, o->camera);
    else if (o->start_photo &&
             (!app->n_images || strcmp(app->images[app->image_at], o->start_photo)))
        app_open(app, o->start_photo); /* a photo dropped on it: not in the slideshow */
    else if (app->n_images > 0)
        app_open(app, app->images[app->image_at]);
    else if (o->image_path)
        app_open(app, o->image_path);
    app_classes_start(app); /* --classes' texts, beside the photo's pass */
    trace_startup(app, "worker");
    return 0;
}

int app_init(App *app, const Options *o) {
    if (app_init_state(app, o)) return -1;
    /* SDL's first init, before the app starts any thread: it connects to the D-Bus session
     * bus, and where none is set (DBUS_SESSION_BUS_ADDRESS) libdbus autolaunches one: it
     * forks, and the child calls opendir and malloc before its exec. A fork while another
     * thread holds an allocator lock (fontconfig's lookup, below, allocates all the time)
     * leaves that lock held in the child forever, and the parent waits for the child:
     * seen with ASan's allocator, which has no fork handlers, as a launch that never
     * ended (1 launch in ~10 under load). */
    if (SDL_Init(SDL_INIT_EVENTS) != 0) {
        fprintf(stderr, "vitlens: SDL_Init: %s\n", SDL_GetError());
        return -1;
    }
    trace_startup(app, "init");
    text_lookup_start(); /* fontconfig's lookup meanwhile */
    int rc = app_init_model(app, o);
    if (rc) return rc;
    /* --contrast on the Scenes before the first photo's job; --similar's pane B after it */
    if (app_score_init(app, o->contrast_arg, o->similar_path)) return -1;
    keys_list(&app->keys);
    keys_lesson_list(&app->lesson_keys);
    if (app_init_worker(app, o) || app_open_window(app)) return -1;
    if (o->compare_model || o->compare_image) /* pane B once the first photo is there */
        app_compare_open(app, o->compare_model, NULL, o->compare_image);
    SDL_EventState(SDL_DROPFILE, SDL_ENABLE);
    ren_set_colormap(&app->ren, app->colormap);
    app->running = 1;
    app->dirty = 1;
    return 0;
}

/* --- quitting --------------------------------------------------------------------- */

void app_save_settings(const App *app) {
    const Options *o = app->opt;
    if (!o->settings_path[0]) return;
    Settings s = o->settings; /* keeps what this run did not change */
    s.colormap = app->colormap, s.opacity = app->opacity, s.bilinear = app->bilinear;
    s.show_preds = app->show_preds, s.show_distance = app->show_distance;
    s.show_controls = app->show_controls;
    /* the built-in model is not remembered: with no model in the file, the next start
     * opens on it and its demo scenes anyway */
    int builtin = o->default_model[0] && !strcmp(app->model_path, o->default_model);
    settings_set_model(&s, builtin ? NULL : app->model_path, app->labels_path);
    /* its photos with it, to open where it left off; the built-in model opens on its demo */
    settings_set_photos(&s, o->image_args, builtin ? 0 : o->n_image_args,
                        builtin ? NULL : app->photo);
    char msg[1600];
    if (settings_save(&s, o->settings_path, msg, sizeof msg))
        fprintf(stderr, "vitlens: settings not saved: %s\n", msg);
}

void app_free(App *app) {
    app_record_close(app);     /* a recording's file finished */
    app_live_close(app);       /* a video's frame thread */
    worker_free(&app->worker); /* first: it may still be using the model and a scene */
    worker_free(&app->texter); /* the classes' texts: it reads a model */
    if (app->classes.retired) model_free(app->classes.retired);
    free(app->classes.retired);
    free(app->live.job_rgb);           /* the worker's last frame */
    perturbation_drop(&app->pert.job); /* a result the window never received */
    perturbation_drop(&app->pert.queued);
    perturbation_free(&app->pert.run);
    perturbation_free(&app->pert.ghost);
    free(app->pert.removed);
    if (app->gl) ren_free(&app->ren);
    app_lesson_free(app); /* before the scenes: its block was read from the front one */
    app_compare_free(app);
    free(app->score.e_a), free(app->score.e_b);
    scene_free(&app->scenes[0]);
    scene_free(&app->scenes[1]);
    interv_free(&app->interv[0]);
    interv_free(&app->interv[1]);
    free(app->map);
    free(app->map_norm);
    free(app->mask);
    free(app->atlas);
    free(app->vm.map);
    free(app->vm.norm);
    free(app->vm.atlas);
    files_free_list(app->images, app->n_images);
    joint_features_free(&app->joint);
    pca_hold_free(&app->pca_hold);
    free(app->joint.paths);
    if (app->model) model_free(app->model);
    free(app->model);
    text_lookup_end();
    if (app->gl) SDL_GL_DeleteContext(app->gl);
    if (app->win) SDL_DestroyWindow(app->win);
    SDL_Quit();
}
