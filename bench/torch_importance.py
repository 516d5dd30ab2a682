#!/usr/bin/python3
"""PyTorch's side of bench/importance.sh: the head importance table as PyTorch computes
it, the L*H ablated forward passes (each one head masked, transformers' head_mask: the
attention probabilities times 0 for that head) batched in one call, plus the unablated
pass, in float32, timed.

  OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=K /usr/bin/python3 bench/torch_importance.py \\
      --model M --threads K --runs N [--chunk B]

Prints "explicit <ms> ... cpu <ms>": timm's Attention with fused_attn=False
(tests/parity/reference.py's step, what vitlens computes), the mask multiplied into the
probabilities per sample. (Debian's torch 1.13 has no F.scaled_dot_product_attention, and
nn.MultiheadAttention cannot mask one head per sample.) --chunk B runs the L*H + 1
inputs B at a time (default all at once).
"""
import argparse
import math
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "parity"))
import reference  # noqa: E402


def forward(w, x, mask, H):
    """x [B, 3, S, S], mask [B, L, H] (1 keep, 0 ablate) -> logits [B, C]."""
    B = x.shape[0]
    D = w["cls_token"].shape[-1]
    P = w["patch_embed.proj.weight"].shape[-1]
    Dh = D // H
    L = mask.shape[1]
    t = F.conv2d(x, w["patch_embed.proj.weight"], w["patch_embed.proj.bias"], stride=P)
    t = t.flatten(2).transpose(1, 2)
    t = torch.cat([w["cls_token"].expand(B, -1, -1), t], dim=1) + w["pos_embed"]
    T = t.shape[1]
    for l in range(L):
        b = f"blocks.{l}."
        xn = F.layer_norm(t, (D,), w[b + "norm1.weight"], w[b + "norm1.bias"], 1e-6)
        q, k, v = F.linear(xn, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"]).reshape(
            B, T, 3, H, Dh).permute(2, 0, 3, 1, 4)
        a = ((q * Dh ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1) * mask[:, l, :, None, None]
        ctx = a @ v
        t = t + F.linear(ctx.transpose(1, 2).reshape(B, T, D), w[b + "attn.proj.weight"],
                         w[b + "attn.proj.bias"])
        h = F.gelu(F.linear(F.layer_norm(t, (D,), w[b + "norm2.weight"], w[b + "norm2.bias"], 1e-6),
                            w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
        t = t + F.linear(h, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
    t = F.layer_norm(t[:, 0], (D,), w["norm.weight"], w["norm.bias"], 1e-6)
    return F.linear(t, w["head.weight"], w["head.bias"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    w = {k: v.float() for k, v in reference.load_safetensors(a.model).items()}
    D = w["cls_token"].shape[-1]
    H = D // 64
    L = sum(1 for k in w if k.endswith(".norm1.weight"))
    S = int(math.isqrt(w["pos_embed"].shape[1] - 1)) * w["patch_embed.proj.weight"].shape[-1]
    n = L * H + 1
    mask = torch.ones(n, L, H)
    for i in range(L * H):
        mask[i + 1, i // H, i % H] = 0
    x = torch.randn(1, 3, S, S, generator=torch.Generator().manual_seed(1)).expand(n, -1, -1, -1)
    chunk = a.chunk or n
    for name in ("explicit",):
        with torch.inference_mode():
            def run():
                p = torch.cat([forward(w, x[i:i + chunk], mask[i:i + chunk], H).softmax(-1)
                               for i in range(0, n, chunk)])
                return p[0, 0] - p[1:, 0]
            run()  # warm-up
            times, c0 = [], time.process_time()
            for _ in range(a.runs):
                t0 = time.perf_counter()
                run()
                times.append((time.perf_counter() - t0) * 1e3)
            cpu = (time.process_time() - c0) * 1e3 / a.runs
        print(name, " ".join(f"{t:.1f}" for t in times), f"cpu {cpu:.1f}", flush=True)
    print("memory peak_rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


if __name__ == "__main__":
    main()
