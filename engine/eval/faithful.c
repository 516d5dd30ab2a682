/* faithful.c - faithfulness metrics for the maps (vit.h, "Faithfulness: perturbation,
 * localisation, sanity checks"): the orders and inputs of the perturbation tests
 * (Chefer et al. 2021, §4; Petsiuk et al. 2018, RISE's deletion and insertion), the
 * area under their curves, localisation scores against a mask (pointing game,
 * energy-based pointing game, top-k IoU), Spearman's rank correlation for the sanity
 * check (Adebayo et al. 2018) and two baseline maps. No model here: perturb.c
 * (vit_perturb_curve) runs the forward passes on the inputs these make. Sums are in
 * double throughout. */
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- helpers --------------------------------------------------------------- */

/* The index of the first NaN or infinity of map [n], or -1 when every value is finite. */
static int first_non_finite(const float *map, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(map[i])) return i;
    return -1;
}

/* Does index a come before index b in the order of key (decreasing when desc)? Ties:
 * the lower index first. A total order, so every correct sort gives the same result. */
static int before(const float *key, int a, int b, int desc) {
    if (key[a] != key[b]) return desc ? key[a] > key[b] : key[a] < key[b];
    return a < b;
}

/* Heapsort's sift-down of idx[root] within idx[0 .. size): the heap's root is the index
 * that comes last in the order. */
static void sift_down(int *idx, const float *key, int root, int size, int desc) {
    for (int child; (child = 2 * root + 1) < size; root = child) {
        if (child + 1 < size && before(key, idx[child], idx[child + 1], desc)) child++;
        if (!before(key, idx[root], idx[child], desc)) return;
        int t = idx[root];
        idx[root] = idx[child], idx[child] = t;
    }
}

/* Sort idx [n] by `before`, in place and without allocating (so vit_patch_order has no
 * VIT_ERR_NOMEM). Heapsort is not stable, which does not matter for a total order. */
static void sort_indices(int *idx, const float *key, int n, int desc) {
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(idx, key, i, n, desc);
    for (int end = n - 1; end > 0; end--) {
        int t = idx[0];
        idx[0] = idx[end], idx[end] = t;
        sift_down(idx, key, 0, end, desc);
    }
}

/* Checks shared by the localisation scores: map and mask [n] present, n >= 1, map
 * finite, at least one patch in the mask. *n_in receives the mask's size. */
static VitStatus check_localisation(const char *what, const float *map, const uint8_t *mask, int n,
                                    int *n_in, VitError *err) {
    if (!map || !mask) return vit_set_error(err, VIT_ERR_ARG, "%s: map or mask is NULL", what);
    if (n < 1)
        return vit_set_error(err, VIT_ERR_ARG, "%s: %d patches, expected at least 1", what, n);
    int bad = first_non_finite(map, n);
    if (bad >= 0)
        return vit_set_error(err, VIT_ERR_ARG, "%s: map[%d] is %g, expected a finite value", what,
                             bad, (double)map[bad]);
    *n_in = 0;
    for (int p = 0; p < n; p++) *n_in += mask[p] != 0;
    if (*n_in == 0)
        return vit_set_error(err, VIT_ERR_ARG, "%s: the mask is empty (0 of %d patches)", what, n);
    return VIT_OK;
}

/* splitmix64 (Steele, Lea & Flood 2014; Vigna's public-domain C): one 64-bit output
 * per call, the state advanced by the golden-ratio increment. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* --- perturbation ------------------------------------------------------------ */

VitStatus vit_patch_order(int *order, const float *map, int n, int most_first, VitError *err) {
    if (!order || !map) return vit_set_error(err, VIT_ERR_ARG, "patch order: order or map is NULL");
    if (n < 1)
        return vit_set_error(err, VIT_ERR_ARG, "patch order: %d patches, expected at least 1", n);
    int bad = first_non_finite(map, n);
    if (bad >= 0)
        return vit_set_error(err, VIT_ERR_ARG,
                             "patch order: map[%d] is %g, expected a finite value", bad,
                             (double)map[bad]);
    for (int p = 0; p < n; p++) order[p] = p;
    sort_indices(order, map, n, most_first != 0);
    return VIT_OK;
}

