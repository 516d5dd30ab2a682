/* render.c - the narrow renderer's entry points: ren_init and ren_free, the frame's layout
 * (ren_draw: the crop and map, legend, bars, side panels, help, status bar, recorded then
 * replayed by canvas.c), hit tests against the last frame and the read-back for S. All
 * positions are framebuffer px, origin top-left. */
#include "render/internal.h"
#include "render/bar.h"

#if defined(SDL_VIDEO_DRIVER_X11) && defined(VITLENS_X11)
#include <epoxy/glx.h> /* GLX_MESA_copy_sub_buffer: show only what changed */
#define REN_GLX 1
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- init and free -------------------------------------------------------------- */

int ren_init(Ren *r, SDL_Window *win, char *msg, size_t msg_bytes, char *warn, size_t warn_bytes) {
    memset(r, 0, sizeof *r);
    r->win = win;
    warn[0] = '\0';
    if (ren_load_shaders(r, msg, msg_bytes)) goto fail;
    const char *e = getenv("VITLENS_PRESENT");
#ifdef REN_GLX
    /* On X11 with GLX_MESA_copy_sub_buffer (Mesa: llvmpipe, the DRI drivers), the window's
     * back buffer is the canvas: never swapped, it keeps the last frame, and only the
     * rectangles redrawn are copied to the window. Elsewhere, an offscreen canvas, copied
     * whole to the back buffer, and a swap. VITLENS_PRESENT=swap: the latter anyway. */
    const char *driver = SDL_GetCurrentVideoDriver();
    if (!(e && strcmp(e, "swap") == 0) && driver && strcmp(driver, "x11") == 0) {
        Display *dpy = glXGetCurrentDisplay();
        GLXDrawable win_id = glXGetCurrentDrawable();
        if (dpy && win_id &&
            epoxy_has_glx_extension(dpy, DefaultScreen(dpy), "GLX_MESA_copy_sub_buffer")) {
            r->x_display = dpy;
            r->x_drawable = (unsigned long)win_id;
        }
    }
#endif
    e = getenv("VITLENS_FULL_REDRAW");
    r->full_redraw = e && *e && strcmp(e, "0") != 0;
    e = getenv("VITLENS_CHECK_REDRAW");
    r->check_redraw = e && *e && strcmp(e, "0") != 0;
    r->last_mismatch = -1;

    if (ren_make_textures(r, msg, msg_bytes)) goto fail;
    /* no font is a warning, not a failure: the maps still draw, without their labels */
    r->has_text = text_init(&r->text, warn, warn_bytes) == 0;
    SDL_GL_GetDrawableSize(win, &r->shown_w, &r->shown_h); /* Mesa sized the back buffer so */
    r->warm = 1; /* the first ren_flush also builds the first map's shaders (canvas.c) */
    return 0;
fail:
    ren_free(r);
    return -1;
}

void ren_free(Ren *r) {
    if (!r) return;
    for (int i = 0; i < REN_TEXT_CACHE; i++)
        if (r->cache[i].tex) glDeleteTextures(1, &r->cache[i].tex);
    for (int i = 0; i < REN_PICTURES; i++)
        if (r->tex_picture[i]) glDeleteTextures(1, &r->tex_picture[i]);
    GLuint tex[7] = {r->tex_image, r->tex_image_mip, r->tex_map,    r->tex_lut,
                     r->tex_atlas, r->tex_mask,      r->tex_removed};
    for (int i = 0; i < 7; i++)
        if (tex[i]) glDeleteTextures(1, &tex[i]);
    ren_free_canvas(&r->canvas_fbo, &r->canvas_tex, &r->canvas_w, &r->canvas_h);
    ren_free_canvas(&r->check_fbo, &r->check_tex, &r->check_w, &r->check_h);
    if (r->vao) glDeleteVertexArrays(1, &r->vao);
    if (r->picture_fbo) glDeleteFramebuffers(1, &r->picture_fbo);
    for (int i = 0; i < (1 << REN_HV_BITS); i++)
        if (r->heat[i].prog) glDeleteProgram(r->heat[i].prog);
    if (r->ui.prog) glDeleteProgram(r->ui.prog);
    if (r->has_text) text_free(&r->text);
    free(r->vert_src), free(r->heat_src), free(r->prims);
    dl_free(&r->dl);
    memset(r, 0, sizeof *r);
}

