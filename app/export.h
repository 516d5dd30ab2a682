/* export.h - the headless modes: print the top-K predictions, write every map
 * as a PNG. No window and no display needed. */
#ifndef VITLENS_EXPORT_H
#define VITLENS_EXPORT_H

#include "scene.h"

#include <stdio.h>

#define EXPORT_TARGET_PX 448 /* PNGs are the crop upscaled by an integer factor to about this */

/* Print the k most probable classes of sc to out, one per line, most probable first:
 *   RANK PROB CLASS_ID LABEL        e.g. "1 0.6123 281 tabby, tabby cat"
 * RANK 1-based, PROB with 4 decimals, CLASS_ID 0-based; LABEL is the rest of the
 * line and is left out when the model has no class names.
 * Returns 0, or 1 with a message on stderr (no head, k out of range). */
int export_top(FILE *out, const Model *m, const Scene *sc, int k);

/* Write into dir (created if missing) one PNG per map of sc, each the crop with
 * the min-max normalised map blended over it (colormap, opacity as the GUI),
 * upscaled with nearest sampling:
 *   L01_H01.png ... L{L}_H{H}.png   attention of the CLS token, every layer and head
 *   L01_mean.png, L01_max.png, L01_min.png     head fusions, every layer
 *   L01_rollout.png                  rollout up to the layer (mean fusion, discard ratio `discard`)
 * L*H + 3L + L files; layers and heads are 1-based as on screen. Prints one
 * summary line to out. Returns 0, or 1 with a message naming the file on stderr. */
int export_maps(FILE *out, const char *dir, const Scene *sc, float opacity, float discard);

/* Blend a normalised map over the crop as the fragment shader does:
 *   px = round(mix(crop, colormap(map), opacity)), nearest sampling per patch.
 * out: [Sh * scale, Sw * scale, 3]; crop: [Sh, Sw, 3]; map: [gh, gw] in [0, 1]. */
void export_blend(uint8_t *out, const uint8_t *crop, const float *map, const VitConfig *cfg,
                  int scale, float opacity);

#endif
