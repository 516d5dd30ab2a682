/* maps.h - a View's maps, computed from a Scene through its kind's row (mapkind.h): the
 * map, its scale, the prefix-token bars, the overviews, the list panel, the status line's
 * part (view_compute: everything the window shows of a view), a worker kind's map
 * (view_slow_map), and the view's file name. No SDL, no GL: the window, its worker thread,
 * --export and --eval all read maps here. */
#ifndef VITLENS_MAPS_H
#define VITLENS_MAPS_H

#include "view/mapkind.h"

/* ---------------------------------------------------------------------------
 * A View's maps, through its kind's row. Errors: those of the kind's functions;
 * VIT_ERR_ARG for a kind that needs a target class on a model without a head, or
 * a per-head overview of a kind without per-head maps. */

/* The view's map: out [h, w] raw values (map_kind_size). */
VitStatus view_map(float *out, const Scene *sc, const View *v, VitError *err);

/* The smallest and largest raw value over the maps of every head and fusion
 * (H + 3 maps) of v's layer, with v's kind and other fields: a scale shared across
 * the layer, so that heads can be compared. Allocates [H + 3, map] scratch. */
VitStatus view_layer_range(float *lo, float *hi, const Scene *sc, const View *v, VitError *err);

/* The maps of an overview, normalised for display into out [n, h, w]:
 *   table 0: the heads and fusions of v's layer, n = H + 3 (map k: head k)
 *   table 1: every layer, n = L * (H + 3) (map l * (H + 3) + k: layer l, head k)
 * with v's kind and other fields. shared 0: each map min-max normalised on its
 * own; 1: by its layer's range (view_layer_range). lo, hi [n] (may be NULL): each
 * map's raw range used. Only for kinds with per-head maps. */
VitStatus overview_maps(float *out, float *lo, float *hi, const Scene *sc, const View *v, int table,
                        int shared, VitError *err);

/* The query token's row of the view at the prefix tokens: out [Np], what the map,
 * which covers the patches only, leaves out. VIT_ERR_ARG when the kind has none
 * (MAP_KINDS[v->kind].prefix is NULL). */
VitStatus view_prefix(float *out, const Scene *sc, const View *v, VitError *err);

/* The class a class-specific view explains: v->target, or the top-1 class when it
 * is -1; -1 when the model has no head (scene_class). */
int view_class(const View *v, const Scene *sc);

/* Can v's map be read from sc now? 0 when its kind is computed by the backward pass
 * and the Scene's class-specific maps are not (yet) v's (view_explained: the worker must
 * run scene_explain first), or when its kind is a worker kind and the Scene's worker map
 * is not v's (the worker must run view_slow_map). 1 otherwise. */
int view_ready(const Scene *sc, const View *v);

/* ---------------------------------------------------------------------------
 * Everything the window shows of a view, computed in one call (view_compute): the map,
 * its scale, the prefix-token bars, the overview's maps, the list panel and the status
 * line's part. The window runs it on its GUI thread when that is quick (the attention
 * kept: a map is a read) and on the worker thread otherwise (the attention recomputed
 * from queries and keys, where a rollout or an overview takes seconds); it then only
 * uploads what it got. */

typedef struct {
    /* what to compute, set by the caller */
    View view;
    ViewOverview overview; /* VIEW_HEADS, VIEW_TABLE: the overview's maps too (overview_maps) */
    int shared;            /* the map (and the overview) on its layer's range (view_layer_range) */
    const char (*labels)[VIT_LABEL_BYTES]; /* [C] class names for the list, or NULL */
    /* the caller's buffers: map, norm [map_kind_max_floats(cfg, 0)]; atlas
     * [L * (H + 3) * map_kind_max_floats(cfg, 1)], only written for an overview */
    float *map, *norm, *atlas;
    /* the result */
    int w, h;                     /* the map's size (map_kind_size) */
    float lo, hi;                 /* the range norm spans: the map's, or its layer's (shared) */
    int n_prefix;                 /* Np when the kind has a prefix-token share, else 0 */
    float prefix[VIT_MAX_PREFIX]; /* view_prefix */
    int n_atlas;                  /* maps in atlas (normalised), 0: no overview computed */
    float atlas_lo, atlas_hi;     /* the raw range of its first map (its layer's when shared) */
    char status[240];             /* the kind's part of the status line (MapKindInfo.status) */
    ViewList list;                /* the kind's list panel (MapKindInfo.list), n 0: none */
} ViewMaps;

/* Compute all of m's result for sc (see ViewMaps). Reads sc only, writes only m and its
 * buffers: for any thread. With sc->run.control set, reports progress and returns
 * VIT_ERR_CANCELLED once cancelled (m's contents are then undefined). Errors: those of
 * view_map, view_prefix, view_layer_range and overview_maps. */
VitStatus view_compute(ViewMaps *m, const Scene *sc, VitError *err);

/* Do a and b ask for the same result? (the map's fields, overview, scale) */
int view_maps_same_request(const ViewMaps *a, const ViewMaps *b, int n_heads);

/* The map of view v of a worker kind into sc's back worker buffer, with the kind's
 * `compute` (jf: the slideshow's features for a View with joint set). For the worker
 * thread (or headless): writes only the back buffer and jf; scene_slow_swap shows it.
 * Errors: those of the map; VIT_ERR_ARG for a kind without `compute`; VIT_ERR_NOMEM. */
VitStatus view_slow_map(Scene *sc, const View *v, JointFeatures *jf, VitError *err);

/* Clamp kind, layer, head and query into range (after a model change). */
void view_clamp(View *v, const VitConfig *cfg);

/* A file name for the view, without directory:
 *   IMAGE_MODEL_L06_H02_TAG[-d0.5][_q04-08 | _class281][_MODE].png
 * TAG the kind's file tag (mapkind.h), -d the discard ratio of a kind that uses
 * it when > 0, _q the query patch (1-based) of a kind that reads it, _class the
 * class of a class-specific kind (v->target as class_stem names it, scene.h
 * model_class_stem, or "class281" when NULL; _top1 when it is -1); the layer
 * and head only for kinds with a map per layer and per head. MODE ("heads",
 * "table") names an overview, which shows every head (the head is left out);
 * NULL: the single map. Image and model without their extension, characters
 * other than [A-Za-z0-9._-] as '-'. */
void view_file_name(char *buf, size_t n, const char *image, const char *model, const View *v,
                    const VitConfig *cfg, const char *mode, const char *class_stem);

/* s without its directory and extension, characters other than [A-Za-z0-9._-] as '-', into
 * buf: the parts of view_file_name's names (and of Ctrl+R's recordings'). */
void view_file_stem(char *buf, size_t n, const char *s);

#endif
