"""test_explain.py - the engine's class-specific explanation maps (vit_explain)
against implementations written here from the papers and their reference code, on
the float64 reference's attention and torch.autograd gradients (test_backward.py).

    /usr/bin/python3 test_explain.py random --dump vit_dump --work DIR
    /usr/bin/python3 test_explain.py deit   --dump vit_dump --work DIR --shared SHARED
    /usr/bin/python3 test_explain.py selftest   (the implementations on hand-made cases)

random: every family of test_families.py with a head (and test_backward.py's register
        model with a head) and test_parity.py's random models with a head, the top-1
        class and another one, --discard 0, 0.5 and 0.9 (the top-1).
deit:   DeiT-Tiny on every photo in SHARED/images, the top-1 class and the fifth of
        the top-5; --discard 0.5 and 0.9 on the top-1. Exit 77 without SHARED.
Each model also runs with --att recompute: every map must be the same bit for bit.

The methods (A_l [H, T, T] layer l's attention, dA_l = dy_c/dA_l, Np prefix tokens,
each patch map the row's columns Np.. as [gh, gw]; raw values, not normalised):
 1 chefer        Chefer, Gur, Wolf, ICCV 2021 (hila-chefer/Transformer-MM-Explainability,
                 avg_heads: (grad * cam).clamp(min=0).mean(dim=0)): R = I_T; for l = 0..L-1
                 R <- R + mean_h((dA_l (.) A_l)^+) R; map = R[0, Np:].
 2 grad_rollout  jacobgil/vit-explain grad_rollout, each layer's gradient with its own
                 attention (vit-explain #6 was the mismatch): F_l = mean_h(A_l (.) dA_l),
                 clamped at 0 after the mean (as its code does); discard: the
                 floor(r T (T-Np)) smallest entries among the patch columns set to 0,
                 ties to the lower row-major index (vit_rollout's rule); Â_l = (F_l + I)/2
                 with rows normalised (vit-explain's `a / a.sum(dim=-1)` normalises
                 columns by broadcasting: not reproduced); R = Â_l R from l = 0; map =
                 R[0, Np:].
 3 gradcam       Selvaraju et al. 2017, jacobgil/pytorch-grad-cam's ViT recipe (target
                 layer blocks[-1].norm1): act [N, D] its output at the patch tokens (every
                 prefix token dropped), g = dy_c/d act, w = mean over patches of g [D],
                 map = ReLU(act w).
 4 legrad        Bousselham et al. 2024 (WalBouss/LeGrad, compute_legrad_clip) for a CLS
                 classifier: s_l = head(norm(z_l))_c (distilled: the averaged heads),
                 E_l = mean over heads and all T query rows of (ds_l/dA_l)^+, patch
                 columns; map = sum_l E_l.
 5 attnlrp       Achtibat et al. ICML 2024 (rachtibat/LRP-eXplains-Transformers), gradient
                 x input with AttnLRP's rules (CP-LRP): map[y, x] = sum_ch input (.)
                 lrp_input, lrp_input from test_backward.lrp_grad.
 6 grad_input    map[y, x] = sum_ch input (.) dy_c/d input.

Errors are max |engine - reference| / max |reference| per map; PyTorch's float32
autograd run through the same implementations is printed beside as the yardstick.
The discard's selection (which entries are zeroed) is ranked by F from the engine's
own float32 A and dA, so that entries ordered differently by float32 and float64
rounding at the boundary cannot decide the test (check_boundaries); the values are
float64's. (The error with float64's own ranking is printed too: the same here.)
Measured (engine / torch f32, relative, max over models, classes, discard ratios):
  random:    chefer 4.5e-6 / 4.6e-6, grad_rollout 4.3e-6 / 4.5e-6, gradcam 1.8e-6 /
             4.4e-6, legrad 8.2e-7 / 2.0e-6, attnlrp 2.3e-6 / 3.0e-6, grad_input
             3.0e-6 / 5.1e-6; tolerance 2e-5 for all;
  DeiT-Tiny: chefer 2.8e-6 / 5.9e-6 (tol 5e-5), grad_rollout 5.2e-6 / 2.1e-5 (1e-4),
             gradcam 1.0e-5 / 3.3e-5 (2e-4), legrad 8.0e-6 / 1.4e-5 (1e-4), attnlrp
             2.5e-5 / 3.2e-5 (2e-4), grad_input 7.7e-5 / 4.5e-4 (1e-3: the map is
             grad_input's, whose float32 error test_backward measures).
Negative controls: plausible mistakes per method (CONTROLS below), computed from the
same reference data; the engine must differ from each by more than WRONG = 20 x its
method's tolerance wherever the data can tell it from the right map (it differs from
the reference by that much: the clamp's place does not matter with one head, nor the
layer order with one layer), and each control that can differ at all must be told
apart on at least one model of the run. Smallest distances measured (random / DeiT,
relative to max |map|): Chefer's reversed order 3.7e-3 / 7.3e-2, clamp after the
mean 3.6e-3 / 0.16; grad rollout's reversed order 1.4e-2 / 9.9e-2, #6 pairing 0.43
/ 0.51, next layer's gradient 0.29 / 0.20, no clamp 6.3e-4 / 9.5e-3, columns
normalised 0.10 / 0.13, no discard (0.9) 5.9e-4 / 5.1e-3, vit-explain's discard rule
6.3e-4 / 2.7e-3; Grad-CAM with the prefix tokens 0.32 / 0.10, no ReLU 6.1e-2 / 0.49;
LeGrad with y_c's gradient 0.38 / 1.2, the last layer's 0.29 / 0.66; AttnLRP's
plain gradient 0.55 / 8.3, without CP 0.38 / 0.85; the rest >= 0.5.
"""
import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import test_backward as tb  # noqa: E402
from test_parity import MODELS, Report, run_dump  # noqa: E402
from test_families import FAMILIES  # noqa: E402

