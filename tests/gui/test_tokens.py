#!/usr/bin/python3
"""What the tokens hold, in the window under Xvfb (issue 14): DeiT-Tiny on chelsea.png
and coffee.png (a slideshow of two), at opacity 1 so that the pixels are the maps.

Each view is switched on with its key and checked on screen against the numbers
`vitlens --export` writes for the same photo (the engine's, which tests/parity and
tests/flow / tests/pca check against numpy, torch and networkx):
  Z        token norms: every patch the viridis colour of L12_norms.npy's normalised
           value; the high-norm tokens of high_norm_tokens.csv outlined in white (and
           no other patch), listed in the panel, counted on the status line
  Shift+L  logit lens: the panel lists the class the CLS token reads at every layer,
           the current layer framed (Left moves the frame); the status line names the
           class logit_lens.csv gives for the layer
  Shift+T  TokenRank: the patches are L12_tokenrank.npy's colours
  Y        patch similarity: a click makes a patch the query; it is the hottest patch
           (cosine 1 with itself)
  X        feature PCA: foreground patches are L12_pca.npy's colours, background ones
           the photo
  Shift+R  attention flow: computed in the background (busy), then L12_flow.npy's colours
  Shift+X  the feature PCA over both photos; N steps to coffee.png with it on, whose
           colours are --export's coffee/L12_pca-joint.npy (the two photos exported
           together)
Writes one screenshot per view into OUT (tokens_norms.png, ...): the README's pictures.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_tokens.py \\
      --app build/vitlens --shared ../shared --out build/tests/gui/tokens
Exits 0, 1 on a failed check, 77 (skip) without DeiT-Tiny.
"""
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_gui import App, check, colormap_lut, deit_setup, quit_app, run, run_checks, save  # noqa: E402


def centres(app, img, gh, gw):
    """The colour at the centre of each patch of the drawn crop: [gh, gw, 3]."""
    crop = app.crop(img).astype(np.int32)
    h, w = crop.shape[:2]
    ys = [int((r + 0.5) * h / gh) for r in range(gh)]
    xs = [int((c + 0.5) * w / gw) for c in range(gw)]
    return crop[np.ix_(ys, xs)]


def lut_colours(lut, raw):
    """The colours the window draws for a map: min-max normalised, LUT index round(v * 255)."""
    v = raw.astype(np.float32)
    v = (v - v.min()) / (v.max() - v.min())
    return lut[np.clip(np.floor(v * np.float32(255) + np.float32(0.5)), 0, 255).astype(int)]


def near(a, b, tol=2):
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max()) <= tol


