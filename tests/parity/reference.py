"""reference.py - a plain-PyTorch forward pass of timm's VisionTransformer.

Written from the semantics of timm/models/vision_transformer.py (VisionTransformer,
Block, Attention with fused_attn=False, Mlp, LayerScale, _pos_embed with
dist/register tokens and no_embed_class), deit.py (VisionTransformerDistilled)
and layers/pos_embed.py (resample_abs_pos_embed), with no code shared with the engine:
it reads .safetensors itself and uses only torch primitives. It returns the
logits and every attention matrix, computed in the dtype asked for (float64 is
the ground truth the engine's float32 is compared with).

    weights = load_safetensors("m.safetensors")       # {name: float64 tensor}
    logits, att = vit_forward(weights, x, n_heads=3)  # x [3, S, S]; att [L, H, T, T]

For the backward pass (test_backward.py) the forward pass takes two optional
hooks, both absent by default (then it is the plain forward pass above):
  tap(name, l, t) -> t   sees (and may replace) the intermediate tensors autograd
                         needs: "norm1" (block l's norm1 output [1, T, D]), "att"
                         (block l's softmax probabilities [1, H, T, T], what tap
                         returns is what the block multiplies V with), "tokens"
                         (block l's output [1, T, D]);
  ops {name: function}   replaces "layer_norm" (F.layer_norm's signature), "gelu"
                         (F.gelu's) or "softmax" (scores [.., T] -> probabilities
                         over the last dim): AttnLRP's rules, planted mistakes.
"""
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: safetensors_io
from safetensors_io import read_safetensors  # noqa: E402

# --- safetensors -------------------------------------------------------------


def load_safetensors(path):
    """{name: float64 tensor} from a .safetensors file (tests/safetensors_io.py reads it:
    F16 and BF16 upcast exactly, so the reference sees the stored values)."""
    return {k: torch.from_numpy(v.astype(np.float64)) for k, v in read_safetensors(path).items()}


# --- position embedding -------------------------------------------------------


def pos_layout(w, n_prefix, pos_grid=None):
    """(Npos, gh0, gw0) of timm's pos_embed [1, Npos + gh0*gw0, D]: Npos = n_prefix
    (pos_embed covers the CLS/dist tokens, timm's default) or 0 (no_embed_class:
    register models, DeiT III). pos_grid (gh0, gw0) is the training grid when
    config.json gives one; otherwise the grid is square."""
    n = w["pos_embed"].shape[1]
    if pos_grid is not None:
        gh0, gw0 = pos_grid
        return (n_prefix if n == n_prefix + gh0 * gw0 else 0), gh0, gw0
    for npos in (n_prefix, 0):
        side = math.isqrt(max(n - npos, 0))
        if n - npos >= 1 and side * side == n - npos:
            return npos, side, side
    raise ValueError(f"pos_embed with {n} positions fits no square grid")


def resample_abs_pos_embed(posemb, new_size, old_size, num_prefix_tokens, antialias=True):
    """timm/layers/pos_embed.py resample_abs_pos_embed, in torch: the prefix rows
    kept, the grid resized by F.interpolate(mode='bicubic', antialias=antialias,
    align_corners=False). timm interpolates in float32; here in posemb's dtype.
    Nothing is done when the size and token count match (timm's shortcut)."""
    num_new_tokens = new_size[0] * new_size[1] + num_prefix_tokens
    if num_new_tokens == posemb.shape[1] and new_size[0] == new_size[1]:
        return posemb
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    D = posemb.shape[-1]
    grid = grid.reshape(1, old_size[0], old_size[1], D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_size), mode="bicubic", antialias=antialias,
                         align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, D)
    return torch.cat([prefix, grid], dim=1)


# --- forward pass ------------------------------------------------------------


def no_tap(name, l, t):
    return t