METHODS = ("chefer", "grad_rollout", "gradcam", "legrad", "attnlrp", "grad_input")
# relative to max |reference map|, per method (see the docstring)
TOL = {"random": dict.fromkeys(METHODS, 2e-5),
       "deit": dict(chefer=5e-5, grad_rollout=1e-4, gradcam=2e-4, legrad=1e-4, attnlrp=2e-4,
                    grad_input=1e-3)}
WRONG = 20
DISCARDS = ("0.5", "0.9")  # 0.5 mostly zeroes clamped zeros and tiny entries; 0.9 bites
NEAR_TIE = 1e-6

torch.set_num_threads(1)


# --- the methods, from their formulas ---------------------------------------------------


def chefer(A, dA, Np, order="right", clamp="before", grad=True):
    """Chefer et al. 2021: R = I; R <- R + mean_h((dA (.) A)^+) R, layers from the first.
    Variants: order "reversed" (R + R Ā), clamp "after" the head mean or "none",
    grad False (attention alone)."""
    L, H, T, _ = A.shape
    R = np.eye(T)
    for l in range(L):
        cam = dA[l] * A[l] if grad else A[l]
        if clamp == "before":
            cam = np.maximum(cam, 0).mean(0)
        elif clamp == "after":
            cam = np.maximum(cam.mean(0), 0)
        else:
            cam = cam.mean(0)
        R = R + (R @ cam if order == "reversed" else cam @ R)
    return R[0, Np:]


def discard(Fm, Np, ratio, rule="vit.h", rank=None):
    """Zero the floor(ratio T (T-Np)) smallest entries of Fm [T, T] among columns >= Np,
    ties to the lower row-major index; rule "all": vit-explain's int(T T ratio) smallest
    of all entries, [0, 0] spared. rank [T, T], if given, orders the entries instead of
    Fm (the same matrix from other data). Returns (matrix, (k-th, (k+1)-th smallest of
    the ranking values))."""
    T = Fm.shape[0]
    flat = Fm.ravel().copy()
    key = flat if rank is None else rank.ravel()
    if rule == "all":
        cand, k = np.arange(T * T), int(T * T * Fraction(ratio))
    else:
        cand = (np.arange(T)[:, None] * T + np.arange(Np, T)[None, :]).ravel()
        k = int(Fraction(ratio) * T * (T - Np))
    order = np.lexsort((cand, key[cand]))  # by value, then index
    vals = key[cand[order]]
    drop = cand[order[:k]]
    if rule == "all":
        drop = drop[drop != 0]
    flat[drop] = 0.0
    return flat.reshape(T, T), ((vals[k - 1], vals[k]) if 0 < k < len(cand) else None)


