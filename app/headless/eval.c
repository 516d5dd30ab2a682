/* eval.c - vitlens --eval and --eval-merge (eval.h; the protocol: docs/faithfulness.md).
 *
 * Everything a run measures becomes rows (eval_rows.h): one per image, one per point of
 * every perturbation curve, one per localisation score, one per sanity-check step. The
 * table, the CSV files and the plots are made from the rows alone, sorted (eval_table.c,
 * eval_plot.c), so that shards merged (--eval-merge reads the rows back from the CSVs,
 * eval_read.c) give the table the whole run gives. This file runs the model: each image's
 * maps and curves, then the cascading randomisation. */
#include "headless/eval.h"
#include "config/files.h"
#include "headless/eval_rows.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * What --agreement shares (eval_rows.h): a photo's class, its maps */

int eval_target(int *target, const Model *m, const Scene *sc, const Options *o, char *msg,
                size_t n) {
    if (model_phrase_class(m) >= 0) { /* --text: the phrase */
        *target = model_phrase_class(m);
    } else if (o->class_arg) {
        if (model_find_class(m, "--class", o->class_arg, target, msg, n)) return 1;
    } else {
        vit_top_k(target, sc->run.probs, sc->vit->cfg.n_classes, 1);
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * One image */

/* One run's state: the options, the model, the rows it adds to, and buffers sized once
 * for the model (eval_buffers) and reused for every image. */
typedef struct {
    const Options *o;
    Model *m;
    Rows *r;
    const Interv *iv; /* the interventions (--ablate, ...), built for the model */
    VitBatch batch;   /* the perturbed inputs' forward passes, batch_max at a time */
    int batch_max;
    float *probs;   /* [counts, C]: every input of a family */
    float *blurred; /* [3, Sh, Sw] the normalised input blurred: insertion's start */
    float *scratch; /* one map of any kind */
    int *order;     /* [N] patches by relevance (vit_patch_order) */
    int *counts;    /* [2 * (steps + PERTURB_STEPS + 2)] patches removed, per input of a family */
    uint8_t *pixmask, *patchmask; /* [Sh * Sw], [N] */
    uint8_t *crop;                /* [Sh, Sw, 3] */
} Eval;

/* qsort order of ints, ascending (without the overflow of x - y). */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Fills err with "out of memory"; returns VIT_ERR_NOMEM. */
static VitStatus oom(VitError *err) {
    if (err) err->code = VIT_ERR_NOMEM, snprintf(err->msg, sizeof err->msg, "out of memory");
    return VIT_ERR_NOMEM;
}

VitStatus eval_method_map(float *out, float *scratch, const Method *me, Scene *sc, int image,
                          int target, float discard, VitError *err) {
    const VitConfig *c = &sc->vit->cfg;
    /* the two baselines need no model: a map any method should beat */
    if (me->kind == METHOD_RANDOM) {
        vit_random_map(out, c->n_patches, RANDOM_SEED + (uint64_t)image);
        return VIT_OK;
    }
    if (me->kind == METHOD_GAUSSIAN) {
        vit_gaussian_map(out, c->grid_h, c->grid_w, GAUSSIAN_SIGMA);
        return VIT_OK;
    }
    View v = {.kind = me->kind,
              .layer = c->n_layers - 1,
              .head = c->n_heads + VIT_FUSE_MEAN,
              .discard_ratio = discard,
              .query = 0,
              .target = target};
    if (view_on_worker(&v)) {
        VitStatus rc = view_slow_map(sc, &v, NULL, err);
        if (rc) return rc;
        scene_slow_swap(sc);
    }
    VitStatus rc = view_map(scratch, sc, &v, err);
    if (rc) return rc;
    vit_map_to_patches(out, scratch, c, MAP_KINDS[me->kind].pixels);
    return VIT_OK;
}

VitStatus eval_explain(Scene *sc, int target, float discard, VitError *err) {
    if (sc->vit->cfg.n_classes == 0) return VIT_OK;
    /* lrp 1: AttnLRP is one of the methods, so its relevance pass runs too */
    VitStatus rc = scene_explain(sc, target, discard, 1, err);
    if (!rc) scene_explain_swap(sc);
    return rc;
}

/* Perturbation, deletion and insertion curves of one map. Positive perturbation and
 * deletion remove patches in the same order to the same fill, so their inputs are
 * one family, forwarded once per count of patches removed (with 20 deletion steps,
 * every positive step is one of them); negative and insertion are a family each. */
static VitStatus perturb(Eval *e, const Scene *sc, const float *map, int image, int method,
                         int target, VitError *err) {
    const VitConfig *c = &sc->vit->cfg;
    int N = c->n_patches, C = c->n_classes;
    enum { FAM_MOST, FAM_LEAST, FAM_INSERT };
    static const int family_of[N_TESTS] = {FAM_MOST, FAM_LEAST, FAM_MOST, FAM_INSERT};
    for (int fam = FAM_MOST; fam <= FAM_INSERT; fam++) {
        /* the counts this family's tests ask for, each once, increasing */
        int n_counts = 0;
        for (int t = 0; t < N_TESTS; t++) {
            if (family_of[t] != fam) continue;
            int n_steps = t < 2 ? PERTURB_STEPS : e->r->steps;
            for (int s = 0; s <= n_steps; s++)
                e->counts[n_counts++] = vit_perturb_count(s, n_steps, N);
        }
        /* sorted and deduplicated: a count shared by two tests is forwarded once */
        qsort(e->counts, (size_t)n_counts, sizeof *e->counts, cmp_int);
        int u = 0;
        for (int i = 0; i < n_counts; i++)
            if (!u || e->counts[i] != e->counts[u - 1]) e->counts[u++] = e->counts[i];
        n_counts = u;
        VitStatus rc = vit_patch_order(e->order, map, N, fam != FAM_LEAST, err);
        if (rc) return rc;
        const float *base = fam == FAM_INSERT ? e->blurred : sc->run.input;
        const float *fill = fam == FAM_INSERT ? sc->run.input : NULL;
        if ((rc = vit_perturb_curve(e->probs, &e->batch, &e->m->vit, base, fill, e->order,
                                    e->counts, n_counts, err)))
            return rc;
        /* back to each test's steps: the row of step s is the probs row of its count */
        for (int t = 0; t < N_TESTS; t++) {
            if (family_of[t] != fam) continue;
            int n_steps = t < 2 ? PERTURB_STEPS : e->r->steps;
            for (int s = 0; s <= n_steps; s++) {
                int count = vit_perturb_count(s, n_steps, N), i = 0, top;
                while (e->counts[i] != count) i++;
                const float *p = e->probs + (size_t)i * C;
                vit_top_k(&top, p, C, 1);
                CurveRow *q = ADD(e->r, cu);
                if (!q) return oom(err);
                *q = (CurveRow){image, method, t, s, n_steps, p[target], top == target};
            }
        }
    }
    return VIT_OK;
}

/* The mask of photo `path` in o->masks_dir: DIR/STEM_mask.png, else DIR/STEM.png when
 * that is not the photo itself (red channel >= 128 is inside), brought to the model's crop as the
 * photo is (vit_preprocess_rgb) and to patches (half a patch's pixels or more). 1 with e->patchmask
 * filled, 0 when there is none, -1 when it does not fit (note says why). */
static int load_mask(Eval *e, const Scene *sc, const char *path, char *note, size_t n) {
    const char *dir = e->o->masks_dir;
    const VitConfig *c = &sc->vit->cfg;
    char stem[512], file[2048];
    const char *base = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", base ? base + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = '\0';
    VitImage img = {0};
    VitError err;
    /* NAME_mask.png, else NAME.png unless that is the photo itself (masks beside photos) */
    const char *suffix[2] = {"_mask", ""};
    struct stat photo, st;
    int found = 0, have_photo = stat(path, &photo) == 0;
    for (int i = 0; i < 2 && !found; i++) {
        snprintf(file, sizeof file, "%s/%s%s.png", dir, stem, suffix[i]);
        found = stat(file, &st) == 0 &&
                !(have_photo && st.st_dev == photo.st_dev && st.st_ino == photo.st_ino);
    }
    if (!found) return 0;
    if (vit_image_load(&img, file, &err)) {
        snprintf(note, n, "%.600s", err.msg);
        return -1;
    }
    int rc = -1;
    if (img.w != sc->src_w || img.h != sc->src_h) {
        snprintf(note, n, "%.400s: mask of %d x %d px, the photo is %d x %d", file, img.w, img.h,
                 sc->src_w, sc->src_h);
    } else if (vit_preprocess_rgb(e->crop, c, &img, &err)) {
        snprintf(note, n, "%.600s", err.msg);
    } else {
        /* the red channel of the cropped mask [Sh, Sw, 3] decides, as --help says */
        for (size_t i = 0; i < (size_t)c->image_h * c->image_w; i++)
            e->pixmask[i] = e->crop[3 * i] >= 128;
        if (vit_mask_to_patches(e->patchmask, e->pixmask, c) == 0)
            snprintf(note, n, "%.400s: no patch of the crop is half inside the mask", file);
        else
            rc = 1, snprintf(note, n, "%.600s", file);
    }
    vit_image_free(&img);
    return rc;
}

/* Is path a mask rather than a photo: NAME_mask.EXT or NAME_maskDIGITS.EXT (a folder
 * of photos may hold their masks too, and they are no images to evaluate). */
static int is_mask_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *m = strstr(base, "_mask");
    if (!m) return 0;
    m += 5;
    while (*m >= '0' && *m <= '9') m++;
    return *m == '.';
}

/* Every test of one photo; its trained maps into maps [n_methods, N] for the sanity
 * check. 0, or 1 when the photo was skipped (the row says why). */
static int eval_image(Eval *e, Scene *sc, int image, const char *path, float *maps) {
    Rows *r = e->r;
    const Vit *vit = &e->m->vit;
    const VitConfig *c = &vit->cfg;
    VitError err;
    ImageRow *q = ADD(r, im);
    if (!q) return 1;
    q->image = image, q->target = -1;
    snprintf(q->path, sizeof q->path, "%s", path);
    snprintf(q->status, sizeof q->status, "ok");
    if (scene_run(sc, vit, path, &err)) {
        snprintf(q->status, sizeof q->status, "%.600s", err.msg);
        fprintf(stderr, "vitlens: skipped: %s\n", err.msg);
        return 1;
    }
    int target;
    if (eval_target(&target, e->m, sc, e->o, q->status, sizeof q->status)) return 1;
    q->target = target, q->prob = sc->run.probs[target];
    /* the maps first (they are also the sanity check's reference), then the curves, then
     * the localisation scores when the photo has a mask */
    if (eval_explain(sc, target, e->o->discard, &err)) goto fail;
    for (int m = 0; m < r->n_methods; m++)
        if (eval_method_map(maps + (size_t)m * c->n_patches, e->scratch, &r->methods[m], sc, image,
                            target, e->o->discard, &err))
            goto fail;
    if (vit_blur(e->blurred, sc->run.input, 3, c->image_h, c->image_w, BLUR_SIGMA, BLUR_RADIUS,
                 &err))
        goto fail;
    for (int m = 0; m < r->n_methods; m++)
        if (perturb(e, sc, maps + (size_t)m * c->n_patches, image, m, target, &err)) goto fail;
    if (e->o->masks_dir) {
        q->has_mask = load_mask(e, sc, path, q->mask_note, sizeof q->mask_note);
        if (q->has_mask < 0) fprintf(stderr, "vitlens: mask skipped: %s\n", q->mask_note);
        for (int m = 0; q->has_mask == 1 && m < r->n_methods; m++) {
            LocRow *l = ADD(r, lo);
            if (!l) break;
            const float *map = maps + (size_t)m * c->n_patches;
            l->image = image, l->method = m;
            l->pointing = vit_pointing_game(map, e->patchmask, c->n_patches, NULL);
            l->energy = vit_energy_pointing(map, e->patchmask, c->n_patches, NULL);
            l->iou = vit_topk_iou(map, e->patchmask, c->n_patches, NULL);
        }
    }
    return 0;
fail:
    snprintf(q->status, sizeof q->status, "%.100s: %.500s", path, err.msg);
    fprintf(stderr, "vitlens: skipped: %s\n", q->status);
    return 1;
}

/* ---------------------------------------------------------------------------
 * Progress on stderr, once a run has taken a second (on a terminal) */

/* Seconds since the run started (monotonic: immune to clock changes). */
static double elapsed_s(const Progress *p) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - p->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - p->t0.tv_nsec);
}

