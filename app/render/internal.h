/* internal.h - what the renderer's files share, and nothing outside render/ reads: the
 * palette, the recorded primitives (record.c) and their replay (canvas.c), the shaders
 * (shaders.c), the textures (textures.c), the panels (panels.c) and the frame's layout
 * (render.c). All positions are framebuffer px, origin top-left. */
#ifndef VITLENS_RENDER_INTERNAL_H
#define VITLENS_RENDER_INTERNAL_H

#include "render/render.h"

/* ---------------------------------------------------------------------------
 * The palette: dark, high contrast for a projector */

/* the window's, whole levels (15, 17, 21) / 255: the clears (replay_box) and the quads drawn
 * in it (a disc, a button's text) give the same bytes whatever rounding each path uses */
static const float COL_BG[4] = {15 / 255.0f, 17 / 255.0f, 21 / 255.0f, 1.0f};
static const float COL_BAR[4] = {0.102f, 0.114f, 0.137f, 1.0f}; /* status bar */
static const float COL_ERRBAR[4] = {0.23f, 0.07f, 0.08f, 1.0f}; /* error line */
static const float COL_TEXT[4] = {0.93f, 0.94f, 0.95f, 1.0f};
static const float COL_DIM[4] = {0.62f, 0.65f, 0.69f, 1.0f};
static const float COL_ACCENT[4] = {0.99f, 0.91f, 0.15f, 1.0f}; /* viridis' yellow */
static const float COL_ERR[4] = {1.0f, 0.62f, 0.58f, 1.0f};
static const float COL_PANEL[4] = {0.04f, 0.045f, 0.055f, 0.86f}; /* help panel */
static const float COL_EMPTY[4] = {0.085f, 0.095f, 0.115f, 1.0f}; /* no image yet */
static const float COL_SIDE[4] = {0.085f, 0.095f, 0.115f, 1.0f};  /* side panels */
static const float COL_TRACK[4] = {0.19f, 0.21f, 0.25f, 1.0f};    /* empty bar, plot axes */
static const float COL_DOT[4] = {0.55f, 0.60f, 0.68f, 0.85f};     /* other layers' heads */
static const float COL_TIP[4] = {0.0f, 0.0f, 0.0f, 0.85f};        /* tooltip, cell labels */
/* the perturbation plot's curves: most relevant first, least relevant first (colours no
 * other part of the window uses, so they tell the curve apart) */
static const float COL_CURVE[2][4] = {{0.30f, 0.80f, 1.0f, 1.0f}, {1.0f, 0.55f, 0.20f, 1.0f}};
static const float COL_GHOST[4] = {0.50f, 0.53f, 0.58f, 1.0f}; /* the other order's curve */
/* the controls' buttons: their face, under the mouse, held down; a dimmed one's text */
static const float COL_BTN[4] = {0.20f, 0.22f, 0.27f, 1.0f};
static const float COL_BTN_HOVER[4] = {0.32f, 0.35f, 0.42f, 1.0f};
static const float COL_BTN_DOWN[4] = {0.93f, 0.94f, 0.95f, 1.0f};
static const float COL_BTN_EDGE[4] = {0.42f, 0.45f, 0.51f, 1.0f};
static const float COL_BTN_OFF[4] = {0.45f, 0.47f, 0.51f, 1.0f};

/* ---------------------------------------------------------------------------
 * The frame as a list of primitives (record.c) */

typedef enum { PR_FILL = 1, PR_DISC, PR_SEG, PR_TEXT, PR_HEAT } RenPrimKind;

struct RenPrim {
    int kind;       /* RenPrimKind */
    int variant;    /* PR_HEAT: REN_HV_* bits */
    int slot;       /* PR_TEXT: the text cache's slot */
    int cell;       /* PR_HEAT: the atlas' map, -1: the map texture */
    int exact;      /* PR_HEAT: a picture on whole px at its own size: copied (blit_picture) */
    float rect[4];  /* x, y, w, h px (PR_SEG: unused) */
    float color[4]; /* RGBA */
    float seg[4];   /* PR_SEG: x0, y0, x1, y1 px */
    float seg_w;    /* PR_SEG: px */
    int cell_xy[2]; /* PR_HEAT: texel origin of the map */
    int query[2];   /* PR_HEAT: the query patch (col, row) */
    float opacity, line_px, grid_size[2], patches[2], fill[3];
    uint64_t content; /* what the textures hold: the text and its size, the uploads */
};

/* Whether the framebuffer drawn into holds its rows top row first: the canvas (and the
 * check's, made only beside it), drawn in the window's own row order and BGRA layout so that
 * showing it is a plain copy (llvmpipe copies memory for a blit that turns GL's rows over
 * between two framebuffers of one layout, and draws a textured quad over every pixel for any
 * other); without a canvas the window itself, GL's bottom row first. */
static inline int ren_top_down(const Ren *r) {
    return r->canvas_fbo != 0;
}

/* Record a flat rectangle, a disc of diameter d centred at (cx, cy), a line segment w px
 * wide (anti-aliased along its sides), a frame of width t outside (x, y, w, h). */
