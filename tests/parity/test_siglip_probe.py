"""test_siglip_probe.py - SigLIP's attention-pooling ("MAP") head (engine/passes/probe.c,
through probe_dump) against a float64 PyTorch reference written here from transformers'
SiglipMultiheadAttentionPoolingHead (modeling_siglip.py): torch's own
nn.MultiheadAttention(D, H, batch_first=True) with the packed in_proj, then
residual + SiglipMLP(LayerNorm(.)) with gelu_pytorch_tanh.

    /usr/bin/python3 test_siglip_probe.py [--small] [--control MISTAKE] --dump probe_dump --work DIR

Shape: SigLIP B/16's image head, D 768, H 12, F 3072, N 196 (224 px / 16); --small: D 96,
H 12, F 384, N 49. Random weights (LayerNorm away from 1 and 0, biases non-zero) and
random tokens y [N, D] scaled like a LayerNorm's output. Checks: the probe's attention
[H, N] within 1e-5 (absolute; rows sum to 1) of nn.MultiheadAttention's per-head weights
(average_attn_weights=False), the pooled embedding within 1e-4 relative to its largest value.
--control MISTAKE: the reference makes it, the test passes only when the comparison fails:
  nomlp      the probe without its MLP (attention output alone)
  residual   the probe added around the attention (x = probe + attn)
  gelu       exact GELU instead of tanh
  kqv        in_proj's rows read as k; q; v
"""
import argparse
import pathlib
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"full": dict(D=768, H=12, F=3072, N=196), "small": dict(D=96, H=12, F=384, N=49)}
ATT_TOL, EMB_TOL = 1e-5, 1e-4


class MapHead(nn.Module):
    def __init__(self, D, H, F_):
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, D))
        self.attention = nn.MultiheadAttention(D, H, batch_first=True)
        self.layernorm = nn.LayerNorm(D, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(D, F_), nn.Linear(F_, D)

    def forward(self, y, control=None):
        probe = self.probe.repeat(y.shape[0], 1, 1)
        attn = self.attention
        if control == "kqv":  # the packed rows misread: k; q; v
            D = y.shape[-1]
            w, b = attn.in_proj_weight, attn.in_proj_bias
            perm = torch.cat([torch.arange(D, 2 * D), torch.arange(0, D), torch.arange(2 * D, 3 * D)])
            attn = nn.MultiheadAttention(D, attn.num_heads, batch_first=True).double()
            attn.load_state_dict({"in_proj_weight": w[perm], "in_proj_bias": b[perm],
                                  "out_proj.weight": self.attention.out_proj.weight,
                                  "out_proj.bias": self.attention.out_proj.bias})
        h, a = attn(probe, y, y, need_weights=True, average_attn_weights=False)
        if control == "residual":
            h = h + probe
        if control != "nomlp":
            act = "none" if control == "gelu" else "tanh"
            h = h + self.fc2(F.gelu(self.fc1(self.layernorm(h)), approximate=act))
        return h[:, 0], a[:, :, 0, :]  # [B, D], [B, H, N]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--control", choices=["nomlp", "residual", "gelu", "kqv"])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    s = SHAPES["small" if a.small else "full"]
    D, H, F_, N = s["D"], s["H"], s["F"], s["N"]
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(35)
    m = MapHead(D, H, F_)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "layernorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn_like(p))
        m.attention.in_proj_weight.copy_(torch.randn(3 * D, D) / D ** 0.5)
    y = torch.randn(1, N, D)
    parts = [m.probe.reshape(D), m.attention.in_proj_weight, m.attention.in_proj_bias,
             m.attention.out_proj.weight, m.attention.out_proj.bias, m.layernorm.weight,
             m.layernorm.bias, m.fc1.weight, m.fc1.bias, m.fc2.weight, m.fc2.bias, y]
    np.concatenate([p.detach().float().reshape(-1).numpy() for p in parts]).tofile(work / "in.f32")
    with torch.no_grad():
        m64 = m.double()
        emb, att = m64(y.double(), a.control)
    r = subprocess.run([a.dump, str(work / "in.f32"), str(work / "out.f32"), str(N), str(D), str(H),
                        str(F_)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(f"FAIL probe_dump: exit {r.returncode}: {r.stderr.strip()}")
        return 1
    got = np.fromfile(work / "out.f32", dtype=np.float32)
    g_emb, g_att = got[:D], got[D:].reshape(H, N)
    e_att = float(np.abs(g_att - att[0].numpy()).max())
    e_emb = float(np.abs(g_emb - emb[0].numpy()).max() / np.abs(emb[0].numpy()).max())
    rows = np.abs(g_att.sum(1) - 1).max()
    print(f"D {D} H {H} F {F_} N {N}: attention max abs error {e_att:.3g} (tol {ATT_TOL:g}), "
          f"embedding max rel error {e_emb:.3g} (tol {EMB_TOL:g}); rows sum to 1 within {rows:.2g}; "
          f"attention per head from {g_att.min():.3g} to {g_att.max():.3g}")
    fails = []
    if not e_att <= ATT_TOL:
        fails.append(f"attention {e_att:.3g}")
    if not e_emb <= EMB_TOL:
        fails.append(f"embedding {e_emb:.3g}")
    if a.control:
        print(f"control ok: '{a.control}' caught: {fails}" if fails
              else f"CONTROL FAILED: '{a.control}' not caught")
        return 0 if fails else 1
    print("FAILED: " + "; ".join(fails) if fails else "all ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
