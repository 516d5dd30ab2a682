#!/usr/bin/python3
"""Side by side on the command line (issue 36): --compare MODEL2 and --compare-image IMAGE2
with --export and --top. Each pane's files (DIR/a/, DIR/b/) equal the single-model export of
the same settings bit for bit; compare.csv's Spearman and top-10 % IoU equal scipy's and
numpy's on the exported maps, B's patch maps brought onto A's grid by a resampling written
here from compare.h's definition (a patch's centre through each model's crop, read from
vit_dump, to the same relative place of the photo), layers by relative depth; diff/ holds
A - B where the shapes agree and nothing where they do not; --top prints both panes; bad
input is refused naming the option. On the built-in model (12x12 patches, 4 layers) and a
random DINOv2-shaped backbone (16x16, 2 layers).

  /usr/bin/python3 test_cli_compare.py --app build/vitlens --dump build/tests/parity/vit_dump \
      --model assets/default/model.safetensors --images A.png B.png --out DIR
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parity"))
from test_families import spec, write_family  # noqa: E402

try:
    from scipy.stats import spearmanr
except ImportError:  # scripts/install-deps.sh installs python3-scipy
    print("skip: no scipy")
    sys.exit(77)

failures = 0
XDG = tempfile.mkdtemp(prefix="vitlens-compare-xdg-")


def check(cond, what):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += not cond


def vitlens(app, *args):
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(XDG, "c"), XDG_DATA_HOME=os.path.join(XDG, "d"))
    env.pop("DISPLAY", None)
    env.pop("VITLENS_MODELS_DIR", None)
    return subprocess.run([app, *map(str, args)], capture_output=True, text=True, env=env, timeout=900)


def geometry(a, model, image, out):
    """(config.json of vit_dump: grid, patch, input size, crop rect; the photo's w, h)."""
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([a.dump, "--model", model, "--image", image, "--out", out],
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr)
    cfg = json.load(open(os.path.join(out, "config.json")))
    cfg["crop_x"], cfg["crop_y"], cfg["crop_w"], cfg["crop_h"] = cfg["crop"]
    h, w = np.load(os.path.join(out, "image.npy")).shape[:2]
    return cfg, w, h


def resample(mb, ga, gb):
    """B's patch map on A's grid (compare.h): A's patch centre -> A's photo through A's crop
    -> the same fraction of B's photo -> B's input through B's crop -> B's patch; NaN off
    B's crop."""
    (ca, wa, ha), (cb, wb, hb) = ga, gb
    out = np.full((ca["grid_h"], ca["grid_w"]), np.nan)
    for r in range(ca["grid_h"]):
        for c in range(ca["grid_w"]):
            ix, iy = (c + 0.5) * ca["patch_size"], (r + 0.5) * ca["patch_size"]
            u = (ca["crop_x"] + ix * ca["crop_w"] / ca["image_w"]) / wa
            v = (ca["crop_y"] + iy * ca["crop_h"] / ca["image_h"]) / ha
            jx = (u * wb - cb["crop_x"]) * cb["image_w"] / cb["crop_w"]
            jy = (v * hb - cb["crop_y"]) * cb["image_h"] / cb["crop_h"]
            if 0 <= jx < cb["image_w"] and 0 <= jy < cb["image_h"]:
                out[r, c] = mb[min(int(jy // cb["patch_size"]), cb["grid_h"] - 1),
                               min(int(jx // cb["patch_size"]), cb["grid_w"] - 1)]
    return out


def top_iou(a, b, frac=0.1):
    n = a.size
    k = min(max(int(np.floor(frac * n + 0.5)), 1), n)
    ta = set(np.argsort(-a, kind="stable")[:k])
    tb = set(np.argsort(-b, kind="stable")[:k])
    both = len(ta & tb)
    return both / (2 * k - both)


def same_files(x, y):
    """Every .npy of folder x equals y's bit for bit (names: the same set)."""
    fx = sorted(f for f in os.listdir(x) if f.endswith(".npy"))
    fy = sorted(f for f in os.listdir(y) if f.endswith(".npy"))
    bad = [f for f in fx if not np.array_equal(np.load(Path(x) / f), np.load(Path(y) / f), equal_nan=True)]
    return fx == fy and not bad and len(fx) > 0, len(fx), bad[:3]


def check_csv(label, ex, ga, gb, La, Lb):
    rows = list(csv.DictReader(l for l in open(ex / "compare.csv") if not l.startswith("#")))
    check(len(rows) > 0, f"{label}: compare.csv has {len(rows)} rows")
    worst_s = worst_i = 0.0
    n_checked = n_depth = 0
    for row in rows:
        fa, fb = ex / "a" / f"{row['map_a']}.npy", ex / "b" / f"{row['map_b']}.npy"
        if not fa.exists() or not fb.exists():
            check(False, f"{label}: {row['map_a']} / {row['map_b']} are files of a/ and b/")
            return
        ma, mb = np.load(fa), np.load(fb)
        if row["map_a"].startswith("L"):  # layers by relative depth
            la, lb = int(row["map_a"][1:3]) - 1, int(row["map_b"][1:3]) - 1
            want = la if La == Lb else min(max(int(np.floor((la + 0.5) * Lb / La - 0.5 + 0.5)), 0), Lb - 1)
            n_depth += lb == want
            if lb != want:
                check(False, f"{label}: {row['map_a']} paired with {row['map_b']}, not layer {want + 1}")
        if ma.ndim != 2 or ma.shape != (ga[0]["grid_h"], ga[0]["grid_w"]):
            continue  # a pixel map
        rb = resample(mb, ga, gb)
        keep = np.isfinite(ma) & np.isfinite(rb)
        x, y = ma[keep], rb[keep]
        s = spearmanr(x, y).correlation if len(x) > 1 and x.min() < x.max() and y.min() < y.max() else np.nan
        i = top_iou(x, y) if not np.isnan(s) else np.nan
        got_s, got_i = float(row["spearman"]), float(row["top10_iou"])
        if np.isnan(s):
            ok = np.isnan(got_s)
        else:
            ok = abs(got_s - s) <= 1e-6 and abs(got_i - i) <= 1e-9 and int(row["patches"]) == keep.sum()
            worst_s, worst_i = max(worst_s, abs(got_s - s)), max(worst_i, abs(got_i - i))
        if not ok:
            check(False, f"{label}: {row['map_a']}: ({got_s}, {got_i}) = scipy/numpy ({s}, {i})")
        n_checked += 1
    check(n_checked > 0, f"{label}: {n_checked} patch-map rows = scipy's Spearman (max diff {worst_s:.1e}) "
          f"and numpy's top-10 % IoU (max diff {worst_i:.1e}) of A and B resampled here")
    return rows


def main():
    ap = argparse.ArgumentParser()
    for k in ("app", "dump", "model", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--images", nargs=2, required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    img1, img2 = a.images
    bk = out / "backbone"
    write_family(spec("dinov2_reg4_timm_224"), bk, seed=36)
    model_b = bk / "model.safetensors"

    # --- --compare MODEL2: two grids (12x12 against 16x16), two depths (4 against 2) -----
    ex = out / "cmp"
    shutil.rmtree(ex, ignore_errors=True)
    r = vitlens(a.app, "--model", a.model, "--compare", model_b, "--export", ex, img1)
    check(r.returncode == 0, f"--compare MODEL2 --export exits 0 ({r.stderr.strip()[-200:]})")
    for pane, model, image in (("a", a.model, img1), ("b", model_b, img1)):
        single = out / f"single_{pane}"
        shutil.rmtree(single, ignore_errors=True)
        vitlens(a.app, "--model", model, "--export", single, image)
        ok, n, bad = same_files(ex / pane, single)
        check(ok, f"--compare: pane {pane.upper()}'s {n} .npy files = --export alone's, bit for bit {bad}")
    ga, gb = geometry(a, a.model, img1, out / "g_a"), geometry(a, model_b, img1, out / "g_b")
    check_csv("--compare", ex, ga, gb, ga[0]["n_layers"], gb[0]["n_layers"])
    check(not list((ex / "diff").glob("*.npy")), "--compare: no A - B where the grids differ")
    grids = f"A's grid is {ga[0]['grid_h']}x{ga[0]['grid_w']}, B's {gb[0]['grid_h']}x{gb[0]['grid_w']}"
    check(f"no A - B of the patch maps: {grids}" in r.stdout,
          "--compare: the export says why there is no difference")
    check((ex / "compare_sheet.png").exists(), "--compare: compare_sheet.png written")

    # --- both: another model (5x5 patches, a centre crop of 90 %) on another photo -------
    vt = out / "vit_timm"
    write_family(spec("vit_timm"), vt, seed=37)
    ex = out / "cmpb"
    shutil.rmtree(ex, ignore_errors=True)
    r = vitlens(a.app, "--model", a.model, "--compare", vt / "model.safetensors", "--compare-image", img2,
                "--export", ex, img1)
    check(r.returncode == 0, f"--compare with --compare-image exits 0 ({r.stderr.strip()[-200:]})")
    gv = geometry(a, vt / "model.safetensors", img2, out / "g_v")
    check(gv[0]["crop"] != [0, 0, gv[1], gv[2]], f"the second model sees a crop of its photo ({gv[0]['crop']})")
    check_csv("--compare + --compare-image", ex, ga, gv, ga[0]["n_layers"], gv[0]["n_layers"])

    # --class names pane A's class; a MODEL2 of other classes explains its own top-1
    r = vitlens(a.app, "--model", a.model, "--compare", vt / "model.safetensors", "--class", "ring",
                "--top", 1, img1)
    check(r.returncode == 0 and "--class ring is pane A's" in r.stderr,
          f"--compare with --class: A's class, B's own top-1 ({r.stderr.strip()[-120:]})")

    # --- --compare-image IMAGE2: one model, one grid: the differences -------------------
    shutil.rmtree(out / "nested", ignore_errors=True)
    ex = out / "nested" / "deeper" / "cmpi"  # --export makes the folders above DIR too
    r = vitlens(a.app, "--model", a.model, "--compare-image", img2, "--export", ex, img1)
    check(r.returncode == 0, f"--compare-image --export exits 0 ({r.stderr.strip()[-200:]})")
    single = out / "single_b2"
    shutil.rmtree(single, ignore_errors=True)
    vitlens(a.app, "--model", a.model, "--export", single, img2)
    ok, n, bad = same_files(ex / "b", single)
    check(ok, f"--compare-image: pane B's {n} .npy files = --export IMAGE2 alone's {bad}")
    g2 = geometry(a, a.model, img2, out / "g_2")
    rows = check_csv("--compare-image", ex, ga, g2, 4, 4)
    worst, n_diff = 0.0, 0
    for row in rows:
        f = ex / "diff" / f"{row['map_a']}.npy"
        if not f.exists():
            continue
        want = np.load(ex / "a" / f"{row['map_a']}.npy") - np.load(ex / "b" / f"{row['map_b']}.npy")
        worst = max(worst, float(np.nanmax(np.abs(np.load(f) - want))))
        n_diff += 1
    check(n_diff == len(rows) and len(list((ex / "diff").glob("*.npy"))) == n_diff and worst == 0.0,
          f"--compare-image: a diff/ file per pair ({n_diff} of {len(rows)}) = a/ - b/ exactly (max diff {worst})")

    # --- --top: both panes -------------------------------------------------------------
    r = vitlens(a.app, "--model", a.model, "--compare-image", img2, "--top", 3, img1)
    one = vitlens(a.app, "--model", a.model, "--top", 3, img1).stdout.splitlines()
    two = vitlens(a.app, "--model", a.model, "--top", 3, img2).stdout.splitlines()
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines == [f"# A: default on {img1}", *one, f"# B: default on {img2}", *two],
          f"--top with --compare-image: both panes' top-3 under '# A:' and '# B:' ({lines[:2]})")

    # --- bad input ----------------------------------------------------------------------
    r = vitlens(a.app, "--model", a.model, "--compare", out / "nothing.safetensors", "--export", out / "bad", img1)
    check(r.returncode == 1 and "--compare" in r.stderr and "nothing.safetensors" in r.stderr,
          f"--compare of a missing model: refused naming it ('{r.stderr.strip()[-160:]}')")
    r = vitlens(a.app, "--model", a.model, "--compare-image", out / "nothing.png", "--export", out / "bad", img1)
    check(r.returncode == 1 and "nothing.png" in r.stderr,
          f"--compare-image of a missing photo: refused naming it ('{r.stderr.strip()[-160:]}')")
    r = vitlens(a.app, "--model", a.model, "--compare", model_b, "--contrast", "0,1", "--export", out / "bad", img1)
    check(r.returncode == 2 and "--compare" in r.stderr, f"--compare with --contrast: refused ('{r.stderr.strip()}')")
    print("FAILED" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
