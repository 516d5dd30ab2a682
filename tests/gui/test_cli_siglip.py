#!/usr/bin/python3
"""SigLIP on the command line (issue 35): a small random SiglipModel the test writes (the image
tower of tests/parity/test_siglip.py, the text tower of tests/parity/test_siglip_text.py, a
SentencePiece model trained as tests/text/test_siglip_tokenizer.py trains one, saved as
spiece.model beside it), through the app:

  - --classes with --top: each PROB is sigmoid(exp(logit_scale) cos(image, text) + logit_bias)
    of its class alone, against a float64 reference (PIL's bicubic squash resize, the towers
    from modeling_siglip.py, Hugging Face's SiglipTokenizer steps with padding to 64), and
    stderr says that they do not sum to 1;
  - --text past 64 tokens: cut with a notice naming SigLIP's 64 (not CLIP's 77);
  - --export: the probe's maps (mean_probe.npy, H01_probe.npy) are written;
  - an image-only SigLIP checkpoint: --classes refused with a message naming the missing text
    tower; --export of the image views still runs;
  - a SigLIP 2 stand-in (the same SiglipModel names, its text tower read with Gemma's
    tokenizer: a Gemma-like BPE model trained as tests/text/test_gemma_tokenizer.py trains one,
    saved as tokenizer.model beside it, V its size): --classes "A Cat,a dog" --top 2 gives
    the sigmoids of a float64 reference that tokenizes as big_vision's SigLIP 2 demo does
    (ASCII lower-case, "<eos>", "<pad>" 0 to 64); without tokenizer.model --classes is refused
    naming the file it needs and --export of the image views still runs; a tokenizer.model of
    neither kind is refused naming it.

  test_cli_siglip.py --app build/vitlens --image assets/default/demo/X.png --out DIR
Exits 0, 1 on a failed check, 77 (skip) without python3-sentencepiece.
"""
import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "parity"))
sys.path.insert(0, str(HERE.parent / "text"))
import test_siglip as ts  # noqa: E402
from siglip_model import LOGIT_BIAS, LOGIT_SCALE, VISION, write  # noqa: E402

try:
    import test_siglip_tokenizer as tt  # exits 77 without python3-sentencepiece
except SystemExit:
    raise

FAILS = []
CLASSES = ["cat", "dog", "rocket", "coffee cup"]
TEMPLATE = "a photo of a {}."  # the app's default (clip.h CLIP_TEMPLATE)

