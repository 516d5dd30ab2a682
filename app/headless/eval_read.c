/* eval_read.c - --eval-merge: an --eval-out folder's CSV files read back into rows, each
 * field checked (a folder that is not one, rows that do not parse, shards of different
 * runs are errors that name the file and line). */
#include "headless/eval_rows.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Reading an --eval-out folder back (--eval-merge) */

/* dir/name opened for reading, its path into path for the messages; NULL (said on
 * stderr) when it cannot be read. */
FILE *eval_open_in(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) fprintf(stderr, "vitlens: %s: cannot read: %s\n", path, strerror(errno));
    return f;
}

/* "PATH: line N: WHAT" on stderr; returns 1, the caller's `bad`. */
int eval_bad_row(const char *path, int line, const char *what) {
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

/* The index of a perturbation test's name in TEST_NAMES; -1 unknown. */
static int test_index(const char *name) {
    for (int t = 0; t < N_TESTS; t++)
        if (!strcmp(TEST_NAMES[t], name)) return t;
    return -1;
}

/* Parse an int / a double field whole (no trailing text, ints within +-1e9); 0 on
 * success. A double may be nan: a score that could not be computed is written so. */
int eval_parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -1000000000L || v > 1000000000L) return -1;
    *out = (int)v;
    return 0;
}
int eval_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return end == s || *end ? -1 : 0;
}

int eval_read_folder(Rows *r, const char *dir, int first) {
    char path[2048], line[8192], *fl[12];
    int ln;
    FILE *f = eval_open_in(dir, "eval.csv", path, sizeof path);
    if (!f) return 1;
    /* eval.csv: a header, then the run's one line; every shard of a run has the same */
    int n_layers = 0, n_patches = 0, steps = 0, total = 0, bad = 0;
    if (!fgets(line, sizeof line, f) || !fgets(line, sizeof line, f) ||
        eval_csv_split(line, fl, 12) != 5 || eval_parse_int(fl[1], &n_layers) ||
        eval_parse_int(fl[2], &n_patches) || eval_parse_int(fl[3], &steps) ||
        eval_parse_int(fl[4], &total) || n_layers < 1 || n_layers > VIT_MAX_LAYERS)
        bad = eval_bad_row(path, 2, "expected model,layers,patches,steps,images_total");
    fclose(f);
    if (bad) return 1;
    /* the first folder sets the run; a later one must match it, or its rows would be
     * averaged with another model's or another step count's */
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

    /* the four tables: line 1 is the header, each row appended to r (ADD grows the
     * array); the first bad row stops the folder with its line number */
    if (!(f = eval_open_in(dir, "images.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        ImageRow *q = ADD(r, im);
        double p;
        if (!q)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 12) != 7 || eval_parse_int(fl[0], &q->image) ||
                 eval_parse_int(fl[3], &q->target) || eval_parse_double(fl[4], &p) ||
                 eval_parse_int(fl[5], &q->has_mask))
            bad = eval_bad_row(path, ln, "expected image,path,status,class,prob,mask,mask_note");
        else {
            q->prob = (float)p;
            snprintf(q->path, sizeof q->path, "%.1000s", fl[1]);
            snprintf(q->status, sizeof q->status, "%.600s", fl[2]);
            snprintf(q->mask_note, sizeof q->mask_note, "%.600s", fl[6]);
        }
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = eval_open_in(dir, "perturbation.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        CurveRow *q = ADD(r, cu);
        double p;
        if (!q)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 12) != 8 || eval_parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 || (q->test = test_index(fl[2])) < 0 ||
                 eval_parse_int(fl[3], &q->step) || eval_parse_int(fl[4], &q->n_steps) ||
                 eval_parse_double(fl[6], &p) || eval_parse_int(fl[7], &q->top1))
            bad = eval_bad_row(path, ln,
                               "expected image,method,test,step,steps,fraction,prob,top1_kept");
        else
            q->prob = (float)p;
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = eval_open_in(dir, "localisation.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        LocRow *q = ADD(r, lo);
        if (!q)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 12) != 5 || eval_parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 ||
                 eval_parse_double(fl[2], &q->pointing) || eval_parse_double(fl[3], &q->energy) ||
                 eval_parse_double(fl[4], &q->iou))
            bad = eval_bad_row(path, ln, "expected image,method,pointing,energy,topk_iou");
    }
    fclose(f);
    if (bad) return 1;

    if (!(f = eval_open_in(dir, "sanity.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        SanityRow *q = ADD(r, sa);
        if (!q)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 12) != 4 || eval_parse_int(fl[0], &q->image) ||
                 (q->method = method_index(r, fl[1])) < 0 || eval_parse_int(fl[2], &q->blocks) ||
                 eval_parse_double(fl[3], &q->rho))
            bad = eval_bad_row(path, ln, "expected image,method,blocks_randomised,spearman");
    }
    fclose(f);
    return bad;
}
