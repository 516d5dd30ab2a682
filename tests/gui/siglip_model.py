"""siglip_model.py - small random SigLIP checkpoints in Hugging Face's SiglipModel names
(vision_model.*, the MAP head, logit_scale and logit_bias; text_model.* and a tokenizer when
asked), for the tests that need a model pooled by attention and without a CLS token:
test_map_kinds (the probe kind), test_cli_siglip.py and tests/app/test_families_views.py.

    /usr/bin/python3 siglip_model.py OUT_DIR

writes OUT_DIR/siglip.safetensors, an image tower alone (D 64, H 4, F 128, P 16, 64 px: a
4 x 4 grid, 2 layers), and the config.json / preprocessor_config.json google's checkpoints
carry. The image weights come from tests/parity/test_siglip.py's make_weights (its parity
test checks them), the text tower from tests/parity/test_siglip_text.py's TextTower (its
parity test checks that), the tokenizers are trained as tests/text/test_siglip_tokenizer.py
(SigLIP's spiece.model) and tests/text/test_gemma_tokenizer.py (SigLIP 2's tokenizer.model)
train theirs; those two need python3-sentencepiece (they exit 77 without it)."""
import json
import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "parity"))
sys.path.insert(0, str(HERE.parent / "text"))
import test_siglip as ts  # noqa: E402
from test_parity import write_safetensors  # noqa: E402

VISION = dict(D=64, H=4, F=128, P=16, S=64, L=2, C=0)
TEXT = dict(V=350, ctx=64, W=48, H=4, F=96, L=2)
LOGIT_SCALE, LOGIT_BIAS = math.log(10.0), 0.5  # probabilities spread over (0, 1)


def write(d, text=True, vocab=None, gemma=False, vision=VISION, seed=9):
    """A SiglipModel checkpoint in d: model.safetensors, config.json (the towers' sizes),
    preprocessor_config.json, and with text its tokenizer (spiece.model, or SigLIP 2's
    tokenizer.model with gemma). Returns (path, weights, tower): the image weights in float64
    with logit_scale and logit_bias, the text tower (None without text).
    vocab: a text tower of that many ids and no tokenizer. gemma: SigLIP 2's, a text tower
    read with a Gemma-like tokenizer.model (trained here; V its size)."""
    from test_siglip_text import TextTower, hf_state  # a text tower's modules: only with text
    if gemma:
        import test_gemma_tokenizer as gt
        gt.train(d, "tokenizer")
        for f in ("tokenizer.txt", "tokenizer.vocab"):
            (d / f).unlink(missing_ok=True)
        vocab = gt.Reference(d / "tokenizer.model").sp.get_piece_size()
    w, path = ts.write_model(vision, d, seed=seed)
    cfg = json.loads((d / "config.json").read_text())
    # the image tower's sizes (SiglipVisionConfig's defaults are B/16's, and the engine's
    # D / 64 would give one head)
    cfg["vision_config"].update(hidden_size=vision["D"], num_attention_heads=vision["H"],
                                intermediate_size=vision["F"], num_hidden_layers=vision["L"],
                                image_size=vision["S"], patch_size=vision["P"])
    tower = None
    tensors = {k: v.float() for k, v in w.items()}
    tensors["logit_scale"] = torch.tensor([LOGIT_SCALE])
    tensors["logit_bias"] = torch.tensor([LOGIT_BIAS])
    w["logit_scale"] = torch.tensor([LOGIT_SCALE], dtype=torch.float64)
    w["logit_bias"] = torch.tensor([LOGIT_BIAS], dtype=torch.float64)
    if text:
        torch.manual_seed(4)
        t = dict(TEXT, V=vocab) if gemma else dict(TEXT, V=vocab, W=8, H=2, F=16, L=1) if vocab \
            else TEXT
        tower = TextTower(t["V"], t["ctx"], t["W"], t["H"], t["F"], t["L"])
        with torch.no_grad():  # a head W -> E = D, as the image embedding's width
            tower.head = torch.nn.Linear(t["W"], vision["D"])
        tensors.update(hf_state(tower))
        cfg["text_config"].update(hidden_size=t["W"], num_attention_heads=t["H"],
                                  intermediate_size=t["F"], num_hidden_layers=t["L"],
                                  vocab_size=t["V"])
        if not vocab:
            import test_siglip_tokenizer as tt
            tt.train(d, "spiece")
    (d / "config.json").write_text(json.dumps(cfg))
    write_safetensors(path, tensors, "F32")
    return path, w, tower


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    c = dict(VISION)
    w, path = ts.write_model(c, out, seed=5)
    path.rename(out / "siglip.safetensors")
    cfg = json.loads((out / "config.json").read_text())
    cfg["vision_config"].update(hidden_size=c["D"], num_attention_heads=c["H"],
                                intermediate_size=c["F"], num_hidden_layers=c["L"],
                                image_size=c["S"], patch_size=c["P"])
    (out / "config.json").write_text(json.dumps(cfg))
    print(out / "siglip.safetensors")
