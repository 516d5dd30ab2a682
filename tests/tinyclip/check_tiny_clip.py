#!/usr/bin/python3
"""The tiny CLIP of tools/train_tiny_clip.py against OpenAI's architecture, written here
a second time the way openai/CLIP's clip/model.py builds it: torch.nn.MultiheadAttention
(sequence-first), nn.LayerNorm, QuickGELU, the text tower on the full 77-token context
(zero-padded after end-of-text, OpenAI's build_attention_mask, pooled at ids.argmax()),
loaded with load_state_dict(strict=True) from the .safetensors file read by the reader
below (not the writer's code). Checks:

- every tensor name and shape is OpenAI's for the config in open_clip_config.json,
  and nothing else is in the file;
- the image embedding of scene.png and the text embeddings of reference.json's token ids
  equal the training script's (max relative error <= 1e-5), and so do its logits
  (logit_scale.exp() * cos, <= 1e-4);
- the vocabulary is beside the model.

The model is trained here first, small and in seconds (2 steps; its numbers are not the
point, its file is): tools/train_tiny_clip.py --out WORK with CLIP's vocabulary from
SHARED/clip (exit 77, a skip, without it).

With --text-dump and --vit-dump (tests/parity's drivers of vit_text_embed and vit_forward
with vit_set_text_head), the C engine too: its text embeddings of the same ids, its image
embedding of scene.png and its logits against the same numbers (<= 1e-5 relative, 1e-4).

--control gelu (GELU for QuickGELU) or nomask (no causal mask) makes the reference wrong
in a plausible way: the comparison must then fail, and the run passes only then (a crash
fails it).

    check_tiny_clip.py --shared SHARED --work WORK [--control gelu|nomask]
                       [--text-dump text_dump --vit-dump vit_dump]
"""
import argparse
import json
import math
import os
import subprocess
import sys

from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: safetensors_io
import safetensors_io  # noqa: E402


def read_safetensors(path):
    """{name: float32 tensor} (tests/safetensors_io.py reads the file)."""
    return {k: torch.from_numpy(v) for k, v in safetensors_io.read_safetensors(path).items()}


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, d, heads, act, mask):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads)
        self.ln_1 = nn.LayerNorm(d)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(d, 4 * d))
        self.mlp.add_module("gelu", act())
        self.mlp.add_module("c_proj", nn.Linear(4 * d, d))
        self.ln_2 = nn.LayerNorm(d)
        self.mask = mask

    def forward(self, x):  # x [L, N, D], sequence first as in OpenAI's code
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=self.mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, d, layers, heads, act, mask=None):
        super().__init__()
        self.resblocks = nn.Sequential(*[Block(d, heads, act, mask) for _ in range(layers)])


