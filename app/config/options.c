/* options.c - the command line: parsing it with the options' table (opttable.c), the
 * checks of the options that go together, --help around the table's option list, and
 * what the settings and the built-in model fill in. */
#define _POSIX_C_SOURCE 200809L /* isatty */
#include "config/options.h"
#include "config/files.h"
#include "config/keys.h"
#include "config/models.h"
#include "config/opttable.h"
#include "view/mapkind.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * --help: the synopsis, the description, the options' table, the keys */

/* The synopsis: a line per mode. */
static void usage_synopsis(FILE *f) {
    fputs("usage: vitlens [--model PATH] [--labels FILE] [--layout FILE] [--heads N]\n"
          "               [--size S|HxW] [--whole] [--opacity A] [--discard R]\n"
          "               [--colormap NAME] [--bilinear]\n"
          "               [--class ID|NAME] [--save-dir DIR] [IMAGE|FOLDER ...]\n"
          "       vitlens [--model PATH] [--labels FILE] [--size S|HxW] [--whole] --top K IMAGE\n"
          "       vitlens --model CLIP [--classes NAMES|imagenet | --prompts FILE]\n"
          "               [--template T|--templates FILE] [--text PHRASE] [--vocab PATH]\n"
          "               [--top K | --export DIR | --eval] IMAGE    (or the window: /)\n"
          "       vitlens [--model PATH] [--size S|HxW] [--whole] [--opacity A] [--discard R]\n"
          "               [--colormap NAME] [--bilinear]\n"
          "               [--class ID|NAME | --contrast A,B | --similar IMAGE2] --export DIR "
          "IMAGE...\n"
          "       vitlens [--model PATH] [--class ID|NAME] [--eval-out DIR] [--masks DIR]\n"
          "               [--shard K/N] [--eval-steps N] [--no-sanity] --eval IMAGE|FOLDER...\n"
          "       vitlens [--model PATH] [--class ID|NAME] [--eval-out DIR] [--shard K/N]\n"
          "               --agreement IMAGE|FOLDER...\n"
          "       vitlens [--eval-out DIR] --eval-merge DIR...\n"
          "       vitlens [--model PATH] [--size S|HxW] [--layer L] [--head H] [--patch ROW,COL]\n"
          "               [--lesson FILE] --lesson-export DIR IMAGE\n"
          "\n",
          f);
}

/* The description, with the map kinds' lists from the table. */
static void usage_about(FILE *f) {
    fputs("Runs a Vision Transformer (.safetensors) on a photo and shows the attention\n"
          "of the CLS token over the patch grid: every layer and head, the head fusions\n"
          "(mean, max, min) and attention rollout, as a heatmap over the crop the model saw;\n"
          "with register or distillation tokens, bars beside it show their share of the row.\n",
          f);
    /* the kinds' lists from the table (mapkind.h) */
    char names[1024];
    keys_kind_names(names, sizeof names - 1, MAP_GROUP_CLASS, 0);
    strcat(names, ".");
    fputs("For a classifier, class-specific maps show why it sees a class (1-5, --class):", f);
    keys_print_wrapped(f, names, 0, 80);
    keys_kind_names(names, sizeof names - 1, MAP_GROUP_TOKENS, 1);
    strcat(names, ".");
    fputs("What the tokens hold:", f);
    keys_print_wrapped(f, names, 0, 21);
    fputs("Without --model it uses the built-in model, a small ViT trained by this project to\n"
          "tell which of six shapes a cluttered scene holds; without an IMAGE it opens on the\n"
          "first of that model's demo scenes (N steps through them). Several images, or a\n"
          "folder, make a slideshow: N / P step through them and keep the view.\n"
          "\n",
          f);
}

/* The keys (keys_list, as the help overlay shows them), the kinds in E's order, the
 * environment. */
