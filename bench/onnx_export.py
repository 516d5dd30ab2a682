#!/usr/bin/python3
"""ONNX Runtime's side of bench/compare.py, part 1: the benchmarked checkpoints as ONNX
models, written once beside them (bench/run.sh calls this; issue 28).

    /usr/bin/python3 bench/onnx_export.py WEIGHTS_DIR NAME...   (NAME.safetensors there)

Each checkpoint (bench/make_weights.py: timm names, random weights) is loaded into
torchvision's VisionTransformer (tests/parity/reference.py torchvision_vit: the same
weights, nn.MultiheadAttention, float32, eval mode), which torch.onnx.export writes at
opset 14 as NAME.onnx with one input "pixels" [1, 3, S, S] and one output "logits"
[1, C]: what a user who exports a ViT for ONNX Runtime gets. No attention map is an
output, so ONNX Runtime keeps none (the engine keeps all of them).

Beside it, NAME.onnx.check: a fixed random input [1, 3, S, S] followed by the logits [C]
that PyTorch computes from it with tests/parity/reference.py vit_forward (the explicit-
attention model the engine's parity tests check against), float32 little-endian, no
header. bench/ort_forward.js "check" runs ONNX Runtime on that input and reports the
largest difference from those logits, so that the benchmark compares the same model.

Also NAME.batch.onnx: the same model with the batch axis free ("pixels" [B, 3, S, S],
"logits" [B, C]) for bench/batch_ort.sh, beside bench_batch's vit_forward_batch. The
single-image benchmark keeps the fixed [1, 3, S, S] export, as a user who exports one
image's model gets.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "parity"))
import reference  # noqa: E402


def export(weights_dir, name):
    src = Path(weights_dir) / f"{name}.safetensors"
    out = Path(weights_dir) / f"{name}.onnx"
    check = out.with_name(out.name + ".check")
    batch = out.with_name(f"{name}.batch.onnx")
    if all(p.exists() and p.stat().st_mtime >= src.stat().st_mtime for p in (out, check, batch)):
        return out
    w = {k: v.float() for k, v in reference.load_safetensors(str(src)).items()}
    heads = w["cls_token"].shape[-1] // 64
    m = reference.torchvision_vit(w, heads).float().eval()
    S = m.image_size
    x = torch.randn(1, 3, S, S, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, _ = reference.vit_forward(w, x[0], heads, dtype=torch.float32)
    tmp = out.with_suffix(".tmp")
    # grad mode on (no torch.no_grad here): nn.MultiheadAttention's inference fast path
    # (aten::_native_multi_head_attention) has no ONNX export at opset 14
    for path, axes in ((batch, {"pixels": {0: "batch"}, "logits": {0: "batch"}}), (tmp, None)):
        torch.onnx.export(m, x, str(path), opset_version=14, input_names=["pixels"],
                          output_names=["logits"], do_constant_folding=True, dynamic_axes=axes)
    check.write_bytes(x.contiguous().numpy().astype("<f4").tobytes()
                      + logits.reshape(-1).contiguous().numpy().astype("<f4").tobytes())
    tmp.rename(out)  # a cut run leaves no half file behind under the final name
    return out


def main():
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} WEIGHTS_DIR NAME...", file=sys.stderr)
        return 2
    for name in sys.argv[2:]:
        print(export(sys.argv[1], name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
