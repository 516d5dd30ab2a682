/* spiece.c - SigLIP's tokenizer: Hugging Face's SiglipTokenizer and its processor's text
 * call, over a SentencePiece model (spiece.model, T5's c4_en unigram model) read by Debian's
 * libsentencepiece through engine/text/spm.cc.
 *
 * What transformers does for processor(text=t, padding="max_length", truncation=True)
 * (tokenization_siglip.py @ 095a021d704b, tokenization_utils.py's PreTrainedTokenizer), in
 * order, each step here as it is there:
 *   1. SiglipTokenizer.tokenize: t = "▁" + t.replace("▁", " ")        (U+2581)
 *   2. do_lower_case: re.sub("(</s>|<unk>)|(.+?)", lower): every character lower-cased
 *      ALONE (Python's str.lower of one character: full mapping, "İ" -> "i̇", but no final
 *      sigma, which needs a context: "ΟΔΟΣ" -> "οδοσ"); "\n" is left (`.` does not match
 *      it; its lower case is itself anyway). ICU's root-locale u_strToLower per code point.
 *   3. split on the added tokens' text "</s>" and "<unk>" (tokens_trie.split): each is that
 *      token; their AddedToken(lstrip=True, rstrip=True) strips the whitespace
 *      (str.isspace) at the end of the piece before and at the start of the piece after;
 *      empty pieces dropped.
 *   4. each other piece, _tokenize: canonicalize_text (big_vision's prompt_engineering.py):
 *      the 32 ASCII marks of string.punctuation deleted, every run of \s (str.isspace)
 *      one " ", stripped; then sp_model.encode("<unk>" + piece, out_type=str) with the
 *      model's add_dummy_prefix off, and its first len(sp_model.encode("<unk>")) pieces
 *      dropped (so that the first word is segmented as if a word came before it).
 *   5. tokenize: when the pieces start "▁" followed by a special token, the "▁" dropped.
 *   6. ids: "</s>" and "<unk>" their ids, every other piece sp_model.piece_to_id (an
 *      unknown piece's surface -> the unknown id).
 *   7. truncation=True, max_length=M: more than M - 1 ids -> the first M - 1;
 *      build_inputs_with_special_tokens: "</s>" appended unless the last id is one;
 *      padding="max_length": "</s>" (SigLIP's pad_token) up to M.
 * No BOS; no attention mask (the published pipeline passes none: docs/families-2026.md
 * §2.3).
 *
 * SigLIP 2's tokenizer: Gemma's tokenizer.model (BPE with byte fallback, 256 000 pieces,
 * "<pad>" 0, "<eos>" 1, "<bos>" 2, "<unk>" 3; its normalizer "identity", no dummy prefix, no
 * whitespace removal), as big_vision's SigLIP 2 demo tokenizes (SigLIP2_demo.ipynb:
 * lower(key="text")|tok(length=64, model="gemma", bos="no", eos="sticky"); pp/ops_text.py
 * get_lower and SentencepieceTokenizer.to_int, pp/proj/paligemma/ops.py get_tokenize and
 * get_tolen), in order:
 *   1. lower: tf.strings.lower(text), its encoding "" = ASCII: only A-Z become a-z ("ÉCOLE"
 *      -> "École"; transformers' Siglip2Tokenizer lower-cases all of Unicode instead);
 *   2. sp.EncodeAsIds(text) on the model as it is (no normalizer change; the text of a
 *      control piece, "<eos>" typed, is plain characters to SentencePiece), bytes of
 *      characters without a piece as "<0xNN>" pieces;
 *   3. eos="sticky": sp.eos_id() appended; more than M ids -> the first M - 1 and that
 *      "<eos>" (get_tolen's sticky_end); fewer -> sp.pad_id() ("<pad>", 0) up to M, so the
 *      last position, which the text tower pools, holds "<pad>" for a short text.
 * Which of the two a model file is: spiece_kind, from its pieces. */
