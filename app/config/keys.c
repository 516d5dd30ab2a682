/* keys.c - the keys, as --help and the help overlay (H) both list them, and the map kinds
 * as --help and --list-kinds name them: the fixed keys here, every kind's from its row
 * of MAP_KINDS (mapkind.h), so that a new kind needs no line of this file. */
#include "config/keys.h"
#include "view/mapkind.h"

#include <assert.h>
#include <string.h>

/* The keys that do not depend on the map kinds: the view's (before the kinds'
 * lines), then the rest. A row is the key column and the line of --help and the help
 * overlay, then the commands its keys run, by name, each with the one key that runs it
 * (the palette's rows, Ctrl+P: keys_commands). A row a mouse or a file makes (a click, a
 * drop) has none. */
static const KeyRow KEYS_VIEW[] = {
    {"Left / Right",
     "previous / next layer",
     {{"previous layer", "Left", CMD_ANY}, {"next layer", "Right", CMD_ANY}}},
    {"Up / Down",
     "previous / next head, then mean, max, min of the heads",
     {{"previous head", "Up", CMD_ANY},
      {"next head (then mean, max, min of the heads)", "Down", CMD_ANY}}},
};
static const KeyRow KEYS_OTHER[] = {
    {"[ / ]",
     "rollout discard ratio - / + 0.1",
     {{"rollout discard ratio down 0.1", "[", CMD_ANY},
      {"rollout discard ratio up 0.1", "]", CMD_ANY}}},
    {"click, I J K L",
     "query patch: its attention and rollout (Shift+arrows move it too)",
     {{"query patch up", "I", CMD_ANY},
      {"query patch left", "J", CMD_ANY},
      {"query patch down", "K", CMD_ANY},
      {"query patch right", "L", CMD_ANY}}},
    {"C", "back to the CLS token as the query", {{"query: back to the CLS token", "C", CMD_ANY}}},
    {"A",
     "all heads of the layer as thumbnails (click or Enter opens one)",
     {{"all heads of the layer as thumbnails", "A", CMD_ANY}}},
    {"T",
     "the whole table: a column per layer, a row per head",
     {{"the whole table: a column per layer, a row per head", "T", CMD_ANY}}},
    {"1 - 5, click a class",
     "explain that class of the top-5 (a class-specific map)",
     {{"explain the top-1 class", "1", CMD_CLASSIFIER},
      {"explain the top-2 class", "2", CMD_CLASSIFIER},
      {"explain the top-3 class", "3", CMD_CLASSIFIER},
      {"explain the top-4 class", "4", CMD_CLASSIFIER},
      {"explain the top-5 class", "5", CMD_CLASSIFIER}}},
    {"/",
     "CLIP: type a phrase, Enter: the class-specific map finds it (Esc cancels)",
     {{"CLIP: find a phrase", "/", CMD_CLIP}}},
    {"0", "top-5 predictions panel on / off", {{"top-5 predictions panel on / off", "0", CMD_ANY}}},
    {"D",
     "mean attention distance panel (ViT paper, Fig. 7)",
     {{"mean attention distance panel on / off", "D", CMD_ANY}}},
    {"M",
     "mask: the fewest patches holding 60% of the attention (DINO)",
     {{"mask: the fewest patches holding 60% of the attention", "M", CMD_ANY}}},
    {", / .",
     "mask fraction - / + 5% (on a video: Shift+, / Shift+.)",
     /* run as Shift+, / Shift+.: on a video , and . step frames */
     {{"mask fraction down 5%", "Shift+,", CMD_ANY}, {"mask fraction up 5%", "Shift+.", CMD_ANY}}},
    {"Space",
     "a video or camera: pause / play (at a file's end: again from the start)",
     {{"video: pause / play", "Space", CMD_ANY}}},
    {", / . on a video",
     "one frame back / forward, paused (a file)",
     {{"video: one frame back", ",", CMD_ANY}, {"video: one frame forward", ".", CMD_ANY}}},
    {"Shift+C",
     "a video: refit the features PCA colours on the frame shown (held across frames)",
     {{"refit the features PCA colours", "Shift+C", CMD_ANY}}},
    {"V / Shift+V",
     "next / previous colormap",
     {{"next colormap", "V", CMD_ANY}, {"previous colormap", "Shift+V", CMD_ANY}}},
    {"U",
     "colour scale: per map / shared across the layer",
     {{"colour scale: per map / shared across the layer", "U", CMD_ANY}}},
    {"B",
     "upsampling: nearest (patches) / bilinear",
     {{"upsampling: nearest / bilinear", "B", CMD_ANY}}},
    {"G", "patch grid on / off", {{"patch grid on / off", "G", CMD_ANY}}},
    {"+ / -",
     "overlay opacity",
     {{"overlay opacity up", "+", CMD_ANY}, {"overlay opacity down", "-", CMD_ANY}}},
    {"O", "overlay on / off", {{"overlay on / off", "O", CMD_ANY}}},
    {"N / Shift+N, P",
     "next / previous image: the command line's, else the folder's",
     {{"next image", "N", CMD_ANY}, {"previous image", "P", CMD_ANY}}},
    {"S", "save the view as PNG", {{"save the view as PNG", "S", CMD_ANY}}},
    {"Ctrl+R",
     "record the window to a video (WebM, beside S's PNGs); again: stop",
     {{"record the window to a video / stop", "Ctrl+R", CMD_ANY}}},
    {"Shift+P",
     "perturbation test: remove the map's patches, most relevant first (again: least)",
     {{"perturbation test of the map", "Shift+P", CMD_ANY}}},
    {"Delete",
     "what if: ablate the head on screen (again: back)",
     {{"what if: ablate the head on screen", "Delete", CMD_ANY}}},
    {"Ctrl+click, Ctrl+drag", "what if: drop those patches (again: back)", {{0}}},
    {"7",
     "Ctrl+click drops / fills patches (the mean colour)",
     {{"what if: Ctrl+click drops / fills patches", "7", CMD_ANY}}},
    {"8",
     "what if: position embedding as trained / shuffled / none",
     {{"what if: position embedding as trained / shuffled / none", "8", CMD_ANY}}},
    {"9 / Shift+9",
     "what if: the layer's attention temperature x2 / x0.5",
     {{"what if: the layer's attention temperature x2", "9", CMD_ANY},
      {"what if: the layer's attention temperature x0.5", "Shift+9", CMD_ANY}}},
    {"Backspace",
     "what if: every intervention off",
     {{"what if: every intervention off", "Backspace", CMD_ANY}}},
    {"F", "fullscreen (presenter mode)", {{"fullscreen (presenter mode)", "F", CMD_ANY}}},
    {"\\, Shift+drop",
     "compare view: a second model or photo beside (in it: ; panes apart / linked, ' A - B "
     "pane, Esc back)",
     {{"compare view: the last second model or photo beside", "\\", CMD_ANY}}},
    {"Page Down / Page Up",
     "the lesson: the ViT step by step (in it: arrows, I J K L, Esc back)",
     {{"the lesson: the ViT step by step", "Page Down", CMD_ANY}}},
    {"Ctrl+P",
     "the commands by name: type to find one, Enter runs it (Esc closes)",
     {{0}}}, /* the palette itself: not a row of it */
    {"H", "this help on / off", {{"help: every key", "H", CMD_ANY}}},
    {"Tab",
     "the on-screen buttons on / off (a clean screen; remembered)",
     {{"on-screen buttons on / off", "Tab", CMD_ANY}}},
    {"W",
     "the downloaded models (--model NAME): Up / Down, Enter opens one, Esc closes",
     {{"the downloaded models", "W", CMD_ANY}}},
    {"Esc", "close what is open (help, menu, list, text box); else quit", {{0}}},
    {"Q", "quit", {{"quit", "Q", CMD_ANY}}},
    {"drop a file", "open a photo, a video, or a .safetensors model", {{0}}},
};
/* The lesson view's keys (window/lesson.c, app_lesson_key): its own help overlay and the
 * palette's rows there. */
