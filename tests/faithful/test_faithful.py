"""test_faithful.py - the faithfulness functions (engine/eval/faithful.c, vit.h "Faithfulness:
perturbation, localisation, sanity checks") against references written here from the
formulas in vit.h, in float64 numpy (torch for the blur), on seeded random cases.

    /usr/bin/python3 test_faithful.py --dump faithful_dump --work DIR

Each reference is computed another way than the engine does it:
  vit_patch_order      numpy.lexsort on (index, -value) / (index, value): random maps,
                       maps with many ties, constant maps, signed zeros, n = 1
  vit_perturb_count    floor((2 s n + n_steps) / (2 n_steps)) in Python integers, every
                       n in 0 .. 300, n_steps in 1 .. 300, step in 0 .. n_steps
  vit_patch_mix        a [Sh, Sw] map of each pixel's patch, numpy.where, pixel by pixel
  vit_blur             torch.nn.functional.conv2d in float64 with the 1-D kernel along
                       rows then columns (zero padding = radius); also the 2-D kernel in
                       float32, as RISE runs it (reported)
  vit_auc              numpy.trapz(y, dx=1/(n-1))
  vit_map_to_patches   reshape [gh, P, gw, P] and sum; vit_mask_to_patches the same count
  pointing game, energy pointing game, top-k IoU: numpy on the definitions
  vit_spearman         average ranks counted by broadcasting (#less + (#equal + 1) / 2),
                       then numpy.corrcoef; ties in one or both, constants (NaN)
  vit_random_map       splitmix64 in Python integers
  vit_gaussian_map     the formula in numpy
There is no scipy on the test machine: the references are written out here, not called.

Tolerances: exact for orders, counts, masks, mixed pixels and random maps; 1e-6 for the
blur (absolute, values of a normalised image); 1e-12 for AUC, localisation scores and
Spearman (double sums of float32 inputs); 1 ulp-ish (rel 1e-6) for float32 outputs.

Negative controls, each computed from the same cases with one planted mistake, must be
further from the engine than WRONG x the tolerance (or, for an exact comparison, differ
in most positions): the orders reversed (most first <-> least first), ties broken the
other way, the blur with reflect padding instead of zeros, Pearson instead of Spearman,
and Chefer et al.'s truncation instead of rounding half up for the counts.

Measured (max |engine - reference|): orders, counts, masks, mixed pixels, random maps
and the localisation scores identical; blur 3.8e-08 (float32 rounding of the output;
3.6e-07 from RISE's float32 2-D conv2d); AUC 1.1e-16; map to patches 5.8e-08 relative;
Spearman 2.2e-16; Gaussian map 0. Controls: a reversed order differs in at least 0.67
of the positions of every map with two or more values (mean 0.98), ties broken the
other way in at least 0.29 of every map with ties; reflect padding 0.58 (5.8e5 x the
tolerance); Pearson 0.82 (8.2e11 x); truncated counts differ in 6 654 375 of the
13 680 450. (RISE's own gkern(11, 5) taps, for vit.h: 0.0880 .. 0.0940 against this
kernel's 0.0663 .. 0.1094, printed each run.)
"""
import argparse
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TOL_BLUR = 1e-6
TOL_DOUBLE = 1e-12
TOL_F32_REL = 1e-6
WRONG = 1000
VIT_ERR_ARG = 5

# --- requests and results ------------------------------------------------------


class Requests:
    """Records for faithful_dump (see its top), each with a reader of its result."""

    def __init__(self):
        self.buf = bytearray()
        self.readers = []

    def i32(self, *v):
        self.buf += struct.pack(f"={len(v)}i", *v)

    def arr(self, a, dtype):
        self.buf += np.ascontiguousarray(a, dtype=dtype).tobytes()

    def start(self, op):
        self.i32(op)

    def expect(self, reader):
        """reader(Results) takes this record's result and returns what to check."""
        self.readers.append(reader)


class Results:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, dtype, n):
        dt = np.dtype(dtype)
        a = np.frombuffer(self.data, dtype=dt, count=n, offset=self.at)
        self.at += dt.itemsize * n
        return a.copy()

    def i32(self):
        return int(self.take("=i4", 1)[0])

    def f64(self):
        return float(self.take("=f8", 1)[0])


