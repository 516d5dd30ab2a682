/* frame.c - one frame: the App as a RenFrame (status line, panels, overview layout,
 * tooltip, the perturbation test's plot), drawn into the canvas, saved as a PNG when S
 * asked for it, presented, then traced. The renderer (render/) knows nothing of the App:
 * everything it draws is in the RenFrame. */
#include "window/app.h"
#include "headless/export.h"
#include "window/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the frame's parts -------------------------------------------------------- */

/* The side panels' contents: top-5 and the attention distance plot. While the kind is
 * class-specific, the explained class is marked in the top-5. */
static void app_panels(App *app, RenFrame *f) {
    const Scene *sc = app_scene(app);
    const VitConfig *c = &app->model->vit.cfg;
    if (!sc) return;
    /* the run's classes: a CLIP head just made larger (a first phrase) is the model's before
     * the photo's pass has run again */
    int C = sc->run.cfg.n_classes;
    if (app->show_preds && C > 0 && sc->run.probs) {
        int top[REN_MAX_PREDS], k = C < REN_MAX_PREDS ? C : REN_MAX_PREDS;
        vit_top_k(top, sc->run.probs, C, k);
        for (int i = 0; i < k; i++) {
            const char *label = model_label(app->model, top[i]);
            char cls[32], delta[32] = "";
            snprintf(cls, sizeof cls, "class %d", top[i]);
            if (sc->has_plain) /* what if: the change from the model as it is, in points */
                snprintf(delta, sizeof delta, "  %+.1f",
                         100.0 * (double)(sc->run.probs[top[i]] - sc->plain_probs[top[i]]));
            snprintf(app->pred_text[i], sizeof app->pred_text[i], "%.90s%s", label ? label : cls,
                     delta);
            f->pred_labels[i] = app->pred_text[i];
            f->pred_probs[i] = sc->run.probs[top[i]];
            if (MAP_KINDS[app->view.kind].uses_target && top[i] == view_class(&app->view, sc))
                f->pred_marked = i;
        }
        f->n_preds = k;
        int sig = clip_sigmoid(app->model->clip); /* SigLIP: independent sigmoids, said so */
        f->pred_title = MAP_KINDS[app->view.kind].uses_target
                            ? (sig ? "sigmoids (not summing to 1): click or 1-5 to explain"
                                   : "top-5: click or 1-5 to explain")
                        : sc->has_plain ? "top-5, what if (+/- points)"
                        : sig           ? "SigLIP: each a sigmoid, not summing to 1 (/: a phrase)"
                        : app->model->clip ? "zero-shot top-5 (/: a phrase)"
                                           : NULL;
    }
    /* --classes' texts still on the second worker: the panel says so (with a phrase's row) */
    if (app->show_preds && app_classes_waiting(app, app->pred_wait, sizeof app->pred_wait)) {
        f->pred_title = app->pred_wait;
        if (!sc->run.probs) f->n_preds = 0;
    }
    const float *dist = sc->distance; /* computed by the worker (scene_run) */
    if (app->show_distance && dist) {
        int L = c->n_layers, H = c->n_heads;
        float mx = 0.0f, layer_mean = 0.0f;
        for (int i = 0; i < L * H; i++) mx = dist[i] > mx ? dist[i] : mx;
        for (int h = 0; h < H; h++) layer_mean += dist[app->view.layer * H + h] / H;
        f->distance = dist;
        f->dist_layers = L, f->dist_heads = H;
        f->dist_layer = app->view.layer, f->dist_head = app->view.head;
        /* the y axis's top: the next multiple of 20 px strictly above the largest distance,
         * a round tick that no dot sits on */
        f->dist_max_px = 20.0f * ceilf(mx / 20.0f + 1e-6f);
        if (app->view.head < H)
            snprintf(app->dist_caption, sizeof app->dist_caption,
                     "layer %d, head %d: %.0f px (layer mean %.0f)", app->view.layer + 1,
                     app->view.head + 1, (double)dist[app->view.layer * H + app->view.head],
                     (double)layer_mean);
        else
            snprintf(app->dist_caption, sizeof app->dist_caption, "layer %d: mean of heads %.0f px",
                     app->view.layer + 1, (double)layer_mean);
        f->dist_caption = app->dist_caption;
    }
}

