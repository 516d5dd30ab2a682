#!/usr/bin/python3
"""A video in the window (issue 37, phase 2): attention on every frame.

On the built-in model and a clip the test encodes itself with gst-launch-1.0 (videotestsrc's
ball, 160x120, 20 fps, 20 s, VP8 in WebM), driven by the app's own trace lines
("live frame index=I pts=T dropped=D shown=N" per frame shown, "live paused index=I" once a
pause has settled, "maps ... map=HASH"), never by sleeps:
- `vitlens clip.webm`: frames come on their own; the indices shown strictly increase (never
  reordered), each frame's timestamp is its index / 20 s, the dropped count never decreases;
- the maps of a frame shown equal the still photo's of that frame bit for bit: the trace's
  map hash after "live frame index=I" is the FNV-1a hash of L04_mean.npy that `vitlens
  --export` writes for frame I decoded to a PNG by gst-launch-1.0 (the frame thread's
  pixels are uridecodebin ! videoconvert ! RGB's, as phase 1's test_video.py checks);
- Space pauses: "live paused index=P"; then `.` shows exactly frame P + 1 (no frame came
  in between: the step's is the next index) and pauses there; `,` shows frame P again;
  Space plays on: the next frames' indices are above P and increase;
- the status line names the video's time, the frames per second and the frames dropped;
- the features PCA (X) keeps its basis while frames play (the trace's pcaframe: the frame it
  was fitted on), Shift+C while paused refits it on the frame paused on;
- bad input: a file GStreamer cannot decode dropped on the window puts the message on the
  error line, the window keeps the frame it showed and answers keys (G: a frame);
  `--camera /dev/no-such-camera` opens the window on the start screen with the message;
  both quit cleanly (no ASan report, exit 0).

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_live.py \\
      --app build/vitlens --out build/tests/gui/live
Exits 0, 1 on a failed check, 77 (skip) without gst-launch-1.0 or the built-in model.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import (App, check, find_window, quit_app, run, run_checks,  # noqa: E402
                      trace_hash as fnv, video_setup)

FPS, N_FRAMES = 20, 400
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")



class LiveApp(App):
    """The app, with the trace's live lines kept: frames shown [(index, pts, dropped)], each
    frame's map hash (the "maps" line after its "live frame" line), the pauses."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.frames, self.hashes, self.paused, self.latency = [], {}, [], []
        self._last = None

    def take(self, line):
        m = re.match(r"live frame index=(\d+) pts=([-\d.]+) dropped=(\d+) shown=(\d+)", line)
        if m:
            self.frames.append((int(m.group(1)), float(m.group(2)), int(m.group(3))))
            self._last = int(m.group(1))
        elif line.startswith("maps ") and self._last is not None:
            self.hashes.setdefault(self._last, []).append(re.search(r" map=(\w+)", line).group(1))
            self._last = None
        elif line.startswith("live latency "):  # after the frame that shows it: its index
            m = re.match(r"live latency index=(\d+) ms=([\d.]+)$", line)
            self.latency.append((int(m.group(1)), float(m.group(2))) if m else (None, line))
        elif line.startswith("live paused index="):
            self.paused.append(int(line.split("=")[1]))
        return super().take(line)

    def wait_frames(self, n, what):
        want = len(self.frames) + n
        self.wait_line(lambda s: len(self.frames) >= want and self._last is None and
                       s.startswith("maps "), what)

    def key_paused(self, key, what):
        """key, then its pause settled: the index it stopped on."""
        n = len(self.paused)
        run(["xdotool", "key", "--clearmodifiers", key])
        self.wait_line(lambda s: len(self.paused) > n, what)
        return self.paused[-1]


def frame_png(clip, work, index):
    """Frame `index` of clip as gst-launch-1.0 decodes it (the frame thread's pipeline)."""
    d = os.path.join(work, "png")
    if not os.path.isdir(d):
        os.makedirs(d)
        subprocess.run(["gst-launch-1.0", "-q", "uridecodebin", f"uri=file://{clip}", "!",
                        "videoconvert", "!", "video/x-raw,format=RGB", "!", "pngenc", "!",
                        "multifilesink", f"location={d}/f_%06d.png"], check=True)
    return os.path.join(d, f"f_{index:06d}.png")