static void usage_keys(FILE *f) {
    KeyList keys;
    keys_list(&keys);
    for (int i = 0; i < keys.n; i++) fprintf(f, "  %-14s  %s\n", keys.rows[i][0], keys.rows[i][1]);
    fputs("\nmap kinds, in the order E steps through them:\n ", f);
    for (int m = 0, col = 1; m < MAP_KIND_COUNT; m++) { /* wrapped at 80 columns */
        int w = (int)strlen(MAP_KINDS[m].name) + (m + 1 < MAP_KIND_COUNT);
        if (col + 1 + w > 80) fputs("\n ", f), col = 1;
        col += fprintf(f, " %s%s", MAP_KINDS[m].name, m + 1 < MAP_KIND_COUNT ? "," : "");
    }
    fprintf(f,
            "\n\n"
            "environment:\n"
            "  VITLENS_ASSETS      the folder ASSETS holding default/: the built-in model\n"
            "                      and its demo/ scenes (default: %s)\n"
            "  VITLENS_MODELS_DIR  a folder of downloaded models looked in first; then\n"
            "                      $XDG_DATA_HOME/vitlens/models (default\n"
            "                      ~/.local/share/vitlens/models)%s%s\n"
            "  VITLENS_SHADER_DIR  directory of the *.glsl shaders\n"
            "  VITLENS_FONT        font file to use instead of fontconfig's DejaVu Sans\n"
            "  VITLENS_TRACE=1     print each drawn frame's state and status line on stdout\n"
            "  VITLENS_PRESENT=swap  an offscreen canvas copied whole and a swap (default on\n"
            "                      X11 with GLX_MESA_copy_sub_buffer: only what changed is\n"
            "                      copied to the window)\n"
            "  VITLENS_FULL_REDRAW=1   draw every frame whole, not only what changed\n"
            "  VITLENS_CHECK_REDRAW=1  also draw each partial frame whole, offscreen, and say\n"
            "                      how many pixels differ (VITLENS_TRACE's mismatch=)\n"
            "  VITLENS_ATT         how a forward pass keeps the attention for the maps: auto\n"
            "                      (default: kept when it takes at most 512 MiB), keep, or\n"
            "                      recompute (queries and keys kept, the attention recomputed\n"
            "                      by each map: the large-input path, maps on the worker)\n"
            "\n"
            "The window remembers the colormap, opacity, upsampling, panels and the last model\n"
            "with its photos in $XDG_CONFIG_HOME/vitlens/settings (default\n"
            "~/.config/vitlens/settings), written on quit; the options override them; --top\n"
            "and --export only read them. Without an IMAGE the last model opens on its photos,\n"
            "at the one it showed last; with none, the built-in model on its demo scenes.\n"
            "The window prints \"ready PATH\" on stdout once a photo's maps are on screen.\n"
            "Errors name the file; the headless modes exit 1 on bad input, 2 on bad usage.\n",
            VITLENS_ASSETS_DIR_DEFAULT, VITLENS_MODELS_DIR_SOURCE[0] ? ", then " : "",
            VITLENS_MODELS_DIR_SOURCE);
}

void options_usage(FILE *f) {
    usage_synopsis(f);
    usage_about(f);
    fputs("options:\n", f);
    opt_usage(f);
    fputs("\nkeys:\n", f);
    usage_keys(f);
}

/* ---------------------------------------------------------------------------
 * Parsing */

/* The mode of the run, one of opttable.h's OPT_WINDOW... (at most one headless mode). */
static unsigned options_mode(const Options *o) {
    return o->top_k               ? OPT_TOP
           : o->export_dir        ? OPT_EXPORT
           : o->eval              ? OPT_EVAL
           : o->eval_merge        ? OPT_EVAL_MERGE
           : o->agreement         ? OPT_AGREEMENT
           : o->lesson_export_dir ? OPT_LESSON
                                  : OPT_WINDOW;
}

/* Was the option named so on the command line? */
static int given(const Options *o, const char *name) {
    const OptRow *r = opt_find(name);
    return r && o->given[r - OPTIONS];
}

/* VITLENS_ATT: force the large-input path (or keep the attention), for tests and for
 * measuring; the default keeps it when it fits VIT_ATT_KEEP_MAX_BYTES. 0, or 2 (message on
 * stderr). */
