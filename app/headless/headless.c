/* headless.c - --top and --export without a window: the model loaded, each photo run
 * (and explained for --class or its top-1), its predictions printed or its maps written
 * (export.c); several photos with the feature PCA over all of them. */
#include "headless/headless.h"
#include "headless/export.h"
#include "headless/lesson.h"
#include "headless/importance.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --top and --export of one photo (dir: where its files go). */
static int headless_photo(const Options *o, Model *m, const Interv *iv, const char *image,
                          const char *dir, JointFeatures *joint) {
    Scene sc = {.ignore_orientation = o->ignore_orientation, .att = o->att, .interv = iv};
    VitError err;
    int rc = 1;
    if (scene_run(&sc, &m->vit, image, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    /* --class, or the top-1: the class-specific maps that --export writes */
    int target = -1;
    if (model_phrase_class(m) >= 0) { /* --text: the phrase, the head's last class */
        target = model_phrase_class(m);
    } else if (o->class_arg) {
        char msg[600];
        if (model_find_class(m, o->class_arg, &target, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            goto done;
        }
    } else if (m->vit.cfg.n_classes > 0) {
        vit_top_k(&target, sc.run.probs, m->vit.cfg.n_classes, 1);
    }
    /* only --export draws class-specific maps: --top skips the backward pass */
    if (dir && target >= 0) {
        if (scene_explain(&sc, target, o->discard, 1, &err)) {
            fprintf(stderr, "vitlens: %s\n", err.msg);
            goto done;
        }
        scene_explain_swap(&sc);
    }
    rc = 0;
    if (o->top_k) rc |= export_top(stdout, m, &sc, o->top_k);
    ExportStyle st = {o->opacity, o->discard, o->colormap, o->bilinear};
    if (!rc && dir) rc |= export_maps(stdout, dir, m, &sc, target, &st, joint);
    int n_png = 0; /* which heads matter for the class: CSV and PNG */
    if (!rc && dir && target >= 0) {
        rc |= export_importance(dir, m, &sc, target, &st, &n_png);
        if (!rc)
            printf("and the head importance table and pruning curve of class %d as CSV and "
                   "PNG (head_importance, head_pruning)\n",
                   target);
    }
done:
    scene_free(&sc);
    return rc;
}

/* --lesson-export: the photo run, then every step of the lesson (lesson.h); the
 * selection checked against the model, 1-based in the messages. */
static int headless_lesson(const Options *o, Model *m) {
    const VitConfig *c = &m->vit.cfg;
    int layer = o->lesson_layer ? o->lesson_layer : 1, head = o->lesson_head ? o->lesson_head : 1;
    int row = o->lesson_row ? o->lesson_row : (c->grid_h + 1) / 2,
        col = o->lesson_col ? o->lesson_col : (c->grid_w + 1) / 2;
    if (layer > c->n_layers || head > c->n_heads || row > c->grid_h || col > c->grid_w) {
        fprintf(stderr,
                "vitlens: --lesson-export: %s has %d layers, %d heads and a %d x %d patch grid "
                "(got layer %d, head %d, patch %d,%d)\n",
                m->name, c->n_layers, c->n_heads, c->grid_h, c->grid_w, layer, head, row, col);
        return 1;
    }
    /* --lesson FILE: its lines, a bad line named and left out; else the default lesson
     * fitted to the model, as Page Down opens it in the window, the --layer, --head and
     * --patch given replacing its lines' */
    LessonScript script = {0};
    if (!o->lesson_path) {
        if (lesson_default_load(&script, o->demo_dir) < 0 || lesson_default_fit(&script, c) < 0) {
            fprintf(stderr, "vitlens: --lesson-export: out of memory\n");
            lesson_script_free(&script);
            return 1;
        }
        for (int i = 0; i < script.n; i++) {
            LessonLine *l = &script.lines[i];
            if (o->lesson_layer) l->layer = o->lesson_layer;
            if (o->lesson_head) l->head = o->lesson_head;
            if (o->lesson_row) l->row = o->lesson_row, l->col = o->lesson_col;
        }
    } else {
        if (lesson_script_load(&script, o->lesson_path) < 0) {
            fprintf(stderr, "vitlens: %s", script.msgs);
            return 1;
        }
        lesson_script_check(&script, c->n_layers, c->n_heads, c->grid_h, c->grid_w,
                            lesson_model_has(c));
        if (script.msgs[0]) fprintf(stderr, "%s", script.msgs);
        if (!script.n) {
            fprintf(stderr, "vitlens: %s: no step to show\n", o->lesson_path);
            lesson_script_free(&script);
            return 1;
        }
    }
    Scene sc = {.ignore_orientation = o->ignore_orientation, .att = o->att};
    VitError err;
    int rc = 1;
    if (scene_run(&sc, &m->vit, o->image_path, &err))
        fprintf(stderr, "vitlens: %s\n", err.msg);
    else
        rc = lesson_export(stdout, o->lesson_export_dir, m, &sc, layer - 1, head - 1,
                           (row - 1) * c->grid_w + col - 1, o->colormap, &script);
    scene_free(&sc);
    lesson_script_free(&script);
    return rc;
}

/* A CLIP model's text side: --classes / --prompts as the head, --text after them; a phrase
 * past the context is cut, with a notice. 0, or 1 (message printed). */
static int headless_text(const Options *o, Model *m) {
    char msg[1200];
    if (model_open_text(m, &o->clip, 1, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    const ClipText *ct = m->clip;
    if (ct && ct->phrase_truncated)
        fprintf(stderr, "vitlens: --text: cut to %s's %d tokens; the rest is not read\n",
                clip_family(ct), clip_context(ct));
    if (ct && ct->n_classes && getenv("VITLENS_TRACE"))
        fprintf(stderr, "vitlens: %d classes x %d templates embedded in %.0f ms%s\n", ct->n_classes,
                ct->n_templates, ct->ms_classes, ct->from_cache ? " (read from the cache)" : "");
    return 0;
}

int headless_run(const Options *o) {
    Model m;
    VitError err;
    if (model_load(&m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    model_warn(stderr, &m);
    if (headless_text(o, &m)) {
        model_free(&m);
        return 1;
    }
    if (o->lesson_export_dir) {
        if (interv_any(&o->interv)) { /* the lesson walks the model as trained */
            fprintf(stderr, "vitlens: --lesson-export shows the unchanged model; --ablate, "
                            "--drop-patches, --fill-patches, --pos-embed and --temperature go "
                            "with --top, --export, --eval or the window\n");
            model_free(&m);
            return 2;
        }
        int rc = headless_lesson(o, &m);
        model_free(&m);
        return rc;
    }
    /* the interventions (--ablate, ...), checked against the model */
    Interv iv = {0};
    char msg[600];
    if (interv_any(&o->interv) && interv_build(&iv, &o->interv, &m.vit.cfg, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        model_free(&m);
        return 2; /* a value that does not fit the model: bad usage, as one that cannot parse */
    }
    if (o->export_dir) export_say_skipped(stderr, &m); /* once, not once per photo */
    /* one photo: its files straight into the folder (--top always comes here) */
    int rc = 0, n = o->n_image_args;
    if (n <= 1) {
        rc = headless_photo(o, &m, &iv, o->image_path, o->export_dir, NULL);
        interv_free(&iv);
        model_free(&m);
        return rc;
    }
    /* several: every photo's features first, for the joint PCA, then each photo into
     * DIR/STEM/; a photo that does not load is skipped, the rest still written */
    JointFeatures jf = {0};
    jf.paths = calloc((size_t)n, sizeof *jf.paths);
    if (!jf.paths) {
        fprintf(stderr, "vitlens: out of memory\n");
        interv_free(&iv);
        model_free(&m);
        return 1;
    }
    jf.n_images = n;
    for (int i = 0; i < n; i++) snprintf(jf.paths[i], sizeof jf.paths[i], "%s", o->image_args[i]);
    if (mkdir(o->export_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "vitlens: %s: cannot create directory: %s\n", o->export_dir,
                strerror(errno));
        rc = 1;
    }
    if (!rc && scene_joint_features(&jf, &m.vit, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        rc = 1;
    }
    if (!rc && jf.skipped[0]) fprintf(stderr, "vitlens: skipped: %s\n", jf.skipped);
    for (int i = 0; i < n && !rc; i++) {
        if (jf.image_of[i] < 0) continue;
        char dir[2048], stem[256];
        const char *base = strrchr(jf.paths[i], '/');
        snprintf(stem, sizeof stem, "%s", base ? base + 1 : jf.paths[i]);
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = '\0';
        snprintf(dir, sizeof dir, "%s/%s", o->export_dir, stem);
        rc = headless_photo(o, &m, &iv, jf.paths[i], dir, &jf);
    }
    joint_features_free(&jf);
    free(jf.paths);
    interv_free(&iv);
    model_free(&m);
    return rc;
}
