/* recorder.c - frames into a WebM file through GStreamer (recorder.h): the pipeline built
 * element by element (a file name is a property, not pipeline syntax), the frames handed to
 * its appsrc without a copy, its bus read for the end and the errors. */
#include "media/recorder.h"

#include <gst/app/gstappsrc.h>
#include <gst/gst.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------
 * Helpers */

/* An element into the pipeline, or NULL with the message naming its Debian package. */
static GstElement *element(Recorder *r, const char *factory, const char *package, VitError *err) {
    GstElement *e = gst_element_factory_make(factory, NULL);
    if (!e) {
        vit_set_error(err, VIT_ERR_IO, "%s: recording needs GStreamer's %s (Debian: %s)", r->path,
                      factory, package);
        return NULL;
    }
    gst_bin_add(GST_BIN(r->pipeline), e); /* the bin owns it now */
    return e;
}

/* The frames' caps: RGBA w x h, no fixed rate (each frame has its own timestamp). */
static GstCaps *rgba_caps(int w, int h) {
    return gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "RGBA", "width", G_TYPE_INT,
                               w, "height", G_TYPE_INT, h, "framerate", GST_TYPE_FRACTION, 0, 1,
                               "pixel-aspect-ratio", GST_TYPE_FRACTION, 1, 1, NULL);
}

/* On GStreamer's threads, for every message of the bus: the end or an error wakes the
 * owner (who reads the message with recorder_poll). */
static GstBusSyncReply on_message(GstBus *bus, GstMessage *m, gpointer data) {
    (void)bus;
    Recorder *r = data;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS || GST_MESSAGE_TYPE(m) == GST_MESSAGE_ERROR) {
        g_atomic_int_set(&r->posted, 1); /* the message is queued once this returns */
        if (r->wake) r->wake(r->ctx);
    }
    return GST_BUS_PASS; /* and queued for recorder_poll */
}

/* ---------------------------------------------------------------------------
 * Entry points */

