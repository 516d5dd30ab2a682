/* perturb.c - Shift+P: the perturbation test of the map on screen, as an animation.
 *
 * The worker computes the class probability after every step (scene_perturb); then the
 * window removes the patches step by step over PERTURB_MS, whatever its frame rate,
 * beside the curve of the probability falling, and keeps the last frame. Shift+P again
 * runs the other order, the first curve staying dim behind it. */
#include "window/app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERTURB_MS 8000 /* the animation's length, whatever the frame rate */

/* A probability as a percentage, with a decimal below 10%. */
static void pct_text(char *buf, size_t n, float p) {
    snprintf(buf, n, 100.0 * p < 9.95 ? "%.1f%%" : "%.0f%%", 100.0 * p);
}

void perturbation_drop(Perturbation **p) {
    if (!*p) return;
    perturbation_free(*p);
    free(*p);
    *p = NULL;
}

void app_perturb_stop(App *app) {
    if (app->pert.phase == PERT_OFF) return;
    app->pert.phase = PERT_OFF;
    app->pert.id++; /* a job still on the worker is now stale: app_perturb_done drops it */
    perturbation_drop(&app->pert.queued);
    perturbation_free(&app->pert.run);
    perturbation_free(&app->pert.ghost);
    app->dirty = 1;
}

void app_perturb_start(App *app, Perturbation *p) {
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
    /* removed [gh, gw]: 1 for the first count patches of the order, the ones the worker's
     * forward pass had set to the mean at this step; the shader paints them the mean colour */
    int count = vit_perturb_count(step, p->n_steps, p->n_patches);
    memset(removed, 0, (size_t)p->n_patches);
    for (int i = 0; i < count; i++) removed[p->order[i]] = 1;
    ren_upload_removed(&app->ren, removed, c->grid_w, c->grid_h);
    app->pert.step = step;
    app->dirty = 1;
}

void app_perturb_key(App *app) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    const MapKindInfo *k = &MAP_KINDS[app->view.kind];
    if (!sc) {
        snprintf(app->notice, sizeof app->notice, "perturbation test: no photo yet");
        return;
    }
    if (c->n_classes == 0) {
        char wait[96];
        if (app_classes_waiting(app, wait, sizeof wait))
            snprintf(app->notice, sizeof app->notice, "%s: no class probability yet", wait);
        else
            snprintf(app->notice, sizeof app->notice,
                     "%s has no classification head: no class probability to follow",
                     app->model->name);
        return;
    }
    if (k->rgb) {
        snprintf(app->notice, sizeof app->notice,
                 "perturbation test: the %s's colours do not rank the patches", k->name);
        return;
    }
    if (sc->score) { /* the test follows one class's probability, not a score's */
        snprintf(app->notice, sizeof app->notice,
                 "perturbation test: it follows a class's probability, not %s's score (a click "
                 "on a class turns that off)",
                 app->score.kind == APP_SCORE_CONTRAST ? "--contrast" : "--similar");
        return;
    }
    if (app->shown_kind != app->view.kind || !view_ready(sc, &app->view) ||
        !view_same_map(&app->shown.view, &app->view, c->n_heads) ||
        app->shown.view.target != app->view.target) { /* a view job still computes it */
        snprintf(app->notice, sizeof app->notice, "perturbation test: wait for the map");
        return;
    }
    if (sc->run.intervention && sc->run.intervention->drop) { /* no value to rank them by */
        snprintf(app->notice, sizeof app->notice,
                 "perturbation test: not with patches dropped (Ctrl+click them back, or "
                 "Backspace); filled ones are fine");
        return;
    }
    /* the first Shift+P removes the most relevant patches first; each next one flips the order */
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
    /* a ghost of the same order as the new run would only repeat it */
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
        app->overview = VIEW_SINGLE;
        app_update_map(app);
    }
    perturbation_drop(&app->pert.queued);
    if (app->busy)
        app->pert.queued = p; /* after the running job (app_job_done) */
    else
        app_perturb_start(app, p);
    app->dirty = 1;
}

void app_perturb_done(App *app) {
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

void app_perturb_tick(App *app) {
    if (app->pert.phase != PERT_PLAYING) return;
    int n = app->pert.run.n_steps;
    Uint32 ms = SDL_GetTicks() - app->pert.t0;
    /* the step from the clock, not from a frame count: a slow frame skips steps instead of
     * stretching the animation */
    int step = ms >= PERTURB_MS ? n : (int)((Uint64)ms * (Uint64)n / PERTURB_MS);
    if (step == app->pert.step) return;
    app_perturb_show(app, step);
    if (step == n) app->pert.phase = PERT_DONE, app->pert.announce = 1;
}

/* How long the loop may sleep before the next step is due: ms to t0 + (step + 1) *
 * PERTURB_MS / n_steps, rounded up so that it wakes on or after the step, at least 1. */
int app_perturb_wait_ms(const App *app) {
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

void app_perturb_status(App *app, char *buf, size_t n) {
    const Perturbation *p = &app->pert.run;
    const char *order = app->pert.most_first ? "positive" : "negative";
    if (app->pert.phase == PERT_COMPUTING || !p->probs) {
        snprintf(buf, n, "perturbation test: computing\xe2\x80\xa6");
        return;
    }
    /* "positive perturbation: 40% removed · P(tabby) 12% · top-1 now tiger cat" */
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

void app_perturb_frame(App *app, RenFrame *f) {
    const Scene *sc = app_scene(app);
    const Perturbation *p = &app->pert.run, *g = &app->pert.ghost;
    int shown = app->pert.phase >= PERT_PLAYING && p->probs && app->pert.step >= 0;
    char cls[96], a[16], b[16];
    app_class_name(cls, sizeof cls, app, shown ? p->target : view_class(&app->view, sc));
    f->plot = 1;
    f->plot_alt = !app->pert.most_first;
    f->plot_steps = shown ? p->n_steps : g->probs ? g->n_steps : 1;
    /* the ghost shares the x axis only when it has as many steps (same model and grid) */
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
    /* removed patches drawn in the normalisation's mean colour, the 0 the network saw */
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
