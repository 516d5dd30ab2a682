/* recorder.h - frames into a video file through GStreamer's encoder: the window's Ctrl+R
 * (issue 37). The other direction of media.h; no SDL, no GL.
 *
 *     Recorder rec;  VitError err;
 *     if (recorder_open(&rec, "out.webm", w, h, 1, wake, ctx, &err)) say(err.msg);
 *     per frame:  rgba = malloc(w * h * 4); fill it;
 *                 recorder_push(&rec, rgba, w, h, pts_ns, &err);   // rgba is the recorder's now
 *     recorder_stop(&rec, end_ns, &err);     // the end: the file is finished on GStreamer's
 *     ... wake(ctx) is called, from one of GStreamer's threads ...
 *     recorder_poll(&rec, 0, &err);          // 1: written (or -1: failed)
 *     recorder_close(&rec);
 *
 * The pipeline: appsrc (RGBA, [h, w, 4]; bottom row first when made with bottom_up, as
 * glReadPixels reads a framebuffer) -> videoflip (in RGBA: flipped in 4:2:0, an odd height
 * would pair the chroma rows with the wrong luma rows) -> videoconvert (I420) -> videoscale (a
 * frame of another size is scaled to the file's, its aspect kept with black bars) -> vp9enc
 * (realtime, constant quality) -> webmmux -> filesink. The encoding runs on GStreamer's
 * threads: recorder_push only queues the frame (no copy: the pixels are handed over), and a
 * frame that finds more than RECORDER_MAX_QUEUE_BYTES waiting is refused (counted), so a slow
 * encoder never stalls the caller.
 *
 * Timestamps are the caller's, from the recording's start, kept to whole milliseconds
 * (WebM's unit): the file plays at the pace the frames came, however irregular (a still
 * redrawn on a key, a video's frames). Errors (no encoder plugin, a directory that cannot be
 * written, the disk full) come back as a VitStatus and a message naming the file; nothing is
 * printed. */
#ifndef VITLENS_RECORDER_H
#define VITLENS_RECORDER_H

#include "vit.h"

#include <stdint.h>

#define RECORDER_MAX_QUEUE_BYTES (96u << 20) /* frames waiting for the encoder, at most */

struct _GstElement;
struct _GstBuffer;

typedef struct {
    char path[1024];     /* the file, as given: the messages' first word */
    int w, h;            /* the file's frame size, px */
    long n_frames;       /* frames queued for the file so far (recorder_stop's last one too) */
    long n_dropped;      /* frames refused: the encoder was behind */
    int64_t last_pts_ns; /* the last frame's timestamp as written (whole ms), -1: none yet */
    int stopping;        /* recorder_stop was called: the file is being finished */
    /* private */
    struct _GstElement *pipeline, *src;
    struct _GstBuffer *last; /* the last frame queued (recorder_stop repeats it) */
    int in_w, in_h;          /* the size of the frames the source's caps say */
    int done;                /* 1: the end reached the file; -1: it failed (failed says why) */
    int posted;              /* set (atomically) on GStreamer's thread: an end or error message */
    VitError failed;
    void (*wake)(void *ctx); /* called from a GStreamer thread when the file is done or failed */
    void *ctx;
} Recorder;

/* Start a recording into path (created or truncated; WebM, VP9), frames w x h px (even or
 * odd). bottom_up 1: the frames' rows come bottom first (glReadPixels). wake (may be NULL):
 * called with ctx from one of GStreamer's threads once the file is complete or the pipeline
 * failed (recorder_poll then says which); it must only signal (post an event). Errors (r is
 * then closed, nothing to free):
 *   VIT_ERR_IO   GStreamer or an element missing ("recording needs GStreamer's vp9enc
 *                (Debian: gstreamer1.0-plugins-good)"), a file that cannot be created
 *                ("DIR/x.webm: cannot write it: ...")
 *   VIT_ERR_ARG  a size below 2x2 or above VIT_MAX_IMAGE_PIXELS
 * Free with recorder_close. */
VitStatus recorder_open(Recorder *r, const char *path, int w, int h, int bottom_up,
                        void (*wake)(void *ctx), void *ctx, VitError *err);

/* Queue frame rgba ([h, w, 4] RGBA, w x h need not be the file's: it is scaled) at
 * timestamp pts_ns (from the recording's start; kept to whole ms, and 1 ms after the last
 * frame's when not later). rgba must come from malloc: the recorder owns it from here on, and
 * frees it whatever the outcome. 1: queued (r->last_pts_ns is its timestamp); 0: refused, the
 * encoder is behind (r->n_dropped counts it); -1: the recording failed (err says why, naming
 * the file), or is stopping. */
int recorder_push(Recorder *r, uint8_t *rgba, int w, int h, int64_t pts_ns, VitError *err);

/* The end of the recording at end_ns: the last frame again at that time when it is later
 * (so that the file lasts until the stop: a still shown for 3 s stays 3 s), then the end of
 * the stream; the file is finished on GStreamer's threads (wake is called). 0, or -1 when
 * the recording had failed (err) or no frame was recorded (err: "no frame recorded"). */
int recorder_stop(Recorder *r, int64_t end_ns, VitError *err);

/* Whether the file is done, waiting at most wait_ms: 1 written whole (after recorder_stop);
 * 0 not yet; -1 the pipeline failed (err: GStreamer's message naming the file, e.g. the disk
 * full), the recording is over. Call it when wake was called; with a wait when the program
 * ends. */
int recorder_poll(Recorder *r, int wait_ms, VitError *err);

/* Stop the pipeline and free everything; accepts a zeroed, failed or closed recorder. A
 * file not finished (recorder_poll never said 1) may lack its index and duration. */
void recorder_close(Recorder *r);

#endif
