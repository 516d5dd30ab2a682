"""test_hf_dinov2.py - Hugging Face transformers' own DINOv2 files (Dinov2Model,
Dinov2WithRegistersModel and their ...ForImageClassification, in transformers' tensor
names, .safetensors and pytorch_model.bin) against a plain-PyTorch reference written in
this file from transformers' modeling code, on random weights of facebook/dinov2-small's
shapes (D 384, 12 layers, 6 heads, MLP 1536, patch 14, trained at 518 px: 37 x 37).

    /usr/bin/python3 test_hf_dinov2.py case NAME     --dump vit_dump --work DIR
    /usr/bin/python3 test_hf_dinov2.py control WRONG --dump vit_dump --work DIR
    /usr/bin/python3 test_hf_dinov2.py refusals      --dump vit_dump --work DIR
    /usr/bin/python3 test_hf_dinov2.py list          (case and control names, for CMake)

case:     one checkpoint of CASES, run at an input size other than the training size
          (the position embedding resampled): every layer's attention within 1e-5 of the
          float64 reference, the final hidden states (last_hidden_state: the final
          layernorm of every token, vit_features of the last block) within 1e-4 of its
          largest value, the position embedding the forward pass adds within 1e-6, the
          classifiers' logits (classifier over [CLS ; mean of the patch tokens], registers
          excluded) within 1e-4 of their largest value, and the configuration the engine
          inferred (registers, position rows, eps, layout, the head's pooling).
control:  the same comparisons against a reference with one plausible mistake (CONTROLS):
          passes only when they fail on every case the mistake applies to, i.e. the
          comparisons can tell it from transformers' computation.
refusals: DINOv2 ViT-g's SwiGLU MLP (use_swiglu_ffn, mlp.weights_in) and a register count
          that disagrees with config.json are refused with a message naming them.

The reference follows transformers' src/transformers/models/dinov2/modeling_dinov2.py and
models/dinov2_with_registers/modeling_dinov2_with_registers.py @ 015e68769f98 (huggingface/
transformers; the classes Dinov2Embeddings / Dinov2WithRegistersEmbeddings with
interpolate_pos_encoding, Dinov2SelfAttention with eager_attention_forward, Dinov2LayerScale,
Dinov2Layer, Dinov2Model, Dinov2ForImageClassification). transformers is not installed
here (Debian has no package): this is the structure of those modules in torch primitives.
"""
import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_parity import (Report, check_attention, check_config, check_peaked, check_relative,  # noqa: E402
                         check_table, run_dump, write_safetensors)

ATT_TOL = 1e-5     # every layer's attention, max abs
HIDDEN_TOL = 1e-4  # last_hidden_state and logits, max abs / max |reference|
POS_TOL = 1e-6     # the position embedding added (float64 resampling rounded to float32)

# facebook/dinov2-small (config.json on the hub: hidden_size 384, num_hidden_layers 12,
# num_attention_heads 6, mlp_ratio 4, image_size 518, patch_size 14, layer_norm_eps 1e-6)
SMALL = dict(D=384, L=12, H=6, F=1536, P=14, S0=518)

# name: transformers class, registers R, input size (Sh, Sw) (--size), file, classes C
CASES = {
    "small_224": dict(cls="Dinov2Model", R=0, size=(224, 224), file="safetensors"),
    "small_nonsquare": dict(cls="Dinov2Model", R=0, size=(224, 308), file="safetensors"),
    "small_classifier_pth": dict(cls="Dinov2ForImageClassification", R=0, size=(252, 182),
                                 file="pth", C=10),
    "reg4_224": dict(cls="Dinov2WithRegistersModel", R=4, size=(224, 224), file="safetensors"),
    "reg4_nonsquare": dict(cls="Dinov2WithRegistersModel", R=4, size=(308, 224), file="pth"),
    "reg4_classifier_pth": dict(cls="Dinov2WithRegistersForImageClassification", R=4,
                                size=(182, 252), file="pth", C=7),
}

# mistake: (what, does it apply to a case with registers / without)
CONTROLS = {
    "timm_interp": ("timm's resampling (antialias=True) for Dinov2Model", False),
    "old_interp": ("older transformers' scale_factor=(g + 0.1) / 37 for Dinov2Model", False),
    "plain_interp": ("Dinov2Model's resampling (no antialias) for the registers model", True),
    "reg_pos": ("registers given a position row (the CLS's)", True),
    "cls_nopos": ("the CLS given no position row (timm's no_embed_class read literally)", True),
    # the classifier's head (the cases with C > 0, registers or not)
    "head_cls_only": ("the classifier on [CLS ; 0] (the CLS alone)", None),
    "head_mean_prefix": ("the mean over the prefix tokens too (CLS and registers: older "
                         "Dinov2WithRegistersForImageClassification averaged [:, 1:])", None),
}

