"""test_pca.py - vit_feature_pca (the DINOv2 paper's Fig. 1 recipe, vit.h) against
an independent float64 numpy implementation written from the recipe.

    /usr/bin/python3 test_pca.py random --pca pca_dump --work DIR
    /usr/bin/python3 test_pca.py deit   --pca pca_dump --dump vit_dump --work DIR --shared SHARED
    /usr/bin/python3 test_pca.py basis  --pca pca_dump --work DIR

random: synthetic feature rows (seeded): a planted foreground cluster (offset from 0,
        so that a PCA that forgets to centre goes wrong) with three within-cluster
        directions of distinct variance, on several M and D (M < D: the Gram path;
        M > 256: several row blocks), M = 1 .. 4, D = 1 and 2, duplicated and negated
        columns (ties of the largest loading), constant columns, a foreground on a
        plane (its third component has no variance: blue 0), three outliers (fewer
        than 4 foreground rows: every row foreground), rows all equal, a border whose
        mean projection equals the others' (the sign falls back to the loadings), no
        border at all, and two images whose rows sit far apart (n_images 2: each
        image's own first PCA finds its planted foreground).
deit:   DeiT-Tiny's features (vit_dump --tokens: features.npy [L, T, D], the final
        norm on each block's output), patch rows only, border = the grid's edge
        patches: each photo at every layer; the four photos stacked at the last layer
        (each photo's own foreground, one second PCA for all: the numbers must match,
        and the cat photo's foreground must be the cat); the cat photo alone and
        stacked with its mirror image, where its foreground must be inside the
        picture more than on its edge, and mirrored patches must be coloured alike
        (behavioural checks). Exit 77 without SHARED.
basis:  the basis kept (vit_pca_fit, vit_pca_project: a video's colours held over its
        frames): vit_pca_project(vit_pca_fit(X), X) equals vit_feature_pca(X) byte for
        byte on every synthetic case of `random` (rgb.npy and fg.npy); and fitted on X1
        then projected on X2 (new rows of X1's distribution, the foreground moved and
        spread wider, so that some projections fall outside the fit's range) against
        the numpy reference of the same: X1's step 1 cut and step 2 basis applied to
        X2, clamped to [0, 1]; fg exact, rgb within TOL. Controls: a fresh fit of X2
        (vit_feature_pca), and the projection without the clamp, are further than
        WRONG x TOL from the engine.

The reference (reference() below) takes each PCA from numpy's SVD of the centred
rows in float64 (the engine: dsyevr on the scatter or Gram matrix), then applies the
recipe's rules as vit.h states them, with the same relative guards (VAR_REL,
TIE_REL). Both sides see the same float32 rows, so they differ by rounding only,
amplified where the spectrum is crowded: a case is "well separated" when each
component used is further than GAP of the top variance from its neighbours and no
row's projection is within MARGIN of the threshold; there fg must match exactly and
rgb within TOL. Elsewhere (near-degenerate spectra, where the components themselves
are not unique) only the recipe's invariants are checked. Measured (max |engine -
reference| of rgb): random 3.0e-08, DeiT-Tiny (every photo and layer, the joints)
3.0e-08, the float32 rounding of the output; fg identical in every case.

Negative controls, computed by the same reference with one mistake each, must be
further than WRONG x TOL from the engine (max |rgb| difference, some case of the run):
not centring, the last eigenvector instead of the first, no second PCA (colours from
the first PCA's components 1-3), one min-max over the three channels, one first PCA
over every image stacked (cases of several images). Measured
(random / DeiT-Tiny): 1.00 / 1.00, 1.00 / 1.00, 1.00 / 1.00, 0.92 / 0.33.
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

VAR_REL = 1e-10  # vit.h: a component with at most this share of the total variance has none
TIE_REL = 1e-9   # vit.h: ties of the largest loading, the border's mean, the threshold
TOL = 1e-6       # rgb, where well separated
GAP = 1e-4       # relative gap between neighbouring variances for a well-separated case
MARGIN = 1e-6    # relative distance of every projection from the foreground threshold
WRONG = 1000     # a control must be further than WRONG x TOL from the engine
CONTROLS = ("not centred", "last eigenvector", "no second PCA", "global min-max", "one first PCA")


class Report:
    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            print(f"  FAIL {what}")
        return ok

    def exit_code(self):
        print(f"\n{len(self.failures)} failure(s)" if self.failures else "\nall PCA checks passed")
        return 1 if self.failures else 0


# --- the reference ------------------------------------------------------------

def pca(x, k, centre=True):
    """Top k components of the rows of x (float64): mean, V [k, D] (unit rows,
    decreasing variance, zero rows beyond the rank), var [k] (sum of squared
    projections), the total, and every variance (for the gaps)."""
    mu = x.mean(0) if centre else np.zeros(x.shape[1])
    xc = x - mu
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    V, var = np.zeros((k, x.shape[1])), np.zeros(k)
    n = min(k, len(s))
    V[:n], var[:n] = vt[:n], s[:n] ** 2
    return mu, V, var, float((xc ** 2).sum()), s ** 2


def loading_sign(v):
    a = np.abs(v)
    j = np.nonzero(a >= a.max() * (1 - TIE_REL))[0][0]
    return -1.0 if v[j] < 0 else 1.0


def opposite_tie(v):
    """Do loadings of both signs tie for the largest |loading| (TIE_REL)?"""
    a = np.abs(v)
    tied = v[a >= a.max() * (1 - TIE_REL)]
    return bool((tied > 0).any() and (tied < 0).any())


def no_variance(var, total):
    return total <= 0 or var <= VAR_REL * total


def gap(allvar, c, total):
    """Relative distance of component c's variance to its neighbours' (inf when it
    has none or its neighbours are at distance > 0 and it is alone)."""
    if no_variance(allvar[c] if c < len(allvar) else 0.0, total):
        return np.inf
    top = allvar[0]
    d = [allvar[c - 1] - allvar[c]] if c > 0 else []
    d.append(allvar[c] - (allvar[c + 1] if c + 1 < len(allvar) else 0.0))
    return min(d) / top


def first_step(x, border, mistake):
    """Step 1 on one image's rows: fg [m] (bool), the separation, the ties."""
    m = len(x)
    mu, V, var, total, allvar = pca(x, len(x[0]), centre=mistake != "not centred")
    last = len(allvar) - 1  # the smallest of the min(M, D) components
    c1 = V[last] if mistake == "last eigenvector" else V[0]
    v1 = var[last] if mistake == "last eigenvector" else var[0]
    p = np.zeros(m) if no_variance(v1, total) else (x - mu) @ c1
    big = np.abs(p).max()
    s = loading_sign(c1)
    ties = {"border": False, "loading": False}
    if border is not None and 0 < border.sum() < m:
        mb, mo = p[border].mean(), p[~border].mean()
        if abs(mb - mo) > TIE_REL * big:
            s = 1.0 if mb < mo else -1.0
        else:
            ties["border"] = True
    if (border is None or ties["border"]) and big > 0:
        ties["loading"] |= opposite_tie(c1)
    fg = s * p > TIE_REL * big
    if fg.sum() < 4:
        fg[:] = True
    sep = {"gap1": gap(allvar, 0, total),
           "margin": (np.abs(p).min() / big) if big > 0 else np.inf}
    return fg, sep, ties, (mu, V, var, total, allvar)


