/* lessonfile.c - lesson scripts (lessonfile.h). */
#include "view/lessonfile.h"
#include "vit.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const LessonStepInfo LESSON_STEP_INFO[LESSON_STEP_TOTAL] = {
    [LESSON_PATCHES] = {"patches", "Patches", 0, 0},
    [LESSON_EMBEDDING] = {"embedding", "Patch embedding", 0, 0},
    [LESSON_FILTERS] = {"filters", "The embedding's filters", 0, 0},
    [LESSON_TOKENS] = {"tokens", "CLS token + position embedding", 0, 0},
    [LESSON_POSITION] = {"position", "Position embedding similarity", 0, 0},
    [LESSON_LAYERNORM] = {"layernorm", "LayerNorm", 1, 0},
    [LESSON_QUERY] = {"query", "Query", 1, 0},
    [LESSON_KEYS] = {"keys", "Keys", 1, 0},
    [LESSON_ROPE] = {"rope", "RoPE: the query and key rotated by position", 1, LESSON_NEEDS_ROPE},
    [LESSON_SCORES] = {"scores", "Scores q.k / sqrt(d)", 1, 0},
    [LESSON_SOFTMAX] = {"softmax", "Softmax: the attention", 1, 0},
    [LESSON_WEIGHTED] = {"weighted", "Weighted sum of values", 1, 0},
    [LESSON_PROJECTION] = {"projection", "Heads concatenated, projected", 1, 0},
    [LESSON_RESIDUAL1] = {"residual", "Residual add", 1, 0},
    [LESSON_MLP] = {"mlp", "MLP: GELU", 1, 0},
    [LESSON_MLP_OUT] = {"mlp-out", "MLP output", 1, 0},
    [LESSON_RESIDUAL2] = {"residual2", "Second residual add", 1, 0},
    [LESSON_PROBE] = {"probe", "The probe: attention pooling", 0, LESSON_NEEDS_MAP},
    [LESSON_HEAD] = {"head", "The head", 0, LESSON_NEEDS_HEAD},
};

int lesson_step_offered(int step, int has) {
    return step >= 0 && step < LESSON_STEP_TOTAL &&
           !(LESSON_STEP_INFO[step].needs & LESSON_NEEDS_OPTIONAL & ~has);
}

/* What a model lacks, in a message's words. */
static const char *need_words(int missing) {
    return missing & LESSON_NEEDS_ROPE  ? "rotary position embedding"
           : missing & LESSON_NEEDS_MAP ? "attention-pooling (MAP) head"
                                        : "classification head";
}

int lesson_step_find(const char *name) {
    for (int i = 0; i < LESSON_STEP_TOTAL; i++)
        if (LESSON_STEP_INFO[i].name && !strcmp(name, LESSON_STEP_INFO[i].name)) return i;
    return -1;
}

/* Append "NAME:LINE: message\n" to ls->msgs (cut when full). */
static void problem(LessonScript *ls, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(LessonScript *ls, int line, const char *fmt, ...) {
    size_t k = strlen(ls->msgs);
    ls->n_problems++;
    if (k + 2 >= sizeof ls->msgs) return;
    k += (size_t)snprintf(ls->msgs + k, sizeof ls->msgs - k, "%s:%d: ", ls->name, line);
    if (k >= sizeof ls->msgs) return;
    char raw[512]; /* quotes the file: a shared lesson must not send terminal codes */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    k += strlen(vit_escape(ls->msgs + k, sizeof ls->msgs - k, raw));
    if (k + 1 < sizeof ls->msgs) strcat(ls->msgs, "\n");
}

/* A whole positive integer from s (up to 65536), or 0. */
static int positive(const char *s, const char **end) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || errno || v < 1 || v > 65536) return 0;
    *end = e;
    return (int)v;
}

/* One line, already cut at its newline; *cur holds the selection carried over. 1 kept
 * into *out, 0 skipped (blank, comment, or reported). */
