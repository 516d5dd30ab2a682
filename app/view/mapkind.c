/* mapkind.c - the table of map kinds: each kind's functions (adapters from a Scene and a
 * View to the engine's calls), its row, and what the rows decide: a map's size, its
 * normalisation, which fields of a View it reads, whether the Scene holds it. */
#include "view/mapkind.h"

#include <math.h>
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

/* The prefix tokens' share of the same attention row, out [Np]: the bars beside the map. */
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

/* The rollout row over every token, out [T] (prefix tokens first): view_compute takes the
 * map and the bars from one rollout instead of computing it twice. */
static VitStatus rollout_tokens(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_rollout_tokens(out, &sc->run, v->layer, head, fusion, v->discard_ratio, v->query,
                              err);
}

/* The prefix tokens' share of the rolled-out row, out [Np] (vit_prefix_share's rollout 1). */
static VitStatus rollout_prefix(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_prefix_share(out, &sc->run, v->layer, head, fusion, 1, v->discard_ratio, v->query,
                            err);
}

/* A class-specific map: the map of its row's vit_explain method for v's class, as
 * scene_explain computed it on the worker thread (view_ready says whether it has). Every
 * class-specific row's map function: the row carries the method (MapKindInfo.explain). */
static VitStatus explain_map(float *out, const Scene *sc, const View *v, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    int target = scene_class(sc, v->target);
    if (!view_explained(sc, v)) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "%s: class %d not computed yet", k->name, target);
        }
        return VIT_ERR_ARG;
    }
    /* the method's slot in the front buffer: [Sh, Sw] for a pixel map, else [N] */
    size_t n = k->pixels ? (size_t)c->image_h * c->image_w : (size_t)c->n_patches;
    memcpy(out, sc->expl[sc->expl_front] + (size_t)k->explain * scene_expl_stride(c),
           n * sizeof *out);
    return VIT_OK;
}

/* --- what the tokens hold ------------------------------------------------------ */

/* Fills err with "out of memory for a map"; returns VIT_ERR_NOMEM. */
static VitStatus no_memory(VitError *err) {
    if (err) {
        err->code = VIT_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory for a map");
    }
    return VIT_ERR_NOMEM;
}

/* A view of one value per token [T] (fn), its patch part as the map; the prefix
 * part into prefix [Np] when prefix is not NULL. */
typedef VitStatus (*TokenFn)(float *t, const Scene *sc, const View *v, VitError *err);
static VitStatus token_map(float *out, float *prefix, TokenFn fn, const Scene *sc, const View *v,
                           VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    float *t = malloc((size_t)c->n_tokens * sizeof *t);
    if (!t) return no_memory(err);
    VitStatus rc = fn(t, sc, v, err);
    if (!rc && out) memcpy(out, t + c->n_prefix, (size_t)c->n_patches * sizeof *out);
    if (!rc && prefix) memcpy(prefix, t, (size_t)c->n_prefix * sizeof *prefix);
    free(t);
    return rc;
}

/* Feature PCA (DINOv2 Fig. 1): colours, [gh, gw, 4]. Over the slideshow it comes
 * from the worker (view_slow_map), over this photo it is computed here. */
static VitStatus slow_read(float *out, const Scene *sc, const View *v, VitError *err);
static VitStatus pca_map(float *out, const Scene *sc, const View *v, VitError *err) {
    if (v->joint) return slow_read(out, sc, v, err);
    return scene_pca(out, NULL, sc, v->layer, NULL, err);
}

/* Over the slideshow, on the worker thread: the photos' features first, when they are not
 * of sc's model (scene_joint_features), then the PCA over all of them. */
static VitStatus pca_compute(float *out, const Scene *sc, const View *v, JointFeatures *jf,
                             VitError *err) {
    VitStatus rc;
    if (!v->joint) return scene_pca(out, NULL, sc, v->layer, NULL, err);
    if (!jf) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "features PCA: no slideshow to run over");
        }
        return VIT_ERR_ARG;
    }
    if (jf->vit != sc->vit && (rc = scene_joint_features(jf, sc->vit, err))) return rc;
    return scene_pca(out, NULL, sc, v->layer, jf, err);
}

