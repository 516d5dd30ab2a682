/* lesson.c - the lesson view, a mode of the window (issue 24; headless/lesson.h): the
 * steps of a lesson script, each drawn on the CPU by lesson_draw, the same pixels as
 * --lesson-export's PNGs, and shown as the window's picture.
 *
 * The numbers (LessonData) are computed only while the worker is idle (they use the front
 * Scene's run and its thread pool): on the GUI thread once when the photo or the model
 * changes (the filters' PCA, the position similarity, one block), then per step a re-read
 * of that block (another head or token); one block rerun (another layer) is a worker job,
 * during which the picture on screen stays and keys only move the selection (the newest
 * wins). A step that keeps the selection is a redraw and an upload, no engine work. */
#include "window/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A script's problems: every line on stderr, the first on the error line. */
static void lesson_report(App *app, const char *msgs) {
    if (!msgs[0]) return;
    fputs(msgs, stderr);
    size_t n = strcspn(msgs, "\n");
    snprintf(app->error, sizeof app->error, "%.*s", (int)(n < 500 ? n : 500), msgs);
}

/* The script: --lesson FILE, else the default lesson beside the built-in model, else the
 * built-in list of every step (lesson_default_load: --lesson-export's too). Problems go to
 * the error line and stderr. */
static void lesson_load_script(App *app) {
    LessonScript *s = &app->lesson.script;
    int rc = 0;
    if (app->opt->lesson_path && lesson_script_load(s, app->opt->lesson_path) < 0) {
        lesson_report(app, s->msgs);
        lesson_script_free(s);
        rc = lesson_script_default(s, -1); /* lesson_check leaves out what the model lacks */
    } else if (app->opt->lesson_path) {
        lesson_report(app, s->msgs); /* lines that did not parse: named, left out */
    } else {
        rc = lesson_default_load(s, app->opt->demo_dir);
        lesson_report(app, s->msgs);
    }
    if (rc < 0) fputs("vitlens: lesson: out of memory\n", stderr);
    app->lesson.loaded = 1;
}

/* The script checked against the model (a bad line of --lesson FILE: named, left out; the
 * default lesson: fitted to the model, as --lesson-export fits it). */
static void lesson_check(App *app) {
    const VitConfig *c = &app->model->vit.cfg;
    LessonScript *s = &app->lesson.script;
    s->msgs[0] = '\0';
    /* the built-in model's lesson on another model: fitted, not reported (lessonfile.h) */
    int has = lesson_model_has(c);
    if (!app->opt->lesson_path && lesson_default_fit(s, c) < 0)
        fputs("vitlens: lesson: out of memory (the steps of this model's kind left out)\n", stderr);
    if (app->opt->lesson_path)
        lesson_script_check(s, c->n_layers, c->n_heads, c->grid_h, c->grid_w, has);
    if (s->msgs[0] && !app->error[0])
        lesson_report(app, s->msgs);
    else if (s->msgs[0])
        fputs(s->msgs, stderr); /* the parser's first problem stays shown */
    if (!s->n) {                /* nothing left: every step the model offers instead */
        lesson_script_free(s);
        lesson_script_default(s, has);
    }
    if (app->lesson.at >= s->n) app->lesson.at = s->n - 1;
    /* the steps' remembered selections are for this model and these steps only */
    int sig[5] = {c->n_layers, c->n_heads, c->grid_h, c->grid_w, s->n};
    if (memcmp(sig, app->lesson.sel_of, sizeof sig)) {
        memcpy(app->lesson.sel_of, sig, sizeof sig);
        memset(app->lesson.visited, 0, sizeof app->lesson.visited);
    }
}

/* The selection (layer, head, row, col; 0-based) step `at` shows when reached from step
 * `from` (-1: none) whose selection is cur: the one it was left at when the teacher was
 * there before (paging back keeps what they chose: issue 38's trial); else, when its line
 * sets the same selection as from's, cur (what the keys made of it); else its line's. */
