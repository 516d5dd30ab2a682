/* scene.h - what a photo's maps are computed from, without SDL or GL: a loaded model
 * (Model) and one forward pass on one photo (Scene) with what the worker thread computed
 * with it (the class-specific maps, a worker kind's map). The engine calls the app makes,
 * shared by the window, the worker thread and the headless modes. The Scene knows nothing
 * of the View or the map kinds' table: those read it (mapkind.h, maps.h). */
#ifndef VITLENS_SCENE_H
#define VITLENS_SCENE_H

#include "view/clip.h"
#include "view/interv.h"
#include "vit.h"

#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------------------
 * Model: weights + class names */

typedef struct {
    Vit vit;
    char name[128]; /* for the status line: the file name without extension, or the
                       folder's name for a generic "model.safetensors" */
    const char (*labels)[VIT_LABEL_BYTES]; /* [C] or NULL: owned_labels or vit.labels */
    char (*owned_labels)[VIT_LABEL_BYTES]; /* from a --labels file, free()d by model_free */
    ClipText *clip;                        /* a CLIP model's text side (model_open_text), or NULL */
} Model;

/* Load weights (opt: head count, input size, whole image; NULL for the
 * defaults; its config_path is ignored) and class names: from
 * labels_path when given, else from the config.json the engine read. A labels
 * file that does not fit is an error when labels_required, else it is ignored
 * (a model dropped on the window keeps going with the config's names).
 * On error *m is left freed. Free with model_free. */
VitStatus model_load(Model *m, const char *path, const VitLoadOptions *opt, const char *labels_path,
                     int labels_required, VitError *err);
void model_free(Model *m);

/* A CLIP model's text side (clip_open: its text tower, vocabulary, spec's classes and
 * phrase) and its head made of them (clip_apply): the labels become the classes' names and
 * the phrase's. Nothing for a model that is not CLIP (unless strict and spec asks: an
 * error). strict: see clip_open. 0, or -1 with msg. */
int model_open_text(Model *m, const ClipSpec *spec, int strict, char *msg, size_t n);

/* The classes clip_classes_embed made (emb [C0, E], taken) installed in m's text side and
 * its head remade of them and the phrase (class C0 then): the labels follow. Changes m->vit:
 * where no other thread reads it. Runs made before have another C: run them again. 0, or
 * -1 with msg. */
int model_classes_install(Model *m, float *emb, double ms, char *msg, size_t n);

/* Threads for the text tower: one per online core. */
int model_text_threads(void);

/* The class-specific maps' target that spec asks for: the phrase's class (--text), else
 * -1 (the caller's --class or the top-1). */
int model_phrase_class(const Model *m);

/* What the model was opened without, a line each on f, for the headless modes (the window
 * says it on its status line): the preprocessing assumed for a checkpoint that brings
 * none (VitConfig.default_preprocess: ImageNet's mean/std, timm's crop), a part of the
 * checkpoint left out (VitConfig.left_out), class names assumed from the layout
 * (model_labels_assumed). Nothing for a model that needs no warning. */
void model_warn(FILE *f, const Model *m);

/* 1 when m's class names are its layout's list, assumed for a head of that size
 * (VitConfig.labels_assumed: timm's 1000 classes taken for ImageNet-1k's), not its
 * config.json's, a --labels file's or CLIP's texts. */
int model_labels_assumed(const Model *m);

/* Class name of class c, or NULL when the model has no names. */
const char *model_label(const Model *m, int c);

/* The file-name stem of class c (--export's and S's file names): a CLIP or SigLIP model's
 * zero-shot class is named after its phrase ("a blue square" -> "a-blue-square": ASCII
 * letters lower-cased, digits, '.', '_' and UTF-8 kept, any other run as one '-', at most
 * 48 bytes, cut at a character); "class%d" for a classifier's classes (ImageNet's names
 * are long and repeat: "tabby, tabby cat"), and for a phrase that leaves nothing or whose
 * stem another class's phrase shares. Always NUL-terminated in buf[n]. */
