#!/usr/bin/python3
"""The app's latency as a user feels it, under Xvfb: bench/app_latency.sh calls this.

  xvfb-run -a -s "-screen 0 1280x960x24" /usr/bin/python3 bench/app_latency.py \\
      --app build-bench/vitlens --model M.safetensors --image PHOTO \\
      [--launches 5] [--keys 60] [--threads K]

launch -> first heatmap: from just before the process is started to the moment
  its "ready PATH" line arrives: the app prints it after the first frame that
  shows the photo's map has been drawn and glFinish has returned (app/main.c,
  VITLENS_TRACE=1). Everything is in it: process start, SDL and OpenGL set-up,
  fonts and shaders, the weights' mmap and validation, decoding and resizing the
  photo, the forward pass on the worker thread, the map and the first draw. One
  warm-up launch first, so that the weights are in the page cache (as on a second
  start of the app; a cold disk read is the disk's time, not the app's).
key press -> new frame: in one running app, a key event is sent to the X server
  with XTest straight from this process (libXtst through ctypes: no xdotool
  process start in the time), and the time runs until the app's "frame N
  layer=.. head=.." trace line for the new view arrives, written after the swap
  and glFinish. Keys alternate Left / Right (layer), Up / Down (head) and R
  (rollout on / off), each followed by a pause of a few frames.
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
loading Mesa and LLVM. Prints medians, min and max in ms.
A benchmark, not a test: it asserts nothing but that the app answers.
"""
import argparse
import ctypes
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time

KEYSYMS = {"Left": 0xFF51, "Up": 0xFF52, "Right": 0xFF53, "Down": 0xFF54, "r": 0x72,
           "1": 0x31, "2": 0x32, "3": 0x33, "4": 0x34, "5": 0x35}
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
        self.dpy = self.x11.XOpenDisplay(None)
        if not self.dpy:
            raise RuntimeError(f"cannot open display {os.environ.get('DISPLAY')}")

    def key(self, name):
        code = self.x11.XKeysymToKeycode(self.dpy, KEYSYMS[name])
        self.xtst.XTestFakeKeyEvent(self.dpy, code, 1, 0)
        self.xtst.XTestFakeKeyEvent(self.dpy, code, 0, 0)
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


def summary(name, ms):
    print(f"  {name:<28} median {statistics.median(ms):8.1f}  min {min(ms):8.1f}  "
          f"max {max(ms):8.1f}  ({len(ms)} runs)", flush=True)
    return statistics.median(ms)


def state(line):
    m = re.match(r"frame \d+ layer=(\d+) head=(\d+) rollout=(\d+)", line)
    return m and tuple(map(int, m.groups()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app")
    ap.add_argument("--model")
    ap.add_argument("--image")
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--classes", type=int, default=20, help="class switches to time")
    ap.add_argument("--floor-child", action="store_true", help=argparse.SUPPRESS)
    a, _ = ap.parse_known_args()
    if a.floor_child:
        window_floor()
        return 0
    a = ap.parse_args()
    if not (a.app and a.model and a.image):
        ap.error("--app, --model and --image are required")
    env = dict(os.environ, VITLENS_TRACE="1")
    argv = [a.app, "--model", a.model, a.image]
    print(f"app      {' '.join(argv)}")
    print(f"display  {os.environ.get('DISPLAY')} (Xvfb, Mesa llvmpipe); "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}", flush=True)

    launch = []
    for i in range(a.launches + 1):  # the first: warm-up (page cache)
        app = App(argv, env)
        t, _ = app.wait(lambda l: l.startswith("ready "))
        if i:
            launch.append((t - app.t_start) * 1e3)
        app.close()

    floor = []
    for i in range(a.launches + 1):
        p = subprocess.run([sys.executable, __file__, "--floor-child"], capture_output=True,
                           text=True, check=True)
        if i:
            floor.append(float(p.stdout.split()[-1]))

    app = App(argv, env)
    app.wait(lambda l: l.startswith("ready "))
    xt = XTest()
    time.sleep(0.5)
    app.drain()
    cur = None
    moves = [("Left", (-1, 0, 0)), ("Right", (1, 0, 0)), ("Down", (0, 1, 0)),
             ("Up", (0, -1, 0)), ("r", (0, 0, 1)), ("r", (0, 0, 1))]
    per_key = {}
    try:
        # the state the app shows now: ask for a frame and read it
        xt.key("Left")
        _, line = app.wait(state)
        cur = state(line)
        for i in range(a.keys):
            name, (dl, dh, dr) = moves[i % len(moves)]
            want = (cur[0] + dl, cur[1] + dh, cur[2] ^ dr)
            time.sleep(0.1)
            app.drain()
            t0 = time.perf_counter()
            xt.key(name)
            t, line = app.wait(lambda l: state(l) == want)
            per_key.setdefault(name, []).append((t - t0) * 1e3)
            cur = want
        # class switches: 1 .. 5 in turn on Chefer et al.'s map (the first switch also
        # makes the view class-specific; not timed)
        def field(line, k):
            m = re.search(rf"\b{k}=(\S+)", line)
            return m and m.group(1)
        xt.key("1")
        _, line = app.wait(lambda l: l.startswith("frame ") and field(l, "shown") == "chefer"
                           and field(l, "busy") == "0")
        cur_class = field(line, "class")
        for i in range(a.classes):
            key = "12345"[(i + 1) % 5]
            time.sleep(0.2)
            app.drain()
            t0 = time.perf_counter()
            xt.key(key)
            t, line = app.wait(lambda l: l.startswith("frame ") and field(l, "shown") == "chefer"
                               and field(l, "busy") == "0" and field(l, "class") != cur_class)
            cur_class = field(line, "class")
            per_key.setdefault("class", []).append((t - t0) * 1e3)
    finally:
        xt.close()
        app.close()

    print("\napp latency, ms")
    first = summary("launch -> first heatmap", launch)
    summary("window floor (SDL + GL)", floor)
    classes = per_key.pop("class", [])
    keys = [ms for v in per_key.values() for ms in v]
    med = summary("key press -> new frame", keys)
    for name, ms in per_key.items():
        summary(f"  {name} ({'layer' if name in ('Left', 'Right') else 'head' if name in ('Up', 'Down') else 'rollout'})", ms)
    cls = summary("class switch -> new map", classes) if classes else float("nan")
    print(f"targets: launch <= 300 ms (median {first:.0f}), key -> frame <= 16 ms "
          f"(median {med:.1f}), class switch <= 300 ms (median {cls:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
