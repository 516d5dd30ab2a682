#!/usr/bin/python3
"""The lesson view in the window (issue 24), on the built-in model and its first demo
scene, so nothing from shared/ is needed:

  1. Page Down opens the default lesson (assets/default/lesson.txt) at step 1 of its N; Page
     Down / Right page through every step in the script's order and Page Up / Left back,
     each step a frame (the trace's lesson=K/N lstep=NAME); the picture on screen is
     --lesson-export's PNG of that step (one drawing for both: the window shows it scaled);
     --lesson-export without --lesson writes the same lesson: its steps and their block, head
     and patch (steps.json) are the window's (the trace's lstep, llayer, lhead, lpatch), and
     each export's lesson.md header says the block, head and patch steps.json gives each step
     (issue 38's trial: it exported block 1, patch (7, 7), and the header always said so).
  2. Up / Down move the block, Shift+Up the head, I J K L the patch; H draws the lesson's
     keys over the step and Esc closes them first; Esc goes back to the explorer as the lesson
     found it (layer, head, query, kind); there too Esc closes the help before it quits.
  3. a model pooled by attention (the SigLIP stand-in of siglip_model.py): the default lesson
     gains the probe step; paged to, the window shows --lesson-export's picture of it, and
     Shift+Down another head's (OUT/probe_step.png: the screenshot);
  4. --lesson FILE with bad lines: each named with its line on stderr, the rest of the
     lesson runs (step 1 of the good lines), the window opens in the lesson view.

    xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_lesson.py \\
        --app build/vitlens --out DIR
Exits 0 on success, 1 on a failed check, 77 without the built-in model.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_gui import App, builtin_and_display, check, quit_app, run_checks, save  # noqa: E402

sys.path.insert(0, str(HERE.parent / "parity"))
import lesson_table  # noqa: E402

ROOT = HERE.parent.parent
# the default lesson's steps, in its order: what the window pages through on the built-in model
STEPS = [ln.split()[0] for ln in (ROOT / "assets/default/lesson.txt").read_text().splitlines()
         if ln.split() and not ln.startswith("#")]
N = len(STEPS)


def env(check_redraw=False):
    e = dict(os.environ, VITLENS_TRACE="1")
    if check_redraw:
        e["VITLENS_CHECK_REDRAW"] = "1"
    return e


class LessonApp(App):
    """The app, with each lesson frame's (exact, mismatch) kept: how many pictures it drew
    texel for pixel (copied into the canvas) and, with VITLENS_CHECK_REDRAW, in how many pixels it differs
    from the whole frame drawn again with every picture sampled linearly (-1: not checked)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.drawn = []

    def take(self, line):
        taken = super().take(line)
        if taken and self.state.get("lesson", "0/0") != "0/0":
            self.drawn.append((int(self.state["exact"]), int(self.state["mismatch"])))
        return taken


def picture_matches(app, png, what):
    """The picture on screen against the exported PNG scaled to its size: the same drawing
    (mean difference a few levels: scaling and the window's own filtering)."""
    img = app.crop(app.shot()).astype(np.float32)
    h, w = img.shape[:2]
    ref = np.asarray(Image.open(png).convert("RGB").resize((w, h), Image.BILINEAR), np.float32)
    d = float(np.abs(img - ref).mean())
    other = float(np.abs(img - np.asarray(Image.open(png.parent / "01_patches.png").convert("RGB")
                                          .resize((w, h), Image.BILINEAR), np.float32)).mean())
    print(f"  {what}: mean |screen - {png.name}| = {d:.1f} levels (against step 1's: {other:.1f})")
    check(d < 8.0 and (png.name.startswith("01_") or d < other / 2),
          f"{what}: the window shows {png.name}")


def md_selection(md, n):
    """lesson.md's header: (block, head, row, col) per step, 1-based; a sentence without step
    numbers ("Every step: ..." or the old "Block 1, head 1, patch (7, 7).") covers every step.
    None where the header says nothing of a step."""
    sel = [None] * n
    for m in re.finditer(r"^(?:(?:Every step|Steps? (\d+)(?: to (\d+))?): block|Block) (\d+), "
                         r"head (\d+), patch \((\d+), (\d+)\)\.$", md.split("\n## ")[0], re.M):
        a = int(m[1]) if m[1] else 1
        b = int(m[2]) if m[2] else (a if m[1] else n)
        for i in range(a - 1, min(b, n)):
            sel[i] = tuple(int(m[k]) for k in range(3, 7))
    return sel