/* Status line: which photos the PCA ran over; a video's: the frame its colours are held from. */
static void pca_status(char *buf, size_t n, const Scene *sc, const View *v,
                       const char (*labels)[VIT_LABEL_BYTES]) {
    (void)labels;
    long at = sc->pca_hold && !v->joint ? pca_hold_frame(sc->pca_hold, v->layer) : -1;
    if (v->joint)
        snprintf(buf, n, "over every photo of the slideshow");
    else if (sc->pca_hold && at >= 0)
        snprintf(buf, n, "colours held from frame %ld (Shift+C refits)", at);
    else if (sc->pca_hold)
        snprintf(buf, n, "colours fitted on the next frame");
    else
        snprintf(buf, n, "this photo");
}

/* Cosine similarity of the query token's feature to every patch's. */
static VitStatus similarity_map(float *out, const Scene *sc, const View *v, VitError *err) {
    return vit_patch_similarity(out, &sc->run, sc->vit, v->layer, v->query, err);
}

/* Token norms (vit_token_norms, Darcet et al. 2023): t [T] per token; the map [N] its
 * patches' part. */
static VitStatus norms_tokens(float *t, const Scene *sc, const View *v, VitError *err) {
    return vit_token_norms(t, &sc->run, v->layer, err);
}
static VitStatus norms_map(float *out, const Scene *sc, const View *v, VitError *err) {
    return token_map(out, NULL, norms_tokens, sc, v, err);
}

int view_high_norm(int *idx, int *first, float *threshold, const Scene *sc, const View *v,
                   VitError *err) {
    /* the registers paper's absolute threshold applies to DINOv2's norms */
    const char *name = sc->vit ? sc->vit->cfg.name : "";
    /* the model's name, matched anywhere in it ("vit_small_patch14_dinov2.lvd142m") */
    int dinov2 = 0;
    for (const char *p = name; *p && !dinov2; p++)
        dinov2 = !strncmp(p, "dinov2", 6) || !strncmp(p, "DINOv2", 6);
    return vit_high_norm_tokens(idx, first, threshold, &sc->run, v->layer, HIGH_NORM_K,
                                dinov2 ? HIGH_NORM_ABS : 0.0f, err);
}

/* Status line: how many high-norm tokens the layer has, and its threshold (the norm
 * they exceed). Empty when out of memory: a status line is not worth an error. */
static void norms_status(char *buf, size_t n, const Scene *sc, const View *v,
                         const char (*labels)[VIT_LABEL_BYTES]) {
    (void)labels;
    int T = sc->run.cfg.n_tokens, *idx = malloc(2 * (size_t)T * sizeof *idx), k = -1;
    float thr = 0;
    buf[0] = '\0';
    if (idx) k = view_high_norm(idx, idx + T, &thr, sc, v, NULL);
    if (k >= 0)
        snprintf(buf, n, "%d high-norm token%s (> %.3g)", k, k == 1 ? "" : "s", (double)thr);
    free(idx);
}

/* The logit lens's list: per layer (the last VIEW_MAX_LIST) the class the CLS token
 * reads, by its first name, and its probability; the view's layer marked. */
static void lens_list(ViewList *out, const Scene *sc, const View *v,
                      const char (*labels)[VIT_LABEL_BYTES]) {
    const VitConfig *c = &sc->run.cfg;
    if (c->n_classes <= 0) return;
    float *p = malloc((size_t)c->n_classes * sizeof *p);
    int l0 = c->n_layers > VIEW_MAX_LIST ? c->n_layers - VIEW_MAX_LIST : 0;
    for (int l = l0; p && l < c->n_layers; l++) {
        int top;
        if (vit_logit_lens(p, &sc->run, sc->vit, l, 0, NULL)) break;
        vit_top_k(&top, p, c->n_classes, 1);
        const char *label = labels ? labels[top] : NULL;
        int i = out->n++;
        if (label) /* its first name: "tabby", not "tabby, tabby cat" */
            snprintf(out->text[i], sizeof out->text[i], "%2d  %.*s", l + 1,
                     (int)strcspn(label, ","), label);
        else
            snprintf(out->text[i], sizeof out->text[i], "%2d  class %d", l + 1, top);
        snprintf(out->right[i], sizeof out->right[i], "%.1f%%", 100.0 * p[top]);
        out->values[i] = p[top];
        if (l == v->layer) out->marked = i;
    }
    free(p);
    snprintf(out->title, sizeof out->title, "logit lens: the CLS token reads");
}