def grad_rollout(A, dA, Np, ratio="0", pair="own", clamp="after", order="right", norm="rows",
                 rule="vit.h", boundaries=None, rank=None):
    """vit-explain's grad_rollout with each layer's own gradient. Variants: pair
    "reversed" (A_l with dA_{L-1-l}: gradients collected by backward hooks, #6) or
    "next" (A_l with dA_{l+1}); clamp "before" the head mean or "none"; order
    "reversed" (R Â); norm "columns" (vit-explain's broadcast); rule "all" (its
    discard). boundaries, a list, receives each layer's discard boundary; rank, a
    list of [T, T], orders each layer's entries for the discard (see explain_case)."""
    L, H, T, _ = A.shape
    R = np.eye(T)
    for l in range(L):
        g = {"own": dA[l], "reversed": dA[L - 1 - l], "next": dA[min(l + 1, L - 1)]}[pair]
        Fm = A[l] * g
        if clamp == "before":
            Fm = np.maximum(Fm, 0).mean(0)
        elif clamp == "after":
            Fm = np.maximum(Fm.mean(0), 0)
        else:
            Fm = Fm.mean(0)
        if Fraction(ratio) > 0:
            Fm, b = discard(Fm, Np, ratio, rule, None if rank is None else rank[l])
            if boundaries is not None:
                boundaries.append(b)
        M = (Fm + np.eye(T)) / 2
        M = M / (M.sum(1, keepdims=True) if norm == "rows" else M.sum(1)[None, :])
        R = R @ M if order == "reversed" else M @ R
    return R[0, Np:]


def gradcam(act, g, relu=True, pool="mean"):
    """Grad-CAM on [N, D] patch activations and gradients: ReLU(act (mean_n g)).
    pool "hires": HiResCAM's sum_d act (.) g per token instead of pooled weights."""
    m = (act * g).sum(1) if pool == "hires" else act @ g.mean(0)
    return np.maximum(m, 0) if relu else m


def legrad(G, Np, relu=True, rows="all", layers="sum"):
    """LeGrad: sum_l mean_{h, rows} (G_l)^+ at the patch columns, G [L, H, T, T] the
    per-layer score gradients. Variants: relu False, rows "cls" (the CLS row only),
    layers "mean"."""
    E = np.maximum(G, 0) if relu else G
    E = (E[:, :, :1] if rows == "cls" else E).mean(axis=(1, 2))[:, Np:]  # [L, N]
    return E.mean(0) if layers == "mean" else E.sum(0)


def pixel_map(x, g, factor=True):
    """sum over channels of input (.) gradient ([Sh, Sw]); factor False: the gradient
    summed alone."""
    return (x * g).sum(0) if factor else g.sum(0)


def reference_maps(r, x, Np, grid, ratio="0", boundaries=None, rank=None):
    """The six maps from a reference_grads dict r and the input x [3, Sh, Sw]."""
    gh, gw = grid
    A, dA = r["att"], r["grad_att"]
    return {
        "chefer": chefer(A, dA, Np).reshape(gh, gw),
        "grad_rollout": grad_rollout(A, dA, Np, ratio, boundaries=boundaries, rank=rank).reshape(gh, gw),
        "gradcam": gradcam(r["cam_act"], r["cam_grad"]).reshape(gh, gw),
        "legrad": legrad(r["legrad"], Np).reshape(gh, gw),
        "attnlrp": pixel_map(x, r["lrp_input"]),
        "grad_input": pixel_map(x, r["grad_input"]),
    }


# The negative controls: (method, what, map from (r, x, Np, ratio, extra)), r the
# reference_grads dict, extra what control_extras adds (all-token Grad-CAM data, the
# AttnLRP pass without CP). None: the control does not apply (discard variants at 0).


def _ch(**kw):
    return lambda r, x, Np, q, e: chefer(r["att"], r["grad_att"], Np, **kw)


def _gr(**kw):
    return lambda r, x, Np, q, e: grad_rollout(r["att"], r["grad_att"], Np, q, **kw)


def _discarding(fn):
    return lambda r, x, Np, q, e: fn(r, x, Np, q, e) if Fraction(q) > 0 else None


