/* controls.c - the on-screen controls: buttons the mouse uses for what the keys do most
 * (layer, head and fusion, map kind, the lesson's steps, the command palette, the help), so
 * that a student
 * explores without the help screen. One table, APP_CONTROLS: a row per item, with its
 * label (or the function that makes it from the View), its tooltip naming its key, the
 * action it performs and the predicates of when it is shown, enabled and active. A
 * button's action is the function its key calls (input.c: app_step_layer for Left and
 * Right, ...), so that a click and a key take the same path. The renderer draws the
 * items in a strip above the status bar (render/panels.c, laid out by render/bar.h);
 * Tab hides them (remembered in the settings). */
#include "window/app.h"

#include <stdio.h>
#include <string.h>

/* The groups of the strip: items of one group sit close together. */
enum { G_LAYER = 0, G_HEAD, G_FUSION, G_KIND, G_LESSON, G_FIND, G_HELP };

typedef struct {
    const char *name; /* for VITLENS_TRACE's "controls" line: [a-z-] */
    int group;
    const char *text; /* the label, or NULL: label() makes it */
    /* the label from the App into buf; widest 1: the widest text it may show (the room kept
     * for it, so that the strip does not move as the view changes) */
    void (*label)(char *buf, size_t n, const App *app, int arg, int widest);
    const char *tip;               /* the tooltip: what it does, and its key */
    int (*act)(App *app, int arg); /* 1 when the map changed; NULL: a read-out */
    int arg;
    int (*shown)(const App *app, int arg);   /* NULL: always */
    int (*enabled)(const App *app, int arg); /* NULL: always */
    int (*active)(const App *app, int arg);  /* NULL: never */
} AppControl;

/* --- the predicates ------------------------------------------------------------- */

/* Is the lesson view on screen (window/lesson.c)? Then its steps' buttons show and the
 * explorer's (layer, head, fusion, kind), whose keys step the lesson there, do not. */
int app_lesson_active(const App *app) {
    return app->lesson.on;
}

static int explorer_shown(const App *app, int arg) {
    (void)arg;
    return !app_lesson_active(app);
}

static int lesson_shown(const App *app, int arg) {
    (void)arg;
    return app_lesson_active(app);
}

/* The kind on screen reads the layer (Left / Right change its map). */
static int reads_layer(const App *app, int arg) {
    (void)arg;
    return MAP_KINDS[app->view.kind].per_layer;
}

static int reads_head(const App *app, int arg) {
    (void)arg;
    return MAP_KINDS[app->view.kind].per_head;
}

/* The layer step arg leads somewhere, for a kind that reads the layer. */
static int layer_can(const App *app, int arg) {
    int l = app->view.layer + arg;
    return reads_layer(app, 0) && l >= 0 && l < app->model->vit.cfg.n_layers;
}

static int head_can(const App *app, int arg) {
    int h = app->view.head + arg;
    return reads_head(app, 0) && h >= 0 && h < app->model->vit.cfg.n_heads + VIEW_N_FUSIONS;
}

static int fusion_on(const App *app, int arg) {
    return reads_head(app, 0) && app->view.head == app->model->vit.cfg.n_heads + arg;
}

/* A CLIP model in the explorer: its text box's button shows (enabled when a phrase can be
 * embedded; else a click says why, as / does). */
static int find_shown(const App *app, int arg) {
    return explorer_shown(app, arg) && app->model->clip;
}

static int find_can(const App *app, int arg) {
    (void)arg;
    return app_text_can(app);
}

static int typing(const App *app, int arg) {
    (void)arg;
    return app->typing;
}

static int compare_on(const App *app, int arg) {
    (void)arg;
    return app->cmp.on;
}

static int palette_open(const App *app, int arg) {
    (void)arg;
    return app->palette.open;
}

/* --- the labels ------------------------------------------------------------------ */

static void layer_label(char *buf, size_t n, const App *app, int arg, int widest) {
    (void)arg;
    int L = app->model->vit.cfg.n_layers;
    snprintf(buf, n, "layer %d / %d", widest ? L : app->view.layer + 1, L);
}

/* "head 2 / 4", or "mean of 4 heads" for a fusion (as the status line names it). */
static void head_label(char *buf, size_t n, const App *app, int arg, int widest) {
    (void)arg;
    int H = app->model->vit.cfg.n_heads;
    View v = app->view;
    if (!widest) {
        view_head_text(buf, n, &v, H, &app->iv_spec);
        return;
    }
    buf[0] = '\0';
    IntervSpec all = {.n_ablate = 1, .ablate = {{v.layer + 1, H}}}; /* room for ", ablated" */
    for (v.head = 0; v.head < H + VIEW_N_FUSIONS; v.head++) {       /* the longest of them */
        char t[64];
        view_head_text(t, sizeof t, &v, H, &all);
        if (strlen(t) > strlen(buf)) snprintf(buf, n, "%s", t);
    }
}

