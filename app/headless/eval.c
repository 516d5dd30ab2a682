/* eval.c - vitlens --eval and --eval-merge (eval.h; the protocol: docs/faithfulness.md).
 *
 * Everything a run measures becomes rows (Rows): one per image, one per point of
 * every perturbation curve, one per localisation score, one per sanity-check step.
 * The table, the CSV files and the plots are made from the rows alone, sorted, so
 * that shards merged (--eval-merge reads the rows back from the CSVs, which print
 * every number so that it reads back exactly) give the table the whole run gives. */
#include "headless/eval.h"
#include "config/files.h"
#include "view/mapkind.h"
#include "headless/plot.h"
#include "view/scene.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* The method of a tag, as this build knows it (-1: unknown). */
static int method_of_tag(Method *out, const char *tag) {
    for (int k = 0; k < MAP_KIND_COUNT; k++)
        if (!strcmp(MAP_KINDS[k].tag, tag)) {
            snprintf(out->tag, sizeof out->tag, "%s", tag);
            snprintf(out->name, sizeof out->name, "%s", MAP_KINDS[k].name);
            out->kind = k;
            return 0;
        }
    if (!strcmp(tag, "random") || !strcmp(tag, "gaussian")) {
        int r = !strcmp(tag, "random");
        snprintf(out->tag, sizeof out->tag, "%s", tag);
        snprintf(out->name, sizeof out->name, "%s",
                 r ? "random (baseline)" : "centred Gaussian (baseline)");
        out->kind = r ? METHOD_RANDOM : METHOD_GAUSSIAN;
        return 0;
    }
    return -1;
}

/* The methods for a model: every kind that gives a scalar map (not the PCA's
 * colours), the class-specific ones only with a head; then the baselines. */
static int methods_for(Method *m, const VitConfig *cfg) {
    int n = 0;
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        if (MAP_KINDS[k].rgb || (MAP_KINDS[k].uses_target && cfg->n_classes == 0)) continue;
        method_of_tag(&m[n++], MAP_KINDS[k].tag);
    }
    method_of_tag(&m[n++], "random");
    method_of_tag(&m[n++], "gaussian");
    return n;
}

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

