"""test_dinov3.py - DINOv3 (Simeoni et al. 2025) in Hugging Face transformers' names
(DINOv3ViTModel: facebook/dinov3-vit*16-pretrain-lvd1689m) and timm's (vit_*_patch16_dinov3,
the Eva class), .safetensors and .pth, against a plain-PyTorch float64 reference written in
this file from the published code, on random weights of the published shapes.

    /usr/bin/python3 test_dinov3.py case NAME      --dump vit_dump --work DIR
    /usr/bin/python3 test_dinov3.py control WRONG  --dump vit_dump --work DIR
    /usr/bin/python3 test_dinov3.py backward NAME  --dump vit_dump --work DIR
    /usr/bin/python3 test_dinov3.py interv NAME    --dump vit_dump --work DIR
    /usr/bin/python3 test_dinov3.py refusals       --dump vit_dump --work DIR
    /usr/bin/python3 test_dinov3.py list           (case, control and backward names, for CMake)

case:     one checkpoint of CASES at its input size (--size; 224 x 320 is a 14 x 20 grid, so
          that an axis swap or a per-axis normalisation slip shows): every layer's attention
          (the post-RoPE softmax) within 1e-5 of the float64 reference, last_hidden_state
          (the final norm of every token) within 1e-4 of its largest value, the rotary table
          within 1e-6, and the configuration the engine inferred.
control:  the same comparisons against a reference with one plausible mistake (CONTROLS),
          on the two 4-layer S+ cases (CONTROL_CASES: both names, both file kinds, square
          and not; each mistake changes every case's computation): passes only when they
          fail on both, i.e. the tolerances tell it from DINOv3's computation.
backward: a DINOv3 with a classifier head on the CLS token (timm's names; DINOv3's own
          files have none), through test_backward.py's backward_case: dy_c/dA_l, dy_c/dz_l,
          dy_c/d input and AttnLRP's against torch.autograd on this file's reference, with
          its planted mistakes, and --att recompute bit for bit.
interv:   the position shuffle (--pos shuffle:SEED: patch p rotated by patch perm[p]'s angles)
          and --pos zero (no rotation) against the reference with the same change: attention
          and the CLS map within 1e-5, and far from the unchanged model's.
refusals: a use_gated_mlp that contradicts the tensors, a key bias without a query bias.
lesson:   the lesson's RoPE step (vit_dump --lesson, VitLesson.query0 .. rope_scores) at two
          selections of a 224 x 320 S/16: q and k before the rotation (the block's norm1 of the
          engine's block input, projected), the angles, and the score of the rotated query with
          the token's own key moved to every patch, within 1e-5 of their largest value; then
          `vitlens --lesson-export` on the same file: the table's steps with rope after keys, its arrays
          equal to vit_dump's, its caption ending with the map's shape, and a --pos shuffle's
          lesson rotating with the shuffled angles. --control interleaved|theta_10000: the
          reference with that mistake must fail every selection.

    /usr/bin/python3 test_dinov3.py lesson --dump vit_dump --vitlens vitlens --work DIR [--control C]

The reference follows transformers' src/transformers/models/dinov3_vit/modeling_dinov3_vit.py
(DINOv3ViTEmbeddings, get_patches_center_coordinates, DINOv3ViTRopePositionEmbedding,
rotate_half / apply_rotary_pos_emb with num_prefix_tokens = T - N, DINOv3ViTAttention with
eager_attention_forward, DINOv3ViTLayerScale, DINOv3ViTMLP / DINOv3ViTGatedMLP,
DINOv3ViTLayer, DINOv3ViTModel: norm over every token) and timm's eva.py + pos_embed_sincos.py
(RotaryEmbeddingDinoV3, the same numbers; qkv with q_bias, a zero k_bias, v_bias), as
docs/families-2026.md section 1 reads them. transformers and timm are not installed here:
this is the structure of those modules in torch primitives.

Shapes: ViT-S/16 (D 384, L 12, H 6, F 1536, P 16, R 4), ViT-S+/16 (the same with a SwiGLU
MLP of F 1536: cut to 4 layers), ViT-B/16 (D 768, H 12, F 3072: cut to 4 layers to save
time; a layer is a layer, the depth only adds rounding).
"""
import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lesson_table  # noqa: E402
from test_parity import (Report, check_attention, check_config, check_peaked, check_relative,  # noqa: E402
                         check_table, run_dump, write_safetensors)

ATT_TOL = 1e-5     # every layer's attention, max abs
HIDDEN_TOL = 1e-4  # last_hidden_state, max abs / max |reference|
ROPE_TOL = 1e-6    # the rotary table's cosines and sines (float64 rounded to float32)

SHAPES = {  # DINOv3's published sizes (dinov3 hub/backbones.py; transformers' converter)
    "S": dict(D=384, L=12, H=6, F=1536, gated=False),
    "S+": dict(D=384, L=4, H=6, F=1536, gated=True),   # 12 layers published: cut to 4
    "B": dict(D=768, L=4, H=12, F=3072, gated=False),  # 12 layers published: cut to 4
}
P, R, THETA = 16, 4, 100.0