def export_selection(exp):
    """steps.json's (block, head, row, col) per step, 1-based, and lesson.md's header's."""
    steps = json.loads((exp / "steps.json").read_text())["steps"]
    js = [(st["layer"], st["head"], *st["patch"]) for st in steps]
    return js, md_selection((exp / "lesson.md").read_text(), len(js))


def test_default_lesson(app, out, demo):
    app.start(demo)
    # where the explorer is before the lesson: Esc comes back here (issue 38's trial)
    app.key("Left", layer=2)
    app.key("Up", head=3)
    before = {k: app.state[k] for k in ("layer", "head", "query", "kind")}
    # the export of the same lesson, for its pictures
    exp = out / "export"
    r = subprocess.run([app.argv0, "--lesson", str(ROOT / "assets/default/lesson.txt"),
                        "--lesson-export", str(exp), demo], capture_output=True, text=True)
    check(r.returncode == 0, f"--lesson-export of the default lesson: {r.stderr}")
    # without --lesson: the same lesson, fitted as the window fits it (issue 38's trial: it
    # exported block 1, patch (7, 7) and lesson.md's header always said so)
    bare = out / "export_bare"
    r = subprocess.run([app.argv0, "--lesson-export", str(bare), demo], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"--lesson-export without --lesson: {r.stderr}")
    for e in (exp, bare):
        js, md = export_selection(e)
        print(f"  {e.name}: steps.json {sorted(set(js))}, lesson.md's header {sorted(set(md))}")
        check(md == js, f"{e.name}: lesson.md's header says the block, head and patch of each "
              f"step as steps.json does: {md} vs {js}")
    window = []  # the window's (block, head, row, col) per step, 1-based
    app.key("Next", lesson=f"1/{N}", lstep="patches", lshown=1)
    window.append((int(app.state["llayer"]) + 1, int(app.state["lhead"]) + 1,
                   *(int(v) + 1 for v in app.state["lpatch"].split(","))))
    check(app.state["lpatch"] == "5,6" and app.state["llayer"] == "0",
          f"step 1 at the script's patch 6,7 (0-based 5,6), block 1: {app.state['lpatch']}")
    picture_matches(app, exp / "01_patches.png", "step 1")
    for k in range(2, N + 1):  # Page Down and Right alternately
        app.key("Next" if k % 2 else "Right", lesson=f"{k}/{N}", lstep=STEPS[k - 1], lshown=1)
        window.append((int(app.state["llayer"]) + 1, int(app.state["lhead"]) + 1,
                       *(int(v) + 1 for v in app.state["lpatch"].split(","))))
        if STEPS[k - 1] in ("softmax", "head"):
            picture_matches(app, exp / f"{k:02d}_{STEPS[k - 1]}.png", f"step {k}")
        if STEPS[k - 1] == "layernorm":  # the export without --lesson draws the same step
            save(app.crop(app.shot()), out / "layernorm_step.png")
            picture_matches(app, bare / f"{k:02d}_layernorm.png", f"step {k} (no --lesson)")
    check(app.state["llayer"] == "1", "the script's layer=2 from the layernorm step on")
    js, _ = export_selection(bare)
    steps = [st["name"] for st in json.loads((bare / "steps.json").read_text())["steps"]]
    check(steps == STEPS and js == window,
          f"--lesson-export without --lesson: the window's steps and selections {window}, "
          f"steps.json {steps} {js}")
    app.key("Next", lesson=f"{N}/{N}")  # the last step stays
    app.key("Prior", lesson=f"{N - 1}/{N}", lstep=STEPS[N - 2])
    app.key("Left", lesson=f"{N - 2}/{N}", lstep=STEPS[N - 3])
    soft = STEPS.index("softmax") + 1
    for _ in range(N - 2 - soft):
        app.key("Left")
    app.wait_state(f"step {soft}", lesson=f"{soft}/{N}", lstep="softmax", lshown=1)
    # block, head, patch
    app.key("Up", llayer=0, lshown=1)
    app.key("shift+Down", lhead=1, lshown=1)
    app.key("l", lpatch="5,7", lshown=1)
    app.key("k", lpatch="6,7", lshown=1)
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    check(f"step {soft} of {N}" in status and "block 1, head 2, patch (7, 8)" in status,
          f"the status line says where the lesson is: {status}")
    # paging away and back (to step 1, whose line sets another block, and forward through
    # the steps again): the step shows what the teacher chose there, not its line's (issue
    # 38's trial: paging back reset the block, head and patch)
    app.key("Home", lesson=f"1/{N}", lshown=1)
    for k in range(2, soft + 1):
        app.key("Right", lesson=f"{k}/{N}")
    app.wait_state(f"step {soft} again", lesson=f"{soft}/{N}", llayer=0, lhead=1, lpatch="6,7",
                   lshown=1)
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    check("block 1, head 2, patch (7, 8)" in status,
          f"back on step {soft}: the block, head and patch chosen there: {status}")
    # H: the lesson's keys over its picture (issue 38's trial: help=1, nothing drawn); Esc
    # closes the help first, the lesson stays
    bare = app.crop(app.shot()).astype(np.float32)
    app.key("h", help=1, lesson=f"{soft}/{N}")
    over = app.crop(app.shot()).astype(np.float32)
    d = float(np.abs(over - bare).mean())
    print(f"  H in the lesson: mean |screen with help - without| = {d:.1f} levels")
    check(d > 8.0, f"H in the lesson draws the help over the step ({d:.1f} levels)")
    app.key("Escape", help=0, lesson=f"{soft}/{N}")
    d = float(np.abs(app.crop(app.shot()).astype(np.float32) - bare).mean())
    check(d < 2.0, f"Esc closes the help, the step as before ({d:.1f} levels)")
    # Esc: the explorer as the lesson found it, not at the lesson's block, head and patch
    app.key("Escape", lesson="0/0", kind="attention")
    after = {k: app.state[k] for k in before}
    check(after == before, f"Esc: the explorer where it was before the lesson: {after} ({before})")
    # Page Down again: back where the lesson was left
    app.key("Next", lesson=f"{soft}/{N}", lshown=1)
    app.key("Escape", lesson="0/0")
    # in the explorer too, Esc closes the help before it quits (it quit with the help open)
    app.key("h", help=1)
    app.key("Escape", help=0)
    check(app.proc.poll() is None, "Esc with the help open: the app still runs")
    # a step's picture, resampled to its place, is copied texel for pixel into the canvas (a
    # copy of memory in llvmpipe where sampling it cost 20 ms fullscreen): the pixels linear
    # sampling gives (VITLENS_CHECK_REDRAW draws the whole frame again sampling it and counts
    # the pixels that differ)
    exact = [m for e, m in app.drawn if e > 0]
    checked = [m for m in exact if m >= 0]
    print(f"  lesson frames: {len(app.drawn)}, {len(exact)} with a picture drawn texel for "
          f"pixel, {len(checked)} of those checked, mismatches {sorted(set(checked))}")
    check(len(exact) >= len(app.drawn) // 2 and checked and all(m == 0 for m in checked),
          "most lesson frames draw the picture texel for pixel (exact=1), each checked one "
          "equal to linear sampling's (mismatch=0)")
    quit_app(app)