/* The token norms' list: the high-norm tokens with their first layer and their share of
 * the CLS token's attention (mean of the heads) at the view's layer; they are outlined. */
static void norms_list(ViewList *out, const Scene *sc, const View *v,
                       const char (*labels)[VIT_LABEL_BYTES]) {
    (void)labels;
    const VitConfig *c = &sc->run.cfg;
    int T = c->n_tokens, *idx = malloc(2 * (size_t)T * sizeof *idx);
    float *norms = malloc((size_t)T * sizeof *norms), *cls = malloc((size_t)T * sizeof *cls);
    float thr = 0;
    int n = idx ? view_high_norm(idx, idx + T, &thr, sc, v, NULL) : -1;
    /* the CLS token's attention (mean of the heads) at the layer: patches, then prefix */
    if (n >= 0 && norms && cls && !vit_token_norms(norms, &sc->run, v->layer, NULL) &&
        !vit_map_fused(cls + c->n_prefix, &sc->run, v->layer, VIT_FUSE_MEAN, 0, NULL) &&
        !vit_prefix_share(cls, &sc->run, v->layer, -1, VIT_FUSE_MEAN, 0, 0.0f, 0, NULL)) {
        out->n_outline = n < VIEW_MAX_HIGH_NORM ? n : VIEW_MAX_HIGH_NORM;
        float top = n > 0 ? norms[idx[0]] : 1.0f;
        for (int i = 0; i < n && i < VIEW_MAX_LIST; i++) {
            int t = idx[i];
            char who[48];
            token_name(who, sizeof who, c, t, ',');
            snprintf(out->text[i], sizeof out->text[i], "%s \xc2\xb7 from L%d \xc2\xb7 CLS %.0f%%",
                     who, idx[T + i] + 1, 100.0 * cls[t]);
            snprintf(out->right[i], sizeof out->right[i], "%.0f", (double)norms[t]);
            out->values[i] = norms[t] / top;
            out->n++;
        }
        for (int i = 0; i < out->n_outline; i++) out->outline[i] = idx[i];
        snprintf(out->title, sizeof out->title, "high-norm tokens (> %.3g): %d", (double)thr, n);
    }
    free(idx), free(norms), free(cls);
}

/* The logit lens over the patches, for the view's class. */
static VitStatus lens_map(float *out, const Scene *sc, const View *v, VitError *err) {
    return vit_logit_lens_map(out, &sc->run, sc->vit, v->layer, scene_class(sc, v->target), err);
}

/* Status line: the class the CLS token reads at the view's layer and its probability. */
static void lens_status(char *buf, size_t n, const Scene *sc, const View *v,
                        const char (*labels)[VIT_LABEL_BYTES]) {
    (void)labels;
    int C = sc->run.cfg.n_classes, top;
    float *p = malloc((size_t)(C > 0 ? C : 1) * sizeof *p);
    buf[0] = '\0';
    if (p && C > 0 && !vit_logit_lens(p, &sc->run, sc->vit, v->layer, 0, NULL)) {
        vit_top_k(&top, p, C, 1);
        const char *label = labels ? labels[top] : NULL;
        if (label)
            snprintf(buf, n, "CLS reads: %.60s %.1f%%", label, 100.0 * p[top]);
        else
            snprintf(buf, n, "CLS reads: class %d %.1f%%", top, 100.0 * p[top]);
    }
    free(p);
}

/* Attention flow to the query token after the view's layer (Abnar & Zuidema 2020, §3:
 * max-flow in the layers' attention graph), t [T]; too slow for a frame, so flow_compute
 * runs it on the worker thread (the row's compute). */
static VitStatus flow_tokens(float *t, const Scene *sc, const View *v, VitError *err) {
    return vit_attention_flow(t, &sc->run, v->layer, v->query, err);
}
static VitStatus flow_compute(float *out, const Scene *sc, const View *v, JointFeatures *jf,
                              VitError *err) {
    (void)jf;
    return token_map(out, NULL, flow_tokens, sc, v, err);
}

/* TokenRank (Erel et al. 2025) of one head or the heads fused, t [T] summing to 1: the
 * stationary distribution of the attention as a Markov chain. The map and the prefix
 * bars are its patch and prefix parts. */
