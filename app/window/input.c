/* input.c - every key and mouse event, through one switch (app_handle_event).
 *
 * A key changes the View (layer, head, query, kind, class, discard ratio, overview),
 * the display (panels, mask, colours, opacity) or the photo and model; what changed the
 * map asks for it again (app_update_map). A key or click that moves the view also ends
 * a perturbation test, whose picture is of the view it started on. The key list that
 * --help and the help overlay show is config/keys.c's keys_list. The actions the
 * on-screen controls share with the keys (app_step_layer, ...) are here, and a click on
 * a control calls the one its key calls (controls.c); the palette's commands run as their
 * keys, through app_key_press (palette.c). */
#include "window/app.h"
#include "config/files.h"
#include "render/colormap.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* --- actions shared by keys and clicks ---------------------------------------- */

/* N / P: the next / previous image of the command line's list when it has more
 * than one; else of the folder of the photo last asked for; without one, the
 * first / last demo scene of the built-in model. */
static void app_step_photo(App *app, int step) {
    if (app->n_images > 1) {
        /* wraps both ways (C's % keeps the sign of a negative step) */
        app->image_at = ((app->image_at + step) % app->n_images + app->n_images) % app->n_images;
        app_open(app, app->images[app->image_at]);
        return;
    }
    const char *from = app->photo[0] ? app->photo : app->opt->demo_dir;
    char path[1024];
    if (!from[0]) {
        app_set_error(app, "no photo yet: drop one on the window");
    } else if (files_step(path, sizeof path, from, step)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%.500s: no image in that folder", from);
        app_set_error(app, msg);
    } else {
        app_open(app, path);
    }
}

/* Make patch (row, col) the query token. */
static void app_set_query(App *app, int row, int col) {
    const VitConfig *c = &app->model->vit.cfg;
    app->cursor_row = row < 0 ? 0 : row >= c->grid_h ? c->grid_h - 1 : row;
    app->cursor_col = col < 0 ? 0 : col >= c->grid_w ? c->grid_w - 1 : col;
    /* a token index: the prefix tokens (CLS, distillation, registers) come first */
    app->view.query = c->n_prefix + app->cursor_row * c->grid_w + app->cursor_col;
}

/* I J K L / Shift+arrows: the first press makes the cursor's patch the query,
 * the next ones move it. */
static void app_move_cursor(App *app, int drow, int dcol) {
    int r, c;
    if (!app_query_patch(app, &r, &c))
        app_set_query(app, app->cursor_row, app->cursor_col);
    else
        app_set_query(app, r + drow, c + dcol);
}

/* Open overview cell k (an atlas index) as the single view. */
static void app_open_cell(App *app, int k) {
    const VitConfig *c = &app->model->vit.cfg;
    int K = c->n_heads + VIEW_N_FUSIONS;
    if (k < 0) return;
    if (app->overview == VIEW_TABLE)
        app->view.layer = k / K, app->view.head = k % K;
    else
        app->view.head = k;
    app->overview = VIEW_SINGLE;
}

/* Explain the class of the top-5 panel's row `rank` (0: the most probable): the
 * view targets it, switching to a class-specific kind if it shows another. */
static void app_target_rank(App *app, int rank) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    if (!sc) return;
    if (c->n_classes == 0) {
        char wait[96];
        if (app_classes_waiting(app, wait, sizeof wait))
            snprintf(app->notice, sizeof app->notice, "%s: no class to explain yet", wait);
        else
            snprintf(app->notice, sizeof app->notice,
                     "%s has no classification head: no class to explain", app->model->name);
        return;
    }
    int C = sc->run.cfg.n_classes; /* the run's: a CLIP head may have grown since */
    int top[REN_MAX_PREDS], k = C < REN_MAX_PREDS ? C : REN_MAX_PREDS;
    if (rank < 0 || rank >= k) return;
    vit_top_k(top, sc->run.probs, C, k);
    app_score_off(app); /* a class chosen: no longer --contrast's or --similar's score */
    app->view.target = top[rank];
    if (!MAP_KINDS[app->view.kind].uses_target) app->view.kind = app->class_kind;
    app->overview = VIEW_SINGLE;
    app_update_map(app);
}

