"""test_tokens.py - what the tokens hold (vit.h: vit_features, vit_token_norms,
vit_patch_similarity, vit_tokenrank, vit_high_norm_tokens, vit_logit_lens,
vit_logit_lens_map) against numpy/torch written here on the float64 reference's
tokens and attention (reference.py / reference_hf.py).

    /usr/bin/python3 test_tokens.py families --dump vit_dump --work DIR
    /usr/bin/python3 test_tokens.py deit     --dump vit_dump --work DIR --shared SHARED

families: every family of test_families.py (timm and transformers names, DeiT's
          distillation token, registers, LayerScale, headless backbones: no lens)
          and test_parity.py's random models, each run by vit_dump --tokens, once
          with the attention kept and once recomputed (every file the same bit for bit).
deit:     DeiT-Tiny on every photo in SHARED/images (exit 77 without SHARED).

The formulas (z_l block l's output [T, D], float64; Np prefix tokens):
  tokens      z_l, and the last block's for every token (VitRunOptions.all_tokens)
  features    f_l = LayerNorm(z_l) with the final norm's weights (DINOv2's
              get_intermediate_layers(norm=True))
  norms       ||z_l[t]||_2 (Darcet et al. 2023 measure the residual stream)
  similarity  cos(f_l[q], f_l[Np + p]) for q = 0, Np, T - 1
  tokenrank   Erel et al. 2025 (yoterel/attention_chains_code helpers.py,
              prep_for_power_method alpha 0.99 and power_method): P = 0.99 A + 0.01/T,
              A one head's attention or the heads' mean / max / min with rows
              renormalised; pi with pi P = pi, sum 1 -- here the eigenvector of P^T for
              its largest eigenvalue (numpy.linalg.eig), not a power iteration
  high_norm   the tokens with ||z_l[t]|| > median + 3 MAD over the patches (numpy's
              median), in decreasing norm, and the first layer of the run of layers
              ending at l where the token is above each layer's threshold; tokens within
              1e-4 (relative) of a threshold may go either way
  lens        softmax(head(LayerNorm(z_l)[CLS])) (distilled: the mean of both heads'
              logits), the last layer's equal to probs
  lens_map    softmax(head(LayerNorm(z_l)[Np + p]))[c], c the engine's top-1; pooled heads
              (fc_norm, [CLS ; mean]): the head on layer l's pooling (lens) and each
              patch in the place of the patches' mean: head(fc_norm(z_p)),
              head([LayerNorm(z_l)[0] ; LayerNorm(z_l)[p]]) (lens_map)
Errors: max |engine - reference| / max |reference| per layer; tolerance 1e-5
(random), 2e-4 (DeiT-Tiny). Measured (max over models; random / DeiT-Tiny): tokens
2.0e-6 / 4.4e-5, features 1.9e-6 / 3.3e-5, norms 5.2e-7 / 1.5e-5, similarity
1.0e-6 / 1.8e-5, tokenrank 3.3e-6 / 2.2e-5, lens 1.3e-6 / 3.7e-6, lens_map
1.9e-6 / 4.0e-5. The controls' smallest "largest distance": 0.63 (lens_map).
Negative controls: the mistakes in CONTROLS, computed on the same reference data,
must be further than WRONG x the tolerance from the engine on some model of the
run (each that can differ at all): the raw stream instead of the features, the
cosine without the norm, the chain's right eigenvector (pi = P pi), the distilled
lens from the CLS head alone, norms after the final norm.
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import reference_hf  # noqa: E402
from test_backward import Ref, deit_setup, family_model, random_model  # noqa: E402
from test_families import FAMILIES  # noqa: E402
from test_parity import MODELS, Report, run_dump  # noqa: E402

TOL = {"random": 1e-5, "deit": 2e-4}
WRONG = 20

torch.set_num_threads(1)


def final_norm(ref, w):
    if ref.hf:
        p = reference_hf.hf_prefix(w)
        return w[p + "layernorm.weight"], w[p + "layernorm.bias"]
    return (w["norm.weight"], w["norm.bias"]) if "norm.weight" in w else None  # fc_norm models


def cls_head(ref, w):
    """The CLS token's head (weight, bias), None without head."""
    for k in ("head", "classifier", "cls_classifier"):
        if k + ".weight" in w:
            return w[k + ".weight"], w.get(k + ".bias")
    return None


