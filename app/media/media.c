/* media.c - frames from GStreamer (media.h): the pipeline built element by element (never
 * parsed from a string: a device or file name is a property, not pipeline syntax), its
 * appsink read with bounded waits, its bus read for the errors. */
#include "media/media.h"

#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------
 * Helpers */

/* 1 when s ends in suffix, whatever the case. */
static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcasecmp(s + n - k, suffix);
}

/* ---------------------------------------------------------------------------
 * Video or photo */

int media_is_video(const char *path) {
    if (strstr(path, "://")) return 1;
    static const char *const ext[] = {".mp4", ".m4v",  ".mov", ".webm", ".mkv", ".ogv", ".avi",
                                      ".mpg", ".mpeg", ".ts",  ".flv",  ".wmv", ".3gp"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (has_suffix(path, ext[i])) return 1;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t b[512];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n >= 4 && b[0] == 0x1a && b[1] == 0x45 && b[2] == 0xdf && b[3] == 0xa3) return 1; /* EBML */
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4)) { /* ISO media: a video unless HEIF's brands */
        static const char *const heif[] = {"heic", "heix", "hevc", "hevx", "heim", "heis", "hevm",
                                           "hevs", "mif1", "msf1", "mif2", "avif", "avis", "avio"};
        for (size_t i = 0; i < sizeof heif / sizeof *heif; i++)
            if (!memcmp(b + 8, heif[i], 4)) return 0;
        return 1;
    }
    if (n >= 4 && !memcmp(b, "OggS", 4)) return 1;
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "AVI ", 4)) return 1;
    if (n >= 4 && b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 0xba) return 1; /* MPEG-PS */
    if (n >= 377 && b[0] == 0x47 && b[188] == 0x47 && b[376] == 0x47) return 1;  /* MPEG-TS */
    if (n >= 4 && !memcmp(b, "FLV\x01", 4)) return 1;
    static const uint8_t asf[4] = {0x30, 0x26, 0xb2, 0x75};
    if (n >= 4 && !memcmp(b, asf, 4)) return 1;
    return 0;
}

/* ---------------------------------------------------------------------------
 * The pipeline */

/* GStreamer once per process. 0, or -1 with its message in err. */
static int gst_started(VitError *err) {
    static int started;
    if (started) return 0;
    GError *ge = NULL;
    if (!gst_init_check(NULL, NULL, &ge)) {
        vit_set_error(err, VIT_ERR_IO, "GStreamer does not start: %s",
                      ge ? ge->message : "unknown error");
        if (ge) g_error_free(ge);
        return -1;
    }
    started = 1;
    return 0;
}

/* A decoder's new pad: the first video one is linked to the converter (data); audio and
 * the rest stay unlinked. */
static void on_pad_added(GstElement *dec, GstPad *pad, gpointer data) {
    (void)dec;
    GstPad *sinkpad = gst_element_get_static_pad(GST_ELEMENT(data), "sink");
    GstCaps *caps = gst_pad_get_current_caps(pad);
    if (!caps) caps = gst_pad_query_caps(pad, NULL);
    if (caps && gst_caps_get_size(caps) > 0 && !gst_pad_is_linked(sinkpad)) {
        const char *name = gst_structure_get_name(gst_caps_get_structure(caps, 0));
        if (g_str_has_prefix(name, "video/")) gst_pad_link(pad, sinkpad);
    }
    if (caps) gst_caps_unref(caps);
    gst_object_unref(sinkpad);
}

/* The first error message on the pipeline's bus, waiting at most wait_ms for one, or NULL
 * (the caller unrefs it). */
static GstMessage *pop_error(MediaSource *s, int wait_ms) {
    GstBus *bus = gst_element_get_bus(s->pipeline);
    GstMessage *m = bus ? gst_bus_timed_pop_filtered(bus, (GstClockTime)wait_ms * GST_MSECOND,
                                                     GST_MESSAGE_ERROR)
                        : NULL;
    if (bus) gst_object_unref(bus);
    return m;
}

/* The error message m (taken: unreffed here) as err, naming s->name; fallback when m is
 * NULL. Its code: VIT_ERR_IO for a resource (a file, a device), VIT_ERR_IMAGE for the
 * stream. */
