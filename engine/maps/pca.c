/* pca.c - feature PCA, the DINOv2 paper's Fig. 1 recipe (Oquab et al. 2023; vit.h,
 * vit_feature_pca): a first PCA of every row splits foreground from background, a
 * second PCA of the foreground rows colours them.
 *
 * Each PCA runs in double on the rows centred on their own mean. Its components are
 * the top eigenvectors of the scatter matrix S = Xc^T Xc [D, D] (n >= D rows), or,
 * with fewer rows than columns, of the Gram matrix G = Xc Xc^T [n, n], which has the
 * same non-zero eigenvalues: v = Xc^T u / |Xc^T u| for G's eigenvector u. LAPACK's
 * dsyevr computes only the eigenvectors asked for (range 'I').
 *
 * LAPACK and our BLAS calls are column-major: a row-major [n, D] block of rows is,
 * to them, its transpose [D, n] with leading dimension D. */
#include "internal.h"

#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A component whose variance is at most VAR_REL of the total has none: its rows do
 * not vary along it beyond rounding. */
#define VAR_REL 1e-10
/* Comparisons that rounding alone could decide (largest loading, the border's mean
 * against the others', a projection against 0) count values within TIE_REL of the
 * scale as equal. */
#define TIE_REL 1e-9
/* Rows converted to double at a time for the scatter matrix. */
#define BLOCK_ROWS 256

/* --- helpers --------------------------------------------------------------- */

/* Selected rows (sel NULL: all) of x [m, d], from row *row on, centred on mean, into
 * out [max_rows, d]; *row moves past the last one taken. Returns how many. */
static int centred_rows(double *out, const float *x, const uint8_t *sel, const double *mean, int m,
                        int d, int *row, int max_rows) {
    int n = 0;
    for (; *row < m && n < max_rows; (*row)++) {
        if (sel && !sel[*row]) continue;
        const float *xr = x + (size_t)*row * d;
        double *o = out + (size_t)n * d;
        for (int j = 0; j < d; j++) o[j] = (double)xr[j] - mean[j];
        n++;
    }
    return n;
}

/* Centred projection of row i of x on the unit vector v. */
static double project(const float *x, const double *mean, const double *v, int d, int i) {
    const float *xr = x + (size_t)i * d;
    double s = 0.0;
    for (int j = 0; j < d; j++) s += ((double)xr[j] - mean[j]) * v[j];
    return s;
}

/* +1 or -1: the sign that makes v's largest |loading| positive; among loadings
 * within TIE_REL of the largest, the first. */
double vit_loading_sign(const double *v, int d) {
    double big = 0.0;
    for (int j = 0; j < d; j++) big = fmax(big, fabs(v[j]));
    for (int j = 0; j < d; j++)
        if (fabs(v[j]) >= big * (1.0 - TIE_REL)) return v[j] < 0.0 ? -1.0 : 1.0;
    return 1.0;
}

/* The k largest eigenvalues of the symmetric a [n, n] (upper triangle, column-major;
 * destroyed) into w [k], decreasing, and their unit eigenvectors into z [k, n]
 * (row c: the c-th). */
static VitStatus top_eigen(double *w, double *z, double *a, int n, int k, VitError *err) {
    lapack_int found = 0, *isuppz = malloc(2 * (size_t)k * sizeof *isuppz);
    double *wz = malloc((size_t)n * sizeof *wz); /* dsyevr: W [N], whatever M */
    if (!isuppz || !wz) {
        free(isuppz), free(wz);
        return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory");
    }
    /* range 'I' counts from the smallest eigenvalue, 1-based: the top k are n-k+1 .. n.
     * abstol: the safe minimum, for the most accurate eigenvalues (dsyevr's doc). */
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'U', n, a, n, 0.0, 0.0, n - k + 1,
                                     n, DBL_MIN, &found, wz, z, n, isuppz);
    VitStatus rc = VIT_OK;
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        rc = vit_set_error(err, VIT_ERR_NOMEM,
                           "feature PCA: LAPACKE_dsyevr: out of memory (n = %d)", n);
    else if (info != 0 || found != k)
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "feature PCA: LAPACKE_dsyevr failed: info %d, %d of %d eigenvalues "
                           "(n = %d)",
                           (int)info, (int)found, k, n);
    if (!rc) {
        /* dsyevr gives them increasing, column c of z [n, k]: reverse both, in place. */
        for (int c = 0; c < k / 2; c++) {
            double *p = z + (size_t)c * n, *q = z + (size_t)(k - 1 - c) * n;
            for (int i = 0; i < n; i++) {
                double t = p[i];
                p[i] = q[i], q[i] = t;
            }
        }
        for (int c = 0; c < k; c++) w[c] = wz[k - 1 - c];
    }
    free(isuppz), free(wz);
    return rc;
}