class Visual(nn.Module):
    def __init__(self, size, patch, width, layers, heads, embed, act):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, patch, patch, bias=False)
        self.class_embedding = nn.Parameter(torch.empty(width))
        self.positional_embedding = nn.Parameter(torch.empty((size // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads, act)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(torch.empty(width, embed))

    def forward(self, x):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding + torch.zeros(x.shape[0], 1, x.shape[-1])
        x = torch.cat([cls, x], 1) + self.positional_embedding
        x = self.ln_pre(x).permute(1, 0, 2)
        x = self.transformer.resblocks(x).permute(1, 0, 2)
        return self.ln_post(x[:, 0, :]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, cfg, control):
        super().__init__()
        v, t = cfg["vision_cfg"], cfg["text_cfg"]
        act = nn.GELU if control == "gelu" else QuickGELU
        assert cfg["quick_gelu"] is True
        self.visual = Visual(v["image_size"], v["patch_size"], v["width"], v["layers"],
                             v["width"] // v["head_width"], cfg["embed_dim"], act)
        C = t["context_length"]
        mask = None if control == "nomask" else torch.full((C, C), float("-inf")).triu_(1)
        self.transformer = Transformer(t["width"], t["layers"], t["heads"], act, mask)
        self.token_embedding = nn.Embedding(t["vocab_size"], t["width"])
        self.positional_embedding = nn.Parameter(torch.empty(C, t["width"]))
        self.ln_final = nn.LayerNorm(t["width"])
        self.text_projection = nn.Parameter(torch.empty(t["width"], cfg["embed_dim"]))
        self.logit_scale = nn.Parameter(torch.ones([]))

    def encode_text(self, text):  # text [N, 77]
        x = self.token_embedding(text) + self.positional_embedding
        x = self.transformer.resblocks(x.permute(1, 0, 2)).permute(1, 0, 2)
        x = self.ln_final(x)
        return x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--control", choices=("gelu", "nomask"))
    ap.add_argument("--text-dump", help="tests/parity's text_dump: check the C engine too")
    ap.add_argument("--vit-dump", help="tests/parity's vit_dump")
    a = ap.parse_args()
    torch.set_num_threads(1)
    vocab = os.path.join(a.shared, "clip", "bpe_simple_vocab_16e6.txt.gz")
    if not os.path.exists(vocab):
        print(f"SKIP: {vocab} missing")
        return 77
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, os.path.join(root, "tools", "train_tiny_clip.py"),
                    "--out", a.work, "--vocab", vocab, "--train", "32", "--batch", "16",
                    "--steps", "2", "--eval", "8", "--width", "64", "--layers", "2",
                    "--text-layers", "2", "--embed", "32", "--log-every", "1"], check=True)
    a.dir = a.work
    with open(os.path.join(a.dir, "open_clip_config.json")) as f:
        full = json.load(f)
    cfg, pre = full["model_cfg"], full["preprocess_cfg"]
    with open(os.path.join(a.dir, "reference.json")) as f:
        ref = json.load(f)
    sd = read_safetensors(os.path.join(a.dir, "model.safetensors"))
    model = CLIP(cfg, a.control)
    want = model.state_dict()
    missing, extra = sorted(set(want) - set(sd)), sorted(set(sd) - set(want))
    bad = [k for k in want if k in sd and tuple(want[k].shape) != tuple(sd[k].shape)]
    if missing or extra or bad:
        sys.exit(f"FAIL: names/shapes: missing {missing[:5]}, extra {extra[:5]}, shape {bad[:5]}")
    model.load_state_dict(sd, strict=True)
    model.eval()
    assert sd["token_embedding.weight"].shape[0] == 49408
    assert os.path.exists(os.path.join(a.dir, "bpe_simple_vocab_16e6.txt.gz")), "no vocabulary"

    img = np.asarray(Image.open(os.path.join(a.dir, ref["image"])).convert("RGB"), np.float32)
    S = cfg["vision_cfg"]["image_size"]
    assert img.shape == (S, S, 3), f"scene {img.shape}, model {S}"
    x = torch.from_numpy(img / 255).permute(2, 0, 1)[None]
    x = (x - torch.tensor(pre["mean"])[:, None, None]) / torch.tensor(pre["std"])[:, None, None]
    C = cfg["text_cfg"]["context_length"]
    ids = torch.zeros(len(ref["ids"]), C, dtype=torch.long)
    for i, t in enumerate(ref["ids"]):
        ids[i, :len(t)] = torch.tensor(t)
    with torch.no_grad():
        ie = model.visual(x.float())
        te = model.encode_text(ids)
        ls = model.logit_scale.exp()
        logits = ls * nn.functional.normalize(ie, dim=-1) @ nn.functional.normalize(te, dim=-1).T
    e_img = rel(ie[0], torch.tensor(ref["image_embedding"]))
    e_txt = rel(te, torch.tensor(ref["text_embeddings"]))
    e_log = float((logits[0] - torch.tensor(ref["logits"])).abs().max())
    print(f"image embedding rel {e_img:.2e}, text embeddings rel {e_txt:.2e}, "
          f"logits abs {e_log:.2e} (logit_scale {ls:.3f})")
    for t, v in zip(ref["texts"], logits[0].tolist()):
        print(f"  {v:8.3f}  {t}")
    ok = e_img <= 1e-5 and e_txt <= 1e-5 and e_log <= 1e-4 and math.isfinite(e_log)
    if a.text_dump and a.vit_dump:  # the engine: the same ids and scene, the same numbers
        w = a.work
        with open(os.path.join(w, "ids.txt"), "w") as f:
            f.write("".join(" ".join(map(str, t)) + "\n" for t in ref["ids"]))
        subprocess.run([a.text_dump, "--model", os.path.join(w, "model.safetensors"),
                        "--ids", os.path.join(w, "ids.txt"), "--out",
                        os.path.join(w, "text.f32")], check=True)
        # the head: the reference's own text embeddings, so the two towers are checked apart
        emb = np.asarray(ref["text_embeddings"], "<f4")
        emb.tofile(os.path.join(w, "ref_text.f32"))
        subprocess.run([a.vit_dump, "--model", os.path.join(w, "model.safetensors"),
                        "--image", os.path.join(w, ref["image"]), "--text-head",
                        f"{os.path.join(w, 'ref_text.f32')}:{len(emb)}", "--out",
                        os.path.join(w, "vit")], check=True, stdout=subprocess.DEVNULL)
        c_txt = torch.from_numpy(np.fromfile(os.path.join(w, "text.f32"), "<f4").reshape(emb.shape))
        c_img = torch.from_numpy(np.load(os.path.join(w, "vit", "embed.npy")))
        c_log = torch.from_numpy(np.load(os.path.join(w, "vit", "logits.npy")).reshape(-1))
        # against this file's PyTorch: a wrong reference (--control) differs from the engine too
        ce_txt, ce_img = rel(c_txt, te), rel(c_img, ie[0])
        ce_log = float((c_log - logits[0]).abs().max())
        print(f"engine: image embedding rel {ce_img:.2e}, text embeddings rel {ce_txt:.2e}, "
              f"logits abs {ce_log:.2e}")
        ok = ok and ce_img <= 1e-5 and ce_txt <= 1e-5 and ce_log <= 1e-4
    if a.control:  # the negative control passes only when the comparison caught the mistake
        print(f"control {a.control}: " + ("NOT caught: FAIL" if ok else "caught: OK"))
        return 1 if ok else 0
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
