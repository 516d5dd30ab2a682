/* shaders.c - the GLSL programs: found ($VITLENS_SHADER_DIR, the source tree, next to the
 * binary, the installed share/vitlens/shaders), read, compiled with the features a heat map
 * needs (#defines after the #version line), linked, their uniforms located. A compile error
 * is returned with its log. */
#include "render/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* the build sets both (CMake): the source tree's shaders/ and the install prefix's */
#ifndef VITLENS_SHADER_DIR_DEFAULT
#define VITLENS_SHADER_DIR_DEFAULT "shaders"
#endif
#ifndef VITLENS_SHADER_DIR_INSTALLED /* share/vitlens/shaders under the install prefix */
#define VITLENS_SHADER_DIR_INSTALLED "/usr/local/share/vitlens/shaders"
#endif

/* --- reading and compiling ----------------------------------------------------- */

/* The whole file as a NUL-terminated string (free it), or NULL with msg naming path. */
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
    /* the source in four pieces: the #version line (GLSL wants it first), the defines,
     * a #line directive, the rest of the file */
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
    /* a uniform the shader does not use is -1, and glUniform* ignores -1: the ui and heat
     * programs share one RenProgram layout */
    p->screen = glGetUniformLocation(p->prog, "u_screen");
    p->flip = glGetUniformLocation(p->prog, "u_flip");
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
    /* the samplers' texture units, fixed once: the crop 0, map 1, LUT 2, mask 3, removed 4
     * (the ui program's u_tex shares unit 0) */
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

/* --- the programs ---------------------------------------------------------------- */

/* The heat map program of a combination of features (REN_HV_* bits), compiled the
 * first time it is asked for; NULL when it does not build (said on stderr once). */
const RenProgram *ren_heat_program(Ren *r, int variant) {
    static const char *const names[REN_HV_BITS] = {"BILINEAR", "RGB",   "RAMP",   "REMOVED", "GRID",
                                                   "MASK",     "QUERY", "MINIFY", "PLAIN"};
    RenProgram *p = &r->heat[variant];
    if (p->prog) return p;
    if (r->heat_failed[variant]) return NULL; /* not retried every frame */
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

/* --- finding them --------------------------------------------------------------- */

/* Does dir hold the shaders? quad.vert.glsl stands for the set. */
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

int ren_load_shaders(Ren *r, char *msg, size_t msg_bytes) {
    if (find_shader_dir(r->shader_dir, sizeof r->shader_dir, msg, msg_bytes)) return -1;
    char path[1200], *ui_src = NULL;
    snprintf(path, sizeof path, "%s/quad.vert.glsl", r->shader_dir);
    if (!(r->vert_src = read_file(path, msg, msg_bytes))) return -1;
    snprintf(path, sizeof path, "%s/heatmap.frag.glsl", r->shader_dir);
    if (!(r->heat_src = read_file(path, msg, msg_bytes))) return -1;
    snprintf(path, sizeof path, "%s/ui.frag.glsl", r->shader_dir);
    if (!(ui_src = read_file(path, msg, msg_bytes))) return -1;
    int bad = link_program(&r->ui, r, "ui.frag.glsl", ui_src, "", msg, msg_bytes);
    free(ui_src);
    if (bad) return -1;
    if (!ren_heat_program(r, 0)) { /* the plain view's; the others when first drawn */
        snprintf(msg, msg_bytes, "%s", r->heat_msg);
        return -1;
    }
    return 0;
}
