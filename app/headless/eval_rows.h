/* eval_rows.h - what --eval's files share: the protocol's constants, the methods and the
 * rows a run measures (one per image, per point of a curve, per localisation score, per
 * sanity-check step), and the functions that turn rows into the table, the CSVs and the
 * plots, or read them back. */
#ifndef VITLENS_EVAL_ROWS_H
#define VITLENS_EVAL_ROWS_H

#include "config/options.h"
#include "view/maps.h"

#include <stdio.h>
#include <time.h>

/* ---------------------------------------------------------------------------
 * The protocol's constants (docs/faithfulness.md) */

#define PERTURB_STEPS  10   /* Chefer et al.: 0%, 10%, ..., 100% of the patches removed */
#define BLUR_SIGMA     5.0f /* insertion's start: RISE's gkern(11, 5) */
#define BLUR_RADIUS    5
#define GAUSSIAN_SIGMA 0.25f     /* the centred-Gaussian baseline: sigma = 0.25 * min(gh, gw) */
#define RANDOM_SEED    0x5EEDull /* the random baseline of image i: seed RANDOM_SEED + i */
#define SANITY_SEED    2018u     /* vit_randomized's seed (Adebayo et al. 2018) */
#define SANITY_FLAG    0.5       /* flagged: rho averaged over the cascade >= this */
#define MAX_METHODS    32

enum { TEST_POS, TEST_NEG, TEST_DEL, TEST_INS, N_TESTS };
static const char *const TEST_NAMES[N_TESTS] = {"positive", "negative", "deletion", "insertion"};

/* ---------------------------------------------------------------------------
 * Methods: the map kinds with a value per patch (or pixel), then two baselines */

#define METHOD_RANDOM   (-1)
#define METHOD_GAUSSIAN (-2)

typedef struct {
    char tag[32];  /* in the CSVs: the kind's file tag, "random", "gaussian" */
    char name[64]; /* in the table */
    int kind;      /* MapKind, or METHOD_RANDOM / METHOD_GAUSSIAN */
} Method;

/* ---------------------------------------------------------------------------
 * Rows */

typedef struct {
    int image; /* index in the whole (unsharded) list */
    char path[1024];
    char status[640];    /* "ok", else why it was skipped */
    int target;          /* the class evaluated (the top-1, or --class) */
    float prob;          /* its probability on the photo */
    int has_mask;        /* 1: localisation rows; 0 none; -1 a mask that did not fit (status2) */
    char mask_note[640]; /* the mask file, or why it does not fit */
} ImageRow;

typedef struct {
    int image, method, test, step, n_steps; /* fraction removed or inserted: step / n_steps */
    float prob;                             /* the target's probability */
    int top1;                               /* 1: the top-1 is the target */
} CurveRow;

typedef struct {
    int image, method;
    double pointing, energy, iou;
} LocRow;

typedef struct {
    int image, method, blocks; /* blocks re-initialised besides the head (0 .. L) */
    double rho;                /* Spearman with the trained model's map; NaN: a constant map */
} SanityRow;

typedef struct {
    char model[1024];
    int n_layers, n_patches, steps, n_images_total;
    Method methods[MAX_METHODS];
    int n_methods;
    ImageRow *im;
    CurveRow *cu;
    LocRow *lo;
    SanityRow *sa;
    size_t n_im, n_cu, n_lo, n_sa, cap_im, cap_cu, cap_lo, cap_sa;
} Rows;

/* Append one zeroed row to a growing array; NULL when out of memory. ADD(r, cu): a new
 * CurveRow of r. */
