"""test_pth.py - PyTorch checkpoints (.pth, pytorch_model.bin) and the layouts of
assets/layouts/, against the PyTorch modules themselves.

    /usr/bin/python3 test_pth.py reader       --dump vit_dump --work DIR
    /usr/bin/python3 test_pth.py style NAME [--perturb WRONG] --dump vit_dump --work DIR
    /usr/bin/python3 test_pth.py backward NAME --dump vit_dump --work DIR
    /usr/bin/python3 test_pth.py preprocess   --dump vit_dump --work DIR
    /usr/bin/python3 test_pth.py layouts      --dump vit_dump --work DIR
    /usr/bin/python3 test_pth.py list         (the style names, for CMake)

reader:   one random timm-named ViT saved by torch.save as the tutorials and libraries do
          (a plain state dict; F16, BF16; {"model": ...} with DataParallel's "module.";
          {"state_dict": ...} with torch.compile's "_orig_mod."; DINO's {"teacher": ...}
          with "backbone." and a projection head beside it; tensors sharing one storage;
          an nn.Parameter; Hugging Face's pytorch_model.bin in transformers' names) must
          give vit_dump's outputs bit for bit equal to the same weights as .safetensors.
style:    a ViT written in PyTorch in one of the styles people write (STYLES below: the
          notebooks' parameter names and their variations, torchvision's
          VisionTransformer), random weights, saved with torch.save(model.state_dict()),
          opened by the engine through the shipped layouts (or a layout file of the
          test's own: the user's --layout); logits within LOGIT_TOL and every layer's
          attention within ATT_TOL of the module itself in float64 (its attention read
          from the module: the notebooks' modules keep it, nn.MultiheadAttention is asked
          for it with need_weights=True on the same input).
          --perturb makes the reference a plausible mistake: the run then exits 0 only
          when both comparisons (attention, logits) caught it and nothing else failed
          (a crash fails the control): "scale" 1/sqrt(Dh) where the model uses 1/sqrt(D);
          "flatten" the linear patch embedding's input flattened (p1 p2 c) where the
          model flattens (c p1 p2); "act" exact GELU where the model's MLP uses GELU's tanh
          approximation; "dh" 1/sqrt(D/H) (a loader that assumes D/H-sized heads) where
          the model's heads are Dh wide (the styles with hs: Dh != D/H, whose attention's
          width is A = H*Dh). Those styles also run every map kind (check_maps: vit_dump's
          explanations and token views with the attention kept and recomputed, and
          `vitlens --export` given --vitlens).
preprocess: torchvision's layout brings its transform (Resize(256, bilinear), crop 224):
          the engine's input equals ViT_B_16_Weights.IMAGENET1K_V1.transforms() on PIL.
layouts:  timm's and Hugging Face's names are layouts too (assets/layouts/timm.json,
          hf.json): a timm ViT and the same in transformers' names (ViTModel: no prefix,
          no layer_norm_eps in its config: hf.json's 1e-12) report their layout and
          conventions; timm.json copied as a user's template, its names under a "{p}"
          prefix and a head given as alternatives, opens the same weights renamed bit for
          bit equal to timm's own names, and the same template with norm1 and norm2
          swapped (a plausible slip) must move the logits; the messages: a role nothing
          matches (the tensor, the role, the layout and the checkpoint's tensors), a bad
          "naming", Hugging Face's Dinov2Model names, --layout overriding detection.
backward: vit_dump --class (the backward pass) on a style: dy_c/d input and every
          layer's dy_c/dA against torch.autograd on the float64 module, relative error
          within BACK_TOL (test_backward.py's tolerance for random models); dy_c/d input
          within F32_SPREAD (6) times PyTorch's own float32 error on the same case where
          that is larger (test_backward.py, "Tolerances": float32 cannot reach BACK_TOL
          there, and the factor is how far PyTorch's float32 falls from itself).
"""
import argparse
import json
import math
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import test_families  # noqa: E402  (random timm weights, transformers' names, safetensors)
import reference_hf  # noqa: E402
from test_backward import F32_SPREAD  # noqa: E402

LOGIT_TOL = 1e-4
ATT_TOL = 1e-5
BACK_TOL = 1e-5
ROOT = pathlib.Path(__file__).resolve().parents[2]

# --- the styles: PyTorch modules with the notebooks' names -------------------------------


class PatchEmbedding(nn.Module):
    """The notebooks' patch embedding: a convolution with kernel and stride P."""

    def __init__(self, P, D):
        super().__init__()
        self.conv = nn.Conv2d(3, D, kernel_size=P, stride=P)

    def forward(self, x):
        return self.conv(x).flatten(2).transpose(1, 2)


class MultiheadSelfAttentionBlock(nn.Module):
    """LayerNorm then nn.MultiheadAttention (batch_first), as the notebooks build it."""

    def __init__(self, D, H):
        super().__init__()
        self.layer = nn.LayerNorm(D)
        self.attention = nn.MultiheadAttention(D, H, batch_first=True)

    def forward(self, x):
        x = self.layer(x)
        out, self.att = self.attention(x, x, x, need_weights=True, average_attn_weights=False)
        return out


