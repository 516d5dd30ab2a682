/* worker.c - the worker thread: model load and forward pass off the GUI thread. */
#include "window/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the thread ------------------------------------------------------------ */

/* Runs the one job the worker_start* call set up, on the worker thread: a perturbation
 * curve, a view's maps, a worker kind's map, the class-specific maps, or else a model
 * load and/or a forward pass. The result stays in w (status, err, new_model, ran,
 * explained) for the GUI thread to read once the event arrives. */
static void run_job(Worker *w) {
    w->new_model = NULL;
    w->ran = 0;
    w->explained = 0;
    w->status = VIT_OK;
    w->err.code = VIT_OK;
    w->err.msg[0] = '\0';
    w->text_msg[0] = '\0';
    if (w->phrase) { /* the text tower only reads the model: the GUI makes the head */
        Uint64 t0 = SDL_GetPerformanceCounter();
        w->status = clip_embed(w->phrase_emb, &w->phrase_tokens, &w->phrase_truncated,
                               w->model->clip, w->phrase_text, model_text_threads(), &w->err);
        w->phrase_ms = (double)(SDL_GetPerformanceCounter() - t0) * 1e3 /
                       (double)SDL_GetPerformanceFrequency();
        return;
    }
    if (w->lesson) { /* the lesson's block: ld belongs to the worker until the event */
        w->status =
            lesson_select(w->lesson, w->lesson_sel[0], w->lesson_sel[1], w->lesson_sel[2], &w->err);
        return;
    }
    if (w->classes) { /* reads the model's text side only: the GUI installs the result */
        w->status = clip_classes_embed(&w->classes_emb, &w->classes_ms, w->model->clip, &w->control,
                                       &w->err);
        return;
    }
    if (w->perturb) {
        w->status = scene_perturb(w->perturb, w->scene, &w->err);
        return;
    }
    if (w->maps) {
        w->status = view_compute(w->maps, &w->maps_scene, &w->err);
        return;
    }
    if (w->slow) {
        w->status = view_slow_map(w->scene, &w->view, w->joint, &w->err);
        w->explained = w->status == VIT_OK;
        return;
    }
    if (w->explain) {
        w->status = scene_explain(w->scene, w->target, w->discard, w->lrp, &w->err);
        w->explained = w->status == VIT_OK;
        return;
    }
    /* a new model is loaded beside the current one, which the GUI keeps showing; the GUI
     * takes it from new_model when the job's event arrives */
    const Model *model = w->model;
    if (w->model_path[0]) {
        Model *m = calloc(1, sizeof *m);
        if (!m) {
            w->status = w->err.code = VIT_ERR_NOMEM;
            snprintf(w->err.msg, sizeof w->err.msg, "%.400s: out of memory", w->model_path);
            return;
        }
        w->status = model_load(m, w->model_path, &w->load_opt,
                               w->labels_path[0] ? w->labels_path : NULL, 0, &w->err);
        if (w->status) {
            free(m);
            return;
        }
        /* a CLIP model's text side, with the command line's classes: what cannot be had is
         * said (text_msg), and the image views go on */
        ClipSpec spec = w->clip ? *w->clip : (ClipSpec){0};
        spec.defer = !w->compare; /* the app's model: its classes on the second worker */
        if (w->clip && model_open_text(m, &spec, 0, w->text_msg, sizeof w->text_msg))
            m->clip = NULL;
        else if (m->clip && m->clip->why[0] && clip_spec_any(w->clip))
            snprintf(w->text_msg, sizeof w->text_msg, "%s", m->clip->why);
        w->new_model = m;
        model = m;
    }
    if (w->image_path[0]) {
        w->status = w->rgb ? scene_run_rgb(w->scene, &model->vit, w->rgb, w->rgb_w, w->rgb_h,
                                           w->image_path, &w->err)
                           : scene_run(w->scene, &model->vit, w->image_path, &w->err);
        if (w->status) { /* all or nothing: a model that cannot show the photo is dropped */
            if (w->new_model) {
                model_free(w->new_model);
                free(w->new_model);
                w->new_model = NULL;
            }
            return;
        }
        w->ran = 1;
    }
}

/* The thread's loop: sleep on the condition variable until a job (or quit), run it
 * unlocked, then post w->event (user.code the status, data1 w) to the GUI's queue. */
static int worker_main(void *arg) {
    Worker *w = arg;
    SDL_LockMutex(w->lock);
    for (;;) {
        while (!w->has_job && !w->quit) SDL_CondWait(w->wake, w->lock);
        if (w->quit) break;
        SDL_UnlockMutex(w->lock);
        run_job(w);
        w->t_done = SDL_GetPerformanceCounter();
        SDL_Event e;
        SDL_zero(e);
        e.type = w->event;
        e.user.code = (Sint32)w->status;
        e.user.data1 = w;
        /* after the event is queued the GUI thread owns the result: touch nothing more */
        SDL_LockMutex(w->lock);
        w->has_job = 0;
        while (SDL_PushEvent(&e) < 0) { /* queue full: wait for the GUI to drain it */
            SDL_UnlockMutex(w->lock);
            SDL_Delay(5);
            SDL_LockMutex(w->lock);
        }
    }
    SDL_UnlockMutex(w->lock);
    return 0;
}

/* --- the GUI thread's side ------------------------------------------------- */

int worker_init(Worker *w, Uint32 event) {
    memset(w, 0, sizeof *w);
    w->event = event;
    if (!(w->lock = SDL_CreateMutex()) || !(w->wake = SDL_CreateCond())) goto fail;
    if (!(w->thread = SDL_CreateThread(worker_main, "vitlens-worker", w))) goto fail;
    return 0;
fail:
    if (w->wake) SDL_DestroyCond(w->wake);
    if (w->lock) SDL_DestroyMutex(w->lock);
    memset(w, 0, sizeof *w);
    return -1;
}