/* PCA of the n rows of x [m, d] that sel selects (NULL: all m): their mean [d], the
 * top k components vec [k, d] (unit rows, decreasing variance; a component beyond
 * the rank the data can have is 0 with variance 0), each one's scatter var [k] (the
 * sum of its squared projections) and the total scatter (S's trace). */
VitStatus vit_pca_top(double *vec, double *var, double *mean, double *total, const float *x,
                      const uint8_t *sel, int n, int m, int d, int k, VitError *err) {
    memset(mean, 0, (size_t)d * sizeof *mean);
    for (int i = 0; i < m; i++) {
        if (sel && !sel[i]) continue;
        for (int j = 0; j < d; j++) mean[j] += x[(size_t)i * d + j];
    }
    for (int j = 0; j < d; j++) mean[j] /= n;
    memset(vec, 0, (size_t)k * d * sizeof *vec);
    memset(var, 0, (size_t)k * sizeof *var);
    *total = 0.0;

    int gram = n < d, size = gram ? n : d, kk = k < size ? k : size, row = 0;
    int block = gram ? n : BLOCK_ROWS;
    double *a = malloc((size_t)size * size * sizeof *a);
    double *rows = malloc((size_t)block * d * sizeof *rows);
    double *z = malloc((size_t)kk * size * sizeof *z);
    if (!a || !rows || !z) {
        free(a), free(rows), free(z);
        return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory for [%d, %d]", size,
                             size);
    }
    if (gram) { /* G = Xc Xc^T: Xc is [d, n] to BLAS, so G = A^T A */
        centred_rows(rows, x, sel, mean, m, d, &row, n);
        cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, n, d, 1.0, rows, d, 0.0, a, n);
    } else { /* S = sum over blocks of Xb^T Xb: each block is [d, nb] to BLAS, S += A A^T */
        double beta = 0.0;
        for (int nb; (nb = centred_rows(rows, x, sel, mean, m, d, &row, block)) > 0; beta = 1.0)
            cblas_dsyrk(CblasColMajor, CblasUpper, CblasNoTrans, d, nb, 1.0, rows, d, beta, a, d);
    }
    for (int i = 0; i < size; i++) *total += a[(size_t)i * size + i];

    VitStatus rc = top_eigen(var, z, a, size, kk, err);
    for (int c = 0; !rc && c < kk; c++) {
        double *v = vec + (size_t)c * d;
        if (!gram) {
            memcpy(v, z + (size_t)c * size, (size_t)d * sizeof *v);
            continue;
        }
        /* v = Xc^T u = A u, then unit length */
        cblas_dgemv(CblasColMajor, CblasNoTrans, d, n, 1.0, rows, d, z + (size_t)c * n, 1, 0.0, v,
                    1);
        double s = cblas_dnrm2(d, v, 1);
        if (s > 0.0)
            for (int j = 0; j < d; j++) v[j] /= s;
        else
            var[c] = 0.0;
    }
    free(a), free(rows), free(z);
    return rc;
}

static int no_variance(double var, double total) {
    return total <= 0.0 || var <= VAR_REL * total;
}

/* --- step 1: the foreground ---------------------------------------------------- */

/* Step 1's fit on one image's rows x [m, d]: the first component of its rows, centred on
 * mean [d], into vec [d] (0 when the rows do not vary), its sign putting the border
 * below the others, and the cut (1e-9 of the largest |projection|): the foreground is
 * sign * projection > cut. p [m] scratch. */
static VitStatus first_component(double *mean, double *vec, double *sign, double *cut,
                                 const float *x, int m, int d, const uint8_t *border, double *p,
                                 VitError *err) {
    double var, total;
    VitStatus rc = vit_pca_top(vec, &var, mean, &total, x, NULL, m, m, d, 1, err);
    if (rc) return rc;
    if (no_variance(var, total)) memset(vec, 0, (size_t)d * sizeof *vec);
    double big = 0.0, sum_border = 0.0;
    int n_border = 0;
    for (int i = 0; i < m; i++) {
        p[i] = project(x, mean, vec, d, i);
        big = fmax(big, fabs(p[i]));
        if (border && border[i]) sum_border += p[i], n_border++;
    }
    *sign = vit_loading_sign(vec, d);
    if (n_border > 0 && n_border < m) {
        double sum = 0.0;
        for (int i = 0; i < m; i++) sum += p[i];
        double mean_border = sum_border / n_border,
               mean_other = (sum - sum_border) / (m - n_border);
        if (fabs(mean_border - mean_other) > TIE_REL * big)
            *sign = mean_border < mean_other ? 1.0 : -1.0;
    }
    *cut = TIE_REL * big;
    return VIT_OK;
}

