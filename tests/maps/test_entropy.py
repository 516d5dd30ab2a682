#!/usr/bin/python3
"""test_entropy.py - attention entropy (vit_map_entropy, vit_map_entropy_layers;
engine/maps/maps.c) against an independent float64 numpy implementation.

    /usr/bin/python3 test_entropy.py random --dump build/tests/maps/entropy_dump --work DIR
    /usr/bin/python3 test_entropy.py deit --dump ... --work DIR --shared ../shared

random: two tiny timm-layout ViTs written here with numpy (one with the CLS token only,
one with a distillation token too: two prefix tokens as keys), peaked and flat heads, on
a random input. deit: DeiT-Tiny on two photos of shared/ (exit 77 without shared/, a
failure when CI=true). For each, entropy_dump runs the model keeping the attention and
recomputing it and writes att [L, H, T, T] and every entropy map; numpy computes from
att, in float64, straight from the definition (vit.h):
    H[l, h, p] = -sum_j a[l, h, Np + p, j] ln a[l, h, Np + p, j]     (0 ln 0 = 0)
over all T keys (prefix tokens included), the map over the patch queries p, and the
fusions mean / max / min over heads of those maps.

Checked: every map within tolerance of numpy; the run that recomputes the attention
gives the same maps bit for bit, and vit_map_entropy_layers the same as the single
calls bit for bit; 0 <= H <= ln T. The reference itself is checked on rows worked by
hand (uniform: ln T; one-hot: 0; [1/2, 1/4, 1/4]: 1.5 ln 2). Plausible mistakes, each of
which must FAIL the same comparison on the same data (a control that could not fail
would prove nothing):
    log2      entropy in bits instead of nats
    columns   the column axis: -sum_i a_ij ln a_ij over the queries i of key j
    patches   the patch keys only (prefix tokens left out of the sum)
    fuse-att  mean fusion as the entropy of the head-averaged attention
Tolerance: each row is summed in double from the float32 attention and stored in
float32 (<= 2^-24 relative), the mean of H float32 maps adds <= H roundings:
|engine - numpy| <= 2e-6 |numpy| + 1e-6 (the absolute part for rows of entropy ~0).
Exits 1 on any mismatch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: safetensors_io
from safetensors_io import write_safetensors  # noqa: E402

RTOL, ATOL = 2e-6, 1e-6
# a wrong variant must miss by this factor of the tolerance somewhere
DISCRIMINATE = 100
FUSIONS = ("mean", "max", "min")
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg)


# --- the reference (float64, from the definition) and the plausible mistakes -----------


def xlogx(a):
    """a ln a elementwise, 0 where a == 0 (float64)."""
    a = a.astype(np.float64)
    out = np.zeros_like(a)
    nz = a > 0
    out[nz] = a[nz] * np.log(a[nz])
    return out


def entropy_maps(att, Np, variant="right"):
    """att [L, H, T, T] -> [L, H + 3, N]: per-head maps, then mean, max, min fusion."""
    a = att.astype(np.float64)
    L, H, T, _ = a.shape
    if variant == "columns":  # over the queries i of each key j
        e = -xlogx(a).sum(axis=2)[:, :, Np:]
    elif variant == "patches":  # the prefix keys left out
        e = -xlogx(a[:, :, Np:, Np:]).sum(axis=3)
    else:
        e = -xlogx(a[:, :, Np:, :]).sum(axis=3)
        if variant == "log2":
            e = e / math.log(2)
    fused = [e.mean(axis=1), e.max(axis=1), e.min(axis=1)]
    if variant == "fuse-att":
        fused[0] = -xlogx(a.mean(axis=1)[:, Np:, :]).sum(axis=2)
    return np.concatenate([e, np.stack(fused, axis=1)], axis=1)


def check_reference():
    """The reference on rows worked by hand."""
    T = 5
    rows = np.array([[0.2] * 5, [0, 0, 1, 0, 0], [0.5, 0.25, 0.25, 0, 0],
                     [0.5, 0.25, 0.25, 0, 0]], dtype=np.float32)
    att = np.broadcast_to(rows, (1, 1, 4, T)).copy()
    att = np.concatenate([att, np.zeros((1, 1, 1, T), np.float32)], axis=2)  # T query rows
    got = entropy_maps(att, 1)[0, 0]  # the rows 1 .. 4 as patch queries
    # row 0 is the CLS row (not in the map); the patch rows: one-hot, [1/2, 1/4, 1/4]
    # twice, and an all-zero row (0 ln 0 = 0)
    want = [0.0, 1.5 * math.log(2), 1.5 * math.log(2), 0.0]
    ok = np.allclose(got, want, atol=1e-15)
    uni = entropy_maps(np.full((1, 1, 3, 3), 1 / 3), 1)[0, 0]
    ok &= np.allclose(uni, math.log(3), atol=1e-15)
    print("reference on hand-worked rows: %s" % ("ok" if ok else "WRONG"))
    if not ok:
        fail("the numpy reference disagrees with hand-worked rows: %s, %s" % (got, uni))


# --- running the engine -----------------------------------------------------------


def load_npy(path):
    return np.load(path)


def run_dump(dump, out, args):
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(dump)] + [str(a) for a in args] + ["--out", str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        fail("entropy_dump %s: exit %d: %s" % (" ".join(map(str, args)), r.returncode,
                                               r.stderr.strip()))
        return None
    shape = json.loads((out / "shape.json").read_text())
    eng = {k: load_npy(out / (k + ".npy")) for k in
           ("att", "entropy_keep", "entropy_recompute", "entropy_layers_keep",
            "entropy_layers_recompute")}
    return shape, eng


def compare(label, shape, eng):
    att, Np, T = eng["att"], shape["Np"], shape["T"]
    L, H = shape["L"], shape["H"]
    got = eng["entropy_keep"].reshape(L, H + 3, -1).astype(np.float64)
    ref = entropy_maps(att, Np)
    tol = RTOL * np.abs(ref) + ATOL
    diff = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(diff / tol), diff.shape)
    print("  %-28s maps %d x %d, max |engine - numpy| %.3g (%.2g of the tolerance), "
          "H in [%.4g, %.4g], ln T = %.4g"
          % (label, L * (H + 3), got.shape[2], diff.max(), (diff / tol).max(), got.min(),
             got.max(), math.log(T)))
    if (diff > tol).any():
        k = worst[1]
        what = "head %d" % k if k < H else FUSIONS[k - H] + " fusion"
        fail("%s: %d entries differ; worst layer %d %s patch %d: engine %.9g, numpy %.9g"
             % (label, int((diff > tol).sum()), worst[0], what, worst[2], got[worst], ref[worst]))
    if got.min() < 0 or got.max() > math.log(T) * (1 + 1e-6):
        fail("%s: entropy outside [0, ln T]: [%g, %g]" % (label, got.min(), got.max()))
    for other in ("entropy_recompute", "entropy_layers_keep", "entropy_layers_recompute"):
        if not np.array_equal(eng[other], eng["entropy_keep"]):
            d = np.abs(eng[other].astype(np.float64) - eng["entropy_keep"]).max()
            fail("%s: %s differs from the single calls with the attention kept (max %.3g): "
                 "expected bit for bit" % (label, other, d))
    print("  %-28s recomputed attention, the layers call: bit for bit the same" % "")
    for variant in ("log2", "columns", "patches", "fuse-att"):
        wrong = entropy_maps(att, Np, variant)
        sel = slice(H, H + 1) if variant == "fuse-att" else slice(None)
        miss = (np.abs(got[:, sel] - wrong[:, sel]) / (RTOL * np.abs(wrong[:, sel]) + ATOL)).max()
        caught = miss > DISCRIMINATE
        print("  %-28s mistake %-8s misses by %8.3g x the tolerance: %s"
              % ("", variant, miss, "caught" if caught else "NOT CAUGHT"))
        if not caught:
            fail("%s: the '%s' mistake is within %.3g x the tolerance of the engine: the test "
                 "could not catch it" % (label, variant, miss))


# --- the models -----------------------------------------------------------------------


def tiny_vit(rng, D, L, P, S, F, C, dist, qk_std):
    """timm-named tensors of a tiny ViT; qk_std[l] scales layer l's queries and keys
    (large: peaked attention rows, small: flat ones)."""
    N = (S // P) ** 2
    Np = 2 if dist else 1

    def rn(*shape, std):
        return rng.standard_normal(shape) * std

    w = {"cls_token": rn(1, 1, D, std=0.5), "pos_embed": rn(1, Np + N, D, std=0.5),
         "patch_embed.proj.weight": rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P)),
         "patch_embed.proj.bias": rn(D, std=0.1)}
    if dist:
        w["dist_token"] = rn(1, 1, D, std=0.5)
    for l in range(L):
        b = "blocks.%d." % l
        w |= {b + "norm1.weight": 1 + rn(D, std=0.2), b + "norm1.bias": rn(D, std=0.1),
              b + "attn.qkv.weight": np.concatenate([rn(2 * D, D, std=qk_std[l] / math.sqrt(D)),
                                                     rn(D, D, std=1 / math.sqrt(D))]),
              b + "attn.qkv.bias": rn(3 * D, std=0.1),
              b + "attn.proj.weight": rn(D, D, std=1 / math.sqrt(D)),
              b + "attn.proj.bias": rn(D, std=0.1),
              b + "norm2.weight": 1 + rn(D, std=0.2), b + "norm2.bias": rn(D, std=0.1),
              b + "mlp.fc1.weight": rn(F, D, std=1 / math.sqrt(D)), b + "mlp.fc1.bias": rn(F, std=0.1),
              b + "mlp.fc2.weight": rn(D, F, std=1 / math.sqrt(F)), b + "mlp.fc2.bias": rn(D, std=0.1)}
    w |= {"norm.weight": 1 + rn(D, std=0.2), "norm.bias": rn(D, std=0.1),
          "head.weight": rn(C, D, std=2 / math.sqrt(D)), "head.bias": rn(C, std=0.1)}
    if dist:
        w |= {"head_dist.weight": rn(C, D, std=2 / math.sqrt(D)), "head_dist.bias": rn(C, std=0.1)}
    return w


def test_random(args):
    rng = np.random.default_rng(20261126)
    work = Path(args.work)
    models = [("cls_p8_s32_h3", dict(D=48, L=3, P=8, S=32, F=96, C=10, dist=0,
                                      qk_std=[0.3, 1.7, 4.0]), 3),
              ("dist_p4_s24_h4", dict(D=64, L=2, P=4, S=24, F=128, C=7, dist=1,
                                       qk_std=[3.0, 0.5]), 4)]
    for name, m, heads in models:
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        write_safetensors(d / "model.safetensors", tiny_vit(rng, **m))
        rng.standard_normal((3, m["S"], m["S"])).astype(np.float32).tofile(d / "input.f32")
        got = run_dump(args.dump, d / "out", ["--model", d / "model.safetensors", "--heads", heads,
                                              "--input", d / "input.f32"])
        if got:
            compare(name, *got)


def test_deit(args):
    shared = Path(args.shared) if args.shared else None
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors" if shared else None
    if not model or not model.exists():
        why = "no %s" % model
        if os.environ.get("CI") == "true":
            fail("CI: " + why)
            return
        print("skip: " + why)
        sys.exit(77)
    photos = sorted(p for p in (shared / "images").iterdir()
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg"))[:2]
    if not photos:
        fail("no photos in %s" % (shared / "images"))
    for photo in photos:
        got = run_dump(args.dump, Path(args.work) / photo.stem, ["--model", model, "--image", photo])
        if got:
            compare("deit-tiny " + photo.name, *got)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("which", choices=("random", "deit"))
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared")
    args = ap.parse_args()
    check_reference()
    (test_random if args.which == "random" else test_deit)(args)
    if FAILURES:
        print("\n%d FAILURE(S)" % len(FAILURES))
        return 1
    print("\nall entropy maps match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
