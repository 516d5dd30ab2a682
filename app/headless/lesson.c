/* lesson.c - the lesson's steps: their numbers from the engine (vit.h, "The lesson"), their
 * arrays and captions, and the export (PNG, .npy, steps.json, lesson.md); each step's
 * drawing is lesson_draw.c's. See lesson.h. */
#include "headless/lesson.h"
#include "headless/export.h"
#include "config/files.h"
#include "headless/npy.h"
#include "render/colormap.h"
#include "render/text.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- the numbers ------------------------------------------------------------------- */

int lesson_model_has(const VitConfig *c) {
    return (c->n_classes > 0 ? LESSON_NEEDS_HEAD : 0) | (c->rope ? LESSON_NEEDS_ROPE : 0) |
           (c->head_pool == VIT_POOL_MAP ? LESSON_NEEDS_MAP : 0);
}

void lesson_data_free(LessonData *ld) {
    vit_lesson_free(&ld->blk);
    vit_lesson_probe_free(&ld->probe);
    free(ld->probe_mean);
    free(ld->pixels);
    free(ld->filters);
    free(ld->xhat);
    free(ld->pos_sim);
    free(ld->cls_norm);
    memset(ld, 0, sizeof *ld);
}

VitStatus lesson_select(LessonData *ld, int layer, int head, int patch, VitError *err) {
    const VitConfig *c = &ld->vit->cfg;
    if (layer < 0 || layer >= c->n_layers)
        return vit_set_error(err, VIT_ERR_ARG, "layer %d out of range 1 .. %d", layer + 1,
                             c->n_layers);
    if (head < 0 || head >= c->n_heads)
        return vit_set_error(err, VIT_ERR_ARG, "head %d out of range 1 .. %d", head + 1,
                             c->n_heads);
    if (patch < 0 || patch >= c->n_patches)
        return vit_set_error(err, VIT_ERR_ARG, "patch (%d, %d) outside the %d x %d grid",
                             patch / c->grid_w + 1, patch % c->grid_w + 1, c->grid_h, c->grid_w);
    VitStatus rc;
    if (patch != ld->patch &&
        (rc = vit_lesson_patch(ld->pixels, ld->embedding, &ld->sc->run, ld->vit, patch, err)))
        return rc;
    if (layer != ld->blk.layer &&
        (rc = vit_lesson_block(&ld->blk, &ld->sc->run, ld->vit, layer, err)))
        return rc;
    int token = c->n_prefix + patch;
    if ((head != ld->blk.head || token != ld->blk.token) &&
        (rc = vit_lesson_select(&ld->blk, &ld->sc->run, head, token, err)))
        return rc;
    ld->layer = layer, ld->head = head, ld->patch = patch, ld->token = token;
    /* x hat: the token's row normalised with norm1's moments, before its weight and bias */
    const float *x = ld->blk.x + (size_t)token * c->dim;
    for (int i = 0; i < c->dim; i++) ld->xhat[i] = (x[i] - ld->blk.ln_mean) / ld->blk.ln_std;
    return VIT_OK;
}