def reference(x, border, mistake=None, n_images=1):
    """The recipe of vit.h in float64 over n_images equal blocks of rows; one of
    CONTROLS as `mistake`. Returns rgb [M, 3], fg [M] (bool) and how well separated
    the case is."""
    x = np.asarray(x, np.float64)
    m = len(x)
    blocks = 1 if mistake == "one first PCA" else n_images
    mb = m // blocks
    fg, sep, ties = np.zeros(m, bool), {"gap1": np.inf, "margin": np.inf}, {}
    for b in range(blocks):
        rows = slice(b * mb, (b + 1) * mb)
        f, s1, t1, first = first_step(x[rows], None if border is None else border[rows], mistake)
        fg[rows] = f
        sep = {k: min(sep[k], s1[k]) for k in sep}
        ties = {k: ties.get(k, False) or v for k, v in t1.items()}
    mu, V, var, total, allvar = first  # the last block's, for "no second PCA" (one block)

    if mistake == "no second PCA":
        mu2, V2, var2, total2, allvar2 = mu, V[:3], var[:3], total, allvar
    else:
        mu2, V2, var2, total2, allvar2 = pca(x[fg], len(x[0]), centre=mistake != "not centred")
        if mistake == "last eigenvector":
            n = len(allvar2)
            V2, var2 = V2[:n][::-1], var2[:n][::-1]
        V2, var2 = V2[:3], var2[:3]
    sep["gap2"] = min(gap(allvar2, c, total2) for c in range(min(3, len(allvar2))))
    rgb = np.zeros((m, 3))
    q = np.zeros((fg.sum(), 3))
    live = []
    for c in range(min(3, len(V2))):
        if no_variance(var2[c], total2):
            continue
        q[:, c] = (x[fg] - mu2) @ V2[c] * loading_sign(V2[c])
        ties["loading"] |= opposite_tie(V2[c])
        live.append(c)
    if mistake == "global min-max" and live:
        lo, hi = q[:, live].min(), q[:, live].max()
        for c in live:
            rgb[fg, c] = (q[:, c] - lo) / (hi - lo)
    else:
        for c in live:
            lo, hi = q[:, c].min(), q[:, c].max()
            if hi > lo:
                rgb[fg, c] = (q[:, c] - lo) / (hi - lo)
    sep["ties"] = ties
    return rgb, fg, sep