def test_siglip_lesson(app, out, demo, model):
    """A model pooled by attention (the SigLIP stand-in): the default lesson, fitted, gains the
    probe step after the step before it in the table; paged to, the window shows
    --lesson-export's picture of it at the lesson's head, and another head's after Shift+Down.
    The screenshot is kept as OUT/probe_step.png."""
    exp = {}
    for h in (1, 2):
        exp[h] = out / f"export_siglip_h{h}"
        r = subprocess.run([app.argv0, "--model", model, "--head", str(h), "--lesson-export",
                            str(exp[h]), demo], capture_output=True, text=True)
        check(r.returncode == 0, f"--lesson-export of the SigLIP stand-in: {r.stderr}")
    names = [ln.split('"')[3] for ln in (exp[1] / "steps.json").read_text().splitlines()
             if '"name":' in ln]
    png = f"{names.index('probe') + 1:02d}_probe.png"
    table = lesson_table.steps({"map", "head"})
    at = STEPS.index(table[table.index("probe") - 1]) + 2  # 1-based, after its table neighbour
    app.start(demo)
    app.key("Next", lesson=f"1/{N + 1}", lstep="patches", lshown=1)
    for k in range(2, at + 1):
        app.key("Next", lesson=f"{k}/{N + 1}", lshown=1)
    app.wait_state("the probe step", lstep="probe", lhead=0, lshown=1)
    shot = app.crop(app.shot())
    save(shot, out / "probe_step.png")
    picture_matches(app, exp[1] / png, f"step {at}, the probe")
    app.key("shift+Down", lhead=1, lstep="probe", lshown=1)
    img = app.crop(app.shot()).astype(np.float32)
    h, w = img.shape[:2]
    d = [float(np.abs(img - np.asarray(Image.open(exp[k] / png).convert("RGB").resize(
        (w, h), Image.BILINEAR), np.float32)).mean()) for k in (1, 2)]
    print(f"  Shift+Down: mean |screen - head 1's| = {d[0]:.2f}, head 2's = {d[1]:.2f} levels")
    check(d[1] < d[0], "Shift+Down: the probe step shows head 2 (boxed, its caption)")
    app.key("Next", lesson=f"{at + 1}/{N + 1}", lstep=STEPS[at - 1], lshown=1)
    app.key("Escape", lesson="0/0")
    quit_app(app)


