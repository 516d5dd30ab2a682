/* main.c - vitlens: see where a Vision Transformer looks.
 *
 * Reads as: options -> headless modes (--top, --export) or the window:
 * init -> loop -> shutdown. The App holds all state; app_handle_event is the
 * one event switch. The model runs once per photo on the worker thread
 * (worker.c); a key only recomputes a [gh, gw] map and uploads it (render.c). */
#include "export.h"
#include "files.h"
#include "render.h"
#include "scene.h"
#include "worker.h"

#include <SDL.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Options and --help */

typedef struct {
    const char *model_path, *labels_path, *image_path, *export_dir;
    int top_k, stdin_drops;
    VitLoadOptions load; /* --heads, --size, --whole */
    float opacity;
    float discard;            /* rollout's discard ratio, [0, 1) */
    char default_model[1024]; /* the built-in model ("" if not found) */
    char demo_dir[1024];      /* its demo scenes */
    char first_demo[1024];    /* the first of them: the photo when none is given */
} Options;

/* The keys, for --help and the help overlay. */
static const char *const KEYS[][2] = {
    {"Left / Right", "previous / next layer"},
    {"Up / Down", "previous / next head, then mean, max, min of the heads"},
    {"R", "attention rollout on / off"},
    {"[ / ]", "rollout discard ratio - / + 0.1"},
    {"G", "patch grid on / off"},
    {"+ / -", "overlay opacity"},
    {"O", "overlay on / off"},
    {"N / Shift+N", "next / previous image in the photo's folder (demo scenes)"},
    {"H", "this help on / off"},
    {"Esc / Q", "quit"},
    {"drop a file", "open a photo, or a .safetensors model"},
};
#define N_KEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vitlens [--model PATH] [--labels FILE] [--heads N] [--size S|HxW] [--whole]\n"
        "               [--opacity A] [--discard R] [IMAGE]\n"
        "       vitlens [--model PATH] [--labels FILE] --top K IMAGE\n"
        "       vitlens [--model PATH] [--opacity A] [--discard R] --export DIR IMAGE\n"
        "\n"
        "Runs a Vision Transformer (.safetensors) on a photo and shows the attention\n"
        "of the CLS token over the patch grid: every layer and head, the head fusions\n"
        "(mean, max, min) and attention rollout, as a heatmap over the crop the model saw;\n"
        "with register or distillation tokens, bars beside it show their share of the row.\n"
        "Without --model it uses the built-in model, a small ViT trained by this project to\n"
        "tell which of six shapes a cluttered scene holds; without an IMAGE it opens on the\n"
        "first of that model's demo scenes (N steps through them).\n"
        "\n"
        "options:\n"
        "  --model PATH    weights (.safetensors, timm or Hugging Face names: ViT, DeiT with\n"
        "                  or without distillation, DINO, DINOv2 with or without registers);\n"
        "                  config.json beside it is read\n"
        "                  (default: the built-in model, ASSETS/default/model.safetensors)\n"
        "  --labels FILE   class names, one per line (ImageNet synset lines are fine);\n"
        "                  default: the names in config.json, if any\n"
        "  --heads N       number of attention heads (default: config.json, else width/64)\n"
        "  --size S|HxW    run the model at this input size in px, each side a multiple of\n"
        "                  the patch size (e.g. 320 or 224x336); the position embedding is\n"
        "                  resampled bicubically as timm (or transformers) does\n"
        "                  (default: config.json's size, else the training size)\n"
        "  --whole         keep the whole photo: resize it to the input size without\n"
        "                  cropping (timm's crop_mode squash, crop_pct 1)\n"
        "  --opacity A     heatmap opacity in [0, 1] (default 0.6)\n"
        "  --discard R     rollout's discard ratio in [0, 1): that fraction of the smallest\n"
        "                  fused attention weights to patches is zeroed per layer (default 0)\n"
        "  --top K         print the K most probable classes and exit, one per line:\n"
        "                    RANK PROB CLASS_ID LABEL     e.g. \"1 0.6123 281 tabby, tabby cat\"\n"
        "                  RANK from 1, PROB the softmax probability, CLASS_ID from 0,\n"
        "                  LABEL the rest of the line (absent without class names)\n"
        "  --export DIR    write every map as a PNG into DIR and exit: L01_H01.png ...\n"
        "                  (layer, head from 1), L01_mean/max/min.png (head fusions),\n"
        "                  L01_rollout.png (rollout, mean fusion, --discard): L*H + 4L files\n"
        "  --stdin-drops   read file paths from stdin, one per line, as if dropped on the\n"
        "                  window (for scripts and tests)\n"
        "  -h, --help      this help\n"
        "\n"
        "keys:\n");
    for (int i = 0; i < N_KEYS; i++) fprintf(f, "  %-14s  %s\n", KEYS[i][0], KEYS[i][1]);
    fprintf(f,
            "\n"
            "environment:\n"
            "  VITLENS_ASSETS      the folder ASSETS holding default/: the built-in model\n"
            "                      and its demo/ scenes (default: %s)\n"
            "  VITLENS_SHADER_DIR  directory of the *.glsl shaders\n"
            "  VITLENS_FONT        font file to use instead of fontconfig's DejaVu Sans\n"
            "  VITLENS_TRACE=1     print each drawn frame's state and status line on stdout\n"
            "\n"
            "The window prints \"ready PATH\" on stdout once a photo's maps are on screen.\n"
            "Errors name the file; the headless modes exit 1 on bad input, 2 on bad usage.\n",
            VITLENS_ASSETS_DIR_DEFAULT);
}

