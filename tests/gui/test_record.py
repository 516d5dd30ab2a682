#!/usr/bin/python3
"""Ctrl+R records the window (issue 37): the file decodes back to the frames the window drew.

On the built-in model, driven by the app's trace (VITLENS_TRACE=1: "record start path=P",
"record frame index=K pts=T ..." per frame handed to the encoder, the "frame" line after it
with its state, "record frame index=K pts=T again=1" for the stop's repeat of the last frame,
"record saved path=P frames=N") and, with VITLENS_RECORD_DUMP=DIR, each recorded frame's
pixels as the window drew them (DIR/rec_NNNNNN.ppm). The file is decoded by
`test_recorder DIR decode` (media.c: GStreamer's decoder, frame by frame with timestamps).

1. A video (a clip the test encodes: videotestsrc's ball, 160x120, 20 fps): Ctrl+R while it
   plays, some frames, Space, Left twice (the layer on screen: 4 -> 2, the same video frame),
   Ctrl+R. The file is --save-dir/clip_default_rec1.webm; the status line said "recording to
   clip_default_rec1.webm", then "saved clip_default_rec1.webm, N frames". Decoded:
   - as many frames as the trace recorded and "record saved" counts; each frame's timestamp
     the trace's (whole ms: WebM's unit); they span the time between Ctrl+R and Ctrl+R as the
     test saw it (within 0.5 s): the file plays at the screen's pace;
   - each decoded frame within PSNR_DB of the window's frame it recorded (the dump);
   - the control: the first frame drawn at layer 2 decoded, against the last frame drawn at
     layer 4 (the same video frame, paused: only the map differs), is below PSNR_DB.
2. A still photo (the built-in model's demo): Ctrl+R into a --save-dir that is a file
   puts "cannot write it" naming the file on the error line and the window answers (G); the
   folder made, Ctrl+R records, Right / Left move the layer, Ctrl+R: the frames and
   timestamps decode back as above, the last frame kept until the stop; a second recording
   (the next name, _rec2) is finished when the app quits while it runs.

PSNR_DB = 30: VP9 at cq-level 12 in 4:2:0 (the chroma at half resolution, which the window's
sharp coloured edges feel most: the text, the heat map's patch edges) measured 33-35 dB on
these frames; 30 dB is the usual floor of a good lossy copy. Frames that differ only in a
few pixels (the status line's fps) are within 30 dB of each other too, so the control is a
whole map changed: measured 23-25 dB.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_record.py \\
      --app build/vitlens --recorder build/tests/app/test_recorder --out build/tests/gui/record
Exits 0, 1 on a failed check, 77 (skip) without gst-launch-1.0 or the built-in model.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import (App, check, find_window, quit_app, run, run_checks,  # noqa: E402
                      video_setup)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PSNR_DB = 30.0


class RecApp(App):
    """The app, with the recorder's trace lines kept: recorded frames [(index, pts, again)],
    the layer each was drawn at (the "frame" line after it), start, stop, saved."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.rec, self.layer_of, self.saved, self.start_path = [], {}, None, None
        self.paused = 0
        self._pending = None

    def take(self, line):
        m = re.match(r"record frame index=(\d+) pts=([\d.]+)( again=1)?", line)
        if m:
            self.rec.append((int(m.group(1)), float(m.group(2)), bool(m.group(3))))
            if not m.group(3):
                self._pending = int(m.group(1))
        elif line.startswith("record start path="):
            self.start_path = line.split("path=")[1].split()[0]
        elif line.startswith("record saved "):
            self.saved = dict(kv.split("=", 1) for kv in line.split()[2:])
        elif line.startswith("live paused"):
            self.paused += 1
        is_frame = super().take(line)
        if is_frame and self._pending is not None:
            self.layer_of[self._pending] = int(self.state["layer"])
            self._pending = None
        return is_frame

    def key(self, k):
        run(["xdotool", "key", "--clearmodifiers", k])


def ppm(path):
    b = open(path, "rb").read()
    m = re.match(rb"P6\n(\d+) (\d+)\n255\n", b)
    w, h = int(m.group(1)), int(m.group(2))
    return np.frombuffer(b[m.end():], np.uint8).reshape(h, w, 3)


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / mse) if mse > 0 else 99.0


