#!/usr/bin/python3
"""The compare view in the window (issue 36): two panes, one patch cursor.

On the built-in model (12x12 patches of 8 px, the whole 96 px photo) against a random
timm ViT of another grid, depth and crop (tests/parity/test_families.py's vit_timm: 5x5
patches of 16 px, 2 layers, 2 heads, timm's centre crop of 90 %), written here:
- --compare MODEL2 opens the compare view (the trace's "compare ready"), and each pane's
  map is the single view's bit for bit: pane A's hash equals the built-in model's single
  window's "maps ... map=" hash, pane B's the one a single window on MODEL2 alone gives for
  the same view (its last layer, the mean of its heads);
- the screenshot shows two panes: both crops' rectangles (the trace's pane0= / pane1=,
  framebuffer px) hold a picture, the gap between them the background;
- the cursor: the pointer over patch pa of pane A boxes, in pane B, the patch at the same
  place of the photo, computed here from the trace's crops and grids (pa's centre ->
  the photo through A's crop -> B's crop -> B's grid; -1 where B's crop does not reach, an
  edge patch of A); the amber box is in the screenshot there; and the other way round; a
  click there makes A's patch at that place the query, B's query A's mapped back;
- Left: pane A one layer down, pane B at the same relative depth (round((la + 0.5) Lb / La -
  0.5)); ; unlinks them (Left moves the pane under the pointer only), ; links them again;
- Esc leaves: no compare lines any more, the status line the single view's; \\ opens it
  again with the same second model, \\ again leaves; every partial redraw of that run (the
  boxes moving, the panes) equals the whole frame (VITLENS_CHECK_REDRAW);
- --compare-image IMAGE2 (the same model, a second photo): three panes (one grid: A - B),
  Spearman and the top-10 % IoU finite on the status line; 1 (the top-1 class explained):
  both panes show Chefer et al.'s map, pane B's from the worker's backward pass on its own
  Scene, equal bit for bit to the single window's with --class of that class on IMAGE2;
- --compare with a broken MODEL2 (a file that is not safetensors), or a name no folder holds:
  the error on the error line naming it, the single view with pane A's map unchanged, no
  compare view; --model MODEL2 --compare builtin: the panes the other way round.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_compare.py \\
      --app build/vitlens --out build/tests/gui/compare
Exits 0, 1 on a failed check.
"""
import argparse
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
from test_gui import App, check, quit_app, run, run_checks, save  # noqa: E402

BOX = (255, 200, 0)  # compare.c's COL_BOX: the mapped patch
BG = (24, 24, 24)    # the picture's background between the panes


