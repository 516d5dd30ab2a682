/* textures.c - what the GPU holds of the picture: the crop (and its mipmapped copy for the
 * thumbnails), the map (R32F, or RGBA for colours), the overview's atlas, the mask, the
 * colormap's LUT and a perturbation test's removed patches. Each upload bumps a
 * generation number that the frame's primitives hash, so a new map redraws what shows it. */
#include "render/internal.h"
#include "render/colormap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- creating them ------------------------------------------------------------ */

/* A new 2D texture, bound, with these filters; clamped at the edges so that bilinear
 * sampling of a map's border cells never wraps round to the opposite side. */
GLuint ren_make_texture(GLint min_filter, GLint mag_filter) {
    GLuint t = 0;
    glGenTextures(1, &t);
    glBindTexture(GL_TEXTURE_2D, t);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, min_filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, mag_filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    return t;
}

/* rgb [h, w, 3] as level 0 of the bound texture and its mipmaps down to 1x1, each texel the
 * rounded mean of the 2x2 below it (GL's floor(w / 2) sizes: an odd last row or column is
 * left out; a side of 1 stays 1). Made here rather than by glGenerateMipmap, which llvmpipe
 * draws with a blit shader it compiles on first use: on the launch's path, before the first
 * frame (docs/benchmarks.md, "Launch"). Out of memory: the levels made so far
 * (GL_TEXTURE_MAX_LEVEL says how many), the texture complete. Unpack alignment 1. */
static void upload_mipmapped(const uint8_t *rgb, int w, int h) {
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    uint8_t *a = malloc((size_t)((w + 1) / 2) * ((h + 1) / 2) * 3), *b = NULL;
    const uint8_t *src = rgb;
    int level = 0;
    if (!a) w = h = 1; /* level 0 alone */
    while (w > 1 || h > 1) {
        int dw = w > 1 ? w / 2 : 1, dh = h > 1 ? h / 2 : 1;
        uint8_t *dst = src == a ? b : a;
        if (!dst && !(dst = b = malloc((size_t)dw * dh * 3))) break;
        size_t dx = w > 1 ? 3 : 0, dy = h > 1 ? (size_t)w * 3 : 0; /* the 2x2's other texels */
        for (int y = 0; y < dh; y++)
            for (int x = 0; x < dw; x++) {
                const uint8_t *q =
                    src + ((size_t)(h > 1 ? 2 * y : 0) * w + (w > 1 ? 2 * x : 0)) * 3;
                uint8_t *o = dst + ((size_t)y * dw + x) * 3;
                for (int c = 0; c < 3; c++)
                    o[c] = (uint8_t)((q[c] + q[c + dx] + q[c + dy] + q[c + dx + dy] + 2u) / 4u);
            }
        glTexImage2D(GL_TEXTURE_2D, ++level, GL_RGB8, dw, dh, 0, GL_RGB, GL_UNSIGNED_BYTE, dst);
        src = dst, w = dw, h = dh;
    }
    free(a), free(b);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAX_LEVEL, level);
}

int ren_make_textures(Ren *r, char *msg, size_t msg_bytes) {
    glGenVertexArrays(1, &r->vao); /* core profile draws need a bound VAO, even an empty one */
    /* the crop: mipmapped, so that the overview's thumbnails do not alias */
    r->tex_image_mip = ren_make_texture(GL_LINEAR_MIPMAP_LINEAR, GL_LINEAR);
    r->tex_image = ren_make_texture(GL_LINEAR, GL_LINEAR); /* the same, no mipmaps: cheaper */
    r->tex_map = ren_make_texture(GL_NEAREST, GL_NEAREST); /* read with texelFetch */
    r->tex_atlas = ren_make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_mask = ren_make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_lut = ren_make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_removed = ren_make_texture(GL_NEAREST, GL_NEAREST);
    r->picture_shown = -1;                 /* the picture slots are made when first used */
    glGenFramebuffers(1, &r->picture_fbo); /* reads a picture for blit_picture (canvas.c) */
    glGetIntegerv(GL_MAX_TEXTURE_SIZE, &r->max_tex_px);
    ren_set_colormap(r, 0);
    /* placeholders of the formats the real ones will have (and sizes not a power of two,
     * as most are), so that the shaders compiled for the first frame fit the map's */
    static const uint8_t grey[3 * 3 * 3] = {0};
    static const float zero[3 * 3] = {0};
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_image);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, 3, 3, 0, GL_RGB, GL_UNSIGNED_BYTE, grey);
    glBindTexture(GL_TEXTURE_2D, r->tex_image_mip);
    upload_mipmapped(grey, 3, 3);
    glBindTexture(GL_TEXTURE_2D, r->tex_map);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, 3, 3, 0, GL_RED, GL_FLOAT, zero);
    uint8_t none = 0;
    glBindTexture(GL_TEXTURE_2D, r->tex_mask);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, 1, 1, 0, GL_RED, GL_UNSIGNED_BYTE, &none);
    glBindTexture(GL_TEXTURE_2D, r->tex_removed);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, 1, 1, 0, GL_RED, GL_UNSIGNED_BYTE, &none);
    GLenum err = glGetError();
    if (err != GL_NO_ERROR) {
        snprintf(msg, msg_bytes, "OpenGL: cannot create textures (error 0x%x)", err);
        return -1;
    }
    return 0;
}

/* --- uploads: each bumps its generation, which the primitives that draw it hash ---- */

