"""test_families.py - the ViT families people use, each against a PyTorch reference
of its own library, on random-weight checkpoints this test writes in that family's
tensor names and layout.

    /usr/bin/python3 test_families.py family NAME --dump vit_dump --work DIR
    /usr/bin/python3 test_families.py resize      --dump vit_dump --work DIR
    /usr/bin/python3 test_families.py dtype       --dump vit_dump --work DIR
    /usr/bin/python3 test_families.py preprocess  --dump vit_dump --work DIR
    /usr/bin/python3 test_families.py list        (the family names, for CMake)

family:     one checkpoint family (FAMILIES below): logits (when there is a head),
            every attention matrix and the position embedding the forward pass
            adds, engine against the float64 reference (reference.py for timm's
            names, reference_hf.py for transformers'), with the tolerances of
            test_parity.py; the config the engine inferred (prefix tokens, grid,
            eps); and a plausible mistake for that family (CLS head alone, no
            LayerScale, the other resampling rule, ...) that the engine must be
            far from, so that the comparison can fail.
resize:     models run at other sizes than their training size, square and not,
            larger and smaller, timm (antialiased bicubic) and transformers (plain
            bicubic) rules, a non-square training grid from config.json.
dtype:      F16 and BF16 checkpoints against their F32 originals: loaded exactly
            (engine on the F16 file = reference on the F16 values, to float32
            rounding) and within the dtype's precision of the F32 original (no
            further than the reference moves when its weights are rounded so).
preprocess: timm's eval transform for non-square inputs (ResizeKeepRatio) and
            crop_mode squash (--whole), bit for bit against PIL + torchvision;
            decoding bit for bit against Pillow's Image.open().convert('RGB') for
            the JPEGs (baseline, progressive, greyscale, 4:2:0 / 4:2:2 / 4:4:4,
            CMYK), WebPs (lossless and lossy, with and without alpha) and TIFFs
            (RGB, RGBA, grey, palette, bilevel; raw, LZW, deflate, PackBits,
            CCITT G4) that Pillow writes, and those pixels through the transform;
            the 8 EXIF orientations (JPEG, and WebP and TIFF at 6) against
            ImageOps.exif_transpose, and --ignore-orientation against the pixels
            as stored.
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
from PIL import Image, ImageOps

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import reference_hf  # noqa: E402
from test_parity import (ATT_TOL, LOGIT_TOL, Report, block_weights, check_config,  # noqa: E402
                         check_peaked, compare, run_dump, write_safetensors)

TOL = ATT_TOL["random"]  # attention, 1e-5; logits LOGIT_TOL * max(1, max |logit|)
POS_TOL = 1e-6           # position embedding (float64 resampling rounded to float32)
WRONG = 20               # a mistake must move the output by more than WRONG x the tolerance

# --- families --------------------------------------------------------------------
# P patch px, grid0 the training grid (gh0, gw0), size the input (Sh, Sw) given with
# --size (None: the training size), D width (D = 64 H: the heads come from the
# default D / 64, as for real timm checkpoints without num_heads), L depth, F MLP,
# C classes (0: backbone), dist (distillation token and head), R register tokens,
# ls (LayerScale), no_embed_class (pos_embed without prefix rows), hf: None for
# timm names, else the transformers class, eps the config's layer_norm_eps.
FAMILIES = {
    # timm: ViT-B/16 augreg (timm/vit_base_patch16_224.augreg2_in21k_ft_in1k), small
    "vit_timm": dict(P=16, grid0=(5, 5), D=128, L=2, F=256, C=10, config="timm",
                     mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), crop_pct=0.9),
    # ViT at patch 32 (vit_base_patch32_*)
    "vit_timm_p32": dict(P=32, grid0=(3, 3), D=64, L=2, F=128, C=5),
    # DeiT distilled (timm/deit_*_distilled_patch16_224.fb_in1k): CLS + dist token
    "deit_distilled_timm": dict(P=16, grid0=(5, 5), D=192, L=3, F=384, C=10, dist=True),
    # DINO ViT-S/8 and ViT-B/16 (timm/vit_small_patch8_224.dino): backbones
    "dino_timm_p8": dict(P=8, grid0=(6, 6), D=128, L=2, F=256, C=0),
    # DINOv2 ViT-S/14 (timm/vit_small_patch14_dinov2.lvd142m): LayerScale, trained at
    # 518 px (37x37), run at 224 (16x16) through --size
    "dinov2_timm": dict(P=14, grid0=(37, 37), size=(224, 224), D=128, L=2, F=256, C=0, ls=True,
                        config="timm518"),
    # DINOv2 with 4 registers (timm/vit_small_patch14_reg4_dinov2.lvd142m): registers
    # after the position embedding (no_embed_class), run at its 518 px
    "dinov2_reg4_timm": dict(P=14, grid0=(37, 37), D=128, L=2, F=256, C=0, ls=True, R=4,
                             no_embed_class=True, config="timm518"),
    # the same at 224 px
    "dinov2_reg4_timm_224": dict(P=14, grid0=(37, 37), size=(224, 224), D=128, L=2, F=256, C=0,
                                 ls=True, R=4, no_embed_class=True, config="timm518"),
    # DeiT III (no_embed_class, LayerScale, CLS only)
    "deit3_timm": dict(P=16, grid0=(4, 4), D=64, L=2, F=256, C=6, ls=True, no_embed_class=True),
    # timm's average-pooled classifiers (BEiT, EVA, MAE-style fine-tuning: global_pool 'avg',
    # fc_norm after the mean of the patch tokens, no final norm), config.json's global_pool
    "fcnorm_avg_timm": dict(P=16, grid0=(4, 4), D=128, L=2, F=256, C=10, fc_norm=True,
                            global_pool="avg"),
    # the same with 4 registers and LayerScale, the pooling inferred from fc_norm alone (the
    # registers must stay out of the mean)
    "fcnorm_avg_reg4_timm": dict(P=14, grid0=(5, 5), size=(56, 84), D=128, L=2, F=256, C=7,
                                 fc_norm=True, R=4, ls=True, no_embed_class=True),
    # transformers ViTForImageClassification (google/vit-base-patch16-224)
    "vit_hf": dict(P=16, grid0=(5, 5), D=128, L=2, F=256, C=10, hf="ViTForImageClassification",
                   eps=1e-12),
    # transformers ViTModel as the DINO checkpoints on the hub (facebook/dino-vits16, -vits8)
    "dino_hf": dict(P=8, grid0=(6, 6), D=128, L=2, F=256, C=0, hf="ViTModel", eps=1e-6),
    # transformers DeiTForImageClassificationWithTeacher (facebook/deit-*-distilled-patch16-224)
    "deit_teacher_hf": dict(P=16, grid0=(5, 5), D=192, L=2, F=384, C=10, dist=True,
                            hf="DeiTForImageClassificationWithTeacher", eps=1e-12),
    # transformers DeiTForImageClassification: distillation token, CLS head only
    "deit_hf": dict(P=16, grid0=(4, 4), D=128, L=2, F=256, C=7, dist=True,
                    hf="DeiTForImageClassification", eps=1e-12),
}


def spec(name):
    f = dict(name=name, size=None, dist=False, R=0, ls=False, no_embed_class=False, hf=None,
             eps=None, config=None, fc_norm=False, global_pool=None, cls_mean=False)
    f.update(FAMILIES[name])
    f["H"] = f["D"] // 64
    return f


def random_timm(f, g):
    """Random float32 weights in timm's names for family f. As test_parity's:
    query/key rows with std 1.7/sqrt(D), so that softmax rows are peaked."""
    D, F_, P, C, L = f["D"], f["F"], f["P"], f["C"], f["L"]
    gh0, gw0 = f["grid0"]
    Np = 1 + f["dist"] + f["R"]
    Npos = 0 if f["no_embed_class"] else Np

    def rn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    w = {"cls_token": rn(1, 1, D, std=0.5)}
    if f["dist"]:
        w["dist_token"] = rn(1, 1, D, std=0.5)
    if f["R"]:
        w["reg_token"] = rn(1, f["R"], D, std=0.5)
    # a smooth grid plus noise: resampling it means something, as for a trained model
    yy, xx = torch.meshgrid(torch.linspace(0, 1, gh0), torch.linspace(0, 1, gw0), indexing="ij")
    freq = rn(D, 2, std=3.0)
    smooth = torch.sin(freq[:, 0, None, None] * yy + freq[:, 1, None, None] * xx)  # [D, gh0, gw0]
    grid = 0.4 * smooth.reshape(D, -1).T + rn(gh0 * gw0, D, std=0.2)
    w["pos_embed"] = torch.cat([rn(Npos, D, std=0.5), grid])[None]
    w["patch_embed.proj.weight"] = rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P))
    w["patch_embed.proj.bias"] = rn(D, std=0.1)
    for l in range(L):
        b = f"blocks.{l}."
        w |= block_weights(rn, b, D, F_)
        if f["ls"]:  # trained DINOv2 gammas are O(0.1 .. 1), positive and negative
            w[b + "ls1.gamma"] = 0.5 + rn(D, std=0.3)
            w[b + "ls2.gamma"] = 0.5 + rn(D, std=0.3)
    if f["fc_norm"]:  # timm use_fc_norm: norm is an Identity (not saved), fc_norm after the pool
        w |= {"fc_norm.weight": 1 + rn(D, std=0.2), "fc_norm.bias": rn(D, std=0.1)}
    else:
        w |= {"norm.weight": 1 + rn(D, std=0.2), "norm.bias": rn(D, std=0.1)}
    W = 2 * D if f["cls_mean"] else D  # [CLS ; mean of the patches]: 2D wide
    if C:
        w |= {"head.weight": rn(C, W, std=2 / math.sqrt(W)), "head.bias": rn(C, std=0.1)}
        if f["dist"]:
            w |= {"head_dist.weight": rn(C, D, std=2 / math.sqrt(D)), "head_dist.bias": rn(C, std=0.1)}
    return w


def to_hf(w, f, g):
    """The same model in transformers' names (modeling_vit.py / modeling_deit.py):
    fused qkv split into query, key, value; heads named by the class."""
    cls = f["hf"]
    p = {"ViTForImageClassification": "vit.", "ViTModel": "",
         "DeiTForImageClassification": "deit.",
         "DeiTForImageClassificationWithTeacher": "deit."}[cls]
    D, L = f["D"], f["L"]
    e = p + "embeddings."
    o = {e + "cls_token": w["cls_token"], e + "position_embeddings": w["pos_embed"],
         e + "patch_embeddings.projection.weight": w["patch_embed.proj.weight"],
         e + "patch_embeddings.projection.bias": w["patch_embed.proj.bias"]}
    if f["dist"]:
        o[e + "distillation_token"] = w["dist_token"]
    for l in range(L):
        b, t = f"{p}encoder.layer.{l}.", f"blocks.{l}."
        qw, kw, vw = w[t + "attn.qkv.weight"].split(D)
        qb, kb, vb = w[t + "attn.qkv.bias"].split(D)
        a = b + "attention.attention."
        o |= {b + "layernorm_before.weight": w[t + "norm1.weight"],
              b + "layernorm_before.bias": w[t + "norm1.bias"],
              a + "query.weight": qw, a + "query.bias": qb, a + "key.weight": kw, a + "key.bias": kb,
              a + "value.weight": vw, a + "value.bias": vb,
              b + "attention.output.dense.weight": w[t + "attn.proj.weight"],
              b + "attention.output.dense.bias": w[t + "attn.proj.bias"],
              b + "layernorm_after.weight": w[t + "norm2.weight"],
              b + "layernorm_after.bias": w[t + "norm2.bias"],
              b + "intermediate.dense.weight": w[t + "mlp.fc1.weight"],
              b + "intermediate.dense.bias": w[t + "mlp.fc1.bias"],
              b + "output.dense.weight": w[t + "mlp.fc2.weight"],
              b + "output.dense.bias": w[t + "mlp.fc2.bias"]}
    o |= {p + "layernorm.weight": w["norm.weight"], p + "layernorm.bias": w["norm.bias"]}
    if cls == "ViTModel":  # add_pooling_layer=True, as facebook/dino-vits16 ships it
        o |= {"pooler.dense.weight": torch.randn(D, D, generator=g) / math.sqrt(D),
              "pooler.dense.bias": torch.zeros(D)}
    elif cls == "DeiTForImageClassificationWithTeacher":
        o |= {"cls_classifier.weight": w["head.weight"], "cls_classifier.bias": w["head.bias"],
              "distillation_classifier.weight": w["head_dist.weight"],
              "distillation_classifier.bias": w["head_dist.bias"]}
    else:
        o |= {"classifier.weight": w["head.weight"], "classifier.bias": w["head.bias"]}
    return dict(sorted(o.items()))  # safetensors' save_file writes names sorted


def config_json(f):
    """config.json as the hub has it for the family."""
    gh0, gw0 = f["grid0"]
    S0 = (gh0 * f["P"], gw0 * f["P"])
    if f["hf"]:
        c = {"architectures": [f["hf"]], "hidden_size": f["D"], "num_hidden_layers": f["L"],
             "num_attention_heads": f["H"], "intermediate_size": f["F"], "hidden_act": "gelu",
             "layer_norm_eps": f["eps"], "image_size": S0[0], "patch_size": f["P"],
             "qkv_bias": True, "model_type": "deit" if "DeiT" in f["hf"] else "vit"}
        if f["C"]:
            c["id2label"] = {str(i): f"class {i}" for i in range(f["C"])}
            c["label2id"] = {f"class {i}": i for i in range(f["C"])}
        return c
    pc = {"input_size": [3, *S0], "crop_pct": f.get("crop_pct", 0.875), "interpolation": "bicubic",
          "mean": list(f.get("mean", (0.485, 0.456, 0.406))), "std": list(f.get("std", (0.229, 0.224, 0.225)))}
    if f["config"] == "timm518":
        pc |= {"crop_pct": 1.0}
    c = {"architecture": f["name"], "num_classes": f["C"], "num_features": f["D"], "pretrained_cfg": pc}
    if f["global_pool"]:
        c["global_pool"] = f["global_pool"]
    if f["C"]:
        c["label_names"] = [f"class {i}" for i in range(f["C"])]
    return c


def write_family(f, d, dtype="F32", seed=0):
    """Write model.safetensors + config.json for family f into d. Returns the
    float32 weights in the family's names (what the file holds before rounding)."""
    g = torch.Generator().manual_seed(seed)
    w = random_timm(f, g)
    if f["hf"]:
        w = to_hf(w, f, g)
    d.mkdir(parents=True, exist_ok=True)
    write_safetensors(d / "model.safetensors", w, dtype)
    (d / "config.json").write_text(json.dumps(config_json(f), indent=1))
    if f["cls_mean"]:  # timm's names with a [CLS ; mean] head: a layout that says so
        lay = json.loads((Path(__file__).resolve().parents[2] / "assets/layouts/timm.json").read_text())
        lay |= {"name": "timm-cls-mean", "pooling": "cls_mean"}
        (d / "layout.json").write_text(json.dumps(lay, indent=1))
    return w


