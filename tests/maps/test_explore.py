#!/usr/bin/python3
"""test_explore.py - the explorer's maps (engine/maps/maps.c: vit_mass_mask,
vit_attention_distance) against independent float64 numpy implementations
written from the papers.

    /usr/bin/python3 test_explore.py --dump build/tests/maps/explore_dump --work /tmp/explore

Where the formulas come from
----------------------------
  attention mask    Caron et al. 2021 (DINO), Fig. 3, as its visualize_attention.py
                    computes it: sort the map ascending, divide by its sum, take the
                    cumulative sum, keep the patches whose cumulative share is
                    > 1 - fraction. The reference below does exactly that (ties:
                    the sort puts the higher index first among equal values, so the
                    lower index is kept first, vit.h's rule). Independently it checks
                    that the mask is the *smallest* set holding the fraction: its
                    mass reaches it, dropping its smallest patch falls short, and
                    nothing outside is larger than anything inside.
  mean attention    Dosovitskiy et al. 2021, §4.5 / Fig. 7: for each patch query the
  distance          attention-weighted mean distance to the patch keys, in px between
                    patch centres (P * grid distance), averaged over the queries;
                    prefix tokens are neither queries nor keys, and each query's
                    patch attention is renormalised to sum 1 (vit.h). The reference
                    builds the full [N, N] distance matrix from the coordinates.
                    Variants that must be told apart: not renormalising (the
                    attention to the CLS token counted at distance 0, as some
                    notebooks do), rows/columns swapped on a non-square grid, the
                    CLS token included as a query.

Tolerances: masks exact (the data keeps every boundary either an exact tie in
dyadic arithmetic or clear by 1e-6 relative); distances rel 1e-5 (float32
inputs, double accumulation in the engine).
Exits 1 on any mismatch.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

FAILURES = []
RTOL_DIST = 1e-5


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg)


def ok(msg):
    print("ok   " + msg)


# --- references --------------------------------------------------------------

def dino_mask(m, t, strict=True):
    """DINO's visualize_attention.py on one map, in float64; `strict=False` is the
    wrong >= variant, to show the boundary data tells them apart."""
    m = m.astype(np.float64)
    n = m.size
    order = np.lexsort((-np.arange(n), m))  # ascending; equal values: higher index first
    val = m[order] / m.sum()
    cum = np.cumsum(val)
    keep = cum > 1 - t if strict else cum >= 1 - t
    out = np.zeros(n)
    out[order[keep]] = 1
    return out, cum, order


def distance_ref(att, Np, gh, gw, P, variant="right"):
    """[L, H] mean attention distance, px."""
    L, H, T, _ = att.shape
    N = gh * gw
    if variant == "swapped":  # row/col from gh instead of gw
        rows, cols = np.arange(N) // gh, np.arange(N) % gh
    else:
        rows, cols = np.arange(N) // gw, np.arange(N) % gw
    D = P * np.hypot(rows[:, None] - rows[None, :], cols[:, None] - cols[None, :])
    out = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            A = att[l, h].astype(np.float64)
            if variant == "with-cls":  # the CLS query too, its distance measured from patch 0
                q = np.concatenate([A[:1, Np:], A[Np:, Np:]])
                Dq = np.concatenate([D[:1], D])
            else:
                q, Dq = A[Np:, Np:], D
            s = q.sum(axis=1, keepdims=True)
            W = q if variant == "no-renorm" else q / np.where(s > 0, s, 1)
            per_query = (W * Dq).sum(axis=1)
            valid = s[:, 0] > 0
            out[l, h] = per_query[valid].mean() if valid.any() else 0.0
    return out


# --- data ----------------------------------------------------------------------

def softmax_att(rng, L, H, T, scale):
    x = rng.standard_normal((L, H, T, T)) * scale
    x -= x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def run(dump, work, name, att, maps, Np, gh, gw, P, fractions):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    att.astype("<f4").tofile(os.path.join(d, "att.f32"))
    maps.astype("<f4").tofile(os.path.join(d, "maps.f32"))
    L, H = att.shape[:2]
    cmd = [dump, os.path.join(d, "att.f32"), os.path.join(d, "maps.f32"), d, str(L), str(H),
           str(Np), str(gh), str(gw), str(P), str(len(maps)), ",".join(fractions)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        fail(f"{name}: explore_dump exited {p.returncode}: {p.stderr.strip()}")
        return None
    return {k: np.load(os.path.join(d, k + ".npy")) for k in ("distance", "mask", "kept")}


def check_masks(name, maps, fractions, got_mask, got_kept, exact_boundaries):
    worst_margin = np.inf
    n_ties = n_wrong_variant = 0
    for fi, t_str in enumerate(fractions):
        t = float(np.float32(t_str))  # the engine gets a float32 fraction
        for mi, m in enumerate(maps):
            ref, cum, order = dino_mask(m, t)
            got = got_mask[fi, mi]
            if not np.array_equal(got, ref):
                fail(f"{name}: mask fraction {t_str} map {mi}: engine keeps "
                     f"{np.flatnonzero(got).tolist()}, DINO's rule {np.flatnonzero(ref).tolist()}")
                continue
            if got_kept[fi, mi] != ref.sum():
                fail(f"{name}: n_kept {got_kept[fi, mi]} != {ref.sum()}")
            # the boundary must be decided the same way in float32 and float64
            margin = np.abs(cum - (1 - t)).min()
            if margin == 0:
                n_ties += 1
            elif not exact_boundaries and t < 1:  # 1: every value > 0, no sum compared
                worst_margin = min(worst_margin, margin)
            # independent: smallest set with mass >= t, the largest values first
            mass = m.astype(np.float64)
            total = mass.sum()
            inside, outside = mass[ref == 1], mass[ref == 0]
            if total > 0:
                if inside.sum() < t * total * (1 - 1e-12):
                    fail(f"{name}: mask {mi} at {t_str} holds {inside.sum() / total:.6f} < {t}")
                if inside.size and (inside.sum() - inside.min()) >= t * total * (1 + 1e-12):
                    fail(f"{name}: mask {mi} at {t_str} is not the smallest set")
                if inside.size and outside.size and outside.max() > inside.min():
                    fail(f"{name}: mask {mi} at {t_str} leaves out a larger patch")
            if not np.array_equal(dino_mask(m, t, strict=False)[0], ref):
                n_wrong_variant += 1
    if not exact_boundaries and worst_margin < 1e-6:
        fail(f"{name}: a mask boundary within {worst_margin:.2g} of the fraction: change the seed")
    ok(f"{name}: {got_mask.shape[0] * got_mask.shape[1]} masks equal DINO's rule "
       f"({n_ties} exact boundaries, the >= variant differs on {n_wrong_variant})")
    return n_ties, n_wrong_variant


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(4)
    total_ties = total_variant = 0

    # 1. softmax attention, DeiT-like (CLS + 14x14, P 16) and registers on a 3x5 grid
    for name, L, H, Np, gh, gw, P, scale in (("deit_like", 3, 3, 1, 14, 14, 16, 3.0),
                                             ("registers_3x5", 4, 2, 5, 3, 5, 8, 2.0),
                                             ("peaked_6x4", 2, 4, 1, 6, 4, 14, 8.0)):
        T = Np + gh * gw
        att = softmax_att(rng, L, H, T, scale)
        # masks of real attention rows (patch part, as the window shows them)
        maps = np.stack([att[l, h, q, Np:] for l in range(L) for h in range(H)
                         for q in (0, Np, T - 1)])
        fr = ["0.6", "0.9", "0.3", "1"]
        out = run(a.dump, a.work, name, att, maps, Np, gh, gw, P, fr)
        if out is None:
            continue
        t, v = check_masks(name, maps, fr, out["mask"], out["kept"], exact_boundaries=False)
        total_ties += t
        total_variant += v
        ref = distance_ref(att, Np, gh, gw, P)
        rel = np.abs(out["distance"] - ref) / ref
        if rel.max() > RTOL_DIST:
            i = np.unravel_index(rel.argmax(), rel.shape)
            fail(f"{name}: distance layer {i[0]} head {i[1]}: engine {out['distance'][i]:.6f} px, "
                 f"numpy {ref[i]:.6f} px")
        else:
            ok(f"{name}: mean attention distance [L {L}, H {H}] within rel {rel.max():.2g} "
               f"(range {ref.min():.1f} .. {ref.max():.1f} px)")
        for variant in ("no-renorm", "with-cls") + (("swapped",) if gh != gw else ()):
            wrong = distance_ref(att, Np, gh, gw, P, variant)
            d = (np.abs(wrong - ref) / ref).max()
            if d <= 100 * RTOL_DIST:
                fail(f"{name}: the '{variant}' distance is within {d:.2g} of the right one")
            else:
                ok(f"{name}: the '{variant}' distance differs by up to {d:.2g} (caught)")

    # 2. analytic distances: each patch attends to itself -> 0 px; to its right-hand
    #    neighbour (the last column to its left-hand one) -> exactly P; CLS share ignored
    Np, gh, gw, P = 1, 4, 6, 16
    T, N = Np + gh * gw, gh * gw
    att = np.zeros((2, 2, T, T), np.float32)
    att[..., 0] = 0.5  # half of every row to the CLS token: renormalised away
    for i in range(N):
        r, c = divmod(i, gw)
        att[0, :, Np + i, Np + i] = 0.5
        j = i + 1 if c < gw - 1 else i - 1
        att[1, 0, Np + i, Np + j] = 0.5
        k = i + gw if r < gh - 1 else i - gw  # vertical neighbour
        att[1, 1, Np + i, Np + k] = 0.5
    att[:, :, 0, :] = 1.0 / T
    maps = np.zeros((1, N), np.float32) + 1
    out = run(a.dump, a.work, "analytic", att, maps, Np, gh, gw, P, ["0.5"])
    if out is not None:
        want = np.array([[0, 0], [P, P]], np.float64)
        if np.abs(out["distance"] - want).max() > 1e-5:
            fail(f"analytic distances: engine {out['distance'].tolist()}, want {want.tolist()}")
        else:
            ok(f"analytic: self-attention 0 px, neighbours {P} px, the CLS share left out")

    # 3. masks with exact boundaries and ties: integer values summing to 256, dyadic fractions
    N = 12
    maps = []
    for _ in range(40):
        v = rng.multinomial(256, np.full(N, 1 / N)).astype(np.float32)
        maps.append(v)
    maps.append(np.array([64, 64, 32, 32, 32, 16, 16, 0, 0, 0, 0, 0], np.float32))  # ties, zeros
    maps.append(np.zeros(N, np.float32))  # all zero: empty mask
    maps.append(np.array([0] * 11 + [5], np.float32))  # one patch holds everything
    maps = np.stack(maps)
    fr = ["0.5", "0.75", "0.625", "0.25", "1", "0.0625"]
    att = softmax_att(rng, 1, 1, 1 + N, 1.0)
    out = run(a.dump, a.work, "ties", att, maps, 1, 3, 4, 8, fr)
    if out is not None:
        zero = out["mask"][:, -2]
        if zero.any() or out["kept"][:, -2].any():
            fail("an all-zero map gives a non-empty mask")
        hand = out["mask"][fr.index("0.75"), -3]
        # 64 + 64 + 32 = 160 < 192, + 32 = 192: reached with 4 patches, the lower index
        # first among the three 32s: patches 0, 1, 2, 3
        if np.flatnonzero(hand).tolist() != [0, 1, 2, 3]:
            fail(f"hand example: 75% of [64, 64, 32, 32, 32, 16, 16, 0...] keeps "
                 f"{np.flatnonzero(hand).tolist()}, expected [0, 1, 2, 3]")
        else:
            ok("hand example: 75% of [64, 64, 32, 32, 32, 16, 16, 0, ...] is patches 0-3")
        t, v = check_masks("ties", maps[:-2], fr, out["mask"][:, :-2], out["kept"][:, :-2],
                           exact_boundaries=True)
        total_ties += t
        total_variant += v
    if total_ties == 0 or total_variant == 0:
        fail(f"the data has {total_ties} exact boundaries and {total_variant} cases where the "
             f">= variant differs: the boundary rule is untested")
    if FAILURES:
        print(f"\n{len(FAILURES)} FAILURE(S)")
        return 1
    print("\nall explorer maps match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
