/* agreement.h - vitlens --agreement: do the class-specific methods agree? (issue 36; the
 * protocol is in docs/faithfulness.md, "Methods side by side"):
 *   per photo      the class the model predicts (its top-1, or --class / --text, as --eval);
 *                  each class-specific method's map of it (vit_explain: Chefer et al.,
 *                  gradient rollout, Grad-CAM, LeGrad, AttnLRP, gradient x input) reduced to
 *                  the patch grid as --eval does (eval_method_map: a pixel map summed per
 *                  patch), and a random map, uniform and i.i.d. per patch from the seed
 *                  RANDOM_SEED + the photo's index (--eval's random baseline: the same map
 *                  whatever the shard); for every pair of methods (a <= b) vit_spearman of
 *                  the two maps and vit_top_iou of their top 10% patches
 *   over photos    per pair, the mean and the sample standard deviation (n - 1) of the
 *                  values that are not NaN (a constant map has none), and their count
 * The random map is the control: it agrees with any map by chance only, rho ~ 0 +- 1 /
 * sqrt(N - 1) per photo, so a method whose mean correlation with it is not near 0 is
 * broken; the diagonal is 1. Output: the Spearman and IoU matrices as markdown on stdout;
 * with --eval-out DIR: agreement.csv (a row per ordered pair: method_a, method_b, mean,
 * std, n_photos, iou_mean, iou_std), agreement.md, agreement.png (the mean Spearman
 * matrix as a heatmap), the per-photo rows (agreement_run.csv, agreement_photos.csv,
 * agreement_pairs.csv) and each photo's maps as maps/IIII_TAG.npy (float32 [gh, gw], IIII
 * its index in the whole run). --shard K/N takes every N-th photo from the K-th;
 * --eval-merge of the shards' folders gives the files one run gives. No window needed. */
#ifndef VITLENS_AGREEMENT_H
#define VITLENS_AGREEMENT_H

#include "config/options.h"

#define AGREE_TOP_FRAC 0.1 /* vit_top_iou's share of the patches: the top 10% */

/* --agreement: the images of o->image_args (files and folders) with the model of
 * o->model_path. Returns 0, 1 on an error that stops the run (the model, the output
 * folder), 2 on bad usage; a photo that cannot be read is reported, skipped and counted. */
int agreement_run(const Options *o);

/* Is dir an --agreement output folder (it holds agreement_pairs.csv)? */
int agreement_is_out(const char *dir);

/* --eval-merge of --agreement folders: the folders o->image_args, each the --eval-out of
 * one shard, into the matrices (stdout) and, with o->eval_out, one folder (without the
 * maps, which stay in the shards' folders). Returns 0, or 1 (a folder that is not one,
 * rows that do not parse, shards of different runs, a photo in two shards). */
int agreement_merge(const Options *o);

#endif
