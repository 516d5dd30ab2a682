/* clip.c - the text side of a CLIP model: the zero-shot classes and the phrase as the
 * model's head (clip.h). The numbers are the engine's (vit_tokenize, vit_text_embed,
 * vit_set_text_head); here are the names, the templates and their average. */
#define _XOPEN_SOURCE 700 /* clock_gettime, realpath */
#include "view/clip.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* --- the options ------------------------------------------------------------------ */

int clip_spec_any(const ClipSpec *s) { /* (progress is not an option) */
    return s->classes || s->prompts || s->template_ || s->templates || s->text || s->vocab;
}

/* How many times "{}" occurs in t. */
static int count_slots(const char *t) {
    int n = 0;
    for (const char *p = strstr(t, "{}"); p; p = strstr(p + 2, "{}")) n++;
    return n;
}

/* 1 when s holds nothing but ASCII whitespace. */
static int blank(const char *s) {
    while (*s && isspace((unsigned char)*s)) s++;
    return !*s;
}

int clip_spec_check(const ClipSpec *s, char *msg, size_t n) {
    if (s->classes && s->prompts) {
        snprintf(msg, n, "--classes and --prompts both name the classes: give one");
        return -1;
    }
    if (s->template_ && s->templates) {
        snprintf(msg, n, "--template and --templates both give the templates: give one");
        return -1;
    }
    if (s->template_ && count_slots(s->template_) != 1) {
        snprintf(msg, n,
                 "--template \"%.200s\": needs one {} where the class name goes "
                 "(e.g. \"a photo of a {}.\")",
                 s->template_);
        return -1;
    }
    if (s->classes && blank(s->classes)) {
        snprintf(msg, n, "--classes: no class name (e.g. --classes \"cat, dog, espresso cup\")");
        return -1;
    }
    if (s->text && blank(s->text)) {
        snprintf(msg, n,
                 "--text: an empty phrase; give the words to find, e.g. --text "
                 "\"a red umbrella\"");
        return -1;
    }
    if (s->text && strlen(s->text) >= CLIP_TEXT_BYTES) {
        snprintf(msg, n, "--text: %zu bytes; at most %d", strlen(s->text), CLIP_TEXT_BYTES - 1);
        return -1;
    }
    return 0;
}

/* --- names and templates --------------------------------------------------------- */

/* A list of strings, each malloc'd. */
typedef struct {
    char **s;
    int n, cap;
} Strings;

static void strings_free(Strings *l) {
    for (int i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}

/* Append [p, p + len) trimmed of ASCII whitespace. 0, or -1 out of memory. */
static int strings_add(Strings *l, const char *p, size_t len) {
    while (len && isspace((unsigned char)*p)) p++, len--;
    while (len && isspace((unsigned char)p[len - 1])) len--;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **s = realloc(l->s, (size_t)cap * sizeof *s);
        if (!s) return -1;
        l->s = s, l->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, p, len);
    c[len] = '\0';
    l->s[l->n++] = c;
    return 0;
}

/* --classes "cat, dog, espresso cup": the names between the commas. 0, or -1 with msg. */
static int split_classes(Strings *l, const char *arg, char *msg, size_t n) {
    for (const char *p = arg;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p), i = 0;
        while (i < len && isspace((unsigned char)p[i])) i++;
        if (i == len) {
            snprintf(msg, n,
                     "--classes \"%.300s\": an empty name (two commas in a row, or a "
                     "comma at an end)",
                     arg);
            return -1;
        }
        if (strings_add(l, p, len)) {
            snprintf(msg, n, "--classes: out of memory");
            return -1;
        }
        if (!end) return 0;
        p = end + 1;
    }
}

/* A file of one entry per line (--prompts, --templates): blank lines and lines whose first
 * non-blank character is '#' skipped, the rest trimmed. `what` names the option. At most
 * VIT_MAX_CLASSES entries of VIT_MAX_LABEL_LINE bytes. 0, or -1 with msg naming the file
 * (and line). */
