"""test_parity.py - the engine's forward pass against the PyTorch reference.

    /usr/bin/python3 test_parity.py random --dump vit_dump --work DIR
    /usr/bin/python3 test_parity.py deit   --dump vit_dump --work DIR --shared SHARED

random: small random models in timm naming (patch 8 and 16, 3x3 to 12x12 grids,
        heads by default / config.json / --heads, no head, F16 and BF16 storage),
        fed a fixed random input, so the forward pass is tested on its own.
deit:   DeiT-Tiny on every photo in SHARED/images: preprocessing against
        torchvision's, logits and all 12 layers' attention against the
        reference on the same input, and the same top-5. Exit 77 (skip)
        without SHARED.
--perturb eps|tanh makes the reference wrong (LayerNorm eps 1e-5, tanh GELU):
the test must then fail, which shows its tolerances can catch such slips. That
negative control is a test of its own (ctest parity_*_control_*): with --perturb,
the run passes (exit 0) only when the logits or attention comparison fails on
every model or photo, i.e. the tolerances caught the wrong reference everywhere;
a crash or an input the wrong reference passes on fails it.

Tolerances. The target is the float64 reference on the same stored weights and
the same float32 input, so any difference is float32 rounding; PyTorch's own
float32 forward is printed beside it as the yardstick of what float32 reaches.
Measured (engine / torch f32, max abs): random models, attention <= 2.1e-6 /
2.6e-6, logits <= 3.4e-6 / 3.4e-6; DeiT-Tiny, attention <= 1.7e-5 / 3.9e-5
(error grows with depth: deep layers have scores |q.k|/sqrt(Dh) of tens, and a
softmax passes their float32 rounding on), logits <= 8.3e-6 / 1.4e-5.
  attention: 1e-5 for the random models (1 to 4 layers), 5e-5 for the 12
    layers of DeiT-Tiny, i.e. above what float32 reaches, PyTorch's included;
  logits: 1e-5 * max(1, max |logit|), about 10x the measured error;
  probabilities: the attention tolerance.
These still catch small slips: LayerNorm eps 1e-5 instead of 1e-6 moves DeiT
attention by >= 1.2e-4 and logits by >= 1.1e-4, tanh GELU moves them by >= 2.5e-3
(see --perturb). Preprocessing must be bit-exact (the engine's claim), JPEG
included: the engine decodes it with Pillow's libjpeg-turbo and settings (with
stb_image 0.8% of values were off by up to 2 levels). So on a JPEG the engine's
logits and probabilities are checked against the reference on Pillow's input too.
"""
import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: safetensors_io
from safetensors_io import write_safetensors  # noqa: E402,F401  (the tests import it from here)
import reference  # noqa: E402

ATT_TOL = {"random": 1e-5, "deit": 5e-5}  # max abs difference of an attention probability
LOGIT_TOL = 1e-5  # max abs difference of logits, times max(1, max |logit|)
PEAKED = 0.75  # mean row entropy / log(T) must stay below: attention far from uniform
CAT_IDS = range(281, 286)  # ImageNet: tabby, tiger cat, Persian, Siamese, Egyptian cat

torch.set_num_threads(1)  # the machine is shared; float64 DeiT-Tiny is still < 1 s


class Report:
    """Collects failures so every model and photo is reported before exiting. The
    comparisons with the reference (compare) name their model or photo as `guard`:
    with a wrong reference (--perturb) each of those must have failed."""

    def __init__(self):
        self.failures = []
        self.compared, self.caught = [], set()  # labels compared; those with a failure

    def check(self, ok, what, guard=None):
        if guard is not None and guard not in self.compared:
            self.compared.append(guard)
        if not ok:
            self.failures.append(what)
            print(f"  FAIL {what}")
            if guard is not None:
                self.caught.add(guard)
        return ok

    def exit_code(self):
        print(f"\n{len(self.failures)} failure(s)" if self.failures else "\nall parity checks passed")
        return 1 if self.failures else 0

    def control_exit_code(self, what):
        """The negative control: 0 when the comparisons failed on every label."""
        missed = [g for g in self.compared if g not in self.caught]
        if not self.compared or missed:
            print(f"\nCONTROL FAILED: with {what} the comparisons passed on "
                  f"{missed or 'nothing compared'}: the tolerances do not catch it")
            return 1
        print(f"\ncontrol ok: with {what} the comparisons failed on all {len(self.compared)} "
              f"of {', '.join(self.compared)}")
        return 0


