/* fuzz_config.c - libFuzzer target: arbitrary bytes as config.json and as a
 * labels file.
 *
 * Each input is read twice: as the config.json of a fixed tiny model (D 8, 2
 * heads, patch 4, a 2 x 2 grid, 3 classes; vit_load with config_path), and as a
 * labels file for 3 classes (vit_labels_load). When the config is accepted the
 * model runs on a small picture with the config's crop, mean and std, so that
 * values that pass the checks (a crop_pct of 1e-30, say) must also work.
 *
 * Seeds: timm and Hugging Face style configs and labels files from fuzz_seeds. */
#include "fuzzlib.h"
#include "testlib.h" /* model_tiny, model_bytes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CLASSES 3

static void fail(const char *what) {
    fprintf(stderr, "fuzz_config: %s\n", what);
    abort();
}

static void run_model(const Vit *vit) {
    static uint8_t rgb[30 * 40 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 7);
    VitRun run = {0};
    VitImage img = {0};
    VitError err;
    if (vit_run_init(&run, vit, &err) || vit_image_from_rgb(&img, rgb, 40, 30, &err)) fail(err.msg);
    memset(&err, 'x', sizeof err);
    VitStatus rc = vit_preprocess(run.input, NULL, NULL, NULL, NULL, &vit->cfg, &img, &err);
    fuzz_check_error(rc, &err, "vit_preprocess");
    if (rc == VIT_OK) {
        vit_forward(&run, vit);
        int top[N_CLASSES];
        vit_top_k(top, run.probs, vit->cfg.n_classes, N_CLASSES);
        for (int i = 0; i < N_CLASSES; i++)
            if (top[i] < 0 || top[i] >= vit->cfg.n_classes) fail("vit_top_k: index out of range");
    }
    vit_image_free(&img);
    vit_run_free(&run);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static MemFile model, text;
    if (!model.path[0]) {
        Model m;
        model_tiny(&m, 8, 1, 4, 2, 16, N_CLASSES);
        size_t n;
        uint8_t *b = model_bytes(&m, &n);
        if (!b) fail("cannot make the tiny model");
        memfile_init(&model, "model.safetensors");
        memfile_set(&model, b, n);
        free(b);
        memfile_init(&text, "config.json");
    }
    memfile_set(&text, data, size);

    /* as config.json */
    Vit vit;
    VitError err;
    memset(&err, 'x', sizeof err);
    VitLoadOptions opt = {.config_path = text.path};
    VitStatus rc = vit_load(&vit, model.path, &opt, &err);
    fuzz_check_error(rc, &err, "vit_load with a fuzzed config.json");
    if (rc == VIT_OK) {
        const VitConfig *c = &vit.cfg;
        if (c->n_classes != N_CLASSES || c->dim != c->n_heads * c->head_dim ||
            !(c->crop_pct > 0.0f && c->crop_pct <= 1.0f) || !(c->ln_eps > 0.0f) ||
            !(c->std[0] > 0.0f && c->std[1] > 0.0f && c->std[2] > 0.0f))
            fail("vit_load accepted a config outside its documented ranges");
        for (int i = 0; vit.labels && i < N_CLASSES; i++)
            if (!memchr(vit.labels[i], 0, VIT_LABEL_BYTES)) fail("label not NUL-terminated");
        run_model(&vit);
        vit_free(&vit);
    }

    /* as a labels file */
    char(*labels)[VIT_LABEL_BYTES] = NULL;
    memset(&err, 'x', sizeof err);
    rc = vit_labels_load(&labels, text.path, N_CLASSES, &err);
    fuzz_check_error(rc, &err, "vit_labels_load");
    if (rc == VIT_OK) {
        for (int i = 0; i < N_CLASSES; i++)
            if (!memchr(labels[i], 0, VIT_LABEL_BYTES) || !labels[i][0])
                fail("vit_labels_load gave an empty or unterminated label");
        free(labels);
    } else if (labels) {
        fail("vit_labels_load failed but left *labels set");
    }
    return 0;
}