def decode(a, work, path):
    """The frames of path as media.c decodes them: [(pts_s, rgb [h, w, 3])]."""
    raw = os.path.join(work, "decoded.raw")
    # under ASan: GLib's first quark block, dropped on purpose, is tests/app's suppression
    env = dict(os.environ, ASAN_OPTIONS="fast_unwind_on_malloc=0", LSAN_OPTIONS="suppressions="
               f"{os.path.join(ROOT, 'tests', 'app', 'lsan.supp')}:print_suppressions=0")
    r = subprocess.run([a.recorder, work, "decode", path, raw], capture_output=True, text=True,
                       env=env)
    lines = r.stdout.split("\n")
    check(r.returncode == 0 and "end" in lines,
          f"{os.path.basename(path)} decodes to its end ({r.stdout[-300:]!r} {r.stderr[-300:]!r})")
    data, frames, off = np.fromfile(raw, np.uint8), [], 0
    for ln in lines:
        if not ln[:1].isdigit():
            continue
        _, pts, w, h = (int(x) for x in ln.split())
        frames.append((pts / 1e9, data[off:off + w * h * 3].reshape(h, w, 3)))
        off += w * h * 3
    return frames


def check_file(a, app, work, dump, path, span_s):
    """The decoded file against the trace and the dumps: count, timestamps, pace, PSNR.
    Returns the decoded frames."""
    dec = decode(a, work, path)
    n = int(app.saved["frames"])
    check(len(dec) == n == len(app.rec),
          f"{len(dec)} frames decoded = {n} \"record saved\" counts = {len(app.rec)} recorded")
    check([k for k, _, _ in app.rec] == list(range(n)), "the trace's indices 0 .. N-1 in order")
    check(all(abs(d[0] - t) < 1e-6 for d, (_, t, _) in zip(dec, app.rec)),
          "each decoded frame's timestamp = the trace's (whole ms)")
    pts = [t for _, t, _ in app.rec]
    check(all(x < y for x, y in zip(pts, pts[1:])) and pts[0] == 0.0,
          f"timestamps from 0, increasing ({pts[0]} .. {pts[-1]})")
    check(abs(pts[-1] - span_s) < 0.5, f"the file spans {pts[-1]:.2f} s: the {span_s:.2f} s "
          "between Ctrl+R and Ctrl+R as the test saw them (the screen's pace)")
    worst = 99.0
    for k, (_, img) in enumerate(dec):
        again = app.rec[k][2]
        ref = ppm(os.path.join(dump, f"rec_{k - 1 if again else k:06d}.ppm"))
        if img.shape != ref.shape:
            check(False, f"frame {k}: {img.shape} = the window's {ref.shape}")
        worst = min(worst, psnr(img, ref))
    check(worst >= PSNR_DB, f"every decoded frame within {PSNR_DB} dB PSNR of the window's frame "
          f"it recorded (worst {worst:.1f} dB)")
    return dec


def test_video(a, clip, work, env):
    save, dump = os.path.join(work, "save"), os.path.join(work, "dump")
    os.makedirs(save), os.makedirs(dump)
    app = RecApp([a.app, "--save-dir", save, clip], dict(env, VITLENS_RECORD_DUMP=dump))

    def checks(app):
        app.wait_line(lambda s: s.startswith(f"ready {clip}#"), "the first frame's ready")
        app.wid = find_window(app)
        run(["xdotool", "windowfocus", "--sync", app.wid])
        app.key("ctrl+r")
        t0 = time.monotonic()
        app.wait_line(lambda s: s.startswith("status ") and "recording to clip_default_rec1.webm"
                      in s, "\"recording to clip_default_rec1.webm\" on the status line")
        check(app.start_path == os.path.join(save, "clip_default_rec1.webm"),
              f"the file: --save-dir/clip_default_rec1.webm ({app.start_path})")
        app.wait_line(lambda s: len(app.rec) >= 8 and s.startswith("frame "),
                      "8 frames recorded while the video plays")
        app.key("space")
        app.wait_line(lambda s: app.paused > 0, "Space: paused")
        app.key("Left")
        app.wait_state("Left: layer 3", layer=2)
        app.key("Left")
        app.wait_state("Left again: layer 2", layer=1)
        time.sleep(0.5)  # the picture stays: the stop's frame repeats it
        app.key("ctrl+r")
        t1 = time.monotonic()
        app.wait_line(lambda s: app.saved is not None, "record saved")
        line = app.wait_line(lambda s: s.startswith("status ") and "saved " in s,
                             "the status line's \"saved\"")
        n = app.saved["frames"]
        check(f"saved clip_default_rec1.webm, {n} frames" in line, f"status: {line!r}")
        # a frame the encoder was too busy for is dropped, counted, and not in the trace's
        # "record frame" lines nor in the file: the checks below hold either way
        print(f"     frames dropped (the encoder behind): {app.saved['dropped']}", flush=True)
        quit_app(app)
        dec = check_file(a, app, work, dump, app.start_path, t1 - t0)
        # the control: the same video frame, another layer's map
        at4 = [k for k, _, _ in app.rec if app.layer_of.get(k) == 3]
        at2 = [k for k, _, _ in app.rec if app.layer_of.get(k) == 1]
        check(at4 and at2, f"frames recorded at layer 4 ({len(at4)}) and at layer 2 ({len(at2)})")
        before = ppm(os.path.join(dump, f"rec_{at4[-1]:06d}.ppm"))
        after_dec = dec[at2[0]][1]
        own, other = psnr(after_dec, ppm(os.path.join(dump, f"rec_{at2[0]:06d}.ppm"))), \
            psnr(after_dec, before)
        check(own >= PSNR_DB > other,
              f"control: frame {at2[0]} (layer 2) decoded is {own:.1f} dB from its own, "
              f"{other:.1f} dB from frame {at4[-1]} (layer 4, the same video frame): below "
              f"{PSNR_DB} dB")
        print(f"     the GUI thread per recorded frame: mean {app.saved['ms_mean']} ms, max "
              f"{app.saved['ms_max']} ms; the file {os.path.getsize(app.start_path)} bytes for "
              f"{t1 - t0:.1f} s", flush=True)

    return run_checks(app, checks)


