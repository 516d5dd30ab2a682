/* palette.c - the command palette: Ctrl+P (or the ☰ button) lists every command of the
 * window by name with its key, filtered as one types; Enter or a click runs one as its
 * key would, Esc closes. The rows are the key table's commands (config/keys.c
 * keys_commands: --help's keys and the map kinds' rows, the lesson's keys in the lesson),
 * so that a new key or kind is a row here with nothing more to write. A command runs as
 * the key it names, through the window's one key path (app_key_press), so that the
 * palette and the key cannot differ; a map kind without a key of its own is picked as
 * the kinds' menu picks it. A command the model cannot have (a class-specific kind
 * without a classification head, / without a CLIP text tower) is greyed, and Enter on
 * it says why on the status line and runs nothing. */
#include "window/app.h"

#include <stdio.h>
#include <string.h>

/* --- the commands: usable, their keys ---------------------------------------------- */

/* Why the model on screen cannot have command c, or NULL when it can. */
static const char *command_why(const App *app, const Command *c) {
    const VitConfig *cfg = &app->model->vit.cfg;
    if (c->kind >= 0) return app_kind_why_not(app, c->kind);
    switch (c->needs) {
    case CMD_CLASSIFIER:
        return cfg->n_classes > 0 ? NULL
                                  : "needs a model with a classification head; this one has none";
    case CMD_CLIP: return app_text_can(app) ? NULL : app_text_why(app);
    case CMD_MAP_HEAD: return app_kind_why_not(app, MAP_PROBE);
    case CMD_ANY: break;
    }
    return NULL;
}

/* A key as the key table writes it ("Shift+9", "Page Down", "Esc", "/") as the keysym SDL
 * would send for it: 0, or -1 when SDL has no such key (a typo in the table). */
static int command_keysym(SDL_Keysym *ks, const char *name) {
    Uint16 mod = 0;
    for (;;) {
        if (!strncmp(name, "Shift+", 6))
            mod |= KMOD_LSHIFT, name += 6;
        else if (!strncmp(name, "Ctrl+", 5))
            mod |= KMOD_LCTRL, name += 5;
        else
            break;
    }
    char sdl[32]; /* SDL's names: "PageDown", "Escape" */
    size_t k = 0;
    for (const char *p = !strcmp(name, "Esc") ? "Escape" : name; *p && k + 1 < sizeof sdl; p++)
        if (*p != ' ') sdl[k++] = *p;
    sdl[k] = '\0';
    SDL_Keycode key = SDL_GetKeyFromName(sdl);
    if (key == SDLK_UNKNOWN) return -1;
    *ks = (SDL_Keysym){.scancode = SDL_GetScancodeFromKey(key), .sym = key, .mod = mod};
    return 0;
}

/* --- the filter --------------------------------------------------------------------- */

static char lower(char ch) {
    return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* Is needle in hay, ASCII case ignored? */
static int has_part(const char *hay, const char *needle) {
    for (; *hay; hay++) {
        size_t i = 0;
        while (needle[i] && hay[i] && lower(hay[i]) == lower(needle[i])) i++;
        if (!needle[i]) return 1;
    }
    return !*needle;
}

/* Are needle's characters (its spaces left out) in hay in that order, case ignored
 * ("nxly" finds "next layer")? */
static int has_letters(const char *hay, const char *needle) {
    for (; *needle; needle++) {
        if (*needle == ' ') continue;
        while (*hay && lower(*hay) != lower(*needle)) hay++;
        if (!*hay) return 0;
        hay++;
    }
    return 1;
}

/* The rows that match the filter: those with it in their name or key first, then those
 * with its letters in order in their name, each in the table's order; the selection back
 * to the first. */
static void palette_filter(App *app) {
    const char *q = app->palette.filter;
    const CommandList *cl = &app->palette.cmds;
    app->palette.n_match = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < cl->n; i++) {
            const Command *c = &cl->rows[i];
            int part = has_part(c->name, q) || (c->key && has_part(c->key, q));
            if (pass == 0 ? part : !part && has_letters(c->name, q))
                app->palette.match[app->palette.n_match++] = i;
        }
    app->palette.sel = app->palette.first = 0;
    app->notice[0] = '\0'; /* a greyed command's reason answered the last Enter */
}

/* Rows on screen at once: the last frame's room, else a guess until it is drawn. */
static int palette_fit(const App *app) {
    return app->ren.palette_fit > 0 ? app->ren.palette_fit : 8;
}