# name: shape, names ("hf": DINOv3ViTModel, "timm": Eva), file, input (Sh, Sw), q/v biases
CASES = {
    "s16_hf_224": dict(shape="S", names="hf", file="safetensors", size=(224, 224), qv_bias=True),
    "s16_hf_nonsquare_pth": dict(shape="S", names="hf", file="pth", size=(224, 320), qv_bias=True),
    "s16_timm_qkvb_nonsquare": dict(shape="S", names="timm", file="safetensors", size=(320, 224),
                                    qv_bias=True),
    "splus16_hf_swiglu": dict(shape="S+", names="hf", file="safetensors", size=(224, 320),
                              qv_bias=True),
    "splus16_timm_swiglu_pth": dict(shape="S+", names="timm", file="pth", size=(224, 224),
                                    qv_bias=False),
    "b16_hf_224": dict(shape="B", names="hf", file="safetensors", size=(224, 224), qv_bias=True),
    "b16_timm_nobias_nonsquare": dict(shape="B", names="timm", file="safetensors",
                                      size=(224, 320), qv_bias=False),
}

CONTROLS = {  # mistake: what
    "rope_prefix": "RoPE applied to the prefix tokens too (CLS and registers at the first "
                   "patch's angles)",
    "interleaved": "the rotation's pairs interleaved (2i, 2i+1) instead of split halves",
    "key_bias": "a key bias added (the original qkv.bias's key third, masked to 0 upstream)",
    "theta_10000": "theta 10000 (the LLMs' base) instead of 100",
    "coords_raw": "patch coordinates not normalised (i + 0.5, EVA style)",
    "axes_swapped": "the x angles first, then y",
}

# the cases a control runs on: every mistake above changes any DINOv3's computation, so
# two 4-layer cases (hf and timm names, .safetensors and .pth, 224x320 and 224x224, with
# and without q/v biases) show it as well as the seven, in a third of the time
CONTROL_CASES = ("splus16_hf_swiglu", "splus16_timm_swiglu_pth")

# backward: a head on the CLS token (C classes), timm's names, 4 layers
BACKWARD = {
    "s16_head": dict(shape="S", names="timm", file="safetensors", size=(224, 320), qv_bias=True,
                     L=4, C=10),
    "splus16_head_swiglu": dict(shape="S+", names="timm", file="pth", size=(320, 224),
                                qv_bias=True, L=4, C=7),
}


def spec(name):
    c = dict(CASES[name] if name in CASES else BACKWARD[name], name=name)
    s = dict(SHAPES[c["shape"]])
    s.update({k: c[k] for k in ("L",) if k in c})
    c.update(s, C=c.get("C", 0))
    return c


# --- the checkpoint ----------------------------------------------------------------------


def random_weights(c, g):
    """Random float32 weights in transformers' names (the reference reads these): queries and
    keys with std 1.7/sqrt(D) (peaked attention), LayerScale 0.5 +- 0.3, q/v biases 0.3 (so a
    rotated bias shows), prefix tokens far from zero; plus 'k_bias_unused', a key bias the
    checkpoint does not hold (the key_bias control adds it)."""
    D, L, F_, C = c["D"], c["L"], c["F"], c["C"]

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    w = {"embeddings.cls_token": rn(1, 1, D, std=0.5), "embeddings.mask_token": torch.zeros(1, 1, D),
         "embeddings.register_tokens": rn(1, R, D, std=0.5),
         "embeddings.patch_embeddings.weight": rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P)),
         "embeddings.patch_embeddings.bias": rn(D, std=0.1)}
    for l in range(L):
        b, a = f"layer.{l}.", f"layer.{l}.attention."
        w |= {b + "norm1.weight": 1 + rn(D, std=0.2), b + "norm1.bias": rn(D, std=0.1),
              a + "q_proj.weight": rn(D, D, std=1.7 / math.sqrt(D)),
              a + "k_proj.weight": rn(D, D, std=1.7 / math.sqrt(D)),
              a + "v_proj.weight": rn(D, D, std=1 / math.sqrt(D)),
              a + "o_proj.weight": rn(D, D, std=1 / math.sqrt(D)), a + "o_proj.bias": rn(D, std=0.1),
              b + "layer_scale1.lambda1": 0.5 + rn(D, std=0.3),
              b + "norm2.weight": 1 + rn(D, std=0.2), b + "norm2.bias": rn(D, std=0.1),
              b + "mlp.up_proj.weight": rn(F_, D, std=1 / math.sqrt(D)), b + "mlp.up_proj.bias": rn(F_, std=0.1),
              b + "mlp.down_proj.weight": rn(D, F_, std=1 / math.sqrt(F_)),
              b + "mlp.down_proj.bias": rn(D, std=0.1),
              b + "layer_scale2.lambda1": 0.5 + rn(D, std=0.3),
              "k_bias_unused." + str(l): rn(D, std=0.3)}
        if c["qv_bias"]:
            w |= {a + "q_proj.bias": rn(D, std=0.3), a + "v_proj.bias": rn(D, std=0.3)}
        if c["gated"]:  # gate and value of different scales: a swap shows
            w |= {b + "mlp.gate_proj.weight": rn(F_, D, std=1.5 / math.sqrt(D)),
                  b + "mlp.gate_proj.bias": rn(F_, std=0.3)}
    w |= {"norm.weight": 1 + rn(D, std=0.2), "norm.bias": rn(D, std=0.1)}
    if C:
        w |= {"head.weight": rn(C, D, std=2 / math.sqrt(D)), "head.bias": rn(C, std=0.1)}
    return w


