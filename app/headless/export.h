/* export.h - the headless modes: print the top-K predictions, write every map
 * as a PNG and its raw values as .npy. No window and no display needed. */
#ifndef VITLENS_EXPORT_H
#define VITLENS_EXPORT_H

#include "view/scene.h"

#include <stdio.h>

#define EXPORT_TARGET_PX 448 /* PNGs are the crop upscaled by an integer factor to about this */

/* Print the k most probable classes of sc to out, one per line, most probable first:
 *   RANK PROB CLASS_ID LABEL        e.g. "1 0.6123 281 tabby, tabby cat"
 * RANK 1-based, PROB with 4 decimals, CLASS_ID 0-based; LABEL is the rest of the
 * line and is left out when the model has no class names.
 * Returns 0, or 1 with a message on stderr (no head, k out of range). */
int export_top(FILE *out, const Model *m, const Scene *sc, int k);

/* Name on err, one line per reason, the map kinds --export cannot write for model m (a
 * class-specific kind without a head or a phrase, the probe without a MAP head), so that
 * none is left out silently:
 *   vitlens: --export: skipped chefer, gradcam, ... (needs a model with a classification
 *   head; this one has none)
 * A CLIP or SigLIP model's line says how to give it classes. Nothing when every kind
 * is written. score: what the class-specific maps explain, 0 a class, 1 a score of the
 * logits (--contrast), 2 one of the embedding (--similar: a backbone's are written too);
 * with a score the logit lens, which reads a class, is left out. */
void export_say_skipped(FILE *err, const Model *m, int score);

/* How exported maps look: the window's settings. */
typedef struct {
    float opacity; /* heatmap opacity, [0, 1] */
    float discard; /* rollout's discard ratio */
    int colormap;  /* index into colormap_luts */
    int bilinear;  /* upsampling: 0 nearest (patches), 1 bilinear */
} ExportStyle;

/* Write into dir (created if missing) the maps of every map kind (MAP_KINDS) of
 * sc, each as a PNG, the crop with the min-max normalised map blended over it
 * (colormap, opacity as the GUI) upscaled to about EXPORT_TARGET_PX, and beside
 * it, with the same base name, its raw values before normalisation as .npy
 * (float32, [gh, gw], or [Sh, Sw] for a pixel map):
 *   L01_H01.png ... L{L}_H{H}.png   attention of the CLS token, every layer and head
 *   L01_mean.png, L01_max.png, L01_min.png     head fusions, every layer
 *   L01_rollout.png                  rollout up to the layer (mean fusion, discard ratio)
 * (a kind's files: the first row's untagged, as above; the others' with the
 * kind's tag; every head only for kinds with export_heads; a class-specific kind's
 * class281_TAG, per layer class281_L06_TAG; the feature PCA's colours as RGBA
 * [gh, gw, 4], A the foreground, and with joint, the photos' common PCA as
 * L06_pca-joint). The token views' lists, as CSV:
 *   logit_lens.csv                   per layer the class the CLS token reads (logit lens)
 *   high_norm_tokens.csv             per layer the high-norm tokens (view_high_norm)
 * The worker kinds (attention flow) are computed here, on the calling thread. Then the overviews,
 * for slides, PNG only (each map min-max normalised, labelled when a font is
 * found):
 *   L01_heads.png ...                every head and fusion of the layer in a grid
 *   contact_sheet.png                layers x heads: a column per layer, a row per
 *                                    head, then mean, max, min (attention)
 *   contact_sheet_rollout.png        the same for rollout (per-head rollout)
 * and, for a model with a head, the class-specific maps of class `target` (sc's
 * front class-specific buffer must hold them: scene_explain), one per method:
 *   class281_chefer.png, class281_grad-rollout.png, class281_gradcam.png,
 *   class281_legrad.png, class281_attnlrp.png, class281_grad-input.png (+ .npy,
 *   [Sh, Sw] for the pixel maps), and contact_sheet_class281.png, a column per method;
 *   target SCENE_SCORE (sc->score: --contrast, --similar): the same named after the score
 *   (class281-vs-class282_chefer.png, similar-to-cat_chefer.png; scene_target_stem)
 * L*H + 5L + 2 PNGs and L*H + 4L .npy files (target -1: a model without head), or
 * 6 + 1 and 6 more; layers and heads are 1-based as on screen. Prints one summary
 * line to out. Returns 0, or 1 with a message naming the file on stderr. */
int export_maps(FILE *out, const char *dir, const Model *model, Scene *sc, int target,
                const ExportStyle *st, JointFeatures *joint);

/* --compare / --compare-image with --export, after each pane's export_maps: into dir
 * (existing) compare.csv, a row per pair of maps (map_a, map_b, spearman, top10_iou,
 * patches: compare_stats of A's map and B's on A's grid, compare_resample; B's layer at the
 * same relative depth, compare_layer; each pane's own explained class, Scene.expl_target),
 * diff/NAME.npy and .png (A - B, 0 mid-scale over A's crop) for each pair of one shape, and
 * compare_sheet.png (A | B | A - B for the last layer's attention and rollout and Chefer et
 * al.'s map); the panes named "MODEL on PHOTO", the maps as export_maps names them for
 * model_a and model_b. Prints one summary
 * line to out (and one when the grids differ). 0, or 1 with the message on stderr. */
int export_compare(FILE *out, const char *dir, const Model *model_a, const Scene *a,
                   const Model *model_b, const Scene *b, const ExportStyle *st);

/* Blend a normalised map over the crop as the fragment shader does, into an
 * out_w x out_h rectangle of out (row stride stride_px pixels, RGB):
 *   px = round(mix(crop, colormap(map), opacity))
 * The crop is sampled by area (box filter) when shrunk, nearest when enlarged;
 * the map nearest per cell or bilinear between cell centres (heatmap.frag.glsl).
 * crop: [Sh, Sw, 3] (cfg's size); map: [map_h, map_w] in [0, 1], the patch grid
 * or a pixel map's [Sh, Sw]. */
void export_blend(uint8_t *out, int stride_px, int out_w, int out_h, const uint8_t *crop,
                  const float *map, int map_w, int map_h, const VitConfig *cfg,
                  const ExportStyle *st);

/* Draw str into img [h, w, 3] with its top-left at (x, y), in colour rgb, at px
 * (smaller when it would be wider than max_w > 0), blended by the glyphs' alpha.
 * Nothing without a font (t NULL or t->font NULL). */
struct Text;
void export_text(uint8_t *img, int w, int h, struct Text *t, const char *str, int px, int x, int y,
                 int max_w, const uint8_t rgb[3]);

/* A file name of --export into buf[n]: the parts that apply, joined by '_', then ext:
 *   L06 (layer >= 0, 0-based), the head (head, or NULL), what an overview is ("heads",
 *   "contact_sheet", or NULL), the kind's tag
 * The first row's tag is left out: attention's files keep their plain names
 * (L06_H01.png, L06_heads.png, contact_sheet.png); rollout's are L06_rollout.png,
 * contact_sheet_rollout.png; a kind with one map for the model, TAG.png. */
void export_name(char *buf, size_t n, int kind, int layer, const char *head, const char *what,
                 const char *ext);

/* Write RGB [h, w, 3] as a PNG. 0, or -1 with errno's message in msg. */
int export_png(const char *path, const uint8_t *rgb, int w, int h, char *msg, size_t msg_bytes);

#endif
