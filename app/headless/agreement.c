/* agreement.c - vitlens --agreement and the --eval-merge of its shards (agreement.h; the
 * protocol: docs/faithfulness.md, "Methods side by side").
 *
 * As --eval (eval.c), everything a run measures becomes rows: one per photo, one per pair
 * of methods on a photo. The matrices, the CSV files and the heatmap are made from the rows
 * alone, sorted, so that shards merged (the rows read back from their CSVs) give the files
 * the whole run gives. The photos, the classes and the maps are --eval's own
 * (eval_select_images, eval_target, eval_method_map). */
#include "headless/agreement.h"
#include "config/files.h"
#include "headless/eval_rows.h"
#include "headless/npy.h"
#include "headless/plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * Rows */

typedef struct {
    int image, a, b; /* a <= b, indices in Agree.methods */
    double rho, iou; /* vit_spearman, vit_top_iou(AGREE_TOP_FRAC); NaN: a constant map */
} PairRow;

typedef struct {
    char model[1024];
    int grid_h, grid_w, n_images_total;
    Method methods[MAX_METHODS];
    int n_methods;
    ImageRow *im; /* --eval's: image, path, status, target, prob */
    PairRow *pa;
    size_t n_im, n_pa, cap_im, cap_pa;
} Agree;

static void agree_free(Agree *g) {
    free(g->im), free(g->pa);
    memset(g, 0, sizeof *g);
}

static int cmp_photo(const void *x, const void *y) {
    const ImageRow *a = x, *b = y;
    return (a->image > b->image) - (a->image < b->image);
}
static int cmp_pair(const void *x, const void *y) {
    const PairRow *a = x, *b = y;
    if (a->image != b->image) return a->image < b->image ? -1 : 1;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* Sorted by photo, then pair: the order every file is written in, whatever the shards'. */
static void agree_sort(Agree *g) {
    if (g->n_im) qsort(g->im, g->n_im, sizeof *g->im, cmp_photo);
    if (g->n_pa) qsort(g->pa, g->n_pa, sizeof *g->pa, cmp_pair);
}

/* The methods for a model with a head: the class-specific kinds it can compute, then the
 * random control. Returns how many. */
static int agree_methods(Method *m, const VitConfig *cfg) {
    int n = 0;
    for (int k = 0; k < MAP_KIND_COUNT; k++)
        if (MAP_KINDS[k].group == MAP_GROUP_CLASS && !MAP_KINDS[k].rgb && map_kind_usable(k, cfg))
            method_of_tag(&m[n++], MAP_KINDS[k].tag);
    method_of_tag(&m[n++], "random");
    return n;
}

/* ---------------------------------------------------------------------------
 * The matrices */

typedef struct {
    double mean, std, iou_mean, iou_std; /* NaN: no photo (std: fewer than two) */
    int n;                               /* photos whose rho is a number */
} Cell;

/* The mean and the sample standard deviation (n - 1) of the numbers among x [n] that
 * are not NaN, in double, two passes (the mean, then the squares about it). */
static void mean_std(double *mean, double *std, int *count, const double *x, int n) {
    double s = 0.0, ss = 0.0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) s += x[i], k++;
    *mean = k ? s / k : NAN;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) ss += (x[i] - *mean) * (x[i] - *mean);
    *std = k > 1 ? sqrt(ss / (k - 1)) : NAN;
    *count = k;
}

/* cells [M, M] (symmetric) from the sorted pair rows. 0, or 1 out of memory. */
static int summarise(Cell *cells, const Agree *g) {
    int M = g->n_methods;
    double *rho = malloc((g->n_pa + 1) * sizeof *rho), *iou = malloc((g->n_pa + 1) * sizeof *iou);
    if (!rho || !iou) {
        free(rho), free(iou);
        return 1;
    }
    for (int a = 0; a < M; a++)
        for (int b = a; b < M; b++) {
            int n = 0, n_iou;
            for (size_t i = 0; i < g->n_pa; i++)
                if (g->pa[i].a == a && g->pa[i].b == b)
                    rho[n] = g->pa[i].rho, iou[n++] = g->pa[i].iou;
            Cell *c = &cells[a * M + b];
            mean_std(&c->mean, &c->std, &c->n, rho, n);
            mean_std(&c->iou_mean, &c->iou_std, &n_iou, iou, n);
            cells[b * M + a] = *c;
        }
    free(rho), free(iou);
    return 0;
}

