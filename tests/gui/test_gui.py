#!/usr/bin/python3
"""End-to-end test of the vitlens window under Xvfb.

Starts vitlens with no arguments (the built-in model on its first demo scene)
and steps through the demo scenes; then on DeiT-Tiny and chelsea.png presses
keys with xdotool, takes
screenshots with ImageMagick's `import` and checks that the picture changes as
it should. Synchronisation never relies on sleeps: the app runs with
VITLENS_TRACE=1 and prints one line per drawn frame with its full view state
("frame N layer=.. head=.. ..."), and the test waits for the line of the state it
expects, then takes screenshots until two in a row are identical.

Run by ctest as:
  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_gui.py \
      --app build/vitlens --shared ../shared --out build/tests/gui
Exits 0 on success, 1 on a failed check, 77 (skip) without DeiT-Tiny: then only
the built-in model's run is made (a failure there exits 1).
"""
import argparse
import atexit
import collections
import io
import json
import os
import queue
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import numpy as np
from PIL import Image, ImageGrab, features

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/
from safetensors_io import read_header  # noqa: E402

HAVE_XCB = features.check("xcb")  # Pillow built with XCB: ImageGrab reads X displays

TIMEOUT_S = float(os.environ.get("VITLENS_TEST_TIMEOUT", "120"))  # ASan builds are slow
CATS = ("tabby", "tiger cat", "Egyptian cat")


class Fail(Exception):
    pass


def trace_hash(path):
    """The trace's map hash (trace.c trace_hash) of an exported .npy map: FNV-1a of its
    float32 values' bytes, so that a map on screen is compared with a file bit for bit."""
    h = 2166136261
    for b in np.load(path).astype("<f4").tobytes():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return f"{h:08x}"


def check(cond, what):
    if not cond:
        raise Fail(what)
    print(f"ok   {what}", flush=True)


# --- the app under test ------------------------------------------------------