/* --- the frame ------------------------------------------------------------------ */

/* The frame's layout, framebuffer px: the status bar (and the error line) at the bottom,
 * never over the image; above it the controls' strip (when there are controls), then the crop at
 * its aspect ratio (or the overview), the legend to its right, the prefix tokens' bars to its left
 * (single view, models with register or distillation tokens) and the side panels (predictions,
 * attention distance) at the right when the window is wide enough. Sizes follow the height, for
 * projectors. */
static void layout(RenLayout *l, const Ren *r, const RenFrame *f) {
    const float W = (float)r->fb_w, H = (float)r->fb_h;
    l->W = W, l->H = H;
    /* everything scales from the status bar: 5.5% of the height, 22 px at least; the font
     * is half of it */
    l->bar_h = roundf(H * 0.055f);
    if (l->bar_h < 22) l->bar_h = 22;
    l->font_px = (int)(l->bar_h * 0.5f);
    l->err_h = f->error && *f->error ? l->bar_h : 0.0f;
    l->margin = roundf(H * 0.02f);
    l->legend_w = roundf((float)l->font_px * 4.0f), l->legend_gap = roundf(l->margin * 1.2f);
    /* "patches" and "100%" side by side at 0.8 of the font, with a gap (5 em ran them together) */
    l->prefix_w = roundf((float)l->font_px * 6.0f);
    float area_w = W - 2 * l->margin;
    /* the controls' strip between the main area and the status bar, as high as the status
     * bar (a large target), half a margin above it: never over the map */
    float ctrl_gap = f->n_controls > 0 ? roundf(l->margin * 0.5f) : 0.0f;
    l->ctrl_h = f->n_controls > 0 ? l->bar_h : 0.0f;
    l->ctrl_y = H - l->bar_h - l->err_h - ctrl_gap - l->ctrl_h;
    l->area_h = H - l->bar_h - l->err_h - 2 * l->margin - l->ctrl_h - ctrl_gap;
    int has_panel = f->n_preds > 0 || f->pred_title || f->distance || f->n_list > 0 || f->plot;
    l->panel_w = has_panel ? roundf((float)l->font_px * 13.0f) : 0.0f;
    if (has_panel && area_w - l->panel_w - l->legend_gap < l->area_h * 0.55f)
        l->panel_w = 0; /* no room */
    if (l->panel_w > 0) area_w -= l->panel_w + l->legend_gap;
    l->single = f->mode == VIEW_SINGLE || !r->atlas_maps;
    /* the crop keeps its aspect ratio (an overview fills the area); the legend
     * and the bars each take room only while the crop keeps at least 80% / 70%
     * of the width it would have. The legend's room is kept when the overlay is
     * off, so the crop stays put. */
    float aspect = r->image_h ? (float)r->image_w / (float)r->image_h : 1.0f; /* w / h */
    float max_w = l->single ? l->area_h * aspect : area_w, full = fminf(area_w, max_w);
    l->legend = r->image_w && fminf(area_w - l->legend_w - l->legend_gap, max_w) >= 0.8f * full;
    if (l->legend) area_w -= l->legend_w + l->legend_gap;
    l->prefix = l->single && r->image_w && f->n_prefix > 1 && f->prefix_share &&
                fminf(area_w - l->prefix_w - l->legend_gap, max_w) >= 0.7f * full;
    if (l->prefix) area_w -= l->prefix_w + l->legend_gap;
    float iw = fminf(area_w, max_w), ih = l->single ? iw / aspect : l->area_h;
    iw = floorf(iw), ih = floorf(ih);
    if (iw < 1) iw = 1;
    if (ih < 1) ih = 1;
    l->left_w = l->prefix ? l->prefix_w + l->legend_gap : 0.0f;
    float group_w = l->left_w + iw + (l->legend ? l->legend_gap + l->legend_w : 0.0f) +
                    (l->panel_w > 0 ? l->legend_gap + l->panel_w : 0.0f);
    /* bars, crop, legend and panels centred together as one group, on whole px: the
     * crop's edges fall on pixel boundaries (canvas.c's opaque_box counts on it) */
    l->ix = floorf((W - group_w) / 2) + l->left_w;
    l->iy = floorf(l->margin + (l->area_h - ih) / 2);
    l->iw = iw, l->ih = ih;
}

