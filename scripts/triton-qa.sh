#!/usr/bin/env bash
# scripts/triton-qa.sh — tritonserver's own QA tests, unchanged, against
# ptserve and against tritonserver r25.07 with its real PyTorch backend, on
# the same TorchScript twins of the models the tests name.
#
#   MIRROR=/work/.mirror scripts/triton-qa.sh        (SERVERS, default "ptserve
#                                                     tritonserver"; SUITES, the
#                                                     suites to run, default all;
#                                                     ONLY, a test-name filter;
#                                                     OUT; PTSERVE, a built binary)
#
# The tests come from a fetched copy of NVIDIA's server repository (bare git
# dir $MIRROR/triton-inference-server+server/repo, tag QA_TAG, default
# r25.07): qa/L0_http (http_test.py, python_http_aio_test.py),
# qa/L0_shared_memory, qa/L0_grpc (python_unit_test.py and the aio test),
# qa/L0_infer_zero and qa/L0_lifecycle (lifecycle_test.py, each test with the
# repository, repository changes and flags its test.sh gives it; the tests
# that need a GPU, the Python backend or a custom C++ backend are listed as
# not run, with why), with qa/common beside them as in Triton's CI. Nothing of
# them is committed here. scripts/triton_qa/twins.py makes the models (NVIDIA's
# own config generators, TorchScript model files); scripts/triton_qa/run.py
# runs each test with a fresh server, as their test.sh does, and writes
# OUT/results.md (default docs/triton-qa/): per file, how many passed on each
# server, and for every failure the line that says why.
#
# ptserve runs with --allow-client-shm=true (off by default,
# docs/shared-memory.md; tritonserver r25.07 has no such switch and always
# allows it) and its defaults otherwise; tritonserver with its defaults and
# --backend-directory. Not part of CI: it needs the fetched
# sources and, for tritonserver, a 15-minute build (scripts/tritonserver.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=${PYTHON:-$ROOT/.venv/bin/python}
QA_TAG=${QA_TAG:-r25.07}
SERVERS=${SERVERS:-ptserve tritonserver}
OUT=${OUT:-$ROOT/docs/triton-qa}
WORK=${WORK:-$ROOT/build-qa}
TRITON_HOME="${TRITON_HOME:-$ROOT/build-bench/tritonserver-r25.07}"
TRITON_LIBTORCH="${TRITON_LIBTORCH:-venv}"
TRITONSERVER="${TRITONSERVER:-}"
TRITON_BACKENDS="${TRITON_BACKENDS:-}"
: "${MIRROR:?set MIRROR to the directory of fetched bare git dirs (triton-inference-server+server/repo)}"
log() { echo "triton-qa: $*" >&2; }

GIT="git --git-dir=$MIRROR/triton-inference-server+server/repo"
rm -rf "$WORK/src" "$WORK/models" "$WORK/out"
mkdir -p "$WORK/src" "$OUT"
log "extracting qa/ of $QA_TAG"
$GIT archive "$QA_TAG" qa/common qa/python_models qa/L0_http qa/L0_shared_memory qa/L0_grpc \
  qa/L0_infer_zero qa/L0_lifecycle qa/custom_models/custom_zero_1_float32 \
  docs/examples/model_repository | tar -x -C "$WORK/src"

PTSERVE=${PTSERVE:-}
if [ -z "$PTSERVE" ]; then
  log "building ptserve"
  cmake -S "$ROOT" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DPTS_BUILD_TESTS=OFF \
    -DPTS_PYTHON="$PY" >/dev/null
  cmake --build "$WORK/build" --target ptserve -j"${JOBS:-2}" >/dev/null
  PTSERVE=$WORK/build/ptserve
fi

log "making the models' TorchScript twins"
"$PY" "$ROOT/scripts/triton_qa/twins.py" "$WORK/src/qa" "$WORK/src/docs/examples/model_repository" \
  "$WORK/models"

args=()
for s in $SERVERS; do
  case $s in
    ptserve) args+=(--server "ptserve=$PTSERVE --allow-client-shm=true") ;;
    tritonserver)
      source "$ROOT/scripts/tritonserver.sh"
      provide_tritonserver
      export LD_LIBRARY_PATH="$TORCH_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      args+=(--server "tritonserver=$TRITONSERVER --backend-directory=$TRITON_BACKENDS") ;;
    *) echo "triton-qa.sh: unknown server '$s' (ptserve, tritonserver)" >&2; exit 2 ;;
  esac
done

log "running (one server per test; logs in $WORK/out/logs)"
"$PY" "$ROOT/scripts/triton_qa/run.py" --qa "$WORK/src/qa" --models "$WORK/models" \
  --out "$WORK/out" --only "${ONLY:-}" --suites "${SUITES:-}" "${args[@]}"
{
  echo "# tritonserver's QA suites ($QA_TAG) on ptserve and tritonserver"
  echo
  echo "Made by \`MIRROR=... scripts/triton-qa.sh\` at ptserve $(git -C "$ROOT" rev-parse --short HEAD)" \
    "on $(date -u +%F), $(nproc) cores; tritonserver: r25.07 with its PyTorch backend," \
    "${triton_libtorch:-not run}. What the differences mean: [../triton-qa.md](../triton-qa.md)."
  echo
  cat "$WORK/out/results.md"
} >"$OUT/results.md"
cp "$WORK/out/results.csv" "$OUT/results.csv"
log "wrote $OUT/results.md"