#include "internal.h"
#include "load/loader.h"
#include "text/clean.h"
#include "text/spiece.h"
#include "text/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/ustring.h>

#define SPIECE_MAX_FILE (64u << 20) /* bytes of a model file: T5's c4_en is 0.8 MB */

static const char EOS_TEXT[] = "</s>", UNK_TEXT[] = "<unk>";

typedef enum { SPIECE_NONE, SPIECE_SIGLIP, SPIECE_GEMMA } SpieceKind;

struct VitSpiece {
    SpmModel *sp;
    SpieceKind kind;
    int eos, unk, pad; /* SigLIP: "</s>", "<unk>", the padding ("</s>"); Gemma: "<eos>", -,
                          "<pad>" (the trainer spec's eos_id and pad_id) */
    int unk_len;       /* SigLIP: len(sp_model.encode("<unk>")) */
};

/* --- loading ------------------------------------------------------------------------ */

void vit_spiece_free(VitSpiece *s) {
    if (!s) return;
    spm_free(s->sp);
    free(s);
}

/* Which tokenizer a SentencePiece model is, from its pieces (one place for it):
 *   Gemma's (SigLIP 2): the trainer spec's eos_id is the piece "<eos>" and its pad_id
 *     "<pad>", with byte fallback ("<0x00>" a byte piece);
 *   SigLIP's (T5's c4_en): a "</s>" piece (an id other than the unknown's);
 *   else none. Gemma's test comes first: it is the stricter one (c4_en's EOS is "</s>"). */
static SpieceKind spiece_kind(const SpmModel *sp) {
    int eos = spm_eos_id(sp), pad = spm_pad_id(sp);
    if (eos >= 0 && pad >= 0 && !strcmp(spm_id_to_piece(sp, eos), "<eos>") &&
        !strcmp(spm_id_to_piece(sp, pad), "<pad>") && spm_is_byte(sp, spm_piece_id(sp, "<0x00>")))
        return SPIECE_GEMMA;
    if (spm_piece_id(sp, EOS_TEXT) != spm_piece_id(sp, UNK_TEXT)) return SPIECE_SIGLIP;
    return SPIECE_NONE;
}

VitStatus vit_spiece_load(VitSpiece **out, const char *path, VitError *err) {
    *out = NULL;
    char *bytes = NULL, msg[200] = "";
    size_t n = 0;
    if (ld_read_file(path, &bytes, &n, SPIECE_MAX_FILE) != 0)
        return vit_set_error(err, VIT_ERR_IO, "%s: cannot read the SentencePiece model%s", path,
                             n > SPIECE_MAX_FILE ? " (over 64 MiB)" : "");
    VitSpiece *s = calloc(1, sizeof *s);
    VitStatus rc = VIT_OK;
    if (!s) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if (!(s->sp = spm_load(bytes, n, 1, msg, sizeof msg))) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: not a SentencePiece model: %s", path, msg);
        goto done;
    }
    s->kind = spiece_kind(s->sp);
    if (s->kind == SPIECE_GEMMA) {
        /* big_vision loads Gemma's model as it is: again, without the dummy-prefix change */
        spm_free(s->sp);
        if (!(s->sp = spm_load(bytes, n, 0, msg, sizeof msg))) {
            rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: not a SentencePiece model: %s", path, msg);
            goto done;
        }
        s->eos = spm_eos_id(s->sp), s->pad = spm_pad_id(s->sp), s->unk = -1;
        goto done;
    }
    s->eos = spm_piece_id(s->sp, EOS_TEXT), s->unk = spm_piece_id(s->sp, UNK_TEXT);
    s->pad = s->eos; /* SiglipTokenizer(pad_token="</s>") */
    if (s->kind == SPIECE_NONE) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: neither SigLIP's spiece.model (no '</s>' piece) nor Gemma's "
                           "tokenizer.model ('<eos>' and '<pad>' as its EOS and padding, byte "
                           "fallback)",
                           path);
        goto done;
    }
    char *pieces = NULL;
    if (spm_encode(s->sp, UNK_TEXT, sizeof UNK_TEXT - 1, &pieces, &s->unk_len, msg, sizeof msg)) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: encoding '<unk>': %s", path, msg);
        goto done;
    }
    free(pieces);