PREFIX = {"Dinov2Model": "", "Dinov2ForImageClassification": "dinov2.",
          "Dinov2WithRegistersModel": "",
          "Dinov2WithRegistersForImageClassification": "dinov2_with_registers."}


def spec(name):
    c = dict(SMALL, C=0, name=name)
    c.update(CASES[name])
    return c


# --- the checkpoint ----------------------------------------------------------------


def random_hf(c, g):
    """Random float32 weights in transformers' names for case c: query and key rows
    with std 1.7/sqrt(D) (peaked attention), LayerScale lambdas 0.5 +- 0.3 (trained DINOv2
    has both signs), a smooth position grid plus noise (resampling means something), a
    CLS row and register tokens far from zero (a misplaced row shows)."""
    D, L, F_, P, R, C = c["D"], c["L"], c["F"], c["P"], c["R"], c["C"]
    g0 = c["S0"] // P
    p = PREFIX[c["cls"]]

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    e = p + "embeddings."
    yy, xx = torch.meshgrid(torch.linspace(0, 1, g0), torch.linspace(0, 1, g0), indexing="ij")
    freq = rn(D, 2, std=3.0)
    smooth = torch.sin(freq[:, 0, None, None] * yy + freq[:, 1, None, None] * xx)
    grid = 0.4 * smooth.reshape(D, -1).T + rn(g0 * g0, D, std=0.2)
    w = {e + "cls_token": rn(1, 1, D, std=0.5), e + "mask_token": torch.zeros(1, D),
         e + "position_embeddings": torch.cat([rn(1, D, std=0.5), grid])[None],
         e + "patch_embeddings.projection.weight": rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P)),
         e + "patch_embeddings.projection.bias": rn(D, std=0.1)}
    if R:
        w[e + "register_tokens"] = rn(1, R, D, std=0.5)
    for l in range(L):
        b = f"{p}encoder.layer.{l}."
        a = b + "attention.attention."
        w |= {b + "norm1.weight": 1 + rn(D, std=0.2), b + "norm1.bias": rn(D, std=0.1),
              a + "query.weight": rn(D, D, std=1.7 / math.sqrt(D)), a + "query.bias": rn(D, std=0.1),
              a + "key.weight": rn(D, D, std=1.7 / math.sqrt(D)), a + "key.bias": rn(D, std=0.1),
              a + "value.weight": rn(D, D, std=1 / math.sqrt(D)), a + "value.bias": rn(D, std=0.1),
              b + "attention.output.dense.weight": rn(D, D, std=1 / math.sqrt(D)),
              b + "attention.output.dense.bias": rn(D, std=0.1),
              b + "layer_scale1.lambda1": 0.5 + rn(D, std=0.3),
              b + "norm2.weight": 1 + rn(D, std=0.2), b + "norm2.bias": rn(D, std=0.1),
              b + "mlp.fc1.weight": rn(F_, D, std=1 / math.sqrt(D)), b + "mlp.fc1.bias": rn(F_, std=0.1),
              b + "mlp.fc2.weight": rn(D, F_, std=1 / math.sqrt(F_)), b + "mlp.fc2.bias": rn(D, std=0.1),
              b + "layer_scale2.lambda1": 0.5 + rn(D, std=0.3)}
    w |= {p + "layernorm.weight": 1 + rn(D, std=0.2), p + "layernorm.bias": rn(D, std=0.1)}
    if C:  # nn.Linear(hidden_size * 2, num_labels)
        w |= {"classifier.weight": rn(C, 2 * D, std=2 / math.sqrt(2 * D)), "classifier.bias": rn(C, std=0.1)}
    return dict(sorted(w.items()))


