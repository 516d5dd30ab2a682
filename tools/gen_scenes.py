#!/usr/bin/python3
"""Procedural labelled scenes for vitlens's built-in model.

Each scene is a cluttered, textured background with distractor strokes and
exactly one object whose shape is the label: the model has to find the object
to classify the scene, so its attention has something to point at. The object's
mask is returned with the image (for the pointing game).

Deterministic: scene i of split s depends only on (seed, split, i, level), so
a scene can be regenerated alone and the data set does not change with its size.
`level` in [0, 1] scales the clutter (1: the full scenes, used for every
held-out split; 0: one flat colour and a larger object; training starts low,
see train_default.py).

Two-object scenes (scene_two, --two; TWO_DEFINITION) hold two shapes of
different classes, apart, each with its mask: for class-specific explanations
(tests/explain). Their own random stream; the one-object scenes do not change.

Usage (writes DIR/NAME.png, DIR/NAME_mask.png and DIR/scenes.txt; with --two,
NAME_mask0.png and NAME_mask1.png):
    /usr/bin/python3 tools/gen_scenes.py --split test --count 16 --out DIR
    /usr/bin/python3 tools/gen_scenes.py --two --split test --count 16 --out DIR
"""
import argparse
import math
import os
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ["circle", "square", "triangle", "star", "cross", "ring"]
SPLITS = {"train": 0, "val": 1, "test": 2}
SIZE = 96  # px, the model's input side
SS = 4     # supersampling factor for anti-aliased shapes
R_MIN, R_MAX = 20, 32  # object radius range, px (at level 1)
# Two-object scenes (scene_two, --two): smaller objects, so that two fit apart.
R2_MIN, R2_MAX = 16, 22  # object radius range, px
EXTENT = 1.07  # a shape's farthest point from its centre, in radii (the cross's corners: 1.063)
GAP = 2        # px, at least, between the two objects' EXTENT-circles
TWO_STREAM = 2  # the last word of scene_two's seed: its scenes are not scene()'s

# What a scene is, for the model card (tools/eval_default.py).
DATA_DEFINITION = f"""\
a background of a smooth random colour field (bilinear from a 3×3 to 6×6 grid),
4–9 soft blotches of random colour (blurred ellipses), Gaussian blur σ 1.5–3.5 px
and grain (σ 4–14 of 255); then 3–7 distractor strokes (polylines of 2–3 points
and circular arcs of 40–200°, 1–2 px wide, random colours) that are never one
of the classes; then exactly one object, the label: one of {", ".join(CLASSES)},
radius {R_MIN}–{R_MAX} px, uniformly random centre (fully inside), rotation and colour
(the first of up to 20 random colours at least 200 away, in L1 over 0–765, from
the mean colour under the object; 4 % shading noise), anti-aliased (4×
supersampling). The object's mask is its anti-aliased coverage > 0.5. Labels
are uniform over the classes."""

# What a two-object scene is (scene_two).
TWO_DEFINITION = f"""\
the same background and distractor strokes as a one-object scene, then two
objects of two different classes (the ordered pair uniform over the 30), each
drawn as the one object is (rotation, colour far from the mean colour under it,
shading, anti-aliasing), radius {R2_MIN}–{R2_MAX} px (smaller, so that two fit), both fully
inside and apart: the circles of {EXTENT} radii around their centres (every shape
fits in one) at least {GAP} px from each other, so masks and anti-aliased edges
never touch. Centres and radii drawn again until they fit."""


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


def _background(rng, level):
    """Smooth colour field + blotches + blur + grain, float32 [S, S, 3]."""
    n = SIZE
    # low-frequency colour field: bilinear upsampling of a coarse random grid
    g = rng.integers(3, 7)
    coarse = rng.integers(0, 256, size=(g, g, 3), dtype=np.uint8)
    img = Image.fromarray(coarse).resize((n, n), Image.BILINEAR)
    draw = ImageDraw.Draw(img)
    for _ in range(int(round(level * rng.integers(4, 10)))):  # soft blotches
        x, y = rng.uniform(0, n, 2)
        rr = rng.uniform(4, 18)
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        draw.ellipse([x - rr, y - rr * rng.uniform(0.4, 1.0), x + rr, y + rr], fill=col)
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(1.5, 3.5)))
    arr = np.asarray(img, dtype=np.float32)
    if level < 1:  # contrast: a flat colour at level 0
        m = arr.mean(axis=(0, 1))
        arr = m + np.float32(level) * (arr - m)
    grain = level * rng.uniform(4, 14)
    return arr + rng.standard_normal(arr.shape, dtype=np.float32) * np.float32(grain)


