/* mapkind.h - the kinds of map vitlens draws, as one table: MAP_KINDS, one row per kind.
 *
 * A map kind turns a Scene (the forward pass of one photo and what the worker
 * thread computed with it) and a View (layer, head, query token, discard ratio,
 * target class) into one map. Everything that depends on the kind reads its row:
 * the view's map and its size, the overviews (A, T) and their cache, the prefix-token
 * bars, the list panel, the mask or outline, the status line, E / Shift+E and the
 * kind's own key, the key list of --help and of the help overlay, --help's lists of
 * kinds, --list-kinds (which a test compares with the man page and README's key
 * table), S's file name, --export (single maps and their .npy, heads grids, contact
 * sheets), --eval's methods and the VITLENS_TRACE lines. No file outside view/ names
 * a kind but the first row (the default view).
 *
 * A new kind is exactly:
 *   1. a MAP_* value before MAP_KIND_COUNT (E steps through them in this order);
 *   2. its row in MAP_KINDS (mapkind.c): names, group, key, flags, and its map
 *      function (an adapter that calls the engine with what it reads from the Scene
 *      and the View; plus layer_maps, prefix, tokens, compute, status, list when it
 *      has them). A class-specific method of vit_explain is a row with backward = 1
 *      and its VitExplain in `explain` (its map is then explain_map: no new function);
 *   3. its entries in the docs, which test docs_map_kinds checks against the rows:
 *      the man page (docs/vitlens.1: DESCRIPTION, --export, KEYS' E line and its key)
 *      and README's key table (E's row and its key's row);
 *   4. tests: its values against a reference (tests/maps, tests/parity), its files in
 *      --export (tests/gui/test_cli.py); gui_map_kinds checks every row.
 * Nothing else: --help, the help overlay, E, the status line, --export, --eval and
 * the trace read the row. */
#ifndef VITLENS_MAPKIND_H
#define VITLENS_MAPKIND_H

#include "view/scene.h"
#include "view/view.h"

#include <stddef.h>

typedef enum {
    MAP_ATTENTION = 0, /* the first row: the default view, and where a kind's key toggles back to */
    MAP_ROLLOUT,
    /* class-specific (vit_explain): one map for the whole model, for View.target */
    MAP_CHEFER,
    MAP_GRAD_ROLLOUT,
    MAP_GRADCAM,
    MAP_LEGRAD,
    MAP_ATTNLRP,
    MAP_GRAD_INPUT,
    /* what the tokens hold (vit.h): the residual stream's features, norms, the logit
     * lens, attention flow and TokenRank */
    MAP_FEATURES_PCA,
    MAP_SIMILARITY,
    MAP_TOKEN_NORMS,
    MAP_LOGIT_LENS,
    MAP_ATTENTION_FLOW,
    MAP_TOKENRANK,
    /* how focused each patch's attention is: the entropy of its row, in nats */
    MAP_ENTROPY,
    /* where an attention-pooling head's probe looks (SigLIP's MAP head: VitRun.probe_att) */
    MAP_PROBE,
    MAP_KIND_COUNT
} MapKind;

/* Which of --help's lists a kind is in: the attention maps, the class-specific maps
 * (a class of a classifier: 1-5, --class), what the tokens hold. */
typedef enum { MAP_GROUP_ATTENTION = 0, MAP_GROUP_CLASS, MAP_GROUP_TOKENS } MapGroup;

/* The list panel below the predictions that a kind may fill (MapKindInfo.list): a title,
 * rows of a label, a value on the right and a bar, one row marked; and the tokens its
 * map outlines (MapKindInfo.outline). */
#define VIEW_MAX_LIST      32                      /* rows of the list panel */
#define VIEW_MAX_HIGH_NORM (VIT_MAX_PREFIX + 1024) /* high-norm tokens kept for the outline */
typedef struct {
    char title[96];
    int n, marked; /* rows; the row of the view's layer, -1: none */
    char text[VIEW_MAX_LIST][96];
    char right[VIEW_MAX_LIST][16];
    float values[VIEW_MAX_LIST]; /* bar lengths, [0, 1] */
    int n_outline;               /* the tokens outlined on the map: outline[0, n_outline) */
    int outline[VIEW_MAX_HIGH_NORM];
} ViewList;

