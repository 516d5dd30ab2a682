#!/usr/bin/python3
"""CLIP in the app (issue 27), timed on random weights of the exact ViT-B/16 (or B/32) shapes
in Hugging Face's names (tests/gui/clip_models.py), the real vocabulary beside them:

typed phrase -> new map (the window, under Xvfb): / and a phrase typed with xdotool, then
  Enter; the time is the app's own, from Enter's key event to the frame that shows the
  phrase's Chefer et al. map (the trace's "phrase shown ms="): the text tower on the worker,
  the head made, the backward pass of the phrase's logit (exact and AttnLRP's) and the six
  maps, the upload and the frame. The first phrase after --classes makes the head one class
  larger, so the photo's forward pass runs again too; the next ones keep its size and skip
  it. Issue 27's target for B/16 on this 2-core machine: <= 0.5 s.
zero-shot classes (headless): `vitlens --classes imagenet --top 1` with VITLENS_TRACE=1 prints
  the time the 1000 classes x 7 templates took through the text tower, then the same read
  from the cache.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 bench/app_clip.py \\
      --app build/vitlens --vocab ../shared/clip/bpe_simple_vocab_16e6.txt.gz --image PHOTO \\
      [--shape b16|b32] [--phrases 6] [--work DIR]
A benchmark, not a test: it asserts nothing but that the app answers.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "gui"))
import clip_models as cm  # noqa: E402
from test_gui import App, run  # noqa: E402

SHAPES = {  # the published towers: image D, heads, layers; text W = 512, 8 heads, 12 layers
    "b16": dict(S=224, P=16, D=768, LV=12, HV=12, W=512, LT=12, HT=8, E=512),
    "b32": dict(S=224, P=32, D=768, LV=12, HV=12, W=512, LT=12, HT=8, E=512),
}
PHRASES = ["a red umbrella", "a dog on a sofa", "the sky", "a cup of espresso", "two cats",
           "a bicycle leaning on a wall", "green leaves", "a person"]


class TimedApp(App):
    def take(self, line):
        m = re.match(r"phrase shown ms=([\d.]+)", line)
        if m:
            self.shown.append(float(m.group(1)))
        return super().take(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--shape", default="b16", choices=sorted(SHAPES))
    ap.add_argument("--phrases", type=int, default=6)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="vitlens-clip-bench-"))
    d = work / f"clip-{a.shape}"
    if not (d / "model.safetensors").exists():
        print(f"writing random CLIP {a.shape} weights into {d} ...", flush=True)
        cm.write(d, "hf", seed=0, vocab=a.vocab, shape=SHAPES[a.shape])
    model = d / "model.safetensors"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", VITLENS_TRACE="1",
               XDG_CACHE_HOME=str(work / "cache"))

    # the zero-shot classes headless: computed, then from the cache
    for what in ("computed", "cached"):
        r = subprocess.run([a.app, "--model", str(model), "--classes", "imagenet", "--top", "1",
                            a.image], capture_output=True, text=True, env=env)
        m = re.search(r"(\d+) classes x (\d+) templates embedded in (\d+) ms", r.stderr)
        print(f"--classes imagenet ({what}): {m.group(0) if m else r.stderr.strip()}", flush=True)

    app = TimedApp([a.app, "--model", str(model), "--classes", "cat, dog", a.image], env)
    app.shown = []
    try:
        app.start(os.path.abspath(a.image))
        for i in range(a.phrases):
            phrase = PHRASES[i % len(PHRASES)]
            n = len(app.shown)
            app.key("slash", typing=1)
            run(["xdotool", "key", "--clearmodifiers", "ctrl+u"])
            run(["xdotool", "type", "--clearmodifiers", phrase])
            run(["xdotool", "key", "--clearmodifiers", "Return"])
            app.wait_line(lambda s: len(app.shown) > n, f"the map of {phrase!r}", timeout=300)
            app.wait_state("idle", busy=0, typing=0)
            print(f"  {'first' if i == 0 else 'next '} phrase {phrase!r}: {app.shown[-1]:.0f} ms",
                  flush=True)
    finally:
        app.proc.kill()
        app.proc.wait()
    nxt = app.shown[1:]
    if nxt:
        print(f"typed phrase -> new map, {a.shape}: first (forward pass again) "
              f"{app.shown[0]:.0f} ms; next ones median {statistics.median(nxt):.0f} ms "
              f"(min {min(nxt):.0f}, max {max(nxt):.0f}, n={len(nxt)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
