/* test_drawlist.c - app/render/drawlist.c: what changed between two frames.
 *
 * A frame is a list of (hash, box) primitives. Checked: an unchanged frame redraws
 * nothing; a changed primitive redraws its old and its new box and nothing far from
 * them; hashes count as a multiset (a primitive drawn twice, then once); a new size or
 * an invalidated canvas redraws all; and, on thousands of random frames, every pixel a
 * changed primitive touches (before or after) lies in a returned rectangle, at most
 * DL_MAX_RECTS of them. A replay on a toy canvas (each primitive paints its box with
 * its hash, later ones on top) must then equal the frame drawn from scratch.
 * What the diff cannot see, by design: the same primitives drawn in another order. */
#include "render/drawlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct {
    uint64_t hash;
    DlBox box;
} Prim;

static void record(DrawList *dl, int w, int h, const Prim *p, int n) {
    dl_begin(dl, w, h);
    for (int i = 0; i < n; i++) dl_add(dl, p[i].hash, p[i].box);
}

static int covered(const DlBox *rects, int n, int x, int y) {
    for (int i = 0; i < n; i++)
        if (x >= rects[i].x0 && x < rects[i].x1 && y >= rects[i].y0 && y < rects[i].y1) return 1;
    return 0;
}

/* Paint prims into canvas [h, w] (each its box with its hash's low bits), only inside
 * clip (NULL: everywhere) after clearing it to 0: what render.c's replay_box does. */
static void paint(uint32_t *canvas, int w, int h, const Prim *p, int n, const DlBox *clip) {
    DlBox all = {0, 0, w, h};
    if (!clip) clip = &all;
    for (int y = clip->y0; y < clip->y1; y++)
        for (int x = clip->x0; x < clip->x1; x++) canvas[y * w + x] = 0;
    for (int i = 0; i < n; i++) {
        DlBox b = p[i].box;
        for (int y = b.y0 > clip->y0 ? b.y0 : clip->y0; y < b.y1 && y < clip->y1 && y < h; y++)
            for (int x = b.x0 > clip->x0 ? b.x0 : clip->x0; x < b.x1 && x < clip->x1 && x < w; x++)
                if (x >= 0 && y >= 0) canvas[y * w + x] = (uint32_t)p[i].hash | 1u;
    }
}

static void fixed_cases(void) {
    DrawList dl = {0};
    DlBox rects[DL_MAX_RECTS];
    long px;
    Prim a[3] = {{1, {0, 0, 100, 100}}, {2, {10, 10, 20, 20}}, {3, {200, 200, 220, 210}}};
    record(&dl, 400, 300, a, 3);
    CHECK(dl_diff(&dl, rects, &px) == -1, "the first frame is drawn whole");
    dl_commit(&dl);
    record(&dl, 400, 300, a, 3);
    CHECK(dl_diff(&dl, rects, &px) == 0 && px == 0, "an unchanged frame redraws nothing");
    dl_commit(&dl);

    Prim b[3] = {a[0], {22, {12, 12, 22, 22}}, a[2]}; /* the small one moved and changed */
    record(&dl, 400, 300, b, 3);
    int n = dl_diff(&dl, rects, &px);
    CHECK(n == 1, "one rectangle for two nearby boxes, got %d", n);
    CHECK(n >= 1 && rects[0].x0 <= 10 && rects[0].y0 <= 10 && rects[0].x1 >= 22 &&
              rects[0].y1 >= 22,
          "the old and the new box are redrawn");
    CHECK(n >= 1 && !covered(rects, n, 210, 205), "the unchanged far box is not");
    CHECK(px > 0 && px < 400 * 300 / 10, "a small redraw: %ld px", px);
    dl_commit(&dl);

    /* a multiset: drawn twice, then once, is a change */
    Prim c[4] = {b[0], b[1], b[2], b[2]};
    record(&dl, 400, 300, c, 4);
    dl_commit(&dl);
    record(&dl, 400, 300, b, 3);
    n = dl_diff(&dl, rects, &px);
    CHECK(n >= 1 && covered(rects, n, 210, 205), "a primitive gone once of twice redraws");
    dl_commit(&dl);

    /* boxes outside the frame are clamped; an empty one is never dirty */
    Prim d[4] = {b[0], b[1], b[2], {99, {500, 500, 600, 600}}};
    record(&dl, 400, 300, d, 4);
    n = dl_diff(&dl, rects, &px);
    CHECK(n == 0, "a primitive wholly outside the frame changes nothing, got %d rects", n);
    dl_commit(&dl);

    record(&dl, 401, 300, d, 4);
    CHECK(dl_diff(&dl, rects, &px) == -1, "a new size redraws all");
    dl_commit(&dl);
    record(&dl, 401, 300, d, 4);
    CHECK(dl_diff(&dl, rects, &px) == 0, "then nothing again");
    dl_invalidate(&dl);
    CHECK(dl_diff(&dl, rects, &px) == -1, "an invalidated canvas redraws all");

    /* most of the frame changed: one whole pass */
    dl_commit(&dl);
    Prim e[1] = {{5, {0, 0, 390, 290}}};
    record(&dl, 401, 300, e, 1);
    CHECK(dl_diff(&dl, rects, &px) == -1, "a change over most of the frame redraws it whole");
    dl_free(&dl);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}