/* Overview layout and labels. */
static void app_overview_frame(App *app, RenFrame *f) {
    const VitConfig *c = &app->model->vit.cfg;
    int H = c->n_heads, K = H + VIEW_N_FUSIONS, L = c->n_layers;
    /* labels of the K = H + 3 maps per layer: heads, then the fusions; the table's rows
     * use the same strings */
    for (int k = 0; k < K; k++) {
        if (k < H) /* an ablated head of the layer on screen says so (what if?) */
            snprintf(app->cell_labels[k], sizeof app->cell_labels[k], "head %d%s", k + 1,
                     app->overview == VIEW_HEADS &&
                             interv_is_ablated(&app->iv_spec, app->view.layer + 1, k + 1)
                         ? ", ablated"
                         : "");
        else
            snprintf(app->cell_labels[k], sizeof app->cell_labels[k], "%s",
                     vit_fusion_name((VitFusion)(k - H)));
        app->cell_label_ptrs[k] = app->cell_labels[k];
        app->row_ptrs[k] = app->cell_labels[k];
    }
    if (app->overview == VIEW_HEADS) {
        /* the most columns that keep the thumbnails largest in a 4:3-ish area */
        f->n_cols = (int)ceil(sqrt((double)K * 1.2));
        f->n_rows = (K + f->n_cols - 1) / f->n_cols;
        f->col_stride = 1, f->row_stride = f->n_cols;
        f->selected = app->view.head;
        f->cell_labels = app->cell_label_ptrs;
    } else { /* the table: a column per layer, a row per head or fusion (atlas [L, K]) */
        for (int l = 0; l < L; l++) {
            snprintf(app->col_text[l], sizeof app->col_text[l], "%d", l + 1);
            app->col_ptrs[l] = app->col_text[l];
        }
        f->n_cols = L, f->n_rows = K;
        f->col_stride = K, f->row_stride = 1;
        f->selected = app->view.layer * K + app->view.head;
        f->col_labels = app->col_ptrs;
        f->row_labels = app->row_ptrs;
    }
}

/* The current map's value under the mouse: at the map's resolution, the patch's
 * for a patch map (as ren_patch_at finds it), the input pixel's for a pixel map. */
static float app_hover_value(const App *app) {
    const Ren *r = &app->ren;
    int w = r->image_w_px > 0 ? r->image_w_px : 1, h = r->image_h_px > 0 ? r->image_h_px : 1;
    /* framebuffer px -> map cell: the offset into the drawn crop scaled to the map's size */
    int x = (int)((long)((int)app->mouse_x - r->image_x) * app->map_w / w);
    int y = (int)((long)((int)app->mouse_y - r->image_y) * app->map_h / h);
    x = x < 0 ? 0 : x >= app->map_w ? app->map_w - 1 : x;
    y = y < 0 ? 0 : y >= app->map_h ? app->map_h - 1 : y;
    if (MAP_KINDS[app->shown_kind >= 0 ? app->shown_kind : 0].rgb) /* 1 foreground, 0 not */
        return app->map[((size_t)y * app->map_w + x) * 4 + 3];
    return app->map[y * app->map_w + x];
}

