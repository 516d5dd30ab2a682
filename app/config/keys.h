/* keys.h - the keys as --help and the help overlay (H) both list them, and the map kinds'
 * lists that --help and --list-kinds print, all read from the map kinds' table. No SDL,
 * no GL. */
#ifndef VITLENS_KEYS_H
#define VITLENS_KEYS_H

#include <stddef.h>
#include <stdio.h>

#define KEYS_MAX 64

typedef struct {
    const char *rows[KEYS_MAX][2]; /* [n] {key, what it does} */
    int n;
    char kinds[256]; /* E's line: the map kinds by name, from MAP_KINDS */
} KeyList;

/* The keys: the fixed ones, and after Up / Down the map kinds' (mapkind.h): E /
 * Shift+E stepping through MAP_KINDS, then one line per kind with a key of its
 * own (its key_name and help). The strings point into k and static storage. */
void keys_list(KeyList *k);

/* The lesson view's keys (its help overlay), as keys_list. */
void keys_lesson_list(KeyList *k);

/* The names of the map kinds of a MapGroup (group -1: every kind), in the table's order,
 * as "a, b and c" into buf; with_keys 1: each kind with a key of its own followed by it,
 * "logit lens (Shift+L)". */
void keys_kind_names(char *buf, size_t n, int group, int with_keys);

/* text's words to f from column col, wrapped before column 80 onto lines indented by
 * `indent` spaces; then a newline. */
void keys_print_wrapped(FILE *f, const char *text, int indent, int col);

/* --list-kinds: one line per map kind, in the table's order, tab-separated:
 *   TAG  KEY  GROUP  NAME  TITLE
 * e.g. "flow, Shift+R, tokens, attention flow, attention flow (Abnar & Zuidema 2020)"; KEY
 * "-" for a kind reached with E only; GROUP attention, class (class-specific) or tokens.
 * For scripts and for the test that compares the docs with the table (docs_map_kinds). */
void keys_list_kinds(FILE *f);

#endif