/* sel [m]: 1 for the rows of one image x [m, d] whose projection on step 1's component
 * (mean [d], vec [d], sign, cut) is in the foreground; every row when fewer than 4 are. */
static void cut_foreground(uint8_t *sel, const float *x, int m, int d, const double *mean,
                           const double *vec, double sign, double cut) {
    int n_fg = 0;
    for (int i = 0; i < m; i++) {
        sel[i] = sign * project(x, mean, vec, d, i) > cut;
        n_fg += sel[i];
    }
    if (n_fg < 4 && m > 0) memset(sel, 1, (size_t)m);
}

/* sel [m]: each of the n_images images' own foreground (step 1 fitted on its rows).
 * mean, vec [d], p [m / n_images] scratch. */
static VitStatus own_foregrounds(uint8_t *sel, const float *x, int m, int d, int n_images,
                                 const uint8_t *border, double *mean, double *vec, double *p,
                                 VitError *err) {
    int mb = m / n_images;
    for (int b = 0; b < n_images; b++) {
        size_t r0 = (size_t)b * mb;
        double sign, cut;
        VitStatus rc = first_component(mean, vec, &sign, &cut, x + r0 * d, mb, d,
                                       border ? border + r0 : NULL, p, err);
        if (rc) return rc;
        cut_foreground(sel + r0, x + r0 * d, mb, d, mean, vec, sign, cut);
    }
    return VIT_OK;
}

/* --- step 2: the colours --------------------------------------------------------- */

/* rgb [m, 3]: the selected rows (sel [m]) of x [m, d] projected on b's three components,
 * each scaled by b's lo .. hi and clamped to [0, 1]; 0 elsewhere and for a dead channel. */
static void colour(float *rgb, const VitPcaBasis *b, const uint8_t *sel, const float *x, int m,
                   int d) {
    memset(rgb, 0, (size_t)m * 3 * sizeof *rgb);
    for (int c = 0; c < 3; c++) {
        if (!b->live[c]) continue;
        const double *v = b->comp + (size_t)c * d;
        double lo = b->lo[c], span = b->hi[c] - b->lo[c];
        for (int i = 0; i < m; i++)
            if (sel[i]) {
                double q = (b->sign[c] * project(x, b->mean, v, d, i) - lo) / span;
                rgb[(size_t)i * 3 + c] = (float)fmin(1.0, fmax(0.0, q));
            }
    }
}

/* --- entry points ---------------------------------------------------------------- */

static VitStatus check_rows(const float *x, int m, int d, int n_images, VitError *err) {
    if (!x) return vit_set_error(err, VIT_ERR_ARG, "feature PCA: x is NULL");
    if (m < 1 || d < 1)
        return vit_set_error(err, VIT_ERR_ARG, "feature PCA: %d rows of %d features, expected >= 1",
                             m, d);
    if (n_images < 1 || m % n_images)
        return vit_set_error(err, VIT_ERR_ARG,
                             "feature PCA: %d rows do not split into %d images of equal size", m,
                             n_images);
    if ((size_t)d > SIZE_MAX / sizeof(double) / (size_t)d)
        return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: D = %d is too large", d);
    for (size_t i = 0; i < (size_t)m * d; i++)
        if (!isfinite(x[i]))
            return vit_set_error(err, VIT_ERR_ARG, "feature PCA: x[%zu, %zu] = %g, not finite",
                                 i / (size_t)d, i % (size_t)d, (double)x[i]);
    return VIT_OK;
}

void vit_pca_basis_free(VitPcaBasis *b) {
    if (!b) return;
    free(b->fg_mean);
    memset(b, 0, sizeof *b);
}

