"""What the window remembers (app/config/settings.c) under Xvfb, on the built-in model: the
colormap, opacity, upsampling and panels changed by keys are written on quit to
$XDG_CONFIG_HOME/vitlens/settings and come back on the next start; the command line
overrides them; a corrupt file is reported on the status line, the window runs on and
quits writing a clean one; W lists the downloaded models, Enter loads one; the last model, a downloaded one opened by --model NAME from
$XDG_DATA_HOME/vitlens/models, opens again without --model, with its labels.txt; and
without an IMAGE it opens on the photos it showed, at the one it showed last (a
classroom opens where it left off), while a last model with no photos remembered gives
way to the built-in model on its first demo scene (as README promises).

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_remember.py \
      --app build/vitlens --out build/tests/gui/remember
Exits 0, 1 on a failed check.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import App, check, quit_app, run_checks  # noqa: E402


def settings_of(xdg):
    path = os.path.join(xdg, "config", "vitlens", "settings")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln and ln[0] != "#")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    assets = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets")
    default = os.path.realpath(os.path.join(assets, "default"))
    demo_dir = os.path.join(default, "demo")
    scenes = sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))
    photo = os.path.join(demo_dir, scenes[0])
    photo2 = os.path.join(demo_dir, scenes[1])
    xdg = os.path.join(os.path.abspath(a.out), "xdg")
    shutil.rmtree(xdg, ignore_errors=True)
    shapes = os.path.join(xdg, "data", "vitlens", "models", "shapes")
    os.makedirs(shapes)
    for f in ("model.safetensors", "config.json"):
        shutil.copy(os.path.join(default, f), shapes)
    with open(os.path.join(shapes, "labels.txt"), "w") as f:
        f.writelines(f"shape-{i}\n" for i in range(6))
    env = dict(os.environ, VITLENS_TRACE="1")
    sfile = os.path.join(xdg, "config", "vitlens", "settings")
    ok = True

    def first(app):  # nothing remembered: the defaults; keys change them; quit writes them
        app.start(photo)
        check(app.state["colormap"] == "viridis" and app.state["opacity"] == "0.60" and
              app.state["bilinear"] == "0" and app.state["distance"] == "0",
              f"no settings file: the defaults ({app.state['colormap']}, {app.state['opacity']})")
        app.key("v", colormap="inferno")
        app.key("b", bilinear=1)
        app.key("d", distance=1)
        app.key("0", preds=0)
        app.key("minus", opacity="0.50")
        quit_app(app)
        s = settings_of(xdg)
        check(s.get("colormap") == "inferno" and s.get("opacity") == "0.50" and
              s.get("bilinear") == "1" and s.get("predictions") == "0" and
              s.get("distance") == "1" and "model" not in s,
              f"quit writes them (the built-in model not remembered): {s}")
        check(os.listdir(os.path.dirname(sfile)) == ["settings"], "no temporary file left")
        check("image" not in s and "photo" not in s,
              f"the built-in model's photos are not remembered (it opens on its demo): {s}")
    ok &= run_checks(App([a.app, photo], env, xdg=xdg), first)

    def again(app):
        app.start(photo)
        app.wait_state("the remembered view", colormap="inferno", opacity="0.50", bilinear=1,
                       distance=1, preds=0)
        check(True, "the next start shows them")
        quit_app(app)
    ok &= run_checks(App([a.app, photo], env, xdg=xdg), again)

    def override(app):
        app.start(photo)
        app.wait_state("--colormap turbo over the settings", colormap="turbo", opacity="0.50")
        check(True, "--colormap turbo wins over the settings, the rest stays")
        quit_app(app)
    ok &= run_checks(App([a.app, "--colormap", "turbo", photo], env, xdg=xdg), override)

    with open(sfile, "w") as f:
        f.write("colormap=magma\nopacity=0.3\x00junk\nwhat is this\n")

    def corrupt(app):
        app.start(photo)
        line = app.wait_line(lambda s: s.startswith("status ") and "line 2" in s,
                             "the corrupt line on the status line")
        check("settings" in line and app.state["colormap"] == "magma",
              f"a corrupt file: reported on the status line, its good lines used: {line}")
        app.key("b", bilinear=1)
        quit_app(app)
        with open(sfile, "rb") as f:
            text = f.read()
        s = settings_of(xdg)
        check(b"\x00" not in text and b"what is" not in text and s.get("colormap") == "magma" and
              s.get("bilinear") == "1", f"and quit writes a clean file: {text!r}")
    ok &= run_checks(App([a.app, photo], env, xdg=xdg), corrupt)

    def by_name(app):
        app.start(photo)
        line = app.wait_line(lambda s: s.startswith("status shapes"), "the status line of shapes")
        check("shape-" in line, f"--model shapes: the downloaded model, with its labels: {line}")
        quit_app(app)
        s = settings_of(xdg)
        check(s.get("model") == os.path.join(shapes, "model.safetensors") and
              s.get("labels") == os.path.join(shapes, "labels.txt"),
              f"the last model remembered: {s.get('model')} {s.get('labels')}")
    ok &= run_checks(App([a.app, "--model", "shapes", photo], env, xdg=xdg), by_name)

    def last_model(app):
        app.start(photo)
        line = app.wait_line(lambda s: s.startswith("status shapes"), "the status line of shapes")
        check("shape-" in line, f"without --model: the last model again: {line}")
        quit_app(app)
    ok &= run_checks(App([a.app, photo], env, xdg=xdg), last_model)

    # The last model's photos: a slideshow of two, left at the second
    def slideshow(app):
        app.start(photo)
        app.key("n")
        app.wait_line(lambda s: s == f"ready {photo2}", "ready of the second photo")
        app.wait_state("the second photo on screen", busy=0, image_at=1)
        quit_app(app)
        s = settings_of(xdg)
        check(s.get("photo") == photo2 and s.get("model", "").endswith("shapes/model.safetensors"),
              f"the photo on screen remembered with the model: {s.get('photo')}")
        with open(sfile) as f:
            images = [ln.rstrip("\n")[6:] for ln in f if ln.startswith("image=")]
        check(images == [photo, photo2], f"the slideshow's images remembered: {images}")
    ok &= run_checks(App([a.app, "--model", "shapes", photo, photo2], env, xdg=xdg), slideshow)

    def left_off(app):  # no IMAGE, no --model: the last model on its photos, at the second
        app.start(photo2)
        line = app.wait_line(lambda s: s.startswith("status "), "a status line")
        check(line.startswith("status shapes") and app.state["image_at"] == "1",
              f"no arguments: the last model where it left off (image_at "
              f"{app.state['image_at']}): {line}")
        app.key("n")
        app.wait_line(lambda s: s == f"ready {photo}", "N: back to the first photo")
        check(True, "N steps through the remembered slideshow")
        quit_app(app)
    ok &= run_checks(App([a.app], env, xdg=xdg), left_off)

    def no_photos(app):  # the last model without photos: the built-in model's demo scene
        app.start(photo)
        line = app.wait_line(lambda s: s.startswith("status "), "a status line")
        check(not line.startswith("status shapes") and "shape-" not in line,
              f"a last model with no photos remembered: the built-in model on its demo: {line}")
        quit_app(app)
    with open(sfile) as f:
        kept = [ln for ln in f if not ln.startswith(("image=", "photo="))]
    with open(sfile, "w") as f:
        f.writelines(kept)
    check(any(ln.startswith("model=") for ln in kept), "the settings keep the last model")
    ok &= run_checks(App([a.app], env, xdg=xdg), no_photos)

    # W: the downloaded models in the list panel; Enter loads one on the worker
    xdg2 = os.path.join(os.path.abspath(a.out), "xdg2")
    shutil.rmtree(xdg2, ignore_errors=True)
    for name in ("alpha", "beta"):
        d = os.path.join(xdg2, "data", "vitlens", "models", name)
        os.makedirs(d)
        for f in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(default, f), d)
        with open(os.path.join(d, "labels.txt"), "w") as f:
            f.writelines(f"{name}-{i}\n" for i in range(6))

    def pick(app):
        app.start(photo)
        loads = int(app.state["loads"])
        app.key("w", picking=1, list=2, listmark=0)
        check(int(app.state["listw"]) > 0, f"W: the list panel drawn ({app.state['listw']} px wide)")
        app.key("Down", picking=1, listmark=1)
        app.key("Return", picking=0)
        line = app.wait_line(lambda s: s.startswith("status beta") and "beta-" in s,
                             "beta's status line")
        app.wait_state("beta loaded", busy=0, loads=loads + 1)
        check(True, f"W, Down, Enter: beta loaded on the worker, with its labels: {line}")
        app.key("w", picking=1, listmark=1)
        app.key("Escape", picking=0)
        check(app.proc.poll() is None, "Esc closes the list, the window stays")
        quit_app(app)
        s = settings_of(xdg2)
        check(s.get("model", "").endswith("/beta/model.safetensors") and
              s.get("labels", "").endswith("/beta/labels.txt"), f"beta remembered: {s}")
    ok &= run_checks(App([a.app, photo], env, xdg=xdg2), pick)

    def none(app):
        app.start(photo)
        app.key("w", picking=0)
        line = app.wait_line(lambda s: s.startswith("status ") and "no downloaded models" in s,
                             "no downloaded models on the status line")
        check("vitlens/models" in line, f"W without downloaded models says where: {line}")
        quit_app(app)
    ok &= run_checks(App([a.app, photo], env), none)

    print(f"gui_remember: {'all checks passed' if ok else 'checks failed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