/* The job set up under the lock goes to the thread: a fresh cancel flag (the worker is
 * idle, nothing reads it), then the wake-up; unlocks. */
static void hand_over(Worker *w) {
    vit_control_reset(&w->control);
    w->has_job = 1;
    SDL_CondSignal(w->wake);
    SDL_UnlockMutex(w->lock);
}

/* A new job: locks, and clears every kind of job (no load, no class, no slow map, no
 * perturbation, no maps), since run_job picks the first one set; the caller sets its own
 * and hands it over. */
static void begin_job(Worker *w) {
    SDL_LockMutex(w->lock);
    w->model_path[0] = w->image_path[0] = '\0';
    w->rgb = NULL;
    w->explain = 0;
    w->slow = 0;
    w->perturb = NULL;
    w->maps = NULL;
    w->phrase = 0;
    w->classes = 0;
    w->lesson = NULL;
    w->compare = 0;
}

/* A load job set up under the lock (begin_job), compare 0 or 1, on image_path's photo or (rgb
 * non-NULL) on a video's frame that image_path names; handed over. */
static void start_load(Worker *w, int compare, const char *model_path,
                       const VitLoadOptions *load_opt, const char *labels_path, const Model *model,
                       const char *image_path, const uint8_t *rgb, int rgb_w, int rgb_h,
                       Scene *scene) {
    begin_job(w);
    w->compare = compare;
    w->scene = scene;
    snprintf(w->model_path, sizeof w->model_path, "%s", model_path ? model_path : "");
    snprintf(w->labels_path, sizeof w->labels_path, "%s", labels_path ? labels_path : "");
    snprintf(w->image_path, sizeof w->image_path, "%s", image_path ? image_path : "");
    w->load_opt = load_opt ? *load_opt : (VitLoadOptions){0};
    w->model = model;
    w->rgb = rgb, w->rgb_w = rgb_w, w->rgb_h = rgb_h;
    hand_over(w);
}

void worker_start(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                  const char *labels_path, const Model *model, const char *image_path,
                  Scene *scene) {
    start_load(w, 0, model_path, load_opt, labels_path, model, image_path, NULL, 0, 0, scene);
}

void worker_start_frame(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                        const char *labels_path, const Model *model, const uint8_t *rgb, int rgb_w,
                        int rgb_h, const char *name, Scene *scene) {
    start_load(w, 0, model_path, load_opt, labels_path, model, name, rgb, rgb_w, rgb_h, scene);
}

void worker_start_compare(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                          const char *labels_path, const Model *model, const char *image_path,
                          Scene *scene) {
    start_load(w, 1, model_path, load_opt, labels_path, model, image_path, NULL, 0, 0, scene);
}

void worker_start_explain(Worker *w, Scene *scene, int target, float discard, int lrp) {
    begin_job(w);
    w->scene = scene;
    w->explain = 1;
    w->target = target;
    w->discard = discard;
    w->lrp = lrp;
    hand_over(w);
}

void worker_start_slow(Worker *w, Scene *scene, const View *v, JointFeatures *joint) {
    begin_job(w);
    w->scene = scene;
    w->slow = 1;
    w->view = *v;
    w->joint = joint;
    hand_over(w);
}

void worker_start_perturb(Worker *w, Scene *scene, Perturbation *p) {
    begin_job(w);
    w->scene = scene;
    w->perturb = p;
    hand_over(w);
}

void worker_start_maps(Worker *w, const Scene *scene, ViewMaps *m) {
    begin_job(w);
    w->maps = m;
    w->maps_scene = scene_with_control(scene, &w->control);
    hand_over(w);
}

int worker_start_phrase(Worker *w, const Model *model, const char *phrase) {
    /* the worker is idle: its buffer is the GUI's to size */
    float *e = realloc(w->phrase_emb, (size_t)model->clip->E * sizeof *e);
    if (!e) return -1;
    w->phrase_emb = e;
    begin_job(w);
    w->phrase = 1;
    w->model = model;
    snprintf(w->phrase_text, sizeof w->phrase_text, "%s", phrase);
    hand_over(w);
    return 0;
}

void worker_start_lesson(Worker *w, LessonData *ld, int layer, int head, int patch) {
    begin_job(w);
    w->lesson = ld;
    w->lesson_sel[0] = layer, w->lesson_sel[1] = head, w->lesson_sel[2] = patch;
    hand_over(w);
}

void worker_start_classes(Worker *w, const Model *model) {
    free(w->classes_emb); /* the worker is idle: an unclaimed result is the GUI's to drop */
    w->classes_emb = NULL;
    begin_job(w);
    w->classes = 1;
    w->model = model;
    hand_over(w);
}

void worker_cancel(Worker *w) {
    vit_control_cancel(&w->control);
}

void worker_progress(const Worker *w, int *done, int *total) {
    vit_control_progress(&w->control, done, total);
}

void worker_free(Worker *w) {
    if (!w || !w->thread) return;
    vit_control_cancel(&w->control); /* a running job stops within a block's work */
    SDL_LockMutex(w->lock);
    w->quit = 1; /* the thread checks quit between jobs */
    SDL_CondSignal(w->wake);
    SDL_UnlockMutex(w->lock);
    SDL_WaitThread(w->thread, NULL);
    if (w->new_model) { /* a result the GUI never received */
        model_free(w->new_model);
        free(w->new_model);
    }
    free(w->phrase_emb);
    free(w->classes_emb);
    SDL_DestroyCond(w->wake);
    SDL_DestroyMutex(w->lock);
    memset(w, 0, sizeof *w);
}
