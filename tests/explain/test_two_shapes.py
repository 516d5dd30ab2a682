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

Controls, each able to fail and checked:
  - swapped (negative, one per method): the method's own two maps exchanged, the
    map for class b judged as the map for class a. Through the same dump and the
    same judge, it tells a map that follows the asked class from one that does
    not: a method must get at least SWAP_MARGIN more of the kept scenes right (by
    mass and per area) than its swapped maps, and twice as many. A method whose
    maps ignore the class (the same map for both) gets 0 either way and fails; so
    does a dump that hands the maps back in the wrong order.
  - random (chance): an independent uniform random patch map per class (seeded):
    a class-specific map that knows nothing. Per area its two comparisons are fair
    coins (a mean of i.i.d. uniforms over one object against one over the other is
    symmetric about 0), so both are right in 25% of the scenes: checked within 4
    binomial standard deviations. Masks that are empty or the same for both
    objects, or a judge that is not a strict comparison of the two objects, move
    it out. By mass about 10% (not checked), as a map spread evenly favours the
    larger object for both classes.
  - rollout, attention (printed, not controls): attention rollout (vit_rollout:
    last layer, mean fusion, discard 0, the CLS row) and the last layer's mean CLS
    row are one map for both classes: under the strict comparison they can win
    one comparison of a scene, never both, so they get 0 scenes by construction.
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
SWAP_MARGIN = 0.10      # a method's scenes right less its swapped maps', at least (fraction)
RANDOM_P = 0.25         # random maps, per area: both comparisons fair coins
RANDOM_SIGMAS = 4       # its band, in binomial standard deviations


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
        return "(one map for both classes: 0 by construction)", None
    if name.endswith(":swapped"):
        return "(control: see below)", None
    if name == "occlusion":
        ok = both[0] >= OCCLUSION_MIN * n
        return f">= {OCCLUSION_MIN:.0%} (premise)  " + ("ok" if ok else "FAIL"), \
            None if ok else f"occlusion: {both[0]}/{n}: the logits do not follow the objects"
    if name == "random":
        sd = RANDOM_SIGMAS * (n * RANDOM_P * (1 - RANDOM_P)) ** 0.5
        lo, hi = RANDOM_P * n - sd, RANDOM_P * n + sd
        ok = lo <= both[1] <= hi
        return f"per area {lo:.0f}..{hi:.0f} (chance)  " + ("ok" if ok else "FAIL"), \
            None if ok else (f"random: {both[1]}/{n} scenes per area, outside {lo:.0f}..{hi:.0f} "
                             f"({RANDOM_P:.0%} +- {RANDOM_SIGMAS} sd): the judge or the masks "
                             "do not give chance to a map that knows nothing")
    return "(not checked)", None


def swap_verdict(name, both, swapped, n):
    """The swapped control of a method: (text, failure or None); both, swapped: scenes
    right (by mass, per area) with its maps and with its two maps exchanged."""
    bad = [f"{ms} {b}/{n} against {s}/{n} swapped" for ms, b, s in zip(MEASURES, both, swapped)
           if not (b - s >= SWAP_MARGIN * n and b >= 2 * s)]
    text = ", ".join(f"{b} vs {s}" for b, s in zip(both, swapped))
    return f"{name:13s} {text}  " + ("FAIL" if bad else "ok"), \
        (f"{name}: its maps do no better than its maps swapped between the classes: "
         + "; ".join(bad)) if bad else None


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
                                                        "occlusion"] + \
        [m + ":swapped" for m in methods]
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
        # the negative control: each method's maps exchanged between the two classes
        checks += [(m + ":swapped", pairs[m][::-1], px_w if px else patch_w, px)
                   for m, px in zip(methods, pixels)]
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
    print(f"\n{'':22s} {'by mass':-^46s}  {'per area':-^15s}")
    print(f"{'map':22s} {'both classes right':>18s} {'comparisons':>13s} {'c 1st':>6s} "
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
        print(f"{m:22s} {bm:4d}/{n} ({bm / n:6.1%}) {r['comparisons']:6d}/{2 * n} "
              f"{r['right_top1']:6.0%} {r['right_second']:6.0%}  "
              f"{ba:4d}/{n} ({ba / n:6.1%})  {text}")
    print(f"\nswapped control: scenes right (by mass, per area), each method against its own "
          f"two maps exchanged: at least {SWAP_MARGIN:.0%} of the scenes more, and twice as many")
    for m in methods:
        text, failure = swap_verdict(m, (rows[m]["mass"]["both"], rows[m]["per area"]["both"]),
                                     (rows[m + ":swapped"]["mass"]["both"],
                                      rows[m + ":swapped"]["per area"]["both"]), n)
        print(f"  {text}")
        if failure:
            fails.append(failure)
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
    print(f"\nok: every method above its thresholds on {n} scenes and above its maps swapped "
          f"between the classes; random maps at chance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
