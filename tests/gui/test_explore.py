#!/usr/bin/python3
"""The explorer's features in the window under Xvfb (issue 4), on DeiT-Tiny with
chelsea.png and coffee.png given together (a slideshow). Reuses test_gui.py's App
driver (VITLENS_TRACE frame lines for synchronisation, screenshots) and checks
each feature on the pixels: the photo seen through the map at the default
opacity, the query patch and its box, hover tooltips,
the heads grid and the layers x heads table (clicks open thumbnails), the top-5
panel's bars, the colormaps and the colour bar, per-map vs shared scale,
bilinear upsampling, the mask outline, the attention distance plot, S, N / P,
F (fullscreen) and the help overlay. It also writes screenshot.png, the
README's docs/screenshot.png.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_explore.py \
      --app build/vitlens --shared ../shared --out build/tests/gui/explore
Exits 0, 1 on a failed check, 77 (skip) without DeiT-Tiny.
"""
import os
import subprocess
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from test_gui import App, check, deit_setup, run_checks, colormap_lut, diff, quit_app, run, save  # noqa: E402

PINK = np.array([255, 46, 140])
NAMES = ("viridis", "inferno", "magma", "turbo", "greys")


def near(img, colour, tol=12):
    return (np.abs(img.astype(np.int32) - np.asarray(colour)).max(axis=-1) <= tol)


def cells_of(app):
    """The overview's layout: first cell's corner, cell width, height, steps (px)."""
    x, y, w, h, sx, sy = (int(v) for v in app.state["cells"].split(","))
    return x, y, w, h, sx, sy


def cell_img(img, app, col, row):
    x, y, w, h, sx, sy = cells_of(app)
    return img[y + row * sy:y + row * sy + h, x + col * sx:x + col * sx + w]


def click(app, x, y):
    run(["xdotool", "mousemove", "--window", app.wid, str(x), str(y), "click", "1"])


def patch_centre(app, row, col, G=14):
    x, y, s = app.image_rect()
    return x + int((col + 0.5) * s / G), y + int((row + 0.5) * s / G)


def hottest(app, img, lut, G=14):
    """(row, col) of the patch whose centre is closest to the colormap's top colour."""
    crop = app.crop(img)
    s = crop.shape[0]
    c = np.array([[crop[int((r + .5) * s / G), int((q + .5) * s / G)] for q in range(G)]
                  for r in range(G)], np.int32)
    d = np.abs(c - lut[-1]).sum(-1)
    r, q = np.unravel_index(d.argmin(), d.shape)
    return int(r), int(q), int(d.min())


def detail(app, img, G=14):
    """The crop's luminance (0..255) minus its mean in each patch, 4 px in from the
    patch borders (grid lines, the query box): with nearest upsampling the map is
    flat in a patch, so this is the photo's detail alone, scaled by how much of the
    photo the overlay lets through."""
    crop = app.crop(img).astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    ey = [round(i * crop.shape[0] / G) for i in range(G + 1)]
    ex = [round(i * crop.shape[1] / G) for i in range(G + 1)]
    parts = [crop[ey[r] + 4:ey[r + 1] - 4, ex[c] + 4:ex[c + 1] - 4] for r in range(G)
             for c in range(G)]
    return np.concatenate([(p - p.mean()).ravel() for p in parts])


def main():
    got = deit_setup()
    if not got:
        return 77
    a, model, labels, chelsea, coffee = got
    saves = os.path.join(a.out, "saved")
    os.makedirs(saves, exist_ok=True)
    for f in os.listdir(saves):
        os.remove(os.path.join(saves, f))
    env = dict(os.environ, VITLENS_TRACE="1")
    app = App([a.app, "--model", model, "--labels", labels, "--save-dir", saves, chelsea, coffee],
              env)
    if not run_checks(app, lambda app: explore(app, a, model, chelsea, coffee, saves)):
        return 1
    print("gui_explore: all checks passed")
    return 0


