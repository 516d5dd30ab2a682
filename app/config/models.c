/* models.c - the downloaded models: listing the folders they are kept in, and
 * --model NAME. See models.h for the places. */
#define _POSIX_C_SOURCE 200809L
#include "config/models.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 1 when path is a regular file (stat follows symlinks: a linked model counts). */
static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int models_dirs(char dirs[MODELS_MAX_DIRS][1024]) {
    /* in the order they are searched: the environment, the XDG data folder, the source
     * tree's models/ when built from one */
    int n = 0;
    const char *env = getenv("VITLENS_MODELS_DIR");
    if (env && *env) snprintf(dirs[n++], 1024, "%s", env);
    const char *data = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (data && data[0] == '/') /* the XDG spec: a relative path is to be ignored */
        snprintf(dirs[n++], 1024, "%s/vitlens/models", data);
    else if (home && *home)
        snprintf(dirs[n++], 1024, "%s/.local/share/vitlens/models", home);
    if (VITLENS_MODELS_DIR_SOURCE[0]) snprintf(dirs[n++], 1024, "%s", VITLENS_MODELS_DIR_SOURCE);
    return n;
}

/* qsort order of ModelEntry: by name. */
static int cmp_entries(const void *a, const void *b) {
    return strcmp(((const ModelEntry *)a)->name, ((const ModelEntry *)b)->name);
}

int models_list(ModelEntry *out, int max) {
    char dirs[MODELS_MAX_DIRS][1024];
    int n_dirs = models_dirs(dirs), n = 0;
    for (int d = 0; d < n_dirs; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        int first = n; /* this folder's entries start here */
        for (struct dirent *e; (e = readdir(dir)) && n < max;) {
            if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof out[n].name) continue;
            /* a name seen in an earlier folder wins: the search order decides */
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = !strcmp(out[i].name, e->d_name);
            if (seen) continue;
            ModelEntry *m = &out[n];
            memcpy(m->name, e->d_name,
                   strlen(e->d_name) + 1); /* shorter than name: checked above */
            int len = snprintf(m->weights, sizeof m->weights, "%s/%s/model.safetensors", dirs[d],
                               e->d_name);
            if (len < 0 || (size_t)len >= sizeof m->weights || !is_file(m->weights)) continue;
            len = snprintf(m->labels, sizeof m->labels, "%s/%s/labels.txt", dirs[d], e->d_name);
            if (len < 0 || (size_t)len >= sizeof m->labels || !is_file(m->labels))
                m->labels[0] = '\0';
            n++;
        }
        closedir(dir);
        /* each folder's entries sorted, the folders kept in search order */
        qsort(out + first, (size_t)(n - first), sizeof *out, cmp_entries);
    }
    return n;
}

/* torch.hub's checkpoint folder, as torch.hub.get_dir() finds it: $TORCH_HOME/hub, else
 * $XDG_CACHE_HOME/torch/hub, else ~/.cache/torch/hub; then checkpoints/. 0 without HOME. */
static int torch_hub_dir(char *out, size_t n) {
    const char *th = getenv("TORCH_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int len;
    if (th && *th)
        len = snprintf(out, n, "%s/hub/checkpoints", th);
    else if (xdg && *xdg)
        len = snprintf(out, n, "%s/torch/hub/checkpoints", xdg);
    else if (home && *home)
        len = snprintf(out, n, "%s/.cache/torch/hub/checkpoints", home);
    else
        return 0;
    return len > 0 && (size_t)len < n;
}

/* --model torchvision:NAME: torchvision's weights file NAME-<hash>.pth (vit_b_16-c867db91.pth)
 * in torch.hub's cache, where torchvision.models.NAME(weights=...) downloads it. */
static int resolve_torchvision(char *weights, size_t weights_bytes, const char *name, char *msg,
                               size_t msg_bytes) {
    char dir[1024];
    size_t k = strlen(name);
    if (!torch_hub_dir(dir, sizeof dir)) {
        snprintf(msg, msg_bytes, "--model torchvision:%s: no torch hub folder (HOME unset)", name);
        return -1;
    }
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d)) && !found;) {
        size_t n = strlen(e->d_name);
        if (n > k + 5 && !strncmp(e->d_name, name, k) && e->d_name[k] == '-' &&
            !strcmp(e->d_name + n - 4, ".pth")) {
            int len = snprintf(weights, weights_bytes, "%s/%s", dir, e->d_name);
            found = len > 0 && (size_t)len < weights_bytes && is_file(weights);
        }
    }
    if (d) closedir(d);
    if (found) return 0;
    snprintf(msg, msg_bytes,
             "--model torchvision:%s: no %s-*.pth in %s (torch hub's cache: $TORCH_HOME, "
             "~/.cache/torch); in Python, torchvision.models.%s(weights=\"DEFAULT\") downloads it",
             name, name, dir, name);
    return -1;
}

int models_resolve(char *weights, size_t weights_bytes, char *labels, size_t labels_bytes,
                   const char *arg, char *msg, size_t msg_bytes) {
    struct stat st;
    labels[0] = '\0';
    if (!strncmp(arg, "torchvision:", 12) && stat(arg, &st) != 0)
        return resolve_torchvision(weights, weights_bytes, arg + 12, msg, msg_bytes);
    if (stat(arg, &st) == 0 || strchr(arg, '/')) { /* a path: the loader names its errors */
        snprintf(weights, weights_bytes, "%s", arg);
        return 0;
    }
    ModelEntry *list = malloc(MODELS_MAX * sizeof *list);
    if (!list) {
        snprintf(msg, msg_bytes, "--model %s: out of memory", arg);
        return -1;
    }
    int n = models_list(list, MODELS_MAX), found = -1;
    for (int i = 0; i < n && found < 0; i++)
        if (!strcmp(list[i].name, arg)) found = i;
    if (found >= 0) {
        snprintf(weights, weights_bytes, "%s", list[found].weights);
        snprintf(labels, labels_bytes, "%s", list[found].labels);
        free(list);
        return 0;
    }
    /* not found: the message lists where it looked and what is there, each part only while
     * msg has room */
    char dirs[MODELS_MAX_DIRS][1024];
    int n_dirs = models_dirs(dirs);
    int len = snprintf(msg, msg_bytes,
                       "--model %s: no such file, nor a downloaded model of that name (a folder "
                       "%s/model.safetensors) in ",
                       arg, arg);
    for (int d = 0; d < n_dirs && len >= 0 && (size_t)len < msg_bytes; d++)
        len += snprintf(msg + len, msg_bytes - (size_t)len, "%s%s",
                        d == 0 ? "" : (d + 1 == n_dirs ? " or " : ", "), dirs[d]);
    if (len >= 0 && (size_t)len < msg_bytes)
        len += snprintf(msg + len, msg_bytes - (size_t)len, "; downloaded: ");
    for (int i = 0; i < n && len >= 0 && (size_t)len < msg_bytes; i++)
        len += snprintf(msg + len, msg_bytes - (size_t)len, "%s%s", i ? ", " : "", list[i].name);
    if (len >= 0 && (size_t)len < msg_bytes)
        snprintf(msg + len, msg_bytes - (size_t)len, "%s (scripts/download-model.sh NAME)",
                 n ? "" : "none");
    free(list);
    return -1;
}