class CompareApp(App):
    """The app, with the trace's compare lines parsed: maps (each pane's view and hash)
    and frame (the panes' places and the cursor)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.cmp_maps, self.cmp_frame, self.single_maps = None, None, None
        self.ready = False
        self.mismatch = []  # VITLENS_CHECK_REDRAW: partial frames that differ from whole ones

    def take(self, line):
        if line.startswith("compare maps "):
            kv = dict(t.split("=", 1) for t in line.split()[2:])
            for p in ("a", "b"):
                fields = re.findall(r"(\w+):([^:]+?)(?=,\w+:|$)", kv[p])
                kv[p] = dict(fields)
            self.cmp_maps = kv
        elif line.startswith("compare frame "):
            self.cmp_frame = dict(t.split("=", 1) for t in line.split()[2:])
        elif line.startswith("maps by="):
            self.single_maps = dict(t.split("=", 1) for t in line.split()[1:])
        elif line.startswith("compare ready"):
            self.ready = True
        taken = super().take(line)
        if taken and int(self.state.get("mismatch", "-1")) > 0:
            self.mismatch.append((self.frame, self.state["mismatch"]))
        return taken


def ints(s):
    return [int(float(v)) for v in s.split(",")]


def mapped(pa, a, b, crops=True, margin=False):
    """compare_patch, from the trace's fields: the centre of patch pa of a's grid, through
    a's crop onto a's photo, the same relative place of b's photo, b's crop, b's grid.
    crops False: as if both crops were the whole photo (the mistake the test must tell
    apart); margin: None when the place is within 2 % of a patch's edge in b (a rounding
    there could go either way)."""
    gh, gw = ints(a["grid"])
    cx, cy, cw, ch = ints(a["crop"])
    sw, sh = ints(a["src"])
    if not crops:
        cx, cy, cw, ch = 0, 0, sw, sh
    u = cx + (pa % gw + 0.5) / gw * cw
    v = cy + (pa // gw + 0.5) / gh * ch
    bgh, bgw = ints(b["grid"])
    bx, by, bw, bh = ints(b["crop"])
    bsw, bsh = ints(b["src"])
    if not crops:
        bx, by, bw, bh = 0, 0, bsw, bsh
    x = (u / sw * bsw - bx) / bw
    y = (v / sh * bsh - by) / bh
    if margin and min(abs(t - round(t)) for t in (x * bgw, y * bgh)) < 0.02:
        return None
    if not (0 <= x < 1 and 0 <= y < 1):
        return -1
    return int(y * bgh) * bgw + int(x * bgw)


def rel_layer(la, La, Lb):
    """compare_layer as compare.h states it: round((la + 0.5) Lb / La - 0.5), halves away
    from 0, clamped."""
    t = (la + 0.5) * Lb / La - 0.5
    r = math.floor(abs(t) + 0.5) * (1 if t >= 0 else -1)
    return min(max(r, 0), Lb - 1)


def pane_rect(app, i):
    x, y, w, h = (float(v) for v in app.cmp_frame[f"pane{i}"].split(","))
    return x, y, w, h


def hover(app, pane, patch, grid):
    """The pointer on patch `patch`'s centre of pane `pane` (grid gh, gw); the compare
    frame that shows it."""
    x, y, w, h = pane_rect(app, pane)
    gh, gw = grid
    px = x + (patch % gw + 0.5) * w / gw
    py = y + (patch // gw + 0.5) * h / gh
    run(["xdotool", "mousemove", "--window", app.wid, str(int(px)), str(int(py))])
    app.wait_line(lambda s: s.startswith("compare frame ") and
                  app.cmp_frame["hover"] == f"{pane},{patch}", f"hover on pane {pane} {patch}")
    return int(app.cmp_frame["box"])


def box_in_shot(app, img, pane, patch, grid):
    """The share of the 2 px outline of patch `patch` of pane `pane` in the box's amber."""
    x, y, w, h = pane_rect(app, pane)
    gh, gw = grid
    x0, x1 = x + (patch % gw) * w / gw, x + (patch % gw + 1) * w / gw
    y0, y1 = y + (patch // gw) * h / gh, y + (patch // gw + 1) * h / gh
    top = img[int(y0) + 1, int(x0) + 3:int(x1) - 3]
    left = img[int(y0) + 3:int(y1) - 3, int(x0) + 1]
    edge = np.concatenate([top, left])
    return float((np.abs(edge - np.array(BOX)).max(axis=-1) <= 40).mean())


def wait_compare(app, what, first=False, **want):
    """A compare maps line with these fields (first: or the one read already), then a
    compare frame after it."""
    if not (first and app.cmp_maps):
        app.wait_line(lambda s: s.startswith("compare maps ") and all(
            app.cmp_maps[k] == str(v) for k, v in want.items()), what)
    elif app.cmp_frame:
        return
    app.wait_line(lambda s: s.startswith("compare frame "), what + ": its frame")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from test_families import spec, write_family
    m2 = out / "vit_timm"
    write_family(spec("vit_timm"), m2, seed=3)
    model2 = str(m2 / "model.safetensors")
    broken = out / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    demo = Path(__file__).resolve().parents[2] / "assets" / "default" / "demo"
    photos = sorted(str(p) for p in demo.glob("*.png"))
    photo, photo2 = photos[0], photos[3]
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ASSETS", None)
    single = {}

    def single_view(model):
        """The single window's map hash for the default view (last layer, mean)."""
        def go(app):
            app.start(photo)
            single[model] = app.single_maps["map"]
            quit_app(app)
        argv = [a.app] + (["--model", model] if model else []) + [photo]
        return run_checks(CompareApp(argv, env), go)

    ok = single_view(None) and single_view(model2)
    print(f"     single views: built-in {single.get(None)}, vit_timm {single.get(model2)}")

    def compare(app):
        app.start(photo)
        if not app.ready:
            app.wait_line(lambda s: s.startswith("compare ready"), "compare ready")
        wait_compare(app, "the compare view's first maps", first=True)
        A, B = app.cmp_maps["a"], app.cmp_maps["b"]
        La, Lb = int(A["L"]), int(B["L"])
        check(A["map"] == single[None], f"pane A's map is the single view's bit for bit "
              f"({A['map']} against {single[None]})")
        check(B["map"] == single[model2] and int(B["layer"]) == Lb - 1,
              f"pane B's map is the single window's on MODEL2 alone ({B['map']} against "
              f"{single[model2]}, layer {B['layer']} of {Lb})")
        check(app.cmp_maps["panes"] == "2" and A["grid"] != B["grid"],
              f"two panes: the grids differ ({A['grid']} against {B['grid']}), no A - B")
        st = app.wait_line(lambda s: s.startswith("status compare"), "the compare status line")
        want = "grids %sx%s and %sx%s: no A \u2212 B pane" % (tuple(A["grid"].split(",")) +
                                                            tuple(B["grid"].split(",")))
        check(want in st and "Spearman" in st, f"the status line says so, with Spearman "
              f"and IoU on B resampled on A's grid: {st[7:]}")
        app.wait_state("a settled frame", busy=0)
        img = app.shot()
        save(img, out / "compare.png")
        x0, y0, w0, h0 = pane_rect(app, 0)
        x1, y1, w1, h1 = pane_rect(app, 1)
        p0 = img[int(y0) + 2:int(y0 + h0) - 2, int(x0) + 2:int(x0 + w0) - 2]
        p1 = img[int(y1) + 2:int(y1 + h1) - 2, int(x1) + 2:int(x1 + w1) - 2]
        gap = img[int(y0) + 2:int(y0 + h0) - 2, int(x0 + w0) + 2:int(x1) - 2]
        check(x1 > x0 + w0 and p0.std() > 10 and p1.std() > 10 and gap.size > 0 and
              np.abs(gap - np.array(BG)).max() <= 8,
              f"the screenshot shows two panes side by side (std {p0.std():.0f}, "
              f"{p1.std():.0f}; the gap between them the background: "
              f"{np.abs(gap - np.array(BG)).max() if gap.size else 'none'})")
        ga, gb = ints(A["grid"]), ints(B["grid"])
        # the cursor: a patch whose box the crops move (mapped as if both crops were the
        # whole photo it would land elsewhere), and one outside B's 90 % crop if any
        moved = [p for p in range(ga[0] * ga[1]) if mapped(p, A, B, margin=True) not in
                 (None, -1, mapped(p, A, B, crops=False))]
        outside = [p for p in range(ga[0] * ga[1]) if mapped(p, A, B) == -1]
        check(moved, f"a patch of A that the crops map elsewhere ({len(moved)})")
        for pa in [moved[len(moved) // 2]] + outside[:1]:
            want = mapped(pa, A, B)
            got = hover(app, 0, pa, ga)
            check(got == want, f"pane A patch {pa}: the box in pane B at patch {got} "
                  f"(computed here: {want})")
            if want >= 0:
                img = app.shot()
                share = box_in_shot(app, img, 1, want, gb)
                save(img, out / "compare_cursor.png")
                check(share > 0.8, f"the amber box drawn on pane B's patch {want} "
                      f"({share:.0%} of its outline)")
        pb = 2 * gb[1] + 3
        got = hover(app, 1, pb, gb)
        check(got == mapped(pb, B, A), f"pane B patch {pb}: the box in pane A at {got} "
              f"(computed here: {mapped(pb, B, A)})")
        # a click there: pane A's patch at that place the query, pane B's query at A's place
        run(["xdotool", "click", "1"])
        wait_compare(app, "the click's query", linked=1)
        qa, qb = int(app.cmp_maps["a"]["query"]), int(app.cmp_maps["b"]["query"])
        pa = mapped(pb, B, A)
        want_b = int(B["np"]) + mapped(pa, A, B) if mapped(pa, A, B) >= 0 else 0
        check(qa == int(A["np"]) + pa and qb == want_b,
              f"a click on pane B's patch {pb}: queries A {qa}, B {qb} (want "
              f"{int(A['np']) + pa}, {want_b})")
        app.key("c")  # back to the CLS token
        wait_compare(app, "C", linked=1)
        la = int(A["layer"])
        app.key("Left")
        wait_compare(app, "Left", panes=2)
        A, B = app.cmp_maps["a"], app.cmp_maps["b"]
        check(int(A["layer"]) == la - 1 and int(B["layer"]) == rel_layer(la - 1, La, Lb),
              f"Left: pane A at layer {A['layer']}, pane B at {B['layer']} (want "
              f"{la - 1}, {rel_layer(la - 1, La, Lb)})")
        lb = int(B["layer"])
        app.key("semicolon")
        wait_compare(app, "; (apart)", linked=0)
        hover(app, 0, 0, ga)  # apart, the arrows move the pane under the mouse
        app.key("Left")
        wait_compare(app, "Left apart over pane A", linked=0)
        A, B = app.cmp_maps["a"], app.cmp_maps["b"]
        check(int(A["layer"]) == la - 2 and int(B["layer"]) == lb,
              f"apart, over pane A: Left moves pane A only (A {A['layer']}, B {B['layer']}, "
              f"want {la - 2}, {lb})")
        hover(app, 1, 0, gb)
        app.key("Left")
        wait_compare(app, "Left apart over pane B", linked=0)
        A, B = app.cmp_maps["a"], app.cmp_maps["b"]
        check(int(A["layer"]) == la - 2 and int(B["layer"]) == lb - 1,
              f"apart, over pane B: Left moves pane B only (A {A['layer']}, B {B['layer']}, "
              f"want {la - 2}, {lb - 1})")
        app.key("semicolon")
        wait_compare(app, "; (linked)", linked=1)
        app.key("Escape")
        app.wait_line(lambda s: s == "compare left", "compare left")
        status = app.wait_line(lambda s: s.startswith("status "), "the next status line")
        app.cmp_frame = None
        app.key("g")  # a frame after Esc: the single view's, no compare frame line
        app.wait_line(lambda s: s.startswith("status "), "a frame")
        check(app.cmp_frame is None and not status.startswith("status compare"),
              f"Esc: back to the single view ({status[:60]})")
        app.key("backslash")  # \\: the compare view again, pane B as it was (no new job)
        app.wait_line(lambda s: s.startswith("compare frame "), "\\ reopens the compare view")
        status = app.wait_line(lambda s: s.startswith("status "), "its status line")
        check(status.startswith("status compare"), f"\\: the compare view again ({status[:40]})")
        app.key("backslash")
        app.wait_line(lambda s: s == "compare left", "\\ leaves it")
        check(not app.mismatch, f"every partial redraw (the cursor's boxes, the panes) equals "
              f"the whole frame (VITLENS_CHECK_REDRAW; frames, pixels: {app.mismatch[:5]})")
        quit_app(app)

    ok &= run_checks(CompareApp([a.app, "--compare", model2, photo],
                                dict(env, VITLENS_CHECK_REDRAW="1")), compare)

    def compare_image(app):
        app.start(photo)
        if not app.ready:
            app.wait_line(lambda s: s.startswith("compare ready"), "compare ready")
        wait_compare(app, "the compare view of two photos", first=True)
        m = app.cmp_maps
        check(m["panes"] == "3" and m["diff"] == "1",
              f"one model, two photos: three panes (A - B on the one grid): {m['panes']}")
        sp, iou = float(m["spearman"]), float(m["iou"])
        check(-1 <= sp <= 1 and 0 <= iou <= 1, f"Spearman {sp}, IoU {iou} finite")
        app.wait_line(lambda s: s.startswith("status compare") and "Spearman" in s,
                      "the status line's Spearman")
        app.wait_state("settled", busy=0)
        save(app.shot(), out / "compare_image.png")
        # a class-specific kind: pane B's maps from the worker's backward pass on its Scene
        app.key("1")
        app.wait_line(lambda s: s.startswith("compare maps ") and all(
            app.cmp_maps[p]["kind"] == "chefer" and app.cmp_maps[p]["map"] != "00000000"
            for p in ("a", "b")), "both panes' Chefer et al. maps")
        explained.update(target=app.cmp_maps["b"]["target"], hash=app.cmp_maps["b"]["map"])
        quit_app(app)

    explained = {}
    ok &= run_checks(CompareApp([a.app, "--compare-image", photo2, photo], env), compare_image)

    def single_class(app):
        app.start(photo2)
        if (app.single_maps or {}).get("kind") != "chefer":
            app.wait_line(lambda s: s.startswith("maps by=") and "kind=chefer" in s,
                          "the single window's Chefer et al. map")
        check(app.single_maps["map"] == explained.get("hash"),
              f"pane B's class-specific map (class {explained.get('target')}) is the single "
              f"window's on IMAGE2 bit for bit ({explained.get('hash')} against "
              f"{app.single_maps['map']})")
        quit_app(app)

    if explained:
        ok &= run_checks(CompareApp([a.app, "--class", explained["target"], photo2], env),
                         single_class)

    def compare_broken(app):
        app.start(photo)
        app.wait_error(lambda e: e.startswith("compare:") and "broken.safetensors" in e,
                       "the broken model's error")
        app.key("g")
        app.wait_line(lambda s: s.startswith("status "), "a frame")
        check(app.cmp_frame is None and app.cmp_maps is None,
              "a broken MODEL2: no compare view")
        check(app.single_maps["map"] == single[None] and app.state.get("error") == "1",
              f"pane A as it was ({app.single_maps['map']}), the error on the error line")
        quit_app(app)

    ok &= run_checks(CompareApp([a.app, "--compare", str(broken), photo], env), compare_broken)

    def compare_builtin(app):
        app.start(photo)
        if not app.ready:
            app.wait_line(lambda s: s.startswith("compare ready"), "compare ready")
        wait_compare(app, "MODEL2 builtin", first=True)
        check(app.cmp_maps["b"]["map"] == single[None] and app.cmp_maps["a"]["map"] ==
              single[model2], "--model MODEL2 --compare builtin: the panes swapped, each the "
              "single window's map bit for bit")
        quit_app(app)

    ok &= run_checks(CompareApp([a.app, "--model", model2, "--compare", "builtin", photo], env),
                     compare_builtin)

    def compare_unknown(app):
        app.start(photo)
        app.wait_error(lambda e: e.startswith("compare:") and "no-such-model" in e,
                       "the unknown MODEL2's error")
        app.key("g")
        app.wait_line(lambda s: s.startswith("status "), "a frame")
        check(app.cmp_frame is None and app.single_maps["map"] == single[None],
              "an unknown MODEL2 name: pane A alone, as it was")
        quit_app(app)

    ok &= run_checks(CompareApp([a.app, "--compare", "no-such-model", photo], env),
                     compare_unknown)
    print("ok" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
