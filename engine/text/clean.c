/* clean.c - the text cleaned for CLIP's tokenizer (clean.h; tokenizer.c's top comment
 * says which steps and whose: ftfy.fix_text's deterministic part, html.unescape twice as
 * Python's, whitespace, Python's str.lower), as code points. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "text/clean.h"
#include "text/html_entities.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

/* --- UTF-8 ---------------------------------------------------------------------------- */

int tok_put_utf8(char *out, uint32_t c) {
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return out[0] = (char)(0xE0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 63)),
               out[2] = (char)(0x80 | (c & 63)), 3;
    out[0] = (char)(0xF0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 63));
    out[2] = (char)(0x80 | (c >> 6 & 63)), out[3] = (char)(0x80 | (c & 63));
    return 4;
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

/* text (UTF-8) cleaned as tokenizer.c's top comment says, into a malloc'd UTF-8 string; NULL
 * with err set. */
char *tok_clean(const char *text, VitError *err) {
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
    for (int32_t i = 0; i < a.n; i++) n8 += (size_t)tok_put_utf8(out + n8, a.p[i]);
    out[n8] = 0;
    goto done;
nomem:
    vit_set_error(err, VIT_ERR_NOMEM, "out of memory cleaning the text");
fail:
done:
    free(a.p), free(b.p);
    return out;
}
