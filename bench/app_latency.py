#!/usr/bin/python3
"""The app's latency as a user feels it, under Xvfb: bench/app_latency.sh calls this.

  xvfb-run -a -s "-screen 0 1280x960x24" /usr/bin/python3 bench/app_latency.py \\
      --app build-bench/vitlens --model M.safetensors --image PHOTO \\
      [--launches 5] [--keys 60] [--threads K]

launch -> first heatmap: from just before the process is started to the moment
  its "ready PATH" line arrives: the app prints it after the first frame that
  shows the photo's map has been drawn and glFinish has returned (app/window/frame.c,
  VITLENS_TRACE=1). Everything is in it: process start, SDL and OpenGL set-up,
  fonts and shaders, the weights' mmap and validation, decoding and resizing the
  photo, the forward pass on the worker thread, the map and the first draw. One
  warm-up launch first, so that the weights are in the page cache (as on a second
  start of the app; a cold disk read is the disk's time, not the app's).
key press -> new frame: in one running app, a key event is sent to the X server
  with XTest straight from this process (libXtst through ctypes: no xdotool
  process start in the time), and the time runs until the app's "frame N ..."
  trace line for the new view arrives (the first that shows the change, not
  busy), written after the swap and glFinish. The keys go round KEY_CYCLE: layer,
  head, mode (R), the overviews (T, A) and moves in them, panels (0, D),
  colormap (V) and the query patch (I J K L, C), each after a pause of a few
  frames. Medians and the 95th percentile, per kind of key too.
  Then the lesson view (Page Down): steps with Page Down / Right and Page Up / Left,
  the block with Up / Down, to the frame whose lesson= (or llayer=) is the new one
  (--lesson-keys, 0: none); issue 24's target: a step change <= 16 ms median. Before
  each step the window has drawn the neighbouring steps' pictures ahead (its "lesson
  ahead" trace line), as it has between a presenter's keys, seconds apart.
  --fullscreen: the same after F, on the screen Xvfb was given (1920x1080 from
  bench/app_latency.sh), without the launches and class switches.
compare view (--compare MODEL2, issue 36): a second app opened with --compare; its cursor
  moves (the pointer, through XTest, onto another patch of pane A: the two panes' picture
  redrawn with the patch boxed there and at the same place of the photo in pane B) and its
  layer changes (Left / Right: both panes' maps computed, every pane drawn again), each
  timed to the trace's "compare frame" line that shows it (--compare-keys, 0: none).
  Issue 36's target: a cursor move or a layer change redraws both panes in one frame,
  <= 16 ms median.
class switch -> new map: keys 1 .. 5 (a class of the top-5) in turn, the view on
  Chefer et al.'s class-specific map: the backward pass of the new class (exact and
  AttnLRP's) and all six maps on the worker thread, the map uploaded and drawn; the
  time runs to the first frame line whose class= is the new one with shown=chefer
  and busy=0. Issue 13's target on DeiT-Small: <= 0.3 s.

window floor: what any SDL2 + OpenGL 3.3 program pays before its first frame on
  this display, measured in a child process of this script through ctypes: from
  just before SDL_Init to a swapped, glFinish-ed empty frame in a window of the
  app's size (dynamic loading of SDL itself excluded). Launch -> first heatmap
  cannot be shorter than this; the app starts the forward pass on its worker
  thread before it makes the window, so that the two overlap.

Xvfb draws with Mesa's llvmpipe on the CPU: frame times include software
rasterising that a GPU does in microseconds, and the window floor includes
loading Mesa and LLVM. Prints medians, p95, min and max in ms.
A benchmark, not a test: it asserts nothing but that the app answers.
"""
import argparse
import atexit
import ctypes
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

KEYSYMS = {"Left": 0xFF51, "Up": 0xFF52, "Right": 0xFF53, "Down": 0xFF54, "r": 0x72,
           "1": 0x31, "2": 0x32, "3": 0x33, "4": 0x34, "5": 0x35, "Prior": 0xFF55,
           "Next": 0xFF56, "Escape": 0xFF1B}
