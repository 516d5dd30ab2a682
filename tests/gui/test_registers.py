#!/usr/bin/python3
"""The window on a model with register tokens, at other input sizes, under Xvfb.

A random-weight DINOv2-with-registers checkpoint in timm's names (written by
tests/parity/test_families.py's generator, its register tokens aimed at the CLS
token's query in layer 1 so that they draw a visible share of its attention) on a
synthetic photo, so nothing from shared/ is needed:

  1. --size 224 (the checkpoint is trained at 518 px): the map covers the 16x16
     patches; left of the crop one bar per prefix token (CLS, reg1..reg4) and one
     for the patches. Layer 1: the trace's shares equal the CLS row of the
     attention vit_dump computes (mean of the heads), and each bar on the
     screenshot is as long as its share; rollout (R) gives the rolled-out row's.
  2. --size 224x336: a non-square input; the crop is drawn 3:2, and with the
     overlay off it is timm's eval crop of the photo (ResizeKeepRatio + centre crop).
  3. --whole: the whole photo, squashed to the input, not a centre crop.

    xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 test_registers.py \\
        --app build/vitlens --dump build/tests/parity/vit_dump --out DIR
Exits 0 on success, 1 on a failed check.
"""
import argparse
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "parity"))
import test_families as tf  # noqa: E402
from test_gui import (App, check, run_checks, diff, find_window, patch_means, quit_app, run,  # noqa: E402
                      save)
from test_parity import run_dump  # noqa: E402

ACCENT = (252, 232, 38)  # COL_ACCENT of app/render/render.c: the prefix tokens' bars
REG_AIM = (0.45, 0.38, 0.3, 0.2)  # how far each register's key points at the CLS query


def register_model(d):
    """DINOv2 ViT with 4 registers (timm names, trained at 518 px), whose registers'
    keys in block 0 point partly at the CLS token's query: reg1 .. reg4 then take
    about 39%, 3%, 23% and 0% of the CLS token's attention in layer 1."""
    f = tf.spec("dinov2_reg4_timm_224")
    g = torch.Generator().manual_seed(1)
    w = tf.random_timm(f, g)
    D = f["D"]
    x = torch.nn.functional.layer_norm(w["cls_token"][0, 0], (D,), w["blocks.0.norm1.weight"],
                                       w["blocks.0.norm1.bias"], 1e-6)
    qkv_w, qkv_b = w["blocks.0.attn.qkv.weight"], w["blocks.0.attn.qkv.bias"]
    u = qkv_w[D:2 * D].T @ (qkv_w[:D] @ x + qkv_b[:D])  # a token whose key lines up with q
    u = (u - u.mean()) / u.std()
    for i, a in enumerate(REG_AIM):
        w["reg_token"][0, i] = a * u + math.sqrt(1 - a * a) * torch.randn(D, generator=g)
    d.mkdir(parents=True, exist_ok=True)
    tf.write_safetensors(d / "model.safetensors", w, "F32")
    (d / "config.json").write_text(__import__("json").dumps(tf.config_json(f)))
    return d / "model.safetensors"


def trace_shares(app):
    """The prefix shares of the last frame: [("CLS", 0.0172), ("reg1", 0.3873), ...]."""
    out = []
    for kv in app.state["prefix"].split(","):
        name, v = kv.split(":")
        out.append((name, float(v)))
    return out