/* Append one zeroed row to a growing array; NULL when out of memory. */
static void *grow(void **arr, size_t *n, size_t *cap, size_t size) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        void *p = realloc(*arr, c * size);
        if (!p) return NULL;
        *arr = p, *cap = c;
    }
    char *row = (char *)*arr + (*n)++ * size;
    memset(row, 0, size);
    return row;
}
#define ADD(r, field)                                                                              \
    grow((void **)&(r)->field, &(r)->n_##field, &(r)->cap_##field, sizeof *(r)->field)

static void rows_free(Rows *r) {
    free(r->im), free(r->cu), free(r->lo), free(r->sa);
    memset(r, 0, sizeof *r);
}

/* Sort order: image, then method, then test and step (or blocks). */
static int cmp_image(const void *a, const void *b) {
    const ImageRow *x = a, *y = b;
    return (x->image > y->image) - (x->image < y->image);
}
static int cmp_curve(const void *a, const void *b) {
    const CurveRow *x = a, *y = b;
    if (x->image != y->image) return x->image < y->image ? -1 : 1;
    if (x->method != y->method) return x->method < y->method ? -1 : 1;
    if (x->test != y->test) return x->test < y->test ? -1 : 1;
    return (x->step > y->step) - (x->step < y->step);
}
static int cmp_loc(const void *a, const void *b) {
    const LocRow *x = a, *y = b;
    if (x->image != y->image) return x->image < y->image ? -1 : 1;
    return (x->method > y->method) - (x->method < y->method);
}
static int cmp_sanity(const void *a, const void *b) {
    const SanityRow *x = a, *y = b;
    if (x->image != y->image) return x->image < y->image ? -1 : 1;
    if (x->method != y->method) return x->method < y->method ? -1 : 1;
    return (x->blocks > y->blocks) - (x->blocks < y->blocks);
}

/* (An empty array is NULL, which qsort must not be given even with 0 elements.) */
static void rows_sort(Rows *r) {
    if (r->n_im) qsort(r->im, r->n_im, sizeof *r->im, cmp_image);
    if (r->n_cu) qsort(r->cu, r->n_cu, sizeof *r->cu, cmp_curve);
    if (r->n_lo) qsort(r->lo, r->n_lo, sizeof *r->lo, cmp_loc);
    if (r->n_sa) qsort(r->sa, r->n_sa, sizeof *r->sa, cmp_sanity);
}

/* ---------------------------------------------------------------------------
 * The table */

typedef struct {
    double auc_sum[N_TESTS], top1_sum[2]; /* AUCs in %, summed over images */
    int n_curves[N_TESTS];
    double loc_sum[3];
    int n_loc[3];
    double *rho_sum; /* [L + 1] by blocks */
    int *n_rho;
} Summary;

/* AUC of one curve: rows [i0, i1) of one image, method and test, by step. */
static void curve_auc(const CurveRow *c, size_t i0, size_t i1, double *auc_prob, double *auc_top1) {
    float prob[1024], top1[1024];
    int n = 0;
    for (size_t i = i0; i < i1 && n < 1024; i++, n++)
        prob[n] = c[i].prob, top1[n] = (float)c[i].top1;
    *auc_prob = n >= 2 ? 100.0 * vit_auc(prob, n) : NAN;
    *auc_top1 = n >= 2 ? 100.0 * vit_auc(top1, n) : NAN;
}

/* Per method, the means over images of every score. s [n_methods], rho_sum and n_rho
 * [n_methods, L + 1] owned by the caller. */
static void summarise(Summary *s, double *rho_sum, int *n_rho, const Rows *r) {
    int L1 = r->n_layers + 1;
    memset(s, 0, (size_t)r->n_methods * sizeof *s);
    for (int m = 0; m < r->n_methods; m++) {
        s[m].rho_sum = rho_sum + (size_t)m * L1, s[m].n_rho = n_rho + (size_t)m * L1;
        memset(s[m].rho_sum, 0, (size_t)L1 * sizeof *rho_sum);
        memset(s[m].n_rho, 0, (size_t)L1 * sizeof *n_rho);
    }
    for (size_t i = 0; i < r->n_cu;) {
        size_t j = i;
        while (j < r->n_cu && r->cu[j].image == r->cu[i].image &&
               r->cu[j].method == r->cu[i].method && r->cu[j].test == r->cu[i].test)
            j++;
        double ap, at;
        curve_auc(r->cu, i, j, &ap, &at);
        Summary *m = &s[r->cu[i].method];
        int t = r->cu[i].test;
        m->auc_sum[t] += ap, m->n_curves[t]++;
        if (t < 2) m->top1_sum[t] += at;
        i = j;
    }
    for (size_t i = 0; i < r->n_lo; i++) {
        Summary *m = &s[r->lo[i].method];
        double v[3] = {r->lo[i].pointing, r->lo[i].energy, r->lo[i].iou};
        for (int k = 0; k < 3; k++)
            if (!isnan(v[k])) m->loc_sum[k] += v[k], m->n_loc[k]++;
    }
    for (size_t i = 0; i < r->n_sa; i++) {
        const SanityRow *q = &r->sa[i];
        if (q->blocks < 0 || q->blocks >= L1 || isnan(q->rho)) continue;
        s[q->method].rho_sum[q->blocks] += q->rho, s[q->method].n_rho[q->blocks]++;
    }
}

static void cell(FILE *f, double sum, int n, const char *fmt) {
    if (n > 0)
        fprintf(f, " "), fprintf(f, fmt, sum / n), fprintf(f, " |");
    else
        fprintf(f, " - |");
}

/* The markdown table and the lines under it. */
static void write_table(FILE *f, const Rows *r) {
    int L1 = r->n_layers + 1;
    Summary s[MAX_METHODS];
    double *rho_sum = calloc((size_t)r->n_methods * L1, sizeof *rho_sum);
    int *n_rho = calloc((size_t)r->n_methods * L1, sizeof *n_rho);
    if (!rho_sum || !n_rho) {
        free(rho_sum), free(n_rho);
        fprintf(f, "(out of memory for the table)\n");
        return;
    }
    summarise(s, rho_sum, n_rho, r);
    int n_ok = 0, n_skip = 0, n_mask = 0, n_bad_mask = 0;
    for (size_t i = 0; i < r->n_im; i++) {
        int ok = !strcmp(r->im[i].status, "ok");
        n_ok += ok, n_skip += !ok;
        n_mask += ok && r->im[i].has_mask == 1, n_bad_mask += ok && r->im[i].has_mask < 0;
    }
    fprintf(f, "| method | pos. top-1 AUC ↓ | neg. top-1 AUC ↑ | pos. prob AUC ↓ | neg. prob AUC ↑ "
               "| deletion AUC ↓ | insertion AUC ↑ | pointing ↑ | energy ↑ | top-k IoU ↑ "
               "| sanity ρ ↓ |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int m = 0; m < r->n_methods; m++) {
        const Summary *q = &s[m];
        fprintf(f, "| %s |", r->methods[m].name);
        cell(f, q->top1_sum[TEST_POS], q->n_curves[TEST_POS], "%.1f");
        cell(f, q->top1_sum[TEST_NEG], q->n_curves[TEST_NEG], "%.1f");
        cell(f, q->auc_sum[TEST_POS], q->n_curves[TEST_POS], "%.1f");
        cell(f, q->auc_sum[TEST_NEG], q->n_curves[TEST_NEG], "%.1f");
        cell(f, q->auc_sum[TEST_DEL], q->n_curves[TEST_DEL], "%.1f");
        cell(f, q->auc_sum[TEST_INS], q->n_curves[TEST_INS], "%.1f");
        for (int k = 0; k < 3; k++) cell(f, q->loc_sum[k], q->n_loc[k], "%.3f");
        /* the mean over the cascade's steps (head, then 1 .. L blocks) of the mean rho */
        double rho = 0.0;
        int steps = 0;
        for (int b = 0; b < L1; b++)
            if (q->n_rho[b] > 0) rho += q->rho_sum[b] / q->n_rho[b], steps++;
        if (steps > 0) {
            rho /= steps;
            fprintf(f, " %.3f%s |", rho, rho >= SANITY_FLAG ? " (!)" : "");
        } else {
            fprintf(f, " - |");
        }
        fprintf(f, "\n");
    }
    fprintf(f,
            "\n%d image%s evaluated, %d skipped; %d with a mask%s. AUCs in %% over the fraction "
            "of patches removed or inserted (positive, negative: %d steps of 10%%; deletion, "
            "insertion: %d steps). Sanity ρ: Spearman correlation with the trained model's map, "
            "averaged over the images and over the %d steps of the cascade (the head, then 1 to "
            "%d blocks re-initialised from the top); (!) marks ρ ≥ %.1f, a map that barely "
            "depends on the weights.\n",
            n_ok, n_ok == 1 ? "" : "s", n_skip, n_mask,
            n_bad_mask ? " (some masks did not fit: see images.csv)" : "", PERTURB_STEPS, r->steps,
            L1, r->n_layers, SANITY_FLAG);
    for (size_t i = 0; i < r->n_im; i++)
        if (strcmp(r->im[i].status, "ok")) fprintf(f, "skipped: %s\n", r->im[i].status);
    free(rho_sum), free(n_rho);
}

/* ---------------------------------------------------------------------------
 * CSV: numbers printed so that they read back exactly (%.9g float, %.17g double) */

/* A field, quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Split one line into at most max fields (quotes as csv_field writes them), in place. */
static int csv_split(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    line[strcspn(line, "\r\n")] = '\0';
    while (n < max) {
        if (*p == '"') {
            char *w = ++p;
            fields[n++] = w;
            for (;;) {
                if (!*p) break;
                if (*p == '"' && p[1] == '"')
                    *w++ = '"', p += 2;
                else if (*p == '"') {
                    p++;
                    break;
                } else
                    *w++ = *p++;
            }
            *w = '\0';
            if (*p == ',')
                p++;
            else
                break;
        } else {
            fields[n++] = p;
            char *c = strchr(p, ',');
            if (!c) break;
            *c = '\0', p = c + 1;
        }
    }
    return n;
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "vitlens: %s: cannot write: %s\n", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path) {
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "vitlens: %s: write failed\n", path);
        return 1;
    }
    return 0;
}

