/* render.c - OpenGL 3.3 core renderer: the crop + map quad, status bar, help,
 * legend and text. All positions are framebuffer px, origin top-left. */
#include "render/render.h"
#include "render/colormap.h"

#if defined(SDL_VIDEO_DRIVER_X11) && defined(VITLENS_X11)
#include <epoxy/glx.h> /* GLX_MESA_copy_sub_buffer: show only what changed */
#define REN_GLX 1
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef VITLENS_SHADER_DIR_DEFAULT
#define VITLENS_SHADER_DIR_DEFAULT "shaders"
#endif
#ifndef VITLENS_SHADER_DIR_INSTALLED /* share/vitlens/shaders under the install prefix */
#define VITLENS_SHADER_DIR_INSTALLED "/usr/local/share/vitlens/shaders"
#endif

/* --- palette (dark, high contrast for a projector) ------------------------- */

static const float COL_BG[4] = {0.059f, 0.067f, 0.082f, 1.0f};  /* window */
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

/* --- shaders --------------------------------------------------------------- */

static char *read_file(const char *path, char *msg, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, n, "%s: cannot open shader", path);
        return NULL;
    }
    char *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1))) {
        if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
            free(buf);
            buf = NULL;
        } else {
            buf[len] = '\0';
        }
    }
    fclose(f);
    if (!buf) snprintf(msg, n, "%s: cannot read shader", path);
    return buf;
}

/* A shader from src, with `defines` ("#define X\n" lines) after its #version line;
 * `name` in messages. */
static GLuint compile(GLenum type, const char *name, const char *src, const char *defines,
                      char *msg, size_t n) {
    GLuint sh = glCreateShader(type);
    if (!sh) {
        snprintf(msg, n, "%s: glCreateShader failed (GL error 0x%x)", name, glGetError());
        return 0;
    }
    const char *nl = strchr(src, '\n');
    int head = nl ? (int)(nl - src + 1) : 0;
    char line[32]; /* keep the compiler's line numbers those of the file */
    snprintf(line, sizeof line, "#line 2\n");
    const char *srcs[4] = {src, defines, line, src + head};
    GLint lens[4] = {head, -1, -1, -1};
    glShaderSource(sh, 4, srcs, lens);
    glCompileShader(sh);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[3072] = "";
        glGetShaderInfoLog(sh, sizeof log, NULL, log);
        snprintf(msg, n, "%s: shader does not compile%s%s:\n%s", name, *defines ? " with " : "",
                 defines, log);
        glDeleteShader(sh);
        return 0;
    }
    return sh;
}

/* The program of quad.vert.glsl and the fragment shader `frag` (source fs) with
 * `defines`; the uniforms' locations. */
static int link_program(RenProgram *p, const Ren *r, const char *frag, const char *fs,
                        const char *defines, char *msg, size_t n) {
    char name[1200];
    snprintf(name, sizeof name, "%s/quad.vert.glsl", r->shader_dir);
    GLuint vs = compile(GL_VERTEX_SHADER, name, r->vert_src, "", msg, n);
    if (!vs) return -1;
    snprintf(name, sizeof name, "%s/%s", r->shader_dir, frag);
    GLuint fsh = compile(GL_FRAGMENT_SHADER, name, fs, defines, msg, n);
    if (!fsh) {
        glDeleteShader(vs);
        return -1;
    }
    p->prog = glCreateProgram();
    glAttachShader(p->prog, vs);
    glAttachShader(p->prog, fsh);
    glLinkProgram(p->prog);
    glDeleteShader(vs);
    glDeleteShader(fsh);
    GLint ok = 0;
    glGetProgramiv(p->prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[3072] = "";
        glGetProgramInfoLog(p->prog, sizeof log, NULL, log);
        snprintf(msg, n, "%s + quad.vert.glsl: shaders do not link:\n%s", name, log);
        glDeleteProgram(p->prog);
        p->prog = 0;
        return -1;
    }
    p->screen = glGetUniformLocation(p->prog, "u_screen");
    p->rect = glGetUniformLocation(p->prog, "u_rect");
    p->uv = glGetUniformLocation(p->prog, "u_uv");
    p->seg = glGetUniformLocation(p->prog, "u_seg");
    p->seg_w = glGetUniformLocation(p->prog, "u_seg_w");
    p->opacity = glGetUniformLocation(p->prog, "u_opacity");
    p->grid_size = glGetUniformLocation(p->prog, "u_grid_size");
    p->patches = glGetUniformLocation(p->prog, "u_patches");
    p->cell = glGetUniformLocation(p->prog, "u_cell");
    p->query = glGetUniformLocation(p->prog, "u_query");
    p->line_px = glGetUniformLocation(p->prog, "u_line_px");
    p->fill = glGetUniformLocation(p->prog, "u_fill");
    p->color = glGetUniformLocation(p->prog, "u_color");
    p->textured = glGetUniformLocation(p->prog, "u_textured");
    p->round = glGetUniformLocation(p->prog, "u_round");
    glUseProgram(p->prog);
    glUniform1i(glGetUniformLocation(p->prog, "u_image"), 0);
    glUniform1i(glGetUniformLocation(p->prog, "u_map"), 1);
    glUniform1i(glGetUniformLocation(p->prog, "u_lut"), 2);
    glUniform1i(glGetUniformLocation(p->prog, "u_mask"), 3);
    glUniform1i(glGetUniformLocation(p->prog, "u_removed"), 4);
    glUniform1i(glGetUniformLocation(p->prog, "u_tex"), 0);
    glUniform4f(p->uv, 0.0f, 0.0f, 1.0f, 1.0f);
    return 0;
}

/* The heat map program of a combination of features (REN_HV_* bits), compiled the
 * first time it is asked for; NULL when it does not build (said on stderr once). */
