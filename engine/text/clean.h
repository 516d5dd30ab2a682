/* clean.h - CLIP's text cleaning (clean.c), behind vit_tokenize (tokenizer.c). */
#ifndef VIT_CLEAN_H
#define VIT_CLEAN_H

#include <stdint.h>

#include "vit.h"

/* text (UTF-8) cleaned as tokenizer.c's top comment says (ftfy's fixes, html.unescape
 * twice, whitespace, lower-cased), into a malloc'd UTF-8 string (free); NULL with err set:
 * VIT_ERR_ARG (invalid UTF-8; empty, or nothing left after cleaning), VIT_ERR_NOMEM. */
char *tok_clean(const char *text, VitError *err);
/* The UTF-8 of code point c (< 0x110000) into out [4]; its bytes. */
int tok_put_utf8(char *out, uint32_t c);

#endif /* VIT_CLEAN_H */