def test_bad_lesson(app, out, demo):
    app.start(demo)
    app.wait_state("the lesson view on its first good step", lesson="1/3", lstep="softmax",
                   lshown=1)
    check(app.stderr_has(lambda ls: any(":2: unknown step 'atention'" in s for s in ls)),
          "the unknown step named with its line")
    check(app.stderr_has(lambda ls: any(":4: layer 9 out of range: the model has 4 layers" in s
                                        for s in ls)),
          "the layer out of range named with its line")
    check(app.state["error"] == "1", "the first problem on the error line")
    app.key("Next", lesson="2/3", lstep="keys")
    app.key("Next", lesson="3/3", lstep="head")
    check(app.state["llayer"] == "2", f"line 5 carries line 3's layer 3: {app.state['llayer']}")
    app.key("Escape", lesson="0/0")
    quit_app(app)


def test_fast_blocks(app, out, demo):
    """Up / Down pressed fast (one xdotool call): the block reruns on the worker, the keys
    meanwhile only move the selection, and the window ends on the last block asked, its
    picture --lesson-export's of that block (not the first block's, nor one in between)."""
    app.start(demo)
    app.wait_state("the lesson's one step", lesson="1/1", lstep="softmax", llayer=0, lshown=1)
    # Down x3, Up, Down x2 on 4 blocks: 0 -> 1 -> 2 -> 3 -> 2 -> 3 -> 0
    subprocess.run(["xdotool", "key", "--clearmodifiers", "--delay", "15", "Down", "Down", "Down",
                    "Up", "Down", "Down"], check=True)
    app.wait_state("the last block asked", llayer=0, lshown=1, busy=0)
    app.key("Down", llayer=1, lshown=1, busy=0)
    app.key("Down", "Down", llayer=3, lshown=1, busy=0)  # two at once: block 4
    print(f"  the GUI thread's time for the last block change: {app.state['ms_lgui']} ms")
    img = app.crop(app.shot()).astype(np.float32)
    h, w = img.shape[:2]
    d = {}
    for layer in (1, 4):
        exp = out / f"fast_block{layer}"
        (out / f"fast_block{layer}.lesson").write_text(f"softmax layer={layer} patch=3,3\n")
        r = subprocess.run([app.argv0, "--lesson", str(out / f"fast_block{layer}.lesson"),
                            "--lesson-export", str(exp), demo], capture_output=True, text=True)
        check(r.returncode == 0, f"--lesson-export of block {layer}: {r.stderr}")
        ref = Image.open(exp / "01_softmax.png").convert("RGB").resize((w, h), Image.BILINEAR)
        d[layer] = float(np.abs(img - np.asarray(ref, np.float32)).mean())
    print(f"  mean |screen - block 4's export| = {d[4]:.1f}, block 1's = {d[1]:.1f} levels")
    check(d[4] < 8.0 and d[4] < d[1] / 2, "fast Up / Down: the window shows block 4's picture")
    quit_app(app)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rc = builtin_and_display(str(ROOT))
    if rc is not None:
        return rc
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    demo = str(sorted((ROOT / "assets/default/demo").glob("*.png"))[0].resolve())
    ok = run_checks(LessonApp([args.app], env(check_redraw=True)),
                    lambda a: test_default_lesson(a, out, demo))
    # the SigLIP stand-in (tests/gui/siglip_model.py): the probe step in the window
    sig = out / "siglip"
    subprocess.run([sys.executable, str(HERE / "siglip_model.py"), str(sig)], check=True,
                   capture_output=True)
    model = str(sig / "siglip.safetensors")
    ok &= run_checks(App([args.app, "--model", model, demo], env()),
                     lambda a: test_siglip_lesson(a, out, demo, model))
    fast = out / "fast.lesson"
    fast.write_text("softmax layer=1 patch=3,3 : where the patch looks\n")
    ok &= run_checks(App([args.app, "--lesson", str(fast), demo], env()),
                     lambda a: test_fast_blocks(a, out, demo))
    bad = out / "bad.lesson"
    bad.write_text("softmax layer=1 patch=3,3 : where the patch looks\n"
                   "atention\n"
                   "keys layer=3\n"
                   "query layer=9\n"
                   "head\n")
    ok &= run_checks(App([args.app, "--lesson", str(bad), demo], env()),
                     lambda a: test_bad_lesson(a, out, demo))
    print("all lesson view checks passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
