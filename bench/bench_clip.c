/* bench_clip.c - time what a typed phrase costs the engine on a CLIP image tower
 * (vit.h, "CLIP"), the text tower's embedding of the phrase excluded.
 *
 *   bench_clip --model M [--iters N] [--threads K] [--phrases C]
 *
 * The photo's forward pass is made once (it does not depend on the phrase); then per
 * iteration, for C random phrase embeddings (a new set each time):
 *   phrase    vit_set_text_head + vit_text_logits: the new head's logits on the same pass
 *   backward  vit_backward(VIT_GRAD_EXACT) of phrase 0
 *   chefer, legrad, gradcam, rollout   vit_explain of each (grad-rollout at discard 0)
 *   legrad1   vit_backward(VIT_GRAD_LEGRAD) + vit_explain(LEGRAD): LeGrad's own pass
 *   total     phrase + backward + chefer: a typed phrase -> its Chefer map
 *   total1    phrase + legrad1: a typed phrase -> its LeGrad map
 * and once before them
 *   load, forward   vit_load, vit_forward (the photo's pass: a fixed pseudo-random input)
 * Prints "stage <name> median_ms <x> min_ms <y> max_ms <z> iters <n>" per stage, as
 * bench_forward does. A benchmark, not a test: it checks that each call succeeds. */
#include "bench.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* splitmix64 -> a uniform float in [-1, 1) */
static float rnd(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

enum {
    S_PHRASE,
    S_BACKWARD,
    S_CHEFER,
    S_LEGRAD,
    S_GRADCAM,
    S_ROLLOUT,
    S_LEGRAD1,
    S_TOTAL,
    S_TOTAL1,
    N_STAGES
};

int main(int argc, char **argv) {
    const char *model = NULL;
    int iters = 10, C = 1;
    VitRunOptions ropt = {0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            ropt.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--phrases"))
            C = atoi(argv[i + 1]);
        else
            model = NULL, i = argc;
    }
    if (!model || iters < 1 || C < 1 || ropt.n_threads < 0) {
        fputs("usage: bench_clip --model M [--iters N] [--threads K] [--phrases C]\n", stderr);
        return 2;
    }
    Vit vit = {0};
    VitRun run = {0};
    VitGrad g = {0};
    VitError err = {0};
    double t0 = now_ms(CLOCK_MONOTONIC), ms_load, ms_fwd;
    if (vit_load(&vit, model, NULL, &err)) goto fail;
    ms_load = now_ms(CLOCK_MONOTONIC) - t0;
    int E = vit.cfg.embed_dim, N = vit.cfg.n_patches;
    float *emb = malloc((size_t)C * (E > 0 ? E : 1) * sizeof *emb);
    float *map = malloc((size_t)N * sizeof *map);
    double *ms = malloc((size_t)N_STAGES * iters * sizeof *ms);
    uint64_t seed = 1;
    if (!emb || !map || !ms) {
        fputs("bench_clip: out of memory\n", stderr);
        return 1;
    }
    for (int i = 0; i < C * E; i++) emb[i] = rnd(&seed);
    VitGrad g1 = {0};
    if (vit_set_text_head(&vit, emb, C, NULL, 100.0f, &err) ||
        vit_run_init_with(&run, &vit, &ropt, &err) || vit_grad_init(&g, &vit, &run, &err) ||
        vit_grad_init(&g1, &vit, &run, &err))
        goto fail;
    size_t n_in = (size_t)3 * vit.cfg.image_h * vit.cfg.image_w;
    for (size_t i = 0; i < n_in; i++) run.input[i] = rnd(&seed);
    t0 = now_ms(CLOCK_MONOTONIC);
    vit_forward(&run, &vit);
    ms_fwd = now_ms(CLOCK_MONOTONIC) - t0;
    printf("stage %-10s median_ms %9.3f iters 1\n", "load", ms_load);
    printf("stage %-10s median_ms %9.3f iters 1\n", "forward", ms_fwd);
    static const VitExplain maps[4] = {VIT_EXPLAIN_CHEFER, VIT_EXPLAIN_LEGRAD, VIT_EXPLAIN_GRADCAM,
                                       VIT_EXPLAIN_GRAD_ROLLOUT};
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < C * E; i++) emb[i] = rnd(&seed);
        double t[N_STAGES + 1];
        t[0] = now_ms(CLOCK_MONOTONIC);
        if (vit_set_text_head(&vit, emb, C, NULL, 100.0f, &err) ||
            vit_text_logits(&run, &vit, &err))
            goto fail;
        t[1] = now_ms(CLOCK_MONOTONIC);
        if (vit_backward(&g, &run, &vit, 0, VIT_GRAD_EXACT, &err)) goto fail;
        t[2] = now_ms(CLOCK_MONOTONIC);
        for (int m = 0; m < 4; m++) {
            if (vit_explain(map, maps[m], &run, &g, &vit, 0.0f, &err)) goto fail;
            t[3 + m] = now_ms(CLOCK_MONOTONIC);
        }
        if (vit_backward(&g1, &run, &vit, 0, VIT_GRAD_LEGRAD, &err) ||
            vit_explain(map, VIT_EXPLAIN_LEGRAD, &run, &g1, &vit, 0.0f, &err))
            goto fail;
        t[7] = now_ms(CLOCK_MONOTONIC);
        for (int s = 0; s < S_TOTAL; s++) ms[s * iters + it] = t[s + 1] - t[s];
        ms[S_TOTAL * iters + it] =
            ms[S_PHRASE * iters + it] + ms[S_BACKWARD * iters + it] + ms[S_CHEFER * iters + it];
        ms[S_TOTAL1 * iters + it] = ms[S_PHRASE * iters + it] + ms[S_LEGRAD1 * iters + it];
    }
    static const char *const names[N_STAGES] = {"phrase",  "backward", "chefer",
                                                "legrad",  "gradcam",  "rollout",
                                                "legrad1", "total",    "total1"};
    for (int s = 0; s < N_STAGES; s++) report_stage(names[s], ms + (size_t)s * iters, iters);
    printf("model %s D %d L %d T %d E %d phrases %d threads %d\n", vit.cfg.name, vit.cfg.dim,
           vit.cfg.n_layers, vit.cfg.n_tokens, E, C, run.n_threads);
    free(emb), free(map), free(ms);
    vit_grad_free(&g);
    vit_run_free(&run);
    vit_free(&vit);
    return 0;
fail:
    fprintf(stderr, "bench_clip: %s\n", err.msg);
    return 1;
}