void eval_progress(Progress *p, const char *what, int done, int total) {
    double s = elapsed_s(p);
    if (!p->tty || s < 1.0 || total <= 0) return;
    char bar[31];
    int fill = (int)(30.0 * done / total);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r%-10s [%s] %d/%d  %.0f s ", what, bar, done, total, s);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
    p->shown = 1;
}

/* The run's buffers, sized for the model and the batch: 0, or -1 out of memory (those
 * made are freed with the run). */
static int eval_buffers(Eval *e, const VitConfig *c) {
    const Options *o = e->o;
    size_t sz = (size_t)3 * c->image_h * c->image_w, px = (size_t)c->image_h * c->image_w;
    size_t max_counts = 2 * ((size_t)o->eval_steps + PERTURB_STEPS + 2);
    e->probs = malloc(max_counts * c->n_classes * sizeof *e->probs);
    e->counts = malloc(max_counts * sizeof *e->counts);
    e->blurred = malloc(sz * sizeof *e->blurred);
    e->scratch = malloc(map_kind_max_floats(c, 0) * sizeof *e->scratch);
    e->order = malloc((size_t)c->n_patches * sizeof *e->order);
    e->pixmask = malloc(px), e->patchmask = malloc((size_t)c->n_patches), e->crop = malloc(3 * px);
    return e->probs && e->counts && e->blurred && e->scratch && e->order && e->pixmask &&
                   e->patchmask && e->crop
               ? 0
               : -1;
}