class Report:
    def __init__(self):
        self.failures = []
        self.maxdiff = {}

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            print(f"  FAIL {what}")
        return ok

    def diff(self, name, d):
        self.maxdiff[name] = max(self.maxdiff.get(name, 0.0), float(d))


# --- references ------------------------------------------------------------------


def ref_order(m, most_first):
    idx = np.arange(len(m))
    m = m.astype(np.float64)
    return np.lexsort((idx, -m if most_first else m))


def ref_count(s, n_steps, n):
    return (2 * s * n + n_steps) // (2 * n_steps)


def ref_mix(base, fill, gh, gw, P, order, k):
    N = gh * gw
    ys, xs = np.indices((gh * P, gw * P))
    patch = (ys // P) * gw + xs // P
    taken_ids = [p for p in order[:min(k, N)] if 0 <= p < N]
    taken = np.isin(patch, taken_ids)[None]
    src = np.zeros_like(base) if fill is None else fill
    return np.where(taken, src, base)


def kernel1d(sigma, radius):
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-x * x / (2.0 * float(sigma) ** 2))
    return g / g.sum()


def ref_blur(img, sigma, radius, mode="zeros"):
    """[C, H, W] float64 blurred by conv2d along rows then columns."""
    g = torch.tensor(kernel1d(sigma, radius))
    x = torch.tensor(img, dtype=torch.float64)[:, None]
    K = 2 * radius + 1
    if mode == "zeros":
        x = F.conv2d(x, g.view(1, 1, 1, K), padding=(0, radius))
        x = F.conv2d(x, g.view(1, 1, K, 1), padding=(radius, 0))
    else:  # the planted mistake: reflect padding
        x = F.pad(x, (radius, radius, radius, radius), mode="reflect")
        x = F.conv2d(F.conv2d(x, g.view(1, 1, 1, K)), g.view(1, 1, K, 1))
    return x[:, 0].numpy()


def rise_blur_f32(img, sigma, radius):
    """RISE's way: one 2-D float32 kernel, conv2d in float32 (reported only)."""
    k = np.outer(kernel1d(sigma, radius), kernel1d(sigma, radius)).astype(np.float32)
    x = torch.tensor(img, dtype=torch.float32)[:, None]
    return F.conv2d(x, torch.tensor(k)[None, None], padding=radius)[:, 0].numpy()


def rise_gkern_1d(klen=11, nsig=5.0, truncate=4.0):
    """One axis of RISE's gkern: scipy.ndimage.gaussian_filter of a delta (mode
    'reflect', radius int(truncate * sigma + 0.5)), written out."""
    r = int(truncate * nsig + 0.5)
    x = np.arange(-r, r + 1)
    w = np.exp(-0.5 / nsig**2 * x**2)
    w /= w.sum()

    def reflect(m):  # scipy's 'reflect': d c b a | a b c d | d c b a
        m %= 2 * klen
        return m if m < klen else 2 * klen - 1 - m

    out = np.zeros(klen)
    for i in range(klen):
        for j, wj in zip(x, w):
            if reflect(i + j) == klen // 2:
                out[i] += wj
    return out


def ref_ranks(v):
    v = v.astype(np.float64)
    less = (v[None, :] < v[:, None]).sum(1)
    equal = (v[None, :] == v[:, None]).sum(1)
    return less + (equal + 1) / 2.0