static const KeyRow KEYS_LESSON[] = {
    {"Page Down, Right, Space", "next step", {{"lesson: next step", "Page Down", CMD_ANY}}},
    {"Page Up, Left, Backspace", "previous step", {{"lesson: previous step", "Page Up", CMD_ANY}}},
    {"Home / End",
     "first / last step",
     {{"lesson: first step", "Home", CMD_ANY}, {"lesson: last step", "End", CMD_ANY}}},
    {"Up / Down",
     "previous / next block",
     {{"lesson: previous block", "Up", CMD_ANY}, {"lesson: next block", "Down", CMD_ANY}}},
    {"Shift+Up / Shift+Down",
     "previous / next head",
     {{"lesson: previous head", "Shift+Up", CMD_ANY},
      {"lesson: next head", "Shift+Down", CMD_ANY}}},
    {"I J K L",
     "move the patch the steps follow",
     {{"lesson: patch up", "I", CMD_ANY},
      {"lesson: patch left", "J", CMD_ANY},
      {"lesson: patch down", "K", CMD_ANY},
      {"lesson: patch right", "L", CMD_ANY}}},
    {"G", "patch grid on / off", {{"patch grid on / off", "G", CMD_ANY}}},
    {"S", "save the view as PNG", {{"save the view as PNG", "S", CMD_ANY}}},
    {"Ctrl+R",
     "record the window to a video (again: stop)",
     {{"record the window to a video / stop", "Ctrl+R", CMD_ANY}}},
    {"F", "fullscreen (presenter mode)", {{"fullscreen (presenter mode)", "F", CMD_ANY}}},
    {"Ctrl+P", "the commands by name: type to find one, Enter runs it", {{0}}},
    {"H", "this help on / off", {{"help: every key", "H", CMD_ANY}}},
    {"Esc",
     "close this help; else back to the explorer",
     {{"back to the explorer", "Esc", CMD_ANY}}},
    {"Q", "quit", {{"quit", "Q", CMD_ANY}}},
};
#define N_KEYS_LESSON ((int)(sizeof KEYS_LESSON / sizeof KEYS_LESSON[0]))
#define N_KEYS_VIEW   ((int)(sizeof KEYS_VIEW / sizeof KEYS_VIEW[0]))
#define N_KEYS_OTHER  ((int)(sizeof KEYS_OTHER / sizeof KEYS_OTHER[0]))

