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
 * the merged id. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "text/html_entities.h"
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

static int put_utf8(char *out, uint32_t c) {
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return out[0] = (char)(0xE0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 63)),
               out[2] = (char)(0x80 | (c & 63)), 3;
    out[0] = (char)(0xF0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 63));
    out[2] = (char)(0x80 | (c >> 6 & 63)), out[3] = (char)(0x80 | (c & 63));
    return 4;
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
        int n = put_utf8(s, cp[order[i]]);
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
        int k = put_utf8(s, cp[b]);
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

/* --- cleaning ----------------------------------------------------------------------- */

/* The text is cleaned as code points (uint32_t), each step from one buffer into the next;
 * ICU (UTF-16) for NFC, the width forms' NFKC and lower-casing. */

typedef struct {
    uint32_t *p;
    int32_t n, cap;
} Cps;

static int cps_reserve(Cps *b, int32_t extra) {
    if (b->n + extra <= b->cap) return 1;
    int64_t cap = (int64_t)b->n + extra + (b->cap > 16 ? b->cap : 16);
    if (cap > (1 << 26)) return 0;
    uint32_t *p = realloc(b->p, (size_t)cap * sizeof *p);
    if (!p) return 0;
    b->p = p, b->cap = (int32_t)cap;
    return 1;
}

static int cps_put(Cps *b, uint32_t c) {
    if (!cps_reserve(b, 1)) return 0;
    b->p[b->n++] = c;
    return 1;
}

/* text (UTF-8) as code points into b; 0 with err naming the first bad byte. Refused as
 * Python's strict UTF-8 decoder refuses them: overlong forms, surrogates, > U+10FFFF, cut
 * sequences, stray continuation bytes. */
