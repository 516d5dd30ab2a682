/* score.c - --contrast A,B and --similar IMAGE2 in the window: the score the class-specific
 * maps explain instead of a class (view/scene.h, SceneScore), kept on the Scenes as the
 * model, the photos and the compare view change.
 *
 * --contrast: logit A - logit B on every Scene that runs through the app's model (pane B
 * of a second photo too; a second model's pane explains its own top-1, as --export's does),
 * A and B resolved again for each model. --similar: the compare view with IMAGE2 in pane B,
 * pane A's maps explaining cos(e_A, e_B) with e_B held fixed, pane B's cos(e_B, e_A) with
 * e_A held fixed (each photo's map in its pane), the embeddings taken from the panes' runs.
 * A Scene's score changes only while the worker is idle; one whose score changed forgets its
 * class-specific maps, and the view asks for them again. */
#include "window/app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int app_score_init(App *app, const char *contrast, const char *similar) {
    if (contrast) {
        char msg[700];
        if (scene_score_parse_contrast(&app->score.a, app->model, contrast, msg, sizeof msg)) {
            fprintf(stderr, "vitlens: %s\n", msg);
            return -1;
        }
        snprintf(app->score.arg, sizeof app->score.arg, "%s", contrast);
        app->score.kind = APP_SCORE_CONTRAST;
        app->view.kind = app->class_kind; /* open on its map, as --class does */
        app_score_sync(app);
    } else if (similar) {
        app->score.kind = APP_SCORE_SIMILAR;
        app_compare_open(app, NULL, NULL, similar); /* pane B: IMAGE2 through the model */
    }
    return 0;
}

/* sc's score made `want`; its class-specific maps forgotten when the score is another one or
 * its values changed. 1 when they were. */
static int set_score(Scene *sc, const SceneScore *want, int changed) {
    if (sc->score == want && !(want && changed)) return 0;
    sc->score = want;
    scene_forget_explain(sc);
    return 1;
}

/* --contrast on the app's model: 0 and app->score.a, *changed when its classes are others;
 * -1 when the model lacks them (the score off, the notice says why). */
static int sync_contrast(App *app, int *changed) {
    SceneScore s;
    char msg[700];
    if (scene_score_parse_contrast(&s, app->model, app->score.arg, msg, sizeof msg)) {
        snprintf(app->notice, sizeof app->notice, "--contrast off for %.60s: %.400s",
                 app->model->name, msg);
        app->score.kind = APP_SCORE_NONE;
        return -1;
    }
    *changed = s.score.a != app->score.a.score.a || s.score.b != app->score.a.score.b;
    app->score.a = s;
    return 0;
}

/* --similar: both panes' embeddings from their runs, the scores made of them while the
 * compare view shows pane B through the app's model. 1 with the scores made (*changed_a:
 * e_B's values are new, *changed_b: e_A's), 0 when there is nothing to explain yet. */
static int sync_similar(App *app, int *changed_a, int *changed_b) {
    const Scene *sa = app_scene(app), *sb = &app->cmp.scene;
    if (!app->cmp.on || !app->cmp.has_scene || !sa || !sb->vit || sb->vit != sa->vit) return 0;
    int E = vit_embedding_dim(sa->vit);
    float *ea = malloc((size_t)E * sizeof *ea), *eb = malloc((size_t)E * sizeof *eb);
    VitError err;
    if (!ea || !eb || vit_embedding(ea, &sa->run, sa->vit, &err) ||
        vit_embedding(eb, &sb->run, sb->vit, &err)) {
        char msg[700];
        snprintf(msg, sizeof msg, "--similar: %.600s", ea && eb ? err.msg : "out of memory");
        app_set_error(app, msg);
        free(ea), free(eb);
        return 0;
    }
    int same_dim = E == app->score.dim && app->score.e_a && app->score.e_b;
    *changed_a = !same_dim || memcmp(eb, app->score.e_b, (size_t)E * sizeof *eb) != 0;
    *changed_b = !same_dim || memcmp(ea, app->score.e_a, (size_t)E * sizeof *ea) != 0;
    free(app->score.e_a), free(app->score.e_b);
    app->score.e_a = ea, app->score.e_b = eb, app->score.dim = E;
    double dot = 0, aa = 0, bb = 0;
    for (int i = 0; i < E; i++)
        dot += (double)ea[i] * eb[i], aa += (double)ea[i] * ea[i], bb += (double)eb[i] * eb[i];
    app->score.cosine = aa > 0 && bb > 0 ? dot / sqrt(aa * bb) : 0.0;
    scene_score_similar(&app->score.a, eb, sb->path); /* A's map: what makes it like B */
    scene_score_similar(&app->score.b, ea, sa->path); /* B's map: what makes it like A */
    return 1;
}

int app_score_sync(App *app) {
    if (app->busy) { /* a job may read a Scene's score: after its event */
        app->score.pending = 1;
        return 0;
    }
    app->score.pending = 0;
    const SceneScore *want_a = NULL, *want_b = NULL;
    int changed_a = 0, changed_b = 0;
    if (app->score.kind == APP_SCORE_CONTRAST && !sync_contrast(app, &changed_a)) {
        want_a = &app->score.a;
        if (!app->cmp.model) want_b = want_a, changed_b = changed_a; /* the app's model */
    } else if (app->score.kind == APP_SCORE_SIMILAR && sync_similar(app, &changed_a, &changed_b)) {
        want_a = &app->score.a, want_b = &app->score.b;
    }
    int shown = 0, any = 0, first = want_a && !app->scenes[app->front].score;
    for (int i = 0; i < 2; i++) {
        int c = set_score(&app->scenes[i], want_a, changed_a);
        any |= c;
        if (i == app->front && app->has_scene) shown |= c;
    }
    int c = set_score(&app->cmp.scene, want_b, changed_b);
    any |= c, shown |= c && app->cmp.on;
    if (shown) {
        app->score.gen++;
        app->atlas_of.loads = 0; /* an overview of the class-specific maps is stale */
        app->dirty = 1;
        /* --similar's maps are the class-specific ones: shown when the score first is */
        if (first && app->score.kind == APP_SCORE_SIMILAR && !MAP_KINDS[app->view.kind].uses_target)
            app->view.kind = app->class_kind;
    }
    if (app->trace && any) {
        if (!want_a)
            printf("score off\n");
        else if (app->score.kind == APP_SCORE_CONTRAST)
            printf("score contrast a=%d b=%d pane_b=%d gen=%lu\n", want_a->score.a, want_a->score.b,
                   want_b != NULL, app->score.gen);
        else
            printf("score similar cos=%.6f dim=%d gen=%lu\n", app->score.cosine, app->score.dim,
                   app->score.gen);
    }
    return shown;
}

void app_score_off(App *app) {
    if (app->score.kind == APP_SCORE_NONE) return;
    snprintf(app->notice, sizeof app->notice, "%s off: the maps explain a class",
             app->score.kind == APP_SCORE_CONTRAST ? "--contrast" : "--similar");
    app->score.kind = APP_SCORE_NONE;
    app_score_sync(app);
}

const char *app_score_title(const App *app) {
    const Scene *sc = app_scene(app);
    return sc && sc->score ? sc->score->title : "";
}

const char *app_kind_why_not(const App *app, int kind) {
    const Scene *sc = app_scene(app); /* its run's shapes: a CLIP head may have grown */
    return sc ? map_kind_unusable_scored(kind, &sc->run.cfg, scene_embedding_score(sc))
              : map_kind_unusable_why(kind, &app->model->vit.cfg);
}
