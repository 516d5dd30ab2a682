/* drawlist.c - what changed between two frames (drawlist.h). */
#include "render/drawlist.h"

#include <stdlib.h>
#include <string.h>

/* --- recording a frame's list ---------------------------------------------------- */

/* FNV-1a, 64 bit (DL_HASH_SEED its offset basis): fast, and chaining calls hashes the
 * concatenation, so a primitive's parts can be hashed one after the other. */
uint64_t dl_hash(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

void dl_begin(DrawList *dl, int w, int h) {
    dl->n = 0;
    dl->oom = 0;
    if (w != dl->w || h != dl->h) dl->valid = 0; /* another size: nothing to compare with */
    dl->w = w, dl->h = h;
}

/* Make *p hold at least need items of item bytes, doubling from 256; *cap in items.
 * 0, or -1 with *p and *cap unchanged. */
static int grow(void **p, int *cap, int need, size_t item) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap * 2 : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * item);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int dl_add(DrawList *dl, uint64_t hash, DlBox b) {
    /* hash and box grow together on one capacity: the first call works on a copy of it so
     * that the second still sees the old value and grows too */
    int cap = dl->cap;
    if (grow((void **)&dl->hash, &cap, dl->n + 1, sizeof *dl->hash) ||
        grow((void **)&dl->box, &dl->cap, dl->n + 1, sizeof *dl->box)) {
        dl->oom = 1; /* this frame's list is incomplete: draw it all, and the next */
        return -1;
    }
    /* clipped to the canvas; one wholly outside becomes the empty box, which add_rect skips */
    b.x0 = b.x0 < 0 ? 0 : b.x0, b.y0 = b.y0 < 0 ? 0 : b.y0;
    b.x1 = b.x1 > dl->w ? dl->w : b.x1, b.y1 = b.y1 > dl->h ? dl->h : b.y1;
    if (b.x1 <= b.x0 || b.y1 <= b.y0) b.x0 = b.y0 = b.x1 = b.y1 = 0;
    dl->hash[dl->n] = hash;
    dl->box[dl->n] = b;
    return dl->n++;
}

