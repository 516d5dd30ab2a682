#!/usr/bin/python3
"""PyTorch's side of bench/compare.py: the same model on the same weights, served in turns.

  OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=K OMP_NUM_THREADS=K \\
      /usr/bin/python3 bench/torch_forward.py --model M --threads K

Loads M (timm names, as bench/make_weights.py writes them), then reads commands on
stdin and answers each with one line, as bench_forward --serve does:
  attn N    ->  "attn <ms> ... <ms> cpu <c>"   the plain-torch timm forward of
                tests/parity/reference.py in float32: explicit attention, every
                layer's probabilities kept (what vitlens computes); c: mean CPU
                time per call of the process (all threads), ms
  fused N   ->  "fused <ms> ... cpu <c>"  torchvision's VisionTransformer on the same
                weights (fused nn.MultiheadAttention, nothing kept): PyTorch's fast
                path, for information; "fused none" for models without a head
  fwdbwd N  ->  "fwdbwd <ms> ... cpu <c>"  the forward of "attn" with autograd on, the
                input requiring grad and the weights not (requires_grad False: no
                weight gradients, as vitlens computes none), then logits[c].backward()
                for c the top-1 class: what vit_forward + vit_backward(VIT_GRAD_EXACT)
                compute; "fwdbwd none" for models without a head
  memory    ->  "memory peak_rss_mb <r>"
  quit (or end of input)
The input is a fixed random [3, S, S] tensor: the time does not depend on the pixels.
"""
import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
import reference  # noqa: E402


def timed(fn, n):
    """n wall times, ms, and the mean CPU time per call of the process (all threads)."""
    ms, c0 = [], time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms, (time.process_time() - c0) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--heads", type=int, default=0, help="default: width / 64")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    w = {k: v.float() for k, v in reference.load_safetensors(a.model).items()}
    if "embeddings.cls_token" in w:  # DINOv3 in transformers' names (bench/make_weights.py)
        return serve(dinov3_fns(w, a.heads))
    D = w["cls_token"].shape[-1]
    heads = a.heads or D // 64
    P = w["patch_embed.proj.weight"].shape[-1]
    Np = 1 + sum(w[k].shape[1] for k in ("dist_token", "reg_token") if k in w)
    npos, gh, gw = reference.pos_layout(w, Np)
    x = torch.randn(3, gh * P, gw * P, generator=torch.Generator().manual_seed(0))
    assert not any(t.requires_grad for t in w.values())  # no weight gradients

    def inference(fn):
        def run():
            with torch.inference_mode():
                fn()
        return run

    xg = x.clone().requires_grad_(True)

    def fwdbwd():
        xg.grad = None
        logits, _ = reference.vit_forward(w, xg, heads, dtype=torch.float32)
        logits[int(logits.argmax())].backward()

    fns = {"attn": inference(lambda: reference.vit_forward(w, x, heads, dtype=torch.float32))}
    if "head.weight" in w and npos == 1 and gh == gw:  # torchvision: CLS token only, square
        tv = reference.torchvision_vit(w, heads).float()
        fns["fused"] = inference(lambda: tv(x[None]))
    if "head.weight" in w:
        fns["fwdbwd"] = fwdbwd
    serve(fns)


def dinov3_fns(w, heads):
    """DINOv3 (no head): "attn" is tests/parity/test_dinov3.py's reference forward of
    transformers' DINOv3ViTModel in float32 (RoPE on the patches' q and k, explicit
    attention kept, LayerScale, the MLP or SwiGLU), on a [3, 224, 224] input."""
    import test_dinov3
    D = w["embeddings.cls_token"].shape[-1]
    L = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("layer."))
    c = dict(D=D, H=heads or D // 64, L=L, C=0, F=w["layer.0.mlp.up_proj.weight"].shape[0],
             gated="layer.0.mlp.gate_proj.weight" in w)
    ref = test_dinov3.Dinov3Ref(w, c)
    x = torch.randn(3, 224, 224, generator=torch.Generator().manual_seed(0))

    def attn():
        with torch.inference_mode():
            ref.forward(x, torch.float32)
    return {"attn": attn}


def serve(fns):
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        if words[0] == "memory":
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"memory peak_rss_mb {rss:.1f}", flush=True)
        elif words[0] in ("attn", "fused", "fwdbwd") and len(words) == 2:
            fn = fns.get(words[0])
            if not fn:
                print(words[0], "none", flush=True)
                continue
            ms, cpu = timed(fn, int(words[1]))
            print(words[0], " ".join(f"{t:.3f}" for t in ms), "cpu", f"{cpu:.3f}", flush=True)
        else:
            print(f"error unknown command: {line.strip()}", flush=True)


if __name__ == "__main__":
    main()
