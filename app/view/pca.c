/* pca.c - the feature PCA of a Scene (DINOv2 Fig. 1): one photo's, a slideshow's joint one
 * (JointFeatures) and a video's, whose basis is held over its frames (PcaHold, issue 37).
 * The engine's vit_pca_fit / vit_pca_project do the arithmetic; this file picks the rows
 * (a layer's patch features, the grid's border) and the basis. No SDL or GL. */
#include "view/scene.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* b [gh, gw]: 1 for the patches on the grid's edge, 0 inside. vit_feature_pca takes the
 * side of its first component that holds most of the border as the background. */
static void border_mask(uint8_t *b, int gh, int gw) {
    for (int r = 0; r < gh; r++)
        for (int q = 0; q < gw; q++) b[r * gw + q] = r == 0 || q == 0 || r == gh - 1 || q == gw - 1;
}

void pca_hold_free(PcaHold *h) {
    for (int l = 0; h->basis && l < h->n_layers; l++) vit_pca_basis_free(&h->basis[l]);
    free(h->basis), free(h->frame), free(h->fitted_at);
    h->basis = NULL, h->frame = NULL, h->fitted_at = NULL, h->vit = NULL, h->n_layers = 0;
}

/* asked is written by the owner's thread and read by the one computing the map: GCC's and
 * Clang's __atomic builtins (as VitControl's flag, forward.c). */
void pca_hold_refit(PcaHold *h) {
    __atomic_fetch_add(&h->asked, 1, __ATOMIC_RELAXED);
}

long pca_hold_frame(const PcaHold *h, int layer) {
    if (!h || !h->basis || layer < 0 || layer >= h->n_layers || !h->basis[layer].d ||
        h->fitted_at[layer] != __atomic_load_n(&h->asked, __ATOMIC_RELAXED))
        return -1;
    return h->frame[layer];
}

/* *b: the basis of `layer` that h holds for sc's model, fitted first on this frame's rows
 * x [m, D] (border [m]) when it has none that is current. */
static VitStatus held_basis(const VitPcaBasis **b, PcaHold *h, const Scene *sc, int layer,
                            const float *x, int m, int D, const uint8_t *border, VitError *err) {
    int L = sc->run.cfg.n_layers;
    if (h->vit != sc->vit || h->n_layers != L || (h->basis && h->basis[0].d && h->basis[0].d != D))
        pca_hold_free(h);
    if (!h->basis) {
        h->basis = calloc((size_t)L, sizeof *h->basis);
        h->frame = calloc((size_t)L, sizeof *h->frame);
        h->fitted_at = calloc((size_t)L, sizeof *h->fitted_at);
        if (!h->basis || !h->frame || !h->fitted_at) {
            pca_hold_free(h);
            return vit_set_error(err, VIT_ERR_NOMEM, "out of memory for the feature PCA's basis");
        }
        h->vit = sc->vit, h->n_layers = L;
    }
    int asked = __atomic_load_n(
        &h->asked,
        __ATOMIC_RELAXED); /* as read now: a refit asked meanwhile refits the next frame */
    if (!h->basis[layer].d || h->fitted_at[layer] != asked) {
        VitStatus rc = vit_pca_fit(&h->basis[layer], x, m, D, 1, border, err);
        if (rc) return rc;
        h->frame[layer] = sc->frame, h->fitted_at[layer] = asked;
    }
    *b = &h->basis[layer];
    return VIT_OK;
}

VitStatus scene_pca(float *out, int *fg_count, const Scene *sc, int layer, const JointFeatures *jf,
                    VitError *err) {
    const VitConfig *c = &sc->run.cfg;
    int N = c->n_patches, D = c->dim, T = c->n_tokens, L = c->n_layers;
    int n_img = 1, me = 0;
    /* jointly: this photo's rows are block `me` of the stacked [n_ok * N, D] features */
    if (jf) {
        me = -1;
        for (int i = 0; i < jf->n_images && me < 0; i++)
            if (jf->image_of[i] >= 0 && !strcmp(jf->paths[i], sc->path)) me = jf->image_of[i];
        if (me < 0) {
            if (err) {
                err->code = VIT_ERR_ARG;
                snprintf(err->msg, sizeof err->msg, "features PCA: %s is not in the slideshow",
                         sc->name);
            }
            return VIT_ERR_ARG;
        }
        n_img = jf->n_ok;
    }
    size_t M = (size_t)n_img * N;
    float *x = malloc((jf ? M : (size_t)T) * D * sizeof *x), *rgb = malloc(M * 3 * sizeof *rgb);
    uint8_t *fg = malloc(M), *border = malloc(M);
    VitStatus rc = VIT_OK;
    if (!x || !rgb || !fg || !border) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory for the feature PCA");
        goto done;
    }
    const float *rows = x;
    if (jf) { /* layer `layer` of every photo, stacked */
        for (int i = 0; i < n_img; i++)
            memcpy(x + (size_t)i * N * D, jf->feat + (((size_t)i * L + layer) * N) * D,
                   (size_t)N * D * sizeof *x);
    } else {
        if ((rc = vit_features(x, &sc->run, sc->vit, layer, err))) goto done;
        rows = x + (size_t)c->n_prefix * D;
    }
    for (int i = 0; i < n_img; i++) border_mask(border + (size_t)i * N, c->grid_h, c->grid_w);
    /* a patch --drop-patches took out of the sequence: its token means nothing (vit.h,
     * vit_intervention_mask), so this photo's PCA is fitted without its row and it is not
     * drawn (alpha 0, the hatched crop shows); the rows kept are moved up in place */
    const VitIntervention *iv = sc->run.intervention;
    const uint8_t *drop = iv && iv->drop && !jf ? iv->drop : NULL;
    int kept = (int)M;
    if (drop) {
        float *xs = x + (size_t)c->n_prefix * D;
        kept = 0;
        for (int p = 0; p < N; p++) {
            if (drop[p]) continue;
            memmove(xs + (size_t)kept * D, xs + (size_t)p * D, (size_t)D * sizeof *xs);
            border[kept++] = border[p];
        }
        if (kept < 1) { /* every patch dropped: nothing to fit */
            for (int p = 0; p < N && out; p++) memset(out + (size_t)p * 4, 0, 4 * sizeof *out);
            if (fg_count) *fg_count = 0;
            goto done;
        }
    }
    if (sc->pca_hold && !jf) { /* a video's frame: the basis held over its frames */
        const VitPcaBasis *b = NULL;
        if ((rc = held_basis(&b, sc->pca_hold, sc, layer, rows, kept, D, border, err)) ||
            (rc = vit_pca_project(rgb, fg, b, rows, kept, D, 1, border, err)))
            goto done;
    } else if ((rc = vit_feature_pca(rgb, fg, rows, kept, D, n_img, border, err)))
        goto done;
    /* only this photo's N rows go out, as RGBA [N, 4] */
    int n_fg = 0;
    for (int p = 0, k = 0; p < N; p++) {
        if (drop && drop[p]) {
            for (int ch = 0; ch < 4 && out; ch++) out[(size_t)p * 4 + ch] = 0.0f;
            continue;
        }
        size_t m = drop ? (size_t)k++ : (size_t)me * N + p;
        for (int ch = 0; ch < 3 && out; ch++) out[(size_t)p * 4 + ch] = rgb[m * 3 + ch];
        if (out) out[(size_t)p * 4 + 3] = fg[m] ? 1.0f : 0.0f;
        n_fg += fg[m] != 0;
    }
    if (fg_count) *fg_count = n_fg;
