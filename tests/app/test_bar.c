/* test_bar.c - app/render/bar.c: the on-screen controls' strip, its layout and hit test.
 *
 * Checked: a row that fits keeps its widths (scale 1), is centred, keeps the gaps (the
 * wider one between groups), stays inside the strip; a row too wide is scaled to fit, its
 * boxes still in order, inside the strip, never overlapping, each at least 1 px; on
 * random rows of random widths and strips, the same; the hit test finds item i at every
 * pixel of its box, and nothing in the gaps, above, below or beside the row; a menu's
 * column of rows ends at its bottom, shrinks to fit below its top, and is hit row by row. */
#include "render/bar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Boxes in order, disjoint, at least 1 px wide, all inside the strip (x, y, w, h) and
 * h high; every pixel of box i hits i; the pixels between two boxes hit nothing. */
static void check_row(const DlBox *b, int n, float x, float y, float w, float h, const char *what) {
    for (int i = 0; i < n; i++) {
        CHECK(b[i].x1 > b[i].x0, "%s: box %d is %d px wide", what, i, b[i].x1 - b[i].x0);
        CHECK(b[i].x0 >= (int)floorf(x) && b[i].x1 <= (int)ceilf(x + w),
              "%s: box %d (%d..%d) "
              "outside the strip %g..%g",
              what, i, b[i].x0, b[i].x1, (double)x, (double)(x + w));
        CHECK(b[i].y0 == (int)floorf(y) && b[i].y1 == (int)floorf(y + h), "%s: box %d rows %d..%d",
              what, i, b[i].y0, b[i].y1);
        if (i > 0) CHECK(b[i].x0 >= b[i - 1].x1, "%s: boxes %d and %d overlap", what, i - 1, i);
        int cy = (b[i].y0 + b[i].y1) / 2;
        CHECK(bar_hit(b, n, b[i].x0, cy) == i && bar_hit(b, n, b[i].x1 - 1, cy) == i &&
                  bar_hit(b, n, b[i].x0, b[i].y0) == i &&
                  bar_hit(b, n, b[i].x1 - 1, b[i].y1 - 1) == i,
              "%s: box %d's corners hit it", what, i);
        CHECK(bar_hit(b, n, b[i].x0, b[i].y0 - 1) == -1 && bar_hit(b, n, b[i].x0, b[i].y1) == -1,
              "%s: above and below box %d hit nothing", what, i);
        if (i > 0)
            for (int gx = b[i - 1].x1; gx < b[i].x0; gx++)
                CHECK(bar_hit(b, n, gx, cy) == -1, "%s: the gap at x %d before box %d hits %d",
                      what, gx, i, bar_hit(b, n, gx, cy));
    }
    if (n > 0) {
        int cy = (b[0].y0 + b[0].y1) / 2;
        CHECK(bar_hit(b, n, b[0].x0 - 1, cy) == -1 && bar_hit(b, n, b[n - 1].x1, cy) == -1,
              "%s: beside the row hits nothing", what);
    }
}