void model_class_stem(char *buf, size_t n, const Model *m, int c);

/* The class that arg names (--class; opt: the option, for the message): an index 0 .. C-1,
 * or a class name compared without case with the whole label ("tiger cat") or one of its
 * comma-separated names ("tabby" of "tabby, tabby cat"); the first class that matches. 0
 * and *cls, or -1 with a message in msg (no head, out of range, no such name). */
int model_find_class(const Model *m, const char *opt, const char *arg, int *cls, char *msg,
                     size_t n);

/* ---------------------------------------------------------------------------
 * Scene: one forward pass on one photo */

/* A score other than one class's logit for the class-specific maps to explain (--contrast:
 * logit_a - logit_b, --similar: cos(e, e') of the pooled embeddings; vit.h, VitScore), with
 * its names. The owner's, kept while a Scene points to it (Scene.score). */
typedef struct {
    VitScore score;  /* score.ref (cosine): the other photo's embedding [E], the owner's */
    char stem[136];  /* file names: "class281-vs-class282", "similar-to-cat" */
    char title[320]; /* words: why "tabby" rather than "tiger cat"; what makes it like cat.jpg */
} SceneScore;

/* s = logit a - logit b of m (vit_score_contrast; a != b, both classes of m), named
 * "STEMA-vs-STEMB" (model_class_stem) and 'why "A" rather than "B" (logit a - logit b)'. */
void scene_score_contrast(SceneScore *s, const Model *m, int a, int b);
/* s = cos(e, ref) (vit_score_cosine; ref [E] the photo `other`'s embedding, the caller's),
 * named "similar-to-STEM", STEM other's file name without its extension as
 * model_class_stem makes a stem of a phrase. */
void scene_score_similar(SceneScore *s, const float *ref, const char *other);

/* --contrast A,B of m: s made as scene_score_contrast makes it, A and B each as --class
 * takes them (model_find_class). A class name may hold commas ("tabby, tabby cat"), so every
 * comma is tried as the one between A and B; the split must name two classes one way only,
 * and two different ones. 0, or -1 with the message in msg (s untouched). */
int scene_score_parse_contrast(SceneScore *s, const Model *m, const char *arg, char *msg, size_t n);

/* 1 when sc->score is a score of the pooled embedding (--similar: a model without a head
 * can be explained), else 0. */
#define scene_embedding_score(sc) ((sc)->score && !(sc)->score->score.on_logits)

/* scene_class's answer while Scene.score is set: the class-specific maps explain that score
 * (View.target and the explain buffers' class), not a class. */
#define SCENE_SCORE 0x40000000

#define SCENE_TAG_BYTES 64 /* a worker map's tag: what it is the map of (Scene.slow_tag) */

/* The feature PCA's basis held over a video's frames (issue 37): per layer, fitted on the
 * first frame whose PCA that layer needed (vit_pca_fit, one frame), then every frame
 * projected on it (vit_pca_project), so that a part keeps its colour as it moves. The
 * owner (the window's video, --export of a video) zeroes it, points its frames' Scenes at
 * it (Scene.pca_hold, with Scene.frame) and frees it with pca_hold_free; a photo's Scene
 * has none: a fit per photo. One writer each: the owner's thread only bumps `asked`
 * (pca_hold_refit), the thread computing the map (one at a time: requests.c) fits. */
typedef struct {
    int asked;          /* bumped to refit: a basis fitted at another `asked` is stale */
    const Vit *vit;     /* the model the bases are of (another: all refitted) */
    int n_layers;       /* L */
    VitPcaBasis *basis; /* [L] each layer's (.d 0: none yet) */
    long *frame;        /* [L] the frame each was fitted on (Scene.frame) */
    int *fitted_at;     /* [L] the `asked` each was fitted at */
} PcaHold;

/* Refit every layer's basis on the next frame whose PCA is drawn. */
void pca_hold_refit(PcaHold *h);
/* The frame layer's basis was fitted on, or -1 when it has none that is current. */
long pca_hold_frame(const PcaHold *h, int layer);
void pca_hold_free(PcaHold *h);