static int decode_utf8(Cps *b, const char *text, size_t len, VitError *err) {
    const uint8_t *s = (const uint8_t *)text;
    if (!cps_reserve(b, (int32_t)len + 1)) {
        vit_set_error(err, VIT_ERR_NOMEM, "out of memory for the text");
        return 0;
    }
    for (size_t i = 0; i < len;) {
        uint32_t c = s[i];
        int k = c < 0x80                 ? 0
                : c >= 0xC2 && c <= 0xDF ? 1
                : c >= 0xE0 && c <= 0xEF ? 2
                : c >= 0xF0 && c <= 0xF4 ? 3
                                         : -1;
        if (k < 0) goto bad;
        c &= k == 0 ? 0x7F : k == 1 ? 0x1F : k == 2 ? 0x0F : 0x07;
        for (int j = 1; j <= k; j++) {
            if (i + (size_t)j >= len || (s[i + j] & 0xC0) != 0x80) goto bad;
            c = c << 6 | (s[i + j] & 0x3Fu);
        }
        if ((k == 2 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
            (k == 3 && (c < 0x10000 || c > 0x10FFFF)))
            goto bad;
        b->p[b->n++] = c;
        i += (size_t)k + 1;
        continue;
    bad:
        vit_set_error(err, VIT_ERR_ARG,
                      "the text is not valid UTF-8: byte 0x%02X at offset %zu (%s)", s[i], i,
                      k < 0 ? (c >= 0x80 && c <= 0xBF ? "a continuation byte with no lead byte"
                                                      : "never in UTF-8")
                            : "a cut, overlong or out-of-range sequence");
        return 0;
    }
    return 1;
}

static int is_alnum_ascii(uint32_t c) {
    return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
}

static int cmp_name(const void *key, const void *e) {
    return strcmp(key, *(const char *const *)e); /* both tables start with the name */
}

/* s[0..n) (code points) as an ASCII name in buf (33 bytes); 0 when it cannot be one. */
static int ascii_name(char *buf, const uint32_t *s, int32_t n) {
    if (n > 32) return 0;
    for (int32_t i = 0; i < n; i++) {
        if (s[i] >= 0x80 || !s[i]) return 0;
        buf[i] = (char)s[i];
    }
    buf[n] = 0;
    return 1;
}

static const HtmlEntity *html5_find(const uint32_t *s, int32_t n) {
    char name[33];
    if (!ascii_name(name, s, n)) return NULL;
    return bsearch(name, html5_entities, sizeof html5_entities / sizeof *html5_entities,
                   sizeof *html5_entities, cmp_name);
}

/* html.unescape's _replace_charref for a number (saturated: any value over U+10FFFF is
 * one): the code point, or -1 for nothing (html._invalid_codepoints). */
static int64_t charref(uint64_t num) {
    for (size_t i = 0; i < sizeof html_charref_from / sizeof *html_charref_from; i++)
        if (num == html_charref_from[i]) return html_charref_to[i];
    if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return 0xFFFD;
    if ((num >= 1 && num <= 8) || num == 0xB || (num >= 0xE && num <= 0x1F) ||
        (num >= 0x7F && num <= 0x9F) || (num >= 0xFDD0 && num <= 0xFDEF) ||
        (num & 0xFFFE) == 0xFFFE)
        return -1;
    return (int64_t)num;
}

/* Python's html.unescape (Lib/html/__init__.py) of in[0..n), appended to out: the
 * pattern &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?), numbers through
 * charref(), names by the HTML standard's table, else their longest known prefix of at
 * least 2 characters ("&notit;" -> "¬it;"), else left as they are. 0: out of memory. */
static int html_unescape(Cps *out, const uint32_t *in, int32_t n) {
    for (int32_t i = 0; i < n;) {
        uint32_t c = in[i];
        if (c != '&' || i + 1 >= n) {
            if (!cps_put(out, c)) return 0;
            i++;
            continue;
        }
        int32_t j = i + 1;
        if (in[j] == '#') {
            int hex = j + 1 < n && (in[j + 1] == 'x' || in[j + 1] == 'X');
            int32_t k = j + 1 + hex, d0 = k;
            uint64_t v = 0;
            for (; k < n; k++) {
                uint32_t d = in[k];
                int x = d >= '0' && d <= '9'                        ? (int)(d - '0')
                        : hex && (d | 32) >= 'a' && (d | 32) <= 'f' ? (int)((d | 32) - 'a' + 10)
                                                                    : -1;
                if (x < 0) break;
                v = v * (hex ? 16u : 10u) + (uint64_t)x;
                if (v > 0x110000) v = 0x110000; /* past U+10FFFF: all the same */
            }
            if (k == d0) { /* "&#" with no digits: not a reference ('#' starts no name) */
                if (!cps_put(out, c)) return 0;
                i++;
                continue;
            }
            if (k < n && in[k] == ';') k++;
            int64_t cp = charref(v);
            if (cp >= 0 && !cps_put(out, (uint32_t)cp)) return 0;
            i = k;
            continue;
        }
        int32_t k = j;
        while (k < n && k - j < 32) {
            uint32_t d = in[k];
            if (d == '\t' || d == '\n' || d == '\f' || d == ' ' || d == '<' || d == '&' ||
                d == '#' || d == ';')
                break;
            k++;
        }
        if (k == j) { /* no name */
            if (!cps_put(out, c)) return 0;
            i++;
            continue;
        }
        if (k < n && in[k] == ';') k++;
        int32_t len = k - j, used = len;
        const HtmlEntity *e = html5_find(in + j, len);
        for (int32_t x = len - 1; !e && x >= 2; x--) e = html5_find(in + j, used = x);
        if (!cps_reserve(out, HTML5_MAX_CPS + len + 1)) return 0;
        if (!e) {
            out->p[out->n++] = '&';
        } else {
            for (int m = 0; m < HTML5_MAX_CPS && e->cp[m]; m++) out->p[out->n++] = e->cp[m];
            j += used;
        }
        while (j < k) out->p[out->n++] = in[j++];
        i = k;
    }
    return 1;
}

/* ftfy's unescape_html (fixes.py): each match of &#?[0-9A-Za-z]{1,24}; that is a known
 * entity with its ';' (html.entities.html5, or ftfy's upper-case form of a lower-case
 * name: "&EACUTE;" -> "É"), or a number html.unescape decodes completely (nothing of the
 * match left, no ';' in what it gives), is replaced. */
static int ftfy_unescape(Cps *out, const uint32_t *in, int32_t n) {
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1, k;
        if (in[i] != '&') goto keep;
        if (j < n && in[j] == '#') j++;
        for (k = j; k < n && k - j <= 24 && is_alnum_ascii(in[k]);) k++;
        if (k == j || k - j > 24 || k >= n || in[k] != ';') goto keep;
        k++; /* the match is in[i..k) */
        char name[33];
        const HtmlEntity *e = html5_find(in + i + 1, k - i - 1);
        if (e) {
            if (!cps_reserve(out, HTML5_MAX_CPS)) return 0;
            for (int m = 0; m < HTML5_MAX_CPS && e->cp[m]; m++) out->p[out->n++] = e->cp[m];
            i = k;
            continue;
        }
        if (ascii_name(name, in + i + 1, k - i - 1)) {
            const HtmlUpperEntity *u = bsearch(
                name, ftfy_upper_entities, sizeof ftfy_upper_entities / sizeof *ftfy_upper_entities,
                sizeof *ftfy_upper_entities, cmp_name);
            if (u) {
                if (!cps_reserve(out, FTFY_UPPER_MAX_CPS)) return 0;
                for (int m = 0; m < FTFY_UPPER_MAX_CPS && u->cp[m]; m++)
                    out->p[out->n++] = u->cp[m];
                i = k;
                continue;
            }
        }
        if (in[i + 1] == '#') {
            int32_t at = out->n;
            if (!html_unescape(out, in + i, k - i)) return 0;
            int semi = 0;
            for (int32_t m = at; m < out->n; m++) semi |= out->p[m] == ';';
            if (!semi) {
                i = k;
                continue;
            }
            out->n = at; /* partly decoded: ftfy keeps the match */
        }
        if (!cps_reserve(out, k - i)) return 0;
        while (i < k) out->p[out->n++] = in[i++];
        continue;
    keep:
        if (!cps_put(out, in[i])) return 0;
        i++;
    }
    return 1;
}