static void lesson_selection(const App *app, int at, int from, const int cur[4], int out[4]) {
    const VitConfig *c = &app->model->vit.cfg;
    const LessonLine *l = &app->lesson.script.lines[at];
    if (at < LESSON_MAX_LINES && app->lesson.visited[at]) {
        memcpy(out, app->lesson.chosen[at], 4 * sizeof *out);
        return;
    }
    if (from >= 0 && from < app->lesson.script.n) {
        const LessonLine *p = &app->lesson.script.lines[from];
        if (p->layer == l->layer && p->head == l->head && p->row == l->row && p->col == l->col) {
            memcpy(out, cur, 4 * sizeof *out);
            return;
        }
    }
    out[0] = l->layer - 1, out[1] = l->head - 1;
    out[2] = l->row ? l->row - 1 : (c->grid_h - 1) / 2;
    out[3] = l->col ? l->col - 1 : (c->grid_w - 1) / 2;
}

/* Step lesson.at's selection, coming from step `from` (-1: none), whose selection is
 * remembered for paging back. */
static void lesson_take_line(App *app, int from) {
    int cur[4] = {app->lesson.layer, app->lesson.head, app->lesson.row, app->lesson.col}, sel[4];
    if (from >= 0 && from < app->lesson.script.n && from < LESSON_MAX_LINES) {
        memcpy(app->lesson.chosen[from], cur, sizeof cur);
        app->lesson.visited[from] = 1;
    }
    lesson_selection(app, app->lesson.at, from, cur, sel);
    app->lesson.layer = sel[0], app->lesson.head = sel[1];
    app->lesson.row = sel[2], app->lesson.col = sel[3];
}

/* The size to put a picture on the GPU at: where the last frame drew the lesson's picture
 * (so that it is sampled 1:1, no texture larger than its place to read each frame), or
 * the drawing's own size before any. */
static void lesson_target(const App *app, int *w, int *h) {
    const Ren *r = &app->ren;
    int known = r->image_plain && r->image_w_px >= 64 && r->image_h_px >= 36;
    *w = known ? r->image_w_px : LESSON_W, *h = known ? r->image_h_px : LESSON_H;
}

/* The picture's size fits the target (a pixel of rounding either way). */
static int lesson_fits(const LessonPicture *c, int w, int h) {
    return abs(c->w - w) <= 1 && abs(c->h - h) <= 1;
}

/* dst [dh, dw, 3] = src [sh, sw, 3] resampled by area: each destination pixel the mean of
 * the source area it covers (weighted by overlap), rows then columns, in float. */
static int resample_area(uint8_t *dst, int dw, int dh, const uint8_t *src, int sw, int sh) {
    float *tmp = malloc((size_t)sh * dw * 3 * sizeof *tmp);
    if (!tmp) return -1;
    double fx = (double)sw / dw, fy = (double)sh / dh;
    for (int x = 0; x < dw; x++) { /* columns: src [sh, sw] -> tmp [sh, dw] */
        double a = x * fx, b = (x + 1) * fx;
        for (int y = 0; y < sh; y++) {
            float acc[3] = {0, 0, 0};
            for (int i = (int)a; i < sw && i < b; i++) {
                float wgt = (float)((i + 1 < b ? i + 1 : b) - (i > a ? i : a));
                for (int k = 0; k < 3; k++) acc[k] += wgt * src[((size_t)y * sw + i) * 3 + k];
            }
            for (int k = 0; k < 3; k++) tmp[((size_t)y * dw + x) * 3 + k] = acc[k] / (float)fx;
        }
    }
    for (int y = 0; y < dh; y++) { /* rows: tmp [sh, dw] -> dst [dh, dw] */
        double a = y * fy, b = (y + 1) * fy;
        for (int x = 0; x < dw * 3; x++) {
            float acc = 0.0f;
            for (int i = (int)a; i < sh && i < b; i++)
                acc += (float)((i + 1 < b ? i + 1 : b) - (i > a ? i : a)) *
                       tmp[(size_t)i * dw * 3 + x];
            float v = acc / (float)fy;
            dst[(size_t)y * dw * 3 + x] = (uint8_t)(v < 0.0f ? 0 : v > 255.0f ? 255 : v + 0.5f);
        }
    }
    free(tmp);
    return 0;
}

