#!/usr/bin/python3
"""Why this class? A behavioural test of the class-specific maps (issue 13).

Scenes of the built-in model (assets/default) holding two shapes of different
classes a and b (tools/gen_scenes.py scene_two: seed 0, split test, scenes
0 .. COUNT-1, each with both objects' masks). For each scene and each of its two
classes c, every vit_explain method's map for c (explain_dump: vit_backward of
logit c, then vit_explain) must put more of its mass on c's object than on the
other object. A scene is "right" for a method when both of its comparisons are.

Mass of a map over an object:
  - patch maps [gh, gw] (chefer, grad-rollout, gradcam, legrad): the sum over the
    patches of the map's positive part times the patch's share of mask pixels
    (0 .. 1: a patch half covered by the object counts half). These four maps are
    >= 0 by construction, so the positive part is the map.
  - pixel maps [Sh, Sw] (attnlrp, grad-input): the signed sum over the mask's
    pixels, the net relevance of the object. Their values are signed relevance
    (input x gradient: the sign also flips with each channel's side of the
    normalisation's mean, 0.5), and the sign is what tells the classes apart: the positive part
    alone measures how salient an object is, whatever the class (printed as
    "attnlrp+", "grad-input+", not checked: it fails, see the README numbers).
  - "per area" (checked too): the same mass divided by the object's area (the
    sum of its weights). Objects differ in area (a star of the same radius has a
    third of a circle's); by mass, a map spread over both favours the larger.

Controls:
  - rollout (negative): attention rollout (vit_rollout: last layer, mean fusion,
    discard 0, the CLS row), one map for both classes: it can win one comparison
    of a scene, never both (checked: 0 scenes); "attention" (the last layer's
    mean CLS row) likewise.
  - random: an independent uniform random patch map per class (seeded): a
    class-specific map that knows nothing. About 25% of scenes per area; by mass
    about 10%, as a map spread evenly favours the larger object for both classes.
  - occlusion (positive): the model itself. Logit c drops more when c's object
    is removed than when the other is (the same scene without one object,
    scene_two(without=True)). This is what a faithful class-specific map should
    show, and it checks the premise: when it holds, a method that points at the
    other object is wrong about the model, not the model about the scene.

Scenes kept: the built-in model saw one object per scene in training and on two
it is winner-take-all (about 93% for one class); a scene counts only when the
model ranks its two classes first and second, above the four absent ones. How
many were kept is printed. (On the other scenes the logits still follow the
objects, by occlusion, but every method does worse: see the README numbers.)

Printed per map, by mass: scenes with both classes right, comparisons right,
comparisons right for the class the model ranks first ("c 1st") and second;
per area: scenes with both classes right. Also written to WORK/summary.json.
Each method must reach its THRESHOLDS fraction of the kept scenes (set from the
measurement, see there). Deterministic: fixed scenes, one engine thread.
Exit 1 on any failure.

  /usr/bin/python3 test_two_shapes.py --dump build/tests/explain/explain_dump \\
      --assets assets/default --gen tools/gen_scenes.py --work DIR
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

SEED, SPLIT, COUNT = 0, "test", 400

# Fraction of the kept scenes with both classes right, at least: (mass, per area).
# Measured on the scenes above (the numbers the test prints; README), each is the
# measurement less 8 points, rounded down to 5: a small change of the engine's
# arithmetic passes, a broken method (or a class-agnostic one: 0) does not.
# By mass, legrad and chefer are weak: right on the class the model ranks first,
# near a coin on the second. Per area they do better: every comparison that per
# area turns right had the other object larger (legrad's map is diffuse, a median
# 17% of its mass on the two objects, so by mass the larger object wins). A
# finding about the methods on this model, not a tolerance; see the README numbers.
THRESHOLDS = {
    "chefer": (0.30, 0.45),
    "grad-rollout": (0.50, 0.60),
    "gradcam": (0.55, 0.65),
    "legrad": (0.25, 0.65),
    "attnlrp": (0.70, 0.75),
    "grad-input": (0.65, 0.70),
}
MEASURES = ("mass", "per area")
MIN_KEPT = 100          # scenes
OCCLUSION_MIN = 0.95    # the premise: the model's logits follow the objects
CONTROL_MAX = 0         # scenes a class-agnostic map may get right (by construction 0)


def load_gen(path):
    spec = importlib.util.spec_from_file_location("gen_scenes", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_dump(dump, model, lines, work, tag):
    """explain_dump over `lines` ("IMAGE [C ...]"); returns (shapes dict, floats)."""
    lst, out = os.path.join(work, tag + ".txt"), os.path.join(work, tag + ".bin")
    with open(lst, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    r = subprocess.run([dump, model, lst, out], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"test_two_shapes: explain_dump failed ({r.returncode}): {r.stderr.strip()}")
    head = r.stdout.split("\n")[0].split()
    i = head.index("methods")
    shapes = {k: int(v) for k, v in zip(head[:i:2], head[1:i:2])}
    shapes["methods"] = head[i + 1:]
    return shapes, np.fromfile(out, "<f4").astype(np.float64)


def judge(pair, w, signed, per_area):
    """[2] bool: for k = 0, 1, whether pair[k] (the map for the scene's class k)
    puts more mass on object k than on the other. w [2, ...]: the objects'
    weights (pixel masks or patch shares); signed: the values as they are, else
    their positive part; per_area: mass divided by the object's area (sum of w)."""
    out = []
    for k in range(2):
        m = pair[k] if signed else np.maximum(pair[k], 0)
        mass = (m * w).reshape(2, -1).sum(1)
        if per_area:
            mass = mass / w.reshape(2, -1).sum(1)
        out.append(mass[k] > mass[1 - k])
    return out


def verdict(name, both, n):
    """(text, failure or None) for a map's scenes with both classes right,
    both = (by mass, per area)."""
    if name in THRESHOLDS:
        t = THRESHOLDS[name]
        bad = [f"{ms} {b}/{n} below {tt:.0%}" for ms, b, tt in zip(MEASURES, both, t) if b < tt * n]
        return f">= {t[0]:.0%}, {t[1]:.0%}  " + ("FAIL" if bad else "ok"), \
            (f"{name}: " + ", ".join(bad)) if bad else None
    if name in ("rollout", "attention"):
        ok = max(both) <= CONTROL_MAX
        return f"<= {CONTROL_MAX} (control)  " + ("ok" if ok else "FAIL"), \
            None if ok else f"{name}: a class-agnostic map got {max(both)} scenes right"
    if name == "occlusion":
        ok = both[0] >= OCCLUSION_MIN * n
        return f">= {OCCLUSION_MIN:.0%} (premise)  " + ("ok" if ok else "FAIL"), \
            None if ok else f"occlusion: {both[0]}/{n}: the logits do not follow the objects"
    return ("(chance)" if name == "random" else "(not checked)"), None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dump", required=True, help="explain_dump")
    ap.add_argument("--assets", required=True, help="assets/default")
    ap.add_argument("--gen", required=True, help="tools/gen_scenes.py")
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=COUNT)
    a = ap.parse_args()
    gen = load_gen(a.gen)
    model = os.path.join(a.assets, "model.safetensors")
    scene_dir = os.path.join(a.work, "scenes")
    os.makedirs(scene_dir, exist_ok=True)

    # Scenes, and each without one of its objects.
    labels, masks, images = [], [], []
    for i in range(a.count):
        rgb, lab, mk, _, without = gen.scene_two(SEED, SPLIT, i, without=True)
        name = f"{SPLIT}_{i:05d}_{gen.CLASSES[lab[0]]}_{gen.CLASSES[lab[1]]}"
        paths = [os.path.join(scene_dir, f"{name}{suffix}.png")
                 for suffix in ("", "_without0", "_without1")]
        for p, im in zip(paths, (rgb, without[0], without[1])):
            Image.fromarray(im).save(p)
        labels.append(lab)
        masks.append(mk)
        images.append(paths)
    labels = np.array(labels)

    # Pass 1: forward only (logits, rollout, attention) on every image.
    shp, x = run_dump(a.dump, model, [p for ps in images for p in ps], a.work, "forward")
    C, gh, gw, Sh, Sw = (shp[k] for k in ("C", "gh", "gw", "Sh", "Sw"))
    N = gh * gw
    fwd = x.reshape(a.count, 3, C + 2 * N)
    logits = fwd[:, :, :C]                                        # [scene, full/w0/w1, C]
    rollout = fwd[:, 0, C:C + N].reshape(-1, gh, gw)
    attention = fwd[:, 0, C + N:].reshape(-1, gh, gw)

    top2 = np.argsort(-logits[:, 0], axis=1, kind="stable")[:, :2]
    keep = np.array([set(top2[i]) == set(labels[i]) for i in range(a.count)])
    kept = np.nonzero(keep)[0]
    pmax = np.exp(logits[:, 0] - logits[:, 0].max(1, keepdims=True))
    pmax = (pmax / pmax.sum(1, keepdims=True)).max(1)
    print(f"scenes: {a.count} two-shape scenes ({SPLIT}, seed {SEED}); both classes the model's "
          f"top 2 in {len(kept)} (kept); top-1 probability median {np.median(pmax):.2f}")

    # Pass 2: vit_backward for both classes of each kept scene, every method's map.
    methods = shp["methods"]
    pixels = [m in ("attnlrp", "grad-input") for m in methods]
    sizes = [Sh * Sw if px else N for px in pixels]
    _, y = run_dump(a.dump, model,
                    [f"{images[i][0]} {labels[i][0]} {labels[i][1]}" for i in kept],
                    a.work, "explain")
    y = y.reshape(len(kept), C + 2 * N + 2 * sum(sizes))

    # right[measure][name]: [kept, 2] bool, class k of the scene judged right
    pix_methods = [m for m, px in zip(methods, pixels) if px]
    names = methods + [m + "+" for m in pix_methods] + ["rollout", "attention", "random",
                                                        "occlusion"]
    right = {ms: {n: np.zeros((len(kept), 2), bool) for n in names} for ms in MEASURES}
    rng = np.random.default_rng(0)
    patch_min = np.inf
    for j, i in enumerate(kept):
        px_w = masks[i].astype(np.float64)                                        # [2, Sh, Sw]
        patch_w = px_w.reshape(2, gh, Sh // gh, gw, Sw // gw).mean(axis=(2, 4))  # [2, gh, gw]
        pairs = {m: [] for m in methods}  # the map for class 0, for class 1
        off = C + 2 * N
        for k in range(2):
            for m, px, size in zip(methods, pixels, sizes):
                pairs[m].append(y[j, off:off + size].reshape((Sh, Sw) if px else (gh, gw)))
                off += size
        patch_min = min([patch_min] + [p.min() for m, px in zip(methods, pixels) if not px
                                       for p in pairs[m]])
        checks = [(m, pairs[m], px_w if px else patch_w, px) for m, px in zip(methods, pixels)]
        checks += [(m + "+", pairs[m], px_w, False) for m in pix_methods]  # for the report
        checks += [("rollout", [rollout[i]] * 2, patch_w, False),
                   ("attention", [attention[i]] * 2, patch_w, False),
                   ("random", [rng.random((gh, gw)) for _ in range(2)], patch_w, False)]
        for name, pair, w, signed in checks:
            for ms in MEASURES:
                right[ms][name][j] = judge(pair, w, signed, ms == "per area")
        # logit c higher without the other object than without c's own
        # (logits[i, 1]: without object 0, logits[i, 2]: without object 1)
        occ = [logits[i, 2 - k, labels[i][k]] > logits[i, 1 + k, labels[i][k]] for k in range(2)]
        for ms in MEASURES:
            right[ms]["occlusion"][j] = occ

    n = len(kept)
    first = (labels[kept, 1] == top2[kept, 0]).astype(int)  # k of the class the model ranks first
    rows, fails = {}, []
    print(f"\n{'':13s} {'by mass':-^46s}  {'per area':-^15s}")
    print(f"{'map':13s} {'both classes right':>18s} {'comparisons':>13s} {'c 1st':>6s} "
          f"{'c 2nd':>6s}  {'both right':>15s}  threshold (mass, per area)")
    for m in names:
        rows[m] = {}
        for ms in MEASURES:
            rt = right[ms][m]
            rows[m][ms] = {"both": int(rt.all(1).sum()), "comparisons": int(rt.sum()),
                           "right_top1": round(float(rt[np.arange(n), first].mean()), 4),
                           "right_second": round(float(rt[np.arange(n), 1 - first].mean()), 4)}
        r, bm, ba = rows[m]["mass"], rows[m]["mass"]["both"], rows[m]["per area"]["both"]
        text, failure = verdict(m, (bm, ba), n)
        if failure:
            fails.append(failure)
        print(f"{m:13s} {bm:4d}/{n} ({bm / n:6.1%}) {r['comparisons']:6d}/{2 * n} "
              f"{r['right_top1']:6.0%} {r['right_second']:6.0%}  "
              f"{ba:4d}/{n} ({ba / n:6.1%})  {text}")
    if patch_min < 0:
        fails.append(f"a patch map has a negative value ({patch_min:g}): expected >= 0")
    if n < MIN_KEPT:
        fails.append(f"only {n} scenes kept, expected at least {MIN_KEPT}")
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump({"scenes": a.count, "kept": n, "seed": SEED, "split": SPLIT,
                   "thresholds": THRESHOLDS, "maps": rows}, f, indent=1)
    if fails:
        print("\nFAIL: " + "; ".join(fails))
        return 1
    print(f"\nok: every method above its thresholds on {n} scenes; the class-agnostic controls "
          f"never get both classes of a scene right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
