/* render.h - the narrow renderer: OpenGL 3.3 core through libepoxy.
 *
 * Textures carry the picture: the crop the model saw [Sh, Sw] RGB (and a mipmapped
 * copy for the thumbnails), the map R32F (normalised to [0, 1]; [gh, gw] over the
 * patch grid, or [Sh, Sw] for a map at pixel resolution), an atlas of the
 * overview's maps, the mask R8 (the map's size), the colormap LUT [256] RGB and
 * the patches a perturbation test has removed, R8 [gh, gw].
 * A key press re-uploads only maps, so switching views costs a few kilobytes.
 * Everything else (status bar, panels, prefix-token bars, help, legend) is
 * flat rectangles, discs, line segments and text. Sizes follow the window's height, so text
 * reads on a projector. */
#ifndef VITLENS_RENDER_H
#define VITLENS_RENDER_H

#include "render/drawlist.h"
#include "render/text.h"
#include "view/view.h" /* ViewOverview: the single view or an overview */

#include <SDL.h>
#include <epoxy/gl.h>
#include <stdint.h>

#define REN_TEXT_CACHE   512 /* texts kept; one frame draws at most this many */
#define REN_MAX_PREDS    5
#define REN_MAX_LIST     32 /* rows of the list panel */
#define REN_PICTURES     4  /* picture slots (ren_picture_upload) */
#define REN_MAX_CONTROLS 24 /* items of the on-screen controls' strip */
#define REN_MAX_MENU     32 /* rows of a control's menu */
#define REN_MAX_PALETTE  40 /* rows of the command palette on screen at once */

typedef struct {
    GLuint tex;
    int w, h, size_px; /* texture px, font px */
    unsigned last_use;
    unsigned long frame; /* the frame that last drew it: never replaced during it */
    char str[256];
} RenText;

typedef struct {
    GLuint prog;
    GLint screen, flip, rect, uv, seg, seg_w; /* quad.vert.glsl */
    GLint opacity, grid_size, patches, cell;  /* heatmap.frag.glsl */
    GLint query, line_px, fill;
    GLint color, textured, round; /* ui.frag.glsl */
} RenProgram;

/* The heat map shader's features (heatmap.frag.glsl's #defines), one program per
 * combination in use: a pixel pays only for what is drawn. */
enum {
    REN_HV_BILINEAR = 1 << 0,
    REN_HV_RGB = 1 << 1,
    REN_HV_RAMP = 1 << 2,
    REN_HV_REMOVED = 1 << 3,
    REN_HV_GRID = 1 << 4,
    REN_HV_MASK = 1 << 5,
    REN_HV_QUERY = 1 << 6,
    REN_HV_MINIFY = 1 << 7,
    REN_HV_PLAIN = 1 << 8, /* the picture alone: no map over it, nothing drawn on it */
    REN_HV_BITS = 9
};

typedef struct RenPrim RenPrim; /* one recorded draw (record.c) */