def reference_forward(f, w, x, dtype=torch.float64, **kw):
    """(logits, att) of the family's own reference; kw["out"] receives pos, logits_dist."""
    if f["hf"]:
        return reference_hf.hf_forward(w, x, f["H"], ln_eps=f["eps"], dtype=dtype, **kw)
    return reference.vit_forward(w, x, f["H"], dtype, **kw)


def dump_args(f, d, x, out):
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    args = ["--model", d / "model.safetensors", "--input", d / "input.f32", "--out", out]
    if f["size"]:
        args += ["--size", f"{f['size'][0]}x{f['size'][1]}"]
    if f["cls_mean"]:
        args += ["--layout", d / "layout.json"]
    return args


def input_size(f):
    gh0, gw0 = f["grid0"]
    return f["size"] or (gh0 * f["P"], gw0 * f["P"])


def check_pos(rep, label, engine, ref_out):
    pe, pr = engine["pos"], ref_out["pos"].numpy()
    if not rep.check(pe.shape == pr.shape, f"{label}: position embedding shape {pe.shape}, expected {pr.shape}"):
        return
    d = np.abs(pe - pr).max()
    print(f"  position embedding {pe.shape[0]}x{pe.shape[1]}: max|engine - f64| = {d:.1e} (tol {POS_TOL:.0e})")
    rep.check(d <= POS_TOL, f"{label}: position embedding differs by {d:.1e}")


