/* tokenizer.c - CLIP's byte-level BPE tokenizer (vit.h "The CLIP tokenizer"); a
 * SentencePiece model (SigLIP's spiece.model, SigLIP 2's Gemma tokenizer.model) is handed to
 * engine/text/spiece.c.
 *
 * The algorithm is OpenAI's clip/simple_tokenizer.py (Radford et al. 2021), step by step:
 *   1. the text cleaned: a fixed part of ftfy.fix_text (below), html.unescape twice,
 *      stripped, every run of whitespace one space, lower-cased (Python's str.lower: full
 *      Unicode mapping, final sigma included; ICU's root-locale u_strToLower);
 *   2. split by the pattern  <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|
 *      [\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+  (case-insensitive; PCRE2 with UTF and UCP; its
 *      \s as ' ', the only whitespace step 1 leaves: PCRE2's \s also takes U+180E);
 *   3. each piece's UTF-8 bytes mapped to symbols (bytes_to_unicode: 256 symbols, the
 *      piece's last one the "</w>" variant), then merged by BPE: the adjacent pair of
 *      lowest merge rank, every occurrence left to right, until no pair has a rank;
 *   4. [<|startoftext|>] + the symbols' ids + [<|endoftext|>], cut to the context as
 *      clip.tokenize(truncate=True) does: the last id kept <|endoftext|>.
 * A piece that is a special token's text ("<|endoftext|>") is that token, as the
 * original's cache makes it.
 *
 * ftfy.fix_text (CLIP's requirements name ftfy without a version; ftfy 6 read here) is not
 * in Debian; its deterministic steps are done here as its source does them (__init__.py fix_text
 * and fix_and_explain, fixes.py, chardata.py): the text line by line (each with its '\n'), each
 * line fixed again until a pass changes nothing, a pass being unescape_html &#?[0-9A-Za-z]{1,24};
 * when a known entity (the HTML standard's names with ';', and ftfy's upper-case forms: &EACUTE; ->
 * É) or a number html.unescape decodes whole; off from the first line with a '<' on (its "auto");
 *   fix_c1_controls       U+0080-009F as Windows-1252 decodes them (sloppily: 81 8D 8F
 *                         90 9D stay);
 *   fix_latin_ligatures   its 22 ligatures and digraphs spelt out (ﬁ -> fi, ﬅ -> ſt);
 *   fix_character_width   U+FF01-FFEF to their NFKC where it differs, U+3000 a space;
 *   uncurl_quotes         U+02BC, 2018-201B -> ', U+201C-201F -> ";
 *   fix_line_breaks       \r\n, \r, U+2028, 2029, 0085 -> \n;
 *   remove_terminal_escapes  \033[ (digits or ;)* letter removed;
 *   remove_control_chars  U+0000-0008, 000B, 000E-001F, 007F, 206A-206F, FEFF, FFF9-FFFC;
 *   NFC                   (ICU).
 * Not done: fix_encoding (mojibake repair: a guess at a wrong decoding, with its helpers
 * restore_byte_a0, replace_lossy_sequences, decode_inconsistent_utf8) and fix_surrogates
 * (valid UTF-8 has none). Then html.unescape exactly as Python's (all 2231 names, the
 * longest-prefix rule for names without ';', numbers through its table of remapped and
 * invalid code points: html_entities.h, made by tools/gen_html_entities.py), twice.
 * Unicode's tables are ICU 72's (Unicode 15) and PCRE2's; Python 3.11's are Unicode 14:
 * letters new in 15 may split or lower-case apart from Debian's Python.
 *
 * The vocabulary: OpenAI's bpe_simple_vocab_16e6.txt.gz (its lines 2 .. 48895 the merges
 * in rank order; the ids are the 256 byte symbols, their "</w>" forms, one per merge,
 * then the two special tokens: 49408), or Hugging Face's vocab.json + merges.txt (the
 * same ids spelt out). The merges are a hash table from a pair of ids to its rank and
 * the merged id.
 *
 * This file: the vocabulary, the split and BPE (steps 2-4); step 1, the cleaning, is
 * clean.c's. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "text/clean.h"
#include "text/spiece.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#define TOK_MAX_VOCAB     (1 << 20)   /* ids; CLIP's is 49408 */
#define TOK_MAX_FILE      (64u << 20) /* bytes of a vocabulary file, unpacked */
#define TOK_MAX_TOKEN_LEN 1024        /* bytes of one vocabulary entry */