done:
    free(bytes);
    if (rc) {
        vit_spiece_free(s);
        return rc;
    }
    *out = s;
    return VIT_OK;
}

int vit_spiece_eos(const VitSpiece *s) {
    return s->eos;
}

int vit_spiece_is_gemma(const VitSpiece *s) {
    return s->kind == SPIECE_GEMMA;
}

/* --- text as code points -------------------------------------------------------------- */

typedef struct {
    uint32_t *p;
    size_t n, cap;
} Cp;

static int cp_put(Cp *b, uint32_t c) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        uint32_t *p = realloc(b->p, cap * sizeof *p);
        if (!p) return 0;
        b->p = p, b->cap = cap;
    }
    b->p[b->n++] = c;
    return 1;
}

/* Python's str.isspace (and re's \s on str): Unicode 14's White_Space less U+180E... as
 * CPython's _PyUnicode_IsWhitespace lists them. */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* string.punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ */
static int py_punct(uint32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
}

/* UTF-8 into code points, refused as Python's strict decoder refuses it. */
static int decode(Cp *b, const char *text, VitError *err) {
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; s[i];) {
        uint32_t c = s[i];
        int k = c < 0x80                 ? 0
                : c >= 0xC2 && c <= 0xDF ? 1
                : c >= 0xE0 && c <= 0xEF ? 2
                : c >= 0xF0 && c <= 0xF4 ? 3
                                         : -1;
        int ok = k >= 0;
        if (ok) c &= k == 0 ? 0x7F : k == 1 ? 0x1F : k == 2 ? 0x0F : 0x07;
        for (int j = 1; ok && j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                ok = 0; /* the NUL ends it too */
            else
                c = c << 6 | (s[i + j] & 0x3Fu);
        }
        if (ok && ((k == 2 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
                   (k == 3 && (c < 0x10000 || c > 0x10FFFF))))
            ok = 0;
        if (!ok) {
            vit_set_error(err, VIT_ERR_ARG,
                          "the text is not valid UTF-8: byte 0x%02X at offset %zu", s[i], i);
            return 0;
        }
        if (!cp_put(b, c)) return vit_set_error(err, VIT_ERR_NOMEM, "out of memory"), 0;
        i += (size_t)k + 1;
    }
    return 1;
}

/* Step 2: each code point's own lower case (ICU, root locale: full mapping). */
static int lower_each(Cp *out, const Cp *in) {
    for (size_t i = 0; i < in->n; i++) {
        uint32_t c = in->p[i];
        if (c < 0x80) {
            if (!cp_put(out, c >= 'A' && c <= 'Z' ? c + 32 : c)) return 0;
            continue;
        }
        UChar u[2], v[8];
        int32_t n = 0, m;
        U16_APPEND_UNSAFE(u, n, c);
        UErrorCode ue = U_ZERO_ERROR;
        m = u_strToLower(v, 8, u, n, "", &ue);
        if (U_FAILURE(ue)) return 0;
        for (int32_t j = 0; j < m;) {
            UChar32 d;
            U16_NEXT(v, j, m, d);
            if (!cp_put(out, (uint32_t)d)) return 0;
        }
    }
    return 1;
}