static VitStatus say_error(MediaSource *s, GstMessage *m, VitError *err, const char *fallback) {
    if (!m) return vit_set_error(err, VIT_ERR_IMAGE, "%s: %s", s->name, fallback);
    GError *ge = NULL;
    gchar *debug = NULL;
    gst_message_parse_error(m, &ge, &debug);
    VitStatus code = VIT_ERR_IMAGE;
    const char *what = "GStreamer cannot decode it", *hint = "";
    if (ge && ge->domain == GST_RESOURCE_ERROR)
        code = VIT_ERR_IO,
        what = s->kind == MEDIA_CAMERA ? "the camera" : "GStreamer cannot read it";
    if (ge && ((ge->domain == GST_CORE_ERROR && ge->code == GST_CORE_ERROR_MISSING_PLUGIN) ||
               (ge->domain == GST_STREAM_ERROR && ge->code == GST_STREAM_ERROR_CODEC_NOT_FOUND)))
        hint = " (Debian: gstreamer1.0-plugins-good, gstreamer1.0-libav)";
    vit_set_error(err, code, "%s: %s: %s%s", s->name, what, ge ? ge->message : "unknown error",
                  hint);
    if (ge) g_error_free(ge);
    g_free(debug);
    gst_message_unref(m);
    return code;
}

/* An element of the pipeline, or NULL with the message (its plugin is missing). */
static GstElement *element(GstElement *bin, const char *factory, VitError *err) {
    GstElement *e = gst_element_factory_make(factory, NULL);
    if (!e) {
        vit_set_error(err, VIT_ERR_IO,
                      "GStreamer has no %s element (Debian: gstreamer1.0-plugins-base, "
                      "gstreamer1.0-plugins-good)",
                      factory);
        return NULL;
    }
    gst_bin_add(GST_BIN(bin), e); /* the bin owns it now */
    return e;
}

VitStatus media_open(MediaSource *s, MediaKind kind, const char *what, MediaMode mode,
                     VitError *err_out) {
    VitError e = {0}, *err = &e; /* the message is kept even when err_out is NULL */
    gchar *uri = NULL;
    memset(s, 0, sizeof *s);
    s->kind = kind, s->mode = mode;
    s->timeout_ms = MEDIA_TIMEOUT_MS;
    s->duration_ns = -1;
    s->live = kind != MEDIA_FILE;
    if (kind == MEDIA_CAMERA && !what) what = "/dev/video0";
    if (kind == MEDIA_TEST && !what) what = "ball";
    if (kind < MEDIA_FILE || kind > MEDIA_TEST || !what || !*what) {
        vit_set_error(err, VIT_ERR_ARG, "media_open: no source given");
        goto fail;
    }
    snprintf(s->name, sizeof s->name, "%s", what);

    /* what is not there is said in our words before GStreamer is asked */
    struct stat sb;
    if (kind == MEDIA_FILE && !strstr(what, "://")) {
        if (stat(what, &sb) != 0) {
            vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", what, strerror(errno));
            goto fail;
        }
        if (S_ISDIR(sb.st_mode)) {
            vit_set_error(err, VIT_ERR_IO, "%s: is a directory, not a video", what);
            goto fail;
        }
    }
    if (kind == MEDIA_CAMERA && stat(what, &sb) != 0) {
        vit_set_error(err, VIT_ERR_IO, "%s: no camera there: %s", what, strerror(errno));
        goto fail;
    }
    if (gst_started(err)) goto fail;
    s->pipeline = gst_pipeline_new("vitlens-media");
    if (!s->pipeline) {
        vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a pipeline", what);
        goto fail;
    }
    GstElement *conv = element(s->pipeline, "videoconvert", err);
    if (!conv || !(s->sink = element(s->pipeline, "appsink", err))) goto fail;
    if (kind == MEDIA_FILE) {
        GError *ge = NULL;
        uri = strstr(what, "://") ? g_strdup(what) : gst_filename_to_uri(what, &ge);
        if (!uri) {
            vit_set_error(err, VIT_ERR_IO, "%s: not a file name GStreamer takes: %s", what,
                          ge ? ge->message : "?");
            if (ge) g_error_free(ge);
            goto fail;
        }
        GstElement *dec = element(s->pipeline, "uridecodebin", err);
        if (!dec) goto fail;
        g_object_set(dec, "uri", uri, NULL);
        g_signal_connect(dec, "pad-added", G_CALLBACK(on_pad_added), conv);
    } else if (kind == MEDIA_CAMERA) { /* raw or MJPEG: decodebin passes raw through */
        GstElement *cam = element(s->pipeline, "v4l2src", err);
        GstElement *dec = cam ? element(s->pipeline, "decodebin", err) : NULL;
        if (!dec) goto fail;
        g_object_set(cam, "device", what, NULL);
        g_signal_connect(dec, "pad-added", G_CALLBACK(on_pad_added), conv);
        if (!gst_element_link(cam, dec)) {
            vit_set_error(err, VIT_ERR_IO, "%s: cannot link the camera to a decoder", what);
            goto fail;
        }
    } else {
        GstElement *src = element(s->pipeline, "videotestsrc", err);
        GstElement *filter = src ? element(s->pipeline, "capsfilter", err) : NULL;
        if (!filter) goto fail;
        /* the pattern by its nick ("ball"), one it does not know refused */
        GParamSpec *ps = g_object_class_find_property(G_OBJECT_GET_CLASS(src), "pattern");
        GEnumClass *ec = ps ? g_type_class_ref(ps->value_type) : NULL;
        GEnumValue *ev = ec ? g_enum_get_value_by_nick(ec, what) : NULL;
        int pattern = ev ? ev->value : -1;
        if (ec) g_type_class_unref(ec);
        if (pattern < 0) {
            vit_set_error(err, VIT_ERR_ARG,
                          "%s: not a videotestsrc pattern (gst-inspect-1.0 videotestsrc)", what);
            goto fail;
        }
        g_object_set(src, "pattern", pattern, NULL);
        g_object_set(src, "is-live", mode == MEDIA_NEWEST, NULL);
        GstCaps *caps =
            gst_caps_new_simple("video/x-raw", "width", G_TYPE_INT, 320, "height", G_TYPE_INT, 240,
                                "framerate", GST_TYPE_FRACTION, 30, 1, NULL);
        g_object_set(filter, "caps", caps, NULL);
        gst_caps_unref(caps);
        if (!gst_element_link_many(src, filter, conv, NULL)) {
            vit_set_error(err, VIT_ERR_IO, "%s: cannot link the test pattern", what);
            goto fail;
        }
    }
    GstCaps *rgb = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "RGB", NULL);
    gst_app_sink_set_caps(GST_APP_SINK(s->sink), rgb);
    gst_caps_unref(rgb);
    gst_app_sink_set_max_buffers(GST_APP_SINK(s->sink), mode == MEDIA_NEWEST ? 1 : 2);
    gst_app_sink_set_drop(GST_APP_SINK(s->sink), mode == MEDIA_NEWEST);
    g_object_set(s->sink, "sync", FALSE, NULL); /* as fast as it is read, not the clock's pace */
    if (!gst_element_link(conv, s->sink)) {
        vit_set_error(err, VIT_ERR_IO, "%s: cannot link the converter to the sink", what);
        goto fail;
    }

    /* start, and wait (bounded) until it runs or fails */
    GstStateChangeReturn st = gst_element_set_state(s->pipeline, GST_STATE_PLAYING);
    if (st != GST_STATE_CHANGE_FAILURE)
        st = gst_element_get_state(s->pipeline, NULL, NULL,
                                   (GstClockTime)s->timeout_ms * GST_MSECOND);
    if (st == GST_STATE_CHANGE_FAILURE) {
        say_error(s, pop_error(s, 1000), err, "GStreamer cannot play it");
        goto fail;
    }
    if (st == GST_STATE_CHANGE_ASYNC) {
        say_error(s, pop_error(s, 1000), err, "did not start within the time allowed");
        goto fail;
    }
    gint64 d;
    if (!s->live && gst_element_query_duration(s->pipeline, GST_FORMAT_TIME, &d) && d >= 0)
        s->duration_ns = d;
    g_free(uri);
    return VIT_OK;
