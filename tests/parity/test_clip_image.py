"""test_clip_image.py - CLIP's image tower and the phrase as a head (vit.h, "CLIP")
against a PyTorch reference written here from the published architecture.

    /usr/bin/python3 test_clip_image.py PART --dump vit_dump --work DIR [--mistake M]

The reference (clip_visual below) follows openai/CLIP clip/model.py (VisionTransformer:
conv1 without bias, class_embedding, positional_embedding, ln_pre, resblocks with
nn.MultiheadAttention's in_proj and QuickGELU, ln_post on the CLS token, x @ proj;
CLIP.forward: logit_scale.exp() * cos) and transformers' modeling_clip.py
(CLIPVisionEmbeddings, pre_layrnorm, CLIPEncoderLayer with q/k/v_proj, post_layernorm,
visual_projection), each in its own names, from the checkpoint's tensors alone: nothing
is shared with the engine, nor with timm's reference.py. It runs in float64 (the truth)
and float32 (the yardstick), with the taps and ops of test_backward.py, so that
torch.autograd gives every gradient the engine's backward pass computes.

PARTs (random weights; CLIP's own initialisation scales, so the attention is not flat):
  b32_openai  ViT-B/32's exact image tower (D 768, L 12, H 12, P 32, 224 px, E 512) in
              OpenAI's names in a .pth, with text tensors beside it (ignored) and no
              open_clip_config.json: QuickGELU by default.
  b16_hf      ViT-B/16's (P 16, T 197) in Hugging Face CLIPModel names in a .safetensors,
              config.json's vision_config.hidden_act "quick_gelu": the forward pass (the
              gradients' code is B/32's and small_hf's: CI time; measured once, B/16's
              gradients and maps were within 7.8e-7 of autograd).
  small_openai, small_hf  the same layouts on a small tower (D 128, L 2, H 2, P 16, 64 px,
              E 32): the ASan build runs these instead of the two above; also with
              the logit lens and vit_forward_batch under an intervention.
  timm        the small tower in timm's names (norm_pre, no patch bias, the projection
              as a 32-class head with zero bias, config.json's architecture
              "*_clip_quickgelu_*"): timm's own CLIP ViTs open; logits = the embedding.
  errors      bad input: a text tower alone, vit_set_text_head on a model without an
              image projection, a zero text embedding, --class without a text head.
  configs     CLIP's preprocessing against clip.py's transform (exact, synthetic photos),
              preprocessor_config.json's mean and std, open_clip_config.json's quick_gelu.
  small       small_openai, small_hf, timm, errors and configs in one run.
Each model part checks, with a random text head of C = 5 phrases and the checkpoint's
logit scale (ln 100):
  image embedding (vit_image_embed)  <= 1e-5 relative to max |e|
  every layer's attention            <= 1e-5 absolute
  logits 100 cos(e, t_c)             <= 1e-4 absolute
  the gradients of one phrase's logit against autograd (test_backward.py's, per layer
  for grad_att and grad_tokens): grad_att, grad_tokens, grad_input, and AttnLRP's
  lrp_input (its rules: LayerNorm's std and |e| held constant, QuickGELU by the
  identity rule, the attention detached), relative <= GRAD_TOL; and the six maps
  (test_explain.py's implementations, LeGrad with s_l = the same head on
  norm(z_l)[CLS], as LeGrad's compute_legrad_clip) <= MAP_TOL.
--mistake gelu | no_ln_pre | no_norm makes the reference wrong (exact GELU for
QuickGELU, ln_pre left out, the image embedding not normalised in the head): the run
then passes (exit 0) only when a comparison failed on every model it checked, the
negative control (ctest clip_image_control_*); a crash fails it.
"""
import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_backward as tb  # noqa: E402
import test_explain as te  # noqa: E402
from test_parity import Report, run_dump, write_safetensors  # noqa: E402

EMBED_TOL = 1e-5   # relative to max |e|
ATT_TOL = 1e-5     # absolute, every layer
LOGIT_TOL = 1e-4   # absolute (logits are 100 cos: |logit| <= 100)
GRAD_TOL = 1e-5    # relative, as test_backward.py's random models
MAP_TOL = 2e-5     # relative, as test_explain.py's random models
C_PHRASES = 5
MEAN, STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)

torch.set_num_threads(1)  # the machine is shared

SHAPES = {  # D, L, H, P, S (input px), E
    "b32": dict(D=768, L=12, H=12, P=32, S=224, E=512),
    "b16": dict(D=768, L=12, H=12, P=16, S=224, E=512),
    "small": dict(D=128, L=2, H=2, P=16, S=64, E=32),  # OpenAI: H = D // 64
}


# --- random weights in CLIP's shapes -------------------------------------------------------