/* The view's map: out [h, w] raw values (not normalised), w x h from map_kind_size. */
typedef VitStatus (*MapFn)(float *out, const Scene *sc, const View *v, VitError *err);
/* Every head and fusion of layers layer0 .. layer0 + n_layers - 1, with v's other
 * fields: out [n_layers, H + 3, h, w], each equal to the MapFn call it stands for. */
typedef VitStatus (*LayerMapsFn)(float *out, const Scene *sc, const View *v, int layer0,
                                 int n_layers, VitError *err);
/* A worker kind's map, on the worker thread: like MapFn; jf: the slideshow's features for
 * a map over every photo (View.joint), or NULL (computed first when not of sc's model). */
typedef VitStatus (*ComputeFn)(float *out, const Scene *sc, const View *v, JointFeatures *jf,
                               VitError *err);
/* The prefix tokens' share of the row the map is read from: out [Np]; with the
 * map's values it sums to 1 (vit_prefix_share). */
typedef VitStatus (*PrefixFn)(float *out, const Scene *sc, const View *v, VitError *err);
/* What the status line says of the view beyond its kind, layer, head, query and class
 * ("2 high-norm tokens (> 34.1)"), into buf; "" when nothing. labels: [C] class names or NULL. */
typedef void (*StatusFn)(char *buf, size_t n, const Scene *sc, const View *v,
                         const char (*labels)[VIT_LABEL_BYTES]);
/* The list panel of the view, into out (zeroed by the caller); a part that fails is left
 * out. labels: [C] class names or NULL. */
typedef void (*ListFn)(ViewList *out, const Scene *sc, const View *v,
                       const char (*labels)[VIT_LABEL_BYTES]);

typedef struct {
    const char *name;     /* for the status line and the E key's help: "rollout" */
    const char *title;    /* for help lines and sheet titles: "attention rollout" */
    MapGroup group;       /* which of --help's lists it is in */
    const char *tag;      /* in file names, [a-z0-9-]: S's IMAGE_MODEL_L06_mean_<tag>.png and
                             --export's L06_<tag>.png (the first row's export files go untagged) */
    char key;             /* a key of its own, lower case ('r': R toggles the kind on and off,
                             back to the first row); 0: reached with E only */
    int shift;            /* 1: the key with Shift (Shift+R: attention flow) */
    int shift_joint;      /* 1: Shift+key is the kind over every photo of the slideshow
                             (View.joint; Shift+X: the feature PCA over every photo) */
    const char *key_name; /* that key as --help shows it: "R", "Shift+R" */
    const char *help;     /* that key's help line: "attention rollout on / off" */
    int uses_discard;     /* reads View.discard_ratio: [ / ] change the map */
    int uses_target;      /* reads View.target, a class: needs a model with a head */
    int uses_query;       /* reads View.query: click, I J K L and C change the map */
    int per_layer;        /* a map per layer (Left / Right); 0: one map for the whole model */
    int per_head;         /* a map per head and per fusion (Up / Down; the overviews A and T) */
    int pixels;           /* the map is [Sh, Sw], a value per input pixel; 0: [gh, gw] */
    int signed_scale;     /* signed relevance: drawn with 0 at the middle of the colour scale
                             (map_normalize_signed); 0: min-max */
    int backward;         /* computed by the backward pass on the worker thread (scene_explain:
                             the class-specific maps of vit_explain) */
    VitExplain explain;   /* with backward: the vit_explain method whose map it is */
    int lrp;              /* needs AttnLRP's backward pass too (scene_explain's lrp) */
    int worker;           /* computed on the worker thread by `compute` (view_slow_map), too
                             slow for a frame: 1 always, 2 only for a View with joint set */
    int rgb;              /* the map is colours, [h, w, 4] RGBA in [0, 1] (A: 1 foreground,
                             0 background), drawn as they are (no colormap, no mask) */
    int export_heads;     /* --export writes every head's and fusion's map and each layer's
                             heads grid (L01_heads.png); 0: only the map of the mean fusion */
    int outline;          /* the map outlines the tokens its list names (ViewList.outline:
                             the high-norm tokens) instead of M's mask */
    int needs_probe;      /* reads the MAP head's probe attention: a model pooled by attention
                             (VitConfig.head_pool VIT_POOL_MAP: SigLIP) */
    MapFn map;
    LayerMapsFn layer_maps; /* NULL: map() once per head and fusion */
    PrefixFn prefix;        /* NULL: the kind has no prefix-token share (no bars) */
    MapFn tokens;           /* NULL, or the view's row over every token, out [T] (a kind with a
                               prefix share and a [gh, gw] map): its prefix tokens are prefix's
                               share and its patches map's map, from one computation (a
                               rollout, TokenRank) where map and prefix would do it twice */
    ComputeFn compute;      /* a worker kind's map, on the worker thread (view_slow_map); map
                               then reads what it computed */
    StatusFn status;        /* NULL: nothing more on the status line */
    ListFn list;            /* NULL: no list panel (the logit lens per layer, the high-norm
                               tokens) */
} MapKindInfo;

