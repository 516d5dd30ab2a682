/* layout.h - inside layouts as data (engine/load/layout*.c; what a layout is: layout.c's
 * top comment, the format: docs/your-own-vit.md): a parsed layout and what its files share.
 *   layout.c           the roles, names' patterns, matching, ld_apply_layout, the errors
 *   layout_switches.c  the layout file's JSON checked, its switches into the loader
 *   layout_build.c     the checkpoint's tensors converted into timm's names
 * Not part of the engine's interface: loader.h declares what the loader calls. */
#ifndef VITLENS_LAYOUT_H
#define VITLENS_LAYOUT_H

#include "loader.h"

/* A role: its timm name ({l}: the block) and whether a checkpoint must hold it. */
typedef struct {
    const char *role;
    int required;
} LayoutRole;

/* The roles, one per slot (loader.h), in timm's names (layout.c). */
extern const LayoutRole layout_roles[N_SLOTS];
#define N_ROLES N_SLOTS

/* A layout file, parsed (layout_parse) and resolved for a checkpoint (layout.c). */
typedef struct {
    const cJSON *root, *tensors;
    const char *name;
    const char *file;   /* for messages: the user's file, or "assets/layouts/x.json" */
    const char *prefix; /* the "prefix" the patterns' {p} stands for */
    VitNaming naming;   /* "naming": whose conventions (the position embedding's resampling,
                           VitConfig.naming) */
    int library;        /* "naming" given: a library's own checkpoints, read as it saves them */
    VitRope rope;       /* "rope": a rotary position embedding ("dinov3": no pos_embed needed;
                           "eva": beside the learned one) */
    int cls_pos_only;   /* "position_prefix": "cls": a position row for the CLS token, none
                           for the registers (transformers' Dinov2WithRegistersEmbeddings) */
    int no_cls;         /* "class_token": false: the model has none (SigLIP) */
    char pat[N_ROLES][LD_NAME_BYTES]; /* each role's pattern, {p} replaced; "" if none */
} Layout;

/* --- layout.c: names ----------------------------------------------------------------- */

/* pattern with {l} and {h} replaced, into out [n]; 0 when it does not fit. */
int layout_expand(char *out, size_t n, const char *pat, int l, int h);
/* pattern with {p} replaced by prefix, into out [LD_NAME_BYTES]; 0 when it does not fit. */
int layout_with_prefix(char *out, const char *pat, const char *prefix);
/* The tensor of pattern pat at block l, head h, or NULL. */
const StTensor *layout_find_at(const StFile *st, const char *pat, int l, int h);
/* The layout's pattern for a role (its timm name), or NULL when it names none. */
const char *layout_pattern(const Layout *lay, const char *role);
/* Is the CLS's position row to be folded into the CLS token? */
int layout_cls_fold(const Layout *lay, const StFile *st);
/* Must the checkpoint hold role r's tensor? */
int layout_role_needed(const Layout *lay, const StFile *st, int r);

/* --- layout_switches.c ------------------------------------------------------------------ */

/* root, the JSON of `file`, checked whole into lay (which points into root); an error
 * names the file and the key. */
VitStatus layout_parse(Layout *lay, cJSON *root, const char *file, VitError *err);
/* The string at key k of the layout, or dflt. */
const char *layout_str(const Layout *lay, const char *k, const char *dflt);
/* The layout's switches into ld (its activation, scale, pooling, preprocessing, ...). */
VitStatus layout_apply_switches(Loader *ld, const Layout *lay);

/* The shipped layout whose file is assets/layouts/NAME.json: its JSON text (compiled in,
 * static), or NULL. */
const char *layout_shipped(const char *name);

/* --- layout_build.c ---------------------------------------------------------------------- */

/* st's tensors as the layout names them, converted into *out in timm's names (its own
 * buffer: st_free), *n_heads set when the layout's per-head lists say how many; an error
 * (err: fname, the tensor, the layout) leaves *out as it was. */
VitStatus layout_build(StFile *out, const Layout *lay, const StFile *st, int *n_heads,
                       const char *fname, VitError *err);

#endif
