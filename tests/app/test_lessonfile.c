/* test_lessonfile.c - lesson scripts (app/view/lessonfile.c): good lines, the values carried
 * from line to line, and every kind of bad input reported with its line while the rest of
 * the lesson is kept; the shipped default lesson (assets/default/lesson.txt) parses clean
 * with every step in the seeds' order; the lists of steps a model offers (the built-in list,
 * a lesson fitted to a rotary model or a MAP head) are the table's rows filtered by their
 * needs, so that a new row needs no other edit. */
#include "view/lessonfile.h"

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static void test_good(void) {
    LessonScript ls;
    int n = lesson_script_parse(&ls,
                                "# a comment\n"
                                "\n"
                                "patches patch=3,4 : Cut into patches\n"
                                "embedding\n"
                                "softmax layer=5 head=2\n"
                                "  keys   :  the keys  \n"
                                "head patch=1,1\n",
                                "t.lesson");
    CHECK(n == 5, "5 steps, got %d (%s)", n, ls.msgs);
    CHECK(ls.n_problems == 0 && !ls.msgs[0], "no problems, got: %s", ls.msgs);
    CHECK(ls.lines[0].step == lesson_step_find("patches") && ls.lines[0].row == 3 &&
              ls.lines[0].col == 4 && ls.lines[0].line == 3 &&
              !strcmp(ls.lines[0].caption, "Cut into patches"),
          "line 3: patches 3,4 'Cut into patches', got step %d %d,%d '%s'", ls.lines[0].step,
          ls.lines[0].row, ls.lines[0].col, ls.lines[0].caption);
    CHECK(ls.lines[1].row == 3 && ls.lines[1].layer == 1 && !ls.lines[1].caption[0],
          "the patch carried to the next line, no caption");
    CHECK(ls.lines[2].layer == 5 && ls.lines[2].head == 2, "layer 5 head 2");
    CHECK(ls.lines[3].layer == 5 && ls.lines[3].head == 2 &&
              !strcmp(ls.lines[3].caption, "the keys"),
          "carried, caption trimmed: '%s'", ls.lines[3].caption);
    CHECK(ls.lines[4].row == 1 && ls.lines[4].layer == 5, "head at patch 1,1");
    lesson_script_free(&ls);
}

