/* trace.c - VITLENS_TRACE=1: what the window did, on stdout, one line per event, for
 * the tests and bench/app_latency.py to read: "startup WHAT MS" along the launch,
 * "maps ..." when a view's maps go on screen (with a hash of them), "controls ..." where
 * the on-screen buttons are when that changed, "palette ..." the command palette's rows
 * when they changed, "frame N ..." with
 * the state of every drawn frame and where its time went, "status LEFT | RIGHT", and
 * "error MSG" when the frame shows an error, "preds ..." the top-5 panel when it changed,
 * "classes ..." the zero-shot classes' texts embedded (classes.c), "perturb done ..." with a
 * finished perturbation test's curve. */
#include "window/trace.h"
#include "window/app.h"
#include "render/colormap.h"

#include <stdio.h>
#include <string.h>

static Uint64 t_main; /* the launch's time 0 */

static const char *const PERT_PHASE_NAMES[] = {"off", "computing", "playing", "done"};

/* main() calls it first thing: the startup lines' times count from there. */
void trace_clock_start(void) {
    t_main = SDL_GetPerformanceCounter();
}

/* "startup WHAT MS": the milliseconds since trace_clock_start, one line per stage. */
void trace_startup_at(const App *app, const char *what, Uint64 t) {
    if (!app->trace) return;
    printf("startup %s %.1f\n", what,
           (double)(t - t_main) * 1e3 / (double)SDL_GetPerformanceFrequency());
}

void trace_startup(const App *app, const char *what) {
    trace_startup_at(app, what, SDL_GetPerformanceCounter());
}

/* FNV-1a of n floats' bytes: the map on screen, compared across runs. */
static unsigned long trace_hash(const float *x, size_t n) {
    const unsigned char *b = (const unsigned char *)x;
    unsigned long h = 2166136261ul;
    for (size_t i = 0; i < n * sizeof *x; i++) h = ((h ^ b[i]) * 16777619ul) & 0xfffffffful;
    return h;
}

void trace_maps(const App *app, const ViewMaps *m, const char *by) {
    if (!app->trace) return;
    size_t n = (size_t)m->w * m->h * map_kind_channels(m->view.kind);
    printf("maps by=%s kind=%s layer=%d head=%d query=%d target=%d overview=%d shared=%d "
           "lo=%.9g hi=%.9g map=%08lx atlas=",
           by, MAP_KINDS[m->view.kind].tag, m->view.layer, m->view.head, m->view.query,
           m->view.target, (int)m->overview, m->shared, (double)m->lo, (double)m->hi,
           trace_hash(app->map, n));
    if (m->n_atlas)
        printf("%08lx\n", trace_hash(app->atlas, (size_t)m->n_atlas * n));
    else
        printf("-\n");
}

void trace_compare_maps(const App *app) {
    if (!app->trace) return;
    printf("compare maps panes=%d linked=%d diff=%d spearman=%.9g iou=%.9g n=%d ms=%.2f "
           "ms_picture=%.2f",
           app->cmp.n_panes, app->cmp.linked, app->cmp.has_diff, app->cmp.stats.spearman,
           app->cmp.stats.iou, app->cmp.stats.n, app->cmp.ms_maps, app->cmp.ms_picture);
    for (int i = 0; i < 2; i++) {
        const Scene *sc = i ? &app->cmp.scene : app_scene(app);
        const ViewMaps *m = &app->cmp.m[i];
        const VitRun *r = &sc->run;
        size_t n = (size_t)m->w * m->h * map_kind_channels(m->view.kind);
        printf(" %c=kind:%s,layer:%d,head:%d,query:%d,target:%d,L:%d,H:%d,grid:%d,%d,np:%d,"
               "crop:%d,%d,%d,%d,src:%d,%d,map:%08lx,lo:%.9g,hi:%.9g",
               'a' + i, MAP_KINDS[m->view.kind].tag, m->view.layer, m->view.head, m->view.query,
               m->view.target, r->cfg.n_layers, r->cfg.n_heads, r->cfg.grid_h, r->cfg.grid_w,
               r->cfg.n_prefix, r->crop_x, r->crop_y, r->crop_w, r->crop_h, sc->src_w, sc->src_h,
               app->cmp.ok[i] ? trace_hash(m->map, n) : 0ul, (double)m->lo, (double)m->hi);
    }
    printf("\n");
}

