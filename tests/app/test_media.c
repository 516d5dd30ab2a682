/* test_media.c - app/media/media.c without a camera: GStreamer's test pattern read frame by
 * frame (sizes, indices, timestamps in order, the picture moving), both modes; a video's
 * first bytes or name against a photo's (media_is_video); and the errors, each named and
 * none hanging: a missing file, a directory, a text file, a missing camera, an unknown
 * pattern, a call after the failure. Files the test writes go into DIR.
 *
 *     test_media DIR            the checks
 *     test_media DIR soak N     only N frames of the ball pattern, all read (under ASan: no
 *                               leak, nothing read out of bounds over a long stream)
 *     test_media DIR frames FILE  a line per frame of FILE, "INDEX PTS_NS W H X": X the mean
 *                               column of its bright pixels (red >= 128; -1: none), for
 *                               test_video.py's frames that draw their index; then "end" or
 *                               "error MESSAGE" */
#include "media/media.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static void write_file(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n) {
        printf("FAIL cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

/* media_open of what fails with code and a message that holds each of the words. */
static void open_fails(MediaKind kind, const char *what, VitStatus code, const char *word1,
                       const char *word2) {
    MediaSource s;
    VitError err = {0};
    VitStatus rc = media_open(&s, kind, what, MEDIA_ALL_FRAMES, &err);
    char msg[600];
    snprintf(msg, sizeof msg, "%s: refused with status %d (got %d): \"%s\"", what, code, rc,
             err.msg);
    check(rc == code && strstr(err.msg, word1) && (!word2 || strstr(err.msg, word2)), msg);
    media_close(&s);
    media_close(&s); /* twice: a closed source is fine */
}

static int soak(long n) {
    MediaSource s;
    VitError err;
    const MediaFrame *f;
    if (media_open(&s, MEDIA_TEST, "ball", MEDIA_ALL_FRAMES, &err)) {
        printf("FAIL %s\n", err.msg);
        return 1;
    }
    long got = 0;
    int64_t last = -1;
    unsigned sum = 0;
    while (got < n && media_next(&s, &f, &err) == 1) {
        if (f->index != got || f->pts_ns <= last) break;
        last = f->pts_ns;
        sum += f->rgb[(size_t)(f->h / 2) * f->w * 3 + (size_t)f->w * 3 / 2];
        got++;
    }
    media_close(&s);
    char what[200];
    snprintf(what, sizeof what, "%ld frames of the ball pattern read in order (asked %ld; %u)", got,
             n, sum);
    check(got == n, what);
    return failures ? 1 : 0;
}

static int frames(const char *path) {
    MediaSource s;
    VitError err;
    const MediaFrame *f;
    if (media_open(&s, MEDIA_FILE, path, MEDIA_ALL_FRAMES, &err)) {
        printf("error %s\n", err.msg);
        return 1;
    }
    int got;
    while ((got = media_next(&s, &f, &err)) == 1) {
        double sum = 0;
        long n = 0;
        for (int y = 0; y < f->h; y++)
            for (int x = 0; x < f->w; x++)
                if (f->rgb[((size_t)y * f->w + x) * 3] >= 128) sum += x, n++;
        printf("%ld %lld %d %d %.2f\n", f->index, (long long)f->pts_ns, f->w, f->h,
               n ? sum / n : -1.0);
    }
    if (got < 0)
        printf("error %s\n", err.msg);
    else
        printf("end\n");
    media_close(&s);
    return got < 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_media DIR [soak N]\n");
        return 2;
    }
    const char *dir = argv[1];
    mkdir(dir, 0777);
    if (argc == 4 && !strcmp(argv[2], "soak")) return soak(atol(argv[3]));
    if (argc == 4 && !strcmp(argv[2], "frames")) return frames(argv[3]);
    char path[1024], what[400];

    /* --- video or photo: the first bytes, then the name */
    static const uint8_t webm[] = {0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 1, 0, 0, 0};
    static const uint8_t mp4[] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'i', 's', 'o', 'm', 0, 0};
    static const uint8_t heic[] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'h', 'e', 'i', 'c', 0, 0};
    static const uint8_t avif[] = {0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f', 0, 0};
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    static const uint8_t ogg[] = {'O', 'g', 'g', 'S', 0, 2, 0, 0, 0, 0, 0, 0};
    static const uint8_t avi[] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'A', 'V', 'I', ' ', 0, 0};
    static const uint8_t webp[] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 0, 0};
    struct {
        const char *name;
        const uint8_t *b;
        size_t n;
        int video;
    } sniff[] = {
        {"a", webm, sizeof webm, 1}, {"b", mp4, sizeof mp4, 1},   {"c", heic, sizeof heic, 0},
        {"d", avif, sizeof avif, 0}, {"e", png, sizeof png, 0},   {"f", ogg, sizeof ogg, 1},
        {"g", avi, sizeof avi, 1},   {"h", webp, sizeof webp, 0}, {"i.WebM", png, sizeof png, 1}};
    for (size_t i = 0; i < sizeof sniff / sizeof *sniff; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sniff[i].name);
        write_file(path, sniff[i].b, sniff[i].n);
        snprintf(what, sizeof what, "media_is_video(%s, %02x %02x %02x %02x ...) = %d",
                 sniff[i].name, sniff[i].b[0], sniff[i].b[1], sniff[i].b[2], sniff[i].b[3],
                 sniff[i].video);
        check(media_is_video(path) == sniff[i].video, what);
    }
    check(media_is_video("https://example.org/clip") == 1, "a URI is a video");
    check(media_is_video("/nonexistent/photo") == 0, "a missing file without a video's name: "
                                                     "not a video (vit_image_load names it)");
    check(media_is_video("/nonexistent/clip.mp4") == 1, "a missing clip.mp4: a video");

    /* --- the test pattern, every frame: sizes, indices and timestamps in order, moving */
    MediaSource s;
    VitError err = {0};
    const MediaFrame *f;
    VitStatus rc = media_open(&s, MEDIA_TEST, "ball", MEDIA_ALL_FRAMES, &err);
    check(rc == VIT_OK, rc ? err.msg : "videotestsrc pattern=ball opens");
    if (rc == VIT_OK) {
        int in_order = 1, sized = 1, moved = 0, got = 0;
        uint8_t *prev = malloc(320 * 240 * 3);
        for (int i = 0; i < 45; i++) {
            if (media_next(&s, &f, &err) != 1) break;
            got++;
            /* videotestsrc's timestamps: frame i at i/30 s, rounded down to the ns */
            int64_t want = (int64_t)i * 1000000000 / 30;
            in_order &= f->index == i && f->pts_ns == want;
            sized &= f->w == 320 && f->h == 240 && f->rgb == s.frame.rgb;
            if (i && memcmp(prev, f->rgb, 320 * 240 * 3)) moved++;
            memcpy(prev, f->rgb, 320 * 240 * 3);
        }
        free(prev);
        snprintf(what, sizeof what, "45 frames read (%d): 320x240 RGB, index i at i/30 s", got);
        check(got == 45 && in_order && sized, what);
        check(s.fps == 30.0, "the stream's frame rate: 30");
        snprintf(what, sizeof what, "the ball moves: %d of 44 frames differ from the one before",
                 moved);
        check(moved >= 40, what);
        media_close(&s);
        check(media_next(&s, &f, &err) == -1 && strstr(err.msg, "closed"),
              "media_next after media_close: -1, \"closed\"");
    }

    /* --- the newest frame wins (a live pattern): still in order, none twice */
    rc = media_open(&s, MEDIA_TEST, "smpte", MEDIA_NEWEST, &err);
    check(rc == VIT_OK, rc ? err.msg : "a live pattern opens, newest-frame mode");
    if (rc == VIT_OK) {
        int ok = 1;
        int64_t last = -1;
        for (int i = 0; i < 5 && ok; i++) {
            ok = media_next(&s, &f, &err) == 1 && f->index == i && f->pts_ns > last;
            last = f->pts_ns;
        }
        check(ok && s.live, "5 frames of a live pattern, their timestamps increasing");
        media_close(&s);
    }

    /* --- errors: each named, none hanging */
    snprintf(path, sizeof path, "%s/missing.webm", dir);
    open_fails(MEDIA_FILE, path, VIT_ERR_IO, "missing.webm: cannot open", "No such file");
    open_fails(MEDIA_FILE, dir, VIT_ERR_IO, "is a directory", NULL);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    const char *text = "not a video at all, only words\n";
    write_file(path, text, strlen(text));
    open_fails(MEDIA_FILE, path, VIT_ERR_IMAGE, "notes.txt: GStreamer cannot decode it", NULL);
    snprintf(path, sizeof path, "%s/a", dir); /* a WebM's magic and nothing else */
    open_fails(MEDIA_FILE, path, VIT_ERR_IMAGE, "GStreamer cannot decode it", NULL);
    open_fails(MEDIA_CAMERA, "/dev/video-vitlens-none", VIT_ERR_IO,
               "/dev/video-vitlens-none: no camera there", "No such file");
    open_fails(MEDIA_TEST, "no-such-pattern", VIT_ERR_ARG, "not a videotestsrc pattern", NULL);
    open_fails(MEDIA_FILE, "", VIT_ERR_ARG, "no source given", NULL);

    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
