/* worker.h - the forward and backward passes off the GUI thread.
 *
 * One SDL thread waits for a job: load a model (optional) and run a photo
 * through it into the back Scene; or compute one class's class-specific maps
 * (scene_explain) of the front Scene into its back buffer; or a worker kind's map
 * (view_slow_map); or everything the window shows of a view when that is too slow
 * for a frame (view_compute: the large-input path, where the attention is recomputed);
 * or the class probabilities of a perturbation test of the front
 * Scene's photo (scene_perturb); or a CLIP phrase's text embedding (clip_embed), which
 * the GUI thread then makes the head (it changes the model: with the worker idle); or the
 * zero-shot classes' text embeddings (clip_classes_embed, on a second Worker). When done it
 * pushes one SDL user event (type `event`, user.code = VitStatus) and goes back to waiting; the GUI
 * thread then reads the result and swaps the back Scene in.
 *
 * Ownership: between worker_start and that event, the back Scene and the
 * result fields belong to the worker and the current Model must stay alive;
 * the GUI thread touches neither.
 *
 * Stopping: worker_cancel asks the running job to stop early (a newer request made it
 * useless); the forward pass, the maps and view_compute check the flag between layers
 * and blocks of rows and end with VIT_ERR_CANCELLED within about a block's work. The
 * event still comes. worker_free cancels too, so that quitting never waits for a job.
 * worker_progress says how far the running job is. */
#ifndef VITLENS_WORKER_H
#define VITLENS_WORKER_H

#include "headless/lesson.h"
#include "view/maps.h"

#include <SDL.h>

typedef struct {
    SDL_Thread *thread;
    SDL_mutex *lock;
    SDL_cond *wake;
    int quit, has_job; /* under lock */
    Uint32 event;
    Uint64 t_done; /* performance counter when the last job ended (the trace's startup) */
    /* the job, set by worker_start */
    char model_path[1024];   /* "": keep the current model */
    char image_path[1024];   /* "": no photo to run; with rgb, the name its pixels go by */
    const uint8_t *rgb;      /* non-NULL: a video's frame [rgb_h, rgb_w, 3] to run as the photo
                                (scene_run_rgb); the caller's, unchanged until the event */
    int rgb_w, rgb_h;        /* px */
    VitLoadOptions load_opt; /* heads, input size, whole image */
    char labels_path[1024];  /* "": none */
    const Model *model;      /* the current model (read-only) when model_path is "" */
    Scene *scene;            /* the back Scene to fill; or the Scene to explain */
    int explain;             /* 1: an explain job (scene_explain(scene, target, discard, lrp)) */
    int target;              /* its class */
    float discard;           /* its grad-rollout discard ratio */
    int lrp;                 /* 1: AttnLRP's pass too */
    int slow;                /* 1: a worker map job (view_slow_map(scene, &view, joint)) */
    View view;               /* its view */
    JointFeatures *joint;    /* the slideshow's features for a joint feature PCA, or NULL */
    Perturbation *perturb;   /* non-NULL: a perturbation job (scene_perturb(scene, perturb)) */
    ViewMaps *maps;          /* non-NULL: a view job (view_compute(maps, &maps_scene)) */
    int compare;             /* 1: a load job for the compare view's pane B (its result is
                                the compare view's, not the app's model and Scene) */
    int phrase;              /* 1: a phrase job (clip_embed of phrase_text, model->clip) */
    char phrase_text[CLIP_TEXT_BYTES];
    LessonData *lesson;   /* non-NULL: a lesson job (lesson_select(lesson, lesson_sel...)) */
    int lesson_sel[3];    /* its layer, head, patch (0-based) */
    int classes;          /* 1: a classes job (clip_classes_embed of model->clip's pending) */
    const ClipSpec *clip; /* the command line's text options, for a model the worker loads
                             (model_open_text, not strict); set once by the owner */
    Scene maps_scene;     /* its Scene: a copy of the front one whose run has `control` */
    VitControl control;   /* the running job's cancel flag and progress (any thread) */
    /* the result, valid once the event has arrived */
    Model *new_model;  /* loaded from model_path (heap; the receiver owns it), or NULL */
    int ran;           /* 1: scene holds a new forward pass */
    int explained;     /* 1: scene's back class-specific buffer holds a new class */
    float *phrase_emb; /* [E] the phrase's embedding (worker_start_phrase sizes it; freed by
                          worker_free), with its token count and whether it was cut */
    int phrase_tokens, phrase_truncated;
    double phrase_ms;   /* the embedding took this long */
    float *classes_emb; /* [C0, E] a classes job's embeddings (the receiver takes it, else
                           freed by the next classes job or worker_free) */
    double classes_ms;  /* they took this long */
    char text_msg[600]; /* a loaded model's text side that could not be had, "" */
    VitStatus status;
    VitError err;
} Worker;

