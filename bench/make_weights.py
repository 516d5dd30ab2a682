#!/usr/bin/python3
"""Random-weight checkpoints of the exact shapes of the benchmarked models, in timm's
names, float32, written once and cached (bench/run.sh keeps them in build-bench/weights).

    /usr/bin/python3 bench/make_weights.py OUT_DIR NAME...     (NAME from MODELS; "list")

The weights come from tests/parity/test_families.py's random_timm (query/key rows
scaled so that softmax rows are peaked, as in a trained model); only the shapes
matter for the time, and the peaked attention keeps the softmax honest.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "parity"))
import test_families  # noqa: E402
from test_parity import write_safetensors  # noqa: E402

# name: shapes (timm); S input px, P patch, D width, L layers, F MLP, C classes, heads D / 64
MODELS = {
    "deit_tiny_patch16_224": dict(P=16, S=224, D=192, L=12, F=768, C=1000),
    "deit_small_patch16_224": dict(P=16, S=224, D=384, L=12, F=1536, C=1000),
    "vit_base_patch16_224": dict(P=16, S=224, D=768, L=12, F=3072, C=1000),
    # DINOv2 ViT-L/14 at its 518 px (37 x 37 patches, T = 1370): LayerScale, no head
    "vit_large_patch14_dinov2_518": dict(P=14, S=518, D=1024, L=24, F=4096, C=0, ls=True),
    # the same with a 1000-class head: the backward pass needs a logit to differentiate
    "vit_large_patch14_518_head": dict(P=14, S=518, D=1024, L=24, F=4096, C=1000, ls=True),
    # DINOv3 ViT-S/16 (facebook/dinov3-vits16-pretrain-lvd1689m) in transformers' names: RoPE,
    # 4 registers, LayerScale, no key bias, no head; and ViT-S+/16's SwiGLU MLP (all 12 layers)
    "dinov3_vits16_224": dict(dinov3="S", S=224),
    "dinov3_vitsplus16_224": dict(dinov3="S+", S=224),
}


def make(out_dir, name):
    m = MODELS[name]
    path = Path(out_dir) / f"{name}.safetensors"
    if path.exists():
        return path
    if "dinov3" in m:  # tests/parity/test_dinov3.py's random_weights, the published shape
        import test_dinov3
        c = dict(test_dinov3.SHAPES[m["dinov3"]], L=12, C=0, qv_bias=True, names="hf")
        w = test_dinov3.random_weights(c, torch.Generator().manual_seed(sum(map(ord, name))))
        w = {k: v for k, v in w.items() if not k.startswith("k_bias_unused")}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_safetensors(tmp, w, "F32")
        tmp.rename(path)
        return path
    f = dict(name=name, size=None, dist=False, R=0, ls=False, no_embed_class=False, hf=None,
             eps=None, config=None, fc_norm=False, global_pool=None, cls_mean=False,
             grid0=(m["S"] // m["P"],) * 2)
    f.update(m)
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    w = test_families.random_timm(f, g)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    write_safetensors(tmp, w, "F32")
    tmp.rename(path)  # a cut run leaves no half file behind under the final name
    return path


def main():
    if sys.argv[1:] == ["list"]:
        print("\n".join(MODELS))
        return 0
    if len(sys.argv) < 3 or any(n not in MODELS for n in sys.argv[2:]):
        print(f"usage: {sys.argv[0]} OUT_DIR NAME... (names: {', '.join(MODELS)})",
              file=sys.stderr)
        return 2
    for name in sys.argv[2:]:
        print(make(sys.argv[1], name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