typedef struct {
    VitRun run;               /* att [L, H, T, T], probs [C] of the photo */
    uint8_t *crop_rgb;        /* [Sh, Sw, 3] the picture the model saw (vit_preprocess_rgb) */
    int crop_w_px, crop_h_px; /* Sw, Sh */
    int src_w, src_h;         /* the photo's size, px (upright) */
    int ignore_orientation;   /* set by the owner: run on the pixels as stored, not turned by
                                 the EXIF orientation (--ignore-orientation) */
    VitAttStorage att;        /* set by the owner: how scene_run's run keeps the attention
                                 (VITLENS_ATT; VIT_ATT_AUTO: kept when it fits) */
    VitControl *control;      /* set by the owner, or NULL: the worker thread's flag that stops
                                 scene_run and view_slow_map early (VIT_ERR_CANCELLED). Only
                                 their own calls see it, never maps read on another thread */
    const SceneScore *score;  /* set by the owner, or NULL: the score the class-specific maps
                                 explain instead of a class (scene_class gives SCENE_SCORE) */
    const Interv *interv;     /* set by the owner, or NULL: the interventions scene_run,
                                 scene_explain and scene_perturb apply (when built for the
                                 model's shapes, interv_for); the crop shows a filled patch
                                 as the model sees it, a dropped one hatched */
    PcaHold *pca_hold;        /* set by the owner, or NULL (a photo): the feature PCA's basis
                                 held over a video's frames (scene_pca) */
    long frame;               /* set by the owner with pca_hold: the video frame's index */
    float *plain_probs;       /* [C] the probabilities of the model without the interventions
                                 (scene_run runs it first when some apply and want_plain:
                                 has_plain), for the +/- of the predictions panel */
    int has_plain;
    int plain_given;    /* set by the owner before scene_run: plain_probs hold this photo's
                           already (the same photo and model on screen), not run again */
    int want_plain;     /* set by the owner: with interventions, the unchanged model's
                           probabilities too (the window's +/-; the headless modes need none) */
    int orientation;    /* the photo's EXIF orientation, 1..8 (1: upright or none) */
    const char *format; /* its file format ("JPEG", ...; static) */
    float *distance;    /* [L, H] mean attention distance, px (vit_attention_distance) */
    char path[1024];    /* the photo */
    const char *name;   /* last path component of path */
    const Vit *vit;     /* the model that ran it */
    /* The class-specific maps (vit_explain) of one class, double-buffered so that the
     * worker can compute the next class's while the window shows these:
     * expl[expl_front] holds every method's map for class expl_target (-1: none yet),
     * grad-rollout's with discard ratio expl_discard. The worker owns grad and the
     * back buffer during its job (scene_explain); scene_explain_swap shows them. */
    VitGrad grad;    /* the backward pass of grad.target */
    float *expl[2];  /* [VIT_EXPLAIN_COUNT, max(gh*gw, Sh*Sw)] raw maps, each */
    int expl_front;  /* which of expl is shown */
    int expl_target; /* the class of expl[expl_front], -1: none */
    float expl_discard;
    int expl_lrp;    /* 1: it holds AttnLRP's map too (its own backward pass) */
    int back_target; /* what scene_explain put in the back buffer */
    float back_discard;
    int back_lrp;
    /* The map of a worker kind (mapkind.h: attention flow, the feature PCA over the
     * slideshow), double-buffered the same way: slow[slow_front] holds a map when slow_valid;
     * the worker writes the back one (view_slow_map, maps.h). Which view's map each holds is
     * the caller's tag, bytes the Scene never reads (mapkind.c keeps the View there). */
    float *slow[2]; /* [map_kind_max_floats] each */
    int slow_front, slow_valid, back_slow_valid;
    unsigned char slow_tag[SCENE_TAG_BYTES], back_slow_tag[SCENE_TAG_BYTES];
} Scene;