def ref_spearman(a, b):
    ra, rb = ref_ranks(a), ref_ranks(b)
    if np.all(ra == ra[0]) or np.all(rb == rb[0]):
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def pearson(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    if np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def splitmix64_map(n, seed):
    M = (1 << 64) - 1
    s, out = seed, np.empty(n, np.float32)
    for i in range(n):
        s = (s + 0x9E3779B97F4A7C15) & M
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        z ^= z >> 31
        out[i] = np.float32((z >> 40) / 2.0**24)
    return out


def ref_gaussian(gh, gw, sf):
    r, c = np.indices((gh, gw)).astype(np.float64)
    d2 = (r - (gh - 1) / 2) ** 2 + (c - (gw - 1) / 2) ** 2
    s = float(np.float32(sf)) * min(gh, gw)  # the engine gets sigma_frac as a float32
    if not s > 0:
        return (d2 == 0).astype(np.float32)
    return np.exp(-d2 / (2 * s * s)).astype(np.float32)


def localisation(m, mask):
    m = m.astype(np.float64)
    inm = mask != 0
    k = int(inm.sum())
    if k == 0:
        return float("nan"), float("nan"), float("nan")
    tops = m == m.max()
    point = (tops & inm).sum() / tops.sum()
    e = np.maximum(m, 0.0)
    energy = e[inm].sum() / e.sum() if e.sum() > 0 else float("nan")
    top = set(ref_order(m, 1)[:k].tolist())
    msk = set(np.flatnonzero(inm).tolist())
    iou = len(top & msk) / len(top | msk)
    return float(point), float(energy), float(iou)


def same_nan(a, b, tol):
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b)), 0.0
    return abs(a - b) <= tol, abs(a - b)


# --- the cases --------------------------------------------------------------------