VitStatus lesson_compute(LessonData *ld, const Model *m, const Scene *sc, int layer, int head,
                         int patch, VitError *err) {
    memset(ld, 0, sizeof *ld);
    const VitConfig *c = &m->vit.cfg;
    size_t D = (size_t)c->dim, N = (size_t)c->n_patches,
           K = 3 * (size_t)c->patch_size * c->patch_size;
    ld->vit = &m->vit, ld->sc = sc, ld->labels = m->labels;
    ld->patch = -1;
    VitStatus rc = vit_lesson_init(&ld->blk, &m->vit, err);
    if (rc) return rc;
    ld->pixels = malloc((K + D) * sizeof(float));
    ld->filters = malloc(((size_t)LESSON_FILTERS_MAX * (K + 1)) * sizeof(float));
    ld->pos_sim = malloc(N * N * sizeof(float));
    ld->cls_norm = malloc(D * sizeof(float));
    ld->xhat = malloc(D * sizeof(float));
    if (!ld->pixels || !ld->filters || !ld->pos_sim || !ld->cls_norm || !ld->xhat) {
        lesson_data_free(ld);
        return vit_set_error(err, VIT_ERR_NOMEM, "lesson: out of memory");
    }
    ld->embedding = ld->pixels + K;
    ld->filters_var = ld->filters + (size_t)LESSON_FILTERS_MAX * K;
    ld->n_filters =
        vit_lesson_filters(ld->filters, ld->filters_var, &m->vit, LESSON_FILTERS_MAX, err);
    if (ld->n_filters < 0) {
        lesson_data_free(ld);
        return err ? err->code : VIT_ERR_ARG;
    }
    vit_lesson_pos_similarity(ld->pos_sim, &m->vit);
    VitError herr;
    ld->has_head = vit_lesson_head(ld->cls_norm, &sc->run, &m->vit, &herr) == VIT_OK;
    if (ld->has_head)
        vit_top_k(ld->top, sc->run.probs, c->n_classes,
                  c->n_classes < LESSON_TOP ? c->n_classes : LESSON_TOP);
    else
        snprintf(ld->head_msg, sizeof ld->head_msg, "%s", herr.msg);
    if (c->head_pool == VIT_POOL_MAP) { /* the probe step: the MAP head rerun, its parts */
        if ((rc = vit_lesson_probe(&ld->probe, &sc->run, &m->vit, err)) ||
            !(ld->probe_mean = malloc(N * sizeof(float)))) {
            lesson_data_free(ld);
            return rc ? rc : vit_set_error(err, VIT_ERR_NOMEM, "lesson: out of memory");
        }
        int H = c->n_heads;
        for (size_t p = 0; p < N; p++) { /* in double, then rounded once */
            double sum = 0.0;
            for (int h = 0; h < H; h++) sum += ld->probe.att[(size_t)h * N + p];
            ld->probe_mean[p] = (float)(sum / H);
        }
        ld->has_probe = 1;
    }
    if ((rc = lesson_select(ld, layer, head, patch, err))) lesson_data_free(ld);
    return rc;
}

/* --- the steps' arrays and captions ------------------------------------------------ */

enum { LESSON_ARRAYS = 8 }; /* the most a step has (probe) */

typedef struct {
    const char *part; /* "" or a suffix of the file name */
    const float *data;
    int shape[4], ndim;
} LessonArray;

static LessonArray arr(const char *part, const float *data, int ndim, int a, int b, int c, int d) {
    return (LessonArray){part, data, {a, b, c, d}, ndim};
}

