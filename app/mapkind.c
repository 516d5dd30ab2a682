/* mapkind.c - the table of map kinds and the View's maps read through it. */
#include "mapkind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the kinds' functions -------------------------------------------------- */

/* The head and fusion a map call takes: one head (fusion unused), or head -1 and
 * the fusion. */
static void head_fusion(int *head, VitFusion *fusion, const View *v, int n_heads) {
    int f = view_fusion(v, n_heads);
    *head = f < 0 ? v->head : -1;
    *fusion = f < 0 ? VIT_FUSE_MEAN : (VitFusion)f;
}

/* Attention of the query token over the patches, one head or the heads fused. */
static VitStatus attention_map(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    if (head >= 0) return vit_map_attention(out, &sc->run, v->layer, head, v->query, err);
    return vit_map_fused(out, &sc->run, v->layer, fusion, v->query, err);
}

static VitStatus attention_prefix(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_prefix_share(out, &sc->run, v->layer, head, fusion, 0, 0.0f, v->query, err);
}

/* Attention rollout up to the layer (Abnar & Zuidema 2020): per-head rollout for
 * one head, else the head-fused rollout; row `query` of the rollout matrix. */
static VitStatus rollout_map(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_rollout(out, &sc->run, v->layer, head, fusion, v->discard_ratio, v->query, err);
}

/* The layers' fused matrices made once for every map, not once per map. */
static VitStatus rollout_layers(float *out, const Scene *sc, const View *v, int layer0,
                                int n_layers, VitError *err) {
    return vit_rollout_layers(out, &sc->run, layer0, n_layers, v->discard_ratio, v->query, err);
}

static VitStatus rollout_prefix(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_prefix_share(out, &sc->run, v->layer, head, fusion, 1, v->discard_ratio, v->query,
                            err);
}

/* A class-specific map: method m's map of v's class, as scene_explain computed it
 * on the worker thread (view_ready says whether it has). */
static VitStatus explain_map(float *out, VitExplain m, const Scene *sc, const View *v,
                             VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    int target = view_class(v, sc);
    if (!scene_explained(sc, target, m == VIT_EXPLAIN_GRAD_ROLLOUT, v->discard_ratio,
                         m == VIT_EXPLAIN_ATTNLRP)) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "%s: class %d not computed yet",
                     vit_explain_name(m), target);
        }
        return VIT_ERR_ARG;
    }
    size_t n = vit_explain_pixels(m) ? (size_t)c->image_h * c->image_w : (size_t)c->n_patches;
    memcpy(out, sc->expl[sc->expl_front] + (size_t)m * scene_expl_stride(c), n * sizeof *out);
    return VIT_OK;
}

#define EXPLAIN_KIND(fn, method)                                                                   \
    static VitStatus fn(float *out, const Scene *sc, const View *v, VitError *err) {               \
        return explain_map(out, method, sc, v, err);                                               \
    }
EXPLAIN_KIND(chefer_map, VIT_EXPLAIN_CHEFER)
EXPLAIN_KIND(grad_rollout_map, VIT_EXPLAIN_GRAD_ROLLOUT)
EXPLAIN_KIND(gradcam_map, VIT_EXPLAIN_GRADCAM)
EXPLAIN_KIND(legrad_map, VIT_EXPLAIN_LEGRAD)
EXPLAIN_KIND(attnlrp_map, VIT_EXPLAIN_ATTNLRP)
EXPLAIN_KIND(grad_input_map, VIT_EXPLAIN_GRAD_INPUT)

/* --- the table ------------------------------------------------------------- */