static void test_bad(void) {
    LessonScript ls;
    int n = lesson_script_parse(&ls,
                                "patches\n"            /* 1 good */
                                "atention layer=2\n"   /* 2 unknown step */
                                "softmax layer=0\n"    /* 3 not positive */
                                "softmax layer=x\n"    /* 4 not a number */
                                "softmax patch=3\n"    /* 5 no column */
                                "softmax colour=red\n" /* 6 unknown key */
                                ": a caption alone\n"  /* 7 no step */
                                "softmax layer=13\n"   /* 8 parses; out of range below */
                                "keys patch=20,2\n"    /* 9 parses; outside the grid */
                                "query head=4\n"       /* 10 parses; no such head */
                                "head head=1\n",       /* 11 parses; no head in the model */
                                "bad.lesson");
    CHECK(n == 5, "5 lines parse, got %d", n);
    CHECK(ls.n_problems == 6, "6 problems, got %d: %s", ls.n_problems, ls.msgs);
    const char *want[] = {"bad.lesson:2: unknown step 'atention'",
                          "bad.lesson:3: 'layer=0'",
                          "bad.lesson:4: 'layer=x'",
                          "bad.lesson:5: 'patch=3'",
                          "bad.lesson:6: 'colour=red'",
                          "bad.lesson:7: a caption without a step"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK(strstr(ls.msgs, want[i]), "message '%s' missing from:\n%s", want[i], ls.msgs);
    /* the values carry over from line to line; a line dropped for its own value passes on
     * the last good line's instead: 11 gets head 1 (given), layer 1 and patch 1,1 */
    /* a model of 12 layers, 3 heads, a 14 x 14 grid, without head */
    n = lesson_script_check(&ls, 12, 3, 14, 14, 0);
    CHECK(n == 2, "2 steps left (patches, head), got %d", n);
    CHECK(n == 2 && ls.lines[0].line == 1 && ls.lines[1].line == 11, "lines 1 and 11 kept");
    CHECK(n == 2 && ls.lines[1].layer == 1 && ls.lines[1].row == 0,
          "line 11 carries line 1's layer 1 and centre, not line 8's layer 13: %d, %d",
          ls.lines[1].layer, ls.lines[1].row);
    const char *want2[] = {"bad.lesson:8: layer 13 out of range: the model has 12 layers",
                           "bad.lesson:9: patch 20,2 outside the 14 x 14 patch grid",
                           "bad.lesson:10: head 4 out of range: the model has 3 heads",
                           "bad.lesson:11: the model has no classification head"};
    for (size_t i = 0; i < sizeof want2 / sizeof *want2; i++)
        CHECK(strstr(ls.msgs, want2[i]), "message '%s' missing from:\n%s", want2[i], ls.msgs);
    lesson_script_free(&ls);

    /* a shared lesson's text is quoted in the messages: its terminal codes escaped */
    lesson_script_parse(&ls, "\x1b]0;OWNED\x07\x1b[2J layer=2\n", "esc.lesson");
    CHECK(strstr(ls.msgs, "esc.lesson:1: unknown step '\\x1b]0;OWNED\\x07\\x1b[2J'") &&
              !strchr(ls.msgs, '\x1b') && !strchr(ls.msgs, '\x07'),
          "terminal codes escaped, got '%s'", ls.msgs);
    lesson_script_free(&ls);

    CHECK(lesson_script_load(&ls, "/nonexistent/x.lesson") == -1 &&
              strstr(ls.msgs, "/nonexistent/x.lesson"),
          "a missing file: -1 naming it, got '%s'", ls.msgs);
    lesson_script_free(&ls);
}

/* The steps a model with `has` offers, from the table alone: into out [LESSON_STEP_TOTAL]
 * in the table's order; returns how many. */
static int offered(int *out, int has) {
    int n = 0;
    for (int s = 0; s < LESSON_STEP_TOTAL; s++)
        if (!(LESSON_STEP_INFO[s].needs & LESSON_NEEDS_OPTIONAL & ~has)) out[n++] = s;
    return n;
}

/* ls's steps are exactly want [n] in order */
static void same_steps(const LessonScript *ls, const int *want, int n, const char *what) {
    CHECK(ls->n == n, "%s: %d steps, expected %d", what, ls->n, n);
    for (int i = 0; i < ls->n && i < n; i++)
        CHECK(ls->lines[i].step == want[i], "%s: step %d is %s, expected %s", what, i + 1,
              LESSON_STEP_INFO[ls->lines[i].step].name, LESSON_STEP_INFO[want[i]].name);
}

/* The table: every row named, titled, findable, and each optional step's needs one bit that
 * lesson_step_offered reads (a row's own `needs` is its only mention the lists need). */
static void test_table(void) {
    for (int s = 0; s < LESSON_STEP_TOTAL; s++) {
        const LessonStepInfo *r = &LESSON_STEP_INFO[s];
        CHECK(r->name && r->title && lesson_step_find(r->name) == s, "row %d: '%s' not found", s,
              r->name ? r->name : "(none)");
        CHECK(lesson_step_offered(s, ~0) && lesson_step_offered(s, r->needs),
              "row %d (%s): not offered by a model with its needs", s, r->name);
        CHECK(!(r->needs & LESSON_NEEDS_OPTIONAL) ||
                  !lesson_step_offered(s, ~0 & ~(r->needs & LESSON_NEEDS_OPTIONAL)),
              "row %d (%s): offered without its needs", s, r->name);
    }
    CHECK(lesson_step_find("probe") >= 0 && lesson_step_find("rope") >= 0, "rope, probe rows");
    CHECK(!lesson_step_offered(-1, ~0) && !lesson_step_offered(LESSON_STEP_TOTAL, ~0),
          "out of the table: not offered");
}

static void test_default(const char *path) {
    LessonScript ls;
    int want[LESSON_STEP_TOTAL], nw;
    /* the built-in model's lesson: every step of a model with a head (no RoPE, no probe:
     * the built-in model's kind), in the table's order */
    int n = lesson_script_load(&ls, path);
    CHECK(!ls.n_problems, "%s: problems: %s", path, ls.msgs);
    nw = offered(want, LESSON_NEEDS_HEAD);
    same_steps(&ls, want, nw, "the default lesson");
    /* the built-in model: 4 layers, 4 heads, 12 x 12, a head */
    CHECK(lesson_script_check(&ls, 4, 4, 12, 12, LESSON_NEEDS_HEAD) == n && !ls.n_problems,
          "the default lesson fits the built-in model: %s", ls.msgs);
    lesson_script_free(&ls);
    /* on a model of 1 layer, 2 heads and a 4 x 4 grid (a notebook's): fitted, every step
     * kept, nothing reported; without the fit its first line (patch 6,7) is dropped */
    lesson_script_load(&ls, path);
    CHECK(lesson_script_fit(&ls, 1, 2, 4, 4, LESSON_NEEDS_HEAD) == 0 && ls.n == n,
          "fitted to a model of the same kind: no step added (%d)", ls.n);
    int m = lesson_script_check(&ls, 1, 2, 4, 4, LESSON_NEEDS_HEAD);
    CHECK(m == n && !ls.n_problems,
          "the default lesson fitted to a 1-layer 4 x 4 "
          "model: %d steps, problems: %s",
          m, ls.msgs);
    for (int i = 0; i < m; i++)
        CHECK(ls.lines[i].layer == 1 && ls.lines[i].head <= 2 && ls.lines[i].row <= 4 &&
                  ls.lines[i].col <= 4,
              "step %d fitted: layer %d head %d patch %d,%d", i + 1, ls.lines[i].layer,
              ls.lines[i].head, ls.lines[i].row, ls.lines[i].col);
    lesson_script_free(&ls);
    /* on a rotary model (DINOv3: 12 layers, 6 heads, 14 x 14, no head) and on a MAP head
     * (SigLIP: 12 layers, 12 heads, 14 x 14, no head of classes, or both): the steps
     * of that kind are added after the step before them in the table, with its selection,
     * and the lesson is then every step the model offers, in order */
    static const int kinds[] = {LESSON_NEEDS_ROPE, LESSON_NEEDS_MAP,
                                LESSON_NEEDS_MAP | LESSON_NEEDS_HEAD,
                                LESSON_NEEDS_ROPE | LESSON_NEEDS_MAP};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        char what[96];
        snprintf(what, sizeof what, "fitted to a model with needs %d", kinds[k]);
        lesson_script_load(&ls, path);
        CHECK(lesson_script_fit(&ls, 12, 6, 14, 14, kinds[k]) == 0, "%s: fit", what);
        m = lesson_script_check(&ls, 12, 6, 14, 14, kinds[k]);
        CHECK(!ls.n_problems,
              "%s: nothing reported (the head step's picture says there is no head; the file "
              "is not the user's): %s",
              what, ls.msgs);
        /* every step but the head's is in the file or offered: the head step stays */
        nw = offered(want, kinds[k] | LESSON_NEEDS_HEAD);
        same_steps(&ls, want, nw, what);
        for (int i = 1; i < m; i++)
            if (!ls.lines[i].line) /* added: the selection of the line before it */
                CHECK(ls.lines[i].layer == ls.lines[i - 1].layer &&
                          ls.lines[i].head == ls.lines[i - 1].head &&
                          ls.lines[i].row == ls.lines[i - 1].row && !ls.lines[i].caption[0] &&
                          (LESSON_STEP_INFO[ls.lines[i].step].needs & kinds[k]),
                      "%s: the added %s step has the %s step's selection", what,
                      LESSON_STEP_INFO[ls.lines[i].step].name,
                      LESSON_STEP_INFO[ls.lines[i - 1].step].name);
        lesson_script_free(&ls);
    }
    lesson_script_load(&ls, path);
    CHECK(lesson_script_check(&ls, 1, 2, 4, 4, LESSON_NEEDS_HEAD) < n && ls.n_problems,
          "unfitted, the default lesson does not fit a 4 x 4 grid (the control)");
    lesson_script_free(&ls);
    /* the built-in list: every step (-1), then what a model does not offer dropped silently;
     * or the steps of a kind directly */
    for (int has = 0; has < 8; has++) {
        char what[96];
        nw = offered(want, has);
        snprintf(what, sizeof what, "the built-in list for needs %d", has);
        CHECK(lesson_script_default(&ls, has) == nw, "%s", what);
        same_steps(&ls, want, nw, what);
        lesson_script_free(&ls);
        CHECK(lesson_script_default(&ls, -1) == LESSON_STEP_TOTAL, "the built-in list: all");
        lesson_script_check(&ls, 4, 4, 12, 12, has);
        same_steps(&ls, want, nw, what);
        CHECK(!(ls.n_problems && (has & LESSON_NEEDS_HEAD)), "%s: problems %s", what, ls.msgs);
        lesson_script_free(&ls);
    }
    /* a file asking for a step of a kind the model is not: named, left out */
    static const struct {
        const char *text, *msg;
        int has;
    } asks[] = {
        {"keys\nrope\nscores\n", "r.lesson:2: the model has no rotary position embedding",
         LESSON_NEEDS_HEAD},
        {"residual2\nprobe\nhead\n",
         "r.lesson:2: the model has no attention-pooling (MAP) head: the probe step left out",
         LESSON_NEEDS_HEAD | LESSON_NEEDS_ROPE},
    };
    for (size_t k = 0; k < sizeof asks / sizeof *asks; k++) {
        lesson_script_parse(&ls, asks[k].text, "r.lesson");
        CHECK(lesson_script_check(&ls, 4, 4, 12, 12, asks[k].has) == 2 &&
                  strstr(ls.msgs, asks[k].msg),
              "a line of a kind the model is not: reported, left out: %s", ls.msgs);
        lesson_script_free(&ls);
        lesson_script_parse(&ls, asks[k].text, "r.lesson");
        CHECK(lesson_script_check(&ls, 4, 4, 12, 12, ~0) == 3 && !ls.n_problems,
              "and kept on a model of that kind: %s", ls.msgs);
        lesson_script_free(&ls);
    }
}

int main(int argc, char **argv) {
    test_table();
    test_good();
    test_bad();
    if (argc > 1) test_default(argv[1]);
    printf(failures ? "%d failure(s)\n" : "all lesson script checks passed\n", failures);
    return failures != 0;
}
