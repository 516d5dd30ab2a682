/* lessonfile.h - the lesson's steps by name, and lesson scripts: a plain-text file
 * listing the steps a class walks through (docs/lessons.md). No SDL, no GL.
 *
 *   # a comment; blank lines are skipped
 *   STEP [layer=L] [head=H] [patch=ROW,COL] [: caption]
 *
 * STEP is a step's name (LESSON_STEP_INFO[].name: patches, embedding, ..., head); layer, head
 * and patch are 1-based as on screen and carry over to the lines below until changed
 * (start: layer 1, head 1, the grid's centre); the caption, after a colon, replaces the
 * step's own (which gives the numbers and the shape). */
#ifndef VITLENS_LESSONFILE_H
#define VITLENS_LESSONFILE_H

#include <stddef.h>

/* The steps a ViT's lesson has, in the seeds' order; a step is one row of LESSON_STEP_INFO
 * (its name, title, what it reads and needs) and its cases in headless/lesson.c (arrays,
 * caption, drawing). */
enum {
    LESSON_PATCHES,    /* the photo cut into patches; the chosen one's P*P*3 values */
    LESSON_EMBEDDING,  /* that patch's D-dim embedding */
    LESSON_FILTERS,    /* the patch embedding's filters: first 28 principal components */
    LESSON_TOKENS,     /* the sequence: CLS token first, + position embedding */
    LESSON_POSITION,   /* the position embeddings' cosine similarity */
    LESSON_LAYERNORM,  /* block l: norm1 of the query token */
    LESSON_QUERY,      /* its query in head h */
    LESSON_KEYS,       /* every token's key */
    LESSON_ROPE,       /* a rotary model: the query and key rotated, the score per offset */
    LESSON_SCORES,     /* q . k_j / sqrt(Dh) */
    LESSON_SOFTMAX,    /* their softmax: the attention map */
    LESSON_WEIGHTED,   /* the weighted sum of values */
    LESSON_PROJECTION, /* heads concatenated and projected */
    LESSON_RESIDUAL1,  /* the residual add */
    LESSON_MLP,        /* the MLP's hidden units after GELU */
    LESSON_MLP_OUT,    /* the MLP's output */
    LESSON_RESIDUAL2,  /* the second residual add: the block's output */
    LESSON_PROBE,      /* a MAP head: the probe's attention per head, pooled, LayerNorm + MLP */
    LESSON_HEAD,       /* final LayerNorm of the CLS token, logits, softmax, top-5 */
    LESSON_STEP_TOTAL
};

/* What a model has that a step needs (LessonStepInfo.needs, lesson_script_check's `has`;
 * lesson_model_has in headless/lesson.h gives a model's). */
enum { LESSON_NEEDS_HEAD = 1, LESSON_NEEDS_ROPE = 2, LESSON_NEEDS_MAP = 4 };
/* The needs without which a step has nothing to show and is left out of the lesson (a
 * rotary embedding, an attention-pooling head); a head step without a head is kept, its
 * picture saying so. */
#define LESSON_NEEDS_OPTIONAL (LESSON_NEEDS_ROPE | LESSON_NEEDS_MAP)

typedef struct {
    const char *name;  /* the lesson file's word and the files' stem: "patches", ... */
    const char *title; /* "Patches", ... */
    int per_block;     /* 1: reads the block (layer, head, token) */
    int needs;         /* LESSON_NEEDS_*: a head step without a head is shown saying so; a
                          step needing LESSON_NEEDS_OPTIONAL is only in the lessons of the
                          models that have it (RoPE: rotary models, probe: a MAP head) */
} LessonStepInfo;
extern const LessonStepInfo LESSON_STEP_INFO[LESSON_STEP_TOTAL];
/* The step named name, or -1. */
int lesson_step_find(const char *name);
/* 1 when step is in the lessons of a model that has `has` (LESSON_NEEDS_*): its
 * LESSON_NEEDS_OPTIONAL needs are all had. The list of every step a model offers, and how
 * many, is the table filtered by this (lesson_script_default, the export). */
int lesson_step_offered(int step, int has);

#define LESSON_CAPTION_BYTES 256
#define LESSON_MAX_LINES     1000
#define LESSON_MSG_BYTES     2048

typedef struct {
    int step;        /* 0 .. LESSON_STEP_TOTAL-1 */
    int layer, head; /* 1-based */
    int row, col;    /* 1-based; 0: the grid's centre */
    int line;        /* the line of the file it came from (0: built in) */
    int given;       /* what the line sets itself: 1 layer, 2 head, 4 patch (else carried) */
    char caption[LESSON_CAPTION_BYTES]; /* "" : the step's own */
} LessonLine;

typedef struct {
    LessonLine *lines; /* [n], owned */
    int n;
    char name[256];              /* the file's name, for messages */
    char msgs[LESSON_MSG_BYTES]; /* "NAME:LINE: what is wrong" lines, "" when none */
    int n_problems;              /* lines reported in msgs */
    int fitted;                  /* lesson_script_fit made it fit: the checks report nothing */
} LessonScript;

/* Parse a script's text: every good line becomes a step; a bad one (unknown step, a
 * malformed or non-positive layer=, head=, patch=, an unknown key) is reported in msgs
 * naming the line and skipped, the rest is kept. name: for the messages. Returns the
 * number of steps, or -1 when out of memory. Free with lesson_script_free. */
int lesson_script_parse(LessonScript *ls, const char *text, const char *name);
/* The file at path, as lesson_script_parse; -1 with msgs set when it cannot be read
 * (or is over 1 MB). */
int lesson_script_load(LessonScript *ls, const char *path);
/* The built-in lesson: every step a model with `has` offers (lesson_step_offered; -1: every
 * step of the table, for lesson_script_check to drop what the model at hand does not offer,
 * silently: the list is no one's file), in order, layer 1, head 1, the centre patch. */
int lesson_script_default(LessonScript *ls, int has);
/* Against the model: a line whose own layer, head or patch is out of range is reported and
 * dropped, and the lines that carried its values take the last good line's instead;
 * has: the model's LESSON_NEEDS_* (a head, a rotary embedding, a MAP head). The head step of
 * a model without head is reported and kept (its picture says so); a step the model does not
 * offer (lesson_step_offered: RoPE without one, probe without a MAP head) is dropped,
 * reported when a file asked for it (not the built-in list).
 * Returns the steps left. */
int lesson_script_check(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w,
                        int has);
/* The lesson that ships beside the built-in model, opened on another model (no --lesson
 * given): a line's layer, head or patch that the model does not have becomes the nearest
 * one it has (the last layer or head, the grid's centre), silently, so that every step
 * stays and nothing is reported for a file the user did not choose. Call before
 * lesson_script_check. */
/* has: the model's LESSON_NEEDS_*; a step the model offers that needs what the lesson's
 * model did not have (LESSON_NEEDS_OPTIONAL: the RoPE step of a rotary model, the probe
 * step of a MAP head) and that the lesson lacks is added after the first line of the step
 * before it in the table that the lesson has (RoPE after keys, probe after residual2),
 * with its selection. -1 when out of memory. */
int lesson_script_fit(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w, int has);
void lesson_script_free(LessonScript *ls);

#endif
