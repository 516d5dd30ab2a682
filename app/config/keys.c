/* keys.c - the keys, as --help and the help overlay (H) both list them, and the map kinds
 * as --help and --list-kinds name them: the fixed keys here, every kind's from its row
 * of MAP_KINDS (mapkind.h), so that a new kind needs no line of this file. */
#include "config/keys.h"
#include "view/mapkind.h"

#include <string.h>

/* The keys that do not depend on the map kinds: the view's (before the kinds'
 * lines), then the rest. */
static const char *const KEYS_VIEW[][2] = {
    {"Left / Right", "previous / next layer"},
    {"Up / Down", "previous / next head, then mean, max, min of the heads"},
};
static const char *const KEYS_OTHER[][2] = {
    {"[ / ]", "rollout discard ratio - / + 0.1"},
    {"click, I J K L", "query patch: its attention and rollout (Shift+arrows move it too)"},
    {"C", "back to the CLS token as the query"},
    {"A", "all heads of the layer as thumbnails (click or Enter opens one)"},
    {"T", "the whole table: a column per layer, a row per head"},
    {"1 - 5, click a class", "explain that class of the top-5 (a class-specific map)"},
    {"/", "CLIP: type a phrase, Enter: the class-specific map finds it (Esc cancels)"},
    {"0", "top-5 predictions panel on / off"},
    {"D", "mean attention distance panel (ViT paper, Fig. 7)"},
    {"M", "mask: the fewest patches holding 60% of the attention (DINO)"},
    {", / .", "mask fraction - / + 5%"},
    {"V / Shift+V", "next / previous colormap"},
    {"U", "colour scale: per map / shared across the layer"},
    {"B", "upsampling: nearest (patches) / bilinear"},
    {"G", "patch grid on / off"},
    {"+ / -", "overlay opacity"},
    {"O", "overlay on / off"},
    {"N / Shift+N, P", "next / previous image: the command line's, else the folder's"},
    {"S", "save the view as PNG"},
    {"Shift+P", "perturbation test: remove the map's patches, most relevant first (again: least)"},
    {"Delete", "what if: ablate the head on screen (again: back)"},
    {"Ctrl+click, Ctrl+drag", "what if: drop those patches (again: back)"},
    {"7", "Ctrl+click drops / fills patches (the mean colour)"},
    {"8", "what if: position embedding as trained / shuffled / none"},
    {"9 / Shift+9", "what if: the layer's attention temperature x2 / x0.5"},
    {"Backspace", "what if: every intervention off"},
    {"F", "fullscreen (presenter mode)"},
    {"Page Down / Page Up", "the lesson: the ViT step by step (in it: arrows, I J K L, Esc back)"},
    {"H", "this help on / off"},
    {"Tab", "the on-screen buttons on / off (a clean screen; remembered)"},
    {"W", "the downloaded models (--model NAME): Up / Down, Enter opens one, Esc closes"},
    {"Esc", "close what is open (help, menu, list, text box); else quit"},
    {"Q", "quit"},
    {"drop a file", "open a photo, or a .safetensors model"},
};
/* The lesson view's keys (window/lesson.c, app_lesson_key): its own help overlay. */
static const char *const KEYS_LESSON[][2] = {
    {"Page Down, Right, Space", "next step"},
    {"Page Up, Left, Backspace", "previous step"},
    {"Home / End", "first / last step"},
    {"Up / Down", "previous / next block"},
    {"Shift+Up / Shift+Down", "previous / next head"},
    {"I J K L", "move the patch the steps follow"},
    {"G", "patch grid on / off"},
    {"S", "save the view as PNG"},
    {"F", "fullscreen (presenter mode)"},
    {"H", "this help on / off"},
    {"Esc", "close this help; else back to the explorer"},
    {"Q", "quit"},
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
        k->rows[k->n][0] = KEYS_VIEW[i][0], k->rows[k->n][1] = KEYS_VIEW[i][1];
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
        k->rows[k->n][0] = KEYS_OTHER[i][0], k->rows[k->n][1] = KEYS_OTHER[i][1];
}

void keys_lesson_list(KeyList *k) {
    _Static_assert(N_KEYS_LESSON <= KEYS_MAX, "KEYS_MAX too small for the lesson's keys");
    k->n = 0, k->kinds[0] = '\0';
    for (int i = 0; i < N_KEYS_LESSON; i++, k->n++)
        k->rows[k->n][0] = KEYS_LESSON[i][0], k->rows[k->n][1] = KEYS_LESSON[i][1];
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
