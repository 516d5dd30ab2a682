/* canvas.c - the recorded frame replayed into the canvas, an offscreen framebuffer that
 * keeps the last frame (or, on X11 with GLX_MESA_copy_sub_buffer, the window's back
 * buffer), only in the rectangles that changed, then presented: those rectangles copied
 * to the window, or the canvas copied whole and swapped. With VITLENS_CHECK_REDRAW every
 * partial frame is compared with the whole one; idle, the shaders a later key needs are
 * built ahead. */
#include "render/internal.h"

#if defined(SDL_VIDEO_DRIVER_X11) && defined(VITLENS_X11)
#include <epoxy/glx.h> /* GLX_MESA_copy_sub_buffer: show only what changed */
#define REN_GLX 1
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Delete an offscreen framebuffer and its texture, and zero the four: safe on one never
 * made, and the next offscreen() call makes it anew. */
void ren_free_canvas(GLuint *fbo, GLuint *tex, int *w, int *h) {
    if (*fbo) glDeleteFramebuffers(1, fbo);
    if (*tex) glDeleteTextures(1, tex);
    *fbo = *tex = 0;
    *w = *h = 0;
}

/* --- replaying the list ---------------------------------------------------- */

/* Draw one recorded primitive with the state it was recorded with: a heat map quad through
 * its variant's program and textures (units as shaders.c fixed them), anything else
 * through the ui program. Coordinates are framebuffer px, origin top-left. */
static void replay(Ren *r, const RenPrim *p) {
    const float W = (float)r->fb_w, H = (float)r->fb_h;
    if (p->kind == PR_HEAT) {
        const RenProgram *g = ren_heat_program(r, p->variant);
        if (!g) return; /* its shader does not build: said once on stderr */
        glUseProgram(g->prog);
        glActiveTexture(GL_TEXTURE1);
        glBindTexture(GL_TEXTURE_2D, p->cell < 0 ? r->tex_map : r->tex_atlas);
        glActiveTexture(GL_TEXTURE2);
        glBindTexture(GL_TEXTURE_2D, r->tex_lut);
        glActiveTexture(GL_TEXTURE3);
        glBindTexture(GL_TEXTURE_2D, r->tex_mask);
        glActiveTexture(GL_TEXTURE4);
        glBindTexture(GL_TEXTURE_2D, r->tex_removed);
        glActiveTexture(GL_TEXTURE0);
        glBindTexture(GL_TEXTURE_2D, p->variant & REN_HV_MINIFY ? r->tex_image_mip
                                     : r->picture_shown >= 0    ? r->tex_picture[r->picture_shown]
                                                                : r->tex_image);
        glUniform2f(g->screen, W, H);
        glUniform1f(g->flip, ren_top_down(r) ? -1.0f : 1.0f);
        glUniform4f(g->rect, p->rect[0], p->rect[1], p->rect[2], p->rect[3]);
        glUniform1f(g->opacity, p->opacity);
        glUniform2f(g->grid_size, p->grid_size[0], p->grid_size[1]);
        glUniform2f(g->patches, p->patches[0], p->patches[1]);
        glUniform2i(g->cell, p->cell_xy[0], p->cell_xy[1]);
        glUniform2i(g->query, p->query[0], p->query[1]);
        glUniform1f(g->line_px, p->line_px);
        glUniform3f(g->fill, p->fill[0], p->fill[1], p->fill[2]);
        glDisable(GL_BLEND); /* opaque: no need to read what is below */
        glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
        glEnable(GL_BLEND);
        return;
    }
    const RenProgram *g = &r->ui;
    glUseProgram(g->prog);
    glUniform2f(g->screen, W, H);
    glUniform1f(g->flip, ren_top_down(r) ? -1.0f : 1.0f);
    glUniform1f(g->textured, p->kind == PR_TEXT ? 1.0f : 0.0f);
    /* one shader for every ui shape: u_round 0 a rectangle, 1 a disc, 2 a line segment */
    glUniform1f(g->round, p->kind == PR_DISC ? 1.0f : p->kind == PR_SEG ? 2.0f : 0.0f);
    glUniform4f(g->color, p->color[0], p->color[1], p->color[2], p->color[3]);
    glUniform4f(g->seg, p->seg[0], p->seg[1], p->seg[2], p->seg[3]);
    glUniform1f(g->seg_w, p->kind == PR_SEG ? p->seg_w : 0.0f);
    glUniform4f(g->rect, p->rect[0], p->rect[1], p->rect[2], p->rect[3]);
    if (p->kind == PR_TEXT) {
        glActiveTexture(GL_TEXTURE0);
        glBindTexture(GL_TEXTURE_2D, r->cache[p->slot].tex);
    }
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
}