/* S: the frame as drawn, as a PNG named after the view. */
static void app_save(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc) {
        snprintf(app->notice, sizeof app->notice, "nothing to save yet");
        return;
    }
    char name[512], path[1600], msg[2000];
    View v = app->view;
    v.target = view_class(&v, sc); /* the class in the name, not "top-1" */
    char stem[64];
    scene_target_stem(stem, sizeof stem, app->model, sc, v.target);
    view_file_name(name, sizeof name, sc->name, app->model->name, &v, &app->model->vit.cfg,
                   app->overview == VIEW_TABLE   ? "table"
                   : app->overview == VIEW_HEADS ? "heads"
                                                 : NULL,
                   stem);
    snprintf(path, sizeof path, "%s/%s", app->opt->save_dir ? app->opt->save_dir : ".", name);
    /* the pixels of the canvas just drawn, so the file is what the user sees */
    int w, h;
    uint8_t *rgb = ren_read_rgb(&app->ren, &w, &h);
    if (!rgb) {
        app_set_error(app, "out of memory for the screenshot");
        return;
    }
    if (export_png(path, rgb, w, h, msg, sizeof msg)) {
        app_set_error(app, msg);
    } else {
        app->saves++;
        snprintf(app->notice, sizeof app->notice, "saved %s", name);
        printf("saved %s\n", path); /* the signal scripts and the GUI tests wait for */
    }
    free(rgb);
}

/* The App as a frame: everything the renderer draws, its strings pointing into app. */
static RenFrame app_frame(App *app) {
    int qr = -1, qc = -1; /* the query box, for a kind whose map reads the query */
    if (MAP_KINDS[app->view.kind].uses_query) app_query_patch(app, &qr, &qc);
    RenFrame f = {
        .overlay = app->overlay,
        .grid = app->grid,
        .help = app->help,
        .help_page = app->help_page,
        .busy = app->busy,
        .opacity = app->opacity,
        .status_left = app->status_left,
        .status_right = app->status_right,
        .input = app->typing ? app->typed : NULL, /* CLIP's text box, on the status line */
        .input_prompt = "find:",
        .input_selected = app->typed_all,
        .error = app->error[0] ? app->error : NULL,
        .placeholder = app->busy ? "loading\xe2\x80\xa6" : "drop a photo here",
        .help_rows = app->keys.rows,
        .n_help = app->keys.n,
        .spinner_turns = (float)(SDL_GetTicks() % 1000u) / 1000.0f,
        .mode = app->overview,
        .bilinear = app->bilinear,
        .query_row = qr,
        .query_col = qc,
        /* the mask (M) over a map with a colormap, or a kind's outline of the tokens its
         * list names, once that kind's map is the one on screen */
        .mask = (app->show_mask && !MAP_KINDS[app->view.kind].rgb) ||
                (MAP_KINDS[app->view.kind].outline && app->shown_kind == app->view.kind &&
                 app->n_high_norm > 0),
        .rgb = MAP_KINDS[app->view.kind].rgb && app->shown_kind == app->view.kind,
        .n_list = app->n_list,
        .list_title = app->list_title,
        .list_labels = app->list_labels,
        .list_values = app->list_values,
        .list_right = app->list_right,
        .list_marked = app->list_marked,
        .legend_hi = app->legend_hi,
        .legend_lo = app->legend_lo,
        .legend_caption = app->legend_caption,
        .selected = -1,
        .pred_marked = -1,
        .n_prefix = app->has_scene && app->has_prefix ? app_scene(app)->run.cfg.n_prefix : 0,
        .prefix_share = app->prefix_share,
        .prefix_names = app->prefix_names,
        .control_hover = -1,
        .control_pressed = -1,
        .menu_of = -1,
        .menu_hover = -1,
    };
    app_controls_frame(app, &f);
    if (app->overview) app_overview_frame(app, &f);
    app_panels(app, &f);
    if (app->pert.phase != PERT_OFF && app->has_scene) app_perturb_frame(app, &f);
    if (app->lesson.on) app_lesson_frame(app, &f);
    if (app->cmp.on) app_compare_frame(app, &f);
    app_palette_frame(app, &f);
    return f;
}

/* The tooltip under the mouse: a map kind's title on its row of the kinds' menu, an
 * on-screen control's (what it does, its key), the map's
 * value at a patch of the single view, or the overview cell's layer and head. */