def to_timm(w, c):
    """transformers' names -> timm's Eva (eva.py checkpoint_filter_fn's output): one qkv
    weight (rows q, k, v), q_bias and v_bias (the _qkvb variants) or none, gamma_1/gamma_2,
    mlp.fc1/fc2 or the SwiGLU's fc1_g (gate), fc1_x (value), fc2."""
    t = {"cls_token": w["embeddings.cls_token"], "reg_token": w["embeddings.register_tokens"],
         "patch_embed.proj.weight": w["embeddings.patch_embeddings.weight"],
         "patch_embed.proj.bias": w["embeddings.patch_embeddings.bias"],
         "norm.weight": w["norm.weight"], "norm.bias": w["norm.bias"]}
    for l in range(c["L"]):
        b, a, o = f"layer.{l}.", f"layer.{l}.attention.", f"blocks.{l}."
        t |= {o + "norm1.weight": w[b + "norm1.weight"], o + "norm1.bias": w[b + "norm1.bias"],
              o + "attn.qkv.weight": torch.cat([w[a + "q_proj.weight"], w[a + "k_proj.weight"],
                                                w[a + "v_proj.weight"]]),
              o + "attn.proj.weight": w[a + "o_proj.weight"], o + "attn.proj.bias": w[a + "o_proj.bias"],
              o + "gamma_1": w[b + "layer_scale1.lambda1"], o + "gamma_2": w[b + "layer_scale2.lambda1"],
              o + "norm2.weight": w[b + "norm2.weight"], o + "norm2.bias": w[b + "norm2.bias"],
              o + "mlp.fc2.weight": w[b + "mlp.down_proj.weight"], o + "mlp.fc2.bias": w[b + "mlp.down_proj.bias"]}
        if c["qv_bias"]:
            t |= {o + "attn.q_bias": w[a + "q_proj.bias"], o + "attn.v_bias": w[a + "v_proj.bias"]}
        up = "mlp.fc1_x." if c["gated"] else "mlp.fc1."
        t |= {o + up + "weight": w[b + "mlp.up_proj.weight"], o + up + "bias": w[b + "mlp.up_proj.bias"]}
        if c["gated"]:
            t |= {o + "mlp.fc1_g.weight": w[b + "mlp.gate_proj.weight"],
                  o + "mlp.fc1_g.bias": w[b + "mlp.gate_proj.bias"]}
    if c["C"]:
        t |= {"head.weight": w["head.weight"], "head.bias": w["head.bias"]}
    return t