/* The compare view's frame: the panes' places (framebuffer px) and the cursor. */
static void trace_compare_frame(const App *app) {
    const Ren *r = &app->ren;
    printf("compare frame panes=%d hover=%d,%d box=%d", app->cmp.n_panes, app->cmp.hover_pane,
           app->cmp.hover_patch, app->cmp.box_patch);
    for (int i = 0; i < app->cmp.n_panes && app->cmp.w > 0; i++) {
        double sx = (double)r->image_w_px / app->cmp.w, sy = (double)r->image_h_px / app->cmp.h;
        printf(" pane%d=%.1f,%.1f,%.1f,%.1f", i, r->image_x + app->cmp.pane_x[i] * sx,
               r->image_y + app->cmp.pane_y[i] * sy, app->cmp.pane_w[i] * sx,
               app->cmp.pane_h[i] * sy);
    }
    printf("\n");
}

/* The trace's line of a finished run: every step's probability and top-1, the order. */
static void trace_perturb_done(const App *app) {
    const Perturbation *p = &app->pert.run;
    printf("perturb done mode=%s target=%d steps=%d patches=%d auc=%.9g curve=",
           p->most_first ? "positive" : "negative", p->target, p->n_steps, p->n_patches,
           vit_auc(p->probs, p->n_steps + 1));
    for (int s = 0; s <= p->n_steps; s++) printf("%s%.9g", s ? "," : "", (double)p->probs[s]);
    printf(" top=");
    for (int s = 0; s <= p->n_steps; s++) printf("%s%d", s ? "," : "", p->top[s]);
    printf(" order=");
    for (int i = 0; i < p->n_patches; i++) printf("%s%d", i ? "," : "", p->order[i]);
    printf("\n");
}

