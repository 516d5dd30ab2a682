#!/usr/bin/env bash
# The app's latency under Xvfb (see bench/app_latency.py): launch -> first heatmap,
# key press -> new frame and class switch -> new class-specific map in a window on a
# 1280x960 screen, then key press -> new frame in fullscreen on a 1920x1080 one, on
# random weights of DeiT-Small/16's exact shapes; then steps of the lesson view (Page Down,
# Right, Page Up, Left) and its block keys (Up, Down); then the compare view (--compare) against
# random weights of DeiT-Tiny/16's shapes: cursor moves and layer changes (issue 36).
#   bench/app_latency.sh [app_latency.py options]      e.g. --launches 10 --keys 120
# Builds the app in build-bench/ (Release), writes the weights once (bench/make_weights.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_APP=ON \
  -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target vitlens >/dev/null
model=$(/usr/bin/python3 bench/make_weights.py build-bench/weights deit_small_patch16_224)
model2=$(/usr/bin/python3 bench/make_weights.py build-bench/weights deit_tiny_patch16_224)
image=${VITLENS_BENCH_IMAGE:-../shared/images/chelsea.png}
[ -f "$image" ] || { echo "no photo at $image: set VITLENS_BENCH_IMAGE" >&2; exit 2; }
xvfb-run -a -s "-screen 0 1280x960x24" /usr/bin/python3 bench/app_latency.py \
  --app build-bench/vitlens --model "$model" --image "$image" --compare "$model2" "$@"
exec xvfb-run -a -s "-screen 0 1920x1080x24" /usr/bin/python3 bench/app_latency.py \
  --app build-bench/vitlens --model "$model" --image "$image" --compare "$model2" \
  --fullscreen "$@"
