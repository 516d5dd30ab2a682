#!/usr/bin/python3
"""The on-screen controls (issue 24) under Xvfb, on the built-in model: the buttons in the
strip above the status line do what their keys do.

The app prints where it drew each control ("controls NAME=x,y,w,h,enabled,active ...",
VITLENS_TRACE), so that the test clicks them where they are. For layer -/+, head -/+, the
max fusion and map kind -/+, a click is compared with the keys that reach the same view
(Left / Right, Up / Down, E / Shift+E): the whole frame line (every field but timings and
the pointer), the status line and the hash of the map on screen must be equal; so must a
kind picked from the kinds' menu and its key (R). Also: the strip lies below the picture
and above the status line, its boxes disjoint; a dimmed button (the next layer at the last
one) changes nothing; hover and pressed states; the help button; the menu lists every kind
of the table, Esc or a click beside it closes it; Tab hides the strip (the picture takes
its room, a click there does nothing), and that is remembered by the next start; F scales
the buttons with the screen.
Synchronisation: the trace's lines only, never a sleep.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_controls.py \
      --app build/vitlens --out build/tests/gui/controls
Exits 0, 1 on a failed check, 77 without the built-in model.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import (App, Fail, builtin_and_display, check, quit_app, run,  # noqa: E402
                      run_checks)

# frame-line fields that say when and where, not what is shown
VOLATILE = {"redraw", "redraw_px", "mismatch", "exact", "settled", "ms_input", "ms_draw",
            "ms_raster", "ms_swap", "hover", "cell", "chover", "cpressed", "loads", "busy"}


class ControlsApp(App):
    """App that also reads the "controls", "maps" and "status" lines."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.controls = {}  # name -> (x, y, w, h, enabled, active)
        self.maps = ""      # the last "maps" line
        self.status = ""    # the last "status" line

    def take(self, line):
        if line.startswith("controls"):
            self.controls = {name: tuple(int(v) for v in box.split(","))
                             for name, box in (kv.split("=", 1) for kv in line.split()[1:])}
        elif line.startswith("maps "):
            self.maps = line
        elif line.startswith("status "):
            self.status = line
        return super().take(line)

    def box(self, name):
        if name not in self.controls:
            raise Fail(f"no control {name} on screen: {sorted(self.controls)}")
        return self.controls[name]

    def click(self, name, **want):
        x, y, w, h, _, _ = self.box(name)
        run(["xdotool", "mousemove", "--window", self.wid, str(x + w // 2), str(y + h // 2),
             "click", "1"])
        self.wait_state(f"click on {name}", **want)

    def snapshot(self, what):
        """What the frame just matched shows: its fields (but VOLATILE), its status line
        (printed after the frame line: read up to it) and the map on screen (its "maps"
        line's kind, layer, head and hash, computed before the frame)."""
        self.wait_state(f"{what}: done", busy=0)
        frame = self.frame
        self.wait_line(lambda s: s.startswith("status ") and self.frame == frame,
                       f"{what}: its status line")
        m = dict(kv.split("=", 1) for kv in self.maps.split()[1:] if "=" in kv)
        check(m.get("layer") == self.state["layer"] and m.get("head") == self.state["head"] and
              m.get("kind") == self.state["kind"],
              f"{what}: the map on screen is the view's ({self.maps[:80]})")
        state = {k: v for k, v in self.state.items() if k not in VOLATILE}
        return state, self.status, m.get("map")


def same(a, b, what):
    diff = {k: (a[0].get(k), b[0].get(k)) for k in set(a[0]) | set(b[0])
            if a[0].get(k) != b[0].get(k)}
    check(not diff and a[1] == b[1] and a[2] == b[2],
          f"{what}: the click and the keys show the same view, status line and map "
          f"(map {a[2]}; differ: {diff or ''}{'' if a[1] == b[1] else (a[1], b[1])})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    rc = builtin_and_display(root)
    if rc is not None:
        return rc
    demo = os.path.realpath(os.path.join(root, "assets", "default", "demo"))
    photo = os.path.join(demo, sorted(f for f in os.listdir(demo) if f.endswith(".png"))[0])
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    xdg = os.path.join(out, "xdg")
    if os.path.exists(os.path.join(xdg, "config", "vitlens", "settings")):
        os.remove(os.path.join(xdg, "config", "vitlens", "settings"))
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)

    def clicks(app):
        app.start(photo)
        if not app.controls:
            app.wait_line(lambda s: s.startswith("controls "), "the controls' line")
        L = int(app.state["layer"]) + 1  # the window opens on the last layer, the mean
        H = int(app.state["head"])
        W, Hpx = (int(v) for v in app.state["window"].split(","))
        ix, iy, iw = app.image_rect()
        ih = int(app.state["image_h"])
        names = list(app.controls)
        check(names == ["layer-prev", "layer", "layer-next", "head-prev", "head", "head-next",
                        "fusion-mean", "fusion-max", "fusion-min", "kind-prev", "kind",
                        "kind-next", "compare", "palette", "help"],
              f"the controls, in order (no lesson's buttons without a lesson): {names}")
        boxes = sorted(app.controls.values())
        check(all(x >= 0 and x + w <= W and y >= iy + ih and y + h <= Hpx - 22
                  for x, y, w, h, _, _ in boxes),
              f"every control below the picture (its bottom at {iy + ih}) and above the status "
              f"line, inside the {W}x{Hpx} window")
        check(all(b[0] + b[2] <= c[0] for b, c in zip(boxes, boxes[1:])),
              "the controls do not overlap")
        check(min(h for _, _, _, h, _, _ in boxes) >= 22,
              f"large targets: {min(h for *_, h, _, _ in boxes)} px high at least")
        check(app.box("layer-next")[4] == 0 and app.box("layer-prev")[4] == 1 and
              app.box("fusion-mean")[5] == 1 and app.box("fusion-max")[5] == 0,
              "at the last layer its next button is dimmed; the mean fusion is marked")

        # each click against the keys that reach the same view from the other side
        app.click("layer-prev", layer=L - 2)
        c = app.snapshot("layer-prev")
        app.key("Right", layer=L - 1)
        app.key("Left", layer=L - 2)
        same(c, app.snapshot("Left"), "layer-prev vs Left")
        app.click("layer-next", layer=L - 1)
        c = app.snapshot("layer-next")
        app.key("Left", layer=L - 2)
        app.key("Right", layer=L - 1)
        same(c, app.snapshot("Right"), "layer-next vs Right")
        app.click("head-prev", head=H - 1)
        c = app.snapshot("head-prev")
        app.key("Down", head=H)
        app.key("Up", head=H - 1)
        same(c, app.snapshot("Up"), "head-prev vs Up")
        app.click("head-next", head=H)
        c = app.snapshot("head-next")
        app.key("Up", head=H - 1)
        app.key("Down", head=H)
        same(c, app.snapshot("Down"), "head-next vs Down")
        app.click("fusion-max", head=H + 1)
        c = app.snapshot("fusion-max")
        check(app.box("fusion-max")[5] == 1 and app.box("fusion-mean")[5] == 0,
              "the max button marked, the mean's not")
        app.key("Up", head=H)
        app.key("Down", head=H + 1)
        same(c, app.snapshot("Down"), "fusion-max vs Down from the mean")
        app.click("kind-next", kind="rollout")
        c = app.snapshot("kind-next")
        app.key("shift+e", kind="attention")
        app.key("e", kind="rollout")
        same(c, app.snapshot("E"), "kind-next vs E")
        app.click("kind-prev", kind="attention")
        c = app.snapshot("kind-prev")
        app.key("e", kind="rollout")
        app.key("shift+e", kind="attention")
        same(c, app.snapshot("Shift+E"), "kind-prev vs Shift+E")

        # the compare button does what \\ does: with no second model or photo yet, it says how
        # to give one and the view stays
        app.click("compare")
        app.wait_line(lambda s: s.startswith("status ") and "no second model or photo yet" in s,
                      "the compare button: how to give a second model or photo")
        check(app.box("compare")[5] == 0 and app.state["kind"] == "attention",
              "the compare button: not marked, the single view unchanged")

        # the kind's name opens the menu of every kind (--list-kinds' rows, in order); a row
        # picks that kind as its own key does; Esc, or a click elsewhere, closes it
        app.click("kind", kmenu=1)
        rows = [n[5:] for n in app.controls if n.startswith("menu-")]
        tags = [ln.split("\t")[0] for ln in subprocess.run(
            [a.app, "--list-kinds"], check=True, capture_output=True, text=True).stdout.splitlines()]
        check(rows == tags and app.box("menu-attention")[5] == 1,
              f"the kinds' menu lists the table's kinds, attention marked: {rows}")
        app.click("menu-rollout", kind="rollout", kmenu=0)
        c = app.snapshot("the menu's rollout")
        app.key("r", kind="attention")
        app.key("r", kind="rollout")
        same(c, app.snapshot("R"), "the menu's rollout vs R")
        app.key("r", kind="attention")
        app.click("kind", kmenu=1)
        # the pointer still on the kind button: its tooltip is not drawn over the open menu
        # (issue 38's trial: it hid the last kind, entropy)
        check(app.state.get("tip") == "none",
              f"the open menu: no control's tooltip over it (tip={app.state.get('tip')})")
        app.key("Escape", kmenu=0)
        check(app.proc.poll() is None, "Esc closes the menu, not the app")
        app.click("kind", kmenu=1)
        app.click("layer-prev", kmenu=0)
        check(app.state["layer"] == str(L - 1) and app.state["kind"] == "attention",
              "a click beside the open menu closes it and does nothing else")

        # a dimmed button does nothing: G after it shows the click was handled first
        app.click("layer-next", layer=L - 1)  # (changes nothing: no frame to wait for)
        app.key("g", grid=1)
        check(app.state["layer"] == str(L - 1), "the dimmed next-layer button: no layer past the last")
        app.key("g", grid=0)

        # hover, pressed, the help
        x, y, w, h, _, _ = app.box("head-next")
        run(["xdotool", "mousemove", "--window", app.wid, str(x + w // 2), str(y + h // 2)])
        app.wait_state("the pointer on head-next", chover="head-next")
        check(True, "hovering a button marks it (and shows its tooltip)")
        x, y, w, h, _, _ = app.box("kind-next")
        run(["xdotool", "mousemove", "--window", app.wid, str(x + w // 2), str(y + h // 2),
             "mousedown", "1"])
        app.wait_state("kind-next held down", cpressed="kind-next", kind="rollout")
        run(["xdotool", "mouseup", "1"])
        app.wait_state("kind-next let go", cpressed="-")
        check(True, "a button acts when pressed, drawn pressed until let go")
        app.click("kind-prev", kind="attention")
        app.click("help", help=1)
        pages = int(app.state["hpage"].split("/")[1])
        for k in range(2, pages + 1):  # the ? button turns the pages as H does, then closes
            app.click("help", help=1, hpage=f"{k}/{pages}")
        app.click("help", help=0)

        # F: the buttons grow with the screen
        h_win = app.box("layer-prev")[3]
        app.key("f", fullscreen=1)
        app.wait_state("fullscreen", window="1280,1024", busy=0)
        boxes = sorted(app.controls.values())
        ix, iy, iw = app.image_rect()
        ih = int(app.state["image_h"])
        check(app.box("layer-prev")[3] > h_win and
              all(y >= iy + ih and x + w <= 1280 and y + h <= 1024 - 22
                  for x, y, w, h, _, _ in boxes),
              f"F: the controls {app.box('layer-prev')[3]} px high (window {h_win}), below "
              f"the picture, on the screen")
        app.key("f", fullscreen=0)

        # Tab: no strip; the picture takes its room; a click where a button was does nothing
        app.wait_state("back from fullscreen", fullscreen=0, busy=0)
        ih0 = int(app.state["image_h"])
        x, y, w, h, _, _ = app.box("layer-prev")
        app.key("Tab", controls=0)
        check(int(app.state["image_h"]) >= ih0 and not app.controls,
              f"Tab: no controls; the picture {app.state['image_h']} px high (was {ih0})")
        run(["xdotool", "mousemove", "--window", app.wid, str(x + w // 2), str(y + h // 2),
             "click", "1"])
        app.key("g", grid=1)
        check(app.state["layer"] == str(L - 1), "a click where the hidden button was: nothing")
        quit_app(app)
        with open(os.path.join(xdg, "config", "vitlens", "settings")) as f:
            saved = f.read()
        check("controls=0" in saved, "quit remembers the controls off")

    def remembered(app):
        app.start(photo)
        check(app.state["controls"] == "0", "the next start: no controls")
        app.key("Tab", controls=15)  # the "controls" line comes before its frame's line
        check("layer-prev" in app.controls, "Tab brings them back")
        quit_app(app)

    ok = run_checks(ControlsApp([a.app, photo], env, xdg=xdg), clicks)
    ok = ok and run_checks(ControlsApp([a.app, photo], env, xdg=xdg), remembered)
    print("controls: all checks passed" if ok else "controls: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
