/* entropy_dump.c - run a model on one input, keeping the attention and then recomputing
 * it, and write the attention and every attention-entropy map (vit_map_entropy,
 * vit_map_entropy_layers) as .npy files, for test_entropy.py to check against numpy.
 *
 * usage: entropy_dump --model M.safetensors [--heads N] (--image PHOTO | --input RAW)
 *                     --out DIR
 *   RAW  float32 [3, Sh, Sw] in host byte order, the normalised input (no preprocessing)
 *
 * Writes, in DIR (float32 row-major NPY v1.0; F = H + 3: heads 0 .. H-1, then the mean,
 * max and min fusion, VitFusion order):
 *   att.npy                   [L, H, T, T]    the attention of the run that keeps it
 *   entropy_keep.npy          [L, F, gh, gw]  vit_map_entropy, one call per layer, head
 *                                             and fusion, on that run
 *   entropy_recompute.npy     [L, F, gh, gw]  the same on a run that recomputes it
 *                                             (VIT_ATT_RECOMPUTE)
 *   entropy_layers_keep.npy, entropy_layers_recompute.npy   vit_map_entropy_layers(0, L)
 *   shape.json                {"L", "H", "Np", "gh", "gw", "T"}
 * Before that it checks that out-of-range arguments give VIT_ERR_ARG with a message.
 * Exit status: 0 ok, 1 on any failure (message on stderr), 2 usage. */
#include "headless/npy.h"
#include "vit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *msg) {
    fprintf(stderr, "entropy_dump: %s: %s\n", what, msg);
    return 0;
}

static int expect_arg(VitStatus rc, const VitError *e, const char *what) {
    if (rc == VIT_ERR_ARG && e->code == VIT_ERR_ARG && e->msg[0]) return 1;
    fprintf(stderr, "entropy_dump: %s: got %s, expected arg\n", what, vit_status_name(rc));
    return 0;
}

/* Out-of-range layer, head, fusion and layer ranges: VIT_ERR_ARG. */
static int check_arg_errors(const VitRun *run, float *m) {
    const VitConfig *c = &run->cfg;
    VitError e;
    int ok = 1;
    ok &= expect_arg(vit_map_entropy(m, run, -1, 0, VIT_FUSE_MEAN, &e), &e, "layer -1");
    ok &= expect_arg(vit_map_entropy(m, run, c->n_layers, 0, VIT_FUSE_MEAN, &e), &e, "layer L");
    ok &= expect_arg(vit_map_entropy(m, run, 0, c->n_heads, VIT_FUSE_MEAN, &e), &e, "head H");
    ok &= expect_arg(vit_map_entropy(m, run, 0, -1, (VitFusion)3, &e), &e, "fusion 3");
    ok &= expect_arg(vit_map_entropy_layers(m, run, 0, 0, &e), &e, "layers 0 + 0");
    ok &= expect_arg(vit_map_entropy_layers(m, run, -1, 1, &e), &e, "layers -1 + 1");
    ok &= expect_arg(vit_map_entropy_layers(m, run, 0, c->n_layers + 1, &e), &e, "layers 0 + L+1");
    VitRun empty = {0};
    empty.cfg = *c;
    ok &= expect_arg(vit_map_entropy(m, &empty, 0, 0, VIT_FUSE_MEAN, &e), &e, "no forward pass");
    return ok;
}

/* Every map of run into single [L, F, N] (one call each) and layers (one call). */
static int entropy_maps(float *single, float *layers, const VitRun *run) {
    const VitConfig *c = &run->cfg;
    int L = c->n_layers, H = c->n_heads, N = c->n_patches;
    VitError e;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < H + 3; k++) {
            float *o = single + ((size_t)l * (H + 3) + k) * N;
            VitStatus rc = k < H ? vit_map_entropy(o, run, l, k, VIT_FUSE_MEAN, &e)
                                 : vit_map_entropy(o, run, l, -1, (VitFusion)(k - H), &e);
            if (rc) return fail("vit_map_entropy", e.msg);
        }
    if (vit_map_entropy_layers(layers, run, 0, L, &e)) return fail("vit_map_entropy_layers", e.msg);
    return 1;
}