def reference_views(ref, x, top):
    """Every view in float64 (numpy), and the controls' versions."""
    z, att = [], []

    def tap(name, l, t):
        if name == "tokens":
            z.append(t[0].detach())
        if name == "att":
            att.append(t[0].detach())
        return t

    with torch.no_grad():
        ref.forward(x, torch.float64, tap=tap)
    w = ref.weights(torch.float64)
    nwb = final_norm(ref, w)
    L, T = len(z), z[0].shape[0]
    Np = ref.Np
    out, wrong = {}, {}
    out["tokens"] = torch.stack(z).numpy()
    f = [F.layer_norm(zl, (zl.shape[-1],), *nwb, ref.eps) if nwb else zl for zl in z]
    out["features"] = torch.stack(f).numpy()
    wrong["features"] = {"raw stream": out["tokens"]}
    out["norms"] = torch.stack([zl.norm(dim=-1) for zl in z]).numpy()
    wrong["norms"] = {"after the final norm": torch.stack([fl.norm(dim=-1) for fl in f]).numpy()}
    qs = [0, Np, T - 1]

    def cos(a):
        a = a / a.norm(dim=-1, keepdim=True)
        return torch.stack([a[q] @ a[Np:].T for q in qs])

    out["similarity"] = torch.stack([cos(fl) for fl in f]).numpy()
    wrong["similarity"] = {"dot product": torch.stack(
        [torch.stack([fl[q] @ fl[Np:].T for q in qs]) for fl in f]).numpy()}

    def stationary(a):
        """The stationary distribution of the chain P = 0.99 a + 0.01/T (rows of a made
        to sum to 1): the left eigenvector v P = v with eigenvalue 1, sum 1. P is
        primitive, so it is the one solution of (P^T - I) v = 0 with the last equation
        replaced by sum(v) = 1 (a direct solve: ten times cheaper than np.linalg.eig)."""
        a = a / a.sum(-1, keepdims=True)
        T = a.shape[0]
        A = (0.99 * a + 0.01 / T).T - np.eye(T)
        A[-1, :] = 1.0
        b = np.zeros(T)
        b[-1] = 1.0
        return np.linalg.solve(A, b)

    tr, trw = [], []
    for a in att:
        a = a.numpy()
        mats = [a[h] for h in range(a.shape[0])] + [a.mean(0), a.max(0), a.min(0)]
        tr.append([stationary(m) for m in mats])
        # control: the right eigenvector of the row-stochastic P for eigenvalue 1, which
        # is the uniform vector (P 1 = 1), normalised to sum 1
        trw.append([np.full(m.shape[0], 1.0 / m.shape[0]) for m in mats])
    out["tokenrank"] = np.array(tr)
    wrong["tokenrank"] = {"right eigenvector": np.array(trw)}

    hn, margin = [], []
    thr = []
    for l in range(L):
        n = out["norms"][l]
        med = np.median(n[Np:])
        thr.append(med + 3 * np.median(np.abs(n[Np:] - med)))
    for l in range(L):
        n = out["norms"][l]
        toks = sorted((t for t in range(T) if n[t] > thr[l]), key=lambda t: (-n[t], t))
        rows = []
        for t in toks:
            l0 = l
            while l0 > 0 and out["norms"][l0 - 1][t] > thr[l0 - 1]:
                l0 -= 1
            rows.append((t, l0))
        hn.append(rows)
        margin.append([abs(out["norms"][k] - thr[k]) / thr[k] for k in range(l + 1)])
    out["high_norm"] = (hn, margin)

    head = cls_head(ref, w)
    if head is not None:
        lens = [torch.softmax(ref.head(zl[None], torch.float64), -1) for zl in z]
        out["lens"] = torch.stack(lens).numpy()
        D = z[0].shape[-1]
        fcn = (w["fc_norm.weight"], w["fc_norm.bias"]) if "fc_norm.weight" in w else None
        cat = head[0].shape[1] == 2 * D

        def lens_in(fl, t0=Np):
            """tokens t0.. in the place of what the head pools (vit.h vit_logit_lens)"""
            t = fl[t0:]
            if cat:  # [CLS ; token]
                return torch.cat([fl[0].expand_as(t), t], dim=-1)
            return F.layer_norm(t, (D,), *fcn, ref.eps) if fcn else t

        lg = [F.linear(lens_in(fl), head[0], head[1]) for fl in f]
        out["lens_map"] = torch.stack([torch.softmax(g, -1)[:, top] for g in lg]).numpy()
        if fcn or cat:  # pooled heads: the lens of token 0 is the layer's pooled head
            wrong["lens"] = {"a pooled head's lens from the CLS token alone": torch.stack(
                [torch.softmax(F.linear(lens_in(fl, 0)[0], head[0], head[1]), -1)
                 for fl in f]).numpy()}
        if fcn:
            wrong["lens_map"] = {"a patch without fc_norm": torch.stack(
                [torch.softmax(F.linear(fl[Np:], head[0], head[1]), -1)[:, top] for fl in f]).numpy()}
        if cat:
            wrong["lens_map"] = {"a patch beside zeros, not the CLS": torch.stack(
                [torch.softmax(F.linear(torch.cat([torch.zeros_like(fl[Np:]), fl[Np:]], -1),
                                        head[0], head[1]), -1)[:, top] for fl in f]).numpy()}
        wrong.setdefault("lens_map", {})["no final norm"] = (torch.stack(
            [torch.softmax(F.linear(lens_in(zl), head[0], head[1]), -1)[:, top] for zl in z]).numpy())
        if ref.Np > 1 and any(k in w for k in ("head_dist.weight", "cls_classifier.weight")):
            wrong["lens"] = {"CLS head alone": torch.stack(
                [torch.softmax(F.linear(fl[0], head[0], head[1]), -1) for fl in f]).numpy()}
    return out, wrong