# --- the engine ----------------------------------------------------------------

def stage(exe, work, name, x, border):
    """WORK/NAME/ made afresh with x.npy (and border.npy): (the folder, pca_dump's arguments)."""
    d = Path(work) / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    np.save(d / "x.npy", np.ascontiguousarray(x, np.float32))
    args = [exe, "--x", d / "x.npy", "--out", d]
    if border is not None:
        np.save(d / "border.npy", border.astype(np.uint8))
        args += ["--border", d / "border.npy"]
    return d, args


def run_pca(exe, work, name, x, border, repeat=0, n_images=1):
    d, args = stage(exe, work, name, x, border)
    if repeat:
        args += ["--repeat", str(repeat)]
    if n_images > 1:
        args += ["--images", str(n_images)]
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pca_dump {name} exited {r.returncode}:\n{r.stderr}")
    if repeat:
        print("   ", r.stdout.strip())
    return np.load(d / "rgb.npy"), np.load(d / "fg.npy") > 0.5


def compare(rep, label, exe, work, x, border, worst, missed, planted_fg=None, n_images=1):
    """Engine against the reference on one case; records the controls' distances."""
    x = np.ascontiguousarray(x, np.float32)
    rgb, fg = run_pca(exe, work, label.replace(" ", "_").replace("/", "_"), x, border,
                      n_images=n_images)
    want_rgb, want_fg, sep = reference(x, border, n_images=n_images)
    m = len(x)
    ok = rep.check(rgb.shape == (m, 3) and fg.shape == (m,), f"{label}: shapes {rgb.shape} {fg.shape}")
    if not ok:
        return None
    # invariants of the recipe, whatever the conditioning
    rep.check(np.all((rgb >= 0) & (rgb <= 1)), f"{label}: rgb outside [0, 1]")
    rep.check(np.all(rgb[~fg] == 0), f"{label}: a background row is not black")
    rep.check(fg.sum() >= 4 or fg.all(), f"{label}: {fg.sum()} foreground rows of {m}")
    for c in range(3):
        col = rgb[fg, c]
        rep.check(np.all(col == 0) or (col.min() == 0 and col.max() == 1),
                  f"{label}: channel {c} not min-max scaled over the foreground "
                  f"[{col.min()}, {col.max()}]")
    if planted_fg is not None:
        rep.check(np.array_equal(fg, planted_fg),
                  f"{label}: foreground differs from the planted one in {np.sum(fg != planted_fg)} rows")
    clear = sep["gap1"] > GAP and sep["margin"] > MARGIN
    well = clear and sep["gap2"] > GAP
    if clear:
        rep.check(np.array_equal(fg, want_fg),
                  f"{label}: foreground differs from the reference in {np.sum(fg != want_fg)} rows")
    err = float(np.abs(rgb - want_rgb).max()) if np.array_equal(fg, want_fg) else np.inf
    if well:
        worst[0] = max(worst[0], err)
        rep.check(err <= TOL, f"{label}: rgb error {err:.2e} > {TOL:.0e}")
    for what in CONTROLS:
        if what == "one first PCA" and n_images == 1:
            continue  # the same recipe on one image
        w_rgb, w_fg, _ = reference(x, border, mistake=what, n_images=n_images)
        missed.setdefault(what, []).append(float(np.abs(rgb - w_rgb).max()))
    print(f"  {label}: M={m} D={x.shape[1]} fg {fg.sum()} gaps {sep['gap1']:.1e}/{sep['gap2']:.1e} "
          f"margin {sep['margin']:.1e} rgb error {err:.1e}" + ("" if well else " (not well separated)")
          + "".join(f", {k} tie" for k, v in sep["ties"].items() if v))
    return rgb, fg, sep