/* The pixels an opaque primitive surely covers (a heat map quad, a flat rectangle of
 * alpha 1, on whole pixels; a heat quad whose shader builds), or an empty box. */
static DlBox opaque_box(Ren *r, const RenPrim *p) {
    DlBox none = {0, 0, 0, 0};
    if (!((p->kind == PR_HEAT && ren_heat_program(r, p->variant)) ||
          (p->kind == PR_FILL && p->color[3] >= 1.0f)))
        return none;
    /* a fractional edge is blended with what is below, so it does not cover its pixel */
    const float *q = p->rect;
    if (q[0] != floorf(q[0]) || q[1] != floorf(q[1]) || q[2] != floorf(q[2]) ||
        q[3] != floorf(q[3]))
        return none;
    DlBox b = {(int)q[0], (int)q[1], (int)(q[0] + q[2]), (int)(q[1] + q[3])};
    return b;
}

/* The scissor box b (top-left origin px): GL counts y from the first row, the bottom one
 * but in a framebuffer drawn top row first (ren_top_down). */
static void scissor(const Ren *r, DlBox b) {
    glScissor(b.x0, ren_top_down(r) ? b.y0 : r->fb_h - b.y1, b.x1 - b.x0, b.y1 - b.y0);
}

/* Clear box b (top-left origin px) to the clear colour. */
static void clear_box(const Ren *r, DlBox b) {
    if (b.x1 <= b.x0 || b.y1 <= b.y0) return;
    scissor(r, b);
    glClear(GL_COLOR_BUFFER_BIT);
}

/* A picture drawn texel for pixel (RenPrim.exact) into a framebuffer whose rows are top first
 * (the canvas): copied, clipped to box (NULL: whole), by a blit without scissor, flip or
 * scaling, which llvmpipe makes a copy of memory when the picture's texture has the canvas'
 * layout (ren_picture_upload: BGRA); the texels themselves either way. */
static void blit_picture(const Ren *r, const RenPrim *p, const DlBox *box) {
    int px = (int)p->rect[0], py = (int)p->rect[1];
    int x0 = px, y0 = py, x1 = px + (int)p->rect[2], y1 = py + (int)p->rect[3];
    if (box) {
        x0 = x0 > box->x0 ? x0 : box->x0, y0 = y0 > box->y0 ? y0 : box->y0;
        x1 = x1 < box->x1 ? x1 : box->x1, y1 = y1 < box->y1 ? y1 : box->y1;
    }
    if (x1 <= x0 || y1 <= y0) return;
    GLint target = 0;
    glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &target);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, r->picture_fbo);
    glFramebufferTexture2D(GL_READ_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D,
                           r->tex_picture[r->picture_shown], 0);
    GLboolean scissored = glIsEnabled(GL_SCISSOR_TEST);
    glDisable(GL_SCISSOR_TEST);
    glBlitFramebuffer(x0 - px, y0 - py, x1 - px, y1 - py, x0, y0, x1, y1, GL_COLOR_BUFFER_BIT,
                      GL_NEAREST);
    if (scissored) glEnable(GL_SCISSOR_TEST);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, (GLuint)target);
}

/* The frame's primitives that touch box (all: NULL) over the background, scissored to it.
 * The background is cleared only around the largest opaque primitive in the box: what
 * is under that one is drawn over whole (a scissored clear costs a software rasteriser
 * as much as a quad). */
