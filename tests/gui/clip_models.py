"""Tiny random CLIP checkpoints for the app's CLIP tests (test_clip.py, test_cli_clip.py):
the published architecture's tensors at toy widths, the vocabulary's real size (49 408
tokens, so that the real CLIP tokenizer's ids index it) and context (77), written in both
naming schemes with the same weights:

  hf      Hugging Face CLIPModel: vision_model.*, text_model.*, visual_projection,
          text_projection (Linear [E, W]), logit_scale, with its config.json
  openai  OpenAI / OpenCLIP: visual.conv1, visual.class_embedding, visual.ln_pre,
          visual.transformer.resblocks.N.attn.in_proj_weight, visual.proj ([D, E], x @ proj),
          token_embedding, positional_embedding, ln_final, text_projection ([W, E])

and the broken variants the bad-input tests need: the image tower alone, the text tower
alone. The vocabulary (OpenAI's bpe_simple_vocab_16e6.txt.gz, MIT, from ../shared/clip) is
copied beside the model when asked, as a download puts it.
"""
import json
import shutil
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "parity"))
from test_parity import write_safetensors  # noqa: E402

VOCAB, CONTEXT = 49408, 77
# toy widths: image tower D, text tower W, embedding E; patch 16 on a 64 px input (4 x 4);
# heads D / 64 and W / 64, as OpenAI's build_model infers them for a file without config
SHAPE = dict(S=64, P=16, D=128, LV=2, HV=2, W=64, LT=2, HT=1, E=32)