def finish(rep, worst, missed):
    print(f"\nmax rgb error where well separated: {worst[0]:.2e} (tolerance {TOL:.0e})")
    for what, ds in missed.items():
        print(f"control {what}: largest distance {max(ds):.3f}")
        rep.check(max(ds) > WRONG * TOL,
                  f"control {what}: never further than {WRONG} x {TOL:.0e} from the engine")


# --- synthetic cases -------------------------------------------------------------

def planted(rng, m, d, n_fg=None, offset=3.0, noise=0.3):
    """Rows with a foreground cluster: background N(0, noise^2) around `offset`,
    foreground shifted by 6 along a random direction, with spreads 3, 2 and 1.2 along
    three more. Returns x, the border (a third of the background), the planted fg."""
    n_fg = n_fg if n_fg is not None else int(0.4 * m)
    k = min(d, 4)
    basis = np.linalg.qr(rng.standard_normal((d, k)))[0].T  # [k, d], orthonormal rows
    x = offset + noise * rng.standard_normal((m, d))
    is_fg = np.zeros(m, bool)
    is_fg[rng.permutation(m)[:n_fg]] = True
    scales = [3.0, 2.0, 1.2][: k - 1]
    x[is_fg] += 6.0 * basis[0]
    for s, b in zip(scales, basis[1:]):
        x[is_fg] += np.outer(s * rng.standard_normal(n_fg), b)
    bg_idx = np.nonzero(~is_fg)[0]
    border = np.zeros(m, bool)
    border[bg_idx[: max(1, len(bg_idx) // 3)]] = True
    return x, border, is_fg


def test_random(args, rep):
    rng = np.random.default_rng(14)
    worst, missed = [0.0], {}
    work = Path(args.work)

    def case(label, x, border, planted_fg=None):
        return compare(rep, label, args.pca, work, x, border, worst, missed, planted_fg)

    for m, d in [(300, 64), (50, 200), (120, 120), (700, 48), (784, 192), (200, 768)]:
        x, border, is_fg = planted(rng, m, d)
        case(f"planted {m}x{d}", x, border, is_fg)
    x, border, is_fg = planted(rng, 300, 64)
    case("planted 300x64, no border", x, None)
    x, border, is_fg = planted(rng, 40, 16, n_fg=12)
    case("planted 40x16, small fg", x, border, is_fg)

    # two images whose rows sit far apart (another subject, another exposure): each
    # image's own first component finds its planted foreground, which one first PCA
    # over both would not (it would split the images); the second PCA over both
    xa, ba, fa = planted(rng, 196, 64)
    xb, bb, fb = planted(rng, 196, 64)
    xb = xb + 40.0 * rng.standard_normal(64) / 8.0
    x, border, is_fg = np.concatenate([xa, xb]), np.concatenate([ba, bb]), np.concatenate([fa, fb])
    compare(rep, "two images apart", args.pca, work, x, border, worst, missed, is_fg, n_images=2)
    _, one_fg, _ = reference(x, border, mistake="one first PCA", n_images=2)
    print(f"  one first PCA over both: {np.sum(one_fg != is_fg)} rows off the planted foregrounds")
    rep.check(np.sum(one_fg != is_fg) > 20,
              "two images apart: one first PCA over both should miss the planted foregrounds")

    # M = 1 .. 4 and D = 1, 2: fewer rows or columns than components
    for m in (1, 2, 3, 4):
        x = rng.standard_normal((m, 10)) * [5, 3, 2, 1, 1, 1, 1, 1, 1, 1]
        case(f"M = {m}", x, np.arange(m) == 0 if m > 1 else None)
    for d in (1, 2):
        x = rng.standard_normal((60, d)) * [4, 1][:d]
        x[:25] += 5.0
        case(f"D = {d}", x, np.arange(60) >= 50)

    # ties: column 1 a copy of column 0, column 2 its negation (equal |loading|s of
    # opposite sign, the largest: the first counts), constant columns 6..13
    x, border, is_fg = planted(rng, 150, 4)
    a = 3 * x[:, :1]
    x = np.concatenate([a, a, -a, x[:, 1:], np.full((150, 8), 2.5)], 1)
    _, _, sep = case("ties and constant columns", x, border)
    rep.check(sep["ties"]["loading"], "ties and constant columns: no tie of opposite loadings")
    x = np.concatenate([x[:, :1], -x[:, :1], x[:, 3:]], 1)
    _, _, sep = case("negated copy first", x, None)
    rep.check(sep["ties"]["loading"], "negated copy first: no tie of opposite loadings")

    # a foreground on a plane (integer rows: exactly, so the third component has no
    # variance and blue is 0), with a background on a line
    m = 80
    x = np.full((m, 6), 1.0)
    x[:30, 0] = np.arange(30) % 3
    x[30:, 0] = 20.0 + rng.integers(0, 5, 50)
    x[30:, 1] = rng.integers(0, 4, 50)
    x[30:, 2] = 7.0
    rgb, fg, _ = compare(rep, "foreground on a plane", args.pca, work, x, np.arange(m) < 10, worst,
                      missed)
    rep.check(np.all(rgb[:, 2] == 0) and rgb[fg, 0].max() == 1 and rgb[fg, 1].max() == 1,
              "foreground on a plane: expected red and green, no blue")

    # three outliers: the first component finds them, too few: every row foreground
    x = rng.standard_normal((60, 12))
    x[:3] += 40.0
    rgb, fg, _ = compare(rep, "three outliers", args.pca, work, x, np.arange(60) >= 50, worst, missed)
    rep.check(fg.all(), "three outliers: every row should be foreground")

    # rows all equal: no variance at all
    x = np.tile(rng.standard_normal(9), (20, 1))
    rgb, fg, _ = compare(rep, "rows all equal", args.pca, work, x, np.arange(20) < 5, worst, missed)
    rep.check(fg.all() and np.all(rgb == 0), "rows all equal: every row foreground and black")

    # a border whose mean projection equals the others': pairs r, -r, border = whole
    # pairs, so both means are 0 and the sign falls back to the largest loading
    r = rng.standard_normal((20, 8)) * [6, 3, 2, 1, 0.5, 0.5, 0.5, 0.5]
    x = np.empty((40, 8))
    x[0::2], x[1::2] = r, -r
    _, _, sep = case("border tie", x, np.arange(40) < 10)
    rep.check(sep["ties"]["border"], "border tie: the border's mean projection is not the others'")

    finish(rep, worst, missed)


# --- the basis kept: fit on X1, project X2 -------------------------------------------

def reference_fit(x, border):
    """The basis vit_pca_fit keeps of one image's rows x (float64): step 1's mean,
    signed first component and cut, step 2's mean, signed components, lo, hi, live."""
    x = np.asarray(x, np.float64)
    mu, V, var, total, _ = pca(x, len(x[0]))
    c1 = np.zeros_like(V[0]) if no_variance(var[0], total) else V[0]
    fg, _, _, _ = first_step(x, border, None)
    p = (x - mu) @ c1
    s = loading_sign(c1)
    if border is not None and 0 < border.sum() < len(x):
        mb, mo = p[border].mean(), p[~border].mean()
        if abs(mb - mo) > TIE_REL * np.abs(p).max():
            s = 1.0 if mb < mo else -1.0
    mu2, V2, var2, total2, _ = pca(x[fg], len(x[0]))
    comps, lo, hi = [], [], []
    for c in range(3):
        if c >= len(V2) or no_variance(var2[c], total2):
            comps.append(None), lo.append(0.0), hi.append(0.0)
            continue
        v = V2[c] * loading_sign(V2[c])
        q = (x[fg] - mu2) @ v
        comps.append(v), lo.append(q.min()), hi.append(q.max())
    return dict(mu=mu, c1=s * c1, cut=TIE_REL * np.abs(p).max(), mu2=mu2, comps=comps, lo=lo,
                hi=hi, fit_fg=fg)


def reference_project(b, x, clamp=True):
    """rgb [M, 3], fg [M] of x's rows with the kept basis b (one image), and the
    smallest distance of a projection from the cut (relative)."""
    x = np.asarray(x, np.float64)
    p = (x - b["mu"]) @ b["c1"]
    fg = p > b["cut"]
    if fg.sum() < 4:
        fg[:] = True
    rgb = np.zeros((len(x), 3))
    for c, v in enumerate(b["comps"]):
        if v is None or not b["hi"][c] > b["lo"][c]:
            continue
        q = ((x[fg] - b["mu2"]) @ v - b["lo"][c]) / (b["hi"][c] - b["lo"][c])
        rgb[fg, c] = np.clip(q, 0, 1) if clamp else q
    big = np.abs(p).max()
    return rgb, fg, (np.abs(p).min() / big) if big > 0 else np.inf


def run_split(exe, work, name, x, border, n_images=1, fit=None):
    """pca_dump --split (or --fit: fit on fit = (x1, border1)); (rgb, fg, raw bytes)."""
    d, args = stage(exe, work, name, x, border)
    if n_images > 1:
        args += ["--images", str(n_images)]
    if fit is None:
        args += ["--split"]
    else:
        np.save(d / "fit.npy", np.ascontiguousarray(fit[0], np.float32))
        args += ["--fit", d / "fit.npy"]
        if fit[1] is not None:
            np.save(d / "fit_border.npy", fit[1].astype(np.uint8))
            args += ["--fit-border", d / "fit_border.npy"]
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pca_dump {name} exited {r.returncode}:\n{r.stderr}")
    return (np.load(d / "rgb.npy"), np.load(d / "fg.npy") > 0.5,
            (d / "rgb.npy").read_bytes() + (d / "fg.npy").read_bytes())


def test_basis(args, rep):
    rng = np.random.default_rng(37)
    work = Path(args.work)
    cases = []
    for m, d in [(300, 64), (50, 200), (700, 48), (784, 192)]:
        x, border, _ = planted(rng, m, d)
        cases.append((f"planted {m}x{d}", x, border, 1))
    x, _, _ = planted(rng, 300, 64)
    cases.append(("no border", x, None, 1))
    for m in (1, 2, 3, 4):
        cases.append((f"M = {m}", rng.standard_normal((m, 10)) * [5, 3, 2, 1, 1, 1, 1, 1, 1, 1],
                      np.arange(m) == 0 if m > 1 else None, 1))
    for d in (1, 2):
        x = rng.standard_normal((60, d)) * [4, 1][:d]
        x[:25] += 5.0
        cases.append((f"D = {d}", x, np.arange(60) >= 50, 1))
    x, border, _ = planted(rng, 150, 4)
    a = 3 * x[:, :1]
    cases.append(("ties", np.concatenate([a, a, -a, x[:, 1:], np.full((150, 8), 2.5)], 1),
                  border, 1))
    x = np.full((80, 6), 1.0)
    x[:30, 0] = np.arange(30) % 3
    x[30:, 0], x[30:, 1], x[30:, 2] = 20.0 + rng.integers(0, 5, 50), rng.integers(0, 4, 50), 7.0
    cases.append(("foreground on a plane", x, np.arange(80) < 10, 1))
    x = rng.standard_normal((60, 12))
    x[:3] += 40.0
    cases.append(("three outliers", x, np.arange(60) >= 50, 1))
    cases.append(("rows all equal", np.tile(rng.standard_normal(9), (20, 1)), np.arange(20) < 5, 1))
    xa, ba, _ = planted(rng, 196, 64)
    xb, bb, _ = planted(rng, 196, 64)
    cases.append(("two images", np.concatenate([xa, xb + 5.0]), np.concatenate([ba, bb]), 2))
    for label, x, border, n_images in cases:
        x = np.ascontiguousarray(x, np.float32)
        name = "split_" + label.replace(" ", "_")
        run_pca(args.pca, work, name + "_one", x, border, n_images=n_images)
        one = ((work / (name + "_one") / "rgb.npy").read_bytes() +
               (work / (name + "_one") / "fg.npy").read_bytes())
        _, _, two = run_split(args.pca, work, name, x, border, n_images)
        rep.check(one == two, f"{label}: project(fit(X), X) is not vit_feature_pca(X) byte for byte")
        print(f"  {label}: project(fit(X), X) {'==' if one == two else '!='} vit_feature_pca(X)")

    # fit on X1, project X2: X2 from X1's distribution, its foreground spread 1.5x wider
    worst, far, nofit, noclamp = 0.0, 0, [], []
    for m, d in [(300, 64), (196, 192), (120, 400)]:
        seed = int(rng.integers(1 << 30))
        x1, b1, f1 = planted(np.random.default_rng(seed), m, d)
        g = np.random.default_rng(seed + 1)
        x2 = x1.copy()
        x2[f1] += 0.5 * (x1[f1] - x1[f1].mean(0)) + 0.1 * g.standard_normal((f1.sum(), d))
        x2[~f1] += 0.1 * g.standard_normal(((~f1).sum(), d))
        x2, b2 = np.roll(x2, 17, axis=0), np.roll(b1, 17)  # the object moved: other rows
        x1 = np.ascontiguousarray(x1, np.float32)
        x2 = np.ascontiguousarray(x2, np.float32)
        label = f"fit {m}x{d}, project new rows"
        rgb, fg, _ = run_split(args.pca, work, f"fit_{m}x{d}", x2, b2, fit=(x1, b1))
        b = reference_fit(x1, b1)
        want, want_fg, margin = reference_project(b, x2)
        rep.check(margin > MARGIN, f"{label}: a projection within {MARGIN} of the cut")
        rep.check(np.array_equal(fg, want_fg), f"{label}: foreground differs from the reference "
                  f"in {np.sum(fg != want_fg)} rows")
        err = float(np.abs(rgb - want).max())
        worst = max(worst, err)
        rep.check(err <= TOL, f"{label}: rgb error {err:.2e} > {TOL:.0e}")
        outside = int(((rgb[fg] == 0) | (rgb[fg] == 1)).sum())
        far += outside
        nofit.append(float(np.abs(rgb - run_pca(args.pca, work, f"fresh_{m}x{d}", x2, b2)[0]).max()))
        noclamp.append(float(np.abs(rgb - reference_project(b, x2, clamp=False)[0]).max()))
        print(f"  {label}: fg {fg.sum()} rgb error {err:.1e}, {outside} values clamped")
    rep.check(far > 20, f"projections outside the fit's range: only {far} clamped values")
    print(f"\nmax rgb error of the projection: {worst:.2e} (tolerance {TOL:.0e})")
    for what, ds in (("a fresh fit of X2", nofit), ("no clamp", noclamp)):
        print(f"control {what}: largest distance {max(ds):.3f}")
        rep.check(max(ds) > WRONG * TOL, f"control {what}: never further than {WRONG} x "
                  f"{TOL:.0e} from the engine")


# --- DeiT-Tiny ---------------------------------------------------------------------

def edge_mask(gh, gw):
    edge = np.zeros((gh, gw), bool)
    edge[0, :] = edge[-1, :] = edge[:, 0] = edge[:, -1] = True
    return edge.ravel()


def deit_features(args, source, out):
    """Patch features [L, N, D] of every block (vit_dump --tokens), the grid's edge
    [N] and the normalised input [3, Sh, Sw]. source: a photo, or a raw input file."""
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    model = Path(args.shared) / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    how = "--input" if source.suffix == ".f32" else "--image"
    r = subprocess.run([str(args.dump), "--model", str(model), how, str(source), "--tokens",
                        "--out", str(out)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"vit_dump {source.name} exited {r.returncode}:\n{r.stderr}")
    cfg = json.loads((out / "config.json").read_text())
    gh, gw, n_prefix = cfg["grid_h"], cfg["grid_w"], cfg["n_prefix"]
    feats = np.load(out / "features.npy")[:, n_prefix:]
    return feats, edge_mask(gh, gw), np.load(out / "input.npy"), (gh, gw)


def inside_edge(fg, edge):
    return float(fg[~edge].mean()), float(fg[edge].mean())


def test_deit(args, rep):
    shared = Path(args.shared) if args.shared else None
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors" if shared else None
    photos = sorted(p for p in (shared / "images").glob("*")
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg")) if shared else []
    if not shared or not model.exists() or not any(p.stem == "chelsea" for p in photos):
        print(f"skip: no DeiT-Tiny weights or the photos under '{args.shared}'")
        return 77
    worst, missed = [0.0], {}
    work = Path(args.work)
    feats, edges, inputs = {}, {}, {}
    for photo in photos:
        f, edge, inp, grid = deit_features(args, photo, work / "dump" / photo.stem)
        feats[photo.stem], edges[photo.stem], inputs[photo.stem] = f, edge, inp
        print(f"[{photo.name}] grid {grid}, {f.shape[0]} layers")
        for layer in range(f.shape[0]):
            compare(rep, f"{photo.stem} layer {layer}", args.pca, work, f[layer], edge, worst,
                          missed)
    last = feats["chelsea"].shape[0] - 1

    # the cat alone at the last block: its foreground is inside the picture
    _, fg, _ = compare(rep, "chelsea alone, last layer", args.pca, work, feats["chelsea"][last],
                       edges["chelsea"], worst, missed)
    inside, ring = inside_edge(fg, edges["chelsea"])
    print(f"  the cat alone: foreground {inside:.2f} of the inner patches, {ring:.2f} of the edge")
    rep.check(inside > ring + 0.15, f"the cat alone: foreground not in the middle ({inside:.2f} "
              f"inside, {ring:.2f} on the edge)")

    # every photo stacked at the last block: each photo's own foreground, one second
    # PCA for all (the numbers must match); the cat photo's foreground is the cat
    names = list(feats)
    x = np.concatenate([feats[n][last] for n in names])
    border = np.concatenate([edges[n] for n in names])
    _, fg, _ = compare(rep, f"joint {'+'.join(names)} layer {last}", args.pca, work, x, border,
                       worst, missed, n_images=len(names))
    n = len(border) // len(names)
    print("  foreground per photo: " + ", ".join(
        f"{name} {fg[i * n:(i + 1) * n].mean():.2f}" for i, name in enumerate(names)))
    inside, ring = inside_edge(fg[names.index("chelsea") * n:][:n], edges["chelsea"])
    print(f"  the cat photo in the joint: foreground {inside:.2f} inside, {ring:.2f} on the edge")
    rep.check(inside > ring + 0.15, f"joint: the cat photo's foreground not in the middle "
              f"({inside:.2f} inside, {ring:.2f} on the edge)")
    rep.check(all(0 < fg[i * n:(i + 1) * n].mean() < 1 for i in range(len(names))),
              "joint: every photo has a foreground and a background")

    # the cat and its mirror image stacked, the paper's setting (images of one subject):
    # the cat's foreground inside, and mirrored patches coloured alike
    raw = work / "chelsea_mirror.f32"
    np.ascontiguousarray(inputs["chelsea"][:, :, ::-1], np.float32).tofile(raw)
    fm, edge, _, (gh, gw) = deit_features(args, raw, work / "dump" / "chelsea_mirror")
    x = np.concatenate([feats["chelsea"][last], fm[last]])
    rgb, fg, _ = compare(rep, f"joint chelsea+mirror layer {last}", args.pca, work, x,
                         np.concatenate([edge, edge]), worst, missed, n_images=2)
    n = gh * gw
    mirror = np.arange(n).reshape(gh, gw)[:, ::-1].ravel()
    cat, cat_m = fg[:n], fg[n:][mirror]
    both = cat & cat_m
    agree = float((cat == cat_m).mean())
    corr = float(np.corrcoef(rgb[:n][both].ravel(), rgb[n:][mirror][both].ravel())[0, 1])
    inside, ring = inside_edge(cat, edge)
    print(f"  cat + mirror: foreground {inside:.2f} inside, {ring:.2f} on the edge; the mirror's "
          f"foreground agrees on {agree:.2f} of the patches, colour correlation {corr:.2f}")
    rep.check(inside > ring + 0.15, f"cat + mirror: foreground not in the middle ({inside:.2f} "
              f"inside, {ring:.2f} on the edge)")
    rep.check(agree >= 0.8 and corr >= 0.9, f"cat + mirror: mirrored patches not coloured alike "
              f"(foreground agreement {agree:.2f}, colour correlation {corr:.2f})")
    finish(rep, worst, missed)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["random", "deit", "basis"])
    ap.add_argument("--pca", required=True)
    ap.add_argument("--dump")
    ap.add_argument("--work", default="/tmp/test_pca")
    ap.add_argument("--shared", default="")
    args = ap.parse_args()
    rep = Report()
    t = time.time()
    rc = {"random": test_random, "deit": test_deit, "basis": test_basis}[args.what](args, rep)
    if rc == 77:
        sys.exit(77)
    print(f"({time.time() - t:.1f} s)")
    sys.exit(rep.exit_code())


if __name__ == "__main__":
    main()
