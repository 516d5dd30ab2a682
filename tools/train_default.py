#!/usr/bin/python3
"""Train vitlens's built-in ViT on the procedural scenes of tools/gen_scenes.py.

A small ViT in timm's VisionTransformer layout and naming (cls_token, pos_embed,
patch_embed.proj, blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2},
norm, head), so the engine loads it like any timm checkpoint. CPU only, Debian's
python3-torch.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_default.py --out assets/default

writes model.safetensors, config.json and train_log.txt into --out.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scenes  # noqa: E402

MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


class Block(nn.Module):
    """timm Block: x = x + attn(norm1(x)); x = x + mlp(norm2(x))."""

    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(dim, 3 * dim)
        self.attn.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(dim, mlp)
        self.mlp.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        B, T, D = x.shape
        qkv = self.attn.qkv(self.norm1(x)).reshape(B, T, 3, self.heads, D // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        a = ((q * (D // self.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1)
        x = x + self.attn.proj((a @ v).transpose(1, 2).reshape(B, T, D))
        return x + self.mlp.fc2(F.gelu(self.mlp.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, size, patch, dim, depth, heads, mlp, classes):
        super().__init__()
        n = (size // patch) ** 2
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.cls_token, std=1e-6)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def to_tensor(imgs):
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).float().div(255)
    return (x - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]


def save_safetensors(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)  # keep the data area 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def evaluate(model, imgs, labels, bs=256):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(imgs), bs):
            correct += (model(to_tensor(imgs[i:i + bs])).argmax(1) == torch.from_numpy(labels[i:i + bs])).sum().item()
    model.train()
    return correct / len(imgs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="assets/default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=60000, help="training scenes")
    ap.add_argument("--val", type=int, default=2000, help="held-out scenes (split 'val')")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "train_log.txt"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    t0 = time.time()
    tr_x, tr_y, _ = gen_scenes.batch(a.seed, "train", 0, a.train)
    va_x, va_y, _ = gen_scenes.batch(a.seed, "val", 0, a.val)
    say(f"generated {a.train} train + {a.val} val scenes in {time.time() - t0:.0f} s")

    S, P = gen_scenes.SIZE, 8
    model = ViT(S, P, a.dim, a.depth, a.heads, 4 * a.dim, len(gen_scenes.CLASSES))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.05)
    steps = a.epochs * (a.train // a.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, a.lr, total_steps=steps, pct_start=0.1)
    g = np.random.default_rng(a.seed)
    step = 0
    for ep in range(a.epochs):
        perm = g.permutation(a.train)
        tl = 0.0
        for i in range(a.train // a.batch):
            idx = perm[i * a.batch:(i + 1) * a.batch]
            xb = tr_x[idx]
            if True:  # flips and 90-degree turns keep every class's label
                k = int(g.integers(4))
                xb = np.rot90(xb, k, axes=(1, 2))
                if g.random() < 0.5:
                    xb = xb[:, :, ::-1]
            loss = F.cross_entropy(model(to_tensor(np.ascontiguousarray(xb))),
                                   torch.from_numpy(tr_y[idx]), label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tl += loss.item()
        acc = evaluate(model, va_x, va_y)
        say(f"epoch {ep + 1}/{a.epochs} loss {tl / (a.train // a.batch):.4f} "
            f"val acc {acc * 100:.2f}% ({time.time() - t0:.0f} s)")

    tensors = {k: v for k, v in model.state_dict().items()}
    meta = {"format": "pt", "source": "vitlens tools/train_default.py", "seed": str(a.seed)}
    save_safetensors(os.path.join(a.out, "model.safetensors"), tensors, meta)
    cfg = {
        "architecture": "vit_vitlens_shapes_patch8_96",
        "num_heads": a.heads,
        "num_classes": len(gen_scenes.CLASSES),
        "label_names": gen_scenes.CLASSES,
        "pretrained_cfg": {"input_size": [3, S, S], "crop_pct": 1.0, "interpolation": "bicubic",
                           "mean": list(MEAN), "std": list(STD)},
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    say(f"final val acc {evaluate(model, va_x, va_y) * 100:.2f}% on {a.val} held-out scenes")


if __name__ == "__main__":
    main()
