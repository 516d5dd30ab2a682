/* record.c - the frame as a list of primitives: flat rectangles, discs, line segments,
 * texts (rendered once into textures, kept in a small LRU cache) and heat maps over the
 * crop. Nothing here draws: each primitive is hashed with the pixels it covers
 * (drawlist.h), and canvas.c replays only where the list differs from the last frame's. */
#include "render/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the frame as a list of primitives -------------------------------------
 *
 * The drawing functions below do not draw: they record primitives. ren_draw then
 * replays, into the canvas (an offscreen framebuffer that keeps the last frame),
 * only the rectangles where this frame's primitives differ from the last one's
 * (drawlist.h), and copies the canvas to the window. */

/* A new primitive of `kind`, zeroed (its bytes are hashed), or NULL out of memory. */
static RenPrim *prim_new(Ren *r, int kind) {
    if (r->n_prims == r->cap_prims) {
        int cap = r->cap_prims ? r->cap_prims * 2 : 512;
        RenPrim *p = realloc(r->prims, (size_t)cap * sizeof *p);
        if (!p) {
            r->dl.oom = 1; /* the frame is incomplete: draw what there is, all of it */
            return NULL;
        }
        r->prims = p, r->cap_prims = cap;
    }
    RenPrim *p = &r->prims[r->n_prims];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    return p;
}

/* The primitive filled in: into the list, with its hash and the pixels it touches. */
static void prim_add(Ren *r, RenPrim *p) {
    float x0, y0, x1, y1;
    if (p->kind == PR_SEG) { /* the quad reaches half the width past either end and side */
        float m = p->seg_w;
        x0 = fminf(p->seg[0], p->seg[2]) - m, x1 = fmaxf(p->seg[0], p->seg[2]) + m;
        y0 = fminf(p->seg[1], p->seg[3]) - m, y1 = fmaxf(p->seg[1], p->seg[3]) + m;
    } else {
        x0 = p->rect[0], y0 = p->rect[1], x1 = p->rect[0] + p->rect[2],
        y1 = p->rect[1] + p->rect[3];
    }
    /* one px of margin all round: anti-aliased edges and a scaled text's filtering may
     * touch the pixel beside the rectangle */
    DlBox box = {(int)floorf(x0) - 1, (int)floorf(y0) - 1, (int)ceilf(x1) + 1, (int)ceilf(y1) + 1};
    if (dl_add(&r->dl, dl_hash(DL_HASH_SEED, p, sizeof *p), box) >= 0) r->n_prims++;
}

