"""reference.py - a plain-PyTorch forward pass of timm's VisionTransformer.

Written from the semantics of timm/models/vision_transformer.py (VisionTransformer,
Block, Attention with fused_attn=False, Mlp), with no code shared with the engine:
it reads .safetensors itself and uses only torch primitives. It returns the
logits and every attention matrix, computed in the dtype asked for (float64 is
the ground truth the engine's float32 is compared with).

    weights = load_safetensors("m.safetensors")       # {name: float64 tensor}
    logits, att = vit_forward(weights, x, n_heads=3)  # x [3, S, S]; att [L, H, T, T]
"""
import json
import math

import numpy as np
import torch
import torch.nn.functional as F

# --- safetensors -------------------------------------------------------------


def load_safetensors(path):
    """{name: float64 tensor} from a .safetensors file.

    Format: u64 little-endian header length, a JSON header
    {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": ...},
    then the data area the offsets point into. F16 and BF16 are upcast exactly
    (both are subsets of float64), so the reference sees the stored values."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        buf = data[begin:end]
        if t["dtype"] == "F32":
            a = np.frombuffer(buf, "<f4").astype(np.float64)
        elif t["dtype"] == "F16":
            a = np.frombuffer(buf, "<f2").astype(np.float64)
        elif t["dtype"] == "BF16":
            # bfloat16 is the top half of a float32: shift the bits into place.
            bits = np.frombuffer(buf, "<u2").astype(np.uint32) << 16
            a = bits.view(np.float32).astype(np.float64)
        else:
            raise ValueError(f"{path}: tensor {name}: dtype {t['dtype']} not supported")
        out[name] = torch.from_numpy(a.reshape(t["shape"]))
    return out


# --- forward pass ------------------------------------------------------------


def vit_forward(w, x, n_heads, dtype=torch.float64, ln_eps=1e-6, gelu="none"):
    """timm VisionTransformer.forward on one image x [3, S, S].

    Returns (logits [C] or None without head.*, att [L, H, T, T]), as `dtype`.
    ln_eps and gelu ("none": exact erf, "tanh": the approximation) exist so that
    the test can show a wrong reference is caught."""
    w = {k: v.to(dtype) for k, v in w.items()}
    x = torch.as_tensor(x).to(dtype)[None]  # [1, 3, S, S]
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    H, Dh = n_heads, D // n_heads
    L = sum(1 for k in w if k.startswith("blocks.") and k.endswith(".norm1.weight"))

    def ln(t, name):
        return F.layer_norm(t, (D,), w[name + ".weight"], w[name + ".bias"], ln_eps)

    def linear(t, name):
        return F.linear(t, w[name + ".weight"], w[name + ".bias"])

    # PatchEmbed: Conv2d(3, D, kernel P, stride P), then flatten(2).transpose(1, 2)
    x = F.conv2d(x, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)  # [1, N, D], patches row-major
    # _pos_embed: prepend the CLS token, add the learned position embedding
    x = torch.cat([w["cls_token"].expand(1, -1, -1), x], dim=1) + w["pos_embed"]
    T = x.shape[1]

    att = []
    for l in range(L):
        b = f"blocks.{l}."
        # Attention: x = x + attn(norm1(x))
        qkv = linear(ln(x, b + "norm1"), b + "attn.qkv")  # [1, T, 3D]
        q, k, v = qkv.reshape(1, T, 3, H, Dh).permute(2, 0, 3, 1, 4)  # 3 x [1, H, T, Dh]
        a = ((q * Dh**-0.5) @ k.transpose(-2, -1)).softmax(dim=-1)  # [1, H, T, T]
        att.append(a[0])
        ctx = (a @ v).transpose(1, 2).reshape(1, T, D)
        x = x + linear(ctx, b + "attn.proj")
        # Mlp: x = x + fc2(gelu(fc1(norm2(x))))
        hid = F.gelu(linear(ln(x, b + "norm2"), b + "mlp.fc1"), approximate=gelu)
        x = x + linear(hid, b + "mlp.fc2")

    # final norm, classify the CLS token (global_pool='token')
    x = ln(x, "norm")
    logits = linear(x[:, 0], "head")[0] if "head.weight" in w else None
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
