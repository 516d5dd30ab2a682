/* fuzz_tokenize.c - libFuzzer target: arbitrary bytes as a text for CLIP's tokenizer.
 *
 * vit_tokenize cleans the text (UTF-8 checked, ftfy's steps, NFC, HTML entities,
 * whitespace, lower-casing), splits it with PCRE2 and merges each piece by BPE. Whatever
 * the bytes (cut to their first NUL: the API takes a C string), it must refuse with a
 * message or give [SOT, ..., EOT] of at most 77 ids within the vocabulary, never read out
 * of bounds or leak. The vocabulary is CLIP's, read once from $VITLENS_CLIP_VOCAB
 * (bpe_simple_vocab_16e6.txt.gz; the ctest sets it). Seeds: fuzz_seeds' texts. */
#include "fuzzlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_tokenize: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static VitTokenizer *tok;
    VitError err;
    if (!tok) {
        const char *vocab = getenv("VITLENS_CLIP_VOCAB");
        if (!vocab || vit_tokenizer_load(&tok, vocab, &err))
            fail(vocab ? err.msg : "set VITLENS_CLIP_VOCAB to CLIP's vocabulary");
    }
    char *text = malloc(size + 1);
    if (!text) fail("out of memory");
    memcpy(text, data, size);
    text[size] = 0;
    int ids[VIT_TEXT_CONTEXT], n = -1, cut = -1;
    memset(&err, 'x', sizeof err);
    VitStatus rc = vit_tokenize(ids, &n, &cut, tok, text, VIT_TEXT_CONTEXT, &err);
    fuzz_check_error(rc, &err, "vit_tokenize");
    if (!rc) {
        if (n < 2 || n > VIT_TEXT_CONTEXT || ids[0] != vit_token_sot(tok) ||
            ids[n - 1] != vit_token_eot(tok) || (cut != 0 && cut != 1) ||
            (cut && n != VIT_TEXT_CONTEXT))
            fail("ids that are not [SOT, ..., EOT] within the context");
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] > vit_token_eot(tok)) fail("an id outside the vocabulary");
    }
    free(text);
    return 0;
}