def random_clip(s, g):
    """An image tower in OpenAI's names, float32, with CLIP's initialisation scales
    (model.py initialize_parameters / VisionTransformer.__init__), and LayerNorms and
    biases away from 1 and 0 so that a slip in any of them shows."""
    D, L, P, E, S = s["D"], s["L"], s["P"], s["E"], s["S"]
    T = (S // P) ** 2 + 1

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    w = {"visual.conv1.weight": rn(D, 3, P, P, std=(3 * P * P) ** -0.5),
         "visual.class_embedding": rn(D, std=D ** -0.5),
         "visual.positional_embedding": rn(T, D, std=D ** -0.5),
         "visual.ln_pre.weight": 1 + rn(D, std=0.1), "visual.ln_pre.bias": rn(D, std=0.1)}
    for l in range(L):
        b = f"visual.transformer.resblocks.{l}."
        w |= {b + "ln_1.weight": 1 + rn(D, std=0.1), b + "ln_1.bias": rn(D, std=0.1),
              b + "attn.in_proj_weight": rn(3 * D, D, std=D ** -0.5),
              b + "attn.in_proj_bias": rn(3 * D, std=0.02),
              b + "attn.out_proj.weight": rn(D, D, std=D ** -0.5 * (2 * L) ** -0.5),
              b + "attn.out_proj.bias": rn(D, std=0.02),
              b + "ln_2.weight": 1 + rn(D, std=0.1), b + "ln_2.bias": rn(D, std=0.1),
              b + "mlp.c_fc.weight": rn(4 * D, D, std=(2 * D) ** -0.5),
              b + "mlp.c_fc.bias": rn(4 * D, std=0.02),
              b + "mlp.c_proj.weight": rn(D, 4 * D, std=D ** -0.5 * (2 * L) ** -0.5),
              b + "mlp.c_proj.bias": rn(D, std=0.02)}
    w |= {"visual.ln_post.weight": 1 + rn(D, std=0.1), "visual.ln_post.bias": rn(D, std=0.1),
          "visual.proj": rn(D, E, std=D ** -0.5),
          "logit_scale": torch.tensor(math.log(100.0))}
    return w


def text_tensors(E, g):
    """A few text-tower tensors in OpenAI's names (small shapes: vit_load ignores them)."""
    W = 16
    return {"token_embedding.weight": torch.randn(100, W, generator=g),
            "positional_embedding": torch.randn(77, W, generator=g),
            "transformer.resblocks.0.ln_1.weight": torch.ones(W),
            "ln_final.weight": torch.ones(W), "ln_final.bias": torch.zeros(W),
            "text_projection": torch.randn(W, E, generator=g)}


def to_hf(w, L):
    """OpenAI's names -> transformers' CLIPModel names (convert_clip_original_pytorch_to_hf
    semantics: in_proj split into q, k, v; proj transposed into visual_projection)."""
    D = w["visual.class_embedding"].shape[0]
    h = {"vision_model.embeddings.class_embedding": w["visual.class_embedding"],
         "vision_model.embeddings.patch_embedding.weight": w["visual.conv1.weight"],
         "vision_model.embeddings.position_embedding.weight": w["visual.positional_embedding"],
         "vision_model.pre_layrnorm.weight": w["visual.ln_pre.weight"],
         "vision_model.pre_layrnorm.bias": w["visual.ln_pre.bias"],
         "vision_model.post_layernorm.weight": w["visual.ln_post.weight"],
         "vision_model.post_layernorm.bias": w["visual.ln_post.bias"],
         "visual_projection.weight": w["visual.proj"].t().contiguous(),
         "logit_scale": w["logit_scale"]}
    for l in range(L):
        a, b = f"visual.transformer.resblocks.{l}.", f"vision_model.encoder.layers.{l}."
        qkv_w, qkv_b = w[a + "attn.in_proj_weight"], w[a + "attn.in_proj_bias"]
        for i, n in enumerate("qkv"):
            h[b + f"self_attn.{n}_proj.weight"] = qkv_w[i * D:(i + 1) * D].contiguous()
            h[b + f"self_attn.{n}_proj.bias"] = qkv_b[i * D:(i + 1) * D].contiguous()
        for src, dst in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"),
                         ("ln_2", "layer_norm2"), ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            for p in ("weight", "bias"):
                h[b + f"{dst}.{p}"] = w[a + f"{src}.{p}"]
    return h


def to_timm(w, L):
    """OpenAI's names -> timm's (timm's _convert_openai_clip: ln_pre -> norm_pre, proj ->
    head.weight transposed with a zero head.bias)."""
    t = {"patch_embed.proj.weight": w["visual.conv1.weight"],
         "cls_token": w["visual.class_embedding"][None, None],
         "pos_embed": w["visual.positional_embedding"][None],
         "norm_pre.weight": w["visual.ln_pre.weight"], "norm_pre.bias": w["visual.ln_pre.bias"],
         "norm.weight": w["visual.ln_post.weight"], "norm.bias": w["visual.ln_post.bias"],
         "head.weight": w["visual.proj"].t().contiguous(),
         "head.bias": torch.zeros(w["visual.proj"].shape[1])}
    for l in range(L):
        a, b = f"visual.transformer.resblocks.{l}.", f"blocks.{l}."
        t |= {b + "attn.qkv.weight": w[a + "attn.in_proj_weight"],
              b + "attn.qkv.bias": w[a + "attn.in_proj_bias"]}
        for src, dst in (("attn.out_proj", "attn.proj"), ("ln_1", "norm1"), ("ln_2", "norm2"),
                         ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            for p in ("weight", "bias"):
                t[b + f"{dst}.{p}"] = w[a + f"{src}.{p}"]
    return t


# --- the reference -----------------------------------------------------------------------


def quick_gelu(t):
    """OpenAI's QuickGELU (model.py): x * sigmoid(1.702 x)."""
    return t * torch.sigmoid(1.702 * t)


def identity_rule(f):
    """AttnLRP's identity rule for an elementwise f: x * (f(x)/x).detach() (f(0)/0 -> f'(0))."""
    def g(t):
        ratio = torch.where(t == 0, torch.full_like(t, 0.5), f(t) / torch.where(t == 0, 1, t))
        return t * ratio.detach()
    return g


def clip_visual(w, x, H, names, dtype=torch.float64, tap=tb.reference.no_tap, ops=None,
                mistake=None):
    """CLIP's image tower on x [3, S, S] in the checkpoint's own names ("openai" or "hf"):
    (e [E] the image embedding, att [L, H, T, T], z [1, T, D] the last block's output).
    ops: "layer_norm", "softmax", "act" replace those steps (AttnLRP, planted mistakes);
    tap as test_backward.py's ("norm1", "att", "tokens")."""
    ops = ops or {}
    ln_fn = ops.get("layer_norm", F.layer_norm)
    softmax = ops.get("softmax", lambda s: s.softmax(dim=-1))
    act = ops.get("act", F.gelu if mistake == "gelu" else quick_gelu)
    w = {k: v.to(dtype) for k, v in w.items() if v.is_floating_point()}
    x = torch.as_tensor(x).to(dtype)[None]
    eps = 1e-5

    def ln(t, p):
        return ln_fn(t, (t.shape[-1],), w[p + "weight"], w[p + "bias"], eps)

    if names == "openai":  # clip/model.py VisionTransformer.forward
        P = w["visual.conv1.weight"].shape[-1]
        t = F.conv2d(x, w["visual.conv1.weight"], None, stride=P)
        t = t.reshape(1, t.shape[1], -1).permute(0, 2, 1)
        t = torch.cat([w["visual.class_embedding"] + torch.zeros(1, 1, t.shape[-1], dtype=dtype), t], 1)
        t = t + w["visual.positional_embedding"]
        pre, post, proj = "visual.ln_pre.", "visual.ln_post.", w["visual.proj"]
        L = sum(k.endswith("attn.in_proj_weight") for k in w)
    else:  # modeling_clip.py CLIPVisionEmbeddings, CLIPVisionTransformer
        P = w["vision_model.embeddings.patch_embedding.weight"].shape[-1]
        t = F.conv2d(x, w["vision_model.embeddings.patch_embedding.weight"], None, stride=P)
        t = t.flatten(2).transpose(1, 2)
        cls = w["vision_model.embeddings.class_embedding"].expand(1, 1, -1)
        t = torch.cat([cls, t], 1) + w["vision_model.embeddings.position_embedding.weight"][None]
        pre, post = "vision_model.pre_layrnorm.", "vision_model.post_layernorm."
        proj = w["visual_projection.weight"].t()
        L = sum(k.endswith("self_attn.q_proj.weight") for k in w)
    if mistake != "no_ln_pre":
        t = ln(t, pre)
    T, D = t.shape[1], t.shape[2]
    Dh = D // H
    att = []
    for l in range(L):
        if names == "openai":  # ResidualAttentionBlock: nn.MultiheadAttention, QuickGELU MLP
            b = f"visual.transformer.resblocks.{l}."
            h = tap("norm1", l, ln(t, b + "ln_1."))
            q, k, v = F.linear(h, w[b + "attn.in_proj_weight"], w[b + "attn.in_proj_bias"]).chunk(3, -1)
            o_w, o_b = w[b + "attn.out_proj.weight"], w[b + "attn.out_proj.bias"]
            n2, fc1, fc2 = b + "ln_2.", b + "mlp.c_fc.", b + "mlp.c_proj."
        else:  # CLIPEncoderLayer: CLIPAttention (q_proj * scale), CLIPMLP
            b = f"vision_model.encoder.layers.{l}."
            h = tap("norm1", l, ln(t, b + "layer_norm1."))
            q, k, v = (F.linear(h, w[b + f"self_attn.{n}_proj.weight"], w[b + f"self_attn.{n}_proj.bias"])
                       for n in "qkv")
            o_w, o_b = w[b + "self_attn.out_proj.weight"], w[b + "self_attn.out_proj.bias"]
            n2, fc1, fc2 = b + "layer_norm2.", b + "mlp.fc1.", b + "mlp.fc2."
        q, k, v = (u.reshape(1, T, H, Dh).transpose(1, 2) for u in (q, k, v))
        a = tap("att", l, softmax((q * Dh ** -0.5) @ k.transpose(-2, -1)))
        att.append(a[0])
        t = t + F.linear((a @ v).transpose(1, 2).reshape(1, T, D), o_w, o_b)
        m = F.linear(act(F.linear(ln(t, n2), w[fc1 + "weight"], w[fc1 + "bias"])),
                     w[fc2 + "weight"], w[fc2 + "bias"])
        t = tap("tokens", l, t + m)
    e = ln(t[:, 0], post)[0] @ proj
    return e, torch.stack(att), t


class ClipRef:
    """test_backward.py's Ref interface over clip_visual and CLIP's zero-shot head:
    forward(x, dtype, tap, ops) -> (logits [C], att), head(z, dtype, ops) -> logits of
    the tokens z [1, T, D] of any block (LeGrad's s_l); Np 1 (the CLS token)."""

    def __init__(self, w, H, names, text, scale, mistake=None):
        self.w, self.H, self.names, self.mistake = w, H, names, mistake
        self.text, self.scale = text.double(), scale
        self.Np, self.C = 1, text.shape[0]

    def logits_of(self, e, ops=None):
        norm = (ops or {}).get("l2norm", lambda u: u / u.norm())
        t = self.text.to(e.dtype)
        t = t / t.norm(dim=-1, keepdim=True)
        en = e if self.mistake == "no_norm" else norm(e)
        return self.scale * (t @ en)

    def forward(self, x, dtype=torch.float64, tap=tb.reference.no_tap, ops=None):
        e, att, _ = clip_visual(self.w, x, self.H, self.names, dtype, tap, ops, self.mistake)
        return self.logits_of(e, ops), att

    def embed(self, x, dtype=torch.float64):
        return clip_visual(self.w, x, self.H, self.names, dtype, mistake=self.mistake)[0]

    def head(self, z, dtype=torch.float64, ops=None):
        ln_fn = (ops or {}).get("layer_norm", F.layer_norm)
        w = {k: v.to(dtype) for k, v in self.w.items() if v.is_floating_point()}
        if self.names == "openai":
            pre, proj = "visual.ln_post.", w["visual.proj"]
        else:
            pre, proj = "vision_model.post_layernorm.", w["visual_projection.weight"].t()
        n = ln_fn(z[:, 0], (z.shape[-1],), w[pre + "weight"], w[pre + "bias"], 1e-5)[0]
        return self.logits_of(n @ proj, ops)


def lrp_ops():
    """(ops, tap) of AttnLRP's pass on CLIP: LayerNorm's std held constant (every norm:
    ln_pre, ln_1, ln_2, ln_post), QuickGELU by the identity rule, |e| held constant in
    the head, the attention detached (CP-LRP)."""
    ops = {"layer_norm": tb.lrp_layer_norm(), "act": identity_rule(quick_gelu),
           "l2norm": lambda u: u / u.norm().detach()}
    return ops, (lambda name, l, t: t.detach() if name == "att" else t)


def clip_grads(ref, x32, c, dtype=torch.float64):
    """What test_backward.reference_grads computes, by autograd on one forward pass of x32
    (float32, cast to dtype) for the logit y_c: logits, att, grad_att [L, H, T, T],
    grad_tokens [L, T, D], grad_input [3, S, S], cam_act / cam_grad [N, D] (the last
    block's norm1 output at the patches and y_c's gradient there); legrad [L, H, T, T]
    ds_l/dA_l with s_l = the text head on norm(z_l)[CLS] (LeGrad's compute_legrad_clip);
    lrp_input, the gradient through AttnLRP's rules for CLIP (lrp_ops). numpy float64."""
    x = x32.to(dtype).detach().requires_grad_()
    kept = {}

    def tap(name, l, t):
        if t.requires_grad:
            t.retain_grad()
        kept[name, l] = t
        return t
    logits, att = ref.forward(x, dtype, tap)
    L = att.shape[0]
    out = {"logits": logits.detach(), "att": att.detach()}
    logits[c].backward(retain_graph=True)
    # copies: autograd.grad below also adds into the retained .grad (torch 1.13)
    out["grad_att"] = torch.stack([kept["att", l].grad[0] for l in range(L)]).clone()
    out["grad_tokens"] = torch.stack([kept["tokens", l].grad[0] for l in range(L)]).clone()
    out["grad_input"] = x.grad.clone()
    out["cam_act"] = kept["norm1", L - 1][0, ref.Np:].detach()
    out["cam_grad"] = kept["norm1", L - 1].grad[0, ref.Np:].clone()
    out["legrad"] = torch.stack([torch.autograd.grad(ref.head(kept["tokens", l], dtype)[c],
                                                     kept["att", l], retain_graph=True)[0][0]
                                 for l in range(L)])
    ops, ltap = lrp_ops()
    x = x32.to(dtype).detach().requires_grad_()
    ref.forward(x, dtype, ltap, ops)[0][c].backward()
    out["lrp_input"] = x.grad
    return {k: v.double().numpy() for k, v in out.items()}


# --- one model ------------------------------------------------------------------------------


def write_model(kind, names, work, seed):
    """Write the tower `kind` (SHAPES) in `names` ("openai": .pth with text tensors, no
    open_clip_config.json; "hf": .safetensors + config.json; "timm": .safetensors +
    timm's config.json). Returns (weights in the file's names as float32, path, H)."""
    s = SHAPES[kind]
    g = torch.Generator().manual_seed(seed)
    w = random_clip(s, g)
    d = Path(work) / f"{kind}_{names}"
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("*.json"):
        f.unlink()
    if names == "openai":
        path = d / "model.pth"
        sd = w | text_tensors(s["E"], g)
        sd |= {"input_resolution": torch.tensor(s["S"]), "context_length": torch.tensor(77)}
        torch.save(sd, path)
        return w, path, s["H"]
    if names == "hf":
        wf = to_hf(w, s["L"])
        path = d / "model.safetensors"
        text = {"text_model.embeddings.token_embedding.weight": torch.randn(100, 16, generator=g),
                "text_projection.weight": torch.randn(s["E"], 16, generator=g)}
        write_safetensors(path, wf | text, "F32")
        (d / "config.json").write_text(json.dumps({
            "architectures": ["CLIPModel"], "projection_dim": s["E"],
            "text_config": {"hidden_act": "quick_gelu", "hidden_size": 16},
            "vision_config": {"hidden_act": "quick_gelu", "hidden_size": s["D"],
                              "num_attention_heads": s["H"], "image_size": s["S"],
                              "patch_size": s["P"], "layer_norm_eps": 1e-5}}))
        return wf, path, s["H"]
    wt = to_timm(w, s["L"])
    path = d / "model.safetensors"
    write_safetensors(path, wt, "F32")
    (d / "config.json").write_text(json.dumps({"architecture": "vit_small_clip_quickgelu_test",
                                               "num_heads": s["H"]}))
    return w, path, s["H"]


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-300))


