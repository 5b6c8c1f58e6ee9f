#!/usr/bin/env bash
# Takes NVIDIA's perf_analyzer out of a tritonclient wheel (the binary it
# ships under <name>.data/data/bin) and writes a wrapper that points it at
# the CUDA 12 runtime it links (it runs without a GPU). Shared by
# scripts/setup.sh (the venv's perf_analyzer) and tests/gpu/run.sh (the
# offline bundle's, from scripts/bundle-deps.sh).
#
#   scripts/perf-analyzer-from-wheel.sh PYTHON WHEEL BINARY WRAPPER CUDART_LIB_DIR
set -euo pipefail
python=$1 wheel=$2 binary=$3 wrapper=$4 cudart=$5
mkdir -p "$(dirname "$binary")" "$(dirname "$wrapper")"
"$python" - "$wheel" "$binary" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = [n for n in z.namelist() if n.endswith(".data/data/bin/perf_analyzer")][0]
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
os.chmod(sys.argv[2], 0o755)
PY
{
  echo '#!/bin/sh'
  echo "# perf_analyzer from $(basename "$wheel") (scripts/perf-analyzer-from-wheel.sh)."
  echo "LD_LIBRARY_PATH=\"$cudart\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" exec \"$binary\" \"\$@\""
} > "$wrapper"
chmod +x "$wrapper"