typedef struct {
    SDL_Window *win;
    GLuint vao;
    RenProgram heat[1 << REN_HV_BITS], ui; /* heat: by REN_HV_* bits, 0 prog: not built yet */
    unsigned char heat_failed[1 << REN_HV_BITS];
    char heat_msg[4096];             /* the last variant's build error, "" */
    char *vert_src, *heat_src;       /* the shaders' sources, kept for the variants */
    GLuint tex_image, tex_image_mip; /* the crop; tex_image_mip mipmapped, for thumbnails */
    GLuint tex_map, tex_lut, tex_atlas, tex_mask, tex_removed;
    int image_w, image_h; /* of the uploaded image; 0: none */
    int image_plain;      /* 1: a picture's (no mipmaps: drawn with one bilinear sample) */
    GLuint tex_picture[REN_PICTURES]; /* pictures kept on the GPU (the lesson's steps), 0: none */
    GLuint picture_fbo;               /* reads the picture shown, for a blit (canvas.c) */
    int picture_shown;                /* the slot drawn instead of the crop, -1: the crop */
    int map_w, map_h;                 /* of the uploaded map */
    int map_rgba;                     /* 1: it is colours (ren_upload_map with rgba) */
    int grid_w, grid_h;               /* the patch grid the map is drawn over */
    int atlas_maps, atlas_cols, atlas_w, atlas_h; /* maps in the atlas, atlas columns (in
                                                     maps), each map's size */
    int max_tex_px;                               /* GL_MAX_TEXTURE_SIZE */
    /* what each texture holds: a new number on every upload (the frame's primitives
     * hash them, so a new map redraws what shows it) */
    unsigned long gen, gen_image, gen_map, gen_atlas, gen_mask, gen_lut, gen_removed;
    /* the frame as a list of primitives (drawlist.h), replayed into the canvas where it
     * changed, then copied to the window */
    RenPrim *prims;
    int n_prims, cap_prims;
    DrawList dl;
    unsigned long frame_no;
    GLuint canvas_fbo, canvas_tex, check_fbo, check_tex;
    int canvas_w, canvas_h, check_w, check_h;
    int full_redraw;    /* $VITLENS_FULL_REDRAW=1: every frame drawn whole (to compare) */
    int check_redraw;   /* $VITLENS_CHECK_REDRAW=1: each partial frame compared with a whole one */
    int last_rects;     /* the last frame: rectangles redrawn, -1: all of it */
    long last_px;       /* pixels redrawn */
    long last_mismatch; /* check_redraw: pixels where the partial frame (or a whole one with
                         * an exact picture) differs from the whole one drawn with linear
                         * sampling only, -1: not checked */
    int n_exact;        /* the last frame's pictures drawn texel for pixel (RenPrim.exact) */
    int linear_only;    /* check_redraw's whole frame: those sampled, as a picture of another
                         * size is */
    /* On X11 with GLX_MESA_copy_sub_buffer: the display (Display *) and the window, whose
     * back buffer is the canvas; NULL: an offscreen canvas and a swap */
    void *x_display;
    unsigned long x_drawable;
    DlBox show[DL_MAX_RECTS * 2]; /* what ren_present shows: the rects drawn since the last */
    int n_show;                   /* present; -1: the whole window */
    int shown_w, shown_h;         /* the window's size at the last swap */
    int warm;                     /* 1: compile the first map's shaders at the next frame */
    int warm_next;                /* ren_warm_step's next variant */
    Text text;
    int has_text;
    RenText cache[REN_TEXT_CACHE];
    unsigned clock;
    int fb_w, fb_h;                               /* framebuffer px of the last frame */
    int image_x, image_y, image_w_px, image_h_px; /* where the crop was drawn, framebuffer px */
    /* the last overview's layout, for ren_cell_at: cell (col, row) at
     * (cells_x + col * cell_step_x, cells_y + row * cell_step_y), cell_w_px x
     * cell_h_px (the crop's aspect ratio) */
    int cells_x, cells_y, cell_w_px, cell_h_px, cell_step_x, cell_step_y;
    int n_cols, n_rows, col_stride, row_stride, n_cells;
    int panel_x, panel_w;                 /* side panel, 0 wide when not drawn */
    int pred_y0, pred_row_h, n_pred_rows; /* the predictions' rows, for ren_pred_at */
    int list_x, list_y, list_w, list_h;   /* the list panel as drawn, 0 wide when not */
    DlBox control_box[REN_MAX_CONTROLS];  /* the controls' strip as drawn (bar.h), for */
    int n_control_boxes;                  /* ren_control_at; 0: no strip */
    DlBox menu_box[REN_MAX_MENU];         /* an open menu's rows as drawn, for ren_menu_at */
    int n_menu_boxes;                     /* 0: no menu */
    DlBox palette_box[REN_MAX_PALETTE];   /* the palette's rows as drawn (RenFrame.palette from */
    int n_palette_boxes, palette_first;   /* palette_first), for ren_palette_at; 0: none */
    int palette_fit;                      /* rows the palette has room for (0: closed) */
    DlBox palette_panel;                  /* the whole palette, for ren_palette_inside */
    int plot_x, plot_y, plot_w, plot_h;   /* the perturbation plot's axes box (x 0..1 left to
                                             right, y 0..1 bottom to top), 0 wide when not */
    int help_pages;           /* pages the last help overlay took: its rows at a legible size */
    int help_px, help_box[4]; /* its font size, and x, y, w, h as drawn (0 wide: none) */
    char shader_dir[1024];
} Ren;

