/* render.h - the narrow renderer: OpenGL 3.3 core through libepoxy.
 *
 * Three textures carry the picture: the crop the model saw [Sh, Sw] RGB, the map
 * [gh, gw] R32F (normalised to [0, 1]) and the colormap LUT [256] RGB. A key
 * press re-uploads only the map, so switching views costs a few hundred bytes.
 * Everything else (status bar, help, legend) is flat rectangles and text. */
#ifndef VITLENS_RENDER_H
#define VITLENS_RENDER_H

#include "text.h"

#include <SDL.h>
#include <epoxy/gl.h>
#include <stdint.h>

#define REN_TEXT_CACHE 64

typedef struct {
    GLuint tex;
    int w, h, size_px; /* texture px, font px */
    unsigned last_use;
    char str[256];
} RenText;

typedef struct {
    GLuint prog;
    GLint screen, rect, uv;         /* quad.vert.glsl */
    GLint tex0, tex1, tex2;         /* samplers */
    GLint opacity, grid, grid_size; /* heatmap.frag.glsl */
    GLint color, textured;          /* ui.frag.glsl */
} RenProgram;

typedef struct {
    SDL_Window *win;
    GLuint vao;
    RenProgram heat, ui;
    GLuint tex_image, tex_map, tex_lut, tex_ramp;
    int image_w, image_h, grid_w, grid_h; /* of the uploaded textures; 0: no image */
    float map_min, map_max;               /* raw range of the uploaded map, for the legend */
    Text text;
    int has_text;
    RenText cache[REN_TEXT_CACHE];
    unsigned clock;
    int fb_w, fb_h;                               /* framebuffer px of the last frame */
    int image_x, image_y, image_w_px, image_h_px; /* where the crop was drawn, framebuffer px */
    char shader_dir[1024];
} Ren;

/* What to draw besides the image and map (strings UTF-8, NULL: none). */
typedef struct {
    int overlay, grid, help, busy;
    float opacity;
    const char *status_left, *status_right, *error, *placeholder;
    const char *const (*help_rows)[2]; /* [n_help] {key, what} */
    int n_help;
    float spinner_turns; /* spinner phase while busy */
    /* The prefix tokens' share of the map's row (registers, distillation token),
     * drawn as one bar each left of the crop when n_prefix > 1; the map shows the
     * patches only. share[n_prefix], names[n_prefix] ("CLS", "reg1", ...). */
    int n_prefix;
    const float *prefix_share;
    const char *const *prefix_names;
} RenFrame;

/* Compile the shaders (found in $VITLENS_SHADER_DIR, else the source tree's
 * shaders/, else shaders/ next to the executable), make the textures, open the
 * font. Returns 0, or -1 with msg (a shader's compile log included). A missing
 * font is not an error: a warning is written to warn and text is skipped. */
int ren_init(Ren *r, SDL_Window *win, char *msg, size_t msg_bytes, char *warn, size_t warn_bytes);
void ren_free(Ren *r);

void ren_upload_image(Ren *r, const uint8_t *rgb, int w, int h); /* rgb [h, w, 3] */
/* map [gh, gw] normalised to [0, 1]; min/max: its raw range, shown on the legend. */
void ren_upload_map(Ren *r, const float *map, int grid_w, int grid_h, float min, float max);

void ren_draw(Ren *r, const RenFrame *f);

#endif