class MLPBlock(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.linear1, self.gelu, self.linear2 = nn.Linear(D, F_), nn.GELU(), nn.Linear(F_, D)
        self.dropout = nn.Dropout(0.1)
        self.seq = nn.Sequential(self.linear1, self.gelu, self.dropout, self.linear2, self.dropout)

    def forward(self, x):
        return self.seq(self.norm(x))


class TransformerEncoderBlock(nn.Module):
    def __init__(self, D, H, F_):
        super().__init__()
        self.norm = nn.LayerNorm(D)  # declared and never used, as in the notebook
        self.attention = MultiheadSelfAttentionBlock(D, H)
        self.mlp = MLPBlock(D, F_)

    def forward(self, x):
        x = self.attention(x) + x
        return self.mlp(x) + x


class NotebookMSA(nn.Module):
    """class_embedding, position_embedding, patch_embedding.conv, vit = Sequential of
    blocks, classifier = Sequential(LayerNorm, Linear)."""

    def __init__(self, S, P, D, H, F_, L, C):
        super().__init__()
        N = (S // P) ** 2
        self.class_embedding = nn.Parameter(torch.randn(1, 1, D))
        self.position_embedding = nn.Parameter(torch.randn(1, N + 1, D))
        self.patch_embedding = PatchEmbedding(P, D)
        self.vit = nn.Sequential(*[TransformerEncoderBlock(D, H, F_) for _ in range(L)])
        self.classifier = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, C))

    def forward(self, x):
        x = self.patch_embedding(x)
        x = torch.cat([self.class_embedding.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.vit(self.position_embedding + x)
        return self.classifier(x[:, 0])

    def attentions(self):
        return [b.attention.att for b in self.vit]


class Head(nn.Module):
    """One attention head: its own query, key, value (no bias); scores scaled by
    C ** -0.5, C the embedding width (not the head size)."""

    def __init__(self, n_embed, head_size, scale_dim=True):
        super().__init__()
        self.key = nn.Linear(n_embed, head_size, bias=False)
        self.query = nn.Linear(n_embed, head_size, bias=False)
        self.value = nn.Linear(n_embed, head_size, bias=False)
        self.scale_dim = scale_dim
        self.divisor = None  # --perturb dh: the reference's own divisor

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        d = self.divisor or (C if self.scale_dim else k.shape[-1])
        wei = q @ k.transpose(-2, -1) * (d ** -0.5)
        self.att = F.softmax(wei, dim=-1)
        return self.att @ v


class MultiHeadAttention(nn.Module):
    """hs: each head's size (None: n_embed // n_heads; a notebook may pick any)."""

    def __init__(self, n_embed, n_heads, scale_dim=True, hs=None):
        super().__init__()
        hs = hs or n_embed // n_heads
        self.heads = nn.ModuleList([Head(n_embed, hs, scale_dim) for _ in range(n_heads)])
        self.proj = nn.Linear(hs * n_heads, n_embed)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


class QuickGELU(nn.Module):
    """OpenAI CLIP's activation: x * sigmoid(1.702 x)."""

    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


ACTIVATIONS = {"gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
               "quick_gelu": QuickGELU, "relu": nn.ReLU}


class Block(nn.Module):
    def __init__(self, D, H, F_, scale_dim=True, act="gelu", hs=None):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = MultiHeadAttention(D, H, scale_dim, hs)
        self.ffn = nn.Sequential(nn.Linear(D, F_), ACTIVATIONS[act](), nn.Linear(F_, D),
                                 nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class NotebookHeads(nn.Module):
    """patch_embedding.conv, class_embedding, position_embedding, blocks of per-head
    query/key/value lists, layer_norm, mlp_head."""

    def __init__(self, S, P, D, H, F_, L, C, scale_dim=True, act="gelu", hs=None):
        super().__init__()
        N = (S // P) ** 2
        self.patch_embedding = PatchEmbedding(P, D)
        self.class_embedding = nn.Parameter(torch.randn(1, 1, D))
        self.position_embedding = nn.Parameter(torch.randn(1, N + 1, D))
        self.blocks = nn.ModuleList([Block(D, H, F_, scale_dim, act, hs) for _ in range(L)])
        self.layer_norm = nn.LayerNorm(D)
        self.mlp_head = nn.Linear(D, C)

    def forward(self, x):
        x = self.patch_embedding(x)
        x = torch.cat([self.class_embedding.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.position_embedding
        for b in self.blocks:
            x = b(x)
        return self.mlp_head(self.layer_norm(x)[:, 0])

    def attentions(self):
        return [torch.stack([h.att for h in b.attn.heads], dim=1) for b in self.blocks]


class MultiHeadSelfAttention(nn.Module):
    """Per-head q_weights / k_weights / v_weights lists (as nn.ModuleList, so that the
    state dict holds them), scores / hidden_dim ** 0.5, heads concatenated into `linear`.
    hs: each head's size (None: hidden_dim // num_heads; seed 004: hidden_dim itself);
    scale_dim False: scores / hs ** 0.5."""

    def __init__(self, hidden_dim, num_heads, hs=None, scale_dim=True):
        super().__init__()
        hs = hs or hidden_dim // num_heads
        self.hidden_dim = hidden_dim if scale_dim else hs  # the scores' divisor, squared
        self.q_weights = nn.ModuleList([nn.Linear(hidden_dim, hs) for _ in range(num_heads)])
        self.k_weights = nn.ModuleList([nn.Linear(hidden_dim, hs) for _ in range(num_heads)])
        self.v_weights = nn.ModuleList([nn.Linear(hidden_dim, hs) for _ in range(num_heads)])
        self.linear = nn.Linear(num_heads * hs, hidden_dim)

    def forward(self, x):
        outs, self.att = [], []
        for q_, k_, v_ in zip(self.q_weights, self.k_weights, self.v_weights):
            q, k, v = q_(x), k_(x), v_(x)
            a = torch.softmax(q @ k.transpose(-2, -1) / self.hidden_dim ** 0.5, dim=-1)
            self.att.append(a)
            outs.append(a @ v)
        return self.linear(torch.cat(outs, dim=-1))


class EncoderBlock(nn.Module):
    def __init__(self, D, H, F_, hs=None, scale_dim=True):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.msa = MultiHeadSelfAttention(D, H, hs, scale_dim)
        self.mlp = nn.Sequential(nn.Linear(D, F_), nn.GELU(), nn.Linear(F_, D))

    def forward(self, x):
        x = x + self.msa(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def patches_c_p1_p2(x, P):
    """[B, 3, S, S] -> [B, N, 3*P*P], each patch flattened channel first (torch's unfold:
    a convolution's weight order)."""
    B, C, S, _ = x.shape
    p = x.unfold(2, P, P).unfold(3, P, P)  # [B, C, gh, gw, P, P]
    return p.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * P * P)


def patches_p1_p2_c(x, P):
    """einops' rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')."""
    B, C, S, _ = x.shape
    g = S // P
    return x.reshape(B, C, g, P, g, P).permute(0, 2, 4, 3, 5, 1).reshape(B, g * g, P * P * C)


class NotebookLinear(nn.Module):
    """linear_patching on flattened patches, class_embedding [1, D], positional_embedding
    [1+N, D], encoder of per-head blocks, mlp_head = Sequential(LayerNorm, Linear, Tanh)."""

    def __init__(self, S, P, D, H, F_, L, C, flatten="c p1 p2", hs=None, scale_dim=True):
        super().__init__()
        N = (S // P) ** 2
        self.P, self.flatten = P, flatten
        self.linear_patching = nn.Linear(3 * P * P, D)
        self.class_embedding = nn.Parameter(torch.rand(1, D))
        self.positional_embedding = nn.Parameter(torch.rand(1 + N, D))
        self.encoder = nn.ModuleList([EncoderBlock(D, H, F_, hs, scale_dim) for _ in range(L)])
        self.mlp_head = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, C), nn.Tanh())

    def forward(self, x):
        flat = patches_c_p1_p2 if self.flatten == "c p1 p2" else patches_p1_p2_c
        E = self.linear_patching(flat(x, self.P))
        E = torch.cat([self.class_embedding.repeat(x.shape[0], 1, 1), E], dim=1)
        Z = E + self.positional_embedding
        for b in self.encoder:
            Z = b(Z)
        return self.mlp_head(Z[:, 0])

    def attentions(self):
        return [torch.stack(b.msa.att, dim=1) for b in self.encoder]


class TimmAttention(nn.Module):
    """timm's names (attn.qkv fused [3A, D], q, k, v in that order, each head's Dh columns
    together; attn.proj [D, A]) with heads of any size: A = H * Dh need not be D (timm's own
    Attention ties Dh to D / H, a user's module written after it may not). Scores scaled by
    1 / sqrt(Dh), as timm does."""

    def __init__(self, D, H, hs):
        super().__init__()
        self.H, self.hs = H, hs
        self.qkv = nn.Linear(D, 3 * H * hs)
        self.proj = nn.Linear(H * hs, D)
        self.divisor = None  # --perturb dh: the reference's own divisor

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.H, self.hs).permute(2, 0, 3, 1, 4)
        self.att = torch.softmax(q @ k.transpose(-2, -1) * (self.divisor or self.hs) ** -0.5, dim=-1)
        return self.proj((self.att @ v).transpose(1, 2).reshape(B, T, -1))


class TimmMlp(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(D, F_), nn.GELU(), nn.Linear(F_, D)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, D, H, F_, hs):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D, eps=1e-6), nn.LayerNorm(D, eps=1e-6)
        self.attn = TimmAttention(D, H, hs)
        self.mlp = TimmMlp(D, F_)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TimmFused(nn.Module):
    """timm's VisionTransformer names (patch_embed.proj, cls_token, pos_embed, blocks.N,
    norm, head; LayerNorm eps 1e-6) around TimmAttention: timm.json's layout, the head
    count from --heads (nothing in the weights says how A splits)."""

    def __init__(self, S, P, D, H, F_, L, C, hs):
        super().__init__()
        N = (S // P) ** 2
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, D, kernel_size=P, stride=P)
        self.cls_token = nn.Parameter(torch.randn(1, 1, D) * 0.5)
        self.pos_embed = nn.Parameter(torch.randn(1, N + 1, D) * 0.5)
        self.blocks = nn.ModuleList([TimmBlock(D, H, F_, hs) for _ in range(L)])
        self.norm = nn.LayerNorm(D, eps=1e-6)
        self.head = nn.Linear(D, C)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])

    def attentions(self):
        return [b.attn.att for b in self.blocks]


def torchvision_vit(S, P, D, H, F_, L, C):
    """torchvision.models.VisionTransformer, its attention read by asking each block's
    nn.MultiheadAttention for it on the block's own input."""
    from torchvision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(image_size=S, patch_size=P, num_layers=L, num_heads=H, hidden_dim=D,
                          mlp_dim=F_, num_classes=C)
    m.atts = []

    def keep_attention(mha):
        forward = mha.forward

        def fwd(query, key, value, **kw):
            m.atts.append(forward(query, key, value, need_weights=True,
                                  average_attn_weights=False)[1])
            return forward(query, key, value, **kw)  # the block's own call, unchanged
        mha.forward = fwd

    for layer in m.encoder.layers:
        keep_attention(layer.self_attention)
    m.attentions = lambda: m.atts
    return m


# name: (builder, kwargs, extra vit_dump args, layout written by the test or None)
STYLES = {
    # nn.MultiheadAttention inside the notebooks' blocks; heads are not in the weights:
    # --heads, as a user of such a checkpoint passes it
    "notebook_msa": (NotebookMSA, dict(S=32, P=8, D=96, H=3, F_=192, L=2, C=7), ["--heads", "3"], None),
    # per-head lists (head size D/H), no q/k/v bias, scores / sqrt(D)
    "notebook_heads": (NotebookHeads, dict(S=48, P=16, D=64, H=4, F_=128, L=3, C=5), [], None),
    # linear patching (channel-first flatten), per-head lists with bias, / sqrt(D), Tanh
    "notebook_linear": (NotebookLinear, dict(S=32, P=8, D=64, H=4, F_=128, L=2, C=6), [], None),
    # the same flattened (p1 p2 c) as einops does, with the user's own layout file
    "notebook_linear_p1p2c": (NotebookLinear, dict(S=32, P=8, D=64, H=2, F_=128, L=2, C=6,
                                                   flatten="p1 p2 c"),
                              [], ("notebook-linear", {"flatten": "p1 p2 c"})),
    # the per-head style with the other MLP activations, each through a user's layout
    "notebook_heads_relu": (NotebookHeads, dict(S=32, P=8, D=64, H=4, F_=128, L=2, C=5, act="relu"),
                            [], ("notebook-heads", {"mlp_activation": "relu"})),
    "notebook_heads_gelu_tanh": (NotebookHeads, dict(S=32, P=8, D=64, H=4, F_=128, L=2, C=5,
                                                     act="gelu_tanh"),
                                 [], ("notebook-heads", {"mlp_activation": "gelu_tanh"})),
    "notebook_heads_quick_gelu": (NotebookHeads, dict(S=32, P=8, D=64, H=4, F_=128, L=2, C=5,
                                                      act="quick_gelu"),
                                  [], ("notebook-heads", {"mlp_activation": "quick_gelu"})),
    # per-head projections whose size is not D/H (the attention's width A = H * Dh != D):
    # seed 004's Linear(D, D) per head (with bias, / sqrt(D)); an odd Dh = 20 for D = 48,
    # H = 3 without bias (/ sqrt(D)); and with bias scaled by 1/sqrt(Dh) (a user's layout)
    "notebook_linear_wide": (NotebookLinear, dict(S=32, P=8, D=48, H=3, F_=96, L=2, C=6, hs=48), [], None),
    "notebook_heads_dh20": (NotebookHeads, dict(S=32, P=8, D=48, H=3, F_=96, L=2, C=5, hs=20), [], None),
    # narrower heads than D/H: Dh = 8, A = 24 < D = 48
    "notebook_heads_narrow": (NotebookHeads, dict(S=32, P=8, D=48, H=3, F_=96, L=2, C=5, hs=8), [], None),
    "notebook_linear_dh20_hd": (NotebookLinear, dict(S=32, P=8, D=48, H=3, F_=96, L=2, C=6, hs=20,
                                                     scale_dim=False),
                                [], ("notebook-linear", {"attention_scale": "head_dim"})),
    # timm's names with a fused qkv whose heads are 20 wide (A = 60 != D = 48)
    "timm_fused_dh20": (TimmFused, dict(S=32, P=8, D=48, H=3, F_=96, L=2, C=5, hs=20), ["--heads", "3"], None),
    # torchvision's VisionTransformer, small (the ASan build runs it), then its ViT-B/16,
    # ViT-B/32 and ViT-L/16 shapes (random weights, 224 px)
    "torchvision_small": (torchvision_vit, dict(S=64, P=16, D=128, H=4, F_=256, L=2, C=10), ["--heads", "4"], None),
    "torchvision_vit_b_16": (torchvision_vit, dict(S=224, P=16, D=768, H=12, F_=3072, L=12, C=1000), [], None),
    "torchvision_vit_b_32": (torchvision_vit, dict(S=224, P=32, D=768, H=12, F_=3072, L=12, C=1000), [], None),
    "torchvision_vit_l_16": (torchvision_vit, dict(S=224, P=16, D=1024, H=16, F_=4096, L=24, C=1000), [], None),
}


def build(name, seed=0, **over):
    torch.manual_seed(seed)
    fn, kw, extra, layout = STYLES[name]
    kw = dict(kw) | over
    m = fn(**kw).eval()
    # torchvision starts its head and CLS token at zero and LayerNorms at (1, 0): spread
    # every parameter so that each one moves the result
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 1 or "token" in n or "embedding" in n or "head" in n:
                p.add_(torch.randn_like(p) * (0.2 if p.dim() == 1 else 0.5))
    return m, kw, extra, layout


def user_layout(path, layout):
    """A user's own layout: a shipped one copied, changed, without its "detect"."""
    base, changes = layout
    lay = json.loads((ROOT / f"assets/layouts/{base}.json").read_text())
    lay |= {"name": "my-vit"} | changes
    del lay["detect"]
    path.write_text(json.dumps(lay, indent=1))


def run_dump(args, model, x, out, extra, layout=None, cls=None):
    out.mkdir(parents=True, exist_ok=True)
    x.numpy().astype(np.float32).tofile(out / "input.f32")
    cmd = [args.dump, "--model", model, "--input", out / "input.f32", "--out", out, *extra]
    if layout:
        cmd += ["--layout", layout]
    if cls is not None:
        cmd += ["--class", str(cls)]
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode:
        print(r.stdout + r.stderr)
        raise SystemExit(f"FAIL: vit_dump on {model}: exit {r.returncode}")
    res = {p.stem: np.load(p) for p in out.glob("*.npy")}
    res["config"] = json.loads((out / "config.json").read_text())
    return res


class Report:
    def __init__(self):
        self.failed = 0
        self.compared, self.caught = [], []  # the comparisons with the reference

    def check(self, ok, msg):
        if not ok:
            print("FAIL: " + msg)
            self.failed += 1
        return ok

    def compare(self, ok, what, msg):
        """A comparison of the engine with the reference: a failure is a finding, or what a
        control (--perturb) must see."""
        self.compared.append(what)
        if not ok:
            print(("caught: " if PERTURBED else "FAIL: ") + msg)
            self.caught.append(what)
        return ok

    def exit_code(self):
        if not PERTURBED:
            failed = self.failed + len(self.caught)
            print("ok" if not failed else f"{failed} check(s) failed")
            return 1 if failed else 0
        # the negative control: every comparison must have caught the mistake, and nothing
        # else may have gone wrong (a crash or a missing output fails the control too)
        missed = [w for w in self.compared if w not in self.caught]
        if self.failed or not self.compared or missed:
            print(f"CONTROL FAILED: {self.failed} other check(s) failed; with the mistake "
                  f"'{PERTURBED}' the comparisons passed on {missed or 'nothing compared'}")
            return 1
        print(f"control ok: the mistake '{PERTURBED}' failed all of {', '.join(self.compared)}")
        return 0


PERTURBED = None  # --perturb: the plausible mistake the reference makes


# --- style ------------------------------------------------------------------------------


def test_style(args, name, rep):
    m, kw, extra, layout = build(name)
    d = pathlib.Path(args.work) / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / "model.pth"
    torch.save(m.state_dict(), path)  # as every tutorial does
    lay = None
    if layout:
        lay = d / f"{name}.json"
        user_layout(lay, layout)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, kw["S"], kw["S"], generator=g)
    eng = run_dump(args, path, x, d / "out", extra, lay)
    # the reference: the module itself in float64, or the plausible mistake
    ref = m.double()
    if args.perturb == "scale":  # 1/sqrt(Dh) where the module divides by sqrt(D)
        for b in getattr(ref, "blocks", []):
            for h in b.attn.heads:
                h.scale_dim = False
        for b in getattr(ref, "encoder", []):
            b.msa.hidden_dim = b.msa.q_weights[0].out_features
    if args.perturb == "dh":  # 1/sqrt(D/H), a loader that assumes D/H-sized heads, where the
        H = kw["H"]           # module divides by sqrt(Dh)
        for b in getattr(ref, "encoder", []):
            b.msa.hidden_dim = kw["D"] / H
        for b in getattr(ref, "blocks", []):
            for h in getattr(b.attn, "heads", [b.attn]):
                h.divisor = kw["D"] / H
    if args.perturb == "act":  # exact GELU where the model uses another activation
        for b in ref.blocks:
            b.ffn[1] = nn.GELU()
    if args.perturb == "flatten":
        ref.flatten = "p1 p2 c" if ref.flatten == "c p1 p2" else "c p1 p2"
    if hasattr(ref, "atts"):
        ref.atts.clear()
    with torch.no_grad():
        logits = ref(x.double()[None])[0].numpy()
        atts = [a[0].numpy() for a in ref.attentions()]
    c = eng["config"]
    print(f"{name}: layout '{c['layout']}', L {c['n_layers']}, H {c['n_heads']}, D {c['dim']}, "
          f"T {c['n_tokens']}, eps {c['ln_eps']:.0e}, scale {c['att_scale']:.4g}, tanh {c['head_tanh']}")
    rep.check(len(atts) == eng["att"].shape[0], f"{name}: {eng['att'].shape[0]} layers, expected {len(atts)}")
    worst = 0.0
    for l, a in enumerate(atts):
        if not rep.check(a.shape == eng["att"][l].shape, f"{name}: layer {l} attention {eng['att'][l].shape}, expected {a.shape}"):
            return
        worst = max(worst, float(np.abs(eng["att"][l] - a).max()))
    dl = float(np.abs(eng["logits"] - logits).max())
    print(f"  attention: max |engine - module f64| = {worst:.1e} (tol {ATT_TOL:.0e}); "
          f"logits: {dl:.1e} (tol {LOGIT_TOL:.0e}), |logits| up to {np.abs(logits).max():.2f}")
    rep.compare(worst <= ATT_TOL, "attention", f"{name}: attention differs by {worst:.1e}")
    rep.compare(dl <= LOGIT_TOL, "logits", f"{name}: logits differ by {dl:.1e}")
    if "hs" in kw and not PERTURBED:  # heads not D/H wide: every map kind on it too
        check_maps(args, name, path, x, extra, lay, d, rep)
    # torchvision's layout names ImageNet's classes for a head of 1000 (its weights'
    # meta["categories"]), and none for a head of another size
    if c["layout"] == "torchvision":
        from torchvision.models._meta import _IMAGENET_CATEGORIES as cats
        want = [cats[0], cats[-1]] if c["n_classes"] == 1000 else []
        rep.check(c["labels"] == want, f"{name}: labels {c['labels']}, expected {want}")