/* One matrix as markdown: rows the methods' names, columns their tags, "mean ± std". */
static void write_matrix(FILE *f, const Agree *g, const Cell *cells, int iou) {
    int M = g->n_methods;
    fprintf(f, "| %s |", iou ? "top-10% IoU" : "Spearman");
    for (int b = 0; b < M; b++) fprintf(f, " %s |", g->methods[b].tag);
    fputs("\n|---|", f);
    for (int b = 0; b < M; b++) fputs("---|", f);
    fputc('\n', f);
    for (int a = 0; a < M; a++) {
        fprintf(f, "| %s |", g->methods[a].name);
        for (int b = 0; b < M; b++) {
            const Cell *c = &cells[a * M + b];
            double m = iou ? c->iou_mean : c->mean, s = iou ? c->iou_std : c->std;
            if (isnan(m))
                fputs(" - |", f);
            else if (isnan(s))
                fprintf(f, " %.2f |", m);
            else
                fprintf(f, " %.2f ± %.2f |", m, s);
        }
        fputc('\n', f);
    }
}

/* The summary: how many photos, both matrices. */
static void write_table(FILE *f, const Agree *g, const Cell *cells) {
    int ok = 0;
    for (size_t i = 0; i < g->n_im; i++) ok += !strcmp(g->im[i].status, "ok");
    fprintf(f, "# Agreement of the class-specific methods: %s\n\n", g->model);
    fprintf(f,
            "%d of %zu photos (%d in the whole run); mean ± standard deviation over the photos "
            "of the Spearman rank correlation of two methods' maps over the %d x %d patches, "
            "then of the IoU of their top %d%% patches. random: a uniform random map per "
            "photo, the control (rho ~ 0 ± %.2f per photo).\n\n",
            ok, g->n_im, g->n_images_total, g->grid_h, g->grid_w, (int)(100 * AGREE_TOP_FRAC),
            g->grid_h * g->grid_w > 1 ? 1.0 / sqrt(g->grid_h * g->grid_w - 1.0) : NAN);
    write_matrix(f, g, cells, 0);
    fputc('\n', f);
    write_matrix(f, g, cells, 1);
}

/* ---------------------------------------------------------------------------
 * Files */

/* mkdir dir unless it is there: 0, or 1 with the message on stderr. */
static int make_dir(const char *dir) {
    char why[4400];
    if (files_make_dir(dir, 0777, why, sizeof why) == 0) return 0;
    fprintf(stderr, "vitlens: %s\n", why);
    return 1;
}

/* agreement.csv (every ordered pair), and the rows: agreement_run.csv, _photos.csv,
 * _pairs.csv (every number with 17 digits: they read back exactly). */