def build(rng):
    rq = Requests()
    # vit_patch_order
    maps = []
    for n in (1, 2, 3, 4, 7, 64, 196, 197, 577, 1000):
        maps.append(rng.standard_normal(n).astype(np.float32))
        maps.append((np.rint(rng.standard_normal(n) * 2) / 2).astype(np.float32))  # many ties
        maps.append(np.full(n, 0.25, np.float32))  # constant
        maps.append(np.where(rng.integers(0, 2, n) == 1, -0.0, 0.0).astype(np.float32))  # -0, +0
        maps.append(rng.integers(0, 3, n).astype(np.float32))  # three values
    maps.append(np.array([0.1, 0.4, 0.4, 0.2], np.float32))  # the 2x2 of the brief
    maps.append(np.array([3e38, -3e38, 1e-45, 0, -1e-45], np.float32))
    for m in maps:
        for mf in (1, 0):
            rq.start(1)
            rq.i32(len(m), mf)
            rq.arr(m, np.float32)

            def rd(res, m=m, mf=mf):
                st = res.i32()
                return ("order", m, mf, st, res.take("=i4", len(m)))

            rq.expect(rd)
    for bad_at, bad in ((3, np.nan), (0, np.inf), (9, -np.inf)):
        m = rng.standard_normal(10).astype(np.float32)
        m[bad_at] = bad
        rq.start(1)
        rq.i32(10, 1)
        rq.arr(m, np.float32)
        rq.expect(lambda res: ("order_bad", res.i32(), res.take("=i4", 10)))

    # vit_perturb_count, exhaustive
    rq.start(2)
    rq.i32(300, 300)
    n_counts = 301 * sum(ns + 1 for ns in range(1, 301))
    rq.expect(lambda res: ("count", res.take("=u2", n_counts)))

    # vit_patch_mix
    for gh, gw, P in ((2, 2, 1), (2, 3, 2), (4, 4, 3), (3, 5, 4), (14, 14, 16), (1, 7, 5)):
        N, Sh, Sw = gh * gw, gh * P, gw * P
        for has_fill, k, in_place, wild in ((1, N // 2, 0, 0), (0, N // 3, 0, 0), (1, N, 1, 0),
                                            (0, 0, 0, 0), (1, N + 2, 0, 1), (0, 1, 1, 0)):
            base = rng.uniform(-2.2, 2.7, (3, Sh, Sw)).astype(np.float32)
            fill = rng.uniform(-2.2, 2.7, (3, Sh, Sw)).astype(np.float32) if has_fill else None
            order = rng.permutation(N).astype(np.int32)
            if wild:  # entries out of range, skipped; k past N
                order = np.concatenate([order[:1], [-1, N], order[1:]]).astype(np.int32)
            rq.start(3)
            rq.i32(gh, gw, P, has_fill, k, in_place)
            rq.arr(base, np.float32)
            if has_fill:
                rq.arr(fill, np.float32)
            rq.i32(len(order))
            rq.arr(order, np.int32)
            want = ref_mix(base, fill, gh, gw, P, order, k)
            tag = (gh, gw, P, has_fill, k, in_place)
            rq.expect(lambda res, want=want, tag=tag:
                      ("mix", tag, want, res.take("=f4", want.size).reshape(want.shape)))

    # vit_blur
    blur_cases = [(3, 224, 224, 5.0, 5), (1, 7, 9, 1.3, 2), (2, 5, 3, 2.0, 6), (1, 1, 1, 1.0, 3),
                  (3, 32, 48, 0.8, 0), (1, 16, 16, 10.0, 15), (2, 33, 17, 3.0, 8),
                  (3, 64, 64, 5.0, 5)]
    for C, H, W, sigma, radius in blur_cases:
        img = rng.uniform(-2.2, 2.7, (C, H, W)).astype(np.float32)
        rq.start(4)
        rq.i32(C, H, W, radius)
        rq.arr([sigma], np.float32)
        rq.arr(img, np.float32)
        rq.expect(lambda res, img=img, s=sigma, r=radius:
                  ("blur", img, s, r, res.i32(), res.take("=f4", img.size).reshape(img.shape)))
    for C, H, W, sigma, radius in ((1, 4, 4, 0.0, 1), (1, 4, 4, -2.0, 1), (1, 4, 4, 1.0, -1),
                                   (1, 4, 4, float("nan"), 1)):
        rq.start(4)
        rq.i32(C, H, W, radius)
        rq.arr([sigma], np.float32)
        rq.arr(np.zeros((C, H, W)), np.float32)
        rq.expect(lambda res, n=C * H * W: ("blur_bad", res.i32(), res.take("=f4", n)))

    # vit_auc
    for n in (1, 2, 3, 10, 11, 101, 1000):
        y = rng.uniform(0, 1, n).astype(np.float32)
        if n == 11:
            y = np.sort(y)[::-1].copy()
        rq.start(5)
        rq.i32(n)
        rq.arr(y, np.float32)
        rq.expect(lambda res, y=y: ("auc", y, res.f64()))

    # vit_map_to_patches, vit_mask_to_patches
    for gh, gw, P in ((2, 2, 2), (3, 5, 3), (14, 14, 16), (2, 7, 4), (5, 1, 1)):
        Sh, Sw, N = gh * P, gw * P, gh * gw
        for pixels in (1, 0):
            m = rng.standard_normal((Sh, Sw) if pixels else N).astype(np.float32)
            rq.start(6)
            rq.i32(gh, gw, P, pixels)
            rq.arr(m, np.float32)
            rq.expect(lambda res, m=m, g=(gh, gw, P, pixels), N=N:
                      ("map2p", m, g, res.take("=f4", N)))
        for density in (0.5, 0.2, 0.9):
            mask = (rng.uniform(0, 1, (Sh, Sw)) < density).astype(np.uint8)
            mask[mask == 1] = rng.integers(1, 256, int(mask.sum()))  # any non-zero is in
            if P % 2 == 0 and P > 1:  # patch 0 exactly half in
                mask[:P, :P] = 0
                mask[: P // 2, :P] = 1
            rq.start(7)
            rq.i32(gh, gw, P)
            rq.arr(mask, np.uint8)
            rq.expect(lambda res, mask=mask, g=(gh, gw, P), N=N:
                      ("mask2p", mask, g, res.i32(), res.take("=u1", N)))

    # pointing game, energy pointing game, top-k IoU
    loc = []
    for n in (1, 4, 9, 196, 1000):
        for kind in range(7):
            if kind == 0:
                m = rng.standard_normal(n)
            elif kind == 1:
                m = np.rint(rng.standard_normal(n))  # ties, the maximum too
            elif kind == 2:
                m = np.full(n, 3.0)  # constant
            elif kind == 3:
                m = -np.abs(rng.standard_normal(n))  # no positive value
            elif kind == 4:
                m = rng.uniform(0, 1, n)
            elif kind == 5:
                m = rng.integers(0, 2, n).astype(float)  # two values
            else:
                m = np.maximum(rng.standard_normal(n), 0)
            for md in (0.3, 0.05, 1.0, 0.0):
                mask = (rng.uniform(0, 1, n) < md).astype(np.uint8)
                loc.append((m.astype(np.float32), mask))
    loc.append((np.array([0.9, 0.1, 0.5, 0.3], np.float32), np.array([1, 0, 0, 1], np.uint8)))
    loc.append((np.array([2, 1, 2, 0], np.float32), np.array([1, 0, 0, 1], np.uint8)))
    for m, mask in loc:
        rq.start(8)
        rq.i32(len(m))
        rq.arr(m, np.float32)
        rq.arr(mask, np.uint8)
        rq.expect(lambda res, m=m, mask=mask:
                  ("local", m, mask, (res.f64(), res.i32(), res.f64(), res.i32(), res.f64(),
                                      res.i32())))

    # vit_spearman
    pairs = []
    for n in (2, 3, 5, 50, 196, 1000):
        a = rng.standard_normal(n)
        pairs += [(a, rng.standard_normal(n)),
                  (a, a + 0.5 * rng.standard_normal(n)),
                  (a, np.exp(3 * a)),  # monotone, far from linear
                  (a, -a**3),  # decreasing
                  (np.rint(a), np.rint(2 * a + rng.standard_normal(n))),  # ties in both
                  (np.rint(a * 0.5), a),  # ties in one
                  (np.full(n, 1.5), a),  # constant: NaN
                  (a, np.exp(4 * a) + rng.standard_normal(n) * 0.01)]
    pairs.append((np.array([1, 2, 2, 3]), np.array([1, 2, 3, 4])))
    for a, b in pairs:
        a, b = a.astype(np.float32), b.astype(np.float32)
        rq.start(9)
        rq.i32(len(a))
        rq.arr(a, np.float32)
        rq.arr(b, np.float32)
        rq.expect(lambda res, a=a, b=b: ("spearman", a, b, res.f64()))

    # baselines
    for n, seed in ((1000, 0), (1000, 1), (196, 42), (577, (1 << 64) - 1), (1, 0xDEADBEEF)):
        rq.start(10)
        rq.i32(n)
        rq.buf += struct.pack("=Q", seed)
        rq.expect(lambda res, n=n, seed=seed: ("random", n, seed, res.take("=f4", n)))
    for gh, gw, sf in ((14, 14, 0.25), (1, 1, 0.5), (2, 4, 1.0), (7, 9, 0.3), (16, 10, 0.1),
                       (3, 3, 0.0), (3, 3, float("inf")), (4, 4, -1.0), (37, 37, 0.5)):
        rq.start(11)
        rq.i32(gh, gw)
        rq.arr([sf], np.float32)
        rq.expect(lambda res, g=(gh, gw, sf): ("gaussian", g, res.take("=f4", g[0] * g[1])))
    return rq


# --- checks -----------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240616)
    rq = build(rng)
    (work / "requests.bin").write_bytes(bytes(rq.buf))
    run = subprocess.run([args.dump, str(work / "requests.bin"), str(work / "results.bin")],
                         capture_output=True, text=True)
    print(run.stdout.strip())
    if run.returncode != 0:
        print(run.stderr)
        print(f"FAIL faithful_dump exited {run.returncode}")
        return 1
    res = Results((work / "results.bin").read_bytes())
    got = [reader(res) for reader in rq.readers]
    rep = Report()
    if not rep.check(res.at == len(res.data), f"results: read {res.at} of {len(res.data)} bytes"):
        return 1

    ctl = {"reversed order": [], "ties the other way": [], "reflect padding": 0.0,
           "Pearson for Spearman": 0.0, "truncated counts": 0}
    n_order = n_order_ties = 0
    for r in got:
        kind = r[0]
        if kind == "order":
            _, m, mf, st, order = r
            want = ref_order(m, mf)
            rep.check(st == 0 and np.array_equal(order, want),
                      f"patch order n {len(m)} most_first {mf}: {order[:6]} vs {want[:6]}")
            n_order += 1
            if len(np.unique(m)) > 1:  # a constant map has the same order both ways
                rev = ref_order(m, 1 - mf)
                ctl["reversed order"].append(np.mean(order != rev))
            # ties the other way: higher index first within a tie group
            idx = np.arange(len(m))
            other = np.lexsort((-idx, -m.astype(np.float64) if mf else m.astype(np.float64)))
            if len(np.unique(m)) < len(m):
                n_order_ties += 1
                ctl["ties the other way"].append(np.mean(order != other))
        elif kind == "order_bad":
            rep.check(r[1] == VIT_ERR_ARG, f"patch order: non-finite value -> {r[1]}")
        elif kind == "count":
            counts = r[1].astype(np.int64)
            at, bad, trunc = 0, 0, 0
            for n in range(0, 301):
                for ns in range(1, 301):
                    s = np.arange(ns + 1, dtype=np.int64)
                    c = counts[at:at + ns + 1]
                    at += ns + 1
                    want = ref_count(s, ns, n)
                    bad += int(np.sum(c != want))
                    trunc += int(np.sum(c != (s * n) // ns))
            rep.check(bad == 0, f"perturb count: {bad} of {len(counts)} wrong")
            rep.check(at == len(counts), "perturb count: every count read")
            ctl["truncated counts"] = trunc
            print(f"  perturb count: {len(counts)} counts (n 0..300, n_steps 1..300), "
                  f"{bad} wrong; truncating instead would differ in {trunc}")
        elif kind == "mix":
            _, tag, want, out = r
            nbad = int(np.sum(out.view(np.uint32) != want.astype(np.float32).view(np.uint32)))
            rep.check(nbad == 0, f"patch mix {tag}: {nbad} pixels differ")
            rep.diff("patch mix (pixels differing)", nbad)
        elif kind == "blur":
            _, img, sigma, radius, st, out = r
            want = ref_blur(img, sigma, radius)
            d = np.abs(out.astype(np.float64) - want).max()
            rep.check(st == 0 and d <= TOL_BLUR,
                      f"blur {img.shape} sigma {sigma} radius {radius}: status {st}, diff {d:.3g}")
            rep.diff("blur vs torch conv2d float64", d)
            rise = rise_blur_f32(img, sigma, radius)
            rep.diff("blur vs RISE-style float32 2-D conv2d", np.abs(out - rise).max())
            if radius < min(img.shape[1:]) and radius > 0:
                refl = ref_blur(img, sigma, radius, mode="reflect")
                ctl["reflect padding"] = max(ctl["reflect padding"], np.abs(out - refl).max())
        elif kind == "blur_bad":
            rep.check(r[1] == VIT_ERR_ARG, f"blur: bad argument -> status {r[1]}")
        elif kind == "auc":
            _, y, a = r
            if len(y) < 2:
                rep.check(np.isnan(a), f"auc of {len(y)} value: {a}, expected NaN")
                continue
            want = np.trapz(y.astype(np.float64), dx=1.0 / (len(y) - 1))
            rep.check(abs(a - want) <= TOL_DOUBLE, f"auc n {len(y)}: {a} vs {want}")
            rep.diff("auc vs numpy.trapz", abs(a - want))
        elif kind == "map2p":
            _, m, (gh, gw, P, pixels), out = r
            if pixels:
                want = m.astype(np.float64).reshape(gh, P, gw, P).sum(axis=(1, 3)).ravel()
            else:
                want = m.astype(np.float64)
            d = np.max(np.abs(out - want) / np.maximum(np.abs(want), 1.0))
            rep.check(d <= TOL_F32_REL, f"map to patches {(gh, gw, P, pixels)}: rel diff {d:.3g}")
            rep.diff("map to patches (relative)", d)
        elif kind == "mask2p":
            _, mask, (gh, gw, P), count, out = r
            inside = (mask != 0).reshape(gh, P, gw, P).sum(axis=(1, 3)).ravel()
            want = (2 * inside >= P * P).astype(np.uint8)
            rep.check(np.array_equal(out, want) and count == int(want.sum()),
                      f"mask to patches {(gh, gw, P)}: {np.sum(out != want)} differ, "
                      f"count {count} vs {want.sum()}")
        elif kind == "local":
            _, m, mask, (pg, pgc, en, enc, iou, iouc) = r
            wp, we, wi = localisation(m, mask)
            for name, g, c, w in (("pointing game", pg, pgc, wp), ("energy pointing", en, enc, we),
                                  ("top-k IoU", iou, iouc, wi)):
                ok, d = same_nan(g, w, TOL_DOUBLE)
                ok = ok and (c == VIT_ERR_ARG) == bool(np.isnan(w))
                rep.check(ok, f"{name} n {len(m)} mask {int((mask != 0).sum())}: {g} (status "
                              f"{c}) vs {w}")
                rep.diff(name, d)
        elif kind == "spearman":
            _, a, b, rho = r
            want = ref_spearman(a, b)
            ok, d = same_nan(rho, want, TOL_DOUBLE)
            rep.check(ok, f"spearman n {len(a)}: {rho} vs {want}")
            rep.diff("spearman", d)
            p = pearson(a, b)
            if not np.isnan(p) and not np.isnan(rho):
                ctl["Pearson for Spearman"] = max(ctl["Pearson for Spearman"], abs(rho - p))
        elif kind == "random":
            _, n, seed, out = r
            want = splitmix64_map(n, seed)
            rep.check(np.array_equal(out, want) and np.all((out >= 0) & (out < 1)),
                      f"random map seed {seed}: {np.sum(out != want)} differ")
            if n >= 1000:
                rep.check(abs(out.mean() - 0.5) < 0.05,
                          f"random map seed {seed}: mean {out.mean()}")
        elif kind == "gaussian":
            _, (gh, gw, sf), out = r
            want = ref_gaussian(gh, gw, sf).ravel()
            d = np.max(np.abs(out - want))
            rep.check(d <= 1e-7, f"gaussian {gh}x{gw} sigma_frac {sf}: diff {d:.3g}")
            rep.diff("gaussian map", d)

    print(f"  patch order: {n_order} cases ({n_order_ties} with ties) equal to numpy.lexsort")
    print("max differences:")
    for k, v in rep.maxdiff.items():
        print(f"  {k:40s} {v:.3g}")
    k1 = rise_gkern_1d()
    ours = kernel1d(5.0, 5)
    print(f"  RISE's gkern(11, 5) 1-D taps {k1[0]:.4f} .. {k1[5]:.4f}, ours (sigma 5, radius 5) "
          f"{ours[0]:.4f} .. {ours[5]:.4f}: max tap difference {np.abs(k1 - ours).max():.4f}, "
          f"2-D {np.abs(np.outer(k1, k1) - np.outer(ours, ours)).max():.4f}")

    print("negative controls (a planted mistake must be caught):")
    rev = min(ctl["reversed order"])
    ties = min(ctl["ties the other way"])
    print(f"  reversed order (most first <-> least first): at least {rev:.2f} of the positions "
          f"differ in every case with two or more values "
          f"(mean {np.mean(ctl['reversed order']):.2f})")
    print(f"  ties broken higher index first: at least {ties:.2f} of the positions differ in "
          f"every case with ties")
    print(f"  reflect padding: max |diff| {ctl['reflect padding']:.3g} "
          f"(= {ctl['reflect padding'] / TOL_BLUR:.3g} x tolerance)")
    print(f"  Pearson for Spearman: max |diff| {ctl['Pearson for Spearman']:.3g} "
          f"(= {ctl['Pearson for Spearman'] / TOL_DOUBLE:.3g} x tolerance)")
    rep.check(rev > 0, "control: a reversed order must differ from the engine's in every case")
    rep.check(np.mean(ctl["reversed order"]) > 0.5, "control: reversed orders differ mostly")
    rep.check(ties > 0, "control: ties broken the other way must differ in every case with ties")
    rep.check(ctl["reflect padding"] > WRONG * TOL_BLUR, "control: reflect padding caught")
    rep.check(ctl["Pearson for Spearman"] > WRONG * TOL_DOUBLE, "control: Pearson caught")
    rep.check(ctl["truncated counts"] > 0, "control: truncated counts caught")

    print(f"\n{len(rep.failures)} failure(s)" if rep.failures
          else "\nall faithfulness checks passed")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
