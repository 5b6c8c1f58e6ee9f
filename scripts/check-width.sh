#!/bin/sh
# scripts/check-width.sh — every line of src/ within the 100 columns that
# .clang-format sets (ColumnLimit): a line past it is one a reader scrolls
# for, and one clang-format would rewrite on the next edit, mixing a
# reformat into someone else's change. Counted in bytes (Debian's awk is
# mawk), so a µ or → counts 2 or 3: stricter than clang-format, never
# looser. Prints each line over, fails if any.
cd "$(dirname "$0")/.." || exit 2
over=$(find src -name '*.[ch]' -o -name '*.cc' | sort |
  xargs awk 'length($0) > 100 { printf "%s:%d: %d columns\n", FILENAME, FNR, length($0) }')
[ -z "$over" ] && exit 0
echo "$over"
echo "check-width: lines over 100 columns (.clang-format's ColumnLimit)" >&2
exit 1