static int write_csvs(const char *dir, const Agree *g, const Cell *cells) {
    char path[2048];
    int rc = 0, M = g->n_methods;
    FILE *f = eval_open_out(dir, "agreement.csv", path, sizeof path);
    if (!f) return 1;
    fprintf(f, "method_a,method_b,mean,std,n_photos,iou_mean,iou_std\n");
    for (int a = 0; a < M; a++)
        for (int b = 0; b < M; b++) {
            const Cell *c = &cells[a * M + b];
            fprintf(f, "%s,%s,%.17g,%.17g,%d,%.17g,%.17g\n", g->methods[a].tag, g->methods[b].tag,
                    c->mean, c->std, c->n, c->iou_mean, c->iou_std);
        }
    rc |= eval_close_out(f, path);
    if (!(f = eval_open_out(dir, "agreement_run.csv", path, sizeof path))) return 1;
    fprintf(f, "model,grid_h,grid_w,images_total,methods\n");
    eval_csv_field(f, g->model);
    fprintf(f, ",%d,%d,%d,", g->grid_h, g->grid_w, g->n_images_total);
    for (int m = 0; m < M; m++) fprintf(f, "%s%s", m ? " " : "", g->methods[m].tag);
    fputc('\n', f);
    rc |= eval_close_out(f, path);
    if (!(f = eval_open_out(dir, "agreement_photos.csv", path, sizeof path))) return 1;
    fprintf(f, "image,path,status,class,prob\n");
    for (size_t i = 0; i < g->n_im; i++) {
        const ImageRow *q = &g->im[i];
        fprintf(f, "%d,", q->image);
        eval_csv_field(f, q->path), fputc(',', f), eval_csv_field(f, q->status);
        fprintf(f, ",%d,%.9g\n", q->target, (double)q->prob);
    }
    rc |= eval_close_out(f, path);
    if (!(f = eval_open_out(dir, "agreement_pairs.csv", path, sizeof path))) return 1;
    fprintf(f, "image,method_a,method_b,spearman,top_iou\n");
    for (size_t i = 0; i < g->n_pa; i++) {
        const PairRow *p = &g->pa[i];
        fprintf(f, "%d,%s,%s,%.17g,%.17g\n", p->image, g->methods[p->a].tag, g->methods[p->b].tag,
                p->rho, p->iou);
    }
    return rc | eval_close_out(f, path);
}

/* The matrices (stdout), and with out_dir the CSVs, agreement.md and agreement.png. */
static int agree_finish(const Agree *g, const char *out_dir) {
    int M = g->n_methods;
    Cell *cells = calloc((size_t)M * M + 1, sizeof *cells);
    if (!cells || summarise(cells, g)) {
        free(cells);
        fprintf(stderr, "vitlens: out of memory\n");
        return 1;
    }
    write_table(stdout, g, cells);
    fflush(stdout);
    int rc = 0;
    if (out_dir && !(rc = make_dir(out_dir))) {
        rc = write_csvs(out_dir, g, cells);
        char path[2048];
        FILE *f = eval_open_out(out_dir, "agreement.md", path, sizeof path);
        if (f) write_table(f, g, cells);
        rc |= !f || eval_close_out(f, path);
        /* the heatmap of the mean Spearman matrix, labelled with the names and tags */
        const char *names[MAX_METHODS], *tags[MAX_METHODS];
        double mean[MAX_METHODS * MAX_METHODS];
        for (int a = 0; a < M; a++) {
            names[a] = g->methods[a].name, tags[a] = g->methods[a].tag;
            for (int b = 0; b < M; b++) mean[a * M + b] = cells[a * M + b].mean;
        }
        char title[256];
        int ok = 0;
        for (size_t i = 0; i < g->n_im; i++) ok += !strcmp(g->im[i].status, "ok");
        snprintf(title, sizeof title,
                 "Spearman rank correlation of the methods' maps, mean over %d photo%s", ok,
                 ok == 1 ? "" : "s");
        snprintf(path, sizeof path, "%s/agreement.png", out_dir);
        rc |= plot_matrix(path, title, names, tags, mean, M, -1.0, 1.0);
    }
    free(cells);
    return rc;
}

/* ---------------------------------------------------------------------------
 * One photo */

/* Every method's map of one photo into maps [M, N], the pairs' rows, and with out the
 * maps as out/maps/IIII_TAG.npy. 0, or 1 when the photo was skipped (its row says why). */
