/* settings.c - the remembered settings file: parsing, and writing it atomically. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "config/settings.h"
#include "config/files.h"
#include "render/colormap.h"
#include "vit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void settings_init(Settings *s) {
    memset(s, 0, sizeof *s);
    /* -1: not in the file, so the app's own default applies (0 would be a choice) */
    s->colormap = s->bilinear = s->show_preds = s->show_distance = s->show_controls = -1;
    s->opacity = -1.0f;
}

int settings_path(char *out, size_t out_bytes) {
    const char *cfg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int len;
    if (cfg && cfg[0] == '/') /* the XDG spec: a relative path is to be ignored */
        len = snprintf(out, out_bytes, "%s/vitlens/settings", cfg);
    else if (home && *home)
        len = snprintf(out, out_bytes, "%s/.config/vitlens/settings", home);
    else
        return -1;
    return len < 0 || (size_t)len >= out_bytes ? -1 : 0;
}

/* --- reading ---------------------------------------------------------------- */

/* "0" or "1" into *out. */
static int parse_bool(int *out, const char *v) {
    if (strcmp(v, "0") && strcmp(v, "1")) return -1;
    *out = v[0] == '1';
    return 0;
}

/* One line's key and value into s; 0, or -1 with why (what was expected). */
static int parse_line(Settings *s, const char *key, const char *v, const char **why) {
    if (!strcmp(key, "colormap")) {
        for (int k = 0; k < COLORMAP_COUNT; k++)
            if (!strcmp(v, colormap_names[k])) return s->colormap = k, 0;
        *why = "expected viridis, inferno, magma, turbo or greys";
        return -1;
    }
    if (!strcmp(key, "opacity")) {
        char *end = NULL;
        errno = 0;
        float f = strtof(v, &end);
        if (errno || !*v || *end || !(f >= 0.0f && f <= 1.0f)) {
            *why = "expected a number in [0, 1]";
            return -1;
        }
        s->opacity = f;
        return 0;
    }
    int *flag = !strcmp(key, "bilinear")      ? &s->bilinear
                : !strcmp(key, "predictions") ? &s->show_preds
                : !strcmp(key, "distance")    ? &s->show_distance
                : !strcmp(key, "controls")    ? &s->show_controls
                                              : NULL;
    if (flag) {
        *why = "expected 0 or 1";
        return parse_bool(flag, v);
    }
    if (!strcmp(key, "image")) {
        *why = "expected a path (at most 16 image lines)";
        if (!*v || strlen(v) >= sizeof s->images[0] || s->n_images >= SETTINGS_MAX_IMAGES)
            return -1;
        snprintf(s->images[s->n_images++], sizeof s->images[0], "%s", v);
        return 0;
    }
    char *path = !strcmp(key, "model")    ? s->model
                 : !strcmp(key, "labels") ? s->labels
                 : !strcmp(key, "photo")  ? s->photo
                                          : NULL;
    if (path) {
        *why = "expected a path";
        if (!*v || strlen(v) >= sizeof s->model) return -1;
        snprintf(path, sizeof s->model, "%s", v);
        return 0;
    }
    *why = "unknown setting (colormap, opacity, bilinear, predictions, distance, controls, model, "
           "labels, image, photo)";
    return -1;
}

