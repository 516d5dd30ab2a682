#!/usr/bin/env bash
# The whole test suite: installs what the tests need (scripts/install-deps.sh, nothing
# when all is there), then builds with warnings as errors and runs ctest in build/, then
# the same in an ASan + UBSan build in build-asan/, then the libFuzzer targets' smoke
# runs in a clang build in build-fuzz/ (docs/robustness.md). .ci/run runs exactly this,
# with CI=true: then a test that skips (exit 77: no ../shared, a tool missing) fails.
# After the plain run, its numeric tests (NUMERIC: parity, backward, .pth checkpoints, on
# the models the tests write) run again with each other family of OpenBLAS's kernels the CPU
# runs (other_kernels): their sums go in another order, and the tolerances must hold on any CPU.
# Usage: scripts/test.sh                          everything
#        scripts/test.sh --plain [ctest args...]  only build/      (e.g. -R parity)
#        scripts/test.sh --kernels                 only build/'s numeric tests with the other
#                                                 kernel families (build/ as it is built)
#        scripts/test.sh --sanitize [ctest args...] only build-asan/
#        scripts/test.sh --fuzz [ctest args...]   only build-fuzz/ (20 s per fuzz target)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE  # torch's OpenMP threads must not spin against OpenBLAS's
# ctest runs a test per core: numpy's OpenBLAS threads (one per core in each test, spinning after a
# call) would compete with the other test's threads for the same 2 cores. The engine
# turns OpenBLAS's threads off itself (vit.h, "Threads"); torch keeps its own OpenMP threads.
export OPENBLAS_NUM_THREADS=1

# ctest's cost file for a tree that has none: tests/slow-tests.txt's column for this build
# (ASan's for build-asan), so that the slowest tests start first
seed_costs() {
  local f="$1/Testing/Temporary/CTestCostData.txt" col=2
  [ -f "$f" ] && return 0
  case "$1" in *asan*) col=3 ;; esac
  mkdir -p "${f%/*}"
  { awk -v c="$col" '!/^#/ && NF == 3 && $c > 0 { print $1, 1, $c }' tests/slow-tests.txt
    echo "---"; } > "$f"
}

run() {  # run DIR [cmake flags...] -- [ctest args...]
  local dir=$1; shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  cmake -S . -B "$dir" -DVITLENS_WERROR=ON "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  seed_costs "$dir"
  # a job per core; the window tests (RUN_SERIAL) run alone
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "$@")
}
# The numeric tests on the models the tests write (not the controls, DeiT-Tiny or ViT-B)
NUMERIC='^(parity_(random|family_|resize|dtype|preprocess)|backward_(family_|random)|pth_backward_|pth_style_(notebook|timm|torchvision_small))'

# The kernel families to run NUMERIC with besides the one the plain run used (test_blas names
# what the engine runs, after blas.c's start again, under this environment's OPENBLAS_CORETYPE):
# every family of the three x86-64 ones this CPU runs that the plain run did not: SkylakeX
# (AVX-512 F, BW, DQ, VL; OpenBLAS's Cooperlake and SapphireRapids use its sgemm), Haswell
# (AVX2 and FMA; Zen's kernels are Haswell's), Prescott (SSE3, every x86-64 CPU). So on an
# AVX-512 machine all three run whichever the environment picks (OPENBLAS_CORETYPE=Haswell is
# set on some); on a CPU without AVX2 Sandybridge (AVX) stands in for the families it lacks.
kernel_family() {
  case "$1" in
    SkylakeX|Cooperlake|SapphireRapids) echo SkylakeX ;;
    Haswell|Zen|Skylake) echo Haswell ;;
    *) echo "$1" ;;
  esac
}

other_kernels() {
  local ran flags fams=()
  # (test_blas fails when told Prescott on a CPU with AVX2: its line says which all the same)
  ran=$({ build/tests/engine/test_blas "two words" "é" 2>/dev/null || true; } |
        sed -n 's/^kernels \([^ ]*\).*/\1/p')
  if [ -z "$ran" ]; then return 0; fi  # not x86-64 or no OpenBLAS name: nothing to choose
  ran=$(kernel_family "$ran")
  flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
  if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512dq "* &&
        $flags == *" avx512vl "* ]]; then fams+=(SkylakeX); fi
  if [[ $flags == *" avx2 "* && $flags == *" fma "* ]]; then fams+=(Haswell)
  elif [[ $flags == *" avx "* ]]; then fams+=(Sandybridge); fi
  fams+=(Prescott)
  for f in "${fams[@]}"; do [ "$f" = "$ran" ] || echo "$f"; done
}

second_kernels() {  # NUMERIC in build/ again with each other kernel family
  local others
  others=$(other_kernels)
  if [ -z "$others" ]; then
    echo "test.sh: no other OpenBLAS kernel family for this CPU; the numeric tests ran once"
    return 0
  fi
  for other in $others; do
    echo "test.sh: the numeric tests again with OPENBLAS_CORETYPE=$other"
    (cd build && OPENBLAS_CORETYPE=$other ctest --output-on-failure -j"$(nproc)" -R "$NUMERIC" -E _control)
  done
}

plain=(build --)
asan=(build-asan -DVITLENS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug --)
fuzz=(build-fuzz -DCMAKE_C_COMPILER=clang -DVITLENS_FUZZ=ON --)

case "${1:-}" in
  --plain) shift; run "${plain[@]}" "$@" ;;
  --sanitize) shift; run "${asan[@]}" "$@" ;;
  --fuzz) shift; run "${fuzz[@]}" "$@" ;;
  --kernels) second_kernels ;;
  "") scripts/install-deps.sh
      run "${plain[@]}"
      second_kernels
      run "${asan[@]}"
      run "${fuzz[@]}" ;;
  *) echo "usage: scripts/test.sh [--plain | --sanitize | --fuzz [ctest args...] | --kernels]" >&2
     exit 2 ;;
esac
