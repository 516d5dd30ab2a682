#!/usr/bin/python3
"""your_own_vit.py - train a small ViT written the way the notebooks write one, on the
built-in model's shape scenes (tools/gen_scenes.py), and save it as every tutorial does:
torch.save(model.state_dict(), "my_vit.pth"). docs/your-own-vit.md walks through it.

    /usr/bin/python3 tools/your_own_vit.py --out my_vit       # a few minutes on a laptop CPU

Writes OUT/my_vit.pth, OUT/config.json (input size, mean/std, class names: so that vitlens
preprocesses as the training did) and OUT/scenes/ (held-out test scenes to open).
Then: build/vitlens --model OUT/my_vit.pth OUT/scenes
"""
import argparse
import json
import os
import pathlib
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import gen_scenes  # noqa: E402
from machine import cpu_name  # noqa: E402

# --- the model, in the notebooks' words ------------------------------------------------


class PatchEmbeddings(nn.Module):
    """A convolution with kernel and stride P: one D-vector per P x P patch."""

    def __init__(self, patch_size, hidden_dim):
        super().__init__()
        self.conv = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.conv(x).flatten(2).transpose(1, 2)  # [B, N, D]


class Head(nn.Module):
    """One attention head with its own query, key and value (no bias)."""

    def __init__(self, n_embed, head_size):
        super().__init__()
        self.key = nn.Linear(n_embed, head_size, bias=False)
        self.query = nn.Linear(n_embed, head_size, bias=False)
        self.value = nn.Linear(n_embed, head_size, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        wei = q @ k.transpose(-2, -1) * (C ** -0.5)  # scaled by the embedding width, as taught
        return F.softmax(wei, dim=-1) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embed, num_heads):
        super().__init__()
        head_size = n_embed // num_heads
        self.heads = nn.ModuleList([Head(n_embed, head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embed)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


class Block(nn.Module):
    def __init__(self, n_embed, num_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embed)
        self.attn = MultiHeadAttention(n_embed, num_heads)
        self.ln2 = nn.LayerNorm(n_embed)
        self.ffn = nn.Sequential(nn.Linear(n_embed, 4 * n_embed), nn.GELU(),
                                 nn.Linear(4 * n_embed, n_embed), nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, img_size=96, patch_size=8, hidden_dim=64, num_heads=4, num_blocks=4,
                 num_classes=6):
        super().__init__()
        num_patches = (img_size // patch_size) ** 2
        self.patch_embedding = PatchEmbeddings(patch_size, hidden_dim)
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.position_embedding = nn.Parameter(torch.randn(1, num_patches + 1, hidden_dim) * 0.02)
        self.blocks = nn.ModuleList([Block(hidden_dim, num_heads) for _ in range(num_blocks)])
        self.layer_norm = nn.LayerNorm(hidden_dim)
        self.mlp_head = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        x = self.patch_embedding(x)
        cls = self.class_embedding.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.position_embedding
        for block in self.blocks:
            x = block(x)
        return self.mlp_head(self.layer_norm(x)[:, 0])  # the CLS token


# --- data and training -------------------------------------------------------------------

MEAN, STD = 0.5, 0.25  # the built-in model's normalisation


def scenes(split, count, level):
    imgs, labels, _ = gen_scenes.batch_parallel(0, split, 0, count, None if level == 1 else
                                                _Level(level), jobs=os.cpu_count() or 1)
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).float().div(255).sub(MEAN).div(STD)
    return x, torch.from_numpy(labels)


class _Level:  # picklable for the worker processes
    def __init__(self, level):
        self.level = level

    def __call__(self, i):
        return self.level


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="my_vit")
    ap.add_argument("--train", type=int, default=8000, help="training scenes")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--level", type=float, default=0.4, help="clutter in [0, 1] (gen_scenes)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch's threads (1: the same numbers on every run of one machine;\n"
                         "other counts sum in other orders)")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    (out / "scenes").mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"seed 0, {a.threads} thread(s), torch {torch.__version__}, {cpu_name()}")
    t0, c0 = time.time(), time.process_time()
    x, y = scenes("train", a.train, a.level)
    xv, yv = scenes("val", 500, a.level)
    print(f"{a.train} training scenes (clutter {a.level}) in {time.time() - t0:.0f} s")

    model = ViT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    steps = a.epochs * (a.train // 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 1e-3, total_steps=steps, pct_start=0.1)
    for ep in range(a.epochs):
        model.train()
        perm = torch.randperm(a.train)
        for s in range(a.train // 64):
            idx = perm[s * 64:(s + 1) * 64]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        model.eval()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {ep + 1}/{a.epochs}: loss {loss.item():.3f}, val accuracy {acc:.1%} "
              f"({time.time() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU)")

    torch.save(model.state_dict(), out / "my_vit.pth")  # as every tutorial does
    # what vitlens cannot read from the weights: input size, normalisation, class names
    (out / "config.json").write_text(json.dumps({
        "label_names": gen_scenes.CLASSES,
        "pretrained_cfg": {"input_size": [3, 96, 96], "crop_pct": 1.0,
                           "mean": [MEAN] * 3, "std": [STD] * 3}}, indent=1))
    from PIL import Image
    for i in range(8):
        rgb, label, _, _ = gen_scenes.scene(0, "test", i, a.level)
        Image.fromarray(rgb).save(out / "scenes" / f"{i:02d}_{gen_scenes.CLASSES[label]}.png")
    print(f"wrote {out}/my_vit.pth, {out}/config.json and 8 test scenes in {out}/scenes/")


if __name__ == "__main__":
    main()
