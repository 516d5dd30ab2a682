/* live.c - a video file or a camera in the window (issue 37): attention on every frame.
 *
 * One frame thread per source owns its MediaSource (media.h): GStreamer is touched from that
 * thread only. It reads the frames (a file at its own pace, by their timestamps; a camera as
 * they come, the newest wins), keeps the newest under Live.lock and posts Live.event. The GUI
 * thread never waits for it: whenever the worker is idle it takes the newest frame and runs it
 * as a photo's job (app_open_frame: scene_run_rgb into the back Scene), so frames never queue
 * and a frame read while the worker runs replaces the one before (counted as dropped). The
 * front Scene swaps as a photo's does, and every view follows.
 *
 * Pause (Space) stops the reading; a step (`.` / `,`, a file) asks the thread for the frame
 * after / before the one run last: it reads on to it, or opens the file again and reads up
 * to it (the indices stay the stream's). A file stops on its last frame; Space there plays it
 * again from the start. An error (a file GStreamer cannot decode, no camera, a stream that
 * stops) goes on the error line and closes the source; the picture on screen stays. */
#include "window/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the frame thread -------------------------------------------------------------- */

/* Tell the GUI thread (under lock): one event at a time, the GUI reads the state anyway. */
static void notify(Live *lv) {
    if (lv->notified) return;
    SDL_Event e;
    SDL_zero(e);
    e.type = lv->event;
    if (SDL_PushEvent(&e) > 0) lv->notified = 1;
}

/* Under lock: frame f becomes the newest, replacing one not taken yet (dropped, when
 * counted). 0, or -1 out of memory (lv->err set). */
static int publish(Live *lv, const MediaFrame *f, int count_drop) {
    size_t bytes = (size_t)f->w * (size_t)f->h * 3;
    if (bytes > lv->rgb_bytes) {
        uint8_t *p = realloc(lv->rgb, bytes);
        if (!p) {
            lv->err.code = VIT_ERR_NOMEM;
            snprintf(lv->err.msg, sizeof lv->err.msg, "%.200s: out of memory for a %dx%d frame",
                     lv->what, f->w, f->h);
            return -1;
        }
        lv->rgb = p, lv->rgb_bytes = bytes;
    }
    memcpy(lv->rgb, f->rgb, bytes);
    if (lv->have && count_drop) lv->dropped++;
    lv->w = f->w, lv->h = f->h, lv->have = 1, lv->ended = 0;
    lv->index = f->index, lv->pts_ns = f->pts_ns;
    lv->read_t = SDL_GetPerformanceCounter();
    return 0;
}

/* Until the frame of timestamp pts is due (a file plays at its pace from t0 / pts0), or the
 * GUI asks something (quit, pause, a step). Under lock. */
static void wait_due(Live *lv, Uint64 t0_ms, int64_t pts0, int64_t pts) {
    Uint64 due = t0_ms + (Uint64)((pts - pts0) / 1000000);
    for (Uint64 now = SDL_GetTicks64(); now < due; now = SDL_GetTicks64())
        if (lv->quit || lv->paused || lv->seek >= 0 ||
            SDL_CondWaitTimeout(lv->wake, lv->lock, (Uint32)(due - now)) < 0)
            break;
}