/* One item of the on-screen controls' strip (RenFrame.controls): a button, or a read-out
 * between two buttons ("layer 5 / 12"). */
typedef struct {
    const char *label; /* the text on it */
    const char *sizer; /* NULL, or the widest text it may show: its width is kept, so that
                          the items do not move when a label changes */
    int group;         /* items of one group sit close together, groups further apart */
    int button;        /* 1: a button; 0: a read-out, drawn without a face */
    int enabled;       /* 0: dimmed (it would change nothing) */
    int active;        /* 1: the choice on screen (the fusion shown), in the accent colour */
    const char *hint;  /* NULL, or a second text drawn dim at its right (a menu row's key) */
} RenControl;

/* What to draw besides the image and map (strings UTF-8, NULL: none). */
typedef struct {
    int overlay, grid, help, busy;
    float opacity;
    const char *status_left, *status_right, *error, *placeholder;
    /* a text box on the status bar instead of its texts (CLIP's phrase, /): input_prompt,
     * then input (UTF-8) with a caret after it; NULL: none */
    const char *input, *input_prompt;
    int input_selected;          /* the input is shown selected: what is typed replaces it */
    const char *(*help_rows)[2]; /* [n_help] {key, what} */
    int n_help;
    int help_page;       /* the help's page shown, from 0 (Ren.help_pages: how many it took) */
    float spinner_turns; /* spinner phase while busy */

    ViewOverview mode;
    int bilinear;             /* upsampling of every map */
    int query_col, query_row; /* the query patch, -1: the CLS token */
    int mask;                 /* outline the uploaded mask (single view) */
    int rgb;                  /* the map is colours (ren_upload_map with rgba): no colour bar */
    /* list panel below the predictions: n_list rows of a label, a value on the right
     * and a bar of length values[i] in [0, 1]; list_marked framed (-1: none) */
    int n_list, list_marked;
    const char *list_title;
    const char *const *list_labels, *const *list_right;
    const float *list_values;
    const char *legend_hi, *legend_lo, *legend_caption;
    /* overviews: n_cols x n_rows cells; cell (col, row) shows atlas map
     * col * col_stride + row * row_stride when < the atlas' maps */
    int n_cols, n_rows, col_stride, row_stride, selected; /* selected: atlas index */
    const char *const *cell_labels;                       /* [atlas maps] or NULL */
    const char *const *col_labels, *const *row_labels;    /* [n_cols], [n_rows] or NULL */
    /* predictions panel: n_preds rows, most probable first; pred_marked: the row of
     * the class a class-specific map explains (framed, with a marker), -1: none */
    int n_preds, pred_marked;
    const char *pred_labels[REN_MAX_PREDS];
    float pred_probs[REN_MAX_PREDS];
    const char *pred_title; /* the panel's title, NULL: "top-5 predictions" */
    /* attention distance panel: distance [L, H] px, NULL: hidden */
    const float *distance;
    int dist_layers, dist_heads, dist_layer, dist_head; /* dist_head >= H: a fusion */
    float dist_max_px;                                  /* y axis top */
    const char *dist_caption;
    /* a tooltip at (tip_x, tip_y) framebuffer px: below and right of it (tip_side 0),
     * above it (1), or left of it, its top there (2) */
    const char *tooltip;
    float tip_x, tip_y;
    int tip_side;
    /* The prefix tokens' share of the map's row (registers, distillation token),
     * drawn as one bar each left of the crop (single view) when n_prefix > 1; the map shows the
     * patches only. share[n_prefix], names[n_prefix] ("CLS", "reg1", ...). */
    int n_prefix;
    const float *prefix_share;
    const char *const *prefix_names;
    /* A perturbation test (single view): the patches of ren_upload_removed drawn flat in
     * fill_rgb (what the model sees there), without heat. */
    int removed;
    float fill_rgb[3];
    /* Its plot panel below the predictions (instead of the list and distance panels) when
     * plot is 1: the probability after each step, plot_y [plot_n] in [0, 1] at x = s /
     * plot_steps, s = 0 .. plot_n - 1 (0 .. 100% removed), the last point marked; plot_ghost
     * [plot_steps + 1] (NULL: none) a finished curve drawn dim behind it (the other order);
     * plot_alt 1: the second curve colour (least relevant first). Texts may be NULL; the
     * ghost's caption is drawn in its colour. */
    int plot, plot_n, plot_steps, plot_alt;
    const float *plot_y, *plot_ghost;
    const char *plot_title, *plot_subtitle, *plot_caption, *plot_ghost_caption;
    /* Outlines over the single view's picture (the compare view's patch cursor): n_boxes
     * boxes {x, y, w, h} in the uploaded picture's px (ren_picture_show's w x h), each drawn
     * 3 px wide inside its box in box_rgba[i], so that a box that moves redraws only
     * where it was and is. */
    int n_boxes;
    const float (*boxes)[4], (*box_rgba)[4];
    /* The on-screen controls: n_controls items in a strip between the main area and the
     * status bar, at the status line's text size (they scale with the window: readable in
     * fullscreen on a projector); 0: no strip (the main area takes its room). Their boxes
     * are kept for ren_control_at. control_hover, control_pressed: the item under the
     * mouse, the one held down (-1: none). */
    int n_controls;
    const RenControl *controls;
    int control_hover, control_pressed;
    /* An open menu of control menu_of (its index in controls): n_menu rows (buttons; the
     * active one the choice on screen) in a column above it, over the main area while it is
     * open; menu_hover: the row under the mouse (-1: none). n_menu 0: none. */
    int n_menu, menu_of, menu_hover;
    const RenControl *menu;
    /* The command palette (Ctrl+P), over everything but the status bar: a text field with
     * palette_input (UTF-8) and a caret, palette_empty dim in it while it is "", palette_count
     * dim at its right ("12 of 62"); below it the rows palette[palette_first ..], as many as
     * fit (label: the command's name, hint: its key at the right, enabled 0: greyed, active:
     * the selection), a scroll bar when not all fit, palette_none when n_palette is 0.
     * palette_input NULL: closed. The rows' boxes and how many fit are kept in the Ren. */
    const char *palette_input, *palette_empty, *palette_count, *palette_none;
    int n_palette, palette_first;
    const RenControl *palette;
} RenFrame;

