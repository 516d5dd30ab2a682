/* test_models.c - app/config/models.c: the downloaded models of $VITLENS_MODELS_DIR,
 * $XDG_DATA_HOME/vitlens/models (else ~/.local/share/vitlens/models) and the source
 * tree's models/ (here SCRATCH/src-models, set at compile time), each name once, the
 * first folder's; --model NAME resolved to its weights and labels, a path that exists
 * winning over a name, and an unknown name's message naming every place looked in.
 *
 * usage: test_models SCRATCH_DIR   exit 1 on any failed check */
#define _POSIX_C_SOURCE 200809L
#include "config/models.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DIR/NAME/ with model.safetensors (weights), labels.txt (labels) or neither */
static void make_model(const char *dir, const char *name, int weights, int labels) {
    char d[1100], p[1200];
    snprintf(d, sizeof d, "%s/%s", dir, name);
    make_dir(d);
    if (weights) snprintf(p, sizeof p, "%s/model.safetensors", d), write_bytes(p, "x", 1);
    if (labels) snprintf(p, sizeof p, "%s/labels.txt", d), write_bytes(p, "cat\n", 4);
    snprintf(p, sizeof p, "%s/config.json", d), write_bytes(p, "{}", 2);
}

static const char *names(const ModelEntry *m, int n) {
    static char s[1024];
    s[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(s + strlen(s), sizeof s - strlen(s), "%s%s", i ? "," : "", m[i].name);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_models SCRATCH_DIR\n");
        return 2;
    }
    const char *s = argv[1];
    char xdg[1024], xdg_models[1100], home_models[1100], extra[1100], src[1100];
    snprintf(xdg, sizeof xdg, "%s/data", s);
    snprintf(xdg_models, sizeof xdg_models, "%s/vitlens/models", xdg);
    snprintf(home_models, sizeof home_models, "%s/home/.local/share/vitlens/models", s);
    snprintf(extra, sizeof extra, "%s/extra", s);
    snprintf(src, sizeof src, "%s", VITLENS_MODELS_DIR_SOURCE);
    check(strstr(src, s) == src, "the source tree's models/ is in the scratch folder: %s", src);
    make_model(xdg_models, "deit-tiny", 1, 1);
    make_model(xdg_models, "dino-vits16", 1, 0);
    make_model(xdg_models, "half", 0, 1); /* no weights: not a model */
    make_model(xdg_models, ".hidden", 1, 1);
    make_model(src, "deit-tiny", 1, 0); /* the XDG one comes first */
    make_model(src, "aaa-local", 1, 1);
    make_model(home_models, "from-home", 1, 0);
    make_model(extra, "zzz-extra", 1, 0);

    unsetenv("VITLENS_MODELS_DIR");
    setenv("XDG_DATA_HOME", xdg, 1);
    char home[1100];
    snprintf(home, sizeof home, "%s/home", s);
    setenv("HOME", home, 1);
    ModelEntry m[MODELS_MAX];
    int n = models_list(m, MODELS_MAX);
    check(n == 3 && !strcmp(names(m, n), "deit-tiny,dino-vits16,aaa-local"),
          "XDG's models by name, then the source tree's new ones: %s", names(m, n));
    char want[1300];
    snprintf(want, sizeof want, "%s/deit-tiny/model.safetensors", xdg_models);
    check(n > 0 && !strcmp(m[0].weights, want), "deit-tiny is XDG's: %s", m[0].weights);
    snprintf(want, sizeof want, "%s/deit-tiny/labels.txt", xdg_models);
    check(n > 0 && !strcmp(m[0].labels, want), "with its labels: %s", m[0].labels);
    check(n > 1 && !m[1].labels[0], "dino-vits16 has no labels: '%s'", m[1].labels);

    char w[1200], l[1200], msg[4096];
    check(models_resolve(w, sizeof w, l, sizeof l, "aaa-local", msg, sizeof msg) == 0, "aaa-local");
    snprintf(want, sizeof want, "%s/aaa-local/model.safetensors", src);
    check(!strcmp(w, want), "--model aaa-local: %s", w);
    snprintf(want, sizeof want, "%s/aaa-local/labels.txt", src);
    check(!strcmp(l, want), "its labels: %s", l);

    /* a path that exists wins over a name; a path with a slash is the loader's to check */
    if (chdir(xdg_models) != 0) check(0, "cd %s", xdg_models);
    write_bytes("dino-vits16.safetensors", "x", 1);
    check(models_resolve(w, sizeof w, l, sizeof l, "deit-tiny", msg, sizeof msg) == 0 &&
              !strcmp(w, "deit-tiny") && !l[0],
          "a folder deit-tiny in the current directory is taken as a path: %s", w);
    check(models_resolve(w, sizeof w, l, sizeof l, "no/such.safetensors", msg, sizeof msg) == 0 &&
              !strcmp(w, "no/such.safetensors"),
          "a path with a slash is passed on: %s", w);

    /* an unknown name: the places looked in and what is there */
    int rc = models_resolve(w, sizeof w, l, sizeof l, "deit-huge", msg, sizeof msg);
    check(rc == -1 && strstr(msg, "deit-huge") && strstr(msg, xdg_models) && strstr(msg, src) &&
              strstr(msg, "deit-tiny, dino-vits16, aaa-local"),
          "an unknown name names the places and the models: %s", msg);

    /* $VITLENS_MODELS_DIR first; XDG_DATA_HOME unset (or relative): ~/.local/share */
    setenv("VITLENS_MODELS_DIR", extra, 1);
    unsetenv("XDG_DATA_HOME");
    n = models_list(m, MODELS_MAX);
    check(!strcmp(names(m, n), "zzz-extra,from-home,aaa-local,deit-tiny"),
          "VITLENS_MODELS_DIR, ~/.local/share, the source tree: %s", names(m, n));
    setenv("XDG_DATA_HOME", "relative/data", 1);
    n = models_list(m, MODELS_MAX);
    check(n == 4, "a relative XDG_DATA_HOME is ignored: %s", names(m, n));
    rc = models_resolve(w, sizeof w, l, sizeof l, "deit-huge", msg, sizeof msg);
    check(rc == -1 && strstr(msg, extra) && strstr(msg, home_models),
          "the message names VITLENS_MODELS_DIR and ~/.local/share: %s", msg);
    return t_finish("test_models");
}
