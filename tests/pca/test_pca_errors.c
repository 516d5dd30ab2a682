/* test_pca_errors.c - vit_feature_pca's argument errors, each with its status and a
 * message and no crash (run under ASan/UBSan too), and two cases whose answer is
 * known without a reference: rows all equal, and a foreground planted on a plane. */
#include "vit.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "FAIL: %s\n", what);
        failures++;
    }
}

/* vit_feature_pca must return `want` with a message (and again with err NULL). */
static void expect(VitStatus want, float *rgb, uint8_t *fg, const float *x, int m, int d,
                   const uint8_t *border, const char *what) {
    VitError err = {0};
    VitStatus got = vit_feature_pca(rgb, fg, x, m, d, 1, border, &err);
    char line[768];
    snprintf(line, sizeof line, "%s: status %s, expected %s (\"%s\")", what, vit_status_name(got),
             vit_status_name(want), err.msg);
    check(got == want && err.code == want && (want == VIT_OK || err.msg[0]), line);
    if (want != VIT_OK) {
        snprintf(line, sizeof line, "%s: status with err NULL", what);
        check(vit_feature_pca(rgb, fg, x, m, d, 1, border, NULL) == want, line);
    }
    printf("  %-28s %s: %s\n", what, vit_status_name(got), got ? err.msg : "");
}

