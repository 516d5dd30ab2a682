/* main.c - vitlens: see where a Vision Transformer looks.
 *
 * Reads as: the command line (config/options.c, with the remembered settings) -> the
 * headless modes (--eval, --top, --export: headless/) or the window: init -> loop ->
 * shutdown. The App (window/app.h) holds all the window's state; app_handle_event is the
 * one event switch. The model runs once per photo on the worker thread (window/worker.c);
 * a key only recomputes a [gh, gw] map (view/) and uploads it (render/).
 *
 * The layers, each #include pointing down (docs/architecture.md):
 *
 *   main.c
 *   window/    the SDL app: state, input, view -> requests, jobs, frame, status, trace, worker
 *   headless/  --top, --export, --eval: no window (export, eval, npy, plot)
 *   config/    the command line and its key list, remembered settings, folders, models
 *   render/    OpenGL: canvas, textures, shaders, panels; text and colormaps
 *   view/      what a map of a photo is: the map kinds' table, the View, the Scene
 *   media/     frames from GStreamer: a video file, a camera, a test pattern
 *   engine/include/vit.h   the ViT engine (no SDL, no GL, no printing)
 */
#include "config/options.h"
#include "headless/agreement.h"
#include "headless/eval.h"
#include "headless/headless.h"
#include "window/app.h"
#include "window/trace.h"

#include <stdio.h>

/* The window's loop: wait for events (or the animation's next step, or a spinner turn),
 * handle them, draw a frame when something changed. Idle, it sleeps; with shaders left
 * to build ahead, it builds one between events, and so the lesson view its next steps'
 * pictures. */
static void app_loop(App *app) {
    while (app->running) {
        SDL_Event e;
        /* idle: sleep in SDL_WaitEventTimeout; busy: wake up to turn the spinner */
        int wait = app->busy ? 50 : 250;
        if (app->classes.busy && wait > 100) wait = 100; /* the classes' progress */
        if (app->pert.phase == PERT_PLAYING && app_perturb_wait_ms(app) < wait)
            wait = app_perturb_wait_ms(app); /* the animation's next step */
        int warm = !app->dirty && !app->busy && app->has_scene && app->ren.warm_next >= 0;
        /* the lesson view: the neighbouring steps' pictures, one between two events */
        int ahead = !app->dirty && !app->busy && app->lesson.on && app->lesson.ahead;
        int got = app->dirty || warm || ahead ? SDL_PollEvent(&e) : SDL_WaitEventTimeout(&e, wait);
        if (!got && warm && !ren_warm_step(&app->ren)) app->ren.warm_next = -1;
        if (!got && ahead && !warm) app_lesson_prefetch(app);
        if (!got && app->busy) app->dirty = 1;     /* timed out while working: turn the spinner */
        if (app_classes_tick(app)) app->dirty = 1; /* the classes' progress moved */
        for (; got; got = SDL_PollEvent(&e)) app_handle_event(app, &e);
        app_perturb_tick(app);
        if (app->dirty && app->running) {
            app_draw(app);
            app->dirty = app->again; /* the window's size changed: a whole frame follows */
        }
    }
}

int main(int argc, char **argv) {
    trace_clock_start();
    Options o;
    int rc = options_parse(&o, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if (o.eval_merge) /* reads folders only: no model, no settings */
        return agreement_is_out(o.image_args[0]) ? agreement_merge(&o) : eval_merge(&o);
    int headless = o.top_k || o.export_dir || o.eval || o.agreement || o.lesson_export_dir;
    options_apply_settings(&o, !headless); /* read only: the headless modes never write them */
    if (headless && o.settings_msg[0]) fprintf(stderr, "vitlens: %s\n", o.settings_msg);
    if (options_default_model(&o)) return 1;
    if (o.eval) return eval_run(&o);
    if (o.agreement) return agreement_run(&o);
    if (headless) return headless_run(&o);

    static App app; /* large (two scenes' paths); static keeps it off the stack */
    if ((rc = app_init(&app, &o))) {
        app_free(&app);
        return rc == -2 ? 2 : 1;
    }
    app_loop(&app);
    app_save_settings(&app);
    app_free(&app);
    return 0;
}
