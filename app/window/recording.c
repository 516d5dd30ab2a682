/* recording.c - Ctrl+R: the window, as drawn, into a video file (issue 37).
 *
 * While a recording is on, every frame the window draws (app_draw: the picture with its map,
 * the panels, the status line) is read back from the canvas on the GUI thread and handed to
 * GStreamer's encoder (media/recorder.h) with the time since the first frame: a video plays
 * in the file at the pace it played on screen, a still stays as long as it stayed. The
 * encoding runs on GStreamer's threads; when it falls behind a frame is dropped rather than
 * the window kept waiting. Ctrl+R again ends the stream; the file is finished on those threads
 * and their event (app_record_event) puts "saved NAME, N frames" on the status line. An error
 * (no encoder, a folder that cannot be written, the disk full) goes on the error line and ends
 * the recording; the window goes on as before. */
#include "window/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* From one of GStreamer's threads: the file is done or failed; the GUI thread reads which. */
static void wake(void *ctx) {
    const Recording *rc = ctx;
    SDL_Event e;
    SDL_zero(e);
    e.type = rc->event;
    SDL_PushEvent(&e);
}

/* The ms since performance counter t0. */
static double ms_since(Uint64 t0) {
    return (double)(SDL_GetPerformanceCounter() - t0) * 1e3 / (double)SDL_GetPerformanceFrequency();
}

/* The recording's file: DIR/STEM_MODEL_recN.webm, STEM the video's or photo's name, N the
 * first that names no file yet. */
static void record_path(const App *app, char *path, size_t n, char *name, size_t name_n) {
    const Scene *sc = app_scene(app);
    const char *dir = app->opt->save_dir ? app->opt->save_dir : ".";
    char stem[128], model[128];
    view_file_stem(stem, sizeof stem, app->live.on ? app->live.what : sc ? sc->path : "vitlens");
    view_file_stem(model, sizeof model, app->model->name);
    struct stat st;
    for (int k = 1; k < 10000; k++) {
        snprintf(name, name_n, "%s_%s_rec%d.webm", stem, model, k);
        snprintf(path, n, "%s/%s", dir, name);
        if (stat(path, &st) != 0) return;
    }
}

/* $VITLENS_RECORD_DUMP: frame `index` (RGBA, top row first) as DIR/rec_NNNNNN.ppm, for the
 * tests to compare the decoded file with. */
static void dump_frame(const Recording *rc, long index, const uint8_t *rgba, int w, int h) {
    char path[1200];
    snprintf(path, sizeof path, "%s/rec_%06ld.ppm", rc->dump, index);
    FILE *f = fopen(path, "wb");
    uint8_t *row = malloc((size_t)w * 3);
    if (f && row) {
        fprintf(f, "P6\n%d %d\n255\n", w, h);
        for (int y = 0; y < h; y++) {
            const uint8_t *p = rgba + (size_t)y * w * 4;
            for (int x = 0; x < w; x++) memcpy(row + 3 * x, p + 4 * x, 3);
            fwrite(row, 1, (size_t)w * 3, f);
        }
    }
    if (f) fclose(f);
    free(row);
}

/* The recording is over (its file written, or not): the recorder closed, the state off. */
static void record_end(App *app) {
    Recording *rc = &app->rec;
    recorder_close(&rc->rec);
    rc->on = rc->saving = 0;
    app->dirty = 1;
}

void app_record_toggle(App *app) {
    Recording *rc = &app->rec;
    VitError err = {0};
    if (rc->saving) {
        snprintf(app->notice, sizeof app->notice, "still saving %.400s\xe2\x80\xa6", rc->name);
        return;
    }
    if (rc->on) { /* stop: the last frame lasts until now, then the end of the stream */
        long before = rc->rec.n_frames;
        if (recorder_stop(&rc->rec, (int64_t)(ms_since(rc->t0) * 1e6), &err)) {
            app_set_error(app, err.msg);
            record_end(app);
            return;
        }
        rc->on = 0, rc->saving = 1;
        if (app->trace && rc->rec.n_frames > before) /* the last frame again, at the stop */
            printf("record frame index=%ld pts=%.6f again=1\n", before, rc->rec.last_pts_ns / 1e9);
        if (app->trace)
            printf("record stop frames=%ld pts=%.6f dropped=%ld\n", rc->rec.n_frames,
                   rc->rec.last_pts_ns / 1e9, rc->rec.n_dropped);
        app->dirty = 1;
        return;
    }
    char path[1700];
    record_path(app, path, sizeof path, rc->name, sizeof rc->name);
    rc->event = app->ev_done + 2;
    if (recorder_open(&rc->rec, path, app->ren.fb_w, app->ren.fb_h, 0, wake, rc, &err)) {
        app_set_error(app, err.msg);
        return;
    }
    const char *dump = getenv("VITLENS_RECORD_DUMP");
    snprintf(rc->dump, sizeof rc->dump, "%s", dump ? dump : "");
    rc->on = 1, rc->t0 = 0, rc->n_timed = 0, rc->ms_sum = rc->ms_max = 0;
    app->error[0] = '\0';
    if (app->trace) printf("record start path=%s w=%d h=%d\n", path, rc->rec.w, rc->rec.h);
    app->dirty = 1; /* the first frame: "recording to NAME" on the status line */
}