static const RenProgram *heat_program(Ren *r, int variant) {
    static const char *const names[REN_HV_BITS] = {"BILINEAR", "RGB",  "RAMP",  "REMOVED",
                                                   "GRID",     "MASK", "QUERY", "MINIFY"};
    RenProgram *p = &r->heat[variant];
    if (p->prog) return p;
    if (r->heat_failed[variant]) return NULL;
    char defines[256] = "", msg[4096];
    for (int b = 0; b < REN_HV_BITS; b++)
        if (variant & (1 << b)) {
            size_t k = strlen(defines);
            snprintf(defines + k, sizeof defines - k, "#define %s\n", names[b]);
        }
    if (link_program(p, r, "heatmap.frag.glsl", r->heat_src, defines, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        snprintf(r->heat_msg, sizeof r->heat_msg, "%s", msg);
        r->heat_failed[variant] = 1;
        return NULL;
    }
    return p;
}

static int has_shaders(const char *dir) {
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/quad.vert.glsl", dir);
    return stat(path, &st) == 0;
}

/* $VITLENS_SHADER_DIR (only it, when set), else the source tree, else next to the binary,
 * else the installed share/vitlens/shaders. */
static int find_shader_dir(char *dir, size_t n, char *msg, size_t msg_bytes) {
    const char *env = getenv("VITLENS_SHADER_DIR");
    if (env && *env) {
        snprintf(dir, n, "%s", env);
        if (has_shaders(dir)) return 0;
        snprintf(msg, msg_bytes, "VITLENS_SHADER_DIR=%s: no quad.vert.glsl there", env);
        return -1;
    }
    snprintf(dir, n, "%s", VITLENS_SHADER_DIR_DEFAULT);
    if (has_shaders(dir)) return 0;
    char *base = SDL_GetBasePath();
    if (base) {
        snprintf(dir, n, "%sshaders", base);
        SDL_free(base);
        if (has_shaders(dir)) return 0;
    }
    snprintf(dir, n, "%s", VITLENS_SHADER_DIR_INSTALLED);
    if (has_shaders(dir)) return 0;
    snprintf(msg, msg_bytes,
             "cannot find the shaders: looked in %s, shaders/ next to the executable and %s; "
             "set VITLENS_SHADER_DIR",
             VITLENS_SHADER_DIR_DEFAULT, VITLENS_SHADER_DIR_INSTALLED);
    return -1;
}

/* --- textures -------------------------------------------------------------- */

static GLuint make_texture(GLint min_filter, GLint mag_filter) {
    GLuint t = 0;
    glGenTextures(1, &t);
    glBindTexture(GL_TEXTURE_2D, t);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, min_filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, mag_filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    return t;
}

int ren_init(Ren *r, SDL_Window *win, char *msg, size_t msg_bytes, char *warn, size_t warn_bytes) {
    memset(r, 0, sizeof *r);
    r->win = win;
    warn[0] = '\0';
    if (find_shader_dir(r->shader_dir, sizeof r->shader_dir, msg, msg_bytes)) return -1;
    char path[1200], *ui_src = NULL;
    snprintf(path, sizeof path, "%s/quad.vert.glsl", r->shader_dir);
    if (!(r->vert_src = read_file(path, msg, msg_bytes))) goto fail;
    snprintf(path, sizeof path, "%s/heatmap.frag.glsl", r->shader_dir);
    if (!(r->heat_src = read_file(path, msg, msg_bytes))) goto fail;
    snprintf(path, sizeof path, "%s/ui.frag.glsl", r->shader_dir);
    if (!(ui_src = read_file(path, msg, msg_bytes))) goto fail;
    int bad = link_program(&r->ui, r, "ui.frag.glsl", ui_src, "", msg, msg_bytes);
    free(ui_src);
    if (bad) goto fail;
    if (!heat_program(r, 0)) { /* the plain view's; the others when first drawn */
        snprintf(msg, msg_bytes, "%s", r->heat_msg);
        goto fail;
    }
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

    glGenVertexArrays(1, &r->vao); /* core profile draws need a bound VAO, even an empty one */
    /* the crop: mipmapped, so that the overview's thumbnails do not alias */
    r->tex_image_mip = make_texture(GL_LINEAR_MIPMAP_LINEAR, GL_LINEAR);
    r->tex_image = make_texture(GL_LINEAR, GL_LINEAR); /* the same, no mipmaps: cheaper */
    r->tex_map = make_texture(GL_NEAREST, GL_NEAREST); /* read with texelFetch */
    r->tex_atlas = make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_mask = make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_lut = make_texture(GL_NEAREST, GL_NEAREST);
    r->tex_removed = make_texture(GL_NEAREST, GL_NEAREST);
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
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, 3, 3, 0, GL_RGB, GL_UNSIGNED_BYTE, grey);
    glGenerateMipmap(GL_TEXTURE_2D);
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
        goto fail;
    }
    r->has_text = text_init(&r->text, warn, warn_bytes) == 0;
    SDL_GL_GetDrawableSize(win, &r->shown_w, &r->shown_h); /* Mesa sized the back buffer so */
    r->warm = 1;
    return 0;
fail:
    ren_free(r);
    return -1;
}

static void free_canvas(GLuint *fbo, GLuint *tex, int *w, int *h) {
    if (*fbo) glDeleteFramebuffers(1, fbo);
    if (*tex) glDeleteTextures(1, tex);
    *fbo = *tex = 0;
    *w = *h = 0;
}

void ren_free(Ren *r) {
    if (!r) return;
    for (int i = 0; i < REN_TEXT_CACHE; i++)
        if (r->cache[i].tex) glDeleteTextures(1, &r->cache[i].tex);
    GLuint tex[7] = {r->tex_image, r->tex_image_mip, r->tex_map,    r->tex_lut,
                     r->tex_atlas, r->tex_mask,      r->tex_removed};
    for (int i = 0; i < 7; i++)
        if (tex[i]) glDeleteTextures(1, &tex[i]);
    free_canvas(&r->canvas_fbo, &r->canvas_tex, &r->canvas_w, &r->canvas_h);
    free_canvas(&r->check_fbo, &r->check_tex, &r->check_w, &r->check_h);
    if (r->vao) glDeleteVertexArrays(1, &r->vao);
    for (int i = 0; i < (1 << REN_HV_BITS); i++)
        if (r->heat[i].prog) glDeleteProgram(r->heat[i].prog);
    if (r->ui.prog) glDeleteProgram(r->ui.prog);
    if (r->has_text) text_free(&r->text);
    free(r->vert_src), free(r->heat_src), free(r->prims);
    dl_free(&r->dl);
    memset(r, 0, sizeof *r);
}

void ren_upload_image(Ren *r, const uint8_t *rgb, int w, int h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_image);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    glBindTexture(GL_TEXTURE_2D, r->tex_image_mip);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    glGenerateMipmap(GL_TEXTURE_2D);
    r->gen_image = ++r->gen;
    r->image_w = w;
    r->image_h = h;
}

void ren_upload_map(Ren *r, const float *map, int map_w, int map_h, int grid_w, int grid_h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glBindTexture(GL_TEXTURE_2D, r->tex_map);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, map_w, map_h, 0, GL_RED, GL_FLOAT, map);
    r->gen_map = ++r->gen;
    r->map_w = map_w, r->map_h = map_h;
    r->grid_w = grid_w, r->grid_h = grid_h;
    r->map_rgba = 0;
}

void ren_upload_map_rgba(Ren *r, const float *rgba, int map_w, int map_h, int grid_w, int grid_h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glBindTexture(GL_TEXTURE_2D, r->tex_map);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA32F, map_w, map_h, 0, GL_RGBA, GL_FLOAT, rgba);
    r->gen_map = ++r->gen;
    r->map_w = map_w, r->map_h = map_h;
    r->grid_w = grid_w, r->grid_h = grid_h;
    r->map_rgba = 1;
}

int ren_upload_atlas(Ren *r, const float *maps, int n, int map_w, int map_h) {
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

void ren_set_colormap(Ren *r, int colormap) {
    if (colormap < 0 || colormap >= COLORMAP_COUNT) colormap = 0;
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_lut);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, COLORMAP_SIZE, 1, 0, GL_RGB, GL_UNSIGNED_BYTE,
                 colormap_luts[colormap]);
    r->gen_lut = ++r->gen;
}

/* --- the frame as a list of primitives -------------------------------------
 *
 * The drawing functions below do not draw: they record primitives. ren_draw then
 * replays, into the canvas (an offscreen framebuffer that keeps the last frame),
 * only the rectangles where this frame's primitives differ from the last one's
 * (drawlist.h), and copies the canvas to the window. */

typedef enum { PR_FILL = 1, PR_DISC, PR_SEG, PR_TEXT, PR_HEAT } RenPrimKind;

