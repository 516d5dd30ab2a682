"""test_lesson_probe.py - the lesson's probe step (issue 35): a model pooled by attention
(SigLIP's MAP head, VitConfig.head_pool VIT_POOL_MAP) shows the learned probe's attention over
the patches per head, their mean, the weighted sum projected, LayerNorm + MLP + residual and the
image embedding. On the SigLIP stand-in the GUI tests write (tests/gui/siglip_model.py: D 64,
H 4, F 128, 64 px, a 4 x 4 grid, 2 layers) and a photo this test draws:

  1. vit_dump --image --lesson: vit_lesson_probe's arrays equal the forward pass's own
     (VitRun.probe_att, the image embedding) bit for bit, also with two patches dropped
     (their weights 0);
  2. `vitlens --lesson-export`: the step list is the table's for a MAP head
     (lesson_table.steps, read from app/view/lessonfile.c), the probe step's .npy files equal
     vit_dump's VitRun.probe_att and embedding bit for bit and a float64 PyTorch reference of
     the MAP head written here (below) within 1e-5 of their largest value, and its caption's
     numbers (head h's largest weight and its patch, its entropy, the embedding's norm, the
     shape) are the reference's, for every head (a lesson file selecting each);
  3. the built-in model and DeiT-Tiny (SHARED; skipped without) have no MAP head: their
     lessons do not offer the step, and a lesson file asking for it is told so;
  4. docs/lessons.md's table of steps names every row of the app's table.

The reference follows transformers' modeling_siglip.py SiglipMultiheadAttentionPoolingHead:
probe [1, 1, D] -> nn.MultiheadAttention(D, H, batch_first=True)(probe, y, y) (in_proj_weight
packed q; k; v, scores scaled by Dh ** -0.5, softmax per head, out_proj) -> residual = that;
residual + SiglipMLP(LayerNorm(residual)) -> [:, 0], y = post_layernorm(last hidden state); the
tower below it is test_siglip.py's SiglipRef (its own parity test holds it to the engine).

--control presoftmax: the reference's map taken before the softmax (the scaled scores);
--control swap: each head's map labelled as the next head's;
--control nomlp: the embedding without the head's MLP.
With --control the run exits 0 only when the comparisons failed (Report.control_exit_code).

    /usr/bin/python3 test_lesson_probe.py --vitlens vitlens --dump vit_dump --work DIR
                                          [--shared SHARED] [--control C]
"""
import argparse
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import lesson_table  # noqa: E402
import test_siglip as ts  # noqa: E402
from reference import load_safetensors  # noqa: E402
from test_parity import Report, run_dump  # noqa: E402

C = dict(D=64, H=4, F=128, P=16, S=64, L=2, C=0)  # siglip_model.py's stand-in
TOL = 1e-5  # max |export - f64| / max |f64|
CONTROLS = {"presoftmax": "the probe's map taken before the softmax",
            "swap": "each head's map labelled as the next head's",
            "nomlp": "the embedding without the MAP head's MLP"}
CAPTION = re.compile(r"Probe head (\d+): most on patch \((\d+), (\d+)\), ([\d.]+); entropy ([\d.]+) "
                     r"of ([\d.]+) nats; \|embedding\| ([\d.]+) \[(\d+), (\d+), (\d+)\]$")

torch.set_num_threads(1)