def must_differ(rep, label, what, engine_val, wrong_val, tol):
    """The engine must be far from a plausible mistake: proof the comparison can fail."""
    d = float(np.abs(engine_val - wrong_val).max())
    print(f"  mistake '{what}': engine differs from it by {d:.1e} (must exceed {WRONG * tol:.0e})")
    rep.check(d > WRONG * tol, f"{label}: the engine is as close to '{what}' as to the reference")


def mistake(f, w, x, engine, rep, label):
    """Plausible mistakes for the family, computed with its reference: the engine
    must be far from each (and near the reference, checked by compare)."""
    if f["dist"] and f["C"] and "logits_dist" in engine:
        ref_out = {}
        lg, _ = reference_forward(f, w, x, out=ref_out)
        tol = LOGIT_TOL * max(1.0, float(lg.abs().max()))
        d_dist = np.abs(engine["logits_dist"] - ref_out["logits_dist"].numpy()).max()
        print(f"  distillation head alone: max|engine - f64| = {d_dist:.1e}")
        rep.check(d_dist <= tol, f"{label}: distillation head logits differ by {d_dist:.1e}")
        cls_alone = engine["logits"] * 2 - engine["logits_dist"]
        must_differ(rep, label, "the CLS head alone", engine["logits"], cls_alone, tol)
    if f["C"] and (f["fc_norm"] or f["cls_mean"]):  # the pooled heads' mistakes
        lg = reference_forward(f, w, x)[0]
        tol = LOGIT_TOL * max(1.0, float(lg.abs().max()))
        wrongs = {"mean_prefix": "the mean over the prefix tokens too"}
        wrongs |= ({"cls_only": "the CLS alone ([CLS ; 0])"} if f["cls_mean"] else
                   {"norm_not_fc": "fc_norm as the final norm, before the mean"})
        for k, what in wrongs.items():
            lw = reference_forward(f, w, x, ops={"head_wrong": k})[0]
            must_differ(rep, label, what, engine["logits"], lw.numpy(), tol)
    if f["hf"] == "DeiTForImageClassification":
        rep.check("logits_dist" not in engine, f"{label}: a distillation head where there is none")
    if f["ls"]:
        wl = {k: v for k, v in w.items() if not k.endswith(("ls1.gamma", "ls2.gamma"))}
        _, att = reference_forward(f, wl, x)
        must_differ(rep, label, "LayerScale ignored", engine["att"], att.numpy(), TOL)
    if f["size"] and not f["hf"]:
        # timm resamples with antialias=True; transformers' rule is the other one
        npos = 0 if f["no_embed_class"] else 1 + f["dist"]
        wrong = reference.resample_abs_pos_embed(w["pos_embed"].double(),
                                                 [s // f["P"] for s in f["size"]], f["grid0"],
                                                 npos, antialias=False)
        must_differ(rep, label, "bicubic without antialias", engine["pos"], wrong[0].numpy(), POS_TOL)
    if f["hf"]:
        # separate query, key, value: the file stores them key, query, value
        ws = dict(w)
        for k in [k for k in w if ".attention.attention.query." in k]:
            ws[k], ws[k.replace(".query.", ".key.")] = w[k.replace(".query.", ".key.")], w[k]
        _, att = reference_forward(f, ws, x)
        must_differ(rep, label, "query and key swapped", engine["att"], att.numpy(), TOL)


def pooled_refusals(f, w, d, x, args, rep, label):
    """What a pooled head vitlens does not run is refused by name: timm's class_token=False
    (the *_gap_* models: no cls_token, pos_embed without a prefix row) and a global_pool
    other than "token" or "avg" in config.json."""
    cases = []
    nc = {k: v for k, v in w.items() if k != "cls_token"}
    nc["pos_embed"] = w["pos_embed"][:, 1 + f["R"]:] if not f["no_embed_class"] else w["pos_embed"]
    cases.append(("no_cls", nc, None, ["without 'cls_token'", "class_token=False", "fc_norm"]))
    cases.append(("map_pool", w, {"global_pool": "map"}, ["global_pool 'map'", "not support"]))
    for tag, wt, cfg_edit, want in cases:
        dd = d / f"refuse_{tag}"
        dd.mkdir(parents=True, exist_ok=True)
        write_safetensors(dd / "model.safetensors", wt, "F32")
        (dd / "config.json").write_text(json.dumps(config_json(f) | (cfg_edit or {})))
        a = [str(v) for v in dump_args(f, dd, x, dd / "out")]
        r = subprocess.run([args.dump] + a, capture_output=True, text=True)
        msg = r.stderr.strip()
        print(f"  refused ({tag}): exit {r.returncode}: {msg[:160]}")
        rep.check(r.returncode == 1 and all(s in msg for s in want),
                  f"{label}: {tag}: expected a refusal naming {want}, got exit {r.returncode}: {msg}")


def test_family(name, args, rep):
    f = spec(name)
    d = Path(args.work) / name
    Sh, Sw = input_size(f)
    print(f"\n[{name}] {f['hf'] or 'timm'} names, patch {f['P']}, trained {f['grid0'][0]}x{f['grid0'][1]}, "
          f"input {Sh}x{Sw}, D={f['D']} H={f['H']} L={f['L']} C={f['C']}, dist={f['dist']}, "
          f"registers={f['R']}, LayerScale={f['ls']}")
    w = write_family(f, d, seed=sum(map(ord, name)))
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, Sh, Sw, generator=g)
    engine, cfg = run_dump(args.dump, dump_args(f, d, x, d / "out"))
    gh, gw = Sh // f["P"], Sw // f["P"]
    Np = 1 + f["dist"] + f["R"]
    check_config(rep, name, cfg, dict(
        naming="hf" if f["hf"] else "timm", image_h=Sh, image_w=Sw, patch_size=f["P"], grid_h=gh,
        grid_w=gw, n_prefix=Np, has_dist_token=int(f["dist"]), n_registers=f["R"], n_tokens=Np + gh * gw,
        pos_grid_h=f["grid0"][0], pos_grid_w=f["grid0"][1], pos_prefix=0 if f["no_embed_class"] else Np,
        dim=f["D"], n_heads=f["H"], n_layers=f["L"], mlp_dim=f["F"], n_classes=f["C"],
        head_pool=1 if f["fc_norm"] else 2 if f["cls_mean"] else 0))
    want_eps = f["eps"] if f["eps"] else 1e-6
    rep.check(abs(cfg["ln_eps"] - want_eps) <= 1e-6 * want_eps,
              f"{name}: LayerNorm eps {cfg['ln_eps']}, expected {want_eps} from config.json")
    ref_out = {}
    ref64 = reference_forward(f, w, x, out=ref_out)
    ref32 = reference_forward(f, w, x, torch.float32)
    check_peaked(rep, name, ref64[1])
    compare(rep, name, engine, ref64, ref32, TOL)
    check_pos(rep, name, engine, ref_out)
    mistake(f, w, x, engine, rep, name)
    if f["fc_norm"] and not f["R"]:
        pooled_refusals(f, w, d, x, args, rep, name)


