/* media.h - frames from a video file, a camera or a test pattern, through GStreamer: the one
 * source of moving pictures (issue 37). No SDL, no GL: the headless modes and (later) the
 * window's worker read it alike.
 *
 *     MediaSource src;  VitError err;  const MediaFrame *f;  int got;
 *     if (media_open(&src, MEDIA_FILE, "clip.webm", MEDIA_ALL_FRAMES, &err)) fail(err.msg);
 *     while ((got = media_next(&src, &f, &err)) > 0)
 *         use(f->rgb, f->w, f->h, f->index, f->pts_ns);
 *     if (got < 0) fail(err.msg);  // a decoder's error, a stream that stopped
 *     media_close(&src);
 *
 * The pipeline: the source (uridecodebin for a file or URI, v4l2src for a camera,
 * videotestsrc) -> videoconvert -> video/x-raw,format=RGB -> appsink. Every frame is packed
 * 8-bit RGB without alpha, [h, w, 3], rows without padding (GStreamer's rows are padded to 4
 * bytes; the copy drops that). A frame is exactly what
 *   gst-launch-1.0 uridecodebin uri=... ! videoconvert ! video/x-raw,format=RGB ! pngenc
 * writes, pixel for pixel: the tests compare with it.
 *
 * Waits are bounded (MediaSource.timeout_ms): nothing blocks forever on a stalled decoder or
 * an unplugged camera. Errors come back as a VitStatus and a message naming the source and
 * what is wrong (GStreamer's own message from the bus when it has one); nothing is printed. */
#ifndef VITLENS_MEDIA_H
#define VITLENS_MEDIA_H

#include "vit.h"

#include <stdint.h>

typedef enum {
    MEDIA_FILE,   /* what: a path (relative or absolute) or a URI (file://, http://, rtsp://) */
    MEDIA_CAMERA, /* what: a V4L2 device (/dev/video0), or NULL for /dev/video0 */
    MEDIA_TEST,   /* what: a videotestsrc pattern name ("ball", "smpte", ...), or NULL: ball;
                     320x240 at 30 fps, endless, each frame's timestamp its index / 30 s */
} MediaKind;

typedef enum {
    MEDIA_ALL_FRAMES, /* every decoded frame, in order; the decoder waits for the reader
                         (appsink max-buffers=2, drop=false): export, tests */
    MEDIA_NEWEST,     /* the newest frame wins: a frame not read before the next arrives is
                         dropped (appsink max-buffers=1, drop=true): live views */
} MediaMode;

#define MEDIA_TIMEOUT_MS 10000 /* the default bound on any wait: opening, each frame */

typedef struct {
    const uint8_t *rgb; /* [h, w, 3] packed RGB; owned by the source, valid until the next
                           media_next or media_close */
    int w, h;           /* px */
    long index;         /* 0-based: the how-manieth frame the reader got (MEDIA_ALL_FRAMES:
                           the how-manieth of the stream) */
    int64_t pts_ns;     /* presentation timestamp, ns from the stream's start (the first
                           frame's, for a live source); -1 when the stream gives none */
} MediaFrame;

struct _GstElement; /* GStreamer's, kept out of this header */

typedef struct {
    char name[1024]; /* what was opened, as given: the messages' first word */
    MediaKind kind;
    MediaMode mode;
    int live;            /* 1: a camera or test pattern (no end, no seeking) */
    int timeout_ms;      /* bound on each wait (MEDIA_TIMEOUT_MS; set before media_next to
                            change it) */
    double fps;          /* the stream's nominal frame rate, 0 when it does not say */
    int64_t duration_ns; /* a file's length, -1 when unknown or live */
    long n_read;         /* frames handed out so far */
    int ended;           /* 1 once the stream's end was reached */
    MediaFrame frame;    /* the last frame handed out */
    /* private */
    struct _GstElement *pipeline, *sink;
    uint8_t *buf; /* frame.rgb's storage */
    size_t buf_bytes;
    int64_t base_ns; /* a live source's first timestamp */
    VitError failed; /* what media_next failed with (code 0: it has not) */
} MediaSource;

/* 1 when path is a video for media_open rather than a photo for vit_image_load: a URI
 * (scheme://), a file whose first bytes are a video container's (Matroska/WebM, an ISO
 * media file that is not HEIF/AVIF, Ogg, AVI, MPEG-PS/TS, FLV, ASF), or a name ending in a
 * video extension (.mp4 .m4v .mov .webm .mkv .ogv .avi .mpg .mpeg .ts .flv .wmv .3gp); else
 * 0 (a missing file too: vit_image_load names it). Reads at most 512 bytes; never starts
 * GStreamer. The one place that decides "video or photo". */
int media_is_video(const char *path);

/* Open a source and start it (*s zeroed first). Waits at most MEDIA_TIMEOUT_MS for the
 * pipeline to start. Errors (s is then closed, nothing to free):
 *   VIT_ERR_IO     a missing file or device ("clip.webm: cannot open: No such file ..."), a
 *                  busy or absent camera, GStreamer missing or its plugins
 *   VIT_ERR_IMAGE  a file GStreamer cannot decode, or one with no video stream
 *                  ("notes.txt: GStreamer cannot decode it: Could not determine type of
 *                  stream.")
 *   VIT_ERR_NOMEM, VIT_ERR_ARG (kind out of range)
 * Free with media_close. */
VitStatus media_open(MediaSource *s, MediaKind kind, const char *what, MediaMode mode,
                     VitError *err);

/* The next frame into *f (s->frame; the pixels valid until the next call). 1: a frame;
 * 0: the stream ended (a file's end; s->ended); -1: an error, err says which (a decoder's
 * error on the bus, naming s->name; no frame within s->timeout_ms: "the stream stopped";
 * a file that ends more than two frames, and 0.5 s, before the length its container
 * declares: "cut short?"; no frame at all). After 0 or -1 every later call returns the
 * same without waiting. */
int media_next(MediaSource *s, const MediaFrame **f, VitError *err);

/* Stop the pipeline and free everything; accepts a zeroed, failed or closed source. */
void media_close(MediaSource *s);

#endif