static int write(const char *dir, const char *name, const float *data, const int *shape, int nd) {
    char msg[512];
    if (npy_write(dir, name, data, shape, nd, msg, sizeof msg)) return fail(name, msg);
    return 1;
}

static int read_raw(float *out, size_t n, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path, strerror(errno));
    size_t got = fread(out, sizeof(float), n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra) return fail(path, "not exactly float32 [3, Sh, Sw]");
    return 1;
}

/* The model's input into run->input: the raw file, or the photo preprocessed. */
static int load_input(VitRun *run, const Vit *vit, const char *image, const char *raw) {
    if (raw) return read_raw(run->input, (size_t)3 * vit->cfg.image_h * vit->cfg.image_w, raw);
    VitImage img = {0};
    VitError e;
    if (vit_image_load(&img, image, &e)) return fail(image, e.msg);
    VitStatus rc = vit_preprocess(run->input, NULL, NULL, NULL, NULL, &vit->cfg, &img, &e);
    vit_image_free(&img);
    return rc ? fail(image, e.msg) : 1;
}

int main(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *raw = NULL, *out = NULL;
    VitLoadOptions lo = {0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--heads"))
            lo.n_heads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--image"))
            image = argv[i + 1];
        else if (!strcmp(argv[i], "--input"))
            raw = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else
            model = NULL, i = argc;
    }
    if (!model || !out || !image == !raw || argc % 2 == 0) {
        fputs("usage: entropy_dump --model M [--heads N] (--image PHOTO | --input RAW) --out DIR\n",
              stderr);
        return 2;
    }
    Vit vit = {0};
    VitRun run = {0};
    VitError e;
    if (vit_load(&vit, model, &lo, &e)) return !fail(model, e.msg);
    const VitConfig *c = &vit.cfg;
    int L = c->n_layers, H = c->n_heads, T = c->n_tokens, N = c->n_patches;
    size_t n_maps = (size_t)L * (H + 3) * N;
    float *single = malloc(n_maps * sizeof(float)), *layers = malloc(n_maps * sizeof(float));
    int ok = single && layers;
    int shape[4] = {L, H + 3, c->grid_h, c->grid_w}, att_shape[4] = {L, H, T, T};
    static const VitAttStorage how[2] = {VIT_ATT_KEEP, VIT_ATT_RECOMPUTE};
    static const char *const name[2][2] = {
        {"entropy_keep.npy", "entropy_layers_keep.npy"},
        {"entropy_recompute.npy", "entropy_layers_recompute.npy"}};
    for (int k = 0; k < 2 && ok; k++) {
        VitRunOptions ro = {.att = how[k]};
        if (vit_run_init_with(&run, &vit, &ro, &e)) {
            ok = fail("vit_run_init_with", e.msg);
            break;
        }
        ok = load_input(&run, &vit, image, raw);
        if (ok) vit_forward(&run, &vit);
        if (ok && k == 0) ok = check_arg_errors(&run, single) && (run.att != NULL);
        if (ok && k == 0) ok = write(out, "att.npy", run.att, att_shape, 4);
        if (ok && k == 1 && run.att) ok = fail("recompute", "the run kept the attention");
        ok = ok && entropy_maps(single, layers, &run) && write(out, name[k][0], single, shape, 4) &&
             write(out, name[k][1], layers, shape, 4);
        vit_run_free(&run);
    }
    if (ok) {
        char path[1200];
        snprintf(path, sizeof path, "%s/shape.json", out);
        FILE *f = fopen(path, "w");
        ok = f &&
             fprintf(f, "{\"L\": %d, \"H\": %d, \"Np\": %d, \"gh\": %d, \"gw\": %d, \"T\": %d}\n",
                     L, H, c->n_prefix, c->grid_h, c->grid_w, T) > 0;
        if (!f || fclose(f)) ok = fail(path, "cannot write");
    }
    free(single), free(layers);
    vit_free(&vit);
    return ok ? 0 : 1;
}