void *rows_grow(void **arr, size_t *n, size_t *cap, size_t size);
#define ADD(r, field)                                                                              \
    rows_grow((void **)&(r)->field, &(r)->n_##field, &(r)->cap_##field, sizeof *(r)->field)

/* Free r's arrays and zero it. */
void rows_free(Rows *r);
/* Sort every array: image, then method, then test and step (or blocks). */
void rows_sort(Rows *r);

/* The method of a tag, as this build knows it: 0, or -1 when unknown. */
int method_of_tag(Method *out, const char *tag);
/* The methods for a model: every kind that gives a scalar map (not the PCA's colours),
 * the class-specific ones only with a head; then the baselines. Returns how many. */
int methods_for(Method *m, const VitConfig *cfg);

/* ---------------------------------------------------------------------------
 * Running the model (eval.c), shared with --agreement (agreement.c) */

/* The model ready for --eval or --agreement: CLIP's classes from --classes or --text, the
 * interventions built into iv. 0, or the exit code with the message printed: 1 (no
 * classes, no head), 2 (bad usage: --drop-patches, an intervention the model does not
 * have). */
int eval_model_ready(Model *m, Interv *iv, const Options *o);
/* A run's model and photos: the model of o->model_path loaded and made ready
 * (eval_model_ready), the arguments' files and folders expanded (files_expand), and the
 * photos selected: masks (NAME_mask.png, NAME_mask0.png) are not; photo g of the whole run
 * (n_all) is paths[all[g]]; this shard's (--shard) are sel [n_sel]. */
typedef struct {
    Model m;
    Interv iv;
    char **paths;
    int n_paths, *sel, *all, n_sel, n_all;
} EvalPhotos;
/* p opened for o: 0, or the exit code with the message printed (1, 2 as eval_model_ready).
 * Free with eval_photos_free, also after a failure. */
int eval_photos_open(EvalPhotos *p, const Options *o);
void eval_photos_free(EvalPhotos *p);
/* Image rows im [n] of merged shards, sorted by image: 0, or 1 (said on stderr) when an
 * image is in two shards (it would be counted twice). */
int eval_check_shards(const ImageRow *im, size_t n);
/* The class a photo's maps explain: --text's phrase, --class, else the top-1 of sc's run.
 * 0, or 1 with msg [n] saying why (a --class the labels do not have). */
int eval_target(int *target, const Model *m, const Scene *sc, const Options *o, char *msg,
                size_t n);
/* The class-specific maps of target into sc (scene_explain with AttnLRP's pass), when the
 * model has a head. */
VitStatus eval_explain(Scene *sc, int target, float discard, VitError *err);
/* Method me's map for sc's photo reduced to the patches, out [N] (vit_map_to_patches: a
 * pixel map summed per patch): the kinds read the last layer, the mean of the heads and
 * the CLS token as the query (docs/faithfulness.md); the class-specific ones target's
 * maps, made by eval_explain; the random baseline vit_random_map(RANDOM_SEED + image).
 * scratch: map_kind_max_floats(cfg, 0) floats. */
VitStatus eval_method_map(float *out, float *scratch, const Method *me, Scene *sc, int image,
                          int target, float discard, VitError *err);

/* Progress on stderr: a 30-character bar redrawn in place (\r), once a run has taken a
 * second; nothing when stderr is not a terminal (logs and CI stay clean). Start it with
 * tty = isatty(2) and t0 = clock_gettime(CLOCK_MONOTONIC). */
typedef struct {
    struct timespec t0;
    int shown, tty;
} Progress;
void eval_progress(Progress *p, const char *what, int done, int total);

/* ---------------------------------------------------------------------------
 * Output and input */

/* The summary of the rows as a markdown table, to f. */
void eval_write_table(FILE *f, const Rows *r);
/* The rows as dir/images.csv, perturbation.csv, localisation.csv, sanity.csv. 0, or 1
 * with a message on stderr. */
int eval_write_csvs(const char *dir, const Rows *r);
/* dir/name opened for writing (its path into path); NULL with a message on stderr. */
FILE *eval_open_out(const char *dir, const char *name, char *path, size_t n);
/* Close f, written to path: 0, or 1 with a message on stderr. */
int eval_close_out(FILE *f, const char *path);
/* s as one CSV field: quoted (and its quotes doubled) when it holds , " or a line break. */
void eval_csv_field(FILE *f, const char *s);
/* dir/name opened for reading, its path into path [n] for the messages; NULL (said on
 * stderr) when it cannot be read. */
FILE *eval_open_in(const char *dir, const char *name, char *path, size_t n);
/* "PATH: line N: WHAT" on stderr; returns 1. */
int eval_bad_row(const char *path, int line, const char *what);
/* An int (within +-1e9) / a double (nan allowed) field parsed whole: 0, or -1. */
int eval_parse_int(const char *s, int *out);
int eval_parse_double(const char *s, double *out);
/* Split a CSV line in place into at most max fields (quoted fields unquoted); how many. */
int eval_csv_split(char *line, char **fields, int max);
/* Read an --eval-out folder's rows into r (first: the first folder, whose run the others
 * must match). 0, or 1 with a message naming the file and line on stderr. */
int eval_read_folder(Rows *r, const char *dir, int first);
/* The table (stdout), and with out_dir the CSVs, summary.md and the plots. 0, or 1. */
int eval_finish(const Rows *r, const char *out_dir);

#endif
