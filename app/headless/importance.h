/* importance.h - --export's head importance table and pruning curve (vit_head_importance,
 * vit_head_pruning): CSV and PNG. */
#ifndef VITLENS_IMPORTANCE_H
#define VITLENS_IMPORTANCE_H

#include "headless/export.h"

/* For class target of sc's photo (on sc's intervened model, if any), into dir:
 *   head_importance.csv  layer,head,importance,prob_ablated (1-based; importance = p - p
 *                        with that head alone ablated; p in the header's comment line)
 *   head_importance.png  the L x H grid (a column per layer, a row per head, as the
 *                        contact sheets) coloured with st's colormap from the smallest to
 *                        the largest importance, each cell's value written in it
 *   head_pruning.csv     pruned,kept,layer,head,prob: p with the `pruned` least important
 *                        heads ablated (Michel et al. 2019, Fig. 2), the head pruned last
 *   head_pruning.png     that curve over the heads pruned
 * Runs 2 L*H + 1 ablated forward passes on a batch of H inputs, sharing their starts (about
 * 1.1 L*H passes' work: DeiT-Tiny 1.5 + 1.5 s on 2 threads). Adds the PNGs written to
 * *n_png. Returns 0, or 1 with a message naming the file on stderr. */
int export_importance(const char *dir, const Model *m, const Scene *sc, int target,
                      const ExportStyle *st, int *n_png);

#endif
