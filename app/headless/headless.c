/* headless.c - --top and --export without a window: the model loaded, each photo run
 * (and explained for --class or its top-1), its predictions printed or its maps written
 * (export.c); several photos with the feature PCA over all of them. */
#include "headless/headless.h"
#include "headless/export.h"
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
    if (o->class_arg) {
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

int headless_run(const Options *o) {
    Model m;
    VitError err;
    if (model_load(&m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    /* the interventions (--ablate, ...), checked against the model */
    Interv iv = {0};
    char msg[600];
    if (interv_any(&o->interv) && interv_build(&iv, &o->interv, &m.vit.cfg, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        model_free(&m);
        return 1;
    }
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
