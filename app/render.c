/* render.c - OpenGL 3.3 core renderer: the crop + map quad, status bar, help,
 * legend and text. All positions are framebuffer px, origin top-left. */
#include "render.h"
#include "colormap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef VITLENS_SHADER_DIR_DEFAULT
#define VITLENS_SHADER_DIR_DEFAULT "shaders"
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

static GLuint compile(GLenum type, const char *dir, const char *file, char *msg, size_t n) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *src = read_file(path, msg, n);
    if (!src) return 0;
    GLuint sh = glCreateShader(type);
    if (!sh) {
        snprintf(msg, n, "%s: glCreateShader failed (GL error 0x%x)", path, glGetError());
        free(src);
        return 0;
    }
    const char *srcs[1] = {src};
    glShaderSource(sh, 1, srcs, NULL);
    glCompileShader(sh);
    free(src);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[3072] = "";
        glGetShaderInfoLog(sh, sizeof log, NULL, log);
        snprintf(msg, n, "%s: shader does not compile:\n%s", path, log);
        glDeleteShader(sh);
        return 0;
    }
    return sh;
}

static int link_program(RenProgram *p, const char *dir, const char *frag, char *msg, size_t n) {
    GLuint vs = compile(GL_VERTEX_SHADER, dir, "quad.vert.glsl", msg, n);
    if (!vs) return -1;
    GLuint fs = compile(GL_FRAGMENT_SHADER, dir, frag, msg, n);
    if (!fs) {
        glDeleteShader(vs);
        return -1;
    }
    p->prog = glCreateProgram();
    glAttachShader(p->prog, vs);
    glAttachShader(p->prog, fs);
    glLinkProgram(p->prog);
    glDeleteShader(vs);
    glDeleteShader(fs);
    GLint ok = 0;
    glGetProgramiv(p->prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[3072] = "";
        glGetProgramInfoLog(p->prog, sizeof log, NULL, log);
        snprintf(msg, n, "%s/%s + quad.vert.glsl: shaders do not link:\n%s", dir, frag, log);
        glDeleteProgram(p->prog);
        p->prog = 0;
        return -1;
    }
    p->screen = glGetUniformLocation(p->prog, "u_screen");
    p->rect = glGetUniformLocation(p->prog, "u_rect");
    p->uv = glGetUniformLocation(p->prog, "u_uv");
    p->opacity = glGetUniformLocation(p->prog, "u_opacity");
    p->grid = glGetUniformLocation(p->prog, "u_grid");
    p->grid_size = glGetUniformLocation(p->prog, "u_grid_size");
    p->color = glGetUniformLocation(p->prog, "u_color");
    p->textured = glGetUniformLocation(p->prog, "u_textured");
    glUseProgram(p->prog);
    glUniform1i(glGetUniformLocation(p->prog, "u_image"), 0);
    glUniform1i(glGetUniformLocation(p->prog, "u_map"), 1);
    glUniform1i(glGetUniformLocation(p->prog, "u_lut"), 2);
    glUniform1i(glGetUniformLocation(p->prog, "u_tex"), 0);
    return 0;
}

static int has_shaders(const char *dir) {
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/quad.vert.glsl", dir);
    return stat(path, &st) == 0;
}

/* $VITLENS_SHADER_DIR (only it, when set), else the source tree, else next to the binary. */
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
    snprintf(msg, msg_bytes,
             "cannot find the shaders: looked in %s and shaders/ next to the executable; "
             "set VITLENS_SHADER_DIR",
             VITLENS_SHADER_DIR_DEFAULT);
    return -1;
}

/* --- textures -------------------------------------------------------------- */

static GLuint make_texture(GLint filter) {
    GLuint t = 0;
    glGenTextures(1, &t);
    glBindTexture(GL_TEXTURE_2D, t);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, filter);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    return t;
}