/* The fit (vit_pca_fit's), and into sel [m] the foreground it found. */
static VitStatus fit(VitPcaBasis *b, uint8_t *sel, const float *x, int m, int d, int n_images,
                     const uint8_t *border, VitError *err) {
    vit_pca_basis_free(b);
    double *mem = malloc(6 * (size_t)d * sizeof *mem), *p = malloc((size_t)m * sizeof *p);
    VitStatus rc = VIT_OK;
    if (!mem || !p) {
        free(mem), free(p);
        return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory for %d rows of %d", m,
                             d);
    }
    b->d = d, b->fg_mean = mem, b->fg_dir = mem + d, b->mean = mem + 2 * (size_t)d;
    b->comp = mem + 3 * (size_t)d;
    /* 1. Each image's foreground by its own first component; one image's is kept. */
    if (n_images == 1) {
        b->held_fg = 1;
        if ((rc = first_component(b->fg_mean, b->fg_dir, &b->fg_sign, &b->fg_cut, x, m, d, border,
                                  p, err)))
            goto done;
        cut_foreground(sel, x, m, d, b->fg_mean, b->fg_dir, b->fg_sign, b->fg_cut);
    } else if ((rc = own_foregrounds(sel, x, m, d, n_images, border, b->fg_mean, b->fg_dir, p,
                                     err))) {
        goto done;
    } else {
        memset(b->fg_mean, 0, 2 * (size_t)d * sizeof *mem); /* not kept: nothing to read */
    }
    int n_fg = 0;
    for (int i = 0; i < m; i++) n_fg += sel[i];

    /* 2. Three components of every image's foreground rows together, each min-max
     * scaled over them. */
    double var[3], total;
    if ((rc = vit_pca_top(b->comp, var, b->mean, &total, x, sel, n_fg, m, d, 3, err))) goto done;
    for (int c = 0; c < 3; c++) {
        double *v = b->comp + (size_t)c * d, lo = HUGE_VAL, hi = -HUGE_VAL;
        b->sign[c] = 1.0, b->lo[c] = b->hi[c] = 0.0, b->live[c] = 0;
        if (no_variance(var[c], total)) {
            memset(v, 0, (size_t)d * sizeof *v);
            continue;
        }
        b->sign[c] = vit_loading_sign(v, d);
        for (int i = 0; i < m; i++)
            if (sel[i]) {
                double q = b->sign[c] * project(x, b->mean, v, d, i);
                lo = fmin(lo, q), hi = fmax(hi, q);
            }
        b->lo[c] = lo, b->hi[c] = hi, b->live[c] = hi > lo;
    }
done:
    free(p);
    if (rc) vit_pca_basis_free(b);
    return rc;
}

VitStatus vit_pca_fit(VitPcaBasis *b, const float *x, int m, int d, int n_images,
                      const uint8_t *border, VitError *err) {
    if (!b) return vit_set_error(err, VIT_ERR_ARG, "feature PCA: the basis is NULL");
    VitStatus rc = check_rows(x, m, d, n_images, err);
    if (rc) return rc;
    uint8_t *sel = malloc((size_t)m);
    if (!sel) return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory for %d rows", m);
    rc = fit(b, sel, x, m, d, n_images, border, err);
    free(sel);
    return rc;
}

VitStatus vit_pca_project(float *rgb, uint8_t *fg, const VitPcaBasis *b, const float *x, int m,
                          int d, int n_images, const uint8_t *border, VitError *err) {
    if (!rgb || !b) return vit_set_error(err, VIT_ERR_ARG, "feature PCA: rgb or the basis is NULL");
    if (!b->fg_mean)
        return vit_set_error(err, VIT_ERR_ARG,
                             "feature PCA: the basis is not fitted (vit_pca_fit)");
    VitStatus rc = check_rows(x, m, d, n_images, err);
    if (rc) return rc;
    if (d != b->d)
        return vit_set_error(err, VIT_ERR_SHAPE,
                             "feature PCA: rows of %d features, the basis was fitted on %d", d,
                             b->d);
    uint8_t *sel = malloc((size_t)m);
    double *mean = malloc(2 * (size_t)d * sizeof *mean), *p = malloc((size_t)m * sizeof *p);
    if (!sel || !mean || !p) {
        rc =
            vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory for %d rows of %d", m, d);
        goto done;
    }
    int mb = m / n_images;
    for (int i = 0; b->held_fg && i < n_images; i++) /* the fit's cut, each image */
        cut_foreground(sel + (size_t)i * mb, x + (size_t)i * mb * d, mb, d, b->fg_mean, b->fg_dir,
                       b->fg_sign, b->fg_cut);
    if (!b->held_fg &&
        (rc = own_foregrounds(sel, x, m, d, n_images, border, mean, mean + d, p, err)))
        goto done;
    colour(rgb, b, sel, x, m, d);
    if (fg) memcpy(fg, sel, (size_t)m);
done:
    free(sel), free(mean), free(p);
    return rc;
}

VitStatus vit_feature_pca(float *rgb, uint8_t *fg, const float *x, int m, int d, int n_images,
                          const uint8_t *border, VitError *err) {
    if (!rgb) return vit_set_error(err, VIT_ERR_ARG, "feature PCA: rgb or x is NULL");
    VitStatus rc = check_rows(x, m, d, n_images, err);
    if (rc) return rc;
    VitPcaBasis b = {0};
    uint8_t *sel = malloc((size_t)m);
    if (!sel) return vit_set_error(err, VIT_ERR_NOMEM, "feature PCA: out of memory for %d rows", m);
    if (!(rc = fit(&b, sel, x, m, d, n_images, border, err))) {
        colour(rgb, &b, sel, x, m, d);
        if (fg) memcpy(fg, sel, (size_t)m);
    }
    vit_pca_basis_free(&b);
    free(sel);
    return rc;
}