def measure_bars(img, app, n_rows):
    """Fractions of each bar's track that is accent-filled, top to bottom, read from
    the screenshot: a bar is a band of rows whose track spans the panel width."""
    x, y, w = app.image_rect()
    h = int(app.state["image_h"])
    region = img[y:y + h, max(0, x - 300):x].astype(np.int32)
    empty = np.array([0.085, 0.095, 0.115]) * 255  # COL_EMPTY: the unfilled track
    dim = np.array([0.62, 0.65, 0.69]) * 255       # COL_DIM: the patches' bar
    is_acc = np.abs(region - np.array(ACCENT)).sum(-1) < 30
    is_empty = np.abs(region - empty).sum(-1) < 12
    is_dim = np.abs(region - dim).sum(-1) < 30
    fill = is_acc | is_dim
    track = fill | is_empty
    # a bar row: a long horizontal run of track pixels
    width = track.sum(1)
    full = width.max()
    bar_rows = np.nonzero(width >= 0.9 * full)[0]
    groups, start = [], None
    for i, r in enumerate(bar_rows):
        if start is None:
            start = r
        if i + 1 == len(bar_rows) or bar_rows[i + 1] != r + 1:
            groups.append((start, r))
            start = None
    fracs = [float(fill[(a + b) // 2].sum()) / full for a, b in groups]
    check(len(fracs) == n_rows, f"{n_rows} bars left of the crop (found {len(fracs)})")
    return fracs, full


def cls_row(att, layer, rollout):
    """The CLS row of the view (mean of the heads), from vit_dump's att [L, H, T, T]."""
    A = att.astype(np.float64).mean(1)  # [L, T, T]
    if not rollout:
        return A[layer][0]
    v = np.eye(A.shape[-1])[0]
    for l in range(layer, -1, -1):
        Ah = 0.5 * A[l] + 0.5 * np.eye(A.shape[-1])
        Ah /= Ah.sum(-1, keepdims=True)
        v = v @ Ah
    return v


def test_bars(app, out, dump, model, photo):
    app.wait_line(lambda s: s.startswith("ready "), "ready")
    app.wait_state("first frame", busy=0, scene=1)
    app.wid = find_window(app)
    x, y, w = app.image_rect()
    check(w == int(app.state["image_h"]), f"a square 224 px input is drawn square ({w} px)")
    engine, cfg = run_dump(dump, ["--model", model, "--image", photo, "--size", "224x224",
                                  "--out", out / "dump224"])
    check(cfg["n_prefix"] == 5 and cfg["n_registers"] == 4 and cfg["grid_h"] == 16,
          f"vit_dump: 5 prefix tokens, 4 registers, 16x16 patches ({cfg['n_prefix']}, "
          f"{cfg['n_registers']}, {cfg['grid_h']}x{cfg['grid_w']})")
    app.key("Left", layer=0)
    for rollout in (0, 1):
        if rollout:
            app.key("r", kind="rollout")
        shares = trace_shares(app)
        names = [n for n, _ in shares]
        check(names == ["CLS", "reg1", "reg2", "reg3", "reg4"], f"prefix tokens named {names}")
        row = cls_row(engine["att"], 0, rollout)
        d = max(abs(s - row[i]) for i, (_, s) in enumerate(shares))
        kind = "rollout" if rollout else "attention"
        check(d < 1e-4, f"layer 1 {kind}: the shares {[round(s, 4) for _, s in shares]} are the "
              f"CLS row's prefix part from vit_dump (max diff {d:.1e})")
        img = app.shot()
        save(img, out / f"registers_{kind}.png")
        fracs, full = measure_bars(img, app, 6)
        want = [s for _, s in shares] + [1 - sum(s for _, s in shares)]
        err = max(abs(a - b) for a, b in zip(fracs, want))
        check(err <= 2.0 / full, f"{kind}: the bars are as long as the shares "
              f"({[round(f, 3) for f in fracs]} vs {[round(s, 3) for s in want]}, "
              f"{full} px = 100%)")
    app.key("r", kind="attention")
    reg = [s for n, s in trace_shares(app) if n.startswith("reg")]
    check(max(reg) > 0.2, f"layer 1: a register takes a visible share ({max(reg):.2f})")
    app.key("Right", layer=1)
    quit_app(app)


def test_nonsquare(app, out, photo, size, whole):
    app.wait_line(lambda s: s.startswith("ready "), "ready")
    app.wait_state("first frame", busy=0, scene=1)
    app.wid = find_window(app)
    x, y, w = app.image_rect()
    h = int(app.state["image_h"])
    want = size[1] / size[0]
    check(abs(w / h - want) < 0.01, f"{size[0]}x{size[1]} input drawn {w}x{h} px (w/h {w / h:.3f})")
    app.key("o", overlay=0)
    plain = app.crop(app.shot())
    save(plain, out / f"plain_{size[0]}x{size[1]}{'_whole' if whole else ''}.png")
    pil = Image.open(photo).convert("RGB")
    ref = tf.timm_eval_pil(pil, size, 1.0, "squash" if whole else "center")
    other = tf.timm_eval_pil(pil, size, 1.0, "center" if whole else "squash")
    ref = np.asarray(ref.resize((w, h), Image.BILINEAR)).astype(np.int16)
    other = np.asarray(other.resize((w, h), Image.BILINEAR)).astype(np.int16)
    d, d_other = (diff(patch_means(plain, 12), patch_means(r, 12)) for r in (ref, other))
    kind = "the whole photo, squashed" if whole else "timm's centre crop"
    check(d < 4 and d_other > 3 * d,
          f"overlay off: the crop is {kind} (patch means differ by {d:.1f}; "
          f"from the {'centre crop' if whole else 'whole photo'} by {d_other:.1f})")
    app.key("o", overlay=1)
    if not whole:
        explore_nonsquare(app, out, photo, size)
    quit_app(app)


PINK = np.array([255, 46, 140])  # the query patch's box (heatmap.frag.glsl)


def explore_nonsquare(app, out, photo, size):
    """The explorer on 16x24 patches with 5 prefix tokens: a click makes the patch
    under the mouse the query (token Np + r*gw + c), boxed there; the bars show that
    query's row (vit_dump's); the mask, the distance panel and the thumbnails (at the
    crop's 3:2) beside the bars, not over them."""
    Np, gh, gw = 5, size[0] // 14, size[1] // 14
    x, y, w = app.image_rect()
    h = int(app.state["image_h"])
    r, c = 3, 20
    px, py = x + int((c + 0.5) * w / gw), y + int((r + 0.5) * h / gh)
    run(["xdotool", "mousemove", "--window", app.wid, str(px), str(py), "click", "1"])
    app.wait_state("click on patch (3, 20)", query=Np + r * gw + c, hover=f"{r},{c}")
    img = app.shot()
    half = min(w // gw, h // gh) // 2
    box = img[py - half:py + half, px - half:px + half]
    check(np.abs(box - PINK).max(-1).__le__(40).mean() > 0.08, "the clicked patch is boxed")
    engine, _ = run_dump(app.dump, ["--model", app.model, "--image", photo, "--size",
                                    f"{size[0]}x{size[1]}", "--out", out / "dump224x336"])
    layer = int(app.state["layer"])
    row = engine["att"][layer].astype(np.float64).mean(0)[Np + r * gw + c]
    shares = trace_shares(app)
    d = max(abs(s - row[i]) for i, (_, s) in enumerate(shares))
    check(d < 1e-4, f"the bars show the query patch's row at the prefix tokens (max diff {d:.1e})")
    measure_bars(img, app, Np + 1)
    app.key("m", mask=1)
    check(int(app.state["kept"]) > 0, f"M: a mask of {app.state['kept']} patches")
    app.key("d", distance=1)
    pnl_x, pnl_w = (int(v) for v in app.state["panel"].split(","))
    x, y, w = app.image_rect()  # the crop makes room for the panel
    check(pnl_w > 100 and pnl_x >= x + w and x > 0, f"the distance panel ({pnl_x}) is right of the crop")
    app.key("a", overview=1)
    cw, ch = (int(v) for v in app.state["cells"].split(",")[2:4])
    check(abs(cw / ch - 1.5) < 0.05, f"A: thumbnails drawn 3:2 ({cw}x{ch} px)")
    save(app.shot(), out / "explore_224x336_heads.png")
    app.key("a", overview=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--dump", required=True, help="tests/parity's vit_dump")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    for tool in ("xdotool", "import"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} not installed (apt-get install xdotool imagemagick)")
            return 1
    if not os.environ.get("DISPLAY"):
        print("FAIL: no DISPLAY: run under xvfb-run")
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    model = register_model(out / "dinov2-reg4")
    photo = tf.synthetic_photos(out)[0]  # 301x187
    env = dict(os.environ, VITLENS_TRACE="1")
    runs = [
        ("registers: bars per prefix token", ["--size", "224"],
         lambda app: test_bars(app, out, args.dump, model, photo)),
        ("non-square input 224x336", ["--size", "224x336"],
         lambda app: test_nonsquare(app, out, photo, (224, 336), False)),
        ("--whole", ["--size", "224", "--whole"],
         lambda app: test_nonsquare(app, out, photo, (224, 224), True)),
    ]
    for name, opts, fn in runs:
        print(f"---- {name}", flush=True)
        app = App([args.app, "--model", str(model), *opts, str(photo)], env)
        app.dump, app.model = args.dump, str(model)
        if not run_checks(app, fn):
            return 1
    print("gui registers: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