const MapKindInfo MAP_KINDS[MAP_KIND_COUNT] = {
    [MAP_ATTENTION] = {.name = "attention",
                       .title = "attention",
                       .tag = "attention",
                       .uses_query = 1,
                       .per_layer = 1,
                       .per_head = 1,
                       .export_heads = 1,
                       .map = attention_map,
                       .prefix = attention_prefix},
    [MAP_ROLLOUT] = {.name = "rollout",
                     .title = "attention rollout",
                     .tag = "rollout",
                     .key = 'r',
                     .key_name = "R",
                     .help = "attention rollout on / off",
                     .uses_discard = 1,
                     .uses_query = 1,
                     .per_layer = 1,
                     .per_head = 1,
                     .map = rollout_map,
                     .layer_maps = rollout_layers,
                     .prefix = rollout_prefix},
    /* Chefer, Gur & Wolf, ICCV 2021: R <- R + mean_h((dA (.) A)^+) R, the CLS row */
    [MAP_CHEFER] = {.name = "Chefer et al.",
                    .title = "relevance (Chefer et al. 2021)",
                    .tag = "chefer",
                    .uses_target = 1,
                    .map = chefer_map},
    /* vit-explain's grad_rollout, each layer with its own gradient */
    [MAP_GRAD_ROLLOUT] = {.name = "gradient rollout",
                          .title = "gradient-weighted rollout",
                          .tag = "grad-rollout",
                          .uses_discard = 1,
                          .uses_target = 1,
                          .map = grad_rollout_map},
    /* pytorch-grad-cam's ViT recipe on the last block's norm1 */
    [MAP_GRADCAM] = {.name = "Grad-CAM",
                     .title = "Grad-CAM (last block's norm1)",
                     .tag = "gradcam",
                     .uses_target = 1,
                     .map = gradcam_map},
    /* Bousselham et al. 2024, each layer's own score */
    [MAP_LEGRAD] = {.name = "LeGrad",
                    .title = "LeGrad (Bousselham et al. 2024)",
                    .tag = "legrad",
                    .uses_target = 1,
                    .map = legrad_map},
    /* Achtibat et al., ICML 2024, gradient x input with the CP-LRP rules: per pixel */
    [MAP_ATTNLRP] = {.name = "AttnLRP",
                     .title = "AttnLRP (Achtibat et al. 2024)",
                     .tag = "attnlrp",
                     .uses_target = 1,
                     .pixels = 1,
                     .signed_scale = 1,
                     .lrp = 1,
                     .map = attnlrp_map},
    [MAP_GRAD_INPUT] = {.name = "gradient x input",
                        .title = "gradient \xc3\x97 input",
                        .tag = "grad-input",
                        .uses_target = 1,
                        .pixels = 1,
                        .signed_scale = 1,
                        .map = grad_input_map},
};

void map_kind_size(int *w, int *h, int kind, const VitConfig *cfg) {
    int pixels = kind >= 0 && kind < MAP_KIND_COUNT && MAP_KINDS[kind].pixels;
    *w = pixels ? cfg->image_w : cfg->grid_w;
    *h = pixels ? cfg->image_h : cfg->grid_h;
}

void map_kind_normalize(float *dst, const float *src, int n, int kind, float *lo, float *hi) {
    if (kind >= 0 && kind < MAP_KIND_COUNT && MAP_KINDS[kind].signed_scale)
        map_normalize_signed(dst, src, n, lo, hi);
    else
        map_normalize(dst, src, n, lo, hi);
}

size_t map_kind_max_floats(const VitConfig *cfg, int per_head_only) {
    size_t most = 0;
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        int w, h;
        map_kind_size(&w, &h, k, cfg);
        if ((!per_head_only || MAP_KINDS[k].per_head) && (size_t)w * (size_t)h > most)
            most = (size_t)w * (size_t)h;
    }
    return most;
}

/* --- a View's maps --------------------------------------------------------- */

static VitStatus fail(VitError *err, VitStatus code, const char *what, const char *kind) {
    if (err) {
        err->code = code;
        snprintf(err->msg, sizeof err->msg, "%s: %s", kind, what);
    }
    return code;
}

/* The row of v's kind, or NULL (err set) when it cannot be computed for sc. */
static const MapKindInfo *kind_of(const Scene *sc, const View *v, VitError *err) {
    if (v->kind < 0 || v->kind >= MAP_KIND_COUNT) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "map kind %d: expected 0 to %d", v->kind,
                     MAP_KIND_COUNT - 1);
        }
        return NULL;
    }
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    if (k->uses_target && sc->run.cfg.n_classes == 0) {
        fail(err, VIT_ERR_ARG, "needs a model with a classification head; this one has none",
             k->title);
        return NULL;
    }
    return k;
}

VitStatus view_map(float *out, const Scene *sc, const View *v, VitError *err) {
    const MapKindInfo *k = kind_of(sc, v, err);
    return k ? k->map(out, sc, v, err) : VIT_ERR_ARG;
}

/* The raw maps of every head and fusion of layers [l0, l1) with v's kind and other
 * fields: out [(l1 - l0) * (H + 3), map]. */