static void replay_box(Ren *r, const DlBox *box) {
    glClearColor(COL_BG[0], COL_BG[1], COL_BG[2], 1.0f);
    if (!box) {
        glDisable(GL_SCISSOR_TEST);
        glClear(GL_COLOR_BUFFER_BIT);
    } else {
        glEnable(GL_SCISSOR_TEST);
        DlBox o = {0, 0, 0, 0}, b = *box;
        long best = 0;
        for (int i = 0; i < r->n_prims; i++) {
            if (!dl_overlap(r->dl.box[i], b)) continue;
            DlBox c = opaque_box(r, &r->prims[i]);
            c.x0 = c.x0 > b.x0 ? c.x0 : b.x0, c.y0 = c.y0 > b.y0 ? c.y0 : b.y0;
            c.x1 = c.x1 < b.x1 ? c.x1 : b.x1, c.y1 = c.y1 < b.y1 ? c.y1 : b.y1;
            long a = c.x1 > c.x0 && c.y1 > c.y0 ? (long)(c.x1 - c.x0) * (c.y1 - c.y0) : 0;
            if (a > best) best = a, o = c;
        }
        if (!best) {
            clear_box(r, b);
        } else { /* the strips above, below, left and right of o */
            clear_box(r, (DlBox){b.x0, b.y0, b.x1, o.y0});
            clear_box(r, (DlBox){b.x0, o.y1, b.x1, b.y1});
            clear_box(r, (DlBox){b.x0, o.y0, o.x0, o.y1});
            clear_box(r, (DlBox){o.x1, o.y0, b.x1, o.y1});
        }
        scissor(r, b);
    }
    for (int i = 0; i < r->n_prims; i++) {
        const RenPrim *p = &r->prims[i];
        if (box && !dl_overlap(r->dl.box[i], *box)) continue;
        if (p->kind == PR_HEAT && p->exact && ren_top_down(r) && !r->linear_only &&
            r->picture_shown >= 0 && r->picture_fbo)
            blit_picture(r, p, box);
        else
            replay(r, p);
    }
    glDisable(GL_SCISSOR_TEST);
}

/* --- the canvas ---------------------------------------------------------------- */

/* An offscreen framebuffer of w x h RGBA8 in *fbo, *tex (kept while the size holds).
 * 0, or -1 when it cannot be made. */
static int offscreen(GLuint *fbo, GLuint *tex, int *cw, int *ch, int w, int h) {
    if (*fbo && *cw == w && *ch == h) return 0;
    ren_free_canvas(fbo, tex, cw, ch);
    glGenTextures(1, tex);
    glBindTexture(GL_TEXTURE_2D, *tex);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    /* unsized RGBA with BGRA data: the driver may pick the window's own BGRA layout (llvmpipe
     * does), so that ren_flush's copy to the window is a copy of memory */
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, w, h, 0, GL_BGRA, GL_UNSIGNED_BYTE, NULL);
    glGenFramebuffers(1, fbo);
    glBindFramebuffer(GL_FRAMEBUFFER, *fbo);
    glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, *tex, 0);
    int ok = glCheckFramebufferStatus(GL_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE;
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    if (!ok || glGetError() != GL_NO_ERROR) {
        ren_free_canvas(fbo, tex, cw, ch);
        return -1;
    }
    *cw = w, *ch = h;
    return 0;
}

/* Pixels (RGBA) of the framebuffer fbo that differ from the canvas'. */
static long canvas_mismatch(Ren *r) {
    size_t n = (size_t)r->fb_w * r->fb_h * 4;
    uint8_t *a = malloc(n), *b = malloc(n);
    long bad = -1;
    if (a && b) {
        glPixelStorei(GL_PACK_ALIGNMENT, 1);
        glBindFramebuffer(GL_READ_FRAMEBUFFER, r->canvas_fbo);
        glReadPixels(0, 0, r->fb_w, r->fb_h, GL_RGBA, GL_UNSIGNED_BYTE, a);
        glBindFramebuffer(GL_READ_FRAMEBUFFER, r->check_fbo);
        glReadPixels(0, 0, r->fb_w, r->fb_h, GL_RGBA, GL_UNSIGNED_BYTE, b);
        bad = 0;
        /* RGB only: the window shows no alpha */
        for (size_t i = 0; i < n; i += 4) bad += memcmp(a + i, b + i, 3) != 0;
    }
    free(a), free(b);
    return bad;
}

/* The recorded frame into the canvas (only what changed) and on to the window's back
 * buffer. Without a canvas, the whole frame is drawn straight into the window. */