/* Parse argv into o. 0: go on; 1: --help shown; 2: usage error (message printed). */
static int parse_options(Options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->opacity = 0.6f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--stdin-drops")) {
            o->stdin_drops = 1;
        } else if (!strcmp(a, "--whole")) {
            o->load.whole_image = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!val) {
                fprintf(stderr, "vitlens: %s needs a value (see --help)\n", a);
                return 2;
            }
            char *end = NULL;
            errno = 0;
            if (!strcmp(a, "--model")) {
                o->model_path = val;
            } else if (!strcmp(a, "--labels")) {
                o->labels_path = val;
            } else if (!strcmp(a, "--export")) {
                o->export_dir = val;
            } else if (!strcmp(a, "--heads") || !strcmp(a, "--top")) {
                long n = strtol(val, &end, 10);
                if (errno || !*val || *end || n < 1 || n > 100000) {
                    fprintf(stderr, "vitlens: %s %s: expected a positive integer\n", a, val);
                    return 2;
                }
                *(!strcmp(a, "--heads") ? &o->load.n_heads : &o->top_k) = (int)n;
            } else if (!strcmp(a, "--size")) {
                /* S or HxW, px */
                long h = strtol(val, &end, 10), w = h;
                if (!errno && end != val && (*end == 'x' || *end == 'X')) {
                    const char *ws = end + 1;
                    w = strtol(ws, &end, 10);
                    if (end == ws) w = 0;
                }
                if (errno || end == val || *end || h < 1 || w < 1 || h > VIT_MAX_INPUT ||
                    w > VIT_MAX_INPUT) {
                    fprintf(stderr,
                            "vitlens: --size %s: expected S or HxW in px (e.g. 320 or 224x336), "
                            "at most %d\n",
                            val, VIT_MAX_INPUT);
                    return 2;
                }
                o->load.image_h = (int)h, o->load.image_w = (int)w;
            } else if (!strcmp(a, "--opacity")) {
                float f = strtof(val, &end);
                if (errno || !*val || *end || !(f >= 0.0f && f <= 1.0f)) {
                    fprintf(stderr, "vitlens: --opacity %s: expected a number in [0, 1]\n", val);
                    return 2;
                }
                o->opacity = f;
            } else if (!strcmp(a, "--discard")) {
                float f = strtof(val, &end);
                if (errno || !*val || *end || !(f >= 0.0f && f < 1.0f)) {
                    fprintf(stderr, "vitlens: --discard %s: expected a number in [0, 1)\n", val);
                    return 2;
                }
                o->discard = f;
            } else {
                fprintf(stderr, "vitlens: unknown option %s (see --help)\n", a);
                return 2;
            }
            i++;
        } else if (!o->image_path) {
            o->image_path = a;
        } else {
            fprintf(stderr, "vitlens: one image only (got %s and %s)\n", o->image_path, a);
            return 2;
        }
    }
    if ((o->top_k || o->export_dir) && !o->image_path) {
        fprintf(stderr, "vitlens: --%s needs an IMAGE\n", o->top_k ? "top" : "export");
        return 2;
    }
    return 0;
}

