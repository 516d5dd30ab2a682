/* test_randomize.c - vit_randomized, the cascading randomisation of the sanity check
 * (Adebayo et al. 2018): which tensors are re-initialised and to what, that the same
 * seed gives the same weights, that the cascade's steps are nested (block l's fresh
 * weights do not depend on how many blocks are re-initialised), and that the copy
 * runs: its attention equals the trained model's below the re-initialised blocks and
 * differs above.
 *   test_randomize SCRATCH_DIR */
#include "testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D 32
#define L 3
#define F 64
#define C 5

static int same(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

static int all_equal(const float *a, size_t n, float v) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != v) return 0;
    return 1;
}

/* Mean and standard deviation of a[n], and its largest |value|. */
static void stats(const float *a, size_t n, double *mean, double *sd, double *big) {
    double s = 0, s2 = 0;
    *big = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i], s2 += (double)a[i] * a[i], *big = fmax(*big, fabs(a[i]));
    *mean = s / n, *sd = sqrt(s2 / n - *mean * *mean);
}

/* The forward pass's attention of vit on a fixed input: att [L, H, T, T] (malloc'd). */
static float *attention_of(const Vit *vit) {
    VitRun run = {0};
    VitRunOptions ro = {.n_threads = 1, .att = VIT_ATT_KEEP};
    if (vit_run_init_with(&run, vit, &ro, NULL)) return NULL;
    size_t n_in = (size_t)3 * vit->cfg.image_h * vit->cfg.image_w;
    for (size_t i = 0; i < n_in; i++) run.input[i] = (float)sin(0.37 * (double)i);
    vit_forward(&run, vit);
    const VitConfig *c = &vit->cfg;
    size_t n = (size_t)c->n_layers * c->n_heads * c->n_tokens * c->n_tokens;
    float *att = malloc(n * sizeof *att);
    if (att) memcpy(att, run.att, n * sizeof *att);
    vit_run_free(&run);
    return att;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "scratch_randomize";
    make_dir(dir);
    char path[1024];
    path_join(path, sizeof path, dir, "tiny.safetensors");
    Model m;
    model_tiny(&m, D, L, 4, 3, F, C);
    if (model_write(&m, path)) return check(0, "write %s", path), t_finish("engine_randomize");

    Vit vit = {0}, a = {0}, b = {0}, full = {0};
    VitError err;
    VitLoadOptions lo = {.n_heads = 2};
    if (!check(vit_load(&vit, path, &lo, &err) == VIT_OK, "load the tiny model (%s)", err.msg))
        return t_finish("engine_randomize");
    const VitWeights *w = &vit.w;

    check_err(vit_randomized(&a, &vit, -1, 1, &err), &err, VIT_ERR_ARG, NULL, NULL,
              "n_blocks -1 refused");
    check_err(vit_randomized(&a, &vit, L + 1, 1, &err), &err, VIT_ERR_ARG, NULL, NULL,
              "n_blocks L + 1 refused");

    /* head only */
    check(vit_randomized(&a, &vit, 0, 7, &err) == VIT_OK, "head only (%s)", err.msg);
    check(!same(a.w.head_w, w->head_w, (size_t)C * D), "head weights re-initialised");
    check(all_equal(a.w.head_b, C, 0.0f), "head bias 0");
    int kept = 1;
    for (int l = 0; l < L; l++)
        kept &=
            a.w.blocks[l].fc1_w == w->blocks[l].fc1_w && a.w.blocks[l].qkv_w == w->blocks[l].qkv_w;
    check(kept, "every block kept (the same tensors)");
    check(a.w.patch_w == w->patch_w && a.w.pos_embed == w->pos_embed && a.w.norm_w == w->norm_w &&
              a.w.cls_token == w->cls_token,
          "patch embedding, position embedding, CLS token and final norm kept");

    /* two blocks: the top two re-initialised, block 0 kept */
    check(vit_randomized(&b, &vit, 2, 7, &err) == VIT_OK, "two blocks (%s)", err.msg);
    check(b.w.blocks[0].qkv_w == w->blocks[0].qkv_w && b.w.blocks[0].fc2_w == w->blocks[0].fc2_w,
          "block 0 kept");
    for (int l = 1; l < L; l++) {
        const VitBlock *r = &b.w.blocks[l];
        double mean, sd, big;
        stats(r->fc1_w, (size_t)F * D, &mean, &sd, &big);
        check(fabs(mean) < 0.002 && fabs(sd - 0.02) < 0.002 && big <= 2.0,
              "block %d fc1: N(0, 0.02^2) (mean %.5f, sd %.5f)", l, mean, sd);
        stats(r->qkv_w, (size_t)3 * D * D, &mean, &sd, &big);
        check(fabs(mean) < 0.002 && fabs(sd - 0.02) < 0.002, "block %d qkv: mean %.5f, sd %.5f", l,
              mean, sd);
        check(r->q_w == r->qkv_w && r->k_w == r->qkv_w + D * D && r->v_w == r->qkv_w + 2 * D * D,
              "block %d: q, k, v rows of the fresh qkv", l);
        check(all_equal(r->qkv_b, 3 * D, 0.0f) && all_equal(r->proj_b, D, 0.0f) &&
                  all_equal(r->fc1_b, F, 0.0f) && all_equal(r->fc2_b, D, 0.0f),
              "block %d: biases 0", l);
        check(all_equal(r->norm1_w, D, 1.0f) && all_equal(r->norm1_b, D, 0.0f) &&
                  all_equal(r->norm2_w, D, 1.0f) && all_equal(r->norm2_b, D, 0.0f),
              "block %d: LayerNorms weight 1, bias 0", l);
    }
    /* nested: the head and block 2 of "two blocks" equal "every block"'s; seeds matter */
    check(vit_randomized(&full, &vit, L, 7, &err) == VIT_OK, "every block (%s)", err.msg);
    check(same(full.w.head_w, b.w.head_w, (size_t)C * D) &&
              same(full.w.head_w, a.w.head_w, (size_t)C * D),
          "the head's fresh weights are the same at every step");
    check(same(full.w.blocks[2].fc1_w, b.w.blocks[2].fc1_w, (size_t)F * D) &&
              same(full.w.blocks[1].qkv_w, b.w.blocks[1].qkv_w, (size_t)3 * D * D),
          "block l's fresh weights are the same at every step that re-initialises it");
    Vit other = {0};
    check(vit_randomized(&other, &vit, L, 8, &err) == VIT_OK &&
              !same(other.w.blocks[2].fc1_w, full.w.blocks[2].fc1_w, (size_t)F * D),
          "another seed, other weights");
    vit_free(&other);

    /* the copies run: attention of block 0 equal with two blocks re-initialised,
     * blocks 1 and 2 different */
    float *att0 = attention_of(&vit), *att2 = attention_of(&b), *atth = attention_of(&a);
    const VitConfig *c = &vit.cfg;
    size_t per = (size_t)c->n_heads * c->n_tokens * c->n_tokens;
    if (check(att0 && att2 && atth, "forward passes of the copies")) {
        check(same(att0, att2, per), "two blocks re-initialised: block 0's attention unchanged");
        check(!same(att0 + per, att2 + per, per) && !same(att0 + 2 * per, att2 + 2 * per, per),
              "blocks 1 and 2's attention changed");
        check(same(att0, atth, (size_t)L * per), "head only: every attention unchanged");
    }
    free(att0), free(att2), free(atth);
    vit_free(&a), vit_free(&b), vit_free(&full);
    vit_free(&vit);
    return t_finish("engine_randomize");
}
