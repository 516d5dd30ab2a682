#!/usr/bin/python3
"""Where vitlens's phrase maps point on the tiny CLIP (tools/train_tiny_clip.py).

On held-out two-object scenes (a colour and a shape each, different colours), the C
engine (tests/parity's text_dump and vit_dump: vit_text_embed, vit_set_text_head,
vit_backward, vit_explain) explains each of the two phrases "a {colour} {shape}" in turn;
a map hits when its maximum lies on the phrase's own object (the pointing game,
Zhang et al. 2016: on its mask, for patch-grid maps on a patch that the object covers
more than a quarter of) and is "right" when it lies on its object and not the other.
Prints, per map method, the fraction of phrases whose map points at their own object.

    /usr/bin/python3 tools/tiny_clip_pointing.py --model build/tiny-clip \\
        --text-dump build/tests/parity/text_dump --vit-dump build/tests/parity/vit_dump
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_tiny_clip as tc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", default="build/tiny-clip", help="train_tiny_clip.py's --out")
    ap.add_argument("--text-dump", required=True)
    ap.add_argument("--vit-dump", required=True)
    ap.add_argument("--count", type=int, default=50, help="two-object scenes")
    ap.add_argument("--level", type=float, default=0.4)
    a = ap.parse_args()
    model = os.path.join(a.model, "model.safetensors")
    tok = tc.Tokenizer(os.path.join(a.model, "bpe_simple_vocab_16e6.txt.gz"))
    with open(os.path.join(a.model, "open_clip_config.json")) as f:
        patch = json.load(f)["model_cfg"]["vision_cfg"]["patch_size"]
    G = tc.SIZE // patch
    hits, n = {}, 0
    with tempfile.TemporaryDirectory() as w:
        i = 0
        while n < a.count:
            img, objs, cov, _ = tc.make_scene("test", 100000 + i, a.level, kind=2)
            i += 1
            if objs[0].colour == objs[1].colour:
                continue
            texts = [tc.phrase(o.colour, o.shape) for o in objs]
            with open(os.path.join(w, "ids.txt"), "w") as f:
                f.write("".join(" ".join(map(str, tok.encode(t))) + "\n" for t in texts))
            subprocess.run([a.text_dump, "--model", model, "--ids", os.path.join(w, "ids.txt"),
                            "--out", os.path.join(w, "emb.f32")], check=True,
                           stdout=subprocess.DEVNULL)
            Image.fromarray(img).save(os.path.join(w, "scene.png"))
            for k in range(2):
                out = os.path.join(w, f"out{k}")
                subprocess.run([a.vit_dump, "--model", model, "--image",
                                os.path.join(w, "scene.png"), "--text-head",
                                os.path.join(w, "emb.f32") + ":2", "--class", str(k),
                                "--out", out], check=True, stdout=subprocess.DEVNULL)
                for name in sorted(os.listdir(out)):
                    if not name.startswith("expl_"):
                        continue
                    m = np.load(os.path.join(out, name))
                    if m.shape == (G, G):  # a patch map: the objects' patch coverage
                        own = cov.reshape(2, G, patch, G, patch).mean((2, 4)) > 0.25
                    else:
                        own = cov > 0.5
                    y, x = np.unravel_index(np.argmax(m), m.shape)
                    right = bool(own[k][y, x]) and not bool(own[1 - k][y, x])
                    key = name[5:-4]
                    hits[key] = hits.get(key, 0) + right
            n += 1
    print(f"{n} held-out two-object scenes, {2 * n} phrases; the map's maximum on the "
          f"phrase's own object:")
    for key, v in sorted(hits.items()):
        print(f"  {key:24s} {v / (2 * n):.3f}  ({v}/{2 * n})")


if __name__ == "__main__":
    main()