fail:
    g_free(uri);
    media_close(s);
    if (!e.code) vit_set_error(err, VIT_ERR_IO, "%s: cannot open", s->name);
    if (err_out) *err_out = e;
    return e.code;
}

/* ---------------------------------------------------------------------------
 * Frames */

/* Copy the sample's picture into s->frame. 0, or -1 with the message. */
static int take_sample(MediaSource *s, GstSample *smp, VitError *err) {
    GstVideoInfo info;
    GstVideoFrame vf;
    GstBuffer *buf = gst_sample_get_buffer(smp);
    GstCaps *caps = gst_sample_get_caps(smp);
    if (!buf || !caps || !gst_video_info_from_caps(&info, caps) ||
        GST_VIDEO_INFO_FORMAT(&info) != GST_VIDEO_FORMAT_RGB) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: frame %ld: not the RGB frame asked for", s->name,
                      s->n_read);
        return -1;
    }
    int w = GST_VIDEO_INFO_WIDTH(&info), h = GST_VIDEO_INFO_HEIGHT(&info);
    if (w < 1 || h < 1 || (uint64_t)w * (uint64_t)h > VIT_MAX_IMAGE_PIXELS) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: frame %ld is %dx%d px, not within 1 .. %llu pixels",
                      s->name, s->n_read, w, h, (unsigned long long)VIT_MAX_IMAGE_PIXELS);
        return -1;
    }
    size_t row = (size_t)w * 3, bytes = row * (size_t)h;
    if (bytes > s->buf_bytes) {
        uint8_t *p = realloc(s->buf, bytes);
        if (!p) {
            vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a %dx%d frame", s->name, w, h);
            return -1;
        }
        s->buf = p, s->buf_bytes = bytes;
    }
    if (!gst_video_frame_map(&vf, &info, buf, GST_MAP_READ)) {
        vit_set_error(err, VIT_ERR_IMAGE, "%s: frame %ld cannot be read", s->name, s->n_read);
        return -1;
    }
    const uint8_t *src = GST_VIDEO_FRAME_PLANE_DATA(&vf, 0);
    int stride = GST_VIDEO_FRAME_PLANE_STRIDE(&vf, 0);
    for (int y = 0; y < h; y++) memcpy(s->buf + (size_t)y * row, src + (size_t)y * stride, row);
    gst_video_frame_unmap(&vf);

    int64_t pts = -1;
    GstClockTime t = GST_BUFFER_PTS(buf);
    const GstSegment *seg = gst_sample_get_segment(smp);
    if (GST_CLOCK_TIME_IS_VALID(t)) {
        guint64 stream = seg ? gst_segment_to_stream_time(seg, GST_FORMAT_TIME, t) : t;
        pts = GST_CLOCK_TIME_IS_VALID(stream) ? (int64_t)stream : (int64_t)t;
        if (s->live) { /* from the first frame */
            if (s->n_read == 0) s->base_ns = pts;
            pts -= s->base_ns;
        }
    }
    if (s->n_read == 0) {
        int num = GST_VIDEO_INFO_FPS_N(&info), den = GST_VIDEO_INFO_FPS_D(&info);
        s->fps = num > 0 && den > 0 ? (double)num / den : 0;
    }
    s->frame = (MediaFrame){.rgb = s->buf, .w = w, .h = h, .index = s->n_read, .pts_ns = pts};
    s->n_read++;
    return 0;
}