static int parse_att(Options *o) {
    const char *att = getenv("VITLENS_ATT");
    if (!att || !*att || !strcmp(att, "auto")) return 0;
    if (!strcmp(att, "keep")) {
        o->att = VIT_ATT_KEEP;
    } else if (!strcmp(att, "recompute")) {
        o->att = VIT_ATT_RECOMPUTE;
    } else {
        fprintf(stderr, "vitlens: VITLENS_ATT=%s: expected auto, keep or recompute\n", att);
        return 2;
    }
    return 0;
}

/* After the arguments: the defaults, VITLENS_ATT, and the options that go together.
 * 0, or 2 with the message on stderr. */
static int parse_check(Options *o) {
    if (!o->eval_steps) o->eval_steps = 20;
    if (parse_att(o)) return 2;
    /* the headless modes exclude one another, and each option that only some modes read is
     * refused in the others (its row's modes) rather than ignored */
    int modes = !!o->top_k + !!o->export_dir + o->eval + o->eval_merge + !!o->lesson_export_dir +
                o->agreement;
    if (modes > 1) {
        fprintf(stderr, "vitlens: --top, --export, --lesson-export, --eval, --eval-merge and "
                        "--agreement go one at a time\n");
        return 2;
    }
    unsigned mode = options_mode(o);
    for (int i = 0; i < OPTION_COUNT; i++) {
        if (!o->given[i] || !OPTIONS[i].modes || (OPTIONS[i].modes & mode)) continue;
        char with[200], now[40];
        opt_mode_names(with, sizeof with, OPTIONS[i].modes);
        opt_mode_names(now, sizeof now, mode);
        fprintf(stderr, "vitlens: %s goes with %s, not %s\n", OPTIONS[i].name, with, now);
        return 2;
    }
    if (o->lesson_export_dir && o->n_image_args != 1) {
        fprintf(stderr, "vitlens: --lesson-export takes one IMAGE (got %d)\n", o->n_image_args);
        return 2;
    }
    if ((o->eval || o->eval_merge || o->agreement) && !o->image_path) {
        fprintf(stderr, "vitlens: %s needs %s\n",
                o->eval        ? "--eval"
                : o->agreement ? "--agreement"
                               : "--eval-merge",
                o->eval_merge ? "the shards' --eval-out folders" : "an IMAGE or FOLDER");
        return 2;
    }
    char msg[600];
    if (clip_spec_check(&o->clip, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 2;
    }
    if ((o->compare_model || o->compare_image) && (o->contrast_arg || o->similar_path)) {
        fprintf(stderr, "vitlens: --compare and --compare-image go with --class, not with "
                        "--contrast or --similar\n");
        return 2;
    }
    if ((o->compare_model || o->compare_image) && o->n_image_args > 1) {
        fprintf(stderr, "vitlens: --compare and --compare-image take one IMAGE (got %d)\n",
                o->n_image_args);
        return 2;
    }
    /* what the class-specific maps explain: one of --class, --text, --contrast, --similar */
    int scores = !!o->class_arg + !!o->clip.text + !!o->contrast_arg + !!o->similar_path;
    if (scores > 1 && (o->contrast_arg || o->similar_path)) {
        fprintf(stderr, "vitlens: --class, --text, --contrast and --similar each say what the "
                        "class-specific maps explain: give one\n");
        return 2;
    }
    if (o->clip.text && o->class_arg) {
        fprintf(stderr, "vitlens: --class and --text both say what the maps explain: give one\n");
        return 2;
    }
    if (o->every && o->fps > 0) {
        fprintf(stderr, "vitlens: --every and --fps both thin a video's frames: give one\n");
        return 2;
    }
    if (o->camera && (o->compare_model || o->compare_image || o->similar_path)) {
        fprintf(stderr, "vitlens: --camera does not go with --compare, --compare-image or "
                        "--similar\n");
        return 2;
    }
    if (o->camera && o->n_image_args) {
        fprintf(stderr, "vitlens: --camera %s takes no IMAGE (got %s)\n", o->camera,
                o->image_args[0]);
        return 2;
    }
    if ((o->top_k || o->export_dir) && !o->image_path && !o->camera) {
        fprintf(stderr, "vitlens: --%s needs an IMAGE\n", o->top_k ? "top" : "export");
        return 2;
    }
    if (o->top_k && o->n_image_args > 1) {
        fprintf(stderr, "vitlens: --%s takes one image (got %s and %s)\n",
                o->top_k ? "top" : "export", o->image_args[0], o->image_args[1]);
        return 2;
    }
    return 0;
}

/* CLIP's zero-shot classes through the text tower (--classes imagenet: 7000 texts, a minute
 * or more the first time): how far, on stderr; on a terminal one line rewritten. */
static void clip_progress(int done, int total, int n_classes, int n_templates) {
    static int last_pct = -1;
    int tty = isatty(2), pct = (int)(100.0 * done / total);
    if (done == 0) {
        fprintf(stderr,
                "vitlens: embedding %d classes x %d templates (%d texts) with the text "
                "tower; kept in the cache for the next run\n",
                n_classes, n_templates, total);
        last_pct = -1;
    }
    if (tty ? pct != last_pct : (pct / 25 != last_pct / 25 || done == total))
        fprintf(stderr,
                tty ? "\rvitlens: %d / %d texts (%d%%)%s" : "vitlens: %d / %d texts (%d%%)%s", done,
                total, pct, tty ? (done == total ? "\n" : "") : "\n");
    last_pct = pct;
}

int options_parse(Options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->clip.progress = clip_progress;
    o->opacity = 0.6f;   /* --help's default; the settings may replace it later */
    int only_images = 0; /* after "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const OptRow *r = only_images || a[0] != '-' ? NULL : opt_find(a);
        if (only_images || a[0] != '-') { /* an IMAGE or FOLDER */
            if (o->n_image_args >= OPTIONS_MAX_IMAGES) {
                fprintf(stderr, "vitlens: more than %d images\n", OPTIONS_MAX_IMAGES);
                return 2;
            }
            if (!o->image_path) o->image_path = a;
            o->image_args[o->n_image_args++] = a;
        } else if (!r) { /* "-v", "-", "-model", "--modle": a file named so goes after "--" */
            fprintf(stderr, "vitlens: unknown option %s (see --help%s)\n", a,
                    a[1] == '-' ? "" : "; a file whose name starts with -: after --");
            return 2;
        } else if (r->kind == OPT_END) {
            only_images = 1;
        } else if (r->kind == OPT_INFO) {
            return r->parse(o, r, NULL);
        } else { /* an option, and its value when it takes one: the next argument */
            if (r->arg && i + 1 >= argc) {
                fprintf(stderr, "vitlens: %s needs a value (see --help)\n", a);
                return 2;
            }
            if (opt_set(o, r, r->arg ? argv[++i] : NULL)) return 2;
            o->given[r - OPTIONS] = 1;
        }
    }
    return parse_check(o);
}