static const char SOT[] = "<|startoftext|>", EOT[] = "<|endoftext|>";

typedef struct {
    uint32_t key; /* a * 65536 + b, 0xffffffff: empty (ids < 65536: checked at load) */
    int rank, merged;
} Merge;

struct VitTokenizer {
    char path[1100];
    int n_vocab;
    char **token; /* [n_vocab] each id's text (byte symbols as UTF-8) */
    int *by_text; /* open-addressing table of ids by text, size text_cap, -1 empty */
    int text_cap;
    Merge *merges; /* open-addressing table, size merge_cap */
    int merge_cap, n_merges;
    int byte_id[256];     /* the symbol of each byte */
    int byte_end_id[256]; /* ... as a piece's last symbol ("</w>") */
    int sot, eot;
    pcre2_code *pattern;
    VitSpiece *spiece; /* SigLIP's SentencePiece tokenizer (spiece.c): the rest unused */
};

/* --- bytes_to_unicode --------------------------------------------------------------- */

/* OpenAI's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68
 * to U+0100 upwards in byte order. order[i]: the byte whose symbol is vocabulary id i. */
static void byte_symbols(uint32_t cp[256], int order[256]) {
    int n = 0, k = 0;
    uint8_t printable[256] = {0};
    for (int b = '!'; b <= '~'; b++) printable[b] = 1;
    for (int b = 0xA1; b <= 0xAC; b++) printable[b] = 1;
    for (int b = 0xAE; b <= 0xFF; b++) printable[b] = 1;
    for (int b = 0; b < 256; b++)
        if (printable[b]) cp[b] = (uint32_t)b, order[k++] = b;
    for (int b = 0; b < 256; b++)
        if (!printable[b]) cp[b] = 256u + (uint32_t)n++, order[k++] = b;
}

/* --- tables ------------------------------------------------------------------------- */

