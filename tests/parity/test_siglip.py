"""test_siglip.py - SigLIP's image tower (Zhai et al. 2023) in Hugging Face transformers'
SiglipModel names (google/siglip-base-patch16-224; SigLIP 2's fixed-resolution checkpoints
are SiglipModel too), through assets/layouts/siglip-hf.json, against a plain-PyTorch float64
reference written in this file from transformers' modeling_siglip.py, on random weights of
the published B/16 image shape.

    /usr/bin/python3 test_siglip.py case      --dump vit_dump --work DIR
    /usr/bin/python3 test_siglip.py control WRONG --dump vit_dump --work DIR
    /usr/bin/python3 test_siglip.py backward  --dump vit_dump --work DIR

case:     every layer's attention within 1e-5 (absolute) of the reference, the MAP head's
          probe attention [H, N] within 1e-5, the image embedding (pooler_output) within
          1e-4 of its largest value; the configuration the engine inferred (no CLS token:
          n_prefix 0, T = N = 196; GELU-tanh; eps 1e-6; squash resize, mean/std 0.5 from
          preprocessor_config.json); the sigmoid scores of a text head (--text-head,
          --logit-bias) against sigmoid(exp(logit_scale) cos + logit_bias), and that they are
          not a softmax (they do not sum to 1); a photo's preprocessing against PIL's
          bicubic squash resize and (x - 0.5) / 0.5.
control:  the same comparisons against a reference with one plausible mistake (CONTROLS):
          passes only when they fail.
backward: the text head's logit y_c = s cos(e, t_c) + b of the MAP head's output e,
          differentiated by vit_backward, against torch.autograd through test_backward.py's
          backward_case (dy_c/dA_l, dy_c/dz_l, dy_c/d input, AttnLRP's with the probe's
          attention held constant), with its planted mistakes, and --att recompute.

The reference follows modeling_siglip.py: SiglipVisionEmbeddings (conv P x P with bias,
flatten, + position_embedding(arange(N)): no CLS, no prefix row), SiglipEncoderLayer
(layer_norm1, SiglipAttention with q/k/v/out_proj and scale Dh ** -0.5, residual,
layer_norm2, SiglipMLP fc1 -> gelu_pytorch_tanh -> fc2, residual), post_layernorm, and
SiglipMultiheadAttentionPoolingHead (probe; nn.MultiheadAttention's packed in_proj q; k; v,
out_proj; residual + mlp(layernorm(.)); [:, 0]), written in torch primitives
(transformers is not installed here).

Shape: SigLIP B/16 image tower, D 768, H 12, F 3072, P 16, 224 px (N = 196), cut to 3 of
its 12 layers (a layer is a layer; the depth only adds rounding) to keep the test's time.
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_parity import Report, check_config, run_dump, write_safetensors  # noqa: E402

ATT_TOL = 1e-5  # every layer's attention and the probe's, max abs
EMB_TOL = 1e-4  # the image embedding, max abs / max |reference|
SCORE_TOL = 1e-5
SHAPE = dict(D=768, H=12, F=3072, P=16, S=224, L=3, C=4)
EPS = 1e-6
LOGIT_SCALE, LOGIT_BIAS = math.log(10.0), -10.0  # SigLIP's init: t' = log 10, b = -10
CONTROLS = {
    "nomlp": "the MAP head without its MLP",
    "residual": "the probe added around the head's attention",
    "gelu": "exact GELU instead of tanh (tower and head)",
    "eps": "LayerNorm eps 1e-5 instead of 1e-6",
    "kqv": "in_proj's rows read as k; q; v",
    "softmax": "softmax over the labels instead of a sigmoid per label",
}

torch.set_num_threads(1)


def make_weights(c, seed):
    g = torch.Generator().manual_seed(seed)
    D, F_, P, L = c["D"], c["F"], c["P"], c["L"]
    N = (c["S"] // P) ** 2

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    # the embedded tokens small (std ~0.04, as trained towers' first tokens are), so that the
    # LayerNorms' eps shows: 1e-5 instead of 1e-6 must fail
    w = {"vision_model.embeddings.patch_embedding.weight": rn(D, 3, P, P, std=0.03 * (3 * P * P) ** -0.5),
         "vision_model.embeddings.patch_embedding.bias": rn(D, std=0.01),
         "vision_model.embeddings.position_embedding.weight": rn(N, D, std=0.03)}

    def ln(name):
        w[name + ".weight"] = 1.0 + rn(D, std=0.1)
        w[name + ".bias"] = rn(D, std=0.05)

    def lin(name, o, i, std=None, bstd=0.02):
        w[name + ".weight"] = rn(o, i, std=std or i ** -0.5)
        w[name + ".bias"] = rn(o, std=bstd)

    for l in range(L):
        b = f"vision_model.encoder.layers.{l}."
        ln(b + "layer_norm1")
        for k, std in (("q", 1.5), ("k", 1.5), ("v", 1.0)):  # peaked enough to see the maps
            lin(b + f"self_attn.{k}_proj", D, D, std * D ** -0.5)
        lin(b + "self_attn.out_proj", D, D)
        ln(b + "layer_norm2")
        lin(b + "mlp.fc1", F_, D)
        lin(b + "mlp.fc2", D, F_)
    ln("vision_model.post_layernorm")
    h = "vision_model.head."
    w[h + "probe"] = rn(1, 1, D)
    # q; k; v blocks with different statistics, so that a k; q; v reading shows
    w[h + "attention.in_proj_weight"] = torch.cat([rn(D, D, std=3 * D ** -0.5), rn(D, D, std=D ** -0.5),
                                                   rn(D, D, std=0.5 * D ** -0.5)])
    w[h + "attention.in_proj_bias"] = torch.cat([rn(D, std=0.5), rn(D, std=0.02), rn(D, std=0.1)])
    lin(h + "attention.out_proj", D, D)
    ln(h + "layernorm")
    lin(h + "mlp.fc1", F_, D)
    lin(h + "mlp.fc2", D, F_)
    w["logit_scale"] = torch.tensor([LOGIT_SCALE], dtype=torch.float64)
    w["logit_bias"] = torch.tensor([LOGIT_BIAS], dtype=torch.float64)
    return w


class SiglipRef:
    """test_backward.py's reference interface: forward(x, dtype, tap, ops) -> (logits [C] or
    None, att [L, H, T, T]) and head(z, dtype, ops); Np = 0 (no CLS token), C labels of the
    text head txt [C, D] (or none). Ops: "layer_norm", "softmax", "gelu"; taps "norm1", "att"
    (each layer's, and the probe's as layer L, so that AttnLRP's CP-LRP holds it constant),
    "tokens". extra holds the last forward's image embedding and probe attention [H, N]."""

    def __init__(self, w, c, txt=None, wrong=None):
        self.w, self.c, self.txt, self.wrong = w, c, txt, wrong
        self.H, self.Np, self.C = c["H"], 0, (0 if txt is None else txt.shape[0])
        self.eps = 1e-5 if wrong == "eps" else EPS
        self._w = {}
        self.extra = {}

    def weights(self, dtype):
        if dtype not in self._w:
            self._w[dtype] = {k: v.to(dtype) for k, v in self.w.items()}
        return self._w[dtype]

    def _ops(self, ops):
        ops = ops or {}
        approx = "none" if self.wrong == "gelu" else "tanh"
        gelu = ops.get("gelu", F.gelu)
        return (ops.get("layer_norm", F.layer_norm), ops.get("softmax", lambda s: s.softmax(dim=-1)),
                lambda u: gelu(u, approximate=approx))

    def head(self, z, dtype=torch.float64, ops=None, tap=lambda n, l, t: t):
        """post_layernorm, the MAP head, then the text head: logits [C] (None without one)."""
        ln_op, _, act = self._ops(ops)
        w, c, wrong = self.weights(dtype), self.c, self.wrong
        D, H = c["D"], c["H"]
        Dh = D // H

        def ln(u, name):
            return ln_op(u, (D,), w[name + ".weight"], w[name + ".bias"], self.eps)

        y = ln(z, "vision_model.post_layernorm")  # [1, N, D]
        h = "vision_model.head."
        Wi, bi = w[h + "attention.in_proj_weight"], w[h + "attention.in_proj_bias"]
        if wrong == "kqv":
            Wi, bi = torch.cat([Wi[D:2 * D], Wi[:D], Wi[2 * D:]]), torch.cat([bi[D:2 * D], bi[:D], bi[2 * D:]])
        probe = w[h + "probe"]
        q = F.linear(probe, Wi[:D], bi[:D]).view(1, 1, H, Dh).transpose(1, 2)
        k = F.linear(y, Wi[D:2 * D], bi[D:2 * D]).view(1, -1, H, Dh).transpose(1, 2)
        v = F.linear(y, Wi[2 * D:], bi[2 * D:]).view(1, -1, H, Dh).transpose(1, 2)
        # the probe's softmax is torch's own (test_backward's planted softmax mistakes are for
        # the blocks' square [T, T]); tapped as layer L, so that AttnLRP holds it constant
        a = tap("att", c["L"], (torch.matmul(q, k.transpose(-1, -2)) * Dh ** -0.5).softmax(-1))
        o = torch.matmul(a, v).transpose(1, 2).reshape(1, 1, D)
        o = F.linear(o, w[h + "attention.out_proj.weight"], w[h + "attention.out_proj.bias"])
        if wrong == "residual":
            o = o + probe
        if wrong != "nomlp":
            m = act(F.linear(ln(o, h + "layernorm"), w[h + "mlp.fc1.weight"], w[h + "mlp.fc1.bias"]))
            o = o + F.linear(m, w[h + "mlp.fc2.weight"], w[h + "mlp.fc2.bias"])
        e = o[0, 0]
        self.extra = {"embed": e.detach(), "probe_att": a[0, :, 0].detach()}
        if self.txt is None:
            return None
        t = self.txt.to(dtype)
        l2norm = (ops or {}).get("l2norm", lambda u: u / u.norm())
        cos = (t / t.norm(dim=-1, keepdim=True)) @ l2norm(e)
        return cos * w["logit_scale"].exp()[0] + w["logit_bias"][0]

    def forward(self, x, dtype=torch.float64, tap=lambda n, l, t: t, ops=None):
        ln_op, softmax, act = self._ops(ops)
        w, c = self.weights(dtype), self.c
        D, H, L, P = c["D"], c["H"], c["L"], c["P"]
        Dh = D // H
        x = torch.as_tensor(x).to(dtype)
        if x.dim() == 3:
            x = x[None]
        e = "vision_model.embeddings."
        t = F.conv2d(x, w[e + "patch_embedding.weight"], w[e + "patch_embedding.bias"], stride=P)
        h = t.flatten(2).transpose(1, 2) + w[e + "position_embedding.weight"][None]
        T = h.shape[1]

        def ln(u, name):
            return ln_op(u, (D,), w[name + ".weight"], w[name + ".bias"], self.eps)

        def dense(u, name):
            return F.linear(u, w[name + ".weight"], w[name + ".bias"])

        def heads(u):
            return u.view(1, T, H, Dh).transpose(1, 2)

        att = []
        for l in range(L):
            b, a = f"vision_model.encoder.layers.{l}.", f"vision_model.encoder.layers.{l}.self_attn."
            s = tap("norm1", l, ln(h, b + "layer_norm1"))
            q, k, v = heads(dense(s, a + "q_proj")), heads(dense(s, a + "k_proj")), heads(dense(s, a + "v_proj"))
            p = tap("att", l, softmax(torch.matmul(q, k.transpose(-1, -2)) * Dh ** -0.5))
            att.append(p[0])
            ctx = torch.matmul(p, v).transpose(1, 2).reshape(1, T, D)
            h = h + dense(ctx, a + "out_proj")
            h = h + dense(act(dense(ln(h, b + "layer_norm2"), b + "mlp.fc1")), b + "mlp.fc2")
            h = tap("tokens", l, h)
        logits = self.head(h, dtype, ops, tap)
        return logits, torch.stack(att)


def write_model(c, d, seed=35):
    d.mkdir(parents=True, exist_ok=True)
    w = make_weights(c, seed)
    path = d / "model.safetensors"
    write_safetensors(path, {k: v.float() for k, v in w.items()}, "F32")
    # google/siglip-base-patch16-224's config.json sets no size (the class defaults), and its
    # preprocessor_config.json (SiglipImageProcessor)
    (d / "config.json").write_text(json.dumps({
        "architectures": ["SiglipModel"], "model_type": "siglip", "initializer_factor": 1.0,
        "text_config": {"model_type": "siglip_text_model"},
        "vision_config": {"model_type": "siglip_vision_model"}}))
    (d / "preprocessor_config.json").write_text(json.dumps({
        "do_normalize": True, "do_rescale": True, "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "image_processor_type": "SiglipImageProcessor", "processor_class": "SiglipProcessor",
        "resample": 3, "rescale_factor": 0.00392156862745098,
        "size": {"height": c["S"], "width": c["S"]}}))
    return w, path


def text_embeddings(c, d, seed=7):
    txt = torch.randn(c["C"], c["D"], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    txt.numpy().astype(np.float32).tofile(d / "text.f32")
    return txt


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def run_case(args, rep, wrong=None):
    c = SHAPE
    d = Path(args.work) / "case"
    w, path = write_model(c, d)
    S, N = c["S"], (c["S"] // c["P"]) ** 2
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    txt = text_embeddings(c, d)
    label = f"SigLIP B/16 image tower (L={c['L']})" + (f", control '{wrong}'" if wrong else "")
    print(f"\n[{label}]")
    engine, cfg = run_dump(args.dump, ["--model", path, "--input", d / "input.f32",
                                       "--text-head", f"{d / 'text.f32'}:{c['C']}",
                                       "--logit-bias", LOGIT_BIAS, "--out", d / "out"])
    check_config(rep, label, cfg, dict(n_prefix=0, n_tokens=N, n_patches=N, dim=c["D"],
                                       n_heads=c["H"], mlp_dim=c["F"], n_layers=c["L"],
                                       embed_dim=c["D"], layout="siglip-hf", n_classes=c["C"]))
    check_config(rep, label, {k: (round(v, 9) if isinstance(v, float) else v) for k, v in cfg.items()},
                 dict(mlp_act=1, ln_eps=1e-6, crop_mode=1, crop_pct=1.0, mean=[0.5] * 3, std=[0.5] * 3))
    ref = SiglipRef(w, c, txt, wrong)
    x32 = torch.from_numpy(engine["input"])
    logits, att = ref.forward(x32)
    logits, att = logits.detach().numpy(), att.detach().numpy()
    ok = True
    ea = np.abs(engine["att"] - att).max()
    print(f"  attention  max abs err {ea:.2e} (tol {ATT_TOL:.0e}) per layer "
          + " ".join(f"{np.abs(engine['att'][l] - att[l]).max():.1e}" for l in range(c["L"])))
    ok &= ea <= ATT_TOL
    ep = np.abs(engine["probe_att"] - ref.extra["probe_att"].numpy()).max()
    print(f"  probe att  max abs err {ep:.2e} (tol {ATT_TOL:.0e}); rows sum to "
          f"{engine['probe_att'].sum(1).min():.6f} .. {engine['probe_att'].sum(1).max():.6f}")
    ok &= ep <= ATT_TOL
    ee = rel(engine["embed"], ref.extra["embed"].numpy())
    print(f"  embedding  rel err {ee:.2e} (tol {EMB_TOL:.0e})")
    ok &= ee <= EMB_TOL
    want_p = 1.0 / (1.0 + np.exp(-logits))
    if wrong == "softmax":
        want_p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    el, eprob = np.abs(engine["logits"] - logits).max(), np.abs(engine["probs"] - want_p).max()
    print(f"  scores     logits max abs err {el:.2e}, probs {eprob:.2e} (tol {SCORE_TOL:.0e}); "
          f"probs {np.round(engine['probs'], 5).tolist()} sum {engine['probs'].sum():.4f}")
    ok &= el <= SCORE_TOL and eprob <= SCORE_TOL
    if wrong:
        rep.check(not ok, f"control '{wrong}' ({CONTROLS[wrong]}): the engine matched the wrong reference")
        return
    rep.check(ea <= ATT_TOL, f"{label}: attention differs by {ea:.2e}")
    rep.check(ep <= ATT_TOL, f"{label}: probe attention differs by {ep:.2e}")
    rep.check(ee <= EMB_TOL, f"{label}: image embedding differs by {ee:.2e} (relative)")
    rep.check(el <= SCORE_TOL and eprob <= SCORE_TOL, f"{label}: sigmoid scores differ")
    rep.check(abs(float(engine["probs"].sum()) - 1.0) > 1e-3,
              f"{label}: the sigmoid probabilities sum to 1: a softmax?")
    check_photo(args, rep, path, d)
    # the lesson's head step (vit_lesson_head) on a MAP head with a text head: the pooled
    # embedding, the head's own output (it crashed on the MAP head's missing scratch)
    el, _ = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--text-head",
                                 f"{d / 'text.f32'}:{c['C']}", "--logit-bias", LOGIT_BIAS,
                                 "--lesson", "1,2,5,7", "--out", d / "lesson"])
    e = rel(el["lesson_cls_norm"], ref.extra["embed"].numpy())
    print(f"  lesson's head step: the MAP head's output, rel err {e:.2e}")
    rep.check(e <= EMB_TOL, f"{label}: the lesson's head input is not the MAP head's output ({e:.2e})")


def check_photo(args, rep, path, d):
    """A 300 x 200 photo through vit_dump --image: PIL's bicubic squash to 224 x 224, / 255,
    (x - 0.5) / 0.5 (SiglipImageProcessor with resample 3); then with preprocessor_config.json's
    resample 2 (SigLIP 2's copies), PIL's bilinear."""
    try:
        from PIL import Image
    except ImportError:
        rep.check(False, "PIL is not installed: the preprocessing check cannot run")
        return
    rgb = (np.random.default_rng(5).random((200, 300, 3)) * 255).astype(np.uint8)
    rgb[40:120, 60:200] = [250, 30, 20]
    Image.fromarray(rgb).save(d / "photo.png")
    pp = json.loads((d / "preprocessor_config.json").read_text())
    for resample, name in ((3, "bicubic"), (2, "bilinear")):
        (d / "preprocessor_config.json").write_text(json.dumps(dict(pp, resample=resample)))
        engine, _ = run_dump(args.dump, ["--model", path, "--image", d / "photo.png", "--out",
                                         d / f"photo{resample}"])
        want = np.asarray(Image.fromarray(rgb).resize((224, 224), resample), np.float64) / 255.0
        want = ((want - 0.5) / 0.5).transpose(2, 0, 1)
        e = np.abs(engine["input"] - want).max()
        print(f"  photo 300x200, resample {resample}: input vs PIL {name} squash max abs err {e:.2e}")
        rep.check(e <= 1e-5, f"preprocessing (resample {resample}) differs from "
                  f"SiglipImageProcessor's by {e:.2e}")
    (d / "preprocessor_config.json").write_text(json.dumps(pp))


def run_backward(args, rep):
    import test_backward as tb
    # AttnLRP's pass holds |e| constant in the text head, as the engine's does for CLIP and
    # SigLIP alike (head.c; test_clip_image.py's lrp_ops): added to each of test_backward's
    # rule sets (its planted LRP mistakes keep theirs)
    rules = tb.lrp_rules

    def lrp_rules(**kw):
        ops, tap = rules(**kw)
        ops["l2norm"] = lambda u: u / u.norm().detach()
        return ops, tap
    tb.lrp_rules = lrp_rules
    c = SHAPE
    d = Path(args.work) / "backward"
    w, path = write_model(c, d, seed=36)
    S = c["S"]
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(12))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    txt = text_embeddings(c, d, seed=8)
    ref = SiglipRef(w, c, txt)
    lg = ref.forward(x)[0]
    second = int(torch.argsort(lg, descending=True)[2])
    print(f"\n[SigLIP B/16 backward] L={c['L']}, text head [{c['C']}, {c['D']}], logits "
          f"{np.round(lg.detach().numpy(), 3).tolist()}")
    dargs = ["--model", path, "--input", d / "input.f32", "--text-head", f"{d / 'text.f32'}:{c['C']}",
             "--logit-bias", LOGIT_BIAS]
    done = tb.backward_case(rep, "siglip", ref, args.dump, dargs, d / "bk", [-1, second],
                            tb.TOL["random"])
    for c_, engine, g64 in done:
        check_probe_maps(rep, ref, engine, g64, c_)