def map_head(w, y, H, eps, wrong=None):
    """The MAP head in float64 on y [N, D] (post_layernorm of the last hidden state):
    {att [H, N], query, weighted, attended, mlp, embedding [D]}."""
    h = "vision_model.head."
    N, D = y.shape
    Dh = D // H
    Wq, Wk, Wv = w[h + "attention.in_proj_weight"].split(D)  # nn.MultiheadAttention: q; k; v
    bq, bk, bv = w[h + "attention.in_proj_bias"].split(D)
    query = w[h + "probe"].reshape(D) @ Wq.T + bq
    k = (y @ Wk.T + bk).reshape(N, H, Dh)
    v = (y @ Wv.T + bv).reshape(N, H, Dh)
    scores = torch.einsum("hd,nhd->hn", query.reshape(H, Dh), k) / math.sqrt(Dh)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    att = e / e.sum(dim=1, keepdim=True)
    weighted = torch.einsum("hn,nhd->hd", att, v).reshape(D)  # the heads concatenated
    attended = weighted @ w[h + "attention.out_proj.weight"].T + w[h + "attention.out_proj.bias"]
    u = F.layer_norm(attended, (D,), w[h + "layernorm.weight"], w[h + "layernorm.bias"], eps)
    hid = F.gelu(u @ w[h + "mlp.fc1.weight"].T + w[h + "mlp.fc1.bias"], approximate="tanh")
    mlp = hid @ w[h + "mlp.fc2.weight"].T + w[h + "mlp.fc2.bias"]
    embedding = attended if wrong == "nomlp" else attended + mlp
    shown = scores if wrong == "presoftmax" else att.roll(1, dims=0) if wrong == "swap" else att
    return dict(att=shown, query=query, weighted=weighted, attended=attended, mlp=mlp,
                embedding=embedding)


def reference(w, x):
    """The stand-in on input x [3, S, S] (the engine's own, vit_dump's input.npy): the tower
    (test_siglip.SiglipRef) to the last hidden state, then post_layernorm."""
    last = {}

    def tap(name, l, t):
        if name == "tokens" and l == C["L"] - 1:
            last["h"] = t
        return t

    ts.SiglipRef(w, C).forward(torch.from_numpy(x), tap=tap)
    g = "vision_model.post_layernorm."
    return F.layer_norm(last["h"][0], (C["D"],), w[g + "weight"], w[g + "bias"], ts.EPS)


def rel(a, b):
    b = np.asarray(b, np.float64)
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def run(cmd):
    p = subprocess.run([str(a) for a in cmd], capture_output=True, text=True)
    print(f"  $ {' '.join(map(str, cmd))}\n  {p.stdout.strip()} {p.stderr.strip()}"[:600])
    return p


def export(vitlens, out, args):
    shutil.rmtree(out, ignore_errors=True)
    p = run([vitlens, "--lesson-export", out] + args)
    if p.returncode:
        return None, p
    return json.loads((out / "steps.json").read_text())["steps"], p