/* The arrays step shows, into out [LESSON_ARRAYS]; returns how many. */
static int step_arrays(const LessonData *ld, int step, LessonArray *out) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLesson *b = &ld->blk;
    int T = c->n_tokens, D = c->dim, Dh = c->head_dim, F = c->mlp_dim, P = c->patch_size,
        N = c->n_patches, t = ld->token, A = vit_att_width(c); /* heads side by side */
    switch (step) {
    case LESSON_PATCHES: out[0] = arr("", ld->pixels, 3, 3, P, P, 0); return 1;
    case LESSON_EMBEDDING: out[0] = arr("", ld->embedding, 1, D, 0, 0, 0); return 1;
    case LESSON_FILTERS:
        out[0] = arr("", ld->filters, 4, ld->n_filters, 3, P, P);
        out[1] = arr("variance", ld->filters_var, 1, ld->n_filters, 0, 0, 0);
        return 2;
    case LESSON_TOKENS: out[0] = arr("", ld->sc->run.tokens, 2, T, D, 0, 0); return 1;
    case LESSON_POSITION: out[0] = arr("", ld->pos_sim, 3, N, c->grid_h, c->grid_w, 0); return 1;
    case LESSON_LAYERNORM:
        /* the three rows drawn (LESSON_LN_ROWS): x, x hat, gamma . x hat + beta */
        out[0] = arr("in", b->x + (size_t)t * D, 1, D, 0, 0, 0);
        out[1] = arr("normalised", ld->xhat, 1, D, 0, 0, 0);
        out[2] = arr("", b->xn1 + (size_t)t * D, 1, D, 0, 0, 0);
        out[3] = arr("stream", b->x, 2, T, D, 0, 0); /* every token entering the block */
        return 4;
    case LESSON_QUERY: out[0] = arr("", b->query, 1, Dh, 0, 0, 0); return 1;
    case LESSON_KEYS: out[0] = arr("", b->keys, 2, T, Dh, 0, 0); return 1;
    case LESSON_ROPE:
        if (!c->rope) return 0;
        out[0] = arr("q", b->query0, 1, Dh, 0, 0, 0);
        out[1] = arr("q_rotated", b->query, 1, Dh, 0, 0, 0);
        out[2] = arr("k", b->key0, 1, Dh, 0, 0, 0);
        out[3] = arr("k_rotated", b->keys + (size_t)t * Dh, 1, Dh, 0, 0, 0);
        out[4] = arr("angles", b->angles, 1, Dh / 2, 0, 0, 0);
        out[5] = arr("", b->rope_scores, 2, c->grid_h, c->grid_w, 0, 0);
        return 6;
    case LESSON_SCORES: out[0] = arr("", b->scores, 1, T, 0, 0, 0); return 1;
    case LESSON_SOFTMAX: out[0] = arr("", b->probs, 1, T, 0, 0, 0); return 1;
    case LESSON_WEIGHTED:
        out[0] = arr("values", b->values, 2, T, Dh, 0, 0);
        out[1] = arr("", b->ctx + (size_t)t * A + (size_t)ld->head * Dh, 1, Dh, 0, 0, 0);
        return 2;
    case LESSON_PROJECTION:
        out[0] = arr("concat", b->ctx + (size_t)t * A, 1, A, 0, 0, 0);
        out[1] = arr("", b->proj + (size_t)t * D, 1, D, 0, 0, 0);
        return 2;
    case LESSON_RESIDUAL1: out[0] = arr("", b->xm + (size_t)t * D, 1, D, 0, 0, 0); return 1;
    case LESSON_MLP: out[0] = arr("", b->hid + (size_t)t * F, 1, F, 0, 0, 0); return 1;
    case LESSON_MLP_OUT: out[0] = arr("", b->mlp + (size_t)t * D, 1, D, 0, 0, 0); return 1;
    case LESSON_RESIDUAL2: out[0] = arr("", b->out + (size_t)t * D, 1, D, 0, 0, 0); return 1;
    case LESSON_PROBE: {
        if (!ld->has_probe) return 0;
        const VitLessonProbe *p = &ld->probe;
        out[0] = arr("", p->att, 3, c->n_heads, c->grid_h, c->grid_w, 0);
        out[1] = arr("mean", ld->probe_mean, 2, c->grid_h, c->grid_w, 0, 0);
        out[2] = arr("probe", p->probe, 1, D, 0, 0, 0);
        out[3] = arr("query", p->query, 1, D, 0, 0, 0);
        out[4] = arr("weighted", p->weighted, 1, D, 0, 0, 0);
        out[5] = arr("attended", p->attended, 1, D, 0, 0, 0);
        out[6] = arr("mlp", p->mlp, 1, D, 0, 0, 0);
        out[7] = arr("embedding", p->embedding, 1, D, 0, 0, 0);
        return 8;
    }
    case LESSON_HEAD:
        if (!ld->has_head) return 0;
        out[0] = arr("cls_norm", ld->cls_norm, 1, D, 0, 0, 0);
        out[1] = arr("logits", ld->sc->run.logits, 1, c->n_classes, 0, 0, 0);
        out[2] = arr("", ld->sc->run.probs, 1, c->n_classes, 0, 0, 0);
        return 3;
    }
    return 0;
}

/* "[197, 192]" */
static void shape_str(char *buf, size_t n, const LessonArray *a) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < a->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%d", i ? ", " : "", a->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Row a [N] of the probe's attention: its largest weight, where (*at, the first of equal
 * ones), and its entropy -sum a ln a in nats (0 for a one-hot row, ln N for a flat one). */