static uint32_t hash_str(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int text_find(const VitTokenizer *t, const char *s, size_t n) {
    for (uint32_t i = hash_str(s, n) & (uint32_t)(t->text_cap - 1);;
         i = (i + 1) & (uint32_t)(t->text_cap - 1)) {
        int id = t->by_text[i];
        if (id < 0) return -1;
        if (strlen(t->token[id]) == n && !memcmp(t->token[id], s, n)) return id;
    }
}

/* Add token text s as id; 0, or -1 when the text is there already. */
static int text_add(VitTokenizer *t, int id) {
    const char *s = t->token[id];
    size_t n = strlen(s);
    uint32_t m = (uint32_t)(t->text_cap - 1);
    for (uint32_t i = hash_str(s, n) & m;; i = (i + 1) & m) {
        int o = t->by_text[i];
        if (o < 0) {
            t->by_text[i] = id;
            return 0;
        }
        if (!strcmp(t->token[o], s)) return -1;
    }
}

static uint32_t hash_pair(uint32_t key) {
    key ^= key >> 16;
    key *= 0x7feb352dU;
    key ^= key >> 15;
    key *= 0x846ca68bU;
    return key ^ (key >> 16);
}

static const Merge *merge_find(const VitTokenizer *t, int a, int b) {
    uint32_t key = (uint32_t)a << 16 | (uint32_t)b, m = (uint32_t)(t->merge_cap - 1);
    for (uint32_t i = hash_pair(key) & m;; i = (i + 1) & m) {
        if (t->merges[i].key == key) return &t->merges[i];
        if (t->merges[i].key == 0xffffffffu) return NULL;
    }
}

static int pow2_at_least(int n) {
    int c = 1;
    while (c < n) c <<= 1;
    return c;
}

void vit_tokenizer_free(VitTokenizer *t) {
    if (!t) return;
    if (t->token)
        for (int i = 0; i < t->n_vocab; i++) free(t->token[i]);
    free(t->token);
    free(t->by_text);
    free(t->merges);
    pcre2_code_free(t->pattern);
    vit_spiece_free(t->spiece);
    free(t);
}

/* --- reading the files -------------------------------------------------------------- */

/* The whole file, NUL-terminated (gzip unpacked when gz); NULL with err set. */
static char *read_all(const char *path, int gz, size_t *len, VitError *err) {
    gzFile f = gz ? gzopen(path, "rb") : NULL;
    FILE *p = gz ? NULL : fopen(path, "rb");
    if (!f && !p) {
        vit_set_error(err, VIT_ERR_IO, "%s: cannot open the vocabulary: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            if (cap >= TOK_MAX_FILE) {
                free(buf);
                buf = NULL;
                vit_set_error(err, VIT_ERR_FORMAT, "%s: over %u MiB: not a CLIP vocabulary", path,
                              TOK_MAX_FILE >> 20);
                goto done;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb, cap *= 2;
        }
        long k;
        if (gz) {
            int r = gzread(f, buf + n, (unsigned)(cap - n));
            if (r < 0) {
                int zerr;
                const char *msg = gzerror(f, &zerr);
                vit_set_error(err, VIT_ERR_FORMAT, "%s: not a readable gzip file (%s)", path,
                              zerr == Z_ERRNO ? strerror(errno) : msg);
                free(buf);
                buf = NULL;
                goto done;
            }
            k = r;
        } else {
            k = (long)fread(buf + n, 1, cap - n, p);
        }
        if (k <= 0) break;
        n += (size_t)k;
    }
    if (!buf) {
        vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory reading the vocabulary", path);
        goto done;
    }
    if (gz && gzdirect(f)) { /* zlib reads a file that is not gzip as it is: refuse it */
        vit_set_error(err, VIT_ERR_FORMAT, "%s: not a gzip file (OpenAI's vocabulary is gzip'd)",
                      path);
        free(buf);
        buf = NULL;
        goto done;
    }
    if (gz) { /* gzread returns 0 at a truncated stream too: ask whether it ended well */
        int zerr;
        gzerror(f, &zerr);
        if (zerr != Z_OK) { /* Z_BUF_ERROR: the stream ended before its end mark */
            vit_set_error(err, VIT_ERR_FORMAT, "%s: the gzip stream is corrupt or cut short", path);
            free(buf);
            buf = NULL;
            goto done;
        }
    }
    buf[n] = 0;
    *len = n;
done:
    if (f) gzclose(f);
    if (p) fclose(p);
    return buf;
}

/* Room for n_vocab ids and their tables. */
static VitStatus alloc_vocab(VitTokenizer *t, int n_vocab, int n_merges, VitError *err) {
    t->n_vocab = n_vocab;
    t->token = calloc((size_t)n_vocab, sizeof *t->token);
    t->text_cap = pow2_at_least(2 * n_vocab);
    t->by_text = malloc((size_t)t->text_cap * sizeof *t->by_text);
    t->merge_cap = pow2_at_least(2 * n_merges + 2);
    t->merges = malloc((size_t)t->merge_cap * sizeof *t->merges);
    if (!t->token || !t->by_text || !t->merges)
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for the vocabulary", t->path);
    memset(t->by_text, 0xff, (size_t)t->text_cap * sizeof *t->by_text);
    for (int i = 0; i < t->merge_cap; i++) t->merges[i].key = 0xffffffffu;
    return VIT_OK;
}

/* The next line of s (NUL-terminated in place, '\r' dropped), or NULL at the end. */
static char *next_line(char **s) {
    if (!*s || !**s) return NULL;
    char *l = *s, *e = strchr(l, '\n');
    if (e)
        *e = 0, *s = e + 1;
    else
        *s = l + strlen(l);
    size_t n = strlen(l);
    if (n && l[n - 1] == '\r') l[n - 1] = 0;
    return l;
}

/* Merge line `line` ("a b") of rank `rank`: the ids of a, b and a+b. When `make` the
 * merged text is the next id (OpenAI's file: the vocabulary is built from the merges),
 * else it must be in the vocabulary already (Hugging Face's). */
static VitStatus add_merge(VitTokenizer *t, char *line, int rank, int lineno, const char *file,
                           int make, int *next_id, VitError *err) {
    char *sp = strchr(line, ' ');
    if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' '))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: line %d: a merge is two symbols separated by one space, got "
                             "'%.60s'",
                             file, lineno, line);
    *sp = 0;
    const char *a = line, *b = sp + 1;
    int ia = text_find(t, a, strlen(a)), ib = text_find(t, b, strlen(b));
    if (ia < 0 || ib < 0)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: line %d: merge '%.40s %.40s' of a symbol that no earlier "
                             "line makes",
                             file, lineno, a, b);
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb > TOK_MAX_TOKEN_LEN)
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: line %d: a merged symbol over %d bytes",
                             file, lineno, TOK_MAX_TOKEN_LEN);
    char cat[2 * TOK_MAX_TOKEN_LEN + 1];
    memcpy(cat, a, la);
    memcpy(cat + la, b, lb);
    cat[la + lb] = 0;
    int im = text_find(t, cat, la + lb);
    if (make) {
        if (im >= 0)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: line %d: merge '%.40s %.40s' makes a symbol an "
                                 "earlier line made",
                                 file, lineno, a, b);
        im = (*next_id)++;
        if (!(t->token[im] = strdup(cat)))
            return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", file);
        text_add(t, im);
    } else if (im < 0) {
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: line %d: merge '%.40s %.40s' makes a symbol the vocabulary "
                             "does not have",
                             file, lineno, a, b);
    }
    uint32_t key = (uint32_t)ia << 16 | (uint32_t)ib, m = (uint32_t)(t->merge_cap - 1);
    uint32_t i = hash_pair(key) & m;
    while (t->merges[i].key != 0xffffffffu && t->merges[i].key != key) i = (i + 1) & m;
    if (t->merges[i].key != key) t->n_merges++;
    t->merges[i] = (Merge){key, rank, im}; /* a pair's last line ranks it, as bpe_ranks' dict */
    return VIT_OK;
}