static VitStatus tokenrank_tokens(float *t, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_tokenrank(t, &sc->run, v->layer, head, fusion, err);
}
static VitStatus tokenrank_map(float *out, const Scene *sc, const View *v, VitError *err) {
    return token_map(out, NULL, tokenrank_tokens, sc, v, err);
}
static VitStatus tokenrank_prefix(float *out, const Scene *sc, const View *v, VitError *err) {
    return token_map(NULL, out, tokenrank_tokens, sc, v, err);
}

/* Status line: the prefix tokens' total TokenRank against a patch's average, since the
 * map is normalised and hides how much the prefix tokens hold. */
static void tokenrank_status(char *buf, size_t n, const Scene *sc, const View *v,
                             const char (*labels)[VIT_LABEL_BYTES]) {
    (void)labels;
    const VitConfig *c = &sc->run.cfg;
    float pre[VIT_MAX_PREFIX];
    double s = 0.0;
    buf[0] = '\0';
    if (tokenrank_prefix(pre, sc, v, NULL)) return;
    for (int i = 0; i < c->n_prefix; i++) s += pre[i];
    snprintf(buf, n, "%s %.1f%%, each patch %.2f%% on average",
             c->n_prefix > 1 ? "prefix tokens hold" : "the CLS token holds", 100.0 * s,
             100.0 * (1.0 - s) / c->n_patches);
}

/* Attention entropy of every patch's row (vit_map_entropy): one head, or the heads'
 * entropy maps fused. */
static VitStatus entropy_map(float *out, const Scene *sc, const View *v, VitError *err) {
    int head;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, sc->run.cfg.n_heads);
    return vit_map_entropy(out, &sc->run, v->layer, head, fusion, err);
}

/* Every head's entropy map of layers [layer0, layer0 + n_layers) in one engine call
 * (the row's layer_maps), for the overviews. */
static VitStatus entropy_layers(float *out, const Scene *sc, const View *v, int layer0,
                                int n_layers, VitError *err) {
    (void)v;
    return vit_map_entropy_layers(out, &sc->run, layer0, n_layers, err);
}

/* The scale's ends in words: 0 nats is one key, ln T every key alike. */
static void entropy_status(char *buf, size_t n, const Scene *sc, const View *v,
                           const char (*labels)[VIT_LABEL_BYTES]) {
    (void)v, (void)labels;
    snprintf(buf, n, "nats: 0 = one key, %.2f = all %d alike", log((double)sc->run.cfg.n_tokens),
             sc->run.cfg.n_tokens);
}

/* SigLIP's MAP head: the probe's attention over the patches (vit.h VitRun.probe_att
 * [H, N], kept by the forward pass), one head or the heads fused (mean, max, min). The
 * probe is a query of its own, not a token: no prefix share, one map for the model. */
static VitStatus probe_map(float *out, const Scene *sc, const View *v, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    int head, H = c->n_heads, N = c->n_patches;
    VitFusion fusion;
    head_fusion(&head, &fusion, v, H);
    const float *a = sc->run.probe_att;
    if (!a) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "probe attention: the model has no MAP head");
        }
        return VIT_ERR_ARG;
    }
    if (head >= 0) {
        memcpy(out, a + (size_t)head * N, (size_t)N * sizeof *out);
        return VIT_OK;
    }
    for (int p = 0; p < N; p++) {
        float m = a[p], s = 0.0f;
        for (int h = 0; h < H; h++) {
            float x = a[(size_t)h * N + p];
            s += x;
            if (fusion == VIT_FUSE_MAX ? x > m : x < m) m = x;
        }
        out[p] = fusion == VIT_FUSE_MEAN ? s / (float)H : m;
    }
    return VIT_OK;
}

/* What the probe's map is: the pooling query's attention, which sums to 1 over patches. */
static void probe_status(char *buf, size_t n, const Scene *sc, const View *v,
                         const char (*labels)[VIT_LABEL_BYTES]) {
    (void)v, (void)labels;
    snprintf(buf, n, "the pooling head's query over the %d patches (each head sums to 1)",
             sc->run.cfg.n_patches);
}

/* A worker kind's map, as view_slow_map left it (view_ready says whether it has). */
static VitStatus slow_read(float *out, const Scene *sc, const View *v, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    if (!view_slow_holds(sc, v)) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "%s: not computed yet", MAP_KINDS[v->kind].title);
        }
        return VIT_ERR_ARG;
    }
    int w, h;
    map_kind_size(&w, &h, v->kind, c);
    memcpy(out, sc->slow[sc->slow_front], (size_t)w * h * map_kind_channels(v->kind) * sizeof *out);
    return VIT_OK;
}