static int rint_(int n) {
    return (int)(rnd() % (uint64_t)n);
}

static DlBox random_box(int w, int h) {
    int big = rint_(16) == 0; /* mostly small boxes, now and then up to the whole frame */
    int bw = 1 + rint_(big ? w : w / 8), bh = 1 + rint_(big ? h : h / 8);
    int x = rint_(w + 20) - 10, y = rint_(h + 20) - 10;
    DlBox b = {x, y, x + bw, y + bh};
    return b;
}

static void random_frames(void) {
    enum { W = 160, H = 120, MAXP = 64 };
    DrawList dl = {0};
    Prim cur[MAXP], next[MAXP];
    uint32_t *canvas = calloc(W * H, sizeof *canvas), *fresh = calloc(W * H, sizeof *fresh);
    int n = 1 + rint_(MAXP), partial = 0;
    for (int i = 0; i < n; i++) cur[i].hash = rnd(), cur[i].box = random_box(W, H);
    record(&dl, W, H, cur, n);
    paint(canvas, W, H, cur, n, NULL);
    dl_commit(&dl);
    for (int frame = 0; frame < 3000 && !failures; frame++) {
        /* the next frame: the same with a few changes, insertions, deletions, moves. Not
         * deletions and copies in one frame: deleting a primitive and drawing the same one
         * elsewhere in the order is a pure change of order, which the diff does not see
         * (the renderer draws in a fixed order: it does not do that) */
        int m = 0, copies = rint_(2);
        for (int i = 0; i < n && m < MAXP; i++) {
            int what = rint_(80);
            if (what == 0 && !copies) continue; /* gone */
            next[m] = cur[i];
            if (what == 1) next[m].hash = rnd(); /* redrawn differently in place */
            if (what == 2) next[m].hash = rnd(), next[m].box = random_box(W, H); /* moved */
            m++;
            if (what == 3 && copies && m + n - i < MAXP) next[m] = next[rint_(m)], m++; /* a copy */
            if (what == 4 && m + n - i < MAXP)
                next[m].hash = rnd(), next[m++].box = random_box(W, H);
        }
        if (m == 0) next[m].hash = rnd(), next[m++].box = random_box(W, H);
        record(&dl, W, H, next, m);
        DlBox rects[DL_MAX_RECTS];
        long px;
        int k = dl_diff(&dl, rects, &px);
        CHECK(k <= DL_MAX_RECTS, "at most %d rects, got %d", DL_MAX_RECTS, k);
        if (k < 0) {
            paint(canvas, W, H, next, m, NULL);
        } else {
            partial++;
            for (int i = 0; i < k; i++) paint(canvas, W, H, next, m, &rects[i]);
        }
        paint(fresh, W, H, next, m, NULL);
        long bad = 0;
        for (int i = 0; i < W * H; i++) bad += canvas[i] != fresh[i];
        CHECK(bad == 0, "frame %d: %ld px differ from a whole redraw (%d rects)", frame, bad, k);
        dl_commit(&dl);
        memcpy(cur, next, sizeof(Prim) * (size_t)m);
        n = m;
    }
    CHECK(partial > 1000, "most random frames are partial redraws: %d of 3000", partial);
    free(canvas), free(fresh);
    dl_free(&dl);
}

int main(void) {
    fixed_cases();
    random_frames();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("drawlist: ok\n");
    return 0;
}
