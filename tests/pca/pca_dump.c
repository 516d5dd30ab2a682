/* pca_dump.c - run vit_feature_pca on feature rows from a file and write what it
 * computed as .npy files, for test_pca.py.
 *
 *   pca_dump --x FEATURES [--shape MxD] [--border MASK] [--images K] --out DIR [--repeat K]
 *            [--split | --fit FEATURES2 [--fit-border MASK2]]
 *
 * --split: vit_pca_fit on FEATURES, then vit_pca_project of FEATURES (instead of
 * vit_feature_pca). --fit: vit_pca_fit on FEATURES2 (a .npy of float32 [M2, D], one
 * image, border MASK2), then vit_pca_project of FEATURES.
 * FEATURES: a .npy of float32 [M, D] (C order, this machine's byte order), or a raw
 * float32 file with --shape. MASK: M bytes, 1 for a border row (raw, or a .npy of
 * uint8 [M]). Writes DIR/rgb.npy [M, 3] f4 and DIR/fg.npy [M] f4 (1 foreground, 0
 * background). --repeat K: also runs it K more times and prints the fastest call's
 * time. On an engine error: the status and message on stderr, exit 1. */
#include "headless/npy.h"
#include "vit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int usage(void) {
    fputs("usage: pca_dump --x FEATURES.npy|RAW_F32 [--shape MxD] [--border MASK] --out DIR\n"
          "                [--images K] [--repeat K] [--split | --fit F2.npy [--fit-border M2]]\n",
          stderr);
    return 2;
}

/* The whole file into a malloc'd buffer; *bytes its size. NULL (message printed) on
 * failure. */
static char *read_file(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
        !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
        free(buf);
        buf = NULL;
    } else
        *bytes = (size_t)n;
    if (f) fclose(f);
    return buf;
}

/* A .npy's data: checks the magic, the dtype (descr), C order and the number of
 * dimensions; shape[ndim] receives the shape. Returns a pointer into buf or NULL. */
static const char *npy_data(const char *path, const char *buf, size_t bytes, const char *descr,
                            int ndim, long *shape) {
    size_t hlen, off;
    if (bytes < 10 || memcmp(buf, "\x93NUMPY", 6)) goto bad;
    if (buf[6] == 1) {
        hlen = (uint8_t)buf[8] | (size_t)(uint8_t)buf[9] << 8;
        off = 10;
    } else {
        if (bytes < 12) goto bad;
        hlen = (uint8_t)buf[8] | (size_t)(uint8_t)buf[9] << 8 | (size_t)(uint8_t)buf[10] << 16 |
               (size_t)(uint8_t)buf[11] << 24;
        off = 12;
    }
    if (off + hlen > bytes) goto bad;
    char head[1024];
    size_t n = hlen < sizeof head - 1 ? hlen : sizeof head - 1;
    memcpy(head, buf + off, n);
    head[n] = 0;
    const char *d = strstr(head, "'descr': '"), *s = strstr(head, "'shape': (");
    if (!d || strncmp(d + 10, descr, strlen(descr)) || !strstr(head, "'fortran_order': False") ||
        !s)
        goto bad;
    s += 10;
    for (int i = 0; i < ndim; i++) {
        char *end;
        shape[i] = strtol(s, &end, 10);
        if (end == s || shape[i] < 0) goto bad;
        s = end + strspn(end, ", ");
    }
    if (*s != ')') goto bad;
    return buf + off + hlen;
bad:
    fprintf(stderr, "%s: not a .npy of %s with %d dimensions\n", path, descr, ndim);
    return NULL;
}

