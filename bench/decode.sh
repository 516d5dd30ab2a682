#!/usr/bin/env bash
# JPEG decoding time, stb_image against libjpeg-turbo (bench/bench_decode.c), on a
# 12-megapixel photo (4000 x 3000) that Pillow writes at quality 90 (4:2:0, as cameras):
# shared/images/rocket.jpg resized, with noise (sigma 8 levels) so that it codes like a camera photo (3.3 MB).
#   bench/decode.sh [RUNS]           (default 7 runs each, the median reported)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_decode >/dev/null
photo=build-bench/photo_12mp.jpg
if [ ! -f "$photo" ]; then
  /usr/bin/python3 - "$photo" <<'PY'
import sys
import numpy as np
from PIL import Image
src = Image.open("../shared/images/rocket.jpg").convert("RGB").resize((4000, 3000), Image.BICUBIC)
a = np.asarray(src).astype(np.float32)
a += np.random.default_rng(0).normal(0, 8, a.shape)
Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(sys.argv[1], quality=90)
PY
fi
exec build-bench/bench/bench_decode "$photo" "${1:-7}"