def head_logits(w, x, ln_eps=1e-6, layer_norm=F.layer_norm, out=None, wrong=None):
    """The final norm and the head on tokens x [1, T, D] (w already in x's dtype):
    logits [C] of the CLS token ([B, C] for tokens [B, T, D], B > 1), or for a distilled model the mean of head(CLS)
    and head_dist(dist) (deit.py forward_head at inference); None without head.
    Pooled heads (timm VisionTransformer.forward_head: pool, fc_norm, head):
      fc_norm.* present (global_pool 'avg', norm an Identity when absent):
        head(fc_norm(mean(norm(x)[:, Np:])))
      head.weight [C, 2D] (transformers' Dinov2ForImageClassification, named as timm's):
        head(cat([norm(x)[:, 0], mean(norm(x)[:, Np:])]))
    Np the prefix tokens (cls_token, dist_token, reg_token). wrong, a plausible mistake:
    "mean_prefix" (the mean over every token, prefix ones too), "norm_not_fc" (fc_norm's
    weights applied to every token before the mean), "cls_only" ([CLS ; 0]).
    out, a dict, receives "logits_dist". LeGrad calls this on every block's output."""
    if "head.weight" not in w:
        return None
    D = x.shape[-1]
    Np = sum(w[k].shape[1] for k in ("cls_token", "dist_token", "reg_token") if k in w)
    if "norm.weight" in w:
        x = layer_norm(x, (D,), w["norm.weight"], w["norm.bias"], ln_eps)
    one = (lambda t: t[0]) if x.shape[0] == 1 else (lambda t: t)
    p0 = 0 if wrong == "mean_prefix" else Np
    if w["head.weight"].shape[1] == 2 * D:  # [CLS ; mean of the patches]
        mean = torch.zeros_like(x[:, 0]) if wrong == "cls_only" else x[:, p0:].mean(dim=1)
        return one(F.linear(torch.cat([x[:, 0], mean], dim=-1), w["head.weight"], w.get("head.bias")))
    if "fc_norm.weight" in w:  # the mean of the patch tokens, then fc_norm
        if wrong == "norm_not_fc":
            pooled = layer_norm(x, (D,), w["fc_norm.weight"], w["fc_norm.bias"], ln_eps)[:, p0:].mean(dim=1)
        else:
            pooled = layer_norm(x[:, p0:].mean(dim=1), (D,), w["fc_norm.weight"], w["fc_norm.bias"], ln_eps)
        return one(F.linear(pooled, w["head.weight"], w.get("head.bias")))
    logits = one(F.linear(x[:, 0], w["head.weight"], w.get("head.bias")))
    if "head_dist.weight" in w:
        logits_dist = one(F.linear(x[:, 1], w["head_dist.weight"], w.get("head_dist.bias")))
        if out is not None:
            out["logits_dist"] = logits_dist
        logits = (logits + logits_dist) / 2
    return logits