/* The selection to sel (clamped), the rows scrolled to show it. */
static void palette_select(App *app, int sel) {
    int n = app->palette.n_match, fit = palette_fit(app);
    sel = sel < 0 ? 0 : sel >= n ? n - 1 : sel;
    app->palette.sel = sel < 0 ? 0 : sel;
    if (app->palette.sel < app->palette.first) app->palette.first = app->palette.sel;
    if (app->palette.sel >= app->palette.first + fit)
        app->palette.first = app->palette.sel - fit + 1;
    app->dirty = 1;
}

/* --- open, close, run ---------------------------------------------------------------- */

int app_palette_toggle(App *app, int unused) {
    (void)unused;
    if (app->palette.open) {
        app_palette_close(app);
        return 0;
    }
    if (app->typing) return 0; /* CLIP's text box has the keys */
    app->palette.open = 1, app->palette.filter[0] = '\0';
    app->palette.lesson = app->lesson.on;
    keys_commands(&app->palette.cmds, app->palette.lesson);
    app->kind_menu = 0, app->menu_hover = -1; /* one thing open over the window at a time */
    palette_filter(app);
    SDL_StartTextInput(); /* after the key that opened it: Ctrl+P types nothing */
    app->dirty = 1;
    return 0;
}

void app_palette_close(App *app) {
    if (!app->palette.open) return;
    app->palette.open = 0;
    SDL_StopTextInput();
    app->dirty = 1;
}

/* Row k of the matches: greyed, it says why and stays open; else the palette closes and
 * the command runs as its key (or, a kind without one, as the kinds' menu picks it). */
static void palette_run(App *app, int k) {
    if (k < 0 || k >= app->palette.n_match) return;
    const Command *c = &app->palette.cmds.rows[app->palette.match[k]];
    const char *why = command_why(app, c);
    if (why) {
        snprintf(app->notice, sizeof app->notice, "%.100s: %.100s %.300s", c->name,
                 app->model->name, why);
        app->dirty = 1;
        return;
    }
    app_palette_close(app);
    if (c->key) {
        SDL_Keysym ks;
        if (command_keysym(&ks, c->key)) {
            char msg[200];
            snprintf(msg, sizeof msg, "%.60s: no key \"%.60s\" (config/keys.c)", c->name, c->key);
            app_set_error(app, msg);
            return;
        }
        app_key_press(app, &ks);
        return;
    }
    app->notice[0] = '\0'; /* a notice answers one command, as one key */
    if (app_set_kind(app, c->kind)) {
        app_perturb_stop(app); /* the view moved, as a click on a menu row moves it */
        app_update_map(app);
    }
}

/* --- keys, text, mouse --------------------------------------------------------------- */

/* Remove the last UTF-8 character of s (its continuation bytes 10xxxxxx, then its lead). */
static void drop_last_char(char *s) {
    size_t n = strlen(s);
    while (n > 0 && ((unsigned char)s[n - 1] & 0xC0) == 0x80) n--;
    if (n > 0) n--;
    s[n] = '\0';
}

int app_palette_key(App *app, const SDL_Keysym *ks) {
    if (!app->palette.open) return 0;
    int ctrl = (ks->mod & KMOD_CTRL) != 0, sel = app->palette.sel, fit = palette_fit(app);
    switch (ks->sym) {
    case SDLK_ESCAPE: app_palette_close(app); break;
    case SDLK_RETURN:
    case SDLK_KP_ENTER: palette_run(app, sel); break;
    case SDLK_UP: palette_select(app, sel - 1); break;
    case SDLK_DOWN: palette_select(app, sel + 1); break;
    case SDLK_PAGEUP: palette_select(app, sel - fit); break;
    case SDLK_PAGEDOWN: palette_select(app, sel + fit); break;
    case SDLK_HOME: palette_select(app, 0); break;
    case SDLK_END: palette_select(app, app->palette.n_match - 1); break;
    case SDLK_BACKSPACE:
        if (app->palette.filter[0]) drop_last_char(app->palette.filter), palette_filter(app);
        break;
    case SDLK_u: /* Ctrl+U: clear the filter, as a shell clears its line */
        if (ctrl) app->palette.filter[0] = '\0', palette_filter(app);
        break;
    case SDLK_p: /* Ctrl+P again: closed */
        if (ctrl) app_palette_close(app);
        break;
    default: break; /* the characters come as SDL_TEXTINPUT */
    }
    app->dirty = 1;
    return 1; /* every key is the palette's while it is open */
}

