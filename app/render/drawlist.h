/* drawlist.h - what changed between two frames, as rectangles of pixels to redraw.
 *
 * The renderer records every frame as a list of primitives (a rectangle, a disc, a
 * line segment, a text, a heat map quad), each with the pixel box it can touch and a
 * 64-bit hash of everything that decides its pixels (position, colour, the text and
 * its size, the textures' upload generations, the shader's uniforms). A primitive of
 * this frame whose hash the last frame also had draws the same pixels again; the
 * others (new ones, and the last frame's that are gone) are what changed: their
 * boxes, merged into a few rectangles, are all that has to be redrawn. Redrawing a
 * rectangle replays, scissored to it, every primitive of the frame that touches it,
 * in order, over the background: the pixels come out as a full redraw's would.
 *
 * No OpenGL here (render.c replays); tests/app/test_drawlist.c checks the diff. */
#ifndef VITLENS_DRAWLIST_H
#define VITLENS_DRAWLIST_H

#include <stddef.h>
#include <stdint.h>

#define DL_MAX_RECTS 12 /* rectangles a diff returns at most (more are merged) */

/* A pixel box: x0 <= x < x1, y0 <= y < y1, origin top-left. */
typedef struct {
    int x0, y0, x1, y1;
} DlBox;

typedef struct {
    uint64_t *hash; /* [n] this frame's primitives' hashes, in drawing order */
    DlBox *box;     /* [n] and their boxes */
    int n, cap;
    uint64_t *prev_hash; /* [n_prev] the last frame's, sorted by hash */
    DlBox *prev_box;     /* [n_prev] in the same order */
    int n_prev, cap_prev;
    int w, h;  /* the frame's size, px */
    int valid; /* 1: prev_* describe what the canvas holds */
    int oom;   /* 1: this frame's list is incomplete (out of memory) */
} DrawList;

/* 64-bit FNV-1a of n bytes, continuing from h (start with DL_HASH_SEED). */
#define DL_HASH_SEED 0xcbf29ce484222325ull
uint64_t dl_hash(uint64_t h, const void *data, size_t n);

/* Start a frame of w x h px: forget this frame's list (the last frame's stays). */
void dl_begin(DrawList *dl, int w, int h);
/* Append a primitive with hash `hash` touching box (clamped to the frame; an empty
 * box is kept and never dirty). Returns its index, or -1 out of memory (the frame
 * then redraws in full: dl_diff says so). */
int dl_add(DrawList *dl, uint64_t hash, DlBox box);
/* The rectangles to redraw to turn the last frame into this one: at most
 * DL_MAX_RECTS disjoint-or-overlapping boxes in rects, their count returned; -1
 * when the whole frame must be drawn (no valid last frame, another size, out of
 * memory, or the changes cover most of it). *px: the pixels the rects cover
 * (counted once per rect). Does not change the lists. */
int dl_diff(const DrawList *dl, DlBox *rects, long *px);
/* The frame is on the canvas: it becomes the last frame. */
void dl_commit(DrawList *dl);
/* The canvas lost its contents (resized, recreated): the next diff is -1. */
void dl_invalidate(DrawList *dl);
void dl_free(DrawList *dl);

/* Do boxes a and b share a pixel? */
int dl_overlap(DlBox a, DlBox b);

#endif