CONTROLS = [
    ("chefer", "product reversed: R + R Ā", _ch(order="reversed")),
    ("chefer", "no clamp: mean_h(dA (.) A)", _ch(clamp="none")),
    ("chefer", "clamp after the head mean", _ch(clamp="after")),
    ("chefer", "attention alone (no gradient)", _ch(grad=False)),
    ("grad_rollout", "product reversed: R Â (layers multiplied the other way)", _gr(order="reversed")),
    ("grad_rollout", "A_l with dA_(L-1-l) (vit-explain #6: hook orders differ)", _gr(pair="reversed")),
    ("grad_rollout", "A_l with the next layer's gradient dA_(l+1)", _gr(pair="next")),
    ("grad_rollout", "no clamp", _gr(clamp="none")),
    ("grad_rollout", "clamp before the head mean", _gr(clamp="before")),
    ("grad_rollout", "vit-explain's a / a.sum(dim=-1) (columns normalised)", _gr(norm="columns")),
    ("grad_rollout", "no discard",
     _discarding(lambda r, x, Np, q, e: grad_rollout(r["att"], r["grad_att"], Np, "0"))),
    ("grad_rollout", "vit-explain's discard (int(T T r) of all entries, [0, 0] spared)",
     _discarding(_gr(rule="all"))),
    ("gradcam", "weights from all T tokens (prefix tokens kept)",
     lambda r, x, Np, q, e: np.maximum(r["cam_act"] @ e["cam_grad_all"].mean(0), 0)),
    ("gradcam", "only the CLS token dropped (pytorch-grad-cam's reshape_transform)",
     lambda r, x, Np, q, e: np.maximum(e["cam_act_all"][1:] @ e["cam_grad_all"][1:].mean(0), 0)[Np - 1:]),
    ("gradcam", "no ReLU", lambda r, x, Np, q, e: gradcam(r["cam_act"], r["cam_grad"], relu=False)),
    ("gradcam", "HiResCAM: sum_d act (.) grad per token",
     lambda r, x, Np, q, e: gradcam(r["cam_act"], r["cam_grad"], pool="hires")),
    ("legrad", "y_c's gradient dA_l at every layer (no per-layer score s_l)",
     lambda r, x, Np, q, e: legrad(r["grad_att"], Np)),
    ("legrad", "the last layer's E for every layer",
     lambda r, x, Np, q, e: len(r["legrad"]) * legrad(r["legrad"][-1:], Np)),
    ("legrad", "no ReLU", lambda r, x, Np, q, e: legrad(r["legrad"], Np, relu=False)),
    ("legrad", "the CLS query row only", lambda r, x, Np, q, e: legrad(r["legrad"], Np, rows="cls")),
    ("legrad", "mean over layers, not the sum",
     lambda r, x, Np, q, e: legrad(r["legrad"], Np, layers="mean")),
    ("attnlrp", "plain gradient x input", lambda r, x, Np, q, e: pixel_map(x, r["grad_input"])),
    ("attnlrp", "the LRP gradient without the input factor",
     lambda r, x, Np, q, e: pixel_map(x, r["lrp_input"], factor=False)),
    ("attnlrp", "softmax not detached (AttnLRP without CP)",
     lambda r, x, Np, q, e: pixel_map(x, e["lrp_no_cp"])),
    ("grad_input", "the gradient without the input factor",
     lambda r, x, Np, q, e: pixel_map(x, r["grad_input"], factor=False)),
    ("grad_input", "|gradient| summed (saliency)", lambda r, x, Np, q, e: np.abs(r["grad_input"]).sum(0)),
    ("grad_input", "AttnLRP's gradient x input", lambda r, x, Np, q, e: pixel_map(x, r["lrp_input"])),
]


def control_extras(ref, x32, c):
    """What some controls need beyond reference_grads: the norm1 output and its
    gradient at all T tokens, the AttnLRP pass without CP."""
    x = x32.double().detach().requires_grad_()
    kept = {}

    def tap(name, l, t):
        if name == "norm1":
            t.retain_grad()
            kept[l] = t
        return t
    logits, att = ref.forward(x, tap=tap)
    logits[c].backward()
    n1 = kept[len(att) - 1]
    return {"cam_act_all": n1[0].detach().numpy(), "cam_grad_all": n1.grad[0].numpy(),
            "lrp_no_cp": tb.lrp_grad(ref, x32, c, softmax=False).numpy()}


# --- comparing -------------------------------------------------------------------------------


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-300))


