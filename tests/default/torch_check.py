#!/usr/bin/python3
"""The built-in model in the C engine against a plain PyTorch forward pass.

Runs assets/default/model.safetensors on the shipped demo scenes twice: through
the engine (default_check --dump: the input tensor, the logits and every
attention matrix) and through the forward pass below, written from timm's
VisionTransformer (vision_transformer.py) with torch.nn.functional only: no
code shared with tools/ or the engine. Compares every tensor and the top-1
class; exits 1 on any mismatch.

  /usr/bin/python3 torch_check.py --check build/tests/default/default_check \
      --assets assets/default --work DIR
"""
import argparse
import json
import os
import subprocess
import sys

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: safetensors_io
import safetensors_io  # noqa: E402

TOL = {"input": 1e-6, "logits": 1e-4, "attention": 1e-5}


def read_safetensors(path):
    """{name: float32 tensor} (tests/safetensors_io.py reads the file)."""
    return {k: torch.from_numpy(v) for k, v in safetensors_io.read_safetensors(path).items()}


def preprocess(path, cfg):
    """timm's eval transform for crop_pct 1 on an S x S image: ToTensor, Normalize."""
    pc = cfg["pretrained_cfg"]
    S = pc["input_size"][-1]
    im = Image.open(path).convert("RGB")
    assert im.size == (S, S) and pc["crop_pct"] == 1.0, "demo scenes are S x S, crop_pct 1"
    x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)
    mean, std = torch.tensor(pc["mean"]), torch.tensor(pc["std"])
    return (x - mean[:, None, None]) / std[:, None, None]


def forward(w, x, heads):
    """x [3, S, S] -> logits [C], attention [L, H, T, T]."""
    D, _, P, _ = w["patch_embed.proj.weight"].shape
    x = F.conv2d(x[None], w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)                                  # [1, N, D]
    x = torch.cat([w["cls_token"], x], 1) + w["pos_embed"]            # [1, T, D]
    T, Dh = x.shape[1], D // heads
    att = []
    for l in range(len({k.split(".")[1] for k in w if k.startswith("blocks.")})):
        def p(name):
            return w[f"blocks.{l}.{name}"]
        # timm: x = x + self.attn(self.norm1(x))
        h = F.layer_norm(x, (D,), p("norm1.weight"), p("norm1.bias"), 1e-6)
        qkv = F.linear(h, p("attn.qkv.weight"), p("attn.qkv.bias"))
        q, k, v = qkv.reshape(1, T, 3, heads, Dh).permute(2, 0, 3, 1, 4)
        a = (q * Dh ** -0.5 @ k.transpose(-2, -1)).softmax(-1)       # [1, H, T, T]
        att.append(a[0])
        o = (a @ v).transpose(1, 2).reshape(1, T, D)
        x = x + F.linear(o, p("attn.proj.weight"), p("attn.proj.bias"))
        # timm: x = x + self.mlp(self.norm2(x))
        h = F.layer_norm(x, (D,), p("norm2.weight"), p("norm2.bias"), 1e-6)
        h = F.gelu(F.linear(h, p("mlp.fc1.weight"), p("mlp.fc1.bias")))
        x = x + F.linear(h, p("mlp.fc2.weight"), p("mlp.fc2.bias"))
    x = F.layer_norm(x, (D,), w["norm.weight"], w["norm.bias"], 1e-6)
    return F.linear(x[0, 0], w["head.weight"], w["head.bias"]), torch.stack(att)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True, help="the default_check executable")
    ap.add_argument("--assets", required=True, help="assets/default")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model = os.path.join(a.assets, "model.safetensors")
    with open(os.path.join(a.assets, "config.json")) as f:
        cfg = json.load(f)
    demo_dir = os.path.join(a.assets, "demo")
    images = sorted(os.path.join(demo_dir, f) for f in os.listdir(demo_dir) if f.endswith(".png"))
    os.makedirs(a.work, exist_ok=True)
    dump = os.path.join(a.work, "engine.f32")
    r = subprocess.run([a.check, "--dump", dump, model, *images], capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        print("FAIL the engine did not run")
        return 1

    w = read_safetensors(model)
    heads = cfg["num_heads"]
    S = cfg["pretrained_cfg"]["input_size"][-1]
    C = w["head.weight"].shape[0]
    got = np.fromfile(dump, "<f4")
    worst = {k: 0.0 for k in TOL}
    off, failures = 0, 0
    for path in images:
        x = preprocess(path, cfg)
        with torch.no_grad():
            logits, att = forward(w, x, heads)
        ref = {"input": x.numpy(), "logits": logits.numpy(), "attention": att.numpy()}
        eng = {}
        for k in ("input", "logits", "attention"):
            n = ref[k].size
            eng[k] = got[off:off + n].reshape(ref[k].shape)
            off += n
            d = float(np.abs(eng[k] - ref[k]).max())
            worst[k] = max(worst[k], d)
            if not d <= TOL[k]:
                print(f"FAIL {os.path.basename(path)}: {k} max diff {d:.3g} > {TOL[k]:g}; "
                      f"engine {eng[k].ravel()[:4]}, torch {ref[k].ravel()[:4]}")
                failures += 1
        if int(eng["logits"].argmax()) != int(ref["logits"].argmax()):
            print(f"FAIL {os.path.basename(path)}: top-1 engine {eng['logits'].argmax()} "
                  f"torch {ref['logits'].argmax()}")
            failures += 1
        print(f"     {os.path.basename(path)}: top-1 {cfg['label_names'][int(ref['logits'].argmax())]}"
              f", logits {np.array2string(ref['logits'], precision=3)}")
    if off != got.size:
        print(f"FAIL the dump holds {got.size} floats, expected {off} (S={S}, C={C})")
        failures += 1
    for k in TOL:
        print(f"{'ok  ' if worst[k] <= TOL[k] else 'FAIL'} {k}: max |engine - torch| over "
              f"{len(images)} scenes {worst[k]:.3g} (tolerance {TOL[k]:g})")
    print("torch_check: " + ("the engine matches PyTorch" if not failures else f"{failures} mismatches"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