/* Compile the shaders (found in $VITLENS_SHADER_DIR, else the source tree's
 * shaders/, else shaders/ next to the executable), make the textures, open the
 * font. Returns 0, or -1 with msg (a shader's compile log included). A missing
 * font is not an error: a warning is written to warn and text is skipped. */
int ren_init(Ren *r, SDL_Window *win, char *msg, size_t msg_bytes, char *warn, size_t warn_bytes);
void ren_free(Ren *r);

void ren_upload_image(Ren *r, const uint8_t *rgb, int w, int h); /* rgb [h, w, 3] */
/* Pictures for the single view only (the lesson's steps), kept on the GPU in slots 0 ..
 * REN_PICTURES-1, so that showing one is no upload: ren_picture_upload puts rgb [h, w, 3]
 * into a slot (ahead of time), ren_picture_show draws that slot instead of the crop until
 * the next ren_upload_image. No mipmaps: drawn smaller than its size with one bilinear
 * sample. */
void ren_picture_upload(Ren *r, int slot, const uint8_t *rgb, int w, int h);
void ren_picture_show(Ren *r, int slot, int w, int h);
/* The view's map, drawn over the patch grid [grid_h, grid_w] (the same size for a patch
 * map, [Sh, Sw] for a pixel map). rgba 0: map [map_h, map_w] normalised to [0, 1], drawn
 * through the colormap; rgba 1: colours, map [map_h, map_w, 4] in [0, 1], A the
 * opacity's weight (the feature PCA's foreground), drawn without colormap. */
