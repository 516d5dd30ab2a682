"""test_interventions.py - the engine's interventions (vit.h, "Interventions") against a
PyTorch reference of timm's VisionTransformer with each change written into it, on a
random model of every family the engine loads (test_families.FAMILIES: timm and
transformers names, the distillation token, registers, LayerScale, backbones) and on
DeiT-Tiny with a photo.

    /usr/bin/python3 test_interventions.py families --dump vit_dump --work DIR
    /usr/bin/python3 test_interventions.py deit --dump vit_dump --work DIR --shared SHARED
    /usr/bin/python3 test_interventions.py importance --dump vit_dump --work DIR
    /usr/bin/python3 test_interventions.py families --mistake NAME ...   (must fail)

The reference (forward() below) follows timm's vision_transformer.py (Block,
Attention with fused_attn=False, _pos_embed) and applies:
  ablate       transformers' head_mask (modeling_vit.py ViTSelfAttention:
               attention_probs = attention_probs * head_mask), before the projection;
  drop         the dropped patches' tokens taken out of the sequence after the position
               embedding is added (each kept patch keeps its own), T smaller;
  fill         the patch's pixels set to 0 (the normalised mean) before the patch embedding;
  pos shuffle  patch p gets the position embedding of patch perm[p] (the engine's
               permutation, pos_perm.npy); pos zero: no position embedding;
  temperature  softmax(s / tau) in one layer.
Compared, with test_parity's tolerances for the random models (attention 1e-5 absolute,
DeiT-Tiny too; logits 1e-5 x max(1, max |logit|)): logits, every attention matrix (the
reference's [T', T'] put into the engine's [T, T] at the kept tokens, the dropped
patches' rows and columns 0), the CLS rows as the maps read them (vit_map_attention;
recomputed from queries and keys in the combined case, bit for bit the kept ones), vit_forward_batch's logits, and for the combined case
the backward pass (dy_c/dA and dy_c/d input against autograd, relative 1e-5 / 5e-4 as
test_backward.py).
importance: vit_head_importance (the drop in the top-1 probability with each head
ablated alone) and vit_head_pruning (the least important pruned first, Michel et al.
2019 Fig. 2) against the reference's probabilities, on every family with a head, with
max_batch 2 (the passes in several calls), one with an intervention on top; the engine's
curve must be far from pruning the most important first.
Mistakes (--mistake, each its own ctest that must fail on every model):
  after_proj   the head ablated after the projection (its slice of proj's output zeroed)
  shift        patches dropped, the kept ones given the first position embeddings in order
  temp_after   the temperature applied to the probabilities (softmax(s) / tau)
"""
import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
from test_families import FAMILIES, config_json, input_size, random_timm, spec, to_hf  # noqa: E402
from test_parity import ATT_TOL, LOGIT_TOL, Report, run_dump, write_safetensors  # noqa: E402

GRAD_TOL = {"random": 1e-5, "deit": 5e-4}  # test_backward.py's, relative to max |f64|
MISTAKES = ("after_proj", "shift", "temp_after")
torch.set_num_threads(1)


# --- the reference -------------------------------------------------------------------


