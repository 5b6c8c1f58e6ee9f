#!/usr/bin/env bash
# One LibTorch per build: every ELF binary and shared library under a build
# folder loads its libc10 and libtorch* from the one LibTorch that CMake
# chose, and from nowhere else. Two in one process (the wheel's 2.x and
# Debian's libtorch-dev 1.13, say) abort in c10's static initialisers
# before main. ctest runs it as `one_libtorch` (CMakeLists.txt).
#
#   scripts/check-one-libtorch.sh <build dir> <LibTorch's lib dir>
#
# For each file, `ldd` (the dynamic loader's own resolution, without
# running it) lists what it would load; any libc10*/libtorch* outside the
# lib dir, or one the loader cannot find, fails the check, naming the file.
set -euo pipefail
build=${1:?usage: check-one-libtorch.sh <build dir> <LibTorch lib dir>}
libdir=$(cd "${2:?usage: check-one-libtorch.sh <build dir> <LibTorch lib dir>}" && pwd -P)

checked=0 bad=0
while IFS= read -r -d '' f; do
  # ELF files only (scripts and data are executable too, sometimes).
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  out=$(ldd "$f" 2>&1) || continue # static, or not for this machine
  checked=$((checked + 1))
  while read -r name arrow path _; do
    case "$name" in libc10*|libtorch*) ;; *) continue ;; esac
    if [ "$arrow" != "=>" ] || [ "$path" = "not" ]; then
      echo "one_libtorch: $f: $name is not found" >&2
      bad=$((bad + 1))
      continue
    fi
    real=$(cd "$(dirname "$path")" && pwd -P)
    if [ "$real" != "$libdir" ]; then
      echo "one_libtorch: $f loads $name from $path, not from $libdir" >&2
      bad=$((bad + 1))
    fi
  done <<< "$out"
done < <(find "$build" -path "$build/CMakeFiles" -prune -o -type f \
           \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0)

if [ "$checked" -eq 0 ]; then
  echo "one_libtorch: no ELF file under $build" >&2
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  echo "one_libtorch: $bad libraries of $checked files from outside $libdir" >&2
  exit 1
fi
echo "one_libtorch: $checked files, every libc10/libtorch from $libdir"