/* The cache slot (and the renderer's picture slot) holding step `at` at the selection,
 * at the size it is drawn at, or -1. */
static int lesson_cached(App *app, int at, int layer, int head, int row, int col) {
    int tw, th;
    lesson_target(app, &tw, &th);
    for (int i = 0; i < LESSON_CACHE; i++) {
        LessonPicture *c = &app->lesson.cache[i];
        if (c->valid && c->at == at && c->layer == layer && c->head == head && c->row == row &&
            c->col == col && c->loads == app->loads && c->colormap == app->colormap &&
            lesson_fits(c, tw, th)) {
            c->used = ++app->lesson.cache_clock;
            return i;
        }
    }
    return -1;
}

/* The numbers for the selection (layer, head, row, col), computed when the photo or the
 * model changed; 0, or -1 (error shown, or the worker busy or now rerunning the block:
 * shown when it is done). */
static int lesson_numbers(App *app, int layer, int head, int row, int col) {
    const Scene *sc = app_scene(app);
    if (!sc || app->busy) return -1;
    const VitConfig *c = &app->model->vit.cfg;
    VitError err;
    int patch = row * c->grid_w + col;
    if (!app->lesson.ld_ok || app->lesson.ld_loads != app->loads) {
        lesson_data_free(&app->lesson.ld);
        app->lesson.ld_ok = 0;
        for (int i = 0; i < LESSON_CACHE; i++) app->lesson.cache[i].valid = 0;
        if (lesson_compute(&app->lesson.ld, app->model, sc, layer, head, patch, &err)) {
            app_set_error(app, err.msg);
            return -1;
        }
        app->lesson.ld_ok = 1, app->lesson.ld_loads = app->loads;
        lesson_check(app); /* the model may be another one */
    } else if (layer != app->lesson.ld.blk.layer) {
        /* another block: rerun on the worker (a forward pass's 1/L: 80 ms on DeiT-Tiny), the
         * picture on screen kept; drawn when it is done (app_lesson_job_done), at the newest
         * selection then: keys meanwhile only move the selection */
        worker_start_lesson(&app->worker, &app->lesson.ld, layer, head, patch);
        app->busy = 1;
        app->dirty = 1;
        return -1;
    } else if (lesson_select(&app->lesson.ld, layer, head, patch, &err)) {
        app_set_error(app, err.msg); /* another head or patch: a re-read of the block */
        return -1;
    }
    return 0;
}

/* Draw step `at` at the selection into the least recently used cache slot and upload it
 * to the renderer's slot of the same number (not shown yet); the slot, or -1 on error. */