struct RenPrim {
    int kind;       /* RenPrimKind */
    int variant;    /* PR_HEAT: REN_HV_* bits */
    int slot;       /* PR_TEXT: the text cache's slot */
    int cell;       /* PR_HEAT: the atlas' map, -1: the map texture */
    float rect[4];  /* x, y, w, h px (PR_SEG: unused) */
    float color[4]; /* RGBA */
    float seg[4];   /* PR_SEG: x0, y0, x1, y1 px */
    float seg_w;    /* PR_SEG: px */
    int cell_xy[2]; /* PR_HEAT: texel origin of the map */
    int query[2];   /* PR_HEAT: the query patch (col, row) */
    float opacity, line_px, grid_size[2], patches[2], fill[3];
    uint64_t content; /* what the textures hold: the text and its size, the uploads */
};

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
    DlBox box = {(int)floorf(x0) - 1, (int)floorf(y0) - 1, (int)ceilf(x1) + 1, (int)ceilf(y1) + 1};
    if (dl_add(&r->dl, dl_hash(DL_HASH_SEED, p, sizeof *p), box) >= 0) r->n_prims++;
}

static void fill(Ren *r, float x, float y, float w, float h, const float c[4]) {
    RenPrim *p = prim_new(r, PR_FILL);
    if (!p) return;
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

static void disc(Ren *r, float cx, float cy, float d, const float c[4]) {
    RenPrim *p = prim_new(r, PR_DISC);
    if (!p) return;
    p->rect[0] = cx - d / 2, p->rect[1] = cy - d / 2, p->rect[2] = d, p->rect[3] = d;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

/* A line segment from (x0, y0) to (x1, y1), w px wide, anti-aliased along its sides. */
static void segment(Ren *r, float x0, float y0, float x1, float y1, float w, const float c[4]) {
    RenPrim *p = prim_new(r, PR_SEG);
    if (!p) return;
    p->seg[0] = x0, p->seg[1] = y0, p->seg[2] = x1, p->seg[3] = y1, p->seg_w = w;
    memcpy(p->color, c, sizeof p->color);
    prim_add(r, p);
}

/* A frame of width t around (x, y, w, h), outside it. */
static void frame(Ren *r, float x, float y, float w, float h, float t, const float c[4]) {
    fill(r, x - t, y - t, w + 2 * t, t, c);
    fill(r, x - t, y + h, w + 2 * t, t, c);
    fill(r, x - t, y, t, h, c);
    fill(r, x + w, y, t, h, c);
}

/* The texture of str at size_px, rendered once and kept in a small LRU cache. A slot
 * this frame has drawn is not given to another text before the frame is replayed;
 * NULL when all are (the text is not drawn). */
static const RenText *text_get(Ren *r, const char *str, int size_px) {
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
    SDL_Surface *s = text_render(&r->text, str, size_px);
    if (!s) return NULL;
    if (!slot->tex) slot->tex = make_texture(GL_LINEAR, GL_LINEAR);
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
static void draw_text(Ren *r, const RenText *t, float x, float y, float scale, const float c[4]) {
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
static float text_fit(Ren *r, const char *str, int size_px, float x, float y, float h, float max_w,
                      const float c[4]) {
    const RenText *t = text_get(r, str, size_px);
    if (!t) return 0.0f;
    float s = max_w > 0 && (float)t->w > max_w ? max_w / (float)t->w : 1.0f;
    draw_text(r, t, x, y + (h - (float)t->h * s) * 0.5f, s, c);
    return (float)t->w * s;
}

static float text_line(Ren *r, const char *str, int size_px, float x, float y, float h,
                       const float c[4]) {
    return text_fit(r, str, size_px, x, y, h, 0.0f, c);
}

static float text_width(Ren *r, const char *str, int size_px) {
    const RenText *t = text_get(r, str, size_px);
    return t ? (float)t->w : 0.0f;
}

/* Eight dots on a circle, the brightest one going round. */
static void spinner(Ren *r, float cx, float cy, float radius, float turns) {
    for (int i = 0; i < 8; i++) {
        float a = (float)i / 8.0f * 6.2831853f;
        float age = fmodf(turns * 8.0f - (float)i + 16.0f, 8.0f) / 8.0f; /* 0: newest */
        float c[4] = {COL_ACCENT[0], COL_ACCENT[1], COL_ACCENT[2], 1.0f - 0.85f * age};
        float d = radius * 0.42f;
        fill(r, cx + sinf(a) * radius - d / 2, cy - cosf(a) * radius - d / 2, d, d, c);
    }
}

/* One map over the crop at (x, y, w, h): the main view or a thumbnail. cell: atlas
 * index, -1: the single map texture. */
static void draw_heat(Ren *r, const RenFrame *f, float x, float y, float w, float h, int cell,
                      int main_view) {
    RenPrim *p = prim_new(r, PR_HEAT);
    if (!p) return;
    /* The shader reads the map and its mask at the map's size (u_grid_size: the patch
     * grid [gh, gw], or [Sh, Sw] for a pixel map), and draws the patch grid lines and
     * the query box on the patch grid (u_patches) over either. */
    int mw = cell < 0 ? r->map_w : r->atlas_w, mh = cell < 0 ? r->map_h : r->atlas_h;
    if (cell >= 0 && r->atlas_cols > 0)
        p->cell_xy[0] = (cell % r->atlas_cols) * mw, p->cell_xy[1] = (cell / r->atlas_cols) * mh;
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
    if (w < (float)r->image_w || h < (float)r->image_h) v |= REN_HV_MINIFY;
    p->variant = v;
    p->cell = cell;
    p->opacity = f->overlay ? f->opacity : 0.0f;
    p->grid_size[0] = (float)mw, p->grid_size[1] = (float)mh;
    p->patches[0] = (float)(r->grid_w > 0 ? r->grid_w : mw);
    p->patches[1] = (float)(r->grid_h > 0 ? r->grid_h : mh);
    p->query[0] = f->query_col, p->query[1] = f->query_row;
    if (removed) memcpy(p->fill, f->fill_rgb, sizeof p->fill);
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    unsigned long gens[5] = {r->gen_image, cell < 0 ? r->gen_map : r->gen_atlas, r->gen_lut,
                             v & REN_HV_MASK ? r->gen_mask : 0, removed ? r->gen_removed : 0};
    p->content = dl_hash(DL_HASH_SEED, gens, sizeof gens);
    prim_add(r, p);
}

/* The colour bar at (x, y, w, h): the colormap, its maximum at the top. */
static void draw_ramp(Ren *r, float x, float y, float w, float h) {
    RenPrim *p = prim_new(r, PR_HEAT);
    if (!p) return;
    p->variant = REN_HV_RAMP;
    p->opacity = 1.0f;
    p->rect[0] = x, p->rect[1] = y, p->rect[2] = w, p->rect[3] = h;
    p->content = r->gen_lut;
    prim_add(r, p);
}

/* --- replaying the list ---------------------------------------------------- */

static void replay(Ren *r, const RenPrim *p) {
    const float W = (float)r->fb_w, H = (float)r->fb_h;
    if (p->kind == PR_HEAT) {
        const RenProgram *g = heat_program(r, p->variant);
        if (!g) return;
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
        glBindTexture(GL_TEXTURE_2D, p->variant & REN_HV_MINIFY ? r->tex_image_mip : r->tex_image);
        glUniform2f(g->screen, W, H);
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
    glUniform1f(g->textured, p->kind == PR_TEXT ? 1.0f : 0.0f);
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
    if (!((p->kind == PR_HEAT && heat_program(r, p->variant)) ||
          (p->kind == PR_FILL && p->color[3] >= 1.0f)))
        return none;
    const float *q = p->rect;
    if (q[0] != floorf(q[0]) || q[1] != floorf(q[1]) || q[2] != floorf(q[2]) ||
        q[3] != floorf(q[3]))
        return none;
    DlBox b = {(int)q[0], (int)q[1], (int)(q[0] + q[2]), (int)(q[1] + q[3])};
    return b;
}

static void clear_box(const Ren *r, DlBox b) {
    if (b.x1 <= b.x0 || b.y1 <= b.y0) return;
    glScissor(b.x0, r->fb_h - b.y1, b.x1 - b.x0, b.y1 - b.y0);
    glClear(GL_COLOR_BUFFER_BIT);
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
        glScissor(b.x0, r->fb_h - b.y1, b.x1 - b.x0, b.y1 - b.y0);
    }
    for (int i = 0; i < r->n_prims; i++)
        if (!box || dl_overlap(r->dl.box[i], *box)) replay(r, &r->prims[i]);
    glDisable(GL_SCISSOR_TEST);
}

/* An offscreen framebuffer of w x h RGBA8 in *fbo, *tex (kept while the size holds).
 * 0, or -1 when it cannot be made. */
static int offscreen(GLuint *fbo, GLuint *tex, int *cw, int *ch, int w, int h) {
    if (*fbo && *cw == w && *ch == h) return 0;
    free_canvas(fbo, tex, cw, ch);
    glGenTextures(1, tex);
    glBindTexture(GL_TEXTURE_2D, *tex);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, NULL);
    glGenFramebuffers(1, fbo);
    glBindFramebuffer(GL_FRAMEBUFFER, *fbo);
    glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, *tex, 0);
    int ok = glCheckFramebufferStatus(GL_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE;
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    if (!ok || glGetError() != GL_NO_ERROR) {
        free_canvas(fbo, tex, cw, ch);
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
        for (size_t i = 0; i < n; i += 4) bad += memcmp(a + i, b + i, 3) != 0;
    }
    free(a), free(b);
    return bad;
}

/* The recorded frame into the canvas (only what changed) and on to the window's back
 * buffer. Without a canvas, the whole frame is drawn straight into the window. */
static void flush(Ren *r) {
    glViewport(0, 0, r->fb_w, r->fb_h);
    glEnable(GL_BLEND);
    glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
    glBindVertexArray(r->vao);
    int canvas =
        !offscreen(&r->canvas_fbo, &r->canvas_tex, &r->canvas_w, &r->canvas_h, r->fb_w, r->fb_h);
    if (!canvas) dl_invalidate(&r->dl);
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
    if (r->check_redraw && n >= 0 &&
        !offscreen(&r->check_fbo, &r->check_tex, &r->check_w, &r->check_h, r->fb_w, r->fb_h)) {
        glBindFramebuffer(GL_FRAMEBUFFER, r->check_fbo);
        replay_box(r, NULL);
        r->last_mismatch = canvas_mismatch(r);
    }
    if (r->canvas_fbo) {
        glBindFramebuffer(GL_READ_FRAMEBUFFER, r->canvas_fbo);
        glBindFramebuffer(GL_DRAW_FRAMEBUFFER, 0);
        glBlitFramebuffer(0, 0, r->fb_w, r->fb_h, 0, 0, r->fb_w, r->fb_h, GL_COLOR_BUFFER_BIT,
                          GL_NEAREST);
    }
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
}

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
    p.rect[0] = 0, p.rect[1] = (float)r->fb_h - 1, p.rect[2] = p.rect[3] = 1;
    p.grid_size[0] = (float)r->map_w, p.grid_size[1] = (float)r->map_h;
    p.patches[0] = (float)r->grid_w, p.patches[1] = (float)r->grid_h;
    replay(r, &p);
    glClearColor(px[0] / 255.0f, px[1] / 255.0f, px[2] / 255.0f, px[3] / 255.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    glDisable(GL_SCISSOR_TEST);
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    return 1;
}

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
        for (int i = 0; i < (all ? 1 : r->n_show); i++) {
            const DlBox *b = all ? &whole : &r->show[i];
            glXCopySubBufferMESA(dpy, (GLXDrawable)r->x_drawable, b->x0, r->fb_h - b->y1,
                                 b->x1 - b->x0, b->y1 - b->y0);
        }
        XSync(dpy, False); /* on the screen when this returns, as after a swap */
        r->n_show = 0;
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

/* --- the frame ------------------------------------------------------------- */

/* Size of the help panel at font size px: width, height; key column width. */
static void help_size(Ren *r, const RenFrame *f, int px, float *w, float *h, float *key_w) {
    float kw = 0, ww = 0;
    for (int i = 0; i < f->n_help; i++) {
        const RenText *k = text_get(r, f->help_rows[i][0], px);
        const RenText *d = text_get(r, f->help_rows[i][1], px);
        if (k && k->w > kw) kw = (float)k->w;
        if (d && d->w > ww) ww = (float)d->w;
    }
    *key_w = kw;
    *w = (float)px * (1.2f * 2 + 1.5f) + kw + ww;
    *h = (float)px * (1.2f * 2 + 2.2f + 1.5f * (float)f->n_help);
}

/* The key list in a panel centred on the window; smaller text if it does not fit. */
static void draw_help(Ren *r, const RenFrame *f, int px) {
    float pw, ph, key_w;
    help_size(r, f, px, &pw, &ph, &key_w);
    float room_w = (float)r->fb_w * 0.96f, room_h = (float)r->fb_h * 0.94f;
    if (pw > room_w || ph > room_h) {
        float s = room_w / pw < room_h / ph ? room_w / pw : room_h / ph;
        px = (int)((float)px * s);
        if (px < 6) px = 6;
        help_size(r, f, px, &pw, &ph, &key_w);
    }
    float pad = (float)px * 1.2f, gap = (float)px * 1.5f, row_h = (float)px * 1.5f;
    float x = floorf(((float)r->fb_w - pw) / 2), y = floorf(((float)r->fb_h - ph) / 2);
    if (x < 0) x = 0;
    if (y < 0) y = 0;
    fill(r, x, y, pw, ph, COL_PANEL);
    fill(r, x, y, pw, roundf((float)px * 0.15f) + 1, COL_ACCENT);
    text_line(r, "vitlens \xe2\x80\x94 keys", (int)((float)px * 1.3f), x + pad, y + pad,
              (float)px * 1.8f, COL_ACCENT);
    for (int i = 0; i < f->n_help; i++) {
        float ry = y + pad + (float)px * 2.2f + row_h * (float)i;
        text_line(r, f->help_rows[i][0], px, x + pad, ry, row_h, COL_ACCENT);
        text_line(r, f->help_rows[i][1], px, x + pad + key_w + gap, ry, row_h, COL_TEXT);
    }
}

/* The prefix tokens' share of the row, one row each: name and percentage above
 * a bar whose full width is 100%; then what is left for the patches (the map). */
static void draw_prefix(Ren *r, const RenFrame *f, float x, float y, float w, float h,
                        int font_px) {
    int n = f->n_prefix + 1, px = (int)(font_px * 0.8f);
    float row_h = floorf(h / (float)n), max_row = (float)font_px * 2.6f;
    if (row_h > max_row) row_h = max_row;
    float bar_h = roundf(row_h * 0.32f), text_h = row_h - bar_h - roundf(row_h * 0.18f);
    if (bar_h < 3 || text_h < 6) return;
    double rest = 1.0;
    for (int i = 0; i < n; i++) {
        double share = i < f->n_prefix ? (double)f->prefix_share[i] : rest;
        if (i < f->n_prefix) rest -= share;
        share = share < 0 ? 0 : share > 1 ? 1 : share;
        char pct[16];
        snprintf(pct, sizeof pct, "%.0f%%", 100.0 * share);
        float ry = y + row_h * (float)i;
        const char *name = i < f->n_prefix ? f->prefix_names[i] : "patches";
        text_line(r, name, px, x, ry, text_h, i < f->n_prefix ? COL_TEXT : COL_DIM);
        const RenText *t = text_get(r, pct, px);
        if (t)
            draw_text(r, t, x + w - (float)t->w, ry + (text_h - (float)t->h) * 0.5f, 1.0f, COL_DIM);
        fill(r, x, ry + text_h, w, bar_h, COL_EMPTY);
        fill(r, x, ry + text_h, roundf(w * (float)share), bar_h,
             i < f->n_prefix ? COL_ACCENT : COL_DIM);
    }
}

/* The colour bar: the colormap from the maximum (top) to the minimum, labelled. */
static void draw_legend(Ren *r, const RenFrame *f, float x, float y, float h, int font_px) {
    int px = (int)((float)font_px * 0.8f);
    const RenText *th = text_get(r, f->legend_hi, px), *tl = text_get(r, f->legend_lo, px);
    const RenText *tc = text_get(r, f->legend_caption, (int)((float)px * 0.85f));
    float label_h = th ? (float)th->h : (float)px;
    float cap_h = tc ? (float)tc->h * 1.1f : 0.0f;
    float bar_w = (float)font_px * 0.8f, bar_y = y + cap_h + label_h * 1.2f;
    float bar_h = h - cap_h - label_h * 2.4f;
    if (bar_h < 20) return;
    draw_text(r, tc, x, y, 1.0f, COL_DIM);
    fill(r, x - 1, bar_y - 1, bar_w + 2, bar_h + 2, COL_DIM);
    draw_ramp(r, x, bar_y, bar_w, bar_h);
    draw_text(r, th, x, y + cap_h, 1.0f, COL_DIM);
    draw_text(r, tl, x, y + h - label_h, 1.0f, COL_DIM);
}

/* The overview: n_cols x n_rows thumbnails in (x, y, w, h), labelled. */
static void draw_cells(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px) {
    int table = f->col_labels || f->row_labels;
    int lpx = (int)((float)font_px * 0.75f);
    float row_lab_w = 0, col_lab_h = 0;
    if (f->row_labels)
        for (int i = 0; i < f->n_rows; i++) {
            float tw = text_width(r, f->row_labels[i], lpx) + (float)lpx * 0.6f;
            if (tw > row_lab_w) row_lab_w = tw;
        }
    if (f->col_labels) col_lab_h = (float)lpx * 1.5f;
    float gap = floorf((float)font_px * (table ? 0.15f : 0.35f)) + 1;
    /* cells at the crop's aspect ratio, as large as both directions allow */
    float aspect = r->image_h ? (float)r->image_w / (float)r->image_h : 1.0f; /* w / h */
    float room_w = (w - row_lab_w) / (float)f->n_cols - gap;
    float room_h = (h - col_lab_h) / (float)f->n_rows - gap;
    float cell_w = floorf(fminf(room_w, room_h * aspect)), cell_h = floorf(cell_w / aspect);
    if (cell_w < 4) cell_w = 4;
    if (cell_h < 4) cell_h = 4;
    float step_x = cell_w + gap, step_y = cell_h + gap;
    float gw = row_lab_w + step_x * (float)f->n_cols, gh = col_lab_h + step_y * (float)f->n_rows;
    float x0 = floorf(x + (w - gw) / 2 + row_lab_w), y0 = floorf(y + (h - gh) / 2 + col_lab_h);
    r->cells_x = (int)x0, r->cells_y = (int)y0;
    r->cell_w_px = (int)cell_w, r->cell_h_px = (int)cell_h;
    r->cell_step_x = (int)step_x, r->cell_step_y = (int)step_y;
    r->n_cols = f->n_cols, r->n_rows = f->n_rows;
    r->col_stride = f->col_stride, r->row_stride = f->row_stride;
    r->n_cells = r->atlas_maps;
    for (int row = 0; row < f->n_rows; row++) {
        for (int col = 0; col < f->n_cols; col++) {
            int k = col * f->col_stride + row * f->row_stride;
            if (k >= r->atlas_maps) continue;
            float cx = x0 + step_x * (float)col, cy = y0 + step_y * (float)row;
            draw_heat(r, f, cx, cy, cell_w, cell_h, k, 0);
            if (k == f->selected) {
                float t = floorf((float)font_px * 0.15f) + 2;
                frame(r, cx, cy, cell_w, cell_h, t, COL_ACCENT);
            }
            if (!table && f->cell_labels && f->cell_labels[k]) {
                const RenText *t = text_get(r, f->cell_labels[k], font_px);
                if (t) {
                    float pad = (float)font_px * 0.25f;
                    fill(r, cx, cy, (float)t->w + 2 * pad, (float)t->h + pad, COL_TIP);
                    draw_text(r, t, cx + pad, cy + pad * 0.5f, 1.0f, COL_TEXT);
                }
            }
        }
    }
    for (int col = 0; f->col_labels && col < f->n_cols; col++)
        if (f->col_labels[col]) {
            float tw = text_width(r, f->col_labels[col], lpx);
            text_line(r, f->col_labels[col], lpx, x0 + step_x * (float)col + (cell_w - tw) / 2,
                      y0 - col_lab_h, col_lab_h, COL_DIM);
        }
    if (f->col_labels && f->row_labels)
        text_line(r, "layer", lpx, x0 - row_lab_w, y0 - col_lab_h, col_lab_h, COL_DIM);
    for (int row = 0; f->row_labels && row < f->n_rows; row++)
        if (f->row_labels[row])
            text_line(r, f->row_labels[row], lpx, x0 - row_lab_w, y0 + step_y * (float)row, cell_h,
                      COL_DIM);
}

/* Predictions: "top-5", then per class its name, probability and a bar. */
static float draw_preds(Ren *r, const RenFrame *f, float x, float y, float w, int font_px) {
    float pad = (float)font_px * 0.6f, row_h = (float)font_px * 2.15f;
    float h = pad * 2 + (float)font_px * 1.6f + row_h * (float)f->n_preds;
    fill(r, x, y, w, h, COL_SIDE);
    text_fit(r, f->pred_title ? f->pred_title : "top-5 predictions", font_px, x + pad, y + pad,
             (float)font_px * 1.4f, w - 2 * pad, COL_ACCENT);
    float px = (float)font_px * 0.85f;
    r->pred_y0 = (int)(y + pad + (float)font_px * 1.6f), r->pred_row_h = (int)row_h;
    r->n_pred_rows = f->n_preds;
    for (int i = 0; i < f->n_preds; i++) {
        float ry = y + pad + (float)font_px * 1.6f + row_h * (float)i;
        if (i == f->pred_marked) { /* the explained class: a frame and a bar at the left */
            float fy = ry - pad * 0.35f, fh = row_h - pad * 0.2f, t = (float)font_px * 0.12f + 1;
            fill(r, x + pad * 0.3f, fy, w - pad * 0.6f, t, COL_ACCENT);
            fill(r, x + pad * 0.3f, fy + fh - t, w - pad * 0.6f, t, COL_ACCENT);
            fill(r, x + pad * 0.3f, fy, t, fh, COL_ACCENT);
            fill(r, x + w - pad * 0.3f - t, fy, t, fh, COL_ACCENT);
        }
        char pct[32];
        snprintf(pct, sizeof pct, "%.1f%%", 100.0 * (double)f->pred_probs[i]);
        float pw = text_width(r, pct, (int)px);
        text_line(r, pct, (int)px, x + w - pad - pw, ry, px * 1.4f, COL_TEXT);
        text_fit(r, f->pred_labels[i], (int)px, x + pad, ry, px * 1.4f, w - 3 * pad - pw,
                 i == 0 || i == f->pred_marked ? COL_TEXT : COL_DIM);
        float by = ry + px * 1.45f, bh = floorf((float)font_px * 0.38f) + 1, bw = w - 2 * pad;
        fill(r, x + pad, by, bw, bh, COL_TRACK);
        float p = f->pred_probs[i] < 0 ? 0 : f->pred_probs[i] > 1 ? 1 : f->pred_probs[i];
        fill(r, x + pad, by, roundf(bw * p), bh, i == 0 ? COL_ACCENT : COL_DIM);
    }
    return h;
}

/* The list panel: a title, then rows of a label, a value at the right and a thin bar
 * (values in [0, 1]); the marked row framed. As many rows as fit in max_h, around the
 * marked one. Returns the height drawn. */
static float draw_list(Ren *r, const RenFrame *f, float x, float y, float w, float max_h,
                       int font_px) {
    float pad = (float)font_px * 0.6f, px = (float)font_px * 0.8f, row_h = px * 1.75f;
    float head = pad + (float)font_px * 1.6f;
    int fit = (int)((max_h - head - pad) / row_h), n = f->n_list, first = 0;
    if (fit < 1) return 0.0f;
    if (n > fit) {
        first = f->list_marked >= 0 ? f->list_marked - fit / 2 : n - fit;
        first = first < 0 ? 0 : first > n - fit ? n - fit : first;
        n = fit;
    }
    float h = head + row_h * (float)n + pad;
    fill(r, x, y, w, h, COL_SIDE);
    text_fit(r, f->list_title ? f->list_title : "", font_px, x + pad, y + pad,
             (float)font_px * 1.4f, w - 2 * pad, COL_ACCENT);
    r->list_x = (int)x, r->list_y = (int)y, r->list_w = (int)w, r->list_h = (int)h;
    for (int k = 0; k < n; k++) {
        int i = first + k;
        float ry = y + head + row_h * (float)k;
        if (i == f->list_marked) {
            float t = (float)font_px * 0.1f + 1;
            frame(r, x + pad * 0.3f, ry - t, w - pad * 0.6f, row_h, t, COL_ACCENT);
        }
        const char *right = f->list_right ? f->list_right[i] : NULL;
        float rw = right ? text_width(r, right, (int)px) : 0.0f;
        if (right) text_line(r, right, (int)px, x + w - pad - rw, ry, px * 1.3f, COL_TEXT);
        text_fit(r, f->list_labels[i], (int)px, x + pad, ry, px * 1.3f, w - 3 * pad - rw,
                 i == f->list_marked ? COL_TEXT : COL_DIM);
        float by = ry + px * 1.35f, bh = floorf((float)font_px * 0.22f) + 1, bw = w - 2 * pad;
        float v = f->list_values ? f->list_values[i] : 0.0f;
        v = v < 0 ? 0 : v > 1 ? 1 : v;
        fill(r, x + pad, by, bw, bh, COL_TRACK);
        fill(r, x + pad, by, roundf(bw * v), bh, i == f->list_marked ? COL_ACCENT : COL_DIM);
    }
    return h;
}

/* Mean attention distance, the ViT paper's Fig. 7: layer on x, px on y, a dot
 * per head; the current layer's heads white, the current head yellow. */
static void draw_distance(Ren *r, const RenFrame *f, float x, float y, float w, float h,
                          int font_px) {
    fill(r, x, y, w, h, COL_SIDE);
    float pad = (float)font_px * 0.6f;
    int spx = (int)((float)font_px * 0.75f);
    text_fit(r, "mean attention distance (px)", font_px, x + pad, y + pad, (float)font_px * 1.4f,
             w - 2 * pad, COL_ACCENT);
    float ax_w = text_width(r, "000", spx) + (float)spx * 0.5f;
    float px0 = x + pad + ax_w, py0 = y + pad + (float)font_px * 2.0f;
    float pw = w - 2 * pad - ax_w, ph = h - (py0 - y) - pad - (float)spx * 1.6f -
                                        (f->dist_caption ? (float)font_px * 1.5f : 0.0f);
    if (pw < 20 || ph < 20) return;
    int L = f->dist_layers, H = f->dist_heads;
    float ymax = f->dist_max_px > 0 ? f->dist_max_px : 1.0f;
    /* axes, the y ticks at 0, 1/2 and the top, the current layer's band */
    float step = pw / (float)L;
    fill(r, px0 + step * (float)f->dist_layer, py0, step, ph, COL_TRACK);
    fill(r, px0, py0 + ph, pw, 1, COL_DIM);
    fill(r, px0, py0, 1, ph, COL_DIM);
    for (int t = 0; t <= 2; t++) {
        char lab[16];
        snprintf(lab, sizeof lab, "%.0f", (double)(ymax * (float)t / 2.0f));
        float ty = py0 + ph * (1.0f - (float)t / 2.0f);
        float tw = text_width(r, lab, spx);
        text_line(r, lab, spx, px0 - tw - (float)spx * 0.4f, ty - (float)spx, (float)spx * 2,
                  COL_DIM);
        fill(r, px0 - 3, ty, 3, 1, COL_DIM);
    }
    char lab[32];
    snprintf(lab, sizeof lab, "layer 1 \xe2\x80\xa6 %d", L);
    float tw = text_width(r, lab, spx);
    text_line(r, lab, spx, px0 + (pw - tw) / 2, py0 + ph + 2, (float)spx * 1.5f, COL_DIM);
    float dot = floorf((float)font_px * 0.42f) + 2;
    if (dot > step * 0.9f) dot = step * 0.9f < 3 ? 3 : step * 0.9f;
    for (int pass = 0; pass < 3; pass++) /* others, then the current layer, then the head */
        for (int l = 0; l < L; l++)
            for (int hh = 0; hh < H; hh++) {
                int cur_layer = l == f->dist_layer, cur_head = cur_layer && hh == f->dist_head;
                if ((pass == 0) != !cur_layer || (pass == 2) != cur_head) continue;
                float v = f->distance[l * H + hh] / ymax;
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                float cx = px0 + step * ((float)l + 0.5f), cy = py0 + ph * (1.0f - v);
                if (cur_head) {
                    disc(r, cx, cy, dot * 1.9f, COL_BG);
                    disc(r, cx, cy, dot * 1.6f, COL_ACCENT);
                } else {
                    disc(r, cx, cy, dot, cur_layer ? COL_TEXT : COL_DOT);
                }
            }
    if (f->dist_caption)
        text_fit(r, f->dist_caption, spx, x + pad, y + h - pad - (float)font_px * 1.3f,
                 (float)font_px * 1.3f, w - 2 * pad, COL_TEXT);
}

/* The plot's axes box, framebuffer px, and the curve's steps: where step s and value v
 * (clamped to [0, 1]) are drawn. */
typedef struct {
    float x, y, w, h;
    int steps;
} PlotBox;

static float plot_x(const PlotBox *b, int s) {
    return b->x + b->w * (float)s / (float)b->steps;
}

static float plot_y(const PlotBox *b, float v) {
    return b->y + b->h * (1.0f - (v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v));
}

/* The perturbation test's plot (the curves of Chefer et al. 2021, §4): patches removed,
 * 0 to 100%, on x; the class probability, 0 to 1, on y. The curve up to the current step
 * with a marker there, the other order's finished curve dim behind it, a title, a
 * subtitle and a caption. */
static void draw_plot(Ren *r, const RenFrame *f, float x, float y, float w, float h, int font_px) {
    fill(r, x, y, w, h, COL_SIDE);
    const float *curve = COL_CURVE[f->plot_alt ? 1 : 0];
    float pad = (float)font_px * 0.6f, line_h = (float)font_px * 1.4f, ty = y + pad;
    int spx = (int)((float)font_px * 0.75f);
    if (f->plot_title) text_fit(r, f->plot_title, font_px, x + pad, ty, line_h, w - 2 * pad, curve);
    ty += line_h;
    if (f->plot_subtitle) {
        text_fit(r, f->plot_subtitle, font_px, x + pad, ty, line_h, w - 2 * pad, COL_TEXT);
        ty += line_h;
    }
    int gpx = (int)((float)font_px * 0.8f);
    float ghost_h = f->plot_ghost_caption ? (float)gpx * 1.4f : 0.0f;
    float cap_h = (f->plot_caption ? line_h : 0.0f) + ghost_h;
    float ax_w = text_width(r, "0.5", spx) + (float)spx * 0.5f;
    float half_tick = text_width(r, "100%", spx) * 0.5f; /* the last x label's overhang */
    float px0 = floorf(x + pad + ax_w), py0 = floorf(ty + (float)spx);
    float pw = floorf(x + w - pad - half_tick - px0);
    float ph = floorf(y + h - pad - cap_h - (float)spx * 3.2f - py0); /* x labels, axis name */
    if (pw < 20 || ph < 20 || f->plot_steps < 1) return;
    r->plot_x = (int)px0, r->plot_y = (int)py0, r->plot_w = (int)pw, r->plot_h = (int)ph;
    for (int t = 0; t <= 2; t++) { /* probability 0, 0.5, 1: ticks, labels, grid lines */
        static const char *const lab[3] = {"0", "0.5", "1"};
        float gy = py0 + ph * (1.0f - (float)t / 2.0f);
        if (t) fill(r, px0, gy, pw, 1, COL_TRACK);
        fill(r, px0 - 3, gy, 3, 1, COL_DIM);
        float tw = text_width(r, lab[t], spx);
        text_line(r, lab[t], spx, px0 - tw - (float)spx * 0.4f, gy - (float)spx, (float)spx * 2,
                  COL_DIM);
    }
    for (int t = 0; t <= 2; t++) { /* removed 0, 50, 100% */
        static const char *const lab[3] = {"0%", "50%", "100%"};
        float gx = px0 + pw * (float)t / 2.0f, tw = text_width(r, lab[t], spx);
        fill(r, gx, py0 + ph, 1, 4, COL_DIM);
        text_line(r, lab[t], spx, gx - tw / 2, py0 + ph + 3, (float)spx * 1.5f, COL_DIM);
    }
    const char *name = "patches removed";
    text_line(r, name, spx, px0 + (pw - text_width(r, name, spx)) / 2,
              py0 + ph + 3 + (float)spx * 1.5f, (float)spx * 1.5f, COL_DIM);
    fill(r, px0, py0 + ph, pw + 1, 1, COL_DIM);
    fill(r, px0, py0, 1, ph, COL_DIM);
    float lw = roundf((float)font_px * 0.15f);
    if (lw < 2) lw = 2;
    PlotBox b = {px0, py0, pw, ph, f->plot_steps};
    for (int s = 1; f->plot_ghost && s <= f->plot_steps; s++)
        segment(r, plot_x(&b, s - 1), plot_y(&b, f->plot_ghost[s - 1]), plot_x(&b, s),
                plot_y(&b, f->plot_ghost[s]), lw * 0.7f, COL_GHOST);
    for (int s = 1; f->plot_y && s < f->plot_n; s++)
        segment(r, plot_x(&b, s - 1), plot_y(&b, f->plot_y[s - 1]), plot_x(&b, s),
                plot_y(&b, f->plot_y[s]), lw, curve);
    if (f->plot_y && f->plot_n > 0) { /* the current step */
        float mx = plot_x(&b, f->plot_n - 1), my = plot_y(&b, f->plot_y[f->plot_n - 1]);
        disc(r, mx, my, lw * 3.6f, COL_TEXT);
        disc(r, mx, my, lw * 2.4f, curve);
    }
    if (f->plot_caption)
        text_fit(r, f->plot_caption, font_px, x + pad, y + h - pad - cap_h, cap_h - ghost_h,
                 w - 2 * pad, COL_TEXT);
    if (f->plot_ghost_caption)
        text_fit(r, f->plot_ghost_caption, gpx, x + pad, y + h - pad - ghost_h, ghost_h,
                 w - 2 * pad, COL_GHOST);
}

void ren_draw(Ren *r, const RenFrame *f) {
    SDL_GL_GetDrawableSize(r->win, &r->fb_w, &r->fb_h);
    const float W = (float)r->fb_w, H = (float)r->fb_h;
    r->frame_no++;
    r->n_prims = 0;
    dl_begin(&r->dl, r->fb_w, r->fb_h);

    /* Layout: the status bar (and the error line) at the bottom, never over the
     * image; above it the crop at its aspect ratio (or the overview), the legend
     * to its right, the prefix tokens' bars to its left (single view, models
     * with register or distillation tokens) and the side panels (predictions,
     * attention distance) at the right when the window is wide enough. Sizes
     * follow the height, for projectors. */
    float bar_h = roundf(H * 0.055f);
    if (bar_h < 22) bar_h = 22;
    int font_px = (int)(bar_h * 0.5f);
    float err_h = f->error && *f->error ? bar_h : 0.0f;
    float margin = roundf(H * 0.02f);
    float legend_w = roundf((float)font_px * 4.0f), legend_gap = roundf(margin * 1.2f);
    float prefix_w = roundf((float)font_px * 5.0f);
    float area_w = W - 2 * margin, area_h = H - bar_h - err_h - 2 * margin;
    int has_panel = f->n_preds > 0 || f->distance || f->n_list > 0 || f->plot;
    float panel_w = has_panel ? roundf((float)font_px * 13.0f) : 0.0f;
    if (has_panel && area_w - panel_w - legend_gap < area_h * 0.55f) panel_w = 0; /* no room */
    if (panel_w > 0) area_w -= panel_w + legend_gap;
    int single = f->mode == REN_SINGLE || !r->atlas_maps;
    /* the crop keeps its aspect ratio (an overview fills the area); the legend
     * and the bars each take room only while the crop keeps at least 80% / 70%
     * of the width it would have. The legend's room is kept when the overlay is
     * off, so the crop stays put. */
    float aspect = r->image_h ? (float)r->image_w / (float)r->image_h : 1.0f; /* w / h */
    float max_w = single ? area_h * aspect : area_w, full = fminf(area_w, max_w);
    int legend = r->image_w && fminf(area_w - legend_w - legend_gap, max_w) >= 0.8f * full;
    if (legend) area_w -= legend_w + legend_gap;
    int prefix = single && r->image_w && f->n_prefix > 1 && f->prefix_share &&
                 fminf(area_w - prefix_w - legend_gap, max_w) >= 0.7f * full;
    if (prefix) area_w -= prefix_w + legend_gap;
    float iw = fminf(area_w, max_w), ih = single ? iw / aspect : area_h;
    iw = floorf(iw), ih = floorf(ih);
    if (iw < 1) iw = 1;
    if (ih < 1) ih = 1;
    float left_w = prefix ? prefix_w + legend_gap : 0.0f;
    float group_w = left_w + iw + (legend ? legend_gap + legend_w : 0.0f) +
                    (panel_w > 0 ? legend_gap + panel_w : 0.0f);
    float ix = floorf((W - group_w) / 2) + left_w, iy = floorf(margin + (area_h - ih) / 2);
    r->image_x = (int)ix, r->image_y = (int)iy;
    r->image_w_px = single ? (int)iw : 0, r->image_h_px = single ? (int)ih : 0;
    r->n_cells = 0;

    if (r->image_w && r->grid_w) {
        if (single)
            draw_heat(r, f, ix, iy, iw, ih, -1, 1);
        else
            draw_cells(r, f, ix, iy, iw, ih, font_px);
        if (legend && f->overlay && !f->rgb)
            draw_legend(r, f, ix + iw + legend_gap, iy, ih, font_px);
        if (prefix) draw_prefix(r, f, ix - left_w, iy, prefix_w, ih, font_px);
    } else {
        fill(r, ix, iy, iw, ih, COL_EMPTY);
        if (f->placeholder) {
            const RenText *t = text_get(r, f->placeholder, font_px);
            if (t) draw_text(r, t, ix + (iw - t->w) / 2, iy + (ih - t->h) / 2, 1.0f, COL_DIM);
        }
    }
    /* side panels, top aligned with the main area */
    r->panel_x = 0, r->panel_w = 0, r->n_pred_rows = 0, r->list_w = 0;
    r->plot_x = r->plot_y = r->plot_w = r->plot_h = 0;
    if (panel_w > 0 && r->image_w) {
        float px = ix + iw + (legend ? legend_gap + legend_w : 0.0f) + legend_gap;
        float py = margin, room = area_h;
        r->panel_x = (int)px, r->panel_w = (int)panel_w;
        if (f->n_preds > 0) {
            float ph = draw_preds(r, f, px, py, panel_w, font_px);
            py += ph + margin, room -= ph + margin;
        }
        if (f->plot) { /* the perturbation test: its plot instead of the list and distance */
            if (room > font_px * 8.0f) draw_plot(r, f, px, py, panel_w, room, font_px);
        } else if (f->n_list > 0 && room > font_px * 4.0f) {
            float lh = draw_list(r, f, px, py, panel_w, f->distance ? room * 0.6f : room, font_px);
            py += lh + margin, room -= lh + margin;
        }
        if (!f->plot && f->distance && room > font_px * 6.0f)
            draw_distance(r, f, px, py, panel_w, room < panel_w * 1.1f ? room : panel_w * 1.1f,
                          font_px);
    }
    if (f->tooltip) {
        int tpx = (int)((float)font_px * 0.85f);
        const RenText *t = text_get(r, f->tooltip, tpx);
        if (t) {
            float pad = (float)tpx * 0.4f, tw = (float)t->w + 2 * pad, th = (float)t->h + pad;
            float tx = f->tip_x + (float)font_px, ty = f->tip_y + (float)font_px;
            if (tx + tw > W) tx = f->tip_x - tw - (float)font_px * 0.5f;
            if (ty + th > H - bar_h - err_h) ty = f->tip_y - th - (float)font_px * 0.5f;
            fill(r, tx, ty, tw, th, COL_TIP);
            frame(r, tx, ty, tw, th, 1, COL_DIM);
            draw_text(r, t, tx + pad, ty + pad * 0.5f, 1.0f, COL_TEXT);
        }
    }
    int help_px = (int)(H * 0.022f) < 11 ? 11 : (int)(H * 0.022f);
    if (f->help && f->n_help) draw_help(r, f, help_px);

    /* error line and status bar */
    float pad = roundf(bar_h * 0.45f);
    if (err_h > 0) {
        fill(r, 0, H - bar_h - err_h, W, err_h, COL_ERRBAR);
        const RenText *t = text_get(r, f->error, font_px);
        if (t) {
            float s = t->w > W - 2 * pad ? (W - 2 * pad) / t->w : 1.0f;
            draw_text(r, t, pad, H - bar_h - err_h + (err_h - t->h * s) / 2, s, COL_ERR);
        }
    }
    float by = H - bar_h;
    fill(r, 0, by, W, bar_h, COL_BAR);
    fill(r, 0, by, W, 1, COL_BG);
    const RenText *tl = text_get(r, f->status_left, font_px);
    const RenText *tr = text_get(r, f->status_right, font_px);
    float spin_w = f->busy ? bar_h : 0.0f;
    float lw = tl ? (float)tl->w : 0, rw = tr ? (float)tr->w : 0;
    float room = W - 2 * pad - spin_w - (tl && tr ? pad * 2 : 0);
    float s = lw + rw > room && lw + rw > 0 ? room / (lw + rw) : 1.0f;
    if (tl) draw_text(r, tl, pad, by + (bar_h - tl->h * s) / 2, s, COL_TEXT);
    if (tr)
        draw_text(r, tr, W - pad - rw * s - spin_w, by + (bar_h - tr->h * s) / 2, s,
                  f->busy ? COL_ACCENT : COL_TEXT);
    if (f->busy)
        spinner(r, W - pad - bar_h * 0.35f, by + bar_h / 2, bar_h * 0.26f, f->spinner_turns);
    flush(r);
}

/* --- hit tests and read-back ----------------------------------------------- */

int ren_patch_at(const Ren *r, int x, int y, int *row, int *col) {
    int w = r->image_w_px, h = r->image_h_px;
    if (w <= 0 || h <= 0 || !r->grid_w || x < r->image_x || y < r->image_y || x >= r->image_x + w ||
        y >= r->image_y + h)
        return -1;
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

uint8_t *ren_read_rgb(Ren *r, int *w, int *h) {
    int W = r->fb_w, H = r->fb_h;
    uint8_t *px = malloc((size_t)W * H * 3), *row = malloc((size_t)W * 3);
    if (!px || !row) {
        free(px), free(row);
        return NULL;
    }
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, r->canvas_fbo); /* 0 without one: the window's */
    glReadPixels(0, 0, W, H, GL_RGB, GL_UNSIGNED_BYTE, px);
    glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
    for (int y = 0; y < H / 2; y++) { /* GL's first row is the bottom one */
        memcpy(row, px + (size_t)y * W * 3, (size_t)W * 3);
        memcpy(px + (size_t)y * W * 3, px + (size_t)(H - 1 - y) * W * 3, (size_t)W * 3);
        memcpy(px + (size_t)(H - 1 - y) * W * 3, row, (size_t)W * 3);
    }
    free(row);
    *w = W, *h = H;
    return px;
}
