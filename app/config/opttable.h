/* opttable.h - the command line's options as one table, OPTIONS: a row per option (its
 * names, its argument, its help, the modes it goes with, how its value is parsed and
 * where it is stored), from which options_parse, --help's option list and --list-options
 * are derived, so that a new option is one row (and its entries in docs/vitlens.1 and
 * README's options table, which docs_options checks). No SDL, no GL. */
#ifndef VITLENS_OPTTABLE_H
#define VITLENS_OPTTABLE_H

#include "config/options.h"

#include <stddef.h>
#include <stdio.h>

/* The modes of a run (options_mode): the window, or one of the headless modes. */
enum {
    OPT_WINDOW = 1,      /* no headless mode: the window */
    OPT_TOP = 2,         /* --top K */
    OPT_EXPORT = 4,      /* --export DIR */
    OPT_EVAL = 8,        /* --eval */
    OPT_EVAL_MERGE = 16, /* --eval-merge */
    OPT_LESSON = 32,     /* --lesson-export DIR */
    OPT_AGREEMENT = 64,  /* --agreement */
};

typedef enum {
    OPT_FLAG,   /* no value: the int at off set to 1 */
    OPT_STRING, /* the const char * at off: the value as given (argv outlives Options) */
    OPT_INT,    /* the int at off: a whole decimal integer in [lo, hi] */
    OPT_FLOAT,  /* the float at off: a whole number in [lo, hi] */
    OPT_FUNC,   /* parse(o, row, value): the odd ones (--size, --patch, --colormap, ...) */
    OPT_INFO,   /* parse(o, row, NULL) prints (--help, --version, --list-*): parsing stops */
    OPT_END,    /* "--": what follows is an IMAGE or FOLDER */
} OptKind;

typedef struct OptRow OptRow;
struct OptRow {
    const char *name;  /* "--model" */
    const char *alias; /* "-h", or NULL */
    const char *arg;   /* "PATH|NAME": the value's name; NULL: the option takes none */
    const char *group; /* what it is about: model, display, clip, what-if, compare, top, export,
                          lesson, eval, window, info (--list-options' GROUP) */
    unsigned modes;    /* the OPT_WINDOW... modes it goes with (refused in the others by
                          options_parse, naming the option); 0: every mode */
    OptKind kind;
    size_t off;         /* FLAG, STRING, INT, FLOAT: offsetof(Options, the field) */
    double lo, hi;      /* INT, FLOAT: the range, both ends included */
    const char *expect; /* INT, FLOAT: what the message says was expected */
    /* FUNC: store val in o; INFO: print (val NULL). 0, 1 (INFO: printed), or 2 with the
     * message on stderr naming the option and the value */
    int (*parse)(Options *o, const OptRow *r, const char *val);
    const char *help;           /* --help's text: wrapped at 80 columns; '\n' starts a new line, and
                                   a line that starts with a space is printed as it is */
    void (*help_more)(FILE *f); /* then what a string cannot hold (--export's tags), or NULL */
};

extern const OptRow OPTIONS[];
extern const int OPTION_COUNT; /* <= OPTIONS_MAX (options.h) */

/* The row named arg (its name or its alias, whole), or NULL. */
const OptRow *opt_find(const char *arg);

/* Store an option's value in o as its row says (r->kind != OPT_INFO, OPT_END): 0, or 2 with
 * the message on stderr ("vitlens: --top 0: expected a positive integer"). */
int opt_set(Options *o, const OptRow *r, const char *val);

/* The names of modes (OPT_WINDOW...) as --help says them, "the window, --top or --eval",
 * into buf. */
void opt_mode_names(char *buf, size_t n, unsigned modes);

/* --help's option list: a row per option in the table's order, "  NAME ARG  help" with
 * the help wrapped at 80 columns, indented 18. */
void opt_usage(FILE *f);

/* --list-options: a line per option in the table's order, tab-separated:
 *   NAME  ALIAS  ARG  GROUP  MODES
 * e.g. "--top, -, K, top, top": ALIAS and ARG "-" when there is none; MODES the modes it
 * goes with, comma-separated (window, top, export, eval, eval-merge, lesson-export), or
 * "any". For scripts and for the test that compares the docs with the table. */
void opt_list(FILE *f);

#endif
