#!/usr/bin/env bash
# A longer fuzzing campaign than the 20 s smoke tests: each target in turn for
# SECONDS (default 600), at the lowest CPU priority, from the seeds, regress/ and
# what earlier campaigns kept. Needs the fuzz build (scripts/test.sh --fuzz, or
# cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVITLENS_FUZZ=ON).
# Usage: tests/fuzz/campaign.sh [SECONDS] [TARGET...]   (targets: safetensors config image pth pickle
# pickle_ops layout tokenize; default all of them; tokenize reads CLIP's vocabulary from
# VITLENS_CLIP_VOCAB, default ../shared/clip/bpe_simple_vocab_16e6.txt.gz)
# Writes build-fuzz/campaign/<target>/ (the corpus, kept between runs), <target>.log and
# artifacts/<target>-crash-* (an input that crashed: add it to tests/fuzz/regress/<target>/
# once fixed). Prints one summary line per target; exits 1 if any target found something.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(safetensors config image pth pickle pickle_ops layout tokenize)
export VITLENS_CLIP_VOCAB=${VITLENS_CLIP_VOCAB:-$PWD/../shared/clip/bpe_simple_vocab_16e6.txt.gz}
bin=build-fuzz/tests/fuzz
out=build-fuzz/campaign
mkdir -p "$out/artifacts"
[ -d "$bin/seeds/layout" ] || "$bin/fuzz_seeds" "$bin/seeds" >/dev/null
[ -d "$bin/seeds/pth" ] || /usr/bin/python3 tests/fuzz/pth_seeds.py "$bin/seeds" >/dev/null
export OPENBLAS_NUM_THREADS=1
# leaks that are a library's own (lsan.supp: which and why), so that a campaign goes on past them
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0
# as tests/fuzz/CMakeLists.txt's FUZZ_LIMITS: an input over 2 s or 512 MB is a finding
limits=(-timeout=2 -rss_limit_mb=512 -malloc_limit_mb=512)
# ASan keeps 256 MB of freed blocks by default (its quarantine), which the RSS limit would
# count as the target's: a pickle spending its 32 MiB budget, run again and again, held
# 388 MB of RSS with it and 94 MB with 32 MB (session 3's "out-of-memory" at 524 MB was that)
export ASAN_OPTIONS=quarantine_size_mb=32${ASAN_OPTIONS:+:$ASAN_OPTIONS}
# KEEP_GOING=1: go on past a finding (libFuzzer's fork mode, one job), each one written to
# artifacts/, so that one campaign reports every class it reaches, not just the first
[ "${KEEP_GOING:-0}" = 1 ] && limits+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
# RUNS=N: stop after N inputs (or SECONDS, the first reached); NICE=0: at full priority, e.g.
# as the CPU-bound neighbours of a test run (docs/robustness.md, "Campaigns of issue 34")
runs=(); [ -n "${RUNS:-}" ] && runs=(-runs="$RUNS")
rc=0
for t in "${targets[@]}"; do
  mkdir -p "$out/$t"
  regress=(); [ -d "tests/fuzz/regress/$t" ] && regress=("tests/fuzz/regress/$t")
  [ "$t" = layout ] && regress+=(assets/layouts)
  dict=(); [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  nice -n "${NICE:-19}" "$bin/fuzz_$t" -max_total_time="$secs" "${limits[@]}" "${runs[@]}" \
    -print_final_stats=1 "${dict[@]}" \
    -artifact_prefix="$out/artifacts/$t-" \
    "$out/$t" "$bin/seeds/$t" "${regress[@]}" >"$out/$t.log" 2>&1 || rc=1
  pcs=$(grep -o 'Loaded 1 modules *([0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -1 | grep -o '[0-9]*')
  execs=$(grep -o 'number_of_executed_units: [0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  rate=$(grep -o 'average_exec_per_sec: *[0-9]*' "$out/$t.log" | grep -o '[0-9]*$')
  # ASan's "==PID==ERROR", libFuzzer's own "==PID== ERROR: libFuzzer: deadly signal" (an abort)
  found=$(grep -cE '^==[0-9]+== ?ERROR|runtime error|ALARM|out-of-memory' "$out/$t.log")
  if [ "${KEEP_GOING:-0}" = 1 ]; then # fork mode's status lines: "#RUNS: cov: ... oom/timeout/crash: a/b/c"
    last=$(grep -E '^#[0-9]+: cov' "$out/$t.log" | tail -1)
    execs=$(echo "$last" | grep -oE '^#[0-9]+' | tr -d '#')
    rate=$(( ${execs:-0} / secs ))
    found=$(echo "$last" | grep -oE 'crash: [0-9]+/[0-9]+/[0-9]+' | grep -oE '[0-9]+' | paste -sd+ | bc)
  fi
  echo "fuzz_$t: ${secs} s, ${execs:-?} runs (${rate:-?}/s), coverage ${cov:-?} of ${pcs:-?}" \
       "edges, corpus $(ls "$out/$t" | wc -l) files, findings $found (log: $out/$t.log)"
done
exit $rc