int app_step_layer(App *app, int step) {
    int layer = app->view.layer + step;
    if (layer < 0 || layer >= app->model->vit.cfg.n_layers) return 0;
    app->view.layer = layer;
    return 1;
}

int app_step_head(App *app, int step) {
    int head = app->view.head + step;
    if (head < 0 || head >= app->model->vit.cfg.n_heads + VIEW_N_FUSIONS) return 0;
    app->view.head = head;
    return 1;
}

int app_set_fusion(App *app, int fusion) {
    int head = app->model->vit.cfg.n_heads + fusion;
    if (fusion < 0 || fusion >= VIEW_N_FUSIONS || app->view.head == head) return 0;
    app->view.head = head;
    return 1;
}

int app_toggle_help(App *app, int unused) {
    (void)unused;
    if (app->help && app->help_page + 1 < app->ren.help_pages)
        app->help_page++;
    else
        app->help = !app->help, app->help_page = 0;
    return 0;
}

int app_set_kind(App *app, int kind) {
    View *v = &app->view;
    if (kind < 0 || kind >= MAP_KIND_COUNT || !app_kind_usable(app, kind) ||
        (v->kind == kind && !v->joint))
        return 0;
    v->kind = kind, v->joint = 0;
    if (MAP_KINDS[kind].uses_target) app->class_kind = kind;
    return 1;
}

int app_step_kind(App *app, int step) {
    View *v = &app->view;
    int skipped = 0;
    for (int i = 0; i < MAP_KIND_COUNT; i++) {
        v->kind = (v->kind + step + MAP_KIND_COUNT) % MAP_KIND_COUNT;
        if (app_kind_usable(app, v->kind)) break;
        /* the class-specific kinds are everyone's: say why they are skipped; a family's
         * own kind (the probe of SigLIP's MAP head) is skipped quietly on other models */
        skipped |= MAP_KINDS[v->kind].uses_target;
    }
    if (MAP_KINDS[v->kind].uses_target) app->class_kind = v->kind;
    char wait[96];
    if (skipped && app_classes_waiting(app, wait, sizeof wait))
        snprintf(app->notice, sizeof app->notice, "%s: the class-specific maps come after", wait);
    else if (skipped)
        snprintf(app->notice, sizeof app->notice,
                 "%s has no classification head: no class-specific maps", app->model->name);
    return 1;
}

/* W: open or close the list of the downloaded models (models.h). */
static void app_toggle_models(App *app) {
    app->picking = !app->picking;
    if (app->picking) {
        app->n_picks = models_list(app->picks, REN_MAX_LIST), app->pick = 0;
        for (int i = 0; i < app->n_picks; i++)
            if (!strcmp(app->picks[i].weights, app->model_path)) app->pick = i;
        if (app->n_picks == 0) {
            char dirs[MODELS_MAX_DIRS][1024];
            int n = models_dirs(dirs);
            snprintf(app->notice, sizeof app->notice,
                     "no downloaded models in %.200s%s%.200s (scripts/download-model.sh NAME)",
                     n > 0 ? dirs[0] : "", n > 1 ? " or " : "", n > 1 ? dirs[n - 1] : "");
            app->picking = 0;
        }
    }
    app_update_list(app);
}

/* --- keys ------------------------------------------------------------------------ */

/* The keys of the open models list: 1 when the key was one of them. */
static int app_pick_key(App *app, SDL_Keycode key) {
    switch (key) {
    case SDLK_UP: app->pick = app->pick > 0 ? app->pick - 1 : app->n_picks - 1; break;
    case SDLK_DOWN: app->pick = (app->pick + 1) % app->n_picks; break;
    case SDLK_ESCAPE: app_toggle_models(app); return 1;
    case SDLK_RETURN:
    case SDLK_KP_ENTER: { /* loaded on the worker, as a dropped model; its labels with it */
        const ModelEntry *m = &app->picks[app->pick];
        snprintf(app->next_labels, sizeof app->next_labels, "%s", m->labels);
        char path[1200];
        snprintf(path, sizeof path, "%s", m->weights);
        app_toggle_models(app);
        if (strcmp(path, app->model_path)) app_open(app, path);
        return 1;
    }
    default: return 0;
    }
    app_update_list(app);
    return 1;
}

