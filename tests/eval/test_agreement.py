#!/usr/bin/python3
"""vitlens --agreement (app/headless/agreement.c; docs/faithfulness.md, "Methods side by
side") against scipy.stats.spearmanr and a numpy top-10 % IoU over the maps it exports.

  /usr/bin/python3 test_agreement.py --app build/vitlens --photos assets/default/demo \
      --work DIR [--deit SHARED]

The built-in model on four of its demo photos (the first four of the folder, copied): every
entry of agreement.csv is the mean / sample standard deviation over the photos of scipy's
Spearman of the two exported maps (maps/IIII_TAG.npy) and of numpy's top-10 % IoU, and the
per-photo rows (agreement_pairs.csv) equal them photo by photo; the diagonal is 1; the random
control is within 4 / sqrt(N - 1) of 0 in the mean; shards 1/2 and 2/2 merged with
--eval-merge equal one run, byte for byte. Controls that must be caught: Pearson in place of
Spearman, ranks without tie averaging (Grad-CAM's maps have ties: ReLU's zeros), the IoU with
ties broken towards the higher index. With --deit SHARED: DeiT-Tiny on the shared photos, the
same checks (exit 77 without them). Exits 0, 1 on a failed check, 77 without scipy.
"""
import argparse
import csv
import filecmp
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    from scipy.stats import spearmanr
except ImportError:
    print("SKIP: no scipy (Debian: python3-scipy, scripts/install-deps.sh)")
    sys.exit(77)

failures = 0
TOP_FRAC = 0.1


def check(cond, what):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += not cond


def vitlens(app, *args):
    env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(), XDG_DATA_HOME=tempfile.mkdtemp())
    for k in ("DISPLAY", "VITLENS_MODELS_DIR"):
        env.pop(k, None)
    return subprocess.run([app, *args], capture_output=True, text=True, env=env, timeout=600)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --- the references, from docs/faithfulness.md ----------------------------------------

def top_iou(a, b, frac=TOP_FRAC, stable_low_first=True):
    """IoU of the top floor(frac * n + 0.5) patches of a and b (clamped to [1, n]), ties
    to the lower index (numpy's stable argsort of -m); the control breaks them the other
    way. NaN for a constant map."""
    n = a.size
    if np.all(a == a[0]) or np.all(b == b[0]):
        return math.nan
    k = min(max(int(math.floor(frac * n + 0.5)), 1), n)

    def top(m):
        if stable_low_first:
            return set(np.argsort(-m, kind="stable")[:k].tolist())
        return set((n - 1 - np.argsort(-m[::-1], kind="stable")[:k]).tolist())
    ta, tb = top(a), top(b)
    return len(ta & tb) / len(ta | tb)


def rank_no_ties(v):
    """Ranks 1..n by a stable argsort: ties get distinct ranks (the control)."""
    r = np.empty(v.size)
    r[np.argsort(v, kind="stable")] = np.arange(1, v.size + 1)
    return r