# --- resolution ----------------------------------------------------------------------

# (family base, training grid, config size, --size, what)
RESIZE = [
    ("vit_timm", (7, 7), None, (192, 144), "timm, 7x7 -> 12x9 (larger, not square)"),
    ("vit_timm", (7, 7), None, (64, 64), "timm, 7x7 -> 4x4 (smaller: the antialias widens the kernel)"),
    ("vit_timm", (7, 7), None, (112, 112), "timm, 7x7 at its own size: no resampling"),
    ("dinov2_reg4_timm", (6, 6), None, (98, 154), "timm registers, 6x6 -> 7x11"),
    ("deit_distilled_timm", (6, 6), None, (80, 128), "timm distilled, 6x6 -> 5x8"),
    ("vit_timm", (4, 6), (64, 96), None, "timm, non-square 4x6 training grid from config.json"),
    ("vit_timm", (4, 6), (64, 96), (96, 96), "timm, non-square 4x6 -> 6x6"),
    ("vit_hf", (6, 6), None, (160, 96), "transformers, 6x6 -> 10x6 (interpolate_pos_encoding)"),
    ("deit_teacher_hf", (6, 6), None, (64, 64), "transformers DeiT, 6x6 -> 4x4"),
]


def test_resize(args, rep):
    for i, (base, grid0, cfg_size, size, what) in enumerate(RESIZE):
        f = spec(base)
        f["grid0"], f["size"] = grid0, size
        label = f"resize{i}_{base}"
        d = Path(args.work) / label
        print(f"\n[{label}] {what}")
        w = write_family(f, d, seed=100 + i)
        if cfg_size:  # a non-square training size, as timm's pretrained_cfg input_size
            c = json.loads((d / "config.json").read_text())
            c["pretrained_cfg"]["input_size"] = [3, *cfg_size]
            (d / "config.json").write_text(json.dumps(c))
        Sh, Sw = size or cfg_size
        x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(i))
        engine, cfg = run_dump(args.dump, dump_args(f, d, x, d / "out"))
        check_config(rep, label, cfg, dict(image_h=Sh, image_w=Sw, grid_h=Sh // f["P"], grid_w=Sw // f["P"],
                                           pos_grid_h=grid0[0], pos_grid_w=grid0[1]))
        ref_out = {}
        kw = {} if f["hf"] else {"pos_grid": grid0}
        ref64 = reference_forward(f, w, x, out=ref_out, **kw)
        ref32 = reference_forward(f, w, x, torch.float32, **kw)
        compare(rep, label, engine, ref64, ref32, TOL)
        check_pos(rep, label, engine, ref_out)
        gh, gw = Sh // f["P"], Sw // f["P"]
        if (gh, gw) != grid0:  # the other library's rule must be far off
            npos = 0 if f["no_embed_class"] else 1 + f["dist"]
            pos = w["pos_embed" if not f["hf"] else [k for k in w if k.endswith("position_embeddings")][0]]
            other = reference.resample_abs_pos_embed(pos.double(), (gh, gw), grid0, npos,
                                                     antialias=bool(f["hf"]))
            must_differ(rep, label, "the other library's resampling rule", engine["pos"],
                        other[0].numpy(), POS_TOL)