/* Step 4's canonicalize_text of p[0..n) as UTF-8 after "<unk>" into o (room: 5 + 4n + 1). */
static size_t canonical_utf8(char *o, const uint32_t *p, size_t n) {
    size_t w = 0, len = 0;
    memcpy(o, UNK_TEXT, sizeof UNK_TEXT - 1), w = sizeof UNK_TEXT - 1;
    int space = 0; /* a run of whitespace waiting */
    for (size_t i = 0; i < n; i++) {
        uint32_t c = p[i];
        if (py_punct(c)) continue; /* removed first: "a . b" -> "a  b" -> "a b" */
        if (py_space(c)) {
            space = 1;
            continue;
        }
        if (space && len) o[w++] = ' ', len++; /* strip(): none before the first */
        space = 0;
        int k = tok_put_utf8(o + w, c);
        w += (size_t)k, len += (size_t)k;
    }
    o[w] = 0;
    return w;
}

/* --- tokenize ------------------------------------------------------------------------- */

typedef struct {
    size_t a, b; /* [a, b) of the lower-cased text */
    int special; /* its id, or -1: text */
} Seg;

static int match_at(const Cp *t, size_t i, const char *s) {
    size_t n = strlen(s);
    if (i + n > t->n) return 0;
    for (size_t j = 0; j < n; j++)
        if (t->p[i + j] != (uint8_t)s[j]) return 0;
    return 1;
}

/* SigLIP 2 (Gemma's model): the steps at the top of this file, big_vision's. */
static VitStatus gemma_tokenize(int *ids, int *n_ids, int *truncated, const VitSpiece *s,
                                const char *text, int max_ids, VitError *err) {
    Cp check = {0};
    char *low = NULL, msg[200] = "";
    int *tok = NULL, n_tok = 0;
    VitStatus rc = VIT_OK;
    if (!decode(&check, text, err)) { /* Python's strict .decode() of the tf.string */
        rc = err ? err->code : VIT_ERR_ARG;
        goto done;
    }
    size_t len = strlen(text);
    if (!(low = malloc(len + 1))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory tokenising");
        goto done;
    }
    for (size_t i = 0; i <= len; i++) /* step 1: ASCII only */
        low[i] = text[i] >= 'A' && text[i] <= 'Z' ? (char)(text[i] + 32) : text[i];
    if (spm_encode_ids(s->sp, low, len, &tok, &n_tok, msg, sizeof msg)) { /* step 2 */
        rc = vit_set_error(err, VIT_ERR_FORMAT, "SentencePiece: %s", msg);
        goto done;
    }
    /* step 3: [ids..., <eos>], sticky at max_ids, else <pad> up to it */
    int n = n_tok + 1, cut = n > max_ids;
    if (n >= max_ids) {
        for (int i = 0; i < max_ids - 1; i++) ids[i] = tok[i];
        ids[max_ids - 1] = s->eos;
    } else {
        for (int i = 0; i < n_tok; i++) ids[i] = tok[i];
        ids[n_tok] = s->eos;
        for (int i = n; i < max_ids; i++) ids[i] = s->pad;
    }
    *n_ids = max_ids;
    if (truncated) *truncated = cut;
done:
    free(check.p), free(low), free(tok);
    return rc;
}