/* fix_c1_controls, fix_latin_ligatures, fix_character_width, uncurl_quotes on one code
 * point, in ftfy's order (each step's output goes through the later ones); appended. */
static int ftfy_point(Cps *out, uint32_t c) {
    if (c >= 0x80 && c <= 0x9F) c = (uint32_t)charref(c); /* as sloppy-windows-1252 decodes */
    static const struct {
        uint32_t c, s[3];
    } lig[] = {/* chardata.py LIGATURES */
               {0x0132, {'I', 'J'}},      {0x0133, {'i', 'j'}},      {0x0149, {0x2BC, 'n'}},
               {0x01F1, {'D', 'Z'}},      {0x01F2, {'D', 'z'}},      {0x01F3, {'d', 'z'}},
               {0x01C4, {'D', 0x17D}},    {0x01C5, {'D', 0x17E}},    {0x01C6, {'d', 0x17E}},
               {0x01C7, {'L', 'J'}},      {0x01C8, {'L', 'j'}},      {0x01C9, {'l', 'j'}},
               {0x01CA, {'N', 'J'}},      {0x01CB, {'N', 'j'}},      {0x01CC, {'n', 'j'}},
               {0xFB00, {'f', 'f'}},      {0xFB01, {'f', 'i'}},      {0xFB02, {'f', 'l'}},
               {0xFB03, {'f', 'f', 'i'}}, {0xFB04, {'f', 'f', 'l'}}, {0xFB05, {0x17F, 't'}},
               {0xFB06, {'s', 't'}}};
    uint32_t s[8] = {c};
    int k = 1;
    for (size_t i = 0; i < sizeof lig / sizeof *lig; i++)
        if (lig[i].c == c) {
            for (k = 0; k < 3 && lig[i].s[k]; k++) s[k] = lig[i].s[k];
            break;
        }
    /* fix_character_width: U+3000 a space; U+FF01-FFEF their NFKC where it differs */
    uint32_t w[8];
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (s[i] == 0x3000) {
            w[m++] = ' ';
        } else if (s[i] >= 0xFF01 && s[i] <= 0xFFEF) {
            UErrorCode ue = U_ZERO_ERROR;
            const UNormalizer2 *nfkc = unorm2_getNFKCInstance(&ue);
            UChar src[1] = {(UChar)s[i]}, dst[8];
            int32_t dn = U_SUCCESS(ue) ? unorm2_normalize(nfkc, src, 1, dst, 8, &ue) : 0;
            if (U_FAILURE(ue) || dn < 1) return 0;
            for (int32_t q = 0; q < dn && m < 6;) {
                UChar32 ch;
                U16_NEXT(dst, q, dn, ch);
                w[m++] = (uint32_t)ch;
            }
        } else {
            w[m++] = s[i];
        }
    }
    for (int i = 0; i < m; i++) { /* uncurl_quotes */
        uint32_t q = w[i];
        if (q == 0x2BC || (q >= 0x2018 && q <= 0x201B)) q = '\'';
        if (q >= 0x201C && q <= 0x201F) q = '"';
        if (!cps_put(out, q)) return 0;
    }
    return 1;
}