/* The crop rgb [h, w, 3], 8 bit, into both crop textures. Rows of 3 * w bytes are not
 * 4-byte aligned in general: hence the unpack alignment of 1 (also for R8 below). */
void ren_upload_image(Ren *r, const uint8_t *rgb, int w, int h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_image);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    glBindTexture(GL_TEXTURE_2D, r->tex_image_mip);
    upload_mipmapped(rgb, w, h);
    r->gen_image = ++r->gen;
    r->image_w = w;
    r->image_h = h;
    r->image_plain = 0;
    r->picture_shown = -1;
}

void ren_picture_upload(Ren *r, int slot, const uint8_t *rgb, int w, int h) {
    if (slot < 0 || slot >= REN_PICTURES) return;
    if (!r->tex_picture[slot]) r->tex_picture[slot] = ren_make_texture(GL_LINEAR, GL_LINEAR);
    glBindTexture(GL_TEXTURE_2D, r->tex_picture[slot]);
    /* as BGRA, the canvas' layout: shown texel for pixel, it is copied (canvas.c's
     * blit_picture); RGB if there is no memory for the BGRA copy */
    uint8_t *bgra = malloc((size_t)w * h * 4);
    if (bgra) {
        for (size_t i = 0; i < (size_t)w * h; i++) {
            bgra[4 * i] = rgb[3 * i + 2], bgra[4 * i + 1] = rgb[3 * i + 1];
            bgra[4 * i + 2] = rgb[3 * i], bgra[4 * i + 3] = 255;
        }
        glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, w, h, 0, GL_BGRA, GL_UNSIGNED_BYTE, bgra);
        free(bgra);
    } else {
        glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
        glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    }
    if (slot == r->picture_shown) r->gen_image = ++r->gen; /* the one on screen changed */
}

void ren_picture_show(Ren *r, int slot, int w, int h) {
    if (slot < 0 || slot >= REN_PICTURES || !r->tex_picture[slot]) return;
    r->picture_shown = slot;
    r->gen_image = ++r->gen;
    r->image_w = w;
    r->image_h = h;
    r->image_plain = 1;
}

/* map [map_h, map_w] normalised floats as R32F, or (rgba) colours [map_h, map_w, 4] in
 * [0, 1] (the feature PCA) as RGBA32F, into the one map texture; grid_w, grid_h the patch
 * grid, kept for the hit tests (ren_patch_at), which find a patch even under a pixel map. */
void ren_upload_map(Ren *r, const float *map, int rgba, int map_w, int map_h, int grid_w,
                    int grid_h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glBindTexture(GL_TEXTURE_2D, r->tex_map);
    glTexImage2D(GL_TEXTURE_2D, 0, rgba ? GL_RGBA32F : GL_R32F, map_w, map_h, 0,
                 rgba ? GL_RGBA : GL_RED, GL_FLOAT, map);
    r->gen_map = ++r->gen;
    r->map_w = map_w, r->map_h = map_h;
    r->grid_w = grid_w, r->grid_h = grid_h;
    r->map_rgba = rgba;
}

int ren_upload_atlas(Ren *r, const float *maps, int n, int map_w, int map_h) {
    /* the n maps [map_h, map_w] tiled in an about square grid, map k at (k % cols, k / cols);
     * -1, nothing uploaded, when it would exceed GL_MAX_TEXTURE_SIZE */
    int cols = (int)ceil(sqrt((double)n));
    int rows = (n + cols - 1) / cols;
    if (n < 1 || (long)cols * map_w > r->max_tex_px || (long)rows * map_h > r->max_tex_px)
        return -1;
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glBindTexture(GL_TEXTURE_2D, r->tex_atlas);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, cols * map_w, rows * map_h, 0, GL_RED, GL_FLOAT, NULL);
    for (int k = 0; k < n; k++)
        glTexSubImage2D(GL_TEXTURE_2D, 0, (k % cols) * map_w, (k / cols) * map_h, map_w, map_h,
                        GL_RED, GL_FLOAT, maps + (size_t)k * map_w * map_h);
    r->gen_atlas = ++r->gen;
    r->atlas_maps = n;
    r->atlas_cols = cols;
    r->atlas_w = map_w, r->atlas_h = map_h;
    return 0;
}

/* mask [map_h, map_w], R8, 1 inside: the region whose outline is drawn (M's mask, or
 * the tokens a kind outlines). */
void ren_upload_mask(Ren *r, const uint8_t *mask, int map_w, int map_h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_mask);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, map_w, map_h, 0, GL_RED, GL_UNSIGNED_BYTE, mask);
    r->gen_mask = ++r->gen;
}

void ren_upload_removed(Ren *r, const uint8_t *removed, int grid_w, int grid_h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_removed);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R8, grid_w, grid_h, 0, GL_RED, GL_UNSIGNED_BYTE, removed);
    r->gen_removed = ++r->gen;
}

/* The colormap's LUT, COLORMAP_SIZE RGB entries as a 1-row texture; an unknown index
 * falls back to the first (viridis). */
void ren_set_colormap(Ren *r, int colormap) {
    if (colormap < 0 || colormap >= COLORMAP_COUNT) colormap = 0;
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_lut);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, COLORMAP_SIZE, 1, 0, GL_RGB, GL_UNSIGNED_BYTE,
                 colormap_luts[colormap]);
    r->gen_lut = ++r->gen;
}
