#!/usr/bin/env bash
# The GPU suite, on a host with an NVIDIA GPU and a pip torch 2.x with CUDA:
# builds ptserve against that torch's LibTorch (C deps from the offline
# bundle when the host lacks them), then runs the unit tests, tests/gpu and
# the CPU end-to-end suite (skipped with PTS_GPU_ONLY=1; PTS_E2E_ONLY=1 runs
# it alone, as a later call of a short device lease, PTS_E2E_PART=k/n a part
# of it; arguments are pytest's for it). Writes everything to ${OUT:-.}/gpu-tests.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${OUT:-.}/gpu-tests.log
exec > >(tee "$log") 2>&1
[ -d .bundle/debs ] && source scripts/use-bundle.sh
PY=${PYTHON:-python3}
export PTS_MODELS_PYTHON=$PY  # the generators need this torch, not /usr/bin/python3
torch_cmake=$($PY -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "== torch $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)') on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTS_WERROR=ON \
  -DCMAKE_PREFIX_PATH="$torch_cmake" -DPython3_EXECUTABLE="$(command -v $PY)" \
  -DPTS_PYTHON="$(command -v $PY)" || exit 1
cmake --build build-gpu -j"$(nproc)" || exit 1
rc=0
# test_shm_cuda.py makes its regions with tritonclient.utils (its
# cuda_shared_memory needs cuda-python), and the CPU end-to-end suite drives
# the server with tritonclient, grpcio and hyper-h2. An offline host gets
# the wheels scripts/bundle-deps.sh put in .bundle/wheels: those whose
# package this interpreter lacks and whose tags it takes are installed into
# .bundle/py (nothing system-wide). Say so when tritonclient still does not
# import (those tests then fail, naming it; the others run).
if ls .bundle/wheels/*.whl >/dev/null 2>&1; then
  export PYTHONPATH=$PWD/.bundle/py${PYTHONPATH:+:$PYTHONPATH}
  lacking=$($PY - .bundle/wheels/*.whl <<'PY'
import importlib.metadata as md, os, sys
tag = "-cp%d%d-" % sys.version_info[:2]
for path in sys.argv[1:]:
    name = os.path.basename(path)
    if not ("-py3-none-any" in name or "-abi3-" in name or tag in name):
        continue  # built for another Python
    try:
        md.distribution(name.split("-")[0])
    except md.PackageNotFoundError:
        print(path)
PY
)
  if [ -n "$lacking" ]; then
    echo "== installing into .bundle/py:" $(for w in $lacking; do basename "$w" | cut -d- -f1-2; done)
    $PY -m pip install -q --root-user-action=ignore --no-deps --no-index --upgrade --target .bundle/py $lacking
  fi
fi
# perf_analyzer from the bundle, as scripts/setup.sh makes it elsewhere:
# the wheel's binary behind a wrapper that points it at the CUDA 12
# runtime it links (libb64 comes with the .debs, on LD_LIBRARY_PATH).
if [ -z "${PERF_ANALYZER:-}" ] && ls .bundle/perf_analyzer/tritonclient-*.whl >/dev/null 2>&1; then
  pa=$PWD/.bundle/perf_analyzer
  [ -x "$pa/bin/perf_analyzer" ] ||
    scripts/perf-analyzer-from-wheel.sh "$PY" "$(ls "$pa"/tritonclient-*.whl | tail -1)" \
      "$pa/bin/perf_analyzer.bin" "$pa/bin/perf_analyzer" "$pa/lib"
  export PERF_ANALYZER=$pa/bin/perf_analyzer
  "$PERF_ANALYZER" --version >/dev/null 2>&1 || echo "NOTE: $PERF_ANALYZER does not run here"
fi
$PY -c 'import tritonclient.utils.cuda_shared_memory' 2>/dev/null ||
  echo "NOTE: tritonclient.utils.cuda_shared_memory does not import here: tests/gpu/test_shm_cuda.py will fail; install tritonclient and cuda-python (or run scripts/bundle-deps.sh where there is a network and carry .bundle)"
if [ "${PTS_E2E_ONLY:-0}" = 1 ]; then  # the second call of a short device lease
  echo "== PTS_E2E_ONLY=1: unit tests and tests/gpu not run"
else
  echo "== unit tests"; ctest --test-dir build-gpu --output-on-failure || rc=1
  echo "== GPU end-to-end tests"
  # Tests append what they measured to this file; it ends the section.
  export PTS_GPU_MEASUREMENTS=$(mktemp)
  PTSERVE_BIN=$PWD/build-gpu/ptserve $PY -m pytest -q -rs -p no:cacheprovider tests/gpu || rc=1
  echo "== measurements"; cat "$PTS_GPU_MEASUREMENTS"; rm -f "$PTS_GPU_MEASUREMENTS"
  if [ "${PTS_GPU_ONLY:-0}" = 1 ]; then  # a short device lease: tests/gpu only
    echo "== gpu suite exit $rc (PTS_GPU_ONLY=1: CPU end-to-end suite not run)"
    exit $rc
  fi
fi
echo "== CPU end-to-end suite against the CUDA build"
# This host has no network: tools that scripts/setup.sh would install (a
# gRPC stub generator, tritonclient, perf_analyzer) may be missing. With
# PTS_SKIP_MISSING_TOOLS=1 the tests that need one skip themselves, each
# naming what is missing (-rs lists them); in CI a missing tool fails.
# Arguments choose what of it runs (pytest's: files, -k ...); all of it by
# default. With perf_analyzer there the whole suite takes longer than one
# ten-minute device call: PTS_E2E_PART=k/n runs the k-th of n parts, the
# files dealt out in turn (every n-th from the k-th), so that n calls run it all.
sel=("$@")
if [ ${#sel[@]} = 0 ]; then
  sel=(tests/e2e)
  if [ -n "${PTS_E2E_PART:-}" ]; then
    k=${PTS_E2E_PART%/*} n=${PTS_E2E_PART#*/}
    if ! [[ $k =~ ^[0-9]+$ && $n =~ ^[0-9]+$ ]] || [ "$k" -lt 1 ] || [ "$k" -gt "$n" ]; then
      echo "PTS_E2E_PART must be k/n with 1 <= k <= n, not '$PTS_E2E_PART'"; exit 2
    fi
    mapfile -t files < <(ls tests/e2e/test_*.py | sort)
    sel=()
    for ((i = k - 1; i < ${#files[@]}; i += n)); do sel+=("${files[i]}"); done
    echo "== part $PTS_E2E_PART: ${#sel[@]} of ${#files[@]} files"
  fi
fi
PTSERVE_BIN=$PWD/build-gpu/ptserve PTS_MODELS_PYTHON=$PY PTS_SKIP_MISSING_TOOLS=1 \
  $PY -m pytest -q -rs -p no:cacheprovider "${sel[@]}" || rc=1
echo "== gpu suite exit $rc"
exit $rc
