/* interv.h - the interventions the user asked for (vit.h, "Interventions"), as the
 * command line and the window give them, 1-based as on screen: what is asked
 * (IntervSpec, no model needed) and the engine's VitIntervention built from it for one
 * model (Interv), with every error naming the option. No SDL, no GL. */
#ifndef VITLENS_INTERV_H
#define VITLENS_INTERV_H

#include "vit.h"

#include <stddef.h>
#include <stdint.h>

#define INTERV_MAX_ITEMS 1024 /* heads or patches in one set */

typedef struct {
    int n_ablate, n_drop, n_fill;
    int ablate[INTERV_MAX_ITEMS][2]; /* (layer, head), from 1 */
    int drop[INTERV_MAX_ITEMS][2];   /* (row, column), from 1 */
    int fill[INTERV_MAX_ITEMS][2];
    VitPosEdit pos;    /* --pos-embed */
    uint64_t pos_seed; /* --pos-seed (default 0) */
    int temp_layer;    /* --temperature L:tau, L from 1; 0: none */
    float temperature;
} IntervSpec;

/* Parse one command-line option into s: --ablate L:H[,L:H...], --drop-patches
 * R,C[;R,C...], --fill-patches R,C[;R,C...], --pos-embed shuffle|zero, --pos-seed N,
 * --temperature L:TAU. 1: not one of these; 0: parsed; -1: bad value, msg says so
 * ("--ablate 3: expected L:H[,L:H...]", an empty set, a number < 1, tau <= 0). The
 * ranges that depend on a model are checked by interv_build. */
int interv_parse(IntervSpec *s, const char *opt, const char *val, char *msg, size_t n);

/* Toggle (layer, head) in the ablated set (1-based); 0, or -1 when the set is full. */
int interv_toggle_ablate(IntervSpec *s, int layer, int head);
/* Is patch (row, col) (1-based) in the dropped (fill 0) or filled (1) set? Set it there
 * (on 1) or take it out (0); 0, or -1 when the set is full. */
int interv_has_patch(const IntervSpec *s, int fill, int row, int col);
int interv_set_patch(IntervSpec *s, int fill, int row, int col, int on);

/* Anything asked? */
int interv_any(const IntervSpec *s);

/* The engine's intervention for a model of config c. */
typedef struct {
    VitIntervention iv;
    int n_layers, n_heads, n_patches, grid_w; /* the shapes it was built for */
    uint8_t *ablate, *drop, *fill;            /* [L, H], [N], [N] */
    int *perm;                                /* [N] */
} Interv;

/* Build out from s for config c (0-based inside): 0, or -1 with msg naming the option
 * and what is out of range ("--ablate 13:1: layer 13, the model has 12 layers",
 * "--drop-patches: every one of the 196 patches dropped"); out is then freed. A
 * zeroed out is fine to pass; free with interv_free. */
int interv_build(Interv *out, const IntervSpec *s, const VitConfig *c, char *msg, size_t n);
void interv_free(Interv *iv);

/* out's intervention when it was built for c's shapes and is active, else NULL. */
const VitIntervention *interv_for(const Interv *iv, const VitConfig *c);

/* Is head (layer, head), 1-based, in s's ablated set? */
int interv_is_ablated(const IntervSpec *s, int layer, int head);

/* What s asks, for --top and the window's notices: "ablated L3:H2 L5:H1; 4 patches
 * dropped; pos-embed shuffled (seed 0); tau 2 on layer 4", "" when nothing. brief (the
 * status line, which must keep room for the rest): the heads by name up to two, else
 * counted ("5 heads ablated"), and the seed left out. */
void interv_describe(char *buf, size_t n, const IntervSpec *s, int brief);

#endif