int dl_overlap(DlBox a, DlBox b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

/* --- from two lists to the rectangles to redraw -------------------------------- */

/* b's area, px (boxes are half-open: x0 <= x < x1). */
static long area(DlBox b) {
    return (long)(b.x1 - b.x0) * (b.y1 - b.y0);
}

/* The smallest box holding a and b. */
static DlBox box_union(DlBox a, DlBox b) {
    DlBox u = {a.x0 < b.x0 ? a.x0 : b.x0, a.y0 < b.y0 ? a.y0 : b.y0, a.x1 > b.x1 ? a.x1 : b.x1,
               a.y1 > b.y1 ? a.y1 : b.y1};
    return u;
}

/* Worth drawing a and b as one rectangle: they overlap, or their union adds next to
 * nothing (each rectangle is one more pass over the frame's primitives, but pixels cost
 * more: a software rasteriser pays for every one). */
static int worth_merging(DlBox a, DlBox b) {
    long sum = area(a) + area(b);
    return dl_overlap(a, b) || area(box_union(a, b)) <= sum + sum / 16 + 1024;
}

/* Add b to rects[*n], merging as it goes; never more than DL_MAX_RECTS. */
static void add_rect(DlBox *rects, int *n, DlBox b) {
    if (b.x1 <= b.x0 || b.y1 <= b.y0) return;
    for (;;) { /* merge b with any rect worth it, again with the grown b */
        int k = -1;
        for (int i = 0; i < *n && k < 0; i++)
            if (worth_merging(rects[i], b)) k = i;
        if (k < 0) break;
        b = box_union(b, rects[k]);
        rects[k] = rects[--*n];
    }
    if (*n < DL_MAX_RECTS) {
        rects[(*n)++] = b;
        return;
    }
    /* full: merge b with the rect whose union grows least */
    int best = 0;
    long best_cost = -1;
    for (int i = 0; i < *n; i++) {
        long cost = area(box_union(rects[i], b)) - area(rects[i]);
        if (best_cost < 0 || cost < best_cost) best = i, best_cost = cost;
    }
    b = box_union(rects[best], b);
    rects[best] = rects[--*n];
    add_rect(rects, n, b);
}

/* qsort order of primitive indices by their hash: C's qsort has no context argument, so
 * the keys go through a file-level pointer (the GUI thread only). */
static const uint64_t *sort_keys;
static int by_hash(const void *a, const void *b) {
    uint64_t x = sort_keys[*(const int *)a], y = sort_keys[*(const int *)b];
    return x < y ? -1 : x > y;
}

int dl_diff(const DrawList *dl, DlBox *rects, long *px) {
    *px = (long)dl->w * dl->h;
    if (!dl->valid || dl->oom) return -1;
    int *order = malloc((size_t)(dl->n > 0 ? dl->n : 1) * sizeof *order);
    if (!order) return -1;
    /* both lists sorted by hash (the last frame's was sorted by dl_commit), then merged:
     * a primitive drawn the same way in both cancels; any other is redrawn where it is now
     * or where it was. Only the sets are compared, not the order they were drawn in */
    for (int i = 0; i < dl->n; i++) order[i] = i;
    sort_keys = dl->hash;
    qsort(order, (size_t)dl->n, sizeof *order, by_hash);
    int n = 0, i = 0, j = 0;
    while (i < dl->n || j < dl->n_prev) { /* the two sorted lists as multisets */
        uint64_t a = i < dl->n ? dl->hash[order[i]] : 0, b = j < dl->n_prev ? dl->prev_hash[j] : 0;
        if (i < dl->n && j < dl->n_prev && a == b) {
            i++, j++;
        } else if (j >= dl->n_prev || (i < dl->n && a < b)) {
            add_rect(rects, &n, dl->box[order[i++]]); /* new this frame */
        } else {
            add_rect(rects, &n, dl->prev_box[j++]); /* gone since the last frame */
        }
    }
    free(order);
    long sum = 0;
    for (int k = 0; k < n; k++) sum += area(rects[k]);
    if (sum > (long)dl->w * dl->h * 7 / 10) return -1; /* most of it: one pass is cheaper */
    *px = sum;
    return n;
}

void dl_commit(DrawList *dl) {
    if (dl->oom) {
        dl->valid = 0;
        return;
    }
    /* this frame's list becomes the last frame's, sorted by hash for the next dl_diff; any
     * failure leaves it invalid, so the next frame is drawn whole */
    int cap = dl->cap_prev;
    if (grow((void **)&dl->prev_hash, &cap, dl->n, sizeof *dl->prev_hash) ||
        grow((void **)&dl->prev_box, &dl->cap_prev, dl->n, sizeof *dl->prev_box)) {
        dl->valid = 0;
        dl->n_prev = 0;
        return;
    }
    int *order = malloc((size_t)(dl->n > 0 ? dl->n : 1) * sizeof *order);
    if (!order) {
        dl->valid = 0;
        dl->n_prev = 0;
        return;
    }
    for (int i = 0; i < dl->n; i++) order[i] = i;
    sort_keys = dl->hash;
    qsort(order, (size_t)dl->n, sizeof *order, by_hash);
    for (int i = 0; i < dl->n; i++) {
        dl->prev_hash[i] = dl->hash[order[i]];
        dl->prev_box[i] = dl->box[order[i]];
    }
    free(order);
    dl->n_prev = dl->n;
    dl->valid = 1;
}

void dl_invalidate(DrawList *dl) {
    dl->valid = 0;
}

void dl_free(DrawList *dl) {
    free(dl->hash), free(dl->box), free(dl->prev_hash), free(dl->prev_box);
    memset(dl, 0, sizeof *dl);
}