/* A map kind's own key (R: rollout on / off, Shift+R: attention flow, ...), or Shift+ the
 * key of a kind that has a view over every photo (Shift+X: the feature PCA over the
 * slideshow): that kind, or back to the first row. 1 when it was one. */
static int app_kind_key(App *app, SDL_Keycode key, int shift) {
    View *v = &app->view;
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (!m->key || key != (SDL_Keycode)m->key) continue;
        if (shift && m->shift_joint) { /* the kind over every photo of the slideshow */
            int on = !(v->kind == k && v->joint);
            v->kind = on ? k : MAP_ATTENTION, v->joint = on;
            return 1;
        }
        if (shift == m->shift) { /* on (as the kinds' menu picks it), or back to the first */
            if (v->kind == k)
                v->kind = MAP_ATTENTION, v->joint = 0;
            else
                app_set_kind(app, k);
            return 1;
        }
    }
    return 0;
}

/* A (T): the heads of the layer (the whole table) on / off. 1 when the map changed. */
static int app_overview_key(App *app, SDL_Keycode key) {
    const VitConfig *c = &app->model->vit.cfg;
    const MapKindInfo *k = &MAP_KINDS[app->view.kind];
    /* the App's label arrays hold VIT_MAX_LAYERS * 4 cells (app.h cell_labels) */
    if (c->n_heads + VIEW_N_FUSIONS > VIT_MAX_LAYERS * 4) {
        app_set_error(app, "too many heads for an overview");
        return 0;
    }
    if (!k->per_head) {
        snprintf(app->notice, sizeof app->notice, "%s has no per-head maps to show", k->title);
        return 0;
    }
    ViewOverview mode = key == SDLK_t ? VIEW_TABLE : VIEW_HEADS;
    app->overview = app->overview == mode ? VIEW_SINGLE : mode;
    return 1;
}

/* The keys that move the view through the model: layers, heads, the query patch, the
 * kind, the class, the discard ratio, the overviews. 1 when key was one of them; *changed
 * 1 when the map changed. */
static int app_view_key(App *app, SDL_Keycode key, int shift, int *changed) {
    const VitConfig *c = &app->model->vit.cfg;
    View *v = &app->view;
    switch (key) {
    /* the arrows' steps are the on-screen controls' too (controls.c): one function each */
    case SDLK_LEFT:
    case SDLK_RIGHT:
        if (shift)
            app_move_cursor(app, 0, key == SDLK_LEFT ? -1 : 1), *changed = 1;
        else
            *changed = app_step_layer(app, key == SDLK_LEFT ? -1 : 1);
        break;
    case SDLK_UP:
    case SDLK_DOWN:
        if (shift)
            app_move_cursor(app, key == SDLK_UP ? -1 : 1, 0), *changed = 1;
        else
            *changed = app_step_head(app, key == SDLK_UP ? -1 : 1);
        break;
    case SDLK_i: app_move_cursor(app, -1, 0), *changed = 1; break;
    case SDLK_k: app_move_cursor(app, 1, 0), *changed = 1; break;
    case SDLK_j: app_move_cursor(app, 0, -1), *changed = 1; break;
    case SDLK_l: app_move_cursor(app, 0, 1), *changed = 1; break;
    case SDLK_c: *changed = v->query != 0, v->query = 0; break;
    case SDLK_e: *changed = app_step_kind(app, shift ? -1 : 1); break; /* the table's rows */
    case SDLK_1:
    case SDLK_2:
    case SDLK_3:
    case SDLK_4:
    case SDLK_5: app_target_rank(app, (int)(key - SDLK_1)); break;
    case SDLK_KP_1:
    case SDLK_KP_2:
    case SDLK_KP_3:
    case SDLK_KP_4:
    case SDLK_KP_5: app_target_rank(app, (int)(key - SDLK_KP_1)); break;
    case SDLK_LEFTBRACKET:
    case SDLK_RIGHTBRACKET: {
        /* in tenths, so that stepping never accumulates float error: 0.0 .. 0.9 */
        int t = (int)lroundf(v->discard_ratio * 10.0f) + (key == SDLK_RIGHTBRACKET ? 1 : -1);
        if (t < 0 || t > 9) break;
        v->discard_ratio = (float)t / 10.0f;
        *changed = MAP_KINDS[v->kind].uses_discard;
        break;
    }
    case SDLK_a:
    case SDLK_t: *changed = app_overview_key(app, key); break;
    case SDLK_RETURN:
    case SDLK_KP_ENTER:
        if (app->overview) {
            int K = c->n_heads + VIEW_N_FUSIONS;
            app_open_cell(app, app->overview == VIEW_TABLE ? v->layer * K + v->head : v->head);
            *changed = 1;
        }
        break;
    default: return 0;
    }
    return 1;
}

