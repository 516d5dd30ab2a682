/* headless.c - --top and --export without a window: the model loaded, each photo run
 * (and explained for --class or its top-1), its predictions printed or its maps written
 * (export.c); several photos with the feature PCA over all of them. */
#include "headless/headless.h"
#include "headless/export.h"
#include "config/files.h"
#include "headless/lesson.h"
#include "headless/importance.h"
#include "config/models.h"
#include "media/media.h"
#include "render/text.h"
#include "view/compare.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* e [E] = the pooled embedding of the photo at path (vit_embedding), run as sc's is. NULL
 * with the message on stderr. The caller frees it. */
static float *photo_embedding(const Model *m, const Scene *like, const char *path) {
    Scene other = {
        .ignore_orientation = like->ignore_orientation, .att = like->att, .interv = like->interv};
    VitError err;
    float *e = malloc((size_t)vit_embedding_dim(&m->vit) * sizeof *e);
    if (!e || scene_run(&other, &m->vit, path, &err) ||
        vit_embedding(e, &other.run, &m->vit, &err)) {
        fprintf(stderr, "vitlens: --similar: %s\n", e ? err.msg : "out of memory");
        free(e), e = NULL;
    }
    scene_free(&other);
    return e;
}

/* --top and --export of one photo (dir: where its files go); similar_to (or NULL): the
 * photo whose embedding the maps explain the cosine with (--similar). frame (or NULL): a
 * video's frame, the photo's pixels, image then only names it; hold (or NULL): the feature
 * PCA's basis held over the video's frames (scene.h). keep (or NULL): the Scene
 * handed to the caller; probs (or NULL): [C] its probabilities copied there. */
