#!/usr/bin/env bash
# CLIP's text tower (vit_text_embed) against PyTorch's encode_text (the published module,
# bench/torch_text.py) on the same random B/32 text weights (W 512, 8 heads, 12 layers,
# 77 positions, E 512: B/16's text tower is the same) and N prompts, 8 templates times N/8
# class names as zero-shot labels make them (7 to 15 tokens: "a photo of a {}." with SOT
# and EOT is 8 and more), in turns, 1 and 2 threads, in one run:
#   bench/text.sh [ROUNDS] [N]     (default 3 rounds, 64 prompts)
# Builds build-bench/ (Release), writes the weights (.safetensors for the engine, the same
# as .pth for PyTorch) and the prompts once, then per thread count alternates the engine
# and PyTorch batched three ways (torch_text.py --pad: clip.tokenize's 77 positions,
# padded to the longest prompt, grouped by length: the tokens the engine computes before
# it shares the templates' rows) ROUNDS times, and prints the medians and the ratios,
# wall and CPU time. Compare the ratios of one run, not absolute times
# across runs: these 2-core machines are shared.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
N=${2:-64}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVITLENS_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j2 --target bench_text >/dev/null
W=build-bench/weights
mkdir -p "$W"
if [ ! -f "$W/clip_text_b32.pth" ]; then
  /usr/bin/python3 - "$W" <<'PY'
import sys, pathlib, torch
sys.path.insert(0, "tests/parity")
import test_text_tower as t
from test_parity import write_safetensors
d = pathlib.Path(sys.argv[1])
m = t.random_tower(t.SHAPES["full"], t.QuickGELU(), False, seed=1)
sd = t.openai_state(m)
write_safetensors(d / "clip_text_b32.safetensors", sd, "F32")
torch.save(sd, d / "clip_text_b32.pth")
PY
fi
/usr/bin/python3 - "$W/prompts_$N.txt" "$N" <<'PY'
# N/8 class names of 1 to 4 tokens in 8 templates of 3 to 7 tokens before the class name
# and 1 or 2 after it ("a photo of a {}.": 4 and 1; "a bad photo of the {}." 5 and 1; ...),
# [SOT] template [EOT]: 7 to 15 tokens, random ids (they do not change the time)
import sys, random
r = random.Random(27)
n = int(sys.argv[2])
ids = lambda k: [r.randrange(49406) for _ in range(k)]
templates = [(ids(r.randint(3, 7)), ids(r.randint(1, 2))) for _ in range(8)]
classes = [ids(r.randint(1, 4)) for _ in range(max(1, n // 8))]
with open(sys.argv[1], "w") as f:
    for i in range(n):
        pre, post = templates[i % 8]
        f.write(" ".join(map(str, [49406] + pre + classes[i // 8 % len(classes)] + post + [49407])) + "\n")
PY
M=$W/clip_text_b32
IDS=$W/prompts_$N.txt
out=$(mktemp)
for K in 1 2; do
  export OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$K OMP_NUM_THREADS=$K
  for r in $(seq "$ROUNDS"); do
    echo "threads $K" >>"$out"
    build-bench/bench/bench_text --model "$M.safetensors" --ids "$IDS" --threads "$K" --runs 1 | tee -a "$out"
    sleep 1
    for pad in grouped longest pad77; do
      /usr/bin/python3 bench/torch_text.py --model "$M.pth" --ids "$IDS" --threads "$K" --runs 1 \
        --pad $pad | tee -a "$out"
      sleep 1
    done
  done
done
/usr/bin/python3 - "$out" "$N" <<'PY'
import statistics, sys, subprocess
rows, cpu, tok, K = {}, {}, {}, None
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "threads":
        K = int(f[1])
        continue
    key = (K, f[0])
    rows.setdefault(key, []).extend(float(x) for x in f[1:f.index("cpu")])
    cpu.setdefault(key, []).append(float(f[f.index("cpu") + 1]))
    tok[key] = int(f[f.index("rows" if "rows" in f else "tokens") + 1])
model = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True,
                       text=True).stdout.strip()
print(f"\nCLIP B/32 text tower, {sys.argv[2]} prompts (8 templates x {int(sys.argv[2]) // 8} class "
      f"names, 7 to 15 tokens), {model}; tokens: the rows computed")
names = {"text": "engine (vit_text_embed)", "torch_grouped": "PyTorch, grouped by length",
         "torch_longest": "PyTorch, padded to the longest", "torch_pad77": "PyTorch, 77 (clip.tokenize)"}
for K in sorted({k for k, _ in rows}):
    med = {n: statistics.median(v) for (k, n), v in rows.items() if k == K}
    mcpu = {n: statistics.median(v) for (k, n), v in cpu.items() if k == K}
    print(f" {K} thread(s):")
    for n, v in med.items():
        ratio = "" if n == "text" else \
            f"   engine / this: {med['text'] / v:.2f}x wall, {mcpu['text'] / mcpu[n]:.2f}x CPU"
        print(f"  {names[n]:32s} {v:8.1f} ms wall {mcpu[n]:8.1f} ms CPU  {tok[(K, n)]:5d} tokens"
              f"{ratio}")
print("target: engine <= 0.8x PyTorch")
PY
rm -f "$out"