/* --- the table ------------------------------------------------------------- */

/* One row per kind, in E's order. The rows are the only place a kind is described: the
 * keys, --help, --list-kinds, --export's files and the window's dispatch all read them,
 * so a new kind is a new row and its functions above. */
const MapKindInfo MAP_KINDS[MAP_KIND_COUNT] = {
    /* the first row, untagged in --export's names: the query token's attention row */
    [MAP_ATTENTION] = {.name = "attention",
                       .group = MAP_GROUP_ATTENTION,
                       .title = "attention",
                       .tag = "attention",
                       .uses_query = 1,
                       .per_layer = 1,
                       .per_head = 1,
                       .export_heads = 1,
                       .map = attention_map,
                       .prefix = attention_prefix},
    [MAP_ROLLOUT] = {.name = "rollout",
                     .group = MAP_GROUP_ATTENTION,
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
                     .prefix = rollout_prefix,
                     .tokens = rollout_tokens},
    /* Chefer, Gur & Wolf, ICCV 2021: R <- R + mean_h((dA (.) A)^+) R, the CLS row */
    [MAP_CHEFER] = {.name = "Chefer et al.",
                    .group = MAP_GROUP_CLASS,
                    .title = "relevance (Chefer et al. 2021)",
                    .tag = "chefer",
                    .uses_target = 1,
                    .backward = 1,
                    .explain = VIT_EXPLAIN_CHEFER,
                    .map = explain_map},
    /* vit-explain's grad_rollout, each layer with its own gradient */
    [MAP_GRAD_ROLLOUT] = {.name = "gradient rollout",
                          .group = MAP_GROUP_CLASS,
                          .title = "gradient-weighted rollout",
                          .tag = "grad-rollout",
                          .uses_discard = 1,
                          .uses_target = 1,
                          .backward = 1,
                          .explain = VIT_EXPLAIN_GRAD_ROLLOUT,
                          .map = explain_map},
    /* pytorch-grad-cam's ViT recipe on the last block's norm1 */
    [MAP_GRADCAM] = {.name = "Grad-CAM",
                     .group = MAP_GROUP_CLASS,
                     .title = "Grad-CAM (last block's norm1)",
                     .tag = "gradcam",
                     .uses_target = 1,
                     .backward = 1,
                     .explain = VIT_EXPLAIN_GRADCAM,
                     .map = explain_map},
    /* Bousselham et al. 2024, each layer's own score */
    [MAP_LEGRAD] = {.name = "LeGrad",
                    .group = MAP_GROUP_CLASS,
                    .title = "LeGrad (Bousselham et al. 2024)",
                    .tag = "legrad",
                    .uses_target = 1,
                    .backward = 1,
                    .explain = VIT_EXPLAIN_LEGRAD,
                    .map = explain_map},
    /* Achtibat et al., ICML 2024, gradient x input with the CP-LRP rules: per pixel */
    [MAP_ATTNLRP] = {.name = "AttnLRP",
                     .group = MAP_GROUP_CLASS,
                     .title = "AttnLRP (Achtibat et al. 2024)",
                     .tag = "attnlrp",
                     .uses_target = 1,
                     .backward = 1,
                     .pixels = 1,
                     .signed_scale = 1,
                     .lrp = 1,
                     .explain = VIT_EXPLAIN_ATTNLRP,
                     .map = explain_map},
    /* the input gradient of the class score times the input, summed over channels: per pixel */
    [MAP_GRAD_INPUT] = {.name = "gradient x input",
                        .group = MAP_GROUP_CLASS,
                        .title = "gradient \xc3\x97 input",
                        .tag = "grad-input",
                        .uses_target = 1,
                        .backward = 1,
                        .pixels = 1,
                        .signed_scale = 1,
                        .explain = VIT_EXPLAIN_GRAD_INPUT,
                        .map = explain_map},
    /* what the tokens hold: views of block l's output tokens (vit.h) */
    [MAP_FEATURES_PCA] = {.name = "features PCA",
                          .group = MAP_GROUP_TOKENS,
                          .title = "features PCA (DINOv2 Fig. 1)",
                          .tag = "pca",
                          .key = 'x',
                          .shift_joint = 1,
                          .key_name = "X",
                          .help = "features PCA as colours on / off (Shift+X: over every photo)",
                          .per_layer = 1,
                          .rgb = 1,
                          .worker = 2,
                          .map = pca_map,
                          .compute = pca_compute,
                          .status = pca_status},
    /* cosine of the query token's feature and each patch's, signed: [-1, 1] */
    [MAP_SIMILARITY] = {.name = "patch similarity",
                        .group = MAP_GROUP_TOKENS,
                        .title = "patch similarity (cosine of features)",
                        .tag = "similarity",
                        .key = 'y',
                        .key_name = "Y",
                        .help = "similarity to the query patch on / off",
                        .uses_query = 1,
                        .per_layer = 1,
                        .signed_scale = 1,
                        .map = similarity_map},
    /* Darcet et al. 2023: the residual stream's norm per token; the outliers outlined */
    [MAP_TOKEN_NORMS] = {.name = "token norms",
                         .group = MAP_GROUP_TOKENS,
                         .title = "token norms (high-norm tokens outlined)",
                         .tag = "norms",
                         .key = 'z',
                         .key_name = "Z",
                         .help = "token norms and high-norm tokens on / off",
                         .per_layer = 1,
                         .outline = 1,
                         .map = norms_map,
                         .status = norms_status,
                         .list = norms_list},
    /* the classification head read at every layer: from the CLS token (the list) and
     * from each patch's token (the map) */
    [MAP_LOGIT_LENS] = {.name = "logit lens",
                        .group = MAP_GROUP_TOKENS,
                        .title = "logit lens (the head on each layer)",
                        .tag = "logit-lens",
                        .key = 'l',
                        .shift = 1,
                        .key_name = "Shift+L",
                        .help = "logit lens on / off: the class each layer reads",
                        .uses_target = 1,
                        .per_layer = 1,
                        .map = lens_map,
                        .status = lens_status,
                        .list = lens_list},
    /* Abnar & Zuidema 2020 section 3, exact max flow (engine/maps/flow.c) */
    [MAP_ATTENTION_FLOW] = {.name = "attention flow",
                            .group = MAP_GROUP_TOKENS,
                            .title = "attention flow (Abnar & Zuidema 2020)",
                            .tag = "flow",
                            .key = 'r',
                            .shift = 1,
                            .key_name = "Shift+R",
                            .help =
                                "attention flow on / off (max flow, computed in the background)",
                            .uses_query = 1,
                            .per_layer = 1,
                            .worker = 1,
                            .map = slow_read,
                            .compute = flow_compute},
    /* Erel et al. 2025: the stationary distribution of the attention's Markov chain */
    [MAP_TOKENRANK] = {.name = "TokenRank",
                       .group = MAP_GROUP_TOKENS,
                       .title = "TokenRank (Erel et al. 2025)",
                       .tag = "tokenrank",
                       .key = 't',
                       .shift = 1,
                       .key_name = "Shift+T",
                       .help = "TokenRank on / off: each token's steady-state share of attention",
                       .per_layer = 1,
                       .per_head = 1,
                       .map = tokenrank_map,
                       .prefix = tokenrank_prefix,
                       .tokens = tokenrank_tokens,
                       .status = tokenrank_status},
    /* the entropy of each patch's attention row, -sum_j a_ij ln a_ij (vit_map_entropy) */
    [MAP_ENTROPY] = {.name = "entropy",
                     .group = MAP_GROUP_ATTENTION,
                     .title = "attention entropy (nats)",
                     .tag = "entropy",
                     .key = 'd',
                     .shift = 1,
                     .key_name = "Shift+D",
                     .help = "attention entropy on / off: how spread each patch's attention is",
                     .per_layer = 1,
                     .per_head = 1,
                     .export_heads = 1,
                     .map = entropy_map,
                     .layer_maps = entropy_layers,
                     .status = entropy_status},
    /* SigLIP's attention-pooling head (issue 35): the probe's attention per head */
    [MAP_PROBE] = {.name = "probe",
                   .group = MAP_GROUP_ATTENTION,
                   .title = "probe attention (the pooling head's query)",
                   .tag = "probe",
                   .per_head = 1,
                   .export_heads = 1,
                   .needs_probe = 1,
                   .map = probe_map,
                   .status = probe_status},
};