def explore(app, a, model, chelsea, coffee, saves):
    out = a.out
    G, L, H, Np = 14, 12, 3, 1
    viridis = colormap_lut("viridis")
    app.start(chelsea)
    # -- the photo under the map: at the default opacity the overlay is
    # mix(photo, colour, 0.6) and the map is flat inside a patch, so the photo's
    # detail there is the photo's own (with O: no overlay) at 1 - 0.6 of its contrast
    check(app.state["opacity"] == "0.60" and app.state["bilinear"] == "0",
          "the default view: opacity 0.6, nearest upsampling")
    over = app.shot()
    app.key("o", overlay=0)
    dp = detail(app, app.shot())
    app.key("o", overlay=1)
    do = detail(app, over)
    k, rho = float(do @ dp / (dp @ dp)), float(np.corrcoef(do, dp)[0, 1])
    check(dp.std() > 5 and rho > 0.95 and abs(k - 0.4) < 0.05,
          f"the photo shows through the map: its detail at {k:.3f} of full contrast "
          f"(1 - opacity = 0.4), correlation {rho:.3f}")

    # -- the README's screenshot (docs/screenshot.png): layer 6's mean attention from
    # a patch on the cat's eye, bilinear, with the top-5 and attention distance panels
    app.key("d", distance=1)
    for l in range(L - 2, 4, -1):
        app.key("Left", layer=l)
    app.key("l", query=Np + 7 * G + 7)
    for r in (6, 5, 4):
        app.key("i", query=Np + r * G + 7)
    for c in (6, 5, 4):
        app.key("j", query=Np + 4 * G + c)
    app.key("b", bilinear=1)
    save(app.shot(), os.path.join(out, "screenshot.png"))
    print(f"     wrote {os.path.join(out, 'screenshot.png')}")
    app.key("b", bilinear=0)
    for r in (5, 6, 7):  # the keyboard cursor back to the centre, then the CLS token
        app.key("k", query=Np + r * G + 4)
    for c in (5, 6, 7):
        app.key("l", query=Np + 7 * G + c)
    app.key("c", query=0)
    for l in range(6, L):
        app.key("Right", layer=l)
    app.key("d", distance=0)
    check(diff(over, app.shot()) == 0, "back to the first view")

    for op in ("0.70", "0.80", "0.90", "1.00"):  # pure colormap colours: readable values
        app.key("plus", opacity=op)
    cls = app.shot()
    k1 = float(detail(app, cls) @ dp / (dp @ dp))
    check(abs(k1) < 0.02, f"at opacity 1 the map hides the photo ({k1:.3f}): the check "
          "above can fail")
    x, y, side = app.image_rect()

    # -- query patch: L makes the cursor's (centre) patch the query, boxed in pink
    app.key("l", query=Np + 7 * G + 7)
    q = app.shot()
    save(q, os.path.join(out, "query.png"))
    d = diff(app.crop(cls), app.crop(q))
    check(d > 5, f"a patch query changes the map ({d:.1f})")
    cx, cy = patch_centre(app, 7, 7)
    half = side // G // 2
    box = q[cy - half:cy + half, cx - half:cx + half]
    check(near(box, PINK, 40).mean() > 0.08, "the query patch is boxed in pink")
    check(near(app.crop(cls), PINK, 40).mean() < 0.002, "no box for the CLS token")
    app.key("l", query=Np + 7 * G + 8)
    app.key("k", query=Np + 8 * G + 8)
    app.key("shift+Left", query=Np + 8 * G + 7)
    check(app.state["layer"] == "11", "Shift+Left moves the cursor, not the layer")
    # a click makes the clicked patch the query; hovering shows a tooltip
    px, py = patch_centre(app, 2, 11)
    click(app, px, py)
    app.wait_state("click on patch (2, 11)", query=Np + 2 * G + 11, hover="2,11")
    hov = app.shot()
    tip = hov[py + 10:py + 40, px + 15:px + 120]
    check((tip.max(axis=-1) < 30).mean() > 0.3 and (tip.min(axis=-1) > 200).mean() > 0.02,
          "hovering shows a tooltip (dark box, light text) beside the mouse")
    check("patch (row 3, col 12)" in app.wait_line(lambda s: s.startswith("status "), "status"),
          "the status line names the query patch, 1-based")
    r, c, dist = hottest(app, hov, viridis)
    check(dist < 30, f"the map's hottest patch is drawn in the colormap's top colour ({dist})")
    app.key("r", kind="rollout")
    roll_q = app.crop(app.shot())
    app.key("c", query=0)
    roll_cls = app.crop(app.shot())
    d = diff(roll_q, roll_cls)
    check(d > 0.5, f"rollout from the patch differs from rollout from CLS ({d:.2f})")
    app.key("r", kind="attention")
    app.mouse_off("mouse away")
    check(diff(cls, app.shot()) == 0, "C returns to the CLS token: the same picture as before")

    # -- top-5 panel: the first bar is as long as the top-1 probability
    top = subprocess.run([a.app, "--model", model, "--top", "1", chelsea], capture_output=True,
                         text=True).stdout.split()
    p1 = float(top[1])
    pnl_x, pnl_w = (int(v) for v in app.state["panel"].split(","))
    check(app.state["preds"] == "5" and pnl_w > 100, "the top-5 panel is shown")
    panel = cls[:, pnl_x:pnl_x + pnl_w]
    yellow = near(panel, (252, 232, 38), 30)
    rows = np.flatnonzero(yellow.sum(axis=1) > 10)
    bar_rows = rows[rows > rows.min() + 20] if rows.size else rows  # below the title
    width = yellow[bar_rows].sum(axis=1).max() if bar_rows.size else 0
    track = pnl_w - 2 * round(0.6 * (pnl_w / 13))
    check(abs(width / track - p1) < 0.03,
          f"the top-1 bar is {width / max(track, 1):.3f} of its track, p = {p1:.3f}")
    app.key("0", preds=0)
    check(app.state["panel"] == "0,0", "0 hides the panel")
    app.key("0", preds=5)

    # -- colormaps: the colour bar runs from LUT[0] (bottom) to LUT[255] (top)
    for i, name in enumerate(NAMES[1:] + NAMES[:1]):
        app.key("v", colormap=name)
        img = app.shot()
        lut = colormap_lut(name)
        bar = img[y:y + side, x + side:pnl_x]
        # the bar: the column whose pixels match the most LUT colours
        hits = [(near(bar, lut[-1], 6).any(axis=0) & near(bar, lut[0], 6).any(axis=0))]
        check(hits[0].any(), f"{name}: the colour bar shows its top and bottom colours")
        r, c, dist = hottest(app, img, lut)
        check(dist < 30, f"{name}: the hottest patch has the top colour ({dist})")
        if name == "turbo":
            save(img, os.path.join(out, "turbo.png"))
    app.key("V", colormap="greys")
    app.key("v", colormap="viridis")

    # -- scale: shared across the layer, some head stays below the top colour
    tops = {}
    for scale in ("map", "layer"):
        if scale == "layer":
            app.key("u", scale="layer")
        for h in (2, 1, 0):
            app.key("Up", head=h)
            tops[(scale, h)] = hottest(app, app.shot(), viridis)[2]
        for h in (1, 2, 3):
            app.key("Down", head=h)
    check(all(tops[("map", h)] < 30 for h in range(H)), "per map: every head reaches the top colour")
    check(any(tops[("layer", h)] > 60 for h in range(H)),
          f"shared scale: some head stays below the layer's maximum ({tops})")
    app.key("u", scale="map")

    # -- bilinear: colours vary inside a patch; nearest: flat
    flat = app.crop(app.shot())
    app.key("b", bilinear=1)
    smooth = app.crop(app.shot())
    save(app.shot(), os.path.join(out, "bilinear.png"))
    e = [int(round(i * side / G)) for i in range(G + 1)]  # patch borders, px
    inner = lambda im: np.mean([im[e[r] + 3:e[r + 1] - 3, e[c] + 3:e[c + 1] - 3]
                                .reshape(-1, 3).std(axis=0).max() for r in range(4, 10)
                                for c in range(4, 10)])
    check(inner(flat) < 1 and inner(smooth) > 3,
          f"nearest is flat per patch ({inner(flat):.1f}), bilinear is not ({inner(smooth):.1f})")
    app.key("b", bilinear=0)

    # -- mask: a white outline round the hottest patches; , / . change the fraction
    app.key("m", mask=1)
    kept60 = int(app.state["kept"])
    m60 = app.shot()
    save(m60, os.path.join(out, "mask60.png"))
    white = near(app.crop(m60), (255, 255, 255), 3).mean()
    check(white > 0.003, f"M outlines the mask ({kept60} patches, {white:.4f} of the crop white)")
    app.key("period", "period", fraction=70)
    check(int(app.state["kept"]) > kept60, f". raises the fraction: {app.state['kept']} > {kept60}")
    for f in range(65, 0, -5):
        app.key("comma", fraction=f)
    app.key("comma", fraction=5)  # not below 5%
    m5 = app.shot()
    k5 = int(app.state["kept"])
    r, c, _ = hottest(app, cls, viridis)
    x0, y0 = x + c * side // G, y + r * side // G
    ring = m5[y0 - 2:y0 + side // G + 3, x0 - 2:x0 + side // G + 3]
    edge = np.concatenate([ring[:4].reshape(-1, 3), ring[-4:].reshape(-1, 3),
                           ring[:, :4].reshape(-1, 3), ring[:, -4:].reshape(-1, 3)])
    check(k5 >= 1 and near(edge, (255, 255, 255), 3).mean() > 0.3,
          f"at 5% the mask ({k5} patches) outlines the hottest patch ({r}, {c})")
    for f in range(10, 65, 5):
        app.key("period", fraction=f)
    app.key("m", mask=0)

    # -- attention distance plot: the current head's dot is yellow and moves with the layer
    app.key("d", distance=1)
    app.key("Up", head=H - 1)
    dshot = app.shot()
    save(dshot, os.path.join(out, "distance.png"))
    yel12 = near(dshot[:, pnl_x:pnl_x + pnl_w], (252, 232, 38), 30)
    check(yel12[int(y + side * 0.45):].sum() > 10, "the current head's dot is drawn in yellow")
    for l in range(L - 2, 4, -1):
        app.key("Left", layer=l)
    yel5 = near(app.shot()[:, pnl_x:pnl_x + pnl_w], (252, 232, 38), 30)
    # the title is the same in both: what is yellow in one only is the dot
    old_x, new_x = np.nonzero(yel12 & ~yel5)[1], np.nonzero(yel5 & ~yel12)[1]
    check(old_x.size > 10 and new_x.size > 10 and new_x.mean() < old_x.mean() - pnl_w * 0.3,
          f"at layer 5 the dot is further left ({new_x.mean() if new_x.size else -1:.0f} < "
          f"{old_x.mean() if old_x.size else -1:.0f})")

    # -- overviews: A the heads of the layer, a click opens one; T the table
    app.key("a", overview=1)
    heads = app.shot()
    save(heads, os.path.join(out, "heads.png"))
    thumbs = [cell_img(heads, app, k % 3, k // 3) for k in range(H + 3)]
    check(all(t.shape[0] > 100 for t in thumbs), "A: six thumbnails")
    check(min(diff(thumbs[i], thumbs[j]) for i in range(H) for j in range(i + 1, H)) > 2,
          "the heads' thumbnails differ")
    cxs, cys, cpx, cph, cstep, rstep = cells_of(app)
    sel = heads[cys - 3:cys, cxs + 2 * cstep:cxs + 2 * cstep + cpx]  # head 3 is selected
    check(near(sel, (252, 232, 38), 30).mean() > 0.5, "the current head is framed in yellow")
    click(app, cxs + cstep + cpx // 2, cys + cph // 2)
    app.wait_state("click on head 2", overview=0, head=1)
    app.key("t", overview=2)
    table = app.shot()
    save(table, os.path.join(out, "table.png"))
    cxs, cys, cpx, cph, cstep, rstep = cells_of(app)
    check(cxs + (L - 1) * cstep + cpx <= pnl_x and cpx > 30,
          f"T: {L} columns of {cpx} px thumbnails left of the panel")
    col0 = [cell_img(table, app, 0, k) for k in range(H)]
    col11 = [cell_img(table, app, 11, k) for k in range(H)]
    check(diff(col0[0], col11[0]) > 2, "layer 1 and layer 12 thumbnails differ")
    click(app, cxs + 2 * cstep + cpx // 2, cys + 4 * rstep + cph // 2)  # layer 3, max
    app.wait_state("click on layer 3, max", overview=0, layer=2, head=H + 1)
    app.key("Return")  # nothing to open in the single view
    app.key("t", overview=2)
    app.key("Right", layer=3)
    app.key("Return", overview=0, layer=3, head=H + 1)

    # -- S: the view as a PNG named after it, the same picture as on screen
    app.key("l", query=Np + 2 * G + 11)  # from the CLS token: back to the cursor, (2, 11)
    before = app.shot()
    run(["xdotool", "key", "s"])
    line = app.wait_line(lambda s: s.startswith("saved "), "saved")
    path = line[6:]
    name = os.path.basename(path)
    check(name == "chelsea_deit_tiny_patch16_224_L04_max_attention_q03-12.png",
          f"S names the file after image, model, layer, head, kind, query: {name}")
    png = np.asarray(Image.open(path).convert("RGB")).astype(np.int16)
    check(png.shape == before.shape and diff(app.crop(png), app.crop(before)) < 0.5,
          "the saved PNG is the view on screen")
    app.key("c", query=0)

    # -- slideshow: N the next image of the command line, P back; the view stays
    run(["xdotool", "key", "n"])
    app.wait_line(lambda s: s == f"ready {coffee}", "N: coffee.png")
    app.wait_state("coffee drawn", busy=0, image_at=1)
    check(app.state["layer"] == "3" and app.state["head"] == str(H + 1),
          "N keeps the layer and head")
    run(["xdotool", "key", "p"])
    app.wait_line(lambda s: s == f"ready {chelsea}", "P: chelsea.png")
    app.wait_state("chelsea drawn", busy=0, image_at=0)

    # -- presenter: F fills the screen, the status bar and text grow, nothing covers the image
    def bar_height(img):  # rows from the bottom in the status bar's colour at x = 2
        col = img[::-1, 2]
        return int(np.argmax(np.abs(col[3:] - col[3]).max(axis=-1) > 3)) + 3
    bar0 = bar_height(app.shot())
    app.key("f", fullscreen=1)
    app.wait_state("fullscreen", window="1280,1024")
    # Xvfb has no window manager to give a fullscreen window the screen: should SDL size
    # its frame to 1280x1024 but leave the X window (and the GL drawable) as they were,
    # screenshots and S's read-back would cut the frame. Do the manager's part; if that
    # changed the X window, wait for the frame drawn at its new size. (Debian 12's SDL
    # moves and sizes the X window itself: then nothing changes and the settled frame
    # wait_state waited for is the one on screen.)
    def x_geometry():
        return subprocess.run(["xdotool", "getwindowgeometry", "--shell", app.wid], check=True,
                              capture_output=True, text=True).stdout
    n, was = app.frame, x_geometry()
    run(["xdotool", "windowmove", "--sync", app.wid, "0", "0"])
    run(["xdotool", "windowsize", "--sync", app.wid, "1280", "1024"])
    app.geom = None  # grab the window where it is now
    if x_geometry() != was:
        app.wait_line(lambda s: s.startswith("frame ") and app.frame > n and app.settled(),
                      "redrawn on the screen")

    def saved_frame(what):  # S: the frame as drawn
        run(["xdotool", "key", "s"])
        line = app.wait_line(lambda s: s.startswith("saved "), what)
        return np.asarray(Image.open(line[6:]).convert("RGB")).astype(np.int16)
    no_help = saved_frame("saved in fullscreen")
    screen = app.shot()
    save(no_help, os.path.join(out, "fullscreen.png"))
    bar1 = bar_height(no_help)
    check(no_help.shape[:2] == (1024, 1280) and diff(no_help[:-bar1], screen[:-bar1]) < 0.5,
          f"fullscreen: the frame fills the screen {no_help.shape}, S saves it as shown "
          "(above the status line, which says it saved)")
    check(bar1 > bar0, f"fullscreen: the status bar and its text grow with the window "
          f"({bar0} -> {bar1} px)")
    x2, y2, s2 = app.image_rect()
    check(y2 + s2 <= 1024 - bar1, "the status bar is below the image, not on it")
    app.key("h", help=1)
    pages = int(app.state["hpage"].split("/")[1])
    n_key_lines = n_what = 0
    pairs_ok = True
    for page in range(1, pages + 1):
        if page > 1:
            app.key("h", help=1, hpage=f"{page}/{pages}")
        full = saved_frame(f"saved in fullscreen with help, page {page} of {pages}")
        save(full, os.path.join(out, f"fullscreen_help{page if page > 1 else ''}.png"))
        # H against the same frame without it: a panel over the view (above the status
        # line, whose notice changes with each S), and in it one line of text per key,
        # the key in the accent colour and what it does in the text colour
        changed = np.abs(full - no_help).max(axis=-1) > 8
        changed[1024 - bar1 - 2:] = False
        ys, xs = np.nonzero(changed)
        check(ys.size and ys.ptp() > 400 and xs.ptp() > 400,
              f"H, page {page}: a panel over the frame ({xs.ptp() if xs.size else 0}x"
              f"{ys.ptp() if ys.size else 0} px changed)")
        panel = full[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        inside = changed[ys.min():ys.max() + 1, xs.min():xs.max() + 1]

        def lines(mask, gap=2):  # bands of rows with text pixels, [first, last] row
            rows, out_ = np.flatnonzero(mask.any(axis=1)), []
            for r in rows:
                if out_ and r - out_[-1][1] <= gap:  # a glyph's thin rows, not a new line
                    out_[-1][1] = r
                else:
                    out_.append([r, r])
            return out_
        keys = lines(near(panel, (252, 232, 38), 60) & inside, gap=4)  # accent bar, title, keys
        what = lines(near(panel, (237, 240, 242), 60) & inside)
        # a description wrapped to a second line (E's list of kinds): that line is no key's;
        # whether it merges with the first at gap 2 depends on the font size the row count gives
        what = [w for w in what if any(k[0] <= w[1] and w[0] <= k[1] for k in keys[2:])]
        n_key_lines += len(keys) - 2
        n_what += len(what)
        pairs_ok &= len(keys) - 2 == len(what) and all(
            k[0] <= w[1] and w[0] <= k[1] for k, w in zip(keys[2:], what))
    # the overlay and --help show one list (keys_list: the fixed keys and the map kinds')
    usage = subprocess.run([a.app, "--help"], capture_output=True, text=True).stdout
    n_keys = len(usage.split("\nkeys:\n", 1)[1].split("\n\n", 1)[0].splitlines())
    check(n_key_lines == n_keys and n_what == n_keys and pairs_ok,
          f"the help panel lists every key over its {pages} page(s): {n_key_lines} keys in the "
          f"accent colour, {n_what} descriptions, each beside its key, for the {n_keys} keys of "
          f"--help")
    app.key("h", help=0)
    app.key("f", fullscreen=0)
    quit_app(app)


if __name__ == "__main__":
    sys.exit(main())
