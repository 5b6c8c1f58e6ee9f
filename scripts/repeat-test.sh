#!/usr/bin/env bash
# Flake check: runs the whole `make test` N times in a row (default 3), each
# on a fresh clone of HEAD, while a CPU hog keeps every core busy, and writes
# a summary to tests/results/repeat-test.md (the full logs stay in the work
# directory). Exits non-zero when any run failed.
#
#   [HOGS=N] scripts/repeat-test.sh [RUNS] [WORKDIR]
#
# The hog is HOGS busy loops (default one per core) at the default nice
# level, so the suite competes for the CPU the way it does on a shared,
# busy build machine.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
runs=${1:-3}
work=${2:-$(mktemp -d /tmp/ptserve-repeat.XXXXXX)}
summary=$root/tests/results/repeat-test.md
mkdir -p "$work" "$(dirname "$summary")"

n_hogs=${HOGS:-$(nproc)}
hogs=()
for _ in $(seq "$n_hogs"); do
  (while :; do :; done) &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT

commit=$(git rev-parse --short HEAD)
started=$(date -u +%Y-%m-%dT%H:%MZ)
rows=()
failed=0
for i in $(seq "$runs"); do
  dir=$work/run$i
  rm -rf "$dir"
  git clone -q "$root" "$dir"
  run_commit=$(git -C "$dir" rev-parse --short HEAD)
  start=$(date +%s)
  (cd "$dir" && CI=true make test) > "$work/run$i.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # The counts each runner printed last: ctest's, pytest's (normal and ASan
  # passes) and the fuzz drivers'.
  counts=$(grep -E "tests passed|tests failed|[0-9]+ passed|[0-9]+ failed|^fuzz [a-z_]+:" "$work/run$i.log" \
           | grep -vE "^\.|PASSED|FAILED " | sed 's/^ *//' | tr '\n' ';' | sed 's/;$//')
  rows+=("| $i | \`$run_commit\` | $rc | $secs | $counts |")
  [ "$rc" -eq 0 ] || failed=1
  echo "repeat-test: run $i exit $rc in ${secs}s"
done

{
  echo "# make test, $runs runs in a row under a CPU hog"
  echo
  echo "Produced by \`HOGS=$n_hogs scripts/repeat-test.sh $runs\`, started on $started at commit \`$commit\`,"
  echo "$(nproc) cores, $n_hogs busy loop(s) running beside the suite; each run on a fresh"
  echo "\`git clone\` of that commit (its own build directories and venv)."
  echo
  echo "| run | commit | exit | seconds | what the runners printed last |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} > "$summary"
echo "repeat-test: summary in $summary, logs in $work"
exit $failed