/* The sanity check (Adebayo et al. 2018), cascading: for each step one model (the head,
 * then each block from the top re-initialised), every photo that went well (ok[s]) of
 * the selection sel [n_sel] (image g is paths[all[g]]); each method's map against the
 * trained one in maps [n_sel, methods, N], as a SanityRow. The class stays the trained
 * model's. A step or photo that fails is reported and skipped. */
static void sanity_check(Eval *e, const Vit *vit, char **paths, const int *all, const int *sel,
                         const int *ok, int n_sel, const float *maps, Progress *pr) {
    const Options *o = e->o;
    Rows *r = e->r;
    const VitConfig *c = &vit->cfg;
    size_t per_image = (size_t)r->n_methods * c->n_patches;
    VitError err;
    float *map = malloc((size_t)c->n_patches * sizeof *map);
    Scene rs = {.ignore_orientation = o->ignore_orientation, .interv = e->iv};
    int n_ok = 0;
    for (int s = 0; s < n_sel; s++) n_ok += ok[s];
    for (int b = 0; map && n_ok && b <= c->n_layers; b++) {
        Vit rv;
        if (vit_randomized(&rv, vit, b, SANITY_SEED, &err)) {
            fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
            break;
        }
        for (int s = 0; s < n_sel; s++) {
            if (!ok[s]) continue;
            /* the class stays the trained model's: its image row holds it */
            const ImageRow *q = NULL;
            for (size_t k = 0; k < r->n_im; k++)
                if (r->im[k].image == sel[s]) q = &r->im[k];
            if (scene_run(&rs, &rv, paths[all[sel[s]]], &err) ||
                eval_explain(&rs, q->target, o->discard, &err)) {
                fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
                continue;
            }
            for (int k = 0; k < r->n_methods; k++) {
                if (r->methods[k].kind < 0) continue;
                if (eval_method_map(map, e->scratch, &r->methods[k], &rs, sel[s], q->target,
                                    o->discard, &err)) {
                    fprintf(stderr, "vitlens: sanity check: %s\n", err.msg);
                    continue;
                }
                SanityRow *sa = ADD(r, sa);
                if (!sa) break;
                sa->image = sel[s], sa->method = k, sa->blocks = b;
                sa->rho = vit_spearman(maps + (size_t)s * per_image + (size_t)k * c->n_patches, map,
                                       c->n_patches);
            }
        }
        vit_free(&rv);
        eval_progress(pr, "sanity", b + 1, c->n_layers + 1);
    }
    scene_free(&rs);
    free(map);
}

