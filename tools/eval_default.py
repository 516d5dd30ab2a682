#!/usr/bin/python3
"""Evaluate vitlens's built-in model and write what ships beside its weights.

Reads DIR/model.safetensors and DIR/config.json (written by train_default.py),
runs the model in PyTorch on held-out scenes of tools/gen_scenes.py (split
'test', never seen in training or model selection) and writes into DIR:

  eval.json    held-out accuracy, pointing-game scores, the demo scenes'
               predictions: the numbers tests/default checks the C engine against
  demo/        the demo scenes (the first two of each class in the test split),
               PNG, with demo/scenes.txt (file, label, class, object box)
  README.md    the model card, with every number filled in from this run

Pointing game: a scene is a hit when the map's largest patch (the first in
row-major order on ties) touches the object: its P x P pixel square holds at
least one pixel of the object's mask. A uniformly random patch hits with
probability (#patches touching the object) / N, so the uniform-random baseline
is the mean of that over the scenes (an exact expectation, not a sample). Maps:
  rollout    attention rollout (Abnar & Zuidema 2020) up to the last layer,
             mean head fusion, discard ratio 0: the CLS row of
             R = Â_{L-1} ... Â_0 with Â_l = 0.5 mean_h A_l + 0.5 I
  attention  the last layer's CLS attention to the patches, mean over heads

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/eval_default.py --dir assets/default
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scenes  # noqa: E402
from train_default import ViT, to_tensor  # noqa: E402

DEMO_PER_CLASS = 2


def load_safetensors(path):
    """{name: float32 tensor} from a .safetensors file (F32 only, as train_default writes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", f"{path}: {name}: dtype {t['dtype']}"
        a, b = t["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data, "<f4", (b - a) // 4, base + a).reshape(t["shape"]).copy())
    return out


def load_model(d):
    """The model in DIR, built from config.json and the tensor shapes."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    sd = load_safetensors(os.path.join(d, "model.safetensors"))
    D, _, P, _ = sd["patch_embed.proj.weight"].shape
    L = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    S = cfg["pretrained_cfg"]["input_size"][-1]
    model = ViT(S, P, D, L, cfg["num_heads"], sd["blocks.0.mlp.fc1.weight"].shape[0],
                sd["head.weight"].shape[0])
    model.load_state_dict(sd)
    model.eval()
    return model, cfg


def maps(model, x):
    """logits [B, C], rollout [B, N], last-layer mean CLS attention [B, N] (float64 maps)."""
    with torch.no_grad():
        logits, att = model(x, return_attention=True)
    B, _, T, _ = att[0].shape
    v = torch.zeros(B, 1, T, dtype=torch.float64)
    v[:, 0, 0] = 1.0  # the CLS row of R = Â_{L-1} ... Â_0, built from the top down
    eye = torch.eye(T, dtype=torch.float64)
    for a in reversed(att):
        v = v @ (0.5 * a.double().mean(1) + 0.5 * eye)
    return logits, v[:, 0, 1:], att[-1].double().mean(1)[:, 0, 1:]


def touching(masks, P):
    """[B, gh, gw] bool: the patch's P x P square holds at least one object pixel."""
    B, S, _ = masks.shape
    return masks.reshape(B, S // P, P, S // P, P).any(axis=(2, 4)).reshape(B, -1)


def evaluate(model, imgs, labels, masks, P, bs=100):
    """Accuracy and pointing-game hits over the scenes."""
    correct, hits = 0, {"rollout": 0, "attention": 0}
    touch = touching(masks, P)
    for i in range(0, len(imgs), bs):
        logits, roll, attn = maps(model, to_tensor(imgs[i:i + bs]))
        correct += int((logits.argmax(1).numpy() == labels[i:i + bs]).sum())
        for name, m in (("rollout", roll), ("attention", attn)):
            best = m.numpy().argmax(1)  # numpy: the first maximum on ties
            hits[name] += int(touch[i:i + bs][np.arange(len(best)), best].sum())
    uniform = float(touch.mean(axis=1).mean())
    return correct, hits, uniform


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_demo(model, d, seed, n_test, P):
    """The first DEMO_PER_CLASS test scenes of each class, as PNGs; their predictions."""
    out = os.path.join(d, "demo")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".png") or f == "scenes.txt":
            os.remove(os.path.join(out, f))
    want, picked, i = {c: DEMO_PER_CLASS for c in range(len(gen_scenes.CLASSES))}, [], 0
    while any(want.values()):
        rgb, label, mask, box = gen_scenes.scene(seed, "test", i)
        if want[label]:
            want[label] -= 1
            picked.append((i, rgb, label, mask, box))
        i += 1
    assert i <= n_test, "demo scenes must come from the evaluated test scenes"
    picked.sort(key=lambda p: (p[2], p[0]))  # by class, then index
    rows = []
    with open(os.path.join(out, "scenes.txt"), "w") as f:
        f.write("# file label class box_x0 box_y0 box_x1 box_y1 "
                f"(tools/gen_scenes.py --seed {seed} --split test)\n")
        for i, rgb, label, mask, box in picked:
            name = f"{label + 1:02d}_{gen_scenes.CLASSES[label]}_test{i:05d}.png"
            Image.fromarray(rgb).save(os.path.join(out, name))
            f.write(f"{name} {label} {gen_scenes.CLASSES[label]} {box[0]} {box[1]} {box[2]} {box[3]}\n")
            # predict from the PNG as written, exactly what the app and the C test read
            back = np.asarray(Image.open(os.path.join(out, name)).convert("RGB"))[None]
            logits, roll, attn = maps(model, to_tensor(back))
            p = logits.softmax(1)[0]
            touch = touching(mask[None], P)[0]
            r, a = int(roll[0].numpy().argmax()), int(attn[0].numpy().argmax())
            # the largest patch of each map (row-major index) and whether it is on the object
            rows.append({"file": name, "label": label, "pred": int(p.argmax()),
                         "prob": round(float(p.max()), 6),
                         "rollout_max": r, "rollout_hit": bool(touch[r]),
                         "attention_max": a, "attention_hit": bool(touch[a])})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", default="assets/default")
    ap.add_argument("--count", type=int, default=1000, help="held-out test scenes")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, cfg = load_model(a.dir)
    seed = int(cfg["vitlens"]["seed"])
    P = model.patch_embed.proj.kernel_size[0]

    imgs, labels, masks = gen_scenes.batch(seed, "test", 0, a.count)
    correct, hits, uniform = evaluate(model, imgs, labels, masks, P)
    demo = write_demo(model, a.dir, seed, a.count, P)
    ev = {
        "model": "model.safetensors",
        "sha256": sha256(os.path.join(a.dir, "model.safetensors")),
        "test": {"seed": seed, "split": "test", "start": 0, "count": a.count, "correct": correct,
                 "accuracy": correct / a.count,
                 "command": f"tools/gen_scenes.py --seed {seed} --split test --start 0 "
                            f"--count {a.count} --out DIR"},
        "pointing": {"count": a.count, "rollout": hits["rollout"] / a.count,
                     "attention": hits["attention"] / a.count, "uniform": uniform,
                     "rollout_hits": hits["rollout"], "attention_hits": hits["attention"]},
        "demo": demo,
        "demo_correct": sum(r["pred"] == r["label"] for r in demo),
        "demo_hits": {k: sum(r[k + "_hit"] for r in demo) for k in ("rollout", "attention")},
    }
    with open(os.path.join(a.dir, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1)
        f.write("\n")
    print(f"held-out accuracy {100 * correct / a.count:.2f}% ({correct}/{a.count}); pointing game: "
          f"rollout {100 * ev['pointing']['rollout']:.1f}%, last-layer mean attention "
          f"{100 * ev['pointing']['attention']:.1f}%, uniform {100 * uniform:.1f}%; "
          f"demo {ev['demo_correct']}/{len(demo)}")
    write_card(a.dir, cfg, ev)


def write_card(d, cfg, ev):
    """README.md: the model card, every number from cfg (training) and ev (this evaluation)."""
    v = cfg["vitlens"]
    pc = cfg["pretrained_cfg"]
    S = pc["input_size"][-1]
    t, p = ev["test"], ev["pointing"]
    classes = cfg["label_names"]
    yn = {True: "yes", False: "no"}
    demo_rows = "\n".join(f"| `{r['file']}` | {classes[r['label']]} | {classes[r['pred']]} | "
                          f"{100 * r['prob']:.1f}% | {yn[r['rollout_hit']]} / "
                          f"{yn[r['attention_hit']]} |" for r in ev["demo"])
    short = "" if t["accuracy"] >= 0.97 else f"""
It names the shape in {100 * t["accuracy"]:.0f}% of held-out scenes, short of the 97% the
project aims for: a ViT this small, trained from scratch in this time on 2 CPU
cores, learns where the object is (the pointing game above) well before it
learns to tell the shapes apart. Expect wrong or unsure classes on some demo
scenes; the maps are still computed exactly as for any other model.
"""
    text = f"""# vitlens default model: shapes-vit

vitlens's built-in model: a small Vision Transformer, trained by this project on
scenes this project generates, so that `vitlens` opens on something real with no
download. It classifies which of {len(classes)} shapes ({", ".join(classes)}) a
scene holds; the shape sits somewhere on a cluttered background, so the model has
to find it, and its attention maps can be checked against where it really is.

| file | what |
|---|---|
| `model.safetensors` | weights, timm `VisionTransformer` names, F32 ({os.path.getsize(os.path.join(d, "model.safetensors")) / 1e6:.1f} MB) |
| `config.json` | input size, crop_pct, mean/std, heads, label names (read by the engine) |
| `eval.json` | the numbers below, read by `tests/default` |
| `demo/` | held-out demo scenes (PNG) and `demo/scenes.txt` (labels, object boxes) |
| `train_log.txt` | the training run's log |

## Reproduce

```sh
OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tools/train_default.py --out assets/default
```

{v["command_note"]}
Seed {v["seed"]}. The run that produced these weights took {v["train_seconds"] / 60:.0f} min
(data generation {v["data_seconds"] / 60:.1f} min included) with {v["threads"]} threads on
{v["machine"]}. It ends by running
`tools/eval_default.py --dir assets/default`, which writes `eval.json`, `demo/` and
this card. Bit-identical weights need the same PyTorch build and thread count
(CPU floating-point reductions depend on both); the accuracy does not.

## Model

timm `VisionTransformer` layout: input {S}×{S} RGB, patch {v["patch"]} ({S // v["patch"]}×{S // v["patch"]} = {(S // v["patch"]) ** 2} patches, plus the CLS
token), width {v["dim"]}, {v["depth"]} blocks, {cfg["num_heads"]} heads, MLP width {v["mlp"]}, LayerNorm eps 1e-6, learned position
embedding, classification from the CLS token. {v["params"] / 1e6:.2f} M parameters.
Preprocessing: crop_pct {pc["crop_pct"]} (the {S}×{S} scene is used as is),
pixels / 255, then mean {pc["mean"]}, std {pc["std"]}.

## Data

`tools/gen_scenes.py`, deterministic: scene *i* of a split depends only on
(seed, split, *i*). Each {S}×{S} scene has {gen_scenes.DATA_DEFINITION}

Splits: `train` ({v["train_scenes"]} scenes), `val` ({v["val_scenes"]} scenes, accuracy printed during
training), `test` (held out: used only for the numbers below and the demo
scenes).

## Training

{v["recipe"]}

## Results (held-out `test` scenes 0–{t["count"] - 1}, seed {t["seed"]})

| | |
|---|---|
| accuracy | **{100 * t["accuracy"]:.1f}%** ({t["correct"]}/{t["count"]}) |
| pointing game, attention rollout | **{100 * p["rollout"]:.1f}%** |
| pointing game, last layer's mean CLS attention | **{100 * p["attention"]:.1f}%** |
| pointing game, uniform-random map (chance) | {100 * p["uniform"]:.1f}% |

Pointing game: a scene counts as a hit when the map's largest patch (the first in
row-major order on ties) touches the object, i.e. its {v["patch"]}×{v["patch"]} pixel square holds at
least one pixel of the object's mask. For a uniformly random map the
maximum is a uniformly random patch, so chance is the mean over the scenes of
(patches touching the object) / {(S // v["patch"]) ** 2}. Rollout: Abnar & Zuidema (2020), up to the last
layer, mean head fusion, discard ratio 0 (`Â = 0.5·A + 0.5·I`, the CLS row of
the product). Attention: the last layer's CLS-token row over the patches, mean of
the {cfg["num_heads"]} heads. Both are what vitlens draws (R on / off, last layer, "mean").
`tests/default` recomputes every number with the C engine: the same accuracy
count, the pointing game within ±1 point.

What the pointing game does and does not show: no attention map was trained to
point anywhere. The object masks entered training only through the token labels
(see Training), which teach the final patch tokens which patches show the
object; the CLS token's attention, and so both maps, found the object on its own.

## Demo scenes

The first {DEMO_PER_CLASS} scenes of each class in the test split (`demo/`, cycled with N / Shift+N
in vitlens); {ev["demo_correct"]}/{len(ev["demo"])} classified correctly; the largest patch is on the object in
{ev["demo_hits"]["rollout"]}/{len(ev["demo"])} scenes for rollout, {ev["demo_hits"]["attention"]}/{len(ev["demo"])} for the last layer's mean attention.

| scene | shape | predicted | probability | on the object: rollout / attention |
|---|---|---|---|---|
{demo_rows}

## Limits

It knows {len(classes)} synthetic shapes and nothing else: on a photo it still
answers one of them. It has seen one object per scene, never occluded.
{short}"""
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
