#!/usr/bin/python3
"""Type what to find (issue 27) in the window under Xvfb, on a tiny random CLIP checkpoint the
test writes (clip_models.py, Hugging Face names, the real vocabulary beside it):

  - / opens the text box on the status line (typing=1), xdotool types a phrase, Enter applies:
    the trace's "phrase class=2" (after --classes "cat, dog"), then the map on screen is the
    phrase's Chefer et al. map, bit for bit the .npy that `vitlens --classes "cat, dog" --text
    PHRASE --export` writes (the trace's FNV hash of the map's floats), the status line says
    "for: PHRASE" and the top-5 panel holds the three zero-shot labels;
  - a second phrase (Ctrl+U clears the box): the head keeps its size, so no forward pass runs
    (loads= unchanged) and its map is again the export's, with E's next kind (gradient
    rollout) too; the window's top-1 probability is --top's;
  - Esc cancels (the phrase stays, the app runs), Enter on an empty box says so;
  - without --classes the first phrase makes the head (0 -> 1 class): the photo runs again and
    the map is `--text PHRASE --export`'s;
  - on a model that cannot embed a phrase (the built-in model, not CLIP; a CLIP checkpoint
    with its image tower only) / says why on the status line, and the window goes on.
Waits on the app's VITLENS_TRACE lines, never a fixed sleep. Saves screenshots in --out.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_clip.py --app build/vitlens \\
      --vocab ../shared/clip/bpe_simple_vocab_16e6.txt.gz --builtin assets/default/model.safetensors \\
      --image assets/default/demo/X.png --out DIR
Exits 0, 1 on a failed check, 77 (skip) without the shared vocabulary.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import clip_models as cm  # noqa: E402
from test_gui import App, check, quit_app, run, run_checks, trace_hash as fnv  # noqa: E402

P1, P2 = "a red umbrella", "a green bicycle"



def export(app, model, out, *args):
    r = subprocess.run([app, "--model", str(model), *args, "--export", str(out)],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--export {' '.join(args[:-1])}: exit {r.returncode} {r.stderr!r}")


def top1(app, model, *args):
    r = subprocess.run([app, "--model", str(model), *args, "--top", "1"], capture_output=True,
                       text=True, check=True)
    p = r.stdout.split()
    return int(p[2]), float(p[1])


class ClipApp(App):
    """The app, with the trace's "maps" and "phrase" lines kept."""

    def take(self, line):
        if line.startswith("controls"):  # the on-screen buttons: NAME=x,y,w,h,enabled,active
            self.controls = {k: [int(v) for v in b.split(",")] for k, b in
                             (kv.split("=", 1) for kv in line.split()[1:])}
        if line.startswith("maps "):
            self.maps = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        elif line.startswith("phrase shown"):
            self.shown_ms = float(line.split("ms=")[1])
        return super().take(line)


def type_phrase(app, phrase, clear=False):
    """/, the phrase typed (the box cleared first with Ctrl+U), Enter; waits for the phrase's
    head ("phrase class=...") and returns that line."""
    app.key("slash", typing=1)
    if clear:
        run(["xdotool", "key", "--clearmodifiers", "ctrl+u"])
    run(["xdotool", "type", "--clearmodifiers", "--delay", "20", phrase])
    run(["xdotool", "key", "--clearmodifiers", "Return"])
    return app.wait_line(lambda s: s.startswith("phrase class="), f"the phrase {phrase!r} applied")


def wait_map(app, kind, target, what):
    """The frame that shows kind's map for class target, the worker idle; the maps line of it."""
    app.wait_state(what, kind=kind, shown=kind, busy=0, typing=0, **{"class": target})
    return app.maps