void ren_fill(Ren *r, float x, float y, float w, float h, const float c[4]);
void ren_disc(Ren *r, float cx, float cy, float d, const float c[4]);
void ren_segment(Ren *r, float x0, float y0, float x1, float y1, float w, const float c[4]);
void ren_frame_rect(Ren *r, float x, float y, float w, float h, float t, const float c[4]);

/* The texture of str at size_px, rendered once and kept in a small LRU cache; NULL when
 * there is no font or no free slot (the text is then not drawn). */
const RenText *ren_text_get(Ren *r, const char *str, int size_px);
/* Record a cached text with its top-left at (x, y), scaled by `scale`. */
void ren_text_draw(Ren *r, const RenText *t, float x, float y, float scale, const float c[4]);
/* Record str vertically centred in [y, y+h) from x, shrunk to at most max_w wide (max_w
 * <= 0: no limit; ren_text_line: none); its drawn width. */
float ren_text_fit(Ren *r, const char *str, int size_px, float x, float y, float h, float max_w,
                   const float c[4]);
float ren_text_line(Ren *r, const char *str, int size_px, float x, float y, float h,
                    const float c[4]);
/* str's width at size_px, px (0 without a font). */
float ren_text_width(Ren *r, const char *str, int size_px);
/* Eight dots on a circle of `radius` around (cx, cy), the brightest one going round. */
void ren_spinner(Ren *r, float cx, float cy, float radius, float turns);
/* One map over the crop at (x, y, w, h): the main view (main_view 1) or a thumbnail.
 * cell: atlas index, -1: the single map texture. */
void ren_heat(Ren *r, const RenFrame *f, float x, float y, float w, float h, int cell,
              int main_view);
/* The colour bar at (x, y, w, h): the colormap, its maximum at the top. */
void ren_ramp(Ren *r, float x, float y, float w, float h);

/* ---------------------------------------------------------------------------
 * The canvas (canvas.c), shaders (shaders.c), textures (textures.c) */

/* The recorded frame into the canvas (only what changed) and on to the window's back
 * buffer. Without a canvas, the whole frame is drawn straight into the window. */
void ren_flush(Ren *r);
/* Delete an offscreen framebuffer and its texture; zero them and the size. */
void ren_free_canvas(GLuint *fbo, GLuint *tex, int *w, int *h);

/* Find, read and build the shaders (the UI's and the plain heat map's; the other heat
 * map variants when first drawn). 0, or -1 with msg (a compile log included). */
int ren_load_shaders(Ren *r, char *msg, size_t msg_bytes);
/* The heat map program of a combination of features (REN_HV_* bits), compiled the first
 * time it is asked for; NULL when it does not build (said on stderr once). */
const RenProgram *ren_heat_program(Ren *r, int variant);

/* The vertex array and every texture, with placeholders of their formats. 0, or -1 with
 * msg. */
int ren_make_textures(Ren *r, char *msg, size_t msg_bytes);
/* A texture clamped at its edges, with these filters. */
GLuint ren_make_texture(GLint min_filter, GLint mag_filter);

/* ---------------------------------------------------------------------------
 * Panels (panels.c) and the layout they are drawn in (render.c) */

typedef struct {
    float W, H;                 /* the framebuffer */
    float bar_h, err_h, margin; /* the status bar, the error line (0: none), the margin */
    float legend_w, legend_gap; /* the legend's width, the gap between the columns */
    float prefix_w, left_w;     /* the prefix bars' width; what is left of the crop */
    float area_h, panel_w;      /* the main area's height; the side panel's width (0: none) */
    float ix, iy, iw, ih;       /* the crop (or the overview) */
    float ctrl_y, ctrl_h;       /* the controls' strip (0 high: none) */
    int font_px, single, legend, prefix; /* the status bar's font; what is drawn */
} RenLayout;

/* The help overlay at font size px, centred. */
void ren_draw_help(Ren *r, const RenFrame *f, int px, float bottom);
/* The legend (colour bar, its range and caption) at (x, y), h high. */
void ren_draw_legend(Ren *r, const RenFrame *f, float x, float y, float h, int font_px);
/* The prefix tokens' bars in (x, y, w, h). */
void ren_draw_prefix(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px);
/* The overview's cells (and their labels) in (x, y, w, h); their layout kept for ren_cell_at. */
void ren_draw_cells(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px);
/* The side panels of l (none when l->panel_w is 0), their rectangles kept for the hit tests. */
void ren_draw_side(Ren *r, const RenFrame *f, const RenLayout *l);
/* f->tooltip beside the mouse, kept inside the window and above the status bar. */
void ren_draw_tooltip(Ren *r, const RenFrame *f, const RenLayout *l);
/* The controls' strip (f->controls) in l's strip, their boxes kept for ren_control_at. */
void ren_draw_controls(Ren *r, const RenFrame *f, const RenLayout *l);
/* The command palette (f->palette_input set) near the top, centred, its rows' boxes and how
 * many fit kept for ren_palette_at. */
void ren_draw_palette(Ren *r, const RenFrame *f, const RenLayout *l);
/* The error line (when f->error) and the status bar, with the spinner while busy. */
void ren_draw_status(Ren *r, const RenFrame *f, const RenLayout *l);

#endif
