/* bench_text.c - CLIP's text tower (vit_text_embed) on a list of prompts, for
 * bench/text.sh, which runs it in turns with PyTorch (bench/torch_text.py) on the same
 * weights and token ids.
 *
 *   bench_text --model M --ids IDS.txt [--threads K] [--runs N]
 *
 * IDS.txt: one token sequence per line (test_text_tower.py's format). Prints
 * "text <ms> ... cpu <ms> tokens <n> rows <r>": one wall time per run of vit_text_embed
 * over every prompt, the mean process CPU time per run, the tokens up to each prompt's
 * end-of-text token, and the distinct prefixes among them (the rows the engine's prefix
 * tree computes). Loading is not timed. */
#include "bench.h"
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A sequence up to its pooled token (the first largest id), for counting the rows the
 * engine's prefix tree computes. */
typedef struct {
    const int *ids;
    int need;
} Seq;

static int by_tokens(const void *a, const void *b) {
    const Seq *x = a, *y = b;
    for (int i = 0; i < x->need && i < y->need; i++)
        if (x->ids[i] != y->ids[i]) return x->ids[i] < y->ids[i] ? -1 : 1;
    return (x->need > y->need) - (x->need < y->need);
}

int main(int argc, char **argv) {
    int bad = 0;
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
            bad = 1; /* an unknown option: the usage below */
            break;
        }
    }
    if (!model || !ids_path || runs < 1 || bad) {
        fprintf(stderr, "usage: bench_text --model M --ids IDS.txt [--threads K] [--runs N]\n");
        return 2;
    }
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
    long tokens = 0, rows = 0;
    Seq *seq = malloc((size_t)cap * sizeof *seq);
    char line[4096];
    while (ids && lens && seq && n < cap && fgets(line, sizeof line, f)) {
        int *ids_n = malloc(sizeof line / 2 * sizeof *ids_n), k = 0, best = 0;
        if (!ids_n) return 1;
        for (char *p = line, *end;; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            if (k == 0 || v > ids_n[best]) best = k;
            ids_n[k++] = (int)v;
        }
        tokens += best + 1;
        seq[n] = (Seq){ids_n, best + 1};
        ids[n] = ids_n, lens[n++] = k;
    }
    fclose(f);
    /* the distinct prefixes: the rows vit_text_embed computes (in batches of up to 256 rows
     * it computes a prefix again in each batch that needs it; not counted) */
    qsort(seq, (size_t)n, sizeof *seq, by_tokens);
    for (int i = 0; i < n; i++) {
        int lcp = 0;
        while (i && lcp < seq[i].need && lcp < seq[i - 1].need &&
               seq[i].ids[lcp] == seq[i - 1].ids[lcp])
            lcp++;
        rows += seq[i].need - lcp;
    }
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
    printf(" cpu %.1f tokens %ld rows %ld\n", (now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / runs,
           tokens, rows);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    free(lens);
    free(seq);
    free(out);
    vit_text_free(&t);
    return 0;
}