# --- F16 / BF16 ----------------------------------------------------------------------

DTYPES = {"F16": (torch.float16, 2.0**-11), "BF16": (torch.bfloat16, 2.0**-8)}  # unit roundoff


def test_dtype(args, rep):
    for name in ("deit_distilled_timm", "dinov2_reg4_timm_224", "vit_hf"):
        f = spec(name)
        Sh, Sw = input_size(f)
        x = torch.randn(3, Sh, Sw, generator=torch.Generator().manual_seed(3))
        d32 = Path(args.work) / f"{name}_F32"
        w32 = write_family(f, d32, "F32", seed=5)
        e32, _ = run_dump(args.dump, dump_args(f, d32, x, d32 / "out"))
        ref_f32w = reference_forward(f, w32, x)
        for dt, (tdt, u) in DTYPES.items():
            label = f"{name}_{dt}"
            d = Path(args.work) / label
            write_family(f, d, dt, seed=5)
            print(f"\n[{label}] the F32 model stored as {dt} (unit roundoff {u:.1e})")
            e, _ = run_dump(args.dump, dump_args(f, d, x, d / "out"))
            # (1) loaded exactly: the reference on the values the file holds
            w_rounded = reference.load_safetensors(d / "model.safetensors")
            ref_dtw = reference_forward(f, w_rounded, x)
            compare(rep, label + " vs reference on its values", e, ref_dtw,
                    reference_forward(f, w_rounded, x, torch.float32), TOL)
            # (2) within the dtype's precision of the F32 original: the engine moves no
            # further from the F32 model than the reference does when its weights are
            # rounded to the dtype, and that move is of the order of the roundoff
            for what, i in (("attention", 1), ("logits", 0)):
                if ref_f32w[i] is None:
                    continue
                eng = e["att" if i else "logits"]
                d_eng = float(np.abs(eng - e32["att" if i else "logits"]).max())
                d_ref = float((ref_dtw[i] - ref_f32w[i]).abs().max())
                scale = 1.0 if i else max(1.0, float(ref_f32w[0].abs().max()))
                tol = TOL if i else LOGIT_TOL * scale
                print(f"  {what}: max|{dt} - F32| engine {d_eng:.2e}, reference {d_ref:.2e} "
                      f"({d_ref / scale / u:.0f} x unit roundoff{' x max|logit|' if not i else ''})")
                rep.check(d_eng <= d_ref + tol, f"{label}: {what} moves {d_eng:.1e} from F32, "
                          f"more than rounding the weights explains ({d_ref:.1e})")
                rep.check(d_eng > 0, f"{label}: {what} identical to F32: was the file really {dt}?")
                rep.check(d_ref <= 1000 * u * scale, f"{label}: rounding to {dt} moves the {what} by "
                          f"{d_ref:.1e}, far beyond its precision")