/* The keys of what is shown and how: panels, mask, colours, scale, opacity, the photo,
 * the model, saving, fullscreen, help, quitting. 1 when key was one of them; *changed 1
 * when the map changed. */
static int app_display_key(App *app, SDL_Keycode key, int shift, int *changed) {
    switch (key) {
    case SDLK_ESCAPE:
    case SDLK_q: app->running = 0; break;
    case SDLK_0:
    case SDLK_KP_0: app->show_preds = !app->show_preds; break;
    case SDLK_d: app->show_distance = !app->show_distance; break;
    case SDLK_m: app->show_mask = !app->show_mask, *changed = 1; break;
    case SDLK_COMMA:
    case SDLK_PERIOD: {
        int pct = app->mask_pct + (key == SDLK_PERIOD ? 5 : -5);
        if (pct < 5 || pct > 100) break;
        app->mask_pct = pct;
        *changed = app->show_mask;
        break;
    }
    case SDLK_v:
        app->colormap = (app->colormap + (shift ? COLORMAP_COUNT - 1 : 1)) % COLORMAP_COUNT;
        ren_set_colormap(&app->ren, app->colormap);
        break;
    case SDLK_u: app->shared_scale = !app->shared_scale, *changed = 1; break;
    case SDLK_b: app->bilinear = !app->bilinear; break;
    case SDLK_n: app_step_photo(app, shift ? -1 : 1); break;
    case SDLK_p: /* Shift+P: the perturbation test of the map; P the previous image */
        if (shift)
            app_perturb_key(app);
        else
            app_step_photo(app, -1);
        break;
    case SDLK_s: app->save_pending = 1; break;
    case SDLK_f: app_toggle_fullscreen(app); break;
    case SDLK_g: app->grid = !app->grid; break;
    case SDLK_o: app->overlay = !app->overlay; break;
    case SDLK_h: app_toggle_help(app, 0); break;
    case SDLK_TAB: /* the on-screen controls on / off: the main area takes their room */
        app->show_controls = !app->show_controls, app->ctrl_hover = app->ctrl_pressed = -1;
        app->kind_menu = 0;
        break;
    case SDLK_w: app_toggle_models(app); break;
    case SDLK_PLUS:
    case SDLK_EQUALS: /* '+' is shift+'=' on most layouts */
    case SDLK_KP_PLUS:
        app->opacity = app->opacity + 0.1f > 1.0f ? 1.0f : app->opacity + 0.1f;
        break;
    case SDLK_MINUS:
    case SDLK_KP_MINUS:
        app->opacity = app->opacity - 0.1f < 0.0f ? 0.0f : app->opacity - 0.1f;
        break;
    default: return 0;
    }
    return 1;
}

/* --- what if? the interventions ------------------------------------------------ */

