/* trace.h - VITLENS_TRACE=1: the window's state on stdout, for tests and benchmarks. */
#ifndef VITLENS_TRACE_H
#define VITLENS_TRACE_H

#include "render/render.h"
#include "view/maps.h"

/* The window's state (window/app.h): trace.c reads it; this header needs only its name, so
 * that app.c, which traces the launch, includes nothing above it. */
typedef struct App App;

/* The launch's time 0: main() calls it first. */
void trace_clock_start(void);

/* "startup WHAT MS": ms since trace_clock_start, for the launch's timeline. Nothing
 * when app->trace is 0. */
void trace_startup(const App *app, const char *what);
/* The same for a moment past: t a performance counter (a worker's job's end). */
void trace_startup_at(const App *app, const char *what, Uint64 t);

/* "maps by=BY kind=... map=HASH atlas=HASH": the maps of m just put on screen (in
 * app->map and app->atlas), computed by "gui" or "worker". */
void trace_maps(const App *app, const ViewMaps *m, const char *by);

/* "compare maps ...": the compare view's panes just computed: each pane's view, model
 * grid, crop (x, y, w, h of the photo w x h) and map's hash (as "maps ... map=" hashes the
 * single view's), Spearman and the top-10 % IoU. */
void trace_compare_maps(const App *app);

/* When a frame's parts were done (SDL_GetPerformanceCounter): drawing started, the draws
 * were issued, rasterised (glFinish), and the frame was on screen. */
typedef struct {
    Uint64 start, drawn, rastered, shown;
} FrameTimes;

/* The frame's line ("frame N layer=... ms_draw=..."), its status line, and a finished
 * perturbation test's "perturb done" line once its last step is on screen. f: the frame
 * drawn. Resets app->t_input. */
void trace_frame(App *app, const RenFrame *f, const FrameTimes *t);

#endif
