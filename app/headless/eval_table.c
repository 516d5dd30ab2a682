/* eval_table.c - --eval's rows and what is made of them alone: the methods (the map kinds
 * with a value per patch, and the baselines), the rows kept sorted, the summary as a
 * markdown table, and the rows as CSV files that print every number so that they read back
 * exactly (eval_read.c). */
#include "headless/eval_rows.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Methods: the map kinds with a value per patch (or pixel), then two baselines */

/* The method of a tag, as this build knows it (-1: unknown). */
int method_of_tag(Method *out, const char *tag) {
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
int methods_for(Method *m, const VitConfig *cfg) {
    int n = 0;
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        if (MAP_KINDS[k].rgb || !map_kind_usable(k, cfg)) continue;
        method_of_tag(&m[n++], MAP_KINDS[k].tag);
    }
    method_of_tag(&m[n++], "random");
    method_of_tag(&m[n++], "gaussian");
    return n;
}

/* ---------------------------------------------------------------------------
 * Rows */

/* Append one zeroed row to a growing array; NULL when out of memory. */
void *rows_grow(void **arr, size_t *n, size_t *cap, size_t size) {
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

void rows_free(Rows *r) {
    free(r->im), free(r->cu), free(r->lo), free(r->sa);
    memset(r, 0, sizeof *r);
}

/* Sort order: image, then method, then test and step (or blocks). The rows are sorted
 * before anything is written, so that a merged run and a whole one write the same files
 * whatever order the shards came in. */
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
void rows_sort(Rows *r) {
    if (r->n_im) qsort(r->im, r->n_im, sizeof *r->im, cmp_image);
    if (r->n_cu) qsort(r->cu, r->n_cu, sizeof *r->cu, cmp_curve);
    if (r->n_lo) qsort(r->lo, r->n_lo, sizeof *r->lo, cmp_loc);
    if (r->n_sa) qsort(r->sa, r->n_sa, sizeof *r->sa, cmp_sanity);
}

/* ---------------------------------------------------------------------------
 * The table */

/* One method's scores summed over the images, with how many were summed (a score that
 * could not be computed, nan, is left out of its mean, not counted as 0). */
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
    float prob[1024], top1[1024]; /* --eval-steps <= 1000: 1001 points at most */
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
    /* the curve rows are sorted, so one curve is a run of rows with the same image,
     * method and test */
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

/* One table cell: the mean sum / n in fmt, or "-" when nothing was measured. */
static void cell(FILE *f, double sum, int n, const char *fmt) {
    if (n > 0)
        fprintf(f, " "), fprintf(f, fmt, sum / n), fprintf(f, " |");
    else
        fprintf(f, " - |");
}

/* The markdown table and the lines under it. */
void eval_write_table(FILE *f, const Rows *r) {
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
void eval_csv_field(FILE *f, const char *s) {
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
int eval_csv_split(char *line, char **fields, int max) {
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

FILE *eval_open_out(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "vitlens: %s: cannot write: %s\n", path, strerror(errno));
    return f;
}

int eval_close_out(FILE *f, const char *path) {
    int bad = ferror(f);
    if (fclose(f) || bad) {
        fprintf(stderr, "vitlens: %s: write failed\n", path);
        return 1;
    }
    return 0;
}

int eval_write_csvs(const char *dir, const Rows *r) {
    char path[2048];
    FILE *f = eval_open_out(dir, "eval.csv", path, sizeof path);
    if (!f) return 1;
    fprintf(f, "model,layers,patches,steps,images_total\n");
    eval_csv_field(f, r->model);
    fprintf(f, ",%d,%d,%d,%d\n", r->n_layers, r->n_patches, r->steps, r->n_images_total);
    if (eval_close_out(f, path)) return 1;

    if (!(f = eval_open_out(dir, "images.csv", path, sizeof path))) return 1;
    fprintf(f, "image,path,status,class,prob,mask,mask_note\n");
    for (size_t i = 0; i < r->n_im; i++) {
        const ImageRow *q = &r->im[i];
        fprintf(f, "%d,", q->image);
        eval_csv_field(f, q->path), fputc(',', f), eval_csv_field(f, q->status);
        fprintf(f, ",%d,%.9g,%d,", q->target, (double)q->prob, q->has_mask);
        eval_csv_field(f, q->mask_note), fputc('\n', f);
    }
    if (eval_close_out(f, path)) return 1;

    if (!(f = eval_open_out(dir, "perturbation.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,test,step,steps,fraction,prob,top1_kept\n");
    for (size_t i = 0; i < r->n_cu; i++) {
        const CurveRow *q = &r->cu[i];
        fprintf(f, "%d,%s,%s,%d,%d,%.6g,%.9g,%d\n", q->image, r->methods[q->method].tag,
                TEST_NAMES[q->test], q->step, q->n_steps, (double)q->step / q->n_steps,
                (double)q->prob, q->top1);
    }
    if (eval_close_out(f, path)) return 1;

    if (!(f = eval_open_out(dir, "localisation.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,pointing,energy,topk_iou\n");
    for (size_t i = 0; i < r->n_lo; i++) {
        const LocRow *q = &r->lo[i];
        fprintf(f, "%d,%s,%.17g,%.17g,%.17g\n", q->image, r->methods[q->method].tag, q->pointing,
                q->energy, q->iou);
    }
    if (eval_close_out(f, path)) return 1;

    if (!(f = eval_open_out(dir, "sanity.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method,blocks_randomised,spearman\n");
    for (size_t i = 0; i < r->n_sa; i++) {
        const SanityRow *q = &r->sa[i];
        fprintf(f, "%d,%s,%d,%.17g\n", q->image, r->methods[q->method].tag, q->blocks, q->rho);
    }
    return eval_close_out(f, path);
}