VitStatus vit_spiece_tokenize(int *ids, int *n_ids, int *truncated, const VitSpiece *s,
                              const char *text, int max_ids, VitError *err) {
    if (s->kind == SPIECE_GEMMA)
        return gemma_tokenize(ids, n_ids, truncated, s, text, max_ids, err);
    Cp in = {0}, low = {0};
    Seg *seg = NULL;
    char *buf = NULL, *pieces = NULL, msg[200] = "";
    int *tok = NULL, n_tok = 0, cap_tok = 0;
    VitStatus rc = VIT_OK;
    /* step 1: "▁" + text, its own "▁" as spaces */
    if (!cp_put(&in, 0x2581)) goto nomem;
    if (!decode(&in, text, err)) {
        rc = err ? err->code : VIT_ERR_ARG;
        goto done;
    }
    for (size_t i = 1; i < in.n; i++)
        if (in.p[i] == 0x2581) in.p[i] = ' ';
    if (!lower_each(&low, &in)) goto nomem; /* step 2 */
    /* step 3: split on "</s>" and "<unk>" */
    size_t n_seg = 0;
    if (!(seg = malloc((low.n + 1) * sizeof *seg))) goto nomem;
    for (size_t i = 0, start = 0; i <= low.n; i++) {
        int sp = i == low.n                    ? -2
                 : match_at(&low, i, EOS_TEXT) ? s->eos
                 : match_at(&low, i, UNK_TEXT) ? s->unk
                                               : -1;
        if (sp == -1) continue;
        if (i > start) seg[n_seg++] = (Seg){start, i, -1};
        if (sp == -2) break;
        size_t len = sp == s->eos ? sizeof EOS_TEXT - 1 : sizeof UNK_TEXT - 1;
        seg[n_seg++] = (Seg){i, i + len, sp};
        start = i + len, i += len - 1;
    }
    for (size_t k = 0; k < n_seg; k++) { /* lstrip=True, rstrip=True */
        if (seg[k].special < 0) continue;
        if (k + 1 < n_seg && seg[k + 1].special < 0)
            while (seg[k + 1].a < seg[k + 1].b && py_space(low.p[seg[k + 1].a])) seg[k + 1].a++;
        if (k > 0 && seg[k - 1].special < 0)
            while (seg[k - 1].b > seg[k - 1].a && py_space(low.p[seg[k - 1].b - 1])) seg[k - 1].b--;
    }
    /* step 4: the pieces' ids (steps 5 and 6 on the way) */
    if (!(buf = malloc(sizeof UNK_TEXT + 4 * low.n + 1))) goto nomem;
    int first_underline = 0; /* the first piece is a lone "▁" (step 5) */
    for (size_t k = 0; k < n_seg; k++) {
        if (seg[k].a == seg[k].b) continue;
        int n_p = 0;
        if (seg[k].special >= 0) {
            n_p = 1;
        } else {
            size_t w = canonical_utf8(buf, low.p + seg[k].a, seg[k].b - seg[k].a);
            free(pieces);
            if (spm_encode(s->sp, buf, w, &pieces, &n_p, msg, sizeof msg)) {
                rc = vit_set_error(err, VIT_ERR_FORMAT, "SentencePiece: %s", msg);
                goto done;
            }
        }
        if (n_tok + n_p > cap_tok) {
            cap_tok = 2 * (n_tok + n_p) + 16;
            int *t = realloc(tok, (size_t)cap_tok * sizeof *tok);
            if (!t) goto nomem;
            tok = t;
        }
        if (seg[k].special >= 0) {
            if (n_tok == 1 && first_underline) n_tok = 0; /* step 5 */
            tok[n_tok++] = seg[k].special;
            continue;
        }
        const char *p = pieces;
        for (int j = 0; j < n_p; j++, p += strlen(p) + 1) {
            if (n_p >= s->unk_len && j < s->unk_len) continue; /* the "<unk>" prefix's */
            if (n_tok == 0) first_underline = !strcmp(p, "\xe2\x96\x81");
            tok[n_tok++] = !strcmp(p, EOS_TEXT)   ? s->eos
                           : !strcmp(p, UNK_TEXT) ? s->unk
                                                  : spm_piece_id(s->sp, p);
        }
    }
    /* step 7: cut, "</s>", padding */
    int cut = n_tok > max_ids - 1;
    if (cut) n_tok = max_ids - 1;
    int n = 0;
    for (; n < n_tok; n++) ids[n] = tok[n];
    if (!(n > 0 && ids[n - 1] == s->eos)) ids[n++] = s->eos;
    while (n < max_ids) ids[n++] = s->pad;
    *n_ids = n;
    if (truncated) *truncated = cut;
    goto done;
nomem:
    rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory tokenising");
done:
    free(in.p), free(low.p), free(seg), free(buf), free(pieces), free(tok);
    return rc;
}
