#!/usr/bin/env bash
# CLIP's tokenizer: vit_tokenize on the 10 000 strings of tests/text (same seed) against
# the Python reference that test writes from simple_tokenizer.py (the regex module, its
# BPE cache), in one run. Usage: bench/tokenize.sh [BUILD] [VOCAB]
#   (default build, ../shared/clip/bpe_simple_vocab_16e6.txt.gz)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; vocab=${2:-../shared/clip/bpe_simple_vocab_16e6.txt.gz}
cmake --build "$build" --target bench_tokenize >/dev/null
dir=$build/bench/tokenize; mkdir -p "$dir"
/usr/bin/python3 - "$dir" "$vocab" <<'PY'
import random, sys, time
sys.path.insert(0, "tests/text")
import test_tokenizer as T
d, vocab = sys.argv[1], sys.argv[2]
rng = random.Random(20261126)
texts = [T.draw(rng) for _ in range(10000)]
open(f"{d}/texts.hex", "w").write("".join(t.encode().hex() + "\n" for t in texts))
t0 = time.perf_counter()
ref = T.Reference(vocab)
load = time.perf_counter() - t0
best = 1e30
for _ in range(3):
    ref.cache = {T.SOT: [T.SOT], T.EOT: [T.EOT]}  # each pass from an empty cache
    t0 = time.perf_counter()
    n = sum(len(ref.encode(t)[0]) for t in texts)
    best = min(best, time.perf_counter() - t0)
print(f"python reference: {len(texts)} texts, {n} tokens, best of 3: {1e3 * best:.1f} ms: "
      f"{n / best:.0f} tokens/s; vocabulary load {1e3 * load:.1f} ms")
PY
"$build/bench/bench_tokenize" "$vocab" "$dir/texts.hex" 5