def _distractors(rng, arr, level):
    """Strokes and arcs: clutter that is never one of the classes."""
    img = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8))
    big = img.resize((SIZE * SS, SIZE * SS), Image.NEAREST)
    draw = ImageDraw.Draw(big)
    for _ in range(int(round(level * rng.integers(3, 8)))):
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


def _paint(rng, arr, kind, cx, cy, r):
    """Paint one object of shape `kind`, radius r px, centred at (cx, cy), on arr
    (float32 [S, S, 3]): rotation, colour and shading drawn from rng.
    Returns (float32 [S, S, 3], mask bool [S, S], box (x0, y0, x1, y1))."""
    rot = rng.uniform(0, 2 * math.pi)
    mask_img = Image.new("L", (SIZE * SS, SIZE * SS), 0)
    _draw_shape(ImageDraw.Draw(mask_img), kind, cx * SS, cy * SS, r * SS, rot, 255)
    alpha = np.asarray(mask_img.resize((SIZE, SIZE), Image.BOX), dtype=np.float32) / 255.0
    mask = alpha > 0.5

    # object colour: far from the mean colour under it, so it is visible
    under = arr[mask].mean(axis=0) if mask.any() else arr.mean(axis=(0, 1))
    for _ in range(20):
        col = rng.integers(0, 256, 3).astype(np.float32)
        if np.abs(col - under).sum() > 200:
            break
    shade = 1.0 + 0.04 * rng.standard_normal((SIZE, SIZE, 1), dtype=np.float32)  # object texture
    a = alpha[..., None]
    out = arr * (1 - a) + (col * shade) * a
    ys, xs = np.nonzero(mask)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    return out, mask, box


def scene(seed, split, index, level=1.0):
    """One scene: (rgb uint8 [S, S, 3], label int, mask bool [S, S], box (x0, y0, x1, y1)).
    level in [0, 1] scales the clutter (background contrast, blotches, grain,
    strokes) and, below 1, makes the object larger; 1 is the full data definition."""
    rng = np.random.default_rng([seed, SPLITS[split], index])
    label = int(rng.integers(len(CLASSES)))
    arr = _distractors(rng, _background(rng, level), level)

    r = rng.uniform(R_MIN + (R_MAX - R_MIN) / 2 * (1 - level), R_MAX)  # object radius, px
    cx, cy = rng.uniform(r + 2, SIZE - r - 2, 2)
    out, mask, box = _paint(rng, arr, CLASSES[label], cx, cy, r)
    rgb = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return rgb, label, mask, box


def scene_two(seed, split, index, level=1.0, without=False):
    """One two-object scene (TWO_DEFINITION): (rgb uint8 [S, S, 3], labels (a, b)
    of two different classes, masks bool [2, S, S] (a's object, then b's; disjoint),
    boxes ((x0, y0, x1, y1), (x0, y0, x1, y1))). Its own random stream: scene i
    here is not scene i of scene(). without=True appends rgb uint8 [2, S, S, 3]:
    the same scene without object 0, without object 1 (every random draw the same,
    the background showing where the object was): for occlusion tests."""
    rng = np.random.default_rng([seed, SPLITS[split], index, TWO_STREAM])
    a = int(rng.integers(len(CLASSES)))
    b = (a + 1 + int(rng.integers(len(CLASSES) - 1))) % len(CLASSES)  # uniform over pairs
    bg = _distractors(rng, _background(rng, level), level)
    for _ in range(100000):  # rejection: both fully inside, EXTENT-circles GAP px apart
        r = rng.uniform(R2_MIN, R2_MAX, 2)
        lo, hi = EXTENT * r + 1, SIZE - EXTENT * r - 1
        c = rng.uniform(lo[:, None], hi[:, None], (2, 2))  # [object, (x, y)]
        if np.hypot(*(c[0] - c[1])) >= EXTENT * (r[0] + r[1]) + GAP:
            break
    else:
        raise RuntimeError(f"scene_two {split} {index}: no placement found")
    # Each object painted alone on the background: the pixels they touch (their
    # anti-aliased edges included) are GAP px apart, so the scene takes each pixel
    # from the one that changed it, the same as painting one after the other.
    masks, boxes, alone = np.empty((2, SIZE, SIZE), bool), [], []
    for k, label in enumerate((a, b)):
        out, masks[k], box = _paint(rng, bg, CLASSES[label], c[k, 0], c[k, 1], r[k])
        alone.append(out)
        boxes.append(box)
    touched = alone[0] != bg
    assert not (touched & (alone[1] != bg)).any()
    both = np.where(touched, alone[0], alone[1])

    def to_rgb(x):
        return np.clip(np.rint(x), 0, 255).astype(np.uint8)

    res = (to_rgb(both), (a, b), masks, tuple(boxes))
    return res + (np.stack([to_rgb(alone[1]), to_rgb(alone[0])]),) if without else res


