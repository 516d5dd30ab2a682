/* default_check.c - the built-in model (assets/default) through the C engine,
 * checked against the numbers its model card states.
 *
 *   default_check MODEL EVAL_JSON TEST_DIR DEMO_DIR
 *       TEST_DIR: held-out scenes written by tools/gen_scenes.py (scenes.txt,
 *       NAME.png, NAME_mask.png); DEMO_DIR: the shipped demo scenes (scenes.txt,
 *       NAME.png). Checks, against EVAL_JSON (written by tools/eval_default.py):
 *         - held-out accuracy on TEST_DIR: the same number of correct scenes;
 *         - pointing game on TEST_DIR, rollout and last-layer mean CLS attention:
 *           within +-1 point (percentage point) of the card;
 *         - the uniform-random baseline: within 0.05 point (it depends on the
 *           masks only);
 *         - every demo scene: the same predicted class as the card lists.
 *       Prints each number next to the card's and exits 1 on any mismatch.
 *
 *   default_check --dump OUT MODEL IMAGE...
 *       For each image, appends to OUT (float32, little-endian): the input
 *       [3, S, S], the logits [C] and the attention [L, H, T, T]. Read by
 *       torch_check.py, which compares them with PyTorch.
 *
 * Pointing game (the same definition as tools/eval_default.py): a scene is a hit
 * when the map's largest patch (first in row-major order on ties) touches the
 * object, i.e. its P x P pixel square holds at least one object pixel of the
 * mask. A uniformly random patch hits with probability (#patches touching the
 * object) / N; the baseline is the mean of that over the scenes. */
#include "vit.h"

#include <cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- helpers --------------------------------------------------------------- */

#define MAX_SCENES 100000

typedef struct {
    char file[256];
    int label;
} SceneLine;

/* Read DIR/scenes.txt ("# ..." comments, then "FILE LABEL CLASS X0 Y0 X1 Y1"). */
static int read_scenes(SceneLine **out, const char *dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/scenes.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "default_check: cannot open %s\n", path);
        return -1;
    }
    SceneLine *s = NULL;
    int n = 0, cap = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            SceneLine *ns = cap <= MAX_SCENES ? realloc(s, (size_t)cap * sizeof *s) : NULL;
            if (!ns) {
                fprintf(stderr, "default_check: %s: too many scenes\n", path);
                free(s);
                fclose(f);
                return -1;
            }
            s = ns;
        }
        if (sscanf(line, "%255s %d", s[n].file, &s[n].label) != 2) {
            fprintf(stderr, "default_check: %s: bad line: %s", path, line);
            free(s);
            fclose(f);
            return -1;
        }
        n++;
    }
    fclose(f);
    *out = s;
    return n;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

static double json_num(const cJSON *obj, const char *a, const char *b) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, a);
    if (b) j = cJSON_GetObjectItemCaseSensitive(j, b);
    return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}

/* Index of the largest value, the first one on ties. */
static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* Load an image and run the model on it; prints the error and returns -1 on failure. */
static int run_image(VitRun *run, const Vit *vit, const char *path) {
    VitImage img = {0};
    VitError err;
    if (vit_image_load(&img, path, &err) ||
        vit_preprocess(run->input, NULL, NULL, NULL, NULL, &vit->cfg, &img, &err)) {
        fprintf(stderr, "default_check: %s\n", err.msg);
        vit_image_free(&img);
        return -1;
    }
    vit_image_free(&img);
    vit_forward(run, vit);
    return 0;
}

/* touch[p] = 1 when patch p's P x P square holds an object pixel of the mask
 * (a PNG, object where red > 127). Returns the number of touching patches, or -1. */
static int mask_touch(unsigned char *touch, const char *path, const VitConfig *c) {
    VitImage m = {0};
    VitError err;
    if (vit_image_load(&m, path, &err)) {
        fprintf(stderr, "default_check: %s\n", err.msg);
        return -1;
    }
    int P = c->patch_size, n = 0;
    if (m.w != c->grid_w * P || m.h != c->grid_h * P) {
        fprintf(stderr, "default_check: %s: mask is %dx%d, expected %dx%d\n", path, m.w, m.h,
                c->grid_w * P, c->grid_h * P);
        vit_image_free(&m);
        return -1;
    }
    memset(touch, 0, (size_t)c->n_patches);
    for (int y = 0; y < m.h; y++)
        for (int x = 0; x < m.w; x++)
            if (m.rgb[((size_t)y * m.w + x) * 3] > 127) touch[(y / P) * c->grid_w + x / P] = 1;
    for (int p = 0; p < c->n_patches; p++) n += touch[p];
    vit_image_free(&m);
    return n;
}

