#!/usr/bin/env bash
# The whole test suite: installs what the tests need (scripts/install-deps.sh, nothing
# when all is there), then builds with warnings as errors and runs ctest in build/, then
# the same in an ASan + UBSan build in build-asan/, then the libFuzzer targets' smoke
# runs in a clang build in build-fuzz/ (docs/robustness.md). .ci/run runs exactly this,
# with CI=true: then a test that skips (exit 77: no ../shared, a tool missing) fails.
# Usage: scripts/test.sh                          everything
#        scripts/test.sh --plain [ctest args...]  only build/      (e.g. -R parity)
#        scripts/test.sh --sanitize [ctest args...] only build-asan/
#        scripts/test.sh --fuzz [ctest args...]   only build-fuzz/ (20 s per fuzz target)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE  # torch's OpenMP threads must not spin against OpenBLAS's
# ctest runs a test per core: numpy's OpenBLAS threads (one per core in each test, spinning after a
# call) would compete with the other test's threads for the same 2 cores. The engine
# turns OpenBLAS's threads off itself (vit.h, "Threads"); torch keeps its own OpenMP threads.
export OPENBLAS_NUM_THREADS=1

run() {  # run DIR [cmake flags...] -- [ctest args...]
  local dir=$1; shift
  local flags=()
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  cmake -S . -B "$dir" -DVITLENS_WERROR=ON "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  # a job per core; the window tests (RUN_SERIAL) run alone
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "$@")
}
plain=(build --)
asan=(build-asan -DVITLENS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug --)
fuzz=(build-fuzz -DCMAKE_C_COMPILER=clang -DVITLENS_FUZZ=ON --)

case "${1:-}" in
  --plain) shift; run "${plain[@]}" "$@" ;;
  --sanitize) shift; run "${asan[@]}" "$@" ;;
  --fuzz) shift; run "${fuzz[@]}" "$@" ;;
  "") scripts/install-deps.sh
      run "${plain[@]}"
      run "${asan[@]}"
      run "${fuzz[@]}" ;;
  *) echo "usage: scripts/test.sh [--plain | --sanitize | --fuzz [ctest args...]]" >&2; exit 2 ;;
esac
