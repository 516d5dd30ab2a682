#!/usr/bin/env bash
# Benchmark the engine next to PyTorch in the same run, on the same weights and photo,
# and print time ratios (these 2-core machines are noisy: compare within one run only).
#   bench/run.sh [MODEL] [IMAGE] [ITERS]
# Defaults: DeiT-Tiny from ../shared/models and chelsea.png. Builds build-bench/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-../shared/models/deit-tiny/deit_tiny_patch16_224.safetensors}
image=${2:-../shared/images/chelsea.png}
iters=${3:-30}
threads=${VITLENS_BENCH_THREADS:-$(nproc)}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_APP=OFF -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_forward >/dev/null
# Same thread count for both; passive OpenMP waits so that torch's OpenMP threads and
# OpenBLAS's pthreads do not spin against each other.
export OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "model $model  image $image  iters $iters  threads $threads  ($(nproc) cores)"
build-bench/bench/bench_forward --model "$model" --image "$image" --iters "$iters" | tee -a "$out"
/usr/bin/python3 bench/torch_forward.py --model "$model" --image "$image" --iters "$iters" \
  --threads "$threads" | tee -a "$out"
# Ratios of medians, and of minima (the minimum is the least disturbed by other load).
awk '$1 == "stage" { med[$2] = $4; lo[$2] = $6 }
     function ratio(what, a, b, name) {
       printf "ratio %-10s vitlens / %-28s median %6.2f / %6.2f ms = %.2f   min %6.2f / %6.2f ms = %.2f\n",
              what, name, med[a], med[b], med[a] / med[b], lo[a], lo[b], lo[a] / lo[b]
     }
     END {
       ratio("forward", "forward", "torch_attn", "torch (attention kept)")
       ratio("forward", "forward", "torch_fused", "torch (fused, torchvision)")
       ratio("preprocess", "preprocess", "torch_preprocess", "torch (PIL + torchvision)")
     }' "$out"