def config_json(c):
    """config.json as facebook/dinov2-small's (and -with-registers-small's) on the hub."""
    reg = c["R"] > 0
    cfg = {"architectures": [c["cls"]], "model_type": "dinov2_with_registers" if reg else "dinov2",
           "hidden_size": c["D"], "num_hidden_layers": c["L"], "num_attention_heads": c["H"],
           "mlp_ratio": 4, "hidden_act": "gelu", "layer_norm_eps": 1e-6, "layerscale_value": 1.0,
           "image_size": c["S0"], "patch_size": c["P"], "qkv_bias": True, "use_swiglu_ffn": False,
           "drop_path_rate": 0.0, "initializer_range": 0.02, "torch_dtype": "float32"}
    if reg:
        cfg["num_register_tokens"] = c["R"]
    if c["C"]:
        cfg["id2label"] = {str(i): f"class {i}" for i in range(c["C"])}
    return cfg


def write_case(c, d, seed):
    g = torch.Generator().manual_seed(seed)
    w = random_hf(c, g)
    d.mkdir(parents=True, exist_ok=True)
    for old in ("model.safetensors", "pytorch_model.bin"):
        (d / old).unlink(missing_ok=True)
    if c["file"] == "pth":  # what save_pretrained(safe_serialization=False) writes
        path = d / "pytorch_model.bin"
        torch.save(w, path)
    else:
        path = d / "model.safetensors"
        write_safetensors(path, w, "F32")
    (d / "config.json").write_text(json.dumps(config_json(c), indent=1))
    return w, path


# --- the reference, from transformers' modeling_dinov2*.py ------------------------------


def interpolate_pos_encoding(pos, gh, gw, rule):
    """Dinov2Embeddings.interpolate_pos_encoding (and Dinov2WithRegistersEmbeddings'):
    unchanged when the patch count matches and the input is square, else the CLS row
    kept and the square grid resized bicubically, align_corners=False:
      "size":      size=(gh, gw), no antialias       (Dinov2Model)
      "size_aa":   size=(gh, gw), antialias=True     (Dinov2WithRegistersModel; timm's rule)
      "scale_0.1": scale_factor=((gh + 0.1) / g0, (gw + 0.1) / g0), no antialias
                   (transformers before the size= change: a control)"""
    n = pos.shape[1] - 1
    if gh * gw == n and gh == gw:
        return pos
    g0, D = math.isqrt(n), pos.shape[-1]
    grid = pos[:, 1:].reshape(1, g0, g0, D).permute(0, 3, 1, 2)
    if rule == "scale_0.1":
        grid = F.interpolate(grid, scale_factor=((gh + 0.1) / g0, (gw + 0.1) / g0), mode="bicubic",
                             align_corners=False)
    else:
        grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False,
                             antialias=rule == "size_aa")
    assert grid.shape[-2:] == (gh, gw)
    return torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, D)], dim=1)


