/* interv.c - the user's interventions: parsing the options, building the engine's
 * VitIntervention for a model, describing them. */
#include "view/interv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- parsing ------------------------------------------------------------------- */

/* "A<sep>B" then <list> or the end, each a whole integer >= 1: the pairs of a set into
 * items. 0, or -1 (msg set). */
static int parse_pairs(int (*items)[2], int *count, const char *opt, const char *val, char sep,
                       char list, const char *form, char *msg, size_t n) {
    const char *p = val;
    int k = 0;
    while (*p) {
        long a, b;
        char *end;
        errno = 0;
        a = strtol(p, &end, 10);
        if (end == p || *end != sep) goto bad;
        p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != list)) goto bad;
        if (a < 1 || b < 1 || a > 1000000 || b > 1000000) {
            snprintf(msg, n, "%s %s: %ld%c%ld: numbers from 1, as on screen", opt, val, a, sep, b);
            return -1;
        }
        if (k == INTERV_MAX_ITEMS) {
            snprintf(msg, n, "%s: more than %d entries", opt, INTERV_MAX_ITEMS);
            return -1;
        }
        items[k][0] = (int)a, items[k][1] = (int)b, k++;
        p = *end ? end + 1 : end;
        if (*end && !*p) goto bad; /* a trailing separator */
    }
    if (!k) {
        snprintf(msg, n, "%s: an empty set (expected %s)", opt, form);
        return -1;
    }
    *count = k;
    return 0;
bad:
    snprintf(msg, n, "%s %s: expected %s", opt, val, form);
    return -1;
}

int interv_parse(IntervSpec *s, const char *opt, const char *val, char *msg, size_t n) {
    if (!strcmp(opt, "--ablate"))
        return parse_pairs(s->ablate, &s->n_ablate, opt, val, ':', ',', "L:H[,L:H...]", msg, n);
    if (!strcmp(opt, "--drop-patches"))
        return parse_pairs(s->drop, &s->n_drop, opt, val, ',', ';', "R,C[;R,C...]", msg, n);
    if (!strcmp(opt, "--fill-patches"))
        return parse_pairs(s->fill, &s->n_fill, opt, val, ',', ';', "R,C[;R,C...]", msg, n);
    if (!strcmp(opt, "--pos-embed")) {
        if (!strcmp(val, "shuffle"))
            s->pos = VIT_POS_SHUFFLE;
        else if (!strcmp(val, "zero"))
            s->pos = VIT_POS_ZERO;
        else {
            snprintf(msg, n, "%s %s: expected shuffle or zero", opt, val);
            return -1;
        }
        return 0;
    }
    if (!strcmp(opt, "--pos-seed")) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || !*val || *end || val[0] == '-') {
            snprintf(msg, n, "%s %s: expected a non-negative integer", opt, val);
            return -1;
        }
        s->pos_seed = v;
        return 0;
    }
    if (!strcmp(opt, "--temperature")) {
        char *end;
        errno = 0;
        long l = strtol(val, &end, 10);
        float t = 0.0f;
        if (end != val && *end == ':') {
            const char *ts = end + 1;
            t = strtof(ts, &end);
            if (end == ts) end = (char *)val; /* no number: bad */
        } else {
            end = (char *)val;
        }
        if (errno || end == val || *end) {
            snprintf(msg, n, "%s %s: expected L:TAU (a layer from 1 and a temperature > 0)", opt,
                     val);
            return -1;
        }
        if (l < 1 || l > 1000000) {
            snprintf(msg, n, "%s %s: layer %ld: layers count from 1, as on screen", opt, val, l);
            return -1;
        }
        if (!(t > 0.0f) || !isfinite(t)) {
            snprintf(msg, n, "%s %s: temperature %g: expected a finite value > 0", opt, val,
                     (double)t);
            return -1;
        }
        s->temp_layer = (int)l, s->temperature = t;
        return 0;
    }
    return 1;
}

/* Index of (a, b) in items [n], or -1. */
static int find_pair(const int (*items)[2], int n, int a, int b) {
    for (int i = 0; i < n; i++)
        if (items[i][0] == a && items[i][1] == b) return i;
    return -1;
}

/* Put (a, b) in (on) or out of items [*n]: 0, or -1 when full. */
static int set_pair(int (*items)[2], int *n, int a, int b, int on) {
    int i = find_pair((const int(*)[2])items, *n, a, b);
    if (on && i < 0) {
        if (*n == INTERV_MAX_ITEMS) return -1;
        items[*n][0] = a, items[*n][1] = b, (*n)++;
    } else if (!on && i >= 0) {
        memmove(items[i], items[i + 1], (size_t)(*n - i - 1) * sizeof items[0]);
        (*n)--;
    }
    return 0;
}

int interv_toggle_ablate(IntervSpec *s, int layer, int head) {
    int on = find_pair((const int(*)[2])s->ablate, s->n_ablate, layer, head) < 0;
    return set_pair(s->ablate, &s->n_ablate, layer, head, on);
}

int interv_is_ablated(const IntervSpec *s, int layer, int head) {
    return find_pair((const int(*)[2])s->ablate, s->n_ablate, layer, head) >= 0;
}

int interv_has_patch(const IntervSpec *s, int fill, int row, int col) {
    return fill ? find_pair((const int(*)[2])s->fill, s->n_fill, row, col) >= 0
                : find_pair((const int(*)[2])s->drop, s->n_drop, row, col) >= 0;
}

int interv_set_patch(IntervSpec *s, int fill, int row, int col, int on) {
    return fill ? set_pair(s->fill, &s->n_fill, row, col, on)
                : set_pair(s->drop, &s->n_drop, row, col, on);
}