void ren_flush(Ren *r) {
    glViewport(0, 0, r->fb_w, r->fb_h);
    glEnable(GL_BLEND);
    glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
    glBindVertexArray(r->vao);
    int canvas =
        !offscreen(&r->canvas_fbo, &r->canvas_tex, &r->canvas_w, &r->canvas_h, r->fb_w, r->fb_h);
    if (!canvas) dl_invalidate(&r->dl); /* no canvas keeps the last frame: draw it all */
    DlBox rects[DL_MAX_RECTS];
    long px = (long)r->fb_w * r->fb_h;
    int n = canvas && !r->full_redraw ? dl_diff(&r->dl, rects, &px) : -1;
    glBindFramebuffer(GL_FRAMEBUFFER, canvas ? r->canvas_fbo : 0);
    if (r->warm && n < 0) { /* before the first frame (its window says "loading…"): */
        r->warm = 0;        /* the shaders of the first map, compiled while it loads */
        static const int first[] = {0, REN_HV_RAMP};
        RenPrim p = {.kind = PR_HEAT, .cell = -1, .rect = {0, 0, 1, 1}};
        p.grid_size[0] = p.grid_size[1] = p.patches[0] = p.patches[1] = 3.0f;
        for (size_t i = 0; i < sizeof first / sizeof first[0]; i++) {
            p.variant = first[i];
            replay(r, &p); /* one pixel, cleared below */
        }
    }
    if (n < 0)
        replay_box(r, NULL);
    else
        for (int i = 0; i < n; i++) replay_box(r, &rects[i]);
    r->last_rects = n, r->last_px = px, r->last_mismatch = -1;
    if (n < 0) r->n_show = -1; /* what ren_present copies to the window */
    /* the rectangles accumulate until a present shows them: frames drawn between two
     * presents (ren_draw twice for S's "saved") are all copied */
    for (int i = 0; i < n && r->n_show >= 0; i++) {
        if (r->n_show == DL_MAX_RECTS * 2) { /* two frames without a present: all */
            r->n_show = -1;
            break;
        }
        r->show[r->n_show++] = rects[i];
    }
    if (!canvas) {
        glBindFramebuffer(GL_FRAMEBUFFER, 0);
        return;
    }
    dl_commit(&r->dl);
    /* a partial frame, or a whole one with a picture copied texel for pixel */
    if (r->check_redraw && (n >= 0 || r->n_exact > 0) &&
        !offscreen(&r->check_fbo, &r->check_tex, &r->check_w, &r->check_h, r->fb_w, r->fb_h)) {
        glBindFramebuffer(GL_FRAMEBUFFER, r->check_fbo);
        r->linear_only = 1; /* so the check also compares the pictures copied with sampling */
        replay_box(r, NULL);
        r->linear_only = 0;
        r->last_mismatch = canvas_mismatch(r);
    }
    if (r->canvas_fbo) {
        /* to the back buffer: where it is never swapped (GLX_MESA_copy_sub_buffer) it keeps
         * the last frame, so only the rectangles redrawn. The canvas' rows are the window's
         * (top first, its BGRA layout): the blit turns GL's rows over and llvmpipe copies
         * memory, 1.4 ms for 1920x1080 where it drew a textured quad over every pixel for
         * the RGBA canvas drawn bottom row first, 16 ms (docs/benchmarks.md, "Showing the
         * canvas") */
        glBindFramebuffer(GL_READ_FRAMEBUFFER, r->canvas_fbo);
        glBindFramebuffer(GL_DRAW_FRAMEBUFFER, 0);
        int part = r->x_display && n >= 0;
        DlBox whole = {0, 0, r->fb_w, r->fb_h};
        for (int i = 0; i < (part ? n : 1); i++) {
            const DlBox *b = part ? &rects[i] : &whole;
            glBlitFramebuffer(b->x0, b->y0, b->x1, b->y1, b->x0, r->fb_h - b->y0, b->x1,
                              r->fb_h - b->y1, GL_COLOR_BUFFER_BIT, GL_NEAREST);
        }
    }
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
}

/* --- idle work and presenting ------------------------------------------------- */

/* The variants a user meets next (the overview's thumbnails, the query box, the grid,
 * bilinear upsampling, the mask), compiled ahead so that the first key that needs one
 * does not wait for llvmpipe to build it (tens of ms). */