static void fusion_label(char *buf, size_t n, const App *app, int arg, int widest) {
    (void)app, (void)widest;
    snprintf(buf, n, "%s", vit_fusion_name((VitFusion)arg));
}

/* The kind's name from the map kinds' table (no second list of them). */
static void kind_label(char *buf, size_t n, const App *app, int arg, int widest) {
    (void)arg;
    int k = app->view.kind;
    if (widest)
        for (int i = 0; i < MAP_KIND_COUNT; i++)
            if (strlen(MAP_KINDS[i].name) > strlen(MAP_KINDS[k].name)) k = i;
    snprintf(buf, n, "%s", MAP_KINDS[k].name);
}

/* --- the map kinds' menu ---------------------------------------------------------- */

/* A click on the kind's name: the menu of every kind (MAP_KINDS) above it, or closed. */
static int toggle_kind_menu(App *app, int unused) {
    (void)unused;
    app->kind_menu = !app->kind_menu, app->menu_hover = -1;
    return 0;
}

static int kind_menu_open(const App *app, int arg) {
    (void)arg;
    return app->kind_menu;
}

/* --- the table ------------------------------------------------------------------- */

#define LEFT  "\xe2\x97\x80" /* U+25C0 */
#define RIGHT "\xe2\x96\xb6" /* U+25B6 */
#define UP    "\xe2\x96\xb2" /* U+25B2 */
#define DOWN  "\xe2\x96\xbc" /* U+25BC */

static const AppControl APP_CONTROLS[] = {
    {"layer-prev", G_LAYER, LEFT, NULL, "previous layer (Left)", app_step_layer, -1, explorer_shown,
     layer_can, NULL},
    {"layer", G_LAYER, NULL, layer_label, "the layer (Left / Right)", NULL, 0, explorer_shown,
     reads_layer, NULL},
    {"layer-next", G_LAYER, RIGHT, NULL, "next layer (Right)", app_step_layer, 1, explorer_shown,
     layer_can, NULL},
    {"head-prev", G_HEAD, UP, NULL, "previous head (Up)", app_step_head, -1, explorer_shown,
     head_can, NULL},
    {"head", G_HEAD, NULL, head_label, "the head, then mean, max, min of the heads (Up / Down)",
     NULL, 0, explorer_shown, reads_head, NULL},
    {"head-next", G_HEAD, DOWN, NULL, "next head, then mean, max, min of the heads (Down)",
     app_step_head, 1, explorer_shown, head_can, NULL},
    {"fusion-mean", G_FUSION, NULL, fusion_label, "the mean of the heads (Up / Down reach it)",
     app_set_fusion, VIT_FUSE_MEAN, explorer_shown, reads_head, fusion_on},
    {"fusion-max", G_FUSION, NULL, fusion_label, "the max of the heads (Up / Down reach it)",
     app_set_fusion, VIT_FUSE_MAX, explorer_shown, reads_head, fusion_on},
    {"fusion-min", G_FUSION, NULL, fusion_label, "the min of the heads (Up / Down reach it)",
     app_set_fusion, VIT_FUSE_MIN, explorer_shown, reads_head, fusion_on},
    {"kind-prev", G_KIND, LEFT, NULL, "previous map kind (Shift+E)", app_step_kind, -1,
     explorer_shown, NULL, NULL},
    {"kind", G_KIND, NULL, kind_label,
     "the map kinds: click to pick one from their list (E / Shift+E step through them)",
     toggle_kind_menu, 0, explorer_shown, NULL, kind_menu_open},
    {"kind-next", G_KIND, RIGHT, NULL, "next map kind (E)", app_step_kind, 1, explorer_shown, NULL,
     NULL},
    {"lesson-prev", G_LESSON, LEFT " step", NULL, "the lesson's previous step (Page Up)",
     app_lesson_step, -1, lesson_shown, NULL, NULL},
    {"lesson-next", G_LESSON, "step " RIGHT, NULL, "the lesson's next step (Page Down)",
     app_lesson_step, 1, lesson_shown, NULL, NULL},
    {"find", G_FIND, "find\xe2\x80\xa6", NULL,
     "CLIP: type a phrase, Enter: the class-specific map shows where it is (/)", app_text_open, 0,
     find_shown, find_can, typing},
    {"compare", G_HELP, "A|B", NULL,
     "side by side: the last second model or photo beside this one (\\; Shift+drop a file "
     "opens one)",
     app_compare_toggle, 0, NULL, NULL, compare_on},
    {"palette", G_HELP, "\xe2\x98\xb0", NULL,
     "every command by name: type to find one, Enter runs it (Ctrl+P)", app_palette_toggle, 0, NULL,
     NULL, palette_open},
    {"help", G_HELP, "?", NULL, "the keys (H); Tab hides these buttons", app_toggle_help, 0, NULL,
     NULL, NULL},
};
#define N_CONTROLS ((int)(sizeof APP_CONTROLS / sizeof APP_CONTROLS[0]))
_Static_assert(N_CONTROLS <= REN_MAX_CONTROLS, "REN_MAX_CONTROLS too small for APP_CONTROLS");