class Tally:
    """Per control: on how many cases it could be told from the right map, and on how
    many it could differ at all (a mistake can be the right map by construction: the
    clamp's place with one head, the order of one layer, the dropped prefix with CLS
    alone)."""

    def __init__(self):
        self.told = {(m, w): 0 for m, w, _ in CONTROLS}
        self.applies = dict(self.told)

    def check_all_told(self, rep):
        for (m, w), n in self.told.items():
            if self.applies[m, w] and not n:
                rep.check(False, f"control '{m}: {w}' never far enough from the right map to be "
                          f"told apart: untested")
            elif not self.applies[m, w]:
                print(f"note: control '{m}: {w}' is the right map by construction on these models")


def compare_maps(rep, label, engine, maps64, maps32, tols, methods=METHODS):
    for m in methods:
        tol = tols[m]
        k = "expl_" + m
        if not rep.check(k in engine, f"{label}: vit_dump wrote no {k}.npy"):
            continue
        if not rep.check(engine[k].shape == maps64[m].shape,
                         f"{label}: {m} shape {engine[k].shape}, expected {maps64[m].shape}"):
            continue
        err, yard = rel(engine[k], maps64[m]), rel(maps32[m], maps64[m])
        print(f"  {m:12s} rel err {err:.2e} (torch f32 {yard:.2e}, tol {tol:.0e}; "
              f"max|f64| {np.abs(maps64[m]).max():.2e})")
        rep.check(err <= tol, f"{label}: {m} map differs from the reference by {err:.2e} (relative)")


def check_controls(rep, label, engine, maps64, r, x, Np, ratio, extra, tols, tally, methods=METHODS):
    for m, what, fn in CONTROLS:
        if m not in methods:
            continue
        tol = tols[m]
        wrong = fn(r, x, Np, ratio, extra)
        if wrong is None:
            continue
        wrong = np.asarray(wrong).reshape(maps64[m].shape)
        gap = rel(wrong, maps64[m])  # can the data tell this mistake from the right map?
        # the engine's distance from the mistake, on the right map's scale
        d = float(np.abs(engine["expl_" + m] - wrong).max() / max(np.abs(maps64[m]).max(), 1e-300))
        if gap <= WRONG * tol:
            print(f"  control {m}: '{what}': n/a here (the right map to {gap:.1e})")
            tally.applies[m, what] += gap > 0
            continue
        tally.applies[m, what] += 1
        tally.told[m, what] += 1
        print(f"  control {m}: '{what}': engine differs by {d:.1e} (must exceed {WRONG * tol:.0e})")
        rep.check(d > WRONG * tol, f"{label}: {m} map is as close to '{what}' as to the reference")


def check_boundaries(rep, label, boundaries, rank, tol):
    """The discard set is ranked by F from the engine's own float32 A and dA (computed
    here in float64), so only the engine's float32 rounding of F itself, <= (H+1) 2^-24
    relative, could order a boundary differently: the k-th and (k+1)-th smallest must
    be an exact tie (the index rule decides), or apart by more than NEAR_TIE relative,
    or too small for a swap to matter (< tol x the layer's max F)."""
    ties = close = 0
    for b, Fl in zip(boundaries, rank):
        if b is None:
            continue
        lo, hi = b
        if lo == hi:
            ties += 1
        elif hi - lo <= NEAR_TIE * hi and hi > tol * Fl.max():
            close += 1
    print(f"  discard boundaries: {len(boundaries)} layers, {ties} inside a tie, {close} near-ties")
    rep.check(close == 0, f"{label}: a discard boundary within float32 rounding: the test cannot "
              f"decide it; change the seed")