float lesson_probe_peak(const float *a, int N, int *at, double *entropy) {
    double e = 0.0;
    *at = 0;
    for (int p = 0; p < N; p++) {
        if (a[p] > a[*at]) *at = p;
        if (a[p] > 0.0f) e -= (double)a[p] * log((double)a[p]);
    }
    *entropy = e;
    return a[*at];
}

/* |v| of v [n], in double */
double lesson_norm2(const float *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

void lesson_stats_label(char *buf, size_t size, const float *v, int n) {
    double m = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) m += v[i];
    m /= n > 0 ? n : 1;
    for (int i = 0; i < n; i++) var += (v[i] - m) * (v[i] - m);
    double s = sqrt(var / (n > 0 ? n : 1));
    m = fabs(m) < 0.0005 ? 0.0 : m; /* no "-0.000" */
    snprintf(buf, size, "mean %.3f   std %.3f", m, s);
}

/* The sequence: CLS token (or none) and the patches. */
static void caption_tokens(char *buf, size_t n, const LessonData *ld, const char *sh) {
    const VitConfig *c = &ld->vit->cfg;
    /* DINOv3: no position embedding is added; RoPE turns queries and keys in each block */
    const char *pos = ld->vit->w.pos_embed ? "+ position embedding"
                                           : "no position embedding added (RoPE turns queries "
                                             "and keys in every block)";
    if (c->n_prefix == 0) /* SigLIP: the patches alone, pooled by the MAP head's probe */
        snprintf(buf, n,
                 "The sequence: the %d patches alone (no CLS token: an attention head pools "
                 "them at the end), %s %s",
                 c->n_patches, pos, sh);
    else
        snprintf(buf, n, "The sequence: CLS token first%s, then %d patches, %s %s",
                 c->n_prefix > 1 ? " (and the other prefix tokens)" : "", c->n_patches, pos, sh);
}

/* The scores' divisor, the model's own, and a "what if?" temperature on this block. */
static void caption_scores(char *buf, size_t n, const LessonData *ld, const char *sh) {
    const VitConfig *c = &ld->vit->cfg;
    int r = ld->patch / c->grid_w + 1, col = ld->patch % c->grid_w + 1;
    /* the model's own divisor: sqrt(d_h), or sqrt(D) for a layout that scales so; and
     * the temperature a "what if?" put on this block (the scores the softmax reads) */
    const VitIntervention *iv = ld->sc ? ld->sc->run.intervention : NULL;
    char tau[32] = "";
    if (iv && iv->temperature > 0.0f && iv->temp_layer == ld->layer)
        snprintf(tau, sizeof tau, " / %.2g (temperature)", iv->temperature);
    snprintf(buf, n, "Scores q.k_j / sqrt(%ld)%s of patch (%d, %d) with every token %s",
             c->att_scale > 0.0f ? lroundf(1.0f / (c->att_scale * c->att_scale))
                                 : (long)c->head_dim,
             tau, r, col, sh);
}

/* The probe head's peak, entropy and embedding norm. */
static void caption_probe(char *buf, size_t n, const LessonData *ld, const char *sh) {
    const VitConfig *c = &ld->vit->cfg;
    int h = ld->head + 1;
    if (!ld->has_probe) {
        snprintf(buf, n, "This model reads a token, not a probe: nothing is pooled by attention");
        return;
    }
    int at, N = c->n_patches;
    double ent;
    float top = lesson_probe_peak(ld->probe.att + (size_t)ld->head * N, N, &at, &ent);
    snprintf(buf, n,
             "Probe head %d: most on patch (%d, %d), %.3f; entropy %.2f of %.2f nats; "
             "|embedding| %.2f %s",
             h, at / c->grid_w + 1, at % c->grid_w + 1, top, ent, log((double)N),
             lesson_norm2(ld->probe.embedding, c->dim), sh);
}