TIMEOUT_S = 60.0


class XTest:
    """Key presses through the XTEST extension (libXtst), from this process."""

    def __init__(self):
        self.x11 = ctypes.CDLL("libX11.so.6")
        self.xtst = ctypes.CDLL("libXtst.so.6")
        self.x11.XOpenDisplay.restype = ctypes.c_void_p
        self.x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
        self.x11.XKeysymToKeycode.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        self.x11.XKeysymToKeycode.restype = ctypes.c_ubyte
        self.x11.XFlush.argtypes = [ctypes.c_void_p]
        self.x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
        self.xtst.XTestFakeKeyEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                                ctypes.c_ulong]
        self.xtst.XTestFakeMotionEvent.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                   ctypes.c_int, ctypes.c_ulong]
        self.dpy = self.x11.XOpenDisplay(None)
        if not self.dpy:
            raise RuntimeError(f"cannot open display {os.environ.get('DISPLAY')}")

    def key(self, name):
        sym = KEYSYMS[name] if name in KEYSYMS else ord(name)  # Latin-1 keysyms are the code
        code = self.x11.XKeysymToKeycode(self.dpy, sym)
        self.xtst.XTestFakeKeyEvent(self.dpy, code, 1, 0)
        self.xtst.XTestFakeKeyEvent(self.dpy, code, 0, 0)
        self.x11.XFlush(self.dpy)

    def move(self, x, y):
        """The pointer to (x, y) on the root window."""
        self.xtst.XTestFakeMotionEvent(self.dpy, -1, x, y, 0)
        self.x11.XFlush(self.dpy)

    def close(self):
        self.x11.XCloseDisplay(self.dpy)