def check_maps(args, name, path, x, extra, lay, d, rep):
    """Every map kind on a model whose heads are not D/H wide: vit_dump's explanations and
    token views (--class: the backward pass; --tokens) with the attention kept and
    recomputed (recomputing reads the queries, keys, values and dctx at the attention's
    width A = H * Dh: the same maps, within float rounding), each finite; and, given
    --vitlens, `vitlens --model model.pth --export` writes every kind a user sees."""
    outs = {}
    for att in ("keep", "recompute"):
        outs[att] = run_dump(args, path, x, d / f"maps_{att}", extra + ["--tokens", "--att", att], lay, -1)
    names = sorted(k for k in outs["keep"] if k.startswith("expl_")) + \
        ["features", "norms", "similarity", "tokenrank", "lens", "lens_map", "grad_input", "lrp_input"]
    rep.check(len(names) > 8 and all(n in outs["recompute"] for n in names),
              f"{name}: maps missing: {[n for n in names if n not in outs['recompute']]}")
    worst = 0.0
    for n in names:
        a, b = outs["keep"].get(n), outs["recompute"].get(n)
        if a is None or b is None:
            continue
        ok = np.isfinite(a).all() and np.isfinite(b).all() and np.abs(a).max() > 0
        rep.check(ok, f"{name}: {n} not finite, or all 0")
        e = float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30))
        worst = max(worst, e)
        rep.check(e <= 1e-5, f"{name}: {n} kept vs recomputed attention differs by {e:.1e}")
    print(f"  {len(names)} maps ({', '.join(n[5:] for n in names if n.startswith('expl_'))} and "
          f"the token views): finite, kept = recomputed within {worst:.1e}")
    if not args.vitlens:
        return
    from PIL import Image
    img = d / "scene.png"
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(img)
    exp = d / "export"
    shutil.rmtree(exp, ignore_errors=True)
    cmd = [args.vitlens, "--model", path, *extra, "--export", exp, img]
    if lay:
        cmd[3:3] = ["--layout", lay]
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    files = sorted(p.name for p in exp.glob("*.npy")) if exp.exists() else []
    L, H = outs["keep"]["config"]["n_layers"], outs["keep"]["config"]["n_heads"]
    tags = {f.split("_", 1)[-1].rsplit(".", 1)[0] for f in files}
    want = [f"L{L:02d}_H{H:02d}.npy", f"L{L:02d}_mean.npy"]
    ok = r.returncode == 0 and all(w in files for w in want) and len(files) > L * (H + 3)
    rep.check(ok, f"{name}: vitlens --export exit {r.returncode}, {len(files)} maps "
              f"({r.stderr.strip()[-300:]})")
    bad = [f for f in files if not np.isfinite(np.load(exp / f)).all()]
    rep.check(not bad, f"{name}: vitlens --export maps not finite: {bad}")
    # a checkpoint that brings no preprocessing: the assumption said on stderr, as the
    # window says it on its status line (the engine's flag, from vit_dump)
    assumed = bool(outs["keep"]["config"]["default_preprocess"])
    said = "ImageNet's mean/std and timm's crop (0.875, bicubic) assumed" in r.stderr
    rep.check(said == assumed, f"{name}: default preprocessing {assumed}, said on stderr: {said} "
              f"({r.stderr.strip()[:200]})")
    print(f"  vitlens --export: {len(files)} maps, kinds {sorted(tags)[:12]}...")