static int is_control(uint32_t c) { /* chardata.py CONTROL_CHARS */
    return c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
           (c >= 0x206A && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFC);
}

/* One pass of ftfy's fix_and_explain loop over in[0..n) into out (emptied first). */
static int ftfy_pass(Cps *out, Cps *tmp, const uint32_t *in, int32_t n, int html) {
    const uint32_t *a = in;
    int32_t an = n;
    tmp->n = 0;
    if (html) {
        if (!ftfy_unescape(tmp, in, n)) return 0;
        a = tmp->p, an = tmp->n;
    }
    out->n = 0;
    for (int32_t i = 0; i < an; i++)
        if (!ftfy_point(out, a[i])) return 0;
    /* fix_line_breaks: \r\n, \r, U+2028, U+2029, U+0085 -> \n; then
       remove_terminal_escapes: \033\[(\d|;)*[a-zA-Z] (\d: Unicode decimal digits), then
       remove_control_chars; in place (each only shortens) */
    int32_t o = 0;
    for (int32_t i = 0; i < out->n; i++) {
        uint32_t c = out->p[i];
        if (c == '\r' && i + 1 < out->n && out->p[i + 1] == '\n') continue;
        if (c == '\r' || c == 0x2028 || c == 0x2029 || c == 0x85) c = '\n';
        out->p[o++] = c;
    }
    out->n = o, o = 0;
    for (int32_t i = 0; i < out->n; i++) {
        if (out->p[i] == 0x1B && i + 1 < out->n && out->p[i + 1] == '[') {
            int32_t k = i + 2;
            while (k < out->n &&
                   (out->p[k] == ';' || u_charType((UChar32)out->p[k]) == U_DECIMAL_DIGIT_NUMBER))
                k++;
            if (k < out->n && out->p[k] < 0x80 &&
                ((out->p[k] | 32) >= 'a' && (out->p[k] | 32) <= 'z')) {
                i = k;
                continue;
            }
        }
        out->p[o++] = out->p[i];
    }
    out->n = o, o = 0;
    for (int32_t i = 0; i < out->n; i++)
        if (!is_control(out->p[i])) out->p[o++] = out->p[i];
    out->n = o;
    return 1;
}

/* in[0..n) as UTF-16 (*u, malloc'd); its length, or -1. */
static int32_t to_utf16(UChar **u, const uint32_t *in, int32_t n) {
    *u = malloc((2 * (size_t)n + 1) * sizeof **u);
    if (!*u) return -1;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) U16_APPEND_UNSAFE(*u, m, in[i]);
    return m;
}

static int from_utf16(Cps *out, const UChar *u, int32_t n) {
    out->n = 0;
    if (!cps_reserve(out, n)) return 0;
    for (int32_t i = 0; i < n;) {
        UChar32 ch;
        U16_NEXT(u, i, n, ch);
        out->p[out->n++] = (uint32_t)ch;
    }
    return 1;
}

/* ICU's NFC or root-locale lower-casing (Python's str.lower: full mapping, final sigma)
 * of b, in place. */
static int icu_apply(Cps *b, int lower_case) {
    UChar *u, *v = NULL;
    int32_t n = to_utf16(&u, b->p, b->n), m;
    if (n < 0) return 0;
    UErrorCode ue = U_ZERO_ERROR;
    const UNormalizer2 *nfc = lower_case ? NULL : unorm2_getNFCInstance(&ue);
    for (int32_t cap = 3 * n + 16;; cap *= 2) { /* NFC grows at most 3x (ICU's docs) */
        free(v);
        if (U_FAILURE(ue) || !(v = malloc((size_t)cap * sizeof *v))) break;
        m = lower_case ? u_strToLower(v, cap, u, n, "", &ue)
                       : unorm2_normalize(nfc, u, n, v, cap, &ue);
        if (ue == U_BUFFER_OVERFLOW_ERROR) {
            ue = U_ZERO_ERROR;
            continue;
        }
        int ok = U_SUCCESS(ue) && from_utf16(b, v, m);
        free(u), free(v);
        return ok;
    }
    free(u), free(v);
    return 0;
}