/* The main area: the map over the crop (or the overview's cells), its legend and the
 * prefix tokens' bars; before the first photo, the placeholder. */
static void draw_main(Ren *r, const RenFrame *f, const RenLayout *l) {
    if (r->image_w && r->grid_w) {
        if (l->single) {
            ren_heat(r, f, l->ix, l->iy, l->iw, l->ih, -1, 1);
            float sx = l->iw / (float)r->image_w, sy = l->ih / (float)r->image_h, t = 3.0f;
            for (int i = 0; i < f->n_boxes; i++) { /* the picture's px to the window's */
                const float *b = f->boxes[i];
                ren_frame_rect(r, l->ix + b[0] * sx + t, l->iy + b[1] * sy + t, b[2] * sx - 2 * t,
                               b[3] * sy - 2 * t, t, f->box_rgba[i]);
            }
        } else
            ren_draw_cells(r, f, l->ix, l->iy, l->iw, l->ih, l->font_px);
        if (l->legend && f->overlay && !f->rgb)
            ren_draw_legend(r, f, l->ix + l->iw + l->legend_gap, l->iy, l->ih, l->font_px);
        if (l->prefix)
            ren_draw_prefix(r, f, l->ix - l->left_w, l->iy, l->prefix_w, l->ih, l->font_px);
    } else {
        ren_fill(r, l->ix, l->iy, l->iw, l->ih, COL_EMPTY);
        if (f->placeholder) {
            const RenText *t = ren_text_get(r, f->placeholder, l->font_px);
            if (t)
                ren_text_draw(r, t, l->ix + (l->iw - t->w) / 2, l->iy + (l->ih - t->h) / 2, 1.0f,
                              COL_DIM);
        }
    }
}

void ren_draw(Ren *r, const RenFrame *f) {
    /* recorded in drawing order, back to front: the main area, the panels, then what
     * lies over them (tooltip, help), the status bar last; ren_flush replays what changed */
    SDL_GL_GetDrawableSize(r->win, &r->fb_w, &r->fb_h);
    r->frame_no++;
    r->n_prims = 0;
    r->n_exact = 0;
    dl_begin(&r->dl, r->fb_w, r->fb_h);
    RenLayout l;
    layout(&l, r, f);
    r->image_x = (int)l.ix, r->image_y = (int)l.iy;
    /* the crop's place for ren_patch_at; 0 wide in an overview, where cells are hit instead */
    r->image_w_px = l.single ? (int)l.iw : 0, r->image_h_px = l.single ? (int)l.ih : 0;
    r->n_cells = 0;
    draw_main(r, f, &l);
    ren_draw_side(r, f, &l);
    ren_draw_controls(r, f, &l);
    if (f->tooltip) ren_draw_tooltip(r, f, &l);
    int help_px = (int)(l.H * 0.022f) < 11 ? 11 : (int)(l.H * 0.022f); /* 2.2% of H, >= 11 */
    /* above the controls' strip, whose buttons stay usable ("?" closes it) */
    r->help_box[2] = 0;
    if (f->help && f->n_help)
        ren_draw_help(r, f, help_px, l.ctrl_h > 0 ? l.ctrl_y : (float)r->fb_h);
    ren_draw_palette(r, f, &l); /* over the help too: what was asked for last */
    ren_draw_status(r, f, &l);
    ren_flush(r);
}

/* --- hit tests and read-back ----------------------------------------------- */

