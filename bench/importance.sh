#!/usr/bin/env bash
# The head importance table for DeiT-Small (12 x 6 = 72 ablated passes) in the engine
# (vit_head_importance) against PyTorch doing the same 72 passes batched, in turns, in
# one run: bench/importance.sh [ROUNDS] [THREADS]   (default 2 rounds, 2 threads)
# Builds build-bench/ (Release), writes the random-weight DeiT-Small checkpoint once
# (bench/make_weights.py), then alternates the engine and PyTorch (explicit attention, the
# 73 inputs in one batch) ROUNDS times and prints each one's median and the ratio, wall
# and CPU time. Compare the ratios of
# one run, not absolute times across runs: these 2-core machines are shared.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
K=${2:-2}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j2 --target bench_importance >/dev/null
/usr/bin/python3 bench/make_weights.py build-bench/weights deit_small_patch16_224 >/dev/null
M=build-bench/weights/deit_small_patch16_224.safetensors
export OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$K OMP_NUM_THREADS=$K
out=$(mktemp)
for r in $(seq "$ROUNDS"); do
  build-bench/bench/bench_importance --model "$M" --threads "$K" --runs 1 | tee -a "$out"
  sleep 1
  /usr/bin/python3 bench/torch_importance.py --model "$M" --threads "$K" --runs 1 | tee -a "$out"
  sleep 1
done
/usr/bin/python3 - "$out" "$K" <<'PY'
import statistics, sys, subprocess
rows, cpu_ms = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] in ("importance", "explicit"):
        rows.setdefault(f[0], []).extend(float(x) for x in f[1:f.index("cpu")])
        cpu_ms.setdefault(f[0], []).append(float(f[-1]))
med = {k: statistics.median(v) for k, v in rows.items()}
mcpu = {k: statistics.median(v) for k, v in cpu_ms.items()}
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
print(f"\nDeiT-Small, 72 ablated passes + the plain one, {sys.argv[2]} threads, {cpu}")
names = {"importance": "engine (vit_head_importance)", "explicit": "PyTorch, 73 batched"}
for k, v in med.items():
    print(f"  {names[k]:30s} median {v:8.1f} ms wall, {mcpu[k]:8.1f} ms CPU, {len(rows[k])} runs")
if "explicit" in med and "importance" in med:
    print(f"  engine / PyTorch: {med['importance'] / med['explicit']:.2f}x wall, "
          f"{mcpu['importance'] / mcpu['explicit']:.2f}x CPU (target <= 0.5x)")
PY
rm -f "$out"