def test_model(kind, names, args, rep, grads=True, yardstick=True):
    label = f"{kind}_{names}"
    s = SHAPES[kind]
    t0 = time.time()
    w, path, H = write_model(kind, names, args.work, seed=sum(map(ord, label)))
    d = path.parent
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, s["S"], s["S"], generator=g)
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    text = torch.randn(C_PHRASES, s["E"], generator=g)
    text.numpy().astype(np.float32).tofile(d / "text.f32")
    ref_names = "openai" if names == "timm" else names
    ref = ClipRef(w, H, ref_names, text, 100.0, args.mistake)
    print(f"\n[{label}] D={s['D']} L={s['L']} H={H} P={s['P']} S={s['S']} E={s['E']}  "
          f"({path.name}, written in {time.time() - t0:.1f} s)")
    base = ["--model", path, "--input", d / "input.f32"]
    if names == "timm":  # timm's CLIP ViT: the projection as a 512-class head
        engine, cfg = run_dump(args.dump, base + ["--out", d / "fwd"])
        rep.check(cfg["norm_pre"] == 1 and cfg["mlp_act"] == 2 and cfg["embed_dim"] == 0,
                  f"{label}: config {cfg}: expected norm_pre, QuickGELU, no image projection")
        e64 = ref.embed(x).numpy()
        err = rel(engine["logits"], e64)
        print(f"  head output (= the image embedding) rel err {err:.1e} (tol {EMBED_TOL:.0e})")
        rep.check(err <= EMBED_TOL, f"{label}: the head's output differs by {err:.1e}", guard=label)
        att_err = np.abs(engine["att"] - ref.forward(x)[1].numpy()).max()
        rep.check(att_err <= ATT_TOL, f"{label}: attention differs by {att_err:.1e}", guard=label)
        return
    head = base + ["--text-head", f"{d / 'text.f32'}:{C_PHRASES}"]
    t1 = time.time()
    engine, cfg = run_dump(args.dump, head + ["--out", d / "fwd"])
    t_engine = time.time() - t1
    want = dict(norm_pre=1, embed_dim=s["E"], clip=1, mlp_act=2, n_classes=C_PHRASES,
                patch_size=s["P"], n_layers=s["L"], n_heads=H, ln_eps=1e-5)
    for k, v in want.items():
        rep.check(abs(cfg[k] - v) <= 1e-6 * abs(v), f"{label}: config {k} = {cfg[k]}, expected {v}")
    rep.check(abs(cfg["logit_scale"] - 100.0) < 1e-3, f"{label}: logit scale {cfg['logit_scale']}")
    t1 = time.time()
    with torch.no_grad():
        e64, att64, _ = clip_visual(w, x, H, names, mistake=args.mistake)
        lg64 = ref.logits_of(e64)
    t_ref = time.time() - t1
    e32 = clip_visual(w, x, H, names, torch.float32)[0].double() if yardstick else e64
    err, yard = rel(engine["embed"], e64.numpy()), rel(e32.numpy(), e64.numpy())
    print(f"  image embedding rel err {err:.2e} (torch f32 {yard:.2e}, tol {EMBED_TOL:.0e}); "
          f"engine {t_engine:.1f} s, reference f64 {t_ref:.1f} s")
    rep.check(err <= EMBED_TOL, f"{label}: image embedding differs by {err:.2e} (relative)",
              guard=label)
    per_layer = np.abs(engine["att"] - att64.numpy()).reshape(s["L"], -1).max(1)
    print(f"  attention max|engine - f64| per layer: {' '.join(f'{v:.1e}' for v in per_layer)}")
    rep.check(per_layer.max() <= ATT_TOL, f"{label}: attention differs by {per_layer.max():.2e}",
              guard=label)
    dl = np.abs(engine["logits"] - lg64.numpy()).max()
    print(f"  logits max|engine - f64| {dl:.2e} (tol {LOGIT_TOL:.0e}; logits "
          f"{' '.join(f'{v:.2f}' for v in lg64.numpy())})")
    rep.check(dl <= LOGIT_TOL, f"{label}: logits differ by {dl:.2e}", guard=label)
    if kind == "small":
        check_views(rep, label, args, ref, w, H, names, x, head, d)
    if not grads:
        return
    c = int(np.argsort(lg64.numpy())[-2])  # the second phrase: not only the top-1
    t1 = time.time()
    gd, _ = run_dump(args.dump, head + ["--out", d / "grad", "--class", c])
    t_engine = time.time() - t1
    t1 = time.time()
    g64 = clip_grads(ref, x, c)
    # the float32 yardstick of the gradients on the small tower only (CI time): on B/32 and
    # B/16 it measured 1.4e-6 / 9.4e-7 (grad_att), 1.7e-6 / 8.5e-7 (grad_input)
    g32 = clip_grads(ref, x, c, torch.float32) if yardstick and kind == "small" else g64
    print(f"  phrase {c}: engine backward + maps {t_engine:.1f} s, autograd f64"
          f"{' + f32' if g32 is not g64 else ''} {time.time() - t1:.1f} s")
    worst = tb.compare_grads(rep, f"{label} phrase {c}", gd, g64, g32, GRAD_TOL)
    for k, v in worst.items():
        if v > GRAD_TOL:
            rep.caught.add(label)
    grid = (s["S"] // s["P"],) * 2
    xin = gd["input"].astype(np.float64)
    maps64 = te.reference_maps(g64, xin, 1, grid)
    maps32 = te.reference_maps(g32, xin, 1, grid)
    before = len(rep.failures)
    te.compare_maps(rep, f"{label} phrase {c}", gd, maps64, maps32, {m: MAP_TOL for m in te.METHODS})
    if len(rep.failures) > before:
        rep.caught.add(label)
    # LeGrad's s_l: the same text head on every layer's CLS token, not y_c's gradient alone
    wrong = te.legrad(g64["grad_att"], 1).reshape(grid)
    far = rel(gd["expl_legrad"], wrong)
    print(f"  legrad vs y_c's gradient at every layer (no per-layer s_l): {far:.1e}")
    rep.check(far > 20 * MAP_TOL, f"{label}: LeGrad is as close to y_c's gradient as to s_l's")


def check_views(rep, label, args, ref, w, H, names, x, head, d):
    """The other paths through the text head, on the small tower: vit_forward_batch (with a
    filled patch, an intervention: the reference's input is 0 there) and the logit lens
    (softmax of the head on every layer's CLS token, and on every patch token for the
    top-1 phrase)."""
    s = SHAPES["small"]
    P = s["P"]
    engine, _ = run_dump(args.dump, head + ["--out", d / "views", "--tokens", "--fill", "1"])
    xf = x.clone()
    xf[:, 0:P, P:2 * P] = 0  # patch 1 filled: its pixels 0 after normalisation
    with torch.no_grad():
        lg_fill = ref.forward(xf)[0].numpy()
        kept = {}

        def tap(name, l, t):
            kept[name, l] = t
            return t
        ref.forward(xf, tap=tap)
        L = s["L"]
        lens = torch.stack([ref.head(kept["tokens", l]).softmax(0) for l in range(L)]).numpy()
        top = int(np.argmax(lg_fill))
        lens_map = []
        for l in range(L):
            z = kept["tokens", l][0, 1:]  # every patch token as a CLS row
            lens_map.append(torch.stack([ref.head(t[None, None]).softmax(0)[top] for t in z]))
        lens_map = torch.stack(lens_map).numpy()
    db = np.abs(engine["batch_logits"] - lg_fill[None]).max()
    dl = np.abs(engine["logits"] - lg_fill).max()
    print(f"  --fill 1: logits {dl:.1e}, vit_forward_batch's {db:.1e} (tol {LOGIT_TOL:.0e})")
    rep.check(max(db, dl) <= LOGIT_TOL, f"{label}: logits with a filled patch (batch {db:.1e}, "
              f"forward {dl:.1e})", guard=label)
    e1, e2 = np.abs(engine["lens"] - lens).max(), np.abs(engine["lens_map"] - lens_map).max()
    # probabilities of 100 cos: measured <= 3.9e-6 (small_hf's map), tolerance 5e-5
    print(f"  logit lens max|engine - f64| {e1:.1e}, its map {e2:.1e} (tol 5e-5)")
    rep.check(max(e1, e2) <= 5e-5, f"{label}: logit lens differs ({e1:.1e}, map {e2:.1e})",
              guard=label)
    # a second phrase set on the same forward pass (vit_text_logits), explained
    text2 = torch.randn(C_PHRASES, s["E"], generator=torch.Generator().manual_seed(99))
    text2.numpy().astype(np.float32).tofile(d / "text2.f32")
    ref2 = ClipRef(w, H, names, text2, 100.0, ref.mistake)
    c = 1
    e2, _ = run_dump(args.dump, head + ["--out", d / "then", "--then-text-head", d / "text2.f32",
                                        "--class", c])
    g64 = clip_grads(ref2, x, c)
    dl = np.abs(e2["logits"] - g64["logits"]).max()
    print(f"  --then-text-head (vit_text_logits, no new forward pass): logits {dl:.1e}")
    rep.check(dl <= LOGIT_TOL, f"{label}: vit_text_logits' logits differ by {dl:.1e}", guard=label)
    worst = tb.compare_grads(rep, f"{label} second head, phrase {c}", e2, g64, g64, GRAD_TOL)
    if max(worst.values(), default=0) > GRAD_TOL:
        rep.caught.add(label)


# --- bad input ------------------------------------------------------------------------------


def refused(rep, dump, args, what, needle):
    r = subprocess.run([str(dump)] + [str(a) for a in args], capture_output=True, text=True)
    msg = r.stderr.strip()
    print(f"  {what}: exit {r.returncode}, '{msg}'")
    rep.check(r.returncode == 1 and needle in msg,
              f"{what}: exit {r.returncode} '{msg}', expected 1 and a message with '{needle}'")


def test_errors(args, rep):
    d = Path(args.work) / "errors"
    d.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(5)
    s = SHAPES["small"]
    x = torch.randn(3, s["S"], s["S"], generator=g)
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    # the text tower alone, in both names
    write_safetensors(d / "text_hf.safetensors",
                      {"text_model.embeddings.token_embedding.weight": torch.randn(100, 16, generator=g),
                       "text_projection.weight": torch.randn(32, 16, generator=g),
                       "logit_scale": torch.tensor(4.6)}, "F32")
    torch.save(text_tensors(32, g) | {"logit_scale": torch.tensor(4.6)}, d / "text_openai.pth")
    for f in ("text_hf.safetensors", "text_openai.pth"):
        refused(rep, args.dump, ["--model", d / f, "--input", d / "input.f32", "--out", d / "o"],
                f"{f} (a text tower alone)", "CLIP text tower only")
    # vit_set_text_head on a model without image projection: timm's CLIP ViT
    w, path, H = write_model("small", "timm", args.work, seed=3)
    (d / "text.f32").write_bytes(np.ones((2, 32), np.float32).tobytes())
    refused(rep, args.dump, ["--model", path, "--input", d / "input.f32", "--text-head",
                             f"{d / 'text.f32'}:2", "--out", d / "o"],
            "a text head on a model without image projection", "no image projection")
    # a zero text embedding; a logit scale of 0
    w, path, H = write_model("small", "hf", args.work, seed=4)
    (d / "zero.f32").write_bytes(np.zeros((2, 32), np.float32).tobytes())
    refused(rep, args.dump, ["--model", path, "--input", d / "input.f32", "--text-head",
                             f"{d / 'zero.f32'}:2", "--out", d / "o"],
            "a zero text embedding", "embedding 0 is zero")
    # the tower alone, no text head: every image view, no class to explain
    engine, cfg = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--tokens",
                                       "--out", d / "notext"])
    rep.check("embed" in engine and "logits" not in engine and cfg["n_classes"] == 0,
              "a CLIP tower without text head: expected an embedding and no logits")
    refused(rep, args.dump, ["--model", path, "--input", d / "input.f32", "--class", "0",
                             "--out", d / "o"], "--class without a text head", "give it a text head")


