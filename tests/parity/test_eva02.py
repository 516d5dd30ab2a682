"""test_eva02.py - EVA-02 (Fang et al. 2023) in timm's names (eva02_*: the Eva class, eva.py),
.safetensors and .pth, against a plain-PyTorch float64 reference written in this file from
the published code, on random weights of the published shapes.

    /usr/bin/python3 test_eva02.py case NAME      --dump vit_dump --work DIR
    /usr/bin/python3 test_eva02.py control WRONG  --dump vit_dump --work DIR
    /usr/bin/python3 test_eva02.py backward NAME  --dump vit_dump --work DIR
    /usr/bin/python3 test_eva02.py refusals       --dump vit_dump --work DIR
    /usr/bin/python3 test_eva02.py list           (case, control and backward names, for CMake)

case:     one checkpoint of CASES at its training size: every layer's attention (the softmax
          after EVA's rotary embedding) within 1e-5 of the float64 reference, the last block's
          output (every token) and the logits (with a head) within 1e-4 of their largest
          value, the rotary table within 1e-6, and the configuration the engine inferred.
          The grids: 16 x 16 (the reference grid: integer coordinates), 24 x 24 (the 336-px
          fine-tunes: coordinates i * 16/24) and 16 x 23 (a non-square grid: each axis
          scaled by its own 16/g).
control:  the same comparisons against a reference with one plausible mistake (CONTROLS),
          on cases where the mistake changes the computation (the sub-LN's on B, the
          reference-grid scaling off the 16 x 16 grid, the rest on a Ti and a B:
          CONTROL_CASES): passes only when they fail on every one of them.
backward: EVA-02 Ti with its classifier (fc_norm of the mean of the patches, then head),
          and B's sub-LN, through test_backward.py's backward_case: dy_c/dA_l, dy_c/dz_l,
          dy_c/d input and AttnLRP's against torch.autograd on this file's reference, its
          planted mistakes, and --att recompute bit for bit.
refusals: an Eva file without SwiGLU (EVA-01), a config.json naming another Eva
          architecture, EVA-CLIP's attention LayerNorm.

The reference follows timm's timm/models/eva.py (Eva._pos_embed: cat(cls, patches) +
pos_embed; EvaAttention.forward: qkv with cat(q_bias, k_bias = 0, v_bias), or q_proj /
k_proj (no bias) / v_proj; apply_rot_embed_cat on the tokens after the num_prefix_tokens = 1;
softmax(q k^T * Dh^-0.5); EvaBlock without LayerScale; Eva.forward_head: mean of x[:, 1:],
fc_norm, head; norm an Identity) and timm/layers/pos_embed_sincos.py (RotaryEmbeddingCat,
build_rotary_pos_embed, build_fourier_pos_embed(in_pixels=False, ref_feat_shape),
freq_bands(step=1), rot) and timm/layers/mlp.py (GluMlp(act SiLU, gate_last=False): fc1 ->
chunk(2) -> silu(x1) * x2 -> fc2; SwiGLU(norm_layer): fc1_g, fc1_x, norm, fc2), as
docs/families-2026.md section 3 reads them. timm is not installed here: this is the structure
of those modules in torch primitives.

Shapes: EVA-02 Ti/14 (D 192, L 12, H 3, Dh 64, hidden 512: int(192 * 4 * 2/3), packed
fc1 [1024, 192]), and B/14 (D 768, H 12, hidden 2048, fc1_g / fc1_x / mlp.norm, separate
q_proj, k_proj, v_proj; cut to 2 layers: a layer is a layer).
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
from test_parity import (Report, check_attention, check_config, check_peaked, check_relative,  # noqa: E402
                         check_table, run_dump, write_safetensors)

ATT_TOL = 1e-5     # every layer's attention, max abs
OUT_TOL = 1e-4     # last block's output, logits: max abs / max |reference|
ROPE_TOL = 1e-6    # the rotary table's cosines and sines

SHAPES = {  # EVA-02's published sizes (timm eva.py eva02_tiny_patch14_224, eva02_base_patch14_224)
    "Ti": dict(D=192, L=12, H=3, F=int(192 * 4 * 2 / 3), split=False),
    "B": dict(D=768, L=2, H=12, F=int(768 * 4 * 2 / 3), split=True),  # 12 layers published: cut to 2
}
P, THETA, REF = 14, 10000.0, 16

# name: shape, file, input (Sh, Sw) = the training size, classes, layers (cut)
CASES = {
    "ti_224_mim": dict(shape="Ti", file="safetensors", size=(224, 224), C=0),
    "ti_336_ft_pth": dict(shape="Ti", file="pth", size=(336, 336), C=1000),
    "ti_nonsquare": dict(shape="Ti", file="safetensors", size=(224, 322), C=10, L=4),
    "b_subln_224": dict(shape="B", file="safetensors", size=(224, 224), C=5),
    "b_subln_336_pth": dict(shape="B", file="pth", size=(336, 336), C=0),
}

CONTROLS = {  # mistake: what
    "rotate_half": "the rotation's halves paired (d, d + Dh/2) instead of interleaved pairs",
    "rope_cls": "RoPE applied to the CLS token too (at the last patch's angles; at the first "
                "patch's, EVA's origin, every angle is 0 and the rotation the identity)",
    "no_subln": "the sub-LN (mlp.norm) left out of B's MLP",
    "gate_value_swapped": "SiLU on the value half (fc1's second half / fc1_x) instead of the gate",
    "no_ref_scale": "the coordinates not scaled by 16 / grid off the reference grid",
    "coords_centred": "DINOv3's coordinates ((i + 0.5) / g * 2 - 1) instead of EVA's",
}
# the cases a control runs on: those where its mistake changes the computation; the rest
# change every EVA-02's, and show on a 4-layer Ti off the reference grid (packed SwiGLU)
# and a 2-layer B (split SwiGLU, sub-LN) as well as on all five
ONLY = {"no_subln": ("b_subln_224", "b_subln_336_pth"),
        "no_ref_scale": ("ti_336_ft_pth", "ti_nonsquare", "b_subln_336_pth")}
CONTROL_CASES = ("ti_nonsquare", "b_subln_224")

# backward: a classifier on fc_norm(mean of the patches)
BACKWARD = {
    "ti_head_nonsquare": dict(shape="Ti", file="safetensors", size=(224, 322), C=10, L=4),
    # 16 x 14 patches: off the reference grid on one axis (the forward cases have 336 x 336)
    "b_head_subln_pth": dict(shape="B", file="pth", size=(224, 196), C=7, L=2),
}


def spec(name):
    c = dict(CASES[name] if name in CASES else BACKWARD[name], name=name)
    s = dict(SHAPES[c["shape"]])
    s.update({k: c[k] for k in ("L",) if k in c})
    c.update(s)
    return c


# --- the checkpoint ----------------------------------------------------------------------


def random_weights(c, g):
    """Random float32 weights in timm's names (the reference reads these): queries and keys
    with std 1.7/sqrt(D) (peaked attention), q/v biases 0.3 (so a rotated bias shows), gate
    and value of fc1 of different scales (a swap shows), a sub-LN with weight 1 +- 0.3."""
    D, L, F_, C, gh, gw = c["D"], c["L"], c["F"], c["C"], c["size"][0] // P, c["size"][1] // P

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    w = {"cls_token": rn(1, 1, D, std=0.5), "pos_embed": rn(1, 1 + gh * gw, D, std=0.3),
         "patch_embed.proj.weight": rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P)),
         "patch_embed.proj.bias": rn(D, std=0.1)}
    for l in range(L):
        b = f"blocks.{l}."
        q, k, v = (rn(D, D, std=1.7 / math.sqrt(D)), rn(D, D, std=1.7 / math.sqrt(D)),
                   rn(D, D, std=1 / math.sqrt(D)))
        w |= {b + "norm1.weight": 1 + rn(D, std=0.2), b + "norm1.bias": rn(D, std=0.1),
              b + "attn.proj.weight": rn(D, D, std=1 / math.sqrt(D)), b + "attn.proj.bias": rn(D, std=0.1),
              b + "norm2.weight": 1 + rn(D, std=0.2), b + "norm2.bias": rn(D, std=0.1),
              b + "mlp.fc2.weight": rn(D, F_, std=1 / math.sqrt(F_)), b + "mlp.fc2.bias": rn(D, std=0.1)}
        gate_w, gate_b = rn(F_, D, std=1.5 / math.sqrt(D)), rn(F_, std=0.3)
        val_w, val_b = rn(F_, D, std=0.7 / math.sqrt(D)), rn(F_, std=0.1)
        if c["split"]:  # B/L: qkv_fused=False, SwiGLU with its sub-LN
            w |= {b + "attn.q_proj.weight": q, b + "attn.k_proj.weight": k, b + "attn.v_proj.weight": v,
                  b + "attn.q_proj.bias": rn(D, std=0.3), b + "attn.v_proj.bias": rn(D, std=0.3),
                  b + "mlp.fc1_g.weight": gate_w, b + "mlp.fc1_g.bias": gate_b,
                  b + "mlp.fc1_x.weight": val_w, b + "mlp.fc1_x.bias": val_b,
                  b + "mlp.norm.weight": 1 + rn(F_, std=0.3), b + "mlp.norm.bias": rn(F_, std=0.2)}
        else:  # Ti/S: fused qkv, q_bias/v_bias, GluMlp's packed fc1 [gate; value]
            w |= {b + "attn.qkv.weight": torch.cat([q, k, v]),
                  b + "attn.q_bias": rn(D, std=0.3), b + "attn.v_bias": rn(D, std=0.3),
                  b + "mlp.fc1.weight": torch.cat([gate_w, val_w]),
                  b + "mlp.fc1.bias": torch.cat([gate_b, val_b])}
    w |= {"fc_norm.weight": 1 + rn(D, std=0.2), "fc_norm.bias": rn(D, std=0.1)}
    if C:
        w |= {"head.weight": rn(C, D, std=2 / math.sqrt(D)), "head.bias": rn(C, std=0.1)}
    return w


def architecture(c):
    size = "tiny" if c["shape"] == "Ti" else "base"
    return f"eva02_{size}_patch14_{c['size'][0]}"


def config_json(c):
    """timm's hub config (_hub.py save_config_for_hf): nothing about RoPE or SwiGLU."""
    Sh, Sw = c["size"]
    return {"architecture": architecture(c), "num_classes": c["C"], "num_features": c["D"],
            "global_pool": "avg",
            "pretrained_cfg": {"input_size": [3, Sh, Sw], "interpolation": "bicubic",
                               "crop_pct": 1.0 if c["C"] else 0.9, "crop_mode": "center",
                               "mean": [0.48145466, 0.4578275, 0.40821073],
                               "std": [0.26862954, 0.26130258, 0.27577711]}}