/* OpenAI's file: "#version" line, then merges; the vocabulary made from them. */
static VitStatus load_openai(VitTokenizer *t, char *text, const char *file, VitError *err) {
    enum { N_MERGES = 49152 - 256 - 2 }; /* simple_tokenizer.py: merges[1:49152-256-2+1] */
    VitStatus rc = alloc_vocab(t, 512 + N_MERGES + 2, N_MERGES, err);
    if (rc) return rc;
    uint32_t cp[256];
    int order[256];
    byte_symbols(cp, order);
    for (int i = 0; i < 256; i++) { /* ids 0..255 the bytes, 256..511 with "</w>" */
        char s[16];
        int n = tok_put_utf8(s, cp[order[i]]);
        s[n] = 0;
        t->token[i] = strdup(s);
        memcpy(s + n, "</w>", 5);
        t->token[256 + i] = strdup(s);
        if (!t->token[i] || !t->token[256 + i])
            return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", file);
        text_add(t, i), text_add(t, 256 + i);
        t->byte_id[order[i]] = i, t->byte_end_id[order[i]] = 256 + i;
    }
    char *s = text, *line = next_line(&s); /* the version line */
    int id = 512, lineno = 1;
    for (int r = 0; r < N_MERGES; r++) {
        line = next_line(&s), lineno++;
        if (!line)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: %d merges, CLIP's vocabulary has %d (file cut short?)", file,
                                 r, (int)N_MERGES);
        if ((rc = add_merge(t, line, r, lineno, file, 1, &id, err))) return rc;
    }
    t->token[id] = strdup(SOT), t->token[id + 1] = strdup(EOT);
    if (!t->token[id] || !t->token[id + 1])
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", file);
    text_add(t, id), text_add(t, id + 1);
    return VIT_OK;
}

