/* maps.c - a View's maps through its kind's row: the map, a layer's range, the overviews,
 * the prefix tokens' share, whether the Scene holds what they need (view_ready), a worker
 * kind's map, and everything the window shows of a view in one call (view_compute). */
#include "view/maps.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills err with "out of memory for a map"; returns VIT_ERR_NOMEM. */
static VitStatus no_memory(VitError *err) {
    if (err) {
        err->code = VIT_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory for a map");
    }
    return VIT_ERR_NOMEM;
}

/* --- a View's maps --------------------------------------------------------- */

/* Fills err with "KIND: WHAT" (kind: the row's title); returns code. */
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
    const char *why = map_kind_unusable_scored(v->kind, &sc->run.cfg, scene_embedding_score(sc));
    if (why) {
        fail(err, VIT_ERR_ARG, why, k->title);
        return NULL;
    }
    return k;
}

/* count maps of v's kind at out: a patch the intervention dropped (vit.h: not in the
 * token sequence, its value meaningless) set to NaN, in a patch map [gh, gw] and over its
 * P x P pixels in a pixel map [Sh, Sw]; colour maps keep their colours. */
static void mask_dropped(float *out, const Scene *sc, const View *v, int count) {
    const VitIntervention *iv = sc->run.intervention;
    const VitConfig *c = &sc->run.cfg;
    int w, h;
    if (!iv || !iv->drop || map_kind_channels(v->kind) != 1) return;
    map_kind_size(&w, &h, v->kind, c);
    for (int i = 0; i < count; i++) {
        float *m = out + (size_t)i * w * h;
        if (w == c->grid_w && h == c->grid_h) {
            vit_intervention_mask(m, iv, c);
            continue;
        }
        if (w != c->image_w || h != c->image_h) continue;
        int P = c->patch_size;
        for (int p = 0; p < c->n_patches; p++)
            if (iv->drop[p])
                for (int y = p / c->grid_w * P; y < (p / c->grid_w + 1) * P; y++)
                    for (int x = p % c->grid_w * P; x < (p % c->grid_w + 1) * P; x++)
                        m[(size_t)y * w + x] = NAN;
    }
}

VitStatus view_map(float *out, const Scene *sc, const View *v, VitError *err) {
    const MapKindInfo *k = kind_of(sc, v, err);
    if (!k) return VIT_ERR_ARG;
    VitStatus rc = k->map(out, sc, v, err);
    if (!rc) mask_dropped(out, sc, v, 1);
    return rc;
}

/* The raw maps of every head and fusion of layers [l0, l1) with v's kind and other
 * fields: out [(l1 - l0) * (H + 3), map]. */