/* Start the thread. event: a type from SDL_RegisterEvents. 0, or -1 (SDL_GetError). */
int worker_init(Worker *w, Uint32 event);

/* Hand a job to the idle worker. model_path/labels_path may be NULL. */
void worker_start(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                  const char *labels_path, const Model *model, const char *image_path,
                  Scene *scene);

/* The same on a video's frame (window/live.c): rgb [h, w, 3] runs as the photo named name
 * ("clip.webm#12") through model_path's model (NULL: `model`); rgb must stay unchanged until
 * the event. */
void worker_start_frame(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                        const char *labels_path, const Model *model, const uint8_t *rgb, int rgb_w,
                        int rgb_h, const char *name, Scene *scene);

/* The same load job for the compare view's pane B (Worker.compare set): model_path's
 * model (NULL: `model`) runs image_path into scene. */
void worker_start_compare(Worker *w, const char *model_path, const VitLoadOptions *load_opt,
                          const char *labels_path, const Model *model, const char *image_path,
                          Scene *scene);

/* Hand an explain job to the idle worker: scene_explain(scene, target, discard, lrp).
 * The window may go on reading the Scene's run and front maps meanwhile. */
void worker_start_explain(Worker *w, Scene *scene, int target, float discard, int lrp);

/* Hand a worker-map job to the idle worker: view_slow_map(scene, v, joint) (attention
 * flow, the feature PCA over the slideshow). joint belongs to the worker until the event. */
void worker_start_slow(Worker *w, Scene *scene, const View *v, JointFeatures *joint);

/* Hand a perturbation job to the idle worker: scene_perturb(scene, p), which fills
 * p->probs and p->top. p belongs to the worker until the event; the window may go on
 * reading the Scene meanwhile. */
void worker_start_perturb(Worker *w, Scene *scene, Perturbation *p);

/* Hand a view job to the idle worker: view_compute(m, scene) on a copy of scene that
 * carries the worker's control. m and its buffers belong to the worker until the event;
 * the window may go on reading the Scene meanwhile. */
void worker_start_maps(Worker *w, const Scene *scene, ViewMaps *m);

/* Hand a phrase job to the idle worker: clip_embed(phrase_emb, ..., model->clip, phrase)
 * (model->clip non-NULL). 0, or -1 out of memory (no job started). */
int worker_start_phrase(Worker *w, const Model *model, const char *phrase);

/* Hand a lesson job to the idle worker: lesson_select(ld, layer, head, patch), a block of
 * the front Scene's run rerun on its pool (the GUI thread then neither reads ld nor uses
 * that pool until the event). */
void worker_start_lesson(Worker *w, LessonData *ld, int layer, int head, int patch);

/* Hand a classes job to the idle worker: clip_classes_embed of model->clip's pending classes
 * (progress in texts; a cancel stops it between batches). The window runs it on a second
 * Worker (App.texter), so that the photo's jobs need not wait the minute --classes imagenet
 * takes; only the model's text side is read, and the model must stay alive until the event. */
void worker_start_classes(Worker *w, const Model *model);

/* Ask the running job, if any, to stop early (any job: each checks what it can). */
void worker_cancel(Worker *w);

/* How far the running job is: *done of *total steps (layers, or tokens for attention
 * flow), 0 of 0 when it does not say. */
void worker_progress(const Worker *w, int *done, int *total);

/* Cancel the running job, if any, stop the thread, free new_model if unclaimed. */
void worker_free(Worker *w);

#endif