def test_backward(args, name, rep):
    m, kw, extra, layout = build(name)
    d = pathlib.Path(args.work) / ("backward_" + name)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "model.pth"
    torch.save(m.state_dict(), path)
    lay = None
    if layout:
        lay = d / f"{name}.json"
        user_layout(lay, layout)
    x = torch.randn(3, kw["S"], kw["S"], generator=torch.Generator().manual_seed(2))
    ref = m.double()
    xi = x.double()[None].requires_grad_(True)
    logits = ref(xi)[0]
    # the same module in float32: PyTorch's own float32 error, the yardstick below
    m32 = build(name)[0].float().eval()
    m32.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    for cls in (int(logits.argmax()), int(logits.argmin())):
        xi = x.double()[None].requires_grad_(True)
        y = ref(xi)[0, cls]
        # the probabilities the module computed (in its graph), by layer: one [B, T, T] per
        # head, or timm's one [B, H, T, T]
        heads = ([list(b.msa.att) for b in ref.encoder] if hasattr(ref, "encoder") else
                 [[h.att for h in b.attn.heads] if hasattr(b.attn, "heads") else [b.attn.att]
                  for b in ref.blocks])
        flat = torch.autograd.grad(y, [xi] + [a for layer in heads for a in layer])
        grads, i = [flat[0]], 1
        for layer in heads:
            parts = flat[i:i + len(layer)]
            grads.append(torch.cat([g if g.dim() == 4 else g[:, None] for g in parts], dim=1))
            i += len(layer)
        eng = run_dump(args, path, x, d / f"out{cls}", extra, lay, cls)
        gi = grads[0][0].numpy()
        e = float(np.abs(eng["grad_input"] - gi).max() / np.abs(gi).max())
        # PyTorch's own float32 autograd on the same module and input, against the same
        # float64 one: where float32 itself cannot reach BACK_TOL (the gradient amplifies
        # the forward pass's rounding), the engine must be within F32_SPREAD of it
        x32 = x.float()[None].requires_grad_(True)
        g32 = torch.autograd.grad(m32(x32)[0, cls], x32)[0][0].double().numpy()
        e32 = float(np.abs(g32 - gi).max() / np.abs(gi).max())
        tol = max(BACK_TOL, F32_SPREAD * e32)
        print(f"{name} class {cls}: grad_input relative error {e:.1e} (tol {tol:.1e}; PyTorch "
              f"float32's own {e32:.1e})")
        rep.check(e <= tol, f"{name}: grad_input differs by {e:.1e} (relative)")
        for l, ga in enumerate(grads[1:]):
            ga = ga[0].numpy()
            e = float(np.abs(eng["grad_att"][l] - ga).max() / max(np.abs(ga).max(), 1e-30))
            rep.check(e <= BACK_TOL, f"{name}: layer {l} grad_att differs by {e:.1e} (relative)")
        print(f"  grad_att of {len(grads) - 1} layers within {BACK_TOL:.0e}")


