#!/usr/bin/python3
"""Maps of any score on the command line (issue 36): --contrast A,B and --similar IMAGE2
with --export write the class-specific maps of logit A - logit B and of cos(e, e') equal
to vit_dump's --contrast / --cosine on the same photo (vit_dump's are checked against
torch.autograd in backward_scores), the cosine printed is the embeddings', IMAGE2's maps
go into DIR/STEM2/ with the roles swapped, the names are resolved as --class resolves
them, and bad values are errors naming the option. On the built-in model (a head) and a
random DINOv2-shaped backbone with registers (no head: only --similar can explain it).

  /usr/bin/python3 test_cli_scores.py --app build/vitlens --dump build/tests/parity/vit_dump \
      --model assets/default/model.safetensors --images A.png B.png --out DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parity"))
from test_families import spec, write_family  # noqa: E402

failures = 0
# the app's --export tag and vit_dump's expl_NAME of each class-specific method
METHODS = {"chefer": "chefer", "grad-rollout": "grad_rollout", "gradcam": "gradcam",
           "legrad": "legrad", "attnlrp": "attnlrp", "grad-input": "grad_input"}
XDG = tempfile.mkdtemp(prefix="vitlens-scores-xdg-")


def check(cond, what):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += not cond


def vitlens(app, *args):
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(XDG, "c"), XDG_DATA_HOME=os.path.join(XDG, "d"))
    env.pop("DISPLAY", None)
    env.pop("VITLENS_MODELS_DIR", None)
    return subprocess.run([app, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def dump(a, model, image, out, *flags):
    """vit_dump's arrays. --tokens: the last block over every token, as the app runs it
    (VitRunOptions.all_tokens), so that its numbers are the app's bit for bit; without, the
    last block's products over the CLS row alone round otherwise (1e-7 to 1e-6 of the maps'
    scale, more with some kernel families: OpenBLAS's Cooperlake kernels in the Debug build)."""
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([a.dump, "--model", model, "--image", image, "--out", out, "--tokens",
                        *map(str, flags)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


def export(a, model, image, out, *flags):
    shutil.rmtree(out, ignore_errors=True)
    return vitlens(a.app, "--model", model, *flags, "--export", out, image)


def same_maps(label, folder, stem, eng):
    """Every method's exported map STEM_TAG.npy against vit_dump's expl_NAME: the largest
    difference relative to the map's scale (None when a file is missing)."""
    worst = 0.0
    for tag, name in METHODS.items():
        p = os.path.join(folder, f"{stem}_{tag}.npy")
        if not os.path.exists(p):
            check(False, f"{label}: {stem}_{tag}.npy written")
            return None
        got, want = np.load(p), eng[f"expl_{name}"]
        if got.shape != want.shape:
            check(False, f"{label}: {stem}_{tag}.npy shape {got.shape} = vit_dump's {want.shape}")
            return None
        scale = max(float(np.abs(want).max()), 1e-30)
        worst = max(worst, float(np.abs(got - want).max()) / scale)
    return worst


def embedding(a, model, image, out):
    """vit_embedding of the photo (vit_dump's embedding.npy: --cosine with a zero reference
    of D floats, as these models pool to D, so that a backbone without a head gives it too)."""
    cfg = json.load(open(dump_cfg(a, model, image, out / "d_cfg")))
    zero = out / "zero.f32"
    np.zeros(cfg["dim"], np.float32).tofile(zero)
    return dump(a, model, image, out / "d_emb", "--cosine", zero)["embedding"]


def dump_cfg(a, model, image, out):
    dump(a, model, image, out)
    return os.path.join(out, "config.json")


def main():
    ap = argparse.ArgumentParser()
    for k in ("app", "dump", "model", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--images", nargs=2, required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    img1, img2 = a.images
    stem2 = Path(img2).stem

    # --- --contrast on the built-in model: why the top-1 rather than the second --------
    eng = dump(a, a.model, img1, out / "d_plain", "--class", -1)
    order = np.argsort(-eng["probs"], kind="stable")
    c1, c2 = int(order[0]), int(order[1])
    r = export(a, a.model, img1, out / "contrast", "--contrast", f"{c1},{c2}")
    check(r.returncode == 0, f"--contrast {c1},{c2} --export exits 0 ({r.stderr.strip()[:200]})")
    eng = dump(a, a.model, img1, out / "d_contrast", "--contrast", f"{c1},{c2}")
    d = same_maps("--contrast", out / "contrast", f"class{c1}-vs-class{c2}", eng)
    check(d == 0.0,
          f"--contrast {c1},{c2}: the six maps = vit_dump --contrast's bit for bit (max rel diff {d})")
    sheet = out / "contrast" / f"contact_sheet_class{c1}-vs-class{c2}.png"
    check(sheet.exists(), f"{sheet.name} written")
    check(not list((out / "contrast").glob("class*-vs-*logit-lens*")) and
          re.search(r"skipped logit-lens \(it reads a class", r.stderr) is not None,
          "no logit lens for a contrast (it reads a class, not a score), and the notice says so")
    check(not (out / "contrast" / "head_importance.csv").exists(),
          "no head importance for a contrast (a class's)")
    # negative control: the contrast's maps are not the single class's
    one = dump(a, a.model, img1, out / "d_one", "--class", c1)
    d1 = max(float(np.abs(one[f"expl_{n}"] - eng[f"expl_{n}"]).max()) /
             max(float(np.abs(eng[f"expl_{n}"]).max()), 1e-30) for n in ("chefer", "grad_input"))
    check(d1 > 1e-3, f"the contrast's maps differ from logit {c1}'s alone (rel {d1:.2e})")
    # names as --class takes them, the same files
    labels = ["circle", "square", "triangle", "star", "cross", "ring"]
    r = export(a, a.model, img1, out / "contrast_names", "--contrast", f"{labels[c1]}, {labels[c2].upper()}")
    first = {f"expl_{n}": np.load(out / "contrast" / f"class{c1}-vs-class{c2}_{t}.npy") for t, n in METHODS.items()}
    d = same_maps("--contrast by name", out / "contrast_names", f"class{c1}-vs-class{c2}", first)
    check(r.returncode == 0 and d is not None and d == 0.0,
          f"--contrast '{labels[c1]}, {labels[c2].upper()}' = --contrast {c1},{c2} bit for bit")

    # --- bad values: errors naming the option --------------------------------------------
    bad = [
        (["--contrast", f"{c1},{c1}"], r"--contrast .*same class"),
        (["--contrast", "2"], r"--contrast.*expected A,B"),
        (["--contrast", "circle,unicorn"], r"--contrast unicorn: no class"),
        (["--contrast", "0,99"], r"--contrast 99: out of range"),
        (["--contrast", "0,1", "--class", "2"], r"--class, --text, --contrast and --similar"),
        (["--contrast", "0,1", "--similar", img2], r"--class, --text, --contrast and --similar"),
    ]
    for flags, want in bad:
        r = export(a, a.model, img1, out / "bad", *flags)
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        check(r.returncode != 0 and re.search(want, msg) is not None and "Traceback" not in r.stderr,
              f"{' '.join(flags)}: refused ({r.returncode}: '{msg}')")
    r = vitlens(a.app, "--model", a.model, "--contrast", "0,1", "--top", 3, img1)
    check(r.returncode == 2 and "--contrast goes with" in r.stderr and "not --top" in r.stderr,
          f"--contrast with --top: refused by name ('{r.stderr.strip()[:120]}')")
    r = vitlens(a.app, "--model", a.model, "--similar", "/nonexistent.png", "--export", out / "bad", img1)
    check(r.returncode == 1 and "--similar" in r.stderr and "/nonexistent.png" in r.stderr,
          f"--similar of a missing photo: names it ('{r.stderr.strip()[:160]}')")

    # --- --similar on a backbone without a head, and on the built-in model --------------
    f = spec("dinov2_reg4_timm_224")
    bk = out / "backbone"
    write_family(f, bk, seed=36)
    for label, model in (("backbone", bk / "model.safetensors"), ("built-in", Path(a.model))):
        ex = out / f"similar_{label}"
        e1, e2 = embedding(a, model, img1, out), embedding(a, model, img2, out)
        r = export(a, model, img1, ex, "--similar", img2)
        check(r.returncode == 0, f"{label}: --similar --export exits 0 ({r.stderr.strip()[:200]})")
        if label == "backbone":
            check("the high-norm tokens (no head: no logit lens) as CSV" in r.stdout and
                  not (ex / "logit_lens.csv").exists(), "backbone: the export says no logit lens, and writes none")
        cos = float(e1 @ e2 / np.linalg.norm(e1) / np.linalg.norm(e2))
        m = re.search(r"cos\(e, e'\) = (-?[0-9.]+)", r.stdout)
        check(m is not None and abs(float(m.group(1)) - cos) <= 2e-6,
              f"{label}: the cosine printed {m.group(1) if m else None} = the embeddings' {cos:.6f}")
        e2.astype(np.float32).tofile(out / "e2.f32")
        e1.astype(np.float32).tofile(out / "e1.f32")
        eng = dump(a, model, img1, out / "d_sim", "--cosine", out / "e2.f32")
        d = same_maps(f"{label} --similar", ex, f"similar-to-{stem2}", eng)
        check(d == 0.0, f"{label}: IMAGE's six maps = vit_dump --cosine with IMAGE2's embedding, "
              f"bit for bit (max rel diff {d})")
        eng2 = dump(a, model, img2, out / "d_sim2", "--cosine", out / "e1.f32")
        d = same_maps(f"{label} --similar IMAGE2", ex / stem2, f"similar-to-{Path(img1).stem}", eng2)
        check(d == 0.0, f"{label}: IMAGE2's maps in DIR/{stem2}/ = vit_dump --cosine with IMAGE's, "
              f"bit for bit (max rel diff {d})")
        # negative control: the un-normalised dot product's gradient differs
        dot = dump(a, model, img1, out / "d_dot", "--cosine-dot", out / "e2.f32")
        dd = max(float(np.abs(dot[f"expl_{n}"] - eng[f"expl_{n}"]).max()) /
                 max(float(np.abs(eng[f"expl_{n}"]).max()), 1e-30) for n in ("grad_input", "legrad"))
        check(dd > 1e-3, f"{label}: the maps of the dot product e . e' differ (rel {dd:.2e})")
    r = export(a, bk / "model.safetensors", img1, out / "bad", "--contrast", "0,1")
    check(r.returncode == 1 and "no classification head" in r.stderr,
          f"backbone: --contrast refused, no head ('{r.stderr.strip()[-120:]}')")

    print("FAILED" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