done:
    free(x), free(rgb), free(fg), free(border);
    return rc;
}

VitStatus scene_joint_features(JointFeatures *jf, const Vit *vit, VitError *err) {
    const VitConfig *c = &vit->cfg;
    size_t per = (size_t)c->n_layers * c->n_patches * c->dim * sizeof(float);
    free(jf->feat), free(jf->image_of);
    jf->feat = NULL, jf->image_of = NULL, jf->vit = NULL, jf->n_ok = 0, jf->skipped[0] = '\0';
    if (jf->n_images < 1) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "features PCA: no photos to run over");
        }
        return VIT_ERR_ARG;
    }
    /* refused before allocating: the message says how many photos would fit */
    if (per * (size_t)jf->n_images > JOINT_MAX_BYTES) {
        if (err) {
            err->code = VIT_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg,
                     "features PCA over %d photos would keep %zu MB of features (at most %llu MB: "
                     "%zu photos of this model)",
                     jf->n_images, per * (size_t)jf->n_images >> 20, JOINT_MAX_BYTES >> 20,
                     (size_t)(JOINT_MAX_BYTES / per));
        }
        return VIT_ERR_NOMEM;
    }
    jf->feat = malloc(per * (size_t)jf->n_images);
    jf->image_of = malloc((size_t)jf->n_images * sizeof *jf->image_of);
    float *tok = malloc((size_t)c->n_tokens * c->dim * sizeof *tok);
    VitRun run = {0};
    VitRunOptions ro = {.all_tokens = 1};
    VitStatus rc = VIT_OK;
    if (!jf->feat || !jf->image_of || !tok) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory for the features of the slideshow");
        goto done;
    }
    if ((rc = vit_run_init_with(&run, vit, &ro, err))) goto done;
    /* one forward pass per photo, keeping each layer's patch rows [L, N, D]; a photo that
     * does not load is skipped (image_of -1) and the first such message kept */
    for (int i = 0; i < jf->n_images; i++) {
        VitImage img = {0};
        VitError e;
        jf->image_of[i] = -1;
        if (vit_image_load(&img, jf->paths[i], &e) ||
            vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, &img, &e)) {
            vit_image_free(&img);
            if (!jf->skipped[0]) snprintf(jf->skipped, sizeof jf->skipped, "%.590s", e.msg);
            continue;
        }
        vit_image_free(&img);
        vit_forward(&run, vit);
        float *dst = jf->feat + (size_t)jf->n_ok * c->n_layers * c->n_patches * c->dim;
        for (int l = 0; l < c->n_layers; l++) {
            if ((rc = vit_features(tok, &run, vit, l, err))) goto done;
            memcpy(dst + (size_t)l * c->n_patches * c->dim, tok + (size_t)c->n_prefix * c->dim,
                   (size_t)c->n_patches * c->dim * sizeof *tok);
        }
        jf->image_of[i] = jf->n_ok++;
    }
    if (!jf->n_ok) {
        if (err) {
            err->code = VIT_ERR_IMAGE;
            snprintf(err->msg, sizeof err->msg,
                     "features PCA: no photo of the slideshow loads: %.400s", jf->skipped);
        }
        rc = VIT_ERR_IMAGE;
        goto done;
    }
    jf->vit = vit;
done:
    vit_run_free(&run);
    free(tok);
    if (rc) {
        free(jf->feat), free(jf->image_of);
        jf->feat = NULL, jf->image_of = NULL, jf->n_ok = 0;
    }
    return rc;
}

void joint_features_free(JointFeatures *jf) {
    free(jf->feat), free(jf->image_of);
    jf->feat = NULL, jf->image_of = NULL, jf->vit = NULL, jf->n_ok = 0;
}
