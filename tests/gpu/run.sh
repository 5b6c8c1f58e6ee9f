#!/usr/bin/env bash
# The GPU suite, on a host with an NVIDIA GPU and a pip torch 2.x with CUDA:
# builds ptserve against that torch's LibTorch (C deps from the offline
# bundle when the host lacks them), then runs the unit tests, the CPU
# end-to-end suite and tests/gpu. Writes everything to ${OUT:-.}/gpu-tests.log.
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
  -DCMAKE_PREFIX_PATH="$torch_cmake" -DPython3_EXECUTABLE="$(command -v $PY)" || exit 1
cmake --build build-gpu -j"$(nproc)" || exit 1
rc=0
echo "== unit tests"; ctest --test-dir build-gpu --output-on-failure || rc=1
echo "== GPU end-to-end tests"
PTSERVE_BIN=$PWD/build-gpu/ptserve $PY -m pytest -q -p no:cacheprovider tests/gpu || rc=1
echo "== CPU end-to-end suite against the CUDA build"
deselect=()
if ! $PY -c 'import grpc_tools' 2>/dev/null && ! command -v grpc_python_plugin >/dev/null; then
  # The gRPC tests generate Python stubs from proto/; this host has neither
  # grpc_tools nor Debian's grpc_python_plugin (and no network to get them).
  # CI runs them; say so rather than fail on the host's tooling.
  echo "NOTE: tests/e2e/test_grpc.py and test_trace_grpc.py not run here: no grpc_tools or grpc_python_plugin on this host"
  deselect=(--ignore=tests/e2e/test_grpc.py --ignore=tests/e2e/test_trace_grpc.py)
fi
PTSERVE_BIN=$PWD/build-gpu/ptserve PTS_MODELS_PYTHON=$PY $PY -m pytest -q -p no:cacheprovider \
  "${deselect[@]}" tests/e2e || rc=1
echo "== gpu suite exit $rc"
exit $rc
