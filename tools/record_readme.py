#!/usr/bin/python3
"""The README's animated capture (docs/recording.webp), made by the window's own recorder
(Ctrl+R) from a test video: videotestsrc's ball, encoded here with gst-launch-1.0, plays on the
built-in model (which tells circles from squares, crosses, ...); the recording shows the
attention following the ball, then layer 3 (Left), then rollout (R).

  xvfb-run -a -s "-screen 0 640x480x24" /usr/bin/python3 tools/record_readme.py \\
      --app build/vitlens [--out docs/recording.webp] [--width 480] [--fps 10]

The window fits the 640x480 screen (608x422 px: its text sized for that). Its recording
(WebM, VP9, each frame at the time it was drawn) is decoded by gst-launch-1.0 at a constant
--fps (videorate repeats a frame for as long as it was on screen) and --width, and
ImageMagick's convert writes the animated WebP. Needs xvfb, xdotool, gstreamer1.0-tools and
imagemagick (scripts/install-deps.sh installs them with the test tools). Driven by the app's
trace (VITLENS_TRACE), never by guessing when it is ready; the pauses between the keys are the
animation's pacing.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "gui"))
from test_gui import App, find_window, quit_app, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "recording.webp"))
    ap.add_argument("--width", type=int, default=480, help="the animation's width, px")
    ap.add_argument("--fps", type=int, default=10, help="the animation's frames per second")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vitlens-readme-rec-")
    try:
        clip = os.path.join(work, "ball.webm")
        subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "pattern=ball", "num-buffers=300",
                        "!", "video/x-raw,width=224,height=224,framerate=20/1", "!", "vp8enc",
                        "!", "webmmux", "!", "filesink", f"location={clip}"], check=True)
        app = App([a.app, "--save-dir", work, clip], dict(os.environ, VITLENS_TRACE="1"))
        try:
            app.wait_line(lambda s: s.startswith(f"ready {clip}#"), "the first frame")
            app.wid = find_window(app)
            run(["xdotool", "windowfocus", "--sync", app.wid])
            path, rec = None, {}

            def key(k, then_s):
                run(["xdotool", "key", "--clearmodifiers", k])
                time.sleep(then_s)

            key("ctrl+r", 0)
            line = app.wait_line(lambda s: s.startswith("record start "), "the recording's start")
            path = line.split("path=")[1].split()[0]
            rec = dict(kv.split("=", 1) for kv in line.split()[2:])  # w=, h=: the window's
            time.sleep(2.5)  # the last layer's attention follows the ball
            key("Left", 1.5)  # layer 3
            key("r", 2.0)  # rollout
            key("ctrl+r", 0)
            app.wait_line(lambda s: s.startswith("record saved "), "the file saved")
            quit_app(app)
        finally:
            if app.proc.poll() is None:
                app.proc.kill()
        height = round(int(rec["h"]) * a.width / int(rec["w"]))  # the window's proportions
        frames = os.path.join(work, "frames")
        os.makedirs(frames)
        subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!",
                        "matroskademux", "!", "vp9dec", "!", "videoconvert", "!", "videorate",
                        "!", f"video/x-raw,framerate={a.fps}/1", "!", "videoscale", "!",
                        f"video/x-raw,width={a.width},height={height},pixel-aspect-ratio=1/1",
                        "!", "pngenc", "!", "multifilesink",
                        f"location={frames}/f_%05d.png"], check=True)
        pngs = sorted(glob.glob(os.path.join(frames, "f_*.png")))
        subprocess.run(["convert", "-delay", str(100 // a.fps), "-loop", "0", *pngs,
                        "-quality", "70", a.out], check=True)
        print(f"{a.out}: {len(pngs)} frames at {a.fps} fps, {os.path.getsize(a.out)} bytes "
              f"(from {os.path.basename(path)}, {os.path.getsize(path)} bytes)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