def run_dump(dump, args):
    """Run vit_dump; returns its outputs {name: array} and the config it inferred."""
    out = Path(args[args.index("--out") + 1])
    shutil.rmtree(out, ignore_errors=True)  # no stale .npy from an earlier run
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([dump] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"vit_dump {' '.join(map(str, args))} exited {r.returncode}:\n{r.stderr}")
    res = {p.stem: np.load(p) for p in out.glob("*.npy")}
    return res, json.loads((out / "config.json").read_text())


def compare(rep, label, engine, ref64, ref32, att_tol):
    """Max abs differences of logits and attention, engine vs float64 and torch
    float32 vs float64 (the yardstick); records a failure beyond tolerance."""
    if not check_attention(rep, label, engine["att"], ref64[1], ref32[1], att_tol):
        return
    if ref64[0] is None:
        rep.check("logits" not in engine, f"{label}: engine wrote logits for a model without head")
        return
    lg64 = ref64[0].numpy()
    tol = LOGIT_TOL * max(1.0, np.abs(lg64).max())
    d = np.abs(engine["logits"] - lg64).max()
    yard = np.abs(ref32[0].double().numpy() - lg64).max()
    dp = np.abs(engine["probs"] - torch.softmax(ref64[0], 0).numpy()).max()
    print(f"  logits    max|engine - f64| = {d:.2e}  (torch f32: {yard:.2e}, tol {tol:.1e}; "
          f"max|logit| {np.abs(lg64).max():.1f}); probs {dp:.1e}")
    rep.check(d <= tol, f"{label}: logits differ by {d:.2e}", guard=label)
    rep.check(dp <= att_tol, f"{label}: probabilities differ by {dp:.2e}", guard=label)


def check_attention(rep, label, att_e, att64, att32, tol):
    """Every layer's attention [L, H, T, T]: max|engine - float64| per layer within tol
    (max abs), printed beside torch float32's own distance (the yardstick). att64 and att32
    are the reference's tensors. False when the shapes differ (nothing else to compare)."""
    if not rep.check(att_e.shape == tuple(att64.shape), f"{label}: att {att_e.shape}, expected "
                     f"{tuple(att64.shape)}", guard=label):
        return False
    per_layer = np.abs(att_e - att64.numpy()).reshape(len(att64), -1).max(axis=1)
    yard = float((att32.double() - att64).abs().max())
    print(f"  attention max|engine - f64| per layer: {' '.join(f'{v:.1e}' for v in per_layer)}")
    print(f"  attention max|engine - f64| = {per_layer.max():.2e} (torch f32: {yard:.2e}, tol {tol:.0e})")
    rep.check(per_layer.max() <= tol, f"{label}: attention differs by {per_layer.max():.2e}",
              guard=label)
    return True


def check_relative(rep, label, what, got, ref64, ref32, tol, floor=0.0):
    """max|engine - float64| / max(floor, max|float64|) within tol, beside torch float32's
    own distance; ref64 and ref32 are the reference's tensors of got's shape."""
    want = ref64.numpy()
    scale = max(floor, float(np.abs(want).max()))
    d = float(np.abs(got - want).max()) / scale
    yard = float((ref32.double() - ref64).abs().max()) / scale
    print(f"  {what} max|engine - f64| / max|f64| = {d:.2e} (torch f32: {yard:.2e}, "
          f"max|f64| {np.abs(want).max():.1f}, tol {tol:.0e})")
    rep.check(d <= tol, f"{label}: {what} differs by {d:.2e} (relative)", guard=label)


def check_table(rep, label, what, got, want, tol, guard=None):
    """A table the engine computes once (the rotary cosines and sines, a resampled position
    embedding): the shape, then max|engine - float64| within tol."""
    if rep.check(got is not None and got.shape == want.shape,
                 f"{label}: {what} {None if got is None else got.shape}, expected {want.shape}",
                 guard=guard):
        d = float(np.abs(got - want).max())
        print(f"  {what} {want.shape[0]}x{want.shape[1]}: max|engine - f64| = {d:.1e} (tol {tol:.0e})")
        rep.check(d <= tol, f"{label}: {what} differs by {d:.1e}", guard=guard)