static int parse_line(LessonScript *ls, char *s, int line, LessonLine *cur, LessonLine *out) {
    char *colon = strchr(s, ':'), caption[LESSON_CAPTION_BYTES] = "";
    if (colon) {
        *colon = '\0';
        const char *c = colon + 1;
        while (isspace((unsigned char)*c)) c++;
        snprintf(caption, sizeof caption, "%s", c);
        size_t n = strlen(caption);
        while (n && isspace((unsigned char)caption[n - 1])) caption[--n] = '\0';
    }
    char *save = NULL, *tok = strtok_r(s, " \t\r", &save);
    if (!tok || tok[0] == '#') {
        if (colon && !tok)
            problem(ls, line, "a caption without a step (expected STEP ... : caption)");
        return 0;
    }
    int step = lesson_step_find(tok);
    if (step < 0) {
        char known[512];
        size_t k = 0;
        for (int i = 0; i < LESSON_STEP_TOTAL && k < sizeof known; i++)
            k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "",
                                  LESSON_STEP_INFO[i].name);
        problem(ls, line, "unknown step '%s' (the steps: %s)", tok, known);
        return 0;
    }
    LessonLine l = *cur;
    l.given = 0;
    while ((tok = strtok_r(NULL, " \t\r", &save))) {
        const char *end = NULL;
        int ok = 0;
        if (!strncmp(tok, "layer=", 6)) {
            ok = (l.layer = positive(tok + 6, &end)) && !*end;
            l.given |= 1;
        } else if (!strncmp(tok, "head=", 5)) {
            ok = (l.head = positive(tok + 5, &end)) && !*end;
            l.given |= 2;
        } else if (!strncmp(tok, "patch=", 6)) {
            ok = (l.row = positive(tok + 6, &end)) && *end == ',' &&
                 (l.col = positive(end + 1, &end)) && !*end;
            l.given |= 4;
        } else {
            problem(ls, line, "'%s': expected layer=L, head=H or patch=ROW,COL", tok);
            return 0;
        }
        if (!ok) {
            problem(ls, line, "'%s': expected a whole number from 1%s", tok,
                    !strncmp(tok, "patch=", 6) ? " for ROW and COL (patch=7,8)" : "");
            return 0;
        }
    }
    *cur = l;
    l.step = step, l.line = line;
    snprintf(l.caption, sizeof l.caption, "%s", caption);
    *out = l;
    return 1;
}

int lesson_script_parse(LessonScript *ls, const char *text, const char *name) {
    memset(ls, 0, sizeof *ls);
    snprintf(ls->name, sizeof ls->name, "%s", name);
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    ls->lines = malloc(sizeof *ls->lines * LESSON_MAX_LINES);
    if (!buf || !ls->lines) {
        free(buf);
        lesson_script_free(ls);
        return -1;
    }
    memcpy(buf, text, len + 1);
    LessonLine cur = {.layer = 1, .head = 1};
    int line = 0;
    for (char *s = buf, *next; s; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = '\0';
        line++;
        if (ls->n >= LESSON_MAX_LINES) {
            problem(ls, line, "more than %d steps: the rest is left out", LESSON_MAX_LINES);
            break;
        }
        ls->n += parse_line(ls, s, line, &cur, &ls->lines[ls->n]);
    }
    free(buf);
    return ls->n;
}

int lesson_script_load(LessonScript *ls, const char *path) {
    memset(ls, 0, sizeof *ls);
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && n <= (1 << 20) &&
        !fseek(f, 0, SEEK_SET) && (text = malloc((size_t)n + 1)) &&
        fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = '\0';
        fclose(f);
        if (memchr(text, '\0', (size_t)n)) {
            free(text);
            snprintf(ls->msgs, sizeof ls->msgs, "%s: not a text file (a NUL byte)\n", path);
            ls->n_problems = 1;
            return -1;
        }
        int rc = lesson_script_parse(ls, text, path);
        free(text);
        return rc;
    }
    snprintf(ls->msgs, sizeof ls->msgs, "%s: %s\n", path,
             !f              ? strerror(errno)
             : n > (1 << 20) ? "over 1 MB, not a lesson"
                             : "cannot read");
    ls->n_problems = 1;
    if (f) fclose(f);
    free(text);
    return -1;
}