# --- preprocessing -------------------------------------------------------------------


def timm_eval_pil(img, size, crop_pct, crop_mode):
    """timm transforms_imagenet_eval on a PIL image, from torchvision and PIL as timm
    builds it (the 8-bit crop): scale_size = floor(S / crop_pct) per side;
    squash: Resize(scale_size); center: Resize(scale) of the shorter side when
    square, else ResizeKeepRatio(scale_size) (bilinear, timm's default there);
    then CenterCrop(size)."""
    from torchvision import transforms as T
    Sh, Sw = size
    sh, sw = math.floor(Sh / crop_pct), math.floor(Sw / crop_pct)
    bicubic = T.InterpolationMode.BICUBIC
    if crop_mode == "squash":
        img = T.Resize((sh, sw), interpolation=bicubic)(img)
    elif sh == sw:
        img = T.Resize(sh, interpolation=bicubic)(img)
    else:  # timm.data.transforms.ResizeKeepRatio(scale_size).get_params, longest=0
        w, h = img.size
        ratio = min(h / sh, w / sw)
        new = [round(h / ratio), round(w / ratio)]
        img = T.functional.resize(img, new, T.InterpolationMode.BILINEAR)
    return T.CenterCrop((Sh, Sw))(img)


def synthetic_photos(d):
    """Smooth colour fields with edges and noise, in odd sizes: PNG, so decoding is exact."""
    g = np.random.default_rng(11)
    out = []
    for (w, h) in ((301, 187), (120, 260), (97, 97)):
        yy, xx = np.mgrid[0:h, 0:w] / max(w, h)
        rgb = np.stack([np.sin(7 * xx + 3 * yy), np.cos(5 * yy - 2 * xx), np.sin(11 * xx * yy)], -1)
        rgb = 127.5 + 100 * rgb + g.normal(0, 12, rgb.shape)
        rgb[(xx - 0.4) ** 2 + (yy - 0.3) ** 2 < 0.02] = (250, 30, 40)
        p = d / f"synthetic_{w}x{h}.png"
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(p)
        out.append(p)
    return out


# (--size, --whole, crop_pct in config.json, crop_mode in config.json)
PREPROCESS = [
    ((96, 144), False, 0.875, None, "center, non-square: ResizeKeepRatio"),
    ((144, 96), False, 0.9, None, "center, non-square, tall"),
    ((96, 96), False, 0.875, None, "center, square (timm's default)"),
    ((96, 144), True, 0.875, None, "--whole: squash, crop_pct 1"),
    ((112, 112), True, 0.9, None, "--whole on a square input"),
    ((96, 128), False, 0.95, "squash", "crop_mode squash from config.json, crop_pct 0.95"),
]