# --- reader -----------------------------------------------------------------------------


def test_reader(args, rep):
    f = test_families.spec("vit_timm")
    d = pathlib.Path(args.work) / "reader"
    base = d / "st"
    w = test_families.write_family(f, base)  # model.safetensors + config.json
    x = torch.randn(3, 80, 80, generator=torch.Generator().manual_seed(3))
    want = run_dump(args, base / "model.safetensors", x, d / "out_st", [])

    def case(label, obj, dtype="F32", bin_name="model.pth", hf=False):
        cd = d / label
        cd.mkdir(parents=True, exist_ok=True)
        (cd / "config.json").write_text((base / "config.json").read_text())
        torch.save(obj, cd / bin_name)
        ref = want
        if dtype != "F32" or hf:
            fam = dict(f) | ({"hf": "ViTForImageClassification", "eps": 1e-6} if hf else {})
            test_families.write_family(fam, cd / "st", dtype)
            (cd / "st" / "config.json").write_text((base / "config.json").read_text())
            ref = run_dump(args, cd / "st" / "model.safetensors", x, cd / "out_st", [])
        got = run_dump(args, cd / bin_name, x, cd / "out", [])
        same = all(np.array_equal(got[k], ref[k]) for k in ("att", "logits"))
        print(f"  {label}: {'bit for bit equal' if same else 'DIFFERENT'} to the .safetensors")
        rep.check(same, f"reader {label}: differs from the same weights as .safetensors")

    case("plain", dict(w))
    case("f16", {k: v.half() for k, v in w.items()}, "F16")
    case("bf16", {k: v.bfloat16() for k, v in w.items()}, "BF16")
    case("model_module", {"model": {"module." + k: v for k, v in w.items()}, "epoch": 3,
                          "optimizer": {"state": {}, "param_groups": [{"lr": 0.1, "params": [0, 1]}]}})
    case("state_dict_compiled", {"state_dict": {"_orig_mod." + k: v for k, v in w.items()}})
    # timm's train.py: its args (an argparse.Namespace) beside the state dict
    case("timm_train_args", {"epoch": 2, "arch": "vit", "state_dict": dict(w),
                             "args": argparse.Namespace(lr=0.1, model="vit", drop=None)})
    case("dino_teacher", {"teacher": {**{"backbone." + k: v for k, v in w.items()},
                                      "head.last_layer.weight_g": torch.ones(5, 1)},
                          "student": {}, "epoch": 1})
    shared = dict(w)
    qkv = w["blocks.0.attn.qkv.weight"]
    big = torch.cat([qkv.flatten(), w["blocks.0.attn.qkv.bias"]])  # one storage, two views
    shared["blocks.0.attn.qkv.weight"] = big[: qkv.numel()].view_as(qkv)
    shared["blocks.0.attn.qkv.bias"] = big[qkv.numel():]
    shared["cls_token"] = nn.Parameter(w["cls_token"].clone())
    case("shared_storage_parameter", shared)
    hf = test_families.to_hf(w, dict(f) | {"hf": "ViTForImageClassification"}, torch.Generator())
    case("hf_bin", hf, hf=True, bin_name="pytorch_model.bin")