static int agree_photo(Agree *g, Scene *sc, const Model *m, const Options *o, int image,
                       const char *path, float *maps, float *scratch) {
    const VitConfig *c = &m->vit.cfg;
    int N = c->n_patches, M = g->n_methods, target;
    VitError err;
    ImageRow *q = ADD(g, im);
    if (!q) return 1;
    q->image = image, q->target = -1;
    snprintf(q->path, sizeof q->path, "%s", path);
    snprintf(q->status, sizeof q->status, "ok");
    if (scene_run(sc, &m->vit, path, &err)) {
        snprintf(q->status, sizeof q->status, "%.600s", err.msg);
        goto skip;
    }
    if (eval_target(&target, m, sc, o, q->status, sizeof q->status)) goto skip;
    q->target = target, q->prob = sc->run.probs[target];
    if (eval_explain(sc, target, o->discard, &err)) goto fail;
    for (int k = 0; k < M; k++)
        if (eval_method_map(maps + (size_t)k * N, scratch, &g->methods[k], sc, image, target,
                            o->discard, &err))
            goto fail;
    for (int a = 0; a < M; a++)
        for (int b = a; b < M; b++) {
            PairRow *p = ADD(g, pa);
            if (!p) return 1;
            const float *ma = maps + (size_t)a * N, *mb = maps + (size_t)b * N;
            *p = (PairRow){image, a, b, vit_spearman(ma, mb, N),
                           vit_top_iou(ma, mb, N, AGREE_TOP_FRAC, NULL)};
        }
    if (o->eval_out) {
        char dir[2048], name[128], msg[600];
        int shape[2] = {c->grid_h, c->grid_w};
        snprintf(dir, sizeof dir, "%s/maps", o->eval_out);
        for (int k = 0; k < M; k++) {
            snprintf(name, sizeof name, "%04d_%s.npy", image, g->methods[k].tag);
            if (npy_write(dir, name, maps + (size_t)k * N, shape, 2, msg, sizeof msg))
                fprintf(stderr, "vitlens: %s\n", msg);
        }
    }
    return 0;
fail:
    snprintf(q->status, sizeof q->status, "%.100s: %.500s", path, err.msg);
skip:
    fprintf(stderr, "vitlens: skipped: %s\n", q->status);
    return 1;
}

/* ---------------------------------------------------------------------------
 * Entry points */

int agreement_run(const Options *o) {
    Agree g = {0};
    EvalPhotos ph;
    Scene sc = {.ignore_orientation = o->ignore_orientation};
    float *maps = NULL, *scratch = NULL;
    int rc = eval_photos_open(&ph, o);
    if (rc) goto done;
    rc = 1;
    const VitConfig *c = &ph.m.vit.cfg;
    sc.interv = &ph.iv;
    g.n_images_total = ph.n_all;
    snprintf(g.model, sizeof g.model, "%s", ph.m.vit.path);
    g.grid_h = c->grid_h, g.grid_w = c->grid_w;
    g.n_methods = agree_methods(g.methods, c);
    maps = malloc((size_t)g.n_methods * c->n_patches * sizeof *maps);
    scratch = malloc(map_kind_max_floats(c, 0) * sizeof *scratch);
    if (!maps || !scratch) {
        fprintf(stderr, "vitlens: out of memory\n");
        goto done;
    }
    if (o->eval_out) { /* the maps are written as the photos go */
        char dir[2048];
        snprintf(dir, sizeof dir, "%s/maps", o->eval_out);
        if (make_dir(o->eval_out) || make_dir(dir)) goto done;
    }
    Progress pr = {.tty = isatty(2)};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    for (int s = 0; s < ph.n_sel; s++) {
        int i = ph.sel[s];
        agree_photo(&g, &sc, &ph.m, o, i, ph.paths[ph.all[i]], maps, scratch);
        eval_progress(&pr, "photos", s + 1, ph.n_sel);
    }
    agree_sort(&g);
    rc = agree_finish(&g, o->eval_out);
done:
    scene_free(&sc);
    free(maps), free(scratch);
    agree_free(&g);
    eval_photos_free(&ph);
    return rc;
}

int agreement_is_out(const char *dir) {
    char path[2048];
    snprintf(path, sizeof path, "%s/agreement_pairs.csv", dir);
    return access(path, R_OK) == 0;
}

/* The index of tag in g->methods: -1 when the run has no such method. */
static int method_index(const Agree *g, const char *tag) {
    for (int k = 0; k < g->n_methods; k++)
        if (!strcmp(g->methods[k].tag, tag)) return k;
    return -1;
}