static int lesson_picture(App *app, int at, int layer, int head, int row, int col) {
    if (lesson_numbers(app, layer, head, row, col)) return -1;
    int slot = 0;
    for (int i = 1; i < LESSON_CACHE; i++)
        if (app->lesson.cache[i].used < app->lesson.cache[slot].used) slot = i;
    LessonPicture *c = &app->lesson.cache[slot];
    if (!c->rgb && !(c->rgb = malloc((size_t)LESSON_W * LESSON_H * 3))) {
        app_set_error(app, "out of memory for the lesson");
        return -1;
    }
    const LessonLine *l = &app->lesson.script.lines[at];
    /* the script's caption while its selection stands; the step's own once moved */
    int own = l->caption[0] && layer == l->layer - 1 && head == l->head - 1;
    lesson_draw(c->rgb, LESSON_W, LESSON_H, app->ren.has_text ? &app->ren.text : NULL,
                &app->lesson.ld, l->step, app->lesson.script.n, at, own ? l->caption : NULL,
                app->colormap);
    int w, h;
    lesson_target(app, &w, &h);
    const uint8_t *up = c->rgb;
    if (w != LESSON_W || h != LESSON_H) { /* resampled once here, not by every frame */
        uint8_t *fit = realloc(c->fit, (size_t)w * h * 3);
        if (fit) c->fit = fit;
        if (fit && !resample_area(fit, w, h, c->rgb, LESSON_W, LESSON_H))
            up = fit;
        else
            w = LESSON_W, h = LESSON_H; /* out of memory: the GPU scales it */
    }
    *c = (LessonPicture){c->rgb,
                         c->fit,
                         w,
                         h,
                         1,
                         at,
                         layer,
                         head,
                         row,
                         col,
                         app->colormap,
                         app->loads,
                         ++app->lesson.cache_clock};
    ren_picture_upload(&app->ren, slot, up, w, h);
    return slot;
}

/* Show the step on screen: its picture from the cache, or drawn now, uploaded. 0, or -1. */
static int lesson_render(App *app) {
    Uint64 t0 = SDL_GetPerformanceCounter();
    int at = app->lesson.at;
    int slot = lesson_cached(app, at, app->lesson.layer, app->lesson.head, app->lesson.row,
                             app->lesson.col);
    if (slot < 0 && (slot = lesson_picture(app, at, app->lesson.layer, app->lesson.head,
                                           app->lesson.row, app->lesson.col)) < 0)
        return -1;
    Uint64 t1 = SDL_GetPerformanceCounter();
    ren_picture_show(&app->ren, slot, app->lesson.cache[slot].w, app->lesson.cache[slot].h);
    Uint64 t2 = SDL_GetPerformanceCounter();
    double ms = 1e3 / (double)SDL_GetPerformanceFrequency();
    app->lesson.ms_picture = (float)((double)(t1 - t0) * ms);
    app->lesson.ms_upload = (float)((double)(t2 - t1) * ms);
    app->lesson.shown = 1;
    app->lesson.ahead = 1; /* its neighbours next, between events */
    return 0;
}

int app_lesson_prefetch(App *app) {
    if (!app->lesson.on || !app->lesson.shown || app->busy || !app_scene(app)) return 0;
    /* the step on screen first, at the size it is drawn at now (the first picture, or the
     * window resized): sampled 1:1 from the next frame on */
    if (lesson_cached(app, app->lesson.at, app->lesson.layer, app->lesson.head, app->lesson.row,
                      app->lesson.col) < 0) {
        int slot = lesson_picture(app, app->lesson.at, app->lesson.layer, app->lesson.head,
                                  app->lesson.row, app->lesson.col);
        if (slot < 0) return 0;
        ren_picture_show(&app->ren, slot, app->lesson.cache[slot].w, app->lesson.cache[slot].h);
        app->dirty = 1;
        return 1;
    }
    for (int d = 1; d >= -1; d -= 2) { /* the next step first: lessons go forward */
        int at = app->lesson.at + d;
        if (at < 0 || at >= app->lesson.script.n) continue;
        /* the selection Page Down / Up will give it (lesson_take_line) */
        int now[4] = {app->lesson.layer, app->lesson.head, app->lesson.row, app->lesson.col},
            sel[4];
        lesson_selection(app, at, app->lesson.at, now, sel);
        if (lesson_cached(app, at, sel[0], sel[1], sel[2], sel[3]) >= 0) continue;
        lesson_picture(app, at, sel[0], sel[1], sel[2], sel[3]);
        /* the numbers are at the neighbour's selection now: the shown step's again when
         * it is drawn (a block rerun only when the two steps' layers differ) */
        return 1; /* one picture at a time: a key waiting is handled first */
    }
    app->lesson.ahead = 0;
    if (app->trace) { /* for bench/app_latency.py: the next key finds the pictures ready */
        printf("lesson ahead step=%d\n", app->lesson.at + 1);
        fflush(stdout);
    }
    return 0;
}