int main(void) {
    /* a row that fits: 3 groups (40 | 40 100 40 | 60), gap 4, group gap 20 */
    {
        float w[5] = {40, 40, 100, 40, 60};
        int g[5] = {0, 1, 1, 1, 2};
        DlBox b[5];
        float s = bar_layout(b, w, g, 5, 10, 500, 1000, 50, 4, 20);
        float total = 280 + 4 * 2 + 20 * 2;
        CHECK(s == 1.0f, "a row that fits is not scaled (%g)", (double)s);
        for (int i = 0; i < 5; i++)
            CHECK(b[i].x1 - b[i].x0 == (int)w[i], "box %d keeps its width %g (%d)", i, (double)w[i],
                  b[i].x1 - b[i].x0);
        CHECK(b[1].x0 - b[0].x1 == 20 && b[2].x0 - b[1].x1 == 4 && b[4].x0 - b[3].x1 == 20,
              "gaps: %d (groups), %d (in a group), %d", b[1].x0 - b[0].x1, b[2].x0 - b[1].x1,
              b[4].x0 - b[3].x1);
        int left = b[0].x0 - 10, right = 1010 - b[4].x1;
        CHECK(abs(left - right) <= 1 && abs(left - (int)((1000 - total) / 2)) <= 1,
              "centred: %d px left, %d right", left, right);
        check_row(b, 5, 10, 500, 1000, 50, "fits");
    }
    /* a row too wide: scaled by the strip's width over the row's */
    {
        float w[4] = {300, 300, 300, 300};
        int g[4] = {0, 0, 1, 1};
        DlBox b[4];
        float s = bar_layout(b, w, g, 4, 0, 0, 600, 30, 10, 40);
        CHECK(fabsf(s - 600.0f / (1200 + 10 + 40 + 10)) < 1e-6f, "scale %g", (double)s);
        check_row(b, 4, 0, 0, 600, 30, "too wide");
        CHECK(b[3].x1 >= 598, "the scaled row spans the strip (ends at %d)", b[3].x1);
    }
    /* no items; one item wider than anything */
    {
        DlBox b[1];
        CHECK(bar_layout(b, NULL, NULL, 0, 0, 0, 100, 10, 1, 2) == 1.0f, "no items: scale 1");
        CHECK(bar_hit(b, 0, 5, 5) == -1, "no items: nothing hit");
        float w[1] = {1e6f};
        int g[1] = {0};
        bar_layout(b, w, g, 1, 5, 5, 100, 10, 1, 2);
        check_row(b, 1, 5, 5, 100, 10, "one huge item");
    }
    /* a menu's column: rows stacked up to `bottom`, shrunk to start no higher than `top` */
    {
        DlBox b[15];
        bar_column(b, 15, 100.5f, 900, 20, 300, 40);
        CHECK(b[14].y1 == 900 && b[0].y0 == 300 && b[0].x0 == 100 && b[0].x1 == 400,
              "15 rows of 40 px end at 900: %d..%d, x %d..%d", b[0].y0, b[14].y1, b[0].x0, b[0].x1);
        bar_column(b, 15, 0, 500, 20, 300, 40);
        CHECK(b[0].y0 >= 20 && b[14].y1 == 500,
              "no room for 40 px rows: shrunk into 20..500 "
              "(%d..%d)",
              b[0].y0, b[14].y1);
        for (int i = 0; i < 15; i++) {
            CHECK(b[i].y1 > b[i].y0 && (i == 0 || b[i].y0 >= b[i - 1].y1), "menu row %d", i);
            CHECK(bar_hit(b, 15, 150, (b[i].y0 + b[i].y1) / 2) == i, "menu row %d hit", i);
        }
        CHECK(bar_hit(b, 15, 150, 19) == -1 && bar_hit(b, 15, 150, 500) == -1 &&
                  bar_hit(b, 15, 300, 300) == -1,
              "above, below and beside the menu: nothing");
    }
    /* random rows: widths 0.2 .. 300 px, 1 .. 24 items, strips 20 .. 2000 px, fractional
     * origins (a scaled row's rounding must still never overlap or leave the strip) */
    srand(7);
    for (int t = 0; t < 3000; t++) {
        int n = 1 + rand() % 24;
        float w[24];
        int g[24];
        for (int i = 0; i < n; i++) {
            w[i] = 0.2f + (float)(rand() % 3000) / 10.0f;
            g[i] = i == 0 ? 0 : g[i - 1] + (rand() % 3 == 0);
        }
        float x = (float)(rand() % 1000) / 7.0f, y = (float)(rand() % 1000) / 7.0f;
        float width = 20.0f + (float)(rand() % 1980), h = 1.0f + (float)(rand() % 80);
        float gap = (float)(rand() % 12), ggap = gap + (float)(rand() % 40);
        DlBox b[24];
        float s = bar_layout(b, w, g, n, x, y, width, h, gap, ggap);
        char what[64];
        snprintf(what, sizeof what, "random row %d (%d items, scale %.3f)", t, n, (double)s);
        CHECK(s > 0.0f && s <= 1.0f, "%s: scale in (0, 1]", what);
        /* in the strip whenever no item is scaled below the 1 px minimum (that rounding up
         * may push a row of specks past it); in order and disjoint always */
        float min_w = 1e9f;
        for (int i = 0; i < n; i++) min_w = fminf(min_w, w[i] < 1.0f ? 1.0f : w[i]);
        if (s * min_w >= 1.0f)
            check_row(b, n, x, y, width, h, what);
        else
            for (int i = 1; i < n; i++)
                CHECK(b[i].x0 >= b[i - 1].x1 && b[i].x1 > b[i].x0, "%s: box %d", what, i);
        if (failures > 20) break;
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("bar: all checks passed\n");
    return 0;
}