def config_json(c):
    if c["names"] == "timm":  # timm's hub config: nothing about RoPE, registers or SwiGLU
        arch = {"S": "vit_small", "S+": "vit_small_plus", "B": "vit_base"}[c["shape"]]
        return {"architecture": f"{arch}_patch16_dinov3{'_qkvb' if c['qv_bias'] else ''}",
                "num_classes": c["C"], "num_features": c["D"], "global_pool": "token",
                "pretrained_cfg": {"input_size": [3, 256, 256], "interpolation": "bicubic",
                                   "crop_pct": 1.0, "crop_mode": "center",
                                   "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}}
    return {"architectures": ["DINOv3ViTModel"], "model_type": "dinov3_vit",
            "hidden_size": c["D"], "intermediate_size": c["F"], "num_hidden_layers": c["L"],
            "num_attention_heads": c["H"], "hidden_act": "silu" if c["gated"] else "gelu",
            "layer_norm_eps": 1e-5, "rope_theta": THETA, "image_size": 224, "patch_size": P,
            "num_channels": 3, "query_bias": c["qv_bias"], "key_bias": False,
            "value_bias": c["qv_bias"], "proj_bias": True, "mlp_bias": True,
            "layerscale_value": 1.0, "use_gated_mlp": c["gated"], "num_register_tokens": R,
            "pos_embed_shift": None, "pos_embed_jitter": None, "pos_embed_rescale": 2.0,
            "torch_dtype": "float32"}


def write_case(c, d, seed):
    g = torch.Generator().manual_seed(seed)
    w = random_weights(c, g)
    stored = {k: v for k, v in w.items() if not k.startswith("k_bias_unused")}
    if c["names"] == "timm":
        stored = to_timm(w, c)
    stored = dict(sorted(stored.items()))
    d.mkdir(parents=True, exist_ok=True)
    for old in ("model.safetensors", "model.pth", "pytorch_model.bin"):
        (d / old).unlink(missing_ok=True)
    if c["file"] == "pth":
        path = d / ("pytorch_model.bin" if c["names"] == "hf" else "model.pth")
        torch.save(stored, path)
    else:
        path = d / "model.safetensors"
        write_safetensors(path, stored, "F32")
    (d / "config.json").write_text(json.dumps(config_json(c), indent=1))
    return w, path


# --- the reference, from modeling_dinov3_vit.py ------------------------------------------


def rope_cos_sin(gh, gw, Dh, dtype, wrong=None):
    """DINOv3ViTRopePositionEmbedding at eval: cos, sin [N, Dh].
      coords = get_patches_center_coordinates: ((i + 0.5) / gh, (j + 0.5) / gw) * 2 - 1
      inv_freq = 1 / base ** arange(0, 1, 4 / Dh);  angles = 2 pi coords[:, :, None] * inv_freq
      angles.flatten(1, 2) ([y angles, x angles]).tile(2)"""
    theta = 10000.0 if wrong == "theta_10000" else THETA
    inv_freq = 1 / theta ** torch.arange(0, 1, 4 / Dh, dtype=dtype)
    ys, xs = torch.arange(gh, dtype=dtype) + 0.5, torch.arange(gw, dtype=dtype) + 0.5
    if wrong != "coords_raw":
        ys, xs = 2 * ys / gh - 1, 2 * xs / gw - 1
    coords = torch.stack(torch.meshgrid(ys, xs, indexing="ij"), dim=-1).flatten(0, 1)  # [N, 2]
    if wrong == "axes_swapped":
        coords = coords.flip(-1)
    angles = (2 * math.pi * coords[:, :, None] * inv_freq[None, None, :]).flatten(1, 2)
    if wrong == "interleaved":  # pairs (2i, 2i+1): each angle twice in a row
        angles = angles.repeat_interleave(2, dim=-1)
    else:
        angles = angles.tile(2)
    return angles.cos(), angles.sin()


def rotate_half(u):
    h = u.shape[-1] // 2
    return torch.cat([-u[..., h:], u[..., :h]], dim=-1)


def rotate_interleaved(u):  # the mistake: (u0, u1) -> (-u1, u0)
    return torch.stack([-u[..., 1::2], u[..., 0::2]], dim=-1).flatten(-2)


class Dinov3Ref:
    """test_backward.py's reference interface: forward(x, dtype, tap, ops) -> (logits [C] or
    None, att [L, H, T, T]) and head(z, dtype, ops), Np prefix tokens, C classes; tap
    ("norm1", "att", "tokens") and ops ("layer_norm", "softmax", "gelu", "silu", "mul") as
    reference.py's. extra() holds the last forward's last_hidden_state."""

    def __init__(self, w, c, wrong=None, perm=None, no_rope=False):
        self.w, self.c, self.wrong = w, c, wrong
        self.perm, self.no_rope = perm, no_rope  # an intervention: angles of patch perm[p], none
        self.H, self.Np, self.C, self.eps = c["H"], 1 + R, c["C"], 1e-5
        self._w = {}

    def weights(self, dtype):
        if dtype not in self._w:
            self._w[dtype] = {k: v.to(dtype) for k, v in self.w.items()}
        return self._w[dtype]

    def forward(self, x, dtype=torch.float64, tap=lambda n, l, t: t, ops=None):
        ops, w, c, wrong = ops or {}, self.weights(dtype), self.c, self.wrong
        ln_op = ops.get("layer_norm", F.layer_norm)
        softmax = ops.get("softmax", lambda s: s.softmax(dim=-1))
        gelu, silu = ops.get("gelu", F.gelu), ops.get("silu", F.silu)
        mul = ops.get("mul", lambda a, b: a * b)
        D, H, L = c["D"], c["H"], c["L"]
        Dh = D // H
        x = torch.as_tensor(x).to(dtype)
        if x.dim() == 3:
            x = x[None]
        # DINOv3ViTEmbeddings: patch_embeddings(x).flatten(2).transpose(1, 2); cat(cls, reg, p)
        t = F.conv2d(x, w["embeddings.patch_embeddings.weight"], w["embeddings.patch_embeddings.bias"],
                     stride=P)
        gh, gw = t.shape[-2:]
        t = t.flatten(2).transpose(1, 2)
        h = torch.cat([w["embeddings.cls_token"], w["embeddings.register_tokens"], t], dim=1)
        T, Np = h.shape[1], self.Np
        cos, sin = rope_cos_sin(gh, gw, Dh, dtype, wrong)
        if self.perm is not None:  # the position shuffle: patch p rotated as patch perm[p]
            cos, sin = cos[self.perm], sin[self.perm]
        if self.no_rope:
            cos, sin = torch.ones_like(cos), torch.zeros_like(sin)
        rot = rotate_interleaved if wrong == "interleaved" else rotate_half
        if wrong == "rope_prefix":  # the prefix at the first patch's angles
            cos, sin = torch.cat([cos[:1].expand(Np, -1), cos]), torch.cat([sin[:1].expand(Np, -1), sin])

        def ln(u, name):
            return ln_op(u, (D,), w[name + ".weight"], w[name + ".bias"], self.eps)

        def dense(u, name, bias=True):
            return F.linear(u, w[name + ".weight"], w.get(name + ".bias") if bias else None)

        def heads(u):
            return u.view(1, T, H, Dh).transpose(1, 2)

        def rope(u):  # apply_rotary_pos_emb on the last N tokens (num_prefix_tokens = T - N)
            n0 = T - cos.shape[0]
            pre, pat = u[:, :, :n0], u[:, :, n0:]
            return torch.cat([pre, pat * cos + rot(pat) * sin], dim=-2)

        att = []
        for l in range(L):
            b, a = f"layer.{l}.", f"layer.{l}.attention."
            s = tap("norm1", l, ln(h, b + "norm1"))
            q = dense(s, a + "q_proj")
            k = dense(s, a + "k_proj", bias=False)  # key_bias False
            if wrong == "key_bias":
                k = k + w["k_bias_unused." + str(l)]
            v = dense(s, a + "v_proj")
            q, k, v = rope(heads(q)), rope(heads(k)), heads(v)
            # eager_attention_forward: softmax(q k^T * scaling), scaling = Dh ** -0.5
            p = tap("att", l, softmax(torch.matmul(q, k.transpose(-1, -2)) * Dh**-0.5))
            att.append(p[0])
            ctx = torch.matmul(p, v).transpose(1, 2).reshape(1, T, D)
            h = dense(ctx, a + "o_proj") * w[b + "layer_scale1.lambda1"] + h
            u = ln(h, b + "norm2")
            if c["gated"]:  # DINOv3ViTGatedMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x))
                m = dense(mul(silu(dense(u, b + "mlp.gate_proj")), dense(u, b + "mlp.up_proj")),
                          b + "mlp.down_proj")
            else:  # DINOv3ViTMLP: down_proj(act_fn(up_proj(x)))
                m = dense(gelu(dense(u, b + "mlp.up_proj")), b + "mlp.down_proj")
            h = tap("tokens", l, m * w[b + "layer_scale2.lambda1"] + h)
        self.hidden = ln(h, "norm")[0]  # DINOv3ViTModel: last_hidden_state = norm(x)
        logits = self.head(h, dtype, ops) if self.C else None
        return logits, torch.stack(att)

    def head(self, z, dtype=torch.float64, ops=None):
        """A classifier on the CLS token: head(norm(z)[:, 0])."""
        w = self.weights(dtype)
        ln_op = (ops or {}).get("layer_norm", F.layer_norm)
        n = ln_op(z[:, 0], (self.c["D"],), w["norm.weight"], w["norm.bias"], self.eps)
        return F.linear(n, w["head.weight"], w["head.bias"])[0]


# --- the comparison ----------------------------------------------------------------------


def run_case(name, args, rep, wrong=None):
    c = spec(name)
    d = Path(args.work) / name
    Sh, Sw = c["size"]
    print(f"\n[{name}] {c['names']} DINOv3 ViT-{c['shape']}/16 ({c['file']}), D={c['D']} "
          f"L={c['L']} H={c['H']} F={c['F']}{' SwiGLU' if c['gated'] else ''}, registers {R}, "
          f"q/v bias {c['qv_bias']}, input {Sh}x{Sw}"
          + (f"; reference with the mistake: {CONTROLS[wrong]}" if wrong else ""))
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(7))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    engine, cfg = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--size",
                                       f"{Sh}x{Sw}", "--tokens", "--out", d / "out"])
    gh, gw = Sh // P, Sw // P
    check_config(rep, name, cfg, dict(
        naming=c["names"], layout=f"{c['names']}-dinov3", image_h=Sh, image_w=Sw, patch_size=P,
        grid_h=gh, grid_w=gw, n_prefix=1 + R, n_registers=R, n_tokens=1 + R + gh * gw,
        pos_prefix=0, dim=c["D"], n_heads=c["H"], n_layers=c["L"], mlp_dim=c["F"], n_classes=0,
        rope=1, mlp_gated=int(c["gated"]), mlp_act=4 if c["gated"] else 0))
    rep.check(abs(cfg["ln_eps"] - 1e-5) <= 1e-12 and cfg["rope_theta"] == THETA,
              f"{name}: LayerNorm eps {cfg['ln_eps']}, rope_theta {cfg['rope_theta']}, expected "
              f"1e-5 and {THETA}")
    ref = Dinov3Ref(w, c, wrong)
    att64 = ref.forward(x)[1]
    hid64 = ref.hidden
    ref32 = Dinov3Ref(w, c, wrong)
    att32 = ref32.forward(x, torch.float32)[1]
    if not wrong:
        check_peaked(rep, name, att64)
    if not check_attention(rep, name, engine["att"], att64, att32, ATT_TOL):
        return
    check_relative(rep, name, "last_hidden_state", engine["features"][-1], hid64, ref32.hidden,
                   HIDDEN_TOL)
    if not wrong:  # the table the engine rotates with
        cos, sin = rope_cos_sin(gh, gw, c["D"] // c["H"], torch.float64)
        Dh2 = cos.shape[1] // 2
        want = torch.cat([cos[:, :Dh2], sin[:, :Dh2]], dim=1).numpy()
        check_table(rep, name, "rotary table", engine.get("rope"), want, ROPE_TOL)
        rep.check("pos" not in engine, f"{name}: a position embedding written for a rotary model")


def run_control(wrong, args, rep):
    for name in CONTROL_CASES:
        run_case(name, args, rep, wrong)


def run_backward(name, args, rep):
    import test_backward as tb
    c = spec(name)
    d = Path(args.work) / name
    Sh, Sw = c["size"]
    print(f"\n[{name}] backward: timm DINOv3 ViT-{c['shape']}/16 + head [{c['C']}, {c['D']}], "
          f"L={c['L']}, input {Sh}x{Sw}")
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(11))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    ref = Dinov3Ref(w, c)
    lg = ref.forward(x)[0]
    second = int(torch.argsort(lg, descending=True)[2])
    dargs = ["--model", path, "--input", d / "input.f32", "--size", f"{Sh}x{Sw}"]
    tb.backward_case(rep, name, ref, args.dump, dargs, d / "bk", [-1, second], tb.TOL["random"])


