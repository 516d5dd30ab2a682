#!/usr/bin/python3
"""Zero-shot classes embedded off the GUI thread (issue 38): the window opens before a
--prompts file's texts have gone through the text tower, and a second worker embeds them.
On a random CLIP checkpoint the test writes (clip_models.py, a text tower large enough that
400 classes x 7 templates take seconds), with a fresh XDG_CACHE_HOME each run:

  - the first heatmap (the trace's "maps" line, then "ready PHOTO") comes before "classes
    ready"; a "classes progress done=D total=T" line with 0 < D < T and the status line's
    "embedding the classes: D / T" show meanwhile; the top-5 panel's title says it waits for
    the class texts;
  - a key pressed meanwhile is served while they are still pending (Left: the previous
    layer, cwait=1 in that frame); a class key (1: explain the top class) says it must wait;
  - once ready, the top-5 panel is --top 5's (classes and probabilities) and the cache file
    the window wrote is byte for byte the one --top wrote;
  - a model dropped while the classes are embedded cancels the job ("classes done
    status=cancelled current=0"), and the new model's classes are embedded and shown;
  - a second window on the same cache starts no job: its top-5 is there at once.
Waits on the app's VITLENS_TRACE lines, never a fixed sleep.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_clip_classes.py \\
      --app build/vitlens --vocab ../shared/clip/bpe_simple_vocab_16e6.txt.gz \\
      --templates assets/clip/imagenet_templates_7.txt --names assets/clip/imagenet_classes.txt \\
      --image assets/default/demo/X.png --out DIR
Exits 0, 1 on a failed check, 77 (skip) without the shared vocabulary.
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import clip_models as cm  # noqa: E402
from test_gui import App, check, quit_app, run, run_checks  # noqa: E402

N_CLASSES = 400
# a text tower 4x as wide and twice as deep as clip_models' default: 2 800 texts take
# seconds (plain build), long enough for the window to open and draw before they are done
BIG = dict(cm.SHAPE, W=256, LT=4, HT=4)


class ClassesApp(App):
    """The app, with the order of the trace's first "maps" and "classes ready" lines and the
    last "preds" line kept."""

    def __init__(self, argv, env):
        super().__init__(argv, env)
        self.seen = []  # "maps", "ready", "progress", "start" in the order they came
        self.preds = None

    def take(self, line):
        if line.startswith("maps "):
            self.seen.append("maps")
        elif line.startswith("classes ready"):
            self.seen.append("ready")
        elif line.startswith("classes start"):
            self.seen.append("start")
        elif line.startswith("preds "):
            rows, _, title = line[len("preds rows="):].partition(" title=")
            self.preds = ([(int(c), float(p)) for c, p in
                           (r.split(":") for r in rows.split(",") if r)], title)
        return super().take(line)


def env_for(cache):
    if cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True)
    return dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE", XDG_CACHE_HOME=str(cache))


def top5(app, model, text_args, photo, cache):
    r = subprocess.run([app, "--model", str(model), *text_args, "--top", "5", photo],
                       capture_output=True, text=True, env=env_for(cache))
    check(r.returncode == 0, f"--top 5: exit {r.returncode} {r.stderr[-300:]!r}")
    rows = [ln.split(None, 3) for ln in r.stdout.splitlines() if ln.strip()]
    return [(int(c), float(p)) for _, p, c, _ in rows]


def cache_file(cache):
    files = sorted((cache / "vitlens" / "clip").glob("*.f32"))
    check(len(files) == 1, f"one cache file in {cache} ({[f.name for f in files]})")
    return files[0].read_bytes()


def same_top5(preds, want, what):
    got = [c for c, _ in preds]
    check(got == [c for c, _ in want] and all(abs(p - q) < 6e-5 for (_, p), (_, q) in
                                              zip(preds, want)),
          f"{what}: the top-5 panel {preds} is --top 5's {want}")


def window(a, model, text_args, photo, cache, want, want_cache):
    app = ClassesApp([a.app, "--model", str(model), *text_args, photo], env_for(cache))

    def body(app):
        app.start(photo)
        check("maps" in app.seen and "ready" not in app.seen and app.state["cwait"] == "1",
              f"the first heatmap is on screen before the classes are ready ({app.seen})")
        check(app.preds and app.preds[1].startswith("waiting for the class texts"),
              f"the top-5 panel waits for the class texts ({app.preds})")
        line = app.wait_line(lambda s: s.startswith("classes progress") and
                             0 < int(s.split("done=")[1].split()[0]) <
                             int(s.split("total=")[1]), "a progress line")
        check(True, f"progress: {line!r}")
        st = app.wait_line(lambda s: s.startswith("status ") and "embedding the classes: " in s,
                           "the status line's progress")
        check(True, f"status: {st.split(' | ')[-1]!r}")
        layer = int(app.state["layer"])
        app.key("Left", layer=layer - 1)
        check(app.state["cwait"] == "1" and "ready" not in app.seen,
              "Left is served (the previous layer drawn) while the classes are embedded")
        run(["xdotool", "key", "--clearmodifiers", "1"])
        st = app.wait_line(lambda s: s.startswith("status ") and "no class to explain yet" in s,
                           "1 (explain the top class) says it must wait")
        check(True, f"1: {st.split(' | ')[-1]!r}")
        app.wait_line(lambda s: s.startswith("classes ready"), "the classes ready")
        app.wait_line(lambda s: s.startswith("preds ") and app.preds and len(app.preds[0]) == 5,
                      "the top-5 panel of the classes")
        same_top5(app.preds[0], want, "once embedded")
        quit_app(app)
        check(cache_file(cache) == want_cache,
              "the window's cache file is --top's, byte for byte (the same embeddings)")

    return run_checks(app, body)


def dropped(a, model, small, text_args, photo, cache):
    """A model dropped while the classes are embedded: the job is cancelled, the new model's
    classes are embedded instead."""
    app = ClassesApp([a.app, "--stdin-drops", "--model", str(model), *text_args, photo],
                     env_for(cache))

    def body(app):
        app.start(photo)
        check("ready" not in app.seen, "the classes are still being embedded")
        app.drop(str(small))
        line = app.wait_line(lambda s: s.startswith("classes done"), "the old job's end")
        check("status=cancelled current=0" in line, f"the dropped model cancels it ({line!r})")
        line = app.wait_line(lambda s: s.startswith("classes ready"), "the new model's classes")
        check(f"n={N_CLASSES}" in line, f"the new model's classes embedded ({line!r})")
        app.wait_line(lambda s: s.startswith("preds ") and app.preds and len(app.preds[0]) == 5,
                      "the new model's top-5")
        quit_app(app)

    return run_checks(app, body)


def cached(a, model, text_args, photo, cache, want):
    """A second run on the same cache: no job, the top-5 at once."""
    env = dict(os.environ, VITLENS_TRACE="1", OMP_WAIT_POLICY="PASSIVE", XDG_CACHE_HOME=str(cache))
    app = ClassesApp([a.app, "--model", str(model), *text_args, photo], env)

    def body(app):
        app.start(photo)
        check("start" not in app.seen and app.state["cwait"] == "0",
              "the cache read at start: no classes job")
        check(app.preds is not None, "a top-5 panel drawn")
        same_top5(app.preds[0], want, "from the cache")
        quit_app(app)

    return run_checks(app, body)


def main():
    ap = argparse.ArgumentParser()
    for x in ("--app", "--vocab", "--templates", "--names", "--image", "--out"):
        ap.add_argument(x, required=True)
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        print(f"SKIP: no CLIP vocabulary at {a.vocab}")
        return 77
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    model = cm.write(out / "big", "hf", vocab=a.vocab, shape=BIG)
    small = cm.write(out / "small", "hf", seed=1, vocab=a.vocab)
    names = [ln.strip() for ln in open(a.names) if ln.strip() and not ln.startswith("#")]
    prompts = out / "classes.txt"
    prompts.write_text("# the test's classes\n" + "\n".join(names[:N_CLASSES]) + "\n")
    text_args = ["--prompts", str(prompts), "--templates", a.templates]
    photo = os.path.abspath(a.image)
    want = top5(a.app, model, text_args, photo, out / "cache-top")
    want_cache = cache_file(out / "cache-top")
    ok = window(a, model, text_args, photo, out / "cache-win", want, want_cache)
    ok = dropped(a, model, small, text_args, photo, out / "cache-drop") and ok
    ok = cached(a, model, text_args, photo, out / "cache-win", want) and ok
    print(f"gui_clip_classes: {'all checks passed' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
