/* lessonfile.h - the lesson's steps by name, and lesson scripts: a plain-text file
 * listing the steps a class walks through (docs/lessons.md). No SDL, no GL.
 *
 *   # a comment; blank lines are skipped
 *   STEP [layer=L] [head=H] [patch=ROW,COL] [: caption]
 *
 * STEP is a step's name (LESSON_STEP_NAMES: patches, embedding, ..., head); layer, head
 * and patch are 1-based as on screen and carry over to the lines below until changed
 * (start: layer 1, head 1, the grid's centre); the caption, after a colon, replaces the
 * step's own (which gives the numbers and the shape). */
#ifndef VITLENS_LESSONFILE_H
#define VITLENS_LESSONFILE_H

#include <stddef.h>

#define LESSON_STEP_TOTAL 17 /* the steps a ViT's lesson has, in the seeds' order */
/* Their names, the words of a lesson script and the stems of --lesson-export's files. */
extern const char *const LESSON_STEP_NAMES[LESSON_STEP_TOTAL];
/* The step named name, or -1. */
int lesson_step_find(const char *name);

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
} LessonScript;

/* Parse a script's text: every good line becomes a step; a bad one (unknown step, a
 * malformed or non-positive layer=, head=, patch=, an unknown key) is reported in msgs
 * naming the line and skipped, the rest is kept. name: for the messages. Returns the
 * number of steps, or -1 when out of memory. Free with lesson_script_free. */
int lesson_script_parse(LessonScript *ls, const char *text, const char *name);
/* The file at path, as lesson_script_parse; -1 with msgs set when it cannot be read
 * (or is over 1 MB). */
int lesson_script_load(LessonScript *ls, const char *path);
/* The default lesson: every step in order, layer 1, head 1, the centre patch. */
int lesson_script_default(LessonScript *ls);
/* Against the model: a line whose own layer, head or patch is out of range is reported and
 * dropped, and the lines that carried its values take the last good line's instead;
 * the head step of a model without head (has_head 0) is reported and kept (its
 * picture says so). Returns the steps left. */
int lesson_script_check(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w,
                        int has_head);
/* The lesson that ships beside the built-in model, opened on another model (no --lesson
 * given): a line's layer, head or patch that the model does not have becomes the nearest
 * one it has (the last layer or head, the grid's centre), silently, so that every step
 * stays and nothing is reported for a file the user did not choose. Call before
 * lesson_script_check. */
void lesson_script_fit(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w);
void lesson_script_free(LessonScript *ls);

#endif