/* The interventions asked now, checked against the model: kept and the photo run again
 * (its prediction and every map), or `before` back and the error on the status line,
 * the model unchanged. The notice names what changed (change); the status line's left
 * keeps the whole set, briefly, and the right the top-1 after the next key. */
static void app_interv_apply(App *app, const IntervSpec *before, const char *change) {
    Interv t = {0};
    char msg[600];
    if (interv_any(&app->iv_spec) &&
        interv_build(&t, &app->iv_spec, &app->model->vit.cfg, msg, sizeof msg)) {
        app->iv_spec = *before;
        app_set_error(app, msg);
        return;
    }
    interv_free(&t);
    const Scene *sc = app_scene(app);
    if (sc) app_open(app, sc->path);
    snprintf(app->notice, sizeof app->notice, "what if: %s",
             interv_any(&app->iv_spec) ? change : "the model as it is");
}

/* Delete, 7, 8, 9 / Shift+9, Backspace. 1 when the key is one of them. */
static int app_interv_key(App *app, SDL_Keycode key, int shift) {
    const VitConfig *c = &app->model->vit.cfg;
    IntervSpec *s = &app->iv_spec;
    static IntervSpec before; /* one key at a time, on the GUI thread */
    before = *s;
    char change[96] = "";
    int L = app->view.layer + 1, H = app->view.head + 1;
    switch (key) {
    case SDLK_DELETE: /* ablate the head on screen, or bring it back */
        if (app->view.head >= c->n_heads || app->overview) {
            app_set_error(app, "Delete ablates one head: pick one with Up / Down (not a fusion, "
                               "not an overview)");
            return 1;
        }
        if (interv_toggle_ablate(s, L, H)) {
            app_set_error(app, "too many heads ablated");
            return 1;
        }
        snprintf(change, sizeof change, "L%d:H%d %s", L, H,
                 interv_is_ablated(s, L, H) ? "ablated" : "back");
        break;
    case SDLK_7: /* what Ctrl+click / drag does to a patch */
        app->patch_fill = !app->patch_fill;
        snprintf(app->notice, sizeof app->notice, "Ctrl+click / drag: %s patches",
                 app->patch_fill ? "fill (mean colour)" : "drop (out of the sequence)");
        return 1;
    case SDLK_8: /* position embedding: as trained -> shuffled -> none */
        s->pos = s->pos == VIT_POS_KEEP      ? VIT_POS_SHUFFLE
                 : s->pos == VIT_POS_SHUFFLE ? VIT_POS_ZERO
                                             : VIT_POS_KEEP;
        snprintf(change, sizeof change, "pos-embed %s",
                 s->pos == VIT_POS_SHUFFLE ? "shuffled"
                 : s->pos == VIT_POS_ZERO  ? "zeroed"
                                           : "as trained");
        break;
    case SDLK_9: /* the layer on screen's attention temperature x2 (Shift: / 2) */
        if (s->temp_layer != app->view.layer + 1) {
            s->temp_layer = app->view.layer + 1;
            s->temperature = shift ? 0.5f : 2.0f;
        } else {
            s->temperature *= shift ? 0.5f : 2.0f;
            if (s->temperature > 0.99f && s->temperature < 1.01f) s->temp_layer = 0;
            if (s->temperature > 1024.0f || s->temperature < 1.0f / 1024.0f) {
                app_set_error(app, "temperature: kept within 1/1024 .. 1024");
                *s = before;
                return 1;
            }
        }
        snprintf(change, sizeof change, "layer %d's attention as softmax(scores / %g)", L,
                 s->temp_layer ? (double)s->temperature : 1.0);
        break;
    case SDLK_BACKSPACE: /* every intervention off */
        if (!interv_any(s)) return 1;
        memset(s, 0, sizeof *s);
        break;
    default: return 0;
    }
    app->error[0] = '\0';
    app_interv_apply(app, &before, change);
    return 1;
}

/* Ctrl+click on a patch: drop it (or fill it, key 7), or put it back; Ctrl+drag: every
 * patch crossed the same way; the photo runs again on release. */
