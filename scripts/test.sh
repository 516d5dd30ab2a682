#!/usr/bin/env bash
# Build and run the whole test suite (ctest). --sanitize: ASan+UBSan build in build-asan/.
# Usage: scripts/test.sh [--sanitize] [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build; flags=(-DVITLENS_WERROR=ON)
if [ "${1:-}" = "--sanitize" ]; then
  shift; dir=build-asan; flags+=(-DVITLENS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
fi
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
export OMP_WAIT_POLICY=PASSIVE  # torch's OpenMP threads must not spin against OpenBLAS's
cd "$dir" && ctest --output-on-failure "$@"