/* Hugging Face's vocab.json (text -> id) and merges.txt. */
static VitStatus load_hf(VitTokenizer *t, const char *vocab_path, const char *merges_path,
                         VitError *err) {
    size_t n;
    VitStatus rc = VIT_OK;
    char *js = read_all(vocab_path, 0, &n, err), *mt = NULL;
    if (!js) return err ? err->code : VIT_ERR_IO;
    cJSON *root = cJSON_Parse(js);
    free(js);
    if (!cJSON_IsObject(root)) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: not a JSON object of token -> id",
                           vit_basename(vocab_path));
        goto done;
    }
    int nv = cJSON_GetArraySize(root);
    if (nv < 258 || nv > TOK_MAX_VOCAB || nv > 65536) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: %d tokens (CLIP's: 49408)",
                           vit_basename(vocab_path), nv);
        goto done;
    }
    if (!(mt = read_all(merges_path, 0, &n, err))) {
        rc = err ? err->code : VIT_ERR_IO;
        goto done;
    }
    int n_lines = 0;
    for (const char *p = mt; *p; p++) n_lines += *p == '\n';
    if ((rc = alloc_vocab(t, nv, n_lines + 1, err))) goto done;
    for (const cJSON *e = root->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        int id = (int)v;
        if (v != id || id < 0 || id >= nv || t->token[id] || !e->string[0] ||
            strlen(e->string) > TOK_MAX_TOKEN_LEN) {
            rc = vit_set_error(err, VIT_ERR_FORMAT,
                               "%s: entry '%.40s': its id must be a new integer in [0, %d), its "
                               "text 1 to %d bytes",
                               vit_basename(vocab_path), e->string, nv, TOK_MAX_TOKEN_LEN);
            goto done;
        }
        if (!(t->token[id] = strdup(e->string))) {
            rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (text_add(t, id)) {
            rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: '%.40s' twice", vit_basename(vocab_path),
                               e->string);
            goto done;
        }
    }
    uint32_t cp[256];
    int order[256];
    byte_symbols(cp, order);
    for (int b = 0; b < 256; b++) {
        char s[16];
        int k = tok_put_utf8(s, cp[b]);
        memcpy(s + k, "</w>", 5);
        t->byte_end_id[b] = text_find(t, s, (size_t)k + 4);
        t->byte_id[b] = text_find(t, s, (size_t)k);
        if (t->byte_id[b] < 0 || t->byte_end_id[b] < 0) {
            rc = vit_set_error(err, VIT_ERR_FORMAT,
                               "%s: byte 0x%02x's symbol is missing: not a byte-level BPE "
                               "vocabulary",
                               vit_basename(vocab_path), b);
            goto done;
        }
    }
    char *s = mt, *line;
    int lineno = 0, rank = 0;
    while ((line = next_line(&s))) {
        lineno++;
        if ((lineno == 1 && !strncmp(line, "#version", 8)) || !line[0]) continue;
        if ((rc = add_merge(t, line, rank++, lineno, vit_basename(merges_path), 0, NULL, err)))
            goto done;
    }
done:
    cJSON_Delete(root);
    free(mt);
    return rc;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* dir/name into out; 1 when it fits. */
static int join(char *out, size_t n, const char *dir, const char *name) {
    int w = snprintf(out, n, "%s/%s", dir, name);
    return w > 0 && (size_t)w < n;
}