static int ws(uint32_t c) { /* the regex module's \s (Python's str.isspace but U+1C-1F) */
    if (c >= 0x1C && c <= 0x1F) return 0;
    if (u_charType((UChar32)c) == U_SPACE_SEPARATOR) return 1;
    UCharDirection d = u_charDirection((UChar32)c);
    return d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR || d == U_SEGMENT_SEPARATOR;
}

/* ftfy.fix_text's part (the top of the file) on a: each line (up to and with its '\n')
 * fixed until a pass changes nothing; ftfy's HTML step off from the first line with a
 * '<' on. */
static int ftfy_fix(Cps *a) {
    Cps out = {0}, cur = {0}, nxt = {0}, tmp = {0};
    int html = 1, ok = 0;
    for (int32_t s = 0; s < a->n;) {
        int32_t e = s;
        while (e < a->n && a->p[e] != '\n') e++;
        if (e < a->n) e++;
        for (int32_t i = s; i < e; i++) html &= a->p[i] != '<';
        cur.n = 0;
        if (!cps_reserve(&cur, e - s)) goto done;
        memcpy(cur.p, a->p + s, (size_t)(e - s) * sizeof *cur.p);
        cur.n = e - s;
        for (int pass = 0; pass < 64; pass++) {
            if (!ftfy_pass(&nxt, &tmp, cur.p, cur.n, html) || !icu_apply(&nxt, 0)) goto done;
            int same =
                nxt.n == cur.n && (!cur.n || !memcmp(nxt.p, cur.p, (size_t)cur.n * sizeof *cur.p));
            Cps t = cur;
            cur = nxt, nxt = t;
            if (same) break;
        }
        if (!cps_reserve(&out, cur.n)) goto done;
        if (cur.n) memcpy(out.p + out.n, cur.p, (size_t)cur.n * sizeof *cur.p);
        out.n += cur.n;
        s = e;
    }
    ok = 1;
    Cps t = *a;
    *a = out, out = t;
done:
    free(out.p), free(cur.p), free(nxt.p), free(tmp.p);
    return ok;
}

/* text (UTF-8) cleaned as the top of the file says, into a malloc'd UTF-8 string; NULL
 * with err set. */
static char *clean(const char *text, VitError *err) {
    Cps a = {0}, b = {0};
    char *out = NULL;
    size_t len = strlen(text);
    if (!decode_utf8(&a, text, len, err)) goto fail;
    int all_space = 1; /* str.isspace() */
    for (int32_t i = 0; i < a.n; i++) all_space &= ws(a.p[i]) || (a.p[i] >= 0x1C && a.p[i] <= 0x1F);
    if (!a.n) {
        vit_set_error(err, VIT_ERR_ARG, "the text is empty");
        goto fail;
    }
    if (!ftfy_fix(&a)) goto nomem;
    /* basic_clean: html.unescape(html.unescape(text)); whitespace_clean: \s+ -> ' ', strip */
    if (!html_unescape(&b, a.p, a.n)) goto nomem;
    a.n = 0;
    if (!html_unescape(&a, b.p, b.n)) goto nomem;
    int32_t m = 0;
    for (int32_t i = 0; i < a.n; i++) {
        if (!ws(a.p[i]))
            a.p[m++] = a.p[i];
        else if (m && a.p[m - 1] != ' ')
            a.p[m++] = ' ';
    }
    if (m && a.p[m - 1] == ' ') m--;
    a.n = m;
    if (!a.n) { /* U+0085 alone is whitespace to Python, but ftfy makes it an ellipsis */
        vit_set_error(err, VIT_ERR_ARG,
                      all_space ? "the text is only whitespace"
                                : "nothing is left of the text after cleaning (control "
                                  "characters, references to nothing, whitespace)");
        goto fail;
    }
    if (!icu_apply(&a, 1)) goto nomem; /* .lower() */
    size_t n8 = 0;
    for (int32_t i = 0; i < a.n; i++)
        n8 += a.p[i] < 0x80 ? 1 : a.p[i] < 0x800 ? 2 : a.p[i] < 0x10000 ? 3 : 4;
    if (!(out = malloc(n8 + 1))) goto nomem;
    n8 = 0;
    for (int32_t i = 0; i < a.n; i++) n8 += (size_t)put_utf8(out + n8, a.p[i]);
    out[n8] = 0;
    goto done;
nomem:
    vit_set_error(err, VIT_ERR_NOMEM, "out of memory cleaning the text");
fail:
done:
    free(a.p), free(b.p);
    return out;
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
    char *c = clean(text, err);
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