def test_preprocess(args, rep):
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    photos = synthetic_photos(work)
    f = spec("vit_timm_p32")
    f["P"], f["grid0"] = 16, (3, 3)
    for i, (size, whole, crop_pct, mode, what) in enumerate(PREPROCESS):
        d = work / f"pre{i}"
        write_family(f, d, seed=i)
        c = json.loads((d / "config.json").read_text())
        c["pretrained_cfg"]["crop_pct"] = crop_pct
        if mode:
            c["pretrained_cfg"]["crop_mode"] = mode
        (d / "config.json").write_text(json.dumps(c))
        mean, std = c["pretrained_cfg"]["mean"], c["pretrained_cfg"]["std"]
        for photo in photos:
            label = f"pre{i} {photo.name}"
            argv = ["--model", d / "model.safetensors", "--image", photo, "--out", d / photo.stem,
                    "--size", f"{size[0]}x{size[1]}"] + (["--whole"] if whole else [])
            engine, cfg = run_dump(args.dump, argv)
            pil = Image.open(photo).convert("RGB")
            ref = timm_eval_pil(pil, size, 1.0 if whole else crop_pct,
                                "squash" if whole or mode == "squash" else "center")
            ref_rgb = np.asarray(ref)
            from torchvision import transforms as T
            ref_in = T.Normalize(mean, std)(T.ToTensor()(ref)).numpy()
            ok_shape = rep.check(engine["rgb"].shape == ref_rgb.shape,
                                 f"{label}: crop {engine['rgb'].shape}, expected {ref_rgb.shape}")
            if ok_shape:
                d_rgb = np.abs(engine["rgb"].astype(int) - ref_rgb.astype(int)).max()
                d_in = np.abs(engine["input"] - ref_in).max()
                print(f"[{label}] {what}, {size[0]}x{size[1]}: 8-bit crop max diff {d_rgb}, "
                      f"input max diff {d_in:.1e}, crop rectangle {cfg['crop']}")
                rep.check(d_rgb == 0 and d_in == 0, f"{label}: preprocessing differs from timm's")
            if whole:
                x0, y0, cw, ch = cfg["crop"]
                rep.check((x0, y0, cw, ch) == (0, 0, pil.width, pil.height),
                          f"{label}: --whole shows {cfg['crop']}, not the whole photo")
    test_decoding(args, rep, work, f)