def test_still(a, work, env):
    save, dump = os.path.join(work, "save_still"), os.path.join(work, "dump_still")
    os.makedirs(dump)
    with open(save, "w") as f:  # a file where the folder should be
        f.write("not a folder\n")
    app = RecApp([a.app, "--save-dir", save], dict(env, VITLENS_RECORD_DUMP=dump))

    def checks(app):
        app.wait_line(lambda s: s.startswith("ready "), "the demo photo's ready")
        app.wait_state("its first frame", scene=1)
        app.wid = find_window(app)
        run(["xdotool", "windowfocus", "--sync", app.wid])
        app.key("ctrl+r")
        app.wait_error(lambda e: "save_still/" in e, "Ctrl+R into a file: the error line")
        check("save_still/" in app.error and "cannot write it" in app.error,
              f"the error names the file: {app.error!r}")
        grid = app.state.get("grid")
        app.key("g")
        app.wait_line(lambda s: s.startswith("frame ") and app.state.get("grid") != grid,
                      "G after the error: the window answers")
        print("ok   G after the error: a frame with the grid toggled", flush=True)
        os.remove(save)
        os.makedirs(save)
        app.key("ctrl+r")
        t0 = time.monotonic()
        app.wait_line(lambda s: len(app.rec) >= 1 and s.startswith("frame "), "recording")
        check(app.state.get("error") == "0", "the error line cleared by the recording's start")
        for k, layer in (("Left", 2), ("Left", 1), ("Right", 2)):
            time.sleep(0.3)
            app.key(k)
            app.wait_state(f"{k}: layer {layer + 1}", layer=layer)
        shot = app.shot()  # the window as the X server shows it
        time.sleep(0.6)  # a still: no frame drawn, the stop repeats the last
        app.key("ctrl+r")
        t1 = time.monotonic()
        app.wait_line(lambda s: app.saved is not None, "record saved")
        check(app.rec[-1][2] and app.rec[-1][1] - app.rec[-2][1] > 0.4,
              f"the last frame again at the stop ({app.rec[-2][1]:.3f} -> {app.rec[-1][1]:.3f} s)")
        # the frames recorded are the window's pixels the right way up (the canvas' rows are
        # read as they are: the control, the same turned over, is far from the screen)
        drawn = [k for k, _, again in app.rec if not again]  # the stop's repeat has no dump
        last = ppm(os.path.join(dump, f"rec_{drawn[-1]:06d}.ppm")).astype(np.int16)
        same = last.shape == shot.shape
        d = float(np.abs(last - shot).mean()) if same else -1.0
        flipped = float(np.abs(last[::-1] - shot).mean()) if same else -1.0
        check(same and d < 0.5 < flipped, f"the last frame recorded is the screen's "
              f"{shot.shape[1]}x{shot.shape[0]} px (mean |difference| {d:.2f} levels; turned "
              f"over: {flipped:.2f})")
        first = app.start_path
        check_file(a, app, work, dump, first, t1 - t0)  # before the next one's dumps
        # a second recording, the app quit while it runs: the file is finished on the way out
        app.key("ctrl+r")
        app.wait_line(lambda s: app.start_path != first and s.startswith("frame "),
                      "a second recording")
        check(app.start_path.endswith("_rec2.webm"), f"the next free name: {app.start_path}")
        quit_app(app)
        frames = decode(a, work, app.start_path)
        check(len(frames) >= 1, f"quit while recording: the file decodes to its end "
              f"({len(frames)} frames)")

    return run_checks(app, checks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--recorder", required=True, help="tests/app's test_recorder")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    setup = video_setup(a, ROOT, 200, 20)
    if not isinstance(setup, tuple):
        return setup
    work, clip = setup
    env = dict(os.environ, VITLENS_TRACE="1")
    ok = test_video(a, clip, work, env)
    ok = test_still(a, work, env) and ok
    print("record: all checks passed" if ok else "record: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