def dinov2_forward(w, x, c, dtype=torch.float64, wrong=None):
    """One image x [3, Sh, Sw] through the transformers model whose state dict is w.
    Returns dict(logits [C] or None, att [L, H, T, T], hidden [T, D] the last_hidden_state,
    pos the position embedding as added: [1 + N, D], the CLS row first)."""
    p, R, H = PREFIX[c["cls"]], c["R"], c["H"]
    w = {k: v.to(dtype) for k, v in w.items()}
    x = torch.as_tensor(x).to(dtype)[None]
    e = p + "embeddings."
    Pw = w[e + "patch_embeddings.projection.weight"]
    D, P = Pw.shape[0], Pw.shape[-1]
    Dh = D // H
    # Dinov2PatchEmbeddings: projection(pixel_values).flatten(2).transpose(1, 2)
    t = F.conv2d(x, Pw, w[e + "patch_embeddings.projection.bias"], stride=P)
    gh, gw = t.shape[-2:]
    t = t.flatten(2).transpose(1, 2)
    # Dinov2Embeddings.forward: cat(cls, patches) + interpolate_pos_encoding(...)
    rule = "size_aa" if R else "size"
    rule = {"timm_interp": "size_aa", "old_interp": "scale_0.1", "plain_interp": "size"}.get(wrong, rule)
    pos = interpolate_pos_encoding(w[e + "position_embeddings"], gh, gw, rule)
    cls = w[e + "cls_token"]
    if wrong == "cls_nopos":
        h = torch.cat([cls, t + pos[:, 1:]], dim=1)
    else:
        h = torch.cat([cls, t], dim=1) + pos
    if R:  # Dinov2WithRegistersEmbeddings: the registers inserted after the position
        reg = w[e + "register_tokens"] + (pos[:, :1] if wrong == "reg_pos" else 0)
        h = torch.cat([h[:, :1], reg, h[:, 1:]], dim=1)
    T = h.shape[1]
    L = sum(1 for k in w if k.startswith(p + "encoder.layer.") and k.endswith(".norm1.weight"))

    def ln(u, name):
        return F.layer_norm(u, (D,), w[name + ".weight"], w[name + ".bias"], eps=1e-6)

    def dense(u, name):
        return F.linear(u, w[name + ".weight"], w[name + ".bias"])

    att = []
    for l in range(L):
        b = f"{p}encoder.layer.{l}."
        # Dinov2Layer.forward: norm1, attention, layer_scale1, residual
        s = ln(h, b + "norm1")

        def heads(u):  # view(batch, -1, H, Dh).transpose(1, 2)
            return u.view(1, T, H, Dh).transpose(1, 2)

        q = heads(dense(s, b + "attention.attention.query"))
        k = heads(dense(s, b + "attention.attention.key"))
        v = heads(dense(s, b + "attention.attention.value"))
        # eager_attention_forward: softmax(matmul(q, k^T) * scaling), scaling Dh^-0.5
        a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * Dh**-0.5, dim=-1)
        att.append(a[0])
        ctx = torch.matmul(a, v).transpose(1, 2).reshape(1, T, D)
        h = dense(ctx, b + "attention.output.dense") * w[b + "layer_scale1.lambda1"] + h
        # norm2, Dinov2MLP (fc1, gelu, fc2), layer_scale2, residual
        m = dense(F.gelu(dense(ln(h, b + "norm2"), b + "mlp.fc1")), b + "mlp.fc2")
        h = m * w[b + "layer_scale2.lambda1"] + h
    seq = ln(h, p + "layernorm")  # Dinov2Model: sequence_output = self.layernorm(...)
    logits = None
    if "classifier.weight" in w:  # ...ForImageClassification: [CLS ; mean of the patches]
        mean = seq[:, 0 if wrong == "head_mean_prefix" else 1 + R:].mean(dim=1)
        lin = torch.cat([seq[:, 0], torch.zeros_like(mean) if wrong == "head_cls_only" else mean], dim=1)
        logits = F.linear(lin, w["classifier.weight"], w["classifier.bias"])[0]
    return dict(logits=logits, att=torch.stack(att), hidden=seq[0], pos=pos[0])


# --- the comparison ---------------------------------------------------------------------


def run_case(name, args, rep, wrong=None):
    c = spec(name)
    d = Path(args.work) / name
    Sh, Sw = c["size"]
    print(f"\n[{name}] transformers {c['cls']} ({c['file']}), D={c['D']} L={c['L']} H={c['H']}, "
          f"registers {c['R']}, trained {c['S0']} px, input {Sh}x{Sw}"
          + (f"; reference with the mistake: {CONTROLS[wrong][0]}" if wrong else ""))
    w, path = write_case(c, d, seed=sum(map(ord, name)))
    x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(7))
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    engine, cfg = run_dump(args.dump, ["--model", path, "--input", d / "input.f32", "--size",
                                       f"{Sh}x{Sw}", "--tokens", "--out", d / "out"])
    P, R = c["P"], c["R"]
    gh, gw, g0 = Sh // P, Sw // P, c["S0"] // P
    check_config(rep, name, cfg, dict(
        naming="hf", layout="hf-dinov2-reg" if R else "hf-dinov2", image_h=Sh, image_w=Sw,
        patch_size=P, grid_h=gh, grid_w=gw, n_prefix=1 + R, n_registers=R, n_tokens=1 + R + gh * gw,
        pos_grid_h=g0, pos_grid_w=g0, pos_prefix=0 if R else 1, dim=c["D"], n_heads=c["H"],
        n_layers=c["L"], mlp_dim=c["F"], n_classes=c["C"], head_pool=2))  # the layouts' "cls_mean"
    rep.check(abs(cfg["ln_eps"] - 1e-6) <= 1e-12, f"{name}: LayerNorm eps {cfg['ln_eps']}, expected 1e-6")
    rep.check(cfg["left_out"] == "", f"{name}: left_out '{cfg['left_out']}', expected nothing")
    ref = dinov2_forward(w, x, c, wrong=wrong)
    ref32 = dinov2_forward(w, x, c, torch.float32, wrong=wrong)
    if not wrong:
        check_peaked(rep, name, ref["att"])
    if not check_attention(rep, name, engine["att"], ref["att"], ref32["att"], ATT_TOL):
        return
    # last_hidden_state: the final layernorm of the last block's tokens
    check_relative(rep, name, "last_hidden_state", engine["features"][-1], ref["hidden"],
                   ref32["hidden"], HIDDEN_TOL)
    # the position embedding added: with registers the CLS row is in the CLS token and the
    # engine's table holds the patches' rows alone
    check_table(rep, name, "position embedding", engine["pos"], ref["pos"].numpy()[1 if R else 0:],
                POS_TOL, guard=name)
    if ref["logits"] is None:
        rep.check("logits" not in engine, f"{name}: logits from a backbone")
        return
    # the classifier [C, 2D] over [CLS ; mean of the patch tokens]
    if not rep.check("logits" in engine, f"{name}: no logits from the classifier", guard=name):
        return
    check_relative(rep, name, f"classifier [{c['C']}, {2 * c['D']}] logits", engine["logits"],
                   ref["logits"], ref32["logits"], HIDDEN_TOL, floor=1.0)


