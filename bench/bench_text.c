/* bench_text.c - CLIP's text tower (vit_text_embed) on a list of prompts, for
 * bench/text.sh, which runs it in turns with PyTorch (bench/torch_text.py) on the same
 * weights and token ids.
 *
 *   bench_text --model M --ids IDS.txt [--threads K] [--runs N]
 *
 * IDS.txt: one token sequence per line (test_text_tower.py's format). Prints
 * "text <ms> ... cpu <ms> tokens <n>": one wall time per run of vit_text_embed over every
 * prompt, the mean process CPU time per run, and the tokens computed (each prompt up to
 * its end-of-text token). Loading is not timed. */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL;
    int n_threads = 1, runs = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_text --model M --ids IDS.txt [--threads K] [--runs N]\n");
            return 2;
        }
    }
    if (!model || !ids_path || runs < 1) return 2;
    VitText t = {0};
    VitError err;
    if (vit_text_load(&t, model, &err)) {
        fprintf(stderr, "bench_text: %s\n", err.msg);
        return 1;
    }
    FILE *f = fopen(ids_path, "r");
    if (!f) return fprintf(stderr, "bench_text: cannot open %s\n", ids_path), 1;
    int cap = 4096, n = 0, **ids = malloc((size_t)cap * sizeof *ids),
        *lens = malloc((size_t)cap * sizeof *lens);
    long tokens = 0;
    char line[4096];
    while (ids && lens && n < cap && fgets(line, sizeof line, f)) {
        int *seq = malloc(sizeof line / 2 * sizeof *seq), k = 0, best = 0;
        if (!seq) return 1;
        for (char *p = line, *end;; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            if (v > seq[best] || k == 0) best = k;
            seq[k++] = (int)v;
        }
        tokens += best + 1;
        ids[n] = seq, lens[n++] = k;
    }
    fclose(f);
    float *out = malloc((size_t)n * (size_t)t.cfg.embed_dim * sizeof *out);
    if (!out || !n) return 1;
    printf("text");
    double c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms(CLOCK_MONOTONIC);
        if (vit_text_embed(out, &t, (const int *const *)ids, lens, n, n_threads, &err)) {
            fprintf(stderr, "bench_text: %s\n", err.msg);
            return 1;
        }
        printf(" %.1f", now_ms(CLOCK_MONOTONIC) - t0);
        fflush(stdout);
    }
    printf(" cpu %.1f tokens %ld\n", (now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / runs, tokens);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(out);
    vit_text_free(&t);
    return 0;
}