# --- the configs beside the weights and CLIP's preprocessing -----------------------------------


def clip_transform(pil, n_px, mean, std):
    """openai/CLIP clip/clip.py _transform: Resize(n_px, BICUBIC) of the short side,
    CenterCrop(n_px), ToTensor, Normalize(mean, std) -> (8-bit crop, input)."""
    from torchvision import transforms as T
    crop = T.CenterCrop(n_px)(T.Resize(n_px, interpolation=T.InterpolationMode.BICUBIC)(pil))
    return np.asarray(crop), T.Normalize(mean, std)(T.ToTensor()(crop)).numpy()


def test_configs(args, rep):
    """CLIP's preprocessing against clip.py's transform, exactly, on synthetic photos of odd
    sizes: the layouts' defaults (OpenAI's names), preprocessor_config.json's mean and std
    (Hugging Face's names); open_clip_config.json's quick_gelu false gives GELU (the
    forward pass then equals the reference with GELU)."""
    from PIL import Image
    from test_families import synthetic_photos
    work = Path(args.work) / "configs"
    work.mkdir(parents=True, exist_ok=True)
    photos = synthetic_photos(work)
    S = SHAPES["small"]["S"]
    w, path_o, H = write_model("small", "openai", args.work, seed=21)
    wh, path_h, _ = write_model("small", "hf", args.work, seed=22)
    half = [0.5, 0.5, 0.5]
    (path_h.parent / "preprocessor_config.json").write_text(json.dumps({
        "crop_size": {"height": S, "width": S}, "do_center_crop": True, "image_mean": half,
        "image_std": half, "resample": 3, "size": {"shortest_edge": S}}))
    for path, mean, std, what in ((path_o, MEAN, STD, "CLIP's defaults (layout)"),
                                  (path_h, half, half, "preprocessor_config.json")):
        for photo in photos:
            label = f"{path.parent.name} {photo.name}"
            engine, cfg = run_dump(args.dump, ["--model", path, "--image", photo,
                                               "--out", work / f"{path.parent.name}_{photo.stem}"])
            rgb, inp = clip_transform(Image.open(photo).convert("RGB"), S, mean, std)
            ok = rep.check(engine["rgb"].shape == rgb.shape, f"{label}: crop {engine['rgb'].shape}")
            d_rgb = np.abs(engine["rgb"].astype(int) - rgb.astype(int)).max() if ok else -1
            d_in = np.abs(engine["input"] - inp).max() if ok else -1
            print(f"  [{label}] {what}: mean {cfg['mean']}, 8-bit crop max diff {d_rgb}, input "
                  f"max diff {d_in:.1e}")
            rep.check(d_rgb == 0 and d_in == 0, f"{label}: preprocessing differs from clip.py's")
    (path_o.parent / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": {"embed_dim": 32, "quick_gelu": False, "vision_cfg": {"image_size": S}},
        "preprocess_cfg": {"mean": half, "std": half}}))
    x = torch.randn(3, S, S, generator=torch.Generator().manual_seed(2))
    x.numpy().astype(np.float32).tofile(work / "input.f32")
    engine, cfg = run_dump(args.dump, ["--model", path_o, "--input", work / "input.f32",
                                       "--out", work / "open_clip_gelu"])
    e_gelu = clip_visual(w, x, H, "openai", mistake="gelu")[0].numpy()
    err = rel(engine["embed"], e_gelu)
    print(f"  open_clip_config.json quick_gelu false: mlp_act {cfg['mlp_act']}, mean {cfg['mean']}, "
          f"embedding vs the GELU reference {err:.1e}")
    rep.check(cfg["mlp_act"] == 0 and err <= EMBED_TOL and abs(cfg["mean"][0] - 0.5) < 1e-7,
              "open_clip_config.json: quick_gelu false must give GELU and its mean")
    (path_o.parent / "open_clip_config.json").unlink()