static VitStatus layer_maps(float *out, const Scene *sc, const View *v, int l0, int l1,
                            VitError *err) {
    const MapKindInfo *k = kind_of(sc, v, err);
    if (!k) return VIT_ERR_ARG;
    if (!k->per_head) return fail(err, VIT_ERR_ARG, "has no per-head maps", k->title);
    /* a kind that computes a whole layer at once (its row's layer_maps) does so; the
     * others are asked for one head or fusion at a time, the progress per layer */
    int K = sc->run.cfg.n_heads + VIEW_N_FUSIONS, w, h;
    if (k->layer_maps) {
        VitStatus rc = k->layer_maps(out, sc, v, l0, l1 - l0, err);
        if (!rc) mask_dropped(out, sc, v, (l1 - l0) * K);
        return rc;
    }
    map_kind_size(&w, &h, v->kind, &sc->run.cfg);
    for (int l = l0; l < l1; l++) {
        if (sc->run.control) vit_control_report(sc->run.control, l - l0, l1 - l0);
        for (int i = 0; i < K; i++) {
            View u = *v;
            u.layer = l, u.head = i;
            VitStatus rc = k->map(out + ((size_t)(l - l0) * K + i) * w * h, sc, &u, err);
            if (rc) return rc;
            mask_dropped(out + ((size_t)(l - l0) * K + i) * w * h, sc, &u, 1);
        }
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
    /* the range over every head and fusion of the layer (U, the shared scale), raw
     * values before normalisation */
    VitStatus rc = layer_maps(maps, sc, v, v->layer, v->layer + 1, err);
    for (size_t i = 0, first = 1; rc == VIT_OK && i < n; i++) {
        if (isnan(maps[i])) continue; /* a dropped patch */
        if (first || maps[i] < *lo) *lo = maps[i];
        if (first || maps[i] > *hi) *hi = maps[i];
        first = 0;
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
        for (size_t i = 0, got = 0; i < (size_t)K * N; i++) { /* the layer's range */
            if (isnan(first[i])) continue;                    /* a dropped patch */
            if (!got || first[i] < llo) llo = first[i];
            if (!got || first[i] > lhi) lhi = first[i];
            got = 1;
        }
        /* shared: every map of the layer on the layer's scale, so heads compare; else each
         * map on its own [min, max] */
        for (int k = 0; k < K; k++) {
            float *mk = first + (size_t)k * N, a, b;
            if (shared) {
                a = llo, b = lhi;
                for (int p = 0; p < N; p++)
                    mk[p] = b > a && !isnan(mk[p]) ? (mk[p] - a) / (b - a) : 0.0f;
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

/* --- everything the window shows of a view ---------------------------------- */

VitStatus view_compute(ViewMaps *m, const Scene *sc, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    const View *v = &m->view;
    const MapKindInfo *k = kind_of(sc, v, err);
    VitStatus rc;
    if (!k) return VIT_ERR_ARG;
    map_kind_size(&m->w, &m->h, v->kind, c);
    int n = m->w * m->h;
    m->n_prefix = 0, m->n_atlas = 0, m->status[0] = '\0';
    if (k->tokens) { /* map and prefix share from one row */
        float *t = malloc((size_t)c->n_tokens * sizeof *t);
        if (!t) return no_memory(err);
        rc = k->tokens(t, sc, v, err);
        memcpy(m->map, t + c->n_prefix, (size_t)c->n_patches * sizeof *t);
        memcpy(m->prefix, t, (size_t)c->n_prefix * sizeof *t);
        free(t);
        if (rc) return rc;
        mask_dropped(m->map, sc, v, 1);
        m->n_prefix = c->n_prefix;
    } else {
        if ((rc = view_map(m->map, sc, v, err))) return rc;
        if (k->prefix) {
            if ((rc = view_prefix(m->prefix, sc, v, err))) return rc;
            m->n_prefix = c->n_prefix;
        }
    }
    /* norm: the map in [0, 1] for the colormap; with the shared scale its range is the
     * layer's, replacing the map's own */
    map_kind_normalize(m->norm, m->map, n, v->kind, &m->lo, &m->hi);
    if (m->shared && k->per_head) {
        if ((rc = view_layer_range(&m->lo, &m->hi, sc, v, err))) return rc;
        for (int p = 0; p < n; p++)
            m->norm[p] =
                m->hi > m->lo && !isnan(m->map[p]) ? (m->map[p] - m->lo) / (m->hi - m->lo) : 0.0f;
    }
    if (k->status) k->status(m->status, sizeof m->status, sc, v, m->labels);
    memset(&m->list, 0, sizeof m->list);
    m->list.marked = -1;
    if (k->list) k->list(&m->list, sc, v, m->labels);
    if (m->overview != VIEW_SINGLE && k->per_head) {
        int table = m->overview == VIEW_TABLE, K = c->n_heads + VIEW_N_FUSIONS;
        int na = table ? c->n_layers * K : K;
        float *range = malloc(2 * (size_t)na * sizeof *range); /* lo [na], hi [na] */
        if (!range) return no_memory(err);
        rc = overview_maps(m->atlas, range, range + na, sc, v, table, m->shared, err);
        m->atlas_lo = range[0], m->atlas_hi = range[na]; /* the first map's: its layer's */
        free(range);
        if (rc) return rc;
        m->n_atlas = na;
    }
    /* the status and the list swallow their errors: a cancelled call among them too */
    if (sc->run.control && vit_control_cancelled(sc->run.control)) {
        if (err) {
            err->code = VIT_ERR_CANCELLED;
            snprintf(err->msg, sizeof err->msg, "%s: cancelled", k->title);
        }
        return VIT_ERR_CANCELLED;
    }
    return VIT_OK;
}

int view_maps_same_request(const ViewMaps *a, const ViewMaps *b, int n_heads) {
    return view_same_map(&a->view, &b->view, n_heads) && a->view.target == b->view.target &&
           a->overview == b->overview && a->shared == b->shared;
}

/* --- whether the Scene holds a view's map, and a worker kind's map ---------------- */

int view_ready(const Scene *sc, const View *v) {
    if (v->kind < 0 || v->kind >= MAP_KIND_COUNT) return 1;
    if (view_on_worker(v)) return view_slow_holds(sc, v);
    if (!MAP_KINDS[v->kind].backward) return 1;
    if (map_kind_unusable_scored(v->kind, &sc->run.cfg, scene_embedding_score(sc)))
        return 1; /* view_map says why it cannot be */
    return view_explained(sc, v);
}

int view_class(const View *v, const Scene *sc) {
    return scene_class(sc, v->target);
}

VitStatus view_slow_map(Scene *sc, const View *v, JointFeatures *jf, VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    const MapKindInfo *k = &MAP_KINDS[v->kind];
    /* into the back buffer, tagged with the view it answers, so the window draws the front
     * one meanwhile; scene_slow_swap shows it */
    int back = !sc->slow_front;
    if (!sc->slow[back] && !(sc->slow[back] = malloc(map_kind_max_floats(c, 0) * sizeof(float))))
        return no_memory(err);
    sc->back_slow_valid = 0;
    if (!k->compute) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "%s: not a map of the worker thread", k->title);
        }
        return VIT_ERR_ARG;
    }
    Scene s = scene_with_control(sc, sc->control);
    VitStatus rc = k->compute(sc->slow[back], &s, v, jf, err);
    if (rc) return rc;
    view_slow_tag(sc->back_slow_tag, v);
    sc->back_slow_valid = 1;
    return VIT_OK;
}

/* --- the view's helpers that read its row ------------------------------------- */

void view_clamp(View *v, const VitConfig *cfg) {
    if (v->kind < 0 || v->kind >= MAP_KIND_COUNT) v->kind = MAP_ATTENTION;
    if (v->layer >= cfg->n_layers) v->layer = cfg->n_layers - 1;
    if (v->layer < 0) v->layer = 0;
    if (v->head >= cfg->n_heads + VIEW_N_FUSIONS) v->head = cfg->n_heads + VIEW_N_FUSIONS - 1;
    if (v->head < 0) v->head = 0;
    if (v->query < 0 || v->query >= cfg->n_tokens) v->query = 0;
}

void view_file_stem(char *buf, size_t n, const char *s) {
    const char *slash = strrchr(s, '/');
    if (slash) s = slash + 1;
    const char *dot = strrchr(s, '.');
    size_t len = dot && dot != s ? (size_t)(dot - s) : strlen(s);
    size_t j = 0;
    for (size_t i = 0; i < len && j + 1 < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        buf[j++] = ok ? ch : '-';
    }
    if (n) buf[j] = '\0';
}

void view_file_name(char *buf, size_t n, const char *image, const char *model, const View *v,
                    const VitConfig *cfg, const char *mode, const char *class_stem) {
    const MapKindInfo *k = &MAP_KINDS[v->kind >= 0 && v->kind < MAP_KIND_COUNT ? v->kind : 0];
    char img[96], mod[96], layer[16] = "", head[24] = "", kind[48], query[48] = "", ov[24] = "";
    view_file_stem(img, sizeof img, image);
    view_file_stem(mod, sizeof mod, model);
    if (k->per_layer) snprintf(layer, sizeof layer, "_L%02d", v->layer + 1);
    int f = view_fusion(v, cfg->n_heads);
    if (k->per_head && !mode && f < 0) /* an overview shows every head: the head is left out */
        snprintf(head, sizeof head, "_H%02d", v->head + 1);
    else if (k->per_head && !mode)
        snprintf(head, sizeof head, "_%s", vit_fusion_name((VitFusion)f));
    if (k->uses_discard && v->discard_ratio > 0.0f)
        snprintf(kind, sizeof kind, "%s-d%.1f", k->tag, (double)v->discard_ratio);
    else
        snprintf(kind, sizeof kind, "%s", k->tag);
    if (k->uses_query && v->query >= cfg->n_prefix) {
        int p = v->query - cfg->n_prefix;
        snprintf(query, sizeof query, "_q%02d-%02d", p / cfg->grid_w + 1, p % cfg->grid_w + 1);
    }
    if (k->uses_target) { /* the class explained: _class281, or _top1 */
        if (v->target >= 0 && class_stem)
            snprintf(query, sizeof query, "_%.46s", class_stem);
        else if (v->target >= 0)
            snprintf(query, sizeof query, "_class%d", v->target);
        else
            snprintf(query, sizeof query, "_top1");
    }
    if (mode) snprintf(ov, sizeof ov, "_%s", mode);
    snprintf(buf, n, "%s_%s%s%s_%s%s%s.png", img, mod, layer, head, kind, query, ov);
}