int interv_any(const IntervSpec *s) {
    return s->n_ablate || s->n_drop || s->n_fill || s->pos != VIT_POS_KEEP || s->temp_layer;
}

/* --- building ------------------------------------------------------------------- */

void interv_free(Interv *iv) {
    free(iv->ablate), free(iv->drop), free(iv->fill), free(iv->perm);
    memset(iv, 0, sizeof *iv);
}

/* The patches of a set into flags [N]: 0, or -1 (msg: the first out of the grid). */
static int set_patches(uint8_t *flags, const int (*items)[2], int count, const VitConfig *c,
                       const char *opt, char *msg, size_t n) {
    for (int i = 0; i < count; i++) {
        int r = items[i][0], col = items[i][1];
        if (r > c->grid_h || col > c->grid_w) {
            snprintf(msg, n,
                     "%s: patch %d,%d is outside the %dx%d grid (rows 1 .. %d, columns 1 "
                     ".. %d)",
                     opt, r, col, c->grid_h, c->grid_w, c->grid_h, c->grid_w);
            return -1;
        }
        flags[(r - 1) * c->grid_w + (col - 1)] = 1;
    }
    return 0;
}

int interv_build(Interv *out, const IntervSpec *s, const VitConfig *c, char *msg, size_t n) {
    interv_free(out);
    int L = c->n_layers, H = c->n_heads, N = c->n_patches;
    out->ablate = calloc((size_t)L * H, 1);
    out->drop = calloc((size_t)N, 1);
    out->fill = calloc((size_t)N, 1);
    out->perm = malloc((size_t)N * sizeof *out->perm);
    if (!out->ablate || !out->drop || !out->fill || !out->perm) {
        snprintf(msg, n, "out of memory for the interventions");
        goto fail;
    }
    out->n_layers = L, out->n_heads = H, out->n_patches = N, out->grid_w = c->grid_w;
    for (int i = 0; i < s->n_ablate; i++) {
        int l = s->ablate[i][0], h = s->ablate[i][1];
        if (l > L || h > H) {
            snprintf(msg, n, "--ablate %d:%d: %s %d, the model has %d %s", l, h,
                     l > L ? "layer" : "head", l > L ? l : h, l > L ? L : H,
                     l > L ? "layers" : "heads");
            goto fail;
        }
        out->ablate[(l - 1) * H + (h - 1)] = 1;
    }
    if (set_patches(out->drop, s->drop, s->n_drop, c, "--drop-patches", msg, n) ||
        set_patches(out->fill, s->fill, s->n_fill, c, "--fill-patches", msg, n))
        goto fail;
    if (s->temp_layer > L) {
        snprintf(msg, n, "--temperature %d:%g: layer %d, the model has %d layers", s->temp_layer,
                 (double)s->temperature, s->temp_layer, L);
        goto fail;
    }
    vit_pos_permutation(out->perm, N, s->pos_seed);
    out->iv = (VitIntervention){.ablate = s->n_ablate ? out->ablate : NULL,
                                .drop = s->n_drop ? out->drop : NULL,
                                .fill = s->n_fill ? out->fill : NULL,
                                .pos_embed = s->pos,
                                .pos_perm = out->perm,
                                .temp_layer = s->temp_layer ? s->temp_layer - 1 : 0,
                                .temperature = s->temp_layer ? s->temperature : 0.0f};
    VitError err;
    if (vit_intervention_check(&out->iv, c, &err)) { /* every patch dropped */
        snprintf(msg, n, "--drop-patches: %s", err.msg);
        goto fail;
    }
    return 0;
fail:
    interv_free(out);
    return -1;
}

const VitIntervention *interv_for(const Interv *iv, const VitConfig *c) {
    if (!iv || !iv->ablate || iv->n_layers != c->n_layers || iv->n_heads != c->n_heads ||
        iv->n_patches != c->n_patches || iv->grid_w != c->grid_w)
        return NULL;
    return vit_intervention_active(&iv->iv, c) ? &iv->iv : NULL;
}

/* --- describing ----------------------------------------------------------------- */

void interv_describe(char *buf, size_t n, const IntervSpec *s, int brief) {
    size_t len = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (len < n) len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__);                     \
    } while (0)
    if (s->n_ablate && brief && s->n_ablate > 2) {
        ADD("%d heads ablated", s->n_ablate);
    } else if (s->n_ablate) {
        ADD("ablated");
        for (int i = 0; i < s->n_ablate && i < 6; i++)
            ADD(" L%d:H%d", s->ablate[i][0], s->ablate[i][1]);
        if (s->n_ablate > 6) ADD(" +%d", s->n_ablate - 6);
    }
    if (s->n_drop)
        ADD("%s%d patch%s dropped", len ? "; " : "", s->n_drop, s->n_drop > 1 ? "es" : "");
    if (s->n_fill)
        ADD("%s%d patch%s filled", len ? "; " : "", s->n_fill, s->n_fill > 1 ? "es" : "");
    if (s->pos == VIT_POS_SHUFFLE && brief)
        ADD("%spos-embed shuffled", len ? "; " : "");
    else if (s->pos == VIT_POS_SHUFFLE)
        ADD("%spos-embed shuffled (seed %llu)", len ? "; " : "", (unsigned long long)s->pos_seed);
    if (s->pos == VIT_POS_ZERO) ADD("%spos-embed zeroed", len ? "; " : "");
    if (s->temp_layer)
        ADD("%stau %g on layer %d", len ? "; " : "", (double)s->temperature, s->temp_layer);
#undef ADD
}