int settings_load(Settings *s, const char *path, char *msg, size_t msg_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(msg, msg_bytes, "%s: cannot read: %s (settings ignored)", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    int n_line = 0, n_bad = 0;
    /* a bad line is skipped and the rest still read: one typo must not lose every setting;
     * the message names the first bad line and counts the others */
    for (ssize_t len; (len = getline(&line, &cap, f)) >= 0;) {
        n_line++;
        const char *why = "expected key=value";
        int bad = 0;
        if (memchr(line, '\0', (size_t)len)) /* binary: not a settings file */
            bad = 1, why = "a NUL byte";
        else if (len > 1500)
            bad = 1, why = "line too long";
        line[strcspn(line, "\r\n")] = '\0';
        if (!bad && (!line[0] || line[0] == '#')) continue;
        char *eq = bad ? NULL : strchr(line, '=');
        /* split at the first '=' (a path may hold more), then put it back for the message */
        if (eq) *eq = '\0';
        if (!bad && (!eq || parse_line(s, line, eq + 1, &why))) bad = 1;
        if (eq) *eq = '=';
        if (bad && n_bad++ == 0) {
            char shown[256]; /* the line as it is, its terminal codes escaped */
            if (strlen(line) > 60) line[60] = '\0';
            snprintf(msg, msg_bytes, "%s: line %d: '%s': %s", path, n_line,
                     vit_escape(shown, sizeof shown, line), why);
        }
    }
    free(line);
    int err = ferror(f);
    fclose(f);
    if (err) {
        snprintf(msg, msg_bytes, "%s: cannot read (settings ignored)", path);
        return -1;
    }
    if (n_bad) {
        size_t len = strlen(msg);
        if (n_bad > 1)
            snprintf(msg + len, msg_bytes - len, " (ignored, and %d more lines)", n_bad - 1);
        else
            snprintf(msg + len, msg_bytes - len, " (ignored)");
        return 1;
    }
    return 0;
}

/* --- writing ---------------------------------------------------------------- */

/* mkdir -p of path's folder (files_make_dir, 0700). */
static int make_parent(const char *path) {
    char dir[1400], why[1600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    return files_make_dir(dir, 0700, why, sizeof why);
}

int settings_save(const Settings *s, const char *path, char *msg, size_t msg_bytes) {
    /* written to PATH.tmp.PID, synced, then renamed over PATH: a crash or a full disk
     * leaves the old file whole, never half a file; the pid keeps two windows apart */
    char tmp[1400];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        snprintf(msg, msg_bytes, "%.200s...: path too long", path);
        return -1;
    }
    if (make_parent(path)) {
        snprintf(msg, msg_bytes, "%s: cannot create its folder: %s", path, strerror(errno));
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(msg, msg_bytes, "%s: cannot write: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "# vitlens settings, written on quit; the command line's options override them\n");
    if (s->colormap >= 0 && s->colormap < COLORMAP_COUNT)
        fprintf(f, "colormap=%s\n", colormap_names[s->colormap]);
    if (s->opacity >= 0.0f) fprintf(f, "opacity=%.2f\n", (double)s->opacity);
    if (s->bilinear >= 0) fprintf(f, "bilinear=%d\n", s->bilinear);
    if (s->show_preds >= 0) fprintf(f, "predictions=%d\n", s->show_preds);
    if (s->show_distance >= 0) fprintf(f, "distance=%d\n", s->show_distance);
    if (s->show_controls >= 0) fprintf(f, "controls=%d\n", s->show_controls);
    /* a path with a newline would not read back: left out */
    if (s->model[0] && !strchr(s->model, '\n')) fprintf(f, "model=%s\n", s->model);
    if (s->labels[0] && !strchr(s->labels, '\n')) fprintf(f, "labels=%s\n", s->labels);
    for (int i = 0; i < s->n_images; i++)
        if (s->images[i][0] && !strchr(s->images[i], '\n')) fprintf(f, "image=%s\n", s->images[i]);
    if (s->photo[0] && !strchr(s->photo, '\n')) fprintf(f, "photo=%s\n", s->photo);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (bad || rename(tmp, path) != 0) {
        if (!bad) e = errno;
        snprintf(msg, msg_bytes, "%s: cannot write: %s", path, strerror(e));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* path made absolute (realpath), else as it is; out empty when it does not fit. Absolute,
 * because the next start may run from another directory. */
static void absolute(char *out, size_t out_bytes, const char *path) {
    char *abs = realpath(path, NULL);
    if (snprintf(out, out_bytes, "%s", abs ? abs : path) >= (int)out_bytes) out[0] = '\0';
    free(abs);
}

void settings_set_model(Settings *s, const char *model, const char *labels) {
    s->model[0] = s->labels[0] = '\0';
    if (model && *model) absolute(s->model, sizeof s->model, model);
    /* labels belong to the model: none kept without one */
    if (model && *model && labels && *labels) absolute(s->labels, sizeof s->labels, labels);
}

void settings_set_photos(Settings *s, const char *const *images, int n, const char *photo) {
    s->n_images = 0, s->photo[0] = '\0';
    for (int i = 0; i < n && s->n_images < SETTINGS_MAX_IMAGES; i++) {
        absolute(s->images[s->n_images], sizeof s->images[0], images[i]);
        if (s->images[s->n_images][0]) s->n_images++;
    }
    if (photo && *photo) absolute(s->photo, sizeof s->photo, photo);
}
