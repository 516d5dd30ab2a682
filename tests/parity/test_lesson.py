"""test_lesson.py - the lesson's numbers (vit.h, "The lesson"; vit_dump --lesson) against
a PyTorch reference written the way the class notebooks (../shared/seeds) build a ViT:
the image cut into patches with an explicit unfold, the patch embedding a matmul, the
CLS token prepended and the position embedding added, a hand-written LayerNorm, per-head
slices of q, k and v, the scores q k^T / sqrt(d_h), an explicit softmax, the weighted
sum of values, heads concatenated and projected, the residual, the MLP with GELU, the
second residual, the final LayerNorm of the CLS token and the head. float64 throughout.

    /usr/bin/python3 test_lesson.py family NAME --dump vit_dump --work DIR [--control C]
    /usr/bin/python3 test_lesson.py variant interv|act|heads --dump vit_dump --work DIR [--control dh]
    /usr/bin/python3 test_lesson.py deit --dump vit_dump --work DIR --shared SHARED [--control C]
    /usr/bin/python3 test_lesson.py export --vitlens vitlens --work DIR [--shared SHARED]

family: a random tiny model of each family the engine loads (test_families.py's
        FAMILIES: timm and transformers names, distillation and register tokens,
        LayerScale, resampled position embeddings), two selections each (the last
        block at a patch token, block 0 at the CLS token), and once with the attention
        recomputed rather than kept.
variant: the lesson on a run a user changed. interv: a distilled DeiT whose lesson block
        has another head ablated, a temperature (the scores shown are those the softmax
        reads, q.k / sqrt(d_h) / tau) and two patches dropped (their columns masked in
        every layer); act: a --layout of timm's names whose MLP uses QuickGELU; heads: a
        notebook's per-head Linear(D, Dh) lists with Dh = 20 != D / H (D 48, H 3) as .pth,
        scores / sqrt(D): q, k, v [T, Dh], the heads concatenated [A = H * Dh].
deit:   DeiT-Tiny (SHARED/models/deit-tiny) on chelsea.png (exit 77 without SHARED).
export: `vitlens --lesson-export` on the built-in model (its first demo scene) and on
        DeiT-Tiny (skipped without SHARED): the same comparisons on the .npy files it
        writes (the reference's input from torchvision's eval transform, bit-exact with
        the engine's, tests/parity test_parity.py), and its steps.json, lesson.md and
        PNGs: the table's steps (lesson_table.py), every file listed, every shape in the seeds' notation.

Every step is compared within 1e-5 of its largest |value| (REL_TOL). The block's steps
are computed by the reference from the engine's input to that block (its tokens before
the block, lesson_block_in), so that each step is checked on its own rather than after
the rounding of the blocks below; that input itself is checked against the reference's
own forward pass (within test_parity's attention tolerance for DeiT-Tiny's deep layers).
Bit for bit: the step's softmax row equals vit_map_attention and vit_prefix_share (the
explorer's numbers), and the block's output equals the forward pass's tokens wherever
the run computed them.

--control sqrtD:     the reference scales the scores by 1/sqrt(D), as one of the seeds
                     does, instead of 1/sqrt(d_h): the test must fail.
--control dh:        the reference scales the scores by 1/sqrt(D / H), a loader that
                     assumes D / H-sized heads (variant heads: the model divides by sqrt(D)).
--control transpose: the reference flattens the patches column-major (the grid
                     transposed) instead of row-major: the test must fail.
--control mislabel:  (export) the LayerNorm step's after-row read with the before-row's
                     statistics, as its drawing had them (issue 38): the test must fail.
With --control the run exits 0 only when the comparisons failed on every selection
(parity_*_control_* pattern: a crash still fails it).
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lesson_table  # noqa: E402
import reference  # noqa: E402
from test_families import input_size, random_timm, spec, write_family  # noqa: E402
from test_parity import Report, run_dump  # noqa: E402

REL_TOL = 1e-5  # max |engine - reference| / max |reference|, per step
STREAM_TOL = {"random": 1e-5, "deit": 5e-5}  # the block's input against a whole reference pass


def layer_norm(x, w, b, eps):
    """torch.nn.LayerNorm written out: biased variance."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b, mean, torch.sqrt(var + eps)


