/* view.h - which map of a photo is on screen (View), and how (ViewOverview): plain data,
 * with the helpers that need nothing but the model's shapes. No SDL, no GL; it knows
 * neither the Scene nor the map kinds' table (mapkind.h reads a View through its kind's
 * row; maps.h computes its maps). */
#ifndef VITLENS_VIEW_H
#define VITLENS_VIEW_H

#include "view/interv.h"
#include "vit.h"

#include <stddef.h>

/* A View: its kind's row (mapkind.h) says which fields the map reads. */
typedef struct {
    int kind;            /* MapKind (mapkind.h): attention, rollout, ... */
    int layer;           /* 0 .. L-1 */
    int head;            /* 0 .. H-1 one head; H + VitFusion (H, H+1, H+2): mean/max/min fusion */
    float discard_ratio; /* rollout's discard ratio, [0, 1) */
    int query;           /* the query token: 0 the CLS token, Np + r*gw + c the patch (r, c) */
    int target;          /* the class a class-specific kind explains, 0 .. C-1; VIEW_TOP1 */
    int joint;           /* the feature PCA over every photo of the slideshow, not this one */
} View;

#define VIEW_N_FUSIONS 3    /* mean, max, min after the heads */
#define VIEW_TOP1      (-1) /* View.target: the model's top-1 class */

/* How the view is shown: its single map, or an overview of per-head maps: every head and
 * fusion of its layer (A), or of every layer, a column per layer (T). The window, the
 * renderer and the view's maps (maps.h) all say it with this one type. */
typedef enum { VIEW_SINGLE = 0, VIEW_HEADS, VIEW_TABLE } ViewOverview;

/* Fusion of the view, or -1 when a single head is selected. */
int view_fusion(const View *v, int n_heads);

/* The query token as text: "CLS token" or "patch (row 4, col 8)" (1-based). */
void view_query_text(char *buf, size_t n, const View *v, const VitConfig *cfg);

/* "head 2/3" or "mean of 3 heads" (1-based) into buf; "head 2/3, ablated" when iv (or
 * NULL) ablates the head in v's layer. */
void view_head_text(char *buf, size_t n, const View *v, int n_heads, const IntervSpec *iv);

/* Token t's name into buf (n bytes): a prefix token's ("CLS", "reg1", vit_prefix_name),
 * else "patch (row<sep> col)", 1-based on the patch grid. Returns buf. */
const char *token_name(char *buf, size_t n, const VitConfig *c, int t, char sep);

/* For a signed map (relevance that may be negative: AttnLRP, gradient x input):
 * 0 at the middle of the colour scale, +-s at its ends, s the 99.5th percentile of
 * |src| (so that a few extreme pixels do not wash the rest out; beyond it the
 * colours saturate): dst[i] = clamp(0.5 + 0.5 src[i] / s, 0, 1). dst may equal
 * src. Returns -s and s as the range (0, 0 for an all-zero map: all 0.5). */
void map_normalize_signed(float *dst, const float *src, int n, float *min_out, float *max_out);

/* Min-max normalisation for display: dst[i] = (src[i] - min) / (max - min) in
 * [0, 1]; a constant map becomes all 0. dst may equal src. Returns min and max. */
void map_normalize(float *dst, const float *src, int n, float *min_out, float *max_out);

#endif