def check_peaked(rep, label, att):
    """Random weights could give near-uniform attention, which any softmax would
    match; require rows to be peaked (mean entropy well below log T)."""
    p = att.clamp_min(1e-300)
    ent = (-(p * p.log()).sum(-1)).mean(dim=(1, 2)) / math.log(att.shape[-1])  # [L]
    print(f"  attention entropy / log T per layer: {' '.join(f'{e:.2f}' for e in ent.tolist())}")
    rep.check(float(ent.max()) < PEAKED, f"{label}: attention too close to uniform for a strong test")


def check_config(rep, label, cfg, want):
    got = {k: cfg[k] for k in want}
    rep.check(got == want, f"{label}: engine inferred {got}, expected {want}")


# --- (a) random models ---------------------------------------------------------

# name, patch P, input S, width D, heads H and how the engine learns them, depth L,
# MLP width F, classes C (0: backbone without head.*), storage dtype
MODELS = [
    dict(name="p16_s64_d128", P=16, S=64, D=128, H=2, heads="default", L=2, F=256, C=10, dtype="F32"),
    dict(name="p8_s96_cfg", P=8, S=96, D=96, H=3, heads="config", L=3, F=192, C=7, dtype="F32"),
    dict(name="p8_s40_flag", P=8, S=40, D=96, H=3, heads="flag", L=1, F=384, C=5, dtype="F32"),
    dict(name="p16_s48_backbone", P=16, S=48, D=64, H=1, heads="default", L=2, F=128, C=0, dtype="F32"),
    dict(name="p16_s80_f16", P=16, S=80, D=48, H=4, heads="flag", L=4, F=96, C=12, dtype="F16"),
    dict(name="p8_s56_bf16", P=8, S=56, D=64, H=2, heads="config-path", L=2, F=256, C=3, dtype="BF16"),
]


def block_weights(rn, b, D, F):
    """One transformer block's random weights in timm's names (prefix b, width D, MLP F),
    drawn with rn(*shape, std): queries and keys scaled up (std 1.7/sqrt(D)) so the
    attention is peaked, not uniform; LayerNorm gains around 1."""
    qk = rn(2 * D, D, std=1.7 / math.sqrt(D))
    return {
        b + "norm1.weight": 1 + rn(D, std=0.2), b + "norm1.bias": rn(D, std=0.1),
        b + "attn.qkv.weight": torch.cat([qk, rn(D, D, std=1 / math.sqrt(D))]),
        b + "attn.qkv.bias": rn(3 * D, std=0.1),
        b + "attn.proj.weight": rn(D, D, std=1 / math.sqrt(D)), b + "attn.proj.bias": rn(D, std=0.1),
        b + "norm2.weight": 1 + rn(D, std=0.2), b + "norm2.bias": rn(D, std=0.1),
        b + "mlp.fc1.weight": rn(F, D, std=1 / math.sqrt(D)), b + "mlp.fc1.bias": rn(F, std=0.1),
        b + "mlp.fc2.weight": rn(D, F, std=1 / math.sqrt(F)), b + "mlp.fc2.bias": rn(D, std=0.1),
    }