extern const MapKindInfo MAP_KINDS[MAP_KIND_COUNT];

/* The shape of kind's maps for cfg: *w x *h, the patch grid (gw x gh) or, for a
 * pixel map, the input (Sw x Sh). */
void map_kind_size(int *w, int *h, int kind, const VitConfig *cfg);

/* Floats per map cell: 4 for an rgb kind, else 1. */
int map_kind_channels(int kind);

/* The most floats one map of any kind takes (per_head_only 1: of the kinds with
 * per-head maps, which the overviews show): the size of a map buffer. */
size_t map_kind_max_floats(const VitConfig *cfg, int per_head_only);

/* Normalise kind's raw map for display (map_normalize, or map_normalize_signed for a
 * kind with signed_scale): dst [n] in [0, 1], and the range of values it spans. */
void map_kind_normalize(float *dst, const float *src, int n, int kind, float *lo, float *hi);

/* ---------------------------------------------------------------------------
 * What a Scene holds of a View, read through its kind's row */

/* Can kind be computed for a model of shapes c? 0 for a kind that explains a class
 * (uses_target) on a model without a classification head (DINO, DINOv2). The one place
 * that decides it: the window, E, --eval and the maps ask here. */
int map_kind_usable(int kind, const VitConfig *c);
/* Why kind cannot be drawn for a model of c ("needs a model with a classification head;
 * this one has none"), or NULL when it can. Static string. */
const char *map_kind_unusable_why(int kind, const VitConfig *c);
/* The same when the class-specific maps explain a score of the pooled embedding
 * (embedding_score 1: SceneScore of --similar), which a model without a head has too: its
 * backward kinds are then usable. */
const char *map_kind_unusable_scored(int kind, const VitConfig *c, int embedding_score);

/* Does v's map come from the worker thread's view_slow_map (a worker kind)? */
int view_on_worker(const View *v);

/* The same map for a and b: equal in every field a's kind reads. */
int view_same_map(const View *a, const View *b, int n_heads);

/* Does sc's front class-specific buffer hold v's map: its class (scene_class), its discard
 * ratio for a kind that reads one, AttnLRP's pass for a kind that needs it? The one place
 * that decides whether a class's map is computed (view_ready, the kinds' map functions). */
int view_explained(const Scene *sc, const View *v);

/* A worker map's tag for v (Scene.slow_tag); does sc's front worker map hold v's map? */
void view_slow_tag(unsigned char tag[SCENE_TAG_BYTES], const View *v);
int view_slow_holds(const Scene *sc, const View *v);

/* High-norm tokens of the view's layer as the token-norms view marks them: norm >
 * median + HIGH_NORM_K * MAD over the patches, and > HIGH_NORM_ABS for a DINOv2
 * model (the registers paper's threshold). idx, first [T] as vit_high_norm_tokens;
 * returns how many, -1 on error. */
#define HIGH_NORM_K   10.0f
#define HIGH_NORM_ABS 150.0f
int view_high_norm(int *idx, int *first, float *threshold, const Scene *sc, const View *v,
                   VitError *err);

#endif
