/* export.c - headless --top and --export. */
#include "export.h"
#include "colormap.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- top-K ----------------------------------------------------------------- */

int export_top(FILE *out, const Model *m, const Scene *sc, int k) {
    int C = m->vit.cfg.n_classes;
    if (C == 0) {
        fprintf(stderr, "vitlens: %s: model has no classification head, no predictions\n",
                m->vit.path);
        return 1;
    }
    if (k < 1 || k > C) {
        fprintf(stderr, "vitlens: --top %d: expected 1 to %d (the model's classes)\n", k, C);
        return 1;
    }
    int *idx = malloc((size_t)k * sizeof *idx);
    if (!idx) {
        fprintf(stderr, "vitlens: out of memory\n");
        return 1;
    }
    vit_top_k(idx, sc->run.probs, C, k);
    for (int i = 0; i < k; i++) {
        const char *label = model_label(m, idx[i]);
        fprintf(out, "%d %.4f %d%s%s\n", i + 1, sc->run.probs[idx[i]], idx[i], label ? " " : "",
                label ? label : "");
    }
    free(idx);
    return 0;
}

/* --- PNG export ------------------------------------------------------------ */

void export_blend(uint8_t *out, const uint8_t *crop, const float *map, const VitConfig *cfg,
                  int scale, float opacity) {
    int Sh = cfg->image_h, Sw = cfg->image_w, out_w = Sw * scale;
    for (int y = 0; y < Sh * scale; y++) {
        int sy = y / scale, gy = sy * cfg->grid_h / Sh;
        for (int x = 0; x < out_w; x++) {
            int sx = x / scale, gx = sx * cfg->grid_w / Sw;
            const uint8_t *src = crop + ((size_t)sy * Sw + sx) * 3;
            const uint8_t *lut = colormap_lut[colormap_index(map[gy * cfg->grid_w + gx])];
            uint8_t *dst = out + ((size_t)y * out_w + x) * 3;
            for (int ch = 0; ch < 3; ch++) {
                float v = (float)src[ch] + opacity * ((float)lut[ch] - (float)src[ch]);
                dst[ch] = (uint8_t)lrintf(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);
            }
        }
    }
}

/* Compute, normalise, blend and write the map of view v to dir/name. */
static int write_map(const char *dir, const char *name, const Scene *sc, const View *v, float *map,
                     uint8_t *pixels, int scale, float opacity) {
    const VitConfig *c = &sc->run.cfg;
    VitError err;
    if (view_map(map, &sc->run, v, &err)) {
        fprintf(stderr, "vitlens: %s: %s\n", name, err.msg);
        return 1;
    }
    map_normalize(map, map, c->n_patches, NULL, NULL);
    export_blend(pixels, sc->crop_rgb, map, c, scale, opacity);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int out_w = c->image_w * scale, out_h = c->image_h * scale;
    if (!stbi_write_png(path, out_w, out_h, 3, pixels, out_w * 3)) {
        fprintf(stderr, "vitlens: %s: cannot write PNG: %s\n", path,
                errno ? strerror(errno) : "write failed");
        return 1;
    }
    return 0;
}

int export_maps(FILE *out, const char *dir, const Scene *sc, float opacity, float discard) {
    const VitConfig *c = &sc->run.cfg;
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0777) != 0) {
            fprintf(stderr, "vitlens: %s: cannot create directory: %s\n", dir, strerror(errno));
            return 1;
        }
    } else if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "vitlens: %s: exists and is not a directory\n", dir);
        return 1;
    }
    int S = c->image_h > c->image_w ? c->image_h : c->image_w; /* the longer side */
    int scale = (EXPORT_TARGET_PX + S / 2) / S;
    if (scale < 1) scale = 1;
    int out_w = c->image_w * scale, out_h = c->image_h * scale;
    float *map = malloc((size_t)c->n_patches * sizeof *map);
    uint8_t *pixels = malloc((size_t)out_w * out_h * 3);
    int rc = 0, n_files = 0;
    if (!map || !pixels) {
        fprintf(stderr, "vitlens: out of memory for a %dx%d PNG\n", out_w, out_h);
        rc = 1;
        goto done;
    }
    const int L = c->n_layers, H = c->n_heads;
    char name[64];
    for (int l = 0; l < L && !rc; l++) {
        for (int h = 0; h < H + VIEW_N_FUSIONS && !rc; h++) {
            View v = {.layer = l, .head = h};
            int f = view_fusion(&v, H);
            if (f < 0)
                snprintf(name, sizeof name, "L%02d_H%02d.png", l + 1, h + 1);
            else
                snprintf(name, sizeof name, "L%02d_%s.png", l + 1, vit_fusion_name((VitFusion)f));
            rc = write_map(dir, name, sc, &v, map, pixels, scale, opacity);
            n_files += !rc;
        }
        if (rc) break;
        View r = {.layer = l, .head = H + VIT_FUSE_MEAN, .rollout = 1, .discard_ratio = discard};
        snprintf(name, sizeof name, "L%02d_rollout.png", l + 1);
        rc = write_map(dir, name, sc, &r, map, pixels, scale, opacity);
        n_files += !rc;
    }
    if (!rc)
        fprintf(out, "wrote %d PNGs (%dx%d px, %s, opacity %.2f) of %s to %s\n", n_files, out_w,
                out_h, colormap_name, opacity, sc->name, dir);
done:
    free(map);
    free(pixels);
    return rc;
}