def run_control(wrong, args, rep):
    regs = CONTROLS[wrong][1]
    for name in CASES:
        c = spec(name)
        if (regs is None and c["C"]) or (regs is not None and (c["R"] > 0) == regs):
            run_case(name, args, rep, wrong)


# --- refusals ---------------------------------------------------------------------------


def run_refusals(args, rep):
    """Small files of the same names: each must be refused with its message."""
    work = Path(args.work) / "refusals"
    tiny = dict(D=64, L=1, H=1, F=128, P=14, S0=28, C=0, size=(28, 28), file="safetensors")
    cases = []
    c = dict(tiny, cls="Dinov2Model", R=0, name="swiglu_config")
    cases.append((c, {"use_swiglu_ffn": True}, None, ["use_swiglu_ffn", "SwiGLU", "issue 35"]))
    c = dict(tiny, cls="Dinov2Model", R=0, name="swiglu_tensors")
    cases.append((c, {}, "weights_in", ["encoder.layer.0.mlp.weights_in.weight", "SwiGLU", "issue 35"]))
    c = dict(tiny, cls="Dinov2WithRegistersModel", R=4, name="registers_count")
    cases.append((c, {"num_register_tokens": 2}, None, ["num_register_tokens is 2", "model.safetensors has 4 register tokens"]))
    for c, cfg_edit, tensors, want in cases:
        d = work / c["name"]
        w, path = write_case(c, d, seed=3)
        if tensors == "weights_in":  # Dinov2SwiGLUFFN: weights_in [2F', D], weights_out [D, F']
            for l in range(c["L"]):
                b = f"encoder.layer.{l}.mlp."
                w[b + "weights_in.weight"] = torch.randn(2 * 88, c["D"])
                w[b + "weights_in.bias"] = torch.zeros(2 * 88)
                w[b + "weights_out.weight"] = torch.randn(c["D"], 88)
                w[b + "weights_out.bias"] = torch.zeros(c["D"])
                for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
                    del w[b + k]
            write_safetensors(path, dict(sorted(w.items())), "F32")
        cfg = json.loads((d / "config.json").read_text()) | cfg_edit
        (d / "config.json").write_text(json.dumps(cfg))
        x = np.zeros((3, 28, 28), np.float32)
        x.tofile(d / "input.f32")
        r = subprocess.run([args.dump, "--model", path, "--input", d / "input.f32", "--out", d / "out"],
                           capture_output=True, text=True)
        msg = r.stderr.strip()
        print(f"[{c['name']}] exit {r.returncode}: {msg}")
        rep.check(r.returncode == 1 and all(s in msg for s in want),
                  f"{c['name']}: expected a refusal naming {want}, got exit {r.returncode}: {msg}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["case", "control", "refusals", "list"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--dump")
    ap.add_argument("--work")
    args = ap.parse_args()
    if args.part == "list":
        print(";".join(CASES) + "|" + ";".join(CONTROLS))
        return 0
    torch.set_num_threads(1)
    rep, t0 = Report(), time.time()
    if args.part == "case":
        if args.name not in CASES:
            ap.error(f"case: one of {', '.join(CASES)}")
        run_case(args.name, args, rep)
        code = rep.exit_code()
    elif args.part == "control":
        if args.name not in CONTROLS:
            ap.error(f"control: one of {', '.join(CONTROLS)}")
        run_control(args.name, args, rep)
        code = rep.control_exit_code(CONTROLS[args.name][0])
    else:
        run_refusals(args, rep)
        code = rep.exit_code()
    print(f"({time.time() - t0:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
