/* tokens.c - what the tokens hold: features, norms, patch similarity, logit
 * lens, high-norm tokens, TokenRank (vit.h). */
#include "internal.h"