int vit_perturb_count(int step, int n_steps, int n) {
    if (n_steps < 1 || n < 1) return 0;
    if (step < 0) step = 0;
    if (step > n_steps) step = n_steps;
    /* step * n / n_steps = q + r / n_steps; half up: one more when 2r >= n_steps */
    int64_t num = (int64_t)step * n, q = num / n_steps, r = num % n_steps;
    return (int)(q + (2 * r >= n_steps));
}

void vit_patch_mix(float *out, const float *base, const float *fill, const VitConfig *cfg,
                   const int *order, int k) {
    int P = cfg->patch_size, gw = cfg->grid_w, N = cfg->n_patches;
    size_t Sw = (size_t)cfg->image_w, plane = (size_t)cfg->image_h * Sw;
    if (out != base) memmove(out, base, 3 * plane * sizeof *out);
    if (k > N) k = N;
    for (int i = 0; i < k; i++) {
        int p = order[i];
        if (p < 0 || p >= N) continue;
        size_t y0 = (size_t)(p / gw) * P, x0 = (size_t)(p % gw) * P;
        for (int c = 0; c < 3; c++)
            for (size_t y = y0; y < y0 + (size_t)P; y++) {
                size_t at = c * plane + y * Sw + x0;
                if (fill)
                    memcpy(out + at, fill + at, (size_t)P * sizeof *out);
                else
                    memset(out + at, 0, (size_t)P * sizeof *out); /* all-zero bits: 0.0f */
            }
    }
}

VitStatus vit_blur(float *out, const float *in, int n_channels, int h, int w, float sigma,
                   int radius, VitError *err) {
    if (!out || !in) return vit_set_error(err, VIT_ERR_ARG, "blur: out or in is NULL");
    if (out == in) return vit_set_error(err, VIT_ERR_ARG, "blur: out must not be in");
    if (n_channels < 1 || h < 1 || w < 1 || h > VIT_MAX_INPUT || w > VIT_MAX_INPUT)
        return vit_set_error(err, VIT_ERR_ARG,
                             "blur: size [%d, %d, %d], expected C >= 1 and H, W in [1, %d]",
                             n_channels, h, w, VIT_MAX_INPUT);
    if (!(sigma > 0.0f) || isinf(sigma))
        return vit_set_error(err, VIT_ERR_ARG, "blur: sigma %g, expected a finite value > 0",
                             (double)sigma);
    if (radius < 0 || radius > VIT_MAX_INPUT)
        return vit_set_error(err, VIT_ERR_ARG, "blur: radius %d outside [0, %d]", radius,
                             VIT_MAX_INPUT);
    size_t plane = (size_t)h * w;
    double *taps = malloc((2 * (size_t)radius + 1 + plane) * sizeof *taps);
    if (!taps)
        return vit_set_error(err, VIT_ERR_NOMEM, "blur: out of memory for a %d x %d plane", h, w);
    double *tmp = taps + 2 * radius + 1, *g = taps + radius; /* g[x], x in [-radius, radius] */
    double sum = 0.0;
    for (int x = -radius; x <= radius; x++)
        sum += g[x] = exp(-(double)x * x / (2.0 * (double)sigma * sigma));
    for (int x = -radius; x <= radius; x++) g[x] /= sum;
    for (int c = 0; c < n_channels; c++) {
        const float *src = in + c * plane;
        float *dst = out + c * plane;
        /* along rows, then along columns; outside the image counts as 0 (torch's
         * conv2d with padding = radius), so only the taps that land inside are summed */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int lo = x - radius < 0 ? -x : -radius, hi = x + radius >= w ? w - 1 - x : radius;
                double s = 0.0;
                for (int t = lo; t <= hi; t++) s += g[t] * src[(size_t)y * w + x + t];
                tmp[(size_t)y * w + x] = s;
            }
        for (int y = 0; y < h; y++) {
            int lo = y - radius < 0 ? -y : -radius, hi = y + radius >= h ? h - 1 - y : radius;
            for (int x = 0; x < w; x++) {
                double s = 0.0;
                for (int t = lo; t <= hi; t++) s += g[t] * tmp[(size_t)(y + t) * w + x];
                dst[(size_t)y * w + x] = (float)s;
            }
        }
    }
    free(taps);
    return VIT_OK;
}