# --- layouts ---------------------------------------------------------------------------


def dump_error(args, model, x, out, layout=None):
    """vit_dump's message when it refuses the model; "" when it opens it."""
    out.mkdir(parents=True, exist_ok=True)
    x.numpy().astype(np.float32).tofile(out / "input.f32")
    cmd = [args.dump, "--model", model, "--input", out / "input.f32", "--out", out]
    if layout:
        cmd += ["--layout", layout]
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    return (r.stdout + r.stderr).strip() if r.returncode else ""


def test_layouts(args, rep):
    f = test_families.spec("vit_timm")
    d = pathlib.Path(args.work) / "layouts"
    base = d / "timm"
    w = test_families.write_family(f, base)
    x = torch.randn(3, 80, 80, generator=torch.Generator().manual_seed(4))
    want = run_dump(args, base / "model.safetensors", x, d / "out_timm", [])
    c = want["config"]
    rep.check((c["layout"], c["naming"]) == ("timm", "timm"),
              f"timm's names: layout '{c['layout']}', naming '{c['naming']}'")

    # class names: a timm head of 1000 classes that config.json does not name gets the timm
    # layout's list ("labels": "torchvision", ImageNet-1k's: timm takes 1000 classes for
    # ImageNet-1k, timm/data/imagenet_info.py), marked assumed; config.json's names win; a
    # head of another size gets none (the control: the rule is the head's size)
    from torchvision.models._meta import _IMAGENET_CATEGORIES as cats

    def head_of(C, names, where):
        hd_ = d / where
        hd_.mkdir(parents=True, exist_ok=True)
        w2 = dict(w, **{"head.weight": torch.randn(C, f["D"], generator=torch.Generator()
                                                   .manual_seed(C)) * 0.02,
                        "head.bias": torch.zeros(C)})
        test_families.write_safetensors(hd_ / "model.safetensors", w2, "F32")
        cfg = json.loads((base / "config.json").read_text())
        cfg["num_classes"] = C
        cfg.pop("label_names", None)
        if names:
            cfg["label_names"] = names
        (hd_ / "config.json").write_text(json.dumps(cfg))
        return run_dump(args, hd_ / "model.safetensors", x, d / f"out_{where}", [])["config"]

    for C, names, names_want, assumed in ((1000, None, [cats[0], cats[-1]], 1),
                                          (1000, [f"c{i}" for i in range(1000)],
                                           ["c0", "c999"], 0),
                                          (999, None, [], 0)):
        c = head_of(C, names, f"head{C}{'_named' if names else ''}")
        print(f"  a timm head of {C}{' named in config.json' if names else ''}: labels "
              f"{c['labels']}, assumed {c['labels_assumed']}")
        rep.check(c["labels"] == names_want and c["labels_assumed"] == assumed,
                  f"head of {C}: labels {c['labels']} assumed {c['labels_assumed']}, expected "
                  f"{names_want} assumed {assumed}")

    # transformers' ViTModel (no prefix) without layer_norm_eps: hf.json's conventions
    fh = test_families.spec("dino_hf")
    hd = d / "hf"
    test_families.write_family(fh, hd)
    cfg = json.loads((hd / "config.json").read_text())
    del cfg["layer_norm_eps"]
    (hd / "config.json").write_text(json.dumps(cfg))
    xh = torch.randn(3, 48, 48, generator=torch.Generator().manual_seed(5))
    c = run_dump(args, hd / "model.safetensors", xh, d / "out_hf", [])["config"]
    print(f"  ViTModel: layout '{c['layout']}', naming '{c['naming']}', eps {c['ln_eps']:g}")
    rep.check((c["layout"], c["naming"]) == ("hf", "hf") and abs(c["ln_eps"] - 1e-12) < 1e-15,
              "transformers' names: layout hf, its conventions and eps 1e-12")

    # timm.json as a user's template: the same weights under "net.", the head as alternatives
    nd = d / "renamed"
    nd.mkdir(parents=True, exist_ok=True)
    test_families.write_safetensors(nd / "model.safetensors", {"net." + k: v for k, v in w.items()},
                                    "F32")
    (nd / "config.json").write_text((base / "config.json").read_text())
    lay = json.loads((ROOT / "assets/layouts/timm.json").read_text())
    lay["tensors"] = {k: "{p}" + v for k, v in lay["tensors"].items()}
    lay["tensors"]["head.weight"] = ["{p}classifier.weight", "{p}head.weight"]
    lay |= {"name": "my-vit", "prefix": "net."}
    del lay["detect"]
    mine = d / "my-vit.json"
    mine.write_text(json.dumps(lay, indent=1))
    got = run_dump(args, nd / "model.safetensors", x, d / "out_mine", [], layout=mine)
    same = all(np.array_equal(got[k], want[k]) for k in ("att", "logits"))
    print(f"  timm.json as a template, names under 'net.': "
          f"{'bit for bit equal' if same else 'DIFFERENT'} to timm's own names")
    rep.check(same and got["config"]["layout"] == "my-vit", "the user's copy of timm.json")
    # the control: norm1 and norm2 swapped must show
    t = lay["tensors"]
    for p_ in ("weight", "bias"):
        a_, b_ = f"blocks.{{l}}.norm1.{p_}", f"blocks.{{l}}.norm2.{p_}"
        t[a_], t[b_] = t[b_], t[a_]
    swapped = d / "swapped.json"
    swapped.write_text(json.dumps(lay, indent=1))
    bad = run_dump(args, nd / "model.safetensors", x, d / "out_swapped", [], layout=swapped)
    moved = float(np.abs(bad["logits"] - want["logits"]).max())
    print(f"  control: norm1 and norm2 swapped moves the logits by {moved:.2e}")
    rep.check(moved > 1e-2, f"swapping the norms moved the logits by {moved:.1e} only")

    # the messages
    def refused(model, keys, what, layout=None, x=x):
        msg = dump_error(args, model, x, d / "out_refused", layout)
        print(f"  {what}: {msg}")
        rep.check(msg and all(k in msg for k in keys), f"{what}: the message lacks {keys}")

    t["blocks.{l}.attn.proj.weight"] = "{p}blocks.{l}.attn.out.weight"
    swapped.write_text(json.dumps(lay, indent=1))
    refused(nd / "model.safetensors",
            ["tensor 'net.blocks.0.attn.out.weight' is missing", "role blocks.{l}.attn.proj.weight",
             "'my-vit' (swapped.json)", "net.cls_token [1, 1, 128]"], "a role nothing matches",
            swapped)
    # "labels" naming a layout: one that has no list (timm's own is a name), or none
    for bad_labels in ("timm", "no-such-layout"):
        lab = dict(lay, tensors=dict(lay["tensors"], **{
            "blocks.{l}.attn.proj.weight": "{p}blocks.{l}.attn.proj.weight"}), labels=bad_labels)
        swapped.write_text(json.dumps(lab, indent=1))
        refused(nd / "model.safetensors", ["swapped.json", '"labels"', f"'{bad_labels}'",
                                           "not a shipped layout with a list"],
                f'"labels": "{bad_labels}"', swapped)
    lay["naming"] = "jax"
    swapped.write_text(json.dumps(lay, indent=1))
    refused(nd / "model.safetensors", ["swapped.json", '"naming"', '"hf"'], "a bad naming", swapped)
    lay["naming"], lay["tensors"]["norm.weight"] = "timm", 5
    swapped.write_text(json.dumps(lay, indent=1))
    refused(nd / "model.safetensors", ["swapped.json", "'norm.weight' is not a tensor name"],
            "a role's name not a string", swapped)
    dv = d / "dinov2"
    dv.mkdir(parents=True, exist_ok=True)
    wh = test_families.write_family(fh, dv)
    wh["encoder.layer.0.norm1.weight"] = torch.ones(fh["D"])
    test_families.write_safetensors(dv / "model.safetensors", wh, "F32")
    refused(dv / "model.safetensors", ["'encoder.layer.0.norm1.weight'", "Dinov2Model"],
            "Hugging Face's Dinov2Model names", x=xh)
    refused(base / "model.safetensors", ["tensor 'class_token' is missing", "'torchvision'"],
            "--layout overrides detection", ROOT / "assets/layouts/torchvision.json")
    # per-head lists whose heads differ in size (one head's Linear(D, 12) among Linear(D, 20))
    # and an attention width the heads count does not divide (--heads against fused rows)
    m, kw, _, _ = build("notebook_heads_dh20")
    sd = m.state_dict()
    for r in ("query", "key", "value"):
        sd[f"blocks.1.attn.heads.2.{r}.weight"] = sd[f"blocks.1.attn.heads.2.{r}.weight"][:12]
    uneven = d / "uneven_heads.pth"
    torch.save(sd, uneven)
    xs = torch.randn(3, kw["S"], kw["S"])
    refused(uneven, ["uneven_heads.pth", "block 1", "not all the same size"],
            "heads of different sizes", x=xs)
    m, kw, _, _ = build("notebook_linear_wide")
    wide = d / "wide.pth"
    torch.save(m.state_dict(), wide)
    msg = dump_error(args, wide, xs, d / "out_refused")
    rep.check(msg == "", f"seed 004's Linear(D, D) per head refused: {msg}")