void app_lesson_show(App *app) {
    if (!app->lesson.on) return;
    app->lesson.shown = 0;
    lesson_render(app);
    app->dirty = 1;
}

void app_lesson_open(App *app) {
    if (!app->lesson.loaded) lesson_load_script(app);
    if (app->lesson.script.n < 1) return;
    app->lesson.on = 1;
    app->lesson.back_view = app->view, app->lesson.back_overview = app->overview;
    app->lesson.back_row = app->cursor_row, app->lesson.back_col = app->cursor_col;
    if (app->model) {
        lesson_check(app);
        lesson_take_line(app, -1);
    }
    app->help = 0;
    app_lesson_show(app);
}

/* Esc: the explorer as the lesson found it (layer, head, query, kind, overview): the
 * teacher goes back to where the class was before the lesson (issue 38's trial). */
static void lesson_close(App *app) {
    app->lesson.on = 0;
    app->view = app->lesson.back_view, app->overview = app->lesson.back_overview;
    app->cursor_row = app->lesson.back_row, app->cursor_col = app->lesson.back_col;
    view_clamp(&app->view, &app->model->vit.cfg); /* a model dropped meanwhile */
    const Scene *sc = app_scene(app);
    if (sc) ren_upload_image(&app->ren, sc->crop_rgb, sc->crop_w_px, sc->crop_h_px);
    for (int i = 0; i < LESSON_CACHE; i++) app->lesson.cache[i].valid = 0; /* colours, ... */
    app_update_map(app);
}

static int lesson_key(App *app, const SDL_Keysym *ks);

int app_lesson_key(App *app, const SDL_Keysym *ks) {
    if (!app->lesson.on) {
        if (ks->sym != SDLK_PAGEDOWN && ks->sym != SDLK_PAGEUP) return 0;
        app_lesson_open(app); /* from the explorer: where the lesson was left (step 1 first) */
        return 1;
    }
    Uint64 t0 = SDL_GetPerformanceCounter();
    int rc = lesson_key(app, ks);
    app->lesson.ms_gui = (float)((double)(SDL_GetPerformanceCounter() - t0) * 1e3 /
                                 (double)SDL_GetPerformanceFrequency());
    return rc;
}

void app_lesson_job_done(App *app) {
    Uint64 t0 = SDL_GetPerformanceCounter();
    if (app->worker.status != VIT_OK) { /* the block as before: drawn again at its selection */
        app_set_error(app, app->worker.err.msg);
        app->lesson.ld_ok = 0; /* half-selected: computed again */
    }
    if (app->lesson.on)
        app_lesson_show(app); /* the newest selection (again on the worker
                                 when the keys moved to another block) */
    else
        app_update_map(app); /* Esc meanwhile: the explorer's map, now the pool is free */
    app->lesson.ms_gui += (float)((double)(SDL_GetPerformanceCounter() - t0) * 1e3 /
                                  (double)SDL_GetPerformanceFrequency());
}

