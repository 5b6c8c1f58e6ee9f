#!/usr/bin/env bash
# bench/gpu/tree_ab.sh BASE_SRC [RAW_DIR] — this tree's ptserve against the
# one of another source tree (BASE_SRC, e.g. `git worktree add /tmp/base
# HEAD~1`), both built Release against the host's pip torch, measured by
# bench/gpu/env_ab.sh: a fresh server per side and round, alternating which
# goes first, HTTP and gRPC. AB_MODEL, AB_INPUT, AB_MODEL_WHAT,
# AB_GRPC_CHANNELS, AB_WHAT, CS and ROUNDS as env_ab.sh says; AB_A_NAME and
# AB_B_NAME name the sides (base, new). bench/gpu/env_report.py RAW_DIR
# writes the table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_SRC="$(cd "${1:?usage: bench/gpu/tree_ab.sh BASE_SRC [RAW_DIR]}" && pwd)"
RAW="${2:-$ROOT/bench/gpu/results/tree-ab}"
PY="${PYTHON:-python3}"
BASE_BUILD="${BASE_BUILD_DIR:-/tmp/pts-tree-ab-base}"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench-gpu}"
source "$ROOT/bench/lib.sh"      # log
source "$ROOT/bench/gpu/lib.sh"  # gpu_build
[ -d "$ROOT/.bundle/debs" ] && source "$ROOT/scripts/use-bundle.sh"
log "build (Release) of $BASE_SRC in $BASE_BUILD"
cmake -S "$BASE_SRC" -B "$BASE_BUILD" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
  -DCMAKE_PREFIX_PATH="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" >/dev/null
cmake --build "$BASE_BUILD" --target ptserve ptperf bench_inproc -j"$(nproc)" >/dev/null
gpu_build
AB_COMMAND="${AB_COMMAND:-tree_ab.sh}" \
AB_A="${AB_A_NAME:-base} BUILD=$BASE_BUILD" AB_B="${AB_B_NAME:-new} BUILD=$BUILD" \
BENCH_PREBUILT=1 BENCH_BUILD_DIR="$BUILD" exec "$ROOT/bench/gpu/env_ab.sh" "$RAW"
