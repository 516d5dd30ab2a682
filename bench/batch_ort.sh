#!/usr/bin/env bash
# The batched forward pass against ONNX Runtime's (issue 28), in turns:
#   bench/batch_ort.sh [MODEL] [THREADS] [ROUNDS] [BATCHES]
#   e.g. bench/batch_ort.sh deit_tiny_patch16_224 2 3 1,8,16
# Needs what bench/run.sh sets up (build-bench/, its weights, NAME.batch.onnx,
# build-bench/ort/): run that once first. Per round: bench_batch (vit_forward_batch against vit_forward per
# input, its own table) then ONNX Runtime on the same B inputs at once ([B, 3, S, S],
# bench/ort_forward.js "batch B N"), printed as images/s (median of 3 runs) and the CPU
# time per image. The engine's rows are bench_batch's; compare "batch img/s" with ORT's.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-deit_tiny_patch16_224}; threads=${2:-2}; rounds=${3:-3}; batches=${4:-1,8,16}
w=build-bench/weights/$model
[ -f "$w.batch.onnx" ] && [ -d build-bench/ort/node_modules/onnxruntime-node ] || {
  echo "bench/batch_ort.sh: run bench/run.sh first (no $w.batch.onnx or build-bench/ort)" >&2; exit 1; }
cmake --build build-bench -j"$(nproc)" --target bench_batch >/dev/null
export OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
coproc ORT { NODE_PATH=build-bench/ort/node_modules exec node bench/ort_forward.js \
  --model "$w.batch.onnx" --check "$w.onnx.check" --threads "$threads"; }
ask() {
  echo "$1" >&"${ORT[1]}"; read -r line <&"${ORT_0:-${ORT[0]}}"
  case $line in error*|"") echo "bench/batch_ort.sh: ONNX Runtime: ${line:-no answer}" >&2; exit 1 ;; esac
  echo "$line"
}
for B in ${batches//,/ }; do ask "batch $B 1" >/dev/null; done  # warm-up
for r in $(seq "$rounds"); do
  echo "round $r: engine (bench_batch --threads $threads)"
  build-bench/bench/bench_batch --model "$w.safetensors" --threads "$threads" --runs 3 \
    --batches "$batches" | tail -n +3
  echo "round $r: onnxruntime (intra_op_num_threads $threads)"
  for B in ${batches//,/ }; do
    sleep 0.3
    got=$(ask "batch $B 3")
    med=$(echo "$got" | tr ' ' '\n' | sed -n '2,4p' | sort -g | sed -n 2p)  # the middle of 3
    cpu=${got##* }
    awk -v B="$B" -v m="$med" -v c="$cpu" \
      'BEGIN { printf "%4d %14.1f img/s   cpu/image %8.2f ms\n", B, 1000 * B / m, c / B }'
  done
done
echo quit >&"${ORT[1]}"
wait