static void app_tooltip(App *app, RenFrame *f) {
    const Scene *sc = app_scene(app);
    if (app->menu_hover >= 0 && f->n_menu > 0) { /* a row of the kinds' menu: its title */
        f->tooltip = MAP_KINDS[app->menu_hover].title;
    } else if (app_control_tip(app) && f->n_menu == 0) {
        /* a control's: not while the kinds' menu is open, whose last rows it would hide (the
         * kind button's tip sits above the strip, where the menu ends) */
        f->tooltip = app_control_tip(app);
    } else if (sc && app->hover_row >= 0 && !app->overview && app->map_w > 0) {
        float v = app_hover_value(app);
        if (isnan(v)) /* a patch an intervention took out of the sequence */
            snprintf(app->tooltip, sizeof app->tooltip, "row %d, col %d  \xc2\xb7  dropped",
                     app->hover_row + 1, app->hover_col + 1);
        else
            snprintf(app->tooltip, sizeof app->tooltip, "row %d, col %d  \xc2\xb7  %.3g",
                     app->hover_row + 1, app->hover_col + 1, (double)v);
        f->tooltip = app->tooltip;
    } else if (sc && app->hover_cell >= 0 && app->overview) {
        int K = sc->run.cfg.n_heads + VIEW_N_FUSIONS;
        int l = app->overview == VIEW_TABLE ? app->hover_cell / K : app->view.layer;
        int k = app->overview == VIEW_TABLE ? app->hover_cell % K : app->hover_cell;
        snprintf(app->tooltip, sizeof app->tooltip, "layer %d  \xc2\xb7  %s", l + 1,
                 app->cell_labels[k]);
        f->tooltip = app->tooltip;
    }
    f->tip_x = app->mouse_x, f->tip_y = app->mouse_y;
    /* a control's from the strip's top: the renderer puts it above the strip, whose
     * buttons it would hide from below the pointer */
    if (f->tooltip && f->tooltip == app_control_tip(app) && app->ren.n_control_boxes > 0)
        f->tip_y = (float)app->ren.control_box[0].y0, f->tip_side = 1;
    /* a menu row's left of the menu, level with the row: the rows stay readable */
    const Ren *r = &app->ren;
    if (app->menu_hover >= 0 && f->n_menu > 0 && app->menu_hover < r->n_menu_boxes)
        f->tip_x = (float)r->menu_box[0].x0, f->tip_y = (float)r->menu_box[app->menu_hover].y0,
        f->tip_side = 2;
}

void app_draw(App *app) {
    app_compare_prepare(app); /* the compare view's panes, when it is on */
    app_update_status(app);
    if (app->lesson.on) app_lesson_status(app);
    if (app->cmp.on) app_compare_status(app);
    RenFrame f = app_frame(app);
    if (!app->lesson.on && !app->cmp.on && !app->palette.open)
        app_tooltip(app, &f); /* none over the palette */
    FrameTimes t;
    t.start = SDL_GetPerformanceCounter();
    ren_draw(&app->ren, &f);
    t.drawn = SDL_GetPerformanceCounter();
    if (app->trace) glFinish(); /* for the trace's times: the rasterising apart */
    t.rastered = SDL_GetPerformanceCounter();
    if (app->save_pending) {
        app->save_pending = 0;
        app_save(app);
        if (app->notice[0]) { /* show "saved" at once, without the notice in the file */
            app_update_status(app);
            ren_draw(&app->ren, &f);
        }
    }
    app_record_frame(app); /* Ctrl+R: the frame as drawn, to the encoder */
    /* the window's size changed under us: app->again asks the loop for a whole frame */
    app->again = ren_present(&app->ren);
    app->frames++;
    if (app->trace || app->announce) glFinish(); /* the frame is on screen before we say so */
    t.shown = SDL_GetPerformanceCounter();
    app_live_presented(app, t.shown); /* a video frame's latency: from its read to here */
    if (app->announce && app->has_scene) {
        trace_startup(app, "first-map-frame");
        printf("ready %s\n", app_scene(app)->path);
        app->announce = 0;
    }
    if (app->trace) trace_frame(app, &f, &t);
    fflush(stdout);
}