int ren_patch_at(const Ren *r, int x, int y, int *row, int *col) {
    int w = r->image_w_px, h = r->image_h_px;
    if (w <= 0 || h <= 0 || !r->grid_w || x < r->image_x || y < r->image_y || x >= r->image_x + w ||
        y >= r->image_y + h)
        return -1;
    /* the drawn crop's px scaled to the grid: a patch under a pixel map too */
    *col = (int)((long)(x - r->image_x) * r->grid_w / w);
    *row = (int)((long)(y - r->image_y) * r->grid_h / h);
    return 0;
}

int ren_pred_at(const Ren *r, int x, int y) {
    if (r->n_pred_rows <= 0 || r->pred_row_h <= 0 || x < r->panel_x ||
        x >= r->panel_x + r->panel_w || y < r->pred_y0)
        return -1;
    int row = (y - r->pred_y0) / r->pred_row_h;
    return row < r->n_pred_rows ? row : -1;
}

int ren_control_at(const Ren *r, int x, int y) {
    return bar_hit(r->control_box, r->n_control_boxes, x, y);
}

int ren_menu_at(const Ren *r, int x, int y) {
    return bar_hit(r->menu_box, r->n_menu_boxes, x, y);
}

int ren_palette_at(const Ren *r, int x, int y) {
    int k = bar_hit(r->palette_box, r->n_palette_boxes, x, y);
    return k < 0 ? -1 : r->palette_first + k;
}

int ren_palette_inside(const Ren *r, int x, int y) {
    const DlBox *b = &r->palette_panel;
    return r->palette_fit > 0 && x >= b->x0 && x < b->x1 && y >= b->y0 && y < b->y1;
}

int ren_cell_at(const Ren *r, int x, int y) {
    if (r->n_cells <= 0 || r->cell_step_x <= 0 || r->cell_step_y <= 0 || x < r->cells_x ||
        y < r->cells_y)
        return -1;
    int col = (x - r->cells_x) / r->cell_step_x, row = (y - r->cells_y) / r->cell_step_y;
    if (col >= r->n_cols || row >= r->n_rows) return -1;
    if ((x - r->cells_x) % r->cell_step_x >= r->cell_w_px ||
        (y - r->cells_y) % r->cell_step_y >= r->cell_h_px)
        return -1; /* in the gap */
    int k = col * r->col_stride + row * r->row_stride;
    return k < r->n_cells ? k : -1;
}

/* The framebuffer drawn into as [fb_h, fb_w, channels] (GL_RGB or GL_RGBA), top row first:
 * the canvas holds its rows so (ren_top_down); the window's, bottom first, are turned over. */
static uint8_t *read_pixels(Ren *r, GLenum format, int channels, int *w, int *h) {
    int W = r->fb_w, H = r->fb_h;
    size_t stride = (size_t)W * channels;
    uint8_t *px = W > 0 && H > 0 ? malloc(stride * H) : NULL, *row = NULL;
    if (!px || (!ren_top_down(r) && !(row = malloc(stride)))) {
        free(px);
        return NULL;
    }
    glPixelStorei(GL_PACK_ALIGNMENT, 1); /* rows of 3 * W bytes: no padding to 4 */
    glBindFramebuffer(GL_READ_FRAMEBUFFER, r->canvas_fbo); /* 0 without one: the window's */
    glReadPixels(0, 0, W, H, format, GL_UNSIGNED_BYTE, px);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
    for (int y = 0; row && y < H / 2; y++) {
        memcpy(row, px + (size_t)y * stride, stride);
        memcpy(px + (size_t)y * stride, px + (size_t)(H - 1 - y) * stride, stride);
        memcpy(px + (size_t)(H - 1 - y) * stride, row, stride);
    }
    free(row);
    *w = W, *h = H;
    return px;
}

uint8_t *ren_read_rgb(Ren *r, int *w, int *h) {
    return read_pixels(r, GL_RGB, 3, w, h);
}

uint8_t *ren_read_rgba(Ren *r, int *w, int *h) {
    return read_pixels(r, GL_RGBA, 4, w, h);
}