def pearson(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    a, b = a - a.mean(), b - b.mean()
    d = math.sqrt((a * a).sum() * (b * b).sum())
    return (a * b).sum() / d if d else math.nan


def mean_std(xs):
    xs = np.array([x for x in xs if not math.isnan(x)], dtype=np.float64)
    if xs.size == 0:
        return math.nan, math.nan, 0
    return xs.mean(), (xs.std(ddof=1) if xs.size > 1 else math.nan), xs.size


def close(x, y, tol):
    return (math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol


# --- one run ----------------------------------------------------------------------------

def check_run(out, label):
    """Every entry of out/agreement.csv against scipy / numpy over out/maps."""
    run = read_csv(os.path.join(out, "agreement_run.csv"))[0]
    methods = run["methods"].split()
    gh, gw = int(run["grid_h"]), int(run["grid_w"])
    N = gh * gw
    photos = [p for p in read_csv(os.path.join(out, "agreement_photos.csv")) if p["status"] == "ok"]
    check(len(photos) >= 3, f"{label}: {len(photos)} photos ok")
    maps, shapes_ok = {}, True
    for p in photos:
        i = int(p["image"])
        for t in methods:
            m = np.load(os.path.join(out, "maps", f"{i:04d}_{t}.npy"))
            shapes_ok &= m.shape == (gh, gw) and m.dtype == np.float32
            maps[i, t] = m.ravel()
    check(shapes_ok, f"{label}: every map float32 [{gh}, {gw}]")
    cls = [m for m in methods if m != "random"]
    check("random" in methods and len(cls) >= 5, f"{label}: methods {methods}")

    # per photo: the rows against scipy / numpy
    rows = read_csv(os.path.join(out, "agreement_pairs.csv"))
    worst_rho = worst_iou = 0.0
    for r in rows:
        i, a, b = int(r["image"]), r["method_a"], r["method_b"]
        want = spearmanr(maps[i, a], maps[i, b]).correlation
        worst_rho = max(worst_rho, 0.0 if close(float(r["spearman"]), want, 0) else
                        abs(float(r["spearman"]) - want))
        want_iou = top_iou(maps[i, a], maps[i, b])
        worst_iou = max(worst_iou, 0.0 if close(float(r["top_iou"]), want_iou, 0) else
                        abs(float(r["top_iou"]) - want_iou))
    M = len(methods)
    check(len(rows) == len(photos) * M * (M + 1) // 2, f"{label}: {len(rows)} per-photo pair rows")
    check(worst_rho <= 1e-12, f"{label}: per-photo Spearman vs scipy, max diff {worst_rho:.2e}")
    check(worst_iou == 0.0, f"{label}: per-photo top-10% IoU vs numpy, max diff {worst_iou:.2e}")

    # the matrix: mean / std over photos of scipy's values on the exported maps
    table = read_csv(os.path.join(out, "agreement.csv"))
    check(len(table) == M * M, f"{label}: agreement.csv has {len(table)} = {M}^2 rows")
    worst, worst_i, counts_ok = 0.0, 0.0, True
    ids = [int(p["image"]) for p in photos]
    for r in table:
        a, b = r["method_a"], r["method_b"]
        rho = [spearmanr(maps[i, a], maps[i, b]).correlation for i in ids]
        iou = [top_iou(maps[i, a], maps[i, b]) for i in ids]
        m, s, n = mean_std(rho)
        mi, si, _ = mean_std(iou)
        for got, want in ((r["mean"], m), (r["std"], s)):
            worst = max(worst, 0.0 if close(float(got), want, 0) else abs(float(got) - want))
        for got, want in ((r["iou_mean"], mi), (r["iou_std"], si)):
            worst_i = max(worst_i, 0.0 if close(float(got), want, 0) else abs(float(got) - want))
        counts_ok &= int(r["n_photos"]) == n
    check(worst <= 1e-12, f"{label}: matrix mean/std vs scipy over the maps, max diff {worst:.2e}")
    check(worst_i <= 1e-12, f"{label}: IoU mean/std vs numpy, max diff {worst_i:.2e}")
    check(counts_ok, f"{label}: n_photos = the photos with a number")
    cell = {(r["method_a"], r["method_b"]): r for r in table}
    diag = [float(cell[t, t]["mean"]) for t in methods]
    check(all(d == 1.0 for d in diag), f"{label}: the diagonal is 1 ({diag})")
    sym = all(cell[a, b]["mean"] == cell[b, a]["mean"] for a in methods for b in methods)
    check(sym, f"{label}: the matrix is symmetric")
    bound = 4.0 / math.sqrt(N - 1) / math.sqrt(len(ids))
    rnd = [float(cell["random", t]["mean"]) for t in cls]
    check(max(abs(x) for x in rnd) <= bound,
          f"{label}: random control |mean rho| <= 4/sqrt((N-1) n) = {bound:.3f}: "
          f"{', '.join(f'{x:+.3f}' for x in rnd)}")

    # controls: each wrong reference must differ from what vitlens wrote
    pear = max(abs(pearson(maps[i, a], maps[i, b]) - spearmanr(maps[i, a], maps[i, b]).correlation)
               for i in ids for a in cls for b in cls)
    check(pear > 1e-3, f"{label}: control: Pearson differs from Spearman by {pear:.3f}")
    tied = [(i, t) for i in ids for t in cls if np.unique(maps[i, t]).size < N]
    if tied:
        i, t = tied[0]
        other = [o for o in cls if o != t][0]
        no_ties = pearson(rank_no_ties(maps[i, t]), rank_no_ties(maps[i, other]))
        got = [float(r["spearman"]) for r in rows
               if int(r["image"]) == i and {r["method_a"], r["method_b"]} == {t, other}][0]
        check(abs(no_ties - got) > 1e-6,
              f"{label}: control: ranks without tie averaging ({t}, photo {i}, "
              f"{N - np.unique(maps[i, t]).size} ties) differ by {abs(no_ties - got):.2e}")
        # ties at the cut of the top 10 %: where the order of ties decides the IoU
        k = int(math.floor(TOP_FRAC * N + 0.5))
        at_cut = [(j, u) for j, u in tied if np.sort(maps[j, u])[::-1][k - 1] ==
                  np.sort(maps[j, u])[::-1][k]]
        if at_cut:
            flip = max(abs(top_iou(maps[j, u], maps[j, o], stable_low_first=False) -
                           top_iou(maps[j, u], maps[j, o])) for j, u in at_cut for o in cls)
            check(flip > 0, f"{label}: control: ties at the cut broken to the higher index "
                            f"change an IoU by {flip:.3f}")
        else:
            print(f"note {label}: no map with ties at the top-10% cut (test_faithful has them)")
    else:
        check(label != "builtin", f"{label}: a map with ties for the tie controls")
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--photos", required=True, help="the built-in model's demo folder")
    ap.add_argument("--work", required=True)
    ap.add_argument("--deit", help="the shared folder: DeiT-Tiny on its photos")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    if a.deit:
        model = os.path.join(a.deit, "models", "deit-tiny", "deit_tiny_patch16_224.safetensors")
        photos = os.path.join(a.deit, "images")
        if not (os.path.exists(model) and os.path.isdir(photos)):
            print(f"SKIP: no {model} or {photos}")
            return 77
        out = os.path.join(a.work, "deit")
        r = vitlens(a.app, "--model", model, "--labels",
                    os.path.join(os.path.dirname(model), "imagenet_synset_words.txt"),
                    "--agreement", photos, "--eval-out", out)
        check(r.returncode == 0, f"deit: exit {r.returncode} {r.stderr.strip()[-300:]}")
        print(r.stdout)
        if r.returncode == 0:
            check_run(out, "deit")
        return 1 if failures else 0

    # four photos of the demo folder, copied: a fast run
    photos = os.path.join(a.work, "photos")
    os.makedirs(photos)
    for f in sorted(os.listdir(a.photos))[:4]:
        shutil.copy(os.path.join(a.photos, f), photos)
    out = os.path.join(a.work, "one")
    r = vitlens(a.app, "--agreement", photos, "--eval-out", out)
    check(r.returncode == 0, f"one run: exit {r.returncode} {r.stderr.strip()[-300:]}")
    check("| Spearman |" in r.stdout and "| top-10% IoU |" in r.stdout,
          "the two matrices on stdout")
    if r.returncode:
        return 1
    check_run(out, "builtin")
    png = os.path.join(out, "agreement.png")
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10000,
              "agreement.png is a PNG")

    # sharding: 1/2 and 2/2 merged (in the other order) = the one run
    for k in (1, 2):
        r = vitlens(a.app, "--agreement", photos, "--shard", f"{k}/2", "--eval-out",
                    os.path.join(a.work, f"shard{k}"))
        check(r.returncode == 0, f"shard {k}/2: exit {r.returncode}")
    merged = os.path.join(a.work, "merged")
    r = vitlens(a.app, "--eval-merge", os.path.join(a.work, "shard2"),
                os.path.join(a.work, "shard1"), "--eval-out", merged)
    check(r.returncode == 0, f"--eval-merge of the shards: exit {r.returncode} {r.stderr[-300:]}")
    one = vitlens(a.app, "--agreement", photos)
    check(r.stdout == one.stdout, "merged stdout = one run's")
    for f in ("agreement.csv", "agreement_pairs.csv", "agreement_photos.csv",
              "agreement_run.csv", "agreement.md", "agreement.png"):
        same = os.path.exists(os.path.join(merged, f)) and \
            filecmp.cmp(os.path.join(merged, f), os.path.join(out, f), shallow=False)
        check(same, f"merged {f} = one run's")
    # the same photo in two shards is refused
    r = vitlens(a.app, "--eval-merge", os.path.join(a.work, "shard1"),
                os.path.join(a.work, "shard1"))
    check(r.returncode == 1 and "in two shards" in r.stderr, "a photo in two shards: exit 1")
    # usage
    r = vitlens(a.app, "--agreement")
    check(r.returncode == 2 and "--agreement needs an IMAGE or FOLDER" in r.stderr,
          "--agreement without photos: exit 2")
    r = vitlens(a.app, "--agreement", "--masks", photos, photos)
    check(r.returncode == 2 and "--masks goes with" in r.stderr, "--masks with --agreement: exit 2")
    return 1 if failures else 0


if __name__ == "__main__":
    rc = main()
    print(f"{'FAILED' if rc == 1 else 'passed'}: {failures} failed check(s)")
    sys.exit(rc)
