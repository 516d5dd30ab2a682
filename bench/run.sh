#!/usr/bin/env bash
# The engine against PyTorch and ONNX Runtime on the same CPU, in one run (see bench/compare.py):
#   bench/run.sh [compare.py options]      e.g. --models vit_base_patch16_224 --threads 2
#   bench/run.sh --large                   also the DINOv2-L/14-sized model at 518 px (memory)
#   bench/run.sh --backward                also the backward pass: engine forward + vit_backward
#                                          against PyTorch's forward + backward() (--backward-only:
#                                          that alone; with --large: the large model's memory)
# Builds build-bench/ (Release, the default flags: no -march=native), writes random-weight
# checkpoints of the exact shapes of DeiT-Tiny/16, DeiT-Small/16, ViT-Base/16 and DINOv3
# ViT-S/16 (--models dinov3_vitsplus16_224: S+/16, its SwiGLU) at 224 px
# once into build-bench/weights/ (440 MB), then times the engine's forward pass, its GEMMs
# alone and PyTorch's, in turns, at 1 and 2 threads. These 2-core machines are noisy:
# compare the ratios of one run, not absolute times across runs.
# ONNX Runtime (issue 28), forward tables only: with node and npm, the npm package
# onnxruntime-node (ONNX Runtime's own Linux x64 CPU build; --ignore-scripts, as its install
# script only fetches GPU builds) is installed once into build-bench/ort/, each checkpoint is
# exported once as torchvision's ViT at opset 14 (bench/onnx_export.py, Debian's python3-onnx)
# and ONNX Runtime takes its turns beside the others (VITLENS_BENCH_NO_ORT=1 leaves it out).
# Without them: one "skipped: ..." line and the rest as before. Batches: bench/batch_ort.sh
# (vit_forward_batch against ONNX Runtime on [B, 3, S, S]) after this has set things up.
# The backward pass has no ONNX Runtime column: its CPU provider runs inference only.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_APP=ON \
  -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_forward >/dev/null
models=(deit_tiny_patch16_224 deit_small_patch16_224 vit_base_patch16_224)
# DINOv3 ViT-S/16 (RoPE, registers; issue 35) and S+/16 (SwiGLU): PyTorch's side is
# tests/parity/test_dinov3.py's reference, no ONNX Runtime turn (see compare.py)
/usr/bin/python3 bench/make_weights.py build-bench/weights "${models[@]}" dinov3_vits16_224 \
  dinov3_vitsplus16_224 >/dev/null
ort=()
if [ -n "${VITLENS_BENCH_NO_ORT:-}" ]; then
  echo "onnxrt   skipped: VITLENS_BENCH_NO_ORT is set"
elif ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "onnxrt   skipped: ONNX Runtime needs node and npm (Debian: apt-get install nodejs npm)"
elif ! /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  echo "onnxrt   skipped: exporting the models needs Debian's python3-onnx (scripts/install-deps.sh)"
else
  if [ ! -f build-bench/ort/node_modules/onnxruntime-node/package.json ]; then
    mkdir -p build-bench/ort
    # a package.json of its own, or npm installs into the nearest parent folder that has one
    [ -f build-bench/ort/package.json ] || echo '{"private": true}' >build-bench/ort/package.json
    (cd build-bench/ort && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node \
      >npm.log 2>&1) || { echo "bench/run.sh: npm install onnxruntime-node failed, see" \
      "build-bench/ort/npm.log" >&2; exit 1; }
  fi
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/onnx_export.py build-bench/weights \
    "${models[@]}" >build-bench/onnx_export.log 2>&1 || { echo "bench/run.sh:" \
    "bench/onnx_export.py failed, see build-bench/onnx_export.log" >&2; exit 1; }
  ort=(--ort build-bench/ort/node_modules)
fi
export OMP_WAIT_POLICY=PASSIVE  # torch's OpenMP threads must not spin against OpenBLAS's
exec /usr/bin/python3 bench/compare.py --bench build-bench/bench/bench_forward \
  --weights build-bench/weights "${ort[@]}" "$@"