void app_record_frame(App *app) {
    Recording *rc = &app->rec;
    if (!rc->on) return;
    Uint64 start = SDL_GetPerformanceCounter(), dumped = 0;
    if (rc->n_timed == 0) rc->t0 = start; /* the file's time 0 */
    int64_t pts = (int64_t)((double)(start - rc->t0) * 1e9 / (double)SDL_GetPerformanceFrequency());
    int w, h;
    uint8_t *rgba = ren_read_rgba(&app->ren, &w, &h);
    if (!rgba) {
        app_set_error(app, "out of memory for a recorded frame");
        return;
    }
    long index = rc->rec.n_frames;
    if (rc->dump[0]) { /* the tests' copy, left out of the time measured */
        Uint64 d0 = SDL_GetPerformanceCounter();
        dump_frame(rc, index, rgba, w, h);
        dumped = SDL_GetPerformanceCounter() - d0;
    }
    VitError err = {0};
    int got = recorder_push(&rc->rec, rgba, w, h, pts, &err); /* rgba is the recorder's now */
    double ms = ms_since(start + dumped);
    if (got < 0) {
        app_set_error(app, err.msg);
        record_end(app);
        return;
    }
    rc->n_timed++, rc->ms_sum += ms, rc->ms_max = ms > rc->ms_max ? ms : rc->ms_max;
    if (app->trace && got)
        printf("record frame index=%ld pts=%.6f w=%d h=%d ms=%.2f\n", index,
               rc->rec.last_pts_ns / 1e9, w, h, ms);
    else if (app->trace)
        printf("record dropped n=%ld\n", rc->rec.n_dropped);
}

void app_record_event(App *app) {
    Recording *rc = &app->rec;
    if (!rc->on && !rc->saving) return; /* a closed recording's last event */
    VitError err = {0};
    int st = recorder_poll(&rc->rec, 0, &err);
    if (st == 0) return;
    if (st < 0) {
        app_set_error(app, err.msg);
    } else {
        long n = rc->rec.n_frames;
        snprintf(app->notice, sizeof app->notice, "saved %.400s, %ld frame%s%s", rc->name, n,
                 n == 1 ? "" : "s",
                 rc->rec.n_dropped ? " (some dropped: the encoder fell behind)" : "");
        if (app->trace)
            printf("record saved path=%s frames=%ld dropped=%ld ms_mean=%.2f ms_max=%.2f\n",
                   rc->rec.path, n, rc->rec.n_dropped,
                   rc->n_timed ? rc->ms_sum / (double)rc->n_timed : 0.0, rc->ms_max);
    }
    record_end(app);
}

void app_record_status(const App *app, char *buf, size_t n) {
    const Recording *rc = &app->rec;
    if (rc->on)
        snprintf(buf, n, "recording to %s", rc->name);
    else if (rc->saving)
        snprintf(buf, n, "saving %s\xe2\x80\xa6", rc->name);
    else
        buf[0] = '\0';
}

void app_record_close(App *app) {
    Recording *rc = &app->rec;
    VitError err = {0};
    if (rc->on && !recorder_stop(&rc->rec, (int64_t)(ms_since(rc->t0) * 1e6), &err)) rc->saving = 1;
    if (rc->saving && recorder_poll(&rc->rec, 10000, &err) < 0)
        fprintf(stderr, "vitlens: %s\n", err.msg);
    recorder_close(&rc->rec);
    rc->on = rc->saving = 0;
}