class App:
    def __init__(self, argv, env, xdg=None):
        """xdg: the folder holding config/ and data/ (XDG_CONFIG_HOME, XDG_DATA_HOME);
        default a fresh empty one, so that no run sees the settings another (or the
        user) left, nor the user's downloaded models."""
        if xdg is None:
            xdg = tempfile.mkdtemp(prefix="vitlens-xdg-")
            atexit.register(shutil.rmtree, xdg, ignore_errors=True)
        env = dict(env, XDG_CONFIG_HOME=os.path.join(xdg, "config"),
                   XDG_DATA_HOME=os.path.join(xdg, "data"))
        env.pop("VITLENS_MODELS_DIR", None)
        self.argv0 = argv[0]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.stderr = []
        self.stderr_read = threading.Condition()  # notified for each stderr line read
        self.state = {}
        self.frame = 0
        self.error = None  # the last "error MESSAGE" line's message (the error line shown)
        self.readers = [threading.Thread(target=self._read, args=(stream, put), daemon=True)
                        for stream, put in ((self.proc.stdout, self.lines.put),
                                            (self.proc.stderr, self._err))]
        for t in self.readers:
            t.start()
        self.wid = None
        self.geom = None  # ((x0, y0, x1, y1) on the root window, the trace's window=W,H)
        self.recent = collections.deque(maxlen=6)  # the last stdout lines read, for a timeout

    @staticmethod
    def _read(stream, put):
        for line in stream:
            put(line.rstrip("\n"))

    def _err(self, line):
        with self.stderr_read:
            self.stderr.append(line)
            self.stderr_read.notify_all()
        print(f"     app stderr: {line}", flush=True)

    def stderr_has(self, ok, timeout=None):
        """Whether ok(the stderr lines read so far) becomes true, waiting for more lines:
        stdout and stderr are read by two threads, so a frame line may arrive before the
        message the app wrote to stderr before drawing it. False after the timeout."""
        with self.stderr_read:
            return self.stderr_read.wait_for(lambda: ok(self.stderr), timeout or TIMEOUT_S)

    def output_read(self):
        """After the process ended: wait until its stdout and stderr have been read to
        their end (the sanitizers' exit report included), rather than for a while."""
        for t in self.readers:
            t.join(TIMEOUT_S)
            if t.is_alive():
                raise Fail(f"the app's output not closed {TIMEOUT_S:.0f} s after its exit")

    def take(self, line):
        """A stdout line read: a frame line updates self.state (True). Subclasses read
        their own trace lines here too."""
        if line.startswith("error "):
            self.error = line[6:]
        m = re.match(r"frame (\d+) (.*)", line)
        if m:
            self.frame = int(m.group(1))
            self.state = dict(kv.split("=", 1) for kv in m.group(2).split())
            return True
        return False

    def wait_line(self, pred, what, timeout=None):
        """Read stdout until a line satisfies pred (every line goes through take)."""
        deadline = time.monotonic() + (timeout or TIMEOUT_S)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail(f"timed out waiting for {what} (last state {self.state})" +
                           self.hang_report())
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise Fail(f"app exited ({self.proc.returncode}) waiting for {what}")
                continue
            self.recent.append(line)
            self.take(line)
            if pred(line):
                return line

    def hang_report(self):
        """What a timeout needs to be understood: the last stdout lines read (the startup
        lines tell how far a launch got) and, with gdb there, every thread's stack of the
        app while it still runs, and of any child it forked (a deadlock names its locks; a
        busy machine shows work)."""
        out = "\n     last lines: " + (" | ".join(s[:100] for s in self.recent) or "none")
        if self.proc.poll() is None and shutil.which("gdb"):
            pid = self.proc.pid
            try:  # and a process it forked (a child stuck before its exec)
                kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
            except OSError:
                kids = []
            for who, p in [("app", pid)] + [(f"app's child {k}", k) for k in kids]:
                try:
                    bt = subprocess.run(["gdb", "-p", str(p), "-batch", "-nx", "-ex",
                                         "thread apply all bt 12"], capture_output=True,
                                        text=True, timeout=60).stdout
                    out += f"\n     {who}'s threads:\n" + "\n".join(
                        "       " + ln for ln in bt.splitlines()
                        if ln.startswith(("Thread", "#")))
                except (OSError, subprocess.TimeoutExpired) as e:
                    out += f"\n     no stacks of the {who} ({e})"
        return out

    def wait_error(self, ok, what):
        """Until the error line's message satisfies ok: at once when the last one read does.
        The app prints its error line after every frame that shows it, and a paused app draws
        no frame: an error shown while start() read the lines is not printed again."""
        if self.error is not None and ok(self.error):
            return self.error
        self.wait_line(lambda s: self.error is not None and ok(self.error), what)
        return self.error

    def settled(self):
        """The last frame shows its state: not the one a new window size is first shown
        with (settled=0, the old back buffer swapped: ren_present), whose whole redraw
        follows."""
        return self.state.get("settled", "1") == "1"

    def wait_state(self, what, **want):
        """Wait for a settled frame drawn in the wanted state (values compared as
        strings). Returns at once when the last frame is one: a key whose action
        changed nothing on screen draws no frame."""
        def match():
            return self.settled() and all(self.state.get(k) == str(v) for k, v in want.items())
        if self.state and match():
            return
        self.wait_line(lambda line: line.startswith("frame ") and match(), what)

    def mouse_off(self, what="the pointer off the picture"):
        """Move the pointer to the window's corner (2, 2), off the picture, and wait for
        the frame that shows it moved there: first onto the picture's centre (hover set),
        then off it (hover=-1,-1). A single move to the corner may draw nothing (no hover
        before it) and then gives no signal that the app has seen it: a pointer that
        entered the window where it was (the window moved or resized under it) could put
        a hover label on screen after the test has taken its picture."""
        x, y, s = self.image_rect()
        h = int(self.state.get("image_h", s))
        to = [x + s // 2, y + h // 2]
        def shell(cmd, *argv):
            out = subprocess.run(["xdotool", cmd, "--shell", *argv], check=True,
                                 capture_output=True, text=True).stdout
            return {k: int(v) for k, v in (ln.split("=", 1) for ln in out.split())
                    if v.lstrip("-").isdigit()}
        at, win = shell("getmouselocation"), shell("getwindowgeometry", self.wid)
        if abs(at["X"] - win["X"] - to[0]) < 8 and abs(at["Y"] - win["Y"] - to[1]) < 8:
            to[0] += s // 4  # the pointer is there already: a move there would draw nothing
        run(["xdotool", "mousemove", "--window", self.wid, str(to[0]), str(to[1])])
        self.wait_line(lambda line: line.startswith("frame ") and
                       self.state.get("hover", "-1,-1") != "-1,-1",
                       f"{what}: the pointer over the picture first")
        run(["xdotool", "mousemove", "--window", self.wid, "2", "2"])
        self.wait_state(what, hover="-1,-1")

    def start(self, photo):
        """Wait until the window shows photo's first map (its "ready" line and a frame that
        is not busy), find the window and give it the keyboard."""
        self.wait_line(lambda s: s == f"ready {photo}", f"ready {os.path.basename(photo)}")
        self.wait_state("first frame with the map", busy=0, scene=1)
        self.wid = find_window(self)
        run(["xdotool", "windowfocus", "--sync", self.wid])

    def key(self, *keys, **want):
        run(["xdotool", "key", "--clearmodifiers", *keys])
        self.wait_state(" ".join(keys), **want)

    def drop(self, path):
        """The --stdin-drops hook: the path becomes a real SDL_DROPFILE event."""
        self.proc.stdin.write(path + "\n")
        self.proc.stdin.flush()

    def image_rect(self):
        x, y, s = (int(v) for v in self.state["image"].split(","))
        return x, y, s

    def grab(self):
        """The window's pixels now: read from the X server through Pillow's XCB
        grab (a few ms), else ImageMagick's `import` (a fresh process and a PNG
        each time, 0.3 s to over 1 s on a loaded machine)."""
        if HAVE_XCB:
            size = self.state.get("window")
            if self.geom is None or self.geom[1] != size:  # the window moved or resized
                out = subprocess.run(["xdotool", "getwindowgeometry", "--shell", self.wid],
                                     check=True, capture_output=True, text=True).stdout
                g = dict(ln.split("=", 1) for ln in out.split())
                x, y, w, h = (int(g[k]) for k in ("X", "Y", "WIDTH", "HEIGHT"))
                self.geom = ((x, y, x + w, y + h), size)
            im = ImageGrab.grab(bbox=self.geom[0], xdisplay=os.environ["DISPLAY"])
            return np.asarray(im.convert("RGB"))
        png = subprocess.run(["import", "-window", self.wid, "png:-"], check=True,
                             capture_output=True).stdout
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def shot(self):
        """A screenshot of the window, once the screen has settled (two equal in a row).
        Grabbed until then, up to TIMEOUT_S: on a loaded machine the X server may take
        seconds to show a frame the app has presented, so no count of tries is enough."""
        prev, deadline = None, time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            img = self.grab()
            if prev is not None and prev.shape == img.shape and np.array_equal(prev, img):
                return img.astype(np.int16)
            prev = img
            time.sleep(0.02)
        raise Fail(f"screen does not settle in {TIMEOUT_S:.0f} s")

    def crop(self, img):
        """The drawn crop: image=x,y,width and image_h=height of the frame line."""
        x, y, s = self.image_rect()
        h = int(self.state.get("image_h", s))
        return img[y:y + h, x:x + s]


def own_leaks(stderr, app_path):
    """LeakSanitizer blocks ("Direct/Indirect leak of ...") whose stack reaches our code:
    a frame symbolised to a source file of this repository or to the vitlens binary.
    Leaks entirely inside system libraries (X11, Mesa, ...) are not ours."""
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    blocks, cur = [], None
    for line in stderr:
        if re.match(r"\s*(Direct|Indirect) leak of", line):
            cur = [line]
            blocks.append(cur)
        elif cur is not None and re.match(r"\s*#\d+ ", line):
            cur.append(line)
        else:
            cur = None
    return ["\n".join(b) for b in blocks
            if any(src + "/" in f or app_path + "+" in f for f in b[1:])]


def run(argv):
    subprocess.run(argv, check=True, capture_output=True, text=True)


def map_kind_names(app_path, needs=("-", "classifier", "map-head")):
    """The map kinds' names, in the table's order, from --help's paragraph
    "map kinds, in the order E steps through them:" (wrapped, comma-separated), keeping
    those whose NEEDS (--list-kinds' 6th column) is in needs: E skips a kind the model
    cannot show (the probe without SigLIP's MAP head)."""
    out = subprocess.run([app_path, "--help"], check=True, capture_output=True, text=True).stdout
    part = out.split("map kinds, in the order E steps through them:\n", 1)[1].split("\n\n", 1)[0]
    names = [n.strip() for n in " ".join(part.split()).split(",")]
    rows = [ln.split("\t") for ln in subprocess.run(
        [app_path, "--list-kinds"], check=True, capture_output=True, text=True).stdout.splitlines()]
    need = {f[3]: f[5] for f in rows}
    return [n for n in names if need.get(n) in needs]


def diff(a, b):
    return float(np.abs(a.astype(np.float32) - b.astype(np.float32)).mean())


def save(img, path):
    Image.fromarray(img.astype(np.uint8)).save(path)


def colormap_lut(name="viridis"):
    """A colormap's 256 colours, from app/render/colormap.c (its tables follow /* name */)."""
    here = os.path.dirname(__file__)
    src = open(os.path.join(here, "..", "..", "app", "render", "colormap.c")).read()
    block = src.split(f"/* {name} */", 1)[1].split("\n  },", 1)[0]
    lut = [tuple(int(v) for v in m) for m in re.findall(r"\{\s*(\d+),\s*(\d+),\s*(\d+)\}", block)]
    assert len(lut) == 256, (name, len(lut))
    return np.array(lut, np.int16)


def colormap_top():
    """The default colormap's top colour (LUT entry 255)."""
    return tuple(int(v) for v in colormap_lut()[-1])


def patch_means(img, n=14):
    """Mean colour of each of the n x n patches: compares crops drawn at different sizes."""
    return np.asarray(Image.fromarray(img.astype(np.uint8)).resize((n, n), Image.BOX)).astype(np.int16)


def plain_crop(path, side):
    """timm's eval view of the photo (resize shorter side to 256 bicubic, centre crop
    224) scaled to the on-screen size: what the window shows with the overlay off."""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    short = int(224 / 0.875)
    if w < h:
        im = im.resize((short, int(h * short / w)), Image.BICUBIC)
    else:
        im = im.resize((int(w * short / h), short), Image.BICUBIC)
    w, h = im.size
    left, top = round((w - 224) / 2), round((h - 224) / 2)
    im = im.crop((left, top, left + 224, top + 224)).resize((side, side), Image.BILINEAR)
    return np.asarray(im).astype(np.int16)


# --- the test ----------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True, help="directory for screenshots")
    ap.add_argument("--assets", help="the folder holding default/, given to vitlens as "
                    "VITLENS_ASSETS (default: none, so the app finds the source tree's assets/)")
    args = ap.parse_args()
    assets = args.assets or os.path.join(os.path.dirname(__file__), "..", "..", "assets")
    default = os.path.join(assets, "default")
    has_default = os.path.exists(os.path.join(default, "model.safetensors"))

    model_dir = os.path.join(args.shared, "models", "deit-tiny")
    model = os.path.join(model_dir, "deit_tiny_patch16_224.safetensors")
    labels = os.path.join(model_dir, "imagenet_synset_words.txt")
    chelsea = os.path.join(args.shared, "images", "chelsea.png")
    coffee = os.path.join(args.shared, "images", "coffee.png")
    has_deit = os.path.exists(model) and os.path.exists(chelsea)
    if not has_deit:
        print(f"SKIP: {model} or {chelsea} missing: no DeiT-Tiny runs")
    if not has_deit and not has_default:
        return 77
    for tool in ("xdotool", "import"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} not installed (apt-get install xdotool imagemagick)")
            return 1
    if not os.environ.get("DISPLAY"):
        print("FAIL: no DISPLAY: run under xvfb-run")
        return 1
    os.makedirs(args.out, exist_ok=True)

    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)  # the built-in model from where the build says it is
    if args.assets:
        env["VITLENS_ASSETS"] = args.assets
    runs = [
        ("no arguments: the built-in model on its demo scenes", [args.app], env,
         lambda app: test_default(app, args, default)),
        # named, by `builtin` or by its path, it is the same: its demo scenes (issue 38's
        # trial: "drop a photo here")
        ("--model builtin", [args.app, "--model", "builtin"], env,
         lambda app: test_builtin_named(app, default)),
        ("--model its path", [args.app, "--model", os.path.join(default, "model.safetensors")],
         env, lambda app: test_builtin_named(app, default)),
    ] if has_default else []
    runs += [
        ("main", [args.app, "--model", model, "--labels", labels, "--stdin-drops", chelsea], env,
         lambda app: test(app, args, chelsea, coffee, model)),
        ("bad image at start", [args.app, "--model", model, "/no/such/photo.png"], env,
         test_bad_start),
        ("no font", [args.app, "--model", model, chelsea],
         dict(env, FONTCONFIG_FILE=empty_fontconfig(args.out)), test_no_font),
        ("shader error", [args.app, "--model", model, chelsea],
         dict(env, VITLENS_SHADER_DIR=broken_shaders(args.out)), test_shader_error),
    ] if has_deit else []
    for name, argv, run_env, fn in runs:
        print(f"---- {name}", flush=True)
        if not run_checks(App(argv, run_env), fn):
            return 1
    if not has_deit:  # what ran passed, but not all of it: a skip (in CI a failure)
        print("gui: the built-in model's checks passed; the DeiT-Tiny runs skipped")
        return 77
    print("gui: all checks passed")
    return 0


