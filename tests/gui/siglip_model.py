"""siglip_model.py - a small random SigLIP image tower in Hugging Face's SiglipModel names
(vision_model.*, the MAP head, logit_scale and logit_bias), for the tests that need a model
pooled by attention and without a CLS token: test_map_kinds (the probe kind).

    /usr/bin/python3 siglip_model.py OUT_DIR

Writes OUT_DIR/siglip.safetensors (D 64, H 4, F 128, P 16, 64 px: a 4 x 4 grid, 2 layers)
and the config.json / preprocessor_config.json google's checkpoints carry. The weights come
from tests/parity/test_siglip.py's make_weights (its parity test checks them)."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "parity"))
import test_siglip as ts  # noqa: E402

out = Path(sys.argv[1])
c = dict(D=64, H=4, F=128, P=16, S=64, L=2, C=0)
w, path = ts.write_model(c, out, seed=5)
path.rename(out / "siglip.safetensors")
# 4 heads of 16: SiglipVisionConfig's default (12) is for D 768, and the engine's D / 64
# would give one head
cfg = json.loads((out / "config.json").read_text())
cfg["vision_config"].update(hidden_size=c["D"], num_attention_heads=c["H"], intermediate_size=c["F"],
                            num_hidden_layers=c["L"], image_size=c["S"], patch_size=c["P"])
(out / "config.json").write_text(json.dumps(cfg))
print(out / "siglip.safetensors")
