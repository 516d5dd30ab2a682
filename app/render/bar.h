/* bar.h - the on-screen controls' strip (the buttons a mouse uses for what the keys do
 * most): where its items go, and which one a point hits. Pure arithmetic on pixel boxes,
 * no SDL and no GL, so that tests/app/test_bar.c checks it alone; panels.c draws the
 * items in the boxes, and render.c keeps them for ren_control_at. */
#ifndef VITLENS_BAR_H
#define VITLENS_BAR_H

#include "render/drawlist.h" /* DlBox */

/* Lay out n items left to right in the strip (x, y, width, h), framebuffer px, origin
 * top-left: item i is w[i] px wide at scale 1 (its text and padding) and h high; `gap` px
 * separate two items of one group (group[i] == group[i - 1]), `group_gap` px two groups.
 * The row is centred in the strip. When it is wider than the strip, every width and gap
 * is scaled by the same s < 1 so that it fits (the caller draws the texts scaled by s).
 * The boxes (box[n]) are on whole pixels, in order, never overlapping, each at least 1 px
 * wide, and inside the strip when it fits. Returns s (1 when the row fits as it is). */
float bar_layout(DlBox *box, const float *w, const int *group, int n, float x, float y, float width,
                 float h, float gap, float group_gap);

/* A menu of n rows above a strip's item: a column w px wide from x, its last row ending at
 * `bottom`, each row row_h px high (shrunk so that the column starts no higher than `top`),
 * into box[n], first row at the top, on whole pixels, never overlapping. */
void bar_column(DlBox *box, int n, float x, float bottom, float top, float w, float row_h);

/* The item whose box (box[n], as bar_layout made them) holds pixel (x, y), or -1. */
int bar_hit(const DlBox *box, int n, int x, int y);

#endif