static int live_main(void *arg) {
    Live *lv = arg;
    MediaSource s;
    VitError err = {0};
    MediaMode mode = lv->kind == MEDIA_FILE ? MEDIA_ALL_FRAMES : MEDIA_NEWEST;
    int ok = media_open(&s, lv->kind, lv->what, mode, &err) == VIT_OK;
    long last = -1;        /* the index of the last frame read */
    int64_t last_pts = -1; /* and its timestamp (a camera's frames the sink dropped) */
    Uint64 t0 = 0;         /* a file's clock: when frame pts0 was read */
    int64_t pts0 = 0;
    int clock = 0; /* 0: the clock starts again at the next frame */
    SDL_LockMutex(lv->lock);
    if (!ok)
        lv->err = err, notify(lv);
    else
        lv->duration_ns = s.duration_ns;
    while (!lv->quit) {
        if (!ok || ((lv->paused || lv->ended) && lv->seek < 0)) {
            clock = 0;
            SDL_CondWait(lv->wake, lv->lock);
            continue;
        }
        long seek = lv->seek;
        lv->seek = -1;
        SDL_UnlockMutex(lv->lock);
        /* a step back (or to a frame read already): the file again from its start */
        if (seek >= 0 && seek <= last) {
            media_close(&s);
            ok = media_open(&s, lv->kind, lv->what, mode, &err) == VIT_OK;
            last = -1;
        }
        const MediaFrame *f = NULL;
        int got = ok ? 0 : -1;
        while (ok && (got = media_next(&s, &f, &err)) > 0) {
            last = f->index;
            if (seek < 0 || last >= seek) break;
        }
        SDL_LockMutex(lv->lock);
        if (got > 0 && seek < 0 && !s.live && f->pts_ns >= 0) { /* a file: at its pace */
            if (!clock) t0 = SDL_GetTicks64(), pts0 = f->pts_ns, clock = 1;
            wait_due(lv, t0, pts0, f->pts_ns);
        }
        if (got > 0 && s.live && s.fps > 0 && last_pts >= 0 && f->pts_ns > last_pts) {
            /* a camera's frames the sink dropped (newest wins) were not run either */
            long gap = (long)((double)(f->pts_ns - last_pts) * s.fps / 1e9 + 0.5) - 1;
            if (gap > 0) lv->dropped += gap;
        }
        if (got > 0) last_pts = f->pts_ns;
        if (got < 0) {
            lv->err = err, ok = 0;
        } else if (got == 0) {
            lv->ended = 1;
        } else if (lv->seek < 0 && (seek >= 0 || !lv->paused)) { /* not asked otherwise since */
            if (publish(lv, f, seek < 0)) ok = 0;
        }
        notify(lv);
    }
    SDL_UnlockMutex(lv->lock);
    media_close(&s);
    return 0;
}

/* --- the GUI thread's side ----------------------------------------------------------- */

void app_live_close(App *app) {
    Live *lv = &app->live;
    if (lv->thread) {
        SDL_LockMutex(lv->lock);
        lv->quit = 1;
        SDL_CondSignal(lv->wake);
        SDL_UnlockMutex(lv->lock);
        SDL_WaitThread(lv->thread, NULL); /* within a frame's wait (media.h's bound) */
    }
    if (lv->wake) SDL_DestroyCond(lv->wake);
    if (lv->lock) SDL_DestroyMutex(lv->lock);
    free(lv->rgb);
    /* the job's pixels stay: a job may still read them; app_free frees them */
    uint8_t *job = lv->job_rgb;
    size_t job_bytes = lv->job_bytes;
    memset(lv, 0, sizeof *lv);
    lv->job_rgb = job, lv->job_bytes = job_bytes;
    lv->shown_index = -1;
}

void app_live_open(App *app, MediaKind kind, const char *what) {
    app_live_close(app);
    Live *lv = &app->live;
    lv->kind = kind;
    snprintf(lv->what, sizeof lv->what, "%s", what);
    lv->event = app->ev_live;
    lv->seek = -1, lv->index = -1, lv->duration_ns = -1;
    lv->lock = SDL_CreateMutex();
    lv->wake = lv->lock ? SDL_CreateCond() : NULL;
    lv->thread = lv->wake ? SDL_CreateThread(live_main, "vitlens-frames", lv) : NULL;
    if (!lv->thread) {
        char msg[600];
        snprintf(msg, sizeof msg, "%.400s: cannot start its frame thread: %.150s", what,
                 SDL_GetError());
        app_live_close(app);
        app_set_error(app, msg);
        return;
    }
    lv->on = 1;
    pca_hold_refit(&app->pca_hold); /* a new video: its own colours */
    app->dirty = 1;
}