VitStatus vit_tokenizer_load(VitTokenizer **out, const char *path, VitError *err) {
    *out = NULL;
    VitTokenizer *t = calloc(1, sizeof *t);
    if (!t) return vit_set_error(err, VIT_ERR_NOMEM, "out of memory for the tokenizer");
    snprintf(t->path, sizeof t->path, "%s", path);
    VitStatus rc;
    char vocab[1100], merges[1100], dir[1100];
    /* a SentencePiece model (SigLIP's, SigLIP 2's): a .model file, or a folder with
     * spiece.model or tokenizer.model and no CLIP vocabulary */
    int spiece = ends_with(path, ".model");
    if (is_dir(path) &&
        !(join(merges, sizeof merges, path, "bpe_simple_vocab_16e6.txt.gz") && is_file(merges)) &&
        !(join(merges, sizeof merges, path, "merges.txt") && is_file(merges)))
        for (int k = 0; k < 2 && !spiece; k++)
            if (join(vocab, sizeof vocab, path, k ? "tokenizer.model" : "spiece.model") &&
                is_file(vocab))
                spiece = 1, snprintf(t->path, sizeof t->path, "%s", vocab);
    if (spiece) {
        rc = vit_spiece_load(&t->spiece, t->path, err);
        if (rc) return vit_tokenizer_free(t), rc;
        t->sot = -1, t->eot = vit_spiece_eos(t->spiece);
        *out = t;
        return VIT_OK;
    }
    /* what the path names: OpenAI's .gz, a vocab.json or merges.txt, or their folder */
    if (is_dir(path)) {
        if (join(vocab, sizeof vocab, path, "bpe_simple_vocab_16e6.txt.gz") && is_file(vocab))
            snprintf(t->path, sizeof t->path, "%s", vocab);
        else if (!join(vocab, sizeof vocab, path, "vocab.json") ||
                 !join(merges, sizeof merges, path, "merges.txt"))
            return vit_tokenizer_free(t),
                   vit_set_error(err, VIT_ERR_ARG, "%s: path too long", path);
    } else if (ends_with(path, ".json") || ends_with(path, ".txt")) {
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[0] = 0;
        else
            snprintf(dir, sizeof dir, ".");
        if (!join(vocab, sizeof vocab, dir, "vocab.json") ||
            !join(merges, sizeof merges, dir, "merges.txt"))
            return vit_tokenizer_free(t),
                   vit_set_error(err, VIT_ERR_ARG, "%s: path too long", path);
        if (ends_with(path, ".json"))
            snprintf(vocab, sizeof vocab, "%s", path);
        else
            snprintf(merges, sizeof merges, "%s", path);
    }
    if (ends_with(t->path, ".gz")) {
        size_t n;
        char *text = read_all(t->path, 1, &n, err);
        if (!text) {
            vit_tokenizer_free(t);
            return err ? err->code : VIT_ERR_IO;
        }
        rc = load_openai(t, text, vit_basename(t->path), err);
        free(text);
    } else if (is_dir(path) || ends_with(path, ".json") || ends_with(path, ".txt")) {
        if (!is_file(vocab) || !is_file(merges)) {
            vit_tokenizer_free(t);
            return vit_set_error(err, VIT_ERR_IO,
                                 "%s: CLIP's vocabulary needs vocab.json and merges.txt side by "
                                 "side (or OpenAI's bpe_simple_vocab_16e6.txt.gz)",
                                 path);
        }
        rc = load_hf(t, vocab, merges, err);
    } else {
        rc = vit_set_error(err, VIT_ERR_ARG,
                           "%s: not a CLIP vocabulary (bpe_simple_vocab_16e6.txt.gz, or "
                           "vocab.json + merges.txt)",
                           path);
    }
    if (!rc) {
        t->sot = text_find(t, SOT, sizeof SOT - 1), t->eot = text_find(t, EOT, sizeof EOT - 1);
        if (t->sot < 0 || t->eot < 0)
            rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: no %s / %s token", path, SOT, EOT);
    }
    if (!rc) {
        /* CLIP's pattern with its \s written as ' ': after whitespace_clean ' ' is the only
           \s left, and PCRE2's \s (\h) also takes U+180E, which the regex module's does not */
        static const char pat[] = "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|"
                                  "[\\p{L}]+|[\\p{N}]|[^ \\p{L}\\p{N}]+";
        int ecode;
        PCRE2_SIZE eoff;
        t->pattern = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS, &ecode, &eoff, NULL);
        if (!t->pattern) rc = vit_set_error(err, VIT_ERR_NOMEM, "the tokenizer's pattern");
    }
    if (rc) {
        vit_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return VIT_OK;
}

int vit_tokenizer_find(char *path, size_t n, const char *model_path) {
    char dir[1100];
    if (!path || !n || !model_path || strlen(model_path) >= sizeof dir) return 0;
    snprintf(dir, sizeof dir, "%s", model_path);
    if (!is_dir(model_path)) { /* a model file: its folder (else the folder itself) */
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[0] = 0;
        else
            snprintf(dir, sizeof dir, ".");
    }
    static const char *const sub[] = {"", "/tokenizer"};
    for (int s = 0; s < 2; s++) {
        char d[1200], a[1300], b[1300];
        snprintf(d, sizeof d, "%s%s", dir, sub[s]);
        snprintf(a, sizeof a, "%s/vocab.json", d);
        snprintf(b, sizeof b, "%s/merges.txt", d);
        if (is_file(a) && is_file(b)) return snprintf(path, n, "%s", a) < (int)n;
        snprintf(a, sizeof a, "%s/bpe_simple_vocab_16e6.txt.gz", d);
        if (is_file(a)) return snprintf(path, n, "%s", a) < (int)n;
        snprintf(a, sizeof a, "%s/spiece.model", d); /* SigLIP's */
        if (is_file(a)) return snprintf(path, n, "%s", a) < (int)n;
        snprintf(a, sizeof a, "%s/tokenizer.model", d); /* SigLIP 2's (Gemma's) */
        if (is_file(a)) return snprintf(path, n, "%s", a) < (int)n;
    }
    return 0;
}

