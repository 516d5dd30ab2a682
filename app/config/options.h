/* options.h - the command line: what the options set (Options), parsing it with the
 * options' table (opttable.h), --help, and the key list that --help and the window's
 * help overlay (H) both show. No SDL, no GL. */
#ifndef VITLENS_OPTIONS_H
#define VITLENS_OPTIONS_H

#include "config/settings.h"
#include "view/clip.h"
#include "view/interv.h"
#include "vit.h"

#include <stdio.h>

#define OPTIONS_MAX_IMAGES 4096
#define OPTIONS_MAX        64 /* rows of the options' table (opttable.h) */

typedef struct {
    const char *model_path, *labels_path, *image_path, *export_dir, *save_dir;
    const char *class_arg;     /* --class ID|NAME: the class the class-specific maps explain */
    const char *contrast_arg;  /* --contrast A,B: they explain logit A - logit B instead */
    const char *similar_path;  /* --similar IMAGE2: they explain cos(e, e') with IMAGE2's e' */
    const char *compare_model; /* --compare MODEL2: a second pane, the photo through MODEL2 */
    const char *compare_image; /* --compare-image IMAGE2: a second pane, IMAGE2 beside it */
    const char *image_args[OPTIONS_MAX_IMAGES]; /* every IMAGE (file or folder), the slideshow */
    const char *start_photo; /* the photo to open first (the last one shown), NULL: the first */
    int n_image_args;
    int top_k, stdin_drops, colormap, bilinear;
    int every;              /* --every N: a video's frames 0, N, 2N, ... (0: every frame) */
    float fps;              /* --fps F: at most F of a video's frames per second (0: every frame) */
    const char *camera;     /* --camera DEVICE: a camera's frames instead of IMAGE (headless) */
    int max_frames;         /* --frames N: at most N frames of a video or camera (0: all) */
    int ignore_orientation; /* --ignore-orientation: photos as stored, not turned upright */
    /* --eval (eval.h): faithfulness and sanity checks of every map kind */
    int eval, eval_merge;  /* --eval; --eval-merge (the IMAGE arguments are folders) */
    const char *eval_out;  /* --eval-out DIR: CSVs, summary.md, plots */
    const char *masks_dir; /* --masks DIR: ground-truth masks for localisation */
    int shard_k, shard_n;  /* --shard K/N (K from 1); 0, 0: every image */
    int eval_steps;        /* --eval-steps: deletion / insertion steps (default 20) */
    int no_sanity;         /* --no-sanity: skip the cascading randomisation */
    int agreement;         /* --agreement (headless/agreement.h): the methods' rank correlations */
    /* --lesson-export DIR (headless/lesson.h) and its selection, 1-based, 0: the default */
    const char *lesson_export_dir;
    const char *lesson_path; /* --lesson FILE: a lesson script (view/lessonfile.h) */
    int lesson_layer, lesson_head, lesson_row, lesson_col;
    VitLoadOptions load; /* --heads, --size, --whole */
    IntervSpec interv;   /* --ablate, --drop-patches, --fill-patches, --pos-embed,
                            --pos-seed, --temperature (checked against the model later) */
    ClipSpec clip;       /* --classes, --prompts, --template(s), --text, --vocab (clip.h) */
    char clip_classes_buf[1100], clip_templates_buf[1100]; /* --classes imagenet's files */
    VitAttStorage att; /* VITLENS_ATT: how a run keeps the attention (auto, keep, recompute) */
    float opacity;
    float discard;                    /* rollout's discard ratio, [0, 1) */
    char default_model[1024];         /* the built-in model ("" if not found) */
    char demo_dir[1024];              /* its demo scenes */
    char first_demo[1024];            /* the first of them: the photo when none is given */
    char model_buf[1200];             /* --model NAME: the downloaded model's weights (models.h) */
    char labels_buf[1200];            /* and its labels.txt, when --labels is not given */
    unsigned char given[OPTIONS_MAX]; /* given[i]: OPTIONS[i] was on the command line (then
                                         the settings do not override it) */
    Settings settings;                /* remembered (settings.h): options_apply_settings */
    char settings_path[1200];         /* "" when there is no place for them */
    char settings_msg[600];           /* a problem reading them, "" if none */
} Options;

/* Parse argv into o. 0: go on; 1: --help shown on stdout; 2: usage error (the
 * message printed on stderr). */
int options_parse(Options *o, int argc, char **argv);

/* Read the settings file (settings_path) into o->settings and apply it to what the
 * command line left unset: colormap, opacity, bilinear (--bilinear only turns it on),
 * and in the window (window != 0) the last model, with its labels, when --model is not
 * given and its file is still there (the headless modes keep the built-in model, so that
 * scripts get the same answer wherever they run). A problem is put in o->settings_msg;
 * never fatal. */
void options_apply_settings(Options *o, int window);

/* --model NAME: a downloaded model's weights, and its labels.txt when --labels is not
 * given (models.h); without --model, the built-in model, and the first of its demo
 * scenes when the window gets no photo either; --classes imagenet's files (assets/clip/).
 * 0, or -1 (message printed). */
int options_default_model(Options *o);

/* The usage text, options, keys (keys_list) and environment, to f. */
void options_usage(FILE *f);

#endif