int main(void) {
    enum { M = 12, D = 5 };
    float x[M * D], rgb[M * 3];
    uint8_t fg[M], border[M];

    /* rows 0-3 border, near 0; rows 4-11 a foreground spread over a plane at 10 */
    for (int i = 0; i < M; i++) {
        border[i] = i < 4;
        for (int j = 0; j < D; j++) x[i * D + j] = (float)(i < 4 ? 0.1 * ((i + j) % 3) : 10.0);
        if (i >= 4) x[i * D + 0] += (float)(i % 4), x[i * D + 1] += (float)(i / 4 == 1 ? 2.5 : 0);
    }

    puts("errors:");
    expect(VIT_ERR_ARG, rgb, fg, x, 0, D, NULL, "M = 0");
    expect(VIT_ERR_ARG, rgb, fg, x, -3, D, NULL, "M < 0");
    expect(VIT_ERR_ARG, rgb, fg, x, M, 0, NULL, "D = 0");
    expect(VIT_ERR_ARG, rgb, fg, x, M, -1, NULL, "D < 0");
    expect(VIT_ERR_ARG, NULL, fg, x, M, D, NULL, "rgb NULL");
    {
        VitError err = {0};
        check(vit_feature_pca(rgb, fg, x, M, D, 5, NULL, &err) == VIT_ERR_ARG && err.msg[0],
              "12 rows in 5 images: refused");
        check(vit_feature_pca(rgb, fg, x, M, D, 0, NULL, &err) == VIT_ERR_ARG, "0 images: refused");
    }
    expect(VIT_ERR_ARG, rgb, fg, NULL, M, D, NULL, "x NULL");
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        float y[M * D];
        memcpy(y, x, sizeof y);
        y[7 * D + 3] = bad[b];
        char what[64];
        snprintf(what, sizeof what, "x[7, 3] = %g", (double)bad[b]);
        expect(VIT_ERR_ARG, rgb, fg, y, M, D, border, what);
        VitError err = {0};
        vit_feature_pca(rgb, fg, y, M, D, 1, border, &err);
        check(strstr(err.msg, "x[7, 3]") != NULL, "the message names the non-finite element");
    }

    puts("known answers:");
    /* every row the same: no variance, so every row is foreground and black */
    float same[M * D];
    for (int i = 0; i < M * D; i++) same[i] = (float)(i % D) - 1.5f;
    memset(fg, 7, sizeof fg);
    expect(VIT_OK, rgb, fg, same, M, D, border, "rows all equal");
    for (int i = 0; i < M; i++) check(fg[i] == 1, "rows all equal: every row foreground");
    for (int i = 0; i < M * 3; i++) check(rgb[i] == 0.0f, "rows all equal: rgb 0");

    /* one row: foreground, black */
    expect(VIT_OK, rgb, fg, x, 1, D, NULL, "M = 1");
    check(fg[0] == 1 && rgb[0] == 0.0f && rgb[1] == 0.0f && rgb[2] == 0.0f, "M = 1: black fg");

    /* the planted foreground: rows 4-11, with the border's sign and without a border
     * (the largest loading is column 0's or 1's, positive towards 10: the same split) */
    for (int pass = 0; pass < 2; pass++) {
        expect(VIT_OK, rgb, fg, x, M, D, pass ? NULL : border,
               pass ? "plane, no border" : "plane, border");
        for (int i = 0; i < M; i++) check(fg[i] == (i >= 4), "plane: rows 4-11 foreground");
        for (int i = 0; i < 4; i++)
            check(rgb[i * 3] == 0.0f && rgb[i * 3 + 1] == 0.0f && rgb[i * 3 + 2] == 0.0f,
                  "plane: background black");
        /* the foreground varies in columns 0 and 1 only: blue (third component) is 0, red
         * and green span [0, 1] */
        float lo[3] = {1, 1, 1}, hi[3] = {0, 0, 0};
        for (int i = 4; i < M; i++)
            for (int c = 0; c < 3; c++)
                lo[c] = fminf(lo[c], rgb[i * 3 + c]), hi[c] = fmaxf(hi[c], rgb[i * 3 + c]);
        check(lo[0] == 0.0f && hi[0] == 1.0f && lo[1] == 0.0f && hi[1] == 1.0f,
              "plane: red and green min-max scaled to [0, 1]");
        check(lo[2] == 0.0f && hi[2] == 0.0f, "plane: no third component, blue 0");
    }

    puts("the basis kept (vit_pca_fit, vit_pca_project):");
    {
        VitPcaBasis b = {0}, none = {0};
        VitError err = {0};
        float rgb2[M * 3];
        uint8_t fg2[M];
        check(vit_pca_fit(NULL, x, M, D, 1, border, &err) == VIT_ERR_ARG && err.msg[0],
              "fit into NULL: refused");
        check(vit_pca_fit(&b, x, 0, D, 1, border, &err) == VIT_ERR_ARG && !b.fg_mean,
              "fit of 0 rows: refused, nothing kept");
        check(vit_pca_project(rgb, fg, &none, x, M, D, 1, border, &err) == VIT_ERR_ARG &&
                  strstr(err.msg, "not fitted"),
              "project with a basis not fitted: refused");
        check(vit_pca_fit(&b, x, M, D, 1, border, &err) == VIT_OK, "fit of the plane");
        check(vit_pca_project(rgb, fg, &b, x, M, D - 1, 1, border, &err) == VIT_ERR_SHAPE &&
                  strstr(err.msg, "fitted on 5"),
              "project rows of another width: VIT_ERR_SHAPE naming the fit's");
        check(vit_pca_project(NULL, fg, &b, x, M, D, 1, border, &err) == VIT_ERR_ARG,
              "project into NULL: refused");
        check(vit_pca_project(rgb, fg, &b, x, M, D, 1, border, NULL) == VIT_OK &&
                  vit_feature_pca(rgb2, fg2, x, M, D, 1, border, NULL) == VIT_OK &&
                  !memcmp(rgb, rgb2, sizeof rgb) && !memcmp(fg, fg2, sizeof fg),
              "project(fit(x), x) == vit_feature_pca(x)");
        vit_pca_basis_free(&b);
        vit_pca_basis_free(&b); /* twice: a freed basis is zeroed */
        check(!b.fg_mean && b.d == 0, "vit_pca_basis_free zeroes the basis");
    }

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("all checks passed");
    return 0;
}
