#!/usr/bin/env bash
# Produces the figures of docs/reliability.md.
#
#   scripts/reliability-report.sh [fuzz-seconds-per-driver] [soak-seconds]
#
# Builds what it needs (the clang fuzz build and the ASan+UBSan build, as
# `make fuzz-build` and `make asan-build` do), then runs:
#   1. every libFuzzer driver for the given time (default 60 s each);
#   2. the allocation-failure walks (tests/unit/torture) under ASan;
#   3. the soak test (default 120 s) against the ASan+UBSan server;
# and prints a Markdown section with the figures. Paste it into
# docs/reliability.md ("Latest figures"). Fails if any step fails.
#
# Environment: FUZZ_DIR (build-fuzz), ASAN_DIR (build-asan), CMAKE_EXTRA
# (e.g. -DPTS_WITH_TORCH=OFF), PYTHON (.venv/bin/python), JOBS (2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fuzz_s=${1:-60}
soak_s=${2:-120}
FUZZ_DIR=${FUZZ_DIR:-build-fuzz}
ASAN_DIR=${ASAN_DIR:-build-asan}
PYTHON=${PYTHON:-$PWD/.venv/bin/python}
JOBS=${JOBS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== building (fuzz: $FUZZ_DIR, ASan: $ASAN_DIR)" >&2
make --no-print-directory fuzz-build FUZZ_DIR="$FUZZ_DIR" JOBS="$JOBS" >"$out/fuzz-build.log" 2>&1 ||
  { tail -30 "$out/fuzz-build.log" >&2; exit 1; }
make --no-print-directory asan-build ASAN_DIR="$ASAN_DIR" JOBS="$JOBS" \
  CMAKE_EXTRA="${CMAKE_EXTRA:-}" >"$out/asan-build.log" 2>&1 ||
  { tail -30 "$out/asan-build.log" >&2; exit 1; }

export ASAN_OPTIONS=detect_leaks=1:detect_odr_violation=0:alloc_dealloc_mismatch=0
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

echo "== fuzzing, $fuzz_s s per driver" >&2
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 tests/fuzz/run.sh "$FUZZ_DIR" "$fuzz_s" \
  | tee "$out/fuzz.txt" >&2

echo "== allocation-failure walks" >&2
for t in config_torture_test request_torture_test; do
  "$ASAN_DIR/$t" 2>&1 | tee -a "$out/torture-raw.txt" >&2
done
grep '^torture ' "$out/torture-raw.txt" >"$out/torture.txt"

echo "== soak, $soak_s s, against $ASAN_DIR/ptserve" >&2
PTS_SOAK_SECONDS="$soak_s" PTS_SOAK_REPORT="$out/soak.json" PTSERVE_BIN="$PWD/$ASAN_DIR/ptserve" \
  "$PYTHON" -m pytest -q -s tests/e2e/test_soak.py >&2

echo "== counting the bad-input cases" >&2
cases=$(PTSERVE_BIN="$PWD/$ASAN_DIR/ptserve" "$PYTHON" -m pytest -q --collect-only \
  tests/e2e/test_bad_inputs.py tests/e2e/test_limits.py tests/e2e/test_security.py \
  tests/e2e/test_shutdown.py 2>/dev/null | grep -c '::' || true)

"$PYTHON" - "$out" "$fuzz_s" "$soak_s" "$cases" <<'PY'
import json, re, subprocess, sys, datetime
out, fuzz_s, soak_s, cases = sys.argv[1:5]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip() or "?"
print("### Latest figures\n")
print("Produced by `scripts/reliability-report.sh %s %s` on %s (commit %s; fuzzers with "
      "libFuzzer+ASan+UBSan, walks and soak with ASan+UBSan)." % (
          fuzz_s, soak_s, datetime.date.today().isoformat(), commit))
print("\n| fuzz driver | executions | seconds | coverage (edges) | corpus |")
print("|---|---:|---:|---:|---:|")
total = 0
for line in open(out + "/fuzz.txt"):
    m = re.match(r"fuzz (\S+): (\d+) executions in (\d+) s, coverage (\S+), corpus (\S+)", line)
    if m:
        total += int(m.group(2))
        print("| %s | %s | %s | %s | %s |" % m.groups())
print("| **all** | **%d** | | | |" % total)
print("\nNo crash, leak, sanitizer report, timeout or failed property in any driver.")
print("\n| allocation-failure walk | allocation points | failed cleanly | of which NOMEM |")
print("|---|---:|---:|---:|")
for line in open(out + "/torture.txt"):
    m = re.match(r"torture (.+): (\d+) allocation points, (\d+) failed cleanly \((\d+) as NOMEM\)",
                 line)
    if m:
        print("| %s | %s | %s | %s |" % m.groups())
s = json.load(open(out + "/soak.json"))
print("\n| soak | value |")
print("|---|---:|")
rows = [("duration (s)", s["seconds"]), ("concurrent clients", s["clients"]),
        ("requests", s["requests"]), ("valid requests", s["valid"]),
        ("invalid requests", s["invalid"]), ("requests/s (ASan build)", s["requests_per_second"]),
        ("valid requests lost", s["lost_valid"]), ("wrong refusals", s["wrong_refusals"]),
        ("reloads of id_fp32 meanwhile", s.get("reloads", "-")),
        ("failed reloads", s.get("failed_reloads", "-")),
        ("crashes", s["crashes"]), ("exit status after SIGTERM", s["exit_code"]),
        ("sanitizer reports", len(s["sanitizer_reports"])),
        ("RSS after warm-up (KiB)", s["rss_kb_after_warmup"]),
        ("RSS at end (KiB)", s["rss_kb_end"]), ("RSS growth (KiB)", s["rss_growth_kb"])]
for k, v in rows:
    print("| %s | %s |" % (k, v))
print("\nEnd-to-end bad-input, limit, security and shutdown cases: %s." % cases)
PY