def embed(w, x, n_heads, eps, pos_grid=None, control=None):
    """Steps 1-3: patches by unfold (row-major, as a stride-P convolution flattens
    them), the patch embedding as a matmul, [CLS, dist?, reg?] + position embedding.
    Returns a dict of the steps' tensors."""
    D = w["cls_token"].shape[-1]
    Wp = w["patch_embed.proj.weight"]
    P = Wp.shape[-1]
    _, Sh, Sw = x.shape
    gh, gw = Sh // P, Sw // P
    patches = F.unfold(x[None], kernel_size=P, stride=P)[0].T  # [N, 3*P*P]
    if control == "transpose":  # column-major: the grid transposed
        patches = patches.reshape(gh, gw, -1).transpose(0, 1).reshape(gh * gw, -1)
    emb = patches @ Wp.reshape(D, -1).T + w["patch_embed.proj.bias"]  # [N, D]
    prefix = [w["cls_token"][0]] + [w[k][0] for k in ("dist_token", "reg_token") if k in w]
    Np = sum(t.shape[0] for t in prefix)
    npos, gh0, gw0 = reference.pos_layout(w, Np, pos_grid)
    pos = reference.resample_abs_pos_embed(w["pos_embed"], (gh, gw), (gh0, gw0), npos)[0]
    if npos:
        tokens = torch.cat(prefix + [emb]) + pos
    else:  # no_embed_class: registers and the CLS token have no position embedding
        tokens = torch.cat(prefix + [emb + pos])
    pg = pos[npos:]
    pg = pg / pg.norm(dim=-1, keepdim=True)
    return dict(patches=patches, emb=emb, tokens=tokens, pos_sim=pg @ pg.T, Np=Np, gh=gh, gw=gw)


