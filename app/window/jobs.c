/* jobs.c - photos and models opened on the worker thread, and the worker's results.
 *
 * app_open hands a photo (or a model: .safetensors, .pth, which the photo then runs through) to
 * the worker, or keeps it pending while a job runs; app_job_done takes the worker's
 * event: a new Scene swapped in front, a new model in place of the old one, the
 * class-specific or worker maps shown, a view job's maps uploaded, an error on the
 * error line; then the pending photo, or the perturbation test asked for meanwhile. */
#include "window/app.h"
#include "window/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- opening -------------------------------------------------------------------- */

/* Does s end with suffix, ignoring ASCII case ("MODEL.SafeTensors" is a model too)? */
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && SDL_strcasecmp(s + n - k, suffix) == 0;
}

/* A weights file: .safetensors, or a PyTorch checkpoint (.pth, .pt, Hugging Face's .bin). */
static int is_model(const char *path) {
    return ends_with(path, ".safetensors") || ends_with(path, ".pth") || ends_with(path, ".pt") ||
           ends_with(path, ".bin");
}

void app_compare_drop(App *app, const char *path) {
    if (is_model(path))
        app_compare_open(app, path, NULL, NULL);
    else
        app_compare_open(app, NULL, NULL, path);
}

/* The worker on path's photo, or on a model (path a weights file) that the photo on screen
 * then runs through (a video's frame: its pixels), or (rgb non-NULL) on a video's frame named
 * path: into the back Scene, while the front one stays on screen. The worker is idle. */
static void start_job(App *app, const char *path, const uint8_t *rgb, int w, int h) {
    /* the worker fills the back Scene while the front one stays on screen; the first photo
     * has no front yet, so it goes into scenes[front] */
    const Scene *sc = app_scene(app);
    int bi = app->has_scene ? !app->front : app->front;
    Scene *back = &app->scenes[bi];
    /* the interventions as asked now, for the back Scene only (checked when asked:
     * interv_apply); a model of other shapes runs without them (interv_for) */
    char msg[600];
    if (!interv_any(&app->iv_spec) ||
        interv_build(&app->interv[bi], &app->iv_spec, &app->model->vit.cfg, msg, sizeof msg))
        interv_free(&app->interv[bi]);
    /* the same photo again (an intervention changed): the unchanged model's probabilities
     * are the ones on screen, its +/- need no second forward pass */
    back->plain_given = 0;
    /* a video's frame (or the frame on screen through a new model): the feature PCA's colours
     * on the basis held over the video's frames */
    const Live *live = &app->live;
    int frame = rgb || (live->on && live->job_rgb && is_model(path));
    back->pca_hold = frame ? &app->pca_hold : NULL;
    back->frame = frame ? live->job_index : -1;
    int C = app->model->vit.cfg.n_classes;
    if (sc && sc != back && C > 0 && sc->vit == &app->model->vit && !strcmp(sc->path, path) &&
        sc->run.cfg.n_classes == C && /* a CLIP head of another size: not its probabilities */
        !ends_with(path, ".safetensors")) {
        const float *pp = sc->has_plain           ? sc->plain_probs
                          : !sc->run.intervention ? sc->run.probs
                                                  : NULL;
        float *dst = pp ? realloc(back->plain_probs, (size_t)C * sizeof *dst) : NULL;
        if (dst) {
            memcpy(dst, pp, (size_t)C * sizeof *dst);
            back->plain_probs = dst, back->plain_given = 1;
        }
    }
    const Live *lv = &app->live;
    /* a model reruns the photo on screen, so the window shows the new model at once (a
     * video's: the frame it shows, whose file name is not a photo's) */
    if (is_model(path)) {
        const char *labels = app->next_labels[0] ? app->next_labels : app->opt->labels_path;
        if (lv->on && lv->job_rgb && sc)
            worker_start_frame(&app->worker, path, &app->opt->load, labels, app->model, lv->job_rgb,
                               lv->job_w, lv->job_h, sc->path, back);
        else
            worker_start(&app->worker, path, &app->opt->load, labels, app->model,
                         sc ? sc->path : NULL, back);
        app->next_labels[0] = '\0';
    } else if (rgb) {
        worker_start_frame(&app->worker, NULL, NULL, NULL, app->model, rgb, w, h, path, back);
    } else
        worker_start(&app->worker, NULL, NULL, NULL, app->model, path, back);
    app->busy = 1;
    app->dirty = 1;
}