def batch(seed, split, start, count, levels=None):
    """Scenes [start, start + count): images uint8 [n, S, S, 3], labels int64 [n],
    masks bool [n, S, S]. levels: None (all 1) or a function index -> level."""
    imgs = np.empty((count, SIZE, SIZE, 3), np.uint8)
    labels = np.empty(count, np.int64)
    masks = np.empty((count, SIZE, SIZE), bool)
    for i in range(count):
        lv = 1.0 if levels is None else levels(start + i)
        imgs[i], labels[i], masks[i], _ = scene(seed, split, start + i, lv)
    return imgs, labels, masks


def _batch_job(args):
    return batch(*args)


def batch_parallel(seed, split, start, count, levels=None, jobs=2, chunk=1000):
    """batch() in `jobs` processes; the same result (each scene is independent).
    levels must be picklable (a module-level function or None)."""
    if jobs <= 1 or count <= chunk:
        return batch(seed, split, start, count, levels)
    parts = [(seed, split, s, min(chunk, start + count - s), levels)
             for s in range(start, start + count, chunk)]
    with Pool(jobs) as pool:
        res = pool.map(_batch_job, parts)
    return tuple(np.concatenate([r[k] for r in res]) for k in range(3))


def write_two(a):
    """--two: DIR/NAME.png, NAME_mask0.png (the first class's object), NAME_mask1.png
    (the second's) and DIR/scenes.txt."""
    with open(os.path.join(a.out, "scenes.txt"), "w") as f:
        f.write("# file label0 class0 label1 class1 box0_x0 box0_y0 box0_x1 box0_y1 "
                "box1_x0 box1_y0 box1_x1 box1_y1\n")
        for i in range(a.start, a.start + a.count):
            rgb, labels, masks, boxes = scene_two(a.seed, a.split, i, a.level)
            name = f"{a.split}_{i:05d}_{CLASSES[labels[0]]}_{CLASSES[labels[1]]}"
            Image.fromarray(rgb).save(os.path.join(a.out, name + ".png"))
            for k in range(2):
                Image.fromarray(masks[k].astype(np.uint8) * 255).save(
                    os.path.join(a.out, f"{name}_mask{k}.png"))
            f.write(f"{name}.png {labels[0]} {CLASSES[labels[0]]} {labels[1]} {CLASSES[labels[1]]} "
                    + " ".join(str(v) for box in boxes for v in box) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=SPLITS, default="test")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--level", type=float, default=1.0, help="clutter level in [0, 1]")
    ap.add_argument("--like", metavar="EVAL_JSON",
                    help="the held-out scenes an eval.json (tools/eval_default.py) was measured "
                         "on: its seed, split, start and count")
    ap.add_argument("--two", action="store_true",
                    help="two-object scenes (scene_two): two shapes of different classes")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.like:
        import json
        with open(a.like) as f:
            t = json.load(f)["test"]
        a.seed, a.split, a.start, a.count = t["seed"], t["split"], t["start"], t["count"]
    os.makedirs(a.out, exist_ok=True)
    if a.two:
        write_two(a)
        return
    with open(os.path.join(a.out, "scenes.txt"), "w") as f:
        f.write("# file label class box_x0 box_y0 box_x1 box_y1\n")
        for i in range(a.start, a.start + a.count):
            rgb, label, mask, box = scene(a.seed, a.split, i, a.level)
            name = f"{a.split}_{i:05d}_{CLASSES[label]}"
            Image.fromarray(rgb).save(os.path.join(a.out, name + ".png"))
            Image.fromarray(mask.astype(np.uint8) * 255).save(os.path.join(a.out, name + "_mask.png"))
            f.write(f"{name}.png {label} {CLASSES[label]} {box[0]} {box[1]} {box[2]} {box[3]}\n")


if __name__ == "__main__":
    main()