# interventions on a rotary model (vit.h "Interventions"): the position shuffle permutes the
# rotary angles (patch p rotated as patch perm[p]), the position zero removes the rotation
INTERVENTIONS = {
    "shuffle": dict(shape="S", names="hf", file="safetensors", size=(224, 320), qv_bias=True, L=4,
                    pos="shuffle:5"),
    "zero": dict(shape="S+", names="timm", file="safetensors", size=(224, 224), qv_bias=True, L=4,
                 pos="zero"),
}


def run_interv(name, args, rep):
    c = dict(INTERVENTIONS[name], name=name)
    c.update({k: v for k, v in SHAPES[c["shape"]].items() if k != "L"}, C=0)
    d = Path(args.work) / ("interv_" + name)
    Sh, Sw = c["size"]
    print(f"\n[{name}] --pos {c['pos']} on DINOv3 ViT-{c['shape']}/16 ({c['names']}), L={c['L']}, "
          f"input {Sh}x{Sw}")
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(5))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    engine, _ = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--size",
                                     f"{Sh}x{Sw}", "--pos", c["pos"], "--out", d / "out"])
    perm = None
    if "pos_perm" in engine:
        perm = torch.from_numpy(engine["pos_perm"].astype(np.int64))
        rep.check(sorted(perm.tolist()) == list(range(len(perm))) and
                  bool((perm != torch.arange(len(perm))).any()), f"{name}: pos_perm not a shuffle")
    ref = Dinov3Ref(w, c, perm=perm, no_rope=c["pos"] == "zero")
    att = ref.forward(x)[1].numpy()
    plain = Dinov3Ref(w, c).forward(x)[1].numpy()
    da, moved = np.abs(engine["att"] - att).max(), np.abs(plain - att).max()
    print(f"  attention max|engine - f64 (intervened)| = {da:.2e} (tol {ATT_TOL:.0e}); the "
          f"intervention moves it by {moved:.2e}")
    rep.check(da <= ATT_TOL, f"{name}: attention differs from the intervened reference by {da:.2e}")
    rep.check(moved > 100 * ATT_TOL, f"{name}: the intervention changes nothing the test can see")
    N, Np = engine["cls_att"].shape[-1], 1 + R  # the maps read the same intervened attention
    dc = np.abs(engine["cls_att"] - att[:, :, 0, Np:Np + N]).max()
    rep.check(dc <= ATT_TOL, f"{name}: vit_map_attention's CLS rows differ by {dc:.2e}")