def builtin_and_display(root):
    """Before a test on the built-in model: 77 (skip) without it in root's assets/default,
    1 without a display, None when both are there."""
    if not os.path.exists(os.path.join(root, "assets", "default", "model.safetensors")):
        print("SKIP: no built-in model in assets/default")
        return 77
    if not os.environ.get("DISPLAY"):
        print("FAIL: no DISPLAY: run under xvfb-run")
        return 1
    return None


def deit_setup():
    """The command line of the GUI tests on ../shared's DeiT-Tiny (--app, --shared, --out) and
    its files: (args, weights, labels, chelsea.png, coffee.png), the --out folder made; None
    when the weights or the photos are not there (the test then exits 77: skipped)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    mdir = os.path.join(a.shared, "models", "deit-tiny")
    files = [os.path.join(mdir, "deit_tiny_patch16_224.safetensors"),
             os.path.join(mdir, "imagenet_synset_words.txt"),
             os.path.join(a.shared, "images", "chelsea.png"),
             os.path.join(a.shared, "images", "coffee.png")]
    if not all(os.path.exists(f) for f in files):
        print(f"SKIP: no DeiT-Tiny or its photos under {a.shared}")
        return None
    os.makedirs(a.out, exist_ok=True)
    return (a, *files)


def run_checks(app, fn):
    """fn(app), the checks of one run of the app: False (and FAIL printed) when one
    fails. The app is killed if it is still running at the end, whatever happened."""
    try:
        fn(app)
        return True
    except Fail as e:
        print(f"FAIL {e}", flush=True)
        return False
    finally:
        if app.proc.poll() is None:
            app.proc.kill()
            app.proc.wait()


def windows_titled(name):
    """The top-level windows titled `name` now, their ids (SDL's X11 message box sets only a
    UTF-8 WM_NAME, which `xdotool search --name` does not match: `xwininfo -root -tree`
    lists it)."""
    tree = subprocess.run(["xwininfo", "-root", "-tree"], check=True, capture_output=True,
                          text=True).stdout
    return [ln.split()[0] for ln in tree.splitlines() if f'"{name}"' in ln]


def find_window(app, name=None):
    """The app's main window, or a top-level window titled `name` (windows_titled)."""
    if name is None:
        wid = subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--pid",
                              str(app.proc.pid)], check=True, capture_output=True, text=True,
                             timeout=TIMEOUT_S).stdout.split()
    else:
        deadline, wid = time.time() + TIMEOUT_S, []
        while not wid and time.time() < deadline:
            wid = windows_titled(name)
            if not wid:
                time.sleep(0.1)
    check(len(wid) >= 1, f"window {name or 'of the app'} found ({wid})")
    return wid[0]