def write_case(c, d, seed, edit=None):
    g = torch.Generator().manual_seed(seed)
    w = random_weights(c, g)
    stored = dict(sorted((edit(dict(w)) if edit else w).items()))
    d.mkdir(parents=True, exist_ok=True)
    for old in ("model.safetensors", "model.pth"):
        (d / old).unlink(missing_ok=True)
    if c["file"] == "pth":
        path = d / "model.pth"
        torch.save(stored, path)
    else:
        path = d / "model.safetensors"
        write_safetensors(path, stored, "F32")
    (d / "config.json").write_text(json.dumps(config_json(c), indent=1))
    return w, path


# --- the reference, from eva.py and pos_embed_sincos.py ----------------------------------


def rope_sin_cos(gh, gw, Dh, dtype, wrong=None):
    """RotaryEmbeddingCat(in_pixels=False, ref_feat_shape=(16, 16), temperature 10000) at a
    gh x gw grid: sin, cos [N, Dh].
      bands = 1 / 10000 ** (arange(Dh/4) / (Dh/4))              freq_bands(step=1)
      t = arange(g) / g * 16 per axis                            build_fourier_pos_embed
      pos = stack(meshgrid(t_y, t_x, 'ij'), -1)[..., None] * bands: [gh, gw, 2, Dh/4]
      sin, cos of pos.reshape(N, Dh/2), each repeat_interleave(2)  build_rotary_pos_embed"""
    nb = Dh // 4
    bands = 1 / THETA ** (torch.arange(nb, dtype=dtype) / nb)
    ts = []
    for gsz in (gh, gw):
        t = torch.arange(gsz, dtype=dtype)
        if wrong == "coords_centred":
            t = 2 * (t + 0.5) / gsz - 1
        elif wrong != "no_ref_scale":
            t = t / gsz * REF
        ts.append(t)
    grid = torch.stack(torch.meshgrid(*ts, indexing="ij"), dim=-1)[..., None]  # [gh, gw, 2, 1]
    pos = (grid * bands).reshape(gh * gw, -1)  # [N, Dh/2]: y bands, then x bands
    if wrong == "rotate_half":  # the halves' layout: each angle at d and d + Dh/2
        return pos.sin().tile(2), pos.cos().tile(2)
    return pos.sin().repeat_interleave(2, -1), pos.cos().repeat_interleave(2, -1)