def random_weights(m, g):
    """timm-named float32 tensors. Query and key rows get std 1.7/sqrt(D), so with
    LayerNorm'd (unit-variance) tokens the scores q.k/sqrt(Dh) have std ~3 and
    softmax rows are peaked, not uniform; the rest is scaled to keep
    activations O(1) through the residual stream."""
    P, D, F, C, T = m["P"], m["D"], m["F"], m["C"], (m["S"] // m["P"]) ** 2 + 1

    def rn(*shape, std):
        return torch.randn(*shape, generator=g) * std

    w = {
        "cls_token": rn(1, 1, D, std=0.5),
        "pos_embed": rn(1, T, D, std=0.5),
        "patch_embed.proj.weight": rn(D, 3, P, P, std=1 / math.sqrt(3 * P * P)),
        "patch_embed.proj.bias": rn(D, std=0.1),
    }
    for l in range(m["L"]):
        w |= block_weights(rn, f"blocks.{l}.", D, F)
    w |= {"norm.weight": 1 + rn(D, std=0.2), "norm.bias": rn(D, std=0.1)}
    if C:
        w |= {"head.weight": rn(C, D, std=2 / math.sqrt(D)), "head.bias": rn(C, std=0.1)}
    return w


def test_random(args, rep):
    work = Path(args.work)
    for i, m in enumerate(MODELS):
        label = m["name"]
        print(f"\n[{label}] patch {m['P']}, {m['S']} px ({m['S'] // m['P']}x{m['S'] // m['P']}), "
              f"D={m['D']}, H={m['H']} ({m['heads']}), L={m['L']}, F={m['F']}, C={m['C']}, {m['dtype']}")
        d = work / label
        d.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(1000 + i)
        write_safetensors(d / "model.safetensors", random_weights(m, g), m["dtype"])
        x = torch.randn(3, m["S"], m["S"], generator=g)  # float32, roughly normalised pixels
        x.numpy().astype(np.float32).tofile(d / "input.f32")

        cmd = ["--model", d / "model.safetensors", "--input", d / "input.f32", "--out", d / "out"]
        (d / "config.json").unlink(missing_ok=True)
        if m["heads"] == "config":  # found by the engine beside the weights
            (d / "config.json").write_text(json.dumps({"num_heads": m["H"]}))
        elif m["heads"] == "config-path":  # given with --config
            (d / "heads.json").write_text(json.dumps({"num_heads": m["H"]}))
            cmd += ["--config", d / "heads.json"]
        elif m["heads"] == "flag":
            cmd += ["--heads", m["H"]]
        engine, cfg = run_dump(args.dump, cmd)

        g_ = m["S"] // m["P"]
        check_config(rep, label, cfg, dict(image_h=m["S"], image_w=m["S"], patch_size=m["P"], grid_h=g_, grid_w=g_,
                                           dim=m["D"], n_heads=m["H"], n_layers=m["L"], mlp_dim=m["F"],
                                           n_classes=m["C"], n_tokens=g_ * g_ + 1))
        rep.check(np.array_equal(engine["input"], x.numpy()), f"{label}: input.npy is not the raw input")
        # the reference reads the file the engine read, upcasting F16/BF16 itself
        w = reference.load_safetensors(d / "model.safetensors")
        ref64 = reference.vit_forward(w, x, m["H"], torch.float64, **args.perturb)
        ref32 = reference.vit_forward(w, x, m["H"], torch.float32, **args.perturb)
        check_peaked(rep, label, ref64[1])
        compare(rep, label, engine, ref64, ref32, ATT_TOL["random"])

    # Preprocessing of unusual shapes against torchvision, bit for bit: strips whose
    # resize is hundreds of times the crop (the engine computes only the crop), and
    # sizes where Pillow skips the horizontal or the vertical pass (a side already at
    # floor(S / crop_pct): 73 px for S 64, 45 px for S 40).
    rng = np.random.default_rng(7)
    for name, S, shapes in (("p16_s64_d128", 64, [(2, 3000), (3000, 3), (73, 500), (500, 73),
                                                   (73, 73), (1, 1), (64, 64)]),
                            ("p8_s40_flag", 40, [(45, 46), (46, 45), (7, 9000)])):
        d = work / name
        _, crop = reference.eval_transform(S, 0.875)
        for w_, h_ in shapes:
            png = d / f"shape_{w_}x{h_}.png"
            Image.fromarray(rng.integers(0, 256, (h_, w_, 3), dtype=np.uint8)).save(png)
            cmd = ["--model", d / "model.safetensors", "--image", png, "--out", d / "shape_out"]
            if name == "p8_s40_flag":
                cmd += ["--heads", 3]
            engine, _ = run_dump(args.dump, cmd)
            diff = np.abs(engine["rgb"].astype(int) - np.asarray(crop(Image.open(png))).astype(int))
            print(f"  preprocessing {w_}x{h_} px at S {S}: 8-bit crop max|engine - PIL| = {diff.max()}")
            rep.check(diff.max() == 0, f"{name}: preprocessing of a {w_}x{h_} image differs from torchvision")


# --- (b) DeiT-Tiny on photos ---------------------------------------------------


def test_deit(args, rep):
    shared = Path(args.shared)
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    photos = sorted(p for p in (shared / "images").glob("*")
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if not model.exists() or not photos:
        print(f"skip: no DeiT-Tiny weights or photos under {shared}")
        return 77
    synsets = (model.parent / "imagenet_synset_words.txt").read_text().splitlines()
    names = [ln.split(" ", 1)[1].strip() for ln in synsets]  # drop the wnid
    w = reference.load_safetensors(model)
    tv_vit = reference.torchvision_vit(w, 3)
    transform, crop = reference.eval_transform(224, 0.875)
    work = Path(args.work)

    for photo in photos:
        label = photo.name
        print(f"\n[{label}]")
        engine, cfg = run_dump(args.dump, ["--model", model, "--image", photo, "--out", work / photo.stem])
        check_config(rep, label, cfg, dict(image_h=224, image_w=224, patch_size=16, grid_h=14, grid_w=14, dim=192,
                                           n_heads=3, n_layers=12, mlp_dim=768, n_classes=1000))

        # Preprocessing: torchvision on the PIL-decoded photo. The engine claims
        # Pillow's bicubic bit for bit, and ToTensor/Normalize are single float32
        # operations in both, so the 8-bit crop and the input must be identical.
        pil = Image.open(photo).convert("RGB")
        tv_rgb, tv_in = np.asarray(crop(pil)), transform(pil)
        d_rgb = np.abs(engine["rgb"].astype(int) - tv_rgb.astype(int))
        d_in = np.abs(engine["input"] - tv_in.numpy()).max()
        print(f"  preprocessing: 8-bit crop max|engine - PIL| = {d_rgb.max()} "
              f"({(d_rgb > 0).mean():.2%} of values differ), input max diff {d_in:.2e}")
        rep.check(d_rgb.max() == 0 and d_in == 0, f"{label}: preprocessing differs from torchvision")

        # Forward pass on the engine's own input, independent of preprocessing.
        x = torch.from_numpy(engine["input"])
        ref64 = reference.vit_forward(w, x, 3, torch.float64, **args.perturb)
        ref32 = reference.vit_forward(w, x, 3, torch.float32, **args.perturb)
        compare(rep, label, engine, ref64, ref32, ATT_TOL["deit"])

        # Top-5: the engine end to end vs the reference on torchvision's input.
        lg_ref = reference.vit_forward(w, tv_in, 3, torch.float64)[0]
        top_ref = reference.top_k(lg_ref)
        # The reference itself against torchvision's VisionTransformer, same
        # architecture written by others: both float64, so only rounding differs.
        with torch.no_grad():
            d_tv = (tv_vit(tv_in[None].double())[0] - lg_ref).abs().max().item()
        print(f"  reference vs torchvision VisionTransformer: logits max diff {d_tv:.1e}")
        rep.check(d_tv <= 1e-9, f"{label}: reference.py disagrees with torchvision's ViT by {d_tv:.1e}")
        # End to end on Pillow's input (a JPEG too, now that decoding is Pillow's):
        # the logits and probabilities PyTorch + Pillow give, within the tolerances.
        lg_tol = LOGIT_TOL * max(1.0, lg_ref.abs().max().item())
        d_lg = np.abs(engine["logits"] - lg_ref.numpy()).max()
        d_pr = np.abs(engine["probs"] - torch.softmax(lg_ref, 0).numpy()).max()
        print(f"  against PyTorch on Pillow's input: logits max diff {d_lg:.1e} (tol {lg_tol:.1e}), "
              f"probabilities {d_pr:.1e}")
        rep.check(d_lg <= lg_tol and d_pr <= ATT_TOL["deit"],
                  f"{label}: logits/probabilities differ from PyTorch + Pillow's")
        top = [f"{i} {names[i].split(',')[0]} {engine['probs'][i]:.3f}" for i in cfg["top5"]]
        print("  top-5: " + "; ".join(top))
        rep.check(cfg["top5"] == top_ref, f"{label}: engine top-5 {cfg['top5']}, reference {top_ref}")
        if photo.stem == "chelsea":
            rep.check(cfg["top5"][0] in CAT_IDS, f"{label}: top-1 {names[cfg['top5'][0]]} is not a cat")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["random", "deit"])
    ap.add_argument("--dump", required=True, help="the vit_dump executable")
    ap.add_argument("--work", required=True, help="scratch directory")
    ap.add_argument("--shared", default="", help="shared/ with models/deit-tiny and images (part deit)")
    ap.add_argument("--perturb", choices=["eps", "tanh"], help="make the reference wrong: must fail")
    args = ap.parse_args()
    control = args.perturb
    args.perturb = {None: {}, "eps": {"ln_eps": 1e-5}, "tanh": {"gelu": "tanh"}}[args.perturb]
    rep, t0 = Report(), time.time()
    skip = (test_random if args.part == "random" else test_deit)(args, rep)
    print(f"({time.time() - t0:.1f} s)")
    if skip is not None:
        return skip
    if control:
        return rep.control_exit_code(f"a wrong reference ({control}: {args.perturb})")
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