static IntervSpec drag_before;
static void app_interv_patch(App *app) {
    if (app->hover_row < 0) return;
    int r = app->hover_row + 1, c = app->hover_col + 1;
    if (!app->drag_moved) { /* the first patch decides: set or clear */
        drag_before = app->iv_spec;
        app->drag_on = !interv_has_patch(&app->iv_spec, app->patch_fill, r, c);
        app->drag_moved = 1;
    }
    if (interv_set_patch(&app->iv_spec, app->patch_fill, r, c, app->drag_on))
        app_set_error(app, "too many patches");
    snprintf(app->notice, sizeof app->notice, "%d patch%s dropped, %d filled (release: run)",
             app->iv_spec.n_drop, app->iv_spec.n_drop == 1 ? "" : "es", app->iv_spec.n_fill);
    app->dirty = 1;
}

/* A key's action: the models list's keys while it is open, a kind's own key, a view
 * key or a display key; an unknown key changes nothing (not even the frame). */
static void app_key_action(App *app, const SDL_Keysym *ks) {
    SDL_Keycode key = ks->sym;
    int shift = (ks->mod & KMOD_SHIFT) != 0;
    int map_changed = 0;
    app->notice[0] = '\0'; /* a notice answers one key: the next one clears it */
    if (key == SDLK_ESCAPE && (app->kind_menu || (app->help && !app->lesson.on))) {
        app->kind_menu = 0, app->help = 0, app->help_page = 0; /* Esc closes what is open first */
        app->dirty = 1;
        return;
    }
    /* the compare view's keys (and \ that opens it) */
    if (!app->picking && !app->lesson.on && app_compare_key(app, ks)) {
        app->dirty = 1;
        return;
    }
    /* the lesson view's keys, and Page Down / Up that open it */
    if (!app->picking && app->has_scene && app_lesson_key(app, ks)) {
        app->dirty = 1;
        return;
    }
    /* while W's list is open its keys (arrows, Enter, Esc) take precedence */
    if (app->picking && app_pick_key(app, key)) {
        app->dirty = 1;
        return;
    }
    if (key == SDLK_SLASH || key == SDLK_KP_DIVIDE) { /* CLIP: type what to find */
        app_text_open(app, 0);
        app->dirty = 1;
        return;
    }
    if (key == SDLK_c && shift) { /* a video: the features PCA's colours fitted again */
        app_pca_refit(app);
        app->dirty = 1;
        return;
    }
    if (app_live_key(app, key, shift)) { /* a video: Space, `,` and `.` */
        app->dirty = 1;
        return;
    }
    if (app_kind_key(app, key, shift)) {
        app_update_map(app);
        app->dirty = 1;
        return;
    }
    if (app_interv_key(app, key, shift)) {
        app->dirty = 1;
        return;
    }
    if (!app_view_key(app, key, shift, &map_changed) &&
        !app_display_key(app, key, shift, &map_changed))
        return;
    if (map_changed) app_update_map(app);
    app->dirty = 1;
}

int app_lesson_step(App *app, int step) {
    SDL_Keysym ks = {.sym = step > 0 ? SDLK_PAGEDOWN : SDLK_PAGEUP};
    app_key_action(app, &ks); /* a key the lesson view handles: asks for its map itself */
    return 0;
}

/* Did the view change from `before`: another map (the fields its kind reads), class or
 * overview? */
static int app_view_moved(const App *app, const View *before, ViewOverview overview) {
    return !view_same_map(before, &app->view, app->model->vit.cfg.n_heads) ||
           before->target != app->view.target || overview != app->overview;
}

/* A key: its action. One that changes the view, the photo or the model (N, P, W's list)
 * also ends a perturbation test, whose picture is of the view it started on. */