/* The patch features of every photo of the slideshow at every layer, for the
 * feature PCA over all of them (View.joint): computed on the worker thread once per
 * model and slideshow (scene_joint_features), then one PCA per layer. */
typedef struct {
    const Vit *vit;      /* the model they are of; NULL: not computed */
    int n_images;        /* photos asked for */
    char (*paths)[1024]; /* [n_images], set by the caller */
    int n_ok;            /* photos that loaded (the others are skipped) */
    int *image_of;       /* [n_images]: the row block of photo i, -1: not loaded */
    float *feat;         /* [n_ok, L, N, D] vit_features of the patches */
    char skipped[600];   /* the first photo that did not load, and why */
} JointFeatures;

/* Most bytes scene_joint_features keeps (n_images * L * N * D floats): ViT-B/16 at
 * 224 px takes 7.2 MB per photo, so 1 GiB holds 140. */
#define JOINT_MAX_BYTES (1ull << 30)

/* The patch features of every photo in jf->paths for vit (a run of its own, on the
 * calling thread). A photo that does not load is skipped (jf->skipped says which);
 * none loading, or more than JOINT_MAX_BYTES, is an error. Free with
 * joint_features_free (keeps paths). */
VitStatus scene_joint_features(JointFeatures *jf, const Vit *vit, VitError *err);
void joint_features_free(JointFeatures *jf);

/* Floats of one map of any method in Scene.expl: max(gh*gw, Sh*Sw). */
size_t scene_expl_stride(const VitConfig *c);

/* Load the photo at `path`, preprocess it for `vit`, run the forward pass and
 * the mean attention distance (on the worker thread, like the pass: for a model
 * whose attention is recomputed it costs as much as the pass's attention).
 * Reuses sc's buffers when they fit `vit`, reallocates them otherwise. On
 * error sc keeps its buffers but its contents are undefined (callers run into
 * a scratch Scene and swap it in on success). Free with scene_free. */
VitStatus scene_run(Scene *sc, const Vit *vit, const char *path, VitError *err);
/* The same on pixels already decoded, rgb [h, w, 3] (a video's frame: media.h), copied; name
 * (e.g. "clip.webm#12") stands for the path in Scene.path and messages. The maps equal
 * scene_run's of a lossless file of those pixels (a PNG), bit for bit: the same
 * preprocessing. Errors as scene_run's, VIT_ERR_IMAGE for an empty or too large frame. */
VitStatus scene_run_rgb(Scene *sc, const Vit *vit, const uint8_t *rgb, int w, int h,
                        const char *name, VitError *err);
void scene_free(Scene *sc);

/* The class-specific maps of class `target` (0 .. C-1; SCENE_SCORE: of sc->score's score,
 * through vit_backward_score, a model without a head too for a score of its embedding) for sc's
 * photo into the back buffer: the backward pass (vit_backward: the exact pass, and AttnLRP's when
 * lrp is 1 — a second pass, run only when its map is asked for; a pass that
 * sc->grad already holds for this class of this photo is not run again) and every
 * vit_explain map those passes allow, grad-rollout's with `discard`. For the worker thread (or
 * headless): reads sc->run and sc->vit, writes only sc->grad and the back buffer, so the window may
 * go on drawing the front one. Errors: VIT_ERR_ARG (a model without head, class out of range),
 * VIT_ERR_NOMEM. */
VitStatus scene_explain(Scene *sc, int target, float discard, int lrp, VitError *err);

/* The file-name stem and the words of what a class-specific map of sc explains, target as
 * scene_class gives it: sc->score's for SCENE_SCORE, else model_class_stem's and 'why
 * "LABEL" (class C)'. Always NUL-terminated. */
void scene_target_stem(char *buf, size_t n, const Model *m, const Scene *sc, int target);
void scene_target_title(char *buf, size_t n, const Model *m, const Scene *sc, int target);

