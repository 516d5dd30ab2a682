/* classes.c - CLIP's zero-shot classes embedded off the GUI thread (issue 38).
 *
 * --classes imagenet is 7000 texts through the text tower, a minute the first time on two
 * cores. The window opens its model with ClipSpec.defer: the names and templates are read
 * and checked, the head made without them (a phrase alone, or none), and a second Worker
 * (App.texter) embeds them, its progress on the status line, while the first worker runs
 * the photo and every class-agnostic map. Done, the classes are installed in the model's
 * text side and the head remade (model_classes_install) once the first worker is idle (it
 * reads the model), and the photo runs again for the head's new size. A new model cancels
 * the job; the model it reads is kept until the texter lets go of it. */
#include "window/app.h"

#include <stdio.h>
#include <stdlib.h>

/* Classes of m waiting to be embedded? */
static int pending(const Model *m) {
    return m && m->clip && m->clip->pending;
}

void app_classes_start(App *app) {
    if (app->classes.busy) { /* an older model's job: stopped first, then this one */
        if (app->classes.of != app->model) worker_cancel(&app->texter);
        app->classes.again = 1;
        return;
    }
    app->classes.again = app->classes.ready = 0;
    app->classes.of = NULL;
    if (!pending(app->model) || !app->texter.thread) return;
    worker_start_classes(&app->texter, app->model);
    app->classes.busy = 1;
    app->classes.of = app->model;
    app->classes.done = -1;
    app->classes.total = app->model->clip->pending_texts;
    app->classes.t0 = SDL_GetPerformanceCounter();
    if (app->trace) printf("classes start texts=%d\n", app->classes.total);
    app->dirty = 1;
}

void app_classes_done(App *app) {
    Worker *t = &app->texter;
    app->classes.busy = 0;
    if (app->classes.retired) { /* the model replaced while the texter read it */
        model_free(app->classes.retired);
        free(app->classes.retired);
        app->classes.retired = NULL;
    }
    int mine = app->classes.of == app->model;
    if (app->trace)
        printf("classes done status=%s current=%d ms=%.1f\n",
               t->status == VIT_OK              ? "ok"
               : t->status == VIT_ERR_CANCELLED ? "cancelled"
                                                : "error",
               mine,
               (double)(SDL_GetPerformanceCounter() - app->classes.t0) * 1e3 /
                   (double)SDL_GetPerformanceFrequency());
    if (mine && t->status == VIT_OK) {
        app->classes.ready = 1;
        app_classes_idle(app); /* now, or when the worker is idle */
    } else if (mine && t->status != VIT_ERR_CANCELLED) {
        app_set_error(app, t->err.msg); /* the image views go on without the classes */
        app->classes.of = NULL;
    }
    if (app->classes.again || (pending(app->model) && !mine)) app_classes_start(app);
    app->dirty = 1;
}

void app_classes_idle(App *app) {
    if (!app->classes.ready || app->busy) return;
    app->classes.ready = 0;
    if (app->classes.of != app->model || !pending(app->model)) return; /* stale */
    app->classes.of = NULL;
    ClipText *ct = app->model->clip;
    int on_phrase = ct->phrase[0] && app->view.target == clip_phrase_class(ct);
    float *emb = app->texter.classes_emb; /* the texter is idle: its result is ours */
    app->texter.classes_emb = NULL;
    char msg[700];
    if (model_classes_install(app->model, emb, app->texter.classes_ms, msg, sizeof msg)) {
        app_set_error(app, msg);
        return;
    }
    if (on_phrase) app->view.target = clip_phrase_class(ct); /* it moved after the classes */
    if (app->trace)
        printf("classes ready n=%d templates=%d ms=%.1f\n", ct->n_classes, ct->n_templates,
               ct->ms_classes);
    app_perturb_stop(app);   /* its curve is of the head before */
    app->atlas_of.loads = 0; /* an overview of the old head's maps is stale */
    app->dirty = 1;
    const Scene *sc = app_scene(app);
    if (!sc) return; /* the first photo's pass shows them */
    char path[1024]; /* a head of another size: the photo's run is made again for it */
    snprintf(path, sizeof path, "%s", app->scenes[app->front].path);
    app_open(app, path);
}

int app_classes_retire(App *app, Model *old) {
    if (app->classes.of != old) return 0;
    app->classes.ready = 0;
    if (!app->classes.busy) {
        app->classes.of = NULL;
        return 0;
    }
    worker_cancel(&app->texter);
    app->classes.retired = old;
    return 1;
}

int app_classes_waiting(const App *app, char *buf, size_t n) {
    if (!pending(app->model)) return 0;
    int done = 0, total = app->model->clip->pending_texts;
    if (app->classes.busy && app->classes.of == app->model) {
        int d, t;
        worker_progress(&app->texter, &d, &t);
        if (t > 0) done = d, total = t;
    } else if (!app->classes.ready) {
        return 0; /* failed: the error said why */
    }
    snprintf(buf, n, "waiting for the class texts (%d / %d)", done, total);
    return 1;
}

int app_classes_tick(App *app) {
    if (!app->classes.busy) return 0;
    int done, total;
    worker_progress(&app->texter, &done, &total);
    if (done == app->classes.done) return 0;
    app->classes.done = done;
    if (app->trace) printf("classes progress done=%d total=%d\n", done, total);
    return 1;
}