/* No IMAGE given: the photos the last model showed, those still there, become the IMAGE
 * arguments (and the photo it showed last the one opened first). 1 when some are. */
static int options_remembered_photos(Options *o) {
    Settings *s = &o->settings;
    struct stat st;
    for (int i = 0; i < s->n_images && o->n_image_args < OPTIONS_MAX_IMAGES; i++)
        if (stat(s->images[i], &st) == 0) o->image_args[o->n_image_args++] = s->images[i];
    if (s->photo[0] && stat(s->photo, &st) == 0) o->start_photo = s->photo;
    if (!o->n_image_args && o->start_photo) o->image_args[o->n_image_args++] = o->start_photo;
    if (o->n_image_args) o->image_path = o->image_args[0];
    return o->n_image_args > 0;
}

void options_apply_settings(Options *o, int window) {
    Settings *s = &o->settings;
    settings_init(s);
    o->settings_msg[0] = '\0';
    if (settings_path(o->settings_path, sizeof o->settings_path)) {
        o->settings_path[0] = '\0';
        return;
    }
    settings_load(s, o->settings_path, o->settings_msg, sizeof o->settings_msg);
    /* the display settings apply to every mode (so --export looks as the window did),
     * unless the command line gave them; the model and photos only to the window */
    if (!given(o, "--colormap") && s->colormap >= 0) o->colormap = s->colormap;
    if (!given(o, "--opacity") && s->opacity >= 0.0f) o->opacity = s->opacity;
    if (!o->bilinear && s->bilinear > 0) o->bilinear = 1;
    if (!window || o->model_path || !s->model[0]) return;
    struct stat st;
    if (stat(s->model, &st) != 0) { /* moved or deleted since: say so; the built-in model instead */
        if (!o->settings_msg[0])
            snprintf(o->settings_msg, sizeof o->settings_msg,
                     "the last model, %.400s, is gone: the built-in model instead", s->model);
        return;
    }
    /* no IMAGE and none remembered: the built-in model on its demo scenes, as without
     * settings (a downloaded model has no demo scenes to open on) */
    if (!o->n_image_args && !options_remembered_photos(o)) return;
    snprintf(o->model_buf, sizeof o->model_buf, "%s", s->model);
    o->model_path = o->model_buf;
    if (!o->labels_path && s->labels[0] && stat(s->labels, &st) == 0) {
        snprintf(o->labels_buf, sizeof o->labels_buf, "%s", s->labels);
        o->labels_path = o->labels_buf;
    }
}