class App:
    """vitlens with VITLENS_TRACE=1; stdout lines arrive stamped with perf_counter()."""

    def __init__(self, argv, env):
        self.t_start = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line.rstrip("\n")))
        self.lines.put((time.perf_counter(), None))

    def wait(self, pred):
        """(time, line) of the first line satisfying pred."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            t, line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if line is None:
                raise RuntimeError(f"the app ended (exit {self.proc.wait()})")
            if pred(line):
                return t, line

    def drain(self):
        while not self.lines.empty():
            self.lines.get_nowait()

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def window_floor():
    """Child process: SDL_Init .. first swapped, finished frame, ms (printed)."""
    sdl = ctypes.CDLL("libSDL2-2.0.so.0")
    gl = ctypes.CDLL("libGL.so.1")
    sdl.SDL_CreateWindow.restype = ctypes.c_void_p
    sdl.SDL_CreateWindow.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 4 + [ctypes.c_uint32]
    sdl.SDL_GL_CreateContext.restype = ctypes.c_void_p
    sdl.SDL_GL_CreateContext.argtypes = [ctypes.c_void_p]
    sdl.SDL_GL_SwapWindow.argtypes = [ctypes.c_void_p]
    t0 = time.perf_counter()
    if sdl.SDL_Init(0x20 | 0x4000) != 0:  # SDL_INIT_VIDEO | SDL_INIT_EVENTS
        raise RuntimeError("SDL_Init failed")
    for attr, val in ((17, 3), (18, 3), (21, 1), (5, 1)):  # GL 3.3 core, double buffer
        sdl.SDL_GL_SetAttribute(attr, val)
    win = sdl.SDL_CreateWindow(b"floor", 0x2FFF0000, 0x2FFF0000, 946, 860, 0x2 | 0x20 | 0x2000)
    ctx = win and sdl.SDL_GL_CreateContext(win)
    if not ctx:
        raise RuntimeError("no window or OpenGL 3.3 core context")
    gl.glClear(0x4000)
    sdl.SDL_GL_SwapWindow(win)
    gl.glFinish()
    print(f"{(time.perf_counter() - t0) * 1e3:.3f}", flush=True)
    sdl.SDL_Quit()


FIELDS = ("layer", "head", "kind", "overview", "colormap", "query", "preds", "distance",
          "window", "fullscreen", "lesson", "llayer", "lhead", "lpatch")


def state(line):
    """The view a frame line shows: the fields a key can change."""
    if not line.startswith("frame "):
        return None
    kv = dict(f.split("=", 1) for f in line.split()[2:] if "=" in f)
    return {k: kv.get(k) for k in FIELDS + ("busy", "class", "shown", "lshown") + INSIDE}


# where a frame's time went inside the app (its trace line): from the key handled to the
# frame on screen, recording and issuing the draws, rasterising, the copy and swap
INSIDE = ("ms_input", "ms_draw", "ms_raster", "ms_swap", "redraw_px", "ms_lgui")


# The keys pressed, in turn, and what each is: every kind of key the window answers
# with a new picture (layer, head, mode, overviews and moves in them, panels, colormap,
# query patch). Each changes at least one of FIELDS, so its frame is the first one
# after it that shows a change, drawn with busy=0.
KEY_CYCLE = [("Left", "layer"), ("Right", "layer"), ("Down", "head"), ("Up", "head"),
             ("r", "mode (rollout)"), ("r", "mode (rollout)"),
             ("t", "overview (heads)"), ("Down", "overview move"), ("Up", "overview move"),
             ("t", "overview (heads)"), ("a", "overview (table)"), ("Left", "overview move"),
             ("Right", "overview move"), ("a", "overview (table)"),
             ("0", "panel (top-5)"), ("0", "panel (top-5)"), ("d", "panel (distance)"),
             ("d", "panel (distance)"), ("v", "colormap"), ("k", "query patch"),
             ("l", "query patch"), ("i", "query patch"), ("j", "query patch"),
             ("c", "query patch")]


# The lesson view (issue 24): Page Down opens the default lesson (untimed), then steps
# forward through it with Page Down and Right, back with Page Up and Left (a step: its
# picture drawn ahead, uploaded, one frame), and the block moved with Up / Down (one block
# of the model rerun, the picture drawn). Each changes lesson= or llayer=.
LESSON_CYCLE = ([("Next", "lesson step"), ("Right", "lesson step")] * 8 +
                [("Prior", "lesson step"), ("Left", "lesson step")] * 8 +
                [("Up", "lesson block"), ("Down", "lesson block")])


def p95(ms):
    s = sorted(ms)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))]


def summary(name, ms):
    print(f"  {name:<28} median {statistics.median(ms):8.1f}  p95 {p95(ms):8.1f}  "
          f"min {min(ms):8.1f}  max {max(ms):8.1f}  ({len(ms)} runs)", flush=True)
    return statistics.median(ms)


def time_keys(app, xt, cycle, n_keys, cur, changed, after=None):
    """Time n_keys keys of cycle [(key, group)] from the shown state cur: each until the
    app shows a settled state that changed(state, cur) says is the key's; then after().
    {group: [ms]}, with the app's own timings of INSIDE under " name"."""
    per_key = {}
    for i in range(n_keys):
        name, group = cycle[i % len(cycle)]
        time.sleep(0.1)
        app.drain()
        t0 = time.perf_counter()
        xt.key(name)

        def shows_it(line, cur=cur):
            st = state(line)
            return st is not None and st["busy"] == "0" and changed(st, cur)
        t, line = app.wait(shows_it)
        per_key.setdefault(group, []).append((t - t0) * 1e3)
        cur = state(line)
        for k in INSIDE:
            per_key.setdefault(" " + k, []).append(float(cur[k] or "nan"))
        if group.startswith("lesson"):  # the GUI thread's time for this key (ms_lgui)
            per_key.setdefault(" gui " + group, []).append(float(cur["ms_lgui"] or "nan"))
        if after:
            after()
    return per_key