double vit_auc(const float *y, int n) {
    if (!y || n < 2) return NAN;
    /* RISE's auc(): (sum - y0 / 2 - y_{n-1} / 2) / (n - 1), the trapezoid rule */
    double s = 0.0;
    for (int i = 0; i < n; i++) s += y[i];
    return (s - 0.5 * y[0] - 0.5 * y[n - 1]) / (n - 1);
}

/* --- localisation ------------------------------------------------------------ */

void vit_map_to_patches(float *out, const float *map, const VitConfig *cfg, int pixels) {
    int N = cfg->n_patches;
    if (!pixels) {
        memmove(out, map, (size_t)N * sizeof *out);
        return;
    }
    int P = cfg->patch_size, gw = cfg->grid_w;
    size_t Sw = (size_t)cfg->image_w;
    for (int p = 0; p < N; p++) {
        size_t y0 = (size_t)(p / gw) * P, x0 = (size_t)(p % gw) * P;
        double s = 0.0;
        for (size_t y = y0; y < y0 + (size_t)P; y++)
            for (size_t x = x0; x < x0 + (size_t)P; x++) s += map[y * Sw + x];
        out[p] = (float)s;
    }
}

int vit_mask_to_patches(uint8_t *out, const uint8_t *mask, const VitConfig *cfg) {
    int P = cfg->patch_size, gw = cfg->grid_w, N = cfg->n_patches, n_in = 0;
    size_t Sw = (size_t)cfg->image_w;
    for (int p = 0; p < N; p++) {
        size_t y0 = (size_t)(p / gw) * P, x0 = (size_t)(p % gw) * P;
        int64_t count = 0;
        for (size_t y = y0; y < y0 + (size_t)P; y++)
            for (size_t x = x0; x < x0 + (size_t)P; x++) count += mask[y * Sw + x] != 0;
        out[p] = 2 * count >= (int64_t)P * P; /* at least half, exactly: 8 of 16, 5 of 9 */
        n_in += out[p];
    }
    return n_in;
}

double vit_pointing_game(const float *map, const uint8_t *mask, int n, VitError *err) {
    int n_in;
    if (check_localisation("pointing game", map, mask, n, &n_in, err)) return NAN;
    float top = map[0];
    for (int p = 1; p < n; p++) top = map[p] > top ? map[p] : top;
    int hits = 0, n_top = 0;
    for (int p = 0; p < n; p++)
        if (map[p] == top) n_top++, hits += mask[p] != 0;
    return (double)hits / n_top;
}

double vit_energy_pointing(const float *map, const uint8_t *mask, int n, VitError *err) {
    int n_in;
    if (check_localisation("energy pointing game", map, mask, n, &n_in, err)) return NAN;
    double inside = 0.0, all = 0.0;
    for (int p = 0; p < n; p++) {
        double e = map[p] > 0.0f ? map[p] : 0.0;
        all += e;
        if (mask[p]) inside += e;
    }
    if (all == 0.0) {
        vit_set_error(err, VIT_ERR_ARG, "energy pointing game: no value of the map is > 0");
        return NAN;
    }
    return inside / all;
}

double vit_topk_iou(const float *map, const uint8_t *mask, int n, VitError *err) {
    int n_in;
    if (check_localisation("top-k IoU", map, mask, n, &n_in, err)) return NAN;
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) {
        vit_set_error(err, VIT_ERR_NOMEM, "top-k IoU: out of memory for %d patches", n);
        return NAN;
    }
    vit_patch_order(order, map, n, 1, NULL); /* cannot fail: checked above */
    int both = 0;
    for (int i = 0; i < n_in; i++) both += mask[order[i]] != 0;
    free(order);
    /* |top-k| = |mask| = k, so the union is 2k minus the intersection */
    return (double)both / (2 * n_in - both);
}