/* Show what scene_explain computed: the back buffer becomes the front one. */
void scene_explain_swap(Scene *sc);
/* sc's class-specific maps and backward pass forgotten (its score's values or its head
 * changed): the next view that needs them asks again. Only while no worker job uses sc. */
void scene_forget_explain(Scene *sc);

/* sc as a thread's calls on it should see it: a shallow copy (same buffers) whose run
 * carries ctl (VitRun.control), so that cancelling ctl stops those calls and no others. */
Scene scene_with_control(const Scene *sc, VitControl *ctl);

/* Show what view_slow_map computed: the back buffer becomes the front one. */
void scene_slow_swap(Scene *sc);

/* The feature PCA of one photo at a layer (View.joint 0), or of photo `image` of jf
 * over all its photos (jf non-NULL): out [N, 4] RGBA (vit_feature_pca's colours, A
 * the foreground). fg_count (may be NULL): foreground patches of this photo. A video's
 * frame (sc->pca_hold set, jf NULL): projected on the layer's held basis, fitted on this
 * frame first when there is none (the window and --export fit the same way, here). */
VitStatus scene_pca(float *out, int *fg_count, const Scene *sc, int layer, const JointFeatures *jf,
                    VitError *err);

/* ---------------------------------------------------------------------------
 * Perturbation test of one map, for the window's animation (Shift+P): the map's
 * patches removed in its order (vit_patch_order; Chefer et al. 2021, §4), one forward
 * pass per step, the class probability after each. --eval runs the same test on many
 * photos in 10% steps (eval.c); this one takes small steps, so a curve can be watched. */

#define PERTURB_MAX_STEPS 50 /* n_steps = min(N, 50) */
#define PERTURB_BATCH     32 /* inputs per vit_forward_batch call, at most */

typedef struct {
    int most_first;   /* 1: positive (most relevant first), 0: negative (least first) */
    int target;       /* the class followed, 0 .. C-1 */
    int n_patches;    /* N */
    int n_steps;      /* min(N, PERTURB_MAX_STEPS); step s removes vit_perturb_count(s, n_steps,
                         N) patches, step 0 none */
    float *map;       /* [N] the map per patch (vit_map_to_patches) */
    int *order;       /* [N] vit_patch_order(map, most_first) */
    float *probs;     /* [n_steps + 1] P(target) after step s (scene_perturb) */
    int *top;         /* [n_steps + 1] the top-1 class after step s (scene_perturb) */
    unsigned long id; /* the caller's tag */
} Perturbation;

/* The test of map (a view's map as view_map gives it: [Sh, Sw] when pixels is 1, else
 * [gh, gw]) for class target of a model of shapes c: reduces it to the patches
 * (vit_map_to_patches), orders them, allocates probs and top (zeroed). On error p is
 * left freed. Errors: VIT_ERR_ARG (a NaN or infinite value in the map, target out of
 * range), VIT_ERR_NOMEM. Free with perturbation_free (accepts a zeroed one). */
VitStatus perturbation_init(Perturbation *p, const float *map, int pixels, const VitConfig *c,
                            int most_first, int target, VitError *err);
void perturbation_free(Perturbation *p);

/* The probabilities of p's steps for sc's photo (sc->run.input, sc->vit): each step's
 * input is the photo with the patches order[0 .. count) set to 0, the channel means
 * after normalisation (vit_patch_mix with fill NULL), run through vit_forward_batch
 * PERTURB_BATCH at a time (fewer when that many do not fit in memory). For the worker
 * thread: reads sc->run.input and sc->vit only, writes p->probs and p->top. Errors:
 * VIT_ERR_ARG (a model without head, p not of sc's shapes), VIT_ERR_NOMEM. */
VitStatus scene_perturb(Perturbation *p, const Scene *sc, VitError *err);

/* The class a class-specific map of sc explains: SCENE_SCORE when sc->score is set (its
 * score, whatever target says), else target (0 .. C-1), or the top-1 class when target is -1
 * (VIEW_TOP1); -1 when the model has no head (or no pass ran yet). */
int scene_class(const Scene *sc, int target);

#endif