/* The head: pooled how, how many classes. */
static void caption_head(char *buf, size_t n, const LessonData *ld, const char *sh) {
    const VitConfig *c = &ld->vit->cfg;
    if (ld->has_head && c->head_pool == VIT_POOL_MAP)
        snprintf(buf, n,
                 "Final LayerNorm of every patch, a probe's attention over them (the probe "
                 "map kind), %d sigmoid scores: the top-%d %s",
                 c->n_classes, LESSON_TOP, sh);
    else if (ld->has_head)
        snprintf(buf, n, "Final LayerNorm of the CLS token, %d logits, softmax: the top-%d %s",
                 c->n_classes, LESSON_TOP, sh);
    else
        snprintf(buf, n, "This model has no classification head: nothing to predict");
}

void lesson_caption(char *buf, size_t n, const LessonData *ld, int step) {
    const VitConfig *c = &ld->vit->cfg;
    const VitLesson *b = &ld->blk;
    int P = c->patch_size, r = ld->patch / c->grid_w + 1, col = ld->patch % c->grid_w + 1,
        l = ld->layer + 1, h = ld->head + 1;
    LessonArray a[LESSON_ARRAYS];
    char sh[64] = "";
    int na = step_arrays(ld, step, a);
    for (int i = 0; i < na; i++) /* the step's own array: the one without a part name */
        if (!a[i].part[0]) shape_str(sh, sizeof sh, &a[i]);
    switch (step) {
    case LESSON_PATCHES:
        snprintf(buf, n, "%d x %d patches of %d px, row by row; patch (%d, %d): %d values %s",
                 c->grid_h, c->grid_w, P, r, col, 3 * P * P, sh);
        break;
    case LESSON_EMBEDDING:
        snprintf(buf, n, "Patch (%d, %d) times the embedding matrix: %d numbers %s", r, col, c->dim,
                 sh);
        break;
    case LESSON_FILTERS:
        snprintf(buf, n, "The embedding's filters: their first %d principal components %s",
                 ld->n_filters, sh);
        break;
    case LESSON_TOKENS: caption_tokens(buf, n, ld, sh); break;
    case LESSON_POSITION:
        if (ld->vit->w.pos_embed)
            snprintf(buf, n, "Cosine similarity of the position embeddings, one grid per patch %s",
                     sh);
        else /* vit_lesson_pos_similarity: the rotation table's rows in their place */
            snprintf(buf, n,
                     "No position embedding: the similarity of the rotary angles instead, the "
                     "mean over the pairs of cos(a_i - a_j), one grid per patch %s",
                     sh);
        break;
    case LESSON_LAYERNORM: { /* each row's statistics, as drawn beside it */
        char st[3][64];
        for (int k = 0; k < 3; k++) lesson_stats_label(st[k], sizeof st[k], a[k].data, c->dim);
        snprintf(buf, n, "Block %d, LayerNorm of token (%d, %d): x %s -> x̂ %s -> γ·x̂+β %s %s", l, r,
                 col, st[0], st[1], st[2], sh);
        break;
    }
    case LESSON_QUERY:
        snprintf(buf, n, "Block %d, head %d: the query of patch (%d, %d) %s", l, h, r, col, sh);
        break;
    case LESSON_KEYS: snprintf(buf, n, "Block %d, head %d: every token's key %s", l, h, sh); break;
    case LESSON_ROPE:
        if (c->rope)
            snprintf(buf, n,
                     "Block %d, head %d: patch (%d, %d)'s q and k turned by its position in %d "
                     "pairs; its key moved to every patch scores by the offset alone %s",
                     l, h, r, col, c->head_dim / 2, sh);
        else
            snprintf(buf, n, "This model adds a learned position embedding: nothing is rotated");
        break;
    case LESSON_SCORES: caption_scores(buf, n, ld, sh); break;
    case LESSON_SOFTMAX:
        snprintf(buf, n, "Softmax of the scores: where patch (%d, %d) looks, block %d head %d %s",
                 r, col, l, h, sh);
        break;
    case LESSON_WEIGHTED:
        snprintf(buf, n, "The values weighted by the softmax and summed %s", sh);
        break;
    case LESSON_PROJECTION:
        if (vit_att_width(c) != c->dim) /* heads not D / H wide */
            snprintf(buf, n, "%d heads of %d concatenated [%d], then projected %s", c->n_heads,
                     c->head_dim, vit_att_width(c), sh);
        else
            snprintf(buf, n, "%d heads concatenated, then projected %s", c->n_heads, sh);
        break;
    case LESSON_RESIDUAL1:
        snprintf(buf, n, "Added to the residual stream: norm %.2f -> %.2f %s", b->norm_in,
                 b->norm_mid, sh);
        break;
    case LESSON_MLP:
        snprintf(buf, n, "MLP: %s lets %.0f%% of the %d hidden units through %s",
                 vit_activation_name(c->mlp_act), 100.0 * b->gelu_share, c->mlp_dim, sh);
        break;
    case LESSON_MLP_OUT: snprintf(buf, n, "The MLP's output %s", sh); break;
    case LESSON_RESIDUAL2:
        snprintf(buf, n, "Added again: norm %.2f -> %.2f, block %d's output %s", b->norm_mid,
                 b->norm_out, l, sh);
        break;
    case LESSON_PROBE: caption_probe(buf, n, ld, sh); break;
    case LESSON_HEAD: caption_head(buf, n, ld, sh); break;
    default: snprintf(buf, n, "?");
    }
}

