/* lesson.h - the lesson: how a ViT computes, step by step, on one photo (issue 24).
 *
 * The steps' numbers come from the engine (vit.h, "The lesson"): lesson_compute calls
 * it once for a (layer, head, patch) selection and keeps every array a step shows;
 * lesson_draw draws one step as an RGB picture on the CPU (the one drawing the PNG
 * export and the window both use, so that they show the same pixels); lesson_export
 * writes every step as PNG + .npy, steps.json and lesson.md (--lesson-export). */
#ifndef VITLENS_LESSON_H
#define VITLENS_LESSON_H

#include "view/lessonfile.h"
#include "view/scene.h"

#include <stdint.h>
#include <stdio.h>

struct Text;

#define LESSON_FILTERS_MAX 28
#define LESSON_TOP         5

/* Every number of the lesson for one photo and one selection. 0-based inside. */
typedef struct {
    const Vit *vit;
    const Scene *sc;
    const char (*labels)[VIT_LABEL_BYTES]; /* [C] or NULL */
    int layer, head, patch, token;         /* token = Np + patch */
    VitLesson blk;                         /* the block internals and the token's view */
    float *pixels;                         /* [3, P, P] */
    float *embedding;                      /* [D] */
    float *filters;                        /* [n_filters, 3, P, P] */
    float *filters_var;                    /* [n_filters] */
    int n_filters;
    float *xhat;     /* [D] (x[token] - mean) / std: norm1 before its weight and bias */
    float *pos_sim;  /* [N, N] */
    float *cls_norm; /* [D], with a head */
    int has_head;
    int top[LESSON_TOP];
    char head_msg[512];   /* without a head: why the last step is empty */
    VitLessonProbe probe; /* a MAP head (has_probe): the probe step's numbers */
    float *probe_mean;    /* [N] the probe's attention, mean over the heads, with has_probe */
    int has_probe;
} LessonData;

/* What the model has that the steps need (LESSON_NEEDS_*: a head, a rotary embedding, an
 * attention-pooling head): lessonfile.h's `has` for lesson_script_check and _fit. */
int lesson_model_has(const VitConfig *c);

/* Compute every step's numbers (engine calls; one block rerun) for layer, head (0-based)
 * and patch (0 .. N-1) of the scene's forward pass. Free with lesson_data_free.
 * Errors: VIT_ERR_ARG (range), VIT_ERR_NOMEM. A model without head is no error: the
 * head step says so (head_msg). */
VitStatus lesson_compute(LessonData *ld, const Model *m, const Scene *sc, int layer, int head,
                         int patch, VitError *err);
/* Change the selection: a new layer reruns one block; head and patch only re-read it. */
VitStatus lesson_select(LessonData *ld, int layer, int head, int patch, VitError *err);
void lesson_data_free(LessonData *ld);

/* A step's caption (one line, the shape in the seeds' notation at its end) into buf. */
void lesson_caption(char *buf, size_t n, const LessonData *ld, int step);
/* Row a [N] of the probe's attention: its largest weight, where (*at, the first of equal
 * ones), and its entropy in nats (lesson.c; the probe step's caption and picture). */
float lesson_probe_peak(const float *a, int N, int *at, double *entropy);
/* |v| of v [n], in double. */
double lesson_norm2(const float *v, int n);
/* "mean M   std S" of v [n] (in double, the biased std as numpy's np.std; 3 decimals, no
 * "-0.000"): the label beside each row of the LayerNorm step, in its caption and in
 * steps.json ("label" of each array it draws). */
void lesson_stats_label(char *buf, size_t size, const float *v, int n);

#define LESSON_W 1280 /* the pictures' size: 16:9, legible on a projector */
#define LESSON_H 720

/* Draw step `step` into rgb [h, w, 3] (any size; laid out for LESSON_W x LESSON_H):
 * a title line, the picture of the step's numbers (a diverging blue-white-red scale
 * for signed values, the colormap over the photo for maps), the caption with the shape.
 * `caption` overrides the default caption when not NULL. font may be NULL (no text). */
void lesson_draw(uint8_t *rgb, int w, int h, struct Text *font, const LessonData *ld, int step,
                 int n_steps, int step_index, const char *caption, int colormap);

/* Select a lesson script's line (1-based, row 0: the centre) in ld (lesson_select).
 * Errors: VIT_ERR_ARG (out of range, the message saying what). */
VitStatus lesson_line_select(LessonData *ld, const LessonLine *l, VitError *err);

/* The default lesson (no --lesson): assets/default/lesson.txt, found beside the demo
 * photos' folder demo_dir (ASSETS/default/demo; "" or unreadable: the built-in list of
 * every step, lesson_script_default(-1)); its lines that did not parse are in s->msgs.
 * The window's Page Down and --lesson-export both open it so. -1 when out of memory. */
int lesson_default_load(LessonScript *s, const char *demo_dir);
/* The default lesson fitted to the model as lesson_script_fit says (nothing reported), then
 * checked (lesson_script_check); nothing left: every step the model offers. -1 when out of
 * memory. */
int lesson_default_fit(LessonScript *s, const VitConfig *c);

/* --lesson-export: into dir (created if missing) each step as NN_NAME.png and its arrays
 * as NN_NAME[_PART].npy (float32), steps.json (name, title, caption, layer, head, patch,
 * arrays with their shapes) and lesson.md (the captions in order, the pictures).
 * script NULL: every step in order at layer, head (0-based) and patch (0 .. N-1); else
 * the script's lines (already checked against the model: lesson_script_check), each
 * with its own selection and caption. lesson.md's header says which block, head and patch
 * each run of steps shows. Prints one line to out. 0, or 1 with a message on stderr. */
int lesson_export(FILE *out, const char *dir, const Model *m, const Scene *sc, int layer, int head,
                  int patch, int colormap, const LessonScript *script);

#endif
