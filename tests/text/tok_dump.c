/* tok_dump.c - CLIP's tokenizer on many texts, for test_tokenizer.py.
 *
 *   tok_dump VOCAB TEXTS [MAX_IDS]
 *
 * VOCAB: what vit_tokenizer_load takes. TEXTS: one text per line, hex-encoded UTF-8 (so
 * that a text may hold any byte, newlines included). For each, one line on stdout:
 *   ok ID ID ...    the ids (cut: "cut ID ...")
 *   err STATUS      vit_tokenize refused it (VitStatus name), the message on stderr
 * A vocabulary it cannot load: the message on stderr, exit 1. MAX_IDS: default 77.
 *
 *   tok_dump --find MODEL_PATH
 *
 * prints what vit_tokenizer_find gives for a model file or folder ("none": nothing).
 *
 *   tok_dump --kind VOCAB
 *
 * prints what vit_tokenizer_kind says of it (clip, siglip, gemma); exit 1 when it does not
 * load (the message on stderr). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "vit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: tok_dump VOCAB TEXTS [MAX_IDS]\n", stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--find")) {
        char path[1024];
        puts(vit_tokenizer_find(path, sizeof path, argv[2]) ? path : "none");
        return 0;
    }
    int kind = !strcmp(argv[1], "--kind");
    int max_ids = argc > 3 ? atoi(argv[3]) : VIT_TEXT_CONTEXT;
    VitTokenizer *tok;
    VitError err;
    if (vit_tokenizer_load(&tok, argv[1 + kind], &err)) {
        fprintf(stderr, "tok_dump: %s\n", err.msg);
        return 1;
    }
    if (kind) {
        puts(vit_tokenizer_kind(tok));
        vit_tokenizer_free(tok);
        return 0;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    char *line = NULL, *text = NULL;
    size_t cap = 0;
    int *ids = malloc((size_t)(max_ids > 2 ? max_ids : 2) * sizeof *ids);
    while (getline(&line, &cap, f) > 0) {
        char *nt = realloc(text, cap / 2 + 1);
        if (!nt) return 1;
        text = nt;
        size_t n = 0;
        for (const char *p = line; hexval(p[0]) >= 0 && hexval(p[1]) >= 0; p += 2)
            text[n++] = (char)(hexval(p[0]) * 16 + hexval(p[1]));
        text[n] = 0;
        int k = 0, cut = 0;
        VitStatus rc = vit_tokenize(ids, &k, &cut, tok, text, max_ids, &err);
        if (rc) {
            printf("err %s\n", vit_status_name(rc));
            fprintf(stderr, "%s\n", err.msg);
            continue;
        }
        fputs(cut ? "cut" : "ok", stdout);
        for (int i = 0; i < k; i++) printf(" %d", ids[i]);
        putchar('\n');
    }
    fclose(f);
    free(line);
    free(text);
    free(ids);
    vit_tokenizer_free(tok);
    return 0;
}