# --- refusals ----------------------------------------------------------------------------


def run_refusals(args, rep):
    work = Path(args.work) / "refusals"
    tiny = dict(shape="S", names="hf", file="safetensors", size=(32, 32), qv_bias=True,
                D=64, L=1, H=2, F=128, gated=False, C=0)
    cases = []
    cases.append((dict(tiny, name="gated_config"), {"use_gated_mlp": True}, None,
                  ["use_gated_mlp is true", "lacks a gated MLP's gate"]))
    cases.append((dict(tiny, name="key_bias_alone", qv_bias=False), {}, "k_bias",
                  ["block 0 has biases for some of query, key, value"]))
    cases.append((dict(tiny, name="rope_theta_bad"), {"rope_theta": "100"}, None,
                  ["rope_theta"]))
    for c, cfg_edit, edit, want in cases:
        d = work / c["name"]
        w, path = write_case(c, d, seed=3)
        if edit == "k_bias":
            st = {k: v for k, v in w.items() if not k.startswith("k_bias_unused")}
            st["layer.0.attention.k_proj.bias"] = torch.zeros(c["D"])
            write_safetensors(path, dict(sorted(st.items())), "F32")
        cfg = json.loads((d / "config.json").read_text()) | cfg_edit
        (d / "config.json").write_text(json.dumps(cfg))
        np.zeros((3, 32, 32), np.float32).tofile(d / "input.f32")
        r = subprocess.run([args.dump, "--model", path, "--input", d / "input.f32", "--out", d / "out"],
                           capture_output=True, text=True)
        msg = r.stderr.strip()
        print(f"[{c['name']}] exit {r.returncode}: {msg}")
        rep.check(r.returncode == 1 and all(s in msg for s in want),
                  f"{c['name']}: expected a refusal naming {want}, got exit {r.returncode}: {msg}")


LESSON_TOL = 1e-5  # the RoPE step's arrays, max abs / max |reference|
# a rotary backbone's steps: the table's (app/view/lessonfile.c, lesson_table.py)
LESSON_STEPS = lesson_table.steps({"rope"})


