/* eval_plot.c - --eval-out's plots (the perturbation, deletion and insertion curves per
 * method, the sanity check's rank correlations) as PNG, and the run's end: the table on
 * stdout, and with a folder the CSVs, summary.md and the plots. */
#include "headless/eval_rows.h"
#include "config/files.h"
#include "headless/plot.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------
 * Plots */

/* The mean curve of every method for one test, and the sanity check's mean rho per
 * step, as PNGs (plot.h). */
static int eval_write_plots(const char *dir, const Rows *r) {
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
        /* the mean over images per method and step, in %: for the two perturbation tests
         * the share of images whose top-1 class survives, for deletion and insertion the
         * class probability; a step no image reached is nan, a gap in the line */
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
            s[m].dashed = r->methods[m].kind < 0; /* the baselines (random, Gaussian) */
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
    /* the baselines have no model to randomise: left out of this plot */
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
int eval_finish(const Rows *r, const char *out_dir) {
    /* the table first and flushed: it is the result, even if a file below fails */
    eval_write_table(stdout, r);
    fflush(stdout);
    if (!out_dir) return 0;
    char why[4400];
    if (files_make_dir(out_dir, 0777, why, sizeof why)) {
        fprintf(stderr, "vitlens: %s\n", why);
        return 1;
    }
    int rc = eval_write_csvs(out_dir, r);
    char path[2048];
    FILE *f = eval_open_out(out_dir, "summary.md", path, sizeof path);
    if (!f) return 1;
    eval_write_table(f, r);
    rc |= eval_close_out(f, path);
    rc |= eval_write_plots(out_dir, r);
    return rc;
}