torch.set_num_threads(1)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def run(app, *args):
    r = subprocess.run([app, *map(str, args)], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    return r.returncode, r.stdout, r.stderr.strip()


def reference_probs(w, tower, spiece, image, classes=CLASSES):
    """sigmoid(exp(s) cos + b) per class, float64, with the app's default template; the
    tokenizer SigLIP's (spiece.model) or SigLIP 2's (tokenizer.model: big_vision's steps)."""
    from PIL import Image
    S = VISION["S"]
    x = np.asarray(Image.open(image).convert("RGB").resize((S, S), Image.BICUBIC), np.float64) / 255
    x = torch.from_numpy(((x - 0.5) / 0.5).transpose(2, 0, 1).copy())
    ref = ts.SiglipRef(w, VISION)
    ref.forward(x)
    e = ref.extra["embed"]
    if spiece.name == "tokenizer.model":
        import test_gemma_tokenizer as gt
        tok = gt.Reference(spiece)
    else:
        tok = tt.Reference(spiece)
    ids = torch.tensor([tok(TEMPLATE.format(c))[0] for c in classes])
    with torch.no_grad():
        t = tower.double()(ids)
    cos = (t / t.norm(dim=-1, keepdim=True)) @ (e / e.norm())
    return torch.sigmoid(cos * math.exp(LOGIT_SCALE) + LOGIT_BIAS).numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    d = out / "siglip"
    d.mkdir(parents=True, exist_ok=True)
    path, w, tower = write(d)

    rc, so, se = run(a.app, "--model", path, "--classes", ", ".join(CLASSES), "--top", len(CLASSES),
                     a.image)
    check(rc == 0, f"--classes --top: exit {rc} ({se})")
    rows = {int(ln.split(" ", 3)[2]): float(ln.split(" ", 3)[1]) for ln in so.splitlines()}
    want = reference_probs(w, tower, d / "spiece.model", a.image)
    got = np.array([rows.get(i, np.nan) for i in range(len(CLASSES))])
    err = np.abs(got - want).max()
    print(f"  --top: {got.tolist()} reference {np.round(want, 4).tolist()} (max err {err:.1e}); "
          f"sum {got.sum():.4f}")
    check(err <= 2e-4, f"--top's probabilities are SigLIP's sigmoids (max err {err:.1e})")
    check(abs(want.sum() - 1) < 0.05 or abs(got.sum() - 1) > 0.05,
          "the probabilities are not a softmax (they need not sum to 1)")
    check("do not sum to 1" in se, f"stderr says they do not sum to 1: '{se}'")

    rc, so, se = run(a.app, "--model", path, "--text", " ".join(["elephant"] * 80), "--top", 1,
                     a.image)
    check(rc == 0 and "cut to SigLIP's 64 tokens" in se,
          f"--text of 80 words: cut to SigLIP's 64 tokens, said (exit {rc}: '{se}')")

    rc, so, se = run(a.app, "--model", path, "--text", "a cat", "--export", out / "export", a.image)
    check(rc == 0, f"--text --export: exit {rc} ({se[-300:]})")
    for f in ("mean_probe.npy", "H01_probe.npy", "a-cat_chefer.npy"):
        check((out / "export" / f).exists(), f"--export wrote {f}")
    if (out / "export" / "mean_probe.npy").exists():
        m = np.load(out / "export" / "mean_probe.npy")
        check(m.shape == (4, 4) and abs(m.sum() - 1) < 1e-4,
              f"mean_probe.npy [gh, gw] sums to 1 (shape {m.shape}, sum {m.sum():.6f})")

    d2 = out / "siglip_image_only"
    d2.mkdir(parents=True, exist_ok=True)
    path2, _, _ = write(d2, text=False)
    rc, so, se = run(a.app, "--model", path2, "--classes", "cat, dog", "--top", 2, a.image)
    check(rc != 0 and "text tower" in se and "Traceback" not in se,
          f"an image-only SigLIP with --classes: refused naming the text tower (exit {rc}: '{se}')")
    rc, so, se = run(a.app, "--model", path2, "--export", out / "export2", a.image)
    check(rc == 0 and (out / "export2" / "mean_probe.npy").exists(),
          f"an image-only SigLIP: --export of the image views runs (exit {rc})")

    # SigLIP 2: the same SiglipModel names, the text read with Gemma's tokenizer.model
    d3 = out / "siglip2"
    d3.mkdir(parents=True, exist_ok=True)
    path3, w3, tower3 = write(d3, gemma=True)
    classes = ["A Cat", "a dog"]
    rc, so, se = run(a.app, "--model", path3, "--classes", ",".join(classes), "--top", 2, a.image)
    check(rc == 0, f"SigLIP 2 --classes --top: exit {rc} ({se})")
    rows = {int(ln.split(" ", 3)[2]): float(ln.split(" ", 3)[1]) for ln in so.splitlines()
            if ln[:1].isdigit()}
    want = reference_probs(w3, tower3, d3 / "tokenizer.model", a.image, classes)
    got = np.array([rows.get(i, np.nan) for i in range(len(classes))])
    err = np.abs(got - want).max()
    print(f"  SigLIP 2 --top: {got.tolist()} reference {np.round(want, 4).tolist()} "
          f"(max err {err:.1e})")
    check(err <= 2e-4, f"SigLIP 2: --top's probabilities are the sigmoids (max err {err:.1e})")
    check("do not sum to 1" in se, f"SigLIP 2: stderr says they do not sum to 1: '{se}'")
    tokm = (d3 / "tokenizer.model").read_bytes()
    (d3 / "tokenizer.model").unlink()
    rc, so, se = run(a.app, "--model", path3, "--classes", "cat, dog", "--top", 2, a.image)
    check(rc != 0 and "tokenizer.model" in se and str(path3) in se and "Traceback" not in se,
          f"SigLIP 2 without tokenizer.model: --classes refused naming it (exit {rc}: '{se}')")
    rc, so, se = run(a.app, "--model", path3, "--export", out / "export3", a.image)
    check(rc == 0 and (out / "export3" / "mean_probe.npy").exists(),
          f"SigLIP 2 without tokenizer.model: --export of the image views runs (exit {rc})")
    (d3 / "tokenizer.model").write_bytes(tokm[:len(tokm) // 3])  # cut: not a model
    rc, so, se = run(a.app, "--model", path3, "--classes", "cat, dog", "--top", 2, a.image)
    check(rc != 0 and str(d3 / "tokenizer.model") in se,
          f"SigLIP 2, a cut tokenizer.model: refused naming it (exit {rc}: '{se}')")
    (d3 / "tokenizer.model").write_bytes(tokm)

    print(f"\n{len(FAILS)} failure(s)" if FAILS else "\nall checks passed")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