void app_open_frame(App *app, const char *name, const uint8_t *rgb, int w, int h) {
    if (!app->busy) start_job(app, name, rgb, w, h);
}

void app_open(App *app, const char *path) {
    const Scene *sc = app_scene(app);
    if (!is_model(path)) {
        if (media_is_video(path)) { /* a video file or stream: its frames, as they come */
            app_live_open(app, MEDIA_FILE, path);
            return;
        }
        if (app->live.on && sc && !strcmp(path, sc->path)) { /* the frame on screen again */
            app->live.rerun = 1;
            app_live_feed(app);
            return;
        }
        app_live_close(app); /* a photo ends the video */
        snprintf(app->photo, sizeof app->photo, "%s", path);
    }
    if (app->busy) {
        snprintf(app->pending, sizeof app->pending, "%s", path);
        /* a newer photo makes the running view job, worker map or photo's forward pass
         * useless: stopped, it ends at once and the pending photo starts (app_job_done) */
        const Worker *w = &app->worker;
        if (w->maps || w->slow ||
            (!w->explain && !w->perturb && !w->model_path[0] && !is_model(path)))
            worker_cancel(&app->worker);
        return;
    }
    start_job(app, path, NULL, 0, 0);
}

/* --- results ---------------------------------------------------------------------- */

/* Buffers sized by the scene's shapes: the largest map of any kind. 0, or -1 out of
 * memory (a buffer that did grow is kept: freed with the App). */
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
    /* a grid of another size: the keyboard cursor restarts at its centre */
    if (app->cursor_row >= c->grid_h || app->cursor_col >= c->grid_w || app->cursor_row < 0)
        app->cursor_row = c->grid_h / 2, app->cursor_col = c->grid_w / 2;
    return 0;
}

/* A photo dropped while the worker was busy: opened now. Returns 1 when there was one. */
static int open_pending(App *app) {
    if (!app->pending[0]) return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s", app->pending);
    app->pending[0] = '\0';
    app_open(app, path);
    return 1;
}

/* A job on the front Scene is done (perturbation, class-specific, worker or view maps):
 * its buffers swapped in or its error shown, then what the view asks next. */
