#!/usr/bin/python3
"""The README's CLIP screenshots: two phrases typed into the window on one photo, the map of
each side by side (docs/screenshot-clip.png), and the text box open (docs/screenshot-clip-box.png).

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 tools/screenshot_clip.py \\
      --app build/vitlens --model MODEL --image PHOTO --phrases "a red circle" "a blue square" \\
      [--classes "..."] [--out docs]

Drives the window as a user does (/, the phrase typed, Enter), waits for the app's own trace
lines (VITLENS_TRACE) and takes each picture once the phrase's map is on screen.
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "gui"))
from test_gui import App, quit_app, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--phrases", nargs=2, required=True)
    ap.add_argument("--classes", default=None)
    ap.add_argument("--kind", default="chefer", help="the map kind's tag (E steps to it)")
    ap.add_argument("--out", default="docs")
    a = ap.parse_args()
    photo = os.path.abspath(a.image)
    argv = [a.app, "--model", a.model] + (["--classes", a.classes] if a.classes else []) + [photo]
    app = App(argv, dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE"))
    shots = []
    try:
        app.start(photo)
        for i, phrase in enumerate(a.phrases):
            app.key("slash", typing=1)
            run(["xdotool", "key", "--clearmodifiers", "ctrl+u"])
            run(["xdotool", "type", "--clearmodifiers", "--delay", "30", phrase])
            if i == 0:  # the box open, the phrase typed
                app.mouse_off()
                Image.fromarray(app.shot().astype(np.uint8)).save(
                    Path(a.out) / "screenshot-clip-box.png")
            run(["xdotool", "key", "--clearmodifiers", "Return"])
            app.wait_line(lambda s: s.startswith("phrase shown"), f"the map of {phrase!r}",
                          timeout=600)
            while app.state.get("kind") != a.kind:
                kind = app.state.get("kind")
                run(["xdotool", "key", "--clearmodifiers", "e"])
                app.wait_line(lambda s: s.startswith("frame ") and app.state["kind"] != kind, "E")
            app.wait_state("the map", busy=0, typing=0, shown=a.kind)
            app.mouse_off()
            shots.append(Image.fromarray(app.shot().astype(np.uint8)))
        quit_app(app)
    finally:
        if app.proc.poll() is None:
            app.proc.kill()
    # side by side, each half the width, with the phrase above it
    w, h = shots[0].size
    s = 0.5
    out = Image.new("RGB", (int(w * s) * 2 + 12, int(h * s) + 40), (15, 17, 21))
    draw = ImageDraw.Draw(out)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 22)
    except OSError:
        font = ImageFont.load_default()
    for i, (im, phrase) in enumerate(zip(shots, a.phrases)):
        x = i * (int(w * s) + 12)
        out.paste(im.resize((int(w * s), int(h * s)), Image.LANCZOS), (x, 40))
        draw.text((x + 10, 8), f"/ {phrase}", fill=(252, 232, 38), font=font)
    out.save(Path(a.out) / "screenshot-clip.png")
    print("wrote", Path(a.out) / "screenshot-clip.png", Path(a.out) / "screenshot-clip-box.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
