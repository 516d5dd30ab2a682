#!/usr/bin/python3
"""Procedural labelled scenes for vitlens's built-in model.

Each scene is a cluttered, textured background with distractor strokes and
exactly one object whose shape is the label: the model has to find the object
to classify the scene, so its attention has something to point at. The object's
mask is returned with the image (for the pointing game).

Deterministic: scene i of split s depends only on (seed, split, i), so a scene
can be regenerated alone and the data set does not change with its size.

Usage (writes PNGs + masks + labels.txt):
    /usr/bin/python3 tools/gen_scenes.py --split test --count 16 --out DIR
"""
import argparse
import math
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ["circle", "square", "triangle", "star", "cross", "ring"]
SPLITS = {"train": 0, "val": 1, "test": 2}
SIZE = 96  # px, the model's input side
SS = 4     # supersampling factor for anti-aliased shapes


def _polygon(kind, cx, cy, r, rot):
    """Vertices of a shape of radius r (px) centred at (cx, cy), rotated by rot (rad)."""
    if kind == "square":
        pts = [(math.cos(rot + math.pi / 4 + k * math.pi / 2) * r,
                math.sin(rot + math.pi / 4 + k * math.pi / 2) * r) for k in range(4)]
    elif kind == "triangle":
        pts = [(math.cos(rot + k * 2 * math.pi / 3) * r,
                math.sin(rot + k * 2 * math.pi / 3) * r) for k in range(3)]
    elif kind == "star":
        pts = []
        for k in range(10):
            rr = r if k % 2 == 0 else r * 0.42
            a = rot + k * math.pi / 5
            pts.append((math.cos(a) * rr, math.sin(a) * rr))
    elif kind == "cross":
        w = r * 0.36
        base = [(-w, -r), (w, -r), (w, -w), (r, -w), (r, w), (w, w),
                (w, r), (-w, r), (-w, w), (-r, w), (-r, -w), (-w, -w)]
        c, s = math.cos(rot), math.sin(rot)
        pts = [(x * c - y * s, x * s + y * c) for x, y in base]
    else:
        raise ValueError(kind)
    return [(cx + x, cy + y) for x, y in pts]


def _draw_shape(draw, kind, cx, cy, r, rot, fill):
    if kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif kind == "ring":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
        ri = r * 0.55
        draw.ellipse([cx - ri, cy - ri, cx + ri, cy + ri], fill=0)
    else:
        draw.polygon(_polygon(kind, cx, cy, r, rot), fill=fill)


def _background(rng):
    """Smooth colour field + blotches + fine texture, uint8 [S, S, 3]."""
    n = SIZE
    # low-frequency colour field: bilinear upsampling of a coarse random grid
    g = rng.integers(3, 7)
    coarse = rng.uniform(0, 255, size=(g, g, 3)).astype(np.float32)
    field = np.asarray(Image.fromarray(coarse.astype(np.uint8)).resize((n, n), Image.BILINEAR),
                       dtype=np.float32)
    img = Image.fromarray(field.astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(rng.integers(4, 10)):  # soft blotches
        x, y = rng.uniform(0, n, 2)
        rr = rng.uniform(4, 18)
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        draw.ellipse([x - rr, y - rr * rng.uniform(0.4, 1.0), x + rr, y + rr], fill=col)
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(1.5, 3.5)))
    arr = np.asarray(img, dtype=np.float32)
    arr += rng.normal(0, rng.uniform(4, 14), size=arr.shape)  # grain
    return np.clip(arr, 0, 255)


def _distractors(rng, arr):
    """Strokes and arcs: clutter that is never one of the classes."""
    img = Image.fromarray(arr.astype(np.uint8))
    big = img.resize((SIZE * SS, SIZE * SS), Image.NEAREST)
    draw = ImageDraw.Draw(big)
    for _ in range(rng.integers(3, 8)):
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        w = int(rng.integers(1, 3) * SS)
        if rng.random() < 0.5:
            pts = [tuple(rng.uniform(-10, SIZE + 10, 2) * SS) for _ in range(rng.integers(2, 4))]
            draw.line(pts, fill=col, width=w)
        else:
            x, y = rng.uniform(0, SIZE, 2) * SS
            rr = rng.uniform(6, 20) * SS
            a0 = rng.uniform(0, 360)
            draw.arc([x - rr, y - rr, x + rr, y + rr], a0, a0 + rng.uniform(40, 200), fill=col,
                     width=w)
    return np.asarray(big.resize((SIZE, SIZE), Image.BOX), dtype=np.float32)


def scene(seed, split, index):
    """One scene: (rgb uint8 [S, S, 3], label int, mask bool [S, S], box (x0, y0, x1, y1))."""
    rng = np.random.default_rng([seed, SPLITS[split], index])
    label = int(rng.integers(len(CLASSES)))
    arr = _distractors(rng, _background(rng))

    r = rng.uniform(9, 20)          # object radius, px
    cx, cy = rng.uniform(r + 2, SIZE - r - 2, 2)
    rot = rng.uniform(0, 2 * math.pi)
    mask_img = Image.new("L", (SIZE * SS, SIZE * SS), 0)
    _draw_shape(ImageDraw.Draw(mask_img), CLASSES[label], cx * SS, cy * SS, r * SS, rot, 255)
    alpha = np.asarray(mask_img.resize((SIZE, SIZE), Image.BOX), dtype=np.float32) / 255.0

    # object colour: far from the mean colour under it, so it is visible
    under = arr[alpha > 0.5].mean(axis=0) if (alpha > 0.5).any() else arr.mean(axis=(0, 1))
    for _ in range(20):
        col = rng.integers(0, 256, 3).astype(np.float32)
        if np.abs(col - under).sum() > 200:
            break
    shade = 1.0 + rng.normal(0, 0.04, size=(SIZE, SIZE, 1))  # slight texture on the object
    obj = np.clip(col[None, None, :] * shade, 0, 255)
    out = arr * (1 - alpha[..., None]) + obj * alpha[..., None]
    rgb = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    mask = alpha > 0.5
    ys, xs = np.nonzero(mask)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    return rgb, label, mask, box


def batch(seed, split, start, count):
    """Scenes [start, start + count): images uint8 [n, S, S, 3], labels int64 [n], masks bool [n, S, S]."""
    imgs = np.empty((count, SIZE, SIZE, 3), np.uint8)
    labels = np.empty(count, np.int64)
    masks = np.empty((count, SIZE, SIZE), bool)
    for i in range(count):
        imgs[i], labels[i], masks[i], _ = scene(seed, split, start + i)
    return imgs, labels, masks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=SPLITS, default="test")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "scenes.txt"), "w") as f:
        f.write("# file label class box_x0 box_y0 box_x1 box_y1\n")
        for i in range(a.start, a.start + a.count):
            rgb, label, mask, box = scene(a.seed, a.split, i)
            name = f"{a.split}_{i:05d}_{CLASSES[label]}"
            Image.fromarray(rgb).save(os.path.join(a.out, name + ".png"))
            Image.fromarray(mask.astype(np.uint8) * 255).save(os.path.join(a.out, name + "_mask.png"))
            f.write(f"{name}.png {label} {CLASSES[label]} {box[0]} {box[1]} {box[2]} {box[3]}\n")


if __name__ == "__main__":
    main()