int map_kind_channels(int kind) {
    return kind >= 0 && kind < MAP_KIND_COUNT && MAP_KINDS[kind].rgb ? 4 : 1;
}

void map_kind_size(int *w, int *h, int kind, const VitConfig *cfg) {
    int pixels = kind >= 0 && kind < MAP_KIND_COUNT && MAP_KINDS[kind].pixels;
    *w = pixels ? cfg->image_w : cfg->grid_w;
    *h = pixels ? cfg->image_h : cfg->grid_h;
}

/* --- what the rows decide ---------------------------------------------------- */

void map_kind_normalize(float *dst, const float *src, int n, int kind, float *lo, float *hi) {
    if (kind >= 0 && kind < MAP_KIND_COUNT && MAP_KINDS[kind].rgb) { /* colours already */
        if (dst != src) memmove(dst, src, (size_t)n * 4 * sizeof *dst);
        if (lo) *lo = 0.0f;
        if (hi) *hi = 1.0f;
        return;
    }
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
        size_t n = (size_t)w * (size_t)h * (size_t)map_kind_channels(k);
        if ((!per_head_only || MAP_KINDS[k].per_head) && n > most) most = n;
    }
    return most;
}

/* --- what the Scene holds of a view ------------------------------------------ */

int map_kind_usable(int kind, const VitConfig *c) {
    return map_kind_unusable_why(kind, c) == NULL;
}

