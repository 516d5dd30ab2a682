/* test_settings.c - app/config/settings.c: the remembered settings' path ($XDG_CONFIG_HOME,
 * else ~/.config), a file written and read back, written atomically (a failed write
 * leaves the old file and no temporary one), a corrupt file (bad values, unknown keys,
 * binary) reported once and its good lines kept, and the command line overriding it.
 *
 * usage: test_settings SCRATCH_DIR   exit 1 on any failed check */
#include "config/options.h"
#include "config/settings.h"
#include "testlib.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_settings SCRATCH_DIR\n");
        return 2;
    }
    const char *s = argv[1];
    char cfg[1024], home[1024], path[1200], want[1300], msg[1600], dir[1200];
    snprintf(cfg, sizeof cfg, "%s/config", s);
    snprintf(home, sizeof home, "%s/home", s);
    setenv("HOME", home, 1);

    /* the path */
    setenv("XDG_CONFIG_HOME", cfg, 1);
    check(settings_path(path, sizeof path) == 0, "a path");
    snprintf(want, sizeof want, "%s/vitlens/settings", cfg);
    check(!strcmp(path, want), "$XDG_CONFIG_HOME/vitlens/settings: %s", path);
    unsetenv("XDG_CONFIG_HOME");
    settings_path(path, sizeof path);
    snprintf(want, sizeof want, "%s/.config/vitlens/settings", home);
    check(!strcmp(path, want), "unset: ~/.config/vitlens/settings: %s", path);
    setenv("XDG_CONFIG_HOME", "relative", 1);
    settings_path(path, sizeof path);
    check(!strcmp(path, want), "relative: ignored: %s", path);
    setenv("XDG_CONFIG_HOME", cfg, 1);
    settings_path(path, sizeof path);
    snprintf(dir, sizeof dir, "%s/vitlens", cfg);

    /* no file: nothing set, no message */
    Settings st;
    settings_init(&st);
    msg[0] = '\0';
    check(settings_load(&st, path, msg, sizeof msg) == 0 && !msg[0] && st.colormap == -1 &&
              st.opacity < 0 && st.bilinear == -1 && !st.model[0],
          "a missing file: 0, nothing set (%s)", msg);

    /* written (its folder made) and read back; no temporary file left */
    Settings w;
    settings_init(&w);
    w.colormap = 3, w.opacity = 0.35f, w.bilinear = 1, w.show_preds = 0, w.show_distance = 1;
    w.show_controls = 0;
    snprintf(w.model, sizeof w.model, "/m/deit tiny/model.safetensors");
    check(settings_save(&w, path, msg, sizeof msg) == 0, "saved (%s)", msg);
    check(n_files(dir) == 1, "one file in %s: %d", dir, n_files(dir));
    Settings r;
    settings_init(&r);
    check(settings_load(&r, path, msg, sizeof msg) == 0, "read back cleanly");
    check(r.colormap == 3 && r.opacity > 0.34f && r.opacity < 0.36f && r.bilinear == 1 &&
              r.show_preds == 0 && r.show_distance == 1 && r.show_controls == 0 &&
              !strcmp(r.model, w.model) && !r.labels[0],
          "the same values: colormap %d opacity %.2f bilinear %d preds %d distance %d "
          "controls %d model %s",
          r.colormap, (double)r.opacity, r.bilinear, r.show_preds, r.show_distance, r.show_controls,
          r.model);

    /* atomic: a write that fails (its temporary name taken by a folder) leaves the old */
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    make_dir(tmp);
    w.colormap = 0;
    check(settings_save(&w, path, msg, sizeof msg) == -1 && strstr(msg, "cannot write"),
          "a failed write: -1 (%s)", msg);
    settings_init(&r);
    settings_load(&r, path, msg, sizeof msg);
    check(r.colormap == 3, "the old file is intact: colormap %d", r.colormap);
    rmdir(tmp);
    check(settings_save(&w, path, msg, sizeof msg) == 0 && n_files(dir) == 1,
          "then it writes, and leaves no temporary file: %d files", n_files(dir));
    /* a folder that cannot be made: -1, never a crash */
    char blocked[1300];
    snprintf(blocked, sizeof blocked, "%s/file", s);
    write_bytes(blocked, "x", 1);
    snprintf(tmp, sizeof tmp, "%s/vitlens/settings", blocked);
    check(settings_save(&w, tmp, msg, sizeof msg) == -1 && strstr(msg, "folder"),
          "its folder a file: -1 (%s)", msg);

    /* corrupt: reported once (the first bad line, how many), the good lines kept */
    static const char corrupt[] = "# comment\n\ncolormap=turbo\nopacity=abc\ngarbage\n"
                                  "bilinear=1\nfuture=7\nbin\0ary=1\ndistance=2\r\n"
                                  "predictions=0\r\ncontrols=yes\n";
    write_bytes(path, corrupt, sizeof corrupt - 1);
    settings_init(&r);
    msg[0] = '\0';
    int rc = settings_load(&r, path, msg, sizeof msg);
    check(rc == 1 && strstr(msg, "line 4") && strstr(msg, "opacity=abc") &&
              strstr(msg, "and 5 more lines"),
          "the first bad line and how many more: %d, %s", rc, msg);
    check(r.colormap == 3 && r.bilinear == 1 && r.opacity < 0 && r.show_distance == -1 &&
              r.show_preds == 0 && r.show_controls == -1,
          "the good lines kept: colormap %d bilinear %d opacity %.2f distance %d preds %d",
          r.colormap, r.bilinear, (double)r.opacity, r.show_distance, r.show_preds);
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);
    write_bytes(path, junk, sizeof junk);
    settings_init(&r);
    check(settings_load(&r, path, msg, sizeof msg) == 1 && r.colormap == -1,
          "random bytes: reported, nothing set (%s)", msg);

    /* the command line overrides them: --colormap, --opacity given, --model given */
    const char *model = "/no/such/last.safetensors";
    settings_init(&w);
    w.colormap = 2, w.opacity = 0.9f, w.bilinear = 1, w.show_preds = 0;
    snprintf(w.model, sizeof w.model, "%s", path); /* a file that exists */
    settings_save(&w, path, msg, sizeof msg);
    Options o;
    char *args1[] = {"vitlens", "--colormap", "turbo", "x.png", NULL};
    options_parse(&o, 4, args1);
    options_apply_settings(&o, 1);
    check(!o.settings_msg[0], "read cleanly (%s)", o.settings_msg);
    check(o.colormap == 3 && o.opacity > 0.89f && o.bilinear == 1,
          "--colormap wins, the others are the settings': %d %.2f %d", o.colormap,
          (double)o.opacity, o.bilinear);
    check(o.model_path && !strcmp(o.model_path, path), "the window opens the last model: %s",
          o.model_path ? o.model_path : "(none)");
    check(o.settings.show_preds == 0, "the panels for the window: preds %d", o.settings.show_preds);
    char *args2[] = {"vitlens", "--opacity", "0.2", "--top", "1", "x.png", NULL};
    options_parse(&o, 6, args2);
    options_apply_settings(&o, 0);
    check(o.colormap == 2 && o.opacity < 0.21f && !o.model_path,
          "--opacity wins; headless keeps the built-in model: %d %.2f %s", o.colormap,
          (double)o.opacity, o.model_path ? o.model_path : "(none)");
    char *args3[] = {"vitlens", "--model", "mine.safetensors", NULL};
    options_parse(&o, 3, args3);
    options_apply_settings(&o, 1);
    check(!strcmp(o.model_path, "mine.safetensors"), "--model wins: %s", o.model_path);
    snprintf(w.model, sizeof w.model, "%s", model);
    settings_save(&w, path, msg, sizeof msg);
    char *args4[] = {"vitlens", NULL};
    options_parse(&o, 1, args4);
    options_apply_settings(&o, 1);
    check(!o.model_path && strstr(o.settings_msg, "is gone"),
          "a last model that is gone: the built-in one, said so: %s", o.settings_msg);

    /* the last model's photos: written, read back, and opened when no IMAGE is given */
    settings_init(&w);
    snprintf(w.model, sizeof w.model, "%s", path); /* files that exist */
    const char *shown[] = {path, dir};
    settings_set_photos(&w, shown, 2, path);
    check(w.n_images == 2 && w.images[0][0] == '/' && w.photo[0] == '/',
          "the photos as absolute paths: %d, %s", w.n_images, w.photo);
    check(settings_save(&w, path, msg, sizeof msg) == 0, "saved with its photos (%s)", msg);
    settings_init(&r);
    int loaded = settings_load(&r, path, msg, sizeof msg);
    check(loaded == 0 && r.n_images == 2 && !strcmp(r.images[1], w.images[1]) &&
              !strcmp(r.photo, w.photo),
          "its photos read back: %d %s", r.n_images, r.photo);
    options_parse(&o, 1, args4);
    options_apply_settings(&o, 1);
    check(o.model_path && !strcmp(o.model_path, path) && o.n_image_args == 2 && o.start_photo &&
              !strcmp(o.start_photo, w.photo),
          "no IMAGE: the last model on its photos, at the last one: %s, %d images",
          o.model_path ? o.model_path : "(none)", o.n_image_args);
    options_parse(&o, 2, (char *[]){"vitlens", "x.png", NULL});
    options_apply_settings(&o, 1);
    check(o.model_path && o.n_image_args == 1 && !o.start_photo,
          "an IMAGE given: the last model on it, not on its photos");
    settings_set_photos(&w, NULL, 0, NULL);
    settings_save(&w, path, msg, sizeof msg);
    options_parse(&o, 1, args4);
    options_apply_settings(&o, 1);
    check(!o.model_path && !o.n_image_args && !o.settings_msg[0],
          "a last model without photos: the built-in model (its demo scenes), quietly: %s",
          o.model_path ? o.model_path : "(none)");
    return t_finish("test_settings");
}
