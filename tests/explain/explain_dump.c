/* explain_dump.c - the built-in model's class-specific maps on many scenes, in one
 * process, for test_two_shapes.py (the two-shape behavioural test).
 *
 *   explain_dump MODEL LIST OUT
 *
 * LIST: one scene a line, "IMAGE [C ...]": an image path and zero or more target
 * classes. For each line, in order, OUT receives (raw float32, host byte order):
 *   logits    [C]       vit_forward's class logits (probabilities: their softmax)
 *   rollout   [gh, gw]  vit_rollout: last layer, mean fusion, discard 0, the CLS row
 *   attention [gh, gw]  vit_map_fused: last layer's CLS row, mean of the heads
 * then for each target class, every vit_explain map in VitExplain order
 * ([gh, gw] or [Sh, Sw], vit_explain_pixels), after vit_backward(VIT_GRAD_ALL).
 * grad-rollout's discard ratio is 0 (0.9, vit-explain's default, gives the same
 * counts in test_two_shapes.py: the clamped maps are mostly zeros already).
 * The first line on stdout gives the shapes and the methods' names, for the reader:
 *   "C 6 gh 12 gw 12 Sh 96 Sw 96 methods chefer grad-rollout ..."
 * One thread, so that the numbers do not depend on the machine.
 * Errors: a message on stderr, exit 1 (2 for a usage error). */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fputs("usage: explain_dump MODEL LIST OUT\n", stderr);
    return 2;
}

static int put(FILE *f, const float *x, size_t n) {
    return fwrite(x, sizeof *x, n, f) != n;
}

int main(int argc, char **argv) {
    if (argc != 4) return usage();
    Vit vit = {0};
    VitRun run = {0};
    VitGrad grad = {0};
    VitImage img = {0};
    VitError err = {0};
    VitRunOptions ropt = {.n_threads = 1};
    FILE *list = NULL, *out = NULL;
    float *map = NULL;
    int rc = 1, line_no = 0;
    char line[4096];

    if (vit_load(&vit, argv[1], NULL, &err) || vit_run_init_with(&run, &vit, &ropt, &err) ||
        vit_grad_init(&grad, &vit, &run, &err))
        goto engine_fail;
    const VitConfig *c = &vit.cfg;
    const size_t N = (size_t)c->n_patches, C = (size_t)c->n_classes,
                 px = (size_t)c->image_h * (size_t)c->image_w;
    if (!(map = malloc((px > N ? px : N) * sizeof *map))) {
        fputs("explain_dump: out of memory\n", stderr);
        goto done;
    }
    if (!(list = fopen(argv[2], "r")) || !(out = fopen(argv[3], "wb"))) {
        fprintf(stderr, "explain_dump: cannot open %s\n", list ? argv[3] : argv[2]);
        goto done;
    }
    printf("C %zu gh %d gw %d Sh %d Sw %d methods", C, c->grid_h, c->grid_w, c->image_h,
           c->image_w);
    for (int m = 0; m < VIT_EXPLAIN_COUNT; m++) printf(" %s", vit_explain_name((VitExplain)m));
    printf("\n");

    while (fgets(line, sizeof line, list)) {
        line_no++;
        char *tok = strtok(line, " \t\r\n");
        if (!tok) continue;
        if (vit_image_load(&img, tok, &err) ||
            vit_preprocess(run.input, NULL, NULL, NULL, NULL, c, &img, &err))
            goto engine_fail;
        vit_image_free(&img);
        vit_forward(&run, &vit);
        if (put(out, run.logits, C)) goto write_fail;
        if (vit_rollout(map, &run, c->n_layers - 1, -1, VIT_FUSE_MEAN, 0.0f, 0, &err))
            goto engine_fail;
        if (put(out, map, N)) goto write_fail;
        if (vit_map_fused(map, &run, c->n_layers - 1, VIT_FUSE_MEAN, 0, &err)) goto engine_fail;
        if (put(out, map, N)) goto write_fail;
        while ((tok = strtok(NULL, " \t\r\n"))) {
            char *end;
            long cl = strtol(tok, &end, 10);
            if (*end || cl < 0 || cl >= (long)C) {
                fprintf(stderr, "explain_dump: %s:%d: class '%s' (expected 0 .. %zu)\n", argv[2],
                        line_no, tok, C - 1);
                goto done;
            }
            if (vit_backward(&grad, &run, &vit, (int)cl, VIT_GRAD_ALL, &err)) goto engine_fail;
            for (int m = 0; m < VIT_EXPLAIN_COUNT; m++) {
                if (vit_explain(map, (VitExplain)m, &run, &grad, &vit, 0.0f, &err))
                    goto engine_fail;
                if (put(out, map, vit_explain_pixels((VitExplain)m) ? px : N)) goto write_fail;
            }
        }
    }
    if (ferror(list)) {
        fprintf(stderr, "explain_dump: %s: read failed\n", argv[2]);
        goto done;
    }
    rc = 0;
    goto done;

write_fail:
    fprintf(stderr, "explain_dump: %s: write failed\n", argv[3]);
    goto done;
engine_fail:
    fprintf(stderr, "explain_dump: %s:%d: %s (%s error)\n", argv[2], line_no, err.msg,
            vit_status_name(err.code));
done:
    if (list) fclose(list);
    if (out && fclose(out) && !rc) {
        fprintf(stderr, "explain_dump: %s: write failed\n", argv[3]);
        rc = 1;
    }
    free(map);
    vit_grad_free(&grad);
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return rc;
}
