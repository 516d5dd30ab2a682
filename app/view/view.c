/* view.c - the View's helpers that need only the model's shapes: the fusion a head index
 * stands for, the query token and the head as text, a token's name, and the two
 * normalisations of a map for display. */
#include "view/view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- names ---------------------------------------------------------------------- */

const char *token_name(char *buf, size_t n, const VitConfig *c, int t, char sep) {
    if (t < c->n_prefix) return vit_prefix_name(buf, n, c, t);
    int p = t - c->n_prefix;
    snprintf(buf, n, "patch (%d%c %d)", p / c->grid_w + 1, sep, p % c->grid_w + 1);
    return buf;
}

int view_fusion(const View *v, int n_heads) {
    return v->head >= n_heads ? v->head - n_heads : -1;
}

void view_query_text(char *buf, size_t n, const View *v, const VitConfig *cfg) {
    if (v->query < cfg->n_prefix) {
        if (v->query == 0)
            snprintf(buf, n, "CLS token");
        else
            snprintf(buf, n, "prefix token %d", v->query);
        return;
    }
    int p = v->query - cfg->n_prefix;
    snprintf(buf, n, "patch (row %d, col %d)", p / cfg->grid_w + 1, p % cfg->grid_w + 1);
}

/* --- display normalisation ----------------------------------------------------- */

/* qsort order of floats, ascending; written so that it cannot overflow as x - y could. */
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void map_normalize_signed(float *dst, const float *src, int n, float *min_out, float *max_out) {
    float s = 0.0f;
    float *mag = n > 0 ? malloc((size_t)n * sizeof *mag) : NULL;
    /* the percentile from a sorted copy of |src|; out of memory, the plain maximum (the
     * map is still drawn, only less contrasted) */
    if (mag) {
        int m = 0; /* a NaN (a dropped patch: vit_intervention_mask) has no magnitude */
        for (int i = 0; i < n; i++)
            if (!isnan(src[i])) mag[m++] = fabsf(src[i]);
        if (m > 0) {
            qsort(mag, (size_t)m, sizeof *mag, cmp_float);
            s = mag[(int)((long long)(m - 1) * 995 / 1000)];
            if (!(s > 0.0f)) s = mag[m - 1]; /* mostly zeros: the largest */
        }
        free(mag);
    } else {
        for (int i = 0; i < n; i++) s = fabsf(src[i]) > s ? fabsf(src[i]) : s;
    }
    for (int i = 0; i < n; i++) {
        float t = s > 0.0f ? 0.5f + 0.5f * src[i] / s : 0.5f;
        dst[i] = isnan(t) ? 0.5f : t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    }
    if (min_out) *min_out = -s;
    if (max_out) *max_out = s;
}

void map_normalize(float *dst, const float *src, int n, float *min_out, float *max_out) {
    /* the range of the values that are not NaN (a dropped patch, vit_intervention_mask),
     * which are drawn at the scale's bottom */
    int i0 = 0;
    while (i0 < n && isnan(src[i0])) i0++;
    float lo = i0 < n ? src[i0] : 0.0f, hi = lo;
    for (int i = i0 + 1; i < n; i++) {
        if (src[i] < lo) lo = src[i];
        if (src[i] > hi) hi = src[i];
    }
    float range = hi - lo; /* a flat map (range 0) is drawn all at the scale's bottom */
    for (int i = 0; i < n; i++)
        dst[i] = range > 0.0f && !isnan(src[i]) ? (src[i] - lo) / range : 0.0f;
    if (min_out) *min_out = lo;
    if (max_out) *max_out = hi;
}

void view_head_text(char *buf, size_t n, const View *v, int n_heads, const IntervSpec *iv) {
    int f = view_fusion(v, n_heads);
    if (f < 0)
        snprintf(buf, n, "head %d/%d%s", v->head + 1, n_heads,
                 iv && interv_is_ablated(iv, v->layer + 1, v->head + 1) ? ", ablated" : "");
    else
        snprintf(buf, n, "%s of %d heads", vit_fusion_name((VitFusion)f), n_heads);
}