def keys_session(app, xt, n_keys, n_classes):
    """Time n_keys keys of KEY_CYCLE (and n_classes class switches); {group: [ms]}."""
    xt.key("Left")  # ask for a frame and read the state the app shows now
    _, line = app.wait(lambda l: state(l) is not None)
    per_key = time_keys(app, xt, KEY_CYCLE, n_keys, state(line),
                        lambda st, cur: any(st[k] != cur[k] for k in FIELDS))
    if n_classes:
        # class switches: 1 .. 5 in turn on Chefer et al.'s map (the first switch also
        # makes the view class-specific; not timed)
        xt.key("1")
        _, line = app.wait(lambda l: (state(l) or {}).get("shown") == "chefer"
                           and state(l)["busy"] == "0")
        cur_class = state(line)["class"]
        for i in range(n_classes):
            key = "12345"[(i + 1) % 5]
            time.sleep(0.2)
            app.drain()
            t0 = time.perf_counter()
            xt.key(key)
            t, line = app.wait(lambda l: (state(l) or {}).get("shown") == "chefer"
                               and state(l)["busy"] == "0" and state(l)["class"] != cur_class)
            cur_class = state(line)["class"]
            per_key.setdefault("class", []).append((t - t0) * 1e3)
    return per_key


def lesson_session(app, xt, n_keys):
    """Time n_keys keys of LESSON_CYCLE in the lesson view; {group: [ms]}."""
    xt.key("Next")  # open the lesson at step 1 (its numbers computed: untimed)
    _, line = app.wait(lambda l: (state(l) or {}).get("lesson", "0/0").startswith("1/")
                       and state(l)["lshown"] == "1")
    app.wait(lambda l: l.startswith("lesson ahead "))
    # after each key, the neighbouring steps' pictures drawn ahead, as between a
    # presenter's keys (seconds apart): the trace's "lesson ahead" line once they are on the GPU
    per_key = time_keys(
        app, xt, LESSON_CYCLE, n_keys, state(line),
        lambda st, cur: st["lshown"] == "1" and any(
            st[k] != cur[k] for k in ("lesson", "llayer", "lhead", "lpatch")),
        after=lambda: app.wait(lambda l: l.startswith("lesson ahead ")))
    xt.key("Escape")  # back to the explorer
    app.wait(lambda l: (state(l) or {}).get("lesson") == "0/0")
    return per_key


def fields(line, skip=2):
    """key=value fields of a trace line after its first `skip` words."""
    return dict(f.split("=", 1) for f in line.split()[skip:] if "=" in f)


