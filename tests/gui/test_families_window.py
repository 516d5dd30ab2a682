#!/usr/bin/python3
"""The 2026 families in the window (issue 35: "each family opens in the window"), under Xvfb:
the stand-ins of tests/app/test_families_views.py (DINOv3 in Hugging Face's and timm's names,
EVA-02, SigLIP, Hugging Face's DINOv2 with registers and its classifier, a timm fc_norm
classifier), each opened with a photo (the RoPE families at a non-square --size), then:

  - the first map is drawn, no error, the status line names the model;
  - E steps through every map kind the model offers (--list-kinds' NEEDS: a classifier's
    kinds only with a head, the probe only with SigLIP's MAP head) and back to attention,
    each drawn by the window (its worker's too) with no error, and the kinds it skips are
    exactly those it cannot show;
  - the rollout (R) is another picture than the attention;
  - Left / Up move the layer and the head and the picture follows.

A screenshot of each family's first frame goes to OUT/<family>.png.

    xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_families_window.py \\
        --app build/vitlens --out DIR [--family NAME ...]
Exits 0, 1 on a failed check, 77 (skip) without python3-sentencepiece.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "app"))
try:
    import test_families_views as fv  # noqa: E402  (the stand-ins; exits 77 without sentencepiece)
except SystemExit as e:
    sys.exit(e.code)
from test_gui import App, check, diff, quit_app, run, run_checks, save  # noqa: E402


def offered(app_path, fam):
    """The kinds' tags, in E's order, that this family's model offers: NEEDS '-' always,
    'classifier' with a head (SigLIP's: its --classes), 'map-head' with the probe."""
    rows = [ln.split("\t") for ln in subprocess.run(
        [app_path, "--list-kinds"], check=True, capture_output=True, text=True).stdout.splitlines()]
    ok = {"-"} | ({"classifier"} if fam["C"] else set()) | ({"map-head"} if fam.get("probe") else set())
    return [r[0] for r in rows if r[5] in ok], [r[0] for r in rows if r[5] not in ok]


def explore(app, name, fam, photo, out, app_path):
    app.start(photo)
    check(app.state["error"] == "0", f"{name}: the first map drawn, no error")
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    check(status[7:].startswith(name), f"{name}: the status line names the model: {status[:80]}")
    base = app.shot()
    save(base, os.path.join(out, f"{name}.png"))
    tags, skipped = offered(app_path, fam)
    seen = ["attention"]
    for _ in range(len(tags)):
        run(["xdotool", "key", "--clearmodifiers", "e"])
        want = tags[len(seen) % len(tags)]
        app.wait_state(f"{name}: E to {want}", kind=want)
        app.wait_state(f"{name}: {want} drawn", shown=want, busy=0)
        check(app.state["error"] == "0", f"{name}: {want} drawn without an error")
        seen.append(want)
    check(seen[:-1] == tags and seen[-1] == "attention" and not set(seen) & set(skipped),
          f"{name}: E steps through {seen[:-1]} and back; skips {skipped}")
    check(diff(base, app.shot()) == 0, f"{name}: attention again, the same picture")
    app.key("r", kind="rollout")
    app.wait_state(f"{name}: rollout drawn", shown="rollout", busy=0)
    check(diff(app.crop(base), app.crop(app.shot())) > 0.5, f"{name}: the rollout is another picture")
    app.key("r", kind="attention")
    layer, head = int(app.state["layer"]), int(app.state["head"])
    app.key("Left", layer=str(layer - 1))
    moved = app.shot()
    check(diff(app.crop(base), app.crop(moved)) > 0.5, f"{name}: Left: layer {layer} -> {layer - 1}")
    app.key("Up", head=str(head - 1 if head > 0 else head))
    quit_app(app)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", action="append", choices=sorted(fv.FAMILIES))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    photo, _ = fv.make_images(out / "photos")
    env = dict(os.environ, VITLENS_TRACE="1")
    ok = True
    for name in a.family or [n for n in fv.FAMILIES if n != "siglip2"]:  # siglip2: siglip's tower
        fam = fv.FAMILIES[name]
        model = fam["write"](out / name)
        argv = [a.app, "--model", str(model)]
        if fam.get("size"):
            argv += ["--size", fam["size"]]
        if fam.get("text"):
            argv += ["--classes", fv.CLASSES]
        print(f"\n[{name}] {' '.join(map(str, argv[1:]))}", flush=True)
        ok = run_checks(App(argv + [str(photo)], env),
                        lambda app: explore(app, name, fam, str(photo), str(out), a.app)) and ok
    print("families in the window: all checks passed" if ok else "families in the window: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