def rot(x):  # timm pos_embed_sincos.rot: [x0, x1, x2, x3] -> [-x1, x0, -x3, x2]
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def rotate_half(x):  # the mistake: cat(-x[Dh/2:], x[:Dh/2])
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Eva02Ref:
    """test_backward.py's reference interface: forward(x, dtype, tap, ops) -> (logits [C] or
    None, att [L, H, T, T]) and head(z, dtype, ops), Np prefix tokens, C classes. hidden: the
    last forward's last block output [T, D] (timm's norm is an Identity with fc_norm)."""

    def __init__(self, w, c, wrong=None):
        self.w, self.c, self.wrong = w, c, wrong
        self.H, self.Np, self.C, self.eps = c["H"], 1, c["C"], 1e-6
        self._w = {}

    def weights(self, dtype):
        if dtype not in self._w:
            self._w[dtype] = {k: v.to(dtype) for k, v in self.w.items()}
        return self._w[dtype]

    def forward(self, x, dtype=torch.float64, tap=lambda n, l, t: t, ops=None):
        ops, w, c, wrong = ops or {}, self.weights(dtype), self.c, self.wrong
        ln_op = ops.get("layer_norm", F.layer_norm)
        softmax = ops.get("softmax", lambda s: s.softmax(dim=-1))
        silu, mul = ops.get("silu", F.silu), ops.get("mul", lambda a, b: a * b)
        D, H, L, Fh = c["D"], c["H"], c["L"], c["F"]
        Dh = D // H
        x = torch.as_tensor(x).to(dtype)
        if x.dim() == 3:
            x = x[None]
        # PatchEmbed, then Eva._pos_embed: cat(cls, patches) + pos_embed (a row for the CLS)
        t = F.conv2d(x, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
        gh, gw = t.shape[-2:]
        t = t.flatten(2).transpose(1, 2)
        h = torch.cat([w["cls_token"], t], dim=1) + w["pos_embed"]
        T, N = h.shape[1], gh * gw
        sin, cos = rope_sin_cos(gh, gw, Dh, dtype, wrong)
        rotate = rotate_half if wrong == "rotate_half" else rot
        npt = 0 if wrong == "rope_cls" else 1  # EvaAttention.num_prefix_tokens
        if wrong == "rope_cls":  # the CLS at the last patch's angles (patch 0's are all 0)
            sin, cos = torch.cat([sin[-1:], sin]), torch.cat([cos[-1:], cos])

        def ln(u, name, n=D):
            return ln_op(u, (n,), w[name + ".weight"], w[name + ".bias"], self.eps)

        def dense(u, name, bias=True):
            return F.linear(u, w[name + ".weight"], w.get(name + ".bias") if bias else None)

        def heads(u):
            return u.view(1, T, H, Dh).transpose(1, 2)

        def rope(u):  # apply_rot_embed_cat(half=False) on tokens npt..: x * cos + rot(x) * sin
            pre, pat = u[:, :, :npt], u[:, :, npt:]
            return torch.cat([pre, pat * cos + rotate(pat) * sin], dim=2)

        att = []
        for l in range(L):
            b = f"blocks.{l}."
            s = tap("norm1", l, ln(h, b + "norm1"))
            if c["split"]:  # q_proj (bias), k_proj (no bias), v_proj (bias)
                q, k, v = dense(s, b + "attn.q_proj"), dense(s, b + "attn.k_proj", False), \
                    dense(s, b + "attn.v_proj")
            else:  # F.linear(x, qkv.weight, cat(q_bias, k_bias = 0, v_bias))
                bias = torch.cat([w[b + "attn.q_bias"], torch.zeros_like(w[b + "attn.q_bias"]),
                                  w[b + "attn.v_bias"]])
                q, k, v = F.linear(s, w[b + "attn.qkv.weight"], bias).split(D, dim=-1)
            q, k, v = rope(heads(q)), rope(heads(k)), heads(v)
            p = tap("att", l, softmax(torch.matmul(q * Dh**-0.5, k.transpose(-1, -2))))
            att.append(p[0])
            ctx = torch.matmul(p, v).transpose(1, 2).reshape(1, T, D)
            h = h + dense(ctx, b + "attn.proj")
            u = ln(h, b + "norm2")
            if c["split"]:  # SwiGLU: fc2(norm(act(fc1_g(x)) * fc1_x(x)))
                gate, val = dense(u, b + "mlp.fc1_g"), dense(u, b + "mlp.fc1_x")
            else:  # GluMlp(gate_last=False): x1, x2 = fc1(x).chunk(2); act(x1) * x2
                gate, val = dense(u, b + "mlp.fc1").chunk(2, dim=-1)
            if wrong == "gate_value_swapped":
                gate, val = val, gate
            m = mul(silu(gate), val)
            if c["split"] and wrong != "no_subln":
                m = ln(m, b + "mlp.norm", Fh)
            h = tap("tokens", l, h + dense(m, b + "mlp.fc2"))
        self.hidden = h[0]
        logits = self.head(h, dtype, ops) if self.C else None
        return logits, torch.stack(att)

    def head(self, z, dtype=torch.float64, ops=None):
        """Eva.forward_head: x[:, num_prefix_tokens:].mean(1), fc_norm, head (norm Identity)."""
        w = self.weights(dtype)
        ln_op = (ops or {}).get("layer_norm", F.layer_norm)
        n = ln_op(z[:, self.Np:].mean(1), (self.c["D"],), w["fc_norm.weight"], w["fc_norm.bias"],
                  self.eps)
        return F.linear(n, w["head.weight"], w["head.bias"])[0]


# --- the comparison ----------------------------------------------------------------------


def run_case(name, args, rep, wrong=None):
    c = spec(name)
    d = Path(args.work) / name
    Sh, Sw = c["size"]
    print(f"\n[{name}] timm EVA-02 {c['shape']}/14 ({c['file']}), D={c['D']} L={c['L']} "
          f"H={c['H']} F={c['F']} {'split SwiGLU + sub-LN' if c['split'] else 'packed SwiGLU'}, "
          f"C={c['C']}, input {Sh}x{Sw}"
          + (f"; reference with the mistake: {CONTROLS[wrong]}" if wrong else ""))
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(7))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    engine, cfg = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--tokens",
                                       "--out", d / "out"])
    gh, gw = Sh // P, Sw // P
    check_config(rep, name, cfg, dict(
        naming="timm", layout="timm-eva02", image_h=Sh, image_w=Sw, patch_size=P, grid_h=gh,
        grid_w=gw, n_prefix=1, n_registers=0, n_tokens=1 + gh * gw, pos_prefix=1, dim=c["D"],
        n_heads=c["H"], n_layers=c["L"], mlp_dim=c["F"], n_classes=c["C"], rope=2,
        mlp_gated=1, mlp_act=4, head_pool=1))
    rep.check(abs(cfg["ln_eps"] - 1e-6) <= 1e-12 and cfg["rope_theta"] == THETA,
              f"{name}: LayerNorm eps {cfg['ln_eps']}, rope_theta {cfg['rope_theta']}, expected "
              f"1e-6 and {THETA}")
    ref, ref32 = Eva02Ref(w, c, wrong), Eva02Ref(w, c, wrong)
    lg64, att64 = ref.forward(x)
    lg32, att32 = ref32.forward(x, torch.float32)
    if not wrong:
        check_peaked(rep, name, att64)
    if not check_attention(rep, name, engine["att"], att64, att32, ATT_TOL):
        return
    check_relative(rep, name, "last block output", engine["tokens"][-1], ref.hidden, ref32.hidden,
                   OUT_TOL)
    if c["C"]:
        check_relative(rep, name, "logits", engine["logits"], lg64, lg32, OUT_TOL)
    if not wrong:  # the table the engine rotates with, and the learned embedding beside it
        sin, cos = rope_sin_cos(gh, gw, c["D"] // c["H"], torch.float64)
        want = torch.cat([cos[:, 0::2], sin[:, 0::2]], dim=1).numpy()  # one angle per pair
        check_table(rep, name, "rotary table", engine.get("rope"), want, ROPE_TOL)
        pos = engine.get("pos")
        rep.check(pos is not None and np.array_equal(pos, w["pos_embed"][0].numpy()),
                  f"{name}: the learned position embedding not added as stored")


def run_control(wrong, args, rep):
    for name in ONLY.get(wrong, CONTROL_CASES):
        run_case(name, args, rep, wrong)


def run_backward(name, args, rep):
    import test_backward as tb
    c = spec(name)
    d = Path(args.work) / name
    Sh, Sw = c["size"]
    print(f"\n[{name}] backward: timm EVA-02 {c['shape']}/14 + fc_norm + head [{c['C']}, {c['D']}], "
          f"L={c['L']}, input {Sh}x{Sw}")
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    ref = Eva02Ref(w, c)
    lg = ref.forward(x)[0]
    second = int(torch.argsort(lg, descending=True)[2])
    dargs = ["--model", path, "--input", d / "input.f32"]
    tb.backward_case(rep, name, ref, args.dump, dargs, d / "bk", [-1, second], tb.TOL["random"])


# --- refusals ----------------------------------------------------------------------------


def run_refusals(args, rep):
    work = Path(args.work) / "refusals"
    tiny = dict(shape="Ti", file="safetensors", size=(28, 28), C=0, D=64, L=1, H=1, F=128,
                split=False)
    tiny_b = dict(tiny, split=True)

    def gelu_mlp(w):  # EVA-01: fc1 [F, D], fc2 [D, F], no gate
        w["blocks.0.mlp.fc1.weight"] = w["blocks.0.mlp.fc1.weight"][:128]
        w["blocks.0.mlp.fc1.bias"] = w["blocks.0.mlp.fc1.bias"][:128]
        return w

    def attn_norm(w):  # EVA-CLIP's scale_attn_inner
        w["blocks.0.attn.norm.weight"], w["blocks.0.attn.norm.bias"] = torch.ones(64), torch.zeros(64)
        return w

    cases = [(dict(tiny, name="eva01_gelu"), gelu_mlp, None, ["without EVA-02's SwiGLU MLP"]),
             (dict(tiny, name="other_arch"), None, "vit_base_patch16_rope_224",
              ["architecture 'vit_base_patch16_rope_224'", "other than EVA-02"]),
             (dict(tiny_b, name="eva_clip"), attn_norm, None, ["EVA-CLIP's LayerNorm inside the attention"])]
    for c, edit, arch, want in cases:
        d = work / c["name"]
        write_case(c, d, seed=3, edit=edit)
        if arch:
            cfg = json.loads((d / "config.json").read_text()) | {"architecture": arch}
            (d / "config.json").write_text(json.dumps(cfg))
        np.zeros((3, 28, 28), np.float32).tofile(d / "input.f32")
        r = subprocess.run([args.dump, "--model", d / "model.safetensors", "--input",
                            d / "input.f32", "--out", d / "out"], capture_output=True, text=True)
        msg = r.stderr.strip()
        print(f"[{c['name']}] exit {r.returncode}: {msg}")
        rep.check(r.returncode == 1 and all(s in msg for s in want),
                  f"{c['name']}: expected a refusal naming {want}, got exit {r.returncode}: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["case", "control", "backward", "refusals", "list"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump")
    ap.add_argument("--work")
    args = ap.parse_args()
    if args.part == "list":
        print(";".join(CASES) + "|" + ";".join(CONTROLS) + "|" + ";".join(BACKWARD))
        return 0
    torch.set_num_threads(1)
    rep, t0 = Report(), time.time()
    table = {"case": CASES, "control": CONTROLS, "backward": BACKWARD}.get(args.part)
    if table is not None and args.name not in table:
        ap.error(f"{args.part}: one of {', '.join(table)}")
    if args.part == "case":
        run_case(args.name, args, rep)
        code = rep.exit_code()
    elif args.part == "control":
        run_control(args.name, args, rep)
        code = rep.control_exit_code(CONTROLS[args.name])
    elif args.part == "backward":
        run_backward(args.name, args, rep)
        code = rep.exit_code()
    else:
        run_refusals(args, rep)
        code = rep.exit_code()
    print(f"({time.time() - t0:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