/* A flat rectangle (x, y, w, h) of colour c (RGBA, alpha blended). */
void ren_fill(Ren *r, float x, float y, float w, float h, const float c[4]) {
    RenPrim *p = prim_new(r, PR_FILL);
    if (!p) return;
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

/* A disc of diameter d px centred at (cx, cy), anti-aliased by the ui shader. */
void ren_disc(Ren *r, float cx, float cy, float d, const float c[4]) {
    RenPrim *p = prim_new(r, PR_DISC);
    if (!p) return;
    p->rect[0] = cx - d / 2, p->rect[1] = cy - d / 2, p->rect[2] = d, p->rect[3] = d;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

/* A line segment from (x0, y0) to (x1, y1), w px wide, anti-aliased along its sides. */
void ren_segment(Ren *r, float x0, float y0, float x1, float y1, float w, const float c[4]) {
    RenPrim *p = prim_new(r, PR_SEG);
    if (!p) return;
    p->seg[0] = x0, p->seg[1] = y0, p->seg[2] = x1, p->seg[3] = y1, p->seg_w = w;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

/* A frame of width t around (x, y, w, h), outside it. */
void ren_frame_rect(Ren *r, float x, float y, float w, float h, float t, const float c[4]) {
    ren_fill(r, x - t, y - t, w + 2 * t, t, c);
    ren_fill(r, x - t, y + h, w + 2 * t, t, c);
    ren_fill(r, x - t, y, t, h, c);
    ren_fill(r, x + w, y, t, h, c);
}

/* The texture of str at size_px, rendered once and kept in a small LRU cache. A slot
 * this frame has drawn is not given to another text before the frame is replayed;
 * NULL when all are (the text is not drawn). */
const RenText *ren_text_get(Ren *r, const char *str, int size_px) {
    if (!r->has_text || !str || !*str) return NULL;
    RenText *slot = NULL; /* an empty slot, else the least recently used one */
    for (int i = 0; i < REN_TEXT_CACHE; i++) {
        RenText *c = &r->cache[i];
        if (c->tex && c->size_px == size_px && strcmp(c->str, str) == 0) {
            c->last_use = ++r->clock;
            c->frame = r->frame_no;
            return c;
        }
        if (c->tex && c->frame == r->frame_no) continue; /* this frame draws it */
        if (!c->tex ? !slot || slot->tex : !slot || (slot->tex && c->last_use < slot->last_use))
            slot = c;
    }
    if (!slot) return NULL;
    /* a miss: rendered by SDL_ttf and uploaded into the slot's texture, row length from
     * the surface's pitch (SDL may pad its rows) */
    SDL_Surface *s = text_render(&r->text, str, size_px);
    if (!s) return NULL;
    if (!slot->tex) slot->tex = ren_make_texture(GL_LINEAR, GL_LINEAR);
    glBindTexture(GL_TEXTURE_2D, slot->tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, s->pitch / 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, s->w, s->h, 0, GL_RGBA, GL_UNSIGNED_BYTE, s->pixels);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    slot->w = s->w;
    slot->h = s->h;
    slot->size_px = size_px;
    slot->last_use = ++r->clock;
    slot->frame = r->frame_no;
    snprintf(slot->str, sizeof slot->str, "%s", str);
    SDL_FreeSurface(s);
    return slot;
}

/* Draw a cached text texture with its top-left at (x, y), scaled by `scale`. */
void ren_text_draw(Ren *r, const RenText *t, float x, float y, float scale, const float c[4]) {
    if (!t) return;
    RenPrim *p = prim_new(r, PR_TEXT);
    if (!p) return;
    p->slot = (int)(t - r->cache);
    p->rect[0] = floorf(x), p->rect[1] = floorf(y);
    p->rect[2] = (float)t->w * scale, p->rect[3] = (float)t->h * scale;
    memcpy(p->color, c, sizeof p->color);
    p->content =
        dl_hash(dl_hash(DL_HASH_SEED, t->str, strlen(t->str)), &t->size_px, sizeof t->size_px);
    prim_add(r, p);
}

/* Draw `str` vertically centred in [y, y+h) from x, shrunk to at most max_w
 * wide (max_w <= 0: no limit); returns its drawn width. */
float ren_text_fit(Ren *r, const char *str, int size_px, float x, float y, float h, float max_w,
                   const float c[4]) {
    const RenText *t = ren_text_get(r, str, size_px);
    if (!t) return 0.0f;
    float s = max_w > 0 && (float)t->w > max_w ? max_w / (float)t->w : 1.0f;
    ren_text_draw(r, t, x, y + (h - (float)t->h * s) * 0.5f, s, c);
    return (float)t->w * s;
}

/* ren_text_fit without a width limit. */
float ren_text_line(Ren *r, const char *str, int size_px, float x, float y, float h,
                    const float c[4]) {
    return ren_text_fit(r, str, size_px, x, y, h, 0.0f, c);
}

/* The width str takes at size_px, px (0 without a font); renders it into the cache. */
float ren_text_width(Ren *r, const char *str, int size_px) {
    const RenText *t = ren_text_get(r, str, size_px);
    return t ? (float)t->w : 0.0f;
}

/* Eight dots on a circle, the brightest one going round. */
void ren_spinner(Ren *r, float cx, float cy, float radius, float turns) {
    for (int i = 0; i < 8; i++) {
        float a = (float)i / 8.0f * 6.2831853f;
        float age = fmodf(turns * 8.0f - (float)i + 16.0f, 8.0f) / 8.0f; /* 0: newest */
        float c[4] = {COL_ACCENT[0], COL_ACCENT[1], COL_ACCENT[2], 1.0f - 0.85f * age};
        float d = radius * 0.42f;
        ren_fill(r, cx + sinf(a) * radius - d / 2, cy - cosf(a) * radius - d / 2, d, d, c);
    }
}

/* One map over the crop at (x, y, w, h): the main view or a thumbnail. cell: atlas
 * index, -1: the single map texture. */
void ren_heat(Ren *r, const RenFrame *f, float x, float y, float w, float h, int cell,
              int main_view) {
    RenPrim *p = prim_new(r, PR_HEAT);
    if (!p) return;
    /* The shader reads the map and its mask at the map's size (u_grid_size: the patch
     * grid [gh, gw], or [Sh, Sw] for a pixel map), and draws the patch grid lines and
     * the query box on the patch grid (u_patches) over either. */
    int mw = cell < 0 ? r->map_w : r->atlas_w, mh = cell < 0 ? r->map_h : r->atlas_h;
    if (cell >= 0 && r->atlas_cols > 0)
        p->cell_xy[0] = (cell % r->atlas_cols) * mw, p->cell_xy[1] = (cell / r->atlas_cols) * mh;
    /* grid and box lines scale with a cell's size on screen, 1 to 4 px */
    float cell_px = w / (float)(mw > 0 ? mw : 1);
    float line = cell_px / 22.0f;
    p->line_px = line < 1.0f ? 1.0f : line > 4.0f ? 4.0f : line;
    int v = 0, rgb = cell < 0 && r->map_rgba && f->rgb,
        removed = cell < 0 && main_view && f->removed;
    if (f->bilinear) v |= REN_HV_BILINEAR;
    if (rgb) v |= REN_HV_RGB;
    if (removed) v |= REN_HV_REMOVED;
    if (f->grid && main_view) v |= REN_HV_GRID;
    if (f->mask && main_view) v |= REN_HV_MASK;
    if (f->query_col >= 0 && f->query_row >= 0) v |= REN_HV_QUERY;
    /* drawn smaller than the crop (a thumbnail): the mipmapped crop, or it aliases */
    if ((w < (float)r->image_w || h < (float)r->image_h) && !r->image_plain) v |= REN_HV_MINIFY;
    /* no heat (the overlay off, or the compare view's picture, which has its maps drawn in)
     * and nothing on it: the picture alone, one sample a pixel (llvmpipe's fill is the cost
     * of a frame that redraws it) */
    if (!(f->overlay && f->opacity > 0.0f) && !(v & ~(REN_HV_MINIFY | REN_HV_BILINEAR)))
        v = (v & REN_HV_MINIFY) | REN_HV_PLAIN;
    p->variant = v;
    p->cell = cell;
    p->exact = (v & REN_HV_PLAIN) && r->image_plain && x == floorf(x) && y == floorf(y) &&
               w == (float)r->image_w && h == (float)r->image_h;
    r->n_exact += p->exact;
    p->opacity = f->overlay ? f->opacity : 0.0f;
    p->grid_size[0] = (float)mw, p->grid_size[1] = (float)mh;
    p->patches[0] = (float)(r->grid_w > 0 ? r->grid_w : mw);
    p->patches[1] = (float)(r->grid_h > 0 ? r->grid_h : mh);
    p->query[0] = f->query_col, p->query[1] = f->query_row;
    if (removed) memcpy(p->fill, f->fill_rgb, sizeof p->fill);
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    /* the textures' generations stand for their pixels in the hash: a new upload changes
     * it, so the quad is redrawn; a mask or removed texture not read counts as 0 */
    unsigned long gens[5] = {r->gen_image, cell < 0 ? r->gen_map : r->gen_atlas, r->gen_lut,
                             v & REN_HV_MASK ? r->gen_mask : 0, removed ? r->gen_removed : 0};
    p->content = dl_hash(DL_HASH_SEED, gens, sizeof gens);
    prim_add(r, p);
}

/* The colour bar at (x, y, w, h): the colormap, its maximum at the top. */
void ren_ramp(Ren *r, float x, float y, float w, float h) {
    RenPrim *p = prim_new(r, PR_HEAT);
    if (!p) return;
    p->variant = REN_HV_RAMP;
    p->opacity = 1.0f;
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    p->content = r->gen_lut;
    prim_add(r, p);
}