/* --- --dump: tensors for the PyTorch comparison ----------------------------- */

static int dump(const char *out_path, const char *model, char **images, int n_images) {
    Vit vit = {0};
    VitRun run = {0};
    VitError err;
    FILE *f = NULL;
    int rc = 1;
    if (vit_load(&vit, model, NULL, &err) || vit_run_init(&run, &vit, &err)) {
        fprintf(stderr, "default_check: %s\n", err.msg);
        goto done;
    }
    if (!(f = fopen(out_path, "wb"))) {
        fprintf(stderr, "default_check: cannot write %s\n", out_path);
        goto done;
    }
    const VitConfig *c = &vit.cfg;
    size_t n_in = 3 * (size_t)c->image_h * (size_t)c->image_w, T = (size_t)c->n_tokens;
    size_t n_att = (size_t)c->n_layers * c->n_heads * T * T;
    for (int i = 0; i < n_images; i++) {
        if (run_image(&run, &vit, images[i])) goto done;
        if (fwrite(run.input, sizeof(float), n_in, f) != n_in ||
            fwrite(run.logits, sizeof(float), (size_t)c->n_classes, f) != (size_t)c->n_classes ||
            fwrite(run.att, sizeof(float), n_att, f) != n_att) {
            fprintf(stderr, "default_check: %s: write failed\n", out_path);
            goto done;
        }
    }
    printf("dumped %d images: S=%d C=%d L=%d H=%d T=%zu\n", n_images, c->image_w, c->n_classes,
           c->n_layers, c->n_heads, T);
    rc = 0;
done:
    if (f && fclose(f) != 0) rc = 1;
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}

/* --- the card's numbers ---------------------------------------------------- */

static int failures;

