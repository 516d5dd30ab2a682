/* bar.c - the on-screen controls' strip: its items' boxes, and the hit test. */
#include "render/bar.h"

#include <math.h>

float bar_layout(DlBox *box, const float *w, const int *group, int n, float x, float y, float width,
                 float h, float gap, float group_gap) {
    if (n <= 0) return 1.0f;
    /* the row's width at scale 1: the items and the space between them */
    float spaces = 0.0f, items = 0.0f;
    for (int i = 0; i < n; i++) {
        items += w[i] > 1.0f ? w[i] : 1.0f;
        if (i > 0) spaces += group[i] == group[i - 1] ? gap : group_gap;
    }
    float total = items + spaces, s = total > width && total > 0.0f ? width / total : 1.0f;
    float cx = x + fmaxf(0.0f, (width - total * s) * 0.5f); /* a scaled row: at x, not by
                                                               rounding a hair left of it */
    int y0 = (int)floorf(y), y1 = (int)floorf(y + h);
    if (y1 <= y0) y1 = y0 + 1;
    for (int i = 0; i < n; i++) {
        if (i > 0) cx += (group[i] == group[i - 1] ? gap : group_gap) * s;
        float iw = (w[i] > 1.0f ? w[i] : 1.0f) * s;
        int x0 = (int)floorf(cx), x1 = (int)floorf(cx + iw);
        if (i > 0 && x0 < box[i - 1].x1) x0 = box[i - 1].x1; /* rounding never overlaps */
        if (x1 <= x0) x1 = x0 + 1;
        box[i] = (DlBox){x0, y0, x1, y1};
        cx += iw;
    }
    return s;
}

void bar_column(DlBox *box, int n, float x, float bottom, float top, float w, float row_h) {
    if (n <= 0) return;
    if (row_h * (float)n > bottom - top) row_h = (bottom - top) / (float)n;
    if (row_h < 1.0f) row_h = 1.0f;
    int x0 = (int)floorf(x), x1 = (int)floorf(x + w);
    if (x1 <= x0) x1 = x0 + 1;
    for (int i = 0; i < n; i++) {
        int y0 = (int)floorf(bottom - row_h * (float)(n - i));
        int y1 = (int)floorf(bottom - row_h * (float)(n - i - 1));
        if (i > 0 && y0 < box[i - 1].y1) y0 = box[i - 1].y1;
        if (y1 <= y0) y1 = y0 + 1;
        box[i] = (DlBox){x0, y0, x1, y1};
    }
}

int bar_hit(const DlBox *box, int n, int x, int y) {
    for (int i = 0; i < n; i++)
        if (x >= box[i].x0 && x < box[i].x1 && y >= box[i].y0 && y < box[i].y1) return i;
    return -1;
}