def codec_photos(d):
    """A synthetic photo (smooth colour fields, edges, noise; odd size, so that chroma
    subsampling has a half block at the edges) as Pillow writes it in each of the
    JPEG, WebP and TIFF variants people have. Returns [(path, what)]."""
    g = np.random.default_rng(5)
    w, h = 203, 131
    yy, xx = np.mgrid[0:h, 0:w] / max(w, h)
    rgb = np.stack([np.sin(9 * xx + 2 * yy), np.cos(4 * yy - 3 * xx), np.sin(13 * xx * yy)], -1)
    rgb = 127.5 + 100 * rgb + g.normal(0, 10, rgb.shape)
    rgb[(xx - 0.5) ** 2 + (yy - 0.3) ** 2 < 0.01] = (20, 240, 60)
    rgb = np.clip(rgb, 0, 255).astype(np.uint8)
    # alpha: opaque, a ramp, and a fully transparent band (colour kept under it)
    alpha = np.full((h, w), 255, np.uint8)
    alpha[:, : w // 3] = np.linspace(0, 255, w // 3).astype(np.uint8)
    alpha[h // 2: h // 2 + 12] = 0
    im, rgba = Image.fromarray(rgb), Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    grey, pal = im.convert("L"), im.quantize(64)
    out = []

    def save(name, img, what, **kw):
        img.save(d / name, **kw)
        out.append((d / name, what))

    save("baseline.jpg", im, "JPEG baseline, quality 90 (4:2:0)", quality=90)
    save("progressive.jpg", im, "JPEG progressive", quality=90, progressive=True)
    save("optimized.jpg", im, "JPEG optimised Huffman tables, quality 75", quality=75, optimize=True)
    save("grey.jpg", grey, "JPEG greyscale", quality=90)
    save("s420.jpg", im, "JPEG 4:2:0", quality=95, subsampling=2)
    save("s422.jpg", im, "JPEG 4:2:2", quality=95, subsampling=1)
    save("s444.jpg", im, "JPEG 4:4:4", quality=95, subsampling=0)
    save("cmyk.jpg", im.convert("CMYK"), "JPEG CMYK (Adobe, inverted)", quality=90)
    save("lossless.webp", im, "WebP lossless", lossless=True)
    save("lossy.webp", im, "WebP lossy", quality=80)
    save("lossless_alpha.webp", rgba, "WebP lossless with alpha", lossless=True, exact=True)
    save("lossy_alpha.webp", rgba, "WebP lossy with alpha", quality=80)
    save("rgb.tif", im, "TIFF RGB, raw")
    save("rgb_lzw.tif", im, "TIFF RGB, LZW", compression="tiff_lzw")
    save("rgb_deflate.tif", im, "TIFF RGB, deflate", compression="tiff_adobe_deflate")
    save("rgb_packbits.tif", im, "TIFF RGB, PackBits", compression="packbits")
    save("rgba_lzw.tif", rgba, "TIFF RGBA (unassociated alpha), LZW", compression="tiff_lzw")
    save("grey.tif", grey, "TIFF grey, raw")
    save("grey_deflate.tif", grey, "TIFF grey, deflate", compression="tiff_adobe_deflate")
    save("palette.tif", pal, "TIFF palette (64 colours), raw")
    save("palette_lzw.tif", pal, "TIFF palette, LZW", compression="tiff_lzw")
    save("bilevel_g4.tif", im.convert("1"), "TIFF bilevel, CCITT G4", compression="group4")
    return out


def check_decoded(rep, label, engine, want):
    """The engine's decoded photo (image.npy) against Pillow's pixels, exactly."""
    got = engine["image"]
    if not rep.check(got.shape == want.shape, f"{label}: decoded {got.shape}, Pillow {want.shape}"):
        return
    d = np.abs(got.astype(int) - want.astype(int))
    print(f"[{label}] decoded {got.shape[1]}x{got.shape[0]}: max|engine - Pillow| = {d.max()} "
          f"({(d > 0).mean():.2%} of values differ)")
    rep.check(d.max() == 0, f"{label}: decoded pixels differ from Pillow's")


def check_transform(rep, label, engine, pil, size, crop_pct, mean, std):
    """rgb.npy and input.npy against timm's transform on Pillow's image, exactly."""
    from torchvision import transforms as T
    ref = timm_eval_pil(pil, size, crop_pct, "center")
    ref_rgb, ref_in = np.asarray(ref), T.Normalize(mean, std)(T.ToTensor()(ref)).numpy()
    if rep.check(engine["rgb"].shape == ref_rgb.shape, f"{label}: crop {engine['rgb'].shape}"):
        d_rgb = np.abs(engine["rgb"].astype(int) - ref_rgb.astype(int)).max()
        d_in = np.abs(engine["input"] - ref_in).max()
        rep.check(d_rgb == 0 and d_in == 0,
                  f"{label}: preprocessing differs from timm's (crop {d_rgb}, input {d_in:.1e})")


def oriented_photos(d):
    """A 48 x 32 photo with two corners marked, as a JPEG with each EXIF orientation
    1..8, a WebP and a TIFF at 6 (90 degrees clockwise). Returns [(path, what, upright,
    stored)]: the pixels vitlens must give by default and with --ignore-orientation.
    JPEG, WebP: ImageOps.exif_transpose of Pillow's image, and Pillow's image. TIFF:
    Pillow 9.4 turns a TIFF by its Orientation tag when it loads it (TiffImagePlugin
    load_end; its exif_transpose then turns it a second time), so Pillow's image is
    the upright one and the pixels as stored are those written."""
    yy, xx = np.mgrid[0:32, 0:48]
    rgb = np.stack([xx * 5, yy * 7, 255 - xx * 3 - yy * 2], -1).astype(np.uint8)
    rgb[:6, :9] = (255, 0, 0)
    rgb[-4:, -12:] = (0, 255, 0)
    im = Image.fromarray(rgb)
    out = []

    def exif(o):
        e = Image.Exif()
        e[0x0112] = o
        return e.tobytes()

    def add(p, what):
        pil = Image.open(p)
        out.append((p, what, ImageOps.exif_transpose(pil).convert("RGB"), pil.convert("RGB")))

    for o in range(1, 9):
        im.save(d / f"orient{o}.jpg", quality=95, exif=exif(o))
        add(d / f"orient{o}.jpg", f"JPEG EXIF orientation {o}")
    im.save(d / "orient6.webp", lossless=True, exif=exif(6))
    add(d / "orient6.webp", "WebP EXIF orientation 6")
    im.save(d / "orient6.tif", compression="tiff_lzw", tiffinfo={0x0112: 6})
    out.append((d / "orient6.tif", "TIFF Orientation tag 6", Image.open(d / "orient6.tif").convert("RGB"),
                im))
    return out


def test_decoding(args, rep, work, f):
    """Each codec's pixels against Pillow's, then through timm's transform; EXIF turns."""
    d = work / "decode"
    d.mkdir(parents=True, exist_ok=True)
    write_family(f, d, seed=7)
    c = json.loads((d / "config.json").read_text())
    mean, std, crop_pct = c["pretrained_cfg"]["mean"], c["pretrained_cfg"]["std"], 0.875
    c["pretrained_cfg"]["crop_pct"] = crop_pct
    (d / "config.json").write_text(json.dumps(c))
    size = (96, 96)
    for photo, what in codec_photos(d):
        argv = ["--model", d / "model.safetensors", "--image", photo, "--out", d / photo.stem,
                "--size", f"{size[0]}x{size[1]}"]
        engine, _ = run_dump(args.dump, argv)
        pil = Image.open(photo).convert("RGB")
        check_decoded(rep, f"{photo.name}: {what}", engine, np.asarray(pil))
        check_transform(rep, photo.name, engine, pil, size, crop_pct, mean, std)
    for photo, what, upright, stored in oriented_photos(d):
        turned = not np.array_equal(np.asarray(upright), np.asarray(stored))
        rep.check(turned == ("orientation 1" not in what), f"{photo.name}: the orientation turns "
                  f"nothing, so the test could not fail" if turned is False else f"{photo.name}: turned")
        for ignore in (False, True):
            argv = ["--model", d / "model.safetensors", "--image", photo, "--size", "96x96",
                    "--out", d / (photo.name + ("_raw" if ignore else "_upright"))]
            engine, _ = run_dump(args.dump, argv + (["--ignore-orientation"] if ignore else []))
            want = stored if ignore else upright
            label = f"{photo.name}: {what}" + (", --ignore-orientation" if ignore else "")
            check_decoded(rep, label, engine, np.asarray(want))
            check_transform(rep, label, engine, want, size, crop_pct, mean, std)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["family", "resize", "dtype", "preprocess", "list"])
    ap.add_argument("name", nargs="?", help="the family (part family)")
    ap.add_argument("--dump", help="the vit_dump executable")
    ap.add_argument("--work", help="scratch directory")
    args = ap.parse_args()
    if args.part == "list":
        print(";".join(FAMILIES))
        return 0
    torch.set_num_threads(1)
    rep, t0 = Report(), time.time()
    if args.part == "family":
        if args.name not in FAMILIES:
            ap.error(f"family: one of {', '.join(FAMILIES)}")
        test_family(args.name, args, rep)
    else:
        {"resize": test_resize, "dtype": test_dtype, "preprocess": test_preprocess}[args.part](args, rep)
    print(f"({time.time() - t0:.1f} s)")
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