static void scene_job_done(App *app, Worker *w) {
    if (w->perturb) {
        app_perturb_done(app);
    } else if (w->status == VIT_ERR_CANCELLED) { /* asked again below, if still wanted */
    } else if (w->status != VIT_OK) {            /* class-specific, worker or view maps */
        app_set_error(app, w->err.msg);
        if (w->maps && app->announce_maps) /* the photo is on screen, if not its maps */
            app->announce = 1, app->announce_maps = 0;
        if (!w->maps) { /* back to the kind on screen: asking again would fail again */
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
    if (open_pending(app)) return; /* a photo dropped meanwhile goes first */
    if (w->maps && w->status != VIT_ERR_CANCELLED && app_maps_current(app, w->maps))
        return;          /* done (or failed: the error shows, asking again would fail again) */
    app_update_map(app); /* or asks for the next class if the view moved on */
}

/* The worker loaded a model: it replaces the app's (the worker is idle: nothing reads the
 * old one any more). */
static void swap_model(App *app, Worker *w) {
    Model *old = app->model;
    app->model = w->new_model;
    w->new_model = NULL;
    snprintf(app->model_path, sizeof app->model_path, "%s", w->model_path);
    snprintf(app->labels_path, sizeof app->labels_path, "%s", w->labels_path);
    if (w->text_msg[0]) snprintf(app->notice, sizeof app->notice, "%s", w->text_msg);
    if (!app_classes_retire(app, old)) { /* else freed once the texter lets go of it */
        model_free(old);
        free(old);
    }
    app_classes_start(app);           /* the new model's classes' texts */
    joint_features_free(&app->joint); /* of the old model */
    view_clamp(&app->view, &app->model->vit.cfg);
    app_compare_model_changed(app); /* a second photo's pane B: through the new model */
}

/* A new Scene on screen: its buffers, its image, its map, the lesson's picture. */
static void show_scene(App *app, const Scene *sc) {
    if (app_scene_buffers(app, sc)) {
        app_set_error(app, "out of memory for the maps");
        app->has_scene = 0;
        return;
    }
    trace_startup(app, "scene");
    ren_upload_image(&app->ren, sc->crop_rgb, sc->crop_w_px, sc->crop_h_px);
    app_update_map(app);
    if (app->opt->lesson_path && !app->lesson.loaded)
        app_lesson_open(app); /* --lesson */
    else
        app_lesson_show(app); /* in the lesson view: its picture of the new photo */
    if (app->live.on && app->worker.rgb && app->live.n_shown > 1) /* a video's next frame */
        return;                                                   /* said once */
    if (app->busy && app->worker.maps) /* "ready" once its maps are on screen */
        app->announce_maps = 1;
    else
        app->announce = 1;
}

/* A model or photo job is done: the new model and Scene swapped in, or its error shown. */
static void load_job_done(App *app, Worker *w) {
    app->loads++; /* a model or photo job: the cached atlas (atlas_of.loads) is stale */
    if (w->status == VIT_ERR_CANCELLED) { /* a newer photo: pending, opened below */
    } else if (w->status != VIT_OK) {
        app_set_error(app, w->err.msg);
    } else {
        if (w->ran || w->new_model) /* another photo or model: not the test's map */
            app_perturb_stop(app);
        if (w->new_model) swap_model(app, w);
        if (w->ran) {
            if (app->has_scene) app->front = !app->front;
            app->has_scene = 1;
            if (w->rgb && app->live.on) app_live_shown(app); /* a video's frame */
        }
        app_score_sync(app);  /* --contrast on a new model, --similar's e_A of a new photo */
        app->error[0] = '\0'; /* before the lesson view, which may report its script's lines */
        const Scene *sc = app_scene(app);
        if (w->ran) /* when the worker had the Scene; "scene": when the GUI thread took it */
            trace_startup_at(app, "scene-ready", w->t_done);
        if (sc) show_scene(app, sc);
        if (w->ran) app_compare_photo_changed(app); /* the second model runs it too */
    }
    app->dirty = 1;
    open_pending(app);
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
    if (w->compare || ((w->explain || w->slow) && w->scene == &app->cmp.scene)) {
        app_compare_done(app); /* pane B's model, photo or maps */
        if (!app->busy) open_pending(app);
        if (!app->busy) app_update_map(app); /* pane A's maps asked for meanwhile */
    } else if (w->lesson) { /* the lesson's block: its picture, at the newest selection */
        app_lesson_job_done(app);
        if (!app->busy) open_pending(app);
    } else if (w->phrase) { /* CLIP: the phrase's embedding becomes the head */
        app_phrase_done(app);
        app->dirty = 1;
        if (!app->busy) open_pending(app);
    } else if (w->perturb || w->explain || w->slow || w->maps) { /* a job on the front Scene */
        scene_job_done(app, w);
    } else {
        load_job_done(app, w);
    }
}

/* The worker's event: its result first, then a perturbation test that waited for the
 * worker, unless the result started another job. */
void app_job_done(App *app) {
    app_job_result(app);
    if (!app->busy) app_classes_idle(app); /* classes that waited for the worker: the head */
    /* a step asked for while the worker was busy: drawn now */
    if (app->lesson.on && !app->lesson.shown && !app->busy) app_lesson_show(app);
    if (!app->busy && app->queued_phrase[0]) { /* Enter pressed while the worker was busy */
        char phrase[CLIP_TEXT_BYTES];
        snprintf(phrase, sizeof phrase, "%s", app->queued_phrase);
        app_phrase_start(app, phrase);
    }
    if (!app->busy) app_compare_start_queued(app); /* pane B, asked while busy */
    if (!app->busy && app->score.pending && app_score_sync(app)) app_update_map(app);
    if (!app->busy && app->pert.queued) {
        Perturbation *p = app->pert.queued;
        app->pert.queued = NULL;
        app_perturb_start(app, p);
    }
    app_live_feed(app); /* idle: a video's newest frame */
}
