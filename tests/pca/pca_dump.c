/* pca_dump.c - run vit_feature_pca on feature rows from a file and write what it
 * computed as .npy files, for test_pca.py.
 *
 *   pca_dump --x FEATURES [--shape MxD] [--border MASK] [--images K] --out DIR [--repeat K]
 *
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
          "                [--images K] [--repeat K]\n",
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

int main(int argc, char **argv) {
    const char *xpath = NULL, *bpath = NULL, *out = NULL;
    long shape[2] = {-1, -1};
    int repeat = 0, n_images = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--x"))
            xpath = v;
        else if (!strcmp(a, "--border"))
            bpath = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%ldx%ld", &shape[0], &shape[1]) != 2) return usage();
        } else if (!strcmp(a, "--repeat"))
            repeat = atoi(v);
        else if (!strcmp(a, "--images"))
            n_images = atoi(v);
        else
            return usage();
    }
    if (!xpath || !out || argc % 2 == 0) return usage();

    size_t xbytes = 0, bbytes = 0;
    char *xbuf = NULL, *bbuf = NULL;
    float *x = NULL, *rgb = NULL, *fgf = NULL;
    uint8_t *fg = NULL;
    const uint8_t *border = NULL;
    int rc = 1;
    if (!(xbuf = read_file(xpath, &xbytes))) goto done;
    const char *xdata = xbuf;
    if (is_npy(xpath) && !(xdata = npy_data(xpath, xbuf, xbytes, "<f4", 2, shape))) goto done;
    /* the data must hold M * D floats (a raw file: exactly) */
    size_t have = xbytes - (size_t)(xdata - xbuf);
    if (shape[0] < 0 || shape[1] < 0 || shape[0] > INT32_MAX || shape[1] > INT32_MAX ||
        have < (size_t)shape[0] * (size_t)shape[1] * sizeof(float) ||
        (!is_npy(xpath) && have != (size_t)shape[0] * (size_t)shape[1] * sizeof(float))) {
        fprintf(stderr, "%s: %zu bytes of data, expected [%ld, %ld] float32\n", xpath, have,
                shape[0], shape[1]);
        goto done;
    }
    int m = (int)shape[0], d = (int)shape[1];
    if (bpath) {
        if (!(bbuf = read_file(bpath, &bbytes))) goto done;
        long bn = (long)bbytes;
        border = (const uint8_t *)bbuf;
        if (is_npy(bpath) &&
            !(border = (const uint8_t *)npy_data(bpath, bbuf, bbytes, "|u1", 1, &bn)))
            goto done;
        if (bn != m) {
            fprintf(stderr, "%s: %ld rows, expected %d\n", bpath, bn, m);
            goto done;
        }
    }

    /* a copy, so that the rows are aligned whatever the .npy header's length */
    x = malloc((size_t)m * d * sizeof *x + 1), rgb = malloc((size_t)m * 3 * sizeof *rgb + 1);
    fgf = malloc((size_t)m * sizeof *fgf + 1), fg = malloc((size_t)m + 1);
    if (!x || !rgb || !fgf || !fg) {
        fputs("pca_dump: out of memory\n", stderr);
        goto done;
    }
    memcpy(x, xdata, (size_t)m * d * sizeof *x);
    VitError err = {0};
    double t0 = now_s();
    VitStatus st = vit_feature_pca(rgb, fg, x, m, d, n_images, border, &err);
    double best = now_s() - t0;
    for (int r = 0; !st && r < repeat; r++) {
        t0 = now_s();
        st = vit_feature_pca(rgb, fg, x, m, d, n_images, border, &err);
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
    free(x), free(rgb), free(fgf), free(fg), free(xbuf), free(bbuf);
    return rc;
}