static int read_lines(Strings *l, const char *path, const char *what, char *msg, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, n, "%s %.400s: cannot open: %s", what, path, strerror(errno));
        return -1;
    }
    char line[VIT_MAX_LABEL_LINE];
    int line_no = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        line_no++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            snprintf(msg, n, "%s %.400s:%d: a line longer than %d bytes", what, path, line_no,
                     VIT_MAX_LABEL_LINE - 2);
            rc = -1;
            break;
        }
        const char *p = line;
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') continue;
        if (l->n >= VIT_MAX_CLASSES) {
            snprintf(msg, n, "%s %.400s: more than %d lines", what, path, VIT_MAX_CLASSES);
            rc = -1;
            break;
        }
        if (strings_add(l, p, strlen(p))) {
            snprintf(msg, n, "%s %.400s: out of memory", what, path);
            rc = -1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        snprintf(msg, n, "%s %.400s: read error", what, path);
        rc = -1;
    }
    fclose(f);
    if (!rc && l->n == 0) {
        snprintf(msg, n, "%s %.400s: no line to read (blank lines and # comments only)", what,
                 path);
        rc = -1;
    }
    return rc;
}

/* "a photo of a {}." with name in place of {}: malloc'd, or NULL. */
static char *fill_template(const char *tpl, const char *name) {
    const char *slot = strstr(tpl, "{}");
    size_t a = slot ? (size_t)(slot - tpl) : strlen(tpl), b = strlen(name);
    size_t c = slot ? strlen(slot + 2) : 0;
    char *s = malloc(a + b + c + 1);
    if (!s) return NULL;
    memcpy(s, tpl, a);
    memcpy(s + a, name, b);
    if (slot) memcpy(s + a + b, slot + 2, c);
    s[a + b + c] = '\0';
    return s;
}

/* x [E] /= |x| (in double; a zero vector stays zero). */
static void normalise(float *x, int E) {
    double ss = 0;
    for (int i = 0; i < E; i++) ss += (double)x[i] * x[i];
    if (ss <= 0) return;
    double inv = 1.0 / sqrt(ss);
    for (int i = 0; i < E; i++) x[i] = (float)(x[i] * inv);
}