/* --- the frame, the mouse, the trace ---------------------------------------------- */

void app_controls_frame(App *app, RenFrame *f) {
    app->n_ctrl = 0;
    if (!app->show_controls) return;
    for (int i = 0; i < N_CONTROLS; i++) {
        const AppControl *c = &APP_CONTROLS[i];
        if (c->shown && !c->shown(app, c->arg)) continue;
        int k = app->n_ctrl++;
        RenControl *rc = &app->ctrl[k];
        app->ctrl_row[k] = i;
        if (c->label) {
            c->label(app->ctrl_label[k], sizeof app->ctrl_label[k], app, c->arg, 0);
            c->label(app->ctrl_sizer[k], sizeof app->ctrl_sizer[k], app, c->arg, 1);
        } else {
            snprintf(app->ctrl_label[k], sizeof app->ctrl_label[k], "%s", c->text);
            app->ctrl_sizer[k][0] = '\0';
        }
        *rc = (RenControl){.label = app->ctrl_label[k],
                           .sizer = app->ctrl_sizer[k][0] ? app->ctrl_sizer[k] : NULL,
                           .group = c->group,
                           .button = c->act != NULL,
                           .enabled = !c->enabled || c->enabled(app, c->arg),
                           .active = c->active && c->active(app, c->arg)};
        if (i == app->ctrl_hover) f->control_hover = k;
        if (i == app->ctrl_pressed) f->control_pressed = k;
        if (c->act == toggle_kind_menu && app->kind_menu) f->menu_of = k;
    }
    f->n_controls = app->n_ctrl, f->controls = app->ctrl;
    /* the kinds' menu: a row per kind of the table (no second list of them), its own key at
     * its right; one the model cannot have dimmed, the one on screen marked */
    app->n_menu = 0;
    if (f->menu_of < 0) return;
    _Static_assert(MAP_KIND_COUNT <= REN_MAX_MENU, "REN_MAX_MENU too small for the map kinds");
    for (int k = 0; k < MAP_KIND_COUNT; k++)
        app->menu[k] = (RenControl){.label = MAP_KINDS[k].name,
                                    .hint = MAP_KINDS[k].key ? MAP_KINDS[k].key_name : NULL,
                                    .button = 1,
                                    .enabled = app_kind_usable(app, k),
                                    .active = k == app->view.kind && !app->view.joint};
    app->n_menu = MAP_KIND_COUNT;
    f->n_menu = app->n_menu, f->menu = app->menu, f->menu_hover = app->menu_hover;
}

int app_menu_at(const App *app, float x, float y) {
    if (!app->kind_menu || !app->show_controls) return -1;
    int k = ren_menu_at(&app->ren, (int)x, (int)y);
    return k >= 0 && k < app->n_menu ? k : -1;
}

void app_menu_click(App *app, float x, float y) {
    int kind = app_menu_at(app, x, y);
    if (kind >= 0 && !app->menu[kind].enabled) return; /* a dimmed row: the menu stays */
    app->kind_menu = 0, app->menu_hover = -1, app->dirty = 1;
    app->notice[0] = '\0';
    if (kind >= 0 && app_set_kind(app, kind)) app_update_map(app);
}

int app_control_at(const App *app, float x, float y) {
    if (!app->show_controls) return -1;
    int k = ren_control_at(&app->ren, (int)x, (int)y);
    return k >= 0 && k < app->n_ctrl ? app->ctrl_row[k] : -1;
}

void app_control_press(App *app, int row) {
    const AppControl *c = &APP_CONTROLS[row];
    /* a read-out, or a button that would change nothing (as its key would not) */
    if (!c->act || (c->enabled && !c->enabled(app, c->arg))) return;
    app->ctrl_pressed = row;
    app->notice[0] = '\0'; /* a notice answers one key or click */
    if (c->act(app, c->arg)) app_update_map(app);
    app->dirty = 1;
}

const char *app_control_tip(const App *app) {
    return app->ctrl_hover >= 0 && app->ctrl_hover < N_CONTROLS ? APP_CONTROLS[app->ctrl_hover].tip
                                                                : NULL;
}

const char *app_control_name(int row) {
    return row >= 0 && row < N_CONTROLS ? APP_CONTROLS[row].name : "-";
}