static VitStatus layer_maps(float *out, const Scene *sc, const View *v, int l0, int l1,
                            VitError *err) {
    const MapKindInfo *k = kind_of(sc, v, err);
    if (!k) return VIT_ERR_ARG;
    if (!k->per_head) return fail(err, VIT_ERR_ARG, "has no per-head maps", k->title);
    if (k->layer_maps) return k->layer_maps(out, sc, v, l0, l1 - l0, err);
    int K = sc->run.cfg.n_heads + VIEW_N_FUSIONS, w, h;
    map_kind_size(&w, &h, v->kind, &sc->run.cfg);
    for (int l = l0; l < l1; l++)
        for (int i = 0; i < K; i++) {
            View u = *v;
            u.layer = l, u.head = i;
            VitStatus rc = k->map(out + ((size_t)(l - l0) * K + i) * w * h, sc, &u, err);
            if (rc) return rc;
        }
    return VIT_OK;
}

VitStatus view_layer_range(float *lo, float *hi, const Scene *sc, const View *v, VitError *err) {
    int w, h;
    map_kind_size(&w, &h, v->kind, &sc->run.cfg);
    size_t n = (size_t)(sc->run.cfg.n_heads + VIEW_N_FUSIONS) * w * h;
    *lo = 0.0f, *hi = 0.0f;
    float *maps = malloc(n * sizeof *maps);
    if (!maps) {
        if (err) {
            err->code = VIT_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory for the layer's maps");
        }
        return VIT_ERR_NOMEM;
    }
    VitStatus rc = layer_maps(maps, sc, v, v->layer, v->layer + 1, err);
    for (size_t i = 0; rc == VIT_OK && i < n; i++) {
        if (i == 0 || maps[i] < *lo) *lo = maps[i];
        if (i == 0 || maps[i] > *hi) *hi = maps[i];
    }
    free(maps);
    return rc;
}

VitStatus overview_maps(float *out, float *lo, float *hi, const Scene *sc, const View *v, int table,
                        int shared, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    int K = c->n_heads + VIEW_N_FUSIONS, w, h;
    map_kind_size(&w, &h, v->kind, c);
    int N = w * h;
    int l0 = table ? 0 : v->layer, l1 = table ? c->n_layers : v->layer + 1;
    VitStatus rc = layer_maps(out, sc, v, l0, l1, err);
    if (rc) return rc;
    for (int l = l0; l < l1; l++) {
        float *first = out + (size_t)(l - l0) * K * N;
        float llo = 0, lhi = 0;
        for (size_t i = 0; i < (size_t)K * N; i++) { /* the layer's range from its own maps */
            if (i == 0 || first[i] < llo) llo = first[i];
            if (i == 0 || first[i] > lhi) lhi = first[i];
        }
        for (int k = 0; k < K; k++) {
            float *mk = first + (size_t)k * N, a, b;
            if (shared) {
                a = llo, b = lhi;
                for (int p = 0; p < N; p++) mk[p] = b > a ? (mk[p] - a) / (b - a) : 0.0f;
            } else {
                map_normalize(mk, mk, N, &a, &b);
            }
            int idx = (l - l0) * K + k;
            if (lo) lo[idx] = a;
            if (hi) hi[idx] = b;
        }
    }
    return VIT_OK;
}

VitStatus view_prefix(float *out, const Scene *sc, const View *v, VitError *err) {
    const MapKindInfo *k = kind_of(sc, v, err);
    if (!k) return VIT_ERR_ARG;
    if (!k->prefix) return fail(err, VIT_ERR_ARG, "has no prefix-token share", k->title);
    return k->prefix(out, sc, v, err);
}

int view_ready(const Scene *sc, const View *v) {
    if (v->kind < 0 || v->kind >= MAP_KIND_COUNT || !MAP_KINDS[v->kind].uses_target) return 1;
    if (sc->run.cfg.n_classes == 0) return 1; /* view_map says why it cannot be */
    return scene_explained(sc, view_class(v, sc), MAP_KINDS[v->kind].uses_discard, v->discard_ratio,
                           MAP_KINDS[v->kind].lrp);
}

int view_class(const View *v, const Scene *sc) {
    const VitConfig *c = &sc->run.cfg;
    if (c->n_classes <= 0) return -1;
    if (v->target >= 0 && v->target < c->n_classes) return v->target;
    if (!sc->run.probs) return -1;
    int top;
    vit_top_k(&top, sc->run.probs, c->n_classes, 1);
    return top;
}
