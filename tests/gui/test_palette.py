#!/usr/bin/python3
"""The command palette (issue 38) under Xvfb, on the built-in model: Ctrl+P and the ☰ button
open it over the window; its rows are the key table's commands (`vitlens --list-commands`,
the explorer's, or the lesson's in the lesson), each with the key that runs it; typing
narrows them; Enter runs the selection as its key would; a greyed one runs nothing.

The app prints the palette's rows when they change ("palette open=1 view=explorer n=N sel=S
first=F fit=K rows=TAG:enabled[:x;y;w;h],... filter=TEXT", VITLENS_TRACE; the boxes of the rows
on screen, framebuffer px, so that the test clicks them) and its state on every frame line
(palette=, psel=, prows=). Checked:
  - the rows of an empty filter are --list-commands' explorer rows, in order; every command's
    key is one of --help's keys, every map kind of --list-kinds is a row; greyed exactly
    those the built-in model lacks (a CLIP text tower, an attention-pooling head);
  - Esc closes it without running anything (the view unchanged, the app running); the ☰
    button opens and closes it, Ctrl+P too;
  - "rollout" typed narrows the rows (the kinds' rows holding the word first), Backspace
    widens them, a filter nothing matches leaves none;
  - Enter on "map: rollout" shows what R shows: the frame line (every field but timings and
    the pointer), the status line and the hash of the map; the control: Down then Enter runs
    the row below it (gradient rollout), which must not compare equal to R's;
  - a greyed row (map: probe, CLIP's phrase) runs nothing and says why on the status line,
    the palette staying open;
  - a click on a row runs it (previous layer, as Left), Up / Down / Page Down move the
    selection, the wheel scrolls the rows (the selection kept on one shown);
  - in the lesson its rows are the lesson's (--list-commands' lesson rows), and Enter on
    "lesson: next step" steps it;
  - at 1280x720 and 800x600 the rows are at least 22 px high, inside the window, above the
    buttons; screenshots of both are written to --out.
Synchronisation: the trace's lines only, never a sleep.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_palette.py \
      --app build/vitlens --out build/tests/gui/palette
Exits 0, 1 on a failed check, 77 without the built-in model.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from test_controls import ControlsApp, same  # noqa: E402
from test_gui import (Fail, builtin_and_display, check, quit_app, run, run_checks,  # noqa: E402
                      save)


class PaletteApp(ControlsApp):
    """ControlsApp that also reads the "palette" line."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.palette = {"open": "0"}

    def take(self, line):
        if line.startswith("palette "):
            head, _, filt = line.partition(" filter=")
            p = dict(kv.split("=", 1) for kv in head.split()[1:])
            p["filter"] = filt
            rows = []
            for item in p.get("rows", "").split(",") if p.get("rows") else []:
                f = item.split(":")
                box = tuple(int(v) for v in f[2].split(";")) if len(f) > 2 else None
                rows.append((f[0], int(f[1]), box))
            p["rows"] = rows
            self.palette = p
        return super().take(line)

    def backspace(self, filt):
        """Backspace; wait for the rows of the filter left, filt."""
        run(["xdotool", "key", "--clearmodifiers", "BackSpace"])
        self.wait_line(lambda s: s.startswith("palette ") and self.palette.get("filter") == filt,
                       f"the filter {filt!r} after Backspace")
        self.wait_state(f"{filt!r}", palette=1)

    def until(self, pred, what):
        """Wait for a frame line whose state satisfies pred (at once if the last one does)."""
        if not (self.state and pred()):
            self.wait_line(lambda s: s.startswith("frame ") and pred(), what)

    def tags(self):
        return [t for t, _, _ in self.palette["rows"]]

    def row(self, tag):
        for t, enabled, box in self.palette["rows"]:
            if t == tag:
                return enabled, box
        raise Fail(f"no row {tag} in the palette: {self.tags()[:12]}...")

    def selected(self):
        return self.tags()[int(self.palette["sel"])]

    def type(self, text, **want):
        """Type text into the open palette; wait for the rows of the filter ending in it (a
        frame after the last character's: psel= may match after the first ones)."""
        run(["xdotool", "type", "--delay", "30", text])
        self.wait_line(lambda s: s.startswith("palette ") and
                       self.palette.get("filter", "").endswith(text), f"the filter {text!r}")
        self.wait_state(f"typed {text!r}", palette=1, **want)


def commands(app_path, view):
    """--list-commands' rows of a view: [(tag, key, name, needs)]."""
    out = subprocess.run([app_path, "--list-commands"], check=True, capture_output=True,
                         text=True).stdout
    rows = [ln.split("\t") for ln in out.splitlines()]
    check(all(len(r) == 5 for r in rows), "--list-commands: 5 tab-separated fields a line")
    return [tuple(r[1:]) for r in rows if r[0] == view]