def lesson_reference(w, c, block_in, layer, head, token, gh, gw, wrong=None, perm=None):
    """The RoPE step in float64 from the engine's input to the block (block_in [T, D]):
    q0, k0 [Dh] (before the rotation), q, k [Dh] (after), angles [Dh/2] (wrapped), and
    scores [gh, gw]: q . R(a_p) k0 / sqrt(Dh) for every patch p."""
    D, H = c["D"], c["H"]
    Dh, Np = D // H, 1 + R
    w = {k: v.double() for k, v in w.items()}
    x = torch.as_tensor(block_in).double()
    b, a = f"layer.{layer}.", f"layer.{layer}.attention."
    u = F.layer_norm(x, (D,), w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-5)
    sl = slice(head * Dh, (head + 1) * Dh)
    q0 = F.linear(u, w[a + "q_proj.weight"], w.get(a + "q_proj.bias"))[token, sl]
    k0 = F.linear(u, w[a + "k_proj.weight"])[token, sl]
    cos, sin = rope_cos_sin(gh, gw, Dh, torch.float64, wrong)
    if perm is not None:
        cos, sin = cos[perm], sin[perm]
    rot = rotate_interleaved if wrong == "interleaved" else rotate_half
    p = token - Np
    if p >= 0:
        q, k = q0 * cos[p] + rot(q0) * sin[p], k0 * cos[p] + rot(k0) * sin[p]
        ang = torch.atan2(sin[p], cos[p])
    else:
        q, k, ang = q0, k0, torch.zeros(Dh)
    kp = k0[None] * cos + rot(k0[None]) * sin  # [N, Dh]: the key at every patch
    scores = (kp @ q) * Dh**-0.5
    half = Dh // 2 if wrong != "interleaved" else None
    angles = ang[:half] if half else ang[0::2]
    return dict(query0=q0, key0=k0, query=q, key=k, angles=angles,
                rope_scores=scores.reshape(gh, gw))