static const int warm_later[] = {
    REN_HV_MINIFY,   REN_HV_QUERY, REN_HV_QUERY | REN_HV_MINIFY, REN_HV_GRID,
    REN_HV_BILINEAR, REN_HV_MASK,  REN_HV_GRID | REN_HV_QUERY};

int ren_warm_step(Ren *r) {
    int k = r->warm_next;
    if (k >= (int)(sizeof warm_later / sizeof warm_later[0]) || !r->image_w || !r->fb_w) return 0;
    r->warm_next++;
    /* one pixel of the canvas, drawn with it and put back as it was */
    uint8_t px[4] = {0};
    glBindFramebuffer(GL_FRAMEBUFFER, r->canvas_fbo);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, 1, 1, GL_RGBA, GL_UNSIGNED_BYTE, px);
    glViewport(0, 0, r->fb_w, r->fb_h);
    glEnable(GL_BLEND);
    glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
    glBindVertexArray(r->vao);
    glEnable(GL_SCISSOR_TEST);
    glScissor(0, 0, 1, 1);
    RenPrim p = {.kind = PR_HEAT, .cell = -1, .variant = warm_later[k]};
    /* GL's pixel (0, 0): the top-left one in the canvas, else the bottom-left */
    p.rect[0] = 0, p.rect[1] = ren_top_down(r) ? 0.0f : (float)r->fb_h - 1;
    p.rect[2] = p.rect[3] = 1;
    p.grid_size[0] = (float)r->map_w, p.grid_size[1] = (float)r->map_h;
    p.patches[0] = (float)r->grid_w, p.patches[1] = (float)r->grid_h;
    replay(r, &p);
    glClearColor(px[0] / 255.0f, px[1] / 255.0f, px[2] / 255.0f, px[3] / 255.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    glDisable(GL_SCISSOR_TEST);
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    return 1;
}

#ifdef REN_GLX
/* Set by present_x_error: an X request of the copy failed. Xlib's default handler prints
 * the error and exits the process; a window resized (the soak test, a window manager)
 * between the frame and its copy can make Mesa's XShmPutImage of a rectangle fail with
 * BadValue. That costs a frame, not the session: the next one is shown with a swap. */
static int present_failed;
static int present_x_error(Display *dpy, XErrorEvent *e) {
    (void)dpy, (void)e;
    present_failed = 1;
    return 0;
}
#endif

int ren_present(Ren *r) {
#ifdef REN_GLX
    if (r->x_display && (r->fb_w != r->shown_w || r->fb_h != r->shown_h)) {
        /* Mesa sizes the back buffer anew only after a swap: a new window size (or the
         * first frame) is shown with one, and the next frame is drawn whole into the
         * resized back buffer */
        SDL_GL_SwapWindow(r->win);
        r->shown_w = r->fb_w, r->shown_h = r->fb_h;
        dl_invalidate(&r->dl);
        r->n_show = -1;
        return 1;
    }
    if (r->x_display) {
        Display *dpy = r->x_display;
        int all = r->n_show < 0;
        DlBox whole = {0, 0, r->fb_w, r->fb_h};
        XSync(dpy, False); /* only the copy's own errors reach the handler below */
        present_failed = 0;
        int (*old)(Display *, XErrorEvent *) = XSetErrorHandler(present_x_error);
        for (int i = 0; i < (all ? 1 : r->n_show); i++) {
            const DlBox *b = all ? &whole : &r->show[i];
            glXCopySubBufferMESA(dpy, (GLXDrawable)r->x_drawable, b->x0, r->fb_h - b->y1,
                                 b->x1 - b->x0, b->y1 - b->y0);
        }
        XSync(dpy, False); /* on the screen when this returns, as after a swap */
        XSetErrorHandler(old);
        r->n_show = 0;
        if (present_failed) { /* the next frame: a swap, then drawn whole */
            r->shown_w = r->shown_h = 0;
            return 1;
        }
        return 0;
    }
#endif
    SDL_GL_SwapWindow(r->win);
    r->n_show = 0;
    return 0;
}

void ren_expose(Ren *r) {
    r->n_show = -1;
}
