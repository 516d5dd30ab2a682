#!/usr/bin/python3
"""PyTorch's side of bench/text.sh: CLIP's text tower as published (OpenAI CLIP's
encode_text, written out in tests/parity/test_text_tower.py: nn.MultiheadAttention,
QuickGELU, the causal mask), float32, on the same weights (the .pth beside the engine's
.safetensors) and token ids, timed.

  OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=K /usr/bin/python3 bench/torch_text.py \\
      --model M.pth --ids IDS.txt --threads K --runs N --pad pad77|longest|grouped

--pad says how the prompts are batched, all of them in one call:
  pad77    clip.tokenize's [n, 77], zeros after the end-of-text token (OpenAI's and
           open_clip's encode_text on their tokenizer's output)
  longest  padded to the longest prompt (transformers' CLIPProcessor(padding=True))
  grouped  the prompts of each length (up to their end-of-text token) together, at that
           length: the tokens the engine computes, nothing more
Prints "torch_<pad> <ms> ... cpu <ms> tokens <n>" (wall time per run, mean process CPU
time per run, tokens computed per run).
"""
import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "parity"))
import test_text_tower as ref  # noqa: E402


def cpu_ms():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pad", choices=["pad77", "longest", "grouped"], default="pad77")
    ap.add_argument("--shape", choices=list(ref.SHAPES), default="full")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    s = ref.SHAPES[a.shape]
    m = ref.TextTower(s["V"], s["ctx"], s["W"], s["H"], s["L"], s["E"], ref.QuickGELU())
    m.load_state_dict(torch.load(a.model))
    m.eval()
    seqs = [[int(v) for v in line.split()] for line in Path(a.ids).read_text().splitlines()]
    need = [max(range(len(q)), key=lambda i: (q[i], -i)) + 1 for q in seqs]  # first argmax + 1
    if a.pad == "grouped":
        batches = []
        for n in sorted(set(need)):
            batches.append(torch.tensor([q[:n] for q, k in zip(seqs, need) if k == n]))
    else:
        n = s["ctx"] if a.pad == "pad77" else max(len(q) for q in seqs)
        t = torch.zeros(len(seqs), n, dtype=torch.long)
        for i, q in enumerate(seqs):
            t[i, :len(q)] = torch.tensor(q)
        batches = [t]
    tokens = sum(b.numel() for b in batches)
    times = []
    c0 = cpu_ms()
    with torch.no_grad():
        for _ in range(a.runs):
            t0 = time.perf_counter()
            for b in batches:
                m(b)
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"torch_{a.pad} " + " ".join(f"{t:.1f}" for t in times)
          + f" cpu {(cpu_ms() - c0) / a.runs:.1f} tokens {tokens}", flush=True)


if __name__ == "__main__":
    main()