def explain_case(rep, label, ref, dump, args, out, classes, tols, tally, recompute=True, discard_on=0):
    """The maps of vit_dump `args` for each class (-1: the top-1), --discard 0.5 and 0.9 for
    classes[discard_on], --att recompute bit for bit for the first class."""
    grid = None
    for i, cls in enumerate(classes):
        engine, cfg = run_dump(dump, args + ["--out", Path(out) / f"class{cls}", "--class", cls])
        c, grid = cfg["target"], (cfg["grid_h"], cfg["grid_w"])
        x32 = torch.from_numpy(engine["input"])
        x = engine["input"].astype(np.float64)
        print(f" [{label}] class {cls}: target {c}")
        r64 = tb.reference_grads(ref, x32, c)
        r32 = tb.reference_grads(ref, x32, c, torch.float32)
        maps64 = reference_maps(r64, x, ref.Np, grid)
        compare_maps(rep, f"{label} class {c}", engine, maps64, reference_maps(r32, x, ref.Np, grid), tols)
        extra = control_extras(ref, x32, c)
        check_controls(rep, f"{label} class {c}", engine, maps64, r64, x, ref.Np, "0", extra, tols, tally)
        for ratio in (DISCARDS if i == discard_on else ()):
            ed, _ = run_dump(dump, args + ["--out", Path(out) / f"class{cls}_d{ratio}", "--class", cls,
                                           "--discard", ratio])
            # Which entries the discard zeroes is decided by their order, and entries
            # near the boundary can be ordered differently by float32 and float64: rank
            # them by F from the engine's own A and dA (float32, both checked against
            # the reference by test_parity and test_backward), the values from float64.
            rank = [np.maximum((engine["att"][l].astype(np.float64) * engine["grad_att"][l]).mean(0), 0)
                    for l in range(len(engine["att"]))]
            bnd = []
            m64 = reference_maps(r64, x, ref.Np, grid, ratio, boundaries=bnd, rank=rank)
            own = rel(ed["expl_grad_rollout"],
                      grad_rollout(r64["att"], r64["grad_att"], ref.Np, ratio).reshape(grid))
            print(f"  --discard {ratio} (with float64's own ranking: rel err {own:.1e}):")
            check_boundaries(rep, label, bnd, rank, tols["grad_rollout"])
            compare_maps(rep, f"{label} class {c} discard {ratio}", ed, m64,
                         reference_maps(r32, x, ref.Np, grid, ratio), tols, ["grad_rollout"])
            check_controls(rep, f"{label} class {c} discard {ratio}", ed, m64, r64, x, ref.Np, ratio,
                           extra, tols, tally, ["grad_rollout"])
            changed = [m for m in METHODS if m != "grad_rollout"
                       and not np.array_equal(ed["expl_" + m], engine["expl_" + m])]
            rep.check(not changed, f"{label}: --discard changed {changed}, not only grad_rollout")
        if recompute and i == 0:
            er, _ = run_dump(dump, args + ["--out", Path(out) / f"class{cls}_recompute", "--class", cls,
                                           "--att", "recompute"])
            diff = [m for m in METHODS if not np.array_equal(er.get("expl_" + m), engine["expl_" + m])]
            print(f"  --att recompute: maps bit-identical except {diff or 'none'}")
            for m in diff:
                rep.check(False, f"{label}: {m} with the attention recomputed differs by "
                          f"{rel(er['expl_' + m], engine['expl_' + m]) if 'expl_' + m in er else 'all'}")


# --- parts --------------------------------------------------------------------------------------


def test_random(args, rep):
    tally = Tally()
    for name in list(FAMILIES) + list(tb.EXTRA):
        f, ref, dargs, d, x = tb.family_model(name, Path(args.work) / "families")
        if not f["C"]:
            continue
        print(f"\n[{name}] H={f['H']} L={f['L']} C={f['C']} Np={ref.Np}")
        second = reference.top_k(ref.forward(x)[0], 2)[1]
        explain_case(rep, name, ref, args.dump, dargs, d / "expl", [-1, second], TOL["random"], tally)
    for i, m in enumerate(MODELS):
        if not m["C"]:
            continue
        ref, dargs, d, x = tb.random_model(i, m, Path(args.work) / "random")
        print(f"\n[{m['name']}] H={m['H']} L={m['L']} C={m['C']} {m['dtype']}")
        second = reference.top_k(ref.forward(x)[0], 2)[1]
        explain_case(rep, m["name"], ref, args.dump, dargs, d / "expl", [-1, second], TOL["random"], tally)
    tally.check_all_told(rep)


def test_deit(args, rep):
    setup = tb.deit_setup(args.shared)
    if setup is None:
        print(f"skip: no DeiT-Tiny weights or photos under '{args.shared}'")
        return 77
    model, photos, names = setup
    ref = tb.Ref(reference.load_safetensors(model), 3)
    tally = Tally()
    for photo in photos:
        work = Path(args.work) / photo.stem
        dargs = ["--model", model, "--image", photo]
        _, cfg = run_dump(args.dump, dargs + ["--out", work / "fwd"])
        top5 = cfg["top5"]
        print(f"\n[{photo.name}] top-5 {', '.join(f'{i} {names[i]}' for i in top5)}")
        explain_case(rep, photo.name, ref, args.dump, dargs, work, [-1, top5[4]], TOL["deit"], tally,
                     recompute=photo == photos[0])
    tally.check_all_told(rep)
    return None


