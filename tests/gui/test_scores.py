#!/usr/bin/python3
"""Maps of any score in the window (issue 36): --contrast A,B and --similar IMAGE2.

The headless exports of the same score are the reference (gui_cli_scores checks them
against vit_dump, itself checked against torch.autograd in backward_scores): the window's
map must be the exported .npy bit for bit (the trace's map hash, trace.c's FNV-1a of the
float32 bytes, computed here of the file).
- --contrast circle,square on the built-in model: the window opens on Chefer et al. of
  logit circle - logit square (the trace's "score contrast a=0 b=1"), its hash the export's
  class0-vs-class1_chefer.npy and not class0_chefer.npy (one class's map: the control),
  the status line "why "circle" rather than "square""; 1 (the top-1 class) turns the score
  off with a notice and the map becomes class0_chefer.npy's; a contrast naming a class the
  model lacks is refused at start (exit 1, the message names it);
- --similar IMAGE2: the compare view opens with IMAGE2 in pane B, the cosine on the trace and
  the status line equal to the one --similar --export prints, pane A's Chefer et al. map the
  export's similar-to-STEM2_chefer.npy, pane B's DIR/STEM2/similar-to-STEM_chefer.npy; Esc
  leaves (the score off: "score off"), \\ opens it again with the score back;
- --similar on a random DINOv2-shaped backbone with registers and no head (written here with
  tests/parity's write_family): the class-specific maps, which such a model cannot have of a
  class, show in both panes, equal to its export's.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_scores.py \\
      --app build/vitlens --out build/tests/gui/scores
Exits 0, 1 on a failed check.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
from test_gui import App, Fail, check, quit_app, run_checks, trace_hash as fnv  # noqa: E402



class ScoreApp(App):
    """The app with its trace's score, single maps and compare maps lines parsed."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.score, self.single, self.cmp = None, None, None

    def take(self, line):
        if line.startswith("score "):
            self.score = line
        elif line.startswith("maps by="):
            self.single = dict(t.split("=", 1) for t in line.split()[1:])
        elif line.startswith("compare maps "):
            kv = dict(t.split("=", 1) for t in line.split()[2:])
            for p in ("a", "b"):
                kv[p] = dict(re.findall(r"(\w+):([^:]+?)(?=,\w+:|$)", kv[p]))
            self.cmp = kv
        return super().take(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    demo = Path(__file__).resolve().parents[2] / "assets" / "default" / "demo"
    photos = sorted(str(p) for p in demo.glob("*.png"))
    photo = next(p for p in photos if "circle" in p)
    photo2 = next(p for p in photos if "square" in p)
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)
    xdg = tempfile.mkdtemp(prefix="vitlens-scores-")
    headless_env = dict(env, XDG_CONFIG_HOME=os.path.join(xdg, "c"),
                        XDG_DATA_HOME=os.path.join(xdg, "d"))
    headless_env.pop("DISPLAY", None)
    headless_env.pop("VITLENS_TRACE", None)

    def export(d, *args):
        shutil.rmtree(d, ignore_errors=True)
        r = subprocess.run([a.app, *map(str, args), "--export", str(d)], capture_output=True,
                           text=True, env=headless_env, timeout=600)
        if r.returncode:
            raise RuntimeError(f"{args}: {r.stderr}")
        return r.stdout

    stem, stem2 = Path(photo).stem, Path(photo2).stem
    export(out / "contrast", "--model", "builtin", "--contrast", "circle,square", photo)
    export(out / "class", "--model", "builtin", "--class", "circle", photo)
    printed = export(out / "similar", "--model", "builtin", "--similar", photo2, photo)
    cos = float(re.search(r"cos\(e, e'\) = (-?[\d.]+)", printed).group(1))
    want_contrast = fnv(out / "contrast" / "class0-vs-class1_chefer.npy")
    want_class = fnv(out / "class" / "class0_chefer.npy")
    want_a = fnv(out / "similar" / f"similar-to-{stem2}_chefer.npy")
    want_b = fnv(out / "similar" / stem2 / f"similar-to-{stem}_chefer.npy")
    ok = True

    def outside(cond, what):
        """A check outside a run of the window: FAIL printed, the test failed, going on."""
        nonlocal ok
        try:
            check(cond, what)
        except Fail as e:
            print(f"FAIL {e}", flush=True)
            ok = False

    outside(want_contrast != want_class, "the control: the contrast's export differs from one "
            f"class's ({want_contrast} against {want_class})")

    def contrast(app):
        app.start(photo)
        check(app.score and "score contrast a=0 b=1" in app.score,
              f"the trace: the score is logit 0 - logit 1 ({app.score})")
        if not (app.single and app.single.get("kind") == "chefer"):
            app.wait_line(lambda s: s.startswith("maps by=") and "kind=chefer" in s,
                          "the contrast's Chefer et al. map")
        check(app.single["map"] == want_contrast,
              f"the window's map is --contrast --export's bit for bit ({app.single['map']} "
              f"against {want_contrast}; one class's: {want_class})")
        st = app.wait_line(lambda s: s.startswith("status "), "the status line")
        check('why "circle" rather than "square"' in st, f"the status line says so: {st[7:]}")
        app.key("1")  # the top-1 class: the score off
        app.wait_line(lambda s: s.startswith("maps by=") and app.single["map"] == want_class,
                      "the top-1 class's map after 1")
        st = app.wait_line(lambda s: s.startswith("status "), "the status line after 1")
        check("--contrast off" in st and "rather than" not in st.split("|")[0],
              f"1: the contrast off, one class's map ({want_class}), the notice: {st[7:]}")
        quit_app(app)

    ok &= run_checks(ScoreApp([a.app, "--model", "builtin", "--contrast", "circle,square",
                               photo], env, xdg), contrast)

    r = subprocess.run([a.app, "--model", "builtin", "--contrast", "circle,no-such-class", photo],
                       capture_output=True, text=True, env=dict(env, XDG_CONFIG_HOME=os.path.join(
                           xdg, "c"), XDG_DATA_HOME=os.path.join(xdg, "d")), timeout=120)
    outside(r.returncode != 0 and "--contrast" in r.stderr and "no-such-class" in r.stderr,
            f"a class the model lacks: refused at start ({r.returncode}): {r.stderr.strip()}")

    def similar(app, want_a, want_b, cos, kind="chefer"):
        app.start(photo)

        def both():
            return app.cmp and all(app.cmp[p]["kind"] == kind and app.cmp[p]["map"] != "00000000"
                                   for p in "ab")
        if not both():
            app.wait_line(lambda s: s.startswith("compare maps ") and both(),
                          "both panes' class-specific maps")
        got = float(re.search(r"cos=(-?[\d.]+)", app.score).group(1))
        check(abs(got - cos) <= 1e-6, f"the cosine is the one --export prints ({got} against "
              f"{cos})")
        check(app.cmp["a"]["map"] == want_a and app.cmp["b"]["map"] == want_b,
              f"pane A's and B's maps are the export's bit for bit (A {app.cmp['a']['map']} "
              f"against {want_a}, B {app.cmp['b']['map']} against {want_b})")
        st = app.wait_line(lambda s: s.startswith("status compare"), "the compare status")
        check("cos(e_A, e_B) = %.4f" % cos in st, f"the status line gives the cosine: {st[7:]}")
        return st

    def similar_builtin(app):
        similar(app, want_a, want_b, cos)
        app.key("Escape")
        app.wait_line(lambda s: s == "score off", "Esc: the score off")
        app.key("backslash")
        app.wait_line(lambda s: s.startswith("score similar"), "\\: the score again")
        app.wait_line(lambda s: s.startswith("compare maps ") and app.cmp["a"]["map"] == want_a
                      and app.cmp["b"]["map"] == want_b, "\\: both panes' maps again")
        quit_app(app)

    ok &= run_checks(ScoreApp([a.app, "--model", "builtin", "--similar", photo2, photo], env,
                              xdg), similar_builtin)

    # a backbone without a head: only a score of its embedding can be explained
    from test_families import spec, write_family
    bk = out / "backbone"
    write_family(spec("dinov2_reg4_timm_224"), bk, seed=36)
    model = str(bk / "model.safetensors")
    printed = export(out / "backbone_similar", "--model", model, "--similar", photo2, photo)
    bcos = float(re.search(r"cos\(e, e'\) = (-?[\d.]+)", printed).group(1))
    ba = fnv(out / "backbone_similar" / f"similar-to-{stem2}_chefer.npy")
    bb = fnv(out / "backbone_similar" / stem2 / f"similar-to-{stem}_chefer.npy")

    def similar_backbone(app):
        similar(app, ba, bb, bcos)
        quit_app(app)

    ok &= run_checks(ScoreApp([a.app, "--model", model, "--similar", photo2, photo], env, xdg),
                     similar_backbone)
    shutil.rmtree(xdg, ignore_errors=True)
    print("ok" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