/* The view and the window's state: "frame N layer=... listw=W ". */
static void trace_frame_state(const App *app, const RenFrame *f) {
    const Ren *r = &app->ren;
    const Scene *sc = app_scene(app);
    int top1 = -1; /* the prediction: what an intervention changes */
    if (sc && sc->run.probs && sc->run.cfg.n_classes > 0)
        vit_top_k(&top1, sc->run.probs, sc->run.cfg.n_classes, 1);
    /* the prefix tokens' share of the view's row: "CLS:0.1234,reg1:0.0567" */
    char prefix[VIT_MAX_PREFIX * 20] = "-";
    for (int i = 0, k = 0; sc && app->has_prefix && i < sc->run.cfg.n_prefix; i++)
        k += snprintf(prefix + k, sizeof prefix - (size_t)k, "%s%s:%.4f", i ? "," : "",
                      app->prefix_name[i], (double)app->prefix_share[i]);
    /* rollout= stays for bench/app_latency.py; kind= is the view's kind (its file tag) */
    printf(
        "frame %lu layer=%d head=%d rollout=%d kind=%s target=%d discard=%.2f overlay=%d "
        "opacity=%.2f grid=%d "
        "help=%d busy=%d loads=%lu scene=%d error=%d image=%d,%d,%d image_h=%d prefix=%s "
        "window=%d,%d query=%d overview=%d colormap=%s scale=%s bilinear=%d mask=%d "
        "fraction=%d kept=%d preds=%d distance=%d hover=%d,%d cell=%d fullscreen=%d "
        "image_at=%d saves=%lu cells=%d,%d,%d,%d,%d,%d panel=%d,%d class=%d explained=%d "
        "shown=%s marked=%d joint=%d list=%d listmark=%d highnorm=%d picking=%d listw=%d "
        "lesson=%d/%d lstep=%s llayer=%d lhead=%d lpatch=%d,%d lshown=%d ms_lpicture=%.2f "
        "ms_lupload=%.2f ms_lgui=%.2f "
        "whatif=%d,%d,%d,%d,%d:%g fill=%d plain=%d top1=%d:%.6f "
        "controls=%d chover=%s cpressed=%s kmenu=%d typing=%d tip=%s hpage=%d/%d hpx=%d "
        "hbox=%d,%d,%d,%d palette=%d psel=%s prows=%d pcaframe=%ld cwait=%d ",
        app->frames, app->view.layer, app->view.head, app->view.kind == MAP_ROLLOUT,
        MAP_KINDS[app->view.kind].tag, app->view.target, (double)app->view.discard_ratio,
        app->overlay, (double)app->opacity, app->grid, app->help, app->busy, app->loads,
        app->has_scene, app->error[0] != 0, r->image_x, r->image_y, r->image_w_px, r->image_h_px,
        prefix, r->fb_w, r->fb_h, app->view.query, app->overview, colormap_names[app->colormap],
        app->shared_scale ? "layer" : "map", app->bilinear, app->show_mask, app->mask_pct,
        app->mask_kept, f->n_preds, f->distance != NULL, app->hover_row, app->hover_col,
        app->hover_cell, app->fullscreen, app->image_at, app->saves, r->cells_x, r->cells_y,
        r->cell_w_px, r->cell_h_px, r->cell_step_x, r->cell_step_y, r->panel_x, r->panel_w,
        sc ? view_class(&app->view, sc) : -1, sc ? sc->expl_target : -1,
        app->shown_kind >= 0 ? MAP_KINDS[app->shown_kind].tag : "none", f->pred_marked,
        app->view.joint, app->n_list, app->list_marked, app->n_high_norm, app->picking, r->list_w,
        app->lesson.on ? app->lesson.at + 1 : 0, app->lesson.on ? app->lesson.script.n : 0,
        app->lesson.on ? LESSON_STEP_INFO[app->lesson.script.lines[app->lesson.at].step].name : "-",
        app->lesson.layer, app->lesson.head, app->lesson.row, app->lesson.col, app->lesson.shown,
        (double)app->lesson.ms_picture, (double)app->lesson.ms_upload, (double)app->lesson.ms_gui,
        app->iv_spec.n_ablate, app->iv_spec.n_drop, app->iv_spec.n_fill, (int)app->iv_spec.pos,
        app->iv_spec.temp_layer, (double)app->iv_spec.temperature, app->patch_fill,
        sc ? sc->has_plain : 0, top1, sc && top1 >= 0 ? (double)sc->run.probs[top1] : 0.0,
        f->n_controls, app_control_name(app->ctrl_hover), app_control_name(app->ctrl_pressed),
        f->n_menu > 0, app->typing,
        !f->tooltip                             ? "none"
        : f->tooltip == app_control_tip(app)    ? "control"
        : app->menu_hover >= 0 && f->n_menu > 0 ? "menu"
                                                : "map",
        app->help ? app->help_page + 1 : 0, app->help ? app->ren.help_pages : 0,
        app->help ? app->ren.help_px : 0, r->help_box[0], r->help_box[1], r->help_box[2],
        r->help_box[3], app->palette.open, app_palette_selected(app),
        app->palette.open ? app->palette.n_match : 0,
        sc && sc->pca_hold ? pca_hold_frame(sc->pca_hold, app->view.layer) : -1L,
        app->model->clip && app->model->clip->pending ? 1 : 0);
}

/* "controls NAME=x,y,w,h,enabled,active ...": the on-screen controls as drawn, framebuffer
 * px (the tests click them there), then the kinds' menu's rows when it is open
 * ("menu-TAG=..."), before the frame line it belongs to, when it changed
 * since the last one printed ("controls" alone: none shown). */
static void trace_controls(const App *app, const RenFrame *f) {
    static char last[(REN_MAX_CONTROLS + REN_MAX_MENU) * 64] = "-";
    char line[sizeof last];
    int len = snprintf(line, sizeof line, "controls");
    for (int k = 0; k < f->n_controls && k < app->ren.n_control_boxes; k++) {
        const DlBox *b = &app->ren.control_box[k];
        len += snprintf(line + len, sizeof line - (size_t)len, " %s=%d,%d,%d,%d,%d,%d",
                        app_control_name(app->ctrl_row[k]), b->x0, b->y0, b->x1 - b->x0,
                        b->y1 - b->y0, f->controls[k].enabled, f->controls[k].active);
        if (len >= (int)sizeof line) break;
    }
    for (int k = 0; k < f->n_menu && k < app->ren.n_menu_boxes && len < (int)sizeof line; k++) {
        const DlBox *b = &app->ren.menu_box[k];
        len += snprintf(line + len, sizeof line - (size_t)len, " menu-%s=%d,%d,%d,%d,%d,%d",
                        MAP_KINDS[k].tag, b->x0, b->y0, b->x1 - b->x0, b->y1 - b->y0,
                        f->menu[k].enabled, f->menu[k].active);
    }
    if (strcmp(line, last) == 0) return;
    snprintf(last, sizeof last, "%s", line);
    printf("%s\n", line);
}