int media_next(MediaSource *s, const MediaFrame **f, VitError *err_out) {
    VitError e = {0}, *err = &e;
    if (s->ended) return 0;
    if (s->failed.code || !s->pipeline) {
        if (!s->failed.code)
            vit_set_error(&s->failed, VIT_ERR_ARG, "%s: the source is closed", s->name);
        if (err_out) *err_out = s->failed;
        return -1;
    }
    gint64 deadline = g_get_monotonic_time() + (gint64)s->timeout_ms * 1000;
    for (;;) {
        /* the frames already decoded first, then the bus: a truncated file's last good
         * frames come before its error */
        GstSample *smp = gst_app_sink_try_pull_sample(GST_APP_SINK(s->sink), 50 * GST_MSECOND);
        if (smp) {
            int rc = take_sample(s, smp, err);
            gst_sample_unref(smp);
            if (rc) goto failed;
            *f = &s->frame;
            return 1;
        }
        GstMessage *m = pop_error(s, 0);
        if (m) {
            say_error(s, m, err, "");
            goto failed;
        }
        if (gst_app_sink_is_eos(GST_APP_SINK(s->sink))) {
            if (s->n_read == 0) {
                vit_set_error(err, VIT_ERR_IMAGE, "%s: no video frame in it (no video stream?)",
                              s->name);
                goto failed;
            }
            /* a file cut short ends early without an error from the demuxer: its declared
             * length says so (a frame's timestamp is its start: allow two frames, or 0.5 s
             * for a stream whose rate is unknown or low, such as an audio track's tail) */
            int64_t last = s->frame.pts_ns, slack = 500000000;
            if (s->fps > 0 && 2e9 / s->fps > slack) slack = (int64_t)(2e9 / s->fps);
            if (!s->live && s->duration_ns > 0 && last >= 0 && last + slack < s->duration_ns) {
                vit_set_error(
                    err, VIT_ERR_IMAGE,
                    "%s: the stream ends at frame %ld (%.3f s) of its %.3f s: the file is cut "
                    "short?",
                    s->name, s->n_read - 1, last / 1e9, s->duration_ns / 1e9);
                goto failed;
            }
            s->ended = 1;
            return 0;
        }
        if (g_get_monotonic_time() > deadline) {
            vit_set_error(err, VIT_ERR_IO,
                          "%s: no frame for %.1f s after frame %ld: the stream stopped", s->name,
                          s->timeout_ms / 1000.0, s->n_read);
            goto failed;
        }
    }
failed:
    /* stop here: later calls say it again without waiting */
    if (!e.code) vit_set_error(err, VIT_ERR_IMAGE, "%s: the stream failed", s->name);
    s->failed = e;
    if (err_out) *err_out = e;
    gst_element_set_state(s->pipeline, GST_STATE_NULL);
    gst_object_unref(s->pipeline);
    s->pipeline = s->sink = NULL;
    return -1;
}

void media_close(MediaSource *s) {
    if (s->pipeline) {
        gst_element_set_state(s->pipeline, GST_STATE_NULL);
        gst_object_unref(s->pipeline);
    }
    free(s->buf);
    s->pipeline = s->sink = NULL;
    s->buf = NULL, s->buf_bytes = 0;
    s->frame.rgb = NULL;
}