static int write_csvs(const char *dir, const Rows *r) {
    char path[2048];
    FILE *f = open_out(dir, "eval.csv", path, sizeof path);
    if (!f) return 1;
    fprintf(f, "model,layers,patches,steps,images_total\n");
    csv_field(f, r->model);
    fprintf(f, ",%d,%d,%d,%d\n", r->n_layers, r->n_patches, r->steps, r->n_images_total);
    if (close_out(f, path)) return 1;

    if (!(f = open_out(dir, "images.csv", path, sizeof path))) return 1;
    fprintf(f, "image,path,status,class,prob,mask,mask_note\n");
    for (size_t i = 0; i < r->n_im; i++) {
        const ImageRow *q = &r->im[i];
        fprintf(f, "%d,", q->image);
        csv_field(f, q->path), fputc(',', f), csv_field(f, q->status);
        fprintf(f, ",%d,%.9g,%d,", q->target, (double)q->prob, q->has_mask);
        csv_field(f, q->mask_note), fputc('\n', f);
    }
    if (close_out(f, path)) return 1;

    if (!(f = open_out(dir, "perturbation.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,test,step,steps,fraction,prob,top1_kept\n");
    for (size_t i = 0; i < r->n_cu; i++) {
        const CurveRow *q = &r->cu[i];
        fprintf(f, "%d,%s,%s,%d,%d,%.6g,%.9g,%d\n", q->image, r->methods[q->method].tag,
                TEST_NAMES[q->test], q->step, q->n_steps, (double)q->step / q->n_steps,
                (double)q->prob, q->top1);
    }
    if (close_out(f, path)) return 1;

    if (!(f = open_out(dir, "localisation.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,pointing,energy,topk_iou\n");
    for (size_t i = 0; i < r->n_lo; i++) {
        const LocRow *q = &r->lo[i];
        fprintf(f, "%d,%s,%.17g,%.17g,%.17g\n", q->image, r->methods[q->method].tag, q->pointing,
                q->energy, q->iou);
    }
    if (close_out(f, path)) return 1;

    if (!(f = open_out(dir, "sanity.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,blocks_randomised,spearman\n");
    for (size_t i = 0; i < r->n_sa; i++) {
        const SanityRow *q = &r->sa[i];
        fprintf(f, "%d,%s,%d,%.17g\n", q->image, r->methods[q->method].tag, q->blocks, q->rho);
    }
    return close_out(f, path);
}

/* ---------------------------------------------------------------------------
 * Reading an --eval-out folder back (--eval-merge) */

static FILE *open_in(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "vitlens: %s: cannot read: %s\n", path, strerror(errno));
    return f;
}

static int bad_row(const char *path, int line, const char *what) {
    fprintf(stderr, "vitlens: %s: line %d: %s\n", path, line, what);
    return 1;
}

/* The index of a method tag in r->methods, added when new; -1 unknown to this build. */
static int method_index(Rows *r, const char *tag) {
    for (int m = 0; m < r->n_methods; m++)
        if (!strcmp(r->methods[m].tag, tag)) return m;
    if (r->n_methods == MAX_METHODS) return -1;
    if (method_of_tag(&r->methods[r->n_methods], tag)) return -1;
    return r->n_methods++;
}

static int test_index(const char *name) {
    for (int t = 0; t < N_TESTS; t++)
        if (!strcmp(TEST_NAMES[t], name)) return t;
    return -1;
}

/* Parse an int / a double field whole; 0 on success. */
static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -1000000000L || v > 1000000000L) return -1;
    *out = (int)v;
    return 0;
}
static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end == s || *end ? -1 : 0;
}

static int read_folder(Rows *r, const char *dir, int first) {
    char path[2048], line[8192], *fl[12];
    int ln;
    FILE *f = open_in(dir, "eval.csv", path, sizeof path);
    if (!f) return 1;
    int n_layers = 0, n_patches = 0, steps = 0, total = 0, bad = 0;
    if (!fgets(line, sizeof line, f) || !fgets(line, sizeof line, f) ||
        csv_split(line, fl, 12) != 5 || parse_int(fl[1], &n_layers) ||
        parse_int(fl[2], &n_patches) || parse_int(fl[3], &steps) || parse_int(fl[4], &total) ||
        n_layers < 1 || n_layers > VIT_MAX_LAYERS)
        bad = bad_row(path, 2, "expected model,layers,patches,steps,images_total");
    fclose(f);
    if (bad) return 1;
    if (first) {
        snprintf(r->model, sizeof r->model, "%s", fl[0]);
        r->n_layers = n_layers, r->n_patches = n_patches, r->steps = steps,
        r->n_images_total = total;
    } else if (strcmp(r->model, fl[0]) || r->n_layers != n_layers || r->n_patches != n_patches ||
               r->steps != steps || r->n_images_total != total) {
        fprintf(stderr,
                "vitlens: %s: another run's shard (model %s, %d steps, %d images; the first "
                "folder's: %s, %d steps, %d images)\n",
                path, fl[0], steps, total, r->model, r->steps, r->n_images_total);
        return 1;
    }

    if (!(f = open_in(dir, "images.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        ImageRow *q = ADD(r, im);
        double p;
        if (!q)
            bad = bad_row(path, ln, "out of memory");
        else if (csv_split(line, fl, 12) != 7 || parse_int(fl[0], &q->image) ||
                 parse_int(fl[3], &q->target) || parse_double(fl[4], &p) ||
                 parse_int(fl[5], &q->has_mask))
            bad = bad_row(path, ln, "expected image,path,status,class,prob,mask,mask_note");
        else {
            q->prob = (float)p;
            snprintf(q->path, sizeof q->path, "%.1000s", fl[1]);
            snprintf(q->status, sizeof q->status, "%.600s", fl[2]);
            snprintf(q->mask_note, sizeof q->mask_note, "%.600s", fl[6]);
        }
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = open_in(dir, "perturbation.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        CurveRow *q = ADD(r, cu);
        double p;
        if (!q)
            bad = bad_row(path, ln, "out of memory");
        else if (csv_split(line, fl, 12) != 8 || parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 || (q->test = test_index(fl[2])) < 0 ||
                 parse_int(fl[3], &q->step) || parse_int(fl[4], &q->n_steps) ||
                 parse_double(fl[6], &p) || parse_int(fl[7], &q->top1))
            bad =
                bad_row(path, ln, "expected image,method,test,step,steps,fraction,prob,top1_kept");
        else
            q->prob = (float)p;
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = open_in(dir, "localisation.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        LocRow *q = ADD(r, lo);
        if (!q)
            bad = bad_row(path, ln, "out of memory");
        else if (csv_split(line, fl, 12) != 5 || parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 || parse_double(fl[2], &q->pointing) ||
                 parse_double(fl[3], &q->energy) || parse_double(fl[4], &q->iou))
            bad = bad_row(path, ln, "expected image,method,pointing,energy,topk_iou");
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = open_in(dir, "sanity.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        SanityRow *q = ADD(r, sa);
        if (!q)
            bad = bad_row(path, ln, "out of memory");
        else if (csv_split(line, fl, 12) != 4 || parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 || parse_int(fl[2], &q->blocks) ||
                 parse_double(fl[3], &q->rho))
            bad = bad_row(path, ln, "expected image,method,blocks_randomised,spearman");
    }
    fclose(f);
    return bad;
}

/* ---------------------------------------------------------------------------
 * Plots */

/* The mean curve of every method for one test, and the sanity check's mean rho per
 * step, as PNGs (plot.h). */
static int write_plots(const char *dir, const Rows *r) {
    int rc = 0;
    for (int t = 0; t < N_TESTS; t++) {
        int n_steps = t < 2 ? PERTURB_STEPS : r->steps, n = n_steps + 1;
        PlotSeries s[MAX_METHODS];
        float *y = calloc((size_t)r->n_methods * n, sizeof *y),
              *cnt = calloc((size_t)r->n_methods * n, sizeof *cnt);
        if (!y || !cnt) {
            free(y), free(cnt);
            return 1;
        }
        for (size_t i = 0; i < r->n_cu; i++) {
            const CurveRow *q = &r->cu[i];
            if (q->test != t || q->step > n_steps) continue;
            y[(size_t)q->method * n + q->step] += t < 2 ? 100.0f * q->top1 : 100.0f * q->prob;
            cnt[(size_t)q->method * n + q->step] += 1.0f;
        }
        for (int m = 0; m < r->n_methods; m++) {
            for (int k = 0; k < n; k++)
                y[(size_t)m * n + k] = cnt[(size_t)m * n + k] > 0
                                           ? y[(size_t)m * n + k] / cnt[(size_t)m * n + k]
                                           : NAN;
            s[m].name = r->methods[m].name, s[m].y = y + (size_t)m * n, s[m].n = n;
            s[m].dashed = r->methods[m].kind < 0;
        }
        char file[64], title[160];
        snprintf(file, sizeof file, "%s.png", TEST_NAMES[t]);
        snprintf(title, sizeof title, "%s%s: %s of the predicted class", TEST_NAMES[t],
                 t < 2 ? " perturbation" : "", t < 2 ? "top-1 kept (%)" : "probability (%)");
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        const char *xl = t == TEST_INS ? "patches inserted (%)" : "patches removed (%)";
        rc |= plot_lines(path, title, xl, 0.0f, 100.0f, 0.0f, 100.0f, s, r->n_methods);
        free(y), free(cnt);
    }
    /* sanity: mean rho against blocks randomised */
    int n = r->n_layers + 1;
    PlotSeries s[MAX_METHODS];
    float *y = calloc((size_t)r->n_methods * n, sizeof *y),
          *cnt = calloc((size_t)r->n_methods * n, sizeof *cnt);
    if (!y || !cnt) {
        free(y), free(cnt);
        return 1;
    }
    int ns = 0;
    for (size_t i = 0; i < r->n_sa; i++) {
        const SanityRow *q = &r->sa[i];
        if (q->blocks < 0 || q->blocks >= n || isnan(q->rho)) continue;
        y[(size_t)q->method * n + q->blocks] += (float)q->rho,
            cnt[(size_t)q->method * n + q->blocks] += 1.0f;
    }
    for (int m = 0; m < r->n_methods; m++) {
        if (r->methods[m].kind < 0) continue;
        for (int k = 0; k < n; k++)
            y[(size_t)m * n + k] =
                cnt[(size_t)m * n + k] > 0 ? y[(size_t)m * n + k] / cnt[(size_t)m * n + k] : NAN;
        s[ns].name = r->methods[m].name, s[ns].y = y + (size_t)m * n, s[ns].n = n, s[ns].dashed = 0;
        ns++;
    }
    char path[2048], xl[96];
    snprintf(path, sizeof path, "%s/sanity.png", dir);
    snprintf(xl, sizeof xl, "head, then blocks re-initialised from the top (0 .. %d)", r->n_layers);
    if (r->n_sa)
        rc |=
            plot_lines(path, "sanity check: Spearman rank correlation with the trained model's map",
                       xl, 0.0f, (float)r->n_layers, -1.0f, 1.0f, s, ns);
    free(y), free(cnt);
    return rc;
}

/* The table (stdout), and with a folder the CSVs, summary.md and the plots. */
static int finish(const Rows *r, const char *out_dir) {
    write_table(stdout, r);
    fflush(stdout);
    if (!out_dir) return 0;
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "vitlens: %s: cannot create directory: %s\n", out_dir, strerror(errno));
        return 1;
    }
    int rc = write_csvs(out_dir, r);
    char path[2048];
    FILE *f = open_out(out_dir, "summary.md", path, sizeof path);
    if (!f) return 1;
    write_table(f, r);
    rc |= close_out(f, path);
    rc |= write_plots(out_dir, r);
    return rc;
}

/* ---------------------------------------------------------------------------
 * One image */

typedef struct {
    const Options *o;
    Model *m;
    Rows *r;
    VitBatch batch;
    int batch_max;
    float *inputs; /* [batch_max, 3, Sh, Sw] */
    float *probs;  /* [counts, C]: every input of a family */
    float *blurred;
    float *scratch; /* one map of any kind */
    int *order;
    int *counts; /* [2 * (steps + PERTURB_STEPS + 2)] patches removed, per input of a family */
    uint8_t *pixmask, *patchmask; /* [Sh * Sw], [N] */
    uint8_t *crop;                /* [Sh, Sw, 3] */
} Eval;

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static VitStatus oom(VitError *err) {
    if (err) err->code = VIT_ERR_NOMEM, snprintf(err->msg, sizeof err->msg, "out of memory");
    return VIT_ERR_NOMEM;
}

/* Method m's map for sc's photo, per patch: out [N]. The kinds read the last
 * layer, the mean of the heads and the CLS token as the query (docs/faithfulness.md). */
static VitStatus method_map(float *out, Eval *e, const Method *me, Scene *sc, int image, int target,
                            VitError *err) {
    const VitConfig *c = &sc->vit->cfg;
    if (me->kind == METHOD_RANDOM) {
        vit_random_map(out, c->n_patches, RANDOM_SEED + (uint64_t)image);
        return VIT_OK;
    }
    if (me->kind == METHOD_GAUSSIAN) {
        vit_gaussian_map(out, c->grid_h, c->grid_w, GAUSSIAN_SIGMA);
        return VIT_OK;
    }
    View v = {.kind = me->kind,
              .layer = c->n_layers - 1,
              .head = c->n_heads + VIT_FUSE_MEAN,
              .discard_ratio = e->o->discard,
              .query = 0,
              .target = target};
    if (view_on_worker(&v)) {
        VitStatus rc = scene_slow_map(sc, &v, NULL, err);
        if (rc) return rc;
        scene_slow_swap(sc);
    }
    VitStatus rc = view_map(e->scratch, sc, &v, err);
    if (rc) return rc;
    vit_map_to_patches(out, e->scratch, c, MAP_KINDS[me->kind].pixels);
    return VIT_OK;
}

/* The class-specific maps of target, when the methods need them. */
static VitStatus explain(Scene *sc, int target, float discard, VitError *err) {
    if (sc->vit->cfg.n_classes == 0) return VIT_OK;
    VitStatus rc = scene_explain(sc, target, discard, 1, err);
    if (!rc) scene_explain_swap(sc);
    return rc;
}

/* Perturbation, deletion and insertion curves of one map. Positive perturbation and
 * deletion remove patches in the same order to the same fill, so their inputs are
 * one family, forwarded once per count of patches removed (with 20 deletion steps,
 * every positive step is one of them); negative and insertion are a family each. */
static VitStatus perturb(Eval *e, const Scene *sc, const float *map, int image, int method,
                         int target, VitError *err) {
    const VitConfig *c = &sc->vit->cfg;
    size_t sz = (size_t)3 * c->image_h * c->image_w;
    int N = c->n_patches, C = c->n_classes;
    enum { FAM_MOST, FAM_LEAST, FAM_INSERT };
    static const int family_of[N_TESTS] = {FAM_MOST, FAM_LEAST, FAM_MOST, FAM_INSERT};
    for (int fam = FAM_MOST; fam <= FAM_INSERT; fam++) {
        /* the counts this family's tests ask for, each once, increasing */
        int n_counts = 0;
        for (int t = 0; t < N_TESTS; t++) {
            if (family_of[t] != fam) continue;
            int n_steps = t < 2 ? PERTURB_STEPS : e->r->steps;
            for (int s = 0; s <= n_steps; s++)
                e->counts[n_counts++] = vit_perturb_count(s, n_steps, N);
        }
        qsort(e->counts, (size_t)n_counts, sizeof *e->counts, cmp_int);
        int u = 0;
        for (int i = 0; i < n_counts; i++)
            if (!u || e->counts[i] != e->counts[u - 1]) e->counts[u++] = e->counts[i];
        n_counts = u;
        VitStatus rc = vit_patch_order(e->order, map, N, fam != FAM_LEAST, err);
        if (rc) return rc;
        const float *base = fam == FAM_INSERT ? e->blurred : sc->run.input;
        const float *fill = fam == FAM_INSERT ? sc->run.input : NULL;
        for (int i0 = 0; i0 < n_counts; i0 += e->batch_max) {
            int n = n_counts - i0 < e->batch_max ? n_counts - i0 : e->batch_max;
            for (int k = 0; k < n; k++)
                vit_patch_mix(e->inputs + (size_t)k * sz, base, fill, c, e->order,
                              e->counts[i0 + k]);
            if ((rc = vit_forward_batch(&e->batch, &e->m->vit, e->inputs, n, NULL,
                                        e->probs + (size_t)i0 * C, err)))
                return rc;
        }
        for (int t = 0; t < N_TESTS; t++) {
            if (family_of[t] != fam) continue;
            int n_steps = t < 2 ? PERTURB_STEPS : e->r->steps;
            for (int s = 0; s <= n_steps; s++) {
                int count = vit_perturb_count(s, n_steps, N), i = 0, top;
                while (e->counts[i] != count) i++;
                const float *p = e->probs + (size_t)i * C;
                vit_top_k(&top, p, C, 1);
                CurveRow *q = ADD(e->r, cu);
                if (!q) return oom(err);
                *q = (CurveRow){image, method, t, s, n_steps, p[target], top == target};
            }
        }
    }
    return VIT_OK;
}

/* The mask of photo `path` in o->masks_dir: DIR/STEM_mask.png, else DIR/STEM.png when
 * that is not the photo itself (red channel >= 128 is inside), brought to the model's crop as the
 * photo is (vit_preprocess_rgb) and to patches (half a patch's pixels or more). 1 with e->patchmask
 * filled, 0 when there is none, -1 when it does not fit (note says why). */
static int load_mask(Eval *e, const Scene *sc, const char *path, char *note, size_t n) {
    const char *dir = e->o->masks_dir;
    const VitConfig *c = &sc->vit->cfg;
    char stem[512], file[2048];
    const char *base = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", base ? base + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    VitImage img = {0};
    VitError err;
    /* NAME_mask.png, else NAME.png unless that is the photo itself (masks beside photos) */
    const char *suffix[2] = {"_mask", ""};
    struct stat photo, st;
    int found = 0, have_photo = stat(path, &photo) == 0;
    for (int i = 0; i < 2 && !found; i++) {
        snprintf(file, sizeof file, "%s/%s%s.png", dir, stem, suffix[i]);
        found = stat(file, &st) == 0 &&
                !(have_photo && st.st_dev == photo.st_dev && st.st_ino == photo.st_ino);
    }
    if (!found) return 0;
    if (vit_image_load(&img, file, &err)) {
        snprintf(note, n, "%.600s", err.msg);
        return -1;
    }
    int rc = -1;
    if (img.w != sc->src_w || img.h != sc->src_h) {
        snprintf(note, n, "%.400s: mask of %d x %d px, the photo is %d x %d", file, img.w, img.h,
                 sc->src_w, sc->src_h);
    } else if (vit_preprocess_rgb(e->crop, c, &img, &err)) {
        snprintf(note, n, "%.600s", err.msg);
    } else {
        for (size_t i = 0; i < (size_t)c->image_h * c->image_w; i++)
            e->pixmask[i] = e->crop[3 * i] >= 128;
        if (vit_mask_to_patches(e->patchmask, e->pixmask, c) == 0)
            snprintf(note, n, "%.400s: no patch of the crop is half inside the mask", file);
        else
            rc = 1, snprintf(note, n, "%.600s", file);
    }
    vit_image_free(&img);
    return rc;
}

static int is_mask_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *m = strstr(base, "_mask");
    if (!m) return 0;
    m += 5;
    while (*m >= '0' && *m <= '9') m++;
    return *m == '.';
}

/* Every test of one photo; its trained maps into maps [n_methods, N] for the sanity
 * check. 0, or 1 when the photo was skipped (the row says why). */
static int eval_image(Eval *e, Scene *sc, int image, const char *path, float *maps) {
    Rows *r = e->r;
    const Vit *vit = &e->m->vit;
    const VitConfig *c = &vit->cfg;
    VitError err;
    ImageRow *q = ADD(r, im);
    if (!q) return 1;
    q->image = image, q->target = -1;
    snprintf(q->path, sizeof q->path, "%s", path);
    snprintf(q->status, sizeof q->status, "ok");
    if (scene_run(sc, vit, path, &err)) {
        snprintf(q->status, sizeof q->status, "%.600s", err.msg);
        fprintf(stderr, "vitlens: skipped: %s\n", err.msg);
        return 1;
    }
    int target;
    if (e->o->class_arg) {
        char msg[600];
        if (model_find_class(e->m, e->o->class_arg, &target, msg, sizeof msg)) {
            snprintf(q->status, sizeof q->status, "%.600s", msg);
            return 1;
        }
    } else {
        vit_top_k(&target, sc->run.probs, c->n_classes, 1);
    }
    q->target = target, q->prob = sc->run.probs[target];
    if (explain(sc, target, e->o->discard, &err)) goto fail;
    for (int m = 0; m < r->n_methods; m++)
        if (method_map(maps + (size_t)m * c->n_patches, e, &r->methods[m], sc, image, target, &err))
            goto fail;
    if (vit_blur(e->blurred, sc->run.input, 3, c->image_h, c->image_w, BLUR_SIGMA, BLUR_RADIUS,
                 &err))
        goto fail;
    for (int m = 0; m < r->n_methods; m++)
        if (perturb(e, sc, maps + (size_t)m * c->n_patches, image, m, target, &err)) goto fail;
    if (e->o->masks_dir) {
        q->has_mask = load_mask(e, sc, path, q->mask_note, sizeof q->mask_note);
        if (q->has_mask < 0) fprintf(stderr, "vitlens: mask skipped: %s\n", q->mask_note);
        for (int m = 0; q->has_mask == 1 && m < r->n_methods; m++) {
            LocRow *l = ADD(r, lo);
            if (!l) break;
            const float *map = maps + (size_t)m * c->n_patches;
            l->image = image, l->method = m;
            l->pointing = vit_pointing_game(map, e->patchmask, c->n_patches, NULL);
            l->energy = vit_energy_pointing(map, e->patchmask, c->n_patches, NULL);
            l->iou = vit_topk_iou(map, e->patchmask, c->n_patches, NULL);
        }
    }
    return 0;
fail:
    snprintf(q->status, sizeof q->status, "%.100s: %.500s", path, err.msg);
    fprintf(stderr, "vitlens: skipped: %s\n", q->status);
    return 1;
}

/* ---------------------------------------------------------------------------
 * Progress on stderr, once a run has taken a second (on a terminal) */

typedef struct {
    struct timespec t0;
    int shown, tty;
} Progress;

static double elapsed_s(const Progress *p) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - p->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - p->t0.tv_nsec);
}

static void progress(Progress *p, const char *what, int done, int total) {
    double s = elapsed_s(p);
    if (!p->tty || s < 1.0 || total <= 0) return;
    char bar[31];
    int fill = (int)(30.0 * done / total);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r%-10s [%s] %d/%d  %.0f s ", what, bar, done, total, s);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
    p->shown = 1;
}

/* ---------------------------------------------------------------------------
 * Entry points */

int eval_run(const Options *o) {
    Rows r = {0};
    Eval e = {.o = o, .r = &r};
    Model m;
    VitError err;
    Scene sc = {.ignore_orientation = o->ignore_orientation};
    char **paths = NULL, msg[1200];
    int n_paths = 0, rc = 1, *sel = NULL, *all = NULL, n_sel = 0;
    float *maps = NULL;
    if (model_load(&m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    const VitConfig *c = &m.vit.cfg;
    e.m = &m;
    if (c->n_classes == 0) {
        fprintf(stderr, "vitlens: %s: --eval needs a model with a classification head\n",
                m.vit.path);
        goto done;
    }
    if (files_expand(&paths, &n_paths, o->image_args, o->n_image_args, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        goto done;
    }
    /* the images: masks (NAME_mask.png, NAME_mask0.png) are not; then this shard's */
    sel = malloc((size_t)(n_paths ? n_paths : 1) * sizeof *sel);
    all = malloc((size_t)(n_paths ? n_paths : 1) * sizeof *all);
    if (!sel || !all) goto oom;
    int n_all = 0; /* image g of the whole run is paths[all[g]] */
    for (int i = 0; i < n_paths; i++) {
        if (is_mask_name(paths[i])) continue;
        if (!o->shard_n || n_all % o->shard_n == o->shard_k - 1) sel[n_sel++] = n_all;
        all[n_all++] = i;
    }
    snprintf(r.model, sizeof r.model, "%s", m.vit.path);
    r.n_layers = c->n_layers, r.n_patches = c->n_patches, r.steps = o->eval_steps;
    r.n_images_total = n_all;
    r.n_methods = methods_for(r.methods, c);

    e.batch_max = (o->eval_steps > PERTURB_STEPS ? o->eval_steps : PERTURB_STEPS) + 1;
    if (e.batch_max > 32) e.batch_max = 32;
    if (vit_batch_init(&e.batch, &m.vit, e.batch_max, 0, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    size_t sz = (size_t)3 * c->image_h * c->image_w, px = (size_t)c->image_h * c->image_w;
    e.inputs = malloc((size_t)e.batch_max * sz * sizeof *e.inputs);
    size_t max_counts = 2 * ((size_t)o->eval_steps + PERTURB_STEPS + 2);
    e.probs = malloc(max_counts * c->n_classes * sizeof *e.probs);
    e.counts = malloc(max_counts * sizeof *e.counts);
    e.blurred = malloc(sz * sizeof *e.blurred);
    e.scratch = malloc(map_kind_max_floats(c, 0) * sizeof *e.scratch);
    e.order = malloc((size_t)c->n_patches * sizeof *e.order);
    e.pixmask = malloc(px), e.patchmask = malloc((size_t)c->n_patches), e.crop = malloc(3 * px);
    maps = malloc((size_t)(n_sel ? n_sel : 1) * r.n_methods * c->n_patches * sizeof *maps);
    if (!e.inputs || !e.probs || !e.counts || !e.blurred || !e.scratch || !e.order || !e.pixmask ||
        !e.patchmask || !e.crop || !maps)
        goto oom;

    Progress pr = {.tty = isatty(2)};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    size_t per_image = (size_t)r.n_methods * c->n_patches;
    int *ok = calloc((size_t)(n_sel ? n_sel : 1), sizeof *ok);
    if (!ok) goto oom;
    for (int s = 0; s < n_sel; s++) {
        int i = sel[s];
        ok[s] = !eval_image(&e, &sc, i, paths[all[i]], maps + (size_t)s * per_image);
        progress(&pr, "images", s + 1, n_sel);
    }

    /* The sanity check, cascading: for each step one model, every photo. The trained
     * maps are those above; the class stays the trained model's. */
    if (!o->no_sanity) {
        float *map = malloc((size_t)c->n_patches * sizeof *map);
        Scene rs = {.ignore_orientation = o->ignore_orientation};
        int n_ok = 0;
        for (int s = 0; s < n_sel; s++) n_ok += ok[s];
        for (int b = 0; map && n_ok && b <= c->n_layers; b++) {
            Vit rv;
            if (vit_randomized(&rv, &m.vit, b, SANITY_SEED, &err)) {
                fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
                break;
            }
            for (int s = 0; s < n_sel; s++) {
                if (!ok[s]) continue;
                const ImageRow *q = NULL;
                for (size_t k = 0; k < r.n_im; k++)
                    if (r.im[k].image == sel[s]) q = &r.im[k];
                if (scene_run(&rs, &rv, paths[all[sel[s]]], &err) ||
                    explain(&rs, q->target, o->discard, &err)) {
                    fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
                    continue;
                }
                for (int k = 0; k < r.n_methods; k++) {
                    if (r.methods[k].kind < 0) continue;
                    if (method_map(map, &e, &r.methods[k], &rs, sel[s], q->target, &err)) {
                        fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
                        continue;
                    }
                    SanityRow *sa = ADD(&r, sa);
                    if (!sa) break;
                    sa->image = sel[s], sa->method = k, sa->blocks = b;
                    sa->rho = vit_spearman(maps + (size_t)s * per_image + (size_t)k * c->n_patches,
                                           map, c->n_patches);
                }
            }
            vit_free(&rv);
            progress(&pr, "sanity", b + 1, c->n_layers + 1);
        }
        scene_free(&rs);
        free(map);
    }
    free(ok);
    rows_sort(&r);
    rc = finish(&r, o->eval_out);
    goto done;
oom:
    fprintf(stderr, "vitlens: out of memory\n");
done:
    scene_free(&sc);
    vit_batch_free(&e.batch);
    free(e.inputs), free(e.probs), free(e.counts), free(e.blurred), free(e.scratch), free(e.order);
    free(e.pixmask), free(e.patchmask), free(e.crop), free(maps), free(sel), free(all);
    if (paths) files_free_list(paths, n_paths);
    rows_free(&r);
    model_free(&m);
    return rc;
}

int eval_merge(const Options *o) {
    Rows r = {0};
    int rc = 0;
    for (int i = 0; i < o->n_image_args && !rc; i++) rc = read_folder(&r, o->image_args[i], i == 0);
    if (!rc) {
        rows_sort(&r);
        for (size_t i = 1; i < r.n_im && !rc; i++)
            if (r.im[i].image == r.im[i - 1].image) {
                fprintf(stderr, "vitlens: --eval-merge: image %d (%s) is in two shards\n",
                        r.im[i].image, r.im[i].path);
                rc = 1;
            }
    }
    if (!rc) rc = finish(&r, o->eval_out);
    rows_free(&r);
    return rc;
}