def random_clip(seed=0, shape=SHAPE):
    """The weights in OpenAI's names (the reference layout), float32."""
    g = torch.Generator().manual_seed(seed)
    s = shape
    D, W, E, P = s["D"], s["W"], s["E"], s["P"]
    N = (s["S"] // P) ** 2

    def r(*shape, std=0.2):  # linear layers: std 1/sqrt(fan-in), activations stay O(1)
        return torch.randn(*shape, generator=g) * std

    def ln(prefix, d, out):
        out[f"{prefix}.weight"] = 1.0 + r(d, std=0.1)
        out[f"{prefix}.bias"] = r(d, std=0.1)

    def blocks(prefix, d, n, out):
        for i in range(n):
            b = f"{prefix}.resblocks.{i}"
            ln(f"{b}.ln_1", d, out)
            out[f"{b}.attn.in_proj_weight"] = r(3 * d, d, std=d ** -0.5)
            out[f"{b}.attn.in_proj_bias"] = r(3 * d, std=0.05)
            out[f"{b}.attn.out_proj.weight"] = r(d, d, std=d ** -0.5)
            out[f"{b}.attn.out_proj.bias"] = r(d, std=0.05)
            ln(f"{b}.ln_2", d, out)
            out[f"{b}.mlp.c_fc.weight"] = r(4 * d, d, std=d ** -0.5)
            out[f"{b}.mlp.c_fc.bias"] = r(4 * d, std=0.05)
            out[f"{b}.mlp.c_proj.weight"] = r(d, 4 * d, std=(4 * d) ** -0.5)
            out[f"{b}.mlp.c_proj.bias"] = r(d, std=0.05)

    w = {}
    w["visual.conv1.weight"] = r(D, 3, P, P, std=(3 * P * P) ** -0.5)
    w["visual.class_embedding"] = r(D)
    w["visual.positional_embedding"] = r(N + 1, D)
    ln("visual.ln_pre", D, w)
    blocks("visual.transformer", D, s["LV"], w)
    ln("visual.ln_post", D, w)
    w["visual.proj"] = r(D, E, std=D ** -0.5)
    w["token_embedding.weight"] = r(VOCAB, W)
    w["positional_embedding"] = r(CONTEXT, W, std=0.05)
    blocks("transformer", W, s["LT"], w)
    ln("ln_final", W, w)
    w["text_projection"] = r(W, E, std=W ** -0.5)
    w["logit_scale"] = torch.tensor(2.302585)  # exp: 10, a softmax that is not one-hot
    return w


def to_hf(w, shape=SHAPE):
    """The same weights in Hugging Face CLIPModel's names."""
    out = {}

    def blocks(src, dst, n):
        for i in range(n):
            a, b = f"{src}.resblocks.{i}", f"{dst}.encoder.layers.{i}"
            q, k, v = w[f"{a}.attn.in_proj_weight"].chunk(3)
            qb, kb, vb = w[f"{a}.attn.in_proj_bias"].chunk(3)
            for name, t, tb in (("q", q, qb), ("k", k, kb), ("v", v, vb)):
                out[f"{b}.self_attn.{name}_proj.weight"] = t.clone()
                out[f"{b}.self_attn.{name}_proj.bias"] = tb.clone()
            out[f"{b}.self_attn.out_proj.weight"] = w[f"{a}.attn.out_proj.weight"]
            out[f"{b}.self_attn.out_proj.bias"] = w[f"{a}.attn.out_proj.bias"]
            for x, y in (("ln_1", "layer_norm1"), ("ln_2", "layer_norm2")):
                out[f"{b}.{y}.weight"] = w[f"{a}.{x}.weight"]
                out[f"{b}.{y}.bias"] = w[f"{a}.{x}.bias"]
            for x, y in (("c_fc", "fc1"), ("c_proj", "fc2")):
                out[f"{b}.mlp.{y}.weight"] = w[f"{a}.mlp.{x}.weight"]
                out[f"{b}.mlp.{y}.bias"] = w[f"{a}.mlp.{x}.bias"]

    v = "vision_model"
    out[f"{v}.embeddings.class_embedding"] = w["visual.class_embedding"]
    out[f"{v}.embeddings.patch_embedding.weight"] = w["visual.conv1.weight"]
    out[f"{v}.embeddings.position_embedding.weight"] = w["visual.positional_embedding"]
    out[f"{v}.pre_layrnorm.weight"] = w["visual.ln_pre.weight"]
    out[f"{v}.pre_layrnorm.bias"] = w["visual.ln_pre.bias"]
    blocks("visual.transformer", v, shape["LV"])
    out[f"{v}.post_layernorm.weight"] = w["visual.ln_post.weight"]
    out[f"{v}.post_layernorm.bias"] = w["visual.ln_post.bias"]
    out["visual_projection.weight"] = w["visual.proj"].t().contiguous()
    t = "text_model"
    out[f"{t}.embeddings.token_embedding.weight"] = w["token_embedding.weight"]
    out[f"{t}.embeddings.position_embedding.weight"] = w["positional_embedding"]
    blocks("transformer", t, shape["LT"])
    out[f"{t}.final_layer_norm.weight"] = w["ln_final.weight"]
    out[f"{t}.final_layer_norm.bias"] = w["ln_final.bias"]
    out["text_projection.weight"] = w["text_projection"].t().contiguous()
    out["logit_scale"] = w["logit_scale"]
    return out


def hf_config(shape=SHAPE):
    """config.json of a Hugging Face CLIPModel of these shapes (OpenAI's QuickGELU)."""
    s = shape
    return {
        "architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": s["E"],
        "logit_scale_init_value": 2.6592,
        "text_config": {"hidden_size": s["W"], "intermediate_size": 4 * s["W"],
                        "num_attention_heads": s["HT"], "num_hidden_layers": s["LT"],
                        "max_position_embeddings": CONTEXT, "vocab_size": VOCAB,
                        "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5,
                        "projection_dim": s["E"]},
        "vision_config": {"hidden_size": s["D"], "intermediate_size": 4 * s["D"],
                          "num_attention_heads": s["HV"], "num_hidden_layers": s["LV"],
                          "image_size": s["S"], "patch_size": s["P"], "hidden_act": "quick_gelu",
                          "layer_norm_eps": 1e-5, "projection_dim": s["E"]},
    }


def is_text(name, scheme):
    if scheme == "hf":
        return name.startswith("text_model.") or name == "text_projection.weight"
    return not name.startswith("visual.") and name != "logit_scale"


def write(d, scheme="hf", seed=0, vocab=None, part="both", shape=SHAPE):
    """A CLIP checkpoint into folder d: model.safetensors (and config.json for hf), the
    vocabulary copied beside it when vocab is a path. part: both, image (the image tower
    alone) or text (the text tower alone). Returns the weights' path."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    w = random_clip(seed, shape)
    if scheme == "hf":  # with its config and preprocessing, as a download has them
        w = to_hf(w, shape)
        (d / "config.json").write_text(json.dumps(hf_config(shape), indent=1))
        (d / "preprocessor_config.json").write_text(json.dumps({
            "crop_size": shape["S"], "do_center_crop": True, "do_normalize": True,
            "do_resize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3,
            "size": shape["S"]}, indent=1))
    if part == "image":
        w = {k: v for k, v in w.items() if not is_text(k, scheme)}
    elif part == "text":
        w = {k: v for k, v in w.items() if is_text(k, scheme) or k == "logit_scale"}
    path = d / "model.safetensors"
    write_safetensors(path, w, "F32")
    if vocab:
        shutil.copyfile(vocab, d / Path(vocab).name)
    return path


def write_hf_vocab(gz, d):
    """Hugging Face's vocab.json + merges.txt made from OpenAI's bpe_simple_vocab_16e6.txt.gz,
    as a CLIP download carries them (tests/text/clip_bpe.py); returns the ids' count (49 408)."""
    sys.path.insert(0, str(HERE.parent / "text"))
    import clip_bpe
    return clip_bpe.write_hf(clip_bpe.Reference(gz), d)