def video_setup(a, root, frames, fps):
    """The window tests of a video (test_live.py, test_record.py): exit code 77 (skip) without the
    built-in model, a display or gst-launch-1.0; else (work, clip): a fresh a.out and in it
    clip.webm, videotestsrc's ball, 160x120 at fps, `frames` frames, VP8 in WebM."""
    rc = builtin_and_display(root)
    if rc is not None:
        return rc
    if not shutil.which("gst-launch-1.0"):
        print("SKIP: no gst-launch-1.0 (Debian: gstreamer1.0-tools)")
        return 77
    work = os.path.abspath(a.out)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    clip = os.path.join(work, "clip.webm")
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", "pattern=ball", f"num-buffers={frames}",
                    "!", f"video/x-raw,width=160,height=120,framerate={fps}/1", "!", "vp8enc", "!",
                    "webmmux", "!", "filesink", f"location={clip}"], check=True)
    return work, clip


def quit_app(app, key="q", want_rc=0):
    run(["xdotool", "windowfocus", "--sync", app.wid])
    run(["xdotool", "key", key])
    try:
        rc = app.proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Fail(f"{key} did not end the app")
    app.output_read()  # the exit report read to its end
    bad = [s for s in app.stderr if "ERROR: AddressSanitizer" in s or "runtime error:" in s]
    check(not bad, "no AddressSanitizer / UBSan error" + "".join("\n" + b for b in bad))
    leaks = own_leaks(app.stderr, os.path.realpath(app.argv0))
    check(not leaks, "no leak in vitlens' own code" + "".join("\n" + b for b in leaks))
    check(rc == want_rc or (rc == 23 and any("LeakSanitizer" in s for s in app.stderr)),
          f"{key}: exit status {rc} (want {want_rc}, or 23 for leaks only outside vitlens)")


def test_bad_start(app):
    """A photo that cannot be read at start: the window opens, shows the error, runs on."""
    app.wait_state("error frame", busy=0, error=1, scene=0)
    app.wid = find_window(app)
    img = app.shot()
    x, y, side = app.image_rect()
    errline = img[y + side:]
    check((errline[..., 0] > errline[..., 1] + 25).mean() > 0.2, "error line shown")
    check(app.stderr_has(lambda err: any("/no/such/photo.png" in s for s in err)),
          "the error names the file")
    check(img[y:y + side, x:x + side].std() < 20, "no photo: the empty placeholder")
    quit_app(app)