/* --- the default lesson ------------------------------------------------------------ */

int lesson_default_load(LessonScript *s, const char *demo_dir) {
    char path[1200] = "";
    if (demo_dir && demo_dir[0]) { /* ASSETS/default/demo -> ASSETS/default/lesson.txt */
        snprintf(path, sizeof path, "%s", demo_dir);
        char *slash = strrchr(path, '/');
        if (slash)
            snprintf(slash, sizeof path - (size_t)(slash - path), "/lesson.txt");
        else
            path[0] = '\0';
    }
    if (path[0] && lesson_script_load(s, path) >= 0) return 0;
    lesson_script_free(s);
    return lesson_script_default(s, -1) < 0 ? -1 : 0; /* the check leaves out what it lacks */
}

int lesson_default_fit(LessonScript *s, const VitConfig *c) {
    int has = lesson_model_has(c);
    int rc = lesson_script_fit(s, c->n_layers, c->n_heads, c->grid_h, c->grid_w, has);
    lesson_script_check(s, c->n_layers, c->n_heads, c->grid_h, c->grid_w, has);
    if (!s->n) { /* nothing left: every step the model offers instead */
        lesson_script_free(s);
        if (lesson_script_default(s, has) < 0) rc = -1;
    }
    return rc;
}

/* --- the export ------------------------------------------------------------------- */

/* Line l's selection on model c: sel = {layer, head (0-based), patch (0 .. N-1)}, row and
 * column 0 the grid's centre (unchecked: lesson_line_select checks the patch). */
static void line_selection(int sel[3], const VitConfig *c, const LessonLine *l) {
    int row = l->row ? l->row - 1 : (c->grid_h - 1) / 2,
        col = l->col ? l->col - 1 : (c->grid_w - 1) / 2;
    sel[0] = l->layer - 1, sel[1] = l->head - 1, sel[2] = row * c->grid_w + col;
}

VitStatus lesson_line_select(LessonData *ld, const LessonLine *l, VitError *err) {
    const VitConfig *c = &ld->vit->cfg;
    int sel[3];
    line_selection(sel, c, l);
    int row = sel[2] / c->grid_w, col = sel[2] % c->grid_w;
    if (row >= c->grid_h || col >= c->grid_w)
        return vit_set_error(err, VIT_ERR_ARG, "patch %d,%d outside the %d x %d grid", row + 1,
                             col + 1, c->grid_h, c->grid_w);
    return lesson_select(ld, sel[0], sel[1], sel[2], err);
}

/* lesson.md's header: the block, head and patch each run of steps shows ("Steps 1 to 5:
 * block 1, head 1, patch (6, 7)."; one run: "Every step: ..."), sel [n][3] 0-based. */