int vit_token_sot(const VitTokenizer *t) {
    return t->sot;
}

int vit_token_eot(const VitTokenizer *t) {
    return t->eot;
}

const char *vit_tokenizer_kind(const VitTokenizer *t) {
    return !t->spiece ? "clip" : vit_spiece_is_gemma(t->spiece) ? "gemma" : "siglip";
}

/* --- BPE ---------------------------------------------------------------------------- */

/* The ids of one piece's bytes after BPE, into sym (n_bytes of room); their count. */
static int bpe(const VitTokenizer *t, const uint8_t *s, int n, int *sym) {
    for (int i = 0; i < n; i++) sym[i] = i == n - 1 ? t->byte_end_id[s[i]] : t->byte_id[s[i]];
    for (;;) {
        int best = -1, ba = 0, bb = 0;
        for (int i = 0; i + 1 < n; i++) {
            const Merge *m = merge_find(t, sym[i], sym[i + 1]);
            if (m && (best < 0 || m->rank < best)) best = m->rank, ba = sym[i], bb = sym[i + 1];
        }
        if (best < 0) return n;
        const Merge *m = merge_find(t, ba, bb);
        int o = 0;
        for (int i = 0; i < n;) { /* every occurrence, left to right */
            if (i + 1 < n && sym[i] == ba && sym[i + 1] == bb)
                sym[o++] = m->merged, i += 2;
            else
                sym[o++] = sym[i++];
        }
        n = o;
    }
}

VitStatus vit_tokenize(int *ids, int *n_ids, int *truncated, const VitTokenizer *t,
                       const char *text, int max_ids, VitError *err) {
    *n_ids = 0;
    if (truncated) *truncated = 0;
    if (max_ids < 2) return vit_set_error(err, VIT_ERR_ARG, "room for %d ids: at least 2", max_ids);
    if (!t || !text || !ids) return vit_set_error(err, VIT_ERR_ARG, "no tokenizer, text or ids");
    size_t len = strlen(text);
    if (len > VIT_TEXT_MAX_BYTES)
        return vit_set_error(err, VIT_ERR_ARG, "a text of %zu bytes: at most %d", len,
                             VIT_TEXT_MAX_BYTES);
    if (t->spiece) return vit_spiece_tokenize(ids, n_ids, truncated, t->spiece, text, max_ids, err);
    char *c = tok_clean(text, err);
    if (!c) return err ? err->code : VIT_ERR_NOMEM;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->pattern, NULL);
    int *sym = malloc((strlen(c) + 1) * sizeof *sym);
    VitStatus rc = VIT_OK;
    if (!md || !sym) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "out of memory tokenising");
        goto done;
    }
    int n = 0, cut = 0;
    ids[n++] = t->sot;
    PCRE2_SIZE at = 0, clen = strlen(c);
    while (at < clen && !cut) {
        int r = pcre2_match(t->pattern, (PCRE2_SPTR)c, clen, at, 0, md, NULL);
        if (r < 0) break; /* no more pieces (only whitespace is left) */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        const uint8_t *p = (const uint8_t *)c + ov[0];
        int pn = (int)(ov[1] - ov[0]);
        at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
        int k;
        if (pn == (int)sizeof SOT - 1 && !memcmp(p, SOT, (size_t)pn))
            sym[0] = t->sot, k = 1;
        else if (pn == (int)sizeof EOT - 1 && !memcmp(p, EOT, (size_t)pn))
            sym[0] = t->eot, k = 1;
        else
            k = bpe(t, p, pn, sym);
        for (int i = 0; i < k; i++) {
            if (n >= max_ids - 1) { /* no room left before <|endoftext|> */
                cut = 1;
                break;
            }
            ids[n++] = sym[i];
        }
    }
    ids[n++] = t->eot;
    *n_ids = n;
    if (truncated) *truncated = cut;
done:
    pcre2_match_data_free(md);
    free(sym);
    free(c);
    return rc;
}