int eval_model_ready(Model *m, Interv *iv, const Options *o) {
    const char *mode = o->agreement ? "--agreement" : "--eval";
    char msg[1200];
    if (model_open_text(m, &o->clip, 1, msg, sizeof msg)) { /* CLIP: --classes, --text */
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    const VitConfig *c = &m->vit.cfg;
    /* the interventions: the intervened model is evaluated (the sanity check's randomised
     * models too); dropping patches does not go with the perturbation tests, which remove
     * patches themselves, nor with maps that have no value there */
    if (o->interv.n_drop) {
        fprintf(stderr,
                "vitlens: --drop-patches does not go with %s (--eval's tests remove patches "
                "themselves; --fill-patches does)\n",
                mode);
        return 2;
    }
    if (interv_any(&o->interv) && interv_build(iv, &o->interv, c, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 2; /* bad usage, as in headless.c */
    }
    if (c->n_classes == 0) {
        fprintf(stderr, "vitlens: %s: %s needs a model with a classification head%s\n", m->vit.path,
                mode, m->clip ? " (a CLIP model: give --classes, --prompts or --text)" : "");
        return 1;
    }
    return 0;
}

/* The images of paths [n_paths]: masks are not; image g of the whole run is
 * paths[all[g]]; this shard's (--shard) into sel [*n_sel]. Returns how many images the
 * whole run has. */
static int select_images(int *sel, int *n_sel, int *all, char **paths, int n_paths,
                         const Options *o) {
    int n_all = 0;
    for (int i = 0; i < n_paths; i++) {
        if (is_mask_name(paths[i])) continue;
        if (!o->shard_n || n_all % o->shard_n == o->shard_k - 1) sel[(*n_sel)++] = n_all;
        all[n_all++] = i;
    }
    return n_all;
}

int eval_photos_open(EvalPhotos *p, const Options *o) {
    VitError err;
    char msg[1200];
    int rc;
    memset(p, 0, sizeof *p);
    if (model_load(&p->m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    model_warn(stderr, &p->m);
    if ((rc = eval_model_ready(&p->m, &p->iv, o))) return rc;
    if (files_expand(&p->paths, &p->n_paths, o->image_args, o->n_image_args, msg, sizeof msg)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        return 1;
    }
    p->sel = malloc((size_t)(p->n_paths ? p->n_paths : 1) * sizeof *p->sel);
    p->all = malloc((size_t)(p->n_paths ? p->n_paths : 1) * sizeof *p->all);
    if (!p->sel || !p->all) {
        fprintf(stderr, "vitlens: out of memory\n");
        return 1;
    }
    p->n_all = select_images(p->sel, &p->n_sel, p->all, p->paths, p->n_paths, o);
    return 0;
}

void eval_photos_free(EvalPhotos *p) {
    free(p->sel), free(p->all);
    if (p->paths) files_free_list(p->paths, p->n_paths);
    interv_free(&p->iv);
    model_free(&p->m);
    memset(p, 0, sizeof *p);
}

int eval_check_shards(const ImageRow *im, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (im[i].image == im[i - 1].image) {
            fprintf(stderr, "vitlens: --eval-merge: image %d (%s) is in two shards\n", im[i].image,
                    im[i].path);
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Entry points */

int eval_run(const Options *o) {
    Rows r = {0};
    Eval e = {.o = o, .r = &r};
    EvalPhotos ph;
    VitError err;
    Scene sc = {.ignore_orientation = o->ignore_orientation};
    float *maps = NULL;
    int rc = eval_photos_open(&ph, o);
    if (rc) goto done;
    rc = 1;
    const VitConfig *c = &ph.m.vit.cfg;
    int n_sel = ph.n_sel, *sel = ph.sel, *all = ph.all;
    e.m = &ph.m;
    sc.interv = &ph.iv, e.iv = &ph.iv;
    snprintf(r.model, sizeof r.model, "%s", ph.m.vit.path);
    r.n_layers = c->n_layers, r.n_patches = c->n_patches, r.steps = o->eval_steps;
    r.n_images_total = ph.n_all;
    r.n_methods = methods_for(r.methods, c);

    /* a batch as large as the longest curve, at most 32 inputs: the activations of a large
     * model grow with it */
    e.batch_max = (o->eval_steps > PERTURB_STEPS ? o->eval_steps : PERTURB_STEPS) + 1;
    if (e.batch_max > 32) e.batch_max = 32;
    if (vit_batch_init(&e.batch, &ph.m.vit, e.batch_max, 0, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    e.batch.intervention = interv_for(&ph.iv, c);
    maps = malloc((size_t)(n_sel ? n_sel : 1) * r.n_methods * c->n_patches * sizeof *maps);
    if (eval_buffers(&e, c) || !maps) goto oom;

    Progress pr = {.tty = isatty(2)};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    size_t per_image = (size_t)r.n_methods * c->n_patches;
    int *ok = calloc((size_t)(n_sel ? n_sel : 1), sizeof *ok);
    if (!ok) goto oom;
    for (int s = 0; s < n_sel; s++) {
        int i = sel[s];
        ok[s] = !eval_image(&e, &sc, i, ph.paths[all[i]], maps + (size_t)s * per_image);
        eval_progress(&pr, "images", s + 1, n_sel);
    }

    if (!o->no_sanity) sanity_check(&e, &ph.m.vit, ph.paths, all, sel, ok, n_sel, maps, &pr);
    free(ok);
    rows_sort(&r);
    rc = eval_finish(&r, o->eval_out);
    goto done;
oom:
    fprintf(stderr, "vitlens: out of memory\n");
done:
    scene_free(&sc);
    vit_batch_free(&e.batch);
    free(e.probs), free(e.counts), free(e.blurred), free(e.scratch), free(e.order);
    free(e.pixmask), free(e.patchmask), free(e.crop), free(maps);
    rows_free(&r);
    eval_photos_free(&ph);
    return rc;
}

int eval_merge(const Options *o) {
    Rows r = {0};
    int rc = 0;
    /* the folders' rows together, sorted as one run's; an image in two shards would be
     * counted twice, so it is an error */
    for (int i = 0; i < o->n_image_args && !rc; i++)
        rc = eval_read_folder(&r, o->image_args[i], i == 0);
    if (!rc) {
        rows_sort(&r);
        rc = eval_check_shards(r.im, r.n_im);
    }
    if (!rc) rc = eval_finish(&r, o->eval_out);
    rows_free(&r);
    return rc;
}