/* The built-in model, when --model is not given, and the first of its demo
 * scenes, when the window gets no photo either. 0, or -1 (message printed). */
static int use_default_model(Options *o) {
    char msg[2400];
    if (files_default_model(o->default_model, sizeof o->default_model, o->demo_dir,
                            sizeof o->demo_dir, msg, sizeof msg)) {
        o->default_model[0] = o->demo_dir[0] = '\0';
        if (o->model_path) return 0; /* not needed: N then steps through the photo's folder */
        fprintf(stderr, "vitlens: %s\n", msg);
        return -1;
    }
    if (o->model_path) return 0;
    o->model_path = o->default_model;
    if (!o->image_path && !o->top_k && !o->export_dir &&
        files_step(o->first_demo, sizeof o->first_demo, o->demo_dir, 1) == 0)
        o->image_path = o->first_demo;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Headless: --top, --export */

static int run_headless(const Options *o) {
    Model m;
    Scene sc = {0};
    VitError err;
    int rc = 1;
    if (model_load(&m, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return 1;
    }
    if (scene_run(&sc, &m.vit, o->image_path, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        goto done;
    }
    rc = 0;
    if (o->top_k) rc |= export_top(stdout, &m, &sc, o->top_k);
    if (!rc && o->export_dir) rc |= export_maps(stdout, o->export_dir, &sc, o->opacity, o->discard);
done:
    scene_free(&sc);
    model_free(&m);
    return rc;
}

/* ---------------------------------------------------------------------------
 * App state */

typedef struct {
    const Options *opt;
    SDL_Window *win;
    SDL_GLContext gl;
    Ren ren;
    Worker worker;
    Uint32 ev_done; /* worker finished a job */

    Model *model;    /* current model (heap) */
    Scene scenes[2]; /* scenes[front] is on screen, the other is the worker's back buffer */
    int front, has_scene;
    float *map;                          /* [N] of the current model */
    float prefix_share[VIT_MAX_PREFIX];  /* [Np] the view's row at the prefix tokens */
    char prefix_name[VIT_MAX_PREFIX][8]; /* "CLS", "reg1", ... */
    const char *prefix_names[VIT_MAX_PREFIX];

    View view;
    int overlay, grid, help;
    float opacity;

    int busy;           /* a job is running */
    char pending[1024]; /* dropped while busy: started next (the latest wins) */
    char photo[1024];   /* the photo last asked for (N steps on from it), "" if none */
    char error[600];    /* shown on the error line until the next success */
    char status_left[512], status_right[256];
    int announce;        /* print "ready" after the next frame */
    unsigned long loads; /* worker jobs finished, for the trace */
    int trace;           /* VITLENS_TRACE */
    unsigned long frames;
    int running, dirty;
} App;

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && SDL_strcasecmp(s + n - k, suffix) == 0;
}

static const Scene *app_scene(const App *app) {
    return app->has_scene ? &app->scenes[app->front] : NULL;
}

static void app_set_error(App *app, const char *msg) {
    snprintf(app->error, sizeof app->error, "%s", msg);
    fprintf(stderr, "vitlens: %s\n", msg);
    app->dirty = 1;
}

/* Recompute the map of the current view and upload it. */
static void app_update_map(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc) return;
    const VitConfig *c = &sc->run.cfg;
    VitError err;
    if (view_map(app->map, &sc->run, &app->view, &err)) {
        app_set_error(app, err.msg);
        return;
    }
    if (view_prefix(app->prefix_share, &sc->run, &app->view, &err)) {
        app_set_error(app, err.msg);
        return;
    }
    for (int i = 0; i < c->n_prefix; i++) {
        vit_prefix_name(app->prefix_name[i], sizeof app->prefix_name[i], c, i);
        app->prefix_names[i] = app->prefix_name[i];
    }
    float lo, hi;
    map_normalize(app->map, app->map, c->n_patches, &lo, &hi);
    ren_upload_map(&app->ren, app->map, c->grid_w, c->grid_h, lo, hi);
    app->dirty = 1;
}

/* The status line: model, layer, head or fusion, map kind | top-1 class. */
static void app_update_status(App *app) {
    const VitConfig *c = &app->model->vit.cfg;
    char head[64];
    view_head_text(head, sizeof head, &app->view, c->n_heads);
    const char *dot = "  \xc2\xb7  "; /* U+00B7 middle dot */
    char kind[64];
    if (app->view.rollout && app->view.discard_ratio > 0.0f)
        snprintf(kind, sizeof kind, "rollout, discard %.1f", (double)app->view.discard_ratio);
    else
        snprintf(kind, sizeof kind, "%s", view_kind_name(&app->view));
    snprintf(app->status_left, sizeof app->status_left, "%s%slayer %d/%d%s%s%s%s%s%s",
             app->model->name, dot, app->view.layer + 1, c->n_layers, dot, head, dot, kind,
             app->overlay ? "" : dot, app->overlay ? "" : "overlay off");
    const Scene *sc = app_scene(app);
    app->status_right[0] = '\0';
    if (app->busy) {
        snprintf(app->status_right, sizeof app->status_right, "working\xe2\x80\xa6");
    } else if (sc && c->n_classes > 0 && sc->run.probs) {
        int top;
        vit_top_k(&top, sc->run.probs, c->n_classes, 1);
        const char *label = model_label(app->model, top);
        char cls[32];
        snprintf(cls, sizeof cls, "class %d", top);
        snprintf(app->status_right, sizeof app->status_right, "%s  %.1f%%", label ? label : cls,
                 100.0 * sc->run.probs[top]);
    }
    char title[512];
    snprintf(title, sizeof title, "vitlens \xe2\x80\x94 %s \xe2\x80\x94 %s",
             sc ? sc->name : "no image", app->model->name);
    SDL_SetWindowTitle(app->win, title);
}

/* Start loading a photo, or a model when path ends in .safetensors (the current
 * photo is then run through it). While busy, the path waits for the running job. */
static void app_open(App *app, const char *path) {
    if (!ends_with(path, ".safetensors")) snprintf(app->photo, sizeof app->photo, "%s", path);
    if (app->busy) {
        snprintf(app->pending, sizeof app->pending, "%s", path);
        return;
    }
    const Scene *sc = app_scene(app);
    Scene *back = &app->scenes[app->has_scene ? !app->front : app->front];
    if (ends_with(path, ".safetensors"))
        worker_start(&app->worker, path, &app->opt->load, app->opt->labels_path, app->model,
                     sc ? sc->path : NULL, back);
    else
        worker_start(&app->worker, NULL, NULL, NULL, app->model, path, back);
    app->busy = 1;
    app->dirty = 1;
}

/* The worker is done: swap in its result or show its error. */
static void app_job_done(App *app) {
    Worker *w = &app->worker;
    app->busy = 0;
    app->loads++;
    if (w->status != VIT_OK) {
        app_set_error(app, w->err.msg);
    } else {
        if (w->new_model) { /* the worker is idle: nothing reads the old model any more */
            Model *old = app->model;
            app->model = w->new_model;
            w->new_model = NULL;
            model_free(old);
            free(old);
            view_clamp(&app->view, &app->model->vit.cfg);
        }
        if (w->ran) {
            if (app->has_scene) app->front = !app->front;
            app->has_scene = 1;
        }
        const Scene *sc = app_scene(app);
        if (sc) {
            float *map = realloc(app->map, (size_t)sc->run.cfg.n_patches * sizeof *map);
            if (!map) {
                app_set_error(app, "out of memory for the map");
                app->has_scene = 0;
            } else {
                app->map = map;
                ren_upload_image(&app->ren, sc->crop_rgb, sc->crop_w_px, sc->crop_h_px);
                app_update_map(app);
                app->announce = 1;
            }
        }
        app->error[0] = '\0';
    }
    app->dirty = 1;
    if (app->pending[0]) {
        char path[1024];
        snprintf(path, sizeof path, "%s", app->pending);
        app->pending[0] = '\0';
        app_open(app, path);
    }
}

/* ---------------------------------------------------------------------------
 * Events: the one switch */

/* N / Shift+N: the next / previous image in the folder of the photo last asked
 * for; without one, the first / last demo scene of the built-in model. */
static void app_step_photo(App *app, int step) {
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

static void app_key(App *app, const SDL_Keysym *ks) {
    const VitConfig *c = &app->model->vit.cfg;
    View *v = &app->view;
    SDL_Keycode key = ks->sym;
    int map_changed = 0;
    switch (key) {
    case SDLK_ESCAPE:
    case SDLK_q: app->running = 0; break;
    case SDLK_LEFT:
        if (v->layer > 0) v->layer--, map_changed = 1;
        break;
    case SDLK_RIGHT:
        if (v->layer < c->n_layers - 1) v->layer++, map_changed = 1;
        break;
    case SDLK_UP:
        if (v->head > 0) v->head--, map_changed = 1;
        break;
    case SDLK_DOWN:
        if (v->head < c->n_heads + VIEW_N_FUSIONS - 1) v->head++, map_changed = 1;
        break;
    case SDLK_r: v->rollout = !v->rollout, map_changed = 1; break;
    case SDLK_LEFTBRACKET:
    case SDLK_RIGHTBRACKET: {
        /* in tenths, so that stepping never accumulates float error: 0.0 .. 0.9 */
        int t = (int)lroundf(v->discard_ratio * 10.0f) + (key == SDLK_RIGHTBRACKET ? 1 : -1);
        if (t < 0 || t > 9) break;
        v->discard_ratio = (float)t / 10.0f;
        map_changed = v->rollout;
        break;
    }
    case SDLK_n: app_step_photo(app, ks->mod & KMOD_SHIFT ? -1 : 1); break;
    case SDLK_g: app->grid = !app->grid; break;
    case SDLK_o: app->overlay = !app->overlay; break;
    case SDLK_h: app->help = !app->help; break;
    case SDLK_PLUS:
    case SDLK_EQUALS: /* '+' is shift+'=' on most layouts */
    case SDLK_KP_PLUS:
        app->opacity = app->opacity + 0.1f > 1.0f ? 1.0f : app->opacity + 0.1f;
        break;
    case SDLK_MINUS:
    case SDLK_KP_MINUS:
        app->opacity = app->opacity - 0.1f < 0.0f ? 0.0f : app->opacity - 0.1f;
        break;
    default: return;
    }
    if (map_changed) app_update_map(app);
    app->dirty = 1;
}

static void app_handle_event(App *app, const SDL_Event *e) {
    switch (e->type) {
    case SDL_QUIT: app->running = 0; break;
    case SDL_KEYDOWN: app_key(app, &e->key.keysym); break;
    case SDL_DROPFILE:
        if (e->drop.file) app_open(app, e->drop.file);
        SDL_free(e->drop.file);
        break;
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED ||
            e->window.event == SDL_WINDOWEVENT_EXPOSED)
            app->dirty = 1;
        break;
    default:
        if (e->type == app->ev_done) app_job_done(app);
        break;
    }
}

/* ---------------------------------------------------------------------------
 * Drawing */

static void app_draw(App *app) {
    app_update_status(app);
    RenFrame f = {
        .overlay = app->overlay,
        .grid = app->grid,
        .help = app->help,
        .busy = app->busy,
        .opacity = app->opacity,
        .status_left = app->status_left,
        .status_right = app->status_right,
        .error = app->error[0] ? app->error : NULL,
        .placeholder = app->busy ? "loading\xe2\x80\xa6" : "drop a photo here",
        .help_rows = KEYS,
        .n_help = N_KEYS,
        .spinner_turns = (float)(SDL_GetTicks() % 1000u) / 1000.0f,
        .n_prefix = app_scene(app) ? app_scene(app)->run.cfg.n_prefix : 0,
        .prefix_share = app->prefix_share,
        .prefix_names = app->prefix_names,
    };
    ren_draw(&app->ren, &f);
    SDL_GL_SwapWindow(app->win);
    app->frames++;
    if (app->trace || app->announce) glFinish(); /* the frame is on screen before we say so */
    if (app->announce && app->has_scene) {
        printf("ready %s\n", app_scene(app)->path);
        app->announce = 0;
    }
    if (app->trace) {
        const Ren *r = &app->ren;
        /* the prefix tokens' share of the view's row: "CLS:0.1234,reg1:0.0567" */
        char prefix[VIT_MAX_PREFIX * 20] = "-";
        const Scene *sc = app_scene(app);
        for (int i = 0, k = 0; sc && i < sc->run.cfg.n_prefix; i++)
            k += snprintf(prefix + k, sizeof prefix - (size_t)k, "%s%s:%.4f", i ? "," : "",
                          app->prefix_name[i], (double)app->prefix_share[i]);
        printf("frame %lu layer=%d head=%d rollout=%d discard=%.2f overlay=%d opacity=%.2f grid=%d "
               "help=%d "
               "busy=%d loads=%lu scene=%d error=%d image=%d,%d,%d image_h=%d prefix=%s "
               "window=%d,%d\n",
               app->frames, app->view.layer, app->view.head, app->view.rollout,
               (double)app->view.discard_ratio, app->overlay, (double)app->opacity, app->grid,
               app->help, app->busy, app->loads, app->has_scene, app->error[0] != 0, r->image_x,
               r->image_y, r->image_w_px, r->image_h_px, prefix, r->fb_w, r->fb_h);
        printf("status %s | %s\n", app->status_left, app->status_right);
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------------------
 * Init, loop, shutdown */

/* --stdin-drops: each line of stdin becomes an SDL_DROPFILE event, handled as a real drop. */
static int stdin_drops(void *unused) {
    (void)unused;
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        SDL_Event e;
        SDL_zero(e);
        e.type = SDL_DROPFILE;
        e.drop.file = SDL_strdup(line);
        if (e.drop.file && SDL_PushEvent(&e) != 1) SDL_free(e.drop.file);
    }
    return 0;
}

static int app_init(App *app, const Options *o) {
    memset(app, 0, sizeof *app);
    app->opt = o;
    app->overlay = 1;
    app->opacity = o->opacity;
    const char *trace = getenv("VITLENS_TRACE");
    app->trace = trace && *trace && strcmp(trace, "0") != 0;

    VitError err;
    app->model = calloc(1, sizeof *app->model);
    if (!app->model) {
        fprintf(stderr, "vitlens: out of memory\n");
        return -1;
    }
    if (model_load(app->model, o->model_path, &o->load, o->labels_path, 1, &err)) {
        fprintf(stderr, "vitlens: %s\n", err.msg);
        return -1;
    }
    const VitConfig *c = &app->model->vit.cfg;
    app->view = (View){
        .layer = c->n_layers - 1, .head = c->n_heads + VIT_FUSE_MEAN, .discard_ratio = o->discard};

    if (SDL_Init(SDL_INIT_VIDEO | SDL_INIT_EVENTS) != 0) {
        fprintf(stderr, "vitlens: SDL_Init: %s\n", SDL_GetError());
        return -1;
    }
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MAJOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MINOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_PROFILE_MASK, SDL_GL_CONTEXT_PROFILE_CORE);
    SDL_GL_SetAttribute(SDL_GL_DOUBLEBUFFER, 1);

    /* Square crop + status bar + room for the legend; fits the usable display. */
    int h = 860;
    SDL_Rect usable;
    if (SDL_GetDisplayUsableBounds(0, &usable) == 0 && usable.h > 0 && usable.h * 0.88 < h)
        h = (int)(usable.h * 0.88);
    int w = (int)(h * 1.1f);
    app->win =
        SDL_CreateWindow("vitlens", SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h,
                         SDL_WINDOW_OPENGL | SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!app->win) {
        fprintf(stderr, "vitlens: cannot open a window: %s\n", SDL_GetError());
        return -1;
    }
    SDL_SetWindowMinimumSize(app->win, 320, 320);
    if (!(app->gl = SDL_GL_CreateContext(app->win))) {
        fprintf(stderr, "vitlens: cannot create an OpenGL 3.3 core context: %s\n", SDL_GetError());
        return -1;
    }
    if (SDL_GL_SetSwapInterval(1) != 0) SDL_ClearError(); /* no vsync is fine */

    char msg[4096], warn[1024];
    if (ren_init(&app->ren, app->win, msg, sizeof msg, warn, sizeof warn)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        if (SDL_ShowSimpleMessageBox(SDL_MESSAGEBOX_ERROR, "vitlens: cannot start", msg, app->win))
            fprintf(stderr, "vitlens: (no dialog: %s)\n", SDL_GetError());
        return -1;
    }
    if (warn[0]) fprintf(stderr, "vitlens: %s (running without text)\n", warn);

    app->ev_done = SDL_RegisterEvents(1);
    if (app->ev_done == (Uint32)-1 || worker_init(&app->worker, app->ev_done)) {
        fprintf(stderr, "vitlens: cannot start the worker thread: %s\n", SDL_GetError());
        return -1;
    }
    if (o->stdin_drops) {
        SDL_Thread *t = SDL_CreateThread(stdin_drops, "vitlens-stdin", NULL);
        if (!t) {
            fprintf(stderr, "vitlens: cannot start the stdin reader: %s\n", SDL_GetError());
            return -1;
        }
        SDL_DetachThread(t); /* blocks in fgets; ends with the process */
    }
    SDL_EventState(SDL_DROPFILE, SDL_ENABLE);
    if (o->image_path) app_open(app, o->image_path);
    app->running = 1;
    app->dirty = 1;
    return 0;
}

static void app_free(App *app) {
    worker_free(&app->worker); /* first: it may still be using the model and a scene */
    if (app->gl) ren_free(&app->ren);
    scene_free(&app->scenes[0]);
    scene_free(&app->scenes[1]);
    free(app->map);
    if (app->model) model_free(app->model);
    free(app->model);
    if (app->gl) SDL_GL_DeleteContext(app->gl);
    if (app->win) SDL_DestroyWindow(app->win);
    SDL_Quit();
}

int main(int argc, char **argv) {
    Options o;
    int rc = parse_options(&o, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (use_default_model(&o)) return 1;
    if (o.top_k || o.export_dir) return run_headless(&o);

    static App app; /* large (two scenes' paths); static keeps it off the stack */
    if (app_init(&app, &o)) {
        app_free(&app);
        return 1;
    }
    while (app.running) {
        SDL_Event e;
        /* idle: sleep in SDL_WaitEventTimeout; busy: wake up to turn the spinner */
        int got = app.dirty ? SDL_PollEvent(&e) : SDL_WaitEventTimeout(&e, app.busy ? 50 : 250);
        if (!got && app.busy) app.dirty = 1; /* timed out while working: turn the spinner */
        for (; got; got = SDL_PollEvent(&e)) app_handle_event(&app, &e);
        if (app.dirty && app.running) {
            app_draw(&app);
            app.dirty = 0;
        }
    }
    app_free(&app);
    return 0;
}
