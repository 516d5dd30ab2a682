"""reference_hf.py - a plain-PyTorch forward pass of Hugging Face transformers' ViT.

Written from the semantics of transformers' models/vit/modeling_vit.py (ViTModel,
ViTForImageClassification: ViTEmbeddings, ViTSelfAttention with the eager path,
ViTLayer) and models/deit/modeling_deit.py (DeiTEmbeddings with the distillation
token, DeiTForImageClassification, DeiTForImageClassificationWithTeacher), in
their own tensor names, with nothing shared with the engine or with reference.py
(which follows timm). transformers itself is not installed here: this is the
structure of its modules in torch primitives.

    w = reference.load_safetensors("model.safetensors")   # transformers names
    logits, att = hf_forward(w, x, n_heads=3, ln_eps=1e-12)

tap and ops are the hooks of reference.py's vit_forward, with the same names
("norm1" is layernorm_before's output, "tokens" a ViTLayer's output); absent by
default.
"""
import math

import torch
import torch.nn.functional as F


def hf_prefix(w):
    """The base model's prefix: "vit." (ViTForImageClassification), "deit."
    (DeiT classifiers) or "" (ViTModel, DeiTModel)."""
    for p in ("vit.", "deit.", ""):
        if p + "embeddings.cls_token" in w:
            return p
    raise KeyError("no embeddings.cls_token: not a transformers ViT")


def interpolate_pos_encoding(pos, n_prefix, new_h, new_w):
    """ViTEmbeddings / DeiTEmbeddings.interpolate_pos_encoding: the prefix rows
    (CLS, and DeiT's distillation token) kept, the square grid resized by
    F.interpolate(size=(new_h, new_w), mode="bicubic", align_corners=False), no
    antialiasing. Unchanged when the patch count matches and the input is square."""
    num_positions = pos.shape[1] - n_prefix
    if new_h * new_w == num_positions and new_h == new_w:
        return pos
    side = math.isqrt(num_positions)
    D = pos.shape[-1]
    grid = pos[:, n_prefix:].reshape(1, side, side, D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_h, new_w), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, D)
    return torch.cat([pos[:, :n_prefix], grid], dim=1)


def no_tap(name, l, t):
    return t


def hf_head_logits(w, h, ln_eps=1e-12, layer_norm=F.layer_norm, out=None):
    """The final layernorm and the classifier(s) on hidden states h [1, T, D] (w
    already in h's dtype): classifier(CLS) (ViTForImageClassification,
    DeiTForImageClassification), the mean of cls_classifier(CLS) and
    distillation_classifier(dist) (DeiT ...WithTeacher), None for a bare ViTModel.
    out, a dict, receives "logits_dist"."""
    p = hf_prefix(w)
    if "cls_classifier.weight" not in w and "classifier.weight" not in w:
        return None
    h = layer_norm(h, (h.shape[-1],), w[p + "layernorm.weight"], w[p + "layernorm.bias"],
                   eps=ln_eps)

    def dense(t, name):
        return F.linear(t, w[name + ".weight"], w.get(name + ".bias"))

    if "cls_classifier.weight" in w:  # DeiTForImageClassificationWithTeacher
        cls_logits = dense(h[:, 0], "cls_classifier")[0]
        dist_logits = dense(h[:, 1], "distillation_classifier")[0]
        if out is not None:
            out["logits_dist"] = dist_logits
        return (cls_logits + dist_logits) / 2
    return dense(h[:, 0], "classifier")[0]


def hf_forward(w, x, n_heads, ln_eps=1e-12, dtype=torch.float64, out=None, tap=no_tap, ops=None):
    """One image x [3, Sh, Sw] through the transformers model whose state dict is w.

    Returns (logits [C] or None for a bare ViTModel, att [L, H, T, T]) as dtype.
    logits: classifier(last_hidden_state[:, 0]) for ViTForImageClassification and
    DeiTForImageClassification (which ignores its distillation token), the mean of
    cls_classifier and distillation_classifier for DeiT ...WithTeacher.
    An input size other than the config's is run with interpolate_pos_encoding=True.
    out, a dict, receives "pos" [Np + N, D] (the position embedding added).
    tap and ops: the hooks of the module docstring."""
    ops = ops or {}
    layer_norm, act = ops.get("layer_norm", F.layer_norm), ops.get("gelu", F.gelu)
    softmax = ops.get("softmax", lambda s: torch.softmax(s, dim=-1))
    w = {k: v.to(dtype) for k, v in w.items()}
    p = hf_prefix(w)
    emb = p + "embeddings."
    x = torch.as_tensor(x).to(dtype)[None]
    D = w[emb + "cls_token"].shape[-1]
    H, Dh = n_heads, D // n_heads
    Pw = w[emb + "patch_embeddings.projection.weight"]
    P = Pw.shape[-1]
    L = sum(1 for k in w if k.startswith(p + "encoder.layer.") and
            k.endswith(".layernorm_before.weight"))

    def ln(t, name):
        return layer_norm(t, (D,), w[name + ".weight"], w[name + ".bias"], eps=ln_eps)

    def dense(t, name):
        return F.linear(t, w[name + ".weight"], w.get(name + ".bias"))

    # ViTPatchEmbeddings: projection(pixel_values).flatten(2).transpose(1, 2)
    e = F.conv2d(x, Pw, w[emb + "patch_embeddings.projection.bias"], stride=P)
    new_h, new_w = e.shape[-2:]
    e = e.flatten(2).transpose(1, 2)
    # ViTEmbeddings: cat(cls_tokens, embeddings) (DeiT: cls, distillation, embeddings)
    prefix = [w[emb + "cls_token"]]
    if emb + "distillation_token" in w:
        prefix.append(w[emb + "distillation_token"])
    e = torch.cat(prefix + [e], dim=1)
    pos = interpolate_pos_encoding(w[emb + "position_embeddings"], len(prefix), new_h, new_w)
    h = e + pos
    T = h.shape[1]

    att = []
    for l in range(L):
        b = f"{p}encoder.layer.{l}."
        # ViTLayer: attention on layernorm_before(hidden_states), first residual
        s = tap("norm1", l, ln(h, b + "layernorm_before"))

        def heads(t):  # transpose_for_scores: [1, T, D] -> [1, H, T, Dh]
            return t.view(1, T, H, Dh).permute(0, 2, 1, 3)

        q = heads(dense(s, b + "attention.attention.query"))
        k = heads(dense(s, b + "attention.attention.key"))
        v = heads(dense(s, b + "attention.attention.value"))
        # eager_attention_forward: softmax(matmul(q, k^T) * scaling)
        a = tap("att", l, softmax(torch.matmul(q, k.transpose(-1, -2)) * Dh**-0.5))
        att.append(a[0])
        ctx = torch.matmul(a, v).transpose(1, 2).reshape(1, T, D)
        h = dense(ctx, b + "attention.output.dense") + h
        # layernorm_after, ViTIntermediate (dense + gelu), ViTOutput (dense + residual)
        m = act(dense(ln(h, b + "layernorm_after"), b + "intermediate.dense"))
        h = tap("tokens", l, dense(m, b + "output.dense") + h)

    if out is not None:
        out["pos"] = pos[0]
    return hf_head_logits(w, h, ln_eps, layer_norm, out), torch.stack(att)