/* Cut a label to VIT_LABEL_BYTES - 1 bytes at a UTF-8 character boundary. */
static void set_label(char *dst, const char *src) {
    size_t len = strlen(src);
    if (len >= VIT_LABEL_BYTES) {
        len = VIT_LABEL_BYTES - 1;
        while (len && ((unsigned char)src[len] & 0xC0) == 0x80) len--; /* a continuation byte */
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* --- embedding the classes -------------------------------------------------------- */

#define EMBED_BATCH 256 /* sequences per vit_text_embed call: memory stays bounded */

/* The classes' embeddings [C, E]: each name in every template, tokenised, embedded in
 * batches, normalised, averaged per class and the mean normalised (zeroshot_classifier),
 * into class_emb [C, E]. Reads ct's text tower and vocabulary only. Progress: spec's
 * callback (may be NULL) and control (NULL: none), which is also checked for a cancel
 * between batches. 0, -1 with msg (naming the class whose text does not tokenise), or -2
 * cancelled. */
static int embed_classes(float *class_emb, const ClipText *ct, const Strings *names,
                         const Strings *tpls, int n_threads, const ClipSpec *spec,
                         VitControl *control, char *msg, size_t n) {
    int C = names->n, K = tpls->n, E = ct->E, total = C * K;
    int ctx = clip_context(ct);
    int *ids = malloc((size_t)EMBED_BATCH * VIT_TEXT_CONTEXT * sizeof *ids);
    const int **rows = malloc(EMBED_BATCH * sizeof *rows);
    int *lens = malloc(EMBED_BATCH * sizeof *lens);
    float *out = malloc((size_t)EMBED_BATCH * E * sizeof *out);
    int rc = -1;
    if (!ids || !rows || !lens || !out) {
        snprintf(msg, n, "out of memory for %d classes' text embeddings", C);
        goto done;
    }
    memset(class_emb, 0, (size_t)C * E * sizeof *class_emb);
    int say = spec && spec->progress && total >= CLIP_CACHE_MIN_TEXTS;
    for (int at = 0; at < total; at += EMBED_BATCH) {
        int b = total - at < EMBED_BATCH ? total - at : EMBED_BATCH;
        if (say) spec->progress(at, total, C, K);
        if (control) vit_control_report(control, at, total);
        if (control && vit_control_cancelled(control)) {
            snprintf(msg, n, "cancelled");
            rc = -2;
            goto done;
        }
        for (int i = 0; i < b; i++) {
            int c = (at + i) / K, k = (at + i) % K, trunc = 0;
            char *text = fill_template(tpls->s[k], names->s[c]);
            VitError err;
            if (!text) {
                snprintf(msg, n, "out of memory");
                goto done;
            }
            int *row = ids + (size_t)i * VIT_TEXT_CONTEXT;
            VitStatus st = vit_tokenize(row, &lens[i], &trunc, ct->tok, text, ctx, &err);
            free(text);
            if (st) {
                snprintf(msg, n, "class %d \"%.100s\": %s", c, names->s[c], err.msg);
                goto done;
            }
            rows[i] = row;
        }
        VitError err;
        if (vit_text_embed(out, &ct->text, rows, lens, b, n_threads, &err)) {
            snprintf(msg, n, "%s", err.msg);
            goto done;
        }
        for (int i = 0; i < b; i++) { /* the template's normalised embedding, summed */
            float *e = out + (size_t)i * E, *acc = class_emb + (size_t)((at + i) / K) * E;
            normalise(e, E);
            for (int j = 0; j < E; j++) acc[j] += e[j];
        }
    }
    if (say) spec->progress(total, total, C, K);
    if (control) vit_control_report(control, total, total);
    for (int c = 0; c < C; c++) { /* mean, then normalised: the scale of 1/K drops out */
        float *acc = class_emb + (size_t)c * E;
        for (int j = 0; j < E; j++) acc[j] /= (float)K;
        normalise(acc, E);
    }
    rc = 0;
done:
    free(ids);
    free(rows);
    free(lens);
    free(out);
    return rc;
}

/* --- the classes' embeddings, cached ---------------------------------------------------- */

/* FNV-1a 64 over n bytes, from h. */
static uint64_t fnv64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What the embeddings depend on: the weights file (its real path, size and time), the
 * vocabulary, E, every class name and template. */
static uint64_t cache_key(const char *model_path, const char *vocab, const Strings *names,
                          const Strings *tpls, int E) {
    uint64_t h = 14695981039346656037ull;
    char real[PATH_MAX];
    struct stat st;
    const char *p = realpath(model_path, real) ? real : model_path;
    h = fnv64(h, p, strlen(p) + 1);
    if (stat(p, &st) == 0) {
        int64_t v[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
        h = fnv64(h, v, sizeof v);
    }
    h = fnv64(h, vocab, strlen(vocab) + 1);
    h = fnv64(h, &E, sizeof E);
    for (int i = 0; i < names->n; i++) h = fnv64(h, names->s[i], strlen(names->s[i]) + 1);
    h = fnv64(h, "|", 1);
    for (int i = 0; i < tpls->n; i++) h = fnv64(h, tpls->s[i], strlen(tpls->s[i]) + 1);
    return h;
}

/* $XDG_CACHE_HOME/vitlens/clip (default ~/.cache/vitlens/clip), made when mk; 0, or -1. */
static int cache_dir(char *out, size_t n, int mk) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[PATH_MAX - 64];
    if (x && x[0] == '/') /* the XDG spec: a relative path is ignored */
        snprintf(base, sizeof base, "%s", x);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache", home);
    else
        return -1;
    if ((size_t)snprintf(out, n, "%s/vitlens/clip", base) >= n) return -1;
    if (!mk) return 0;
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s/vitlens", base);
    mkdir(base, 0700), mkdir(part, 0700), mkdir(out, 0700);
    struct stat st;
    return stat(out, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

#define CACHE_MAGIC "VLCLIPE1" /* 8 bytes, then int32 C, E, the key, [C, E] float32 */

/* The classes' embeddings [C, E] from the cache into *emb (malloc'd): 1 when a file for key
 * holds exactly C x E values, else 0 (absent, short, another shape: computed again). */
static int cache_read(float **emb, const ClipText *ct, uint64_t key, int C) {
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (cache_dir(dir, sizeof dir, 0)) return 0;
    snprintf(path, sizeof path, "%s/%016llx.f32", dir, (unsigned long long)key);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[8];
    int32_t shape[2];
    uint64_t k;
    size_t want = (size_t)C * ct->E;
    float *e = malloc(want * sizeof *e);
    int ok = e && fread(magic, 1, 8, f) == 8 && !memcmp(magic, CACHE_MAGIC, 8) &&
             fread(shape, sizeof *shape, 2, f) == 2 && shape[0] == C && shape[1] == ct->E &&
             fread(&k, sizeof k, 1, f) == 1 && k == key && fread(e, sizeof *e, want, f) == want &&
             fgetc(f) == EOF;
    fclose(f);
    for (size_t i = 0; ok && i < want; i++) ok = isfinite(e[i]);
    if (!ok) {
        free(e);
        return 0;
    }
    *emb = e;
    return 1;
}

/* Keep emb [C, E] for next time (a temporary file renamed: never half a file). A cache
 * that cannot be written is no error. */
static void cache_write(const float *emb, const ClipText *ct, uint64_t key, int C) {
    char dir[PATH_MAX], path[PATH_MAX + 64], tmp[PATH_MAX + 96];
    if (cache_dir(dir, sizeof dir, 1)) return;
    snprintf(path, sizeof path, "%s/%016llx.f32", dir, (unsigned long long)key);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    int32_t shape[2] = {C, ct->E};
    size_t want = (size_t)C * ct->E;
    int ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(shape, sizeof *shape, 2, f) == 2 &&
             fwrite(&key, sizeof key, 1, f) == 1 && fwrite(emb, sizeof *emb, want, f) == want;
    ok = !fclose(f) && ok;
    if (!ok || rename(tmp, path)) remove(tmp);
}

/* --- opening ------------------------------------------------------------------------ */

static void pending_free(ClipPending *p); /* below, with the classes */

void clip_free(ClipText *ct) {
    if (!ct) return;
    vit_text_free(&ct->text);
    vit_tokenizer_free(ct->tok);
    pending_free(ct->pending);
    free(ct->class_emb);
    free(ct->labels);
    free(ct->phrase_emb);
    free(ct);
}

/* The option that asks for the text side, for the messages: the first one given. */
static const char *asking(const ClipSpec *s) {
    return s->text        ? "--text"
           : s->classes   ? "--classes"
           : s->prompts   ? "--prompts"
           : s->template_ ? "--template"
           : s->templates ? "--templates"
                          : "--vocab";
}

static double ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* clip_open's vocabulary: --vocab, else the one beside the model, loaded into ct->tok.
 * When there is none, or it is broken and nothing asks for it, ct->why says why (the image
 * views go on); -1 with msg when --vocab names a broken one, or an option that needs it
 * (strict) finds it broken. */
static int open_vocab(ClipText *ct, const char *model_path, const ClipSpec *spec, int strict,
                      char *msg, size_t n) {
    VitError err;
    /* the vocabulary: --vocab, else beside the model */
    char found[1024];
    const char *vocab = spec->vocab;
    if (!vocab && vit_tokenizer_find(found, sizeof found, model_path)) vocab = found;
    if (!vocab) {
        if (!ct->why[0] && ct->text.sigmoid) /* SigLIP, SigLIP 2: a SentencePiece model */
            snprintf(ct->why, sizeof ct->why,
                     "no tokenizer beside %.300s: SigLIP's spiece.model or SigLIP 2's "
                     "tokenizer.model (Gemma's); give --vocab PATH",
                     model_path);
        else if (!ct->why[0])
            snprintf(ct->why, sizeof ct->why,
                     "no CLIP vocabulary beside %.300s (vocab.json + merges.txt, or "
                     "bpe_simple_vocab_16e6.txt.gz): give --vocab PATH",
                     model_path);
    } else if (vit_tokenizer_load(&ct->tok, vocab, &err)) {
        /* named by the user, or found broken while an option needs it: an error; else the
         * image views go on and / says why */
        if (spec->vocab || (strict && (spec->classes || spec->prompts || spec->text))) {
            snprintf(msg, n, "%s: %s", spec->vocab ? "--vocab" : asking(spec), err.msg);
            return -1;
        }
        if (!ct->why[0]) snprintf(ct->why, sizeof ct->why, "%.500s", err.msg);
        ct->tok = NULL;
    } else {
        snprintf(ct->vocab, sizeof ct->vocab, "%s", vocab);
    }
    return 0;
}

/* Classes read but not embedded yet (ClipSpec.defer): clip_classes_embed's work. */
struct ClipPending {
    Strings names, tpls;
    uint64_t key; /* the cache's (big) */
    int big;      /* CLIP_CACHE_MIN_TEXTS or more texts: kept in the cache */
    int n_threads;
};

static void pending_free(ClipPending *p) {
    if (!p) return;
    strings_free(&p->names);
    strings_free(&p->tpls);
    free(p);
}

/* clip_open's classes: each of names [names->n] in each template of tpls averaged into
 * ct's head (embed_classes), or read from the cache when this model, vocabulary, classes
 * and templates made them before, or (spec->defer, not in the cache) names and tpls moved
 * into ct->pending for clip_classes_embed. 0, or -1 with msg naming the option that gave
 * them. */
static int class_embeddings(ClipText *ct, Strings *names, Strings *tpls, const char *model_path,
                            const ClipSpec *spec, int n_threads, char *msg, size_t n) {
    int rc = 0, C = names->n;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* many texts (--classes imagenet: 7000, imagenet80: 80000) are read from the
     * cache when this model, vocabulary, classes and templates made them before */
    int big = C * tpls->n >= CLIP_CACHE_MIN_TEXTS;
    uint64_t key = big ? cache_key(model_path, ct->vocab, names, tpls, ct->E) : 0;
    float *emb = NULL;
    if (big && cache_read(&emb, ct, key, C)) {
        ct->from_cache = 1;
    } else if (spec->defer) { /* the window's worker embeds them (clip_classes_embed) */
        ClipPending *p = calloc(1, sizeof *p);
        if (!p) {
            snprintf(msg, n, "out of memory");
            return -1;
        }
        p->names = *names, p->tpls = *tpls, p->key = key, p->big = big, p->n_threads = n_threads;
        *names = *tpls = (Strings){0};
        ct->pending = p;
        ct->pending_texts = C * p->tpls.n;
        return 0;
    } else {
        char why[900];
        if (!(emb = malloc((size_t)C * ct->E * sizeof *emb))) {
            snprintf(why, sizeof why, "out of memory for %d classes' text embeddings", C);
            rc = -1;
        } else {
            rc = embed_classes(emb, ct, names, tpls, n_threads, spec, NULL, why, sizeof why);
        }
        if (rc) { /* named by the option that gave the classes */
            snprintf(msg, n, "%s%s%.300s: %s", spec->classes ? "--classes" : "--prompts",
                     spec->classes ? "" : " ", spec->classes ? "" : spec->prompts, why);
            free(emb);
            return -1;
        }
        if (big) cache_write(emb, ct, key, C);
    }
    ct->class_emb = emb;
    ct->ms_classes = ms_since(&t0);
    ct->n_classes = C, ct->n_templates = tpls->n;
    return rc;
}

VitStatus clip_classes_embed(float **emb, double *ms, const ClipText *ct, VitControl *control,
                             VitError *err) {
    const ClipPending *p = ct->pending;
    *emb = NULL;
    if (!p) return vit_set_error(err, VIT_ERR_ARG, "no classes waiting to be embedded");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int C = p->names.n;
    float *e = malloc((size_t)C * ct->E * sizeof *e);
    if (!e) return vit_set_error(err, VIT_ERR_NOMEM, "out of memory for %d classes' texts", C);
    char why[900];
    int rc =
        embed_classes(e, ct, &p->names, &p->tpls, p->n_threads, NULL, control, why, sizeof why);
    if (rc) {
        free(e);
        return vit_set_error(err, rc == -2 ? VIT_ERR_CANCELLED : VIT_ERR_ARG, "the classes: %.200s",
                             why);
    }
    if (p->big) cache_write(e, ct, p->key, C);
    *emb = e;
    *ms = ms_since(&t0);
    return VIT_OK;
}

int clip_classes_install(ClipText *ct, float *emb, double ms, char *msg, size_t n) {
    ClipPending *p = ct->pending;
    int C = p ? p->names.n : 0;
    char(*labels)[VIT_LABEL_BYTES] = p ? calloc((size_t)C + 1, sizeof *labels) : NULL;
    if (!labels) {
        free(emb);
        snprintf(msg, n, p ? "out of memory for the classes' names" : "no classes waiting");
        return -1;
    }
    for (int c = 0; c < C; c++) set_label(labels[c], p->names.s[c]);
    memcpy(labels[C], ct->labels[ct->n_classes], sizeof *labels); /* the phrase's */
    free(ct->labels);
    free(ct->class_emb);
    ct->labels = labels;
    ct->class_emb = emb;
    ct->n_classes = C, ct->n_templates = p->tpls.n;
    ct->ms_classes = ms;
    pending_free(p);
    ct->pending = NULL;
    ct->pending_texts = 0;
    return 0;
}

int clip_open(ClipText **out, const Vit *vit, const char *model_path, const ClipSpec *spec,
              int strict, int n_threads, char *msg, size_t n) {
    *out = NULL;
    int any = clip_spec_any(spec);
    if (vit->cfg.embed_dim <= 0) { /* not CLIP: only an error when a text option asks */
        if (any && strict) {
            snprintf(msg, n,
                     "%s: %.300s is not a CLIP model (no image projection: the head "
                     "explains its own classes; give a CLIP checkpoint)",
                     asking(spec), model_path);
            return -1;
        }
        return 0;
    }
    ClipText *ct = calloc(1, sizeof *ct);
    if (!ct) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    ct->E = vit->cfg.embed_dim;
    VitError err;
    /* the text tower: the same file; an image-only checkpoint still shows every image view */
    if (vit_text_load(&ct->text, model_path, &err)) {
        snprintf(ct->why, sizeof ct->why, "%s", err.msg);
    } else if (ct->text.cfg.embed_dim != ct->E) {
        snprintf(ct->why, sizeof ct->why,
                 "%.300s: the text embedding has %d values and the image embedding %d: not one "
                 "CLIP model",
                 model_path, ct->text.cfg.embed_dim, ct->E);
    }
    if (open_vocab(ct, model_path, spec, strict, msg, n)) {
        clip_free(ct);
        return -1;
    }
    int wants_text = spec->classes || spec->prompts || spec->text;
    if (ct->why[0] && wants_text) {
        snprintf(msg, n, "%s: %s", asking(spec), ct->why);
        if (strict) {
            clip_free(ct);
            return -1;
        }
    }
    /* the classes: --classes, --prompts (or imagenet's files, set by the options) */
    Strings names = {0}, tpls = {0};
    int rc = 0;
    if (!ct->why[0] && (spec->classes || spec->prompts)) {
        rc = spec->classes ? split_classes(&names, spec->classes, msg, n)
                           : read_lines(&names, spec->prompts, "--prompts", msg, n);
        if (!rc && spec->templates) {
            rc = read_lines(&tpls, spec->templates, "--templates", msg, n);
            for (int k = 0; !rc && k < tpls.n; k++)
                if (count_slots(tpls.s[k]) != 1) {
                    snprintf(msg, n,
                             "--templates %.300s: \"%.100s\" needs one {} where the "
                             "class name goes",
                             spec->templates, tpls.s[k]);
                    rc = -1;
                }
        } else if (!rc) {
            rc = strings_add(&tpls, spec->template_ ? spec->template_ : CLIP_TEMPLATE,
                             strlen(spec->template_ ? spec->template_ : CLIP_TEMPLATE));
            if (rc) snprintf(msg, n, "out of memory");
        }
        if (!rc) rc = class_embeddings(ct, &names, &tpls, model_path, spec, n_threads, msg, n);
    }
    ct->labels = rc ? NULL : calloc((size_t)ct->n_classes + 1, sizeof *ct->labels);
    ct->phrase_emb = rc ? NULL : malloc((size_t)ct->E * sizeof *ct->phrase_emb);
    if (!rc && (!ct->labels || !ct->phrase_emb)) {
        snprintf(msg, n, "out of memory");
        rc = -1;
    }
    for (int c = 0; !rc && c < ct->n_classes; c++) set_label(ct->labels[c], names.s[c]);
    strings_free(&names);
    strings_free(&tpls);
    if (rc) {
        clip_free(ct);
        return -1;
    }
    /* --text: its embedding now (the head is clip_apply's) */
    if (spec->text && !ct->why[0]) {
        if (clip_embed(ct->phrase_emb, &ct->phrase_tokens, &ct->phrase_truncated, ct, spec->text,
                       n_threads, &err)) {
            snprintf(msg, n, "--text: %s", err.msg);
            clip_free(ct);
            return -1;
        }
        snprintf(ct->phrase, sizeof ct->phrase, "%s", spec->text);
    }
    *out = ct;
    return 0;
}

/* --- the phrase and the head --------------------------------------------------------- */

VitStatus clip_embed(float *emb, int *n_tokens, int *truncated, const ClipText *ct,
                     const char *phrase, int n_threads, VitError *err) {
    if (ct->why[0] || !ct->tok) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "%.500s", ct->why[0] ? ct->why : "no vocabulary");
        }
        return VIT_ERR_ARG;
    }
    if (!phrase || blank(phrase)) {
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "an empty phrase: type the words to find");
        }
        return VIT_ERR_ARG;
    }
    int ids[VIT_TEXT_CONTEXT], len = 0, trunc = 0;
    VitStatus st = vit_tokenize(ids, &len, &trunc, ct->tok, phrase, clip_context(ct), err);
    if (st) return st;
    const int *rows[1] = {ids};
    if ((st = vit_text_embed(emb, &ct->text, rows, &len, 1, n_threads, err))) return st;
    if (n_tokens) *n_tokens = len;
    if (truncated) *truncated = trunc;
    return VIT_OK;
}