VitStatus recorder_open(Recorder *r, const char *path, int w, int h, int bottom_up,
                        void (*wake)(void *ctx), void *ctx, VitError *err_out) {
    VitError e = {0}, *err = &e; /* the message is kept even when err_out is NULL */
    int made = 0;                /* 1: the file was created here (removed on failure) */
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->w = w, r->h = h, r->in_w = w, r->in_h = h;
    r->last_pts_ns = -1;
    r->wake = wake, r->ctx = ctx;
    if (w < 2 || h < 2 || (uint64_t)w * (uint64_t)h > VIT_MAX_IMAGE_PIXELS) {
        vit_set_error(err, VIT_ERR_ARG, "%s: cannot record %dx%d px frames", path, w, h);
        goto fail;
    }
    /* a file that cannot be made is said in our words before GStreamer is asked (one made
     * here is removed again on failure; a file or device that was there is left alone) */
    struct stat st;
    int existed = stat(path, &st) == 0;
    FILE *probe = fopen(path, "wb");
    if (!probe) {
        vit_set_error(err, VIT_ERR_IO, "%s: cannot write it: %s", path, strerror(errno));
        goto fail;
    }
    fclose(probe);
    made = !existed;
    GError *ge = NULL;
    if (!gst_init_check(NULL, NULL, &ge)) {
        vit_set_error(err, VIT_ERR_IO, "%s: GStreamer does not start: %s", path,
                      ge ? ge->message : "unknown error");
        if (ge) g_error_free(ge);
        goto fail;
    }
    r->pipeline = gst_pipeline_new("vitlens-recorder");
    if (!r->pipeline) {
        vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for a pipeline", path);
        goto fail;
    }
    static const char base[] = "gstreamer1.0-plugins-base", good[] = "gstreamer1.0-plugins-good";
    GstElement *flip, *conv, *scale, *filter, *enc, *mux, *sink;
    if (!(r->src = element(r, "appsrc", base, err)) ||
        !(flip = element(r, "videoflip", good, err)) ||
        !(conv = element(r, "videoconvert", base, err)) ||
        !(scale = element(r, "videoscale", base, err)) ||
        !(filter = element(r, "capsfilter", "libgstreamer1.0-0", err)) ||
        !(enc = element(r, "vp9enc", good, err)) || !(mux = element(r, "webmmux", good, err)) ||
        !(sink = element(r, "filesink", "libgstreamer1.0-0", err)))
        goto fail;

    GstCaps *caps = rgba_caps(w, h);
    gst_app_src_set_caps(GST_APP_SRC(r->src), caps);
    gst_caps_unref(caps);
    g_object_set(r->src, "format", GST_FORMAT_TIME, "is-live", FALSE, "block", FALSE, "max-bytes",
                 (guint64)RECORDER_MAX_QUEUE_BYTES, NULL);
    gst_util_set_object_arg(G_OBJECT(flip), "method", bottom_up ? "vertical-flip" : "none");
    /* the file's size and 4:2:0 (VP9 profile 0: what every player decodes) */
    caps = gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", "width", G_TYPE_INT,
                               w, "height", G_TYPE_INT, h, "pixel-aspect-ratio", GST_TYPE_FRACTION,
                               1, 1, NULL);
    g_object_set(filter, "caps", caps, NULL);
    gst_caps_unref(caps);
    /* realtime (a frame in ~10 ms at 1280x960 on one core), constant quality: cq-level 12
     * keeps the status line's text legible; no frame held back (lag 0); timestamps in ms */
    gst_util_set_object_arg(G_OBJECT(enc), "end-usage", "cq");
    g_object_set(enc, "deadline", (gint64)1, "cpu-used", 8, "cq-level", 12, "target-bitrate",
                 20000000, "lag-in-frames", 0, "threads", 2, "timebase", 1, 1000, NULL);
    g_object_set(sink, "location", path, NULL);
    if (!gst_element_link_many(r->src, flip, conv, scale, filter, enc, mux, sink, NULL)) {
        vit_set_error(err, VIT_ERR_IO, "%s: cannot link the recording's pipeline", path);
        goto fail;
    }
    GstBus *bus = gst_element_get_bus(r->pipeline);
    gst_bus_set_sync_handler(bus, on_message, r, NULL);
    gst_object_unref(bus);
    if (gst_element_set_state(r->pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
        VitError bus_err = {0};
        if (recorder_poll(r, 1000, &bus_err) < 0)
            e = bus_err;
        else
            vit_set_error(err, VIT_ERR_IO, "%s: the recording's pipeline does not start", path);
        goto fail;
    }
    return VIT_OK;
fail:
    recorder_close(r);
    if (made) remove(path);
    if (!e.code) vit_set_error(err, VIT_ERR_IO, "%s: cannot record", path);
    if (err_out) *err_out = e;
    return e.code;
}

int recorder_push(Recorder *r, uint8_t *rgba, int w, int h, int64_t pts_ns, VitError *err) {
    if (!r->pipeline || r->stopping || r->done) {
        free(rgba);
        if (r->done < 0 && err)
            *err = r->failed;
        else
            vit_set_error(err, VIT_ERR_ARG, "%s: the recording is over", r->path);
        return -1;
    }
    if (recorder_poll(r, 0, err) < 0) { /* an error since the last frame (the disk full) */
        free(rgba);
        return -1;
    }
    size_t bytes = (size_t)w * (size_t)h * 4;
    GstAppSrc *src = GST_APP_SRC(r->src);
    if (gst_app_src_get_current_level_bytes(src) + bytes > RECORDER_MAX_QUEUE_BYTES) {
        free(rgba); /* the encoder is behind: this frame is not recorded */
        r->n_dropped++;
        return 0;
    }
    if (w != r->in_w || h != r->in_h) { /* a window resized: scaled to the file's size */
        GstCaps *caps = rgba_caps(w, h);
        gst_app_src_set_caps(src, caps);
        gst_caps_unref(caps);
        r->in_w = w, r->in_h = h;
    }
    int64_t pts = pts_ns > 0 ? pts_ns / 1000000 * 1000000 : 0;
    if (r->last_pts_ns >= 0 && pts <= r->last_pts_ns) pts = r->last_pts_ns + 1000000;
    GstBuffer *buf = gst_buffer_new_wrapped_full(0, rgba, bytes, 0, bytes, rgba, free);
    GST_BUFFER_PTS(buf) = (GstClockTime)pts;
    if (r->last) gst_buffer_unref(r->last);
    r->last = gst_buffer_ref(buf);
    if (gst_app_src_push_buffer(src, buf) != GST_FLOW_OK) { /* takes buf either way */
        vit_set_error(err, VIT_ERR_IO, "%s: the recording's pipeline refused a frame", r->path);
        return -1;
    }
    r->last_pts_ns = pts;
    r->n_frames++;
    return 1;
}