int ren_init(Ren *r, SDL_Window *win, char *msg, size_t msg_bytes, char *warn, size_t warn_bytes) {
    memset(r, 0, sizeof *r);
    r->win = win;
    warn[0] = '\0';
    if (find_shader_dir(r->shader_dir, sizeof r->shader_dir, msg, msg_bytes)) return -1;
    if (link_program(&r->heat, r->shader_dir, "heatmap.frag.glsl", msg, msg_bytes)) goto fail;
    if (link_program(&r->ui, r->shader_dir, "ui.frag.glsl", msg, msg_bytes)) goto fail;

    glGenVertexArrays(1, &r->vao); /* core profile draws need a bound VAO, even an empty one */
    r->tex_image = make_texture(GL_LINEAR);
    r->tex_map = make_texture(GL_NEAREST); /* flat patches */
    r->tex_lut = make_texture(GL_NEAREST);
    r->tex_ramp = make_texture(GL_NEAREST);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_lut);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, COLORMAP_SIZE, 1, 0, GL_RGB, GL_UNSIGNED_BYTE,
                 colormap_lut);
    float ramp[COLORMAP_SIZE]; /* legend: top row is the maximum */
    for (int i = 0; i < COLORMAP_SIZE; i++) ramp[i] = 1.0f - (float)i / (COLORMAP_SIZE - 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_ramp);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, 1, COLORMAP_SIZE, 0, GL_RED, GL_FLOAT, ramp);
    GLenum e = glGetError();
    if (e != GL_NO_ERROR) {
        snprintf(msg, msg_bytes, "OpenGL: cannot create textures (error 0x%x)", e);
        goto fail;
    }
    r->has_text = text_init(&r->text, warn, warn_bytes) == 0;
    return 0;
fail:
    ren_free(r);
    return -1;
}

void ren_free(Ren *r) {
    if (!r) return;
    for (int i = 0; i < REN_TEXT_CACHE; i++)
        if (r->cache[i].tex) glDeleteTextures(1, &r->cache[i].tex);
    GLuint tex[4] = {r->tex_image, r->tex_map, r->tex_lut, r->tex_ramp};
    for (int i = 0; i < 4; i++)
        if (tex[i]) glDeleteTextures(1, &tex[i]);
    if (r->vao) glDeleteVertexArrays(1, &r->vao);
    if (r->heat.prog) glDeleteProgram(r->heat.prog);
    if (r->ui.prog) glDeleteProgram(r->ui.prog);
    if (r->has_text) text_free(&r->text);
    memset(r, 0, sizeof *r);
}

void ren_upload_image(Ren *r, const uint8_t *rgb, int w, int h) {
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindTexture(GL_TEXTURE_2D, r->tex_image);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, w, h, 0, GL_RGB, GL_UNSIGNED_BYTE, rgb);
    r->image_w = w;
    r->image_h = h;
}

void ren_upload_map(Ren *r, const float *map, int grid_w, int grid_h, float min, float max) {
    glBindTexture(GL_TEXTURE_2D, r->tex_map);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_R32F, grid_w, grid_h, 0, GL_RED, GL_FLOAT, map);
    r->grid_w = grid_w;
    r->grid_h = grid_h;
    r->map_min = min;
    r->map_max = max;
}

/* --- drawing helpers ------------------------------------------------------- */

static void set_rect(const RenProgram *p, float x, float y, float w, float h) {
    glUniform4f(p->rect, x, y, w, h);
}

static void fill(Ren *r, float x, float y, float w, float h, const float c[4]) {
    glUseProgram(r->ui.prog);
    glUniform1f(r->ui.textured, 0.0f);
    glUniform4f(r->ui.color, c[0], c[1], c[2], c[3]);
    set_rect(&r->ui, x, y, w, h);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
}

/* The texture of str at size_px, rendered once and kept in a small LRU cache. */
static const RenText *text_get(Ren *r, const char *str, int size_px) {
    if (!r->has_text || !str || !*str) return NULL;
    RenText *slot = &r->cache[0];
    for (int i = 0; i < REN_TEXT_CACHE; i++) {
        RenText *c = &r->cache[i];
        if (c->tex && c->size_px == size_px && strcmp(c->str, str) == 0) {
            c->last_use = ++r->clock;
            return c;
        }
        if (!c->tex || c->last_use < slot->last_use) slot = c;
        if (!slot->tex) break;
    }
    SDL_Surface *s = text_render(&r->text, str, size_px);
    if (!s) return NULL;
    if (!slot->tex) slot->tex = make_texture(GL_LINEAR);
    glBindTexture(GL_TEXTURE_2D, slot->tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, s->pitch / 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, s->w, s->h, 0, GL_RGBA, GL_UNSIGNED_BYTE, s->pixels);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    slot->w = s->w;
    slot->h = s->h;
    slot->size_px = size_px;
    slot->last_use = ++r->clock;
    snprintf(slot->str, sizeof slot->str, "%s", str);
    SDL_FreeSurface(s);
    return slot;
}