int clip_head_size(const ClipText *ct, int with_phrase) {
    return ct->n_classes + (with_phrase ? 1 : 0);
}

int clip_phrase_class(const ClipText *ct) {
    return ct && ct->phrase[0] ? ct->n_classes : -1;
}

VitStatus clip_apply(ClipText *ct, Vit *vit, const char *phrase, const float *emb, int truncated,
                     int n_tokens, VitError *err) {
    int with = phrase && phrase[0] && emb, C = clip_head_size(ct, with), E = ct->E;
    if (with) { /* kept first: emb may be ct->phrase_emb itself */
        if (emb != ct->phrase_emb) memcpy(ct->phrase_emb, emb, (size_t)E * sizeof *emb);
        if (phrase != ct->phrase) snprintf(ct->phrase, sizeof ct->phrase, "%s", phrase);
        ct->phrase_truncated = truncated, ct->phrase_tokens = n_tokens;
        set_label(ct->labels[ct->n_classes], ct->phrase);
    } else {
        ct->phrase[0] = '\0';
    }
    if (C == 0) { /* no classes and no phrase: the model keeps having no head */
        if (err) {
            err->code = VIT_ERR_ARG;
            snprintf(err->msg, sizeof err->msg, "no class and no phrase to make a head of");
        }
        return VIT_ERR_ARG;
    }
    float *all = malloc((size_t)C * E * sizeof *all);
    const char **labels = malloc((size_t)C * sizeof *labels);
    if (!all || !labels) {
        free(all);
        free(labels);
        if (err) {
            err->code = VIT_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory for the text head");
        }
        return VIT_ERR_NOMEM;
    }
    if (ct->n_classes) memcpy(all, ct->class_emb, (size_t)ct->n_classes * E * sizeof *all);
    if (with) memcpy(all + (size_t)ct->n_classes * E, ct->phrase_emb, (size_t)E * sizeof *all);
    for (int c = 0; c < C; c++) labels[c] = ct->labels[c];
    VitStatus st = vit_set_text_head(vit, all, C, labels, vit->cfg.logit_scale, err);
    /* SigLIP: sigmoid(s cos + logit_bias) per label, not a softmax over them */
    if (!st && clip_sigmoid(ct)) st = vit_set_text_sigmoid(vit, ct->text.logit_bias, err);
    free(all);
    free(labels);
    return st;
}

int clip_context(const ClipText *ct) {
    int c = ct ? ct->text.cfg.context : 0;
    return c > 0 && c < VIT_TEXT_CONTEXT ? c : VIT_TEXT_CONTEXT;
}

int clip_sigmoid(const ClipText *ct) {
    return ct && ct->text.sigmoid;
}

const char *clip_family(const ClipText *ct) {
    return clip_sigmoid(ct) ? "SigLIP" : "CLIP";
}