void app_pca_refit(App *app) {
    const Scene *sc = app_scene(app);
    if (!sc || !sc->pca_hold) {
        snprintf(app->notice, sizeof app->notice,
                 "the features PCA colours are held over a video's frames; a photo's are its own");
        return;
    }
    pca_hold_refit(&app->pca_hold);
    snprintf(app->notice, sizeof app->notice, "the features PCA colours: refitted on frame %ld",
             sc->frame);
    if (app->view.kind == MAP_FEATURES_PCA && !app->view.joint)
        app_update_map(app); /* on the frame on screen, now */
}

/* The running job's frame is the newest, taken (under lock): copied for the worker. 0, or
 * -1 out of memory. */
static int take_frame(Live *lv) {
    size_t bytes = (size_t)lv->w * (size_t)lv->h * 3;
    if (bytes > lv->job_bytes) {
        uint8_t *p = realloc(lv->job_rgb, bytes);
        if (!p) return -1;
        lv->job_rgb = p, lv->job_bytes = bytes;
    }
    memcpy(lv->job_rgb, lv->rgb, bytes);
    lv->job_w = lv->w, lv->job_h = lv->h;
    lv->job_index = lv->index, lv->job_pts_ns = lv->pts_ns;
    lv->job_read_t = lv->read_t;
    lv->have = 0;
    return 0;
}

void app_live_feed(App *app) {
    Live *lv = &app->live;
    if (!lv->on || app->busy) return;
    SDL_LockMutex(lv->lock);
    int paused = lv->paused, took = 0, nomem = 0;
    if (lv->have) { /* paused: only a step's frame is published */
        nomem = take_frame(lv) != 0;
        took = !nomem;
    }
    SDL_UnlockMutex(lv->lock);
    if (nomem) {
        app_set_error(app, "out of memory for a video frame");
        return;
    }
    char name[1100];
    if (took || (lv->rerun && lv->job_rgb)) {
        lv->rerun = 0, lv->paused_traced = 0;
        if (took) lv->stepping = 0;
        snprintf(name, sizeof name, "%s#%ld", lv->what, lv->job_index);
        app_open_frame(app, name, lv->job_rgb, lv->job_w, lv->job_h);
        return;
    }
    /* no frame waits: the class-specific maps the frames went first of (requests.c) */
    const Scene *sc = app_scene(app);
    if (sc && !view_ready(sc, &app->view)) app_update_map(app);
    if (app->busy) return;
    if (paused && !lv->stepping && !lv->paused_traced &&
        app->trace) { /* settled: the frame and its maps */
        printf("live paused index=%ld\n", lv->shown_index);
        lv->paused_traced = 1;
    }
}

int app_live_waiting(const App *app) {
    const Live *lv = &app->live;
    if (!lv->on) return 0;
    SDL_LockMutex(lv->lock);
    int waiting = lv->have;
    SDL_UnlockMutex(lv->lock);
    return waiting;
}

void app_live_event(App *app) {
    Live *lv = &app->live;
    if (!lv->on) return; /* a closed source's last event */
    SDL_LockMutex(lv->lock);
    lv->notified = 0;
    VitError err = lv->err;
    if (lv->ended && !lv->have) lv->stepping = 0; /* a step past the end: nothing comes */
    SDL_UnlockMutex(lv->lock);
    if (err.code) { /* the source is done: the picture on screen stays */
        app_live_close(app);
        app_set_error(app, err.msg);
        return;
    }
    app_live_feed(app);
    app->dirty = 1; /* the status line: the end */
}