/* Draw a cached text texture with its top-left at (x, y), scaled by `scale`. */
static void draw_text(Ren *r, const RenText *t, float x, float y, float scale, const float c[4]) {
    if (!t) return;
    glUseProgram(r->ui.prog);
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, t->tex);
    glUniform1f(r->ui.textured, 1.0f);
    glUniform4f(r->ui.color, c[0], c[1], c[2], c[3]);
    set_rect(&r->ui, floorf(x), floorf(y), (float)t->w * scale, (float)t->h * scale);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
}

/* Draw `str` vertically centred in [y, y+h) from x; returns its width. */
static float text_line(Ren *r, const char *str, int size_px, float x, float y, float h,
                       const float c[4]) {
    const RenText *t = text_get(r, str, size_px);
    if (!t) return 0.0f;
    draw_text(r, t, x, y + (h - (float)t->h) * 0.5f, 1.0f, c);
    return (float)t->w;
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
    *h = (float)px * (1.2f * 2 + 2.2f + 1.65f * (float)f->n_help);
}

/* The key list in a panel centred on the crop; smaller text if the window is small. */
static void draw_help(Ren *r, const RenFrame *f, float ix, float iy, float iw, float ih, int px) {
    float pw, ph, key_w;
    help_size(r, f, px, &pw, &ph, &key_w);
    float room_w = (float)r->fb_w * 0.96f, room_h = (float)r->fb_h * 0.9f;
    if (pw > room_w || ph > room_h) {
        float s = room_w / pw < room_h / ph ? room_w / pw : room_h / ph;
        px = (int)((float)px * s);
        if (px < 6) px = 6;
        help_size(r, f, px, &pw, &ph, &key_w);
    }
    float pad = (float)px * 1.2f, gap = (float)px * 1.5f, row_h = (float)px * 1.65f;
    float x = floorf(ix + (iw - pw) / 2), y = floorf(iy + (ih - ph) / 2);
    if (x + pw > (float)r->fb_w) x = floorf(((float)r->fb_w - pw) / 2); /* wider than the crop */
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

static void draw_legend(Ren *r, float x, float y, float h, int font_px) {
    char hi[32], lo[32];
    snprintf(hi, sizeof hi, "%.2g", (double)r->map_max);
    snprintf(lo, sizeof lo, "%.2g", (double)r->map_min);
    int px = (int)(font_px * 0.8f);
    const RenText *th = text_get(r, hi, px), *tl = text_get(r, lo, px);
    float label_h = th ? (float)th->h : 0.0f;
    float bar_w = (float)font_px * 0.8f, bar_y = y + label_h * 1.2f, bar_h = h - label_h * 2.4f;
    if (bar_h < 20) return;
    fill(r, x - 1, bar_y - 1, bar_w + 2, bar_h + 2, COL_DIM);
    glUseProgram(r->heat.prog);
    glActiveTexture(GL_TEXTURE1);
    glBindTexture(GL_TEXTURE_2D, r->tex_ramp);
    glActiveTexture(GL_TEXTURE2);
    glBindTexture(GL_TEXTURE_2D, r->tex_lut);
    glUniform1f(r->heat.opacity, 1.0f); /* pure colormap: the image underneath is hidden */
    glUniform1f(r->heat.grid, 0.0f);
    set_rect(&r->heat, x, bar_y, bar_w, bar_h);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
    draw_text(r, th, x, y, 1.0f, COL_DIM);
    draw_text(r, tl, x, y + h - label_h, 1.0f, COL_DIM);
}

void ren_draw(Ren *r, const RenFrame *f) {
    SDL_GL_GetDrawableSize(r->win, &r->fb_w, &r->fb_h);
    const float W = (float)r->fb_w, H = (float)r->fb_h;
    glViewport(0, 0, r->fb_w, r->fb_h);
    glClearColor(COL_BG[0], COL_BG[1], COL_BG[2], 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    glEnable(GL_BLEND);
    glBlendFunc(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA);
    glBindVertexArray(r->vao);
    glUseProgram(r->heat.prog);
    glUniform2f(r->heat.screen, W, H);
    glUniform4f(r->heat.uv, 0.0f, 0.0f, 1.0f, 1.0f);
    glUseProgram(r->ui.prog);
    glUniform2f(r->ui.screen, W, H);
    glUniform4f(r->ui.uv, 0.0f, 0.0f, 1.0f, 1.0f);

    /* Layout: the crop letterboxed above the status bar (and the error line),
     * with the legend to its right and the prefix tokens' bars to its left
     * when the window is wide enough. */
    float bar_h = roundf(H * 0.055f);
    if (bar_h < 22) bar_h = 22;
    int font_px = (int)(bar_h * 0.5f);
    float err_h = f->error && *f->error ? bar_h : 0.0f;
    float margin = roundf(H * 0.02f);
    float legend_w = roundf((float)font_px * 4.0f), legend_gap = roundf(margin * 1.2f);
    float prefix_w = roundf((float)font_px * 5.0f);
    float area_w = W - 2 * margin, area_h = H - bar_h - err_h - 2 * margin;
    /* the crop keeps its aspect ratio; the legend and the bars each take room
     * only while the crop keeps at least 80% / 70% of the width it would have */
    float aspect = r->image_h ? (float)r->image_w / (float)r->image_h : 1.0f; /* w / h */
    float max_w = area_h * aspect, full = fminf(area_w, max_w);
    int legend =
        f->overlay && r->image_w && fminf(area_w - legend_w - legend_gap, max_w) >= 0.8f * full;
    if (legend) area_w -= legend_w + legend_gap;
    int prefix = r->image_w && f->n_prefix > 1 && f->prefix_share &&
                 fminf(area_w - prefix_w - legend_gap, max_w) >= 0.7f * full;
    if (prefix) area_w -= prefix_w + legend_gap;
    float iw = fminf(area_w, max_w), ih = iw / aspect;
    iw = floorf(iw), ih = floorf(ih);
    if (iw < 1) iw = 1;
    if (ih < 1) ih = 1;
    float left_w = prefix ? prefix_w + legend_gap : 0.0f;
    float group_w = left_w + iw + (legend ? legend_gap + legend_w : 0.0f);
    float ix = floorf((W - group_w) / 2) + left_w, iy = floorf(margin + (area_h - ih) / 2);
    r->image_x = (int)ix, r->image_y = (int)iy, r->image_w_px = (int)iw, r->image_h_px = (int)ih;

    if (r->image_w && r->grid_w) {
        glUseProgram(r->heat.prog);
        glActiveTexture(GL_TEXTURE0);
        glBindTexture(GL_TEXTURE_2D, r->tex_image);
        glActiveTexture(GL_TEXTURE1);
        glBindTexture(GL_TEXTURE_2D, r->tex_map);
        glActiveTexture(GL_TEXTURE2);
        glBindTexture(GL_TEXTURE_2D, r->tex_lut);
        glUniform1f(r->heat.opacity, f->overlay ? f->opacity : 0.0f);
        glUniform1f(r->heat.grid, f->grid ? 1.0f : 0.0f);
        glUniform2f(r->heat.grid_size, (float)r->grid_w, (float)r->grid_h);
        set_rect(&r->heat, ix, iy, iw, ih);
        glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
        if (legend) draw_legend(r, ix + iw + legend_gap, iy, ih, font_px);
        if (prefix) draw_prefix(r, f, ix - left_w, iy, prefix_w, ih, font_px);
    } else {
        fill(r, ix, iy, iw, ih, COL_EMPTY);
        if (f->placeholder) {
            const RenText *t = text_get(r, f->placeholder, font_px);
            if (t) draw_text(r, t, ix + (iw - t->w) / 2, iy + (ih - t->h) / 2, 1.0f, COL_DIM);
        }
    }
    int help_px = (int)(H * 0.025f) < 11 ? 11 : (int)(H * 0.025f);
    if (f->help && f->n_help) draw_help(r, f, ix, iy, iw, ih, help_px);

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
}