def selftest(args, rep):
    """The implementations on cases worked by hand."""
    def eq(what, got, want):
        ok = np.allclose(got, want, rtol=1e-12, atol=1e-12)
        print(f"  {what}: {'ok' if ok else f'got {got}, expected {want}'}")
        rep.check(ok, f"selftest: {what}")

    # T = 3 (CLS + 2 patches), L = 2, H = 1, dA = 1 everywhere: the Chefer cam is A itself.
    A = np.array([[[[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]],
                  [[[0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]]]])
    ones = np.ones_like(A)
    # R1 = I + A0; R2 = R1 + A1 R1; row 0 of R2 at patches:
    # R1 = [[1.5, .25, .25], [0, 2, 0], [0, 0, 2]]; A1 R1 row 0 = R1 row 1 = [0, 2, 0]
    eq("chefer, dA = 1", chefer(A, ones, 1), [0.25 + 2, 0.25])
    eq("chefer, negative dA clamped away", chefer(A, -ones, 1), [0, 0])
    # grad rollout with dA = 2 (F = 2A, clamp inert): Â = (2A + I)/2 rows normalised = (2A+I)/4
    # (every row of A sums to 1, so each row of 2A + I sums to 3: Â = (2A + I)/3)
    M0, M1 = (2 * A[0, 0] + np.eye(3)) / 3, (2 * A[1, 0] + np.eye(3)) / 3
    eq("grad_rollout, dA = 2", grad_rollout(A, 2 * ones, 1), (M1 @ M0)[0, 1:])
    # discard 0.5 of T (T - Np) = 6 patch entries: 3 smallest. F_0 patch columns (2A):
    # [.5, .5 | 2, 0 | 0, 2]: zeros at flat 5, 7, then 0.5 at index 1 (lower index than 2)
    D0, _ = discard(2 * A[0, 0], 1, "0.5")
    eq("discard: 3 smallest patch entries, ties to the lower index", D0,
       [[1.0, 0.0, 0.5], [0, 2, 0], [0, 0, 2]])
    # vit-explain's rule, 0.7: int(6.3) = 6 of all 9: the four zeros, then both 0.5
    D0, _ = discard(2 * A[0, 0], 1, "0.7", rule="all")
    eq("vit-explain discard rule", D0, [[1.0, 0.0, 0.0], [0, 2, 0], [0, 0, 2]])
    # ... and its [0, 0] spared even when among the smallest: int(9 * 0.3) = 2
    D0, _ = discard(np.array([[0.0, 1, 1], [1, 0.5, 1], [1, 1, 1]]), 1, "0.3", rule="all")
    eq("vit-explain discard rule spares [0, 0]", D0, [[0.0, 1, 1], [1, 0, 1], [1, 1, 1]])
    # Grad-CAM: act [2, 2], g rows [1, 0], [3, 2]: w = [2, 1]; act w = [2 a00 + a01, ...]
    act, g = np.array([[1.0, -1.0], [-2.0, 0.5]]), np.array([[1.0, 0.0], [3.0, 2.0]])
    eq("gradcam", gradcam(act, g), [1.0, 0.0])
    # LeGrad: G [L=2, H=1, T=3, T=3]; E_l = column means of G^+ at patches
    G = np.array([[[[1, -1, 2], [0, 3, -2], [5, 0, 4]]], [[[0, 1, 1], [0, 1, 1], [0, -3, 1]]]], float)
    eq("legrad", legrad(G, 1), [1 + 2 / 3, 2 + 1])
    x = np.arange(12.0).reshape(3, 2, 2)
    eq("grad x input", pixel_map(x, np.ones_like(x)), x.sum(0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["random", "deit", "selftest"])
    ap.add_argument("--dump", help="the vit_dump executable")
    ap.add_argument("--work", help="scratch directory")
    ap.add_argument("--shared", default="", help="shared/ with models/deit-tiny and images")
    args = ap.parse_args()
    rep, t0 = Report(), time.time()
    skip = {"random": test_random, "deit": test_deit, "selftest": selftest}[args.part](args, rep)
    print(f"({time.time() - t0:.1f} s)")
    return skip if skip is not None else rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
