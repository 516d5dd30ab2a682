#!/usr/bin/python3
"""PyTorch's time for what bench_forward times, on the same weights and photo.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/torch_forward.py --model M --image PHOTO
      [--iters N] [--threads K]

Prints "stage <name> median_ms <x> min_ms <y> iters <n>" lines like bench_forward:
  torch_preprocess  timm's eval transform (PIL bicubic resize, crop, normalise), decode excluded
  torch_attn        the plain-torch timm forward of tests/parity/reference.py in float32,
                    keeping every layer's attention probabilities as vitlens does
  torch_fused       torchvision's VisionTransformer on the same weights (fused
                    nn.MultiheadAttention, attention not kept): PyTorch's fast path
Run by bench/run.sh; see it for the ratios."""
import argparse
import os
import statistics
import sys
import time

import torch
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import reference  # noqa: E402


def timed(name, fn, iters, warmup):
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    print(f"stage {name:<16} median_ms {statistics.median(ms):9.3f} min_ms {min(ms):9.3f} "
          f"iters {iters}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--heads", type=int, default=0, help="default: width / 64")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    w = {k: v.float() for k, v in reference.load_safetensors(a.model).items()}
    heads = a.heads or w["cls_token"].shape[-1] // 64
    size = w["patch_embed.proj.weight"].shape[-1] * round((w["pos_embed"].shape[1] - 1) ** 0.5)
    prep, _ = reference.eval_transform(size)
    pil = Image.open(a.image).convert("RGB")
    x = prep(pil)

    tv = reference.torchvision_vit(w, heads).float()
    with torch.inference_mode():
        timed("torch_preprocess", lambda: prep(pil), a.iters, a.warmup)
        timed("torch_attn", lambda: reference.vit_forward(w, x, heads, dtype=torch.float32),
              a.iters, a.warmup)
        timed("torch_fused", lambda: tv(x[None]), a.iters, a.warmup)


if __name__ == "__main__":
    main()
