#!/usr/bin/env bash
# The engine against PyTorch on the same CPU, in one run (see bench/compare.py):
#   bench/run.sh [compare.py options]      e.g. --models vit_base_patch16_224 --threads 2
#   bench/run.sh --large                   also the DINOv2-L/14-sized model at 518 px (memory)
#   bench/run.sh --backward                also the backward pass: engine forward + vit_backward
#                                          against PyTorch's forward + backward() (--backward-only:
#                                          that alone; with --large: the large model's memory)
# Builds build-bench/ (Release, the default flags: no -march=native), writes random-weight
# checkpoints of the exact shapes of DeiT-Tiny/16, DeiT-Small/16 and ViT-Base/16 at 224 px
# once into build-bench/weights/ (440 MB), then times the engine's forward pass, its GEMMs
# alone and PyTorch's, in turns, at 1 and 2 threads. These 2-core machines are noisy:
# compare the ratios of one run, not absolute times across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_APP=ON \
  -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_forward >/dev/null
/usr/bin/python3 bench/make_weights.py build-bench/weights deit_tiny_patch16_224 \
  deit_small_patch16_224 vit_base_patch16_224 >/dev/null
export OMP_WAIT_POLICY=PASSIVE  # torch's OpenMP threads must not spin against OpenBLAS's
exec /usr/bin/python3 bench/compare.py --bench build-bench/bench/bench_forward \
  --weights build-bench/weights "$@"
