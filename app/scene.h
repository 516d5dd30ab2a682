/* scene.h - what the app shows, without SDL or GL: a loaded model (Model), one
 * forward pass on one photo (Scene) and which map of it is on screen (View).
 * Shared by the window, the worker thread and the headless --top / --export. */
#ifndef VITLENS_SCENE_H
#define VITLENS_SCENE_H

#include "vit.h"

#include <stdint.h>

/* ---------------------------------------------------------------------------
 * Model: weights + class names */

typedef struct {
    Vit vit;
    char name[128]; /* for the status line: the file name without extension, or the
                       folder's name for a generic "model.safetensors" */
    const char (*labels)[VIT_LABEL_BYTES]; /* [C] or NULL: owned_labels or vit.labels */
    char (*owned_labels)[VIT_LABEL_BYTES]; /* from a --labels file, free()d by model_free */
} Model;

/* Load weights (opt: head count, input size, whole image; NULL for the
 * defaults; its config_path is ignored) and class names: from
 * labels_path when given, else from the config.json the engine read. A labels
 * file that does not fit is an error when labels_required, else it is ignored
 * (a model dropped on the window keeps going with the config's names).
 * On error *m is left freed. Free with model_free. */
VitStatus model_load(Model *m, const char *path, const VitLoadOptions *opt, const char *labels_path,
                     int labels_required, VitError *err);
void model_free(Model *m);

/* Class name of class c, or NULL when the model has no names. */
const char *model_label(const Model *m, int c);

/* ---------------------------------------------------------------------------
 * Scene: one forward pass on one photo */

typedef struct {
    VitRun run;               /* att [L, H, T, T], probs [C] of the photo */
    uint8_t *crop_rgb;        /* [Sh, Sw, 3] the picture the model saw (vit_preprocess_rgb) */
    int crop_w_px, crop_h_px; /* Sw, Sh */
    int src_w, src_h;         /* the photo's size, px */
    float *distance;          /* [L, H] mean attention distance, px (vit_attention_distance) */
    char path[1024];          /* the photo */
    const char *name;         /* last path component of path */
} Scene;

/* Load the photo at `path`, preprocess it for `vit`, run the forward pass and
 * the mean attention distance (on the worker thread, like the pass: for a model
 * whose attention is recomputed it costs as much as the pass's attention).
 * Reuses sc's buffers when they fit `vit`, reallocates them otherwise. On
 * error sc keeps its buffers but its contents are undefined (callers run into
 * a scratch Scene and swap it in on success). Free with scene_free. */
VitStatus scene_run(Scene *sc, const Vit *vit, const char *path, VitError *err);
void scene_free(Scene *sc);

/* ---------------------------------------------------------------------------
 * View: which map over the patch grid */

typedef struct {
    int layer;           /* 0 .. L-1 */
    int head;            /* 0 .. H-1 one head; H + VitFusion (H, H+1, H+2): mean/max/min fusion */
    int rollout;         /* 0: attention of the layer; 1: attention rollout up to the layer */
    float discard_ratio; /* rollout's discard ratio, [0, 1) */
    int query;           /* the query token: 0 the CLS token, Np + r*gw + c the patch (r, c) */
} View;

#define VIEW_N_FUSIONS 3 /* mean, max, min after the heads */

/* Fusion of the view, or -1 when a single head is selected. */
int view_fusion(const View *v, int n_heads);

/* Clamp layer, head and query into the model's range (after a model change). */
void view_clamp(View *v, const VitConfig *cfg);

/* The query token's map of the view: out [gh, gw] raw values (probabilities).
 * Attention: vit_map_attention / vit_map_fused, row `query`. Rollout:
 * vit_rollout with the head (per-head rollout) or head -1 and the fusion: row
 * `query` of the rollout matrix. */
VitStatus view_map(float *out, const VitRun *run, const View *v, VitError *err);

/* The smallest and largest raw value over the maps of every head and fusion
 * (H + 3 maps) of v's layer, with v's kind and query: a scale shared across the
 * layer, so that heads can be compared. Allocates [H + 3, N] scratch. */
VitStatus view_layer_range(float *lo, float *hi, const VitRun *run, const View *v, VitError *err);

/* The maps of an overview, normalised for display into out [n, gh, gw]:
 *   table 0: the heads and fusions of v's layer, n = H + 3 (map k: head k)
 *   table 1: every layer, n = L * (H + 3) (map l * (H + 3) + k: layer l, head k)
 * with v's kind (attention / rollout), discard ratio and query. shared 0:
 * each map min-max normalised on its own; 1: by its layer's range
 * (view_layer_range). lo, hi [n] (may be NULL): each map's raw range used. */
VitStatus overview_maps(float *out, float *lo, float *hi, const VitRun *run, const View *v,
                        int table, int shared, VitError *err);

/* The query token as text: "CLS token" or "patch (row 4, col 8)" (1-based). */
void view_query_text(char *buf, size_t n, const View *v, const VitConfig *cfg);

/* A file name for the view, without directory: IMAGE_MODEL_L06_H02_attention
 * [_rollout-d0.5][_q04-08 for a patch query][_MODE].png, where MODE ("heads",
 * "table") names an overview (NULL: the single map); image and model without
 * their extension, characters other than [A-Za-z0-9._-] as '-'. */
void view_file_name(char *buf, size_t n, const char *image, const char *model, const View *v,
                    const VitConfig *cfg, const char *mode);

/* The query token's row of the view at the prefix tokens: out[Np]
 * (vit_prefix_share), what the map, which covers the patches only, leaves out. */
VitStatus view_prefix(float *out, const VitRun *run, const View *v, VitError *err);

/* Min-max normalisation for display: dst[i] = (src[i] - min) / (max - min) in
 * [0, 1]; a constant map becomes all 0. dst may equal src. Returns min and max. */
void map_normalize(float *dst, const float *src, int n, float *min_out, float *max_out);

/* "attention" / "rollout", and "head 2/3" or "mean of 3 heads" (1-based) into buf. */
const char *view_kind_name(const View *v);
void view_head_text(char *buf, size_t n, const View *v, int n_heads);

#endif