const char *map_kind_unusable_why(int kind, const VitConfig *c) {
    return map_kind_unusable_scored(kind, c, 0);
}

const char *map_kind_unusable_scored(int kind, const VitConfig *c, int embedding_score) {
    if (kind < 0 || kind >= MAP_KIND_COUNT) return "is not a map kind";
    /* a score of the embedding (--similar) explains a backbone without a head too */
    if (MAP_KINDS[kind].uses_target && c->n_classes <= 0 &&
        !(embedding_score && MAP_KINDS[kind].backward))
        return "needs a model with a classification head; this one has none";
    if (MAP_KINDS[kind].needs_probe && c->head_pool != VIT_POOL_MAP)
        return "needs a model pooled by attention (SigLIP's MAP head); this one has none";
    return NULL;
}

int view_on_worker(const View *v) {
    if (v->kind < 0 || v->kind >= MAP_KIND_COUNT) return 0;
    int w = MAP_KINDS[v->kind].worker;
    return w == 1 || (w == 2 && v->joint);
}

int view_same_map(const View *a, const View *b, int n_heads) {
    if (a->kind != b->kind || a->kind < 0 || a->kind >= MAP_KIND_COUNT) return 0;
    const MapKindInfo *k = &MAP_KINDS[a->kind];
    /* only the fields the row says the map reads: moving the query does not invalidate a
     * map that has none, so no recompute */
    (void)n_heads;
    return (!k->per_layer || a->layer == b->layer) && (!k->per_head || a->head == b->head) &&
           (!k->uses_query || a->query == b->query) &&
           (!k->uses_discard || a->discard_ratio == b->discard_ratio) &&
           (!k->uses_target || a->target == b->target) && (k->worker != 2 || a->joint == b->joint);
}

int view_explained(const Scene *sc, const View *v) {
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    int target = scene_class(sc, v->target);
    /* the front buffer answers this view when it was computed for the same class, and for
     * the same discard ratio and with AttnLRP where the kind depends on them */
    return sc->expl_target >= 0 && sc->expl_target == target &&
           (!k->uses_discard || sc->expl_discard == v->discard_ratio) && (!k->lrp || sc->expl_lrp);
}

_Static_assert(sizeof(View) <= SCENE_TAG_BYTES, "a View must fit a Scene's worker-map tag");

/* The tag is the View's bytes, zero-padded: the worker's result is matched to the view
 * it was computed for (view_slow_holds), whatever the view is by the time it arrives. */
void view_slow_tag(unsigned char tag[SCENE_TAG_BYTES], const View *v) {
    memset(tag, 0, SCENE_TAG_BYTES);
    memcpy(tag, v, sizeof *v);
}

int view_slow_holds(const Scene *sc, const View *v) {
    View held;
    memcpy(&held, sc->slow_tag, sizeof held);
    return sc->slow_valid && view_same_map(&held, v, sc->run.cfg.n_heads);
}
