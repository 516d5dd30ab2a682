#!/usr/bin/python3
"""Partial redraws equal whole ones (issue 17: draw only what changed).

The renderer records each frame as a list of primitives and redraws, into its canvas,
only the rectangles where the list differs from the last frame's (app/render/drawlist.h).
With VITLENS_CHECK_REDRAW=1 the app also draws every partial frame whole, offscreen,
and its trace line says in how many pixels the two differ (mismatch=N; -1 for a frame
drawn whole anyway). Here a long run of keys, mouse moves and clicks, on the built-in
model and on DeiT-Tiny with its labels (class-specific maps, the top-5 panel, the
attention distance panel), must give mismatch=0 on every partial frame, and the
frames of a layer or head key must redraw well under the whole window. The built-in
model's run is made twice: with the window's back buffer as the canvas (X11 with
GLX_MESA_copy_sub_buffer, as under Xvfb) and with VITLENS_PRESENT=swap (an offscreen
canvas copied whole, and a swap: what other systems get).

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_redraw.py \\
      --app build/vitlens --shared ../shared --out build/tests/gui/redraw
Exits 0, 1 on a failed check, 77 (skip) without DeiT-Tiny once the built-in model's runs
passed.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import App, check, quit_app, run, run_checks  # noqa: E402

# keys of every kind: layer, head, rollout, the overviews (heads T, table A) and moves in
# them, panels (0, D), colormap (V, Shift+V), grid, mask, bilinear, opacity, help, query
# patch (I J K L, C), map kinds (E, Shift+E), shared scale, discard ratio, the overlay
KEYS = ["Right", "Right", "Left", "Down", "Down", "Up", "r", "Right", "r", "t", "Right",
        "Down", "Up", "t", "a", "Down", "Left", "a", "0", "0", "d", "d", "v", "v", "shift+v",
        "g", "Right", "g", "m", "Down", "period", "m", "b", "Left", "b", "minus", "plus", "h",
        "Right", "h", "i", "j", "k", "l", "l", "c", "e", "e", "shift+e", "shift+e", "u",
        "Down", "u", "bracketright", "bracketleft", "o", "Right", "o", "e", "Left"]
CLASS_KEYS = ["e", "2", "3", "Right", "1", "shift+e", "shift+e"]


def frames(app):
    """The trace's frame lines that arrived so far, parsed (app.state is the last)."""
    out = []
    while not app.lines.empty():
        line = app.lines.get_nowait()
        if app.take(line) and line.startswith("frame "):
            out.append(dict(app.state))
    return out


def settle(app):
    """The frames of the input given so far, once all of it is handled and drawn and the
    worker is idle: G twice (the grid on, then off again), and the frame showing the
    second G; X delivers the window's input in order, so every earlier key, mouse move
    and click was handled before it. Then, if a job still runs, the frame of its end.
    The two G frames are partial redraws too, checked like the others."""
    got = frames(app)

    def collect(done):
        def pred(line):
            if not line.startswith("frame "):
                return False
            got.append(dict(app.state))
            return done()
        return pred
    run(["xdotool", "windowfocus", "--sync", app.wid])  # a click may have moved the focus
    for _ in range(2):
        want = "0" if app.state.get("grid") == "1" else "1"
        run(["xdotool", "key", "--clearmodifiers", "g"])
        app.wait_line(collect(lambda: app.state.get("grid") == want),
                      f"G: the grid {'on' if want == '1' else 'off'}, after every earlier input")
    if app.state.get("busy") != "0":
        app.wait_line(collect(lambda: app.state.get("busy") == "0"), "the worker idle")
    return got