/* One shard's folder into g (first: the first folder, which sets the run; the others must
 * be of the same run). 0, or 1 with a message naming the file and line. */
static int agree_read(Agree *g, const char *dir, int first) {
    char path[2048], line[8192], *fl[8];
    int gh = 0, gw = 0, total = 0, bad = 0, ln;
    FILE *f = eval_open_in(dir, "agreement_run.csv", path, sizeof path);
    if (!f) return 1;
    if (!fgets(line, sizeof line, f) || !fgets(line, sizeof line, f) ||
        eval_csv_split(line, fl, 8) != 5 || eval_parse_int(fl[1], &gh) ||
        eval_parse_int(fl[2], &gw) || eval_parse_int(fl[3], &total) || gh < 1 || gw < 1)
        bad = eval_bad_row(path, 2, "expected model,grid_h,grid_w,images_total,methods");
    fclose(f);
    if (bad) return 1;
    fl[4][strcspn(fl[4], "\r\n")] = '\0';
    Agree run = {.grid_h = gh, .grid_w = gw, .n_images_total = total};
    snprintf(run.model, sizeof run.model, "%s", fl[0]);
    for (char *t = strtok(fl[4], " "); t && !bad; t = strtok(NULL, " "))
        if (run.n_methods == MAX_METHODS || method_of_tag(&run.methods[run.n_methods++], t))
            bad = eval_bad_row(path, 2, "a method this build does not know");
    if (bad) return 1;
    if (first) {
        *g = run;
    } else if (strcmp(g->model, run.model) || g->grid_h != gh || g->grid_w != gw ||
               g->n_images_total != total || g->n_methods != run.n_methods ||
               memcmp(g->methods, run.methods, sizeof run.methods)) {
        fprintf(stderr,
                "vitlens: %s: another run's shard (model %s, %d photos; the first folder's: %s, "
                "%d photos)\n",
                path, run.model, total, g->model, g->n_images_total);
        return 1;
    }
    if (!(f = eval_open_in(dir, "agreement_photos.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        ImageRow *q = ADD(g, im);
        double p;
        if (!q)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 8) != 5 || eval_parse_int(fl[0], &q->image) ||
                 eval_parse_int(fl[3], &q->target) || eval_parse_double(fl[4], &p))
            bad = eval_bad_row(path, ln, "expected image,path,status,class,prob");
        else {
            q->prob = (float)p;
            snprintf(q->path, sizeof q->path, "%.1000s", fl[1]);
            snprintf(q->status, sizeof q->status, "%.600s", fl[2]);
        }
    }
    fclose(f);
    if (bad || !(f = eval_open_in(dir, "agreement_pairs.csv", path, sizeof path))) return 1;
    for (ln = 1; !bad && fgets(line, sizeof line, f); ln++) {
        if (ln == 1) continue;
        PairRow *p = ADD(g, pa);
        if (!p)
            bad = eval_bad_row(path, ln, "out of memory");
        else if (eval_csv_split(line, fl, 8) != 5 || eval_parse_int(fl[0], &p->image) ||
                 (p->a = method_index(g, fl[1])) < 0 || (p->b = method_index(g, fl[2])) < p->a ||
                 eval_parse_double(fl[3], &p->rho) || eval_parse_double(fl[4], &p->iou))
            bad = eval_bad_row(path, ln, "expected image,method_a,method_b,spearman,top_iou");
    }
    fclose(f);
    return bad;
}

int agreement_merge(const Options *o) {
    Agree g = {0};
    int rc = 0;
    for (int i = 0; i < o->n_image_args && !rc; i++) rc = agree_read(&g, o->image_args[i], i == 0);
    if (!rc) {
        agree_sort(&g);
        rc = eval_check_shards(g.im, g.n_im);
    }
    if (!rc) rc = agree_finish(&g, o->eval_out);
    agree_free(&g);
    return rc;
}