def empty_fontconfig(out):
    path = os.path.join(out, "fonts-empty.conf")
    with open(path, "w") as f:
        f.write('<?xml version="1.0"?>\n<fontconfig></fontconfig>\n')
    return path


def test_no_font(app):
    """fontconfig finds no font: a clear message, and the maps still work without text."""
    app.wait_line(lambda s: s.startswith("ready "), "ready without a font")
    app.wait_state("first frame", busy=0, scene=1)
    # DeiT-Tiny without --labels: ImageNet-1k's names, from the timm layout, said on the
    # status line (the trace's text of it; no font draws it here)
    st = app.wait_line(lambda s: s.startswith("status "), "the first frame's status line")
    check("class names assumed from the timm layout" in st and any(c in st for c in CATS),
          f"no --labels: the names assumed, said on the status line ({st[7:]})")
    app.wid = find_window(app)
    check(app.stderr_has(lambda err: any("no usable font" in s and "fonts-dejavu-core" in s
                                         for s in err)),
          "missing font: a clear message on stderr")
    before = app.shot()
    x, y, side = app.image_rect()
    run(["xdotool", "windowfocus", "--sync", app.wid])
    app.key("Left", layer=10)
    check(diff(app.crop(before), app.crop(app.shot())) > 0.5, "keys still switch the map")
    # the status bar (the bottom 5.5% of the window, 22 px at least; above it the on-screen
    # buttons, faces without labels): each row one colour
    bar_h = max(22, round(before.shape[0] * 0.055))
    below = before[before.shape[0] - bar_h:]
    check(max(row.std(axis=0).max() for row in below) < 3, "status bar without text")
    quit_app(app)


def broken_shaders(out):
    d = os.path.join(out, "broken-shaders")
    src = os.path.join(os.path.dirname(__file__), "..", "..", "shaders")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    with open(os.path.join(d, "heatmap.frag.glsl"), "a") as f:
        f.write("\nthis is not GLSL;\n")
    return d


def test_shader_error(app):
    """A shader that does not compile: its log on stderr and in a dialog, exit 1."""
    app.wid = find_window(app, "vitlens: cannot start")
    check(app.stderr_has(lambda err: any("heatmap.frag.glsl: shader does not compile" in s
                                         for s in err)),
          "stderr names the shader")
    check(app.stderr_has(lambda err: any(re.search(r"\berror\b", s, re.I) for s in err[1:])),
          "and shows its log")
    quit_app(app, key="Return", want_rc=1)


def test_builtin_named(app, default):
    """The built-in model named on the command line opens on its first demo scene."""
    demo_dir = os.path.join(default, "demo")
    first = os.path.realpath(os.path.join(demo_dir, sorted(
        f for f in os.listdir(demo_dir) if f.endswith(".png"))[0]))
    ready = app.wait_line(lambda s: s.startswith("ready "), "ready")
    check(os.path.realpath(ready[6:]) == first, f"opens the first demo scene ({ready[6:]})")
    app.wait_state("first frame with the map", busy=0, scene=1)
    app.wid = find_window(app)
    quit_app(app)