/* "preds rows=CLASS:PROB,... title=TITLE": the top-5 panel as drawn (its classes, their
 * probabilities, its title), before the frame line it belongs to, when it changed. */
static void trace_preds(const App *app, const RenFrame *f) {
    static char last[1024] = "-";
    char line[sizeof last];
    const Scene *sc = app_scene(app);
    int len = snprintf(line, sizeof line, "preds rows=");
    int top[REN_MAX_PREDS], k = f->n_preds;
    if (sc && sc->run.probs && k > 0 && k <= sc->run.cfg.n_classes) {
        vit_top_k(top, sc->run.probs, sc->run.cfg.n_classes, k);
        for (int i = 0; i < k && len < (int)sizeof line; i++)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s%d:%.9g", i ? "," : "",
                            top[i], (double)sc->run.probs[top[i]]);
    }
    if (len < (int)sizeof line)
        snprintf(line + len, sizeof line - (size_t)len, " title=%.200s",
                 f->pred_title ? f->pred_title : "-");
    if (strcmp(line, last) == 0) return;
    snprintf(last, sizeof last, "%s", line);
    printf("%s\n", line);
}

void trace_frame(App *app, const RenFrame *f, const FrameTimes *t) {
    const Ren *r = &app->ren;
    trace_controls(app, f);
    trace_preds(app, f);
    app_palette_trace(app);
    trace_frame_state(app, f);
    /* the perturbation test: its order, phase, step, the probability there, the plot */
    const Perturbation *p = &app->pert.run;
    int on = app->pert.phase >= PERT_PLAYING && p->probs && app->pert.step >= 0;
    /* where the frame's time went, ms: from the first key or click handled since the
     * last frame (its action, the map's update), recording the primitives and issuing
     * the draws, rasterising them, copying to the window and the swap */
    double ms = 1e3 / (double)SDL_GetPerformanceFrequency();
    /* settled=0: a new window size shown with a swap of the old back buffer (see
     * ren_present); the frame that shows this state follows at once */
    printf("redraw=%d redraw_px=%ld mismatch=%ld exact=%d settled=%d ms_input=%.2f ms_draw=%.2f "
           "ms_raster=%.2f ms_swap=%.2f ",
           r->last_rects, r->last_px, r->last_mismatch, r->n_exact, !app->again,
           app->t_input ? (double)(t->shown - app->t_input) * ms : -1.0,
           (double)(t->drawn - t->start) * ms, (double)(t->rastered - t->drawn) * ms,
           (double)(t->shown - t->rastered) * ms);
    app->t_input = 0;
    printf("perturb=%s pphase=%s pstep=%d/%d pprob=%.6f premoved=%d plot=%d,%d,%d,%d\n",
           app->pert.phase == PERT_OFF ? "off"
           : app->pert.most_first      ? "positive"
                                       : "negative",
           PERT_PHASE_NAMES[app->pert.phase], on ? app->pert.step : 0, on ? p->n_steps : 0,
           on ? (double)p->probs[app->pert.step] : -1.0,
           on ? vit_perturb_count(app->pert.step, p->n_steps, p->n_patches) : 0, r->plot_x,
           r->plot_y, r->plot_w, r->plot_h);
    if (app->cmp.on) trace_compare_frame(app);
    printf("status %s | %s\n", app->status_left, app->status_right);
    if (app->error[0]) printf("error %s\n", app->error); /* the message the frame shows */
    if (app->pert.announce && app->pert.phase == PERT_DONE) trace_perturb_done(app);
    app->pert.announce = 0;
}