def rel(e, r):
    """max over layers of max |e - r| / max |r| within the layer."""
    e, r = np.asarray(e, np.float64), np.asarray(r, np.float64)
    return max(float(np.abs(e[l] - r[l]).max() / max(np.abs(r[l]).max(), 1e-30))
               for l in range(r.shape[0]))


def check_high_norm(rep, label, got, ref_hn):
    rows, margins = ref_hn
    for l, want in enumerate(rows):
        g = [(int(t), int(f)) for t, f in got[l] if t >= 0]
        if g == want:
            continue
        # tokens at a threshold (relative margin < 1e-4) may go either way
        near = {t for k in range(l + 1) for t in np.nonzero(margins[l][k] < 1e-4)[0]}
        gs = {t for t, _ in g} ^ {t for t, _ in want}
        ok = gs <= near and all(dict(want).get(t, f) == f or t in near for t, f in g)
        rep.check(ok, f"{label}: high-norm tokens of layer {l}: engine {g}, reference {want}")


def compare_views(rep, label, res, cfg, ref, x, tol, worst, missed):
    out, wrong = reference_views(ref, x, cfg["top5"][0] if cfg.get("top5") else 0)
    L = len(out["tokens"])
    errs = {}
    errs["tokens"] = rel(res["tokens"][1:], out["tokens"])
    for k in ("features", "norms", "similarity", "tokenrank", "lens", "lens_map"):
        if k not in out:
            rep.check(k not in res, f"{label}: {k}.npy written for a model without head")
            continue
        rep.check(res[k].shape == out[k].shape,
                  f"{label}: {k} shape {res[k].shape}, expected {out[k].shape}")
        errs[k] = rel(res[k], out[k])
    check_high_norm(rep, label, res["high_norm"], out["high_norm"])
    for k, e in errs.items():
        worst[k] = max(worst.get(k, 0.0), e)
        rep.check(e <= tol, f"{label}: {k} error {e:.2e} > {tol:.0e}")
    for k, ws in wrong.items():
        for what, w in ws.items():
            d = rel(res[k], w)
            missed.setdefault((k, what), []).append(d)
    print(f"  {label}: L={L} " + " ".join(f"{k} {e:.1e}" for k, e in errs.items()))


def case(rep, label, dump, dargs, work, ref, x, tol, worst, missed, recompute=True):
    res, cfg = run_dump(dump, dargs + ["--tokens", "--out", work / "keep"])
    compare_views(rep, label, res, cfg, ref, x, tol, worst, missed)
    if recompute:
        res2, _ = run_dump(dump, dargs + ["--tokens", "--att", "recompute", "--out",
                                          work / "recompute"])
        for k, v in res.items():
            if k == "att":
                continue
            rep.check(k in res2 and np.array_equal(v, res2[k]),
                      f"{label}: {k} differs with the attention recomputed")


def finish(rep, worst, missed, tol):
    print("\nmax errors: " + ", ".join(f"{k} {e:.1e}" for k, e in worst.items()))
    for (k, what), ds in missed.items():
        print(f"control {k} / {what}: largest distance {max(ds):.2e}")
        rep.check(max(ds) > WRONG * tol,
                  f"control {k} / {what}: never further than {WRONG} x {tol:.0e} from the engine")


def test_families(args, rep):
    worst, missed = {}, {}
    for name in list(FAMILIES) + ["cls_mean_reg4_timm"]:  # and [CLS ; mean] (test_backward)
        f, ref, dargs, d, x = family_model(name, args.work)
        case(rep, name, args.dump, dargs, d / "tokens", ref, x, TOL["random"], worst, missed)
    for i, m in enumerate(MODELS):
        ref, dargs, d, x = random_model(i, m, args.work)
        case(rep, m["name"], args.dump, dargs, d / "tokens", ref, x, TOL["random"], worst, missed,
             recompute=False)
    finish(rep, worst, missed, TOL["random"])


def test_deit(args, rep):
    setup = deit_setup(args.shared)
    if setup is None:
        print(f"skip: no DeiT-Tiny weights or photos under '{args.shared}'")
        return 77
    model, photos, _ = setup
    ref = Ref(reference.load_safetensors(model), 3)
    worst, missed = {}, {}
    for photo in photos:
        work = Path(args.work) / photo.stem
        dargs = ["--model", model, "--image", photo]
        res, cfg = run_dump(args.dump, dargs + ["--tokens", "--out", work / "keep"])
        x = torch.from_numpy(res["input"])
        compare_views(rep, photo.name, res, cfg, ref, x, TOL["deit"], worst, missed)
    finish(rep, worst, missed, TOL["deit"])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["families", "deit"])
    ap.add_argument("--dump")
    ap.add_argument("--work", default="/tmp/test_tokens")
    ap.add_argument("--shared", default="")
    args = ap.parse_args()
    rep = Report()
    rc = test_families(args, rep) if args.what == "families" else test_deit(args, rep)
    if rc == 77:
        sys.exit(77)
    sys.exit(rep.exit_code())


if __name__ == "__main__":
    main()