def run_lesson(args, rep, wrong=None):
    from PIL import Image
    c = dict(spec("s16_hf_224"), L=3, name="lesson_s16")
    Sh, Sw = 224, 320
    gh, gw = Sh // P, Sw // P
    d = Path(args.work) / "lesson_s16"
    w, path = write_case(c, d, seed=35)
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(8))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    Np, H = 1 + R, c["H"]
    # (layer, head, token, patch, --pos): the CLS token is not rotated; under a position
    # shuffle the token and every key are turned by the angles of patch perm[p]
    sels = [(1, 2, Np + 3 * gw + 13, 3 * gw + 13, None), (2, 5, Np + 11 * gw + 2, 11 * gw + 2, None),
            (0, 0, 0, 0, None), (1, 4, Np + 6 * gw + 7, 6 * gw + 7, "shuffle:5")]
    got_e = None
    for layer, head, token, patch, pos in sels:
        label = f"lesson RoPE step: block {layer} head {head} token {token}{' --pos ' + pos if pos else ''}"
        e, _ = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--size",
                                    f"{Sh}x{Sw}", "--out", d / "out", "--lesson",
                                    f"{layer},{head},{token},{patch}"] + (["--pos", pos] if pos else []))
        perm = torch.from_numpy(e["pos_perm"].astype(np.int64)) if pos else None
        if pos:
            rep.check(int(perm[patch]) != patch, f"{label}: the shuffle leaves the patch in place")
        ref = lesson_reference(w, c, e["lesson_block_in"], layer, head, token, gh, gw, wrong, perm)
        got = {"query0": e["lesson_query0"], "key0": e["lesson_key0"], "query": e["lesson_query"],
               "key": e["lesson_keys"][token], "angles": e["lesson_angles"],
               "rope_scores": e["lesson_rope_scores"]}
        worst = []
        for k, r in ref.items():
            r = r.numpy()
            ok = got[k].shape == r.shape
            err = float(np.abs(got[k] - r).max()) / max(float(np.abs(r).max()), 1e-30) if ok else 1.0
            if k == "angles" and ok:  # wrapped angles: compare on the circle
                err = float(np.abs(np.angle(np.exp(1j * (got[k] - r)))).max())
            worst.append(f"{k} {err:.1e}")
            rep.check(ok and err <= LESSON_TOL, f"{label}: {k} differs by {err:.1e} "
                      f"(shape {got[k].shape} vs {r.shape})", guard=label)
        print(f"[{label}] max|engine - f64| / max|f64|: {', '.join(worst)}")
        if token >= Np and not pos:  # the offset property on the engine's own numbers: q0^T R(a_p - a_t) k0
            rs = e["lesson_rope_scores"]
            rep.check(abs(rs.flat[patch] - float(np.dot(e["lesson_query0"], e["lesson_key0"]))
                          / np.sqrt(c["D"] // H)) <= 1e-4 * np.abs(rs).max(),
                      f"{label}: the score at the token's own patch is not q0 . k0 / sqrt(Dh)")
            got_e = got_e or (e, layer, head, patch)
    if wrong:
        return
    # the export on the same file, the first selection
    e, layer, head, patch = got_e
    photo = d / "photo.png"
    Image.fromarray((np.random.default_rng(1).random((Sh, Sw, 3)) * 255).astype(np.uint8)).save(photo)
    for pos in [""]:  # --lesson-export shows the unchanged model
        out = d / f"export{pos}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [args.vitlens, "--model", path, "--size", f"{Sh}x{Sw}", "--lesson-export", out,
               "--layer", str(layer + 1), "--head", str(head + 1), "--patch",
               f"{patch // gw + 1},{patch % gw + 1}"] + (["--pos-embed", pos, "--pos-seed", "5"] if pos else []) + [photo]
        p = subprocess.run([str(a) for a in cmd], capture_output=True, text=True)
        label = f"--lesson-export{' --pos-embed ' + pos if pos else ''}"
        print(f"  $ {' '.join(map(str, cmd))}\n  {p.stdout.strip()} {p.stderr.strip()}")
        if not rep.check(p.returncode == 0, f"{label}: exit {p.returncode}: {p.stderr}"):
            continue
        steps = json.loads((out / "steps.json").read_text())["steps"]
        names = [st["name"] for st in steps]
        rep.check(names == LESSON_STEPS, f"{label}: steps {names}")
        st = steps[LESSON_STEPS.index("rope")] if "rope" in names else None
        if not rep.check(st is not None, f"{label}: no rope step"):
            continue
        files = {a["file"]: a["shape"] for a in st["arrays"]}
        rope = f"{LESSON_STEPS.index('rope') + 1:02d}_rope"  # the files' stems, numbered
        query = f"{LESSON_STEPS.index('query') + 1:02d}_query"
        want = {f"{rope}{s}.npy" for s in ["", "_q", "_q_rotated", "_k", "_k_rotated", "_angles"]}
        rep.check(set(files) == want, f"{label}: rope arrays {sorted(files)}")
        rep.check(st["caption"].endswith(f"[{gh}, {gw}]") and (out / st["picture"]).exists()
                  and st["caption"] in (out / "lesson.md").read_text(),
                  f"{label}: caption '{st['caption']}', picture {st['picture']}")
        if set(files) != want:
            continue
        # the photo's run, not input.f32's: compare against the reference on its block input
        blk = np.load(out / f"{query}.npy")  # only to know the export ran the same selection
        rs = np.load(out / f"{rope}.npy")
        q0, k0 = np.load(out / f"{rope}_q.npy"), np.load(out / f"{rope}_k.npy")
        ang = np.load(out / f"{rope}_angles.npy")
        rep.check(np.array_equal(np.load(out / f"{rope}_q_rotated.npy"), blk),
                  f"{label}: q_rotated is not the query step's query")
        # the rotation the picture shows, recomputed from the export's own arrays
        Dh = c["D"] // H
        cos, sin = rope_cos_sin(gh, gw, Dh, torch.float64)
        sel_ang = np.arctan2(sin.numpy(), cos.numpy())[:, : Dh // 2]
        # which patch's angles the token was turned by: its own, or (shuffle) another's
        hit = np.where(np.abs(np.angle(np.exp(1j * (sel_ang - ang[None])))).max(axis=1) < 1e-5)[0]
        if pos:
            rep.check(len(hit) == 1 and hit[0] != patch,
                      f"{label}: the angles are patch {hit.tolist()}'s, expected a shuffled one, not {patch}")
        else:
            rep.check(hit.tolist() == [patch], f"{label}: the angles are patch {hit.tolist()}'s, expected {patch}")
        q0t, k0t = torch.from_numpy(q0).double(), torch.from_numpy(k0).double()
        qr = torch.from_numpy(np.load(out / f"{rope}_q_rotated.npy")).double()
        kp = k0t[None] * cos + rotate_half(k0t[None]) * sin
        if pos and len(hit) == 1:  # the key at patch p turned by perm[p]'s angles: unknown
            continue              # here beyond the token's own; the map is checked unshuffled
        ref = ((kp @ qr) * Dh**-0.5).reshape(gh, gw).numpy()
        err = float(np.abs(rs - ref).max()) / float(np.abs(ref).max())
        print(f"  {label}: rope map max|export - f64| / max = {err:.1e}")
        rep.check(err <= LESSON_TOL, f"{label}: the rope map differs by {err:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["case", "control", "backward", "interv", "refusals", "list",
                                     "lesson"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump")
    ap.add_argument("--vitlens")
    ap.add_argument("--work")
    ap.add_argument("--control", choices=["interleaved", "theta_10000"])
    args = ap.parse_args()
    if args.part == "list":
        print(";".join(CASES) + "|" + ";".join(CONTROLS) + "|" + ";".join(BACKWARD) + "|"
              + ";".join(INTERVENTIONS))
        return 0
    torch.set_num_threads(1)
    rep, t0 = Report(), time.time()
    table = {"case": CASES, "control": CONTROLS, "backward": BACKWARD,
             "interv": INTERVENTIONS}.get(args.part)
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
    elif args.part == "interv":
        run_interv(args.name, args, rep)
        code = rep.exit_code()
    elif args.part == "lesson":
        run_lesson(args, rep, args.control)
        code = (rep.control_exit_code(CONTROLS[args.control]) if args.control
                else rep.exit_code())
    else:
        run_refusals(args, rep)
        code = rep.exit_code()
    print(f"({time.time() - t0:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
