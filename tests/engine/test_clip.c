/* test_clip.c - the text head's API (vit.h, "CLIP") on a tiny CLIP-shaped tower (timm's
 * names with norm_pre, no patch bias, image_proj.weight and logit_scale: what the clip
 * layouts convert a checkpoint into): vit_set_text_head's errors leave the previous head,
 * its copies (embeddings normalised, labels), vit_image_embed and vit_text_logits against
 * a fresh forward pass, runs and gradients made for another C refused, a tower without
 * text head (every image view, no class to explain), a model without image projection,
 * and vit_randomized on a text head. The numbers themselves are tested against PyTorch in
 * tests/parity/test_clip_image.py.
 *   test_clip SCRATCH_DIR */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 32
#define L 2
#define F 64
#define E 16

static void fill_input(VitRun *run, const Vit *vit) {
    size_t n = (size_t)3 * vit->cfg.image_h * vit->cfg.image_w;
    for (size_t i = 0; i < n; i++) run->input[i] = (float)sin(0.37 * (double)i);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "scratch_clip";
    make_dir(dir);
    char path[1024], plain[1024];
    path_join(path, sizeof path, dir, "clip.safetensors");
    path_join(plain, sizeof plain, dir, "plain.safetensors");
    Model m;
    model_tiny(&m, D, L, 8, 3, F, 0);
    model_write(&m, plain);
    model_remove(&m, "patch_embed.proj.bias");
    model_add(&m, "norm_pre.weight", "F32", 1, (int64_t[]){D});
    model_add(&m, "norm_pre.bias", "F32", 1, (int64_t[]){D});
    model_add(&m, "image_proj.weight", "F32", 2, (int64_t[]){E, D});
    model_add(&m, "logit_scale", "F32", 0, NULL);
    model_write(&m, path);

    Vit vit = {0}, bare = {0};
    VitError err = {0};
    VitLoadOptions opt = {.n_heads = 2};
    if (!check_err(vit_load(&vit, path, &opt, &err), &err, VIT_OK, NULL, NULL, "load") ||
        !check_err(vit_load(&bare, plain, &opt, &err), &err, VIT_OK, NULL, NULL, "load plain"))
        return t_finish("test_clip");
    const VitConfig *c = &vit.cfg;
    check(c->norm_pre && c->embed_dim == E && c->clip && c->n_classes == 0 &&
              vit.w.patch_b == NULL && c->logit_scale > 0.4f && c->logit_scale < 2.2f,
          "config: norm_pre %d, E %d, clip %d, C %d, logit scale %g", c->norm_pre, c->embed_dim,
          c->clip, c->n_classes, (double)c->logit_scale);

    /* without a text head: the embedding, no class to explain */
    VitRun r0 = {0};
    VitGrad g0 = {0};
    float e[E], e2[E];
    if (check_err(vit_run_init(&r0, &vit, &err), &err, VIT_OK, NULL, NULL, "run, no head")) {
        fill_input(&r0, &vit);
        vit_forward(&r0, &vit);
        check_err(vit_image_embed(e, &r0, &vit, &err), &err, VIT_OK, NULL, NULL, "embed");
        /* the buffers are made (a score of the embedding needs no head), no class though */
        if (check_err(vit_grad_init(&g0, &vit, &r0, &err), &err, VIT_OK, NULL, NULL,
                      "grad buffers without a text head"))
            check_err(vit_backward(&g0, &r0, &vit, 0, VIT_GRAD_EXACT, &err), &err, VIT_ERR_ARG,
                      NULL, (const char *const[]){"text head", NULL}, "grad without a text head");
        float e3[E];
        check_err(vit_embedding(e3, &r0, &vit, &err), &err, VIT_OK, NULL, NULL, "vit_embedding");
        check(vit_embedding_dim(&vit) == E && !memcmp(e3, e, sizeof e3),
              "vit_embedding of a CLIP tower is vit_image_embed's, bit for bit");
        check_err(vit_text_logits(&r0, &vit, &err), &err, VIT_ERR_ARG, NULL,
                  (const char *const[]){"no text head", NULL}, "text logits without a head");
    }
    /* a model without image projection */
    float emb[4 * E];
    for (int i = 0; i < 4 * E; i++) emb[i] = (float)cos(1.3 * i) * (1 + i % 3);
    check_err(vit_set_text_head(&bare, emb, 2, NULL, 100.0f, &err), &err, VIT_ERR_ARG, NULL,
              (const char *const[]){"no image projection", NULL}, "text head without projection");
    check_err(vit_image_embed(e2, &r0, &bare, &err), &err, VIT_ERR_ARG, NULL,
              (const char *const[]){"no image projection", NULL}, "embed without projection");

    /* bad heads: refused, nothing changed */
    float zero[2 * E] = {0}, nan_row[2 * E];
    memcpy(nan_row, emb, sizeof nan_row);
    nan_row[E + 3] = NAN;
    const struct {
        const float *emb;
        int C;
        float scale;
        const char *msg, *what;
    } bad[] = {{NULL, 2, 100.0f, "at NULL", "no embeddings"},
               {emb, 0, 100.0f, "0 embeddings", "C = 0"},
               {emb, 2, 0.0f, "logit scale", "logit scale 0"},
               {emb, 2, NAN, "logit scale", "logit scale NaN"},
               {zero, 2, 100.0f, "embedding 0 is zero", "a zero embedding"},
               {nan_row, 2, 100.0f, "embedding 1 is not finite", "a NaN in an embedding"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        check_err(vit_set_text_head(&vit, bad[i].emb, bad[i].C, NULL, bad[i].scale, &err), &err,
                  VIT_ERR_ARG, NULL, (const char *const[]){bad[i].msg, NULL}, bad[i].what);
    check(c->n_classes == 0 && !vit.w.text_emb, "a refused head leaves none");

    /* a head of 3 with labels: copies, unit rows */
    char l0[8] = "cat", l1[8] = "dog", l2[8] = "cup";
    const char *labels[3] = {l0, l1, l2};
    if (check_err(vit_set_text_head(&vit, emb, 3, labels, 100.0f, &err), &err, VIT_OK, NULL, NULL,
                  "head of 3")) {
        l1[0] = 'x';
        check(c->n_classes == 3 && vit.labels && !strcmp(vit.labels[1], "dog"),
              "labels copied: '%s'", vit.labels ? vit.labels[1] : "(none)");
        double worst = 0;
        for (int i = 0; i < 3; i++) {
            double n2 = 0;
            for (int j = 0; j < E; j++)
                n2 += (double)vit.w.text_emb[i * E + j] * vit.w.text_emb[i * E + j];
            worst = fmax(worst, fabs(sqrt(n2) - 1));
        }
        check(worst < 1e-6, "text embeddings normalised (|norm - 1| %.1e)", worst);
        check_err(vit_set_text_head(&vit, zero, 2, NULL, 100.0f, &err), &err, VIT_ERR_ARG, NULL,
                  NULL, "a bad head after a good one");
        check(c->n_classes == 3 && !strcmp(vit.labels[2], "cup"), "the good head stays");
    }
    /* a run for C = 3: the new phrases on the old pass = a fresh pass */
    VitRun r3 = {0}, fresh = {0};
    VitGrad g3 = {0};
    if (check_err(vit_run_init(&r3, &vit, &err), &err, VIT_OK, NULL, NULL, "run, C 3") &&
        check_err(vit_grad_init(&g3, &vit, &r3, &err), &err, VIT_OK, NULL, NULL, "grad, C 3")) {
        fill_input(&r3, &vit);
        vit_forward(&r3, &vit);
        vit_image_embed(e2, &r3, &vit, &err);
        check(memcmp(e, e2, sizeof e) == 0, "the image embedding does not depend on the head");
        float other[3 * E];
        for (int i = 0; i < 3 * E; i++) other[i] = (float)sin(0.7 * i + 1);
        vit_set_text_head(&vit, other, 3, NULL, 50.0f, &err);
        if (check_err(vit_text_logits(&r3, &vit, &err), &err, VIT_OK, NULL, NULL, "text logits") &&
            check_err(vit_run_init(&fresh, &vit, &err), &err, VIT_OK, NULL, NULL, "fresh run")) {
            fill_input(&fresh, &vit);
            vit_forward(&fresh, &vit);
            double d = 0;
            for (int i = 0; i < 3; i++) d = fmax(d, fabs(fresh.logits[i] - r3.logits[i]));
            check(d < 1e-5, "vit_text_logits = a fresh forward pass's logits (max diff %.1e)", d);
            check_err(vit_backward(&g3, &r3, &vit, 1, VIT_GRAD_EXACT, &err), &err, VIT_OK, NULL,
                      NULL, "backward of the new head on the old pass");
        }
        /* C changes: the run and gradients made for 3 are refused */
        vit_set_text_head(&vit, emb, 4, NULL, 100.0f, &err);
        check_err(vit_text_logits(&r3, &vit, &err), &err, VIT_ERR_ARG, NULL,
                  (const char *const[]){"4 phrases", NULL}, "text logits, run for another C");
        check_err(vit_backward(&g3, &r3, &vit, 0, VIT_GRAD_EXACT, &err), &err, VIT_ERR_ARG, NULL,
                  NULL, "backward, grad for another C");
        check(vit.labels == NULL, "a head without labels: none");
    }
    /* the sanity check's randomisation: the image projection in the head's place */
    Vit rnd = {0};
    if (check_err(vit_randomized(&rnd, &vit, 1, 7, &err), &err, VIT_OK, NULL, NULL, "randomized")) {
        check(rnd.w.img_proj_w != vit.w.img_proj_w && rnd.w.text_emb == vit.w.text_emb &&
                  memcmp(rnd.w.img_proj_w, vit.w.img_proj_w, E * D * sizeof(float)) != 0,
              "randomized: a fresh image projection, the same text head");
        VitRun rr = {0};
        if (check_err(vit_run_init(&rr, &rnd, &err), &err, VIT_OK, NULL, NULL, "randomized run")) {
            fill_input(&rr, &rnd);
            vit_forward(&rr, &rnd);
            check(isfinite(rr.logits[0]), "randomized model runs");
        }
        vit_run_free(&rr);
        vit_free(&rnd);
    }
    vit_grad_free(&g0);
    vit_grad_free(&g3);
    vit_run_free(&r0);
    vit_run_free(&r3);
    vit_run_free(&fresh);
    vit_free(&vit);
    vit_free(&bare);
    return t_finish("test_clip");
}