/* A key in the lesson view (app_lesson_key's body). */
static int lesson_key(App *app, const SDL_Keysym *ks) {
    int shift = (ks->mod & KMOD_SHIFT) != 0, n = app->lesson.script.n, at = app->lesson.at;
    const VitConfig *c = &app->model->vit.cfg;
    switch (ks->sym) {
    case SDLK_PAGEDOWN:
    case SDLK_RIGHT:
    case SDLK_SPACE: at = at + 1 < n ? at + 1 : at; break;
    case SDLK_PAGEUP:
    case SDLK_LEFT:
    case SDLK_BACKSPACE: at = at > 0 ? at - 1 : 0; break;
    case SDLK_HOME: at = 0; break;
    case SDLK_END: at = n - 1; break;
    case SDLK_UP:
    case SDLK_DOWN: {
        int d = ks->sym == SDLK_DOWN ? 1 : -1;
        if (shift)
            app->lesson.head = (app->lesson.head + d + c->n_heads) % c->n_heads;
        else
            app->lesson.layer = (app->lesson.layer + d + c->n_layers) % c->n_layers;
        app_lesson_show(app);
        return 1;
    }
    case SDLK_i:
    case SDLK_k:
    case SDLK_j:
    case SDLK_l: {
        int dr = ks->sym == SDLK_i ? -1 : ks->sym == SDLK_k ? 1 : 0;
        int dc = ks->sym == SDLK_j ? -1 : ks->sym == SDLK_l ? 1 : 0;
        int r = app->lesson.row + dr, q = app->lesson.col + dc;
        app->lesson.row = r < 0 ? 0 : r >= c->grid_h ? c->grid_h - 1 : r;
        app->lesson.col = q < 0 ? 0 : q >= c->grid_w ? c->grid_w - 1 : q;
        app_lesson_show(app);
        return 1;
    }
    case SDLK_ESCAPE: /* what is open first: the help */
        if (app->help)
            app->help = 0, app->help_page = 0;
        else
            lesson_close(app);
        return 1;
    case SDLK_h: app_toggle_help(app, 0); return 1;
    case SDLK_f: app_toggle_fullscreen(app); return 1;
    case SDLK_s: app->save_pending = 1; return 1;
    case SDLK_q: app->running = 0; return 1;
    case SDLK_g: app->grid = !app->grid; return 1; /* the explorer's, kept: a frame answers */
    default: return 1;                             /* the explorer's other keys do nothing here */
    }
    if (at != app->lesson.at) {
        int from = app->lesson.at;
        app->lesson.at = at;
        lesson_take_line(app, from);
        app_lesson_show(app);
    }
    return 1;
}

void app_lesson_frame(App *app, RenFrame *f) {
    f->overlay = 0, f->grid = 0, f->mode = VIEW_SINGLE;
    f->help_rows = app->lesson_keys.rows, f->n_help = app->lesson_keys.n; /* H, the ? button */
    f->query_row = f->query_col = -1;
    f->mask = 0, f->rgb = 0, f->n_list = 0, f->n_preds = 0, f->distance = NULL;
    f->n_prefix = 0, f->removed = 0, f->plot = 0, f->tooltip = NULL;
    f->legend_hi = f->legend_lo = f->legend_caption = NULL;
    f->placeholder = app->busy ? "computing\xe2\x80\xa6" : "drop a photo here";
}

void app_lesson_status(App *app) {
    const LessonScript *s = &app->lesson.script;
    if (s->n < 1) return;
    const LessonLine *l = &s->lines[app->lesson.at];
    snprintf(app->status_left, sizeof app->status_left,
             "lesson \xc2\xb7 step %d of %d: %s \xc2\xb7 block %d, head %d, patch (%d, %d)",
             app->lesson.at + 1, s->n, LESSON_STEP_INFO[l->step].name, app->lesson.layer + 1,
             app->lesson.head + 1, app->lesson.row + 1, app->lesson.col + 1);
    snprintf(
        app->status_right, sizeof app->status_right, "%s",
        app->busy
            ? "computing\xe2\x80\xa6"
            : "PgDn / PgUp step \xc2\xb7 \xe2\x86\x91\xe2\x86\x93 block \xc2\xb7 Esc explorer");
}

void app_lesson_free(App *app) {
    lesson_data_free(&app->lesson.ld);
    lesson_script_free(&app->lesson.script);
    for (int i = 0; i < LESSON_CACHE; i++) {
        free(app->lesson.cache[i].rgb);
        free(app->lesson.cache[i].fit);
        app->lesson.cache[i].rgb = app->lesson.cache[i].fit = NULL;
    }
}