# one process for the small tower's parts (CI time: Python and torch start once)
SMALL_PARTS = ["small_openai", "small_hf", "timm", "errors", "configs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["b32_openai", "b16_hf", "small_openai", "small_hf", "timm",
                                     "errors", "configs", "small"])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mistake", choices=["gelu", "no_ln_pre", "no_norm"])
    args = ap.parse_args()
    rep, t0 = Report(), time.time()
    parts = SMALL_PARTS if args.part == "small" else [args.part]
    for part in parts:
        if part in ("errors", "configs"):
            (test_errors if part == "errors" else test_configs)(args, rep)
            continue
        kind, names = part.split("_") if part != "timm" else ("small", "timm")
        # B/16: the forward pass (the gradients' code path is B/32's and small_hf's; CI time)
        test_model(kind, names, args, rep, grads=names != "timm" and kind != "b16",
                   yardstick=kind == "small" or args.mistake is None)
    print(f"({time.time() - t0:.1f} s)")
    if args.mistake:
        caught = set(rep.compared) <= rep.caught and rep.compared
        print(f"--mistake {args.mistake}: {'caught on every model' if caught else 'NOT caught'} "
              f"({len(rep.caught)} of {len(rep.compared)})")
        return 0 if caught else 1
    if rep.failures:
        print(f"FAILED: {len(rep.failures)} check(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