/* --classes imagenet / imagenet80: the names and templates shipped in ASSETS/clip/. 0, or
 * -1 (message printed). */
static int options_imagenet(Options *o) {
    const char *c = o->clip.classes;
    if (!c || (strcmp(c, CLIP_IMAGENET) && strcmp(c, CLIP_IMAGENET_80))) return 0;
    char msg[1200];
    if (files_asset(o->clip_classes_buf, sizeof o->clip_classes_buf, CLIP_IMAGENET_CLASSES, msg,
                    sizeof msg)) {
        fprintf(stderr, "vitlens: --classes %s: %s\n", c, msg);
        return -1;
    }
    o->clip.prompts = o->clip_classes_buf, o->clip.classes = NULL;
    if (o->clip.template_ || o->clip.templates) return 0; /* the user's templates instead */
    const char *t =
        strcmp(c, CLIP_IMAGENET) ? CLIP_IMAGENET_TEMPLATES_80 : CLIP_IMAGENET_TEMPLATES_7;
    if (files_asset(o->clip_templates_buf, sizeof o->clip_templates_buf, t, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: --classes %s: %s\n", c, msg);
        return -1;
    }
    o->clip.templates = o->clip_templates_buf;
    return 0;
}

/* Are a and b the same file (device and inode)? */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int options_default_model(Options *o) {
    char msg[4800];
    if (options_imagenet(o)) return -1;
    /* --model builtin names the built-in model, as no --model does */
    if (o->model_path && !strcmp(o->model_path, "builtin")) o->model_path = NULL;
    if (o->model_path) { /* model_path and labels_path may point into model_buf, labels_buf */
        char weights[sizeof o->model_buf], labels[sizeof o->labels_buf];
        if (models_resolve(weights, sizeof weights, labels, sizeof labels, o->model_path, msg,
                           sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
        memcpy(o->model_buf, weights, sizeof weights);
        o->model_path = o->model_buf;
        if (!o->labels_path && labels[0]) {
            memcpy(o->labels_buf, labels, sizeof labels);
            o->labels_path = o->labels_buf;
        }
    }
    /* the built-in model and its demo scenes: the model when none was given, and the
     * demo folder that N / P step through without a photo */
    if (files_default_model(o->default_model, sizeof o->default_model, o->demo_dir,
                            sizeof o->demo_dir, msg, sizeof msg)) {
        o->default_model[0] = o->demo_dir[0] = '\0';
        if (o->model_path) return 0; /* not needed: N then steps through the photo's folder */
        fprintf(stderr, "vitlens: %s\n", msg);
        return -1;
    }
    /* the built-in model named by its path is the built-in model: its demo scenes too */
    if (o->model_path && !same_file(o->model_path, o->default_model)) return 0;
    o->model_path = o->default_model;
    /* the window opens on the first demo scene; the headless modes need an IMAGE */
    if (!o->image_path && !o->top_k && !o->export_dir &&
        files_step(o->first_demo, sizeof o->first_demo, o->demo_dir, 1) == 0)
        o->image_path = o->first_demo;
    return 0;
}