def vit_forward(w, x, n_heads, dtype=torch.float64, ln_eps=1e-6, gelu="none", pos_grid=None,
                out=None, tap=no_tap, ops=None):
    """timm VisionTransformer.forward on one image x [3, Sh, Sw] (or a batch [B, 3, Sh, Sw],
    B > 1: logits [B, C], att [L, B, H, T, T]) (any size that
    is a multiple of the patch: the position embedding is resampled as
    timm's dynamic_img_size / set_input_size do).

    Covers the ViT family in timm's names: plain ViT and DeiT, DeiT distilled
    (dist_token, head_dist; deit.py VisionTransformerDistilled), register tokens
    (reg_token, no_embed_class), LayerScale (blocks.N.ls1/ls2.gamma: DINOv2,
    DeiT III), backbones without a head.
    Returns (logits [C] or None without head.*, att [L, H, T, T]), as `dtype`;
    out, a dict, also receives "pos" [Npos + N, D] (the position embedding
    added) and "logits_dist". ln_eps and gelu ("none": exact erf, "tanh": the
    approximation) exist so that the test can show a wrong reference is caught.
    tap and ops: the hooks of the module docstring."""
    ops = ops or {}
    layer_norm, act = ops.get("layer_norm", F.layer_norm), ops.get("gelu", F.gelu)
    softmax = ops.get("softmax", lambda s: s.softmax(dim=-1))
    w = {k: v.to(dtype) for k, v in w.items()}
    x = torch.as_tensor(x).to(dtype)
    batched = x.dim() == 4  # [B, 3, Sh, Sw]: logits [B, C], att [L, B, H, T, T]
    x = x if batched else x[None]  # [1, 3, Sh, Sw]
    B = x.shape[0]
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    H, Dh = n_heads, D // n_heads
    L = sum(1 for k in w if k.startswith("blocks.") and k.endswith(".norm1.weight"))

    def ln(t, name):
        return layer_norm(t, (D,), w[name + ".weight"], w[name + ".bias"], ln_eps)

    def linear(t, name):
        return F.linear(t, w[name + ".weight"], w.get(name + ".bias"))

    # PatchEmbed: Conv2d(3, D, kernel P, stride P), then flatten(2).transpose(1, 2)
    x = F.conv2d(x, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
    gh, gw = x.shape[-2:]
    x = x.flatten(2).transpose(1, 2)  # [1, N, D], patches row-major
    # _pos_embed: to_cat = [cls_token, dist_token?, reg_token?]
    to_cat = [w[k].expand(B, -1, -1) for k in ("cls_token", "dist_token", "reg_token") if k in w]
    Np = sum(t.shape[1] for t in to_cat)
    npos, gh0, gw0 = pos_layout(w, Np, pos_grid)
    pos = resample_abs_pos_embed(w["pos_embed"], (gh, gw), (gh0, gw0), npos)
    if npos:  # original timm / DeiT: pos_embed has entries for the prefix tokens
        x = torch.cat(to_cat + [x], dim=1) + pos
    else:  # no_embed_class: add, then concat
        x = torch.cat(to_cat + [x + pos], dim=1)
    T = x.shape[1]

    att = []
    for l in range(L):
        b = f"blocks.{l}."
        ls1, ls2 = (w.get(b + k, 1.0) for k in ("ls1.gamma", "ls2.gamma"))  # LayerScale
        # Attention: x = x + ls1(attn(norm1(x)))
        qkv = linear(tap("norm1", l, ln(x, b + "norm1")), b + "attn.qkv")  # [B, T, 3D]
        q, k, v = qkv.reshape(B, T, 3, H, Dh).permute(2, 0, 3, 1, 4)  # 3 x [B, H, T, Dh]
        a = tap("att", l, softmax((q * Dh**-0.5) @ k.transpose(-2, -1)))  # [B, H, T, T]
        att.append(a if batched else a[0])
        ctx = (a @ v).transpose(1, 2).reshape(B, T, D)
        x = x + ls1 * linear(ctx, b + "attn.proj")
        # Mlp: x = x + ls2(fc2(gelu(fc1(norm2(x)))))
        hid = act(linear(ln(x, b + "norm2"), b + "mlp.fc1"), approximate=gelu)
        x = tap("tokens", l, x + ls2 * linear(hid, b + "mlp.fc2"))

    # final norm, classify the CLS token (global_pool='token'); distilled: the mean
    # of the CLS and distillation heads (deit.py forward_head, inference)
    if out is not None:
        out["pos"] = pos[0]
    logits = head_logits(w, x, ln_eps, layer_norm, out, ops.get("head_wrong"))
    return logits, torch.stack(att)


def torchvision_vit(w, n_heads):
    """The same weights in torchvision.models.VisionTransformer, a maintained
    implementation of the same architecture (nn.MultiheadAttention, its own
    MLPBlock), as float64 in eval mode: a check of this file, not of the engine."""
    from torchvision.models.vision_transformer import VisionTransformer

    D, P = w["cls_token"].shape[-1], w["patch_embed.proj.weight"].shape[-1]
    L = sum(1 for k in w if k.startswith("blocks.") and k.endswith(".norm1.weight"))
    grid = math.isqrt(w["pos_embed"].shape[1] - 1)
    m = VisionTransformer(image_size=grid * P, patch_size=P, num_layers=L, num_heads=n_heads,
                          hidden_dim=D, mlp_dim=w["blocks.0.mlp.fc1.weight"].shape[0],
                          num_classes=w["head.weight"].shape[0]).double()
    # torchvision name -> timm name, each with a weight and a bias
    pairs = {"conv_proj.": "patch_embed.proj.", "encoder.ln.": "norm.", "heads.head.": "head."}
    for l in range(L):
        a, b = f"encoder.layers.encoder_layer_{l}.", f"blocks.{l}."
        pairs |= {a + "ln_1.": b + "norm1.", a + "ln_2.": b + "norm2.",
                  a + "self_attention.in_proj_": b + "attn.qkv.",
                  a + "self_attention.out_proj.": b + "attn.proj.",
                  a + "mlp.0.": b + "mlp.fc1.", a + "mlp.3.": b + "mlp.fc2."}
    sd = {tv + p: w[tm + p] for tv, tm in pairs.items() for p in ("weight", "bias")}
    sd |= {"class_token": w["cls_token"], "encoder.pos_embedding": w["pos_embed"]}
    m.load_state_dict(sd, strict=True)
    return m.eval()


def top_k(logits, k=5):
    """Indices of the k largest logits, descending."""
    return [int(i) for i in torch.topk(torch.as_tensor(logits), k).indices]


def eval_transform(size=224, crop_pct=0.875, mean=(0.485, 0.456, 0.406),
                   std=(0.229, 0.224, 0.225)):
    """timm's eval transform (transforms_imagenet_eval, crop_mode 'center') built
    from torchvision, on a PIL image: returns (pil -> [3, S, S] float32 tensor,
    pil -> the cropped 8-bit PIL image)."""
    from torchvision import transforms as T

    scale = math.floor(size / crop_pct)  # 224 / 0.875 = 256
    bicubic = T.InterpolationMode.BICUBIC
    crop = T.Compose([T.Resize(scale, interpolation=bicubic), T.CenterCrop(size)])
    norm = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    return (lambda im: norm(crop(im))), crop