def test_default(app, args, default):
    """`vitlens` alone: the built-in model on the first demo scene, its class on the
    status line; N / Shift+N step through the demo scenes, wrapping around."""
    demo_dir = os.path.join(default, "demo")
    demos = sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))
    with open(os.path.join(default, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(default, "eval.json")) as f:
        card_demo = {d["file"]: d for d in json.load(f)["demo"]}
    card = {name: cfg["label_names"][d["pred"]] for name, d in card_demo.items()}
    L, H = cfg["vitlens"]["depth"], cfg["num_heads"]
    first = os.path.realpath(os.path.join(demo_dir, demos[0]))
    ready = app.wait_line(lambda s: s.startswith("ready "), "ready")
    check(os.path.realpath(ready[6:]) == first, f"opens the first demo scene ({ready[6:]})")
    app.wait_state("first frame with the map", busy=0, scene=1)
    app.wid = find_window(app)
    run(["xdotool", "windowfocus", "--sync", app.wid])
    check(app.state["layer"] == str(L - 1) and app.state["head"] == str(H),
          f"starts at the last layer ({L}), mean of the {H} heads")

    def status():
        line = app.wait_line(lambda s: s.startswith("status "), "a status line")
        return line[7:].split(" | ")

    left, right = status()
    check(left.startswith("default") and f"layer {L}/{L}" in left,
          f"status line names the built-in model: {left!r}")
    check(right.split()[0] == card[demos[0]],
          f"status line shows the predicted class {card[demos[0]]!r}: {right!r}")
    s0 = app.shot()
    x, y, side = app.image_rect()
    save(s0, os.path.join(args.out, "default.png"))
    print(f"     wrote {os.path.join(args.out, 'default.png')}")
    check(s0[y + side + 5:].std() > 10, "status bar has text")

    # overlay off: the window shows the demo scene itself
    app.key("o", overlay=0)
    plain = app.crop(app.shot())
    scene = np.asarray(Image.open(first).convert("RGB").resize((side, side), Image.BILINEAR))
    d = diff(patch_means(plain, 12), patch_means(scene.astype(np.int16), 12))
    check(d < 4, f"overlay off: the crop is the demo scene (patch means differ by {d:.1f})")
    app.key("o", overlay=1)

    # the heatmap on the object: at opacity 1 each patch is a pure colormap colour and the
    # map's largest patch is the LUT's top colour (min-max normalised); it is the patch the
    # card (eval.json, from PyTorch) names, and it touches the object when the card says so
    entry = card_demo[demos[0]]
    G = cfg["pretrained_cfg"]["input_size"][-1] // cfg["vitlens"]["patch"]
    for op in ("0.70", "0.80", "0.90", "1.00"):
        app.key("plus", opacity=op)
    for kind, key in (("attention", None), ("rollout", "r")):
        if key:
            app.key(key, kind=kind)
        img = app.crop(app.shot()).astype(np.float32)
        centres = [img[int((r + 0.5) * side / G), int((c + 0.5) * side / G)]
                   for r in range(G) for c in range(G)]
        top = np.array(colormap_top(), np.float32)
        best = int(np.argmin([np.abs(c - top).sum() for c in centres]))
        check(best == entry[kind + "_max"],
              f"{kind}: the hottest patch on screen is ({best // G}, {best % G}), the card's "
              f"({entry[kind + '_max'] // G}, {entry[kind + '_max'] % G}); on the object: "
              f"{entry[kind + '_hit']}")
        save(img, os.path.join(args.out, f"default_{kind}_opacity1.png"))
    app.key("r", kind="attention")
    for op in ("0.90", "0.80", "0.70", "0.60"):
        app.key("minus", opacity=op)

    # N: the next demo scene, and its class; Shift+N back; Shift+N again wraps to the last
    steps = [("n", 1), ("shift+n", 0), ("shift+n", len(demos) - 1), ("n", 0)]
    shots = {0: app.crop(s0)}
    for key, want in steps:
        run(["xdotool", "key", "--clearmodifiers", key])
        path = os.path.realpath(os.path.join(demo_dir, demos[want]))
        app.wait_line(lambda s: s.startswith("ready ") and os.path.realpath(s[6:]) == path,
                      f"{key}: ready {demos[want]}")
        app.wait_state(f"{key}: drawn", busy=0, error=0)
        left, right = status()
        while right.startswith("working") or right.endswith("\u2026"):  # a job's progress
            left, right = status()
        check(right.split()[0] == card[demos[want]],
              f"{key}: {demos[want]}, status line shows {card[demos[want]]!r} ({right!r})")
        img = app.crop(app.shot())
        if want in shots:
            check(diff(img, shots[want]) == 0, f"{key}: the same picture as before")
        else:
            d = diff(img, shots[0])
            check(d > 5, f"{key}: a different scene on screen ({d:.1f})")
            shots[want] = img
    quit_app(app)


def malformed_inputs(out, model, photo):
    """(path, phrase of the message) for a few inputs of docs/malformed-inputs.md:
    a folder, an empty file, a photo cut in half, a PNG declaring 100000x100000 px,
    the weights with one NaN, a folder named .safetensors."""
    d = os.path.join(out, "malformed")
    os.makedirs(os.path.join(d, "folder.png"), exist_ok=True)
    os.makedirs(os.path.join(d, "folder.safetensors"), exist_ok=True)
    with open(os.path.join(d, "empty.jpg"), "wb"):
        pass
    with open(photo, "rb") as f:
        png = f.read()
    with open(os.path.join(d, "cut.png"), "wb") as f:
        f.write(png[:len(png) // 2])

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    with open(os.path.join(d, "huge.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
                + chunk(b"IEND", b""))
    with open(model, "rb") as f:
        data = bytearray(f.read())
    header, base = read_header(data)
    at = base + header["blocks.1.attn.qkv.weight"]["data_offsets"][0]
    data[at:at + 4] = struct.pack("<f", float("nan"))
    with open(os.path.join(d, "nan.safetensors"), "wb") as f:
        f.write(data)
    return [(os.path.join(d, "folder.png"), "is a directory"),
            (os.path.join(d, "empty.jpg"), "file is empty"),
            (os.path.join(d, "cut.png"), "truncated or corrupt"),
            (os.path.join(d, "huge.png"), "more than the limit"),
            (os.path.join(d, "nan.safetensors"), "is NaN"),
            (os.path.join(d, "folder.safetensors"), "is a directory")]


def test(app, args, chelsea, coffee, model):
    out = args.out
    # -- start-up: the window, "ready" once the first map is on screen
    app.start(chelsea)
    L, H = 12, 3
    check(app.state["layer"] == str(L - 1) and app.state["head"] == str(H),
          "starts at the last layer, mean of the heads")
    s0 = app.shot()
    x, y, side = app.image_rect()
    check(side > 300 and s0.shape[0] > y + side, f"crop drawn at {x},{y} size {side}")
    bar = s0[y + side + 5:, :]
    check(bar.std() > 10, "status bar has text")

    # -- layers: Left/Right change the map; coming back gives the same picture
    app.key("Left", layer=L - 2)
    s1 = app.shot()
    d = diff(app.crop(s0), app.crop(s1))
    check(d > 0.5, f"layer {L - 1} differs from layer {L} ({d:.2f})")
    check(diff(s0[y + side + 5:], s1[y + side + 5:]) > 0.1, "status line follows the layer")
    app.key("Right", layer=L - 1)
    check(diff(s0, app.shot()) == 0, "Right returns to the same picture")
    for i in range(6):
        app.key("Left", layer=L - 2 - i)
    app.key("Left", layer=4)
    app.key("Right", layer=5)  # layer 6 of 12, shown 1-based

    # -- heads: Up/Down step through the heads, then mean / max / min
    by_head = {}
    for h in range(H - 1, -1, -1):
        app.key("Up", head=h)
        by_head[h] = app.crop(app.shot())
    for h in range(1, H + 3):
        app.key("Down", head=h)
        by_head[h] = app.crop(app.shot())
    names = [f"head {h + 1}" for h in range(H)] + ["mean", "max", "min"]
    for a in range(H + 3):
        for b in range(a + 1, H + 3):
            d = diff(by_head[a], by_head[b])
            check(d > 0.5, f"{names[a]} differs from {names[b]} ({d:.2f})")
    app.key("Up", head=H + 1)
    app.key("Up", head=H)  # mean

    # -- a reference screenshot: chelsea, layer 6, mean of the heads, overlay on
    base = app.shot()
    base_crop = app.crop(base)  # before the layout changes (error line, resize)
    save(base, os.path.join(out, "screenshot.png"))
    print(f"     wrote {os.path.join(out, 'screenshot.png')}")

    # -- rollout differs from attention, and toggles back
    app.key("r", kind="rollout")
    roll = app.shot()
    d = diff(app.crop(base), app.crop(roll))
    check(d > 0.5, f"rollout differs from attention ({d:.2f})")
    app.key("Up", head=H - 1)
    d = diff(app.crop(roll), app.crop(app.shot()))
    check(d > 0.5, f"per-head rollout differs from fused ({d:.2f})")
    app.key("Down", head=H)
    check(diff(roll, app.shot()) == 0, "back to the fused rollout")
    # -- the discard ratio: ] raises it in tenths (the status line says so), [ lowers it
    app.key("bracketright", "bracketright", "bracketright", "bracketright", "bracketright",
            discard="0.50")
    disc = app.shot()
    d = diff(app.crop(roll), app.crop(disc))
    check(d > 0.5, f"discard 0.5 changes the rollout ({d:.2f})")
    check(diff(roll[-20:], disc[-20:]) > 0.1, "the status line changes with the discard ratio")
    app.key("bracketleft", "bracketleft", "bracketleft", "bracketleft", "bracketleft",
            "bracketleft", discard="0.00")
    check(diff(roll, app.shot()) == 0, "[ back to 0 (and not below): the rollout as before")
    app.key("r", kind="attention")
    check(diff(base, app.shot()) == 0, "R again: attention as before")

    # -- E / Shift+E step through the map kinds' table in its order, as --help's E line
    # lists them: the trace and the status line name each kind, the rollout is R's
    # picture, and after the last kind comes the first again
    # (the model has a classifier, no MAP head: E skips the probe)
    every = map_kind_names(args.app)
    names = map_kind_names(args.app, needs=("-", "classifier"))
    check(names[:2] == ["attention", "rollout"] and len(every) > len(names),
          f"--help's E line lists the map kinds: {every}, this model offers {names}")
    tags = []
    for i in range(1, len(names) + 1):
        name = names[i % len(names)]
        run(["xdotool", "key", "--clearmodifiers", "e"])
        line = app.wait_line(lambda s: s.startswith("status ") and
                             name in s[7:].split(" | ")[0].split("  \u00b7  "),
                             f"E: the status line names {name!r}")
        tags.append(app.state["kind"])
        check(tags[-1] not in tags[:-1], f"E: kind={tags[-1]}, {line[7:]!r}")
        # a class-specific kind's maps come from the worker: wait until it is drawn
        app.wait_state(f"E: {name} drawn", shown=tags[-1], busy=0)
        if name == "rollout":
            check(tags[-1] == "rollout" and diff(roll, app.shot()) == 0,
                  "E: the rollout, the picture R gives")
    last = app.shot()
    back = diff(base, last)
    if back:
        save(last, os.path.join(args.out, "kinds_back.png"))
        save(base, os.path.join(args.out, "kinds_base.png"))
    check(len(set(tags)) == len(names) and tags[-1] == "attention" and back == 0,
          f"E steps through {tags} and back to attention (picture {back:.4f} away)")
    app.key("shift+e", kind=tags[-2])
    app.key("e", kind="attention")
    check(diff(base, app.shot()) == 0, "Shift+E: the last kind, E: attention as before")

    # -- overlay off is the plain crop; on again is the same picture
    app.key("o", overlay=0)
    plain = app.crop(app.shot())
    ref = plain_crop(chelsea, side)
    d_off, d_on = diff(plain, ref), diff(app.crop(base), ref)
    check(d_off < 6 and d_on > 3 * d_off, f"overlay off ~ the plain crop ({d_off:.1f} vs on {d_on:.1f})")
    app.key("o", overlay=1)
    check(diff(base, app.shot()) == 0, "O again: overlay back")

    # -- opacity: + blends more colormap, - less; keypad too
    app.key("plus", opacity="0.70")
    more = app.crop(app.shot())
    app.key("KP_Add", opacity="0.80")
    most = app.crop(app.shot())
    d6, d7, d8 = (diff(c, plain) for c in (app.crop(base), more, most))
    check(d6 < d7 < d8, f"+ raises opacity ({d6:.1f} < {d7:.1f} < {d8:.1f} from the plain crop)")
    app.key("KP_Subtract", opacity="0.70")
    app.key("minus", opacity="0.60")
    check(diff(base, app.shot()) == 0, "- lowers it back to the same picture")

    # -- GPU and CPU agree: at opacity 1 every patch is a pure colormap colour,
    #    the same as the exported PNG's (same LUT, same normalisation)
    for i, op in enumerate(("0.70", "0.80", "0.90", "1.00")):
        app.key("plus", opacity=op)
    gpu = app.crop(app.shot())
    exp = os.path.join(out, "export_opacity1")
    subprocess.run([args.app, "--model", model, "--opacity", "1", "--export", exp, chelsea],
                   check=True, capture_output=True)
    cpu = np.asarray(Image.open(os.path.join(exp, "L06_mean.png")).convert("RGB")).astype(np.int16)
    n = 14
    centres = [(int((r + 0.5) * side / n), int((c + 0.5) * side / n)) for r in range(n) for c in range(n)]
    cs = cpu.shape[0]
    worst = max(int(np.abs(gpu[py, px] - cpu[int(py * cs / side), int(px * cs / side)]).max())
                for py, px in centres)
    check(worst <= 2, f"window and --export colour every patch alike (max diff {worst})")
    for op in ("0.90", "0.80", "0.70", "0.60"):
        app.key("minus", opacity=op)

    # -- grid lines
    app.key("g", grid=1)
    grid = app.crop(app.shot())
    b = app.crop(base)
    cols = [int(round(c * side / 14)) for c in range(1, 14)]
    on_line = np.mean([max(grid[:, c + o].mean() - b[:, c + o].mean() for o in (-1, 0, 1))
                       for c in cols])
    check(on_line > 10, f"G draws bright lines on the patch borders (+{on_line:.1f})")
    app.key("g", grid=0)

    # -- help overlay appears and goes away
    app.key("h", help=1)
    helped = app.shot()
    check(diff(app.crop(helped), app.crop(base)) > 10, "H shows the help")
    check(helped[y + side // 2 - 20:y + side // 2 + 20].mean() < base[y + side // 2 - 20:y + side // 2 + 20].mean(),
          "the help panel is a dark panel over the crop")
    pages = int(app.state["hpage"].split("/")[1])
    for k in range(2, pages + 1):  # the keys' further pages, if they take more than one
        app.key("h", help=1, hpage=f"{k}/{pages}")
    app.key("h", help=0)
    check(diff(base, app.shot()) == 0, f"H after its last page ({pages}) hides it")

    # -- dropping a file that is not an image: error shown, the photo stays
    bad = os.path.join(out, "not_an_image.txt")
    with open(bad, "w") as f:
        f.write("hello\n")
    app.drop(bad)
    app.wait_state("error after a bad drop", busy=0, error=1)
    errshot = app.shot()
    save(errshot, os.path.join(out, "error.png"))
    x2, y2, side2 = app.image_rect()
    check(side2 <= side, "error line takes room below the crop")
    errline = errshot[y2 + side2:]
    reddish = (errline[..., 0] > errline[..., 1] + 25).mean()
    check(reddish > 0.2, f"error line is shown ({reddish:.2f} of it red)")
    check(app.stderr_has(lambda err: any("not_an_image.txt" in s for s in err)),
          "the error names the file")
    d = diff(patch_means(app.crop(errshot)), patch_means(base_crop))
    check(d < 2, f"the previous photo and map stay (patch means differ by {d:.2f})")

    # -- bad weights dropped: error, state stays
    fake = os.path.join(out, "broken.safetensors")
    with open(fake, "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    loads = int(app.state["loads"])
    app.drop(fake)
    app.wait_state("error after a bad model", loads=loads + 1, busy=0, error=1)
    check(app.stderr_has(lambda err: any("broken.safetensors" in s for s in err)),
          "bad weights: the error names the file")
    check(diff(app.crop(errshot), app.crop(app.shot())) == 0, "bad weights: the photo and map stay")

    # -- more of docs/malformed-inputs.md, dropped one after another: each an error
    #    naming the file, the photo and map unchanged, the app still running
    for path, phrase in malformed_inputs(out, model, chelsea):
        name = os.path.basename(path)
        loads = int(app.state["loads"])
        app.drop(path)
        app.wait_state(f"error after dropping {name}", loads=loads + 1, busy=0, error=1)
        check(app.stderr_has(lambda err: any(name in s and phrase in s for s in err)),
              f"{name}: the error names the file and says {phrase!r}")
        check(diff(app.crop(errshot), app.crop(app.shot())) == 0, f"{name}: the photo and map stay")

    # -- a good drop: new photo, error cleared
    app.drop(coffee)
    app.wait_line(lambda s: s == f"ready {coffee}", "ready after dropping coffee.png")
    app.wait_state("coffee drawn", busy=0, error=0)
    cof = app.shot()
    d = diff(patch_means(app.crop(cof)), patch_means(base_crop))
    check(d > 10, f"a dropped photo replaces the old one ({d:.1f})")

    # -- resize: letterboxed, square crop centred, background around it
    run(["xdotool", "windowsize", "--sync", app.wid, "1000", "640"])
    app.wait_state("resized", window="1000,640")
    wide = app.shot()
    x3, y3, side3 = app.image_rect()
    check(side3 < 640 - 30 and x3 > 30, f"letterbox: square {side3} px at x={x3} in 1000x640")
    check(wide[y3 + 5:y3 + side3 - 5, 5:x3 - 5].std() < 3, "letterbox: plain background left of it")

    # -- the help at 800x600 (issue 38's trial: ~6 px text, see-through): legible text on
    # an opaque panel, on as many pages as that takes; H turns them, then closes it
    run(["xdotool", "windowsize", "--sync", app.wid, "800", "600"])
    app.wait_state("resized", window="800,600")
    app.key("h", help=1)
    pages = int(app.state["hpage"].split("/")[1])
    px = int(app.state["hpx"])
    bx, by, bw, bh = (int(v) for v in app.state["hbox"].split(","))
    check(app.state["hpage"] == f"1/{pages}" and pages >= 2 and px >= 11,
          f"800x600: the keys on {pages} pages at {px} px (>= 11), page 1 first")
    check(bx >= 0 and by >= 0 and bx + bw <= 800 and by + bh <= 600,
          f"800x600: the help panel inside the window ({bx},{by} {bw}x{bh})")
    first = app.shot()
    app.key("o", overlay=0)  # another picture under the panel: it must not show through
    under = app.shot()
    d = float(np.abs(first[by:by + bh, bx:bx + bw].astype(np.int16) -
                     under[by:by + bh, bx:bx + bw].astype(np.int16)).max())
    check(d == 0, f"the help panel is opaque (max change over it when the map goes: {d:.0f})")
    app.key("o", overlay=1)
    for k in range(2, pages + 1):
        app.key("h", help=1, hpage=f"{k}/{pages}")
        check(float(np.abs(app.shot()[by:by + bh, bx:bx + bw].astype(np.int16) -
                           first[by:by + bh, bx:bx + bw].astype(np.int16)).mean()) > 1,
              f"H: page {k} of {pages}, other keys than page 1's")
    app.key("h", help=0, hpage="0/0")

    # -- Esc quits cleanly
    quit_app(app)


if __name__ == "__main__":
    sys.exit(main())