void ren_upload_map(Ren *r, const float *map, int rgba, int map_w, int map_h, int grid_w,
                    int grid_h);
/* maps [n, map_h, map_w] normalised, for an overview. 0, or -1 when the atlas
 * would exceed the GPU's texture size. */
int ren_upload_atlas(Ren *r, const float *maps, int n, int map_w, int map_h);
/* mask [map_h, map_w] (the map's size): 1 inside. */
void ren_upload_mask(Ren *r, const uint8_t *mask, int map_w, int map_h);
/* The patches a perturbation test removed: removed [gh, gw], 1 removed (RenFrame.removed). */
void ren_upload_removed(Ren *r, const uint8_t *removed, int grid_w, int grid_h);
/* colormap: an index into colormap_luts. */
void ren_set_colormap(Ren *r, int colormap);

/* Draw the frame into the canvas: only where it differs from the last one (drawlist.h). */
void ren_draw(Ren *r, const RenFrame *f);
/* Show what ren_draw drew: on X11 with GLX_MESA_copy_sub_buffer, the redrawn rectangles
 * copied from the back buffer to the window (the back buffer keeps the frame); else the
 * canvas was copied whole to the back buffer and this swaps. Returns when the X server
 * has it: 0, or 1 when the window's size changed (then this swapped, and the next frame,
 * to be drawn at once, is drawn whole). */
int ren_present(Ren *r);
/* The window lost its pixels (exposed, shown, resized): the next present shows all. */
void ren_expose(Ren *r);
/* While the app is idle: build one more of the shaders a later key will need (one
 * pixel drawn and put back). 1 when it did, 0 when none is left (or no map yet). */
int ren_warm_step(Ren *r);

/* Hit tests against the last frame, framebuffer px. The patch (row, col) of the
 * single view under (x, y): 0, or -1 outside the image. The atlas index of the
 * overview cell under (x, y), or -1. */
int ren_patch_at(const Ren *r, int x, int y, int *row, int *col);
int ren_cell_at(const Ren *r, int x, int y);
/* The row (0: most probable) of the predictions panel under (x, y), or -1. */
int ren_pred_at(const Ren *r, int x, int y);
/* The item of the controls' strip (RenFrame.controls' index) under (x, y), or -1. */
int ren_control_at(const Ren *r, int x, int y);
/* The row of the open menu (RenFrame.menu's index) under (x, y), or -1. */
int ren_menu_at(const Ren *r, int x, int y);
/* The palette's row (RenFrame.palette's index) under (x, y), or -1; is (x, y) on the palette
 * (its field, rows or frame)? */
int ren_palette_at(const Ren *r, int x, int y);
int ren_palette_inside(const Ren *r, int x, int y);

/* The framebuffer as drawn (call after ren_draw, before the swap): RGB
 * [fb_h, fb_w, 3], top row first, malloc'd (free()), or NULL. */
uint8_t *ren_read_rgb(Ren *r, int *w, int *h);
/* The same as RGBA [fb_h, fb_w, 4], top row first, for a recording; malloc'd (free()), or
 * NULL. */
uint8_t *ren_read_rgba(Ren *r, int *w, int *h);

#endif