def compare_session(app, xt, n_keys, fullscreen):
    """In an app opened with --compare (F first when fullscreen): n_keys cursor moves and
    layer changes in turn, each to the "compare frame" line that shows it; {group: [ms]},
    with the app's own times: the panes' maps and their picture (the "compare maps" line's
    ms= and ms_picture=) under " maps", " picture", and the frame line's ms_input, ms_draw
    (key handled -> frame shown, the draws recorded and issued) under " input", " draw"."""
    _, line = app.wait(lambda l: l.startswith("compare maps "))
    grid = [int(v) for v in re.search(r"a=\S*?grid:(\d+),(\d+)", line).groups()]
    layer = int(re.search(r"a=kind:\w+,layer:(\d+)", line).group(1))
    if fullscreen:
        xt.key("f")
        app.wait(lambda l: (state(l) or {}).get("fullscreen") == "1")
    _, line = app.wait(lambda l: l.startswith("compare frame "))
    time.sleep(0.5)  # the window settled: the panes where the last compare frame put them
    while not app.lines.empty():
        _, later = app.lines.get_nowait()
        if later and later.startswith("compare frame "):
            line = later
    px, py, pw, ph = (float(v) for v in fields(line)["pane0"].split(","))
    wid = subprocess.run(["xdotool", "search", "--onlyvisible", "--pid", str(app.proc.pid)],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    geo = dict(ln.split("=", 1) for ln in subprocess.run(
        ["xdotool", "getwindowgeometry", "--shell", wid], capture_output=True, text=True,
        check=True).stdout.split())
    wx, wy = int(geo["X"]), int(geo["Y"])
    gh, gw = grid
    per = {}
    for i in range(n_keys):
        time.sleep(0.1)
        app.drain()
        if i % 2 == 0:  # the pointer onto another patch of pane A
            p = (i // 2 * 7 + 3) % (gh * gw)
            x = wx + int(px + (p % gw + 0.5) * pw / gw)
            y = wy + int(py + (p // gw + 0.5) * ph / gh)
            t0 = time.perf_counter()
            xt.move(x, y)
            t, _ = app.wait(lambda l, p=p: l.startswith("compare frame ") and
                            fields(l)["hover"] == f"0,{p}")
            per.setdefault("cursor move", []).append((t - t0) * 1e3)
        else:  # Left / Right in turn: both panes' maps, every pane drawn again
            key = "Left" if i % 4 == 1 else "Right"
            layer += -1 if key == "Left" else 1
            t0 = time.perf_counter()
            xt.key(key)
            _, line = app.wait(lambda l, want=layer: l.startswith("compare maps ") and
                               re.search(r" a=kind:\w+,layer:(\d+),", l).group(1) == str(want))
            per.setdefault(" maps", []).append(float(fields(line)["ms"]))
            per.setdefault(" picture", []).append(float(fields(line)["ms_picture"]))
            _, line = app.wait(lambda l: l.startswith("frame "))
            per.setdefault(" input", []).append(float(fields(line)["ms_input"]))
            per.setdefault(" draw", []).append(float(fields(line)["ms_draw"]))
            t, _ = app.wait(lambda l: l.startswith("compare frame "))
            per.setdefault("layer change", []).append((t - t0) * 1e3)
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app")
    ap.add_argument("--model")
    ap.add_argument("--image")
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--keys", type=int, default=72)
    ap.add_argument("--classes", type=int, default=20, help="class switches to time")
    ap.add_argument("--lesson-keys", type=int, default=36,
                    help="keys to time in the lesson view (Page Down / Up, Right / Left, Up / Down)")
    ap.add_argument("--compare", metavar="MODEL2",
                    help="a second model: time the compare view's cursor and layer keys")
    ap.add_argument("--compare-keys", type=int, default=40,
                    help="cursor moves and layer changes to time in the compare view")
    ap.add_argument("--fullscreen", action="store_true",
                    help="press F first: the keys in fullscreen (no launches, no floor)")
    ap.add_argument("--floor-child", action="store_true", help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args()
    if a.floor_child:
        window_floor()
        return 0
    a = ap.parse_args()
    if not (a.app and a.model and a.image):
        ap.error("--app, --model and --image are required")
    # a fresh settings folder: every run starts from the same view (the last layer)
    xdg = tempfile.mkdtemp(prefix="vitlens-bench-")
    atexit.register(shutil.rmtree, xdg, ignore_errors=True)
    env = dict(os.environ, VITLENS_TRACE="1", XDG_CONFIG_HOME=os.path.join(xdg, "config"),
               XDG_DATA_HOME=os.path.join(xdg, "data"))
    argv = [a.app, "--model", a.model, a.image]
    print(f"app      {' '.join(argv)}")
    print(f"display  {os.environ.get('DISPLAY')} (Xvfb, Mesa llvmpipe); "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}", flush=True)

    launch, floor = [], []
    for i in range(a.launches + 1 if a.launches and not a.fullscreen else 0):
        app = App(argv, env)  # the first: warm-up (page cache)
        t, _ = app.wait(lambda l: l.startswith("ready "))
        if i:
            launch.append((t - app.t_start) * 1e3)
        app.close()
    for i in range(a.launches + 1 if a.launches and not a.fullscreen else 0):
        p = subprocess.run([sys.executable, __file__, "--floor-child"], capture_output=True,
                           text=True, check=True)
        if i:
            floor.append(float(p.stdout.split()[-1]))

    app = App(argv, env)
    app.wait(lambda l: l.startswith("ready "))
    xt = XTest()
    try:
        time.sleep(0.5)
        app.drain()
        if a.fullscreen:
            xt.key("f")
            app.wait(lambda l: (state(l) or {}).get("fullscreen") == "1")
            time.sleep(0.5)
        xt.key("Right")
        _, line = app.wait(lambda l: state(l) is not None)
        window = state(line)["window"].replace(",", "x")
        per_key = keys_session(app, xt, a.keys, 0 if a.fullscreen else a.classes)
        lesson = lesson_session(app, xt, a.lesson_keys) if a.lesson_keys else {}
    finally:
        xt.close()
        app.close()

    cmp = {}
    if a.compare and a.compare_keys:
        app = App(argv[:1] + ["--compare", a.compare] + argv[1:], env)
        xt = XTest()
        try:
            cmp = compare_session(app, xt, a.compare_keys, a.fullscreen)
        finally:
            xt.close()
            app.close()

    print(f"\napp latency, ms ({'fullscreen ' if a.fullscreen else ''}window {window})")
    first = summary("launch -> first heatmap", launch) if launch else float("nan")
    if floor:
        summary("window floor (SDL + GL)", floor)
    classes = per_key.pop("class", [])
    inside = {k: per_key.pop(" " + k, []) for k in INSIDE}
    keys = [ms for v in per_key.values() for ms in v]
    med = summary("key press -> new frame", keys) if keys else float("nan")
    for name, ms in per_key.items():
        summary(f"  {name}", ms)
    cls = summary("class switch -> new map", classes) if classes else float("nan")
    lesson_inside = {k: lesson.pop(" " + k, []) for k in INSIDE}
    lesson_med = float("nan")
    if lesson:
        lesson_med = summary("lesson step -> new frame", lesson["lesson step"])
        gui = {g: lesson.pop(" gui " + g, []) for g in ("lesson step", "lesson block")}
        if "lesson block" in lesson:  # fewer keys than LESSON_CYCLE may change no block
            summary("lesson block -> new frame", lesson["lesson block"])
        for g, ms in gui.items():  # nan: an app from before ms_lgui
            if ms:
                print(f"  {g}: the GUI thread's time (ms_lgui) median "
                      f"{statistics.median(ms):.1f} ms, max {max(ms):.1f}")
        print("  inside the app, lesson steps' medians: key handled -> frame done "
              f"{statistics.median(lesson_inside['ms_input']):.1f} ms; drawing "
              f"{statistics.median(lesson_inside['ms_draw']):.1f}, rasterising "
              f"{statistics.median(lesson_inside['ms_raster']):.1f}, copy + swap "
              f"{statistics.median(lesson_inside['ms_swap']):.1f}")
    if keys:
        print("  inside the app, medians: key handled -> frame done "
              f"{statistics.median(inside['ms_input']):.1f} ms; drawing "
              f"{statistics.median(inside['ms_draw']):.1f}, rasterising "
              f"{statistics.median(inside['ms_raster']):.1f}, copy + swap "
              f"{statistics.median(inside['ms_swap']):.1f}; redrawn "
              f"{statistics.median(inside['redraw_px']) / 1e3:.0f} k px")
    cmp_med = float("nan")
    if cmp:
        cmp_med = max(summary("compare: cursor move", cmp["cursor move"]),
                      summary("compare: layer change", cmp["layer change"]))
        print(f"  inside the app, compare layer changes' medians: key handled -> frame done "
              f"{statistics.median(cmp[' input']):.1f} ms; both panes' maps "
              f"{statistics.median(cmp[' maps']):.1f}, their picture "
              f"{statistics.median(cmp[' picture']):.1f}, drawing "
              f"{statistics.median(cmp[' draw']):.1f}")
    print("targets: " + (f"key -> frame <= 16 ms median (median {med:.1f}), <= 25 ms p95 "
                         f"(p95 {p95(keys):.1f})" if keys else "(no keys timed)") +
          (f"; launch <= 300 ms (median {first:.0f}, {first - statistics.median(floor):.0f} "
           f"above the window floor)" if launch and floor else "") +
          (f"; class switch <= 300 ms (median {cls:.0f})" if classes else "") +
          (f"; lesson step -> frame <= 16 ms median (median {lesson_med:.1f})" if lesson else "") +
          (f"; compare cursor / layer -> frame <= 16 ms median (slower of the two "
           f"{cmp_med:.1f})" if cmp else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
