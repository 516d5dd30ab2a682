/* files.c - the built-in model's location and stepping through a folder's images. */
#define _POSIX_C_SOURCE 200809L
#include "config/files.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_FILES 100000 /* a folder's images read at most: a bound on memory and time */

/* --- the built-in model ---------------------------------------------------- */

/* 1 when path is a regular file (symlinks followed). */
static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* 1 when path is a directory (symlinks followed). */
static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ASSETS/default/model.safetensors exists: fill model and demo_dir. */
static int try_assets(const char *assets, char *model, size_t model_bytes, char *demo_dir,
                      size_t demo_bytes) {
    snprintf(model, model_bytes, "%s/default/model.safetensors", assets);
    snprintf(demo_dir, demo_bytes, "%s/default/demo", assets);
    return is_file(model);
}

int files_default_model(char *model, size_t model_bytes, char *demo_dir, size_t demo_bytes,
                        char *msg, size_t msg_bytes) {
    const char *env = getenv("VITLENS_ASSETS");
    if (env && *env) { /* set: only it, so that a wrong setting is not silently ignored */
        if (try_assets(env, model, model_bytes, demo_dir, demo_bytes)) return 0;
        snprintf(msg, msg_bytes,
                 "VITLENS_ASSETS=%s: no default/model.safetensors there; point it at the "
                 "folder that holds default/, or give --model PATH",
                 env);
        return -1;
    }
    /* the source tree's assets/ first (a build run in place), then the installed copy */
    if (try_assets(VITLENS_ASSETS_DIR_DEFAULT, model, model_bytes, demo_dir, demo_bytes) ||
        try_assets(VITLENS_ASSETS_DIR_INSTALLED, model, model_bytes, demo_dir, demo_bytes))
        return 0;
    /* A package build (VITLENS_USE_SOURCE_TREE=OFF) has both set to the installed folder. */
    int same = strcmp(VITLENS_ASSETS_DIR_DEFAULT, VITLENS_ASSETS_DIR_INSTALLED) == 0;
    snprintf(msg, msg_bytes,
             "cannot find the built-in model: no default/model.safetensors in %s%s%s; "
             "set VITLENS_ASSETS to the folder that holds default/, or give --model PATH",
             VITLENS_ASSETS_DIR_DEFAULT, same ? "" : " or ",
             same ? "" : VITLENS_ASSETS_DIR_INSTALLED);
    return -1;
}

int files_asset(char *out, size_t out_bytes, const char *rel, char *msg, size_t msg_bytes) {
    const char *env = getenv("VITLENS_ASSETS");
    const char *dirs[2] = {VITLENS_ASSETS_DIR_DEFAULT, VITLENS_ASSETS_DIR_INSTALLED};
    if (env && *env) dirs[0] = dirs[1] = env; /* set: only it, as for the built-in model */
    for (int i = 0; i < 2; i++) {
        snprintf(out, out_bytes, "%s/%s", dirs[i], rel);
        if (is_file(out)) return 0;
    }
    snprintf(msg, msg_bytes, "cannot find %s in %s%s%s (VITLENS_ASSETS names the folder)", rel,
             dirs[0], strcmp(dirs[0], dirs[1]) ? " or " : "",
             strcmp(dirs[0], dirs[1]) ? dirs[1] : "");
    return -1;
}

/* --- stepping through a folder --------------------------------------------- */

/* What the engine decodes (engine/image/decode.c), by extension, any case. */
static int is_image_name(const char *name) {
    static const char *const ext[] = {".png", ".jpg",  ".jpeg", ".bmp",  ".gif",
                                      ".tga", ".ppm",  ".pgm",  ".pnm",  ".webp",
                                      ".tif", ".tiff", ".heic", ".heif", ".avif"};
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (strcasecmp(dot, ext[i]) == 0) return 1;
    return 0;
}

/* qsort order of file names: byte order (strcmp), as `ls` in the C locale. */
static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The image file names of dir, sorted; *names owned by the caller (free_names). */
static int list_images(char ***names_out, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_FILES;) {
        if (e->d_name[0] == '.' || !is_image_name(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) goto fail;
            names = nn;
        }
        if (!(names[n] = malloc(strlen(e->d_name) + 1))) goto fail;
        strcpy(names[n++], e->d_name);
    }
    closedir(d);
    if (n > 0) qsort(names, (size_t)n, sizeof *names, cmp_names);
    *names_out = names;
    return n;
