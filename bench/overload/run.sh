#!/usr/bin/env bash
# bench/overload/run.sh — the overload issue's attacks against the build
# before the overload work and the current tree; the figures of
# docs/reliability.md ("Overload").
#
#   bench/overload/run.sh [scale]
#
# 1. builds the current tree (no LibTorch: the identity backend serves the
#    attacks) in build-bench-overload/, and BEFORE_REF (default 9ee7bae,
#    the last commit without the overload work) in build-bench-overload-before/
#    from a temporary git worktree — or takes BEFORE_BIN / AFTER_BIN as given;
# 2. runs attack.py (descriptors exhausted under prlimit --nofile=512 with
#    584 idle connections; 60 connections stalling after 50 MB of a 60 MB
#    body; five rounds of that, closed in the middle) at the issue's sizes
#    times `scale` (default 1: about 3 GB held at once by the build before);
# 3. writes bench/overload/results/results.md, results.json and rss.png
#    (server logs in results/logs/, not committed).
#
# Needs prlimit (util-linux) and the project venv (requests, tritonclient,
# matplotlib). Environment: BEFORE_REF, BEFORE_BIN, AFTER_BIN, JOBS (2).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SCALE="${1:-1}"
JOBS="${JOBS:-2}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
BEFORE_REF="${BEFORE_REF:-9ee7bae}"

build() { # dir source-dir
  cmake -S "$2" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTS_WITH_TORCH=OFF \
    -DPTS_BUILD_TESTS=OFF >/dev/null
  cmake --build "$1" -j"$JOBS" --target ptserve >/dev/null
}

if [ -z "${AFTER_BIN:-}" ]; then
  echo "== building the current tree" >&2
  build build-bench-overload "$ROOT"
  AFTER_BIN="$ROOT/build-bench-overload/ptserve"
fi
if [ -z "${BEFORE_BIN:-}" ]; then
  echo "== building $BEFORE_REF" >&2
  src="$(mktemp -d /tmp/pts_overload_before.XXXXXX)"
  trap 'git worktree remove --force "$src" >/dev/null 2>&1 || true' EXIT
  git worktree add --detach "$src" "$BEFORE_REF" >/dev/null 2>&1
  build "$ROOT/build-bench-overload-before" "$src"
  BEFORE_BIN="$ROOT/build-bench-overload-before/ptserve"
fi
echo "== attacks (scale $SCALE)" >&2
"$PY" bench/overload/attack.py --before "$BEFORE_BIN" --after "$AFTER_BIN" \
  --out bench/overload/results --scale "$SCALE"
cat bench/overload/results/results.md