def forward(w, x, H, eps, iv, mistake=None, pos_grid=None, att_leaf=False):
    """timm VisionTransformer.forward on x [3, Sh, Sw] with intervention iv: dict with
    ablate {(l, h)}, drop {p}, fill {p}, pos None | "zero" | perm [N], temp None | (l, tau)
    (0-based). w: timm names, float64. Returns (logits or None, att [L] of [H, T', T'],
    kept token indices into the engine's T). att_leaf: the probabilities before the head
    mask are what the block uses (a tensor autograd can differentiate at)."""
    x = torch.as_tensor(x, dtype=torch.float64).clone()
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    Dh = D // H
    L = sum(1 for k in w if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    gh, gw = x.shape[1] // P, x.shape[2] // P
    N = gh * gw
    for p in iv.get("fill", ()):  # the normalised mean: 0
        r, c = divmod(p, gw)
        x[:, r * P:(r + 1) * P, c * P:(c + 1) * P] = 0
    t = F.conv2d(x[None], w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
    t = t.flatten(2).transpose(1, 2)  # [1, N, D]
    to_cat = [w["cls_token"]] + [w[k] for k in ("dist_token", "reg_token") if k in w]
    Np = sum(c.shape[1] for c in to_cat)
    npos, gh0, gw0 = reference.pos_layout(w, Np, pos_grid)
    pos = reference.resample_abs_pos_embed(w["pos_embed"], (gh, gw), (gh0, gw0), npos)
    pre, grid = pos[:, :npos], pos[:, npos:]  # [1, Npos, D], [1, N, D]
    if iv.get("pos") == "zero":
        pre, grid = pre * 0, grid * 0
    elif iv.get("pos") is not None:
        grid = grid[:, torch.as_tensor(iv["pos"], dtype=torch.long)]
    drop = sorted(iv.get("drop", ()))
    kept = [p for p in range(N) if p not in drop]
    if mistake == "shift" and drop:  # the kept patches get positions 0 .. N'-1
        g2 = grid.clone() * 0
        g2[:, kept] = grid[:, :len(kept)]
        grid = g2
    # _pos_embed: with prefix rows (timm default) add after the concat, else before
    prefix = torch.cat(to_cat, dim=1)
    if npos:
        prefix = prefix + pre
    tokens = torch.cat([prefix, t + grid], dim=1)  # [1, T, D]
    idx = list(range(Np)) + [Np + p for p in kept]
    tokens = tokens[:, idx]  # the dropped patches leave the sequence
    T = tokens.shape[1]
    ablate, temp = iv.get("ablate", set()), iv.get("temp")
    att = []
    xx = tokens
    for l in range(L):
        b = f"blocks.{l}."
        ls1, ls2 = (w.get(b + k, 1.0) for k in ("ls1.gamma", "ls2.gamma"))
        xn = F.layer_norm(xx, (D,), w[b + "norm1.weight"], w[b + "norm1.bias"], eps)
        qkv = F.linear(xn, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"])
        q, k, v = qkv.reshape(1, T, 3, H, Dh).permute(2, 0, 3, 1, 4)
        s = (q * Dh**-0.5) @ k.transpose(-2, -1)
        if temp and temp[0] == l and mistake != "temp_after":
            s = s / temp[1]
        a = s.softmax(dim=-1)
        if temp and temp[0] == l and mistake == "temp_after":
            a = a / temp[1]
        if att_leaf:
            a.retain_grad()
        att.append(a)
        mask = torch.ones(H, dtype=a.dtype)
        for (la, h) in ablate:
            if la == l:
                mask[h] = 0
        am = a if mistake == "after_proj" else a * mask[None, :, None, None]  # head_mask
        ctx = (am @ v).transpose(1, 2).reshape(1, T, D)
        y = F.linear(ctx, w[b + "attn.proj.weight"], w[b + "attn.proj.bias"])
        if mistake == "after_proj":  # the head's columns of proj's output instead
            y = y * mask.repeat_interleave(Dh)
        xx = xx + ls1 * y
        hid = F.gelu(F.linear(F.layer_norm(xx, (D,), w[b + "norm2.weight"], w[b + "norm2.bias"], eps),
                              w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
        xx = xx + ls2 * F.linear(hid, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
    logits = reference.head_logits(w, xx, eps)
    return logits, att, idx


def full_att(att, idx, T):
    """The reference's [H, T', T'] per layer into [L, H, T, T] at the kept tokens."""
    out = np.zeros((len(att), att[0].shape[1], T, T))
    ii = np.asarray(idx)
    for l, a in enumerate(att):
        out[l][:, ii[:, None], ii[None, :]] = a[0].detach().numpy()
    return out


# --- one case ---------------------------------------------------------------------------


def dump_flags(iv):
    a = []
    if iv.get("ablate"):
        a += ["--ablate", ",".join(f"{l}:{h}" for l, h in sorted(iv["ablate"]))]
    if iv.get("drop"):
        a += ["--drop", ",".join(map(str, sorted(iv["drop"])))]
    if iv.get("fill"):
        a += ["--fill", ",".join(map(str, sorted(iv["fill"])))]
    if iv.get("pos") == "zero":
        a += ["--pos", "zero"]
    elif iv.get("seed") is not None:
        a += ["--pos", f"shuffle:{iv['seed']}"]
    if iv.get("temp"):
        a += ["--temp", f"{iv['temp'][0]}:{iv['temp'][1]!r}"]
    return a


def run_case(rep, label, w, x, H, eps, iv, base_args, out, att_tol, mistake, grads=None,
             pos_grid=None):
    """Engine (vit_dump with iv) against the reference; guards the comparisons."""
    engine, cfg = run_dump(base_args[0], base_args[1:] + ["--out", out] + dump_flags(iv))
    if "seed" in iv:
        iv = dict(iv, pos=engine["pos_perm"].tolist())
    lg, att, idx = forward(w, x, H, eps, iv, mistake, pos_grid)
    T, N, Np = cfg["n_tokens"], cfg["n_patches"], cfg["n_prefix"]
    ref_att = full_att(att, idx, T)
    d_att = np.abs(engine["att"] - ref_att).max()
    # the CLS rows the maps read (vit_map_attention), over the patches
    d_cls = np.abs(engine["cls_att"] - ref_att[:, :, 0, Np:]).max()
    msg = f"  attention {d_att:.1e}, CLS rows (maps) {d_cls:.1e} (tol {att_tol:.0e})"
    rep.check(d_att <= att_tol and d_cls <= att_tol,
              f"{label}: attention differs by {max(d_att, d_cls):.1e}", guard=label)
    if lg is not None:
        lg = lg.detach().numpy()
        tol = LOGIT_TOL * max(1.0, np.abs(lg).max())
        d_lg = np.abs(engine["logits"] - lg).max()
        d_b = np.abs(engine["batch_logits"] - lg[None]).max()
        msg += f"; logits {d_lg:.1e}, batched {d_b:.1e} (tol {tol:.1e})"
        rep.check(d_lg <= tol and d_b <= tol, f"{label}: logits differ by {max(d_lg, d_b):.1e}",
                  guard=label)
    print(f"  [{label}] {msg}")
    if not label.endswith("/all"):
        return engine
    # attention recomputed by the maps (the combined case): the same CLS rows
    rc, _ = run_dump(base_args[0], base_args[1:] + ["--out", str(out) + "_rc", "--att", "recompute"]
                     + dump_flags(iv))
    d_rc = np.abs(rc["cls_att"] - engine["cls_att"]).max()
    rep.check(d_rc == 0, f"{label}: the maps' recomputed attention differs by {d_rc:.1e}")
    print(f"  [{label}] the maps' attention recomputed: max diff from kept {d_rc:.1e}")
    if grads is not None and lg is not None:
        check_grads(rep, label, w, x, H, eps, iv, base_args, out, grads, pos_grid, cfg)
    return engine


def check_grads(rep, label, w, x, H, eps, iv, base_args, out, tol, pos_grid, cfg):
    """vit_backward on the intervened model against autograd on the reference."""
    engine, _ = run_dump(base_args[0], base_args[1:] + ["--out", str(out) + "_bk", "--class", "-1"]
                         + dump_flags(iv))
    if "seed" in iv:
        iv = dict(iv, pos=engine["pos_perm"].tolist())
    xg = torch.as_tensor(x, dtype=torch.float64).clone().requires_grad_(True)
    lg, att, idx = forward(w, xg, H, eps, iv, pos_grid=pos_grid, att_leaf=True)
    c = int(torch.argmax(lg))
    lg[c].backward()
    ga = full_att([a.grad for a in att], idx, cfg["n_tokens"])
    gi = xg.grad.numpy()
    for k, e, r in (("grad_att", engine["grad_att"], ga), ("grad_input", engine["grad_input"], gi)):
        err = np.abs(e - r).max() / max(np.abs(r).max(), 1e-300)
        print(f"  [{label}] backward {k}: rel err {err:.1e} (tol {tol:.0e})")
        rep.check(err <= tol, f"{label}: {k} differs from autograd by {err:.1e}")


def cases(L, H, gh, gw, seed):
    """The interventions tried on a model with L layers, H heads, a gh x gw grid."""
    N = gh * gw
    drop = {0, N // 2, N - 2} if N > 3 else {0}
    return {
        "ablate": dict(ablate={(0, 0), (L - 1, H - 1)}),
        "drop": dict(drop=drop),
        "fill": dict(fill={1, N // 2 + 1}),
        "pos_shuffle": dict(seed=seed),
        "pos_zero": dict(pos="zero"),
        "temp": dict(temp=(L - 1 if L > 1 else 0, 2.5)),
        "temp_sharp": dict(temp=(0, 0.5)),
        "all": dict(ablate={(0, H - 1)}, drop={N - 1, 1}, fill={2}, seed=seed + 1, temp=(0, 1.7)),
    }


WHICH = {None: None, "after_proj": "ablate", "shift": "drop", "temp_after": "temp"}


# --- the parts ----------------------------------------------------------------------------


def test_families(args, rep):
    for name in FAMILIES:
        f = spec(name)
        d = Path(args.work) / name
        d.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(sum(map(ord, name)))
        w = random_timm(f, g)  # the reference's (timm names)
        write_safetensors(d / "model.safetensors", to_hf(w, f, g) if f["hf"] else w, "F32")
        (d / "config.json").write_text(__import__("json").dumps(config_json(f)))
        Sh, Sw = input_size(f)
        x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
        x.numpy().astype(np.float32).tofile(d / "input.f32")
        base = [args.dump, "--model", d / "model.safetensors", "--input", d / "input.f32"]
        if f["size"]:
            base += ["--size", f"{Sh}x{Sw}"]
        w64 = {k: v.double() for k, v in w.items()}
        if f["hf"] == "DeiTForImageClassification":  # the CLS head alone
            w64 = {k: v for k, v in w64.items() if not k.startswith("head_dist.")}
        x64 = torch.from_numpy(x.numpy().astype(np.float32)).double()
        eps = f["eps"] or 1e-6
        print(f"\n[{name}] {f['hf'] or 'timm'}, Np={1 + f['dist'] + f['R']}, H={f['H']}, L={f['L']}, "
              f"C={f['C']}")
        for cname, iv in cases(f["L"], f["H"], Sh // f["P"], Sw // f["P"], 3).items():
            if args.mistake and cname != WHICH[args.mistake]:
                continue
            grads = GRAD_TOL["random"] if cname == "all" and f["C"] else None
            run_case(rep, f"{name}/{cname}", w64, x64, f["H"], eps, iv, base, d / cname, ATT_TOL["random"],
                     args.mistake, grads, pos_grid=f["grid0"])


def check_importance(rep, label, w, x, H, eps, base, out, iv, pos_grid):
    """vit_head_importance and vit_head_pruning against the reference's probabilities:
    each head ablated alone (and iv's changes) and the heads pruned in the engine's
    order; the engine's order must be by increasing importance, and the curve far from
    pruning the most important first (a plausible slip)."""
    flags = dump_flags(iv)
    eng, cfg = run_dump(base[0], base[1:] + ["--out", out, "--importance", "-1:2"] + flags)
    if "seed" in iv:
        iv = dict(iv, pos=eng["pos_perm"].tolist())
    meta = __import__("json").loads((Path(out) / "importance.json").read_text())
    c, L = meta["importance_class"], eng["importance"].shape[0]

    def prob(ablate):
        lg, _, _ = forward(w, x, H, eps, dict(iv, ablate=set(iv.get("ablate", set())) | ablate),
                           pos_grid=pos_grid)
        return float(torch.softmax(lg, 0)[c])

    p0 = prob(set())
    imp = np.array([[p0 - prob({(l, h)}) for h in range(H)] for l in range(L)])
    for (l, h) in iv.get("ablate", ()):
        imp[l, h] = 0.0
    d_imp = np.abs(eng["importance"] - imp).max()
    d_base = abs(meta["importance_base"] - p0)
    order = eng["order"]
    prune = np.array([prob({divmod(int(j), H) for j in order[:k]}) for k in range(L * H + 1)])
    d_pr = np.abs(eng["prune"] - prune).max()
    wrong = np.array([prob({divmod(int(j), H) for j in order[::-1][:k]}) for k in range(L * H + 1)])
    far = np.abs(eng["prune"] - wrong).max()
    tol = ATT_TOL["random"]
    print(f"  [{label}] importance {d_imp:.1e}, base p {d_base:.1e}, pruning curve {d_pr:.1e} "
          f"(tol {tol:.0e}); most important first is {far:.1e} away")
    rep.check(d_imp <= tol and d_base <= tol and d_pr <= tol,
              f"{label}: head importance differs by {max(d_imp, d_base, d_pr):.1e}", guard=label)
    flat = eng["importance"].reshape(-1)[order]
    rep.check(bool(np.all(np.diff(flat) >= 0)), f"{label}: pruning order not by increasing importance")
    rep.check(far > 20 * tol, f"{label}: the curve is as close to pruning the most important first")


def test_importance(args, rep):
    """Every family with a head; one with an intervention on top."""
    for name in FAMILIES:
        f = spec(name)
        if not f["C"]:
            continue
        d = Path(args.work) / name
        d.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(sum(map(ord, name)))
        w = random_timm(f, g)
        write_safetensors(d / "model.safetensors", to_hf(w, f, g) if f["hf"] else w, "F32")
        (d / "config.json").write_text(__import__("json").dumps(config_json(f)))
        Sh, Sw = input_size(f)
        x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
        x.numpy().astype(np.float32).tofile(d / "input.f32")
        base = [args.dump, "--model", d / "model.safetensors", "--input", d / "input.f32"]
        if f["size"]:  # a family with an input other than its training grid (as test_families)
            base += ["--size", f"{Sh}x{Sw}"]
        w64 = {k: v.double() for k, v in w.items()}
        if f["hf"] == "DeiTForImageClassification":
            w64 = {k: v for k, v in w64.items() if not k.startswith("head_dist.")}
        x64 = torch.from_numpy(x.numpy().astype(np.float32)).double()
        eps = f["eps"] or 1e-6
        print(f"\n[{name}] H={f['H']}, L={f['L']}")
        check_importance(rep, f"{name}/importance", w64, x64, f["H"], eps, base, d / "imp", {},
                         f["grid0"])
        if name == "deit_distilled_timm":
            iv = dict(ablate={(0, 1)}, fill={3}, temp=(1, 1.5))
            check_importance(rep, f"{name}/importance+iv", w64, x64, f["H"], eps, base, d / "imp_iv",
                             iv, f["grid0"])


def test_deit(args, rep):
    shared = Path(args.shared)
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    photo = shared / "images/chelsea.png"
    if not model.exists() or not photo.exists():
        print(f"skip: no DeiT-Tiny or chelsea.png under {shared}")
        return 77
    w = reference.load_safetensors(model)
    base = [args.dump, "--model", model, "--image", photo]
    work = Path(args.work)
    # the engine's own input (preprocessing is test_parity's), read back from a first run
    plain, _ = run_dump(args.dump, base[1:] + ["--out", work / "plain"])
    x = torch.from_numpy(plain["input"]).double()
    allcases = cases(12, 3, 14, 14, 5)
    # the cat's face covered: grid rows 3..6, columns 5..9 (chelsea.png at 224 px)
    face = {r * 14 + c for r in range(3, 7) for c in range(5, 10)}
    allcases["drop"] = dict(drop=face)
    allcases["fill"] = dict(fill=face)
    for cname, iv in allcases.items():
        if args.mistake and cname != WHICH[args.mistake]:
            continue
        if cname in ("temp_sharp", "pos_zero") and not args.mistake:
            continue  # the random models cover them; one DeiT run each for the rest
        grads = GRAD_TOL["deit"] if cname == "all" else None
        run_case(rep, f"deit/{cname}", w, x, 3, 1e-6, iv, base, work / cname, ATT_TOL["random"],
                 args.mistake, grads)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["families", "deit", "importance"])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared", default="")
    ap.add_argument("--mistake", choices=MISTAKES, help="a wrong reference: must fail")
    args = ap.parse_args()
    rep, t0 = Report(), time.time()
    skip = {"families": test_families, "deit": test_deit, "importance": test_importance}[args.part](
        args, rep)
    print(f"({time.time() - t0:.1f} s)")
    if skip is not None:
        return skip
    if args.mistake:
        return rep.control_exit_code(f"the mistake '{args.mistake}'")
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
