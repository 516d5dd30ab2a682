"""pth_seeds.py - seeds for fuzz_pth and fuzz_pickle: tiny ViT checkpoints written by
torch.save (1 to 6 KB each) and their data.pkl, plus pickles naming os.system and
builtins.eval (written byte by byte: nothing here is ever unpickled).

    /usr/bin/python3 pth_seeds.py OUT   (writes OUT/pth/ and OUT/pickle/)
"""
import io
import pathlib
import sys
import zipfile

import torch


def tiny_timm(D=8, P=4, g=2, L=1, C=3):
    r = torch.Generator().manual_seed(0)
    n = lambda *s: torch.randn(*s, generator=r) * 0.5  # noqa: E731
    w = {"cls_token": n(1, 1, D), "pos_embed": n(1, 1 + g * g, D),
         "patch_embed.proj.weight": n(D, 3, P, P), "patch_embed.proj.bias": n(D)}
    for l in range(L):
        b = f"blocks.{l}."
        w |= {b + "norm1.weight": 1 + n(D), b + "norm1.bias": n(D),
              b + "attn.qkv.weight": n(3 * D, D), b + "attn.qkv.bias": n(3 * D),
              b + "attn.proj.weight": n(D, D), b + "attn.proj.bias": n(D),
              b + "norm2.weight": 1 + n(D), b + "norm2.bias": n(D),
              b + "mlp.fc1.weight": n(2 * D, D), b + "mlp.fc1.bias": n(2 * D),
              b + "mlp.fc2.weight": n(D, 2 * D), b + "mlp.fc2.bias": n(D)}
    w |= {"norm.weight": 1 + n(D), "norm.bias": n(D), "head.weight": n(C, D), "head.bias": n(C)}
    return w


def torchvision_names(w, L=1):
    o = {"class_token": w["cls_token"], "encoder.pos_embedding": w["pos_embed"],
         "conv_proj.weight": w["patch_embed.proj.weight"], "conv_proj.bias": w["patch_embed.proj.bias"],
         "encoder.ln.weight": w["norm.weight"], "encoder.ln.bias": w["norm.bias"],
         "heads.head.weight": w["head.weight"], "heads.head.bias": w["head.bias"]}
    for l in range(L):
        b, t = f"encoder.layers.encoder_layer_{l}.", f"blocks.{l}."
        o |= {b + "ln_1.weight": w[t + "norm1.weight"], b + "ln_1.bias": w[t + "norm1.bias"],
              b + "self_attention.in_proj_weight": w[t + "attn.qkv.weight"],
              b + "self_attention.in_proj_bias": w[t + "attn.qkv.bias"],
              b + "self_attention.out_proj.weight": w[t + "attn.proj.weight"],
              b + "self_attention.out_proj.bias": w[t + "attn.proj.bias"],
              b + "ln_2.weight": w[t + "norm2.weight"], b + "ln_2.bias": w[t + "norm2.bias"],
              b + "mlp.0.weight": w[t + "mlp.fc1.weight"], b + "mlp.0.bias": w[t + "mlp.fc1.bias"],
              b + "mlp.3.weight": w[t + "mlp.fc2.weight"], b + "mlp.3.bias": w[t + "mlp.fc2.bias"]}
    return o


def notebook_linear_names(w, H=2, L=1):
    D = w["cls_token"].shape[-1]
    o = {"class_embedding": w["cls_token"][0], "positional_embedding": w["pos_embed"][0],
         "linear_patching.weight": w["patch_embed.proj.weight"].reshape(D, -1),
         "linear_patching.bias": w["patch_embed.proj.bias"],
         "mlp_head.0.weight": w["norm.weight"], "mlp_head.0.bias": w["norm.bias"],
         "mlp_head.1.weight": w["head.weight"], "mlp_head.1.bias": w["head.bias"]}
    for l in range(L):
        b, t = f"encoder.{l}.", f"blocks.{l}."
        q, k, v = w[t + "attn.qkv.weight"].split(D)
        qb, kb, vb = w[t + "attn.qkv.bias"].split(D)
        for h in range(H):
            s = slice(h * D // H, (h + 1) * D // H)
            for nm, m, bb in (("q", q, qb), ("k", k, kb), ("v", v, vb)):
                o[f"{b}msa.{nm}_weights.{h}.weight"] = m[s].clone()
                o[f"{b}msa.{nm}_weights.{h}.bias"] = bb[s].clone()
        o |= {b + "norm1.weight": w[t + "norm1.weight"], b + "norm1.bias": w[t + "norm1.bias"],
              b + "msa.linear.weight": w[t + "attn.proj.weight"], b + "msa.linear.bias": w[t + "attn.proj.bias"],
              b + "norm2.weight": w[t + "norm2.weight"], b + "norm2.bias": w[t + "norm2.bias"],
              b + "mlp.0.weight": w[t + "mlp.fc1.weight"], b + "mlp.0.bias": w[t + "mlp.fc1.bias"],
              b + "mlp.2.weight": w[t + "mlp.fc2.weight"], b + "mlp.2.bias": w[t + "mlp.fc2.bias"]}
    return o


def hostile_pickles():
    """GLOBAL os system + REDUCE, builtins eval, a whole nn.Module: protocol-2 bytes."""
    cmd = b"touch /tmp/vitlens-pwned"
    pre = b"\x80\x02"
    return {
        "os-system": pre + b"cos\nsystem\nq\x00X" + len(cmd).to_bytes(4, "little") + cmd + b"\x85R.",
        "builtins-eval": pre + b"cbuiltins\neval\nX\x0a\x00\x00\x00__import__\x85R.",
        "module": pre + b"c__main__\nViT\n)\x81}b.",
    }


def main():
    out = pathlib.Path(sys.argv[1])
    (out / "pth").mkdir(parents=True, exist_ok=True)
    (out / "pickle").mkdir(parents=True, exist_ok=True)
    w = tiny_timm()
    seeds = {"timm": w, "timm-f16": {k: v.half() for k, v in w.items()},
             "wrapped": {"model": {"module." + k: v for k, v in w.items()}, "epoch": 1, "lr": 0.5},
             "torchvision": torchvision_names(w), "notebook-linear": notebook_linear_names(w)}
    for name, obj in seeds.items():
        buf = io.BytesIO()
        torch.save(obj, buf)
        (out / "pth" / f"{name}.pth").write_bytes(buf.getvalue())
        z = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        (out / "pickle" / f"{name}.pkl").write_bytes(z.read(pkl))
    # the same archive deflated, as a zip tool would recompress it
    src = zipfile.ZipFile(out / "pth" / "timm.pth")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for i in src.infolist():
            dst.writestr(i.filename, src.read(i.filename))
    (out / "pth" / "timm-deflated.pth").write_bytes(buf.getvalue())
    for name, b in hostile_pickles().items():
        (out / "pickle" / f"{name}.pkl").write_bytes(b)
    print(f"pth_seeds: {len(seeds) + 1} checkpoints, {len(seeds) + 3} pickles in {out}")


if __name__ == "__main__":
    main()