int lesson_script_default(LessonScript *ls, int has) {
    memset(ls, 0, sizeof *ls);
    snprintf(ls->name, sizeof ls->name, "the default lesson");
    if (!(ls->lines = calloc(LESSON_STEP_TOTAL, sizeof *ls->lines))) return -1;
    for (int i = 0; i < LESSON_STEP_TOTAL; i++)
        if (has < 0 || lesson_step_offered(i, has))
            ls->lines[ls->n++] = (LessonLine){.step = i, .layer = 1, .head = 1};
    return ls->n;
}

int lesson_script_check(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w,
                        int has) {
    int k = 0;
    LessonLine good = {.layer = 1, .head = 1}; /* the last line kept: what the others carry */
    for (int i = 0; i < ls->n; i++) {
        LessonLine *l = &ls->lines[i];
        if (!(l->given & 1)) l->layer = good.layer;
        if (!(l->given & 2)) l->head = good.head;
        if (!(l->given & 4)) l->row = good.row, l->col = good.col;
        if (l->layer > n_layers) {
            problem(ls, l->line, "layer %d out of range: the model has %d layers", l->layer,
                    n_layers);
            continue;
        }
        if (l->head > n_heads) {
            problem(ls, l->line, "head %d out of range: the model has %d heads", l->head, n_heads);
            continue;
        }
        if (l->row > grid_h || l->col > grid_w) {
            problem(ls, l->line, "patch %d,%d outside the %d x %d patch grid", l->row, l->col,
                    grid_h, grid_w);
            continue;
        }
        int missing = LESSON_STEP_INFO[l->step].needs & ~has;
        if (!lesson_step_offered(l->step, has)) { /* nothing to show: left out */
            if (l->line && !ls->fitted)
                problem(ls, l->line, "the model has no %s: the %s step left out",
                        need_words(missing & LESSON_NEEDS_OPTIONAL),
                        LESSON_STEP_INFO[l->step].name);
            continue;
        }
        if ((missing & LESSON_NEEDS_HEAD) && !ls->fitted) /* the picture says so */
            problem(ls, l->line, "the model has no %s: the head step shows none",
                    need_words(LESSON_NEEDS_HEAD));
        good = *l;
        ls->lines[k++] = *l;
    }
    return ls->n = k;
}

int lesson_script_fit(LessonScript *ls, int n_layers, int n_heads, int grid_h, int grid_w,
                      int has) {
    ls->fitted = 1;
    for (int i = 0; i < ls->n; i++) {
        LessonLine *l = &ls->lines[i];
        if (l->layer > n_layers) l->layer = n_layers;
        if (l->head > n_heads) l->head = n_heads;
        if (l->row > grid_h || l->col > grid_w) l->row = l->col = 0; /* the centre */
    }
    /* the steps this model offers that the lesson's model did not, in the table's order */
    for (int s = 0; s < LESSON_STEP_TOTAL; s++) {
        if (!(LESSON_STEP_INFO[s].needs & LESSON_NEEDS_OPTIONAL) || !lesson_step_offered(s, has))
            continue;
        int at = -1, have = 0; /* at: the first line of the nearest step before s it has */
        for (int before = s - 1; before >= 0 && at < 0; before--)
            for (int i = 0; i < ls->n && at < 0; i++)
                if (ls->lines[i].step == before) at = i;
        for (int i = 0; i < ls->n; i++) have |= ls->lines[i].step == s;
        if (have || at < 0) continue;
        LessonLine *grown = realloc(ls->lines, (size_t)(ls->n + 1) * sizeof *grown);
        if (!grown) return -1;
        ls->lines = grown;
        memmove(grown + at + 2, grown + at + 1, (size_t)(ls->n - at - 1) * sizeof *grown);
        grown[at + 1] = grown[at]; /* its selection, carried: nothing of its own */
        grown[at + 1].step = s, grown[at + 1].given = 0, grown[at + 1].line = 0;
        grown[at + 1].caption[0] = '\0';
        ls->n++;
    }
    return 0;
}

void lesson_script_free(LessonScript *ls) {
    free(ls->lines);
    ls->lines = NULL;
    ls->n = 0;
}
