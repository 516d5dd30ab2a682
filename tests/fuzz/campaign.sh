#!/usr/bin/env bash
# A longer fuzzing campaign than the 20 s smoke tests: each target in turn for
# SECONDS (default 600), at the lowest CPU priority, from the seeds, regress/ and
# what earlier campaigns kept. Needs the fuzz build (scripts/test.sh --fuzz, or
# cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVITLENS_FUZZ=ON).
# Usage: tests/fuzz/campaign.sh [SECONDS] [TARGET...]   (targets: safetensors config image pth pickle)
# Writes build-fuzz/campaign/<target>/ (the corpus, kept between runs), <target>.log and
# artifacts/<target>-crash-* (an input that crashed: add it to tests/fuzz/regress/<target>/
# once fixed). Prints one summary line per target; exits 1 if any target found something.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(safetensors config image pth pickle)
bin=build-fuzz/tests/fuzz
out=build-fuzz/campaign
mkdir -p "$out/artifacts"
[ -d "$bin/seeds" ] || "$bin/fuzz_seeds" "$bin/seeds" >/dev/null
[ -d "$bin/seeds/pth" ] || /usr/bin/python3 tests/fuzz/pth_seeds.py "$bin/seeds" >/dev/null
export OPENBLAS_NUM_THREADS=1
# leaks that are a library's own (lsan.supp: which and why), so that a campaign goes on past them
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0
rc=0
for t in "${targets[@]}"; do
  mkdir -p "$out/$t"
  regress=(); [ -d "tests/fuzz/regress/$t" ] && regress=("tests/fuzz/regress/$t")
  nice -n 19 "$bin/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -print_final_stats=1 -dict="tests/fuzz/$t.dict" \
    -artifact_prefix="$out/artifacts/$t-" \
    "$out/$t" "$bin/seeds/$t" "${regress[@]}" >"$out/$t.log" 2>&1 || rc=1
  pcs=$(grep -o 'Loaded 1 modules *([0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -1 | grep -o '[0-9]*')
  execs=$(grep -o 'number_of_executed_units: [0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  rate=$(grep -o 'average_exec_per_sec: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  found=$(grep -cE '^==[0-9]+==ERROR|runtime error|ALARM|out-of-memory' "$out/$t.log")
  echo "fuzz_$t: ${secs} s, ${execs:-?} runs (${rate:-?}/s), coverage ${cov:-?} of ${pcs:-?}" \
       "edges, corpus $(ls "$out/$t" | wc -l) files, findings $found (log: $out/$t.log)"
done
exit $rc