def exported_hash(a, clip, work, index):
    """The hash of L04_mean.npy (the last layer's mean of the heads: the window's first view)
    that --export writes for frame `index`'s PNG, as a still photo."""
    out = os.path.join(work, f"export_{index}")
    if not os.path.isdir(out):
        r = subprocess.run([a.app, "--export", out, frame_png(clip, work, index)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"--export of frame {index}'s PNG: exit {r.returncode} "
              f"{r.stderr[-500:]}")
    return fnv(os.path.join(out, "L04_mean.npy"))


def test_play(a, clip, work, env):
    app = LiveApp([a.app, "--stdin-drops", clip], env)

    def checks(app):
        app.wait_line(lambda s: s.startswith(f"ready {clip}#"), "the first frame's ready")
        app.wait_state("the first frame drawn", scene=1)
        app.wid = find_window(app)
        run(["xdotool", "windowfocus", "--sync", app.wid])
        app.wait_frames(4, "four more frames shown")
        idx = [f[0] for f in app.frames]
        check(all(x < y for x, y in zip(idx, idx[1:])),
              f"the frames shown while playing: indices strictly increase ({idx[:12]}...)")
        check(all(abs(t - i / FPS) < 1e-6 for i, t, _ in app.frames),
              "each frame's timestamp is its index / 20 s")
        # each frame shown has its latency (read -> swap, bench/live.py) once it is on screen
        lat = dict(app.latency)
        shown = [f[0] for f in app.frames[:-1]]  # the last one's may still be coming
        check(all(0 < lat.get(i, -1) < 60000 for i in shown) and None not in lat,
              f"a 'live latency' line per frame shown, 0 < ms < 60000 ({app.latency[:6]})")
        drops = [f[2] for f in app.frames]
        check(all(x <= y for x, y in zip(drops, drops[1:])), f"dropped never decreases {drops}")
        # pause, step forward, step back, play on
        p = app.key_paused("space", "Space: the pause settled")
        check(p == app.frames[-1][0], f"Space: paused on the last frame shown ({p})")
        n = len(app.frames)
        q = app.key_paused("period", ". while paused")
        check(len(app.frames) == n + 1 and app.frames[-1][0] == p + 1 and q == p + 1,
              f".: exactly one frame shown, frame {p + 1} ({[f[0] for f in app.frames[n:]]}), "
              f"paused there ({q}): none came while paused")
        stepped = app.hashes.get(p + 1, [None])[-1]
        r = app.key_paused("comma", ", while paused")
        check(len(app.frames) == n + 2 and app.frames[-1][0] == p and r == p,
              f",: back to frame {p} ({[f[0] for f in app.frames[n:]]})")
        h = app.hashes.get(p, [])
        check(len(h) >= 2 and h[-1] == h[0], f"frame {p} again (the file reopened, read up to "
              f"it): the same map as when it played ({h})")
        m = len(app.frames)
        run(["xdotool", "key", "--clearmodifiers", "space"])
        app.wait_frames(3, "Space again: frames come again")
        after = [f[0] for f in app.frames[m:]]
        check(after[0] > p and all(x < y for x, y in zip(after, after[1:])),
              f"played on after {p}: {after}")
        line = app.wait_line(lambda s: s.startswith("status ") and " fps, " in s,
                             "the status line's video part")
        check(re.search(r"video \d+:\d\d\.\d / 0:20\.0, frame \d+, [\d.]+ fps, \d+ dropped",
                        line), f"the status line: time / length, frame, fps, dropped: {line!r}")
        # the features PCA (X): its basis held from the frame it was fitted on while frames play,
        # Shift+C refits it on the frame paused on (the trace's pcaframe)
        run(["xdotool", "key", "--clearmodifiers", "x"])
        app.wait_line(lambda s: s.startswith("frame ") and app.state.get("kind") == "pca" and
                      app.state.get("pcaframe", "-1") != "-1", "X: the features PCA, fitted")
        fit = int(app.state["pcaframe"])
        app.wait_frames(3, "frames shown with the PCA")
        q = app.key_paused("space", "Space: paused on the PCA")
        app.wait_line(lambda s: s.startswith("frame "), "a frame line after the pause")
        check(fit < q and app.state.get("pcaframe") == str(fit),
              f"the PCA's basis held from frame {fit} while frames up to {q} played "
              f"(pcaframe={app.state.get('pcaframe')})")
        run(["xdotool", "key", "--clearmodifiers", "shift+c"])
        app.wait_line(lambda s: s.startswith("frame ") and app.state.get("pcaframe") == str(q),
                      f"Shift+C: the PCA refitted on frame {q}, the one paused on")
        print(f"ok   Shift+C: the PCA's basis from frame {fit} to frame {q}", flush=True)
        # a file GStreamer cannot decode, dropped: the message, the frame stays, keys work
        bad = os.path.join(work, "bad.webm")
        with open(bad, "wb") as f:
            f.write(b"\x1a\x45\xdf\xa3" + os.urandom(4000))
        app.drop(bad)
        app.wait_error(lambda e: "bad.webm" in e, "the error line naming bad.webm")
        check(app.state.get("scene") == "1", f"the last frame stays on screen: {app.error!r}")
        grid = app.state.get("grid")
        run(["xdotool", "key", "--clearmodifiers", "g"])
        app.wait_line(lambda s: s.startswith("frame ") and app.state.get("grid") != grid,
                      "G after the error: the window answers")
        print("ok   G after the bad file: a frame with the grid toggled", flush=True)
        quit_app(app)
        # the maps of frames shown against the still photos' (after the app: --export is slow)
        played = [i for i in idx if i in app.hashes][-2:]
        for i in played:
            want = exported_hash(a, clip, work, i)
            check(app.hashes[i][0] == want, f"frame {i} while playing: the window's map "
                  f"{app.hashes[i][0]} = the still photo's export {want}")
        want = exported_hash(a, clip, work, p + 1)
        check(stepped == want, f"the stepped frame {p + 1}: map {stepped} = the export's {want}")

    return run_checks(app, checks)


def test_no_camera(a, env):
    app = LiveApp([a.app, "--camera", "/dev/no-such-camera"], env)

    def checks(app):
        app.wait_error(lambda e: "/dev/no-such-camera" in e, "the error line")
        check("/dev/no-such-camera" in app.error and "no camera" in app.error,
              f"--camera /dev/no-such-camera: {app.error!r}")
        check(app.state.get("scene") == "0", "the start screen")  # the error's frame
        app.wid = find_window(app)
        run(["xdotool", "windowfocus", "--sync", app.wid])
        grid = app.state.get("grid")
        run(["xdotool", "key", "--clearmodifiers", "g"])
        app.wait_line(lambda s: s.startswith("frame ") and app.state.get("grid") != grid,
                      "G: the window answers")
        print("ok   G on the start screen: a frame with the grid toggled", flush=True)
        quit_app(app)

    return run_checks(app, checks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    setup = video_setup(a, ROOT, N_FRAMES, FPS)
    if not isinstance(setup, tuple):
        return setup
    work, clip = setup
    env = dict(os.environ, VITLENS_TRACE="1")
    ok = test_play(a, clip, work, env)
    ok = test_no_camera(a, env) and ok
    print("live: all checks passed" if ok else "live: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
