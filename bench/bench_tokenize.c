/* bench_tokenize.c - CLIP's tokenizer's speed (vit_tokenize), not a test.
 *
 *   bench_tokenize VOCAB TEXTS [REPS]
 *
 * VOCAB: what vit_tokenizer_load takes. TEXTS: one text per line, hex-encoded UTF-8 (as
 * tests/text's tok_dump reads them; bench/tokenize.sh writes the test's 10 000 strings).
 * Times loading the vocabulary once and tokenising every text (77-token context) REPS
 * times (default 5); prints the best pass as tokens/s (SOT and EOT counted) and texts/s. */
#define _POSIX_C_SOURCE 200809L /* getline, clock_gettime */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: bench_tokenize VOCAB TEXTS [REPS]\n", stderr);
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    char **texts = NULL, *line = NULL;
    size_t cap = 0, n = 0, room = 0;
    while (getline(&line, &cap, f) > 0) {
        if (n == room) {
            room = room ? 2 * room : 1024;
            char **nt = realloc(texts, room * sizeof *nt);
            if (!nt) return 1;
            texts = nt;
        }
        char *t = malloc(strlen(line) / 2 + 1);
        if (!t) return 1;
        size_t k = 0;
        for (const char *p = line; hexval(p[0]) >= 0 && hexval(p[1]) >= 0; p += 2)
            t[k++] = (char)(hexval(p[0]) * 16 + hexval(p[1]));
        t[k] = 0;
        texts[n++] = t;
    }
    fclose(f);
    free(line);
    VitTokenizer *tok;
    VitError err;
    double t0 = now_s();
    if (vit_tokenizer_load(&tok, argv[1], &err)) {
        fprintf(stderr, "bench_tokenize: %s\n", err.msg);
        return 1;
    }
    double load_s = now_s() - t0, best = 1e30;
    long tokens = 0, refused = 0;
    for (int r = 0; r < reps; r++) {
        tokens = 0, refused = 0;
        t0 = now_s();
        for (size_t i = 0; i < n; i++) {
            int ids[VIT_TEXT_CONTEXT], k, cut;
            if (vit_tokenize(ids, &k, &cut, tok, texts[i], VIT_TEXT_CONTEXT, &err))
                refused++;
            else
                tokens += k;
        }
        double s = now_s() - t0;
        if (s < best) best = s;
    }
    printf("tokenize: %zu texts (%ld refused), %ld tokens, best of %d: %.1f ms: %.0f tokens/s, "
           "%.0f texts/s; vocabulary load %.1f ms (%s)\n",
           n, refused, tokens, reps, 1e3 * best, (double)tokens / best, (double)n / best,
           1e3 * load_s, argv[1]);
    for (size_t i = 0; i < n; i++) free(texts[i]);
    free(texts);
    vit_tokenizer_free(tok);
    return 0;
}