void app_palette_input(App *app, const char *utf8) {
    if (!app->palette.open) return;
    size_t n = strlen(app->palette.filter), k = strlen(utf8);
    if (n + k >= sizeof app->palette.filter) return; /* longer than any command's name */
    memcpy(app->palette.filter + n, utf8, k + 1);
    palette_filter(app);
    app->dirty = 1;
}

void app_palette_hover(App *app, float x, float y) {
    if (!app->palette.open) return;
    int k = ren_palette_at(&app->ren, (int)x, (int)y);
    if (k >= 0 && k < app->palette.n_match && k != app->palette.sel) palette_select(app, k);
}

void app_palette_click(App *app, float x, float y) {
    int k = ren_palette_at(&app->ren, (int)x, (int)y);
    if (k >= 0 && k < app->palette.n_match)
        palette_run(app, k);
    else if (!ren_palette_inside(&app->ren, (int)x, (int)y))
        app_palette_close(app); /* beside it (its own button too): closed, nothing more */
}

void app_palette_wheel(App *app, int rows) {
    if (!app->palette.open) return;
    int n = app->palette.n_match, fit = palette_fit(app), first = app->palette.first + rows;
    first = first > n - fit ? n - fit : first;
    app->palette.first = first < 0 ? 0 : first;
    /* the selection stays on a row shown */
    int sel = app->palette.sel;
    if (sel < app->palette.first) sel = app->palette.first;
    if (sel >= app->palette.first + fit) sel = app->palette.first + fit - 1;
    app->palette.sel = sel;
    app->dirty = 1;
}

/* --- the frame, the trace ------------------------------------------------------------- */

void app_palette_frame(App *app, RenFrame *f) {
    if (!app->palette.open) return;
    const CommandList *cl = &app->palette.cmds;
    for (int k = 0; k < app->palette.n_match; k++) {
        const Command *c = &cl->rows[app->palette.match[k]];
        app->palette.rows[k] = (RenControl){.label = c->name,
                                            .hint = c->key,
                                            .button = k == app->palette.sel, /* a face */
                                            .enabled = command_why(app, c) == NULL,
                                            .active = k == app->palette.sel};
    }
    snprintf(app->palette.count, sizeof app->palette.count, "%d of %d", app->palette.n_match,
             cl->n);
    f->palette_input = app->palette.filter;
    f->palette_empty = app->palette.lesson
                           ? "type to find a command of the lesson"
                           : "type to find a command: a map, a view, what if\xe2\x80\xa6";
    f->palette_count = app->palette.count;
    f->palette_none = "no command matches: Backspace";
    f->n_palette = app->palette.n_match, f->palette_first = app->palette.first;
    f->palette = app->palette.rows;
}

const char *app_palette_selected(const App *app) {
    if (!app->palette.open || app->palette.n_match == 0) return "-";
    return app->palette.cmds.rows[app->palette.match[app->palette.sel]].tag;
}

void app_palette_trace(const App *app) {
    static char last[COMMANDS_MAX * 120] = "-";
    char line[sizeof last];
    const Ren *r = &app->ren;
    int len;
    if (!app->palette.open) {
        len = snprintf(line, sizeof line, "palette open=0");
    } else {
        len =
            snprintf(line, sizeof line, "palette open=1 view=%s n=%d sel=%d first=%d fit=%d rows=",
                     app->palette.lesson ? "lesson" : "explorer", app->palette.n_match,
                     app->palette.sel, r->palette_first, r->palette_fit);
        /* every row that matches, in order: TAG:enabled; those on screen with their box,
         * framebuffer px (the tests click them there): TAG:enabled:x,y,w,h */
        for (int k = 0; k < app->palette.n_match && len < (int)sizeof line; k++) {
            const Command *c = &app->palette.cmds.rows[app->palette.match[k]];
            int b = k - r->palette_first;
            len += snprintf(line + len, sizeof line - (size_t)len, "%s%s:%d", k ? "," : "", c->tag,
                            app->palette.rows[k].enabled);
            if (b >= 0 && b < r->n_palette_boxes && len < (int)sizeof line) {
                const DlBox *x = &r->palette_box[b];
                len += snprintf(line + len, sizeof line - (size_t)len, ":%d;%d;%d;%d", x->x0, x->y0,
                                x->x1 - x->x0, x->y1 - x->y0);
            }
        }
        if (len < (int)sizeof line) /* last: what was typed, spaces and all */
            snprintf(line + len, sizeof line - (size_t)len, " filter=%s", app->palette.filter);
    }
    if (strcmp(line, last) == 0) return;
    snprintf(last, sizeof last, "%s", line);
    printf("%s\n", line);
}