def probe_grads(ref, x32, c):
    """The probe's attention A_p [H, N] and dy_c/dA_p by autograd, float64."""
    kept = {}

    def tap(name, l, t):
        if name == "att" and l == ref.c["L"]:
            t.retain_grad()
            kept["p"] = t
        return t
    logits, _ = ref.forward(x32.double().requires_grad_(), torch.float64, tap)
    logits[c].backward()
    return kept["p"][0, :, 0].detach().numpy(), kept["p"].grad[0, :, 0].numpy()


def chefer_from(v, att, gatt):
    """v . (I + Abar_{L-1}) ... (I + Abar_0), Abar_l = mean_h((dA (.) A)^+)."""
    for l in range(att.shape[0] - 1, -1, -1):
        a = np.clip(att[l] * gatt[l], 0, None).mean(0)
        v = v + v @ a
    return v


def rollout_from(v, att, gatt):
    """v . Â_{L-1} ... Â_0, Â_l = rownorm((max(mean_h(A (.) dA), 0) + I) / 2)."""
    for l in range(att.shape[0] - 1, -1, -1):
        a = np.clip((att[l] * gatt[l]).mean(0), 0, None)
        a = (a + np.eye(a.shape[0])) / 2
        v = v @ (a / a.sum(1, keepdims=True))
    return v