def check_caption(rep, label, caption, ref, head, guard):
    """The caption's numbers against the reference's head `head` (1-based)."""
    m = CAPTION.match(caption)
    if not rep.check(m is not None, f"{label}: caption '{caption}' is not the probe step's", guard):
        return
    H, N = C["H"], (C["S"] // C["P"]) ** 2
    gw = C["S"] // C["P"]
    a = ref["att"][head - 1].numpy()
    h, r, c = int(m[1]), int(m[2]), int(m[3])
    top, ent, lnN, norm = float(m[4]), float(m[5]), float(m[6]), float(m[7])
    p = (r - 1) * gw + c - 1
    safe = np.where(a > 0, a, 1.0)
    want_ent = float(-(a * np.log(safe)).sum()) if (a >= 0).all() else float("nan")
    want_norm = float(ref["embedding"].norm())
    print(f"  {label}: '{caption}'; reference: head {head} max {a.max():.4f} at patch "
          f"({a.argmax() // gw + 1}, {a.argmax() % gw + 1}), entropy {want_ent:.4f}, |e| {want_norm:.4f}")
    rep.check(h == head, f"{label}: caption names head {h}, the selection is {head}", guard)
    rep.check(0 <= p < N and a[p] >= a.max() - 1e-6,
              f"{label}: patch ({r}, {c}) is not head {head}'s largest weight", guard)
    rep.check(abs(top - a.max()) <= 5e-4 + 1e-5, f"{label}: largest weight {top} vs {a.max():.5f}", guard)
    rep.check(abs(ent - want_ent) <= 5e-3 + 1e-4, f"{label}: entropy {ent} vs {want_ent:.5f}", guard)
    rep.check(abs(lnN - math.log(N)) <= 5e-3, f"{label}: uniform entropy {lnN} vs ln {N}", guard)
    rep.check(abs(norm - want_norm) <= 5e-3 + 1e-5 * want_norm,
              f"{label}: |embedding| {norm} vs {want_norm:.5f}", guard)
    rep.check([int(m[8]), int(m[9]), int(m[10])] == [H, gw, gw], f"{label}: shape in the caption", guard)


def test_siglip(args, rep):
    work = Path(args.work)
    d = work / "siglip"
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([sys.executable, ROOT / "tests/gui/siglip_model.py", d], check=True,
                   capture_output=True)
    model = d / "siglip.safetensors"
    w = load_safetensors(model)
    from PIL import Image
    rgb = (np.random.default_rng(35).random((72, 96, 3)) * 255).astype(np.uint8)
    rgb[10:50, 20:60] = [240, 200, 30]
    photo = work / "photo.png"
    Image.fromarray(rgb).save(photo)
    H, N, D = C["H"], (C["S"] // C["P"]) ** 2, C["D"]
    gw = C["S"] // C["P"]

    # 1. the engine: vit_lesson_probe = the forward pass's own numbers, bit for bit
    e, _ = run_dump(args.dump, ["--model", model, "--image", photo, "--lesson", "1,1,5,5",
                                "--out", work / "dump"])
    for k, want in (("att", e["probe_att"]), ("embedding", e.get("embed"))):
        got = e.get(f"lesson_probe_{k}")
        rep.check(got is not None and want is not None and np.array_equal(got, want),
                  f"vit_lesson_probe's {k} is not the forward pass's bit for bit")
    ed, _ = run_dump(args.dump, ["--model", model, "--image", photo, "--lesson", "1,1,5,5",
                                 "--drop", "0,6", "--out", work / "dump_drop"])
    rep.check(np.array_equal(ed["lesson_probe_att"], ed["probe_att"])
              and not ed["probe_att"][:, [0, 6]].any()
              and np.allclose(ed["probe_att"].sum(1), 1, atol=1e-5)
              and np.array_equal(ed["lesson_probe_embedding"], ed["embed"])
              and not np.array_equal(ed["probe_att"], e["probe_att"]),
              "--drop 0,6: the lesson's probe is the run's (patches 0 and 6 weigh 0)")

    # the float64 reference on the engine's input
    y = reference(w, e["input"])
    ref = map_head(w, y, H, ts.EPS, args.control)
    guard = "the probe step of the SigLIP stand-in"
    for k in ("query", "weighted", "attended", "mlp", "embedding"):
        err = rel(e[f"lesson_probe_{k}"], ref[k])
        print(f"  vit_dump lesson_probe_{k}: max|engine - f64| / max = {err:.1e}")

    # 2. the export, every step the table gives a MAP head
    out = work / "export"
    steps, p = export(args.vitlens, out, ["--model", model, "--head", "2", photo])
    if not rep.check(steps is not None, f"--lesson-export: exit {p.returncode}: {p.stderr}", guard):
        return
    names = [s["name"] for s in steps]
    want = lesson_table.steps({"map"})
    rep.check(names == want, f"steps {names}, the table's for a MAP head {want}")
    if not rep.check("probe" in names, "no probe step", guard):
        return
    k = names.index("probe")
    st, stem = steps[k], f"{k + 1:02d}_probe"
    files = {a["file"]: a["dims"] for a in st["arrays"]}
    parts = ["", "_mean", "_probe", "_query", "_weighted", "_attended", "_mlp", "_embedding"]
    rep.check(set(files) == {f"{stem}{s}.npy" for s in parts}, f"probe arrays {sorted(files)}")
    x = {s: np.load(out / f"{stem}{s}.npy") for s in parts if (out / f"{stem}{s}.npy").exists()}
    if not rep.check(len(x) == len(parts), "probe arrays missing", guard):
        return
    rep.check(x[""].shape == (H, gw, gw) and x[""].dtype == np.float32, f"probe map {x[''].shape}")
    rep.check(np.array_equal(x[""].reshape(H, N), e["probe_att"]),
              "the exported map is not VitRun.probe_att (vit_dump's) bit for bit")
    rep.check(np.array_equal(x["_embedding"], e["embed"]),
              "the exported embedding is not the run's image embedding bit for bit")
    rep.check(np.array_equal(x["_probe"], w["vision_model.head.probe"].reshape(D).float().numpy()),
              "the exported probe is not the checkpoint's")
    rep.check(np.abs(x["_mean"] - x[""].mean(0)).max() <= 1e-7, "the mean is not the heads' mean")
    errs = {"att": rel(x[""].reshape(H, N), ref["att"]),
            "mean": rel(x["_mean"].reshape(N), ref["att"].mean(0)),
            **{k: rel(x[f"_{k}"], ref[k]) for k in ("query", "weighted", "attended", "mlp",
                                                    "embedding")}}
    print("  export vs float64 reference, max|.| rel: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    for k, v in errs.items():
        rep.check(v <= TOL, f"--lesson-export's probe {k} differs from the reference by {v:.1e}", guard)
    check_caption(rep, "--head 2", st["caption"], ref, 2, guard)
    rep.check(st["caption"] in (out / "lesson.md").read_text(), "the caption is not in lesson.md")
    # every head's caption, and the picture boxes the selected head
    script = work / "heads.lesson"
    script.write_text("".join(f"probe head={h}\n" for h in range(1, H + 1)))
    out2 = work / "export_heads"
    steps2, p = export(args.vitlens, out2, ["--model", model, "--lesson", script, photo])
    if not rep.check(steps2 is not None and len(steps2) == H,
                     f"a lesson of {H} probe lines: {p.returncode} {p.stderr}", guard):
        return
    pics = []
    for h, s in enumerate(steps2, 1):
        check_caption(rep, f"probe head={h}", s["caption"], ref, h, guard)
        rep.check(np.array_equal(np.load(out2 / f"{h:02d}_probe.npy"), x[""]),
                  f"head {h}: the map changed with the selection")
        pics.append(np.asarray(Image.open(out2 / s["picture"]).convert("RGB"), np.int16))
    rep.check(pics[0].shape == (720, 1280, 3), f"picture {pics[0].shape}, expected 1280 x 720")
    rep.check(all(np.abs(pics[0] - q).max() > 0 for q in pics[1:]),
              "the pictures of different heads are the same (the selected head not shown)")


def test_no_map(args, rep):
    """The built-in model and DeiT-Tiny: no MAP head, no probe step."""
    work = Path(args.work)
    demo = sorted((ROOT / "assets/default/demo").glob("*.png"))[0]
    want = lesson_table.steps({"head"})
    cases = [("built-in model", [])]
    deit = Path(args.shared or "/nonexistent") / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    if deit.exists():
        cases.append(("DeiT-Tiny", ["--model", deit]))
    else:
        print("DeiT-Tiny: skipped (no SHARED)")
    for label, model in cases:
        steps, p = export(args.vitlens, work / f"nomap_{len(model)}", model + [demo])
        if not rep.check(steps is not None, f"{label}: exit {p.returncode}: {p.stderr}"):
            continue
        names = [s["name"] for s in steps]
        rep.check(names == want and "probe" not in names, f"{label}: steps {names}, expected {want}")
        script = work / "probe.lesson"
        script.write_text("residual2\nprobe\nhead\n")
        steps, p = export(args.vitlens, work / f"nomap_script_{len(model)}",
                          model + ["--lesson", script, demo])
        rep.check(steps is not None and [s["name"] for s in steps] == ["residual2", "head"]
                  and "probe.lesson:2: the model has no attention-pooling (MAP) head: the probe "
                      "step left out" in p.stderr,
                  f"{label}: a lesson asking for the probe step: {p.stderr}")


def test_docs(rep):
    """docs/lessons.md's table of steps names every row of the app's table."""
    doc = (ROOT / "docs/lessons.md").read_text()
    missing = [n for n, *_ in lesson_table.rows() if f"| `{n}` |" not in doc]
    rep.check(not missing, f"docs/lessons.md's table of steps lacks {missing}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vitlens", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--shared")
    ap.add_argument("--control", choices=list(CONTROLS))
    args = ap.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    rep = Report()
    test_siglip(args, rep)
    if args.control:
        return rep.control_exit_code(CONTROLS[args.control])
    test_no_map(args, rep)
    test_docs(rep)
    return rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