static void md_selection(FILE *md, const VitConfig *c, const int (*sel)[3], int n) {
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && !memcmp(sel[j], sel[i], sizeof sel[i]);) j++;
        if (i == 0 && j == n)
            fprintf(md, "Every step: ");
        else if (j == i + 1)
            fprintf(md, "Step %d: ", i + 1);
        else
            fprintf(md, "Steps %d to %d: ", i + 1, j);
        fprintf(md, "block %d, head %d, patch (%d, %d).\n", sel[i][0] + 1, sel[i][1] + 1,
                sel[i][2] / c->grid_w + 1, sel[i][2] % c->grid_w + 1);
    }
    fprintf(md, "\n");
}

/* Step s's arrays as stem[_PART].npy into dir, each listed in js's "arrays" (file, shape,
 * dims); *n_npy counts them. 0, or 1 with a message on stderr. */
static int export_arrays(cJSON *js, const char *dir, const char *stem, const LessonData *ld, int s,
                         int *n_npy) {
    char name[128], sh[64], msg[600];
    cJSON *arrays = cJSON_AddArrayToObject(js, "arrays");
    LessonArray a[LESSON_ARRAYS];
    int na = step_arrays(ld, s, a);
    for (int k = 0; k < na; k++) {
        snprintf(name, sizeof name, "%s%s%s.npy", stem, a[k].part[0] ? "_" : "", a[k].part);
        if (npy_write(dir, name, a[k].data, a[k].shape, a[k].ndim, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return 1;
        }
        (*n_npy)++;
        shape_str(sh, sizeof sh, &a[k]);
        cJSON *ja = cJSON_CreateObject();
        cJSON_AddItemToArray(arrays, ja);
        cJSON_AddStringToObject(ja, "file", name);
        cJSON_AddStringToObject(ja, "shape", sh);
        cJSON_AddItemToObject(ja, "dims", cJSON_CreateIntArray(a[k].shape, a[k].ndim));
        if (s == LESSON_LAYERNORM && k < 3) { /* the statistics drawn beside its row */
            lesson_stats_label(sh, sizeof sh, a[k].data, a[k].shape[0]);
            cJSON_AddStringToObject(ja, "label", sh);
        }
    }
    return 0;
}

int lesson_export(FILE *out, const char *dir, const Model *m, const Scene *sc, int layer, int head,
                  int patch, int colormap, const LessonScript *script) {
    LessonData ld;
    VitError err;
    char msg[600], path[4096];
    if (files_make_dir(dir, 0777, path, sizeof path)) {
        fprintf(stderr, "vitlens: %s\n", path);
        return 1;
    }
    if (script && script->n) { /* the first step's selection: no block computed twice */
        int first[3];
        line_selection(first, &m->vit.cfg, &script->lines[0]);
        layer = first[0], head = first[1], patch = first[2];
    }
    if (lesson_compute(&ld, m, sc, layer, head, patch, &err)) {
        fprintf(stderr, "vitlens: --lesson-export: %s\n", err.msg);
        return 1;
    }
    Text font = {0};
    int has_font = text_init(&font, msg, sizeof msg) == 0;
    if (!has_font) fprintf(stderr, "vitlens: no font, the pictures have no text: %s\n", msg);
    uint8_t *rgb = malloc((size_t)LESSON_W * LESSON_H * 3);
    cJSON *root = cJSON_CreateObject(), *steps = cJSON_AddArrayToObject(root, "steps");
    snprintf(path, sizeof path, "%s/lesson.md", dir);
    FILE *md = fopen(path, "w");
    int rc = 1, n_png = 0, n_npy = 0;
    if (!rgb || !root || !steps || !md) {
        fprintf(stderr, "vitlens: %s: %s\n", md ? dir : path,
                md ? "out of memory" : strerror(errno));
        goto done;
    }
    const VitConfig *c = &m->vit.cfg;
    cJSON_AddStringToObject(root, "model", m->name);
    cJSON_AddStringToObject(root, "image", sc->path);
    /* without a script every step the model offers (lesson_step_offered) */
    int all[LESSON_STEP_TOTAL], n_all = 0, has = lesson_model_has(c);
    for (int s = 0; s < LESSON_STEP_TOTAL; s++)
        if (lesson_step_offered(s, has)) all[n_all++] = s;
    int n_steps = script ? script->n : n_all;
    /* each step's selection, for the header (each step's own is in steps.json) */
    int(*sel)[3] = malloc((size_t)(n_steps ? n_steps : 1) * sizeof *sel);
    if (!sel) {
        fprintf(stderr, "vitlens: %s: out of memory\n", dir);
        goto done;
    }
    for (int i = 0; i < n_steps; i++) {
        if (script)
            line_selection(sel[i], c, &script->lines[i]);
        else
            sel[i][0] = layer, sel[i][1] = head, sel[i][2] = patch;
    }
    fprintf(md, "# How %s computes, step by step, on %s\n\n", m->name, sc->name);
    md_selection(md, c, (const int(*)[3])sel, n_steps);
    free(sel);
    for (int i = 0; i < n_steps; i++) {
        char stem[64], caption[512], name[128];
        int s = script ? script->lines[i].step : all[i];
        if (script && lesson_line_select(&ld, &script->lines[i], &err)) {
            fprintf(stderr, "vitlens: %s:%d: %s\n", script->name, script->lines[i].line, err.msg);
            goto done;
        }
        snprintf(stem, sizeof stem, "%02d_%s", i + 1, LESSON_STEP_INFO[s].name);
        if (script && script->lines[i].caption[0])
            snprintf(caption, sizeof caption, "%s", script->lines[i].caption);
        else
            lesson_caption(caption, sizeof caption, &ld, s);
        lesson_draw(rgb, LESSON_W, LESSON_H, has_font ? &font : NULL, &ld, s, n_steps, i, caption,
                    colormap);
        snprintf(path, sizeof path, "%s/%s.png", dir, stem);
        if (export_png(path, rgb, LESSON_W, LESSON_H, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            goto done;
        }
        n_png++;
        cJSON *js = cJSON_CreateObject();
        cJSON_AddItemToArray(steps, js);
        cJSON_AddStringToObject(js, "name", LESSON_STEP_INFO[s].name);
        cJSON_AddStringToObject(js, "title", LESSON_STEP_INFO[s].title);
        cJSON_AddStringToObject(js, "caption", caption);
        snprintf(name, sizeof name, "%s.png", stem);
        cJSON_AddStringToObject(js, "picture", name);
        cJSON_AddNumberToObject(js, "layer", ld.layer + 1);
        cJSON_AddNumberToObject(js, "head", ld.head + 1);
        cJSON *jp = cJSON_AddArrayToObject(js, "patch");
        cJSON_AddItemToArray(jp, cJSON_CreateNumber(ld.patch / c->grid_w + 1));
        cJSON_AddItemToArray(jp, cJSON_CreateNumber(ld.patch % c->grid_w + 1));
        if (export_arrays(js, dir, stem, &ld, s, &n_npy)) goto done;
        fprintf(md, "## %d. %s\n\n%s\n\n![%s](%s.png)\n\n", i + 1, LESSON_STEP_INFO[s].title,
                caption, LESSON_STEP_INFO[s].title, stem);
    }
    char *json = cJSON_Print(root);
    snprintf(path, sizeof path, "%s/steps.json", dir);
    FILE *f = json ? fopen(path, "w") : NULL;
    if (!f || fputs(json, f) < 0 || fclose(f)) {
        fprintf(stderr, "vitlens: %s: cannot write: %s\n", path, strerror(errno));
        free(json);
        goto done;
    }
    free(json);
    rc = 0;
    fprintf(out, "%s: %d steps -> %s (%d PNG, %d .npy, steps.json, lesson.md)\n", sc->name, n_steps,
            dir, n_png, n_npy);
done:
    if (md && fclose(md) && !rc) {
        fprintf(stderr, "vitlens: %s/lesson.md: write failed\n", dir);
        rc = 1;
    }
    cJSON_Delete(root);
    free(rgb);
    if (has_font) text_free(&font);
    lesson_data_free(&ld);
    return rc;
}