void app_key_press(App *app, const SDL_Keysym *ks) {
    if (ks->sym == SDLK_p && (ks->mod & KMOD_CTRL)) { /* the command palette, in any view */
        app_palette_toggle(app, 0);
        return;
    }
    if (ks->sym == SDLK_r && (ks->mod & KMOD_CTRL)) { /* record the window, in any view */
        app->notice[0] = '\0';
        app_record_toggle(app);
        app->dirty = 1;
        return;
    }
    View before = app->view;
    ViewOverview overview = app->overview;
    int shift = (ks->mod & KMOD_SHIFT) != 0;
    app_key_action(app, ks);
    if (ks->sym == SDLK_p && shift) return; /* the test's own key */
    if (ks->sym == SDLK_n || ks->sym == SDLK_p || ks->sym == SDLK_w ||
        app_view_moved(app, &before, overview))
        app_perturb_stop(app);
}

/* --- the mouse ---------------------------------------------------------------- */

/* What is under the mouse: a patch of the single view, or an overview cell. Positions are
 * framebuffer px (app_mouse_px: window points times the HiDPI scale). */
static void app_hover(App *app, int x, int y) {
    app_mouse_px(app, x, y, &app->mouse_x, &app->mouse_y);
    int ctrl = app_control_at(app, app->mouse_x, app->mouse_y); /* a button: its tooltip */
    if (ctrl != app->ctrl_hover) app->ctrl_hover = ctrl, app->dirty = 1;
    int row = app_menu_at(app, app->mouse_x, app->mouse_y);
    if (row != app->menu_hover) app->menu_hover = row, app->dirty = 1;
    app_palette_hover(app, app->mouse_x, app->mouse_y);
    int r = -1, c = -1, cell = -1;
    if (app->lesson.on) {     /* the lesson's picture: no patch under the mouse */
    } else if (app->cmp.on) { /* the compare view's panes: their own cursor */
        app_compare_hover(app);
    } else if (app->has_scene && !app->overview) {
        if (ren_patch_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y, &r, &c)) r = c = -1;
    } else if (app->has_scene) {
        cell = ren_cell_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y);
    }
    if (r != app->hover_row || c != app->hover_col || cell != app->hover_cell) app->dirty = 1;
    app->hover_row = r, app->hover_col = c, app->hover_cell = cell;
    if (app->hover_row >= 0 || app->hover_cell >= 0) app->dirty = 1; /* the tooltip follows */
}

/* A left click at window point (x, y): an on-screen control performs its action; a top-5
 * row explains that class; in an overview a cell opens as the single view; on the single
 * view the patch becomes the query token. */
static void app_click_action(App *app, int x, int y) {
    app_hover(app, x, y);
    if (app->palette.open) { /* the palette open: the click is its */
        app_palette_click(app, app->mouse_x, app->mouse_y);
        return;
    }
    if (app->kind_menu) { /* the kinds' menu open: the click is its */
        app_menu_click(app, app->mouse_x, app->mouse_y);
        return;
    }
    if (app->ctrl_hover >= 0) { /* an on-screen control: what its key does */
        app_control_press(app, app->ctrl_hover);
        return;
    }
    if (!app->has_scene || app->lesson.on) return;
    app->notice[0] = '\0';
    int rank = ren_pred_at(&app->ren, (int)app->mouse_x, (int)app->mouse_y);
    if (rank >= 0) { /* a row of the top-5 panel: explain that class */
        app_target_rank(app, rank);
        return;
    }
    if (app->cmp.on) { /* a patch of either pane: pane A's patch at that place the query */
        int p = app_compare_patch_a(app);
        if (p < 0) return;
        int gw = app->model->vit.cfg.grid_w;
        app_set_query(app, p / gw, p % gw);
    } else if (app->overview) {
        if (app->hover_cell < 0) return;
        app_open_cell(app, app->hover_cell);
        app->hover_cell = -1;
    } else {
        if (app->hover_row < 0) return;
        app_set_query(app, app->hover_row, app->hover_col);
    }
    app_update_map(app);
}

/* A click: its action; one that changes the view ends a perturbation test. */
static void app_click(App *app, int x, int y) {
    View before = app->view;
    ViewOverview overview = app->overview;
    app_click_action(app, x, y);
    if (app_view_moved(app, &before, overview)) app_perturb_stop(app);
}