static int is_npy(const char *path) {
    size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".npy");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rows [*m, *d] of path (.npy, or raw float32 with shape[2] given) into a malloc'd copy
 * (aligned whatever the .npy header's length); border (bpath, or NULL) into *border
 * [*m], malloc'd. 0, or 1 with the message printed. */
static int load_rows(float **x, uint8_t **border, int *m, int *d, const char *path,
                     const char *bpath, const long *given) {
    size_t xbytes = 0, bbytes = 0;
    char *xbuf = NULL, *bbuf = NULL;
    long shape[2] = {given[0], given[1]};
    int rc = 1;
    *x = NULL, *border = NULL;
    if (!(xbuf = read_file(path, &xbytes))) goto done;
    const char *xdata = xbuf;
    if (is_npy(path) && !(xdata = npy_data(path, xbuf, xbytes, "<f4", 2, shape))) goto done;
    /* the data must hold M * D floats (a raw file: exactly) */
    size_t have = xbytes - (size_t)(xdata - xbuf);
    if (shape[0] < 0 || shape[1] < 0 || shape[0] > INT32_MAX || shape[1] > INT32_MAX ||
        have < (size_t)shape[0] * (size_t)shape[1] * sizeof(float) ||
        (!is_npy(path) && have != (size_t)shape[0] * (size_t)shape[1] * sizeof(float))) {
        fprintf(stderr, "%s: %zu bytes of data, expected [%ld, %ld] float32\n", path, have,
                shape[0], shape[1]);
        goto done;
    }
    *m = (int)shape[0], *d = (int)shape[1];
    if (bpath) {
        if (!(bbuf = read_file(bpath, &bbytes))) goto done;
        long bn = (long)bbytes;
        const char *b = bbuf;
        if (is_npy(bpath) && !(b = npy_data(bpath, bbuf, bbytes, "|u1", 1, &bn))) goto done;
        if (bn != *m) {
            fprintf(stderr, "%s: %ld rows, expected %d\n", bpath, bn, *m);
            goto done;
        }
        if (!(*border = malloc((size_t)*m + 1))) goto nomem;
        memcpy(*border, b, (size_t)*m);
    }
    if (!(*x = malloc((size_t)*m * *d * sizeof **x + 1))) goto nomem;
    memcpy(*x, xdata, (size_t)*m * *d * sizeof **x);
    rc = 0;
    goto done;
nomem:
    fputs("pca_dump: out of memory\n", stderr);
done:
    if (rc) free(*x), free(*border), *x = NULL, *border = NULL;
    free(xbuf), free(bbuf);
    return rc;
}

/* The PCA pca_dump was asked for: vit_feature_pca, or fit (on fx [fm, d], fborder, one
 * image; fx NULL: on x) then project x. */
static VitStatus run_pca(float *rgb, uint8_t *fg, const float *x, int m, int d, int n_images,
                         const uint8_t *border, int split, const float *fx, int fm,
                         const uint8_t *fborder, VitError *err) {
    if (!split && !fx) return vit_feature_pca(rgb, fg, x, m, d, n_images, border, err);
    VitPcaBasis b = {0};
    VitStatus st = fx ? vit_pca_fit(&b, fx, fm, d, 1, fborder, err)
                      : vit_pca_fit(&b, x, m, d, n_images, border, err);
    if (!st) st = vit_pca_project(rgb, fg, &b, x, m, d, n_images, border, err);
    vit_pca_basis_free(&b);
    return st;
}

int main(int argc, char **argv) {
    const char *xpath = NULL, *bpath = NULL, *out = NULL, *fpath = NULL, *fbpath = NULL;
    long shape[2] = {-1, -1}, none[2] = {-1, -1};
    int repeat = 0, n_images = 1, split = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--split")) {
            split = 1;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "--x"))
            xpath = v;
        else if (!strcmp(a, "--border"))
            bpath = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--fit"))
            fpath = v;
        else if (!strcmp(a, "--fit-border"))
            fbpath = v;
        else if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%ldx%ld", &shape[0], &shape[1]) != 2) return usage();
        } else if (!strcmp(a, "--repeat"))
            repeat = atoi(v);
        else if (!strcmp(a, "--images"))
            n_images = atoi(v);
        else
            return usage();
    }
    if (!xpath || !out || (split && fpath)) return usage();

    float *x = NULL, *fx = NULL, *rgb = NULL, *fgf = NULL;
    uint8_t *fg = NULL, *border = NULL, *fborder = NULL;
    int rc = 1, m = 0, d = 0, fm = 0, fd = 0;
    if (load_rows(&x, &border, &m, &d, xpath, bpath, shape)) goto done;
    if (fpath && load_rows(&fx, &fborder, &fm, &fd, fpath, fbpath, none)) goto done;
    if (fpath && fd != d) {
        fprintf(stderr, "%s: %d features, %s has %d\n", fpath, fd, xpath, d);
        goto done;
    }
    rgb = malloc((size_t)m * 3 * sizeof *rgb + 1);
    fgf = malloc((size_t)m * sizeof *fgf + 1), fg = malloc((size_t)m + 1);
    if (!rgb || !fgf || !fg) {
        fputs("pca_dump: out of memory\n", stderr);
        goto done;
    }
    VitError err = {0};
    double t0 = now_s();
    VitStatus st = run_pca(rgb, fg, x, m, d, n_images, border, split, fx, fm, fborder, &err);
    double best = now_s() - t0;
    for (int r = 0; !st && r < repeat; r++) {
        t0 = now_s();
        st = run_pca(rgb, fg, x, m, d, n_images, border, split, fx, fm, fborder, &err);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    if (st) {
        fprintf(stderr, "pca_dump: %s: %s\n", vit_status_name(st), err.msg);
        goto done;
    }
    if (repeat > 0)
        printf("vit_feature_pca [%d, %d]: %.2f ms (fastest of %d)\n", m, d, 1e3 * best, repeat + 1);
    for (int i = 0; i < m; i++) fgf[i] = fg[i];
    char msg[512];
    int s_rgb[2] = {m, 3}, s_fg[1] = {m};
    if (npy_write(out, "rgb.npy", rgb, s_rgb, 2, msg, sizeof msg) ||
        npy_write(out, "fg.npy", fgf, s_fg, 1, msg, sizeof msg)) {
        fprintf(stderr, "pca_dump: %s\n", msg);
        goto done;
    }
    rc = 0;
done:
    free(x), free(fx), free(rgb), free(fgf), free(fg), free(border), free(fborder);
    return rc;
}
