/* spiece.h - SigLIP's and SigLIP 2's tokenizers (spiece.c), behind vit_tokenizer_load /
 * vit_tokenize. */
#ifndef VIT_SPIECE_H
#define VIT_SPIECE_H

#include "vit.h"

typedef struct VitSpiece VitSpiece;

/* Load a SentencePiece ModelProto: SigLIP's spiece.model (a "</s>" piece) with its dummy
 * prefix off, as SiglipTokenizer loads it, or Gemma's tokenizer.model (SigLIP 2: "<eos>" and
 * "<pad>" its EOS and padding, byte fallback) as it is, as big_vision loads it; which one,
 * from the pieces (spiece.c spiece_kind). Errors: VIT_ERR_IO (cannot read; over 64 MiB),
 * VIT_ERR_FORMAT (not a model, or neither kind: the message names the file), VIT_ERR_NOMEM.
 * Free with vit_spiece_free. */
VitStatus vit_spiece_load(VitSpiece **s, const char *path, VitError *err);
void vit_spiece_free(VitSpiece *s); /* NULL-safe */

/* text -> ids [max_ids] exactly: SiglipTokenizer + processor(padding="max_length",
 * truncation=True, max_length=max_ids), or for Gemma's model big_vision's SigLIP 2
 * lower|tok(length=max_ids, bos="no", eos="sticky") (the steps at the top of spiece.c);
 * *truncated = 1 when ids were cut. text: valid UTF-8 (checked), max_ids >= 2 (the caller's
 * checks). Errors: VIT_ERR_ARG (invalid UTF-8), VIT_ERR_FORMAT (the library failed), VIT_ERR_NOMEM.
 */
VitStatus vit_spiece_tokenize(int *ids, int *n_ids, int *truncated, const VitSpiece *s,
                              const char *text, int max_ids, VitError *err);
int vit_spiece_eos(const VitSpiece *s);      /* "</s>": 1 in SigLIP's; "<eos>": 1 in Gemma's */
int vit_spiece_is_gemma(const VitSpiece *s); /* 1: Gemma's tokenizer.model (SigLIP 2) */

#endif /* VIT_SPIECE_H */