double vit_top_iou(const float *a, const float *b, int n, double top_frac, VitError *err) {
    if (!a || !b || n < 1 || !(top_frac > 0.0 && top_frac <= 1.0)) {
        vit_set_error(err, VIT_ERR_ARG, "top IoU: %s",
                      !a || !b ? "a map is NULL"
                      : n < 1  ? "no patches"
                               : "top_frac not in (0, 1]");
        return NAN;
    }
    const float *maps[2] = {a, b};
    for (int m = 0; m < 2; m++) {
        int bad = first_non_finite(maps[m], n), flat = 1;
        if (bad >= 0) {
            vit_set_error(err, VIT_ERR_ARG, "top IoU: map %c[%d] is %g", "ab"[m], bad,
                          (double)maps[m][bad]);
            return NAN;
        }
        for (int i = 1; i < n && flat; i++) flat = maps[m][i] == maps[m][0];
        if (flat) {
            vit_set_error(err, VIT_ERR_ARG, "top IoU: map %c is constant (no top patches)",
                          "ab"[m]);
            return NAN;
        }
    }
    double kd = floor(top_frac * n + 0.5);
    int k = kd < 1.0 ? 1 : kd > n ? n : (int)kd;
    int *order = malloc(2 * (size_t)n * sizeof *order);
    if (!order) {
        vit_set_error(err, VIT_ERR_NOMEM, "top IoU: out of memory for %d patches", n);
        return NAN;
    }
    /* mark a's top k in the second half, then count b's top k among them */
    int *in_a = order + n, both = 0;
    vit_patch_order(order, a, n, 1, NULL); /* cannot fail: checked above */
    memset(in_a, 0, (size_t)n * sizeof *in_a);
    for (int i = 0; i < k; i++) in_a[order[i]] = 1;
    vit_patch_order(order, b, n, 1, NULL);
    for (int i = 0; i < k; i++) both += in_a[order[i]];
    free(order);
    /* both sets have k patches: the union is 2k minus the intersection */
    return (double)both / (2 * k - both);
}

/* --- sanity check -------------------------------------------------------------- */

/* rank [n]: 1-based ranks of v, a tie group sharing the mean of its ranks (scipy's
 * rankdata(method='average')); idx [n] scratch. */
static void average_ranks(double *rank, int *idx, const float *v, int n) {
    for (int i = 0; i < n; i++) idx[i] = i;
    sort_indices(idx, v, n, 0);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && v[idx[j]] == v[idx[i]]) j++;
        double r = 0.5 * (i + 1 + j); /* the mean of ranks i + 1 .. j */
        for (; i < j; i++) rank[idx[i]] = r;
    }
}

double vit_spearman(const float *a, const float *b, int n) {
    if (!a || !b || n < 2 || first_non_finite(a, n) >= 0 || first_non_finite(b, n) >= 0) return NAN;
    double *ra = malloc(2 * (size_t)n * sizeof *ra);
    int *idx = malloc((size_t)n * sizeof *idx);
    if (!ra || !idx) {
        free(ra), free(idx);
        return NAN;
    }
    double *rb = ra + n;
    average_ranks(ra, idx, a, n);
    average_ranks(rb, idx, b, n);
    free(idx);
    /* Pearson of the ranks; both means are (n + 1) / 2 exactly */
    double mean = 0.5 * (n + 1), sab = 0.0, saa = 0.0, sbb = 0.0;
    for (int i = 0; i < n; i++) {
        double da = ra[i] - mean, db = rb[i] - mean;
        sab += da * db, saa += da * da, sbb += db * db;
    }
    free(ra);
    if (saa == 0.0 || sbb == 0.0) return NAN; /* a constant: every rank the mean */
    double r = sab / sqrt(saa * sbb);
    return r > 1.0 ? 1.0 : r < -1.0 ? -1.0 : r;
}

/* --- baselines ------------------------------------------------------------------ */

void vit_random_map(float *out, int n, uint64_t seed) {
    uint64_t state = seed;
    /* the top 24 bits: a float in [0, 1) exactly, the same on every machine */
    for (int i = 0; i < n; i++) out[i] = (float)(splitmix64(&state) >> 40) * 0x1p-24f;
}

void vit_gaussian_map(float *out, int gh, int gw, float sigma_frac) {
    if (gh < 1 || gw < 1) return;
    double s = (double)sigma_frac * (gh < gw ? gh : gw), cy = 0.5 * (gh - 1), cx = 0.5 * (gw - 1);
    for (int r = 0; r < gh; r++)
        for (int c = 0; c < gw; c++) {
            double d2 = (r - cy) * (r - cy) + (c - cx) * (c - cx);
            /* sigma_frac <= 0 or NaN: the limit s -> 0, 1 at the centre and 0 elsewhere */
            out[r * gw + c] = s > 0.0 ? (float)exp(-d2 / (2.0 * s * s)) : d2 == 0.0 ? 1.0f : 0.0f;
        }
}
