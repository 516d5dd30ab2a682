/* keys.h - the keys as --help and the help overlay (H) both list them, the commands the
 * palette (Ctrl+P) and --list-commands list by name with the key that runs each, and the map
 * kinds' lists that --help and --list-kinds print: one table of keys (keys.c) and the map
 * kinds' (MAP_KINDS), so that a new key or kind is in each of them by construction. No SDL,
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

/* What a model must have for a command (greyed in the palette without it): nothing, a
 * classification head (1 - 5, the class-specific kinds), a CLIP text tower (/), the MAP
 * head's probe (the probe kind). A map kind's is its row's (map_kind_usable decides). */
typedef enum { CMD_ANY = 0, CMD_CLASSIFIER, CMD_CLIP, CMD_MAP_HEAD } CmdNeeds;

/* One row of a key table's commands: its name and the one key that runs it. */
typedef struct {
    const char *name;
    const char *key;
    CmdNeeds needs;
} KeyCmd;

#define KEY_ROW_CMDS 5
/* A row of a key table: the key column and the line --help and the help overlay show,
 * then the commands its keys run (name NULL ends them; none for a click or a drop). */
typedef struct {
    const char *key, *what;
    KeyCmd cmd[KEY_ROW_CMDS];
} KeyRow;

/* A command of the palette: a thing one key does, by name. */
typedef struct {
    const char *name; /* "next layer", "map: rollout" */
    const char *key;  /* the key that runs it as --help writes keys ("Right", "Shift+E", "Page
                         Down"); NULL: none (a map kind E and the kinds' menu reach) */
    char tag[64];     /* the name in [a-z0-9-], unique: the trace's and --list-commands' */
    int kind;         /* the map kind it picks (MAP_KINDS' row), -1: none */
    CmdNeeds needs;
} Command;

#define COMMANDS_MAX 112
typedef struct {
    Command rows[COMMANDS_MAX]; /* [n] in --help's order */
    int n;
    char names[32][64]; /* the map kinds' commands' names ("map: rollout") */
    char keys[16][24];  /* and their keys made from the table's ("Shift+X") */
} CommandList;

/* The commands of the explorer (lesson 0: --help's keys, the map kinds' rows where E's
 * line is, a kind with Shift+key over every photo twice) or of the lesson view (lesson 1),
 * each with the key that runs it; strings point into c and static storage. */
void keys_commands(CommandList *c, int lesson);

/* --list-commands: one line per command, the explorer's then the lesson's, tab-separated:
 *   VIEW  TAG  KEY  NAME  NEEDS
 * VIEW explorer or lesson; KEY "-" for none; NEEDS -, classifier, clip or map-head. */
void keys_list_commands(FILE *f);

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
