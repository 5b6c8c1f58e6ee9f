#!/usr/bin/env bash
# Runs every libFuzzer driver of a PTS_FUZZ build for a bounded time.
#
#   tests/fuzz/run.sh <build-dir> [seconds-per-driver] [driver...]
#
# Each driver starts from its committed seed corpus (tests/fuzz/corpus/<name>,
# read only) plus a work corpus under <build-dir>/fuzz-corpus/<name>, where
# new inputs are kept between runs. A crash, leak, sanitizer report or failed
# property stops the driver, leaves the input in <build-dir>/fuzz-artifacts/
# and makes this script fail. The last line per driver is a summary:
#   fuzz <name>: <executions> executions in <s> s, coverage <n>, corpus <n>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

build=${1:?usage: tests/fuzz/run.sh <build-dir> [seconds] [driver...]}
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
drivers=("$@")
explicit=${#drivers[@]}
if [ "$explicit" -eq 0 ]; then
  for c in tests/fuzz/corpus/*/; do drivers+=("$(basename "$c")"); done
fi

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
# Sanitizer reports must fail the run; leaks are checked at every exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

status=0
for d in "${drivers[@]}"; do
  bin="$build/tests/fuzz/fuzz_$d"
  seeds="tests/fuzz/corpus/$d"
  work="$build/fuzz-corpus/$d"
  log="$build/fuzz-$d.log"
  mkdir -p "$work"
  if [ ! -x "$bin" ]; then
    # Every driver is built when its code is (tests/fuzz/CMakeLists.txt);
    # one asked for by name must exist.
    echo "fuzz $d: not built in $build (configure with CC=clang -DPTS_FUZZ=ON)" >&2
    [ "$explicit" -gt 0 ] && status=1
    continue
  fi
  # -timeout: one input may not take longer than this (a hang is a bug).
  # An input takes milliseconds; 30 s leaves room for fuzz_http's own
  # bounded waits (connect retries, reads, a health check: about 20 s at
  # worst on a busy machine), which catch a server that stops answering.
  # -rss_limit_mb: a client-sized allocation that runs away is a bug too.
  if "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$d-" "$work" "$seeds" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    cov=$(grep -o 'DONE *cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    corp=$(grep -o 'DONE .*corp: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    echo "fuzz $d: ${runs:-?} executions in ${secs:-?} s, coverage ${cov:-?}, corpus ${corp:-?}"
  else
    echo "fuzz $d: FAILED — see $log; the input is in $artifacts/" >&2
    grep -E 'ERROR|SUMMARY|fuzz property failed|runtime error' "$log" | head -5 >&2 || true
    status=1
  fi
done
exit $status