def views(app, a, photos, ref, joint):
    lut = colormap_lut("viridis")
    gh = gw = 14
    app.start(photos[0])
    L = 12

    # -- Z: token norms, the high-norm tokens outlined and listed
    app.key("z", kind="norms", shown="norms")
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_norms.png"))
    want = lut_colours(lut, ref["L12_norms"])
    got = centres(app, img, gh, gw)
    hn = [r for r in ref["high_norm"] if int(r["layer"]) == L]
    outlined = {int(r["token"]) - 1 for r in hn if int(r["token"]) >= 1}  # patches (Np 1)
    inner = [(p // gw, p % gw) for p in range(gh * gw) if p not in outlined]
    check(all(near(got[r, c], want[r, c]) for r, c in inner),
          "Z: every patch is the colour of --export's L12_norms.npy")
    crop = app.crop(img).astype(np.int32)
    h, w = crop.shape[:2]

    def framed(p):  # white on all four sides of the patch's border band: its own outline
        r, c = divmod(p, gw)  # (a neighbour's outline reaches one or two of its sides only)
        y0, y1, x0, x1 = r * h // gh, (r + 1) * h // gh, c * w // gw, (c + 1) * w // gw
        sides = (crop[y0:y0 + 3, x0:x1], crop[y1 - 3:y1, x0:x1], crop[y0:y1, x0:x0 + 3],
                 crop[y0:y1, x1 - 3:x1])
        return all(int((band.reshape(-1, 3).min(-1) >= 235).sum()) > 4 for band in sides)

    white = {p for p in range(gh * gw) if framed(p)}
    check(white == outlined and int(app.state["highnorm"]) == len(hn) and
          int(app.state["list"]) == len(hn),
          f"Z: the {len(hn)} high-norm tokens of high_norm_tokens.csv are outlined "
          f"({sorted(white)}) and listed")
    line = app.wait_line(lambda s: s.startswith("status ") and "high-norm token" in s,
                         "the status line counts the high-norm tokens")
    check(f"{len(hn)} high-norm token" in line, f"status: {line[7:]!r}")

    # -- Shift+L: the logit lens panel, a row per layer
    app.key("shift+l", kind="logit-lens", shown="logit-lens")
    save(app.shot(), os.path.join(a.out, "tokens_logit_lens.png"))
    check(int(app.state["list"]) == L and app.state["listmark"] == str(L - 1),
          f"Shift+L: the panel lists the {L} layers, the last framed")
    lens = ref["lens"]
    line = app.wait_line(lambda s: s.startswith("status ") and "CLS reads" in s,
                         "the status line says what the CLS token reads")
    first = lens[-1]["label"].split(",")[0]
    check(first in line, f"status names logit_lens.csv's layer {L} class {first!r}: {line[7:]!r}")
    app.key("Left", layer=L - 2, listmark=L - 2)
    line = app.wait_line(lambda s: s.startswith("status ") and "CLS reads" in s and
                         f"layer {L - 1}/" in s, "layer 11's status")
    first = lens[-2]["label"].split(",")[0]
    check(first in line, f"Left: the frame on layer {L - 1}, whose class is {first!r}")
    app.key("Right", layer=L - 1)

    # -- Shift+T: TokenRank
    app.key("shift+t", kind="tokenrank", shown="tokenrank")
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_tokenrank.png"))
    got, want = centres(app, img, gh, gw), lut_colours(lut, ref["L12_tokenrank"])
    check(near(got, want), "Shift+T: the patches are --export's L12_tokenrank.npy colours")

    # -- Y: patch similarity; a click on patch (4, 9) makes it the query, the hottest patch
    app.key("y", kind="similarity", shown="similarity")
    x, y, s = app.image_rect()
    hh = int(app.state.get("image_h", s))
    r, c = 3, 8
    run(["xdotool", "mousemove", "--window", app.wid, str(x + int((c + 0.5) * s / gw)),
         str(y + int((r + 0.5) * hh / gh)), "click", "1"])
    app.wait_state("click on patch (4, 9)", query=1 + r * gw + c)
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_similarity.png"))
    got = centres(app, img, gh, gw)
    check(near(got[r, c], lut[255]), "Y + click: the clicked patch is the hottest (cosine 1)")
    # the pointer off the picture: its hover label would cover patches below
    run(["xdotool", "mousemove", "--window", app.wid, "2", "2"])
    app.wait_state("the hover label gone", hover="-1,-1")

    # -- X: the feature PCA's colours over the foreground
    app.key("x", kind="pca", shown="pca")
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_pca.png"))
    pca = ref["L12_pca"]
    got = centres(app, img, gh, gw)
    fg = pca[..., 3] > 0.5
    want = np.round(pca[..., :3] * 255)
    check(fg.any() and (~fg).any() and near(got[fg], want[fg], 3),
          f"X: the {int(fg.sum())} foreground patches are --export's L12_pca.npy colours")
    check(not near(got[~fg], want[~fg] * 0, 3), "X: the background shows the photo")

    # -- Shift+R: attention flow, on the worker thread
    app.key("c")  # the query back to the CLS token
    app.key("shift+r", kind="flow")
    app.wait_state("attention flow computed", kind="flow", shown="flow", busy=0)
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_flow.png"))
    got, want = centres(app, img, gh, gw), lut_colours(lut, ref["L12_flow"])
    check(near(got, want), "Shift+R: the patches are --export's L12_flow.npy colours")

    # -- Shift+X: the PCA over both photos, then N to the second with it on
    app.key("shift+x", joint=1)
    app.wait_state("the joint PCA computed", kind="pca", shown="pca", busy=0, joint=1)
    run(["xdotool", "key", "--clearmodifiers", "n"])
    app.wait_line(lambda s: s == f"ready {photos[1]}", "N: coffee.png")
    app.wait_state("the joint PCA on coffee.png", shown="pca", busy=0, joint=1, image_at=1)
    img = app.shot()
    save(img, os.path.join(a.out, "tokens_pca_joint.png"))
    got = centres(app, img, gh, gw)
    fg = joint[..., 3] > 0.5
    want = np.round(joint[..., :3] * 255)
    check(fg.any() and near(got[fg], want[fg], 3),
          "Shift+X, N: coffee.png in the colours of the PCA over both photos "
          "(--export's coffee/L12_pca-joint.npy)")
    quit_app(app)


def main():
    got = deit_setup()
    if not got:
        return 77
    a, model, labels, *photos = got
    # what the window must show, as --export writes it: one photo, then both together
    ex = os.path.join(a.out, "export")
    subprocess.run([a.app, "--model", model, "--labels", labels, "--export", ex, photos[0]],
                   check=True, capture_output=True)
    ref = {n: np.load(os.path.join(ex, n + ".npy"))
           for n in ("L12_norms", "L12_tokenrank", "L12_pca", "L12_flow")}
    with open(os.path.join(ex, "high_norm_tokens.csv")) as f:
        ref["high_norm"] = list(csv.DictReader(f))
    with open(os.path.join(ex, "logit_lens.csv")) as f:
        ref["lens"] = list(csv.DictReader(f))
    both = os.path.join(a.out, "export_both")
    subprocess.run([a.app, "--model", model, "--labels", labels, "--export", both, *photos],
                   check=True, capture_output=True)
    joint = np.load(os.path.join(both, "coffee", "L12_pca-joint.npy"))
    own = np.load(os.path.join(both, "coffee", "L12_pca.npy"))
    check(np.array_equal(own, np.load(os.path.join(both, "chelsea", "L12_pca.npy"))) is False,
          "--export of two photos: each its own folder with its own PCA")
    env = dict(os.environ, VITLENS_TRACE="1")
    app = App([a.app, "--model", model, "--labels", labels, "--opacity", "1", *photos], env)
    if not run_checks(app, lambda app: views(app, a, photos, ref, joint)):
        return 1
    print("gui_tokens: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