/* --- the one switch -------------------------------------------------------------- */

void app_handle_event(App *app, const SDL_Event *e) {
    switch (e->type) {
    case SDL_QUIT: app->running = 0; break;
    case SDL_KEYUP: app->key_mod = e->key.keysym.mod; break;
    case SDL_KEYDOWN:
        app->key_mod = e->key.keysym.mod;
        /* the first key since the last frame: VITLENS_TRACE's key-to-frame latency */
        if (!app->t_input) app->t_input = SDL_GetPerformanceCounter();
        if (app_text_key(app, &e->key.keysym)) break;    /* the text box open: it types */
        if (app_palette_key(app, &e->key.keysym)) break; /* the palette open: its keys */
        app_key_press(app, &e->key.keysym);
        break;
    case SDL_TEXTINPUT:
        app_text_input(app, e->text.text);
        app_palette_input(app, e->text.text);
        break;
    case SDL_MOUSEWHEEL: { /* the palette's rows scroll, three at a notch */
        int y = e->wheel.direction == SDL_MOUSEWHEEL_FLIPPED ? -e->wheel.y : e->wheel.y;
        app_palette_wheel(app, -3 * y);
        break;
    }
    case SDL_MOUSEMOTION:
        app_hover(app, e->motion.x, e->motion.y);
        if (app->drag_active) app_interv_patch(app);
        break;
    case SDL_MOUSEBUTTONDOWN:
        if (e->button.button != SDL_BUTTON_LEFT) break;
        if ((app->key_mod & KMOD_CTRL) && app->has_scene && !app->overview && !app->lesson.on &&
            app->ctrl_hover < 0 && !app->palette.open) {
            app_hover(app, e->button.x, e->button.y); /* Ctrl+click / drag: patches */
            app->drag_active = 1, app->drag_moved = 0;
            app_interv_patch(app);
            break;
        }
        app_click(app, e->button.x, e->button.y);
        break;
    case SDL_MOUSEBUTTONUP:
        if (e->button.button == SDL_BUTTON_LEFT && app->drag_active) {
            app->drag_active = 0;
            if (app->drag_moved) {
                app->error[0] = '\0';
                char change[96];
                snprintf(change, sizeof change, "%d patch%s dropped, %d filled",
                         app->iv_spec.n_drop, app->iv_spec.n_drop == 1 ? "" : "es",
                         app->iv_spec.n_fill);
                app_interv_apply(app, &drag_before, change);
            }
        }
        /* a control held down is drawn pressed until here */
        if (app->ctrl_pressed >= 0) app->ctrl_pressed = -1, app->dirty = 1;
        break;
    case SDL_DROPFILE: /* with Shift held: the compare view's pane B */
        if (e->drop.file && (SDL_GetModState() & KMOD_SHIFT) && app->has_scene)
            app_compare_drop(app, e->drop.file);
        else if (e->drop.file)
            app_open(app, e->drop.file);
        SDL_free(e->drop.file);
        break;
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED ||
            e->window.event == SDL_WINDOWEVENT_EXPOSED ||
            e->window.event == SDL_WINDOWEVENT_SHOWN) {
            /* the window's pixels are lost: the partial present would leave stale areas */
            ren_expose(&app->ren);
            app->dirty = 1;
            app->lesson.ahead = 1; /* the lesson's pictures again, at the new size */
        }
        if (e->window.event == SDL_WINDOWEVENT_LEAVE)
            app->hover_row = app->hover_col = app->hover_cell = app->ctrl_hover = -1,
            app->dirty = 1;
        break;
    default:
        if (e->type == app->ev_done && e->user.data1 == &app->texter)
            app_classes_done(app); /* the classes' texts embedded */
        else if (e->type == app->ev_done)
            app_job_done(app); /* the worker's job finished */
        else if (e->type == app->ev_live)
            app_live_event(app); /* a video's frame */
        else if (e->type == app->ev_done + 2)
            app_record_event(app); /* a recording's file finished, or failed */
        break;
    }
}