def help_keys(app_path):
    """Every key --help's key list names: its key column split at " / ", ", " and spaces
    ("N / Shift+N, P" gives N, Shift+N and P; "Page Down / Page Up" Page Down too; "1 - 5"
    1 to 5), and a Shift+key its line names ("X  ... (Shift+X: over every photo)", "(on a
    video: Shift+, / Shift+.)")."""
    out = subprocess.run([app_path, "--help"], check=True, capture_output=True, text=True).stdout
    keys, on = set(), False
    for line in out.splitlines():
        if line == "keys:":
            on = True
        elif on and not line.strip():
            break
        elif on:
            col = re.split(r"\s{2,}", line.strip())[0]
            parts = [q for p in col.split(" / ") for q in (p.split(", ") if len(p) > 1 else [p])]
            keys.update(parts)
            keys.update(w for p in parts for w in p.split())
            m = re.fullmatch(r"(\d) - (\d)(,.*)?", col)
            if m:
                keys.update(str(d) for d in range(int(m.group(1)), int(m.group(2)) + 1))
            keys.update(re.findall(r"Shift\+(?:\w+|[^\w\s])", line))  # Shift+X, Shift+Left, Shift+,
    return keys


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
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)
    explorer = commands(a.app, "explorer")
    lesson = commands(a.app, "lesson")
    tags = [c[0] for c in explorer]

    def checks(app):
        app.start(photo)
        L = int(app.state["layer"]) + 1

        # the table: the rows, their keys, the kinds, greyed
        keys = help_keys(a.app)
        check(len(set(tags)) == len(tags) and len(tags) >= 40,
              f"--list-commands: {len(tags)} explorer commands, their tags unique")
        nokey = [c for c in explorer if c[1] != "-" and c[1] not in keys]
        check(not nokey, f"every command's key is one of --help's keys (not: {nokey})")
        kinds = subprocess.run([a.app, "--list-kinds"], check=True, capture_output=True,
                               text=True).stdout.splitlines()
        names = {c[2] for c in explorer}
        missing = [k.split("\t")[3] for k in kinds if "map: " + k.split("\t")[3] not in names]
        check(not missing, f"every map kind of --list-kinds is a command (not: {missing})")

        app.key("ctrl+p", palette=1, prows=len(tags))
        check(app.tags() == tags and app.palette["view"] == "explorer" and
              app.palette["filter"] == "" and app.selected() == tags[0],
              f"Ctrl+P: the rows are --list-commands' explorer rows, in order ({len(tags)}), "
              f"the first selected")
        greyed = {t for t, enabled, _ in app.palette["rows"] if not enabled}
        want = {c[0] for c in explorer if c[3] in ("clip", "map-head")}
        check(greyed == want, f"greyed: what the built-in model lacks {sorted(want)} "
                              f"(greyed: {sorted(greyed)})")
        before = dict(app.state)
        app.key("Escape", palette=0)
        check(app.proc.poll() is None and app.state["kind"] == before["kind"] and
              app.state["layer"] == before["layer"], "Esc closes it, runs nothing, not the app")

        # the button opens and closes it
        app.click("palette", palette=1, prows=len(tags))
        check(app.box("palette")[5] == 1, "the ☰ button opens it, and is marked while it is open")
        app.click("palette", palette=0)
        app.key("ctrl+p", palette=1)
        app.key("ctrl+p", palette=0)
        check(True, "the button and Ctrl+P again close it")

        # a filter narrows the rows; Backspace widens them
        app.key("ctrl+p", palette=1, prows=len(tags))
        app.type("rollout", psel="map-rollout")
        rows = app.tags()
        with_word = [t for t in tags if "rollout" in t]
        check(0 < len(rows) < len(tags) and rows[0] == "map-rollout" and
              "map-gradient-rollout" in rows and app.palette["filter"] == "rollout" and
              rows == with_word + [t for t in tags if t in rows and t not in with_word],
              f"'rollout': {len(rows)} rows, those naming it first, each in the table's order: "
              f"{rows}")
        app.backspace("rollou")
        check(app.palette["filter"] == "rollou" and len(app.tags()) >= len(rows),
              f"Backspace: {len(app.tags())} rows for 'rollou'")
        app.type("tzzq", prows=0)
        check(app.tags() == [], "a filter nothing matches: no row")
        for left in ("rolloutzz", "rolloutz", "rollout", "rollou"):
            app.backspace(left)
        app.type("t", psel="map-rollout")

        # Enter runs it as R; the control: the row below is another view
        app.key("Return", palette=0, kind="rollout")
        c = app.snapshot("the palette's map: rollout")
        app.key("r", kind="attention")
        app.key("r", kind="rollout")
        r = app.snapshot("R")
        same(c, r, "the palette's map: rollout vs R")
        app.key("r", kind="attention")
        app.key("ctrl+p", palette=1)
        app.type("rollout", psel="map-rollout")
        below = app.tags()[1]
        app.key("Down", psel=below)
        app.key("Return", palette=0)
        app.wait_state("the row below ran", busy=0)
        check(app.state["kind"] != "rollout", f"Down, Enter: {below} ran, kind={app.state['kind']}")
        try:
            same(app.snapshot("the row below"), r, "the control")
        except Fail:
            check(True, "the control: the row below the selection does not compare equal to R")
        else:
            raise Fail("the control: the row below the selection compared equal to R")
        app.key("r", kind="rollout")
        app.key("r", kind="attention")

        # a greyed row: nothing runs, the status line says why, the palette stays
        for word, tag in (("probe", "map-probe"), ("phrase", "clip-find-a-phrase")):
            app.key("ctrl+p", palette=1)
            app.type(word, psel=tag)
            frame = app.frame
            app.key("Return")
            app.wait_line(lambda s: s.startswith("status ") and app.frame > frame and
                          tag.split("-")[-1] in app.status.lower(), f"{tag}: why, on the status line")
            check(app.state["palette"] == "1" and app.state["kind"] == "attention" and
                  app.state["typing"] == "0",
                  f"greyed {tag}: nothing ran, the palette open; {app.status[-90:]}")
            app.key("Escape", palette=0)

        # a click on a row runs it; the selection's keys; the wheel
        app.key("ctrl+p", palette=1)
        _, (x, y, w, h) = app.row("previous-layer")
        run(["xdotool", "mousemove", "--window", app.wid, str(x + w // 2), str(y + h // 2),
             "click", "1"])
        app.wait_state("a click on previous layer", palette=0, layer=L - 2)
        check(True, "a click on a row runs it (previous layer: as Left)")
        app.key("Right", layer=L - 1)
        app.mouse_off()
        app.key("ctrl+p", palette=1, psel=tags[0])
        fit = int(app.palette["fit"])
        check(fit < len(tags), f"{fit} rows fit of {len(tags)}: it scrolls")
        app.key("Down", psel=tags[1])
        app.key("Up", psel=tags[0])
        app.key("Next", psel=tags[fit])
        check(int(app.palette["first"]) == 1, f"Page Down: the selection {fit} rows on, "
                                              f"scrolled into view (first={app.palette['first']})")
        _, box = app.row(tags[fit])
        run(["xdotool", "mousemove", "--window", app.wid, str(box[0] + 5), str(box[1] + 5),
             "click", "5", "click", "5"])
        app.wait_line(lambda s: s.startswith("palette ") and int(app.palette.get("first", 0)) > 1,
                      "the wheel scrolls")
        app.wait_state("the wheel", palette=1)
        first, sel = int(app.palette["first"]), int(app.palette["sel"])
        check(first <= sel < first + fit, f"the wheel: rows from {first}, selection {sel} shown")
        app.key("Escape", palette=0)

        # the lesson's commands in the lesson
        app.key("Next")
        app.until(lambda: app.state["lesson"].startswith("1/"), "the lesson")
        app.key("ctrl+p", palette=1, prows=len(lesson))
        check(app.tags() == [c[0] for c in lesson] and app.palette["view"] == "lesson",
              f"in the lesson: its rows, --list-commands' lesson rows ({len(lesson)})")
        app.type("next step", psel="lesson-next-step")
        app.key("Return", palette=0)
        app.until(lambda: app.state["lesson"].startswith("2/"), "lesson: next step ran")
        check(True, "Enter on lesson: next step: step 2")
        app.key("Escape", lesson="0/0")

        # legible at a projector's 1280x720 and at 800x600: rows >= 22 px, inside, above the
        # buttons; a screenshot of each
        for W, H, filt in ((1280, 720, ""), (800, 600, "map")):
            run(["xdotool", "windowsize", "--sync", app.wid, str(W), str(H)])
            app.wait_state(f"{W}x{H}", window=f"{W},{H}", busy=0)
            app.mouse_off()
            app.key("ctrl+p", palette=1)
            if filt:
                app.type(filt, psel="next-map-kind")
            shown = [b for _, _, b in app.palette["rows"] if b]
            strip = min(v[1] for v in app.controls.values())
            check(shown and min(b[3] for b in shown) >= 22 and
                  all(b[0] >= 0 and b[0] + b[2] <= W and b[1] + b[3] <= strip for b in shown),
                  f"{W}x{H}: {len(shown)} rows shown, {min(b[3] for b in shown)} px high, inside "
                  f"the window and above the buttons (at {strip})")
            path = os.path.join(out, f"palette_{W}x{H}.png")
            save(app.shot(), path)
            print(f"     screenshot: {path}", flush=True)
            app.key("Escape", palette=0)
        quit_app(app)

    ok = run_checks(PaletteApp([a.app, photo], env), checks)
    print("palette: all checks passed" if ok else "palette: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