# --- preprocess -------------------------------------------------------------------------


def test_preprocess(args, rep):
    """torchvision's layout brings its weights' transform: ViT_B_16_Weights.IMAGENET1K_V1
    .transforms() (Resize(256, BILINEAR), CenterCrop(224), ImageNet mean/std) on a PIL
    image, against the engine's input for the same PNG, landscape and portrait."""
    from PIL import Image
    from torchvision.models import ViT_B_16_Weights
    tf = ViT_B_16_Weights.IMAGENET1K_V1.transforms()
    d = pathlib.Path(args.work) / "preprocess"
    d.mkdir(parents=True, exist_ok=True)
    m = torchvision_vit(S=224, P=32, D=64, H=1, F_=64, L=1, C=4)
    torch.save(m.state_dict(), d / "model.pth")
    g = np.random.default_rng(4)
    for w, h in ((403, 301), (250, 377)):
        yy, xx = np.mgrid[0:h, 0:w]
        rgb = np.stack([(xx * 255 // w), (yy * 255 // h), g.integers(0, 256, (h, w))], -1)
        png = d / f"photo_{w}x{h}.png"
        Image.fromarray(rgb.astype(np.uint8)).save(png)
        want = tf(Image.open(png).convert("RGB")).numpy()
        out = d / f"out_{w}x{h}"
        r = subprocess.run([str(args.dump), "--model", str(d / "model.pth"), "--image", str(png),
                            "--out", str(out)], capture_output=True, text=True)
        if not rep.check(r.returncode == 0, f"vit_dump: {r.stderr.strip()}"):
            continue
        got = np.load(out / "input.npy")
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        print(f"  {w}x{h}: engine's input vs torchvision's transforms(): max diff {diff:.1e}")
        rep.check(diff <= 1e-6, f"preprocess {w}x{h}: differs by {diff:.1e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["reader", "style", "backward", "preprocess", "layouts",
                                     "list"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump")
    ap.add_argument("--work")
    ap.add_argument("--perturb", choices=["scale", "flatten", "act", "dh"])
    ap.add_argument("--vitlens", help="style: also `vitlens --export` every map kind")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.part == "list":
        print("\n".join(STYLES))
        return 0
    global PERTURBED
    PERTURBED = args.perturb
    rep = Report()
    if args.part == "reader":
        test_reader(args, rep)
    elif args.part == "preprocess":
        test_preprocess(args, rep)
    elif args.part == "layouts":
        test_layouts(args, rep)
    elif args.part == "style":
        test_style(args, args.name, rep)
    else:
        test_backward(args, args.name, rep)
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
