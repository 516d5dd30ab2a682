#!/usr/bin/python3
"""F with no window manager (issue 17): kiosk and projector setups, bare X, Xvfb.

SDL asks a window manager for fullscreen (_NET_WM_STATE_FULLSCREEN) and reports the
display's size at once; with no manager nothing resized the X window, so the frame,
laid out for the whole screen, was cut. Here, under a bare Xvfb at 1920x1080 and on
the built-in model, F must make the X window itself 1920x1080 at (0, 0), and the
screen (the root window, not the app's window) must show the whole frame: the status
bar along the bottom rows with the end of its line, and the top-5 panel with its
title. F again puts the window back where it was, at its old size.

  xvfb-run -a -s "-screen 0 1920x1080x24" /usr/bin/python3 test_fullscreen.py \
      --app build/vitlens --out build/tests/gui/fullscreen
Exits 0, 1 on a failed check.
"""
import argparse
import io
import os
import re
import subprocess
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import TIMEOUT_S, App, Fail, check, quit_app, run, run_checks, save  # noqa: E402

SCREEN = (1920, 1080)
ACCENT = (252, 232, 38)  # the panels' titles


def geometry(wid):
    """The X window's (x, y, width, height) on the root window, from xwininfo."""
    out = subprocess.run(["xwininfo", "-id", wid], check=True, capture_output=True,
                         text=True).stdout
    g = dict(re.findall(r"^\s*(Absolute upper-left [XY]|Width|Height):\s*(-?\d+)", out, re.M))
    return tuple(int(g[k]) for k in ("Absolute upper-left X", "Absolute upper-left Y",
                                     "Width", "Height"))


def wait_geometry(wid, want, what, timeout_s=30.0):
    """The X window's geometry once it is `want`, or its last one after timeout_s (the
    X server applies a move or resize a little after SDL reports it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        g = geometry(wid)
        if g == want or time.monotonic() > deadline:
            print(f"     {what}: window at ({g[0]}, {g[1]}), {g[2]}x{g[3]}", flush=True)
            return g
        time.sleep(0.05)


def screen_shot():
    """The whole screen (the root window), once it has settled (two equal in a row)."""
    prev, deadline = None, time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:  # a loaded X server: no count of tries is enough
        png = subprocess.run(["import", "-window", "root", "png:-"], check=True,
                             capture_output=True).stdout
        img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)
        if prev is not None and np.array_equal(prev, img):
            return img
        prev = img
    raise Fail(f"screen does not settle in {TIMEOUT_S:.0f} s")


def near(img, colour, tol):
    return np.abs(img - np.array(colour, np.int16)).max(axis=-1) <= tol


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not os.environ.get("DISPLAY"):
        print("FAIL: no DISPLAY: run under xvfb-run -s '-screen 0 1920x1080x24'")
        return 1
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    demo_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets",
                            "default", "demo")
    photo = os.path.realpath(os.path.join(
        demo_dir, sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))[0]))
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)

    def fullscreen(app):
        app.start(photo)
        tree = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"],
                              capture_output=True, text=True).stdout
        check("not found" in tree or "no such atom" in tree,
              f"no window manager on this display ({tree.strip()})")
        before = geometry(app.wid)
        size0 = app.state["window"]
        bar = tuple(int(v) for v in app.shot()[-2, 2])  # the status bar's background
        check(before[2:] != SCREEN and max(bar) > 10,
              f"a window smaller than the screen: ({before[0]}, {before[1]}), "
              f"{before[2]}x{before[3]}; status bar colour {bar}, not black")

        app.key("f", fullscreen=1)
        app.wait_state("fullscreen, laid out for the screen", window="%d,%d" % SCREEN)
        g = wait_geometry(app.wid, (0, 0) + SCREEN, "F")
        scr = screen_shot()
        save(scr, os.path.join(out, "fullscreen.png"))
        W, H = SCREEN
        # the status bar: its background along the bottom rows, edge to edge, and the
        # end of its line (the predicted class, right-aligned) in it
        rows = scr[H - 3:]
        on_bar = near(rows, bar, 6).mean()
        bar_h = int(np.argmax(~near(scr[::-1, 2], bar, 6))) if on_bar > 0.5 else 0
        right = scr[H - max(bar_h, 1):, W - 300:]
        text_px = int((right.max(axis=-1) > 150).sum())
        # the top-5 panel: its title and first bar in the accent colour, near the top
        px, pw = (int(v) for v in app.state["panel"].split(","))
        panel = scr[:H // 4, px:px + pw] if pw > 0 else scr[:0, :0]
        title_px = int(near(panel, ACCENT, 40).sum())
        check(on_bar > 0.95, f"F: the status bar fills the screen's bottom rows "
              f"({on_bar:.0%} of them in its colour {bar})")
        check(bar_h > 10 and text_px > 20,
              f"F: the end of the status line is on the screen ({text_px} text px in the "
              f"{bar_h} px bar's last 300 columns)")
        check(pw > 0 and px + pw <= W and title_px > 20,
              f"F: the top-5 panel is on the screen (columns {px}..{px + pw}, "
              f"{title_px} px in the accent colour: its title, the first row's bar)")
        check(g == (0, 0) + SCREEN, f"F: the X window covers the screen: ({g[0]}, {g[1]}), "
              f"{g[2]}x{g[3]}, want (0, 0), {W}x{H}")

        app.key("f", fullscreen=0)
        app.wait_state("back to the window's size", window=size0)
        g = wait_geometry(app.wid, before, "F again")
        check(g == before, f"F again: the window is back at ({g[0]}, {g[1]}), {g[2]}x{g[3]} "
              f"(was ({before[0]}, {before[1]}), {before[2]}x{before[3]})")
        app.wait_state("redrawn", busy=0)
        scr = screen_shot()
        x, y, w, h = before
        outside = np.ones(scr.shape[:2], bool)
        outside[y:y + h, x:x + w] = False
        check(np.abs(scr[outside]).max() < 8,
              "F again: nothing of the frame is left outside the window")
        quit_app(app)

    ok = run_checks(App([a.app, photo], env), fullscreen)
    print("fullscreen: all checks passed" if ok else "fullscreen: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