void keys_list(KeyList *k) {
    _Static_assert(N_KEYS_VIEW + 1 + MAP_KIND_COUNT + N_KEYS_OTHER <= KEYS_MAX,
                   "KEYS_MAX too small for the keys and the map kinds");
    /* rows point at static strings and at k->kinds: valid while k lives */
    k->n = 0;
    for (int i = 0; i < N_KEYS_VIEW; i++, k->n++)
        k->rows[k->n][0] = KEYS_VIEW[i].key, k->rows[k->n][1] = KEYS_VIEW[i].what;
    /* the kinds without a key of their own by name, the others on their own lines below
     * (every name on one line would not fit the help overlay) */
    int len = snprintf(k->kinds, sizeof k->kinds, "next / previous map kind:"), n = 0;
    for (int m = 0; m < MAP_KIND_COUNT && len < (int)sizeof k->kinds; m++)
        if (!MAP_KINDS[m].key)
            len += snprintf(k->kinds + len, sizeof k->kinds - (size_t)len, "%s %s", n++ ? "," : "",
                            MAP_KINDS[m].name);
    if (len < (int)sizeof k->kinds)
        snprintf(k->kinds + len, sizeof k->kinds - (size_t)len, " and those below");
    k->rows[k->n][0] = "E / Shift+E", k->rows[k->n][1] = k->kinds, k->n++;
    for (int m = 0; m < MAP_KIND_COUNT; m++)
        if (MAP_KINDS[m].key)
            k->rows[k->n][0] = MAP_KINDS[m].key_name, k->rows[k->n][1] = MAP_KINDS[m].help, k->n++;
    for (int i = 0; i < N_KEYS_OTHER; i++, k->n++)
        k->rows[k->n][0] = KEYS_OTHER[i].key, k->rows[k->n][1] = KEYS_OTHER[i].what;
}

void keys_lesson_list(KeyList *k) {
    _Static_assert(N_KEYS_LESSON <= KEYS_MAX, "KEYS_MAX too small for the lesson's keys");
    k->n = 0, k->kinds[0] = '\0';
    for (int i = 0; i < N_KEYS_LESSON; i++, k->n++)
        k->rows[k->n][0] = KEYS_LESSON[i].key, k->rows[k->n][1] = KEYS_LESSON[i].what;
}

/* --- the map kinds' lists --------------------------------------------------- */

void keys_kind_names(char *buf, size_t n, int group, int with_keys) {
    size_t len = 0;
    int k_in = 0, count = 0;
    buf[0] = '\0';
    /* counted first, so that the last two are joined by "and" rather than a comma */
    for (int k = 0; k < MAP_KIND_COUNT; k++) count += group < 0 || (int)MAP_KINDS[k].group == group;
    for (int k = 0; k < MAP_KIND_COUNT && len < n; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (group >= 0 && (int)m->group != group) continue;
        const char *sep = k_in == 0 ? "" : k_in == count - 1 ? " and " : ", ";
        k_in++;
        if (with_keys && m->key)
            len += (size_t)snprintf(buf + len, n - len, "%s%s (%s)", sep, m->name, m->key_name);
        else
            len += (size_t)snprintf(buf + len, n - len, "%s%s", sep, m->name);
    }
}