static void expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static int check(const char *model, const char *eval_json, const char *test_dir,
                 const char *demo_dir) {
    Vit vit = {0};
    VitRun run = {0};
    VitError err;
    cJSON *card = NULL;
    SceneLine *test = NULL, *demo = NULL;
    float *map = NULL;
    unsigned char *touch = NULL;
    char path[1400], what[512];
    int rc = 1;

    char *text = slurp(eval_json);
    if (!text || !(card = cJSON_Parse(text))) {
        fprintf(stderr, "default_check: cannot read %s as JSON\n", eval_json);
        free(text);
        return 1;
    }
    free(text);
    if (vit_load(&vit, model, NULL, &err) || vit_run_init(&run, &vit, &err)) {
        fprintf(stderr, "default_check: %s\n", err.msg);
        goto done;
    }
    const VitConfig *c = &vit.cfg;
    int N = c->n_patches, L = c->n_layers, C = c->n_classes;
    map = malloc((size_t)N * sizeof *map);
    touch = malloc((size_t)N);
    if (!map || !touch) goto done;
    printf("model %s: S=%d P=%d grid %dx%d D=%d L=%d H=%d C=%d\n", model, c->image_w, c->patch_size,
           c->grid_h, c->grid_w, c->dim, L, c->n_heads, C);

    /* Held-out scenes: accuracy and the pointing game. */
    int n = read_scenes(&test, test_dir);
    if (n < 0) goto done;
    double want_n = json_num(card, "test", "count");
    snprintf(what, sizeof what, "%d held-out scenes in %s (card: %.0f)", n, test_dir, want_n);
    expect(n > 0 && n == want_n, what);
    if (failures) goto done;
    int correct = 0, hit_roll = 0, hit_att = 0;
    double uniform = 0.0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", test_dir, test[i].file);
        if (run_image(&run, &vit, path)) goto done;
        correct += argmax(run.logits, C) == test[i].label;
        char *dot = strrchr(path, '.');
        snprintf(dot, sizeof path - (size_t)(dot - path), "_mask.png");
        int n_touch = mask_touch(touch, path, c);
        if (n_touch < 0) goto done;
        uniform += (double)n_touch / N;
        if (vit_rollout(map, &run, L - 1, -1, VIT_FUSE_MEAN, 0.0f, 0, &err)) goto map_fail;
        hit_roll += touch[argmax(map, N)];
        if (vit_map_fused(map, &run, L - 1, VIT_FUSE_MEAN, 0, &err)) goto map_fail;
        hit_att += touch[argmax(map, N)];
    }
    uniform /= n;

    double card_correct = json_num(card, "test", "correct");
    snprintf(what, sizeof what, "held-out accuracy %.2f%% (%d/%d), card %.2f%% (%.0f/%d)",
             100.0 * correct / n, correct, n, 100.0 * card_correct / n, card_correct, n);
    expect(correct == card_correct, what);
    static const char *kinds[2][2] = {{"rollout", "rollout (mean fusion, discard 0, all layers)"},
                                      {"attention", "last layer's mean CLS attention"}};
    int hits[2] = {hit_roll, hit_att};
    for (int k = 0; k < 2; k++) {
        double got = 100.0 * hits[k] / n, want = 100.0 * json_num(card, "pointing", kinds[k][0]);
        snprintf(what, sizeof what, "pointing game, %s: %.1f%%, card %.1f%% (+-1 point)",
                 kinds[k][1], got, want);
        expect(fabs(got - want) <= 1.0, what);
    }
    double want_u = 100.0 * json_num(card, "pointing", "uniform");
    snprintf(what, sizeof what, "pointing game, uniform-random map: %.2f%%, card %.2f%%",
             100.0 * uniform, want_u);
    expect(fabs(100.0 * uniform - want_u) <= 0.05, what);

    /* The shipped demo scenes: the predictions the card lists. */
    int n_demo = read_scenes(&demo, demo_dir);
    if (n_demo < 0) goto done;
    const cJSON *listed = cJSON_GetObjectItemCaseSensitive(card, "demo");
    snprintf(what, sizeof what, "%d demo scenes, card lists %d", n_demo,
             cJSON_GetArraySize(listed));
    expect(n_demo > 0 && n_demo == cJSON_GetArraySize(listed), what);
    int demo_correct = 0;
    for (int i = 0; i < n_demo && !failures; i++) {
        const cJSON *d = cJSON_GetArrayItem(listed, i);
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(d, "file");
        snprintf(path, sizeof path, "%s/%s", demo_dir, demo[i].file);
        if (run_image(&run, &vit, path)) goto done;
        int pred = argmax(run.logits, C);
        demo_correct += pred == demo[i].label;
        snprintf(what, sizeof what, "%s: label %d, predicted %s (%d, p %.4f), card %.0f (p %.4f)",
                 demo[i].file, demo[i].label, vit.labels ? vit.labels[pred] : "?", pred,
                 (double)run.probs[pred], json_num(d, "pred", NULL), json_num(d, "prob", NULL));
        expect(cJSON_IsString(file) && !strcmp(file->valuestring, demo[i].file) &&
                   pred == json_num(d, "pred", NULL) &&
                   fabs(run.probs[pred] - json_num(d, "prob", NULL)) < 1e-3,
               what);
    }
    snprintf(what, sizeof what, "demo accuracy %d/%d, card %.0f/%d", demo_correct, n_demo,
             json_num(card, "demo_correct", NULL), n_demo);
    expect(demo_correct == json_num(card, "demo_correct", NULL), what);
    rc = failures ? 1 : 0;
    goto done;
map_fail:
    fprintf(stderr, "default_check: %s\n", err.msg);
done:
    printf("%s\n", rc ? "default_check: FAILED" : "default_check: the engine matches the card");
    cJSON_Delete(card);
    free(test);
    free(demo);
    free(map);
    free(touch);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "--dump")) return dump(argv[2], argv[3], argv + 4, argc - 4);
    if (argc == 5) return check(argv[1], argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: default_check MODEL EVAL_JSON TEST_DIR DEMO_DIR\n"
                    "       default_check --dump OUT MODEL IMAGE...\n");
    return 2;
}