def drive(app, keys, mouse):
    """Press keys (and move the mouse over the crop between some); all frames. The pauses
    between inputs only space them, so that most get a frame of their own; nothing waits
    on them: whatever frames come are all checked, and settle() waits for the last."""
    got = []
    x, y, s = app.image_rect()
    for i, k in enumerate(keys):
        run(["xdotool", "key", "--clearmodifiers", k])
        time.sleep(0.12)
        if mouse and i % 7 == 3:  # the tooltip follows the mouse over the crop
            run(["xdotool", "mousemove", "--window", app.wid, str(x + s // 3 + 7 * i % 90),
                 str(y + s // 2)])
            time.sleep(0.12)
        got += frames(app)
    if mouse:
        run(["xdotool", "mousemove", "--window", app.wid, "2", "2"])  # off the crop
        run(["xdotool", "click", "--window", app.wid, "1"])
    return got + settle(app)


def window_is_canvas(app, name, saves):
    """The window shows what the canvas holds: S writes the canvas as a PNG; the X
    window's pixels (what ren_present showed) must be the same, to the last one."""
    run(["xdotool", "windowfocus", "--sync", app.wid])
    run(["xdotool", "key", "--clearmodifiers", "s"])
    # the app prints "saved PATH" once the file is written whole
    line = app.wait_line(lambda s: s.startswith("saved "), f"{name}: S saved the canvas")
    path = line[len("saved "):]
    check(os.path.dirname(os.path.realpath(path)) == os.path.realpath(saves) and
          os.path.isfile(path), f"{name}: S saved the canvas ({path})")
    settle(app)
    saved = np.asarray(Image.open(path).convert("RGB")).astype(np.int16)
    shown = app.shot()
    # the saved frame has no "saved ..." notice: compare above the status bar
    bar_top = saved.shape[0] - 60
    same = saved.shape == shown.shape and np.array_equal(saved[:bar_top], shown[:bar_top])
    check(same, f"{name}: the window shows the canvas, every pixel above the status bar "
          f"({saved.shape} vs {shown.shape}, "
          f"{int((saved[:bar_top] != shown[:bar_top]).any(-1).sum()) if saved.shape == shown.shape else -1} differ)")


def verify(name, fr):
    checked = [f for f in fr if f.get("mismatch", "-1") != "-1"]
    bad = [f for f in checked if f["mismatch"] != "0"]
    for f in bad[:5]:
        print(f"     {name}: mismatch={f['mismatch']} redraw={f['redraw']} "
              f"kind={f['kind']} layer={f['layer']} head={f['head']} overview={f['overview']}")
    check(len(fr) >= 20 and len(checked) >= len(fr) // 2,
          f"{name}: {len(checked)} of {len(fr)} frames were partial redraws, each checked")
    check(not bad, f"{name}: every partial redraw equals the whole frame "
          f"({len(bad)} differ)")
    w, h = (int(v) for v in fr[-1]["window"].split(","))
    small = [int(f["redraw_px"]) for f in checked]
    check(sorted(small)[len(small) // 2] < 0.6 * w * h,
          f"{name}: the median partial redraw covers {sorted(small)[len(small) // 2]} px of "
          f"the window's {w * h}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    saves = os.path.abspath(os.path.join(a.out, "saves"))
    os.makedirs(saves, exist_ok=True)
    env = dict(os.environ, VITLENS_TRACE="1", VITLENS_CHECK_REDRAW="1")
    env.pop("VITLENS_ASSETS", None)
    demo_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets",
                            "default", "demo")
    demo = os.path.realpath(os.path.join(
        demo_dir, sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))[0]))

    def builtin(app):
        app.start(demo)
        fr = drive(app, KEYS + ["n"], mouse=True)  # N: the next photo of the folder
        verify("built-in model", fr)
        window_is_canvas(app, "built-in model", saves)
        quit_app(app)

    runs = [("built-in", [a.app, "--save-dir", saves, demo], builtin, env),
            # the other way to the window: an offscreen canvas copied whole, and a swap
            ("built-in, offscreen canvas", [a.app, "--save-dir", saves, demo], builtin,
             dict(env, VITLENS_PRESENT="swap"))]
    deit = os.path.join(a.shared, "models", "deit-tiny")
    weights = os.path.join(deit, "deit_tiny_patch16_224.safetensors")
    photo = os.path.realpath(os.path.join(a.shared, "images", "chelsea.png"))
    if os.path.exists(weights) and os.path.exists(photo):
        def deit_tiny(app):
            app.start(photo)
            fr = drive(app, ["d"] + KEYS + CLASS_KEYS, mouse=True)
            verify("DeiT-Tiny", fr)
            window_is_canvas(app, "DeiT-Tiny", saves)
            quit_app(app)
        runs.append(("DeiT-Tiny", [a.app, "--save-dir", saves, "--model", weights, "--labels",
                                   os.path.join(deit, "imagenet_synset_words.txt"), photo],
                     deit_tiny, env))
    else:
        print(f"skip DeiT-Tiny: no {weights}")
    for name, argv, fn, run_env in runs:
        print(f"---- {name}", flush=True)
        if not run_checks(App(argv, run_env), fn):
            print("redraw: FAILED")
            return 1
    if len(runs) < 3:  # what ran passed, but not all of it: a skip (in CI a failure)
        print("redraw: the built-in model's runs passed; DeiT-Tiny's skipped")
        return 77
    print("redraw: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
