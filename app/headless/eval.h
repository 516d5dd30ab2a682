/* eval.h - vitlens --eval: which map can I trust? Faithfulness and sanity checks of
 * every map kind over one image, several, or a folder (issue 16; the protocol is in
 * docs/faithfulness.md):
 *   perturbation   Chefer et al. 2021 §4: patches removed (set to the normalised
 *                  mean, 0) in steps of 10% of the grid, most relevant first
 *                  (positive) and least relevant first (negative); the predicted
 *                  class's probability and whether the top-1 is unchanged; AUC
 *   deletion,      Petsiuk et al. 2018 (RISE): the probability as patches are
 *   insertion      deleted (to 0), or inserted into a blurred copy, most relevant
 *                  first, in --eval-steps steps; AUC
 *   localisation   with a mask (--masks DIR): pointing game, energy-based pointing
 *                  game (Wang et al. 2020), IoU of the top-k patches
 *   sanity         Adebayo et al. 2018, cascading randomisation: the head, then each
 *                  block from the top re-initialised; Spearman rank correlation of
 *                  each map with the trained model's
 * for every map kind that gives one value per patch (or per pixel, summed per patch)
 * and two baselines, a uniform random map and a centred Gaussian. Output: a markdown
 * table on stdout; with --eval-out DIR the rows as CSV, the table as summary.md and
 * plots as PNG. --shard K/N evaluates every N-th image from the K-th; --eval-merge
 * combines shards' folders into the table one run would give. No window needed. */
#ifndef VITLENS_EVAL_H
#define VITLENS_EVAL_H

#include "config/options.h"

/* --eval: the images of o->image_args (files and folders) with the model of
 * o->model_path. Returns 0, 1 on an error that stops the run (the model, the output
 * folder); an image that cannot be read is reported, skipped and counted. */
int eval_run(const Options *o);

/* --eval-merge: the folders o->image_args, each an --eval-out of one shard, into one
 * table (stdout) and, with o->eval_out, one folder. Returns 0, or 1 (a folder that
 * is not an --eval-out, rows that do not parse, shards of different runs). */
int eval_merge(const Options *o);

#endif