def check_probe_maps(rep, ref, engine, g64, c):
    """Chefer's and the gradient rollout's maps of a model without a CLS token end at the
    probe's row (vit.h, vit_explain): against numpy on autograd's A, dA and the probe's
    A_p, dA_p; and far from the row of token 0 (a CLS that is not there: patch 0)."""
    ap, gp = probe_grads(ref, torch.from_numpy(engine["input"]), c)
    rp = np.abs(engine["probe_att"] - ap).max()
    rep.check(rp <= ATT_TOL, f"siglip class {c}: probe attention differs by {rp:.2e}")
    att, gatt = g64["att"], g64["grad_att"]
    e0 = np.eye(att.shape[-1])[0]
    pc = np.clip(ap * gp, 0, None).mean(0)
    pr = np.clip((ap * gp).mean(0), 0, None)
    pr = pr / pr.sum()
    for name, want, wrong in (("chefer", chefer_from(pc, att, gatt), chefer_from(e0, att, gatt)),
                              ("grad_rollout", rollout_from(pr, att, gatt), rollout_from(e0, att, gatt))):
        got = engine[f"expl_{name}"].reshape(-1)
        err, far = rel(got, want), rel(got, wrong)
        print(f"  {name:12s} from the probe's row: rel err {err:.2e}; from token 0's row {far:.2e}")
        rep.check(err <= 1e-4, f"siglip class {c}: {name} differs from the probe-row reference by {err:.2e}")
        rep.check(far > 1e-2, f"siglip class {c}: {name} is as close to token 0's row ({far:.2e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["case", "control", "backward"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    rep = Report()
    if args.part == "case":
        run_case(args, rep)
    elif args.part == "control":
        if args.name not in CONTROLS:
            ap.error(f"control: one of {', '.join(CONTROLS)}")
        run_case(args, rep, args.name)
    else:
        run_backward(args, rep)
    sys.exit(rep.exit_code())


if __name__ == "__main__":
    main()