def window(app_path, model, photo, out, exports, top_p2):
    env = dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE")
    app = ClipApp([app_path, "--model", str(model), "--classes", "cat, dog", "--opacity", "1",
                   photo], env)

    def body(app):
        app.maps = {}
        app.start(photo)
        check(app.state["kind"] == "attention" and app.state["preds"] == "2",
              "opens on attention, the top-5 panel with the two zero-shot classes")
        b = getattr(app, "controls", {}).get("find")
        check(b is not None and b[4] == 1, f"the on-screen find button shows, enabled ({b})")
        run(["xdotool", "mousemove", "--window", app.wid, str(b[0] + b[2] // 2),
             str(b[1] + b[3] // 2), "click", "1"])
        app.wait_state("a click on find", typing=1)
        app.key("Escape", typing=0)
        check(app.proc.poll() is None, "find opens the text box as / does; Esc closes it")
        line = type_phrase(app, P1)
        check("class=2 " in line and f"text={P1}" in line,
              f"/ {P1!r} Enter: the phrase is the head's third class ({line!r})")
        m = wait_map(app, "chefer", 2, "the phrase's Chefer et al. map")
        want = fnv(exports[P1] / "a-red-umbrella_chefer.npy")
        check(m.get("map") == want and m.get("target") == "2",
              f"its map is --text's export bit for bit (hash {m.get('map')} = {want})")
        st = app.wait_line(lambda s: s.startswith("status ") and f"for: {P1}" in s,
                           "the status line names the phrase")
        check(True, f"status: {st[7:]!r}")
        check(app.state["preds"] == "3", "the top-5 panel: the two classes and the phrase")
        Image.fromarray(app.shot().astype(np.uint8)).save(out / "clip_phrase1.png")
        loads = app.state["loads"]

        # the box reopens with the phrase selected: typing replaces it (issue 38's trial: it
        # appended, "a blue squarea dog")
        line = type_phrase(app, P2)
        check(f"text={P2}" in line and P1 not in line,
              f"/ {P2!r} Enter: the new phrase replaces the selected one ({line!r})")
        m = wait_map(app, "chefer", 2, "the second phrase's map")
        want = fnv(exports[P2] / "a-green-bicycle_chefer.npy")
        check(m.get("map") == want, f"{P2!r}: its map is --text's export ({want})")
        check(app.state["loads"] == loads,
              f"the head kept its size: no forward pass ran again (loads={loads})")
        cls, prob = top_p2
        t = app.state["top1"].split(":")
        check(int(t[0]) == cls and abs(float(t[1]) - prob) < 2e-4,
              f"the window's top-1 {t} is --top's ({cls}, {prob}): the logits follow the head")
        print(f"     Enter -> the phrase's map on screen: {app.shown_ms:.0f} ms "
              f"(tiny model; the embedding, the backward pass, a frame)")
        app.key("e", kind="grad-rollout")
        m = wait_map(app, "grad-rollout", 2, "E: gradient rollout of the phrase")
        want = fnv(exports[P2] / "a-green-bicycle_grad-rollout.npy")
        check(m.get("map") == want, f"E: gradient rollout of the phrase = the export's ({want})")
        Image.fromarray(app.shot().astype(np.uint8)).save(out / "clip_phrase2.png")

        app.key("slash", typing=1)
        run(["xdotool", "type", "--clearmodifiers", "xyz"])
        app.key("Escape", typing=0)
        check(app.state["class"] == "2" and app.proc.poll() is None,
              "Esc cancels the box: the phrase stays, the window runs")
        app.key("slash", typing=1)
        run(["xdotool", "key", "--clearmodifiers", "ctrl+u"])
        run(["xdotool", "key", "--clearmodifiers", "Return"])
        app.wait_line(lambda s: s.startswith("status ") and "an empty phrase" in s,
                      "Enter on an empty box: the status line says so")
        check(app.state["class"] == "2", "an empty phrase changes nothing")
        quit_app(app)

    return run_checks(app, body)


def first_phrase(app_path, model, photo, export_dir):
    """No --classes: the first phrase makes the head (0 -> 1 class), the photo runs again."""
    env = dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE")
    app = ClipApp([app_path, "--model", str(model), photo], env)

    def body(app):
        app.maps = {}
        app.start(photo)
        check(app.state["preds"] == "0", "no --classes: no head, no top-5 panel")
        loads = int(app.state["loads"])
        type_phrase(app, P1)
        m = wait_map(app, "chefer", 0, "the first phrase's map")
        want = fnv(export_dir / "a-red-umbrella_chefer.npy")
        check(m.get("map") == want and int(app.state["loads"]) == loads + 1,
              f"the head made for it (the photo ran again) and its map is --text's export ({want})")
        quit_app(app)

    return run_checks(app, body)


def opens_on_text(app_path, model, photo, export_dir):
    """--text in the window: it opens on the phrase's map."""
    env = dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE")
    app = ClipApp([app_path, "--model", str(model), "--classes", "cat, dog", "--text", P1, photo],
                  env)

    def body(app):
        app.maps = {}
        app.start(photo)
        m = wait_map(app, "chefer", 2, "--text: the phrase's map at start")
        want = fnv(export_dir / "a-red-umbrella_chefer.npy")
        check(m.get("map") == want, f"--text opens the window on the phrase's map ({want})")
        quit_app(app)

    return run_checks(app, body)


def cannot(app_path, model, photo, words, what):
    env = dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE")
    app = ClipApp([app_path, "--model", str(model), photo], env)

    def body(app):
        app.start(photo)
        run(["xdotool", "key", "--clearmodifiers", "slash"])
        line = app.wait_line(lambda s: s.startswith("status ") and all(w in s for w in words),
                             f"{what}: / says why")
        check(app.state["typing"] == "0", f"{what}: no text box; {line[7:]!r}")
        app.key("e", kind="rollout")  # the image views go on
        quit_app(app)

    return run_checks(app, body)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--app", "--vocab", "--builtin", "--image", "--out"):
        ap.add_argument(a, required=True)
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        print(f"SKIP: no CLIP vocabulary at {a.vocab}")
        return 77
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    model = cm.write(out / "hf", "hf", vocab=a.vocab)
    image_only = cm.write(out / "image-only", "hf", vocab=a.vocab, part="image")
    photo = os.path.abspath(a.image)
    exports = {}
    for p in (P1, P2):
        exports[p] = out / f"export-{p.replace(' ', '_')}"
        export(a.app, model, exports[p], "--classes", "cat, dog", "--text", p, photo)
    solo = out / "export-solo"
    export(a.app, model, solo, "--text", P1, photo)
    top_p2 = top1(a.app, model, "--classes", "cat, dog", "--text", P2, photo)
    ok = window(a.app, model, photo, out, exports, top_p2)
    ok = first_phrase(a.app, model, photo, solo) and ok
    ok = opens_on_text(a.app, model, photo, exports[P1]) and ok
    ok = cannot(a.app, a.builtin, photo, ["not a CLIP model"], "the built-in model") and ok
    ok = cannot(a.app, image_only, photo, ["model.safetensors", "no text tower"],
                "the image tower alone") and ok
    print(f"gui_clip: {'all checks passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