static int headless_photo(const Options *o, Model *m, const Interv *iv, const char *image,
                          const MediaFrame *frame, PcaHold *hold, const char *dir,
                          JointFeatures *joint, const char *similar_to, Scene *keep, float *probs) {
    Scene sc = {.ignore_orientation = o->ignore_orientation,
                .att = o->att,
                .interv = iv,
                .pca_hold = frame ? hold : NULL,
                .frame = frame ? frame->index : -1};
    SceneScore score;
    float *ref = NULL;
    VitError err;
    char msg[600];
    int rc = 1;
    if (frame ? scene_run_rgb(&sc, &m->vit, frame->rgb, frame->w, frame->h, image, &err)
              : scene_run(&sc, &m->vit, image, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    if (probs && m->vit.cfg.n_classes > 0)
        memcpy(probs, sc.run.probs, (size_t)m->vit.cfg.n_classes * sizeof *probs);
    /* what the class-specific maps that --export writes explain: --class, or the top-1, or
     * the score of --contrast or --similar */
    int target = -1;
    if (model_phrase_class(m) >= 0) { /* --text: the phrase, the head's last class */
        target = model_phrase_class(m);
    } else if (o->contrast_arg) {
        if (scene_score_parse_contrast(&score, m, o->contrast_arg, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            goto done;
        }
        sc.score = &score, target = SCENE_SCORE;
    } else if (similar_to) {
        float *e = malloc((size_t)vit_embedding_dim(&m->vit) * sizeof *e);
        if (!(ref = photo_embedding(m, &sc, similar_to)) || !e ||
            vit_embedding(e, &sc.run, &m->vit, &err)) {
            if (ref) fprintf(stderr, "vitlens: %s\n", e ? err.msg : "out of memory");
            free(e);
            goto done;
        }
        double dot = 0, ee = 0, rr = 0;
        for (int i = 0; i < vit_embedding_dim(&m->vit); i++)
            dot += (double)e[i] * ref[i], ee += (double)e[i] * e[i], rr += (double)ref[i] * ref[i];
        free(e);
        printf("cos(e, e') = %.6f: the pooled embeddings of %s and %s\n",
               ee > 0 && rr > 0 ? dot / sqrt(ee * rr) : 0.0, sc.name, similar_to);
        scene_score_similar(&score, ref, similar_to);
        sc.score = &score, target = SCENE_SCORE;
    } else if (o->class_arg) {
        if (model_find_class(m, "--class", o->class_arg, &target, msg, sizeof msg)) {
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
    int n_png = 0; /* which heads matter for the class: CSV and PNG (a class's, not a score's) */
    if (!rc && dir && target >= 0 && target != SCENE_SCORE) {
        rc |= export_importance(dir, m, &sc, target, &st, &n_png);
        if (!rc)
            printf("and the head importance table and pruning curve of class %d as CSV and "
                   "PNG (head_importance, head_pruning)\n",
                   target);
    }
done:
    if (keep && !rc && !sc.score) { /* the caller's now (a score's ref would go with ref) */
        *keep = sc;
        keep->name = keep->path + (sc.name - sc.path); /* name points into path: the copy's */
    } else
        scene_free(&sc);
    free(ref);
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

/* DIR/STEM: where a photo's files go when a run writes several, STEM its file name without
 * the extension. */
static void photo_dir(char *dir, size_t n, const char *export_dir, const char *path) {
    char stem[256];
    const char *base = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", base ? base + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    snprintf(dir, n, "%s/%s", export_dir, stem);
}

/* --compare MODEL2 / --compare-image IMAGE2 with --top or --export: pane A (the model on
 * the photo) and pane B (MODEL2, or the model, on IMAGE2, or the photo), each run and
 * written as alone (--top: each one's top-K after a "# A: ..." line; --export: DIR/a/ and
 * DIR/b/), then what compares them (export_compare). 0, or 1 with the message printed. */
static int headless_compare(const Options *o, Model *ma, const Interv *iv) {
    Model mb_own, *mb = ma;
    VitError err;
    char msg[4800];
    const char *image_b = o->compare_image ? o->compare_image : o->image_path;
    if (o->compare_model) {
        char weights[1200], labels[1200];
        const char *path = o->compare_model;
        if (!strcmp(path, "builtin")) {
            path = o->default_model;
            labels[0] = '\0';
        } else if (models_resolve(weights, sizeof weights, labels, sizeof labels, path, msg,
                                  sizeof msg)) {
            fprintf(stderr, "vitlens: --compare: %s\n", msg);
            return 1;
        } else {
            path = weights;
        }
        if (model_load(&mb_own, path, &o->load, labels[0] ? labels : NULL, 1, &err)) {
            fprintf(stderr, "vitlens: --compare: %s\n", err.msg);
            return 1;
        }
        mb = &mb_own;
        model_warn(stderr, mb);
        if (headless_text(o, mb)) {
            model_free(mb);
            return 1;
        }
    }
    Interv iv_b = {0};
    if (mb != ma && interv_any(&o->interv) &&
        interv_build(&iv_b, &o->interv, &mb->vit.cfg, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: --compare: %s\n", msg);
        model_free(mb);
        return 2;
    }
    const Interv *ivb = mb != ma ? &iv_b : iv;
    Scene a = {0}, b = {0};
    char dir_a[2048], dir_b[2048];
    snprintf(dir_a, sizeof dir_a, "%s/a", o->export_dir ? o->export_dir : ".");
    snprintf(dir_b, sizeof dir_b, "%s/b", o->export_dir ? o->export_dir : ".");
    int rc = 0;
    if (o->export_dir && files_make_dir(o->export_dir, 0777, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        rc = 1;
    }
    const char *dirs[2] = {o->export_dir ? dir_a : NULL, o->export_dir ? dir_b : NULL};
    Model *models[2] = {ma, mb};
    const char *images[2] = {o->image_path, image_b};
    const Interv *ivs[2] = {iv, ivb};
    Scene *scenes[2] = {&a, &b};
    if (o->export_dir && mb != ma) export_say_skipped(stderr, mb, 0);
    /* --class names a class of the model's; MODEL2's classes may be others (the window's
     * pane B explains its own top-1 too) */
    Options ob = *o;
    ob.class_arg = NULL;
    if (o->class_arg && mb != ma)
        fprintf(stderr,
                "vitlens: --compare: --class %s is pane A's; pane B explains %s's own "
                "top-1\n",
                o->class_arg, mb->name);
    for (int p = 0; p < 2 && !rc; p++) {
        if (o->top_k) printf("# %c: %s on %s\n", "AB"[p], models[p] -> name, images[p]);
        fflush(stdout);
        rc = headless_photo(p && mb != ma ? &ob : o, models[p], ivs[p], images[p], NULL, NULL,
                            dirs[p], NULL, NULL, scenes[p], NULL);
    }
    if (!rc && o->export_dir) {
        ExportStyle st = {o->opacity, o->discard, o->colormap, o->bilinear};
        rc = export_compare(stdout, o->export_dir, ma, &a, mb, &b, &st);
    }
    scene_free(&a), scene_free(&b);
    interv_free(&iv_b);
    if (mb != ma) model_free(mb);
    return rc;
}

/* --every / --fps: 1 when frame f is kept. *next_ns: where --fps's next slot starts (0 at
 * first); a timestamp within 1 us before it counts as at it (timestamps are rounded to the
 * ns: a 30 fps stream's frame 3 is at 99999999 ns, not 1e8). A frame without a timestamp
 * is kept. */
static int keep_frame(const Options *o, const MediaFrame *f, int64_t *next_ns) {
    if (o->every) return f->index % o->every == 0;
    if (o->fps <= 0 || f->pts_ns < 0) return 1;
    if (f->pts_ns + 1000 < *next_ns) return 0;
    /* the slot this frame is in, then the next one's start */
    double slot = floor((double)(f->pts_ns + 1000) * o->fps / 1e9);
    *next_ns = (int64_t)ceil((slot + 1) * 1e9 / o->fps);
    return 1;
}

/* One frame's line of frames.csv: frame, time_s, then class, prob, label of the top 5 (as
 * many as the model has; the label quoted, its quotes doubled, RFC 4180). */
static void csv_frame(FILE *csv, const Model *m, const MediaFrame *f, const float *probs) {
    int C = m->vit.cfg.n_classes, k = C < 5 ? C : 5, idx[5];
    fprintf(csv, "%ld,", f->index);
    if (f->pts_ns >= 0) fprintf(csv, "%.6f", f->pts_ns / 1e9);
    if (k > 0) vit_top_k(idx, probs, C, k);
    for (int i = 0; i < k; i++) {
        const char *label = model_label(m, idx[i]);
        fprintf(csv, ",%d,%.6g,\"", idx[i], (double)probs[idx[i]]);
        for (const char *q = label ? label : ""; *q; q++)
            fprintf(csv, *q == '"' ? "\"\"" : "%c", *q);
        fputc('"', csv);
    }
    fputc('\n', csv);
}

/* --top and --export of a video (media.h, o->image_path) or a camera (--camera: the newest
 * frame each time the model is free): its frames in order, those --every / --fps keep (at
 * most --frames) each run as a photo; --export writes each into DIR/frame_NNNNNN/
 * (NNNNNN its index in the stream; the feature PCA's colours on the basis of the first frame
 * written, held: scene.h) and a line per frame into DIR/frames.csv; --top prints
 * each after "# frame N T s". A frame that fails stops the run (exit 1), as a decoder's
 * error does; the frames before it are written. */
static int headless_video(const Options *o, Model *m, const Interv *iv) {
    MediaSource src;
    const char *what = o->camera ? o->camera : o->image_path;
    VitError err;
    char msg[600], path[2048];
    FILE *csv = NULL;
    float *probs = NULL;
    int C = m->vit.cfg.n_classes;
    if (o->similar_path) {
        fprintf(stderr, "vitlens: --similar takes a photo, not a video (%s)\n", what);
        return 2;
    }
    /* a camera does not wait for the model: the newest frame wins */
    if (o->camera ? media_open(&src, MEDIA_CAMERA, what, MEDIA_NEWEST, &err)
                  : media_open(&src, MEDIA_FILE, what, MEDIA_ALL_FRAMES, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    int rc = 0, got = 0;
    if (C > 0 && !(probs = malloc((size_t)C * sizeof *probs))) {
        fprintf(stderr, "vitlens: out of memory\n");
        rc = 1;
    }
    if (!rc && o->export_dir) {
        snprintf(path, sizeof path, "%s/frames.csv", o->export_dir);
        if (files_make_dir(o->export_dir, 0777, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            rc = 1;
        } else if (!(csv = fopen(path, "w"))) {
            fprintf(stderr, "vitlens: %s: cannot write: %s\n", path, strerror(errno));
            rc = 1;
        } else {
            fprintf(csv, "frame,time_s");
            for (int i = 1; i <= (C < 5 ? C : 5); i++)
                fprintf(csv, ",class%d,prob%d,label%d", i, i, i);
            fputc('\n', csv);
        }
    }
    const MediaFrame *f;
    PcaHold hold = {0}; /* the feature PCA's colours: fitted on the first frame written */
    int64_t next_ns = 0;
    long kept = 0;
    const char *base = strrchr(what, '/') ? strrchr(what, '/') + 1 : what;
    while (!rc && (!o->max_frames || kept < o->max_frames) &&
           (got = media_next(&src, &f, &err)) > 0) {
        if (!keep_frame(o, f, &next_ns)) continue;
        char name[1100], dir[2100];
        snprintf(name, sizeof name, "%s#%ld", o->camera ? base : what, f->index);
        if (o->export_dir) snprintf(dir, sizeof dir, "%s/frame_%06ld", o->export_dir, f->index);
        if (o->top_k)
            printf("# frame %ld %.6f s\n", f->index, f->pts_ns >= 0 ? f->pts_ns / 1e9 : -1.0);
        rc = headless_photo(o, m, iv, name, f, &hold, o->export_dir ? dir : NULL, NULL, NULL, NULL,
                            probs);
        if (!rc && csv) csv_frame(csv, m, f, probs), fflush(csv); /* a camera: Ctrl+C ends it */
        kept++;
        fflush(stdout);
    }
    if (!rc && got < 0) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        rc = 1;
    }
    if (csv && fclose(csv) && !rc) {
        fprintf(stderr, "vitlens: %s: cannot write: %s\n", path, strerror(errno));
        rc = 1;
    }
    if (o->export_dir)
        printf("%ld of %ld frames of %s: their maps in %s/frame_NNNNNN/, their top-5 in "
               "frames.csv\n",
               kept, src.n_read, what, o->export_dir);
    media_close(&src);
    pca_hold_free(&hold);
    free(probs);
    return rc;
}

/* Several photos: every photo's features first, for the joint PCA, then each photo into
 * DIR/STEM/; a photo that does not load is skipped, the rest still written. 0, or the exit
 * status. */
static int headless_photos(const Options *o, Model *m, const Interv *iv) {
    int rc = 0, n = o->n_image_args;
    char msg[4400];
    VitError err;
    JointFeatures jf = {0};
    jf.paths = calloc((size_t)n, sizeof *jf.paths);
    if (!jf.paths) {
        fprintf(stderr, "vitlens: out of memory\n");
        return 1;
    }
    jf.n_images = n;
    for (int i = 0; i < n; i++) snprintf(jf.paths[i], sizeof jf.paths[i], "%s", o->image_args[i]);
    if (files_make_dir(o->export_dir, 0777, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        rc = 1;
    }
    if (!rc && scene_joint_features(&jf, &m->vit, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        rc = 1;
    }
    if (!rc && jf.skipped[0]) fprintf(stderr, "vitlens: skipped: %s\n", jf.skipped);
    for (int i = 0; i < n && !rc; i++) {
        if (jf.image_of[i] < 0) continue;
        char dir[2048];
        photo_dir(dir, sizeof dir, o->export_dir, jf.paths[i]);
        rc = headless_photo(o, m, iv, jf.paths[i], NULL, NULL, dir, &jf, o->similar_path, NULL,
                            NULL);
    }
    joint_features_free(&jf);
    free(jf.paths);
    return rc;
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
    char msg[4400];
    if (interv_any(&o->interv) && interv_build(&iv, &o->interv, &m.vit.cfg, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        model_free(&m);
        return 2; /* a value that does not fit the model: bad usage, as one that cannot parse */
    }
    if (o->export_dir) /* once, not once per photo */
        export_say_skipped(stderr, &m, o->similar_path ? 2 : o->contrast_arg ? 1 : 0);
    /* one photo: its files straight into the folder (--top always comes here) */
    int rc = 0, n = o->n_image_args;
    if (o->compare_model || o->compare_image) {
        rc = headless_compare(o, &m, &iv);
        interv_free(&iv);
        model_free(&m);
        return rc;
    }
    /* a video: its frames, each as a photo (one at a time: media_is_video decides) */
    int videos = 0;
    for (int i = 0; i < n; i++) videos += media_is_video(o->image_args[i]);
    if (videos && n > 1) {
        fprintf(stderr, "vitlens: a video goes alone (got %d files, %d of them videos)\n", n,
                videos);
        rc = 2;
    } else if (videos || o->camera) {
        rc = headless_video(o, &m, &iv);
        videos = 1;
    } else if ((o->every || o->fps > 0 || o->max_frames) && n >= 1) {
        fprintf(stderr, "vitlens: --%s goes with a video's frames; %s is a photo\n",
                o->every        ? "every"
                : o->max_frames ? "frames"
                                : "fps",
                o->image_path);
        rc = 2;
    }
    if (videos || rc) {
        interv_free(&iv);
        model_free(&m);
        return rc;
    }
    if (n <= 1) {
        rc = headless_photo(o, &m, &iv, o->image_path, NULL, NULL, o->export_dir, NULL,
                            o->similar_path, NULL, NULL);
        if (!rc && o->similar_path) { /* --similar: IMAGE2's maps, cos with the photo's e */
            char dir[2048];
            photo_dir(dir, sizeof dir, o->export_dir, o->similar_path);
            rc = headless_photo(o, &m, &iv, o->similar_path, NULL, NULL, dir, NULL, o->image_path,
                                NULL, NULL);
        }
        interv_free(&iv);
        model_free(&m);
        return rc;
    }
    rc = headless_photos(o, &m, &iv);
    interv_free(&iv);
    model_free(&m);
    return rc;
}