fail:
    closedir(d);
    files_free_list(names, n);
    return -1;
}

void files_free_list(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

int files_step(char *out, size_t out_bytes, const char *path, int step) {
    char dir[1024];
    const char *name = NULL; /* the current file's name in dir, or NULL */
    if (is_dir(path)) {
        snprintf(dir, sizeof dir, "%s", path);
    } else {
        const char *slash = strrchr(path, '/');
        if (slash)
            snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        else
            snprintf(dir, sizeof dir, ".");
        name = slash ? slash + 1 : path;
    }
    char **names = NULL;
    int n = list_images(&names, dir);
    if (n <= 0) {
        files_free_list(names, n < 0 ? 0 : n);
        return -1;
    }
    /* from a folder, or a file no longer in it: the first (N) or the last (P); else the
     * neighbour, wrapping round */
    int at = -1;
    for (int i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0) at = i;
    int next = at < 0 ? (step > 0 ? 0 : n - 1) : ((at + step) % n + n) % n;
    snprintf(out, out_bytes, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", names[next]);
    files_free_list(names, n);
    return 0;
}

int files_expand(char ***paths_out, int *n_out, const char *const *args, int n_args, char *msg,
                 size_t msg_bytes) {
    char **paths = NULL;
    int n = 0, cap = 0;
    /* a file argument is kept as given (the loader names its errors later); a folder
     * becomes its images, sorted, and one with none is an error now */
    for (int a = 0; a < n_args; a++) {
        char **names = NULL;
        int k = 1, folder = is_dir(args[a]);
        if (folder && (k = list_images(&names, args[a])) <= 0) {
            snprintf(msg, msg_bytes, "%s: %s", args[a],
                     k < 0 ? "cannot read the folder" : "no image in that folder");
            files_free_list(names, 0);
            goto fail;
        }
        for (int i = 0; i < k; i++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                char **pp = realloc(paths, (size_t)cap * sizeof *pp);
                if (!pp) goto nomem;
                paths = pp;
            }
            size_t len = strlen(args[a]) + (folder ? strlen(names[i]) + 2 : 1);
            if (!(paths[n] = malloc(len))) goto nomem;
            if (folder)
                snprintf(paths[n], len, "%s%s%s", args[a],
                         args[a][strlen(args[a]) - 1] == '/' ? "" : "/", names[i]);
            else
                snprintf(paths[n], len, "%s", args[a]);
            n++;
        }
        files_free_list(names, folder ? k : 0);
        continue;
    nomem:
        files_free_list(names, folder ? k : 0);
        snprintf(msg, msg_bytes, "out of memory listing %s", args[a]);
        goto fail;
    }
    *paths_out = paths;
    *n_out = n;
    return 0;
fail:
    files_free_list(paths, n);
    *paths_out = NULL;
    *n_out = 0;
    return -1;
}

/* --- output folders ------------------------------------------------------------ */

/* mkdir one folder; a folder there already is fine. 0, or -1 with msg. */
static int make_one(const char *dir, unsigned mode, char *msg, size_t msg_bytes) {
    struct stat sb;
    if (mkdir(dir, (mode_t)mode) == 0) return 0;
    int e = errno;
    if (e == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    if (e == EEXIST)
        snprintf(msg, msg_bytes, "%s: exists and is not a directory", dir);
    else
        snprintf(msg, msg_bytes, "%s: cannot create directory: %s", dir, strerror(e));
    return -1;
}

int files_make_dir(const char *dir, unsigned mode, char *msg, size_t msg_bytes) {
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        snprintf(msg, msg_bytes, "%.200s: %s", dir, n ? "path too long" : "empty folder name");
        return -1;
    }
    memcpy(path, dir, n + 1);
    while (n > 1 && path[n - 1] == '/') path[--n] = '\0'; /* "out/" is "out" */
    /* each folder above, from the top: a missing one made, then the next */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/') continue;
        *p = '\0';
        int rc = make_one(path, mode, msg, msg_bytes);
        *p = '/';
        if (rc) return -1;
    }
    return make_one(path, mode, msg, msg_bytes);
}