void app_live_shown(App *app) {
    Live *lv = &app->live;
    lv->shown_index = lv->job_index, lv->shown_pts_ns = lv->job_pts_ns;
    lv->shown_read_t = lv->job_read_t;
    int n = (int)(sizeof lv->shown_t / sizeof lv->shown_t[0]);
    Uint64 now = SDL_GetPerformanceCounter(), first = lv->shown_t[lv->n_shown % n];
    lv->shown_t[lv->n_shown % n] = now;
    lv->n_shown++;
    long k = lv->n_shown < n ? lv->n_shown - 1 : n - 1; /* intervals over the ring */
    if (lv->n_shown < n) first = lv->shown_t[0];
    lv->fps = k > 0 && now > first
                  ? (double)k * (double)SDL_GetPerformanceFrequency() / (double)(now - first)
                  : 0.0;
    if (!app->trace) return;
    SDL_LockMutex(lv->lock);
    long dropped = lv->dropped;
    SDL_UnlockMutex(lv->lock);
    printf("live frame index=%ld pts=%.6f dropped=%ld shown=%ld\n", lv->shown_index,
           lv->shown_pts_ns / 1e9, dropped, lv->n_shown);
}

void app_live_presented(App *app, Uint64 shown) {
    Live *lv = &app->live;
    if (!lv->shown_read_t) return;
    double ms = (double)(shown - lv->shown_read_t) * 1e3 / (double)SDL_GetPerformanceFrequency();
    lv->shown_read_t = 0;
    if (app->trace) printf("live latency index=%ld ms=%.2f\n", lv->shown_index, ms);
}

int app_live_key(App *app, SDL_Keycode key, int shift) {
    Live *lv = &app->live;
    if (!lv->on || (key != SDLK_SPACE && shift)) return 0; /* Shift+, / Shift+.: the mask */
    if (key != SDLK_SPACE && key != SDLK_COMMA && key != SDLK_PERIOD) return 0;
    if (key != SDLK_SPACE && lv->kind != MEDIA_FILE) {
        snprintf(app->notice, sizeof app->notice, "a camera steps no frames: Space pauses it");
        return 1;
    }
    SDL_LockMutex(lv->lock);
    if (key == SDLK_SPACE && lv->paused) { /* play on; at the end, from the start */
        lv->paused = 0;
        if (lv->ended) lv->seek = 0, lv->ended = 0;
    } else if (key == SDLK_SPACE) {
        lv->paused = 1, lv->have = 0; /* a frame read meanwhile is not run */
    } else {
        long at = app->live.job_index + (key == SDLK_PERIOD ? 1 : -1);
        lv->paused = 1, lv->have = 0;
        if (at >= 0) lv->seek = at, app->live.stepping = 1;
    }
    SDL_CondSignal(lv->wake);
    SDL_UnlockMutex(lv->lock);
    lv->paused_traced = 0;
    app_live_feed(app); /* idle and paused: the trace says so */
    return 1;
}

/* "m:ss.s" of ns into buf. */
static void clock_text(char *buf, size_t n, int64_t ns) {
    double s = ns > 0 ? ns / 1e9 : 0.0;
    int m = (int)(s / 60);
    snprintf(buf, n, "%d:%04.1f", m, s - 60.0 * m);
}

void app_live_status(const App *app, char *buf, size_t n) {
    const Live *lv = &app->live;
    buf[0] = '\0';
    if (!lv->on) return;
    SDL_LockMutex(lv->lock);
    long dropped = lv->dropped;
    int paused = lv->paused, ended = lv->ended;
    int64_t duration = lv->duration_ns;
    SDL_UnlockMutex(lv->lock);
    char at[32] = "-", len[32] = "";
    if (lv->shown_index >= 0) clock_text(at, sizeof at, lv->shown_pts_ns);
    if (duration > 0) {
        len[0] = ' ', len[1] = '/', len[2] = ' ';
        clock_text(len + 3, sizeof len - 3, duration);
    }
    snprintf(buf, n, "%s %s%s, frame %ld, %.1f fps, %ld dropped%s",
             lv->kind == MEDIA_CAMERA ? "camera" : "video", at, len, lv->shown_index, lv->fps,
             dropped,
             paused  ? ", paused"
             : ended ? ", end"
                     : "");
}