void keys_print_wrapped(FILE *f, const char *text, int indent, int col) {
    /* words, not characters: a line breaks before the word that would pass column 80;
     * col is where the caller's text already ends on the current line */
    const char *p = text;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (col > indent && col + 1 + (int)word > 80) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        col += fprintf(f, "%.*s", (int)word, p);
        p += word;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

void keys_list_kinds(FILE *f) {
    /* tab-separated, one kind a line: a stable format for scripts and the tests */
    static const char *const groups[] = {"attention", "class", "tokens"};
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        /* NEEDS: what a model must have for the kind to be offered (map_kind_unusable_why) */
        const char *needs = m->needs_probe ? "map-head" : m->uses_target ? "classifier" : "-";
        fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\n", m->tag, m->key ? m->key_name : "-", groups[m->group],
                m->name, m->title, needs);
    }
}

/* --- the commands (the palette, --list-commands) --------------------------------- */

/* The command's name as a tag: lower case letters and digits, every other run of
 * characters one '-' ("map: Grad-CAM" -> "map-grad-cam"). */
static void command_tag(char *tag, size_t n, const char *name) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < n; p++) {
        char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
            tag[k++] = ch;
        else if (k > 0 && tag[k - 1] != '-')
            tag[k++] = '-';
    }
    while (k > 0 && tag[k - 1] == '-') k--;
    tag[k] = '\0';
}

static void command_add(CommandList *c, const char *name, const char *key, int kind,
                        CmdNeeds needs) {
    assert(c->n < COMMANDS_MAX && "COMMANDS_MAX too small for the keys' commands");
    if (c->n >= COMMANDS_MAX) return;
    Command *m = &c->rows[c->n++];
    m->name = name, m->key = key, m->kind = kind, m->needs = needs;
    command_tag(m->tag, sizeof m->tag, name);
}

static void command_rows(CommandList *c, const KeyRow *rows, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < KEY_ROW_CMDS && rows[i].cmd[j].name; j++)
            command_add(c, rows[i].cmd[j].name, rows[i].cmd[j].key, -1, rows[i].cmd[j].needs);
}

void keys_commands(CommandList *c, int lesson) {
    _Static_assert(2 * MAP_KIND_COUNT <= (int)(sizeof c->names / sizeof c->names[0]) &&
                       MAP_KIND_COUNT <= (int)(sizeof c->keys / sizeof c->keys[0]),
                   "CommandList.names, .keys too small for the map kinds");
    c->n = 0;
    if (lesson) {
        command_rows(c, KEYS_LESSON, N_KEYS_LESSON);
        return;
    }
    command_rows(c, KEYS_VIEW, N_KEYS_VIEW);
    /* where --help has E's line: E, Shift+E, then every kind of the table by name with its
     * own key (a kind without one is picked as the kinds' menu picks it) */
    command_add(c, "next map kind", "E", -1, CMD_ANY);
    command_add(c, "previous map kind", "Shift+E", -1, CMD_ANY);
    int k_name = 0, k_key = 0;
    for (int m = 0; m < MAP_KIND_COUNT; m++) {
        const MapKindInfo *k = &MAP_KINDS[m];
        CmdNeeds needs = k->needs_probe ? CMD_MAP_HEAD : k->uses_target ? CMD_CLASSIFIER : CMD_ANY;
        char *name = c->names[k_name++];
        snprintf(name, sizeof c->names[0], "map: %s", k->name);
        command_add(c, name, k->key ? k->key_name : NULL, m, needs);
        if (k->shift_joint) { /* Shift+key: the kind over every photo of the slideshow */
            char *joint = c->names[k_name++];
            snprintf(joint, sizeof c->names[0], "map: %s over every photo", k->name);
            char *key = c->keys[k_key++];
            snprintf(key, sizeof c->keys[0], "Shift+%s", k->key_name);
            command_add(c, joint, key, m, needs);
        }
    }
    command_rows(c, KEYS_OTHER, N_KEYS_OTHER);
}

void keys_list_commands(FILE *f) {
    static const char *const needs[] = {"-", "classifier", "clip", "map-head"};
    CommandList c;
    for (int lesson = 0; lesson < 2; lesson++) {
        keys_commands(&c, lesson);
        for (int i = 0; i < c.n; i++)
            fprintf(f, "%s\t%s\t%s\t%s\t%s\n", lesson ? "lesson" : "explorer", c.rows[i].tag,
                    c.rows[i].key ? c.rows[i].key : "-", c.rows[i].name, needs[c.rows[i].needs]);
    }
}