ACTS = {"gelu": F.gelu, "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x)}


def block(w, l, x, n_heads, eps, control=None, mods=None):
    """Block l on tokens x [T, D], every step kept. mods (the run's interventions and the
    layout's switches, vit.h "Interventions"): "tau" {layer: temperature}, "ablate"
    {layer: heads}, "drop" [tokens], "act" the MLP's activation, "head_dim" Dh when it is not
    D / H (a notebook's per-head Linear(D, Dh): q, k, v [T, H * Dh]), "scale" the scores'
    scale when it is not 1/sqrt(Dh) (a notebook's 1/sqrt(D))."""
    T, D = x.shape
    mods = mods or {}
    Dh = mods.get("head_dim", D // n_heads)
    A = n_heads * Dh  # the attention's width
    mods = mods or {}
    tau = mods.get("tau", {}).get(l, 1.0)
    ablated = mods.get("ablate", {}).get(l, ())
    drop = list(mods.get("drop", ()))
    b = f"blocks.{l}."
    ls1, ls2 = (w.get(b + k, torch.ones(D, dtype=x.dtype)) for k in ("ls1.gamma", "ls2.gamma"))
    s = {}
    s["xn1"], s["mean"], s["std"] = layer_norm(x, w[b + "norm1.weight"], w[b + "norm1.bias"], eps)
    qkv = s["xn1"] @ w[b + "attn.qkv.weight"].T  # [T, 3A]
    if b + "attn.qkv.bias" in w:
        qkv = qkv + w[b + "attn.qkv.bias"]
    q, k, v = qkv[:, :A], qkv[:, A:2 * A], qkv[:, 2 * A:]
    scale = (D ** -0.5 if control == "sqrtD" else (D // n_heads) ** -0.5 if control == "dh"
             else mods.get("scale", Dh ** -0.5))
    s["q"], s["k"], s["v"], s["scores"], s["probs"], outs = [], [], [], [], [], []
    for h in range(n_heads):
        qh, kh, vh = (t[:, h * Dh:(h + 1) * Dh] for t in (q, k, v))  # [T, Dh]
        scores = qh @ kh.T * scale  # [T, T]
        sm = scores / tau  # a temperature divides the scores before the softmax
        if drop:  # a dropped patch: nothing attends to it, and its own row is 0
            sm = sm.clone()
            sm[:, drop] = float("-inf")
        e = torch.exp(sm - sm.max(-1, keepdim=True).values)
        probs = e / e.sum(-1, keepdim=True)
        if drop:
            probs[drop, :] = 0
        # an ablated head: its output is 0 before the projection (transformers' head_mask)
        outs.append(torch.zeros_like(probs @ vh) if h in ablated else probs @ vh)
        # the scores the softmax reads: divided by a temperature; a dropped patch's column
        # is masked in the softmax only (the lesson shows its score)
        for n, t in (("q", qh), ("k", kh), ("v", vh), ("scores", scores / tau), ("probs", probs)):
            s[n].append(t)
    s["heads"] = outs
    s["concat"] = torch.cat(outs, -1)  # [T, A]
    s["proj"] = s["concat"] @ w[b + "attn.proj.weight"].T + w[b + "attn.proj.bias"]
    s["xm"] = x + ls1 * s["proj"]
    xn2, _, _ = layer_norm(s["xm"], w[b + "norm2.weight"], w[b + "norm2.bias"], eps)
    s["hid"] = ACTS[mods.get("act", "gelu")](xn2 @ w[b + "mlp.fc1.weight"].T + w[b + "mlp.fc1.bias"])
    s["mlp"] = s["hid"] @ w[b + "mlp.fc2.weight"].T + w[b + "mlp.fc2.bias"]
    s["out"] = s["xm"] + ls2 * s["mlp"]
    return s


def head(w, x, eps):
    """The final LayerNorm of the CLS token and the head (distilled: the mean of both);
    timm's average-pooled head (fc_norm.*, no final norm): fc_norm of the mean of the patch
    tokens, which the lesson's head step shows in the CLS's place."""
    if "fc_norm.weight" in w:
        Np = sum(w[k].shape[1] for k in ("cls_token", "dist_token", "reg_token") if k in w)
        pn, _, _ = layer_norm(x[Np:].mean(0, keepdim=True), w["fc_norm.weight"], w["fc_norm.bias"], eps)
        logits = pn[0] @ w["head.weight"].T + w["head.bias"]
        e = torch.exp(logits - logits.max())
        return pn[0], logits, e / e.sum()
    xn, _, _ = layer_norm(x[:2], w["norm.weight"], w["norm.bias"], eps)
    logits = xn[0] @ w["head.weight"].T + w["head.bias"]
    if "head_dist.weight" in w:
        logits = (logits + xn[1] @ w["head_dist.weight"].T + w["head_dist.bias"]) / 2
    e = torch.exp(logits - logits.max())
    return xn[0], logits, e / e.sum()


def filters_pca(w, k):
    """The patch embedding's filters [D, 3PP], centred, their top-k principal
    components (the SVD of the centred filters: right singular vectors, variance the
    squared singular values), largest |loading| positive; variance shares."""
    Wf = w["patch_embed.proj.weight"]
    Wf = Wf.reshape(Wf.shape[0], -1)
    Wc = Wf - Wf.mean(0)
    _, sv, vh = torch.linalg.svd(Wc, full_matrices=False)
    evals = sv ** 2
    order = torch.argsort(evals, descending=True)[:k]
    comps = vh[order].clone()
    for c in comps:
        i = int(torch.argmax(c.abs()))
        if c[i] < 0:
            c.neg_()
    return comps, evals[order] / evals.sum(), evals[order]


def check(rep, label, what, eng, ref, tol=REL_TOL):
    eng = np.asarray(eng, dtype=np.float64)
    ref = ref.detach().numpy() if torch.is_tensor(ref) else np.asarray(ref, dtype=np.float64)
    if not rep.check(eng.shape == ref.shape, f"{label}: {what} shape {eng.shape}, expected {ref.shape}"):
        return
    scale = max(float(np.abs(ref).max()), 1e-30)
    d = float(np.abs(eng - ref).max()) / scale
    print(f"  {what:<22} {str(list(eng.shape)):<14} rel. diff {d:.1e}")
    rep.check(d <= tol, f"{label}: {what} differs from the reference by {d:.1e} of its largest value",
              guard=label)


def compare_lesson(rep, label, e, w, x, n_heads, eps, sel, pos_grid=None, control=None, kind="random",
                   mods=None):
    layer, h, t, patch = sel
    w = {k: v.double() for k, v in w.items()}
    x = torch.as_tensor(x).double()
    emb = embed(w, x, n_heads, eps, pos_grid, control)
    Np, gh, gw = emb["Np"], emb["gh"], emb["gw"]
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    # steps 1-3
    check(rep, label, "patch pixels", e["lesson_patch_pixels"].reshape(-1), emb["patches"][patch])
    check(rep, label, "patch embedding", e["lesson_patch_embedding"], emb["emb"][patch])
    check(rep, label, "tokens[0] (+ pos)", e["lesson_stream"][0] if "lesson_stream" in e
          else e["lesson_tokens"][t], emb["tokens"][t])
    check(rep, label, "pos similarity", e["lesson_pos_similarity"].reshape(gh * gw, gh * gw),
          emb["pos_sim"])
    nf = e["lesson_filters"].shape[0]
    rep.check(nf == min(28, D - 1, 3 * P * P), f"{label}: {nf} filter components")
    comps, share, evals = filters_pca(w, nf)
    # a component is defined only up to rotation where two eigenvalues (nearly) tie: compare
    # those whose gap to their neighbours is clear
    gaps = torch.cat([evals[:-1] - evals[1:], evals[-1:]])
    gaps = torch.minimum(gaps, torch.cat([evals[:1], evals[:-1] - evals[1:]]))
    clear = (gaps > 1e-3 * evals[0]).numpy()
    check(rep, label, f"filters ({int(clear.sum())}/{nf})",
          e["lesson_filters"].reshape(nf, -1)[clear], comps[clear])
    check(rep, label, "filter variance share", e["lesson_filters_var"], share)
    # step 4, from the engine's input to block `layer`
    xin = torch.from_numpy(e["lesson_block_in"]).double()
    s = block(w, layer, xin, n_heads, eps, control, mods)
    check(rep, label, "LayerNorm in", e["lesson_ln_in"], xin[t])
    sc = e.get("lesson_scalars")
    if sc is not None:
        check(rep, label, "LayerNorm mean, std", sc[:2], torch.stack([s["mean"][t, 0], s["std"][t, 0]]))
    check(rep, label, "LayerNorm out", e["lesson_ln_out"], s["xn1"][t])
    check(rep, label, "query", e["lesson_query"], s["q"][h][t])
    check(rep, label, "keys", e["lesson_keys"], s["k"][h])
    check(rep, label, "values", e["lesson_values"], s["v"][h])
    check(rep, label, "scores q.k/sqrt(d)", e["lesson_scores"], s["scores"][h][t])
    check(rep, label, "softmax", e["lesson_probs"], s["probs"][h][t])
    check(rep, label, "weighted sum of v", e["lesson_head_out"], s["heads"][h][t])
    check(rep, label, "heads concatenated", e["lesson_concat"], s["concat"][t])
    check(rep, label, "projected", e["lesson_proj"], s["proj"][t])
    check(rep, label, "residual 1", e["lesson_resid1"], s["xm"][t])
    if sc is not None:
        check(rep, label, "|x|, |x'|, |out|", sc[2:5],
              torch.stack([xin[t].norm(), s["xm"][t].norm(), s["out"][t].norm()]))
    check(rep, label, "MLP hidden (GELU)", e["lesson_hidden"], s["hid"][t])
    share_ref = float((s["hid"][t] > 0).double().mean())
    if sc is not None:
        print(f"  GELU share             engine {sc[5]:.4f} reference {share_ref:.4f}")
        rep.check(abs(sc[5] - share_ref) <= 2.0 / s["hid"].shape[1] and sc[5] > 0,
                  f"{label}: GELU share {sc[5]} against {share_ref}")
    check(rep, label, "MLP out", e["lesson_mlp"], s["mlp"][t])
    check(rep, label, "residual 2", e["lesson_out"], s["out"][t])

    # the same numbers as the explorer's, bit for bit (vit_dump; the export has no maps)
    if "lesson_map" in e:
        probs = e["lesson_probs"]
        same = np.array_equal(probs[Np:], e["lesson_map"]) and np.array_equal(probs[:Np], e["lesson_prefix"])
        print(f"  softmax == vit_map_attention + vit_prefix_share bit for bit: {same}")
        rep.check(same, f"{label}: the step's softmax is not the explorer's attention map")
        stream = e["lesson_stream"]
        rep.check(np.array_equal(stream[layer], e["lesson_ln_in"]), f"{label}: block input is not the run's")
        if layer + 1 < stream.shape[0] - 1 or t < Np:  # the rows the forward pass computed
            same = np.array_equal(stream[layer + 1], e["lesson_out"])
            print(f"  block output == the forward pass's tokens bit for bit: {same}")
            rep.check(same, f"{label}: the rerun block's output differs from the forward pass's")
    # the block's input against the reference's own whole pass (the blocks below)
    xr = emb["tokens"]
    for l in range(layer):
        xr = block(w, l, xr, n_heads, eps, mods=mods)["out"]
    check(rep, label, "block input (whole)", e["lesson_block_in"], xr, STREAM_TOL[kind])
    # step 5
    if "head.weight" in w:
        n_layers = sum(1 for k in w if k.startswith("blocks.") and k.endswith(".norm1.weight"))
        for l in range(layer, n_layers):
            xr = block(w, l, xr, n_heads, eps, mods=mods)["out"]
        cls_ref, logits, pr = head(w, xr, eps)
        check(rep, label, "final LayerNorm (CLS)", e["lesson_cls_norm"], cls_ref, STREAM_TOL[kind])
        check(rep, label, "logits", e["logits"], logits, STREAM_TOL[kind])
        check(rep, label, "softmax (classes)", e["probs"], pr, STREAM_TOL[kind])
        top_e = np.argsort(-e["probs"], kind="stable")[:5]
        top_r = torch.argsort(pr, descending=True, stable=True)[:5].numpy()
        rep.check(list(top_e) == list(top_r), f"{label}: top-5 {list(top_e)}, reference {list(top_r)}")
    else:
        rep.check("lesson_cls_norm" not in e, f"{label}: a head step for a model without head")


# --lesson-export's files (without their NN_ step number) -> vit_dump's names
EXPORT_NAMES = {
    "patches": "lesson_patch_pixels", "embedding": "lesson_patch_embedding",
    "filters": "lesson_filters", "filters_variance": "lesson_filters_var",
    "tokens": "lesson_tokens", "position": "lesson_pos_similarity",
    "layernorm_in": "lesson_ln_in", "layernorm_normalised": "lesson_ln_hat",
    "layernorm": "lesson_ln_out",
    "layernorm_stream": "lesson_block_in", "query": "lesson_query", "keys": "lesson_keys",
    "scores": "lesson_scores", "softmax": "lesson_probs", "weighted": "lesson_head_out",
    "weighted_values": "lesson_values", "projection_concat": "lesson_concat",
    "projection": "lesson_proj", "residual": "lesson_resid1", "mlp": "lesson_hidden",
    "mlp-out": "lesson_mlp", "residual2": "lesson_out", "head_cls_norm": "lesson_cls_norm",
    "head_logits": "logits", "head": "probs",
}
# the steps of a model with a head and neither RoPE nor a MAP head: the table's
# (app/view/lessonfile.c LESSON_STEP_INFO, lesson_table.py)
STEP_NAMES = lesson_table.steps({"head"})


def run_export(rep, label, vitlens, out, model_args, image, sel1):
    """vitlens --lesson-export into out; its arrays under vit_dump's names, steps.json."""
    shutil.rmtree(out, ignore_errors=True)
    layer, head, r, c = sel1
    cmd = [vitlens, "--lesson-export", out, "--layer", str(layer), "--head", str(head),
           "--patch", f"{r},{c}"] + model_args + [image]
    p = subprocess.run([str(a) for a in cmd], capture_output=True, text=True)
    print(f"  $ {' '.join(map(str, cmd))}\n  {p.stdout.strip()}")
    if not rep.check(p.returncode == 0, f"{label}: vitlens exited {p.returncode}: {p.stderr}"):
        return None, None
    steps = json.loads((out / "steps.json").read_text())
    names = [st["name"] for st in steps["steps"]]
    rep.check(names == STEP_NAMES, f"{label}: steps {names}")
    md = (out / "lesson.md").read_text()
    e = {}
    for st in steps["steps"]:
        rep.check((out / st["picture"]).exists() and st["picture"] in md,
                  f"{label}: {st['picture']} missing or not in lesson.md")
        rep.check(st["caption"] in md, f"{label}: the caption of {st['name']} not in lesson.md")
        for a in st["arrays"]:
            x = np.load(out / a["file"])
            rep.check(x.dtype == np.float32, f"{label}: {a['file']} is {x.dtype}")
            want = "[" + ", ".join(map(str, x.shape)) + "]"
            rep.check(a["shape"] == want, f"{label}: {a['file']}: steps.json says {a['shape']}, file {want}")
            e[EXPORT_NAMES[a["file"][3:-4]]] = x
        own = [a["shape"] for a in st["arrays"] if a["file"][:-4] == f"{STEP_NAMES.index(st['name']) + 1:02d}_{st['name']}"]
        rep.check(not own or st["caption"].endswith(own[0]),
                  f"{label}: caption of {st['name']} does not end with its shape {own}")
    print(f"  {len(names)} steps, {len(e)} arrays, captions in lesson.md")
    return e, steps


def check_layernorm_step(rep, label, e, steps, w, layer, control=None, dumped=None):
    """The LayerNorm step (issue 38's trial: its caption and large label gave the statistics
    before the norm beside the output after gamma and beta): three rows, x, x hat and
    gamma . x hat + beta, each exported (.npy) with the label drawn beside it (steps.json
    "label", the caption's text too) that must be numpy's mean / std of that very array;
    x hat has mean ~0, std ~1; gamma . x hat + beta is the engine's LayerNorm output (the
    exported row, and vit_dump's lesson_ln_out when dumped, vit_dump --lesson's outputs).
    --control mislabel: the after-row read with the before-row's label, as the old
    drawing had it: the label check must fail."""
    st = next(s for s in steps["steps"] if s["name"] == "layernorm")
    rows = [a for a in st["arrays"] if "label" in a]
    parts = [a["file"][3:-4] for a in rows]
    if not rep.check(parts == ["layernorm_in", "layernorm_normalised", "layernorm"],
                     f"{label}: the LayerNorm step's labelled rows {parts}", guard=label):
        return
    texts = [a["label"] for a in rows]
    if control == "mislabel":
        texts[2] = texts[0]
    for a, txt in zip(rows, texts):
        x = e[EXPORT_NAMES[a["file"][3:-4]]].astype(np.float64)
        m = re.fullmatch(r"mean (-?[0-9.]+)   std ([0-9.]+)", txt)
        ok = m is not None and abs(float(m[1]) - x.mean()) <= 6e-4 and abs(float(m[2]) - x.std()) <= 6e-4
        print(f"  {a['file']:<28} label '{txt}', numpy mean {x.mean():.4f} std {x.std():.4f}")
        rep.check(ok, f"{label}: {a['file']}'s label '{txt}' is not its mean {x.mean():.4f}, std "
                  f"{x.std():.4f}", guard=label)
        rep.check(a["label"] in st["caption"], f"{label}: the caption lacks {a['file']}'s '{a['label']}'")
    xhat = e["lesson_ln_hat"].astype(np.float64)
    rep.check(abs(xhat.mean()) < 1e-5 and abs(xhat.std() - 1.0) < 1e-3,
              f"{label}: x hat has mean {xhat.mean():.2e}, std {xhat.std():.6f}")
    b = f"blocks.{layer}.norm1."
    if b + "weight" in w:
        g, beta = (np.asarray(w[b + k], np.float64) for k in ("weight", "bias"))
        for what, out in (("exported", e["lesson_ln_out"]),
                          ("vit_dump's", None if dumped is None else dumped["lesson_ln_out"])):
            if out is None:
                continue
            out = out.astype(np.float64)
            d = float(np.abs(g * xhat + beta - out).max()) / max(float(np.abs(out).max()), 1e-30)
            print(f"  gamma . x hat + beta vs the {what} LayerNorm output: rel. diff {d:.1e}")
            rep.check(d <= 1e-5, f"{label}: gamma . x hat + beta differs from the {what} "
                      f"LayerNorm output by {d:.1e}")


def test_export(args, rep):
    from PIL import Image
    work = Path(args.work)
    root = Path(__file__).resolve().parents[2]
    # the built-in model on its first demo scene, nothing downloaded
    default = root / "assets/default"
    demo = sorted((default / "demo").glob("*.png"))[0]
    cfg = json.loads((default / "config.json").read_text())
    pc = cfg["pretrained_cfg"]
    w = reference.load_safetensors(default / "model.safetensors")
    H = cfg["num_heads"]
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    S = pc["input_size"][1]
    g = S // P
    sel1 = (2, H, g // 2, g // 3)  # layer, head, row, column from 1, as on screen
    label = f"built-in model, {demo.name}, block {sel1[0]} head {sel1[1]} patch ({sel1[2]}, {sel1[3]})"
    print(f"\n[{label}]")
    e, steps = run_export(rep, label, args.vitlens, work / "export_default", [], demo, sel1)
    if e is not None:
        tr, _ = reference.eval_transform(S, pc["crop_pct"], pc["mean"], pc["std"])
        x = tr(Image.open(demo).convert("RGB"))
        patch = (sel1[2] - 1) * g + sel1[3] - 1
        compare_lesson(rep, label, e, w, x, H, 1e-6, (sel1[0] - 1, sel1[1] - 1, 1 + patch, patch),
                       control=args.control)
        dumped = None
        if args.dump:  # the engine's LayerNorm output for the same selection, by vit_dump
            dumped, _ = run_dump(args.dump, ["--model", default / "model.safetensors", "--image", demo,
                                             "--out", work / "dump_default", "--lesson",
                                             f"{sel1[0] - 1},{sel1[1] - 1},{1 + patch},{patch}"])
        check_layernorm_step(rep, label, e, steps, w, sel1[0] - 1, args.control, dumped)
        rep.check(steps["steps"][-1]["caption"].startswith("Final LayerNorm"), f"{label}: head step")
    # bad input: a layer out of range is refused with a message naming the model's size
    p = subprocess.run([str(args.vitlens), "--lesson-export", str(work / "export_bad"), "--layer", "99",
                        str(demo)], capture_output=True, text=True)
    print(f"  --layer 99: exit {p.returncode}: {p.stderr.strip()}")
    rep.check(p.returncode == 1 and "layers" in p.stderr and "99" in p.stderr,
              f"built-in model: --layer 99 gave exit {p.returncode}: {p.stderr}")
    # a backbone (no head): the last step says so, no head arrays
    f = spec("dino_timm_p8")
    d = work / "export_backbone_model"
    write_family(f, d, seed=3)
    img = work / "backbone.png"
    Image.fromarray((np.random.default_rng(0).random((60, 70, 3)) * 255).astype(np.uint8)).save(img)
    label = "backbone (dino_timm_p8, random weights)"
    print(f"\n[{label}]")
    e, steps = run_export(rep, label, args.vitlens, work / "export_backbone",
                          ["--model", d / "model.safetensors"], img, (1, 1, 1, 1))
    if e is not None:
        check_layernorm_step(rep, label, e, steps, reference.load_safetensors(d / "model.safetensors"),
                             0, args.control)
        last = steps["steps"][-1]
        print(f"  head step: {last['caption']}")
        rep.check("no classification head" in last["caption"] and not last["arrays"],
                  f"{label}: the head step of a backbone: {last}")
    # DeiT-Tiny
    model = Path(args.shared or "") / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    photo = Path(args.shared or "") / "images/chelsea.png"
    if not args.shared or not model.exists() or not photo.exists():
        print("DeiT-Tiny: skipped (no SHARED)")
        return None
    sel1 = (6, 2, 6, 10)
    label = f"DeiT-Tiny chelsea.png, block 6 head 2 patch (6, 10)"
    print(f"\n[{label}]")
    e, steps = run_export(rep, label, args.vitlens, work / "export_deit", ["--model", model], photo, sel1)
    if e is not None:
        tr, _ = reference.eval_transform(224, 0.875)
        x = tr(Image.open(photo).convert("RGB"))
        patch = 5 * 14 + 9
        wd = reference.load_safetensors(model)
        compare_lesson(rep, label, e, wd, x, 3, 1e-6, (5, 1, 1 + patch, patch), control=args.control,
                       kind="deit")
        check_layernorm_step(rep, label, e, steps, wd, 5, args.control)
    return None


def timm_weights(f, seed):
    """The family's model in timm's names (write_family's first draw, before to_hf);
    transformers' DeiTForImageClassification has no distillation head (to_hf drops it)."""
    w = random_timm(f, torch.Generator().manual_seed(seed))
    if f["hf"] == "DeiTForImageClassification":
        w = {k: v for k, v in w.items() if not k.startswith("head_dist.")}
    return w


def test_family(name, args, rep):
    f = spec(name)
    seed = sum(map(ord, name))
    d = Path(args.work) / name
    write_family(f, d, seed=seed)
    w = timm_weights(f, seed)
    Sh, Sw = input_size(f)
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    gh, gw = Sh // f["P"], Sw // f["P"]
    Np, N = 1 + f["dist"] + f["R"], gh * gw
    eps = f["eps"] or 1e-6
    r, c = gh // 3, (2 * gw) // 3  # not on the diagonal: a transposed order moves it
    sels = [(f["L"] - 1, f["H"] - 1, Np + r * gw + c, r * gw + c, "keep"),
            (0, 0, 0, N - 1 - gw // 2, "keep"),
            (f["L"] - 1, 0, Np + N - 2, (gh - 1) * gw + 1, "recompute")]
    for layer, h, t, patch, att in sels:
        label = f"{name} block {layer} head {h} token {t} patch {patch} ({att})"
        print(f"\n[{label}]")
        args_d = ["--model", d / "model.safetensors", "--input", d / "input.f32", "--out", d / "out",
                  "--lesson", f"{layer},{h},{t},{patch}", "--att", att]
        if f["size"]:
            args_d += ["--size", f"{f['size'][0]}x{f['size'][1]}"]
        e, cfg = run_dump(args.dump, args_d)
        compare_lesson(rep, label, e, w, x, f["H"], eps, (layer, h, t, patch),
                       pos_grid=f["grid0"], control=args.control)


def test_variant(name, args, rep):
    """The lesson on a run a user changed: "interv" the interventions at the lesson's block
    (another head ablated, a temperature, two patches dropped), "act" a layout whose MLP
    uses QuickGELU (a user's --layout: timm's names, the activation switched)."""
    fam = {"interv": "deit_distilled_timm", "act": "vit_timm"}[name]
    f = spec(fam)
    seed = sum(map(ord, fam))
    d = Path(args.work) / f"variant_{name}"
    write_family(f, d, seed=seed)
    w = timm_weights(f, seed)
    Sh, Sw = input_size(f)
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    gh, gw = Sh // f["P"], Sw // f["P"]
    Np, N = 1 + f["dist"] + f["R"], gh * gw
    layer, h, patch = f["L"] // 2, f["H"] - 1, (gh // 2) * gw + gw // 3
    t = Np + patch
    extra, mods = [], {}
    if name == "interv":
        other, drops = 0, [patch + 1, N - 1]
        extra = ["--ablate", f"{layer}:{other}", "--temp", f"{layer}:1.7",
                 "--drop", ",".join(map(str, drops))]
        mods = {"ablate": {layer: (other,)}, "tau": {layer: 1.7}, "drop": [Np + p for p in drops]}
    else:
        roles = [r for r in w if not r.startswith("blocks.") or r.startswith("blocks.0.")]
        lay = {"name": "timm-quick-gelu", "tensors": {r.replace("blocks.0.", "blocks.{l}."):
                                                       r.replace("blocks.0.", "blocks.{l}.")
                                                       for r in roles},
               "mlp_activation": "quick_gelu", "layer_norm_eps": f["eps"] or 1e-6}
        (d / "layout.json").write_text(json.dumps(lay, indent=1))
        extra = ["--layout", d / "layout.json"]
        mods = {"act": "quick_gelu"}
    label = f"{fam} ({name}: {' '.join(map(str, extra))}) block {layer} head {h} token {t}"
    print(f"\n[{label}]")
    e, cfg = run_dump(args.dump, ["--model", d / "model.safetensors", "--input", d / "input.f32",
                                  "--out", d / "out", "--lesson", f"{layer},{h},{t},{patch}", *extra])
    compare_lesson(rep, label, e, w, x, f["H"], f["eps"] or 1e-6, (layer, h, t, patch),
                   pos_grid=f["grid0"], control=args.control, mods=mods)
    if name == "interv":  # the ablated head's columns of the concatenation are 0
        Dh = w["cls_token"].shape[-1] // f["H"]
        rep.check(not e["lesson_concat"][:Dh].any(), f"{label}: the ablated head's output is not 0")


def notebook_as_timm(sd, L):
    """A notebook's per-head state dict (test_pth.py's NotebookHeads) in timm's names, the
    heads' query, key, value concatenated into qkv [3A, D], for the reference."""
    w = {"cls_token": sd["class_embedding"], "pos_embed": sd["position_embedding"],
         "patch_embed.proj.weight": sd["patch_embedding.conv.weight"],
         "patch_embed.proj.bias": sd["patch_embedding.conv.bias"],
         "norm.weight": sd["layer_norm.weight"], "norm.bias": sd["layer_norm.bias"],
         "head.weight": sd["mlp_head.weight"], "head.bias": sd["mlp_head.bias"]}
    for l in range(L):
        b, n = f"blocks.{l}.", f"blocks.{l}."
        heads = sorted({int(k.split(".")[4]) for k in sd if k.startswith(b + "attn.heads.")})
        w[n + "attn.qkv.weight"] = torch.cat([sd[f"{b}attn.heads.{h}.{r}.weight"]
                                              for r in ("query", "key", "value") for h in heads])
        for mine, theirs in (("norm1", "ln1"), ("norm2", "ln2"), ("attn.proj", "attn.proj"),
                             ("mlp.fc1", "ffn.0"), ("mlp.fc2", "ffn.2")):
            for p in ("weight", "bias"):
                w[f"{n}{mine}.{p}"] = sd[f"{b}{theirs}.{p}"]
    return w


def test_heads(args, rep):
    """The lesson on a notebook's ViT whose heads are not D/H wide (test_pth.py's
    NotebookHeads, per-head Linear(D, Dh), Dh = 20 for D = 48, H = 3, no q/k/v bias, scores
    / sqrt(D)), saved as .pth: the query, keys, values [T, Dh], the concatenation [A = 60]."""
    import test_pth
    D, H, Dh, L, S, P = 48, 3, 20, 2, 32, 8
    torch.manual_seed(5)
    m = test_pth.NotebookHeads(S=S, P=P, D=D, H=H, F_=96, L=L, C=5, hs=Dh).eval()
    d = Path(args.work) / "variant_heads"
    d.mkdir(parents=True, exist_ok=True)
    torch.save(m.state_dict(), d / "model.pth")
    w = notebook_as_timm(m.state_dict(), L)
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    g = S // P
    mods = {"head_dim": Dh, "scale": D ** -0.5}
    for layer, h, patch in ((L - 1, H - 1, (g // 2) * g + g // 3), (0, 1, g * g - 2)):
        t = 1 + patch
        label = f"notebook heads Dh {Dh} (D {D}, H {H}) block {layer} head {h} token {t}"
        print(f"\n[{label}]")
        e, cfg = run_dump(args.dump, ["--model", d / "model.pth", "--input", d / "input.f32",
                                      "--out", d / "out", "--lesson", f"{layer},{h},{t},{patch}"])
        rep.check(cfg.get("head_dim", Dh) == Dh and e["lesson_query"].shape == (Dh,)
                  and e["lesson_concat"].shape == (H * Dh,),
                  f"{label}: query {e['lesson_query'].shape}, concat {e['lesson_concat'].shape}")
        compare_lesson(rep, label, e, w, x, H, 1e-5, (layer, h, t, patch), control=args.control,
                       mods=mods)


def test_deit(args, rep):
    shared = Path(args.shared)
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    photo = shared / "images/chelsea.png"
    if not model.exists() or not photo.exists():
        print(f"skip: no DeiT-Tiny weights or chelsea.png under {shared}")
        return 77
    w = reference.load_safetensors(model)
    layer, h, r, c = 5, 2, 5, 9
    t, patch = 1 + r * 14 + c, r * 14 + c
    label = f"DeiT-Tiny chelsea.png block {layer} head {h} token {t} patch ({r}, {c})"
    print(f"\n[{label}]")
    e, cfg = run_dump(args.dump, ["--model", model, "--image", photo, "--out", Path(args.work) / "deit",
                                  "--lesson", f"{layer},{h},{t},{patch}"])
    compare_lesson(rep, label, e, w, e["input"], 3, 1e-6, (layer, h, t, patch), control=args.control,
                   kind="deit")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["family", "variant", "deit", "export"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump")
    ap.add_argument("--vitlens")
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared")
    ap.add_argument("--control", choices=["sqrtD", "transpose", "dh", "mislabel"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    rep = Report()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.what == "family":
        test_family(args.name, args, rep)
    elif args.what == "variant":
        if args.name == "heads":
            test_heads(args, rep)
        else:
            test_variant(args.name, args, rep)
    elif args.what == "export":
        test_export(args, rep)
    elif test_deit(args, rep) == 77:
        return 77
    if args.control:  # the negative control: every selection must have been caught
        return rep.control_exit_code(f"the mistake '{args.control}' in the reference")
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