int recorder_stop(Recorder *r, int64_t end_ns, VitError *err) {
    if (!r->pipeline || r->stopping)
        return vit_set_error(err, VIT_ERR_ARG, "%s: not recording", r->path), -1;
    if (recorder_poll(r, 0, err) < 0) return -1;
    if (r->n_frames == 0)
        return vit_set_error(err, VIT_ERR_ARG, "%s: no frame recorded", r->path), -1;
    int64_t end = end_ns / 1000000 * 1000000;
    if (end > r->last_pts_ns) {                      /* the picture stayed on screen until now */
        GstBuffer *again = gst_buffer_copy(r->last); /* its pixels shared, not copied */
        GST_BUFFER_PTS(again) = (GstClockTime)end;
        if (gst_app_src_push_buffer(GST_APP_SRC(r->src), again) == GST_FLOW_OK)
            r->last_pts_ns = end, r->n_frames++;
    }
    r->stopping = 1;
    if (gst_app_src_end_of_stream(GST_APP_SRC(r->src)) != GST_FLOW_OK)
        return vit_set_error(err, VIT_ERR_IO, "%s: the recording's pipeline did not take its end",
                             r->path),
               -1;
    return 0;
}

int recorder_poll(Recorder *r, int wait_ms, VitError *err) {
    if (r->done) {
        if (r->done < 0 && err) *err = r->failed;
        return r->done;
    }
    if (!r->pipeline) return vit_set_error(err, VIT_ERR_ARG, "%s: not recording", r->path), -1;
    /* wake may have run before its message was in the bus's queue: it is about to be */
    if (g_atomic_int_get(&r->posted) && wait_ms < 1000) wait_ms = 1000;
    GstBus *bus = gst_element_get_bus(r->pipeline);
    GstMessage *m = bus ? gst_bus_timed_pop_filtered(
                              bus, (GstClockTime)(wait_ms > 0 ? wait_ms : 0) * GST_MSECOND,
                              GST_MESSAGE_EOS | GST_MESSAGE_ERROR)
                        : NULL;
    if (bus) gst_object_unref(bus);
    if (!m) return 0;
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS) {
        r->done = 1;
    } else {
        GError *ge = NULL;
        gchar *debug = NULL;
        gst_message_parse_error(m, &ge, &debug);
        int write = ge && ge->domain == GST_RESOURCE_ERROR;
        vit_set_error(&r->failed, VIT_ERR_IO, "%s: %s: %s", r->path,
                      write ? "cannot write it" : "the recording failed",
                      ge ? ge->message : "unknown error");
        if (ge) g_error_free(ge);
        g_free(debug);
        r->done = -1;
        if (err) *err = r->failed;
    }
    gst_message_unref(m);
    return r->done;
}

void recorder_close(Recorder *r) {
    if (r->pipeline) {
        gst_element_set_state(r->pipeline, GST_STATE_NULL); /* its threads joined */
        GstBus *bus = gst_element_get_bus(r->pipeline);
        if (bus) {
            gst_bus_set_sync_handler(bus, NULL, NULL, NULL);
            gst_object_unref(bus);
        }
        gst_object_unref(r->pipeline);
    }
    if (r->last) gst_buffer_unref(r->last);
    r->pipeline = r->src = NULL;
    r->last = NULL;
}
